/* cgroups v1 and v2: one cgroup per sandbox, below the caller's own cgroup (or
 * $NSBOX_CGROUP_PARENT) and nowhere else. See docs/cgroups.md for the file-by-file mapping.
 *
 * Cost model: this runs for every `nsbox run`, so the hierarchy layout is discovered once per
 * process (one read of /proc/self/cgroup plus a statfs/access per hierarchy, mountinfo only
 * when the simple layout does not match) and create/attach/destroy are a handful of
 * mkdir/open/write/rmdir calls each. Parsing lives in cgroup_util.c; everything that changes
 * the kernel's state goes through the nsbox_cg_sys seam. */
#include "cgroup.h"
#include "cgroup_util.h"
#include "cleanup.h"
#include "util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>

#ifndef CGROUP2_SUPER_MAGIC
#define CGROUP2_SUPER_MAGIC 0x63677270
#endif
#ifndef CGROUP_SUPER_MAGIC
#define CGROUP_SUPER_MAGIC 0x27e0eb
#endif

/* How long destroy keeps killing and retrying rmdir: SIGKILLed processes normally leave in
 * microseconds, but a task in uninterruptible sleep (NFS, a stuck FUSE server) can take longer;
 * after this the cgroup is left for `nsbox gc` rather than blocking the caller forever. */
#define KILL_TIMEOUT_MS 5000
/* How long freeze waits for every task to reach the frozen state. */
#define FREEZE_TIMEOUT_MS 2000

#define FIX_V2_DELEGATE                                                                            \
    "run nsbox as root, in a cgroup delegated to you (systemd-run --user -p Delegate=yes "       \
    "--scope ...), or with NSBOX_CGROUP_PARENT set to a delegated cgroup; see docs/cgroups.md"
#define FIX_V2_INTERNAL                                                                            \
    "set NSBOX_CGROUP_PARENT to a delegated cgroup that holds no processes itself (docs/"        \
    "cgroups.md shows how)"
#define FIX_V1_DELEGATE                                                                            \
    "run nsbox as root, or as root create one directory per hierarchy and chown it to the "      \
    "user (for c in memory cpu cpuacct pids freezer; do mkdir /sys/fs/cgroup/$c/nsbox-USER; "    \
    "chown -R USER /sys/fs/cgroup/$c/nsbox-USER; done) and set NSBOX_CGROUP_PARENT=/nsbox-USER"

/* ---- the seam ------------------------------------------------------------------------------ */

static int real_fs_magic(const char *path, unsigned long *magic)
{
    struct statfs st;
    if (statfs(path, &st) < 0)
        return -1;
    *magic = (unsigned long)st.f_type;
    return 0;
}

static int real_mkdir(const char *path, mode_t mode)
{
    return mkdir(path, mode);
}

static int real_rmdir(const char *path)
{
    return rmdir(path);
}

static int real_write_file(int dirfd, const char *name, const char *data, size_t len)
{
    /* No O_TRUNC/O_CREAT: cgroup files exist or the feature is absent, and ENOENT is how
     * callers learn the latter (memory.swap.max, memsw, cgroup.kill). */
    cleanup_close int fd = openat(dirfd, name, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t w;
    do
        w = write(fd, data, len);
    while (w < 0 && errno == EINTR);
    if (w < 0)
        return -1;
    if ((size_t)w != len) {
        errno = EIO;
        return -1;
    }
    return 0;
}

static int real_kill(pid_t pid, int sig)
{
    return kill(pid, sig);
}

static const struct nsbox_cg_sys real_sys = {
    .root = "/sys/fs/cgroup",
    .proc_self_cgroup = "/proc/self/cgroup",
    .proc_self_mountinfo = "/proc/self/mountinfo",
    .fs_magic = real_fs_magic,
    .mkdir = real_mkdir,
    .rmdir = real_rmdir,
    .write_file = real_write_file,
    .kill = real_kill,
    .geteuid = geteuid,
};

static const struct nsbox_cg_sys *sys = &real_sys;

/* ---- small file helpers -------------------------------------------------------------------- */

/* name relative to dirfd when dirfd >= 0, else dir/name (name alone when dir is NULL). The
 * whole file (up to n-1 bytes) into buf, NUL-terminated. Length or -1/errno. */
static ssize_t read_small(int dirfd, const char *dir, const char *name, char *buf, size_t n)
{
    char path[PATH_MAX];
    if (dirfd < 0) {
        if (dir) {
            if (nsbox_cg_join(path, sizeof path, dir, NULL, name) < 0)
                return -1;
            name = path;
        }
        dirfd = AT_FDCWD;
    }
    cleanup_close int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    size_t used = 0;
    while (used + 1 < n) {
        ssize_t r = read(fd, buf + used, n - 1 - used);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -1;
        if (r == 0)
            break;
        used += (size_t)r;
    }
    buf[used] = '\0';
    return (ssize_t)used;
}

/* Whole file of unknown size (cgroup.procs, mountinfo), malloc'd; NULL/errno. */
static char *read_alloc(const char *path)
{
    return nsbox_read_text_at(AT_FDCWD, path, 16u << 20);
}

static int write_at(int dirfd, const char *dir, const char *name, const char *val)
{
    char path[PATH_MAX];
    if (dirfd < 0) {
        if (nsbox_cg_join(path, sizeof path, dir, NULL, name) < 0)
            return -1;
        return sys->write_file(AT_FDCWD, path, val, strlen(val));
    }
    return sys->write_file(dirfd, name, val, strlen(val));
}

static int read_u64_at(int dirfd, const char *dir, const char *name, uint64_t *out)
{
    char buf[64];
    if (read_small(dirfd, dir, name, buf, sizeof buf) < 0)
        return -1;
    return nsbox_cg_parse_u64(buf, out);
}

static int read_keyed_at(int dirfd, const char *dir, const char *name, const char *key,
                         uint64_t *out)
{
    char buf[2048];
    if (read_small(dirfd, dir, name, buf, sizeof buf) < 0)
        return -1;
    return nsbox_cg_parse_keyed(buf, key, out);
}

/* Exponential backoff from 50 us to 10 ms: an exiting process is usually gone within tens of
 * microseconds, so the first retries are cheap and the later ones do not spin. */
static void backoff(unsigned *us)
{
    struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)*us * 1000};
    nanosleep(&ts, NULL);
    *us = *us >= 5000 ? 10000 : *us * 2;
}

/* access(W_OK) answers both questions at once: 1 writable, 0 exists but not writable,
 * -1 missing (errno). */
static int probe_dir(const char *path)
{
    if (access(path, W_OK) == 0)
        return 1;
    if (errno == EACCES || errno == EPERM || errno == EROFS)
        return 0;
    return -1;
}

/* ---- discovery (once per process) ---------------------------------------------------------- */

/* v1 controllers in create order; freezer last so that destroy removes it last and can still
 * freeze whatever is left in the other hierarchies. */
enum { C_MEMORY, C_CPU, C_PIDS, C_CPUACCT, C_FREEZER, C_COUNT };
static const char *const v1_names[C_COUNT] = {"memory", "cpu", "pids", "cpuacct", "freezer"};
static const char *const v2_needed[] = {"memory", "cpu", "pids"};

struct hier {
    char controllers[32]; /* the controllers nsbox uses in this hierarchy, comma separated */
    char own[PATH_MAX];   /* mount + the caller's own cgroup */
    char cfg[PATH_MAX];   /* mount + $NSBOX_CGROUP_PARENT (or root's fallback), "" when unset */
};

static const char *hier_parent(const struct hier *h)
{
    return h->cfg[0] ? h->cfg : h->own;
}

