/* Internals of the supervisor (service/supervisor.c and sup*.c), shared between its files:
 * supervisor.c (the event loop and the supervisor's life), sup.c (its state: processes, their
 * logs, clients and replies), sup_requests.c (the requests), sup_files.c (file operations and the
 * jobs that run the long ones), sup_pool.c (a pooled sandbox), sup_setup.c (the set-up script and
 * handing out the id) and session.c (creating a sandbox: forking its supervisor). Not a public
 * interface. */
#ifndef NSBOX_SUPERVISOR_IMPL_H
#define NSBOX_SUPERVISOR_IMPL_H

#include "supervisor.h"
#include "agent.h"
#include "pool.h"
#include "proto.h"
#include "sandbox.h"

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define MAX_CLIENTS 64
#define ACCEPT_PAUSE_MS 100 /* after an accept that failed for want of descriptors or memory */
/* File operations that may take long (a recursive remove, a write from a stream or of a big
 * file) run in a child of the supervisor, so that the loop goes on serving the other clients,
 * the ttl and the logs meanwhile: one per connection at most, so at most MAX_CLIENTS. */
#define FILE_JOB_MIN_BYTES (8u << 20) /* a write from a regular file smaller than this: inline */
#define MAX_PROCS 256
/* Connections at work at once (an exec or start until its reply, a wait, a long file
 * operation), of MAX_CLIENTS: the rest stay for rm, inspect, ls's look and the short file
 * operations, which are answered at once. 64 execs took every connection, and rm failed. Of
 * those, waits (which last as long as a server runs) take MAX_WAITS at most, so that commands
 * always find room. */
#define MAX_AT_WORK 48
#define MAX_WAITS 32
/* Kept per stream of a background process: the end of its output. Small enough that a `logs`
 * reply stays under the 1 MiB message limit even if every byte needs a \\uXXXX escape. */
#define LOG_MAX (64u << 10)
/* Of a failing setup script's output, what goes into the error: its end, as much as the error's
 * message holds beside the rest (the message was cut at its own end, so that of a script that
 * wrote more, the lines that said what failed were lost). */
#define SETUP_TAIL_MAX (NSBOX_ERR_MSG_MAX - 256)
/* Background output is read at most LOG_RATE bytes a second per sandbox (counted in windows of
 * LOG_WINDOW_MS), and LOG_ROUND per stream in one poll round; beyond that its writers wait on
 * their full pipes. Reading costs the supervisor's CPU, which no cgroup of the sandbox bounds: a
 * `cat /dev/zero` in the background took a whole host CPU beside the sandbox's quota, and one
 * stream read until it ran dry held every request. The budget is shared among the streams
 * that have output (see loop()): read in slot order, four `yes` took every window and the
 * streams of higher slots were never read, their writers blocked for good. A round gives each
 * ready stream its part of what is left, at least LOG_CHUNK (one read: parts of a few bytes
 * would cost a read each), and begins after the stream last read, so that when the budget ends
 * within a round, the streams it did not reach come first in the next. */
#define LOG_RATE (8u << 20)
#define LOG_WINDOW_MS 100
#define LOG_ROUND (256u << 10)
#define LOG_CHUNK (16u << 10)
/* A client must send (or take) a whole message within this: the supervisor serves every
 * connection from one thread, and one that dribbles a message must not hold the others, the
 * ttl and the timeouts (nsbox_proto_frame_limit). */
#define CLIENT_FRAME_MS 5000

/* ---- state ---------------------------------------------------------------------------------- */

struct ring {
    char *buf;
    size_t len, start; /* circular, at most LOG_MAX */
    uint64_t total;    /* bytes ever put: the stream offset after the last one kept; more
                        * than len: the start was dropped */
};

