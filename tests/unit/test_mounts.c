/* Root filesystem assembly (rootfs/mounts.c), without root.
 *
 * Part 1, the pure plan (nsbox_mount_plan_build) for a HOST image and a DIR image: what is bound
 * from where with which attributes, what is never exposed, and the order rules (a mount point
 * exists before it is mounted on; nothing is created under a mount point before the mount,
 * which would hide it; /proc masks after /proc; /dev read-only after its nodes).
 *
 * Part 2, the executor, is in test_mounts_exec.c; the configurations both build on are in
 * mounts_world.h. */

#include "mounts_world.h"

static const uint64_t RO_SAFE = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;

/* Names nsbox provides itself: an image's own entries of these names are never exposed. */
static const char *const provided[] = {"proc", "dev", "sys", "tmp", "workspace", "run", NULL};

/* What nsbox_mounts_scan_image finds on a merged-/usr host. */
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

static void build_ok(struct world *w)
{
    struct nsbox_err e = {0};
    int r = nsbox_mount_plan_build(&w->cfg, &w->plan, &e);
    if (r != 0)
        fail_msg("plan build failed: %s", e.msg);
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

static int count_target(const struct nsbox_mount_plan *p, const char *target)
{
    int n = 0;
    for (size_t i = 0; i < p->n; i++)
        if (!strcmp(p->ops[i].target, target))
            n++;
    return n;
}

static bool list_has(const char *const *l, const char *s)
{
    for (; *l; l++)
        if (!strcmp(*l, s))
            return true;
    return false;
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
    if (v)
        fail_msg("%s", v);
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
        if (!strcmp(o->target, "workspace"))
            continue;
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
    if (b < 0)
        fail_msg("no bind for image entry %s", name);
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

/* Network none: the sandbox's /etc/hosts is its text, made on the root's tmpfs and bound over
 * the image's as the host file was (read-only, resolved inside the image, optional); nothing of
 * it on the host. */
static void test_plan_hosts_text(void **state)
{
    (void)state;
    struct world *w = host_world();
    static const char text[] = "127.0.0.1\tlocalhost\n127.0.1.1\tnsbox-0123456789ab\n";
    w->cfg.hosts = NULL;
    w->cfg.hosts_text = text;
    w->cfg.hosts_optional = true;
    build_ok(w);
    assert_int_equal(idx(&w->plan, NSBOX_MOP_BIND, "etc/hosts"), -1);
    int h = idx(&w->plan, NSBOX_MOP_BIND_TEXT, "etc/hosts");
    assert_true(h >= 0);
    assert_string_equal(w->plan.ops[h].src, text);
    assert_true(w->plan.ops[h].src != text); /* a copy in the plan, which the child keeps */
    assert_true(w->plan.ops[h].target_in_image);
    assert_true(w->plan.ops[h].optional);
    uint64_t want = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC;
    assert_true((w->plan.ops[h].attr & want) == want);
    free(w);
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
        if (!en->is_symlink || list_has(provided, en->name))
            continue;
        int s = idx(&w->plan, NSBOX_MOP_SYMLINK, en->name);
        if (s < 0)
            fail_msg("symlink entry %s not recreated", en->name);
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
        if (o->op == NSBOX_MOP_SYMLINK)
            assert_false(list_has(provided, o->target));
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
 * noexec instead); /proc and /run noexec too. */
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
    /* /run holds sockets and pid files, never programs: nothing written there runs */
    int r = idx(&w->plan, NSBOX_MOP_TMPFS, "run");
    assert_true(r >= 0);
    assert_true(w->plan.ops[r].flags & MS_NOEXEC);
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
    /* every path the lists must hold, written out here: the e2e tests skip those this
     * kernel lacks (scsi, timer_stats, sched_debug on the test machine) */
    static const char *const files[] = {"kcore",         "keys",        "timer_list", "sched_debug",
                                        "latency_stats", "timer_stats", "kallsyms"};
    static const char *const dirs[] = {"acpi", "scsi"};
    static const char *const ro[] = {"sys", "sysrq-trigger", "irq", "bus", "fs"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++)
        if (!list_has(nsbox_proc_masked_files, files[i]))
            fail_msg("/proc/%s is not masked", files[i]);
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++)
        if (!list_has(nsbox_proc_masked_dirs, dirs[i]))
            fail_msg("/proc/%s is not masked", dirs[i]);
    for (size_t i = 0; i < sizeof ro / sizeof ro[0]; i++)
        if (!list_has(nsbox_proc_readonly, ro[i]))
            fail_msg("/proc/%s is not read-only", ro[i]);
    char t[64];
    /* MASK_FILE binds the sandbox's dev/null (see mounts.c): it must be mounted by then. */
    int devnull = idx(&w->plan, NSBOX_MOP_BIND_DEV, "dev/null");
    assert_true(devnull >= 0);
    for (const char *const *n = nsbox_proc_masked_files; *n; n++) {
        snprintf(t, sizeof t, "proc/%s", *n);
        int m = idx(&w->plan, NSBOX_MOP_MASK_FILE, t);
        if (m < 0)
            fail_msg("no mask for /%s", t);
        assert_true(m > proc);
        assert_true(m > devnull);
    }
    for (const char *const *n = nsbox_proc_masked_dirs; *n; n++) {
        snprintf(t, sizeof t, "proc/%s", *n);
        int m = idx(&w->plan, NSBOX_MOP_MASK_DIR, t);
        if (m < 0)
            fail_msg("no mask for /%s", t);
        assert_true(m > proc);
    }
    for (const char *const *n = nsbox_proc_readonly; *n; n++) {
        snprintf(t, sizeof t, "proc/%s", *n);
        int m = idx(&w->plan, NSBOX_MOP_READONLY, t);
        if (m < 0)
            fail_msg("no read-only bind for /%s", t);
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

/* ---- nsbox-oci's writable root: the image root in place ----------------------------------- */

/* Nothing is bound from the image entry by entry, nsbox adds no /workspace, /tmp, /run or
 * /etc/hosts, any mount may go inside the image, the masked paths inside it are planned, and
 * every target is resolved in the root with no symlink (target_in_image): files and device
 * nodes as files, the rest as directories. */
static void test_root_in_place(void **state)
{
    (void)state;
    struct world *w = dir_world();
    w->cfg.root_in_place = true;
    w->cfg.n_entries = 0; /* not scanned: nothing is bound from it */
    w->cfg.hosts_text = "127.0.0.1 localhost\n";
    static const struct nsbox_rootfs_mount mounts[] = {
        {.destination = "/proc", .type = "proc", .source = "proc", .data = ""},
        {.destination = "/etc/ssl", .type = "tmpfs", .source = "tmpfs", .data = ""},
        {.destination = "/etc/hostname", .type = "bind", .source = "/etc/hostname",
         .source_is_file = true, .data = ""},
    };
    w->cfg.mounts = mounts;
    w->cfg.n_mounts = sizeof mounts / sizeof mounts[0];
    static const char *const masked[] = {"/secret"};
    w->cfg.masked = masked;
    w->cfg.n_masked = 1;
    build_ok(w);
    assert_true(w->plan.root_in_place);
    assert_int_equal(count(&w->plan, NSBOX_MOP_SYMLINK, "bin"), 0);
    assert_int_equal(count(&w->plan, NSBOX_MOP_BIND, "usr"), 0);
    assert_int_equal(count(&w->plan, NSBOX_MOP_BIND_TEXT, NULL), 0);
    assert_true(idx(&w->plan, NSBOX_MOP_TMPFS, "workspace") < 0);
    assert_true(idx(&w->plan, NSBOX_MOP_TMPFS, "tmp") < 0);
    assert_true(idx(&w->plan, NSBOX_MOP_TMPFS, "run") < 0);
    assert_true(idx(&w->plan, NSBOX_MOP_TMPFS, "etc/ssl") >= 0);
    assert_true(idx(&w->plan, NSBOX_MOP_MASK, "secret") > idx(&w->plan, NSBOX_MOP_TMPFS, "etc/ssl"));
    for (size_t i = 0; i < w->plan.n; i++) {
        const struct nsbox_mount_op *o = &w->plan.ops[i];
        if (!o->target_in_image)
            fail_msg("op %zu (/%s) is not resolved in the root", i, o->target);
        bool file = o->op == NSBOX_MOP_FILE || o->op == NSBOX_MOP_BIND_DEV ||
                    !strcmp(o->target, "etc/hostname");
        if (o->target_dir == file)
            fail_msg("op %zu (/%s): target_dir %d", i, o->target, o->target_dir);
    }
    /* without it, the same config keeps nsbox's root: a tmpfs inside the image is refused */
    w->cfg.root_in_place = false;
    add_dir(&w->cfg, "etc");
    struct nsbox_err e = {0};
    assert_int_equal(nsbox_mount_plan_build(&w->cfg, &w->plan, &e), -1);
    assert_non_null(strstr(e.msg, "lies inside the image"));
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
        if (b > last_node)
            last_node = b;
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
    /* its own bound: the host's pool of pseudo-terminals is shared */
    assert_non_null(strstr(p->ops[pts].data, ",max=128"));
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

int main(void)
{
    const struct CMUnitTest plan_tests[] = {
        cmocka_unit_test(test_host_plan_usr_readonly),
        cmocka_unit_test(test_dir_plan_entries_readonly),
        cmocka_unit_test(test_top_level_file_bound),
        cmocka_unit_test(test_plan_sources_pool_bounded),
        cmocka_unit_test(test_plan_etc_files),
        cmocka_unit_test(test_plan_hosts_text),
        cmocka_unit_test(test_host_plan_etc_from_store),
        cmocka_unit_test(test_symlinks_recreated),
        cmocka_unit_test(test_provided_entries_not_exposed),
        cmocka_unit_test(test_tmpfs_flags),
        cmocka_unit_test(test_workspace_bind),
        cmocka_unit_test(test_workspace_ext4_is_the_launchers_mount),
        cmocka_unit_test(test_workspace_tmpfs_sized_by_disk_limit),
        cmocka_unit_test(test_proc_masked_after_mount),
        cmocka_unit_test(test_root_in_place),
        cmocka_unit_test(test_dev),
        cmocka_unit_test(test_order_invariants),
        cmocka_unit_test(test_tmp_and_shm_are_sized),
        cmocka_unit_test(test_order_checker_is_sharp),
        cmocka_unit_test(test_bad_entry_names),
        cmocka_unit_test(test_missing_image_or_workspace),
        cmocka_unit_test(test_too_many_ops),
        cmocka_unit_test(test_long_paths),
    };
    return cmocka_run_group_tests_name("plan", plan_tests, NULL, NULL);
}