static struct layout {
    bool done;
    bool dirty; /* written by an earlier discovery: clear it before the next */
    struct nsbox_cgroup_support sup;
    char cfg_rel[PATH_MAX];
    struct hier v2;
    bool v2_subtree_ok; /* the parent's cgroup.subtree_control already has memory cpu pids */
    bool v2_root_parent; /* the parent is NSBOX_CGROUP_V2_ROOT_PARENT, made by the first create */
    char v2_top[PATH_MAX]; /* where v2 is mounted */
    size_t n_v1;
    struct hier v1[C_COUNT];
} L;

void nsbox_cgroup_set_sys(const struct nsbox_cg_sys *s)
{
    sys = s ? s : &real_sys;
    L.done = false;
}

/* The caller's cgroup directory in the hierarchy mounted at mount. Normally mount + path; when
 * a container bind-mounted its own cgroup there (no cgroup namespace), /proc/self/cgroup
 * still shows the full path, and mountinfo's root field tells how much of it to drop. */
static int resolve_own(const char *mount, const char *path, char *out, size_t n)
{
    if (nsbox_cg_join(out, n, mount, path, NULL) < 0)
        return -1;
    if (access(out, F_OK) == 0)
        return 0;
    cleanup_free char *mi = read_alloc(sys->proc_self_mountinfo);
    char root[PATH_MAX], rel[PATH_MAX];
    if (!mi || nsbox_cg_mountinfo_root(mi, mount, root, sizeof root) < 0 ||
        nsbox_cg_strip_root(path, root, rel, sizeof rel) < 0)
        return -1;
    return nsbox_cg_join(out, n, mount, rel, NULL);
}

#define WHY(...) snprintf(sup->why, sizeof sup->why, __VA_ARGS__)

/* Root whose own cgroup cannot hold sandboxes (it lacks the controllers, or holds processes:
 * a login session's scope, a service; systemd keeps every process in a leaf like that) and
 * that did not name a parent: root may create cgroups anywhere, so its sandboxes go below
 * NSBOX_CGROUP_V2_ROOT_PARENT at the top, as Docker's go below /docker. The top is exempt from
 * the no-internal-process rule and enables the controllers for it at the first create
 * (make_root_parent). Not below the caller's own cgroup, so not within its limits: each
 * sandbox has its own. Where the top does not list the controllers, or holds processes (a
 * container's cgroup namespace), the own cgroup's error stands or the enabling fails with the
 * fix. 1 when taken (sup filled). */
static int use_root_parent(const char *mount, const char *own, struct hier *h)
{
    struct nsbox_cgroup_support *sup = &L.sup;
    char ctl[512], missing[64], p[PATH_MAX];
    if (sys->geteuid() != 0 || read_small(-1, mount, "cgroup.controllers", ctl, sizeof ctl) < 0 ||
        nsbox_cg_missing(ctl, v2_needed, NSBOX_ARRAY_LEN(v2_needed), missing, sizeof missing) ||
        nsbox_cg_join(h->cfg, sizeof h->cfg, mount, NSBOX_CGROUP_V2_ROOT_PARENT, NULL) < 0)
        return 0;
    snprintf(L.cfg_rel, sizeof L.cfg_rel, "%s", NSBOX_CGROUP_V2_ROOT_PARENT);
    L.v2_root_parent = true;
    L.v2_subtree_ok = false;
    sup->version = 2;
    snprintf(sup->parent, sizeof sup->parent, "%s", h->cfg);
    sup->writable = sup->freezer = true; /* root; cgroup.freeze is in every non-root cgroup */
    sup->memory = sup->cpu = sup->pids = true;
    /* swap accounting shows in any cgroup with the memory controller: ours, or the caller's */
    sup->swap = (nsbox_cg_join(p, sizeof p, h->cfg, NULL, "memory.swap.max") == 0 &&
                 access(p, F_OK) == 0) ||
                (nsbox_cg_join(p, sizeof p, own, NULL, "memory.swap.max") == 0 &&
                 access(p, F_OK) == 0);
    sup->why[0] = '\0';
    return 1;
}

/* 1: v2 is the hierarchy to use (sup filled, maybe with a why); 0: v2 lacks the controllers
 * (why in v2why), the caller may try v1. unified: v2 is the only hierarchy (else hybrid, where
 * v2 without controllers is the normal case and v1 decides). */
static int discover_v2(const char *mount, bool unified, const struct nsbox_cg_self *self,
                       const char *cfg_env, char *v2why, size_t whyn)
{
    struct nsbox_cgroup_support *sup = &L.sup;
    struct hier *h = &L.v2;
    snprintf(L.v2_top, sizeof L.v2_top, "%s", mount);
    if (resolve_own(mount, self->v2_path, h->own, sizeof h->own) < 0) {
        snprintf(v2why, whyn, "cgroup v2: cannot find this process's cgroup %s under %s",
                 self->v2_path, mount);
        return 0;
    }
    if (cfg_env) {
        if (nsbox_cg_normalize_parent(cfg_env, mount, L.cfg_rel, sizeof L.cfg_rel) < 0 ||
            nsbox_cg_join(h->cfg, sizeof h->cfg, mount, L.cfg_rel, NULL) < 0) {
            snprintf(v2why, whyn,
                     "NSBOX_CGROUP_PARENT=%s is not a cgroup path (absolute, without . or ..)",
                     cfg_env);
            return 0;
        }
    }
    const char *parent = hier_parent(h);
    const char *rel = parent + strlen(mount);
    if (!*rel)
        rel = "/";
    bool is_root = strcmp(rel, "/") == 0;
    bool may_use_top = !cfg_env && !is_root; /* root may: use_root_parent */
    char ctl[512];
    if (read_small(-1, parent, "cgroup.controllers", ctl, sizeof ctl) < 0) {
        if (cfg_env && unified) {
            sup->version = 2;
            WHY("NSBOX_CGROUP_PARENT=%s: %s/cgroup.controllers: %s: create that cgroup and "
                "delegate it first (docs/cgroups.md)",
                cfg_env, parent, strerror(errno));
            return 1;
        }
        snprintf(v2why, whyn, "cgroup v2: cannot read %s/cgroup.controllers: %s", parent,
                 strerror(errno));
        return 0;
    }
    char missing[64];
    if (nsbox_cg_missing(ctl, v2_needed, NSBOX_ARRAY_LEN(v2_needed), missing, sizeof missing)) {
        if (may_use_top && use_root_parent(mount, parent, h))
            return 1;
        snprintf(v2why, whyn,
                 "cgroup v2 controllers %s are not delegated to %s (its parent does not enable "
                 "them in cgroup.subtree_control): " FIX_V2_DELEGATE,
                 missing, rel);
        return 0;
    }

    sup->version = 2;
    snprintf(sup->parent, sizeof sup->parent, "%s", parent);
    /* The root cgroup has no cgroup.freeze nor memory.swap.max; below it their presence is the
     * feature test (freeze: Linux 5.2; swap: swap accounting compiled in and enabled). */
    sup->freezer = true;
    if (!is_root) {
        char p[PATH_MAX];
        sup->freezer = nsbox_cg_join(p, sizeof p, parent, NULL, "cgroup.freeze") == 0 &&
                       access(p, F_OK) == 0;
        sup->swap = nsbox_cg_join(p, sizeof p, parent, NULL, "memory.swap.max") == 0 &&
                    access(p, F_OK) == 0;
    }
    int w = probe_dir(parent);
    if (w < 0) {
        WHY("cgroup v2: %s: %s", parent, strerror(errno));
        return 1;
    }
    sup->writable = w == 1;
    if (!sup->writable) {
        WHY("cgroup %s is not writable by uid %u: " FIX_V2_DELEGATE, rel, (unsigned)geteuid());
        sup->freezer = false;
        return 1;
    }
    char sub[512];
    L.v2_subtree_ok = read_small(-1, parent, "cgroup.subtree_control", sub, sizeof sub) >= 0 &&
                      nsbox_cg_missing(sub, v2_needed, 3, missing, sizeof missing) == 0;
    if (!L.v2_subtree_ok && !is_root) {
        /* v2's no-internal-process rule: a non-root cgroup that holds processes cannot enable
         * domain controllers for its children (the write fails with EBUSY). Moving the
         * caller's processes elsewhere is not ours to do, so say it here. */
        char procs[64];
        if (read_small(-1, parent, "cgroup.procs", procs, sizeof procs) > 0) {
            if (may_use_top && use_root_parent(mount, parent, h))
                return 1;
            WHY("cgroup v2 %s holds processes, so it cannot enable %s for child cgroups (the "
                "v2 no-internal-process rule): " FIX_V2_INTERNAL,
                rel, missing);
            sup->freezer = false;
            return 1;
        }
    }
    sup->memory = sup->cpu = sup->pids = true;
    return 1;
}

