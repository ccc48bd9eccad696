/* A sandbox's cgroup where the caller names it (nsbox-oci: a bundle's linux.cgroupsPath, as
 * policy/ocicgroup.h resolved it) with the limits exactly as given (cgroup.h,
 * nsbox_cgroup_create_at). The missing directories on the way are made (and, on v2, each
 * enables the controllers for the next); the last one must be new, or an empty leaf: a cgroup
 * that holds processes or other cgroups is never taken, because the sandbox's removal kills
 * what is in its cgroup. Everything that changes the kernel's state goes through the seam. */
#include "cgroup.h"
#include "cgroup_impl.h"
#include "cgroup_util.h"
#include "cleanup.h"
#include "util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef CGROUP_SUPER_MAGIC
#define CGROUP_SUPER_MAGIC 0x27e0eb
#endif

/* An existing cgroup we may take: no process and no child cgroup in it. */
static bool leaf_is_free(const char *path)
{
    char procs[16];
    if (nsbox_cgio_read_small(-1, path, "cgroup.procs", procs, sizeof procs) != 0)
        return false;
    DIR *d = opendir(path);
    if (!d)
        return false;
    bool free_ = true;
    struct dirent *de;
    while (free_ && (de = readdir(d)))
        if (de->d_type == DT_DIR && strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
            free_ = false;
    closedir(d);
    return free_;
}

/* A new v1 cpuset cgroup has no cpus and no mems, and takes no task until it has: the
 * parent's, as the kernel's cgroup.clone_children would copy them. */
static int cpuset_inherit(const char *dir, struct nsbox_err *e)
{
    static const char *const files[] = {"cpuset.cpus", "cpuset.mems"};
    char parent[PATH_MAX];
    snprintf(parent, sizeof parent, "%s", dir);
    *strrchr(parent, '/') = '\0';
    for (size_t i = 0; i < NSBOX_ARRAY_LEN(files); i++) {
        char cur[256], up[256];
        if (nsbox_cgio_read_small(-1, dir, files[i], cur, sizeof cur) < 0)
            return nsbox_err_sys(e, "cgroup: read %s/%s", dir, files[i]);
        if (cur[strspn(cur, " \n")])
            continue;
        if (nsbox_cgio_read_small(-1, parent, files[i], up, sizeof up) < 0)
            return nsbox_err_sys(e, "cgroup: read %s/%s", parent, files[i]);
        up[strcspn(up, "\n")] = '\0';
        if (up[0] && nsbox_cgio_write_at(-1, dir, files[i], up) < 0)
            return nsbox_cgroup_write_error(e, dir, files[i], up);
    }
    return 0;
}

/* v2: the controllers in need enabled for dir's children (only the missing ones written). */
static int enable_v2(const char *dir, const char *const *need, size_t n, struct nsbox_err *e)
{
    char cur[512] = "", add[96] = "";
    if (nsbox_cgio_read_small(-1, dir, "cgroup.subtree_control", cur, sizeof cur) < 0)
        return nsbox_err_sys(e, "cgroup: read %s/cgroup.subtree_control", dir);
    size_t used = 0;
    for (size_t i = 0; i < n; i++) {
        if (nsbox_cg_list_has(cur, need[i]))
            continue;
        int w = snprintf(add + used, sizeof add - used, "%s+%s", used ? " " : "", need[i]);
        if (w > 0 && used + (size_t)w < sizeof add)
            used += (size_t)w;
    }
    if (!used || nsbox_cgio_write_at(-1, dir, "cgroup.subtree_control", add) == 0)
        return 0;
    if (errno == EBUSY)
        return nsbox_err_set(e, NSBOX_E_UNSUPPORTED, EBUSY,
                             "cgroup: cannot enable '%s' in %s/cgroup.subtree_control: that "
                             "cgroup holds processes (the v2 no-internal-process rule): choose a "
                             "linux.cgroupsPath whose parents hold none",
                             add, dir);
    return nsbox_cgroup_write_error(e, dir, "cgroup.subtree_control", add);
}

struct walk {
    const struct nsbox_cgroup_place *p;
    int version;
    bool cpuset;               /* v1: the cpuset hierarchy, whose new cgroups inherit */
    const char *const *enable; /* v2: what each parent enables */
    size_t n_enable;
};

/* base + p->path, made directory by directory, into out. */
static int make_path(const struct walk *w, const char *base, char *out, size_t n,
                     struct nsbox_err *e)
{
    if (snprintf(out, n, "%s", base) >= (int)n)
        return nsbox_err_set(e, NSBOX_E_INVALID, ENAMETOOLONG, "cgroup: %s: too long", base);
    const char *s = w->p->path;
    while (*s) {
        while (*s == '/')
            s++;
        size_t len = strcspn(s, "/");
        if (!len)
            break;
        if (w->version == 2 && enable_v2(out, w->enable, w->n_enable, e) < 0)
            return -1;
        size_t used = strlen(out);
        if (used + 1 + len >= n)
            return nsbox_err_set(e, NSBOX_E_INVALID, ENAMETOOLONG, "cgroup: %s: too long", out);
        snprintf(out + used, n - used, "/%.*s", (int)len, s);
        s += len;
        bool last = !s[strspn(s, "/")];
        if (nsbox_cgio_sys->mkdir(out, 0755) < 0) {
            if (errno != EEXIST)
                return nsbox_err_sys(e, "cgroup: mkdir %s", out);
            if (last && !leaf_is_free(out))
                return nsbox_err_set(e, NSBOX_E_POLICY, EEXIST,
                                     "linux.cgroupsPath: the cgroup %s exists and holds "
                                     "processes or other cgroups: nsbox-oci takes only a new "
                                     "cgroup or an empty leaf, since removing the container "
                                     "ends what is in its cgroup; give the container a path "
                                     "of its own",
                                     out);
        } else if (w->cpuset && cpuset_inherit(out, e) < 0) {
            return -1;
        }
    }
    return 0;
}

/* The directory the path starts from in a hierarchy: its root, or the caller's own cgroup. */
static int base_of(const char *mount, const char *own, bool relative, char *out, size_t n)
{
    return snprintf(out, n, "%s", relative ? own : mount) >= (int)n ? -1 : 0;
}

#define W(file, ...)                                                                               \
    do {                                                                                           \
        snprintf(val, sizeof val, __VA_ARGS__);                                                    \
        if (nsbox_cgio_write_at(-1, dir, f = (file), val) < 0)                                     \
            return nsbox_cgroup_write_error(e, dir, f, val);                                       \
    } while (0)

/* The limits of one v1 hierarchy's cgroup dir, whose controllers are ctl. */
static int limits_v1(const struct nsbox_cgroup_place *p, const char *dir, const char *ctl,
                     struct nsbox_err *e)
{
    char val[96];
    const char *f;
    if (nsbox_cg_list_has(ctl, "memory") && p->memory_bytes) {
        /* memory first, then memory+swap to the same value: no swap (cgroup.c's create_v1) */
        W("memory.limit_in_bytes", "%" PRIu64, p->memory_bytes);
        if (nsbox_cgio_write_at(-1, dir, "memory.memsw.limit_in_bytes", val) < 0 && errno != ENOENT)
            return nsbox_cgroup_write_error(e, dir, "memory.memsw.limit_in_bytes", val);
    }
    if (nsbox_cg_list_has(ctl, "cpu")) {
        if (p->cpu_shares)
            W("cpu.shares", "%" PRIu64, p->cpu_shares);
        if (p->cpu_period_us)
            W("cpu.cfs_period_us", "%" PRIu64, p->cpu_period_us);
        if (p->cpu_quota_us > 0)
            W("cpu.cfs_quota_us", "%" PRId64, p->cpu_quota_us);
    }
    if (nsbox_cg_list_has(ctl, "pids") && p->pids)
        W("pids.max", "%" PRIu64, p->pids);
    if (nsbox_cg_list_has(ctl, "cpuset")) {
        if (p->cpus && p->cpus[0])
            W("cpuset.cpus", "%s", p->cpus);
        if (p->mems && p->mems[0])
            W("cpuset.mems", "%s", p->mems);
    }
    if (nsbox_cg_list_has(ctl, "devices"))
        for (size_t i = 0; i < p->n_dev; i++)
            W(p->dev[i].allow ? "devices.allow" : "devices.deny", "%s", p->dev[i].rule);
    return 0;
}

static int limits_v2(const struct nsbox_cgroup_place *p, const char *dir, struct nsbox_err *e)
{
    char val[96];
    const char *f;
    if (p->memory_bytes)
        W("memory.max", "%" PRIu64, p->memory_bytes);
    if (nsbox_cgio_write_at(-1, dir, "memory.swap.max", "0") < 0 && errno != ENOENT)
        return nsbox_cgroup_write_error(e, dir, "memory.swap.max", "0");
    if (p->cpu_quota_us > 0 || p->cpu_period_us) {
        char quota[24] = "max";
        if (p->cpu_quota_us > 0)
            snprintf(quota, sizeof quota, "%" PRId64, p->cpu_quota_us);
        W("cpu.max", "%s %" PRIu64, quota,
          p->cpu_period_us ? p->cpu_period_us : (uint64_t)NSBOX_CG_CPU_PERIOD_US);
    }
    if (p->cpu_weight)
        W("cpu.weight", "%" PRIu64, p->cpu_weight);
    if (p->pids)
        W("pids.max", "%" PRIu64, p->pids);
    if (p->cpus && p->cpus[0])
        W("cpuset.cpus", "%s", p->cpus);
    if (p->mems && p->mems[0])
        W("cpuset.mems", "%s", p->mems);
    return 0;
}

#undef W

static int place_v2(const struct nsbox_cgroup_layout *L, const struct nsbox_cgroup_place *p,
                    struct nsbox_cgroup *cg, struct nsbox_err *e)
{
    static const char *const need[] = {"memory", "cpu", "pids", "cpuset"};
    bool cpuset = (p->cpus && p->cpus[0]) || (p->mems && p->mems[0]);
    struct walk w = {.p = p, .version = 2, .enable = need, .n_enable = cpuset ? 4 : 3};
    char base[PATH_MAX];
    if (base_of(L->v2_top, L->v2.own, p->relative, base, sizeof base) < 0)
        return nsbox_err_set(e, NSBOX_E_INVALID, ENAMETOOLONG, "cgroup: path too long");
    if (make_path(&w, base, cg->path, sizeof cg->path, e) < 0)
        return -1;
    cg->version = 2;
    cg->dirfd = open(cg->path, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (cg->dirfd < 0)
        return nsbox_err_sys(e, "cgroup: open %s", cg->path);
    return limits_v2(p, cg->path, e);
}

/* One v1 hierarchy: its cgroup made and limited, recorded in cg. */
static int place_one_v1(const struct nsbox_cgroup_place *p, const char *mount, const char *own,
                        const char *ctl, struct nsbox_cgroup *cg, struct nsbox_err *e)
{
    struct walk w = {.p = p, .version = 1, .cpuset = nsbox_cg_list_has(ctl, "cpuset")};
    char base[PATH_MAX];
    if (cg->n_v1 == NSBOX_CG_V1_MAX || base_of(mount, own, p->relative, base, sizeof base) < 0)
        return nsbox_err_set(e, NSBOX_E_INVALID, E2BIG, "cgroup: too many hierarchies");
    char *path = cg->v1[cg->n_v1].path;
    if (make_path(&w, base, path, sizeof cg->v1[0].path, e) < 0)
        return -1;
    snprintf(cg->v1[cg->n_v1].controller, sizeof cg->v1[0].controller, "%s", ctl);
    cg->n_v1++;
    cg->version = 1;
    return limits_v1(p, path, ctl, e);
}

/* cpuset and devices, which nsbox's own cgroups leave out, where they are mounted: the config
 * can set them, and a runtime's cgroup has them (tools look for the container there). */
static int place_extra_v1(const struct nsbox_cgroup_place *p, const char *ctl,
                          struct nsbox_cgroup *cg, struct nsbox_err *e)
{
    char mount[PATH_MAX], own[PATH_MAX], buf[8192];
    unsigned long magic = 0;
    if (nsbox_cg_join(mount, sizeof mount, nsbox_cgio_sys->root, ctl, NULL) < 0 ||
        nsbox_cgio_sys->fs_magic(mount, &magic) < 0 || magic != CGROUP_SUPER_MAGIC)
        return 0;
    cleanup_free struct nsbox_cg_self *self = calloc(1, sizeof *self);
    if (!self)
        return nsbox_err_sys(e, "malloc");
    const struct nsbox_cg_self_entry *en = NULL;
    if (nsbox_cgio_read_small(-1, NULL, nsbox_cgio_sys->proc_self_cgroup, buf, sizeof buf) >= 0 &&
        nsbox_cg_parse_self(buf, self) == 0)
        en = nsbox_cg_self_find(self, ctl);
    if (!en || nsbox_cg_join(own, sizeof own, mount, en->path, NULL) < 0)
        return 0;
    return place_one_v1(p, mount, own, ctl, cg, e);
}

static int place_v1(const struct nsbox_cgroup_layout *L, const struct nsbox_cgroup_place *p,
                    struct nsbox_cgroup *cg, struct nsbox_err *e)
{
    for (size_t i = 0; i < L->n_v1; i++) {
        const struct nsbox_cgroup_hier *h = &L->v1[i];
        /* freezer last, as cgroup.c orders them: removal freezes with it */
        if (nsbox_cg_list_has(h->controllers, "freezer") &&
            (place_extra_v1(p, "cpuset", cg, e) < 0 || place_extra_v1(p, "devices", cg, e) < 0))
            return -1;
        char mount[PATH_MAX];
        snprintf(mount, sizeof mount, "%s/%.*s", nsbox_cgio_sys->root,
                 (int)strcspn(h->controllers, ","), h->controllers);
        if (place_one_v1(p, mount, h->own, h->controllers, cg, e) < 0)
            return -1;
    }
    return 0;
}

int nsbox_cgroup_create_at(const struct nsbox_cgroup_place *p, struct nsbox_cgroup *cg,
                           struct nsbox_err *e)
{
    nsbox_cgroup_init(cg);
    if (!p->path || p->path[0] != '/' || strstr(p->path, "/..") || strstr(p->path, "/./"))
        return nsbox_err_invalid(e, "cgroup: '%s' is not a normalized cgroup path",
                                 p->path ? p->path : "(null)");
    const struct nsbox_cgroup_layout *L = nsbox_cgroup_layout();
    if (!(L->sup.memory && L->sup.cpu && L->sup.pids))
        return nsbox_err_set(e, NSBOX_E_UNSUPPORTED, 0,
                             "cgroup: cannot enforce the container's cpu, memory and pids "
                             "limits: %s",
                             L->sup.why);
    int r = L->sup.version == 2 ? place_v2(L, p, cg, e) : place_v1(L, p, cg, e);
    if (r < 0) {
        struct nsbox_err ignored;
        int saved = errno;
        nsbox_cgroup_destroy(cg, &ignored);
        errno = saved;
    }
    return r;
}
