/* What is done to a sandbox's cgroup while it lives: freeze and thaw, the OOM count, stats. */
#include "cgroup.h"
#include "cgroup_impl.h"
#include "cgroup_util.h"
#include "cleanup.h"
#include "util.h"

#include <errno.h>
#include <stdlib.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* How long freeze waits for every task to reach the frozen state. */
#define FREEZE_TIMEOUT_MS 2000

static int read_u64_at(int dirfd, const char *dir, const char *name, uint64_t *out)
{
    char buf[64];
    if (nsbox_cgio_read_small(dirfd, dir, name, buf, sizeof buf) < 0)
        return -1;
    return nsbox_cg_parse_u64(buf, out);
}

static int read_keyed_at(int dirfd, const char *dir, const char *name, const char *key,
                         uint64_t *out)
{
    char buf[2048];
    if (nsbox_cgio_read_small(dirfd, dir, name, buf, sizeof buf) < 0)
        return -1;
    return nsbox_cg_parse_keyed(buf, key, out);
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
    if (nsbox_cgio_write_at(cg->dirfd, cg->path, "cgroup.freeze", val) < 0) {
        if (errno == ENOENT)
            return nsbox_err_set(e, NSBOX_E_UNSUPPORTED, ENOENT,
                                 "cgroup: %s/cgroup.freeze does not exist: the v2 freezer needs "
                                 "Linux 5.2 or newer",
                                 cg->path);
        return nsbox_cgroup_write_error(e, cg->path, "cgroup.freeze", val);
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
                nsbox_cgio_write_at(cg->dirfd, cg->path, "cgroup.freeze", "0");
            return nsbox_err_set(e, NSBOX_E_TIMEOUT, 0, "cgroup: %s did not %s within %d ms",
                                 cg->path, frozen ? "freeze" : "thaw", FREEZE_TIMEOUT_MS);
        }
        nsbox_cgio_backoff(&us);
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
        nsbox_cghold_take(dir);
    uint64_t deadline = (uint64_t)nsbox_now_ms() + FREEZE_TIMEOUT_MS;
    unsigned us = 50;
    for (;;) {
        /* v1 may stay in FREEZING when a task cannot be frozen right away; writing FROZEN
         * again retries those tasks (what runc does). */
        if (nsbox_cgio_write_at(-1, dir, "freezer.state", val) < 0)
            return nsbox_cgroup_write_error(e, dir, "freezer.state", val);
        char st[32];
        if (nsbox_cgio_read_small(-1, dir, "freezer.state", st, sizeof st) < 0)
            return nsbox_err_sys(e, "cgroup: read %s/freezer.state", dir);
        if (strncmp(st, val, strlen(val)) == 0)
            return 0;
        if ((uint64_t)nsbox_now_ms() > deadline) {
            if (frozen)
                nsbox_cgio_write_at(-1, dir, "freezer.state", "THAWED");
            return nsbox_err_set(e, NSBOX_E_TIMEOUT, 0, "cgroup: %s did not %s within %d ms",
                                 dir, frozen ? "freeze" : "thaw", FREEZE_TIMEOUT_MS);
        }
        nsbox_cgio_backoff(&us);
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
        if (nsbox_cgio_read_small(fd, p, "memory.max", buf, sizeof buf) >= 0)
            nsbox_cg_parse_limit(buf, &st->memory_limit);
        read_keyed_at(fd, p, "memory.events", "oom_kill", &st->oom_kills);
        read_u64_at(fd, p, "pids.current", &st->pids_current);
        if (nsbox_cgio_read_small(fd, p, "pids.max", buf, sizeof buf) >= 0)
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
        if (nsbox_cgio_read_small(-1, p, "memory.limit_in_bytes", buf, sizeof buf) >= 0)
            nsbox_cg_parse_limit(buf, &st->memory_limit);
        read_keyed_at(-1, p, "memory.oom_control", "oom_kill", &st->oom_kills); /* Linux 4.13 */
    }
    if ((p = v1_path_of(cg, "pids"))) {
        read_u64_at(-1, p, "pids.current", &st->pids_current);
        if (nsbox_cgio_read_small(-1, p, "pids.max", buf, sizeof buf) >= 0)
            nsbox_cg_parse_limit(buf, &st->pids_limit);
    }
    if ((p = v1_path_of(cg, "cpuacct")) && read_u64_at(-1, p, "cpuacct.usage", &v) == 0)
        st->cpu_usage_usec = v / 1000; /* cpuacct counts nanoseconds */
    if ((p = v1_path_of(cg, "freezer")) &&
        nsbox_cgio_read_small(-1, p, "freezer.state", buf, sizeof buf) >= 0)
        st->frozen = strncmp(buf, "FROZEN", 6) == 0;
    return 0;
}

