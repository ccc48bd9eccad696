/* cgroups v1 and v2: one cgroup per sandbox, created below the invoking process's own cgroup
 * (or a configured parent), never elsewhere. */
#ifndef NSBOX_CGROUP_H
#define NSBOX_CGROUP_H

#include "nsbox.h"
#include "spec.h"

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define NSBOX_CG_V1_MAX 8

struct nsbox_cgroup {
    int version;        /* 1 or 2; 0 = not created */
    char path[PATH_MAX]; /* v2: the sandbox's cgroup directory */
    int dirfd; /* v2: O_PATH|O_DIRECTORY fd of path, for clone3(CLONE_INTO_CGROUP); else -1 */
    size_t n_v1;
    struct {
        char controller[32];  /* "memory", "cpu,cpuacct" (co-mounted), "pids", "freezer" */
        char path[PATH_MAX];  /* that hierarchy's sandbox directory */
    } v1[NSBOX_CG_V1_MAX];
};

struct nsbox_cgroup_stats {
    uint64_t memory_current, memory_peak, memory_limit;
    uint64_t oom_kills;
    uint64_t pids_current, pids_limit;
    uint64_t cpu_usage_usec;
    bool frozen;
};

struct nsbox_cgroup_support {
    int version;          /* 2 if a v2 hierarchy with the controllers is usable, else 1, else 0 */
    bool memory, cpu, pids, freezer; /* controllers usable by this user */
    bool swap;            /* memory+swap limit available (v2 memory.swap.max, v1 memsw) */
    bool writable;        /* the parent is writable by this user (root, or delegated) */
    char parent[PATH_MAX]; /* where sandboxes would be created (first hierarchy) */
    char why[512];        /* when something is missing: what and the fix */
};

/* What this machine and this user can do; never fails. version says which hierarchy nsbox
 * would use; memory/cpu/pids are true only when that hierarchy has them AND this user can
 * create cgroups with them there (so `memory && cpu && pids` is "limits are enforceable").
 * Computed once per process (cached; the first call must not race with another thread): the
 * parent is the caller's own cgroup in each hierarchy, or $NSBOX_CGROUP_PARENT (a path relative
 * to the hierarchy root, e.g. "/nsbox"). On v2, root whose own cgroup holds processes (a login
 * session, a service) uses NSBOX_CGROUP_V2_ROOT_PARENT below the hierarchy's root instead, as
 * container engines do. See docs/cgroups.md. */
#define NSBOX_CGROUP_V2_ROOT_PARENT "/nsbox"
void nsbox_cgroup_detect(struct nsbox_cgroup_support *sup);

/* An empty handle (version 0, dirfd -1). destroy() of an empty handle does nothing. */
void nsbox_cgroup_init(struct nsbox_cgroup *cg);

/* Create "nsbox-<id>" with the limits (0 in a field: no limit for it; swap is always off).
 * Fails with NSBOX_E_UNSUPPORTED and the fix when the user cannot create cgroups (no
 * delegation) or a needed controller is missing; on any failure nothing is left behind and cg
 * is empty. v2: cg->dirfd is ready for clone3(CLONE_INTO_CGROUP). */
int nsbox_cgroup_create(const char *id, const struct nsbox_limits *lim, struct nsbox_cgroup *cg,
                        struct nsbox_err *e);
/* nsbox-oci: the cgroup at a path the caller names (a bundle's linux.cgroupsPath, resolved
 * and checked by policy/ocicgroup.h) with its limits exactly as given, in every hierarchy nsbox
 * uses and, on v1, cpuset and devices where they are mounted. Directories missing on the way
 * are made (v2: each enables memory, cpu, pids, and cpuset when asked, for the next); the last
 * must be new or an empty leaf (NSBOX_E_POLICY otherwise: removal kills what is in it). destroy
 * removes that last directory only. */
