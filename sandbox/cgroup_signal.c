/* Signalling the processes a cgroup.procs listed, through pidfds, only those it lists still:
 * what nsbox-oci's `kill --all` and the kill rounds of a sandbox's removal share, so that a pid
 * a listed process freed, and a host process was given, is never signalled. */
#include "cgroup_impl.h"
#include "cgroup_util.h"
#include "cleanup.h"
#include "util.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int pid_cmp(const void *a, const void *b)
{
    pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;
    return (x > y) - (x < y);
}

static char *read_procs(const char *procs, struct nsbox_err *e)
{
    char *text = nsbox_cgio_read_alloc(procs);
    if (!text)
        nsbox_err_sys(e, "cgroup: read %s", procs);
    return text;
}

/* The first max pids of text, in its order: how many. */
static size_t parse_pids(const char *text, pid_t *pids, size_t max)
{
    size_t n = 0;
    pid_t pid;
    for (const char *cur = text; n < max && nsbox_cg_next_pid(&cur, &pid);)
        pids[n++] = pid;
    return n;
}

/* How many pids text lists. */
static size_t count_pids(const char *text)
{
    size_t n = 0;
    pid_t pid;
    for (const char *cur = text; nsbox_cg_next_pid(&cur, &pid);)
        n++;
    return n;
}

pid_t *nsbox_cgsig_pids(const char *procs, size_t *n, struct nsbox_err *e)
{
    cleanup_free char *text = read_procs(procs, e);
    if (!text)
        return NULL;
    /* each pid takes two bytes at least: a digit and its newline */
    size_t cap = strlen(text) / 2 + 1;
    pid_t *pids = malloc(cap * sizeof *pids);
    if (!pids) {
        nsbox_err_sys(e, "malloc");
        return NULL;
    }
    *n = parse_pids(text, pids, cap);
    qsort(pids, *n, sizeof *pids, pid_cmp);
    return pids;
}

int nsbox_cgsig_pids_first(const char *procs, pid_t *pids, size_t max, struct nsbox_err *e)
{
    cleanup_free char *text = read_procs(procs, e);
    if (!text)
        return -1;
    size_t n = parse_pids(text, pids, max);
    return (int)(n < max ? n : count_pids(text));
}

/* ---- the pids a kill round has signalled --------------------------------------------------- */

static bool done_has(const struct nsbox_cgsig_done *d, pid_t pid)
{
    return d && d->n && bsearch(&pid, d->pids, d->n, sizeof pid, pid_cmp);
}

/* Add pids[0..n) (none of them in d): a failed allocation loses only the saving, a pid is
 * signalled again. */
static void done_add(struct nsbox_cgsig_done *d, const pid_t *pids, size_t n)
{
    if (!d || !n)
        return;
    if (d->n + n > d->cap) {
        size_t cap = (d->n + n) * 2;
        pid_t *p = realloc(d->pids, cap * sizeof *p);
        if (!p)
            return;
        d->pids = p;
        d->cap = cap;
    }
    memcpy(d->pids + d->n, pids, n * sizeof *pids);
    d->n += n;
    qsort(d->pids, d->n, sizeof *pids, pid_cmp);
}

void nsbox_cgsig_done_free(struct nsbox_cgsig_done *d)
{
    free(d->pids);
    *d = (struct nsbox_cgsig_done){0};
}

/* ---- kill(2) where no pidfd can be had ------------------------------------------------------ */

/* How many times (about 6 ms in all) a freezer that is freezing is read before the fallback
 * is given up: tasks normally stop within microseconds of the request. */
#define FROZEN_TRIES 8

enum frozen { FROZEN_NO, FROZEN_YES, FROZEN_STUCK };

/* Whether every task of the cgroup is frozen now (its freezer says so, not only that it was
 * asked): a freeze that is still under way leaves tasks that can run, and end. FROZEN_STUCK:
 * asked, and still freezing after every try (a task in uninterruptible sleep holds it back). */