/* ---- limits of a running sandbox, its processes ------------------------------------------- */

static int write_v1(const char *dir, const char *file, const char *val, struct nsbox_err *e)
{
    if (nsbox_cgio_write_at(-1, dir, file, val) < 0)
        return nsbox_cgroup_write_error(e, dir, file, val);
    return 0;
}

static int read_limit_at(int dirfd, const char *dir, const char *name, uint64_t *out)
{
    char buf[64];
    if (nsbox_cgio_read_small(dirfd, dir, name, buf, sizeof buf) < 0)
        return -1;
    return nsbox_cg_parse_limit(buf, out);
}

/* The swap a v1 memory cgroup allows: memory+swap less memory; 0 when either is unlimited (no
 * limit yet, or no swap accounting: memory+swap then just follows the limit). */
static uint64_t v1_swap_of(const char *dir)
{
    uint64_t mem, memsw;
    if (read_limit_at(-1, dir, "memory.limit_in_bytes", &mem) < 0 ||
        read_limit_at(-1, dir, "memory.memsw.limit_in_bytes", &memsw) < 0 || mem == UINT64_MAX ||
        memsw == UINT64_MAX || memsw < mem)
        return 0;
    return memsw - mem;
}

/* The memory+swap an update gives against the limit the cgroup will have: bounded, and at
 * least the limit, as at create (policy/ocicgroup.c). */
static int check_swap(uint64_t limit, uint64_t total, struct nsbox_err *e)
{
    if (limit == 0 || limit == UINT64_MAX)
        return nsbox_err_invalid(e, "cgroup: memory plus swap needs a memory limit: give "
                                    "memory.limit too");
    if (total < limit)
        return nsbox_err_invalid(e,
                                 "cgroup: memory plus swap %" PRIu64 " is below the memory "
                                 "limit %" PRIu64 ": give at least the limit (swap is "
                                 "memory plus swap)",
                                 total, limit);
    return 0;
}

/* The new limit and memory+swap: the one asked for, or, with the limit alone, the swap the
 * sandbox has kept (none unless its config asked, as create makes it), memory+swap moving with
 * the limit. memsw must never be below memory, so a raise writes it first and a cut writes it
 * last. No memsw: no swap accounting. */
static int update_v1_memory(const char *dir, const struct nsbox_cgroup_update *u,
                            struct nsbox_err *e)
{
    char val[32], sw[32];
    uint64_t limit = u->memory_bytes, total = 0;
    if (!u->has_memory && read_limit_at(-1, dir, "memory.limit_in_bytes", &limit) < 0)
        return nsbox_err_sys(e, "cgroup: read %s/memory.limit_in_bytes", dir);
    if (u->has_swap && check_swap(limit, u->swap_bytes, e) < 0)
        return -1;
    if (u->has_swap)
        total = u->swap_bytes;
    else if (limit)
        total = limit + v1_swap_of(dir);
    if (nsbox_cg_fmt_limit(u->memory_bytes, 1, val, sizeof val) < 0 ||
        nsbox_cg_fmt_limit(total, 1, sw, sizeof sw) < 0)
        return nsbox_err_sys(e, "cgroup: format limit");
    if (u->has_memory && nsbox_cgio_write_at(-1, dir, "memory.limit_in_bytes", val) < 0) {
        if (errno != EINVAL) /* EINVAL: above memsw; raise that first */
            return nsbox_cgroup_write_error(e, dir, "memory.limit_in_bytes", val);
        if (write_v1(dir, "memory.memsw.limit_in_bytes", sw, e) < 0)
            return -1;
        return write_v1(dir, "memory.limit_in_bytes", val, e);
    }
    if (nsbox_cgio_write_at(-1, dir, "memory.memsw.limit_in_bytes", sw) < 0 && errno != ENOENT)
        return nsbox_cgroup_write_error(e, dir, "memory.memsw.limit_in_bytes", sw);
    return 0;
}