struct nsbox_cgroup_devrule {
    bool allow;    /* devices.allow, else devices.deny */
    char rule[48]; /* "c 1:3 rwm", "a *:* rwm" */
};
struct nsbox_cgroup_place {
    const char *path; /* "/a/b": from each hierarchy's root, or below the caller's own cgroup */
    bool relative;
    uint64_t memory_bytes, pids;            /* 0: no limit */
    int64_t cpu_quota_us;                   /* <= 0: none */
    uint64_t cpu_period_us;                 /* 0: the kernel's */
    uint64_t cpu_shares, cpu_weight;        /* v1 cpu.shares, v2 cpu.weight; 0: the kernel's */
    const char *cpus, *mems;                /* cpuset; NULL or "": the parent's */
    const struct nsbox_cgroup_devrule *dev; /* v1 devices controller, in this order */
    size_t n_dev;
};
int nsbox_cgroup_create_at(const struct nsbox_cgroup_place *p, struct nsbox_cgroup *cg,
                           struct nsbox_err *e);
/* Move pid into the cgroup (all v1 hierarchies, or v2). */
int nsbox_cgroup_attach(const struct nsbox_cgroup *cg, pid_t pid, struct nsbox_err *e);
/* Kill every process left in it, then remove it. Idempotent; cg->version becomes 0. */
int nsbox_cgroup_destroy(struct nsbox_cgroup *cg, struct nsbox_err *e);
/* Remove the leftover cgroup of sandbox id (after a SIGKILL): "nsbox-<id>" below the caller's
 * own cgroup and below $NSBOX_CGROUP_PARENT, processes killed as in destroy. Idempotent. */
int nsbox_cgroup_remove_by_id(const char *id, struct nsbox_err *e);
/* Remove, in every hierarchy, the "nsbox-<id>" cgroups that have no process and no child
 * cgroup and were made more than min_age_seconds ago: leftovers whose state directory is gone
 * too, which remove_by_id never hears of. Only rmdir (nothing is killed). Returns how many. */
unsigned nsbox_cgroup_sweep_orphans(unsigned min_age_seconds);
#define NSBOX_GC_ORPHAN_AGE 600 /* `nsbox gc`'s min_age_seconds */
/* Freeze (true) or thaw and wait until the kernel reports it done (at most 2 s, then
 * NSBOX_E_TIMEOUT and thawed again). NSBOX_E_UNSUPPORTED without a freezer. */
int nsbox_cgroup_freeze(const struct nsbox_cgroup *cg, bool frozen, struct nsbox_err *e);
/* New limits for a running sandbox (nsbox-oci update). A field whose has_ flag is false stays
 * as it is; a value of 0 removes that limit. The cpu as runc gives it: a quota of microseconds
 * per period (period 0: the current one). swap_bytes is memory plus swap (runc's and the OCI
 * config's memory.swap), bounded: at least the limit the cgroup will have, which must be one. */
struct nsbox_cgroup_update {
    bool has_memory, has_swap, has_cpu, has_pids;
    uint64_t memory_bytes, swap_bytes;
    uint64_t cpu_quota_us, cpu_period_us;
    uint64_t pids;
    bool keep_quota; /* with has_cpu: the period alone changes (runc's quota of 0) */
};
/* Write them (v1: every hierarchy that has the controller). Without swap_bytes the swap the
 * sandbox has is kept (none unless its config asked): v1's memory+swap moves with the memory
 * limit, v2's memory.swap.max (swap alone) stays. Without swap accounting swap is left out. The
 * first refusal is the error (naming the file), the rest is not tried. */
int nsbox_cgroup_update(const struct nsbox_cgroup *cg, const struct nsbox_cgroup_update *u,
                        struct nsbox_err *e);
/* Files of the memory controller and their values (nsbox-oci: reservation, swap, swappiness,
 * the OOM killer, TCP buffers), written in order into the cgroup's memory directory (v2 the
 * cgroup, v1 its memory hierarchy's); the first refusal is the error, naming the file. */