static enum frozen frozen_now(const struct nsbox_cgsig *how)
{
    if (!how->freezer)
        return FROZEN_NO;
    unsigned us = 50;
    for (int k = 0; k < FROZEN_TRIES; k++) {
        char st[2048];
        bool asked;
        if (how->version == 1) {
            if (nsbox_cgio_read_small(-1, how->freezer, "freezer.state", st, sizeof st) < 0)
                return FROZEN_NO;
            if (strncmp(st, "FROZEN", 6) == 0)
                return FROZEN_YES;
            asked = strncmp(st, "FREEZING", 8) == 0;
        } else {
            uint64_t frozen = 0;
            if (nsbox_cgio_read_small(-1, how->freezer, "cgroup.events", st, sizeof st) < 0 ||
                nsbox_cg_parse_keyed(st, "frozen", &frozen) < 0)
                return FROZEN_NO;
            if (frozen)
                return FROZEN_YES;
            asked = nsbox_cgio_read_small(-1, how->freezer, "cgroup.freeze", st, sizeof st) >= 0 &&
                    st[0] == '1';
        }
        if (!asked)
            return FROZEN_NO;
        if (k + 1 < FROZEN_TRIES)
            nsbox_cgio_backoff(&us);
    }
    return FROZEN_STUCK;
}

/* The errors of pidfd_open for which kill(2) may stand in: no pidfds in this kernel (before
 * Linux 5.3), a seccomp filter that refuses the call, no descriptor left. */
static bool fallback_errno(int err)
{
    return err == ENOSYS || err == EPERM || err == EMFILE || err == ENFILE;
}

/* ---- one batch ------------------------------------------------------------------------------ */

/* The first failure of a call is its error; the others are not kept. */
static void failed(struct nsbox_err *e, bool *any, int err, const char *what, pid_t pid)
{
    if (*any)
        return;
    *any = true;
    errno = err;
    nsbox_err_sys(e, "cannot signal pid %d: %s", (int)pid, what);
}

/* The cause where kill(2) was to stand in but the cgroup did not freeze: not pidfd_open's
 * errno, which only said why kill(2) was needed. */
static void failed_unfrozen(struct nsbox_err *e, bool *any, pid_t pid)
{
    if (*any)
        return;
    *any = true;
    nsbox_err_set(e, NSBOX_E_SYS, EBUSY,
                  "cannot signal pid %d: the cgroup did not freeze (a task in uninterruptible "
                  "sleep?)",
                  (int)pid);
}

/* At most SIGNAL_BATCH descriptors open at once. */
#define SIGNAL_BATCH 256

enum way { WAY_NONE, WAY_PIDFD, WAY_KILL };

/* A batch's pids, how each is to be signalled, and its descriptors. */
struct batch {
    const pid_t *pids;
    size_t k;      /* pids[0..k) are this batch's */
    size_t open;   /* descriptors open */
    bool fallback; /* some of them go to kill(2) */
    int fds[SIGNAL_BATCH];
    enum way way[SIGNAL_BATCH];
    int open_err[SIGNAL_BATCH]; /* pidfd_open's error, for WAY_KILL */
};

static void batch_kill(struct batch *b, size_t i, int err)
{
    b->way[i] = WAY_KILL;
    b->open_err[i] = err;
    b->fallback = true;
}

/* No descriptor left (err): the last pidfd makes room, for the list's read or the next pid's
 * pidfd. Its pid, and those after it, go to the next batch; when it was the only one, to
 * kill(2), so that the batch still moves on. Whether the batch ends at it. */
static bool batch_give_back(struct batch *b, int err)
{
    size_t j = b->k - 1;
    while (b->way[j] != WAY_PIDFD)
        j--;
    close(b->fds[j]);
    b->fds[j] = -1;
    if (--b->open > 0) {
        b->k = j;
        return true;
    }
    batch_kill(b, j, err);
    b->k = j + 1;
    return false;
}

/* Open a pidfd for each of pids[0..n) that is to be signalled, until descriptors run out. */
static void batch_open(struct batch *b, size_t n, const struct nsbox_cgsig *how,
                       struct nsbox_err *e, bool *any)
{
    while (b->k < n) {
        size_t i = b->k;
        b->fds[i] = -1;
        b->way[i] = WAY_NONE;
        if (b->pids[i] == how->skip || done_has(how->done, b->pids[i])) {
            b->k++;
            continue;
        }
        b->fds[i] = nsbox_cgio_sys->pidfd_open(b->pids[i]);
        int err = errno;
        if (b->fds[i] >= 0) {
            b->way[i] = WAY_PIDFD;
            b->open++;
        } else if ((err == EMFILE || err == ENFILE) && b->open > 0) {
            if (batch_give_back(b, err))
                return;
            continue;
        } else if (fallback_errno(err)) {
            batch_kill(b, i, err);
        } else if (err != ESRCH) {
            failed(e, any, err, "pidfd_open", b->pids[i]);
        }
        b->k++;
    }
}