/* v2's swap is swap alone (memory.swap.max): kept by a new limit, set from memory+swap less
 * the limit the cgroup will have. No memory.swap.max: no swap accounting. */
static int update_v2_swap(const struct nsbox_cgroup *cg, const struct nsbox_cgroup_update *u,
                          struct nsbox_err *e)
{
    uint64_t limit = u->memory_bytes;
    if (!u->has_memory && read_limit_at(cg->dirfd, cg->path, "memory.max", &limit) < 0)
        return nsbox_err_sys(e, "cgroup: read %s/memory.max", cg->path);
    if (check_swap(limit, u->swap_bytes, e) < 0)
        return -1;
    char val[32];
    snprintf(val, sizeof val, "%" PRIu64, u->swap_bytes - limit);
    if (nsbox_cgio_write_at(cg->dirfd, cg->path, "memory.swap.max", val) < 0 && errno != ENOENT)
        return nsbox_cgroup_write_error(e, cg->path, "memory.swap.max", val);
    return 0;
}

static int no_controller(struct nsbox_err *e, const char *name)
{
    return nsbox_err_set(e, NSBOX_E_UNSUPPORTED, ENOENT,
                         "cgroup: this sandbox has no %s controller, so no %s limit to change",
                         name, name);
}

static int update_v1(const struct nsbox_cgroup *cg, const struct nsbox_cgroup_update *u,
                     struct nsbox_err *e)
{
    char quota[32], period[32], pids[32];
    snprintf(quota, sizeof quota, "%lld", u->cpu_quota_us ? (long long)u->cpu_quota_us : -1LL);
    snprintf(period, sizeof period, "%llu", (unsigned long long)u->cpu_period_us);
    /* v1's pids.max spells no limit as v2 does ("max"; it refuses -1) */
    if (nsbox_cg_fmt_limit(u->pids, 2, pids, sizeof pids) < 0)
        return nsbox_err_sys(e, "cgroup: format limit");
    const char *mem = v1_path_of(cg, "memory"), *cpu = v1_path_of(cg, "cpu"),
               *pid = v1_path_of(cg, "pids");
    bool memory = u->has_memory || u->has_swap;
    if ((memory && !mem) || (u->has_cpu && !cpu) || (u->has_pids && !pid))
        return no_controller(e, memory && !mem ? "memory" : u->has_cpu && !cpu ? "cpu" : "pids");
    if (memory && update_v1_memory(mem, u, e) < 0)
        return -1;
    /* the period first: the quota is checked against it */
    if (u->has_cpu && ((u->cpu_period_us && write_v1(cpu, "cpu.cfs_period_us", period, e) < 0) ||
                       (!u->keep_quota && write_v1(cpu, "cpu.cfs_quota_us", quota, e) < 0)))
        return -1;
    if (u->has_pids && write_v1(pid, "pids.max", pids, e) < 0)
        return -1;
    return 0;
}

static int update_v2(const struct nsbox_cgroup *cg, const struct nsbox_cgroup_update *u,
                     struct nsbox_err *e)
{
    char mem[32], cpu[64], pids[32], cur[64];
    uint64_t period = u->cpu_period_us;
    const char *sp = NULL;
    if (u->has_cpu && (!period || u->keep_quota) &&
        nsbox_cgio_read_small(cg->dirfd, cg->path, "cpu.max", cur, sizeof cur) >= 0)
        sp = strchr(cur, ' ');
    if (u->has_cpu && !period) { /* keep the current period: cpu.max is "quota period" */
        period = sp ? strtoull(sp + 1, NULL, 10) : 0;
        if (!period)
            period = NSBOX_CG_CPU_PERIOD_US;
    }
    if (u->keep_quota && sp) /* keep the current quota ("max" or a number) */
        snprintf(cpu, sizeof cpu, "%.*s %llu", (int)(sp - cur), cur, (unsigned long long)period);
    else if (u->cpu_quota_us)
        snprintf(cpu, sizeof cpu, "%llu %llu", (unsigned long long)u->cpu_quota_us,
                 (unsigned long long)period);
    else
        snprintf(cpu, sizeof cpu, "max %llu", (unsigned long long)period);
    if (nsbox_cg_fmt_limit(u->memory_bytes, 2, mem, sizeof mem) < 0 ||
        nsbox_cg_fmt_limit(u->pids, 2, pids, sizeof pids) < 0)
        return nsbox_err_sys(e, "cgroup: format limits");
    const char *file = NULL, *val = NULL;
    if ((u->has_memory &&
         nsbox_cgio_write_at(cg->dirfd, cg->path, file = "memory.max", val = mem) < 0) ||
        (u->has_cpu && nsbox_cgio_write_at(cg->dirfd, cg->path, file = "cpu.max", val = cpu) < 0) ||
        (u->has_pids &&
         nsbox_cgio_write_at(cg->dirfd, cg->path, file = "pids.max", val = pids) < 0))
        return nsbox_cgroup_write_error(e, cg->path, file, val);
    return u->has_swap ? update_v2_swap(cg, u, e) : 0;
}

