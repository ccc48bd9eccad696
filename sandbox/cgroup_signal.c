/* Signalling the processes a cgroup.procs listed, through pidfds, only those it lists still:
 * what nsbox-oci's `kill --all` and the kill rounds of a sandbox's removal share, so that a pid
 * a listed process freed, and a host process was given, is never signalled. */
#include "cgroup_impl.h"
#include "cgroup_util.h"
#include "cleanup.h"
#include "util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int pid_cmp(const void *a, const void *b)
{
    pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;
    return (x > y) - (x < y);
}

/* The pids procs lists now, sorted; NULL with e (an empty list is a non-NULL array, *m 0). */
static pid_t *listed_now(const char *procs, size_t *m, struct nsbox_err *e)
{
    cleanup_free char *text = nsbox_cgio_read_alloc(procs);
    if (!text) {
        nsbox_err_sys(e, "cgroup: read %s", procs);
        return NULL;
    }
    pid_t *now = malloc((strlen(text) / 2 + 1) * sizeof *now);
    if (!now) {
        nsbox_err_sys(e, "malloc");
        return NULL;
    }
    *m = 0;
    pid_t pid;
    for (const char *cur = text; nsbox_cg_next_pid(&cur, &pid);)
        now[(*m)++] = pid;
    qsort(now, *m, sizeof *now, pid_cmp);
    return now;
}

/* One batch: at most SIGNAL_BATCH descriptors open at once. */
#define SIGNAL_BATCH 256
static int signal_batch(const char *procs, const pid_t *pids, size_t n, pid_t skip, int sig,
                        struct nsbox_err *e)
{
    int fds[SIGNAL_BATCH];
    int ret = 0;
    size_t opened = 0;
    for (; opened < n; opened++) {
        fds[opened] = pids[opened] == skip ? -1 : nsbox_cgio_sys->pidfd_open(pids[opened]);
        if (fds[opened] < 0 && pids[opened] != skip && errno != ESRCH) {
            ret = nsbox_err_sys(e, "cannot signal pid %d", (int)pids[opened]);
            break;
        }
    }
    /* Each descriptor holds the process that had its pid when it was opened: another's, where
     * the listed process ended and its number was given out again. Those whose pid the cgroup
     * lists now are the listed ones: a process the signal below reaches was alive at this read,
     * so the pid read then was its own. */
    size_t m = 0;
    cleanup_free pid_t *now = ret == 0 ? listed_now(procs, &m, e) : NULL;
    if (!now)
        ret = -1;
    for (size_t i = 0; i < opened; i++) {
        if (ret == 0 && fds[i] >= 0 && bsearch(&pids[i], now, m, sizeof *now, pid_cmp) &&
            nsbox_cgio_sys->pidfd_send_signal(fds[i], sig) < 0 && errno != ESRCH)
            ret = nsbox_err_sys(e, "cannot signal pid %d", (int)pids[i]);
        if (fds[i] >= 0)
            close(fds[i]);
    }
    return ret;
}

int nsbox_cgsig_listed(const char *procs, const pid_t *pids, size_t n, pid_t skip, int sig,
                       struct nsbox_err *e)
{
    for (size_t i = 0; i < n; i += SIGNAL_BATCH)
        if (signal_batch(procs, pids + i, n - i < SIGNAL_BATCH ? n - i : SIGNAL_BATCH, skip, sig,
                         e) < 0)
            return -1;
    return 0;
}