/* 1: v1 has memory, cpu and pids (sup filled, maybe with a why); 0: not (why in v1why). */
static int discover_v1(const struct nsbox_cg_self *self, const char *cfg_env, char *v1why,
                       size_t whyn)
{
    struct nsbox_cgroup_support *sup = &L.sup;
    unsigned hier_of[C_COUNT];
    size_t idx_of[C_COUNT];
    char missing[64] = "";
    size_t used = 0;
    if (cfg_env && nsbox_cg_normalize_parent(cfg_env, NULL, L.cfg_rel, sizeof L.cfg_rel) < 0) {
        snprintf(v1why, whyn, "NSBOX_CGROUP_PARENT=%s is not a cgroup path", cfg_env);
        return 0;
    }
    for (size_t c = 0; c < C_COUNT; c++) {
        idx_of[c] = SIZE_MAX;
        const struct nsbox_cg_self_entry *en = nsbox_cg_self_find(self, v1_names[c]);
        char mount[PATH_MAX];
        unsigned long magic = 0;
        if (en && nsbox_cg_join(mount, sizeof mount, sys->root, v1_names[c], NULL) == 0 &&
            sys->fs_magic(mount, &magic) == 0 && magic == CGROUP_SUPER_MAGIC) {
            hier_of[c] = en->hier;
            /* Co-mounted controllers (cpu,cpuacct) share one directory: create it once. */
            for (size_t d = 0; d < c; d++)
                if (idx_of[d] != SIZE_MAX && hier_of[d] == en->hier)
                    idx_of[c] = idx_of[d];
            if (idx_of[c] != SIZE_MAX) {
                struct hier *h = &L.v1[idx_of[c]];
                size_t cl = strlen(h->controllers);
                snprintf(h->controllers + cl, sizeof h->controllers - cl, ",%s", v1_names[c]);
                continue;
            }
            struct hier *h = &L.v1[L.n_v1];
            if (resolve_own(mount, en->path, h->own, sizeof h->own) == 0 &&
                (!cfg_env || nsbox_cg_join(h->cfg, sizeof h->cfg, mount, L.cfg_rel, NULL) == 0)) {
                snprintf(h->controllers, sizeof h->controllers, "%s", v1_names[c]);
                idx_of[c] = L.n_v1++;
                continue;
            }
        }
        if (c == C_MEMORY || c == C_CPU || c == C_PIDS) {
            int w = snprintf(missing + used, sizeof missing - used, "%s%s", used ? "," : "",
                             v1_names[c]);
            if (w > 0 && used + (size_t)w < sizeof missing)
                used += (size_t)w;
        }
    }
    if (used) {
        snprintf(v1why, whyn,
                 "cgroup v1 hierarchies %s are not mounted under %s: mount them (mount -t cgroup "
                 "-o pids cgroup %s/pids) or boot with cgroup v2 "
                 "(systemd.unified_cgroup_hierarchy=1)",
                 missing, sys->root, sys->root);
        L.n_v1 = 0;
        return 0;
    }

    sup->version = 1;
    snprintf(sup->parent, sizeof sup->parent, "%s", hier_parent(&L.v1[0]));
    sup->writable = true;
    for (size_t i = 0; i < L.n_v1; i++) {
        const char *parent = hier_parent(&L.v1[i]);
        int w = probe_dir(parent);
        if (w < 0 && cfg_env) {
            WHY("NSBOX_CGROUP_PARENT=%s: %s: %s: create that cgroup in every v1 hierarchy "
                "(memory, cpu, cpuacct, pids, freezer) and chown it to the user who runs nsbox; "
                "see docs/cgroups.md",
                cfg_env, parent, strerror(errno));
            sup->writable = false;
            return 1;
        }
        if (w < 0) {
            WHY("cgroup v1: %s: %s", parent, strerror(errno));
            sup->writable = false;
            return 1;
        }
        if (w == 0) {
            WHY("cgroup %s is not writable by uid %u: " FIX_V1_DELEGATE, parent,
                (unsigned)geteuid());
            sup->writable = false;
            return 1;
        }
    }
    sup->memory = sup->cpu = sup->pids = true;
    sup->freezer = idx_of[C_FREEZER] != SIZE_MAX;
    char p[PATH_MAX];
    sup->swap = nsbox_cg_join(p, sizeof p, hier_parent(&L.v1[idx_of[C_MEMORY]]), NULL,
                              "memory.memsw.limit_in_bytes") == 0 &&
                access(p, F_OK) == 0;
    if (!sup->freezer)
        WHY("cgroup v1 freezer hierarchy is not mounted at %s/freezer: sandboxes cannot sleep "
            "(idle_timeout_seconds) and destroy kills without freezing first; mount it with "
            "mount -t cgroup -o freezer cgroup %s/freezer",
            sys->root, sys->root);
    return 1;
}

static void discover(void)
{
    if (L.done)
        return;
    /* A first discovery finds L as the program started, zero: clearing it anyway would write
     * (fault in) all of its 60 KiB for every sandbox's supervisor. */
    if (L.dirty)
        memset(&L, 0, sizeof L);
    L.done = L.dirty = true;
    struct nsbox_cgroup_support *sup = &L.sup;
    const char *cfg_env = getenv("NSBOX_CGROUP_PARENT");
    if (cfg_env && !*cfg_env)
        cfg_env = NULL;

    char buf[8192];
    cleanup_free struct nsbox_cg_self *self = calloc(1, sizeof *self);
    if (!self) {
        WHY("cgroup discovery: out of memory");
        return;
    }
    if (read_small(-1, NULL, sys->proc_self_cgroup, buf, sizeof buf) < 0 ||
        nsbox_cg_parse_self(buf, self) < 0) {
        WHY("cannot parse %s: %s", sys->proc_self_cgroup, strerror(errno));
        return;
    }

    /* Fixed knowledge first: unified mode has cgroup2 at the root; hybrid mode (this is what
     * systemd calls it) has v1 hierarchies plus an empty cgroup2 at root/unified. */
    unsigned long magic = 0;
    char v2mount[PATH_MAX] = "";
    bool unified = sys->fs_magic(sys->root, &magic) == 0 && magic == CGROUP2_SUPER_MAGIC;
    if (unified) {
        snprintf(v2mount, sizeof v2mount, "%s", sys->root);
    } else {
        char u[PATH_MAX];
        if (nsbox_cg_join(u, sizeof u, sys->root, "unified", NULL) == 0 &&
            sys->fs_magic(u, &magic) == 0 && magic == CGROUP2_SUPER_MAGIC)
            snprintf(v2mount, sizeof v2mount, "%s", u);
    }

    char v2why[512] = "", v1why[512] = "";
    if (v2mount[0] && self->has_v2 &&
        discover_v2(v2mount, unified, self, cfg_env, v2why, sizeof v2why))
        return;
    if (!unified && discover_v1(self, cfg_env, v1why, sizeof v1why))
        return;
    memset(&L.v2, 0, sizeof L.v2);
    sup->version = 0;
    if (unified)
        WHY("%s", v2why[0] ? v2why : "cgroup v2 is mounted but this process has no v2 cgroup");
    else
        WHY("%s", v1why[0] ? v1why : "no cgroup hierarchy found under /sys/fs/cgroup");
}

