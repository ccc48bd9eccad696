/* Root filesystem assembly (rootfs/mounts.c), without root.
 *
 * Part 1, the pure plan (nsbox_mount_plan_build) for a HOST image and a DIR image: what is bound
 * from where with which attributes, what is never exposed, and the order rules (a mount point
 * exists before it is mounted on; nothing is created under a mount point before the mount,
 * which would hide it; /proc masks after /proc; /dev read-only after its nodes).
 *
 * Part 2, the executor (nsbox_rootfs_prepare / nsbox_rootfs_enter) against a fake `struct
 * nsbox_sys` that records every call. The executor's own open()/fchdir()/chdir() are real, on
 * mkdtemp directories standing in for the staging root and the image root; the fake records the
 * working directory at each call, so "targets are relative to the new root" is checked against
 * the directory the process is really in. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "mounts.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <linux/mount.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#define HOST_ETC "/var/lib/nsbox/images/host/etc"
#define WORKSPACE "/home/u/project"

static const uint64_t RO_SAFE = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;

/* Names nsbox provides itself: an image's own entries of these names are never exposed. */
static const char *const provided[] = {"proc", "dev", "sys", "tmp", "workspace", "run", NULL};

/* ---- fixtures: configurations -------------------------------------------------------------- */

static void add_dir(struct nsbox_rootfs_cfg *cfg, const char *name)
{
    assert_true(cfg->n_entries < NSBOX_ROOT_ENTRIES_MAX);
    struct nsbox_root_entry *en = &cfg->entries[cfg->n_entries++];
    snprintf(en->name, sizeof en->name, "%s", name);
    en->is_symlink = false;
    en->link[0] = '\0';
}

static void add_link(struct nsbox_rootfs_cfg *cfg, const char *name, const char *link)
{
    assert_true(cfg->n_entries < NSBOX_ROOT_ENTRIES_MAX);
    struct nsbox_root_entry *en = &cfg->entries[cfg->n_entries++];
    snprintf(en->name, sizeof en->name, "%s", name);
    en->is_symlink = true;
    snprintf(en->link, sizeof en->link, "%s", link);
}

struct world {
    struct nsbox_image img;
    struct nsbox_rootfs_cfg cfg;
    struct nsbox_mount_plan plan;
};

static struct world *new_world(enum nsbox_image_kind kind)
{
    struct world *w = calloc(1, sizeof *w);
    assert_non_null(w);
    w->img.kind = kind;
    w->img.lock_fd = -1;
    if (kind == NSBOX_IMAGE_HOST) {
        snprintf(w->img.name, sizeof w->img.name, "host");
        snprintf(w->img.root, sizeof w->img.root, "/");
        snprintf(w->img.etc, sizeof w->img.etc, HOST_ETC);
    } else {
        snprintf(w->img.name, sizeof w->img.name, "debian");
        snprintf(w->img.root, sizeof w->img.root, "/var/lib/nsbox/images/debian/rootfs");
    }
    w->cfg.img = &w->img;
    w->cfg.workspace = WORKSPACE;
    return w;
}

/* What nsbox_rootfs_scan_image finds on a merged-/usr host. */
static struct world *host_world(void)
{
    struct world *w = new_world(NSBOX_IMAGE_HOST);
    add_dir(&w->cfg, "usr");
    add_link(&w->cfg, "bin", "usr/bin");
    add_link(&w->cfg, "lib", "usr/lib");
    add_link(&w->cfg, "lib64", "usr/lib64");
    add_link(&w->cfg, "sbin", "usr/sbin");
    return w;
}

/* A whole root filesystem, including entries nsbox must replace with its own. */
static struct world *dir_world(void)
{
    struct world *w = new_world(NSBOX_IMAGE_DIR);
    add_link(&w->cfg, "bin", "usr/bin");
    add_dir(&w->cfg, "etc");
    add_dir(&w->cfg, "home");
    add_link(&w->cfg, "lib", "/usr/lib"); /* absolute: resolved inside the root later */
    add_dir(&w->cfg, "proc");
    add_dir(&w->cfg, "dev");
    add_link(&w->cfg, "sys", "/proc/sys"); /* a provided name as a symlink: still not exposed */
    add_dir(&w->cfg, "tmp");
    add_dir(&w->cfg, "workspace");
    add_link(&w->cfg, "run", "/var/run");
    add_dir(&w->cfg, "lost+found");
    add_dir(&w->cfg, "usr");
    add_dir(&w->cfg, "var");
    add_link(&w->cfg, "sbin", "usr/sbin");
    return w;
}

static void build_ok(struct world *w)
{
    struct nsbox_err e = {0};
    int r = nsbox_mount_plan_build(&w->cfg, &w->plan, &e);
    if (r != 0) fail_msg("plan build failed: %s", e.msg);
    assert_true(w->plan.n > 0 && w->plan.n <= NSBOX_MOUNT_OPS_MAX);
}

/* ---- plan queries -------------------------------------------------------------------------- */

static bool is_mount(enum nsbox_mop op)
{
    return op == NSBOX_MOP_TMPFS || op == NSBOX_MOP_BIND || op == NSBOX_MOP_BIND_DEV ||
           op == NSBOX_MOP_PROC || op == NSBOX_MOP_DEVPTS || op == NSBOX_MOP_MASK_FILE ||
           op == NSBOX_MOP_MASK_DIR || op == NSBOX_MOP_READONLY;
}

static bool is_create(enum nsbox_mop op)
{
    return op == NSBOX_MOP_MKDIR || op == NSBOX_MOP_FILE || op == NSBOX_MOP_SYMLINK ||
           op == NSBOX_MOP_WRITE;
}

static int idx(const struct nsbox_mount_plan *p, enum nsbox_mop op, const char *target)
{
    for (size_t i = 0; i < p->n; i++)
        if (p->ops[i].op == op && !strcmp(p->ops[i].target, target)) return (int)i;
    return -1;
}

static int count(const struct nsbox_mount_plan *p, enum nsbox_mop op, const char *target)
{
    int n = 0;
    for (size_t i = 0; i < p->n; i++)
        if (p->ops[i].op == op && (!target || !strcmp(p->ops[i].target, target))) n++;
    return n;
}

static int count_target(const struct nsbox_mount_plan *p, const char *target)
{
    int n = 0;
    for (size_t i = 0; i < p->n; i++)
        if (!strcmp(p->ops[i].target, target)) n++;
    return n;
}

static bool list_has(const char *const *l, const char *s)
{
    for (; *l; l++)
        if (!strcmp(*l, s)) return true;
    return false;
}

static size_t list_len(const char *const *l)
{
    size_t n = 0;
    while (l[n])
        n++;
    return n;
}

/* Is a a proper path prefix of b ("dev" of "dev/pts", not "de" or "dev")? */
static bool is_parent(const char *a, const char *b)
{
    size_t n = strlen(a);
    return strncmp(a, b, n) == 0 && b[n] == '/';
}

/* ---- invariants every plan must satisfy ---------------------------------------------------- */