/* Signal what it can of pids[0..n) (n <= SIGNAL_BATCH); how many of them it has dealt with (at
 * least one): fewer than n when descriptors ran out, the rest for the next batch, once these
 * are closed. */
static size_t signal_batch(const char *procs, const pid_t *pids, size_t n,
                           const struct nsbox_cgsig *how, struct nsbox_err *e, bool *any)
{
    struct batch b = {.pids = pids};
    batch_open(&b, n, how, e, any);
    /* Each descriptor holds the process that had its pid when it was opened: another's, where
     * the listed process ended and its number was given out again. Those whose pid the cgroup
     * lists now are the listed ones: a process the signal below reaches was alive at this read,
     * so the pid read then was its own.
     * Without a descriptor, kill(2) reaches whoever has the pid when it is sent, which is the
     * listed process only if that cannot have ended since the read: so only while the cgroup
     * is frozen, read as frozen before the list is. A frozen v1 task stays frozen even with
     * SIGKILL pending, and a frozen v2 task leaves only for a fatal signal: ours (each pid is
     * signalled once) or one another sends (the OOM killer, a host's kill) in the microseconds
     * between the read and the kill, with its pid given out again in them. */
    enum frozen frozen = FROZEN_NO;
    size_t m = 0;
    struct nsbox_err re = {0};
    cleanup_free pid_t *now = NULL;
    while (b.open || b.fallback) {
        frozen = b.fallback ? frozen_now(how) : FROZEN_NO;
        now = nsbox_cgsig_pids(procs, &m, &re);
        if (now || !b.open || (re.sys_errno != EMFILE && re.sys_errno != ENFILE))
            break;
        batch_give_back(&b, re.sys_errno);
    }
    /* the cgroup gone between the reads (a child cgroup removed once empty): everyone is */
    bool gone = !now && re.sys_errno == ENOENT;
    if ((b.open || b.fallback) && !now && !gone && !*any) {
        *any = true;
        if (e)
            *e = re;
    }
    pid_t sent[SIGNAL_BATCH];
    size_t n_sent = 0;
    for (size_t i = 0; i < b.k; i++) {
        bool listed = now && bsearch(&pids[i], now, m, sizeof *now, pid_cmp);
        int r = 1; /* not sent */
        if (b.way[i] == WAY_PIDFD && listed)
            r = nsbox_cgio_sys->pidfd_send_signal(b.fds[i], how->sig);
        else if (b.way[i] == WAY_KILL && frozen == FROZEN_STUCK && !gone)
            failed_unfrozen(e, any, pids[i]);
        else if (b.way[i] == WAY_KILL && frozen == FROZEN_NO && !gone)
            failed(e, any, b.open_err[i], "pidfd_open", pids[i]);
        else if (b.way[i] == WAY_KILL && frozen == FROZEN_YES && listed)
            r = nsbox_cgio_sys->kill(pids[i], how->sig);
        int err = errno;
        if (b.way[i] == WAY_PIDFD)
            close(b.fds[i]);
        if (r == 0)
            sent[n_sent++] = pids[i];
        else if (r < 0 && err != ESRCH)
            failed(e, any, err, b.way[i] == WAY_KILL ? "kill" : "pidfd_send_signal", pids[i]);
    }
    done_add(how->done, sent, n_sent);
    return b.k;
}

int nsbox_cgsig_listed(const char *procs, const pid_t *pids, size_t n,
                       const struct nsbox_cgsig *how, struct nsbox_err *e)
{
    bool any = false;
    for (size_t i = 0; i < n;)
        i += signal_batch(procs, pids + i, n - i < SIGNAL_BATCH ? n - i : SIGNAL_BATCH, how, e,
                          &any);
    return any ? -1 : 0;
}