#undef WHY

void nsbox_cgroup_detect(struct nsbox_cgroup_support *sup)
{
    discover();
    *sup = L.sup;
}

/* ---- create -------------------------------------------------------------------------------- */

void nsbox_cgroup_init(struct nsbox_cgroup *cg)
{
    cg->version = 0;
    cg->path[0] = '\0';
    cg->dirfd = -1;
    cg->n_v1 = 0;
}

/* Error for a failed write of val to dir/file, with the fix for the errno that means one. */
static int write_error(struct nsbox_err *e, const char *dir, const char *file, const char *val)
{
    int err = errno;
    const char *fix = "";
    int code = NSBOX_E_SYS;
    switch (err) {
    case EACCES:
    case EPERM:
    case EROFS:
        code = NSBOX_E_UNSUPPORTED;
        fix = L.sup.version == 2 ? ": not delegated to this user: " FIX_V2_DELEGATE
                                 : ": not delegated to this user: " FIX_V1_DELEGATE;
        break;
    case EINVAL:
        if (strstr(file, "cpu"))
            fix = ": the kernel refused the quota (above its maximum, or above the parent "
                  "cgroup's own cpu quota in v1); pick a smaller instance type or raise the "
                  "parent's quota";
        break;
    case EBUSY:
        if (strstr(file, "memory"))
            fix = ": the cgroup already uses more memory than the new limit";
        break;
    case ENOSPC:
        fix = ": the parent's cgroup.max.descendants or cgroup.max.depth is reached";
        break;
    }
    return nsbox_err_set(e, code, err, "cgroup: write '%s' to %s/%s: %s%s", val, dir, file,
                         strerror(err), fix);
}

static int mkdir_error(struct nsbox_err *e, const char *path, const char *id)
{
    int err = errno;
    if (err == EEXIST)
        return nsbox_err_set(e, NSBOX_E_SYS, err,
                             "cgroup: %s already exists: a sandbox with id '%s' is running or "
                             "was not cleaned up after a crash; `nsbox rm %s` or `nsbox gc` "
                             "removes it",
                             path, id, id);
    if (err == EACCES || err == EPERM || err == EROFS)
        return nsbox_err_set(e, NSBOX_E_UNSUPPORTED, err, "cgroup: mkdir %s: %s: %s", path,
                             strerror(err),
                             L.sup.version == 2 ? FIX_V2_DELEGATE : FIX_V1_DELEGATE);
    if (err == ENOSPC || err == EAGAIN)
        return nsbox_err_set(e, NSBOX_E_SYS, err,
                             "cgroup: mkdir %s: %s: the parent's cgroup.max.descendants or "
                             "cgroup.max.depth is reached",
                             path, strerror(err));
    return nsbox_err_set(e, NSBOX_E_SYS, err, "cgroup: mkdir %s: %s", path, strerror(err));
}

/* Enable memory, cpu and pids for the parent's children (v2 controllers are off below a cgroup
 * until its cgroup.subtree_control says otherwise). Only the missing ones are written: a
 * delegated cgroup may allow enabling but the write is still a syscall we can skip. */
static int enable_controllers(const char *parent, struct nsbox_err *e)
{
    char cur[512] = "", add[64] = "";
    if (read_small(-1, parent, "cgroup.subtree_control", cur, sizeof cur) < 0)
        return nsbox_err_sys(e, "cgroup: read %s/cgroup.subtree_control", parent);
    size_t used = 0;
    for (size_t i = 0; i < NSBOX_ARRAY_LEN(v2_needed); i++) {
        if (nsbox_cg_list_has(cur, v2_needed[i]))
            continue;
        int w = snprintf(add + used, sizeof add - used, "%s+%s", used ? " " : "", v2_needed[i]);
        if (w > 0 && used + (size_t)w < sizeof add)
            used += (size_t)w;
    }
    if (used && write_at(-1, parent, "cgroup.subtree_control", add) < 0) {
        int err = errno;
        if (err == EBUSY)
            return nsbox_err_set(e, NSBOX_E_UNSUPPORTED, err,
                                 "cgroup: cannot enable '%s' in %s/cgroup.subtree_control: that "
                                 "cgroup holds processes (the v2 no-internal-process rule): "
                                 FIX_V2_INTERNAL,
                                 add, parent);
        if (err == ENOENT)
            return nsbox_err_set(e, NSBOX_E_UNSUPPORTED, err,
                                 "cgroup: cannot enable '%s' in %s/cgroup.subtree_control: the "
                                 "controllers are not available there: " FIX_V2_DELEGATE,
                                 add, parent);
        errno = err;
        return write_error(e, parent, "cgroup.subtree_control", add);
    }
    return 0;
}

/* Root's fallback parent (discover_v2): the hierarchy's root enables the controllers for its
 * children (the root is exempt from the no-internal-process rule), then the parent is made if
 * it is not there yet (by an earlier run, or by another nsbox at the same moment). */
static int make_root_parent(const char *parent, struct nsbox_err *e)
{
    if (enable_controllers(L.v2_top, e) < 0)
        return -1;
    if (sys->mkdir(parent, 0755) < 0 && errno != EEXIST)
        return nsbox_err_sys(e, "cgroup: mkdir %s", parent);
    return 0;
}

/* Undo a half-made cgroup: nothing ran in it yet, so this is rmdirs. The first error wins. */
static int rollback(struct nsbox_cgroup *cg)
{
    struct nsbox_err ignored;
    int saved = errno;
    nsbox_cgroup_destroy(cg, &ignored);
    errno = saved;
    return -1;
}