static void check_targets_relative(const struct nsbox_mount_plan *p)
{
    for (size_t i = 0; i < p->n; i++) {
        const char *t = p->ops[i].target;
        assert_true(t[0] != '\0');
        assert_true(t[0] != '/');
        assert_null(strstr(t, "//"));
        assert_true(t[strlen(t) - 1] != '/');
        /* no ".." or "." component */
        char buf[sizeof p->ops[i].target];
        snprintf(buf, sizeof buf, "%s", t);
        for (char *save, *c = strtok_r(buf, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
            assert_string_not_equal(c, "..");
            assert_string_not_equal(c, ".");
        }
    }
}

/* Mount points exist (created by nsbox, on its own tmpfs) before anything is mounted on them;
 * the parent of every target exists before the target is made; a mount on a directory comes
 * before anything made under it (else the mount would hide it); nothing is made twice.
 * Returns NULL or what is wrong (in buf). */
static const char *order_violation(const struct nsbox_mount_plan *p, char *buf, size_t n)
{
    int proc = idx(p, NSBOX_MOP_PROC, "proc");
    for (size_t i = 0; i < p->n; i++) {
        const struct nsbox_mount_op *o = &p->ops[i];
        bool in_proc = is_parent("proc", o->target);
        if (in_proc) {
            /* /proc's own entries exist once procfs is mounted */
            if (proc < 0 || proc > (int)i) {
                snprintf(buf, n, "op %zu on '%s' before /proc is mounted", i, o->target);
                return buf;
            }
        } else if (is_mount(o->op)) {
            int made = -1;
            for (size_t j = 0; j < p->n && made < 0; j++)
                if ((p->ops[j].op == NSBOX_MOP_MKDIR || p->ops[j].op == NSBOX_MOP_FILE) &&
                    !strcmp(p->ops[j].target, o->target))
                    made = (int)j;
            if (made < 0 || made > (int)i) {
                snprintf(buf, n, "op %zu mounts on '%s' before it is created (at %d)", i, o->target,
                         made);
                return buf;
            }
        }
        const char *slash = strrchr(o->target, '/');
        if (slash && !in_proc) {
            char parent[sizeof o->target];
            snprintf(parent, sizeof parent, "%.*s", (int)(slash - o->target), o->target);
            int pm = idx(p, NSBOX_MOP_MKDIR, parent);
            if (pm < 0 || pm > (int)i) {
                snprintf(buf, n, "'%s' (op %zu) made before its parent '%s' (op %d)", o->target, i,
                         parent, pm);
                return buf;
            }
        }
        for (size_t j = i + 1; j < p->n; j++) {
            const struct nsbox_mount_op *q = &p->ops[j];
            if (is_parent(q->target, o->target) &&
                (q->op == NSBOX_MOP_TMPFS || q->op == NSBOX_MOP_PROC || q->op == NSBOX_MOP_BIND)) {
                snprintf(buf, n,
                         "'%s' (op %zu) would be hidden by the later mount on '%s' (op %zu)",
                         o->target, i, q->target, j);
                return buf;
            }
        }
        if (is_create(o->op))
            for (size_t j = 0; j < i; j++)
                if (!strcmp(p->ops[j].target, o->target) &&
                    (is_create(p->ops[j].op) || is_mount(p->ops[j].op))) {
                    snprintf(buf, n, "'%s' created at op %zu after op %zu already used it",
                             o->target, i, j);
                    return buf;
                }
    }
    return NULL;
}

static void check_order(const struct nsbox_mount_plan *p)
{
    char buf[512];
    const char *v = order_violation(p, buf, sizeof buf);
    if (v) fail_msg("%s", v);
}

/* Binds: image content and host files are always read-only, nosuid, nodev, except the
 * workspace (read-write, still nosuid, nodev). Device nodes have their own op. */
static void check_binds(const struct world *w)
{
    const struct nsbox_mount_plan *p = &w->plan;
    for (size_t i = 0; i < p->n; i++) {
        const struct nsbox_mount_op *o = &p->ops[i];
        if (o->op == NSBOX_MOP_BIND_DEV) {
            assert_false(o->src_in_image);
            assert_true(strncmp(o->src, "/dev/", 5) == 0);
        }
        if (o->op != NSBOX_MOP_BIND) {
            /* only binds read from the image */
            assert_false(o->src_in_image);
            continue;
        }
        assert_true((o->attr & (MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV)) ==
                    (MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV));
        if (!strcmp(o->target, "workspace")) continue;
        assert_true((o->attr & RO_SAFE) == RO_SAFE);
        if (o->src_in_image) {
            /* an entry name, never a path that could climb out of the image root */
            assert_true(o->src[0] && !strchr(o->src, '/') && strcmp(o->src, "..") &&
                        strcmp(o->src, "."));
            /* the image entry lands on the same name */
            assert_string_equal(o->src, o->target);
        } else {
            assert_true(o->src[0] == '/');
        }
    }
}

static void check_all(const struct world *w)
{
    check_targets_relative(&w->plan);
    check_order(&w->plan);
    check_binds(w);
}

/* ---- (1) image content read-only ----------------------------------------------------------- */

static void expect_image_bind(const struct world *w, const char *name)
{
    int b = idx(&w->plan, NSBOX_MOP_BIND, name);
    if (b < 0) fail_msg("no bind for image entry %s", name);
    const struct nsbox_mount_op *o = &w->plan.ops[b];
    assert_string_equal(o->src, name);
    assert_true(o->src_in_image);
    assert_true(o->recursive); /* submounts of the image (host /usr/...) come along read-only */
    assert_true((o->attr & RO_SAFE) == RO_SAFE);
    assert_int_equal(count(&w->plan, NSBOX_MOP_BIND, name), 1);
    int m = idx(&w->plan, NSBOX_MOP_MKDIR, name);
    assert_true(m >= 0 && m < b);
}

static void test_host_plan_usr_readonly(void **state)
{
    (void)state;
    struct world *w = host_world();
    build_ok(w);
    check_all(w);
    expect_image_bind(w, "usr");
    free(w);
}

/* The sandbox's own /etc/hosts and resolv.conf go over the image's, resolved inside it (never
 * through a symlink); the hosts file may be skipped where that is not safe unless it pins
 * names (network allow), since it then only adds the sandbox's own name. */
static void test_plan_etc_files(void **state)
{
    (void)state;
    for (int allow = 0; allow < 2; allow++) {
        struct world *w = host_world();
        w->cfg.hosts = "/run/nsbox/0123456789ab/hosts";
        w->cfg.resolv_conf = allow ? "/run/nsbox/0123456789ab/resolv.conf" : NULL;
        w->cfg.hosts_optional = !allow;
        build_ok(w);
        int h = idx(&w->plan, NSBOX_MOP_BIND, "etc/hosts");
        assert_true(h >= 0);
        assert_string_equal(w->plan.ops[h].src, w->cfg.hosts);
        assert_true(w->plan.ops[h].target_in_image);
        assert_int_equal(w->plan.ops[h].optional, !allow);
        assert_true(w->plan.ops[h].attr & MOUNT_ATTR_RDONLY);
        int r = idx(&w->plan, NSBOX_MOP_BIND, "etc/resolv.conf");
        if (allow) {
            assert_true(r >= 0);
            assert_true(w->plan.ops[r].target_in_image);
            assert_false(w->plan.ops[r].optional); /* never optional */
        } else {
            assert_int_equal(r, -1);
        }
        free(w);
    }
}

/* An image of long symlinks at its top: the sources share one pool in the plan, and one that
 * would overflow it is an error of its own, never a cut-off path. Each source stays whole. */
static void test_plan_sources_pool_bounded(void **state)
{
    (void)state;
    struct world *w = new_world(NSBOX_IMAGE_DIR);
    add_dir(&w->cfg, "usr");
    char link[PATH_MAX], name[16];
    memset(link, 'a', PATH_MAX - 1);
    link[0] = '/';
    link[PATH_MAX - 1] = '\0';
    size_t fits = (NSBOX_MOUNT_STRS_MAX - 1024) / PATH_MAX;
    for (size_t i = 0; i < fits; i++) {
        snprintf(name, sizeof name, "l%zu", i);
        add_link(&w->cfg, name, link);
    }
    build_ok(w);
    int seen = 0;
    for (size_t i = 0; i < w->plan.n; i++)
        if (w->plan.ops[i].op == NSBOX_MOP_SYMLINK && w->plan.ops[i].src[0] == '/' &&
            strlen(w->plan.ops[i].src) == PATH_MAX - 1) {
            assert_string_equal(w->plan.ops[i].src, link);
            seen++;
        }
    assert_int_equal(seen, (int)fits);
    for (size_t i = fits; i < fits + 2; i++) {
        snprintf(name, sizeof name, "l%zu", i);
        add_link(&w->cfg, name, link);
    }
    struct nsbox_err e = {0};
    assert_int_equal(nsbox_mount_plan_build(&w->cfg, &w->plan, &e), -1);
    assert_int_equal(e.sys_errno, E2BIG);
    assert_non_null(strstr(e.msg, "too many mount sources"));
    free(w);
}

/* A regular file at the image's top level (a .dockerenv, an entrypoint script) is bound, read-only
 * and alone, on an empty file nsbox makes on its own tmpfs. */
static void test_top_level_file_bound(void **state)
{
    (void)state;
    struct world *w = dir_world();
    assert_true(w->cfg.n_entries < NSBOX_ROOT_ENTRIES_MAX);
    struct nsbox_root_entry *en = &w->cfg.entries[w->cfg.n_entries++];
    snprintf(en->name, sizeof en->name, "%s", "entrypoint.sh");
    en->is_symlink = false;
    en->is_file = true;
    build_ok(w);
    check_all(w);
    int b = idx(&w->plan, NSBOX_MOP_BIND, "entrypoint.sh");
    assert_true(b >= 0);
    const struct nsbox_mount_op *o = &w->plan.ops[b];
    assert_string_equal(o->src, "entrypoint.sh");
    assert_true(o->src_in_image);
    assert_false(o->recursive);
    assert_true((o->attr & RO_SAFE) == RO_SAFE);
    int f = idx(&w->plan, NSBOX_MOP_FILE, "entrypoint.sh");
    assert_true(f >= 0 && f < b);
    assert_int_equal(idx(&w->plan, NSBOX_MOP_MKDIR, "entrypoint.sh"), -1);
    free(w);
}

static void test_dir_plan_entries_readonly(void **state)
{
    (void)state;
    struct world *w = dir_world();
    build_ok(w);
    check_all(w);
    expect_image_bind(w, "usr");
    expect_image_bind(w, "etc"); /* a DIR image brings its own /etc */
    expect_image_bind(w, "home");
    expect_image_bind(w, "var");
    free(w);
}

/* HOST: /etc is the prebuilt one from the store, never the host's own, even when offered. */
static void test_host_plan_etc_from_store(void **state)
{
    (void)state;
    struct world *w = host_world();
    add_dir(&w->cfg, "etc");
    add_dir(&w->cfg, "root");
    build_ok(w);
    check_all(w);
    assert_int_equal(count(&w->plan, NSBOX_MOP_BIND, "etc"), 1);
    int b = idx(&w->plan, NSBOX_MOP_BIND, "etc");
    assert_true(b >= 0);
    assert_string_equal(w->plan.ops[b].src, HOST_ETC);
    assert_false(w->plan.ops[b].src_in_image);
    assert_true((w->plan.ops[b].attr & RO_SAFE) == RO_SAFE);
    assert_int_equal(count(&w->plan, NSBOX_MOP_MKDIR, "etc"), 1);
    for (size_t i = 0; i < w->plan.n; i++)
        assert_false(w->plan.ops[i].src_in_image && !strcmp(w->plan.ops[i].src, "etc"));
    free(w);
}

/* ---- (2) symlinks are recreated, never bound ----------------------------------------------- */

static void expect_symlinks(const struct world *w)
{
    for (size_t k = 0; k < w->cfg.n_entries; k++) {
        const struct nsbox_root_entry *en = &w->cfg.entries[k];
        if (!en->is_symlink || list_has(provided, en->name)) continue;
        int s = idx(&w->plan, NSBOX_MOP_SYMLINK, en->name);
        if (s < 0) fail_msg("symlink entry %s not recreated", en->name);
        assert_string_equal(w->plan.ops[s].src, en->link);
        assert_false(w->plan.ops[s].src_in_image);
        /* the only op on that name: no bind through it, no mkdir over it */
        assert_int_equal(count_target(&w->plan, en->name), 1);
        for (size_t i = 0; i < w->plan.n; i++) {
            const struct nsbox_mount_op *o = &w->plan.ops[i];
            if (o->op == NSBOX_MOP_BIND || o->op == NSBOX_MOP_BIND_DEV)
                assert_string_not_equal(o->src, en->name);
        }
    }
}

static void test_symlinks_recreated(void **state)
{
    (void)state;
    struct world *w = host_world();
    build_ok(w);
    expect_symlinks(w);
    assert_int_equal(count(&w->plan, NSBOX_MOP_SYMLINK, "bin"), 1);
    assert_int_equal(count(&w->plan, NSBOX_MOP_SYMLINK, "lib64"), 1);
    free(w);
    w = dir_world();
    build_ok(w);
    expect_symlinks(w);
    int s = idx(&w->plan, NSBOX_MOP_SYMLINK, "lib");
    assert_true(s >= 0);
    assert_string_equal(w->plan.ops[s].src, "/usr/lib");
    free(w);
}

/* ---- (3) the image's own proc/dev/sys/tmp/workspace/run are never exposed ------------------- */

static void test_provided_entries_not_exposed(void **state)
{
    (void)state;
    struct world *w = dir_world();
    build_ok(w);
    for (size_t i = 0; i < w->plan.n; i++) {
        const struct nsbox_mount_op *o = &w->plan.ops[i];
        if (o->src_in_image)
            assert_false(list_has(provided, o->src) || !strcmp(o->src, "lost+found"));
        /* no image symlink of those names either (sys, run are symlinks in the fixture) */
        if (o->op == NSBOX_MOP_SYMLINK) assert_false(list_has(provided, o->target));
        /* /sys is not provided at all, and lost+found never */
        assert_string_not_equal(o->target, "sys");
        assert_false(is_parent("sys", o->target));
        assert_string_not_equal(o->target, "lost+found");
    }
    /* ... while nsbox's own versions are there */
    assert_true(idx(&w->plan, NSBOX_MOP_PROC, "proc") >= 0);
    assert_true(idx(&w->plan, NSBOX_MOP_TMPFS, "dev") >= 0);
    assert_true(idx(&w->plan, NSBOX_MOP_TMPFS, "tmp") >= 0);
    assert_true(idx(&w->plan, NSBOX_MOP_TMPFS, "run") >= 0);
    assert_int_equal(count(&w->plan, NSBOX_MOP_MKDIR, "tmp"), 1);
    assert_int_equal(count(&w->plan, NSBOX_MOP_MKDIR, "workspace"), 1);
    free(w);
}

/* The fresh tmpfs mounts: nosuid+nodev everywhere except /dev (which needs device nodes and is
 * noexec instead). */
static void test_tmpfs_flags(void **state)
{
    (void)state;
    struct world *w = dir_world();
    build_ok(w);
    for (size_t i = 0; i < w->plan.n; i++) {
        const struct nsbox_mount_op *o = &w->plan.ops[i];
        if (o->op != NSBOX_MOP_TMPFS && o->op != NSBOX_MOP_PROC && o->op != NSBOX_MOP_DEVPTS)
            continue;
        assert_true(o->flags & MS_NOSUID);
        if (strcmp(o->target, "dev") && strcmp(o->target, "dev/pts"))
            assert_true(o->flags & MS_NODEV);
        else
            assert_true(o->flags & MS_NOEXEC);
    }
    int d = idx(&w->plan, NSBOX_MOP_TMPFS, "dev");
    assert_false(w->plan.ops[d].flags & MS_NODEV); /* the nodes must work */
    int p = idx(&w->plan, NSBOX_MOP_PROC, "proc");
    assert_true(w->plan.ops[p].flags & MS_NOEXEC);
    free(w);
}

/* ---- (4) /workspace ------------------------------------------------------------------------ */

static void test_workspace_bind(void **state)
{
    (void)state;
    for (int k = 0; k < 2; k++) {
        struct world *w = k ? dir_world() : host_world();
        build_ok(w);
        assert_int_equal(count(&w->plan, NSBOX_MOP_BIND, "workspace"), 1);
        int b = idx(&w->plan, NSBOX_MOP_BIND, "workspace");
        const struct nsbox_mount_op *o = &w->plan.ops[b];
        assert_string_equal(o->src, WORKSPACE);
        assert_false(o->src_in_image);
        assert_true(o->attr & MOUNT_ATTR_NOSUID);
        assert_true(o->attr & MOUNT_ATTR_NODEV);
        assert_false(o->attr & MOUNT_ATTR_RDONLY);
        int m = idx(&w->plan, NSBOX_MOP_MKDIR, "workspace");
        assert_true(m >= 0 && m < b);
        /* the only writable bind */
        for (size_t i = 0; i < w->plan.n; i++)
            if (w->plan.ops[i].op == NSBOX_MOP_BIND && (int)i != b)
                assert_true(w->plan.ops[i].attr & MOUNT_ATTR_RDONLY);
        free(w);
    }
}

/* EXT4: the launcher's detached mount is moved in; nothing is looked up on the host. */
static void test_workspace_ext4_is_the_launchers_mount(void **state)
{
    (void)state;
    struct world *w = host_world();
    w->cfg.ws_kind = NSBOX_WS_EXT4;
    w->cfg.workspace = NULL; /* no host path at all */
    /* the plan may live in reused or malloc'd memory: every op's fields must be set */
    memset(&w->plan, 0x01, sizeof w->plan); /* 1: a valid "true" for every bool */
    build_ok(w);
    assert_int_equal(count(&w->plan, NSBOX_MOP_BIND, "workspace"), 1);
    const struct nsbox_mount_op *o = &w->plan.ops[idx(&w->plan, NSBOX_MOP_BIND, "workspace")];
    assert_true(o->src_is_fd);
    assert_false(o->src_in_image);
    assert_true(o->attr & MOUNT_ATTR_NOSUID);
    assert_true(o->attr & MOUNT_ATTR_NODEV);
    assert_false(o->attr & MOUNT_ATTR_RDONLY);
    for (size_t i = 0; i < w->plan.n; i++)
        if (&w->plan.ops[i] != o)
            assert_false(w->plan.ops[i].src_is_fd);
    free(w);
}

/* TMPFS: a bounded tmpfs made inside, sized by the disk limit, one inode per 16 KiB. */
static void test_workspace_tmpfs_sized_by_disk_limit(void **state)
{
    (void)state;
    struct world *w = host_world();
    w->cfg.ws_kind = NSBOX_WS_TMPFS;
    w->cfg.workspace = NULL;
    w->cfg.ws_bytes = 2ull << 30;
    build_ok(w);
    assert_int_equal(count(&w->plan, NSBOX_MOP_BIND, "workspace"), 0);
    int t = idx(&w->plan, NSBOX_MOP_TMPFS, "workspace");
    assert_true(t >= 0);
    const struct nsbox_mount_op *o = &w->plan.ops[t];
    assert_string_equal(o->data, "mode=0755,size=2147483648,nr_inodes=131072");
    assert_true(o->flags & MS_NOSUID);
    assert_true(o->flags & MS_NODEV);
    int m = idx(&w->plan, NSBOX_MOP_MKDIR, "workspace");
    assert_true(m >= 0 && m < t);
    /* a zero limit is refused, not turned into an unlimited tmpfs (size=0 means no limit) */
    w->cfg.ws_bytes = 0;
    struct nsbox_err e = {0};
    assert_int_equal(nsbox_mount_plan_build(&w->cfg, &w->plan, &e), -1);
    w->cfg.ws_kind = (enum nsbox_ws_kind)7;
    w->cfg.ws_bytes = 1 << 20;
    assert_int_equal(nsbox_mount_plan_build(&w->cfg, &w->plan, &e), -1);
    free(w);
}

/* ---- (5) /proc ----------------------------------------------------------------------------- */

static void test_proc_masked_after_mount(void **state)
{
    (void)state;
    struct world *w = dir_world();
    build_ok(w);
    int proc = idx(&w->plan, NSBOX_MOP_PROC, "proc");
    assert_true(proc >= 0);
    assert_int_equal(count(&w->plan, NSBOX_MOP_PROC, NULL), 1);
    assert_true(list_len(nsbox_proc_masked_files) >= 1);
    assert_true(list_has(nsbox_proc_masked_files, "kcore"));
    assert_true(list_has(nsbox_proc_readonly, "sysrq-trigger"));
    assert_true(list_has(nsbox_proc_readonly, "sys"));
    char t[64];
    /* MASK_FILE binds the sandbox's dev/null (see mounts.c): it must be mounted by then. */
    int devnull = idx(&w->plan, NSBOX_MOP_BIND_DEV, "dev/null");
    assert_true(devnull >= 0);
    for (const char *const *n = nsbox_proc_masked_files; *n; n++) {
        snprintf(t, sizeof t, "proc/%s", *n);
        int m = idx(&w->plan, NSBOX_MOP_MASK_FILE, t);
        if (m < 0) fail_msg("no mask for /%s", t);
        assert_true(m > proc);
        assert_true(m > devnull);
    }
    for (const char *const *n = nsbox_proc_masked_dirs; *n; n++) {
        snprintf(t, sizeof t, "proc/%s", *n);
        int m = idx(&w->plan, NSBOX_MOP_MASK_DIR, t);
        if (m < 0) fail_msg("no mask for /%s", t);
        assert_true(m > proc);
    }
    for (const char *const *n = nsbox_proc_readonly; *n; n++) {
        snprintf(t, sizeof t, "proc/%s", *n);
        int m = idx(&w->plan, NSBOX_MOP_READONLY, t);
        if (m < 0) fail_msg("no read-only bind for /%s", t);
        assert_true(m > proc);
        assert_true(w->plan.ops[m].attr & MOUNT_ATTR_RDONLY);
        assert_true(w->plan.ops[m].recursive);
    }
    assert_int_equal(count(&w->plan, NSBOX_MOP_MASK_FILE, NULL),
                     (int)list_len(nsbox_proc_masked_files));
    assert_int_equal(count(&w->plan, NSBOX_MOP_MASK_DIR, NULL),
                     (int)list_len(nsbox_proc_masked_dirs));
    assert_int_equal(count(&w->plan, NSBOX_MOP_READONLY, NULL), (int)list_len(nsbox_proc_readonly));
    free(w);
}

/* ---- (6) /dev ------------------------------------------------------------------------------ */

static void test_dev(void **state)
{
    (void)state;
    struct world *w = host_world();
    build_ok(w);
    const struct nsbox_mount_plan *p = &w->plan;
    int tmpfs = idx(p, NSBOX_MOP_TMPFS, "dev");
    assert_true(tmpfs >= 0);

    /* exactly the listed nodes, each bound from the host node of the same name onto a file */
    assert_int_equal(count(p, NSBOX_MOP_BIND_DEV, NULL), (int)list_len(nsbox_dev_nodes));
    assert_true(list_has(nsbox_dev_nodes, "null"));
    assert_true(list_has(nsbox_dev_nodes, "urandom"));
    char t[64], s[64];
    int last_node = -1;
    for (const char *const *n = nsbox_dev_nodes; *n; n++) {
        snprintf(t, sizeof t, "dev/%s", *n);
        snprintf(s, sizeof s, "/dev/%s", *n);
        int b = idx(p, NSBOX_MOP_BIND_DEV, t);
        assert_true(b > tmpfs);
        assert_string_equal(p->ops[b].src, s);
        int f = idx(p, NSBOX_MOP_FILE, t);
        assert_true(f > tmpfs && f < b);
        if (b > last_node) last_node = b;
    }
    /* no other host device, and nothing bound into /dev otherwise */
    for (size_t i = 0; i < p->n; i++) {
        const struct nsbox_mount_op *o = &p->ops[i];
        if (o->op == NSBOX_MOP_BIND_DEV) {
            assert_true(is_parent("dev", o->target));
            assert_true(list_has(nsbox_dev_nodes, o->target + 4));
        }
        if (o->op == NSBOX_MOP_BIND)
            assert_false(is_parent("dev", o->target) || !strcmp(o->target, "dev"));
    }

    /* a new devpts instance: never the host's terminals */
    int pts = idx(p, NSBOX_MOP_DEVPTS, "dev/pts");
    assert_true(pts > tmpfs);
    assert_int_equal(count(p, NSBOX_MOP_DEVPTS, NULL), 1);
    assert_non_null(strstr(p->ops[pts].data, "newinstance"));
    int ptmx = idx(p, NSBOX_MOP_SYMLINK, "dev/ptmx");
    assert_true(ptmx >= 0);
    assert_string_equal(p->ops[ptmx].src, "pts/ptmx");

    int shm = idx(p, NSBOX_MOP_TMPFS, "dev/shm");
    assert_true(shm > tmpfs);
    assert_true(p->ops[shm].flags & MS_NODEV);
    assert_true(p->ops[shm].flags & MS_NOSUID);

    /* read-only after everything made in it, not recursively (pts, shm stay writable) */
    int ro = idx(p, NSBOX_MOP_SETATTR, "dev");
    assert_true(ro >= 0);
    assert_true(p->ops[ro].attr & MOUNT_ATTR_RDONLY);
    assert_false(p->ops[ro].recursive);
    assert_true(ro > last_node);
    for (size_t i = 0; i < p->n; i++)
        if (is_parent("dev", p->ops[i].target) &&
            (is_create(p->ops[i].op) || p->ops[i].op == NSBOX_MOP_BIND_DEV))
            assert_true((int)i < ro);
    free(w);
}

/* ---- (7) order ----------------------------------------------------------------------------- */

static void test_order_invariants(void **state)
{
    (void)state;
    for (int k = 0; k < 2; k++) {
        struct world *w = k ? dir_world() : host_world();
        build_ok(w);
        check_all(w);
        free(w);
    }
}

/* The order checker itself must reject a plan that mounts before the mkdir, or that creates
 * under /dev before /dev's tmpfs (it would be hidden): swap ops in a good plan and see it fail.
 */
static void swap_ops(struct nsbox_mount_plan *p, int a, int b)
{
    struct nsbox_mount_op *t = malloc(sizeof *t);
    assert_non_null(t);
    *t = p->ops[a];
    p->ops[a] = p->ops[b];
    p->ops[b] = *t;
    free(t);
}

static bool checker_rejects(const struct nsbox_mount_plan *p)
{
    char buf[512];
    return order_violation(p, buf, sizeof buf) != NULL;
}

/* /tmp and /dev/shm are sized (half and a quarter of the memory limit, from the launcher):
 * unsized, the sandbox filling one was OOM-killed instead of getting ENOSPC; together they
 * leave a quarter to processes. */
static void test_tmp_and_shm_are_sized(void **state)
{
    (void)state;
    struct world *w = dir_world();
    build_ok(w);
    int t = idx(&w->plan, NSBOX_MOP_TMPFS, "tmp"), m = idx(&w->plan, NSBOX_MOP_TMPFS, "dev/shm");
    assert_string_equal(w->plan.ops[t].data, "mode=1777"); /* no size given: the kernel's */
    w->cfg.tmp_bytes = 512ull << 20;
    build_ok(w);
    assert_string_equal(w->plan.ops[t].data, "mode=1777,size=536870912");
    assert_string_equal(w->plan.ops[m].data, "mode=1777,size=268435456");
    free(w);
}

static void test_order_checker_is_sharp(void **state)
{
    (void)state;
    struct world *w = dir_world();
    build_ok(w);
    assert_false(checker_rejects(&w->plan));
    int m = idx(&w->plan, NSBOX_MOP_MKDIR, "tmp"), t = idx(&w->plan, NSBOX_MOP_TMPFS, "tmp");
    swap_ops(&w->plan, m, t);
    assert_true(checker_rejects(&w->plan));
    swap_ops(&w->plan, m, t);
    int d = idx(&w->plan, NSBOX_MOP_TMPFS, "dev"), f = idx(&w->plan, NSBOX_MOP_FILE, "dev/null");
    swap_ops(&w->plan, d, f);
    assert_true(checker_rejects(&w->plan));
    swap_ops(&w->plan, d, f);
    int pr = idx(&w->plan, NSBOX_MOP_PROC, "proc"),
        mk = idx(&w->plan, NSBOX_MOP_MASK_FILE, "proc/kcore");
    swap_ops(&w->plan, pr, mk);
    assert_true(checker_rejects(&w->plan));
    swap_ops(&w->plan, pr, mk);
    assert_false(checker_rejects(&w->plan));
    free(w);
}

/* ---- (8) bad input ------------------------------------------------------------------------- */

static void test_bad_entry_names(void **state)
{
    (void)state;
    const char *bad[] = {"..", ".", "a/b", "", "/usr", "usr/", "../etc"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        for (int sym = 0; sym < 2; sym++) {
            struct world *w = host_world();
            if (sym)
                add_link(&w->cfg, bad[i], "usr/bin");
            else
                add_dir(&w->cfg, bad[i]);
            struct nsbox_err e = {0};
            assert_int_equal(nsbox_mount_plan_build(&w->cfg, &w->plan, &e), -1);
            assert_int_equal(e.code, NSBOX_E_INVALID);
            assert_non_null(strstr(e.msg, "entry"));
            free(w);
        }
}

static void test_missing_image_or_workspace(void **state)
{
    (void)state;
    struct nsbox_err e = {0};
    struct world *w = host_world();
    w->cfg.workspace = NULL;
    assert_int_equal(nsbox_mount_plan_build(&w->cfg, &w->plan, &e), -1);
    assert_int_equal(e.code, NSBOX_E_INVALID);
    w->cfg.workspace = "relative/dir"; /* would resolve against whatever the cwd is */
    assert_int_equal(nsbox_mount_plan_build(&w->cfg, &w->plan, &e), -1);
    w->cfg.workspace = "";
    assert_int_equal(nsbox_mount_plan_build(&w->cfg, &w->plan, &e), -1);
    w->cfg.workspace = WORKSPACE;
    w->cfg.img = NULL;
    assert_int_equal(nsbox_mount_plan_build(&w->cfg, &w->plan, &e), -1);
    free(w);
}

/* ---- (9) capacity -------------------------------------------------------------------------- */

struct guarded {
    struct nsbox_mount_plan plan;
    unsigned char canary[8192];
};

/* Fill the plan to exactly NSBOX_MOUNT_OPS_MAX (fits), then one op more (error, no overrun). */
static void test_too_many_ops(void **state)
{
    (void)state;
    struct world *base = new_world(NSBOX_IMAGE_DIR);
    build_ok(base);
    size_t own = base->plan.n; /* nsbox's own ops with an empty image */
    free(base);
    assert_true(own < NSBOX_MOUNT_OPS_MAX);
    size_t need = NSBOX_MOUNT_OPS_MAX - own; /* dirs cost 2 ops, symlinks 1 */
    assert_true(need <= 2 * NSBOX_ROOT_ENTRIES_MAX);
    size_t dirs = need > NSBOX_ROOT_ENTRIES_MAX ? need - NSBOX_ROOT_ENTRIES_MAX : 0;
    size_t links = need - 2 * dirs;
    assert_true(dirs + links <= NSBOX_ROOT_ENTRIES_MAX);

    struct guarded *g = malloc(sizeof *g);
    assert_non_null(g);
    for (int extra = 0; extra < 2; extra++) {
        struct world *w = new_world(NSBOX_IMAGE_DIR);
        char name[32];
        for (size_t i = 0; i < dirs; i++) {
            snprintf(name, sizeof name, "d%zu", i);
            add_dir(&w->cfg, name);
        }
        for (size_t i = 0; i < links; i++) {
            snprintf(name, sizeof name, "l%zu", i);
            /* one more op: the first symlink becomes a directory (mkdir + bind) */
            if (extra && i == 0)
                add_dir(&w->cfg, name);
            else
                add_link(&w->cfg, name, "d0");
        }
        memset(g->canary, 0xA5, sizeof g->canary);
        struct nsbox_err e = {0};
        int r = nsbox_mount_plan_build(&w->cfg, &g->plan, &e);
        for (size_t i = 0; i < sizeof g->canary; i++)
            assert_int_equal(g->canary[i], 0xA5);
        assert_true(g->plan.n <= NSBOX_MOUNT_OPS_MAX);
        if (!extra) {
            if (r != 0)
                fail_msg("a plan of exactly %d ops was refused: %s", NSBOX_MOUNT_OPS_MAX, e.msg);
            assert_int_equal(g->plan.n, NSBOX_MOUNT_OPS_MAX);
        } else {
            assert_int_equal(r, -1);
            assert_int_equal(e.code, NSBOX_E_INVALID);
            assert_int_equal(e.sys_errno, E2BIG);
        }
        free(w);
    }
    /* all NSBOX_ROOT_ENTRIES_MAX as directories: far over, still an error */
    struct world *w = new_world(NSBOX_IMAGE_DIR);
    char name[32];
    for (size_t i = 0; i < NSBOX_ROOT_ENTRIES_MAX; i++) {
        snprintf(name, sizeof name, "d%zu", i);
        add_dir(&w->cfg, name);
    }
    memset(g->canary, 0xA5, sizeof g->canary);
    struct nsbox_err e = {0};
    assert_int_equal(nsbox_mount_plan_build(&w->cfg, &g->plan, &e), -1);
    assert_int_equal(e.sys_errno, E2BIG);
    for (size_t i = 0; i < sizeof g->canary; i++)
        assert_int_equal(g->canary[i], 0xA5);
    free(w);
    free(g);
}

/* Over-long link text or host path: an error, not a cut path. */
static void test_long_paths(void **state)
{
    (void)state;
    struct world *w = host_world();
    char *longp = malloc(PATH_MAX + 16);
    assert_non_null(longp);
    longp[0] = '/';
    memset(longp + 1, 'a', PATH_MAX + 8);
    longp[PATH_MAX + 9] = '\0';
    w->cfg.workspace = longp;
    struct nsbox_err e = {0};
    assert_int_equal(nsbox_mount_plan_build(&w->cfg, &w->plan, &e), -1);
    assert_int_equal(e.sys_errno, ENAMETOOLONG);
    w->cfg.workspace = WORKSPACE;
    snprintf(w->img.etc, sizeof w->img.etc, "%s", longp); /* cut to PATH_MAX - 1: fits */
    build_ok(w);
    free(longp);
    free(w);
}

/* ================================ executor ================================================== */

enum ck {
    C_MOUNT,
    C_UMOUNT2,
    C_PIVOT,
    C_OPEN_TREE,
    C_SETATTR_FD,
    C_SETATTR_PATH,
    C_MOVE,
    C_MKDIR,
    C_SYMLINK,
    C_CREATE,
    C_WRITE,
    C_CLOSE,
    C_ANY,
};

struct call {
    enum ck k;
    char path[512]; /* target / path / new_root */
    char src[512];  /* mount source, symlink text, put_old */
    bool src_null;
    char fstype[32];
    bool fstype_null;
    char data[128];
    bool data_null;
    unsigned long flags;
    int fd;  /* open_tree: returned; setattr/move/close: argument */
    int dfd; /* open_tree */
    struct stat dfd_st;
    bool dfd_st_ok;
    int recursive;
    uint64_t set, clr;
    mode_t mode;
    struct stat cwd;
    int ret, err;
};

#define MAX_CALLS 1024
static struct {
    size_t n;
    struct call c[MAX_CALLS];
    int next_fd;
    /* failure injection */
    enum ck fail_kind;
    int fail_nth; /* 1-based among calls of fail_kind (all kinds for C_ANY) */
    int fail_errno;
    int seen;
    const char *fail_prefix; /* fail calls whose path starts with this (and is not equal to it) */
    int prefix_errno;
    bool armed;
} F;

static void fake_reset(void)
{
    F.n = 0;
    F.next_fd = 5000;
    F.fail_kind = C_ANY;
    F.fail_nth = 0;
    F.fail_errno = 0;
    F.seen = 0;
    F.fail_prefix = NULL;
    F.armed = true;
}

static struct call *rec(enum ck k, const char *path)
{
    assert_true(F.n < MAX_CALLS);
    struct call *c = &F.c[F.n++];
    memset(c, 0, sizeof *c);
    c->k = k;
    c->fd = -1;
    c->dfd = -1;
    snprintf(c->path, sizeof c->path, "%s", path ? path : "");
    stat(".", &c->cwd);
    return c;
}

/* Decide the outcome of the call just recorded. */
static int outcome(struct call *c, int ok)
{
    if (F.armed && c->k != C_CLOSE) {
        if (F.fail_nth && (F.fail_kind == C_ANY || F.fail_kind == c->k) && ++F.seen == F.fail_nth) {
            c->ret = -1;
            c->err = errno = F.fail_errno;
            return -1;
        }
        if (F.fail_prefix && is_parent(F.fail_prefix, c->path) &&
            (c->k == C_MOUNT || c->k == C_OPEN_TREE)) {
            c->ret = -1;
            c->err = errno = F.prefix_errno;
            return -1;
        }
    }
    c->ret = ok;
    return ok;
}

static void set_str(char *dst, size_t n, bool *isnull, const char *s)
{
    *isnull = s == NULL;
    snprintf(dst, n, "%s", s ? s : "");
}

static int f_mount(const char *src, const char *target, const char *fstype, unsigned long flags,
                   const void *data)
{
    struct call *c = rec(C_MOUNT, target);
    set_str(c->src, sizeof c->src, &c->src_null, src);
    set_str(c->fstype, sizeof c->fstype, &c->fstype_null, fstype);
    set_str(c->data, sizeof c->data, &c->data_null, data);
    c->flags = flags;
    return outcome(c, 0);
}

static int f_umount2(const char *target, int flags)
{
    struct call *c = rec(C_UMOUNT2, target);
    c->flags = (unsigned long)flags;
    return outcome(c, 0);
}

static int f_pivot_root(const char *new_root, const char *put_old)
{
    struct call *c = rec(C_PIVOT, new_root);
    snprintf(c->src, sizeof c->src, "%s", put_old);
    return outcome(c, 0);
}

static int f_open_tree(int dfd, const char *path, unsigned flags)
{
    struct call *c = rec(C_OPEN_TREE, path);
    c->dfd = dfd;
    c->flags = flags;
    if (dfd >= 0) c->dfd_st_ok = fstat(dfd, &c->dfd_st) == 0;
    if (outcome(c, 0) < 0) return -1;
    c->fd = F.next_fd++;
    c->ret = c->fd;
    return c->fd;
}

static int f_setattr_fd(int fd, int recursive, uint64_t set, uint64_t clr)
{
    struct call *c = rec(C_SETATTR_FD, "");
    c->fd = fd;
    c->recursive = recursive;
    c->set = set;
    c->clr = clr;
    return outcome(c, 0);
}

static int f_setattr_path(const char *path, int recursive, uint64_t set, uint64_t clr)
{
    struct call *c = rec(C_SETATTR_PATH, path);
    c->recursive = recursive;
    c->set = set;
    c->clr = clr;
    return outcome(c, 0);
}

static int f_move(int fd, const char *target)
{
    struct call *c = rec(C_MOVE, target);
    c->fd = fd;
    return outcome(c, 0);
}

static int f_mkdir(const char *path, mode_t mode)
{
    struct call *c = rec(C_MKDIR, path);
    c->mode = mode;
    return outcome(c, 0);
}

static int f_symlink(const char *linktext, const char *path)
{
    struct call *c = rec(C_SYMLINK, path);
    snprintf(c->src, sizeof c->src, "%s", linktext);
    return outcome(c, 0);
}

static int f_create(const char *path, mode_t mode)
{
    struct call *c = rec(C_CREATE, path);
    c->mode = mode;
    return outcome(c, 0);
}

static int f_write(const char *path, const char *data, size_t len, mode_t mode)
{
    struct call *c = rec(C_WRITE, path);
    snprintf(c->data, sizeof c->data, "%.*s", (int)len, data);
    c->mode = mode;
    return outcome(c, 0);
}

static int f_close(int fd)
{
    struct call *c = rec(C_CLOSE, "");
    c->fd = fd;
    return outcome(c, 0);
}

static const struct nsbox_sys fake = {
    .mount = f_mount,
    .umount2 = f_umount2,
    .pivot_root = f_pivot_root,
    .open_tree = f_open_tree,
    .mount_setattr_fd = f_setattr_fd,
    .mount_setattr_path = f_setattr_path,
    .move_mount_to = f_move,
    .mkdir = f_mkdir,
    .symlink = f_symlink,
    .create_file = f_create,
    .write_file = f_write,
    .close = f_close,
};

/* ---- executor fixture ---------------------------------------------------------------------- */

struct ex {
    char base[PATH_MAX], staging[PATH_MAX], image[PATH_MAX];
    struct stat staging_st, image_st, root_st;
    struct world *w;
    int fds[NSBOX_MOUNT_OPS_MAX];
    int fds_after_prepare[NSBOX_MOUNT_OPS_MAX];
    int rootfd;
    int ws_fd; /* EXT4 workspace mount given to prepare; -1 */
    size_t prepare_calls; /* F.n after prepare */
};

static int rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *f)
{
    (void)sb;
    (void)flag;
    (void)f;
    return remove(p);
}

static int ex_setup(void **state)
{
    struct ex *x = calloc(1, sizeof *x);
    if (!x) return -1;
    snprintf(x->base, sizeof x->base, "/tmp/nsbox-test-mounts-XXXXXX");
    if (!mkdtemp(x->base)) return -1;
    snprintf(x->staging, sizeof x->staging, "%s/staging", x->base);
    snprintf(x->image, sizeof x->image, "%s/image", x->base);
    if (mkdir(x->staging, 0700) < 0 || mkdir(x->image, 0700) < 0 ||
        stat(x->staging, &x->staging_st) < 0 || stat(x->image, &x->image_st) < 0 ||
        stat("/", &x->root_st) < 0)
        return -1;
    x->w = dir_world();
    snprintf(x->w->img.root, sizeof x->w->img.root, "%s", x->image);
    struct nsbox_err e = {0};
    if (nsbox_mount_plan_build(&x->w->cfg, &x->w->plan, &e) < 0) return -1;
    x->rootfd = -1;
    x->ws_fd = -1;
    *state = x;
    return 0;
}

static int ex_teardown(void **state)
{
    struct ex *x = *state;
    if (chdir("/") < 0) return -1;
    if (x->rootfd >= 0) close(x->rootfd);
    nftw(x->base, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
    free(x->w);
    free(x);
    return 0;
}

static bool same_file(const struct stat *a, const struct stat *b)
{
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}

static int do_prepare(struct ex *x, struct nsbox_err *e)
{
    if (x->rootfd >= 0) close(x->rootfd);
    x->rootfd = -1;
    memset(x->fds, 0x55, sizeof x->fds);
    int r = nsbox_rootfs_prepare(&fake, &x->w->plan, x->staging, x->image, -1, x->ws_fd, x->fds,
                                 &x->rootfd, e);
    memcpy(x->fds_after_prepare, x->fds, sizeof x->fds);
    x->prepare_calls = F.n;
    return r;
}

static void prepare_ok(struct ex *x)
{
    struct nsbox_err e = {0};
    F.armed = false;
    if (do_prepare(x, &e) != 0) fail_msg("prepare: %s", e.msg);
    F.armed = true;
}

static int count_open_fds(void)
{
    int n = 0;
    for (int fd = 0; fd < 1024; fd++)
        if (fcntl(fd, F_GETFD) >= 0) n++;
    return n;
}

/* ---- phase 1 ------------------------------------------------------------------------------- */

static void test_prepare_sequence(void **state)
{
    struct ex *x = *state;
    const struct nsbox_mount_plan *p = &x->w->plan;
    fake_reset();
    int fds_before = count_open_fds();
    struct nsbox_err e = {0};
    assert_int_equal(do_prepare(x, &e), 0);

    /* 1. every mount private, before anything is mounted */
    assert_true(F.n >= 2);
    struct call *c = &F.c[0];
    assert_int_equal(c->k, C_MOUNT);
    assert_string_equal(c->path, "/");
    assert_true(c->fstype_null);
    assert_int_equal(c->flags, MS_REC | MS_PRIVATE);
    /* 2. one detached clone per bind, in plan order, attributes set on the clone */
    size_t k = 1;
    int binds = 0;
    for (size_t i = 0; i < p->n; i++) {
        const struct nsbox_mount_op *o = &p->ops[i];
        if (o->op != NSBOX_MOP_BIND && o->op != NSBOX_MOP_BIND_DEV) {
            assert_int_equal(x->fds[i], -1);
            continue;
        }
        binds++;
        assert_true(k < F.n);
        c = &F.c[k++];
        assert_int_equal(c->k, C_OPEN_TREE);
        assert_string_equal(c->path, o->src);
        assert_int_equal(!!(c->flags & AT_RECURSIVE), !!o->recursive);
        if (o->src_in_image) {
            /* looked up under the image root, never following a symlink out of it */
            assert_true(c->dfd_st_ok);
            assert_true(same_file(&c->dfd_st, &x->image_st));
            assert_true(c->flags & AT_SYMLINK_NOFOLLOW);
            assert_null(strchr(c->path, '/'));
        } else {
            assert_int_equal(c->dfd, AT_FDCWD);
            assert_true(c->path[0] == '/');
        }
        assert_int_equal(x->fds[i], c->fd);
        int fd = c->fd;
        if (o->attr) {
            assert_true(k < F.n);
            c = &F.c[k++];
            assert_int_equal(c->k, C_SETATTR_FD);
            assert_int_equal(c->fd, fd);
            assert_int_equal(c->set, o->attr);
            assert_int_equal(c->clr, 0);
            assert_int_equal(!!c->recursive, !!o->recursive);
        }
    }
    /* 3. then the root tmpfs on staging (which may hold sources: the state directory) */
    assert_true(k < F.n);
    c = &F.c[k++];
    assert_int_equal(c->k, C_MOUNT);
    assert_string_equal(c->path, x->staging);
    assert_string_equal(c->fstype, "tmpfs");
    assert_true(c->flags & MS_NOSUID);
    assert_true(c->flags & MS_NODEV);
    /* *rootfd is the staging directory */
    assert_true(x->rootfd >= 0);
    struct stat st;
    assert_int_equal(fstat(x->rootfd, &st), 0);
    assert_true(same_file(&st, &x->staging_st));
    /* only rootfd stays open: the image root's fd is closed again */
    assert_int_equal(count_open_fds(), fds_before + 1);
    assert_true(binds > 0);
    /* nothing else: in particular nothing attached, nothing created, no pivot in phase 1 */
    assert_int_equal(F.n, k);
}

/* EXT4: the launcher's mount fd goes to the workspace op as it is: no open_tree, no second
 * copy; without it, phase 1 fails instead of leaving /workspace unmounted. */
static void test_prepare_takes_workspace_mount_fd(void **state)
{
    struct ex *x = *state;
    x->w->cfg.ws_kind = NSBOX_WS_EXT4;
    struct nsbox_err e = {0};
    if (nsbox_mount_plan_build(&x->w->cfg, &x->w->plan, &e) < 0) fail_msg("plan: %s", e.msg);
    int b = idx(&x->w->plan, NSBOX_MOP_BIND, "workspace");
    assert_true(b >= 0);
    int fd = open("/", O_PATH | O_CLOEXEC);
    assert_true(fd >= 0);
    x->ws_fd = fd;
    fake_reset();
    assert_int_equal(do_prepare(x, &e), 0);
    assert_int_equal(x->fds[b], fd);
    for (size_t i = 0; i < F.n; i++)
        if (F.c[i].k == C_OPEN_TREE)
            assert_string_not_equal(F.c[i].path, x->w->plan.ops[b].src);
    close(fd);
    x->fds[b] = -1;
    x->ws_fd = -1;
    fake_reset();
    assert_int_equal(do_prepare(x, &e), -1);
    assert_non_null(strstr(e.msg, "workspace filesystem"));
}

static void test_prepare_private_failure_stops(void **state)
{
    struct ex *x = *state;
    fake_reset();
    F.fail_kind = C_MOUNT;
    F.fail_nth = 1;
    F.fail_errno = EPERM;
    struct nsbox_err e = {0};
    assert_int_equal(do_prepare(x, &e), -1);
    /* never mount on the staging directory while still sharing mounts with the host */
    assert_int_equal(F.n, 1);
    assert_int_equal(e.sys_errno, EPERM);
    assert_non_null(strstr(e.msg, "private"));
}

static void test_prepare_tmpfs_failure(void **state)
{
    struct ex *x = *state;
    fake_reset();
    F.fail_kind = C_MOUNT;
    F.fail_nth = 2;
    F.fail_errno = ENOSPC;
    struct nsbox_err e = {0};
    assert_int_equal(do_prepare(x, &e), -1);
    /* the failing tmpfs mount is the last call: nothing after it */
    assert_true(F.n > 2);
    assert_int_equal(F.c[F.n - 1].k, C_MOUNT);
    assert_string_equal(F.c[F.n - 1].path, x->staging);
    assert_int_equal(e.sys_errno, ENOSPC);
    assert_non_null(strstr(e.msg, x->staging));
}

static void test_prepare_clone_failure(void **state)
{
    struct ex *x = *state;
    const struct nsbox_mount_plan *p = &x->w->plan;
    /* the 3rd bind source cannot be cloned */
    int third = -1, seen = 0;
    for (size_t i = 0; i < p->n && third < 0; i++)
        if ((p->ops[i].op == NSBOX_MOP_BIND || p->ops[i].op == NSBOX_MOP_BIND_DEV) && ++seen == 3)
            third = (int)i;
    assert_true(third >= 0);
    fake_reset();
    F.fail_kind = C_OPEN_TREE;
    F.fail_nth = 3;
    F.fail_errno = ENOENT;
    struct nsbox_err e = {0};
    assert_int_equal(do_prepare(x, &e), -1);
    assert_int_equal(e.sys_errno, ENOENT);
    assert_non_null(strstr(e.msg, p->ops[third].src));
    /* stops at the failure */
    assert_int_equal(F.c[F.n - 1].k, C_OPEN_TREE);
    assert_int_equal(F.c[F.n - 1].ret, -1);
}

static void test_prepare_setattr_failure_closes_clone(void **state)
{
    struct ex *x = *state;
    fake_reset();
    F.fail_kind = C_SETATTR_FD;
    F.fail_nth = 2;
    F.fail_errno = EPERM;
    struct nsbox_err e = {0};
    assert_int_equal(do_prepare(x, &e), -1);
    assert_int_equal(e.sys_errno, EPERM);
    /* find the failed setattr and the clone it was for */
    size_t f = 0;
    while (f < F.n && !(F.c[f].k == C_SETATTR_FD && F.c[f].ret < 0))
        f++;
    assert_true(f < F.n && f > 0);
    int fd = F.c[f].fd;
    assert_int_equal(F.c[f - 1].k, C_OPEN_TREE);
    assert_int_equal(F.c[f - 1].fd, fd);
    assert_non_null(strstr(e.msg, F.c[f - 1].path));
    /* a clone without its read-only/nosuid attributes is closed, never handed out */
    assert_int_equal(F.n, f + 2);
    assert_int_equal(F.c[f + 1].k, C_CLOSE);
    assert_int_equal(F.c[f + 1].fd, fd);
    for (size_t i = 0; i < x->w->plan.n; i++)
        assert_int_not_equal(x->fds[i], fd);
}

/* ---- phase 2 ------------------------------------------------------------------------------- */

static bool fstype_word(const char *s)
{
    return !strcmp(s, "tmpfs") || !strcmp(s, "proc") || !strcmp(s, "devpts");
}

/* Before the pivot: in the new root, every path relative to it, no host path looked up. */
static void enter_check_before_pivot(const struct ex *x, size_t start, size_t pivot)
{
    for (size_t i = start; i < pivot; i++) {
        const struct call *c = &F.c[i];
        assert_true(same_file(&c->cwd, &x->staging_st));
        assert_true(c->path[0] != '/');
        assert_int_not_equal(c->k, C_UMOUNT2);
        if (c->k == C_MOUNT && !c->src_null && !fstype_word(c->src)) assert_true(c->src[0] != '/');
        if (c->k == C_OPEN_TREE) assert_int_equal(c->dfd, AT_FDCWD);
    }
}

/* Op i of the plan maps to exactly these calls, from F.c[*k] on (before pivot). */
static void enter_check_op(const struct ex *x, size_t i, size_t *kp, size_t pivot)
{
    const struct nsbox_mount_op *o = &x->w->plan.ops[i];
    const struct call *c;
    size_t k = *kp;
#define NEXT(kind)                                                                                 \
    ({                                                                                             \
        assert_true(k < pivot);                                                                    \
        const struct call *_c = &F.c[k++];                                                         \
        if (_c->k != (kind))                                                                       \
            fail_msg("op %zu (%s): call %zu is kind %d, expected %d", i, o->target, k - 1,         \
                     (int)_c->k, (int)(kind));                                                     \
        _c;                                                                                        \
    })
    switch (o->op) {
    case NSBOX_MOP_MKDIR:
        c = NEXT(C_MKDIR);
        assert_string_equal(c->path, o->target);
        assert_int_equal(c->mode, o->mode);
        break;
    case NSBOX_MOP_SYMLINK:
        c = NEXT(C_SYMLINK);
        assert_string_equal(c->path, o->target);
        assert_string_equal(c->src, o->src);
        break;
    case NSBOX_MOP_FILE:
        c = NEXT(C_CREATE);
        assert_string_equal(c->path, o->target);
        break;
    case NSBOX_MOP_WRITE:
        c = NEXT(C_WRITE);
        assert_string_equal(c->path, o->target);
        break;
    case NSBOX_MOP_TMPFS:
    case NSBOX_MOP_PROC:
    case NSBOX_MOP_DEVPTS: {
        const char *fs = o->op == NSBOX_MOP_TMPFS  ? "tmpfs"
                         : o->op == NSBOX_MOP_PROC ? "proc"
                                                   : "devpts";
        c = NEXT(C_MOUNT);
        assert_string_equal(c->path, o->target);
        assert_string_equal(c->fstype, fs);
        assert_int_equal(c->flags, o->flags);
        if (o->data[0]) assert_string_equal(c->data, o->data);
        break;
    }
    case NSBOX_MOP_BIND:
    case NSBOX_MOP_BIND_DEV:
        /* the clone made (and restricted) in phase 1, attached on its target */
        c = NEXT(C_MOVE);
        assert_string_equal(c->path, o->target);
        assert_int_equal(c->fd, x->fds_after_prepare[i]);
        c = NEXT(C_CLOSE);
        assert_int_equal(c->fd, x->fds_after_prepare[i]);
        assert_int_equal(x->fds[i], -1);
        break;
    case NSBOX_MOP_MASK_FILE:
        c = NEXT(C_MOUNT);
        assert_string_equal(c->path, o->target);
        assert_string_equal(c->src, "dev/null");
        assert_true(c->flags & MS_BIND);
        break;
    case NSBOX_MOP_MASK_DIR:
        c = NEXT(C_MOUNT);
        assert_string_equal(c->path, o->target);
        assert_string_equal(c->fstype, "tmpfs");
        assert_true(c->flags & MS_RDONLY);
        break;
    case NSBOX_MOP_READONLY: {
        c = NEXT(C_OPEN_TREE);
        assert_string_equal(c->path, o->target);
        int fd = c->fd;
        c = NEXT(C_SETATTR_FD);
        assert_int_equal(c->fd, fd);
        assert_true(c->set & MOUNT_ATTR_RDONLY);
        c = NEXT(C_MOVE);
        assert_int_equal(c->fd, fd);
        assert_string_equal(c->path, o->target);
        c = NEXT(C_CLOSE);
        assert_int_equal(c->fd, fd);
        break;
    }
    case NSBOX_MOP_SETATTR:
        c = NEXT(C_SETATTR_PATH);
        assert_string_equal(c->path, o->target);
        assert_int_equal(c->set, o->attr);
        assert_int_equal(!!c->recursive, !!o->recursive);
        break;
    }
#undef NEXT
    *kp = k;
}

/* Then: pivot_root(".", "."), detach the old root, make "/" read-only, nothing else. */
static void enter_check_after_pivot(const struct ex *x, size_t pivot)
{
    assert_int_equal(F.n, pivot + 3);
    const struct call *c = &F.c[pivot];
    assert_string_equal(c->path, ".");
    assert_string_equal(c->src, ".");
    c = &F.c[pivot + 1];
    assert_int_equal(c->k, C_UMOUNT2);
    assert_string_equal(c->path, ".");
    assert_int_equal(c->flags, MNT_DETACH);
    c = &F.c[pivot + 2];
    assert_int_equal(c->k, C_MOUNT);
    assert_string_equal(c->path, "/");
    assert_true(c->src_null);
    assert_int_equal(c->flags & (MS_REMOUNT | MS_BIND | MS_RDONLY),
                     MS_REMOUNT | MS_BIND | MS_RDONLY);
    assert_true(c->flags & MS_NOSUID);
    assert_true(c->flags & MS_NODEV);
    /* by then the process has left the old working directory for the (new) root */
    assert_true(same_file(&c->cwd, &x->root_st));
}

/* Across both phases: every attached clone came from open_tree and got its attributes before it
 * was attached, and every clone is closed exactly once. */
static void enter_check_clones(const struct ex *x)
{
    const struct nsbox_mount_plan *p = &x->w->plan;
    for (size_t i = 0; i < F.n; i++) {
        if (F.c[i].k != C_MOVE) continue;
        int fd = F.c[i].fd, opened = -1, attrs = -1;
        for (size_t j = 0; j < i; j++) {
            if (F.c[j].k == C_OPEN_TREE && F.c[j].fd == fd) opened = (int)j;
            if (F.c[j].k == C_SETATTR_FD && F.c[j].fd == fd) attrs = (int)j;
        }
        assert_true(opened >= 0);
        for (size_t j = 0; j < p->n; j++)
            if (p->ops[j].attr && x->fds_after_prepare[j] == fd)
                assert_true(attrs > opened && attrs < (int)i);
    }
    /* every clone is closed exactly once */
    for (size_t i = 0; i < F.n; i++) {
        if (F.c[i].k != C_OPEN_TREE) continue;
        int closes = 0;
        for (size_t j = 0; j < F.n; j++)
            if (F.c[j].k == C_CLOSE && F.c[j].fd == F.c[i].fd) closes++;
        assert_int_equal(closes, 1);
    }
}

static void test_enter_sequence(void **state)
{
    struct ex *x = *state;
    const struct nsbox_mount_plan *p = &x->w->plan;
    fake_reset();
    prepare_ok(x);
    size_t start = F.n;
    struct nsbox_err e = {0};
    int r = nsbox_rootfs_enter(&fake, p, x->rootfd, x->fds, &e);
    if (r != 0) fail_msg("enter: %s", e.msg);

    size_t pivot = start;
    while (pivot < F.n && F.c[pivot].k != C_PIVOT)
        pivot++;
    assert_true(pivot < F.n);

    enter_check_before_pivot(x, start, pivot);
    /* Each op of the plan, in plan order, maps to exactly these calls. */
    size_t k = start;
    for (size_t i = 0; i < p->n; i++)
        enter_check_op(x, i, &k, pivot);
    assert_int_equal(k, pivot);
    enter_check_after_pivot(x, pivot);
    enter_check_clones(x);
}

/* The substring the error message must carry for a failure of call c. */
static void expect_names_failure(const struct call *c, const char *msg)
{
    char want[600];
    if (c->k == C_PIVOT)
        snprintf(want, sizeof want, "pivot_root");
    else if (c->k == C_UMOUNT2)
        snprintf(want, sizeof want, "old root");
    else if (c->k == C_MOUNT && !strcmp(c->path, "/"))
        snprintf(want, sizeof want, "read-only");
    else if (c->k == C_MOUNT && !strcmp(c->fstype, "proc") && strcmp(c->src, "dev/null"))
        snprintf(want, sizeof want, "proc");
    else if (c->k == C_MOUNT && !strcmp(c->fstype, "devpts"))
        snprintf(want, sizeof want, "devpts");
    else if (c->k == C_SETATTR_FD) /* READONLY: named by the open_tree just before */
        snprintf(want, sizeof want, "/%s", (c - 1)->path);
    else
        snprintf(want, sizeof want, "/%s", c->path);
    if (!strstr(msg, want))
        fail_msg("failure of call kind %d on '%s': message '%s' does not name '%s'", (int)c->k,
                 c->path, msg, want);
}

/* Fail each phase-2 call in turn: enter returns -1 with that errno and a message naming the
 * target, stops there (only the close of the fd in hand may follow) and never pivots into a
 * half-built root. */
static void test_enter_each_failure(void **state)
{
    struct ex *x = *state;
    const struct nsbox_mount_plan *p = &x->w->plan;
    fake_reset();
    prepare_ok(x);
    size_t start = F.n;
    struct nsbox_err e = {0};
    assert_int_equal(nsbox_rootfs_enter(&fake, p, x->rootfd, x->fds, &e), 0);
    int fallible = 0;
    for (size_t i = start; i < F.n; i++)
        if (F.c[i].k != C_CLOSE) fallible++;
    assert_true(fallible > 30);

    for (int nth = 1; nth <= fallible; nth++) {
        fake_reset();
        prepare_ok(x);
        start = F.n;
        F.fail_kind = C_ANY;
        F.fail_nth = nth;
        F.fail_errno = EPERM;
        struct nsbox_err e2 = {0};
        if (chdir("/") < 0) fail();
        assert_int_equal(nsbox_rootfs_enter(&fake, p, x->rootfd, x->fds, &e2), -1);
        assert_int_equal(e2.code, NSBOX_E_SYS);
        assert_int_equal(e2.sys_errno, EPERM);
        size_t f = start;
        while (f < F.n && F.c[f].ret >= 0)
            f++;
        assert_true(f < F.n);
        expect_names_failure(&F.c[f], e2.msg);
        assert_true(F.n - f <= 2);
        if (F.n - f == 2) assert_int_equal(F.c[f + 1].k, C_CLOSE);
        bool pivoted = false;
        for (size_t i = start; i < f; i++)
            pivoted |= F.c[i].k == C_PIVOT;
        if (F.c[f].k != C_PIVOT && F.c[f].k != C_UMOUNT2 && strcmp(F.c[f].path, "/"))
            assert_false(pivoted);
    }
}

/* The brief's case spelled out: the 5th mount(2) of phase 2 fails. */
static void test_enter_fifth_mount_fails(void **state)
{
    struct ex *x = *state;
    const struct nsbox_mount_plan *p = &x->w->plan;
    fake_reset();
    prepare_ok(x);
    size_t start = F.n;
    F.fail_kind = C_MOUNT;
    F.fail_nth = 5;
    F.fail_errno = EACCES;
    struct nsbox_err e = {0};
    assert_int_equal(nsbox_rootfs_enter(&fake, p, x->rootfd, x->fds, &e), -1);
    const struct call *last = &F.c[F.n - 1];
    assert_int_equal(last->k, C_MOUNT);
    assert_int_equal(last->ret, -1);
    int mounts = 0;
    for (size_t i = start; i < F.n; i++)
        mounts += F.c[i].k == C_MOUNT;
    assert_int_equal(mounts, 5);
    char want[600];
    snprintf(want, sizeof want, "/%s", last->path);
    if (!strstr(e.msg, want)) fail_msg("'%s' does not name %s", e.msg, want);
    assert_int_equal(e.sys_errno, EACCES);
    assert_non_null(strstr(e.msg, strerror(EACCES)));
}

/* Masks and read-only binds inside /proc are optional (ENOENT: the kernel has no such file);
 * other errors there, and ENOENT anywhere else, are fatal. */
static void test_enter_optional_proc_entries(void **state)
{
    struct ex *x = *state;
    const struct nsbox_mount_plan *p = &x->w->plan;
    fake_reset();
    prepare_ok(x);
    F.fail_prefix = "proc";
    F.prefix_errno = ENOENT;
    struct nsbox_err e = {0};
    int r = nsbox_rootfs_enter(&fake, p, x->rootfd, x->fds, &e);
    if (r != 0) fail_msg("ENOENT under /proc should be tolerated: %s", e.msg);
    assert_int_equal(F.c[F.n - 3].k, C_PIVOT);

    fake_reset();
    prepare_ok(x);
    F.fail_prefix = "proc";
    F.prefix_errno = EPERM;
    assert_int_equal(nsbox_rootfs_enter(&fake, p, x->rootfd, x->fds, &e), -1);
    assert_int_equal(e.sys_errno, EPERM);
    assert_non_null(strstr(e.msg, "/proc/"));

    /* ENOENT on a required mount (the first mount of phase 2) is not swallowed */
    fake_reset();
    prepare_ok(x);
    F.fail_kind = C_MOUNT;
    F.fail_nth = 1;
    F.fail_errno = ENOENT;
    assert_int_equal(nsbox_rootfs_enter(&fake, p, x->rootfd, x->fds, &e), -1);
    assert_int_equal(e.sys_errno, ENOENT);
    for (size_t i = 0; i < F.n; i++)
        assert_int_not_equal(F.c[i].k, C_PIVOT);
}

/* An op the executor does not know is an error, not silently skipped. */
static void test_enter_unknown_op(void **state)
{
    struct ex *x = *state;
    struct nsbox_mount_plan *p = malloc(sizeof *p);
    assert_non_null(p);
    p->n = 1;
    memset(&p->ops[0], 0, sizeof p->ops[0]);
    p->ops[0].op = (enum nsbox_mop)99;
    snprintf(p->ops[0].target, sizeof p->ops[0].target, "x");
    int fds[1] = {-1};
    fake_reset();
    int rootfd = open(x->staging, O_PATH | O_DIRECTORY | O_CLOEXEC);
    assert_true(rootfd >= 0);
    struct nsbox_err e = {0};
    assert_int_equal(nsbox_rootfs_enter(&fake, p, rootfd, fds, &e), -1);
    assert_int_equal(e.code, NSBOX_E_INVALID);
    for (size_t i = 0; i < F.n; i++)
        assert_int_not_equal(F.c[i].k, C_PIVOT);
    close(rootfd);
    free(p);
}

int main(void)
{
    const struct CMUnitTest plan_tests[] = {
        cmocka_unit_test(test_host_plan_usr_readonly),
        cmocka_unit_test(test_dir_plan_entries_readonly),
        cmocka_unit_test(test_top_level_file_bound),
        cmocka_unit_test(test_plan_sources_pool_bounded),
        cmocka_unit_test(test_plan_etc_files),
        cmocka_unit_test(test_host_plan_etc_from_store),
        cmocka_unit_test(test_symlinks_recreated),
        cmocka_unit_test(test_provided_entries_not_exposed),
        cmocka_unit_test(test_tmpfs_flags),
        cmocka_unit_test(test_workspace_bind),
        cmocka_unit_test(test_workspace_ext4_is_the_launchers_mount),
        cmocka_unit_test(test_workspace_tmpfs_sized_by_disk_limit),
        cmocka_unit_test(test_proc_masked_after_mount),
        cmocka_unit_test(test_dev),
        cmocka_unit_test(test_order_invariants),
        cmocka_unit_test(test_tmp_and_shm_are_sized),
        cmocka_unit_test(test_order_checker_is_sharp),
        cmocka_unit_test(test_bad_entry_names),
        cmocka_unit_test(test_missing_image_or_workspace),
        cmocka_unit_test(test_too_many_ops),
        cmocka_unit_test(test_long_paths),
    };
    const struct CMUnitTest exec_tests[] = {
        cmocka_unit_test_setup_teardown(test_prepare_sequence, ex_setup, ex_teardown),
        cmocka_unit_test_setup_teardown(test_prepare_takes_workspace_mount_fd, ex_setup, ex_teardown),
        cmocka_unit_test_setup_teardown(test_prepare_private_failure_stops, ex_setup, ex_teardown),
        cmocka_unit_test_setup_teardown(test_prepare_tmpfs_failure, ex_setup, ex_teardown),
        cmocka_unit_test_setup_teardown(test_prepare_clone_failure, ex_setup, ex_teardown),
        cmocka_unit_test_setup_teardown(test_prepare_setattr_failure_closes_clone, ex_setup,
                                        ex_teardown),
        cmocka_unit_test_setup_teardown(test_enter_sequence, ex_setup, ex_teardown),
        cmocka_unit_test_setup_teardown(test_enter_each_failure, ex_setup, ex_teardown),
        cmocka_unit_test_setup_teardown(test_enter_fifth_mount_fails, ex_setup, ex_teardown),
        cmocka_unit_test_setup_teardown(test_enter_optional_proc_entries, ex_setup, ex_teardown),
        cmocka_unit_test_setup_teardown(test_enter_unknown_op, ex_setup, ex_teardown),
    };
    int r = cmocka_run_group_tests_name("plan", plan_tests, NULL, NULL);
    r += cmocka_run_group_tests_name("executor", exec_tests, NULL, NULL);
    return r;
}
