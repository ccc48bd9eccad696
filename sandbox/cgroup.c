/* cgroups v1 and v2: one cgroup per sandbox, below the caller's own cgroup (or
 * $NSBOX_CGROUP_PARENT) and nowhere else. See docs/cgroups.md for the file-by-file mapping.
 *
 * Cost model: this runs for every `nsbox run`, so the hierarchy layout is discovered once per
 * process (one read of /proc/self/cgroup plus a statfs/access per hierarchy, mountinfo only
 * when the simple layout does not match) and create/attach/destroy are a handful of
 * mkdir/open/write/rmdir calls each. Parsing lives in cgroup_util.c; everything that changes
 * the kernel's state goes through the nsbox_cg_sys seam (cgroup_io.c). Here: discovery, create
 * and attach; removal is in cgroup_remove.c, freeze and stats in cgroup_ctl.c. */
#include "cgroup.h"
#include "cgroup_impl.h"
#include "cgroup_util.h"
#include "cleanup.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

#ifndef CGROUP2_SUPER_MAGIC
#define CGROUP2_SUPER_MAGIC 0x63677270
#endif
#ifndef CGROUP_SUPER_MAGIC
#define CGROUP_SUPER_MAGIC 0x27e0eb
#endif

#define FIX_V2_DELEGATE                                                                            \
    "run nsbox as root, in a cgroup delegated to you (systemd-run --user -p Delegate=yes "       \
    "--scope ...), or with NSBOX_CGROUP_PARENT set to a delegated cgroup; see docs/cgroups.md"
#define FIX_V2_INTERNAL                                                                            \
    "set NSBOX_CGROUP_PARENT to a delegated cgroup that holds no processes itself (docs/"        \
    "cgroups.md shows how)"
/* v1's fix, with this user's id in it: typed as said, it works (a name would not be the
 * directory's owner where two users share an id, and "USER" is no one's). */
static const char *fix_v1_delegate(void)
{
    static __thread char fix[512];
    unsigned u = (unsigned)geteuid();
    snprintf(fix, sizeof fix,
             "run nsbox as root, or as root create one directory per hierarchy and chown it to "
             "the user (for c in memory cpu cpuacct pids freezer; do mkdir "
             "/sys/fs/cgroup/$c/nsbox-%u; chown -R %u /sys/fs/cgroup/$c/nsbox-%u; done) and set "
             "NSBOX_CGROUP_PARENT=/nsbox-%u",
             u, u, u, u);
    return fix;
}

/* Root on a read-only cgroup filesystem is in a container started without privileges (Docker's
 * and Podman's mount it so; a GitLab docker executor's job) or in a systemd unit with
 * ProtectControlGroups=yes: giving a cgroup to a user, or running as root, is no fix there.
 * The unit's own setting is the fix: leaving the unit would lose what it is there for. */
#define FIX_ROOT_READONLY                                                                          \
    "the cgroup filesystem is read-only here, as in a container started without --privileged "   \
    "(Docker, Podman; a GitLab docker executor without privileged = true) or a systemd unit "    \
    "with ProtectControlGroups=yes: set ProtectControlGroups=no in that unit (and Delegate=yes "  \
    "in a unit whose nsbox runs as a user), or start the container with --privileged "           \
    "--cgroupns=host (README.md's CI container)"

/* Root on a read-only cgroup filesystem: FIX_ROOT_READONLY is its fix, not a delegation. */
static bool root_readonly(const char *path)
{
    struct statvfs st;
    return nsbox_cgio_sys->geteuid() == 0 && statvfs(path, &st) == 0 && (st.f_flag & ST_RDONLY);
}