struct nsbox_cgroup_file {
    const char *name, *value;
};
int nsbox_cgroup_write_memory(const struct nsbox_cgroup *cg, const struct nsbox_cgroup_file *f,
                              size_t n, struct nsbox_err *e);
/* The host pids of the processes in the cgroup (v2 cgroup.procs; v1 that of its first
 * hierarchy, which every process joins), the first max in the file's order (nsbox-oci's ps
 * shows them: it needs them neither sorted nor all): how many the cgroup has, which is more
 * than max when the list was cut, or -1. */
int nsbox_cgroup_pids(const struct nsbox_cgroup *cg, pid_t *pids, size_t max, struct nsbox_err *e);
/* Send sig to every process of the cgroup but the pid skip (init, signalled last), each once,
 * through a pidfd (nsbox-oci's kill --all): the whole list, in batches, read again until a
 * reading lists none not signalled yet (a process forked meanwhile). A listed process that has
 * ended since, and whose pid another process has been given, is never signalled. A process
 * gone is no error, nor a cgroup.procs gone (everyone is); any other failure is, the first
 * kept in e, after the others have had their signal. Where no pidfd can be had (before Linux
 * 5.3, a seccomp filter, a pidfd and the list's second read that do not both fit: one
 * descriptor left, or none), kill(2) stands in while the cgroup is frozen. */
int nsbox_cgroup_signal_all(const struct nsbox_cgroup *cg, pid_t skip, int sig,
                            struct nsbox_err *e);
/* Missing files leave their field 0 (an old kernel without memory.peak, v1 without cpuacct).
 * memory_limit/pids_limit are UINT64_MAX when unlimited. */
/* Only the number of processes the memory limit killed (one file): for hot paths. */
uint64_t nsbox_cgroup_oom_kills(const struct nsbox_cgroup *cg);
/* The file with the OOM kill count ("oom_kill N": v2 memory.events, v1 memory.oom_control),
 * open for reading with pread at 0; -1 without a memory controller. */
int nsbox_cgroup_oom_fd(const struct nsbox_cgroup *cg);
int nsbox_cgroup_stats(const struct nsbox_cgroup *cg, struct nsbox_cgroup_stats *st,
                       struct nsbox_err *e);

/* ---- test seam ------------------------------------------------------------------------------
 * Every place where cgroup.c touches the kernel's cgroup interface beyond reading files goes
 * through this table, so unit tests run the v2 logic against a fake tree in a temp dir (a
 * fake mkdir creates the interface files, a fake write enforces the kernel's rules). */
struct nsbox_cg_sys {
    const char *root;               /* "/sys/fs/cgroup" */
    const char *proc_self_cgroup;   /* "/proc/self/cgroup" */
    const char *proc_self_mountinfo;
    int (*fs_magic)(const char *path, unsigned long *magic); /* statfs().f_type */
    int (*mkdir)(const char *path, mode_t mode);
    int (*rmdir)(const char *path);
    /* One write(2) of data to name relative to dirfd (AT_FDCWD for an absolute name): the
     * kernel treats each write as one command, so it must not be split. -1 and errno. */
    int (*write_file)(int dirfd, const char *name, const char *data, size_t len);
    /* pidfd_open(pid, 0) and pidfd_send_signal(pidfd, sig, NULL, 0): -1 and errno. */
    int (*pidfd_open)(pid_t pid);
    int (*pidfd_send_signal)(int pidfd, int sig);
    /* kill(2), where no pidfd can be had and the cgroup is frozen: -1 and errno. */
    int (*kill)(pid_t pid, int sig);
    uid_t (*geteuid)(void); /* who decides whether root's fallback parent applies */
};
/* Replace the seam (NULL restores the real kernel) and forget the cached discovery. */
void nsbox_cgroup_set_sys(const struct nsbox_cg_sys *sys);

#endif