static int create_v2(const char *id, const char *name, const struct nsbox_limits *lim,
                     struct nsbox_cgroup *cg, struct nsbox_err *e)
{
    const char *parent = hier_parent(&L.v2);
    if (!L.v2_subtree_ok) {
        if (L.v2_root_parent && make_root_parent(parent, e) < 0)
            return -1;
        if (enable_controllers(parent, e) < 0)
            return -1;
        L.v2_subtree_ok = true;
    }
    if (nsbox_cg_join(cg->path, sizeof cg->path, parent, NULL, name) < 0)
        return nsbox_err_sys(e, "cgroup: path for %s", name);
    if (sys->mkdir(cg->path, 0755) < 0)
        return mkdir_error(e, cg->path, id);
    cg->version = 2;
    /* O_PATH is enough for openat() of the interface files and for clone3's cgroup field, and
     * it keeps the fd from being usable to read or write anything by itself. */
    cg->dirfd = open(cg->path, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (cg->dirfd < 0) {
        nsbox_err_sys(e, "cgroup: open %s", cg->path);
        return rollback(cg);
    }
    char mem[32], cpu[48], pids[32];
    if (nsbox_cg_fmt_limit(lim->memory_bytes, 2, mem, sizeof mem) < 0 ||
        nsbox_cg_fmt_cpu_max(lim->cpus, cpu, sizeof cpu) < 0 ||
        nsbox_cg_fmt_limit(lim->pids, 2, pids, sizeof pids) < 0) {
        nsbox_err_sys(e, "cgroup: format limits");
        return rollback(cg);
    }
    /* A new cgroup starts at "max" everywhere, so an unlimited value needs no write. */
    if (lim->memory_bytes && write_at(cg->dirfd, cg->path, "memory.max", mem) < 0) {
        write_error(e, cg->path, "memory.max", mem);
        return rollback(cg);
    }
    /* No swap: a memory limit that can spill to swap is not the limit the user asked for, and
     * the hosted sandboxes have none. Absent without swap accounting: nothing to limit then. */
    if (write_at(cg->dirfd, cg->path, "memory.swap.max", "0") < 0 && errno != ENOENT) {
        write_error(e, cg->path, "memory.swap.max", "0");
        return rollback(cg);
    }
    if (lim->cpus && write_at(cg->dirfd, cg->path, "cpu.max", cpu) < 0) {
        write_error(e, cg->path, "cpu.max", cpu);
        return rollback(cg);
    }
    if (lim->pids && write_at(cg->dirfd, cg->path, "pids.max", pids) < 0) {
        write_error(e, cg->path, "pids.max", pids);
        return rollback(cg);
    }
    return 0;
}

static int create_v1(const char *id, const char *name, const struct nsbox_limits *lim,
                     struct nsbox_cgroup *cg, struct nsbox_err *e)
{
    char mem[32], quota[32], pids[32], period[16];
    if (nsbox_cg_fmt_limit(lim->memory_bytes, 1, mem, sizeof mem) < 0 ||
        nsbox_cg_fmt_cfs_quota(lim->cpus, quota, sizeof quota) < 0 ||
        nsbox_cg_fmt_limit(lim->pids, 1, pids, sizeof pids) < 0)
        return nsbox_err_sys(e, "cgroup: format limits");
    snprintf(period, sizeof period, "%u", NSBOX_CG_CPU_PERIOD_US);

    for (size_t i = 0; i < L.n_v1; i++) {
        const struct hier *h = &L.v1[i];
        char *path = cg->v1[cg->n_v1].path;
        if (nsbox_cg_join(path, sizeof cg->v1[0].path, hier_parent(h), NULL, name) < 0) {
            nsbox_err_sys(e, "cgroup: path for %s", name);
            return rollback(cg);
        }
        if (sys->mkdir(path, 0755) < 0) {
            mkdir_error(e, path, id);
            return rollback(cg);
        }
        snprintf(cg->v1[cg->n_v1].controller, sizeof cg->v1[0].controller, "%s", h->controllers);
        cg->n_v1++;
        cg->version = 1;

        const char *file = NULL, *val = NULL;
        if (nsbox_cg_list_has(h->controllers, "memory") && lim->memory_bytes) {
            /* memsw (memory+swap) must stay >= memory, or the kernel refuses the write with
             * EINVAL: a new cgroup has both unlimited, so lower memory first, then set memsw
             * to the same value, which leaves no room for swap. memsw is absent without swap
             * accounting (then there is no swap to limit). */
            if (write_at(-1, path, file = "memory.limit_in_bytes", val = mem) < 0 ||
                (write_at(-1, path, file = "memory.memsw.limit_in_bytes", val = mem) < 0 &&
                 errno != ENOENT))
                goto fail;
        }
        if (nsbox_cg_list_has(h->controllers, "cpu") && lim->cpus) {
            /* Period first: the quota is checked against it (and the parent's bandwidth). */
            if (write_at(-1, path, file = "cpu.cfs_period_us", val = period) < 0 ||
                write_at(-1, path, file = "cpu.cfs_quota_us", val = quota) < 0)
                goto fail;
        }
        if (nsbox_cg_list_has(h->controllers, "pids") && lim->pids) {
            if (write_at(-1, path, file = "pids.max", val = pids) < 0)
                goto fail;
        }
        continue;
    fail:
        write_error(e, path, file, val);
        return rollback(cg);
    }
    return 0;
}

int nsbox_cgroup_create(const char *id, const struct nsbox_limits *lim, struct nsbox_cgroup *cg,
                        struct nsbox_err *e)
{
    nsbox_cgroup_init(cg);
    if (!nsbox_cg_valid_id(id))
        return nsbox_err_set(e, NSBOX_E_INVALID, 0,
                             "cgroup: invalid sandbox id '%s' (letters, digits, '.', '_', '-', "
                             "at most 64, starting with a letter or digit)",
                             id ? id : "(null)");
    discover();
    if (!(L.sup.memory && L.sup.cpu && L.sup.pids))
        return nsbox_err_set(e, NSBOX_E_UNSUPPORTED, 0,
                             "cgroup: cannot enforce the sandbox's cpu, memory and pids limits: "
                             "%s",
                             L.sup.why);
    char name[80];
    snprintf(name, sizeof name, "nsbox-%s", id);
    return L.sup.version == 2 ? create_v2(id, name, lim, cg, e) : create_v1(id, name, lim, cg, e);
}

/* ---- attach -------------------------------------------------------------------------------- */

static int attach_error(struct nsbox_err *e, const char *dir, pid_t pid, int version)
{
    int err = errno;
    if (err == ESRCH)
        return nsbox_err_set(e, NSBOX_E_SYS, err, "cgroup: move pid %d into %s: no such process",
                             (int)pid, dir);
    if (err == EACCES || err == EPERM)
        /* v2 checks write access to cgroup.procs of the common ancestor of the source and the
         * destination cgroup, not only of the destination. */
        return nsbox_err_set(e, NSBOX_E_UNSUPPORTED, err,
                             "cgroup: move pid %d into %s: %s: %s", (int)pid, dir, strerror(err),
                             version == 2 ? "the process's current cgroup and the sandbox's "
                                            "must both be inside one cgroup delegated to you; "
                                            FIX_V2_DELEGATE
                                          : FIX_V1_DELEGATE);
    return nsbox_err_set(e, NSBOX_E_SYS, err, "cgroup: write %d to %s/cgroup.procs: %s",
                         (int)pid, dir, strerror(err));
}

int nsbox_cgroup_attach(const struct nsbox_cgroup *cg, pid_t pid, struct nsbox_err *e)
{
    if (!cg || cg->version == 0 || pid <= 0)
        return nsbox_err_set(e, NSBOX_E_INVALID, 0, "cgroup: attach: no cgroup or bad pid");
    char val[24];
    snprintf(val, sizeof val, "%d", (int)pid);
    if (cg->version == 2) {
        if (write_at(cg->dirfd, cg->path, "cgroup.procs", val) < 0)
            return attach_error(e, cg->path, pid, 2);
        return 0;
    }
    for (size_t i = 0; i < cg->n_v1; i++)
        if (write_at(-1, cg->v1[i].path, "cgroup.procs", val) < 0)
            return attach_error(e, cg->v1[i].path, pid, 1);
    return 0;
}

/* ---- destroy ------------------------------------------------------------------------------- */

static bool busy_errno(int err)
{
    /* The kernel says EBUSY for a populated cgroup or one with children; a plain directory
     * (the fake tree in tests, or a race with a child cgroup) says ENOTEMPTY. */
    return err == EBUSY || err == ENOTEMPTY || err == EEXIST;
}

/* Whether a cgroup directory has child cgroups: kernfs (like tmpfs) keeps a directory's link
 * count at 2 + its subdirectories, so one stat spares a directory scan on every busy retry. */
static bool has_children(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && st.st_nlink > 2;
}

/* Call fn(child, depth + 1) for every child cgroup directory of path. -1 if path can't be read. */
static int for_each_child(const char *path, int depth, void (*fn)(const char *, int))
{
    DIR *d = opendir(path);
    if (!d)
        return -1;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_type != DT_DIR || strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        char child[PATH_MAX];
        if (nsbox_cg_join(child, sizeof child, path, NULL, de->d_name) == 0)
            fn(child, depth + 1);
    }
    closedir(d);
    return 0;
}