struct proc {
    bool used, background, spawned, running, tty;
    bool orphaned; /* its exec client left before init said it started */
    int pending_sig; /* a signal from its client that came before its pid */
    uint32_t seq;
    int pid, exit_code;
    int client; /* index in clients[] waiting for the result (exec), -1 */
    char tag[65];
    int64_t deadline;
    uint64_t timeout_ms;
    bool timed_out, oom_killed;
    uint64_t oom_before;
    char cmdline[256];
    int out_fd, err_fd; /* background: read ends of its stdout/stderr */
    struct ring out, err;
};

struct client {
    int fd; /* -1: free */
    int waiting; /* proc index of a pending exec/start, -1 */
    int waits;   /* proc index of the background process whose end it waits for (wait), -1 */
    char wait_tag[65]; /* that request's tag, for its reply */
    bool holder; /* sent "hold": when it closes, the sandbox is deleted */
    bool broken; /* a reply to it failed (not taken within CLIENT_FRAME_MS, or it hung up):
                  * nothing more is read from or sent to it; closed at the loop's next turn */
    pid_t job;     /* a file operation of its, running in a child that replies to it; 0 */
    int job_pidfd; /* that child's pidfd, polled instead of the client until it ends */
};

struct sup {
    struct nsbox_sandbox sb;
    const struct nsbox_spec *spec;
    int agent, listen_fd, sfd, ttl_fd, idle_fd, ws_fd;
    struct client clients[MAX_CLIENTS];
    struct proc procs[MAX_PROCS];
    int nprocs; /* slots ever taken: procs[nprocs..] are untouched, and never read, so that
                 * their pages (about 120 KiB in all) are never faulted in */
    uint32_t next_seq;
    int64_t created, expires;
    bool sleeping;
    unsigned sleeps;
    int64_t last_wake_us; /* how long the last thaw took, until the cgroup said THAWED; -1 */
    int64_t log_window;   /* when the current window of LOG_RATE began */
    size_t log_left;      /* bytes of background output it may still read in it */
    int log_next;         /* the stream read first in the next round (2 * slot, + 1 for stderr) */
    int owner_fd;         /* create --owner-pid: a pidfd; the sandbox ends with that process */
    int64_t accept_after; /* out of descriptors: no accept before this (nsbox_now_ms) */
    int owner_pid;
    int ready_fd; /* the socket to whoever waits for the id (create, a pool fill), until it
                   * has it */
    int out_fd;   /* nsbox create's stdout, until the id is written there (give_id), or -1 */
    const struct nsbox_id_out *out; /* what goes around the id there; NULL: a pool fill */
    /* A pooled sandbox (pool.md) waits for one run, which init takes on the run socket; then
     * the sandbox is deleted and its supervisor makes the replacement. */
    char pool_key[NSBOX_POOL_KEY_LEN + 1];
    unsigned long config_reads; /* the config file's read it was forked with (os/config.h) */
    bool claimed;
    bool quit;
    char tomb_later[NSBOX_TOMB_REASON_MAX + 1]; /* a record not written yet (tomb) */
};

/* ---- supervisor.c ---------------------------------------------------------------------------- */

/* What the supervisor process is given by nsbox_session_create. */
struct nsbox_supervisor_args {
    const struct nsbox_spec *spec;
    const char *image; /* the stored image the caller resolved spec's reference to, or NULL */
    int ready_fd;      /* the socket to whoever waits for the id */
    int owner_fd, owner_pid;
    const char *pool_key; /* NULL: not pooled */
    int out_fd;           /* create's stdout, or -1 */
    const struct nsbox_id_out *out;
    nsbox_session_refill_fn refill; /* what a used pooled sandbox's supervisor becomes */
};
/* The supervisor process. Never returns. */
__attribute__((noreturn)) void nsbox_supervisor_main(const struct nsbox_supervisor_args *a);

/* ---- sup.c: state, processes, logs, clients ------------------------------------------------- */