int nsbox_cgroup_update(const struct nsbox_cgroup *cg, const struct nsbox_cgroup_update *u,
                        struct nsbox_err *e)
{
    if (!cg || cg->version == 0)
        return nsbox_err_set(e, NSBOX_E_UNSUPPORTED, ENOENT,
                             "cgroup: this sandbox has no cgroup, so no limits to change");
    return cg->version == 2 ? update_v2(cg, u, e) : update_v1(cg, u, e);
}

int nsbox_cgroup_write_memory(const struct nsbox_cgroup *cg, const struct nsbox_cgroup_file *f,
                              size_t n, struct nsbox_err *e)
{
    const char *dir = !cg ? NULL : cg->version == 2 ? cg->path : v1_path_of(cg, "memory");
    if (!dir)
        return no_controller(e, "memory");
    for (size_t i = 0; i < n; i++)
        if (nsbox_cgio_write_at(cg->version == 2 ? cg->dirfd : -1, dir, f[i].name, f[i].value) < 0)
            return nsbox_cgroup_write_error(e, dir, f[i].name, f[i].value);
    return 0;
}

/* The path of the cgroup's cgroup.procs (v1: of its first hierarchy, which every process joins)
 * into path; -1 with e. */
static int procs_path(const struct nsbox_cgroup *cg, char *path, size_t n, struct nsbox_err *e)
{
    const char *dir = !cg ? NULL : cg->version == 2 ? cg->path : cg->n_v1 ? cg->v1[0].path : NULL;
    if (!dir || nsbox_cg_join(path, n, dir, NULL, "cgroup.procs") < 0)
        return nsbox_err_set(e, NSBOX_E_UNSUPPORTED, ENOENT, "cgroup: this sandbox has none");
    return 0;
}

int nsbox_cgroup_pids(const struct nsbox_cgroup *cg, pid_t *pids, size_t max, struct nsbox_err *e)
{
    char path[PATH_MAX];
    if (procs_path(cg, path, sizeof path, e) < 0)
        return -1;
    return nsbox_cgsig_pids_first(path, pids, max, e);
}

/* How many times kill --all reads the list again for processes it has not signalled: each
 * reading after the first finds only those forked before their parent's signal, which a frozen
 * cgroup has none of. */
#define SIGNAL_ALL_READINGS 16

int nsbox_cgroup_signal_all(const struct nsbox_cgroup *cg, pid_t skip, int sig,
                            struct nsbox_err *e)
{
    char path[PATH_MAX];
    if (procs_path(cg, path, sizeof path, e) < 0)
        return -1;
    struct nsbox_cgsig_done done = {0};
    /* kill --all freezes the cgroup first (or finds it paused): kill(2) may stand in for a
     * pidfd there */
    const struct nsbox_cgsig how = {.sig = sig,
                                    .skip = skip,
                                    .freezer =
                                        cg->version == 2 ? cg->path : v1_path_of(cg, "freezer"),
                                    .version = cg->version,
                                    .done = &done};
    struct nsbox_err later;
    int ret = 0;
    for (int k = 0; k < SIGNAL_ALL_READINGS; k++) {
        struct nsbox_err *ke = ret < 0 ? &later : e; /* the first failure is the one said */
        size_t n;
        pid_t *pids = nsbox_cgsig_pids(path, &n, ke);
        if (!pids) {
            if (ke->sys_errno != ENOENT) /* a list gone: so is everyone */
                ret = -1;
            break;
        }
        size_t before = done.n;
        if (nsbox_cgsig_listed(path, pids, n, &how, ke) < 0)
            ret = -1;
        free(pids);
        if (done.n == before)
            break;
    }
    nsbox_cgsig_done_free(&done);
    return ret;
}