static int rmdir_tree(const char *path, int depth);
static void rmdir_child(const char *path, int depth)
{
    rmdir_tree(path, depth);
}

/* rmdir path; when busy because of child cgroups, remove those depth first and retry. 0 when
 * gone (or absent). A sandbox cannot create child cgroups itself (it has no write access to its
 * cgroup), but a leftover from an older version or a human might have. */
static int rmdir_tree(const char *path, int depth)
{
    if (sys->rmdir(path) == 0 || errno == ENOENT)
        return 0;
    int err = errno;
    if (!busy_errno(err) || depth > 16 || !has_children(path)) {
        errno = err;
        return -1;
    }
    if (for_each_child(path, depth, rmdir_child) < 0) {
        errno = err;
        return -1;
    }
    if (sys->rmdir(path) == 0 || errno == ENOENT)
        return 0;
    return -1;
}

/* SIGKILL every process listed in path's cgroup.procs and in its child cgroups'. */
static void kill_tree(const char *path, int depth)
{
    char procs[PATH_MAX];
    if (nsbox_cg_join(procs, sizeof procs, path, NULL, "cgroup.procs") < 0)
        return;
    cleanup_free char *list = read_alloc(procs);
    if (list) {
        const char *cur = list;
        pid_t pid;
        while (nsbox_cg_next_pid(&cur, &pid))
            sys->kill(pid, SIGKILL);
    }
    if (depth > 16 || !has_children(path))
        return;
    for_each_child(path, depth, kill_tree);
}

/* One kill round over paths[i] (NULL: gone). The first round kills without freezing:
 * usually the sandbox's init goes and the pid namespace takes everything else with it, and
 * freezing costs more than the rest of destroy together (~0.6 ms on v1). If anything is still
 * there afterwards, a later round freezes first, so that a process that keeps forking cannot
 * stay ahead of the pid list; v1 keeps a frozen task frozen even with SIGKILL pending, hence
 * the thaw afterwards (v2 lets fatal signals through but is thawed the same way). */
static void kill_round(unsigned round, const char *freeze_dir, const char *freeze_file,
                       const char *on, const char *off, const char *const *paths, size_t n)
{
    bool frozen = round > 0 && freeze_dir && write_at(-1, freeze_dir, freeze_file, on) == 0;
    for (size_t i = 0; i < n; i++)
        if (paths[i])
            kill_tree(paths[i], 0);
    if (frozen)
        write_at(-1, freeze_dir, freeze_file, off);
}

/* Try to remove every directory not yet gone, in order, stopping at the first busy one: the
 * processes are in every hierarchy, so the rest is busy too, and the freezer (last) must stay
 * while anything is left. 1 all gone, 0 busy, -1 error (e filled). */
static int rmdir_all(const char *const *paths, bool *gone, size_t n, struct nsbox_err *e)
{
    for (size_t i = 0; i < n; i++) {
        if (gone[i])
            continue;
        if (rmdir_tree(paths[i], 0) == 0) {
            gone[i] = true;
            continue;
        }
        if (busy_errno(errno))
            return 0;
        return nsbox_err_sys(e, "cgroup: remove %s", paths[i]);
    }
    return 1;
}

/* Kill and remove the cgroup directories paths[0..n): v2's one, or one per v1 hierarchy with
 * ctl[i] its controllers (the freezer's is used to freeze). */
static int kill_and_remove(int version, const char *const *paths, const char *const *ctl,
                           bool *gone, size_t n, struct nsbox_err *e)
{
    /* Fast path: an empty cgroup goes with one rmdir per directory. */
    int r = rmdir_all(paths, gone, n, e);
    if (r != 0)
        return r < 0 ? -1 : 0;
    uint64_t deadline = (uint64_t)nsbox_now_ms() + KILL_TIMEOUT_MS;
    for (unsigned round = 0;; round++) {
        const char *live[NSBOX_CG_V1_MAX];
        const char *freeze_dir = NULL;
        for (size_t i = 0; i < n; i++) {
            live[i] = gone[i] ? NULL : paths[i];
            if (live[i] && (version == 2 || nsbox_cg_list_has(ctl[i], "freezer")))
                freeze_dir = live[i];
        }
        /* cgroup.kill (Linux 5.14) kills the whole subtree and stops concurrent forks in the
         * kernel, so no pid list can go stale. Without it: read the lists and SIGKILL. */
        if (version == 1)
            kill_round(round, freeze_dir, "freezer.state", "FROZEN", "THAWED", live, n);
        else if (write_at(-1, paths[0], "cgroup.kill", "1") < 0)
            kill_round(round, freeze_dir, "cgroup.freeze", "1", "0", live, n);
        /* SIGKILLed processes leave asynchronously (tens to hundreds of microseconds, more
         * for a big address space): poll for ~1.5 ms before deciding that something survived
         * the round (a process that forked meanwhile) and killing again, frozen this time. */
        unsigned us = 50;
        for (int poll = 0; poll < 5; poll++) {
            r = rmdir_all(paths, gone, n, e);
            if (r != 0)
                return r < 0 ? -1 : 0;
            if ((uint64_t)nsbox_now_ms() > deadline)
                return nsbox_err_set(e, NSBOX_E_TIMEOUT, EBUSY,
                                     "cgroup: %s still has processes %d s after SIGKILL (stuck "
                                     "in uninterruptible sleep?); `nsbox gc` retries later",
                                     paths[0], KILL_TIMEOUT_MS / 1000);
            backoff(&us);
        }
    }
}

/* ---- the v1 freezer's hold ------------------------------------------------------------------
 *
 * The v1 freezer turns a kernel-wide static key on while any of its cgroups is frozen, and off
 * when the last one thaws. Flipping it patches kernel text on every CPU: on this project's VM
 * that made each thaw of a sleeping sandbox ~1.4 ms instead of ~0.1 ms, on the path of the
 * request that wakes it. So before a sandbox first sleeps, its supervisor freezes an empty
 * cgroup beside the sandboxes' (FREEZER_HOLD): while it is frozen, the key stays on and a
 * sandbox's freeze and thaw only count. The last sandbox to go removes it, and `nsbox gc`
 * removes one with no sandbox beside it (left by a supervisor that was killed). Not a valid
 * "nsbox-<id>" name, so nothing takes it for a sandbox's cgroup. v2's freezer has no such
 * key. docs/cgroups.md. */
#define FREEZER_HOLD "nsbox.freezer-hold"

/* The directory a sandbox's cgroup is in (where the hold goes), into out. */
static int parent_of(const char *cg_dir, char *out, size_t n)
{
    const char *slash = strrchr(cg_dir, '/');
    if (!slash || slash == cg_dir)
        return -1;
    int len = snprintf(out, n, "%.*s", (int)(slash - cg_dir), cg_dir);
    return len < 0 || (size_t)len >= n ? -1 : 0;
}

/* Best effort: without the hold, freezing works the same, only slower. */
static void hold_freezer(const char *freezer_dir)
{
    char dir[PATH_MAX], hold[PATH_MAX];
    if (parent_of(freezer_dir, dir, sizeof dir) < 0 ||
        nsbox_cg_join(hold, sizeof hold, dir, NULL, FREEZER_HOLD) < 0)
        return;
    if (sys->mkdir(hold, 0755) < 0 && errno != EEXIST)
        return;
    write_at(-1, hold, "freezer.state", "FROZEN");
}

