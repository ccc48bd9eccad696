/* Removing sandboxes' cgroups: destroy (kill what is left, then rmdir), the leftovers of a
 * sandbox killed before its teardown (remove_by_id), and orphans nothing names any more. */
#include "cgroup.h"
#include "cgroup_impl.h"
#include "cgroup_util.h"
#include "cleanup.h"
#include "util.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* How long destroy keeps killing and retrying rmdir: SIGKILLed processes normally leave in
 * microseconds, but a task in uninterruptible sleep (NFS, a stuck FUSE server) can take longer;
 * after this the cgroup is left for `nsbox gc` rather than blocking the caller forever. */
#define KILL_TIMEOUT_MS 5000

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

/* Call fn(child, depth + 1, arg) for every child cgroup directory of path. -1 if path can't be
 * read. */
static int for_each_child(const char *path, int depth, void (*fn)(const char *, int, void *),
                          void *arg)
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
            fn(child, depth + 1, arg);
    }
    closedir(d);
    return 0;
}

static int rmdir_tree(const char *path, int depth);
static void rmdir_child(const char *path, int depth, void *arg)
{
    (void)arg;
    rmdir_tree(path, depth);
}

/* rmdir path; when busy because of child cgroups, remove those depth first and retry. 0 when
 * gone (or absent). A sandbox cannot create child cgroups itself (it has no write access to its
 * cgroup), but a leftover from an older version or a human might have. */
static int rmdir_tree(const char *path, int depth)
{
    if (nsbox_cgio_sys->rmdir(path) == 0 || errno == ENOENT)
        return 0;
    int err = errno;
    if (!busy_errno(err) || depth > 16 || !has_children(path)) {
        errno = err;
        return -1;
    }
    if (for_each_child(path, depth, rmdir_child, NULL) < 0) {
        errno = err;
        return -1;
    }
    if (nsbox_cgio_sys->rmdir(path) == 0 || errno == ENOENT)
        return 0;
    return -1;
}

/* One kill round's state, passed down the tree: what is sent and who has had it, and the
 * first failure to signal (for destroy's error, should the processes outlive it). */
struct kill_walk {
    struct nsbox_cgsig how;
    struct nsbox_err err;
    bool failed;
};

/* SIGKILL every process listed in path's cgroup.procs and in its child cgroups', through
 * pidfds and only those listed still once held (nsbox_cgsig_listed): the first round reads the
 * lists while the sandbox runs, and a pid one of its processes freed meanwhile may be a host
 * process's by the time it is signalled. */
static void kill_tree(const char *path, int depth, void *arg)
{
    struct kill_walk *w = arg;
    char procs[PATH_MAX];
    if (nsbox_cg_join(procs, sizeof procs, path, NULL, "cgroup.procs") < 0)
        return;
    size_t n = 0;
    struct nsbox_err e = {0};
    cleanup_free pid_t *pids = nsbox_cgsig_pids(procs, &n, &e);
    /* a failure leaves the cgroup busy: the next round tries again, until the deadline */
    if ((!pids || nsbox_cgsig_listed(procs, pids, n, &w->how, &e) < 0) && !w->failed &&
        !(!pids && e.sys_errno == ENOENT)) {
        w->err = e;
        w->failed = true;
    }
    if (depth > 16 || !has_children(path))
        return;
    for_each_child(path, depth, kill_tree, w);
}

/* One kill round over paths[i] (NULL: gone). The first round kills without freezing:
 * usually the sandbox's init goes and the pid namespace takes everything else with it, and
 * freezing costs more than the rest of destroy together (~0.6 ms on v1). If anything is still
 * there afterwards, a later round freezes first, so that a process that keeps forking cannot
 * stay ahead of the pid list; v1 keeps a frozen task frozen even with SIGKILL pending, hence
 * the thaw afterwards (v2 lets fatal signals through but is thawed the same way). Whether a
 * process could not be signalled, the first such failure into err. */
