/* Internals of the cgroup module (sandbox/cgroup*.c), which nothing else includes: the seam and
 * the small file helpers (cgroup_io.c), the discovered layout (cgroup.c), listed processes
 * signalled (cgroup_signal.c), the v1 freezer's hold (cgroup_hold.c). cgroup.h's functions keep
 * its nsbox_cgroup_ names in whichever of these files they live; the names here say their file:
 * nsbox_cgio_ cgroup_io.c, nsbox_cgsig_ cgroup_signal.c, nsbox_cghold_ cgroup_hold.c,
 * nsbox_cgroup_ cgroup.c. */
#ifndef NSBOX_CGROUP_IMPL_H
#define NSBOX_CGROUP_IMPL_H

#include "cgroup.h"

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* ---- cgroup_io.c ---------------------------------------------------------------------------- */

/* The seam in use: the real kernel unless a test replaced it (nsbox_cgroup_set_sys). */
extern const struct nsbox_cg_sys *nsbox_cgio_sys;
/* NULL: the real kernel. */
void nsbox_cgio_set_sys(const struct nsbox_cg_sys *s);
/* name relative to dirfd when dirfd >= 0, else dir/name (name alone when dir is NULL). The
 * whole file (up to n-1 bytes) into buf, NUL-terminated. Length or -1/errno. */
ssize_t nsbox_cgio_read_small(int dirfd, const char *dir, const char *name, char *buf, size_t n);
/* Whole file of unknown size (cgroup.procs, mountinfo), malloc'd; NULL/errno. */
char *nsbox_cgio_read_alloc(const char *path);
/* One write of val to name relative to dirfd when dirfd >= 0, else to dir/name. */
int nsbox_cgio_write_at(int dirfd, const char *dir, const char *name, const char *val);
/* Exponential backoff from 50 us to 10 ms: an exiting process is usually gone within tens of
 * microseconds, so the first retries are cheap and the later ones do not spin. */
void nsbox_cgio_backoff(unsigned *us);

/* ---- cgroup.c: the layout found by discovery ------------------------------------------------ */

#define NSBOX_CG_V1_HIERS 5 /* memory, cpu, pids, cpuacct, freezer: cgroup.c's C_COUNT */

struct nsbox_cgroup_hier {
    char controllers[32]; /* the controllers nsbox uses in this hierarchy, comma separated */
    char own[PATH_MAX];   /* mount + the caller's own cgroup */
    char cfg[PATH_MAX];   /* mount + $NSBOX_CGROUP_PARENT (or root's fallback), "" when unset */
};

struct nsbox_cgroup_layout {
    bool done;
    bool dirty; /* written by an earlier discovery: clear it before the next */
    struct nsbox_cgroup_support sup;
    char cfg_rel[PATH_MAX];
    struct nsbox_cgroup_hier v2;
    bool v2_subtree_ok; /* the parent's cgroup.subtree_control already has memory cpu pids */
    bool v2_root_parent; /* the parent is NSBOX_CGROUP_V2_ROOT_PARENT, made by the first create */
    char v2_top[PATH_MAX]; /* where v2 is mounted */
    size_t n_v1;
    struct nsbox_cgroup_hier v1[NSBOX_CG_V1_HIERS];
};

/* The layout, discovered on the first call (once per process, until the seam changes). */
const struct nsbox_cgroup_layout *nsbox_cgroup_layout(void);
/* Error for a failed write of val to dir/file, with the fix for the errno that means one. */
int nsbox_cgroup_write_error(struct nsbox_err *e, const char *dir, const char *file,
                             const char *val);

/* ---- cgroup_signal.c: listed processes signalled ---------------------------------------------- */

/* The pids the cgroup.procs file procs lists, sorted (malloc'd; an empty list is an array too,
 * *n 0); NULL with e. */
pid_t *nsbox_cgsig_pids(const char *procs, size_t *n, struct nsbox_err *e);
/* The first max pids the cgroup.procs file procs lists, in its order, into pids: how many it
 * lists (more than max when the list was cut), or -1 with e. Neither the whole list nor its
 * order kept: for a listing that is only shown (nsbox_cgroup_pids). */
int nsbox_cgsig_pids_first(const char *procs, pid_t *pids, size_t max, struct nsbox_err *e);

/* The pids a kill round has signalled, sorted: v1 lists every process in each hierarchy, and a
 * pidfd per pid and hierarchy would make the round several times slower. */
struct nsbox_cgsig_done {
    pid_t *pids;
    size_t n, cap;
};
void nsbox_cgsig_done_free(struct nsbox_cgsig_done *d);

/* What nsbox_cgsig_listed sends, and to whom not. */
struct nsbox_cgsig {
    int sig;
    pid_t skip; /* never signalled (init, signalled last); 0: none */
    /* The cgroup's freezer directory (version 1: its freezer hierarchy's; 2: the cgroup):
     * while it reads as frozen, a process whose pidfd cannot be had (no pidfd_open before
     * Linux 5.3, a seccomp filter, a pidfd and the list's second read that do not both fit:
     * one descriptor left, or none) is signalled with kill(2). NULL: never. */
    const char *freezer;
    int version;
    /* Pids skipped, and to which those signalled are added (NULL: none). */
    struct nsbox_cgsig_done *done;
};

/* Send how->sig, through a pidfd each, to every process of pids (read from the cgroup.procs
 * file procs before) that procs lists still once its pidfd is open. A listed process that has
 * ended, and whose pid a process outside the cgroup has been given, is not signalled. A process
 * gone is no error; any other failure is, the first kept in e, after every other process has
 * had its signal. */
int nsbox_cgsig_listed(const char *procs, const pid_t *pids, size_t n,
                       const struct nsbox_cgsig *how, struct nsbox_err *e);

/* ---- cgroup_hold.c: the v1 freezer's hold --------------------------------------------------- */

/* Not a valid "nsbox-<id>" name, so nothing takes it for a sandbox's cgroup. */
#define NSBOX_CGHOLD_NAME "nsbox.freezer-hold"
/* The directory a sandbox's cgroup is in (where the hold goes), into out. */
int nsbox_cghold_parent_of(const char *cg_dir, char *out, size_t n);
/* Before a sandbox in freezer_dir first sleeps. Best effort: without the hold, freezing works
 * the same, only slower. */
void nsbox_cghold_take(const char *freezer_dir);
/* After a sandbox's freezer cgroup in dir is gone: the hold there goes with the last sandbox
 * beside it. */
void nsbox_cghold_release(const char *dir);

#endif