/* Whether dir has a sandbox's cgroup in it (unknown: yes, so that the hold stays). */
static bool has_sandbox_cgroup(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return true;
    struct dirent *de;
    bool found = false;
    while (!found && (de = readdir(d)))
        found = de->d_type == DT_DIR && nsbox_cg_is_sandbox_name(de->d_name);
    closedir(d);
    return found;
}

/* After a sandbox's freezer cgroup in dir is gone: the hold there goes with the last sandbox
 * beside it. A sandbox made meanwhile makes it again when it first sleeps. One stat when
 * there is no hold (no sandbox here ever slept). */
static void release_hold(const char *dir)
{
    char hold[PATH_MAX];
    struct stat st;
    if (nsbox_cg_join(hold, sizeof hold, dir, NULL, FREEZER_HOLD) < 0 || stat(hold, &st) < 0 ||
        has_sandbox_cgroup(dir))
        return;
    sys->rmdir(hold);
}

static int destroy_v2(struct nsbox_cgroup *cg, struct nsbox_err *e)
{
    const char *paths[1] = {cg->path};
    bool gone[1] = {false};
    return kill_and_remove(2, paths, NULL, gone, 1, e);
}

static int destroy_v1(struct nsbox_cgroup *cg, struct nsbox_err *e)
{
    const char *paths[NSBOX_CG_V1_MAX], *ctl[NSBOX_CG_V1_MAX];
    bool gone[NSBOX_CG_V1_MAX] = {false};
    for (size_t i = 0; i < cg->n_v1; i++) {
        paths[i] = cg->v1[i].path;
        ctl[i] = cg->v1[i].controller;
    }
    char freezer_parent[PATH_MAX] = "";
    for (size_t i = 0; i < cg->n_v1; i++)
        if (nsbox_cg_list_has(ctl[i], "freezer") &&
            parent_of(paths[i], freezer_parent, sizeof freezer_parent) < 0)
            freezer_parent[0] = '\0';
    int r = kill_and_remove(1, paths, ctl, gone, cg->n_v1, e);
    if (r == 0 && freezer_parent[0])
        release_hold(freezer_parent);
    /* Keep only what is left, so that a retry does not trip over what is gone. */
    size_t k = 0;
    for (size_t i = 0; i < cg->n_v1; i++)
        if (!gone[i]) {
            if (k != i)
                cg->v1[k] = cg->v1[i];
            k++;
        }
    cg->n_v1 = k;
    return r;
}

int nsbox_cgroup_destroy(struct nsbox_cgroup *cg, struct nsbox_err *e)
{
    if (!cg || cg->version == 0)
        return 0;
    int r = cg->version == 2 ? destroy_v2(cg, e) : destroy_v1(cg, e);
    if (r < 0)
        return r;
    if (cg->dirfd >= 0)
        close(cg->dirfd);
    nsbox_cgroup_init(cg);
    return 0;
}

/* parents[i] is set and not one of the places before it */
static bool usable_place(const char *const *parents, int i)
{
    if (!parents[i][0])
        return false;
    for (int k = 0; k < i; k++)
        if (strcmp(parents[k], parents[i]) == 0)
            return false;
    return true;
}

int nsbox_cgroup_remove_by_id(const char *id, struct nsbox_err *e)
{
    if (!nsbox_cg_valid_id(id))
        return nsbox_err_set(e, NSBOX_E_INVALID, 0, "cgroup: invalid sandbox id '%s'",
                             id ? id : "(null)");
    discover();
    char name[80];
    snprintf(name, sizeof name, "nsbox-%s", id);
    int r = 0;
    /* Every place a sandbox of ours can be: below our own cgroup, below the configured parent
     * (the crashed run may have been started with or without it), and on v2 for root, below
     * the top's NSBOX_CGROUP_V2_ROOT_PARENT (a run from a session scope, use_root_parent). */
    char top_parent[PATH_MAX] = "";
    if (L.sup.version == 2 && sys->geteuid() == 0)
        nsbox_cg_join(top_parent, sizeof top_parent, L.v2_top, NSBOX_CGROUP_V2_ROOT_PARENT, NULL);
    for (int where = 0; where < 3; where++) {
        struct nsbox_cgroup cg;
        nsbox_cgroup_init(&cg);
        if (L.sup.version == 2) {
            const char *const parents[3] = {L.v2.own, L.v2.cfg, top_parent};
            if (!usable_place(parents, where) ||
                nsbox_cg_join(cg.path, sizeof cg.path, parents[where], NULL, name) < 0 ||
                access(cg.path, F_OK) < 0)
                continue;
            cg.version = 2;
        } else if (L.sup.version == 1) {
            for (size_t i = 0; i < L.n_v1; i++) {
                const char *const parents[3] = {L.v1[i].own, L.v1[i].cfg, ""};
                char *path = cg.v1[cg.n_v1].path;
                if (!usable_place(parents, where) ||
                    nsbox_cg_join(path, sizeof cg.v1[0].path, parents[where], NULL, name) < 0 ||
                    access(path, F_OK) < 0)
                    continue;
                snprintf(cg.v1[cg.n_v1].controller, sizeof cg.v1[0].controller, "%s",
                         L.v1[i].controllers);
                cg.n_v1++;
            }
            if (cg.n_v1 == 0)
                continue;
            cg.version = 1;
        }
        if (cg.version && nsbox_cgroup_destroy(&cg, e) < 0 && r == 0)
            r = -1;
    }
    return r;
}

/* ---- orphans ------------------------------------------------------------------------------ */

/* A walk of every cgroup hierarchy for "nsbox-<id>" cgroups that nothing can still use: no
 * process, no child cgroup, made before `before`. A sandbox's cgroup holds its init from a few
 * milliseconds after it is made until its teardown, which removes it; one that is empty and
 * old was left by a teardown that never ran, with the state directory that names it gone too
 * (removed by hand, or a test's). Only rmdir: the kernel refuses a cgroup that has a process,
 * so nothing alive is touched, and nothing is killed. */
struct sweep {
    time_t before;
    unsigned removed;
};

static void sweep_dir(struct sweep *w, const char *path, int depth)
{
    if (depth > 10)
        return;
    DIR *d = opendir(path);
    if (!d)
        return;
    struct dirent *de;
    bool hold_here = false;
    while ((de = readdir(d))) {
        if (de->d_type != DT_DIR || de->d_name[0] == '.')
            continue;
        char child[PATH_MAX];
        if (nsbox_cg_join(child, sizeof child, path, NULL, de->d_name) < 0)
            continue;
        if (strcmp(de->d_name, FREEZER_HOLD) == 0) {
            hold_here = true; /* released after the orphans here are gone */
            continue;
        }
        if (!nsbox_cg_is_sandbox_name(de->d_name)) {
            sweep_dir(w, child, depth + 1);
            continue;
        }
        /* a sandbox's: never walked into, removed only when a leaf, empty and old */
        struct stat st;
        char procs[16];
        if (stat(child, &st) == 0 && st.st_nlink == 2 && st.st_mtime < w->before &&
            read_small(-1, child, "cgroup.procs", procs, sizeof procs) == 0 &&
            sys->rmdir(child) == 0)
            w->removed++;
    }
    closedir(d);
    if (hold_here)
        release_hold(path);
}

unsigned nsbox_cgroup_sweep_orphans(unsigned min_age_seconds)
{
    struct sweep w = {.before = time(NULL) - (time_t)min_age_seconds, .removed = 0};
    sweep_dir(&w, sys->root, 0);
    return w.removed;
}

/* ---- freeze and stats ---------------------------------------------------------------------- */