static const char *fix_v2(const char *path)
{
    return root_readonly(path) ? FIX_ROOT_READONLY : FIX_V2_DELEGATE;
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

_Static_assert(C_COUNT == NSBOX_CG_V1_HIERS, "one hierarchy at most per v1 controller");

static const char *hier_parent(const struct nsbox_cgroup_hier *h)
{
    return h->cfg[0] ? h->cfg : h->own;
}

static struct nsbox_cgroup_layout L;

void nsbox_cgroup_set_sys(const struct nsbox_cg_sys *s)
{
    nsbox_cgio_set_sys(s);
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
    cleanup_free char *mi = nsbox_cgio_read_alloc(nsbox_cgio_sys->proc_self_mountinfo);
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
static int use_root_parent(const char *mount, const char *own, struct nsbox_cgroup_hier *h)
{
    struct nsbox_cgroup_support *sup = &L.sup;
    char ctl[512], missing[64], p[PATH_MAX];
    if (nsbox_cgio_sys->geteuid() != 0 || root_readonly(mount) ||
        nsbox_cgio_read_small(-1, mount, "cgroup.controllers", ctl, sizeof ctl) < 0 ||
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
    struct nsbox_cgroup_hier *h = &L.v2;
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
    if (nsbox_cgio_read_small(-1, parent, "cgroup.controllers", ctl, sizeof ctl) < 0) {
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
                 "them in cgroup.subtree_control): %s",
                 missing, rel, fix_v2(parent));
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
        WHY("cgroup %s is not writable by uid %u: %s", rel, (unsigned)geteuid(),
            fix_v2(parent));
        sup->freezer = false;
        return 1;
    }
    char sub[512];
    L.v2_subtree_ok =
        nsbox_cgio_read_small(-1, parent, "cgroup.subtree_control", sub, sizeof sub) >= 0 &&
                      nsbox_cg_missing(sub, v2_needed, 3, missing, sizeof missing) == 0;
    if (!L.v2_subtree_ok && !is_root) {
        /* v2's no-internal-process rule: a non-root cgroup that holds processes cannot enable
         * domain controllers for its children (the write fails with EBUSY). Moving the
         * caller's processes elsewhere is not ours to do, so say it here. */
        char procs[64];
        if (nsbox_cgio_read_small(-1, parent, "cgroup.procs", procs, sizeof procs) > 0) {
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
        if (en &&
            nsbox_cg_join(mount, sizeof mount, nsbox_cgio_sys->root, v1_names[c], NULL) == 0 &&
            nsbox_cgio_sys->fs_magic(mount, &magic) == 0 && magic == CGROUP_SUPER_MAGIC) {
            hier_of[c] = en->hier;
            /* Co-mounted controllers (cpu,cpuacct) share one directory: create it once. */
            for (size_t d = 0; d < c; d++)
                if (idx_of[d] != SIZE_MAX && hier_of[d] == en->hier)
                    idx_of[c] = idx_of[d];
            if (idx_of[c] != SIZE_MAX) {
                struct nsbox_cgroup_hier *h = &L.v1[idx_of[c]];
                size_t cl = strlen(h->controllers);
                snprintf(h->controllers + cl, sizeof h->controllers - cl, ",%s", v1_names[c]);
                continue;
            }
            struct nsbox_cgroup_hier *h = &L.v1[L.n_v1];
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
                 missing, nsbox_cgio_sys->root, nsbox_cgio_sys->root);
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
            WHY("cgroup %s is not writable by uid %u: %s", parent, (unsigned)geteuid(),
                root_readonly(parent) ? FIX_ROOT_READONLY : fix_v1_delegate());
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
            nsbox_cgio_sys->root, nsbox_cgio_sys->root);
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
    if (nsbox_cgio_read_small(-1, NULL, nsbox_cgio_sys->proc_self_cgroup, buf, sizeof buf) < 0 ||
        nsbox_cg_parse_self(buf, self) < 0) {
        WHY("cannot parse %s: %s", nsbox_cgio_sys->proc_self_cgroup, strerror(errno));
        return;
    }

    /* Fixed knowledge first: unified mode has cgroup2 at the root; hybrid mode (this is what
     * systemd calls it) has v1 hierarchies plus an empty cgroup2 at root/unified. */
    unsigned long magic = 0;
    char v2mount[PATH_MAX] = "";
    bool unified = nsbox_cgio_sys->fs_magic(nsbox_cgio_sys->root, &magic) == 0 &&
                   magic == CGROUP2_SUPER_MAGIC;
    if (unified) {
        snprintf(v2mount, sizeof v2mount, "%s", nsbox_cgio_sys->root);
    } else {
        char u[PATH_MAX];
        if (nsbox_cg_join(u, sizeof u, nsbox_cgio_sys->root, "unified", NULL) == 0 &&
            nsbox_cgio_sys->fs_magic(u, &magic) == 0 && magic == CGROUP2_SUPER_MAGIC)
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

const struct nsbox_cgroup_layout *nsbox_cgroup_layout(void)
{
    discover();
    return &L;
}

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
int nsbox_cgroup_write_error(struct nsbox_err *e, const char *dir, const char *file,
                             const char *val)
{
    int err = errno;
    const char *fix = "";
    char own[600];
    int code = NSBOX_E_SYS;
    switch (err) {
    case EACCES:
    case EPERM:
    case EROFS:
        code = NSBOX_E_UNSUPPORTED;
        snprintf(own, sizeof own, ": not delegated to this user: %s",
                 L.sup.version == 2 ? FIX_V2_DELEGATE : fix_v1_delegate());
        fix = own;
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
                             L.sup.version == 2 ? FIX_V2_DELEGATE : fix_v1_delegate());
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
    if (nsbox_cgio_read_small(-1, parent, "cgroup.subtree_control", cur, sizeof cur) < 0)
        return nsbox_err_sys(e, "cgroup: read %s/cgroup.subtree_control", parent);
    size_t used = 0;
    for (size_t i = 0; i < NSBOX_ARRAY_LEN(v2_needed); i++) {
        if (nsbox_cg_list_has(cur, v2_needed[i]))
            continue;
        int w = snprintf(add + used, sizeof add - used, "%s+%s", used ? " " : "", v2_needed[i]);
        if (w > 0 && used + (size_t)w < sizeof add)
            used += (size_t)w;
    }
    if (used && nsbox_cgio_write_at(-1, parent, "cgroup.subtree_control", add) < 0) {
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
        return nsbox_cgroup_write_error(e, parent, "cgroup.subtree_control", add);
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
    if (nsbox_cgio_sys->mkdir(parent, 0755) < 0 && errno != EEXIST)
        return nsbox_err_sys(e, "cgroup: mkdir %s", parent);
    return 0;
}

/* Undo a half-made cgroup: nothing ran in it yet, so this is rmdirs. The first error wins. */
static int rollback(struct nsbox_cgroup *cg)
{
    struct nsbox_err ignored; /* the caller's e has the error that made us undo */
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
    if (nsbox_cgio_sys->mkdir(cg->path, 0755) < 0)
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
    if (lim->memory_bytes && nsbox_cgio_write_at(cg->dirfd, cg->path, "memory.max", mem) < 0) {
        nsbox_cgroup_write_error(e, cg->path, "memory.max", mem);
        return rollback(cg);
    }
    /* No swap: a memory limit that can spill to swap is not the limit the user asked for, and
     * the hosted sandboxes have none. Absent without swap accounting: nothing to limit then. */
    if (nsbox_cgio_write_at(cg->dirfd, cg->path, "memory.swap.max", "0") < 0 && errno != ENOENT) {
        nsbox_cgroup_write_error(e, cg->path, "memory.swap.max", "0");
        return rollback(cg);
    }
    if (lim->cpus && nsbox_cgio_write_at(cg->dirfd, cg->path, "cpu.max", cpu) < 0) {
        nsbox_cgroup_write_error(e, cg->path, "cpu.max", cpu);
        return rollback(cg);
    }
    if (lim->pids && nsbox_cgio_write_at(cg->dirfd, cg->path, "pids.max", pids) < 0) {
        nsbox_cgroup_write_error(e, cg->path, "pids.max", pids);
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
        const struct nsbox_cgroup_hier *h = &L.v1[i];
        char *path = cg->v1[cg->n_v1].path;
        if (nsbox_cg_join(path, sizeof cg->v1[0].path, hier_parent(h), NULL, name) < 0) {
            nsbox_err_sys(e, "cgroup: path for %s", name);
            return rollback(cg);
        }
        if (nsbox_cgio_sys->mkdir(path, 0755) < 0) {
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
            if (nsbox_cgio_write_at(-1, path, file = "memory.limit_in_bytes", val = mem) < 0 ||
                (nsbox_cgio_write_at(-1, path, file = "memory.memsw.limit_in_bytes",
                                     val = mem) < 0 &&
                 errno != ENOENT))
                goto fail;
        }
        if (nsbox_cg_list_has(h->controllers, "cpu") && lim->cpus) {
            /* Period first: the quota is checked against it (and the parent's bandwidth). */
            if (nsbox_cgio_write_at(-1, path, file = "cpu.cfs_period_us", val = period) < 0 ||
                nsbox_cgio_write_at(-1, path, file = "cpu.cfs_quota_us", val = quota) < 0)
                goto fail;
        }
        if (nsbox_cg_list_has(h->controllers, "pids") && lim->pids) {
            if (nsbox_cgio_write_at(-1, path, file = "pids.max", val = pids) < 0)
                goto fail;
        }
        continue;
    fail:
        nsbox_cgroup_write_error(e, path, file, val);
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
                                          : fix_v1_delegate());
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
        if (nsbox_cgio_write_at(cg->dirfd, cg->path, "cgroup.procs", val) < 0)
            return attach_error(e, cg->path, pid, 2);
        return 0;
    }
    for (size_t i = 0; i < cg->n_v1; i++)
        if (nsbox_cgio_write_at(-1, cg->v1[i].path, "cgroup.procs", val) < 0)
            return attach_error(e, cg->v1[i].path, pid, 1);
    return 0;
}