static bool kill_round(unsigned round, int version, const char *freeze_dir,
                       const char *const *paths, size_t n, struct nsbox_err *err)
{
    const char *file = version == 1 ? "freezer.state" : "cgroup.freeze";
    bool frozen = round > 0 && freeze_dir &&
                  nsbox_cgio_write_at(-1, freeze_dir, file, version == 1 ? "FROZEN" : "1") == 0;
    struct nsbox_cgsig_done done = {0};
    struct kill_walk w = {.how = {.sig = SIGKILL,
                                  .freezer = frozen ? freeze_dir : NULL,
                                  .version = version,
                                  /* v1 lists a process in every hierarchy; v2's cgroups
                                   * list distinct ones, nothing to skip */
                                  .done = version == 1 ? &done : NULL}};
    for (size_t i = 0; i < n; i++)
        if (paths[i])
            kill_tree(paths[i], 0, &w);
    nsbox_cgsig_done_free(&done);
    if (frozen)
        nsbox_cgio_write_at(-1, freeze_dir, file, version == 1 ? "THAWED" : "0");
    if (w.failed)
        *err = w.err;
    return w.failed;
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
    /* the last round's failure to signal, the likely cause of a timeout: an earlier round's may
     * be one a later, frozen round got past (kill(2) standing in for pidfd_open) */
    struct nsbox_err sig_err = {0};
    bool sig_failed = false;
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
        struct nsbox_err round_err;
        sig_failed = (version == 1 || nsbox_cgio_write_at(-1, paths[0], "cgroup.kill", "1") < 0) &&
                     kill_round(round, version, freeze_dir, live, n, &round_err);
        if (sig_failed)
            sig_err = round_err;
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
                                     "cgroup: %s still has processes %d s after SIGKILL (%s); "
                                     "`nsbox gc` retries later",
                                     paths[0], KILL_TIMEOUT_MS / 1000,
                                     sig_failed ? sig_err.msg : "stuck in uninterruptible sleep?");
            nsbox_cgio_backoff(&us);
        }
    }
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
            nsbox_cghold_parent_of(paths[i], freezer_parent, sizeof freezer_parent) < 0)
            freezer_parent[0] = '\0';
    int r = kill_and_remove(1, paths, ctl, gone, cg->n_v1, e);
    if (r == 0 && freezer_parent[0])
        nsbox_cghold_release(freezer_parent);
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
    const struct nsbox_cgroup_layout *L = nsbox_cgroup_layout();
    char name[80];
    snprintf(name, sizeof name, "nsbox-%s", id);
    int r = 0;
    /* Every place a sandbox of ours can be: below our own cgroup, below the configured parent
     * (the crashed run may have been started with or without it), and on v2 for root, below
     * the top's NSBOX_CGROUP_V2_ROOT_PARENT (a run from a session scope, use_root_parent). */
    char top_parent[PATH_MAX] = "";
    if (L->sup.version == 2 && nsbox_cgio_sys->geteuid() == 0)
        nsbox_cg_join(top_parent, sizeof top_parent, L->v2_top, NSBOX_CGROUP_V2_ROOT_PARENT, NULL);
    for (int where = 0; where < 3; where++) {
        struct nsbox_cgroup cg;
        nsbox_cgroup_init(&cg);
        if (L->sup.version == 2) {
            const char *const parents[3] = {L->v2.own, L->v2.cfg, top_parent};
            if (!usable_place(parents, where) ||
                nsbox_cg_join(cg.path, sizeof cg.path, parents[where], NULL, name) < 0 ||
                access(cg.path, F_OK) < 0)
                continue;
            cg.version = 2;
        } else if (L->sup.version == 1) {
            for (size_t i = 0; i < L->n_v1; i++) {
                const char *const parents[3] = {L->v1[i].own, L->v1[i].cfg, ""};
                char *path = cg.v1[cg.n_v1].path;
                if (!usable_place(parents, where) ||
                    nsbox_cg_join(path, sizeof cg.v1[0].path, parents[where], NULL, name) < 0 ||
                    access(path, F_OK) < 0)
                    continue;
                snprintf(cg.v1[cg.n_v1].controller, sizeof cg.v1[0].controller, "%s",
                         L->v1[i].controllers);
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
        if (strcmp(de->d_name, NSBOX_CGHOLD_NAME) == 0) {
            hold_here = true; /* released after the orphans here are gone */
            continue;
        }
        if (!nsbox_cg_is_sandbox_name(de->d_name)) {
            sweep_dir(w, child, depth + 1);
            continue;
        }
        /* a sandbox's: never walked into, removed only when a leaf, empty, old and made by
         * us. Another user's is not ours to judge: root's v1 delegation to a user is
         * `nsbox-UID` chowned to them (the fix nsbox prints), empty whenever they run nothing,
         * and removing it would fail their next run ("No such file or directory"). */
        struct stat st;
        char procs[16];
        if (stat(child, &st) == 0 && st.st_uid == geteuid() && st.st_nlink == 2 &&
            st.st_mtime < w->before &&
            nsbox_cgio_read_small(-1, child, "cgroup.procs", procs, sizeof procs) == 0 &&
            nsbox_cgio_sys->rmdir(child) == 0)
            w->removed++;
    }
    closedir(d);
    if (hold_here)
        nsbox_cghold_release(path);
}

unsigned nsbox_cgroup_sweep_orphans(unsigned min_age_seconds)
{
    struct sweep w = {.before = time(NULL) - (time_t)min_age_seconds, .removed = 0};
    sweep_dir(&w, nsbox_cgio_sys->root, 0);
    return w.removed;
}