static const char *v1_path_of(const struct nsbox_cgroup *cg, const char *controller)
{
    for (size_t i = 0; i < cg->n_v1; i++)
        if (nsbox_cg_list_has(cg->v1[i].controller, controller))
            return cg->v1[i].path;
    return NULL;
}

static int freeze_v2(const struct nsbox_cgroup *cg, bool frozen, struct nsbox_err *e)
{
    const char *val = frozen ? "1" : "0";
    if (write_at(cg->dirfd, cg->path, "cgroup.freeze", val) < 0) {
        if (errno == ENOENT)
            return nsbox_err_set(e, NSBOX_E_UNSUPPORTED, ENOENT,
                                 "cgroup: %s/cgroup.freeze does not exist: the v2 freezer needs "
                                 "Linux 5.2 or newer",
                                 cg->path);
        return write_error(e, cg->path, "cgroup.freeze", val);
    }
    /* Freezing is asynchronous: cgroup.events says "frozen 1" once every task has stopped. */
    uint64_t deadline = (uint64_t)nsbox_now_ms() + FREEZE_TIMEOUT_MS;
    unsigned us = 50;
    for (;;) {
        uint64_t v;
        if (read_keyed_at(cg->dirfd, cg->path, "cgroup.events", "frozen", &v) < 0)
            return nsbox_err_sys(e, "cgroup: read %s/cgroup.events", cg->path);
        if ((v != 0) == frozen)
            return 0;
        if ((uint64_t)nsbox_now_ms() > deadline) {
            if (frozen)
                write_at(cg->dirfd, cg->path, "cgroup.freeze", "0");
            return nsbox_err_set(e, NSBOX_E_TIMEOUT, 0, "cgroup: %s did not %s within %d ms",
                                 cg->path, frozen ? "freeze" : "thaw", FREEZE_TIMEOUT_MS);
        }
        backoff(&us);
    }
}

static int freeze_v1(const struct nsbox_cgroup *cg, bool frozen, struct nsbox_err *e)
{
    const char *dir = v1_path_of(cg, "freezer");
    if (!dir)
        return nsbox_err_set(e, NSBOX_E_UNSUPPORTED, 0,
                             "cgroup: the v1 freezer hierarchy is not mounted at "
                             "/sys/fs/cgroup/freezer: mount -t cgroup -o freezer cgroup "
                             "/sys/fs/cgroup/freezer");
    const char *val = frozen ? "FROZEN" : "THAWED";
    if (frozen)
        hold_freezer(dir);
    uint64_t deadline = (uint64_t)nsbox_now_ms() + FREEZE_TIMEOUT_MS;
    unsigned us = 50;
    for (;;) {
        /* v1 may stay in FREEZING when a task cannot be frozen right away; writing FROZEN
         * again retries those tasks (what runc does). */
        if (write_at(-1, dir, "freezer.state", val) < 0)
            return write_error(e, dir, "freezer.state", val);
        char st[32];
        if (read_small(-1, dir, "freezer.state", st, sizeof st) < 0)
            return nsbox_err_sys(e, "cgroup: read %s/freezer.state", dir);
        if (strncmp(st, val, strlen(val)) == 0)
            return 0;
        if ((uint64_t)nsbox_now_ms() > deadline) {
            if (frozen)
                write_at(-1, dir, "freezer.state", "THAWED");
            return nsbox_err_set(e, NSBOX_E_TIMEOUT, 0, "cgroup: %s did not %s within %d ms",
                                 dir, frozen ? "freeze" : "thaw", FREEZE_TIMEOUT_MS);
        }
        backoff(&us);
    }
}

int nsbox_cgroup_freeze(const struct nsbox_cgroup *cg, bool frozen, struct nsbox_err *e)
{
    if (!cg || cg->version == 0)
        return nsbox_err_set(e, NSBOX_E_INVALID, 0, "cgroup: freeze: no cgroup");
    return cg->version == 2 ? freeze_v2(cg, frozen, e) : freeze_v1(cg, frozen, e);
}

uint64_t nsbox_cgroup_oom_kills(const struct nsbox_cgroup *cg)
{
    uint64_t n = 0;
    const char *p;
    if (cg && cg->version == 2)
        read_keyed_at(cg->dirfd, cg->path, "memory.events", "oom_kill", &n);
    else if (cg && cg->version == 1 && (p = v1_path_of(cg, "memory")))
        read_keyed_at(-1, p, "memory.oom_control", "oom_kill", &n);
    return n;
}

int nsbox_cgroup_oom_fd(const struct nsbox_cgroup *cg)
{
    char path[PATH_MAX];
    const char *p;
    if (cg && cg->version == 2)
        return openat(cg->dirfd, "memory.events", O_RDONLY | O_CLOEXEC);
    if (cg && cg->version == 1 && (p = v1_path_of(cg, "memory")) &&
        (size_t)snprintf(path, sizeof path, "%s/memory.oom_control", p) < sizeof path)
        return open(path, O_RDONLY | O_CLOEXEC);
    return -1;
}

int nsbox_cgroup_stats(const struct nsbox_cgroup *cg, struct nsbox_cgroup_stats *st,
                       struct nsbox_err *e)
{
    memset(st, 0, sizeof *st);
    if (!cg || cg->version == 0)
        return nsbox_err_set(e, NSBOX_E_INVALID, 0, "cgroup: stats: no cgroup");
    char buf[64];
    uint64_t v;
    if (cg->version == 2) {
        int fd = cg->dirfd;
        const char *p = cg->path;
        read_u64_at(fd, p, "memory.current", &st->memory_current);
        read_u64_at(fd, p, "memory.peak", &st->memory_peak); /* Linux 5.19 */
        if (read_small(fd, p, "memory.max", buf, sizeof buf) >= 0)
            nsbox_cg_parse_limit(buf, &st->memory_limit);
        read_keyed_at(fd, p, "memory.events", "oom_kill", &st->oom_kills);
        read_u64_at(fd, p, "pids.current", &st->pids_current);
        if (read_small(fd, p, "pids.max", buf, sizeof buf) >= 0)
            nsbox_cg_parse_limit(buf, &st->pids_limit);
        read_keyed_at(fd, p, "cpu.stat", "usage_usec", &st->cpu_usage_usec);
        if (read_keyed_at(fd, p, "cgroup.events", "frozen", &v) == 0)
            st->frozen = v != 0;
        return 0;
    }
    const char *p;
    if ((p = v1_path_of(cg, "memory"))) {
        read_u64_at(-1, p, "memory.usage_in_bytes", &st->memory_current);
        read_u64_at(-1, p, "memory.max_usage_in_bytes", &st->memory_peak);
        if (read_small(-1, p, "memory.limit_in_bytes", buf, sizeof buf) >= 0)
            nsbox_cg_parse_limit(buf, &st->memory_limit);
        read_keyed_at(-1, p, "memory.oom_control", "oom_kill", &st->oom_kills); /* Linux 4.13 */
    }
    if ((p = v1_path_of(cg, "pids"))) {
        read_u64_at(-1, p, "pids.current", &st->pids_current);
        if (read_small(-1, p, "pids.max", buf, sizeof buf) >= 0)
            nsbox_cg_parse_limit(buf, &st->pids_limit);
    }
    if ((p = v1_path_of(cg, "cpuacct")) && read_u64_at(-1, p, "cpuacct.usage", &v) == 0)
        st->cpu_usage_usec = v / 1000; /* cpuacct counts nanoseconds */
    if ((p = v1_path_of(cg, "freezer")) && read_small(-1, p, "freezer.state", buf, sizeof buf) >= 0)
        st->frozen = strncmp(buf, "FROZEN", 6) == 0;
    return 0;
}
