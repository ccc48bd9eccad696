/* The warm pool of `nsbox run` (docs/pool.md), the I/O half; policy/pool.h has the decisions.
 *
 * Pooled sandboxes are persistent sandboxes made ahead of time, each listed by an empty file
 * "<key>-<id>" in <runtime dir>/pool/ once it is ready. A run whose spec has that key connects
 * to one's run socket and sends its init the command (agent.h); init takes exactly one run,
 * starts the command with the caller's descriptors, kills the rest of the sandbox when it ends
 * and sends the status. The supervisor, told by init, removes the sandbox and then makes the
 * replacement (`nsbox pool fill`, exec'd in the same process). */
#ifndef NSBOX_WARMPOOL_H
#define NSBOX_WARMPOOL_H

#include "nsbox.h"
#include "pool.h"
#include "spec.h"
#include "util.h"

#include <stdbool.h>
#include <stddef.h>

#define NSBOX_POOL_EMPTY 2

/* Hand the pool's eviction to the workspace layer (nsbox_workspace_set_evict): a waiting pooled
 * sandbox gives way when a sandbox that is wanted now is short of disk (docs/pool.md); and its
 * refill to the supervisors (nsbox_session_set_refill): one whose pooled sandbox was used
 * becomes `nsbox pool fill`. Called once, by main, before any command; the supervisors it
 * forks keep both. */
void nsbox_warmpool_install(void);

/* Run argv in a pooled sandbox for s. Returns 1 when it ran there (*exit_status set as by
 * nsbox_run; messages about the command, such as "command not found", printed on stderr;
 * *oom_kills: processes of the sandbox the memory limit killed), 0 when the pool is off or s
 * cannot use it (run cold), NSBOX_POOL_EMPTY when it holds nothing for s that takes the run
 * (run cold, then call nsbox_warmpool_after_cold_run), -1 on error (e). */
int nsbox_warmpool_run(const struct nsbox_spec *s, char *const argv[],
                       const struct nsbox_run_opts *o, int *exit_status, int *oom_kills,
                       struct nsbox_err *e);

/* After a cold run that found the pool empty: unless a filler is at work for this spec, start
 * a detached `nsbox pool fill` for it. Errors are not reported (the run itself succeeded). */
void nsbox_warmpool_after_cold_run(const struct nsbox_spec *s);

/* In a supervisor whose pooled sandbox was used and removed: become `nsbox pool fill` for the
 * same spec. Returns only if that could not be started. */
void nsbox_warmpool_refill_exec(const struct nsbox_spec *s);

/* Fill the pool for s up to size sandboxes (0: the config's size). *ready: how many wait now.
 * refill: the replacement of a used sandbox, which makes nothing after nsbox_warmpool_drain()
 * until a fill that is not a refill (the user's, or after a cold run) starts the pool again.
 * since_ns: a filler started by a run, at that time (CLOCK_REALTIME ns; 0 otherwise), which
 * makes nothing when a drain came after it. */
int nsbox_warmpool_fill(const struct nsbox_spec *s, unsigned size, bool refill, long long since_ns,
                        unsigned *ready, struct nsbox_err *e);
/* Delete every pooled sandbox (all keys), after stopping the refills and waiting for the fills
 * at work. Returns how many were asked to go, -1 on error. */
int nsbox_warmpool_drain(struct nsbox_err *e);
/* The config's "pool" section parses (nsbox info). */
int nsbox_warmpool_config_check(struct nsbox_err *e);
/* The pooled sandboxes, in the pool directory's order: *v (caller frees) of *n. */
struct nsbox_pool_entry {
    char id[NSBOX_POOL_ID_LEN + 1];
    char key[NSBOX_POOL_KEY_LEN + 1];
};
int nsbox_warmpool_list(struct nsbox_pool_entry **v, size_t *n, struct nsbox_err *e);
/* Fills that failed (their filler had no terminal): why, a line each, to the note. */
void nsbox_warmpool_report_failures(void);
/* Who is told what the pool has to say: a pooled command that could not start, a fill that
 * failed (cli: nsbox_say_note); nobody by default. */
void nsbox_warmpool_set_note(nsbox_note_fn *note, void *ctx);

#endif