/* Record why the sandbox goes, for later requests (now, or after the teardown). */
void nsbox_sup_tomb(struct sup *S, const char *reason);
/* The log from stream offset from on (UINT64_MAX: all kept) as valid UTF-8 text (malloc'd). */
char *nsbox_sup_ring_text(const struct ring *r, uint64_t from, bool more, uint64_t *end,
                          bool *lost);
/* Read what fd has into r, at most max bytes; at its end, close it. Returns the bytes read. */
size_t nsbox_sup_drain(int *fd, struct ring *r, size_t max);
void nsbox_sup_set_timer(int fd, uint64_t seconds);
/* Activity: wake the sandbox, restart the idle timer. */
void nsbox_sup_touch(struct sup *S);
/* Send r (freed) to client ci; a reply that fails marks the client broken. */
void nsbox_sup_reply(struct sup *S, int ci, cJSON *r, const int *fds, size_t nfds);
void nsbox_sup_reply_err(struct sup *S, int ci, const char *tag, const struct nsbox_err *e);
void nsbox_sup_reply_wait(struct sup *S, int ci, const char *tag, const struct proc *p);
void nsbox_sup_close_client(struct sup *S, int ci);
bool nsbox_sup_client_waits(const struct client *c);
bool nsbox_sup_refuse_if_waiting(struct sup *S, int ci, const char *tag);
bool nsbox_sup_refuse_if_busy(struct sup *S, int ci, const char *tag, bool wait);
void nsbox_sup_free_proc(struct proc *p);
struct proc *nsbox_sup_new_proc(struct sup *S, int *idx);
struct proc *nsbox_sup_proc_by_seq(struct sup *S, uint32_t seq);
struct proc *nsbox_sup_proc_by_pid(struct sup *S, int pid);
uint64_t nsbox_sup_oom_kills(struct sup *S);
/* A listening unix socket dir/name, mode 0600 from the start. */
int nsbox_sup_listen_in_dir(const char *dir, const char *name, int type, int backlog,
                            struct nsbox_err *e);
/* The first stop signal that came (not SIGCHLD), or 0. */
int nsbox_sup_stop_signal(struct sup *S);

/* ---- sup_requests.c, sup_files.c ------------------------------------------------------------ */

/* Parse, check and answer one request of client ci (fds: what came with it, closed here). */
void nsbox_sup_requests_handle(struct sup *S, int ci, const char *buf, size_t len, int fds[3]);
/* A file operation: at once, or in a job (a child) when it may take long. */
void nsbox_sup_files_handle(struct sup *S, int ci, const struct nsbox_request *rq, int in_fd);
void nsbox_sup_files_end_job(struct sup *S, int ci);
void nsbox_sup_files_reap_jobs(struct sup *S);
void nsbox_sup_files_kill_jobs(struct sup *S);

/* ---- sup_pool.c ------------------------------------------------------------------------------ */

int nsbox_sup_pool_entry_create(struct sup *S, struct nsbox_err *e);
void nsbox_sup_pool_entry_remove(struct sup *S);
int nsbox_sup_pool_listen(struct sup *S, struct nsbox_err *e);
void nsbox_sup_pool_on_event(const struct nsbox_agent_event *ev, void *arg);
int nsbox_sup_pool_retire(struct sup *S);
int nsbox_sup_pool_gate(struct sup *S, const struct nsbox_request *rq, struct nsbox_err *e);

/* ---- sup_setup.c ----------------------------------------------------------------------------- */

int nsbox_sup_setup_abandoned(struct sup *S, const char *when, struct nsbox_err *e);
int nsbox_sup_setup_run_script(struct sup *S, struct nsbox_err *e);
int nsbox_sup_setup_open_listen(struct sup *S, struct nsbox_err *e);
int nsbox_sup_setup_give_id(struct sup *S, struct nsbox_err *e);
bool nsbox_sup_setup_report_ready(int fd, const char *line);
void nsbox_sup_setup_protect_init(pid_t init);

#endif
