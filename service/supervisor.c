/* Supervisor of a persistent sandbox (see supervisor.h, docs/protocol.md). */
#define _GNU_SOURCE
#include "supervisor.h"
#include "files_impl.h"
#include "agent.h"
#include "cleanup.h"
#include "cmdline.h"
#include "files.h"
#include "paths.h"
#include "pool.h"
#include "proto.h"
#include "sandbox.h"
#include "util.h"
#include "workspace.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

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
#define SETUP_TAIL_MAX (NSBOX_ERR_MSG_MAX - 192)
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

/* ---- small helpers -------------------------------------------------------------------------- */

static int64_t wall_s(void)
{
    return (int64_t)time(NULL);
}

/* The warm pool's refill, handed down by it (supervisor.h). */
static nsbox_session_refill_fn refill;

void nsbox_session_set_refill(nsbox_session_refill_fn fn)
{
    refill = fn;
}

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
    bool claimed;
    bool quit;
    char tomb_later[NSBOX_TOMB_REASON_MAX + 1]; /* a record not written yet (tomb) */
};

/* The sandbox's record for later requests ("was deleted by rm", state.h). Where the state
 * lives has no inode left, the record's file cannot be made until the sandbox's own files are
 * gone: it is written again after the teardown, else later requests would say that the sandbox
 * never existed. */
static void tomb(struct sup *S, const char *reason)
{
    if (nsbox_tombstone_write(S->sb.st.id, reason) < 0)
        snprintf(S->tomb_later, sizeof S->tomb_later, "%s", reason);
}

/* noinline: inlined into drain(), gcc's -Warray-bounds mistakes the n >= LOG_MAX branch for a
 * read past drain's 16 KiB buffer, which it can never take there. */
__attribute__((noinline)) static void ring_put(struct ring *r, const char *data, size_t n)
{
    r->total += n;
    if (!r->buf && !(r->buf = malloc(LOG_MAX)))
        return;
    if (n >= LOG_MAX) { /* only the last LOG_MAX bytes can survive */
        memcpy(r->buf, data + n - LOG_MAX, LOG_MAX);
        r->start = 0;
        r->len = LOG_MAX;
        return;
    }
    size_t drop = r->len + n > LOG_MAX ? r->len + n - LOG_MAX : 0;
    if (drop) {
        r->start = (r->start + drop) % LOG_MAX;
        r->len -= drop;
    }
    for (size_t done = 0; done < n;) {
        size_t pos = (r->start + r->len) % LOG_MAX;
        size_t chunk = LOG_MAX - pos < n - done ? LOG_MAX - pos : n - done;
        memcpy(r->buf + pos, data + done, chunk);
        done += chunk;
        r->len += chunk;
    }
}

static unsigned char ring_at(const struct ring *r, size_t i)
{
    return (unsigned char)r->buf[(r->start + i) % LOG_MAX];
}

/* How many of the n bytes kept from index skip on are, at their end, the start of a UTF-8
 * sequence that is not complete yet: a follower gets them with the rest of the character. */
static size_t utf8_partial_tail(const struct ring *r, size_t skip, size_t n)
{
    for (size_t k = 1; k <= 4 && k <= n; k++) {
        unsigned char c = ring_at(r, skip + n - k);
        if ((c & 0xC0) == 0x80)
            continue;
        size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
        return need > k ? k : 0;
    }
    return 0;
}

/* The log from stream offset `from` on (UINT64_MAX: all that is kept) as JSON text: NUL becomes
 * '?', bytes that are not UTF-8 U+FFFD (docs/protocol.md). A client's JSON parser refuses raw
 * invalid bytes: a sandbox could have hidden its logs. *end: the offset after the bytes given;
 * *lost: output from `from` on was dropped before it could be given. more: more may follow, so
 * an incomplete character at the end waits for its other bytes. */
static char *ring_text(const struct ring *r, uint64_t from, bool more, uint64_t *end, bool *lost)
{
    uint64_t first = r->total - r->len;
    if (from == UINT64_MAX)
        from = 0; /* all of it: what was dropped counts as lost */
    *lost = from < first;
    if (from < first)
        from = first;
    if (from > r->total)
        from = r->total; /* an offset from the future: nothing yet */
    size_t skip = (size_t)(from - first), n = r->len - skip;
    if (more)
        n -= utf8_partial_tail(r, skip, n);
    *end = from + n;
    cleanup_free char *raw = malloc(n + 1);
    char *s = malloc(3 * n + 1); /* each invalid byte: 3 bytes of U+FFFD */
    if (!raw || !s) {
        free(s);
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        raw[i] = (char)ring_at(r, skip + i);
        if (raw[i] == '\0')
            raw[i] = '?';
    }
    files_utf8(s, 3 * n + 1, raw, n);
    return s;
}

static void set_timer(int fd, uint64_t seconds)
{
    struct itimerspec its = {.it_value = {.tv_sec = (time_t)seconds}};
    timerfd_settime(fd, 0, &its, NULL);
}

static void touch(struct sup *S)
{
    if (S->sleeping) {
        struct nsbox_err e;
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        if (nsbox_cgroup_freeze(&S->sb.cg, false, &e) == 0) {
            S->sleeping = false;
            clock_gettime(CLOCK_MONOTONIC, &b);
            S->last_wake_us = (int64_t)(b.tv_sec - a.tv_sec) * 1000000 +
                              (b.tv_nsec - a.tv_nsec) / 1000;
        }
    }
    if (S->spec->idle_timeout_seconds)
        set_timer(S->idle_fd, S->spec->idle_timeout_seconds);
}

static void send_reply(struct sup *S, int ci, cJSON *r, const int *fds, size_t nfds)
{
    if (!r)
        return;
    struct nsbox_err e;
    struct client *c = ci >= 0 ? &S->clients[ci] : NULL;
    /* A reply cut short leaves the stream mid-message: the client cannot read another one.
     * Without this, each request it had queued cost the supervisor CLIENT_FRAME_MS again. */
    if (c && c->fd >= 0 && !c->broken && nsbox_proto_send_obj(c->fd, r, fds, nfds, &e) < 0)
        c->broken = true;
    cJSON_Delete(r);
}

static void reply_err(struct sup *S, int ci, const char *tag, const struct nsbox_err *e)
{
    send_reply(S, ci, nsbox_reply_error(tag, e->code ? e->code : NSBOX_E_SYS, e->msg), NULL, 0);
}

static void close_client(struct sup *S, int ci)
{
    struct client *c = &S->clients[ci];
    if (c->fd < 0)
        return;
    if (c->waiting >= 0) {
        /* The client of a running exec went away: the command goes with it. */
        struct proc *p = &S->procs[c->waiting];
        struct nsbox_err e;
        if (p->used && p->running && p->spawned && p->pid > 1)
            nsbox_agent_kill(S->agent, p->pid, SIGKILL, &e);
        else if (p->used && !p->background)
            p->orphaned = true; /* killed when init reports its pid */
        p->client = -1;
    }
    if (c->holder && !S->quit) {
        /* The process that holds the sandbox ended (or let go without rm): a cancelled CI job
         * or a killed agent must not leave its sandbox behind until the ttl. */
        tomb(S, "deleted because the client holding it went away");
        S->quit = true;
    }
    /* A file job of its (c->job) keeps the slot until it is reaped (end_file_job): the next
     * connection must not be taken for it, nor the job forgotten. */
    close(c->fd);
    c->fd = -1;
    c->waiting = c->waits = -1; /* a wait ends with its client; the process runs on */
    c->holder = c->broken = false;
}

/* The reply to a wait: how the background process ended. */
static void reply_wait(struct sup *S, int ci, const char *tag, const struct proc *p)
{
    cJSON *r = nsbox_reply_ok(tag);
    cJSON_AddNumberToObject(r, "pid", p->pid);
    cJSON_AddNumberToObject(r, "exit_code", p->exit_code);
    cJSON_AddBoolToObject(r, "timed_out", p->timed_out);
    cJSON_AddBoolToObject(r, "oom_killed", p->oom_killed);
    send_reply(S, ci, r, NULL, 0);
}

/* A connection waits for one thing at a time: a command (exec, start) or a process's end. */
static bool client_waits(const struct client *c)
{
    return c->waiting >= 0 || c->waits >= 0;
}

/* Refuse a second thing to wait for on connection ci; true when refused. */
static bool refuse_if_waiting(struct sup *S, int ci, const char *tag)
{
    if (!client_waits(&S->clients[ci]))
        return false;
    struct nsbox_err e;
    nsbox_err_set(&e, NSBOX_E_INVALID, EBUSY,
                  "this connection already waits for a command; open another one");
    reply_err(S, ci, tag, &e);
    return true;
}

/* Refuse a request that keeps connection ci at work when MAX_AT_WORK are; true when refused.
 * Nothing has started: the client may send it again (the CLI and the Python client do). */
static bool refuse_if_busy(struct sup *S, int ci, const char *tag, bool wait)
{
    int n = 0, waits = 0;
    for (int i = 0; i < MAX_CLIENTS; i++) {
        const struct client *c = &S->clients[i];
        n += c->job != 0 || (c->fd >= 0 && client_waits(c));
        waits += c->fd >= 0 && c->waits >= 0;
    }
    if (n < MAX_AT_WORK && (!wait || waits < MAX_WAITS))
        return false;
    struct nsbox_err e;
    if (n < MAX_AT_WORK)
        nsbox_err_set(&e, NSBOX_E_BUSY, EBUSY,
                      "sandbox %s is busy: %d waits are under way (at most %d at once, so that "
                      "commands always find room); retry when one ends, or poll ps",
                      S->sb.st.id, waits, MAX_WAITS);
    else
        nsbox_err_set(&e, NSBOX_E_BUSY, EBUSY,
                      "sandbox %s is busy: %d requests are under way (exec, wait, long file "
                      "operations: at most %d at once, so that rm and inspect always get "
                      "through); retry when one ends",
                      S->sb.st.id, n, MAX_AT_WORK);
    reply_err(S, ci, tag, &e);
    return true;
}

static void free_proc(struct proc *p)
{
    nsbox_closep(&p->out_fd);
    nsbox_closep(&p->err_fd);
    free(p->out.buf);
    free(p->err.buf);
    memset(p, 0, sizeof *p);
    p->out_fd = p->err_fd = -1;
    p->client = -1;
}

static struct proc *new_proc(struct sup *S, int *idx)
{
    /* Reuse the slot of a finished background process when full. */
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < MAX_PROCS; i++) {
            struct proc *p = &S->procs[i];
            if (!p->used || (pass == 1 && !p->running && p->client < 0 && p->spawned)) {
                if (p->used)
                    free_proc(p);
                p->used = true;
                if (i >= S->nprocs)
                    S->nprocs = i + 1;
                p->tty = false;
                p->seq = ++S->next_seq;
                p->client = -1;
                p->out_fd = p->err_fd = -1;
                *idx = i;
                return p;
            }
        }
    return NULL;
}

static struct proc *proc_by_seq(struct sup *S, uint32_t seq)
{
    for (int i = 0; i < S->nprocs; i++)
        if (S->procs[i].used && S->procs[i].seq == seq)
            return &S->procs[i];
    return NULL;
}

static uint64_t oom_kills(struct sup *S)
{
    return nsbox_cgroup_oom_kills(&S->sb.cg);
}

/* ---- the pool (pool.md) --------------------------------------------------------------------- */

static int pool_entry_path(const struct sup *S, char *out, size_t n, struct nsbox_err *e)
{
    char rt[PATH_MAX];
    if (nsbox_path_runtime_dir(rt, sizeof rt, e) < 0)
        return -1;
    if ((size_t)snprintf(out, n, "%s/pool/%s-%s", rt, S->pool_key, S->sb.st.id) >= n)
        return nsbox_err_set(e, NSBOX_E_INVALID, ENAMETOOLONG, "pool entry path too long");
    return 0;
}

/* Listed last, when the sandbox is ready for its run. */
static int pool_entry_create(struct sup *S, struct nsbox_err *e)
{
    char path[PATH_MAX];
    if (pool_entry_path(S, path, sizeof path, e) < 0)
        return -1;
    char *slash = strrchr(path, '/');
    *slash = '\0';
    if (mkdir(path, 0700) < 0 && errno != EEXIST)
        return nsbox_err_sys(e, "pool directory %s", path);
    *slash = '/';
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return nsbox_err_sys(e, "pool entry %s", path);
    close(fd);
    return 0;
}

static void pool_entry_remove(struct sup *S)
{
    char path[PATH_MAX];
    struct nsbox_err e;
    if (S->pool_key[0] && pool_entry_path(S, path, sizeof path, &e) == 0)
        unlink(path);
}

/* A listening unix socket dir/name, mode 0600 from the start: no window in which another user
 * could connect. The control socket, and a pooled sandbox's run socket. */
static int listen_in_dir(const char *dir, const char *name, int type, int backlog,
                         struct nsbox_err *e)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if ((size_t)snprintf(sa.sun_path, sizeof sa.sun_path, "%s/%s", dir, name) >=
        sizeof sa.sun_path)
        return nsbox_err_set(e, NSBOX_E_INVALID, ENAMETOOLONG,
                             "socket path %s/%s is too long for a unix socket", dir, name);
    int fd = socket(AF_UNIX, type | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return nsbox_err_sys(e, "socket");
    mode_t old = umask(0177);
    int r = bind(fd, (struct sockaddr *)&sa, sizeof sa);
    umask(old);
    if (r < 0 || listen(fd, backlog) < 0) {
        nsbox_err_sys(e, "socket %s", sa.sun_path);
        close(fd);
        return -1;
    }
    return fd;
}

/* The run socket (agent.h): made here, in the sandbox's own 0700 directory, and listened on by
 * init. The OOM counter goes along, so that init can report the run's OOM kills itself. */
static int pool_listen(struct sup *S, struct nsbox_err *e)
{
    cleanup_close int fd = listen_in_dir(S->sb.st.dir, "run", SOCK_SEQPACKET, 16, e);
    if (fd < 0)
        return -1;
    cleanup_close int oom = nsbox_cgroup_oom_fd(&S->sb.cg);
    return nsbox_agent_listen(S->agent, fd, oom, e);
}

/* A run took the sandbox (init said CLAIMED): it is the run's now. No ttl; nobody else finds
 * it; it is deleted when the run ends (or its client goes). */
static void on_claimed(struct sup *S)
{
    char path[PATH_MAX];
    S->claimed = true;
    set_timer(S->ttl_fd, 0); /* the run's own timeout bounds it now */
    pool_entry_remove(S);
    snprintf(path, sizeof path, "%s/run", S->sb.st.dir);
    unlink(path);
}

static void on_run_event(const struct nsbox_agent_event *ev, void *arg)
{
    struct sup *S = arg;
    if (ev->type == NSBOX_AGENT_CLAIMED)
        on_claimed(S);
    else if (ev->seq == NSBOX_AGENT_SEQ_RUN &&
             (ev->type == NSBOX_AGENT_EXITED || ev->type == NSBOX_AGENT_FAILED))
        S->quit = true; /* its run is over: the rest goes, then the replacement is made */
}

/* Before a pooled sandbox is deleted from outside (rm, drain, its ttl): init stops taking a
 * run. 1: it may go. 0: a run took it first; it is that run's and goes when the run ends.
 * -1: init did not answer in time (busy starting a run, say): not now. */
static int pool_retire(struct sup *S)
{
    if (!S->pool_key[0] || S->claimed)
        return !S->claimed;
    int r = nsbox_agent_retire(S->agent, on_run_event, S);
    if (r == 1 && !S->claimed)
        on_claimed(S);
    return r == 1 ? 0 : r == -2 ? -1 : 1; /* -1 from init: it is gone, and the sandbox with it */
}

/* Which requests a sandbox takes while pooled: looking at it, or deleting it while no run has
 * taken it; nobody else may change what the run will find. */
static int pool_gate(struct sup *S, const struct nsbox_request *rq, struct nsbox_err *e)
{
    if (!S->pool_key[0])
        return 0;
    switch (rq->op) {
    case NSBOX_OP_PING:
    case NSBOX_OP_INSPECT:
        return 0;
    case NSBOX_OP_DELETE:
        switch (pool_retire(S)) {
        case 1:
            return 0;
        case 0:
            return nsbox_err_set(e, NSBOX_E_INVALID, EBUSY,
                                 "sandbox %s is running the command of an nsbox run; it is "
                                 "deleted when that ends", S->sb.st.id);
        default:
            return nsbox_err_set(e, NSBOX_E_SYS, EAGAIN,
                                 "pooled sandbox %s did not answer in time (a run may be "
                                 "taking it); try again", S->sb.st.id);
        }
    default:
        return nsbox_err_set(e, NSBOX_E_INVALID, EPERM,
                             "sandbox %s is kept for nsbox run (the pool) and takes no other "
                             "requests", S->sb.st.id);
    }
}

/* ---- requests ------------------------------------------------------------------------------- */

static char **merged_env(struct sup *S, const struct nsbox_request *rq)
{
    size_t n = 0;
    while (S->sb.envp[n])
        n++;
    char **env = calloc(n + rq->nenv + 1, sizeof *env);
    if (!env)
        return NULL;
    memcpy(env, S->sb.envp, n * sizeof *env);
    for (size_t i = 0; i < rq->nenv; i++)
        n = nsbox_env_put(env, n, rq->env[i]);
    return env;
}

static void cmdline_of(char *out, size_t n, char **argv)
{
    size_t off = 0;
    out[0] = '\0';
    for (size_t i = 0; argv[i] && off + 1 < n; i++)
        off += (size_t)snprintf(out + off, n - off, "%s%s", i ? " " : "", argv[i]);
}

static void do_spawn(struct sup *S, int ci, const struct nsbox_request *rq, int fds[3],
                     bool background)
{
    struct nsbox_err e = {0};
    int idx;
    struct proc *p = new_proc(S, &idx);
    if (!p) {
        nsbox_err_set(&e, NSBOX_E_SYS, EAGAIN,
                      "cannot start: %d processes started by nsbox (exec, exec -d) still run in "
                      "this sandbox, the most it tracks; end some (nsbox ps ID, nsbox kill ID "
                      "PID) and try again",
                      MAX_PROCS);
        reply_err(S, ci, rq->tag, &e);
        return;
    }
    p->background = background;
    snprintf(p->tag, sizeof p->tag, "%s", rq->tag);
    cmdline_of(p->cmdline, sizeof p->cmdline, rq->argv);
    int own[3] = {-1, -1, -1};
    int *use = fds;
    if (background) {
        int po[2], pe[2];
        own[0] = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (own[0] < 0 || pipe2(po, O_CLOEXEC) < 0 || pipe2(pe, O_CLOEXEC) < 0) {
            nsbox_err_sys(&e, "pipe");
            nsbox_closep(&own[0]);
            free_proc(p);
            reply_err(S, ci, rq->tag, &e);
            return;
        }
        p->out_fd = po[0], own[1] = po[1];
        p->err_fd = pe[0], own[2] = pe[1];
        fcntl(p->out_fd, F_SETFL, O_NONBLOCK);
        fcntl(p->err_fd, F_SETFL, O_NONBLOCK);
        use = own;
    } else if (rq->tty) {
        /* init makes the pseudo-terminal; the client gets its master when the command starts */
        for (int i = 0; i < 3; i++)
            nsbox_closep(&fds[i]);
        p->tty = true;
    } else if (fds[0] < 0 || fds[1] < 0 || fds[2] < 0) {
        nsbox_err_set(&e, NSBOX_E_INVALID, EINVAL,
                      "exec needs three descriptors (stdin, stdout, stderr) with the request");
        free_proc(p);
        reply_err(S, ci, rq->tag, &e);
        return;
    } else if (nsbox_check_stdio(fds, &e) < 0) {
        free_proc(p);
        reply_err(S, ci, rq->tag, &e);
        return;
    }
    cleanup_free char **env = merged_env(S, rq);
    unsigned flags = p->tty ? NSBOX_AGENT_F_TTY : 0;
    int r = env ? nsbox_agent_spawn(S->agent, p->seq, rq->argv, env, rq->cwd, use, flags,
                                    (rq->rows & 0xffff) << 16 | (rq->cols & 0xffff), &e)
                : nsbox_err_sys(&e, "calloc");
    for (int i = 0; i < 3; i++)
        nsbox_closep(&own[i]);
    if (r < 0) {
        free_proc(p);
        reply_err(S, ci, rq->tag, &e);
        return;
    }
    p->client = ci;
    p->running = true;
    p->oom_before = oom_kills(S); /* read after the spawn went out, while init forks */
    if (rq->timeout_ms) { /* exec --timeout, and exec -d --timeout (start's timeout_ms) */
        p->deadline = nsbox_now_ms() + (int64_t)rq->timeout_ms;
        p->timeout_ms = rq->timeout_ms;
    }
    S->clients[ci].waiting = idx;
}

static cJSON *proc_json(const struct proc *p)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "pid", p->pid);
    cJSON_AddStringToObject(o, "cmd", p->cmdline);
    cJSON_AddBoolToObject(o, "running", p->running);
    cJSON_AddBoolToObject(o, "background", p->background);
    if (!p->running)
        cJSON_AddNumberToObject(o, "exit_code", p->exit_code);
    return o;
}

/* How /workspace is bounded, and how full it is. */
static void add_disk(cJSON *r, const struct sup *S)
{
    cJSON *d = cJSON_AddObjectToObject(r, "disk");
    enum nsbox_ws_kind k = S->sb.st.ws_kind;
    cJSON_AddStringToObject(d, "kind", nsbox_ws_kind_name(k));
    cJSON_AddBoolToObject(d, "enforced", k != NSBOX_WS_DIR);
    if (k == NSBOX_WS_DIR) {
        cJSON_AddStringToObject(d, "note", "the caller's own directory (--workspace): nsbox "
                                           "puts no limit on it");
        cJSON_AddBoolToObject(d, "idmapped", S->sb.st.ws_idmapped);
        return;
    }
    cJSON_AddNumberToObject(d, "limit_bytes", (double)S->spec->limits.disk_bytes);
    struct nsbox_ws_usage u;
    if (S->ws_fd >= 0 && nsbox_ws_usage(S->ws_fd, &u) == 0) {
        /* the filesystem's own figures: mkfs rounds the inode count to whole groups */
        cJSON_AddNumberToObject(d, "inodes_limit", (double)u.inodes_total);
        cJSON_AddNumberToObject(d, "usable_bytes", (double)u.bytes_total);
        cJSON_AddNumberToObject(d, "used_bytes", (double)u.bytes_used);
        cJSON_AddNumberToObject(d, "inodes_used", (double)u.inodes_used);
    } else {
        cJSON_AddNumberToObject(d, "inodes_limit",
                                (double)nsbox_ws_inodes(S->spec->limits.disk_bytes));
    }
    /* Thin provisioning (docs/workspace.md): the host's free space, not only the limit, bounds
     * what the sandbox can still write. */
    struct nsbox_ws_host_usage h;
    if (k == NSBOX_WS_EXT4 && nsbox_ws_host_usage(S->sb.st.workspace, &h) == 0) {
        cJSON *host = cJSON_AddObjectToObject(d, "host");
        cJSON_AddStringToObject(host, "backing_file", S->sb.st.workspace);
        cJSON_AddNumberToObject(host, "backing_bytes", (double)h.backing_bytes);
        cJSON_AddNumberToObject(host, "fs_bytes", (double)h.fs_bytes);
        cJSON_AddNumberToObject(host, "free_bytes", (double)h.fs_free_bytes);
    }
}

static void do_inspect(struct sup *S, int ci, const char *tag)
{
    cJSON *r = nsbox_reply_ok(tag);
    cJSON_AddStringToObject(r, "id", S->sb.st.id);
    cJSON_AddStringToObject(r, "state", S->pool_key[0] && !S->claimed ? "pooled"
                                        : S->sleeping                    ? "sleeping"
                                                                         : "running");
    cJSON_AddNumberToObject(r, "sleeps", S->sleeps);
    if (S->last_wake_us >= 0)
        cJSON_AddNumberToObject(r, "last_wake_us", (double)S->last_wake_us);
    cJSON_AddNumberToObject(r, "created", (double)S->created);
    cJSON_AddNumberToObject(r, "expires", (double)S->expires);
    cJSON_AddNumberToObject(r, "supervisor_pid", getpid());
    if (S->owner_fd >= 0)
        cJSON_AddNumberToObject(r, "owner_pid", S->owner_pid);
    if (S->sb.st.ws_kind == NSBOX_WS_DIR)
        cJSON_AddStringToObject(r, "workspace", S->sb.st.workspace);
    else
        cJSON_AddNullToObject(r, "workspace"); /* exists only inside the sandbox */
    add_disk(r, S);
    cJSON *net = nsbox_net_describe(S->sb.net, S->spec->net);
    if (net)
        cJSON_AddItemToObject(r, "network", net);
    cJSON *spec = nsbox_spec_to_cjson(S->spec);
    if (spec)
        cJSON_AddItemToObject(r, "spec", spec);
    cJSON *lim = cJSON_AddObjectToObject(r, "limits");
    cJSON_AddNumberToObject(lim, "cpus", S->spec->limits.cpus);
    cJSON_AddNumberToObject(lim, "memory_bytes", (double)S->spec->limits.memory_bytes);
    cJSON_AddNumberToObject(lim, "pids", (double)S->spec->limits.pids);
    cJSON_AddNumberToObject(lim, "disk_bytes", (double)S->spec->limits.disk_bytes);
    struct nsbox_cgroup_stats st;
    struct nsbox_err e;
    if (nsbox_cgroup_stats(&S->sb.cg, &st, &e) == 0) {
        cJSON *so = cJSON_AddObjectToObject(r, "stats");
        cJSON_AddNumberToObject(so, "memory_bytes", (double)st.memory_current);
        cJSON_AddNumberToObject(so, "memory_peak_bytes", (double)st.memory_peak);
        cJSON_AddNumberToObject(so, "pids", (double)st.pids_current);
        cJSON_AddNumberToObject(so, "cpu_usage_usec", (double)st.cpu_usage_usec);
        cJSON_AddNumberToObject(so, "oom_kills", (double)st.oom_kills);
    }
    cJSON *ps = cJSON_AddArrayToObject(r, "processes");
    for (int i = 0; i < S->nprocs; i++)
        if (S->procs[i].used && S->procs[i].spawned)
            cJSON_AddItemToArray(ps, proc_json(&S->procs[i]));
    send_reply(S, ci, r, NULL, 0);
}

/* The process with that pid: the running one when an ended one had the pid before (the
 * sandbox's pids wrap around). */
static struct proc *proc_by_pid(struct sup *S, int pid)
{
    struct proc *ended = NULL;
    for (int i = 0; i < S->nprocs; i++) {
        struct proc *p = &S->procs[i];
        if (p->used && p->spawned && p->pid == pid) {
            if (p->running)
                return p;
            if (!ended || p->seq > ended->seq)
                ended = p;
        }
    }
    return ended;
}

/* ---- file operations ------------------------------------------------------------------------ */

struct confirm_ctx {
    int fd;
    const char *tag;
};

/* A write with confirm reached its stream's end: tell the client how much came
 * (end_of_content) and keep it only if the client answers commit within CLIENT_FRAME_MS. A
 * client killed with its producer (Ctrl-C) never runs the code that would answer. */
static int confirm_end(void *arg, uint64_t bytes)
{
    const struct confirm_ctx *c = arg;
    struct nsbox_err e;
    cJSON *m = nsbox_reply_ok(c->tag);
    if (!m)
        return -1;
    cJSON_AddNumberToObject(m, "end_of_content", (double)bytes);
    int r = nsbox_proto_send_obj(c->fd, m, NULL, 0, &e);
    cJSON_Delete(m);
    struct pollfd p = {c->fd, POLLIN, 0};
    if (r < 0 || poll(&p, 1, CLIENT_FRAME_MS) <= 0)
        return -1;
    cleanup_free char *buf = NULL;
    int fds[NSBOX_PROTO_MAX_FDS];
    ssize_t n = nsbox_proto_recv(c->fd, &buf, fds, &e);
    for (int i = 0; n >= 0 && i < NSBOX_PROTO_MAX_FDS; i++)
        nsbox_closep(&fds[i]);
    if (n <= 0)
        return -1;
    cJSON *o = cJSON_ParseWithLength(buf, (size_t)n);
    const char *op = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, "op"));
    r = op && !strcmp(op, "commit") ? 0 : -1;
    cJSON_Delete(o);
    return r;
}

static void file_op(struct sup *S, int ci, const struct nsbox_request *rq, int in_fd)
{
    struct nsbox_err e = {0};
    cJSON *r = nsbox_reply_ok(rq->tag);
    int out_fd = -1;
    struct confirm_ctx cc = {S->clients[ci].fd, rq->tag};
    struct nsbox_files_opts fo = {.max_write_bytes = S->spec->limits.disk_bytes,
                                  .client_fd = S->clients[ci].fd,
                                  .confirm_end = rq->confirm ? confirm_end : NULL,
                                  .confirm_arg = &cc};
    if (nsbox_files_op_ex(S->ws_fd, &S->sb.st, &fo, rq, in_fd, r, &out_fd, &e) < 0) {
        cJSON_Delete(r);
        reply_err(S, ci, rq->tag, &e);
    } else {
        send_reply(S, ci, r, out_fd >= 0 ? &out_fd : NULL, out_fd >= 0 ? 1 : 0);
    }
    nsbox_closep(&out_fd);
}

/* A recursive remove (a tree of any size, made by the sandbox), a write from a pipe or socket
 * (as slow as its writer) or of a big file: each can take seconds or minutes. */
static bool may_take_long(const struct nsbox_request *rq, int in_fd)
{
    if (rq->op == NSBOX_OP_REMOVE)
        return rq->recursive;
    if (rq->op != NSBOX_OP_WRITE || in_fd < 0)
        return false;
    struct stat st;
    return fstat(in_fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size >= FILE_JOB_MIN_BYTES;
}

/* Run the operation in a child that replies to the client itself and exits: 0 when its reply
 * went out. The client is not read from until then (its next request waits for this reply
 * anyway). Never in the loop: one such operation there would hold everything, the ttl too. */
static void start_file_job(struct sup *S, int ci, const struct nsbox_request *rq, int in_fd)
{
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        struct nsbox_err e;
        nsbox_err_sys(&e, "cannot start the %s of %s: fork", nsbox_op_name(rq->op), rq->path);
        reply_err(S, ci, rq->tag, &e);
        return;
    }
    if (pid == 0) {
        /* The job dies with the supervisor: a SIGKILLed supervisor's sandbox is gc'd, and
         * nothing of it may go on writing into the workspace. It holds nothing of the
         * supervisor's but its client, the workspace and the source: a connection or a log
         * pipe that the supervisor closes meanwhile is closed. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(1);
        int keep[] = {S->clients[ci].fd, S->ws_fd, in_fd};
        nsbox_close_fds_keep(keep, NSBOX_ARRAY_LEN(keep));
        file_op(S, ci, rq, in_fd);
        _exit(S->clients[ci].broken ? 1 : 0);
    }
    S->clients[ci].job = pid;
    /* -1 (no descriptor left, Linux < 5.3): reaped on SIGCHLD instead (reap_file_jobs) */
    S->clients[ci].job_pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
}

/* The job of client ci was reaped: the client is read from again, or closed if its reply did
 * not go out whole. A client closed meanwhile kept its slot for this (close_client). */
static void job_done(struct sup *S, int ci, int status)
{
    struct client *c = &S->clients[ci];
    if (c->fd >= 0 && (!WIFEXITED(status) || WEXITSTATUS(status) != 0))
        c->broken = true;
    nsbox_closep(&c->job_pidfd);
    c->job = 0;
    touch(S); /* the end of a long operation is activity, as its start was */
}

/* The job of client ci has ended (its pidfd said so) or was killed: reap it. */
static void end_file_job(struct sup *S, int ci)
{
    int status = 0;
    while (waitpid(S->clients[ci].job, &status, 0) < 0 && errno == EINTR) {
    }
    job_done(S, ci, status);
}

/* On SIGCHLD: the jobs that have no pidfd (pidfd_open failed: no descriptor left, or a kernel
 * before 5.3) are reaped here, never waited for in the loop. */
static void reap_file_jobs(struct sup *S)
{
    for (int i = 0; i < MAX_CLIENTS; i++) {
        int status;
        if (S->clients[i].job > 0 && S->clients[i].job_pidfd < 0 &&
            waitpid(S->clients[i].job, &status, WNOHANG) == S->clients[i].job)
            job_done(S, i, status);
    }
}

/* At the end: a job still running is killed (its client sees the sandbox go) before the
 * workspace is unmounted. */
static void kill_file_jobs(struct sup *S)
{
    for (int i = 0; i < MAX_CLIENTS; i++)
        if (S->clients[i].job > 0) {
            kill(S->clients[i].job, SIGKILL);
            end_file_job(S, i);
        }
}

static void handle_request(struct sup *S, int ci, const char *buf, size_t len, int fds[3])
{
    struct nsbox_request rq;
    struct nsbox_err e = {0};
    if (nsbox_proto_parse(buf, len, &rq, &e) < 0) {
        reply_err(S, ci, rq.tag, &e);
        nsbox_request_free(&rq);
        return;
    }
    if (pool_gate(S, &rq, &e) < 0) {
        reply_err(S, ci, rq.tag, &e);
        for (int i = 0; i < 3; i++)
            nsbox_closep(&fds[i]);
        nsbox_request_free(&rq);
        return;
    }
    /* Only requests that need the sandbox to run wake it (and reset the idle timer); looking
     * at it (ping, inspect, ps, logs) does not. */
    if (rq.op != NSBOX_OP_PING && rq.op != NSBOX_OP_INSPECT && rq.op != NSBOX_OP_PS &&
        rq.op != NSBOX_OP_LOGS && rq.op != NSBOX_OP_HOLD && rq.op != NSBOX_OP_WAIT)
        touch(S); /* a wait wakes it only to wait for a running process, below */
    switch (rq.op) {
    case NSBOX_OP_PING: {
        cJSON *r = nsbox_reply_ok(rq.tag);
        cJSON_AddStringToObject(r, "id", S->sb.st.id);
        send_reply(S, ci, r, NULL, 0);
        break;
    }
    case NSBOX_OP_INSPECT:
        do_inspect(S, ci, rq.tag);
        break;
    case NSBOX_OP_EXEC:
    case NSBOX_OP_START:
        if (!refuse_if_waiting(S, ci, rq.tag) && !refuse_if_busy(S, ci, rq.tag, false))
            do_spawn(S, ci, &rq, fds, rq.op == NSBOX_OP_START);
        break;
    case NSBOX_OP_PS: {
        cJSON *r = nsbox_reply_ok(rq.tag);
        cJSON *ps = cJSON_AddArrayToObject(r, "processes");
        for (int i = 0; i < S->nprocs; i++)
            if (S->procs[i].used && S->procs[i].spawned && S->procs[i].background)
                cJSON_AddItemToArray(ps, proc_json(&S->procs[i]));
        send_reply(S, ci, r, NULL, 0);
        break;
    }
    case NSBOX_OP_KILL: {
        struct proc *p = proc_by_pid(S, rq.pid);
        if (!p || !p->running) {
            nsbox_err_set(&e, NSBOX_E_NOTFOUND, ESRCH, "no running process %d started by nsbox",
                          rq.pid);
            reply_err(S, ci, rq.tag, &e);
        } else if (nsbox_agent_kill(S->agent, p->pid, rq.sig, &e) < 0) {
            reply_err(S, ci, rq.tag, &e);
        } else {
            send_reply(S, ci, nsbox_reply_ok(rq.tag), NULL, 0);
        }
        break;
    }
    case NSBOX_OP_LOGS: {
        struct proc *p = proc_by_pid(S, rq.pid);
        if (!p || !p->background) {
            nsbox_err_set(&e, NSBOX_E_NOTFOUND, ESRCH, "no background process %d", rq.pid);
            reply_err(S, ci, rq.tag, &e);
            break;
        }
        /* Open pipes: more may come, even after the process ended (what it left in them,
         * or a child of it that still writes) */
        bool more_out = p->out_fd >= 0, more_err = p->err_fd >= 0, lost_out, lost_err;
        uint64_t end_out, end_err;
        cleanup_free char *o = ring_text(&p->out, rq.stdout_from, more_out, &end_out, &lost_out);
        cleanup_free char *er = ring_text(&p->err, rq.stderr_from, more_err, &end_err, &lost_err);
        if (!o || !er) {
            nsbox_err_set(&e, NSBOX_E_NOMEM, ENOMEM, "out of memory");
            reply_err(S, ci, rq.tag, &e);
            break;
        }
        cJSON *r = nsbox_reply_ok(rq.tag);
        cJSON_AddStringToObject(r, "stdout", o);
        cJSON_AddStringToObject(r, "stderr", er);
        cJSON_AddBoolToObject(r, "truncated", lost_out || lost_err);
        cJSON_AddNumberToObject(r, "stdout_end", (double)end_out);
        cJSON_AddNumberToObject(r, "stderr_end", (double)end_err);
        cJSON_AddBoolToObject(r, "eof", !more_out && !more_err);
        cJSON_AddBoolToObject(r, "sleeping", S->sleeping); /* its processes are frozen */
        cJSON_AddBoolToObject(r, "running", p->running);
        send_reply(S, ci, r, NULL, 0);
        break;
    }
    case NSBOX_OP_SIGNAL: {
        /* No reply: the connection's one reply belongs to its exec. A signal that arrives
         * before init reported the command's pid is delivered when it does. */
        int w = S->clients[ci].waiting;
        if (w >= 0 && S->procs[w].spawned)
            nsbox_agent_kill(S->agent, S->procs[w].pid, rq.sig, &e);
        else if (w >= 0)
            S->procs[w].pending_sig = rq.sig;
        break;
    }
    case NSBOX_OP_WAIT: {
        struct proc *p = proc_by_pid(S, rq.pid);
        if (!p || !p->background) {
            nsbox_err_set(&e, NSBOX_E_NOTFOUND, ESRCH, "no background process %d", rq.pid);
            reply_err(S, ci, rq.tag, &e);
            break;
        }
        if (refuse_if_waiting(S, ci, rq.tag))
            break;
        if (!p->running) {
            reply_wait(S, ci, rq.tag, p);
            break;
        }
        if (refuse_if_busy(S, ci, rq.tag, true)) /* each wait holds a connection */
            break;
        /* The reply comes when it ends (on_agent's EXITED); the request's tag with it. A
         * waiting client is a client at work: the sandbox wakes, and stays awake. */
        touch(S);
        S->clients[ci].waits = (int)(p - S->procs);
        snprintf(S->clients[ci].wait_tag, sizeof S->clients[ci].wait_tag, "%s", rq.tag);
        break;
    }
    case NSBOX_OP_HOLD:
        S->clients[ci].holder = true;
        send_reply(S, ci, nsbox_reply_ok(rq.tag), NULL, 0);
        break;
    case NSBOX_OP_DELETE:
        if (!S->pool_key[0]) /* nobody knows a pooled sandbox's id: no tombstone to keep */
            tomb(S, rq.by_session ? NSBOX_TOMB_SESSION_END : "deleted by rm");
        S->quit = true;
        send_reply(S, ci, nsbox_reply_ok(rq.tag), NULL, 0);
        break;
    case NSBOX_OP_READ:
    case NSBOX_OP_WRITE:
    case NSBOX_OP_LIST:
    case NSBOX_OP_STAT:
    case NSBOX_OP_REMOVE:
    case NSBOX_OP_MKDIR: {
        if (refuse_if_waiting(S, ci, rq.tag))
            break;
        if (may_take_long(&rq, fds[0])) {
            if (!refuse_if_busy(S, ci, rq.tag, false))
                start_file_job(S, ci, &rq, fds[0]);
        } else {
            file_op(S, ci, &rq, fds[0]);
        }
        break;
    }
    }
    for (int i = 0; i < 3; i++)
        nsbox_closep(&fds[i]);
    nsbox_request_free(&rq);
}

/* ---- events --------------------------------------------------------------------------------- */

static void on_agent(struct sup *S)
{
    struct nsbox_agent_event ev;
    struct nsbox_err e = {0};
    int r = nsbox_agent_recv(S->agent, &ev, &e);
    if (r <= 0) {
        if (r == 0 || e.sys_errno != EBADMSG) {
            /* init is gone: so is the sandbox */
            tomb(S, "deleted because its init process ended");
            S->quit = true;
        }
        return;
    }
    if (ev.type == NSBOX_AGENT_CLAIMED || ev.seq == NSBOX_AGENT_SEQ_RUN) {
        on_run_event(&ev, S);
        return;
    }
    struct proc *p = proc_by_seq(S, ev.seq);
    if (!p)
        return;
    int ci = p->client;
    if (ev.type == NSBOX_AGENT_SPAWNED) {
        p->pid = ev.pid;
        p->spawned = true;
        if (ev.fd >= 0) {
            /* exec -t: the terminal's master goes to the client now; the exit status later */
            if (p->tty && ci >= 0) {
                cJSON *rep = nsbox_reply_ok(p->tag);
                cJSON_AddBoolToObject(rep, "tty", true);
                cJSON_AddNumberToObject(rep, "pid", p->pid);
                send_reply(S, ci, rep, &ev.fd, 1);
            }
            nsbox_closep(&ev.fd);
        }
        if (p->orphaned)
            nsbox_agent_kill(S->agent, p->pid, SIGKILL, &e);
        else if (p->pending_sig)
            nsbox_agent_kill(S->agent, p->pid, p->pending_sig, &e);
        if (p->background && ci >= 0) {
            cJSON *rep = nsbox_reply_ok(p->tag);
            cJSON_AddNumberToObject(rep, "pid", p->pid);
            if (p->deadline) /* says the timeout was taken: an older supervisor ignored it */
                cJSON_AddNumberToObject(rep, "timeout_ms", (double)p->timeout_ms);
            send_reply(S, ci, rep, NULL, 0);
            S->clients[ci].waiting = -1;
            p->client = -1;
        }
        return;
    }
    if (ev.type == NSBOX_AGENT_FAILED) {
        nsbox_err_set(&e, NSBOX_E_EXEC, 0, "%s", ev.msg);
        if (ci >= 0) {
            /* 125 from init: the request itself could not be honoured (a cwd that does not
             * exist); 126/127: the command could not be executed. */
            cJSON *rep = nsbox_reply_error(p->tag, ev.status == 125 ? NSBOX_E_INVALID : NSBOX_E_EXEC,
                                           ev.msg);
            cJSON_AddNumberToObject(rep, "exit_code", ev.status);
            send_reply(S, ci, rep, NULL, 0);
            S->clients[ci].waiting = -1;
        }
        free_proc(p);
        return;
    }
    /* EXITED */
    p->running = false;
    p->exit_code = p->timed_out ? 124 : ev.status;
    bool oom = ev.status == 128 + SIGKILL && oom_kills(S) > p->oom_before; /* only then read */
    if (ci >= 0) {
        cJSON *rep = nsbox_reply_ok(p->tag);
        cJSON_AddNumberToObject(rep, "exit_code", p->exit_code);
        cJSON_AddBoolToObject(rep, "timed_out", p->timed_out);
        cJSON_AddBoolToObject(rep, "oom_killed", oom);
        send_reply(S, ci, rep, NULL, 0);
        S->clients[ci].waiting = -1;
        p->client = -1;
    }
    if (p->background) {
        p->oom_killed = oom;
        int idx = (int)(p - S->procs);
        for (int i = 0; i < MAX_CLIENTS; i++)
            if (S->clients[i].fd >= 0 && S->clients[i].waits == idx) {
                S->clients[i].waits = -1;
                reply_wait(S, i, S->clients[i].wait_tag, p);
            }
    }
    if (!p->background)
        free_proc(p);
}

/* Read what fd has into r, at most max bytes (a writer faster than us must not keep us here);
 * at its end, close it. Returns the bytes read. */
static size_t drain(int *fd, struct ring *r, size_t max)
{
    char buf[16384];
    size_t got = 0;
    while (got < max) {
        ssize_t n = read(*fd, buf, max - got < sizeof buf ? max - got : sizeof buf);
        if (n > 0) {
            ring_put(r, buf, (size_t)n);
            got += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n == 0 || errno != EAGAIN)
            nsbox_closep(fd);
        break;
    }
    return got;
}

/* The budget of background output for this window (LOG_RATE): 0 once spent. */
static size_t log_budget(struct sup *S, int64_t now)
{
    if (now >= S->log_window + LOG_WINDOW_MS) {
        S->log_window = now;
        S->log_left = (size_t)LOG_RATE * LOG_WINDOW_MS / 1000;
    }
    return S->log_left;
}

static void on_client(struct sup *S, int ci)
{
    if (S->clients[ci].broken) {
        close_client(S, ci);
        return;
    }
    cleanup_free char *buf = NULL;
    int fds[NSBOX_PROTO_MAX_FDS];
    struct nsbox_err e = {0};
    ssize_t n = nsbox_proto_recv(S->clients[ci].fd, &buf, fds, &e);
    if (n <= 0) {
        for (int i = 0; i < NSBOX_PROTO_MAX_FDS; i++)
            nsbox_closep(&fds[i]);
        if (n < 0 && (e.code == NSBOX_E_INVALID || e.sys_errno == EMFILE))
            reply_err(S, ci, NULL, &e);
        close_client(S, ci);
        return;
    }
    handle_request(S, ci, buf, (size_t)n, fds);
    /* Whatever came with the request is ours to close, whichever way it was answered (a
     * request that does not parse still brought its descriptors along). */
    for (int i = 0; i < NSBOX_PROTO_MAX_FDS; i++)
        nsbox_closep(&fds[i]);
}

static void on_accept(struct sup *S)
{
    int fd = accept4(S->listen_fd, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0) {
        /* The connection waits in the backlog, and the listening socket stays readable:
         * without a pause the loop would spin on it until a descriptor is free. */
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
            S->accept_after = nsbox_now_ms() + ACCEPT_PAUSE_MS;
        return;
    }
    for (int i = 0; i < MAX_CLIENTS; i++)
        if (S->clients[i].fd < 0 && S->clients[i].job == 0) {
            S->clients[i].fd = fd;
            S->clients[i].waiting = S->clients[i].waits = -1;
            return;
        }
    struct nsbox_err e;
    cJSON *r = nsbox_reply_error(NULL, NSBOX_E_BUSY,
                                 "too many connections to this sandbox (64 at once); retry when "
                                 "some close");
    _Static_assert(MAX_CLIENTS == 64, "the message above");
    nsbox_proto_send_obj(fd, r, NULL, 0, &e);
    cJSON_Delete(r);
    close(fd);
}

static void check_deadlines(struct sup *S, int64_t now)
{
    for (int i = 0; i < S->nprocs; i++) {
        struct proc *p = &S->procs[i];
        if (p->used && p->running && p->spawned && p->deadline && now >= p->deadline &&
            !p->timed_out) {
            struct nsbox_err e;
            p->timed_out = true;
            touch(S); /* a sleeping sandbox's init must be awake to kill (a background one's) */
            nsbox_agent_kill(S->agent, p->pid, SIGKILL, &e);
        }
    }
}

static int next_timeout(struct sup *S, int64_t now)
{
    int64_t best = -1;
    for (int i = 0; i < S->nprocs; i++) {
        struct proc *p = &S->procs[i];
        if (p->used && p->running && p->deadline && !p->timed_out) {
            int64_t left = p->deadline - now;
            if (left < 0)
                left = 0;
            if (best < 0 || left < best)
                best = left;
        }
    }
    return best < 0 ? -1 : best > 60000 ? 60000 : (int)best;
}

static bool busy(struct sup *S)
{
    for (int i = 0; i < MAX_CLIENTS; i++)
        if (S->clients[i].fd >= 0 && client_waits(&S->clients[i]))
            return true; /* a command's client, or one waiting for a background process */
    return false;
}

static void on_idle(struct sup *S)
{
    uint64_t x;
    if (read(S->idle_fd, &x, sizeof x) < 0)
        return;
    if (busy(S)) {
        set_timer(S->idle_fd, S->spec->idle_timeout_seconds);
        return;
    }
    struct nsbox_err e;
    if (!S->sleeping && nsbox_cgroup_freeze(&S->sb.cg, true, &e) == 0) {
        S->sleeping = true;
        S->sleeps++;
    }
}

/* The signals that came (the signalfd is non-blocking): the first that is not SIGCHLD (a
 * stop: TERM, INT, HUP), or 0. A SIGCHLD needs no more than its read: the callers look at
 * their children anyway. */
static int stop_signal(struct sup *S)
{
    struct signalfd_siginfo si;
    while (read(S->sfd, &si, sizeof si) == (ssize_t)sizeof si)
        if (si.ssi_signo != SIGCHLD)
            return (int)si.ssi_signo;
    return 0;
}

/* Whether the sandbox being made is abandoned (when: where in its making), without waiting:
 * its caller's end (the socket hangs up: create or a pool filler killed, interrupted, timed
 * out) or its word (create's 'X': it got a stop signal), a stop signal, or the end of
 * --owner-pid's process. -1 with e filled when it is. */
static int abandoned(struct sup *S, const char *when, struct nsbox_err *e)
{
    struct pollfd pf[3] = {{S->sfd, POLLIN, 0}, {S->owner_fd, POLLIN, 0}, {S->ready_fd, POLLIN, 0}};
    if (poll(pf, 3, 0) <= 0)
        return 0;
    if (pf[2].revents) {
        char c = 0;
        ssize_t r = read(S->ready_fd, &c, 1);
        if (r == 1 && c == 'X')
            return nsbox_err_set(e, NSBOX_E_SYS, EINTR,
                                 "creation abandoned%s: nsbox create was interrupted", when);
        return nsbox_err_set(e, NSBOX_E_SYS, EPIPE, "creation abandoned%s: its caller is gone",
                             when);
    }
    if (pf[1].revents)
        return nsbox_err_set(e, NSBOX_E_SYS, EPIPE, "creation abandoned%s: its owner process ended",
                             when);
    int sig = stop_signal(S);
    if (sig)
        return nsbox_err_set(e, NSBOX_E_SYS, EINTR,
                             "creation abandoned%s: its supervisor was stopped (signal %d)", when,
                             sig);
    return 0;
}

static void loop(struct sup *S)
{
    enum { F_LISTEN, F_SIG, F_TTL, F_IDLE, F_AGENT, F_OWNER, F_FIXED };
    struct pollfd pf[F_FIXED + MAX_CLIENTS + 2 * MAX_PROCS];
    int map[F_FIXED + MAX_CLIENTS + 2 * MAX_PROCS];
    while (!S->quit) {
        size_t n = 0;
        int64_t now = nsbox_now_ms();
        bool paused = now < S->accept_after;
        pf[n++] = (struct pollfd){paused ? -1 : S->listen_fd, POLLIN, 0};
        pf[n++] = (struct pollfd){S->sfd, POLLIN, 0};
        pf[n++] = (struct pollfd){S->ttl_fd, POLLIN, 0};
        pf[n++] = (struct pollfd){S->idle_fd, POLLIN, 0};
        pf[n++] = (struct pollfd){S->agent, POLLIN, 0};
        pf[n++] = (struct pollfd){S->owner_fd, POLLIN, 0}; /* -1: ignored by poll */
        for (int i = 0; i < MAX_CLIENTS; i++) {
            struct client *c = &S->clients[i];
            /* a job's client waits for the job: its pidfd, or without one SIGCHLD */
            int fd = c->job > 0 ? c->job_pidfd : c->fd;
            if (fd >= 0) {
                map[n] = i;
                pf[n++] = (struct pollfd){fd, POLLIN, 0};
            }
        }
        size_t first_log = n;
        int timeout = next_timeout(S, now);
        if (paused && (timeout < 0 || S->accept_after - now < timeout))
            timeout = (int)(S->accept_after - now);
        bool logs = !S->sleeping && log_budget(S, now) > 0;
        if (!S->sleeping && !logs) { /* spent: the writers wait on full pipes until the next */
            int until = (int)(S->log_window + LOG_WINDOW_MS - now);
            timeout = timeout < 0 || until < timeout ? until : timeout;
        }
        for (int i = 0; i < S->nprocs && logs; i++) {
            struct proc *p = &S->procs[i];
            if (!p->used)
                continue;
            /* 2 * slot (+ 1 for stderr): the streams' order here, which log_next follows */
            if (p->out_fd >= 0)
                map[n] = 2 * i, pf[n++] = (struct pollfd){p->out_fd, POLLIN, 0};
            if (p->err_fd >= 0)
                map[n] = 2 * i + 1, pf[n++] = (struct pollfd){p->err_fd, POLLIN, 0};
        }
        int r = poll(pf, n, timeout);
        if (r < 0 && errno != EINTR)
            break;
        check_deadlines(S, nsbox_now_ms());
        if (pf[F_SIG].revents & POLLIN) {
            if (stop_signal(S)) {
                tomb(S, "deleted: its supervisor was stopped");
                S->quit = true;
            }
            reap_file_jobs(S);
            int status;
            if (S->sb.pid > 0 && waitpid(S->sb.pid, &status, WNOHANG) == S->sb.pid) {
                S->sb.pid = 0;
                tomb(S, "deleted because its init process ended");
                S->quit = true;
            }
        }
        /* init's message before the ttl: a retire (the ttl's, or a delete's further down)
         * reads the agent socket itself, and what poll saw may be gone by then */
        if (pf[F_AGENT].revents & (POLLIN | POLLHUP | POLLERR))
            on_agent(S);
        if (pf[F_TTL].revents & POLLIN) {
            char why[96];
            snprintf(why, sizeof why, "deleted because ttl_seconds=%llu expired",
                     (unsigned long long)S->spec->ttl_seconds);
            if (!S->pool_key[0]) /* nobody knows a pooled sandbox's id */
                tomb(S, why);
            int pr = pool_retire(S);
            if (pr == 1)
                S->quit = true;
            else if (pr < 0)
                set_timer(S->ttl_fd, 1); /* init was busy: ask again in a second */
            /* 0: a run has just taken it */
        }
        if (pf[F_OWNER].revents & (POLLIN | POLLHUP)) {
            char why[96];
            snprintf(why, sizeof why, "deleted because its owner process (pid %d) ended",
                     S->owner_pid);
            tomb(S, why);
            S->quit = true;
        }
        if (pf[F_IDLE].revents & POLLIN)
            on_idle(S);
        for (size_t i = F_FIXED; i < first_log; i++) {
            if (!(pf[i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            if (S->clients[map[i]].job > 0)
                end_file_job(S, map[i]);
            else
                on_client(S, map[i]);
        }
        /* Background output: each ready stream gets its part of what is left of the budget
         * (at least LOG_CHUNK), beginning after the stream last read, so that a slow writer is
         * read in every window (with more than budget / LOG_CHUNK streams ready, in turn)
         * however many fast ones there are, and only the fast ones wait. */
        size_t ready = 0, from = n, logn = n - first_log;
        for (size_t i = first_log; i < n; i++) {
            if (!(pf[i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            ready++;
            if (from == n && map[i] >= S->log_next)
                from = i;
        }
        size_t share = ready ? log_budget(S, nsbox_now_ms()) / ready : 0;
        share = share < LOG_CHUNK ? LOG_CHUNK : share < LOG_ROUND ? share : LOG_ROUND;
        for (size_t k = 0; ready && k < logn; k++) {
            size_t i = first_log + (from - first_log + k) % logn; /* from == n: first_log */
            if (!(pf[i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            size_t max = log_budget(S, nsbox_now_ms());
            if (!max)
                break; /* the rest come first in the next window */
            max = max < share ? max : share;
            struct proc *p = &S->procs[map[i] / 2];
            S->log_left -= map[i] % 2 ? drain(&p->err_fd, &p->err, max)
                                      : drain(&p->out_fd, &p->out, max);
            S->log_next = map[i] + 1;
        }
        if (pf[F_LISTEN].revents & POLLIN)
            on_accept(S);
        for (int i = 0; i < MAX_CLIENTS; i++)
            if (S->clients[i].broken)
                close_client(S, i);
    }
}

/* ---- set-up ---------------------------------------------------------------------------------- */

/* The end of what a stream of the set-up script left, without its last newlines: at most
 * SETUP_TAIL_MAX bytes, from the start of a line where one starts in it, after "[...]" when
 * more came before. NULL when it left nothing. It goes into create's error, printed on the
 * host: control characters are shown as '?' and its lines after the first are indented
 * (nsbox_text_shown), so that it cannot print lines that pass for nsbox's own. */
static char *setup_tail(struct ring *r)
{
    uint64_t end;
    bool lost;
    char *raw = ring_text(r, UINT64_MAX, false, &end, &lost);
    free(r->buf);
    r->buf = NULL;
    size_t tl = raw ? strlen(raw) : 0;
    while (tl && (raw[tl - 1] == '\n' || raw[tl - 1] == '\r'))
        raw[--tl] = '\0';
    char *text = tl ? nsbox_text_shown(raw, "  ") : NULL;
    free(raw);
    tl = text ? strlen(text) : 0;
    if (!tl) {
        free(text);
        return NULL;
    }
    static const char cut[] = "[...]\n";
    if (tl > SETUP_TAIL_MAX || lost) {
        size_t keep = tl > SETUP_TAIL_MAX - (sizeof cut - 1) ? SETUP_TAIL_MAX - (sizeof cut - 1)
                                                            : tl;
        const char *from = text + tl - keep, *nl = memchr(from, '\n', keep);
        if (nl && nl[1] && from > text && from[-1] != '\n')
            from = nl + 1; /* a whole first line */
        keep = (size_t)(text + tl - from);
        char *t = malloc(sizeof cut + keep);
        if (t) {
            memcpy(t, cut, sizeof cut - 1);
            memcpy(t + sizeof cut - 1, from, keep + 1);
        }
        free(text);
        return t;
    }
    return text;
}

/* Run the set-up script through the agent, as appuser in /workspace, bounded in time. Its stderr
 * (the end of it) goes into the error when it fails; when it wrote nothing there, the end of its
 * stdout does (pip, apt and make report there, and it was thrown away). */
static int run_setup_script(struct sup *S, struct nsbox_err *e)
{
    int pe[2], po[2];
    if (pipe2(pe, O_CLOEXEC) < 0)
        return nsbox_err_sys(e, "pipe");
    if (pipe2(po, O_CLOEXEC) < 0) {
        close(pe[0]);
        close(pe[1]);
        return nsbox_err_sys(e, "pipe");
    }
    int fds[3] = {open("/dev/null", O_RDONLY | O_CLOEXEC), po[1], pe[1]};
    char *argv[] = {"/bin/sh", "-c", S->spec->setup_script, NULL};
    int r = nsbox_agent_spawn(S->agent, 0, argv, S->sb.envp, "/workspace", fds, 0, 0, e);
    for (int i = 0; i < 3; i++)
        nsbox_closep(&fds[i]);
    if (r < 0) {
        close(pe[0]);
        close(po[0]);
        return -1;
    }
    fcntl(pe[0], F_SETFL, O_NONBLOCK);
    fcntl(po[0], F_SETFL, O_NONBLOCK);
    struct ring err = {0}, out = {0};
    int64_t deadline = nsbox_now_ms() + (int64_t)S->spec->setup_script_timeout_seconds * 1000;
    int pid = 0, status = -1, efd = pe[0], ofd = po[0];
    bool timed_out = false, done = false;
    char msg[512] = "";
    while (!done) {
        /* Also watched: what abandons the creation (its caller's socket, --owner-pid's
         * process, stop signals). Without them a script of up to 600 s would run on, and the
         * sandbox would be made, for nobody. */
        struct pollfd pf[6] = {{S->agent, POLLIN, 0},    {efd, POLLIN, 0},
                               {ofd, POLLIN, 0},         {S->ready_fd, POLLIN, 0},
                               {S->owner_fd, POLLIN, 0}, {S->sfd, POLLIN, 0}};
        int64_t left = deadline - nsbox_now_ms();
        int pr = poll(pf, 6, left > 0 ? (int)left : 0); /* a closed fd (-1) is skipped */
        if (pr > 0 && (pf[3].revents || pf[4].revents || pf[5].revents) &&
            abandoned(S, " during the setup script", e) < 0) {
            nsbox_closep(&efd);
            nsbox_closep(&ofd);
            free(err.buf);
            free(out.buf);
            return -1;
        }
        if (pr == 0 && !timed_out) {
            timed_out = true;
            if (pid > 0)
                nsbox_agent_kill(S->agent, pid, SIGKILL, e);
            deadline = nsbox_now_ms() + 5000;
            continue;
        }
        if (pr == 0)
            break;
        if (efd >= 0 && (pf[1].revents & (POLLIN | POLLHUP)))
            drain(&efd, &err, LOG_ROUND);
        if (ofd >= 0 && (pf[2].revents & (POLLIN | POLLHUP)))
            drain(&ofd, &out, LOG_ROUND);
        if (pf[0].revents & (POLLIN | POLLHUP)) {
            struct nsbox_agent_event ev;
            int ar = nsbox_agent_recv(S->agent, &ev, e);
            if (ar <= 0)
                break;
            nsbox_closep(&ev.fd);
            if (ev.seq != 0)
                continue;
            if (ev.type == NSBOX_AGENT_SPAWNED)
                pid = ev.pid;
            else {
                status = ev.status;
                snprintf(msg, sizeof msg, "%s", ev.msg);
                done = true;
            }
        }
    }
    /* the end of what it left: only LOG_MAX are kept */
    if (efd >= 0)
        drain(&efd, &err, LOG_MAX);
    if (ofd >= 0)
        drain(&ofd, &out, LOG_MAX);
    nsbox_closep(&efd);
    nsbox_closep(&ofd);
    cleanup_free char *etext = setup_tail(&err);
    cleanup_free char *otext = setup_tail(&out);
    if (!timed_out && status == 0)
        return 0;
    /* what it said: stderr, else stdout, else (a failure) the agent's word or that it was mute */
    const char *said = "", *text = "";
    if (etext)
        said = timed_out ? "; its stderr: " : ": ", text = etext;
    else if (otext)
        said = "; nothing on stderr, the end of its stdout: ", text = otext;
    else if (!timed_out)
        said = ": ", text = msg[0] ? msg : "(no output on stderr or stdout)";
    if (timed_out)
        return nsbox_err_set(e, NSBOX_E_TIMEOUT, ETIMEDOUT,
                             "setup script timed out after setup_script_timeout_seconds=%llu%s%s",
                             (unsigned long long)S->spec->setup_script_timeout_seconds, said,
                             text);
    return nsbox_err_set(e, NSBOX_E_EXEC, 0, "setup script failed (exit code %d)%s%s", status,
                         said, text);
}

static int open_listen(struct sup *S, struct nsbox_err *e)
{
    S->listen_fd = listen_in_dir(S->sb.st.dir, "ctl", SOCK_STREAM, 64, e);
    return S->listen_fd < 0 ? -1 : 0;
}

/* The id, written by the supervisor itself to nsbox create's stdout: that write is the moment
 * the sandbox is given. Before it, create's end or interruption ends the sandbox (abandoned),
 * and nothing reached the caller; after it, the caller has an id that names a sandbox that
 * stays, whatever happens to create then. Waits for room there (a pipe not yet read, a
 * terminal on hold), watching what abandons the creation until the first byte is out. */
static int give_id(struct sup *S, struct nsbox_err *e)
{
    size_t len = strlen(S->out->before) + NSBOX_ID_LEN + strlen(S->out->after), done = 0;
    char *text = malloc(len + 1);
    if (!text)
        return nsbox_err_sys(e, "malloc");
    snprintf(text, len + 1, "%s%s%s", S->out->before, S->sb.st.id, S->out->after);
    int r = 0;
    while (r == 0 && done < len) {
        struct pollfd pf[4] = {{S->out_fd, POLLOUT, 0},
                               {S->ready_fd, POLLIN, 0},
                               {S->sfd, POLLIN, 0},
                               {S->owner_fd, POLLIN, 0}};
        if (poll(pf, done ? 1 : 4, -1) < 0)
            continue; /* EINTR: none is caught, but a stop/continue of a traced process */
        if (!done && (pf[1].revents || pf[2].revents || pf[3].revents) &&
            (r = abandoned(S, "", e)) < 0)
            break;
        if (!pf[0].revents)
            continue;
        ssize_t w = write(S->out_fd, text + done, len - done);
        if (w > 0)
            done += (size_t)w;
        else if (w < 0 && errno != EAGAIN && errno != EINTR)
            r = nsbox_err_set(e, NSBOX_E_SYS, errno,
                              "create: cannot write the new sandbox's id %s to stdout (%s); "
                              "it was deleted again",
                              S->sb.st.id, strerror(errno));
    }
    free(text);
    nsbox_closep(&S->out_fd); /* the caller's reader sees its end with create's */
    return r;
}

/* Whether the line reached whoever waits for it. It did not when that process is gone
 * (EPIPE): a create or pool filler interrupted, killed, timed out. */
static bool report_ready(int fd, const char *line)
{
    if (fd < 0)
        return false;
    size_t len = strlen(line);
    ssize_t w;
    do
        w = send(fd, line, len, MSG_NOSIGNAL);
    while (w < 0 && errno == EINTR);
    return w == (ssize_t)len;
}

/* Init is the sandbox: if the memory cgroup's OOM killer takes it, the sandbox is deleted with
 * its workspace. It is as small as a shell, and memory that no process owns (files in /tmp and
 * /dev/shm, up to the whole limit) can leave it among the few candidates. So its commands are
 * made likelier victims (agent.c: oom_score_adj 500), and, where we may (root: lowering needs
 * CAP_SYS_RESOURCE), init itself the last one: -999, not -1000, which would leave a cgroup
 * with only init in it no victim at all, and init waiting for memory for ever. */
static void protect_init(pid_t init)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/oom_score_adj", (int)init);
    int fd = open(path, O_WRONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return;
    ssize_t w = write(fd, "-999", 4);
    (void)w; /* not allowed (a user's nsbox): its commands still go first */
    close(fd);
}

/* The supervisor process. Never returns. */
__attribute__((noreturn)) static void supervise(const struct nsbox_spec *spec, int ready_fd,
                                                int owner_fd, int owner_pid, const char *pool_key,
                                                int out_fd, const struct nsbox_id_out *out)
{
    static struct sup S;
    /* Only the owner can connect (socket mode 0600), but a stalled client must not stall the
     * supervisor: every message in or out has CLIENT_FRAME_MS. */
    nsbox_proto_frame_limit(CLIENT_FRAME_MS);
    if (pool_key)
        snprintf(S.pool_key, sizeof S.pool_key, "%s", pool_key);
    S.owner_fd = owner_fd;
    S.owner_pid = owner_pid;
    S.ready_fd = ready_fd;
    S.out_fd = out_fd;
    S.out = out;
    struct nsbox_err e = {0};
    char line[NSBOX_ERR_MSG_MAX + 64];
    S.spec = spec;
    S.agent = S.listen_fd = S.sfd = S.ttl_fd = S.idle_fd = S.ws_fd = -1;
    S.last_wake_us = -1;
    for (int i = 0; i < MAX_CLIENTS; i++)
        S.clients[i].fd = -1, S.clients[i].waiting = S.clients[i].waits = -1,
        S.clients[i].job_pidfd = -1;
    /* procs[] is not initialised here: a slot's fields are set when it is taken (new_proc), so
     * the untouched slots cost no memory. */
    prctl(PR_SET_NAME, "nsbox-supervise");
    signal(SIGPIPE, SIG_IGN);
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGCHLD);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGHUP);
    sigprocmask(SIG_BLOCK, &mask, NULL);

    nsbox_sandbox_init_zeroed(&S.sb); /* S is static, and this process's only one */
    S.sb.pooled = S.pool_key[0] != '\0';
    int sv[2];
    int ok = -1;
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
        nsbox_err_sys(&e, "socketpair");
        goto fail;
    }
    S.agent = sv[0];
    S.sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK); /* read after poll only */
    S.ttl_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
    S.idle_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
    if (S.sfd < 0 || S.ttl_fd < 0 || S.idle_fd < 0) {
        nsbox_err_sys(&e, "signalfd/timerfd");
        goto fail;
    }
    if (nsbox_sandbox_prepare(&S.sb, spec, NULL, NULL, &e) < 0)
        goto fail;
    S.sb.L.agent_fd = sv[1];
    S.sb.L.blocked = mask;
    if (nsbox_sandbox_start(&S.sb, NULL, &e) < 0)
        goto fail;
    protect_init(S.sb.pid);
    /* Ready when init closes the report pipe; a report means set-up failed. */
    struct nsbox_child_report rep;
    ssize_t n;
    do
        n = read(S.sb.L.report_rd, &rep, sizeof rep);
    while (n < 0 && errno == EINTR);
    if (n == (ssize_t)sizeof rep) {
        e = rep.err;
        nsbox_err_wrap(&e, "sandbox set-up failed");
        goto fail;
    }
    /* The child has its own copy of the mount plan; ours is no longer needed. */
    nsbox_sandbox_free_plan(&S.sb);
    if (nsbox_agent_recv_workspace(S.agent, &S.ws_fd, &e) < 0)
        goto fail;
    S.created = wall_s();
    S.expires = S.created + (int64_t)spec->ttl_seconds;
    set_timer(S.ttl_fd, spec->ttl_seconds);
    if (spec->setup_script && run_setup_script(&S, &e) < 0)
        goto fail;
    if (open_listen(&S, &e) < 0)
        goto fail;
    if (spec->idle_timeout_seconds)
        set_timer(S.idle_fd, spec->idle_timeout_seconds);
    if (S.pool_key[0] && (pool_listen(&S, &e) < 0 || pool_entry_create(&S, &e) < 0))
        goto fail;
    snprintf(line, sizeof line, "OK %s\n", S.sb.st.id);
    /* what ps shows: not the command line of whoever made it (a pool filler's, say) */
    char title[64];
    snprintf(title, sizeof title, "nsbox %s%s", S.sb.st.id, S.pool_key[0] ? " pooled" : "");
    nsbox_cmdline_set(title);
    /* A stop signal or the owner's end during the set-up, seen only now: the id is not
     * given out, so that no caller gets the id of a sandbox about to go. */
    bool prints = S.out_fd >= 0;
    if (abandoned(&S, "", &e) < 0 || (prints && give_id(&S, &e) < 0))
        goto fail;
    /* Nobody to give the id to: then nobody could ever use or remove the sandbox (until its
     * ttl, a day by default), so it goes now. When the id went to create's stdout (give_id),
     * it has been given, and create's end no longer matters. A pooled sandbox's handle is its
     * pool entry, made above: it is not its filler's. */
    if (report_ready(S.ready_fd, line) || prints) {
        nsbox_closep(&S.ready_fd);
        loop(&S);
    }
    kill_file_jobs(&S);
    ok = 0;
    if (S.sleeping) {
        /* Whatever ended the loop (ttl, owner, a holder gone, a signal), a frozen sandbox's
         * processes cannot die (cgroup v1 freezer) and the teardown's wait for init would last
         * for ever. Kill init first, so that nothing of the sandbox runs again, then thaw. */
        if (S.sb.pid > 0)
            kill(S.sb.pid, SIGKILL);
        if (nsbox_cgroup_freeze(&S.sb.cg, false, &e) == 0)
            S.sleeping = false;
    }
fail:;
    /* Everything is removed before a failed creation is reported: when the caller sees the
     * error, nothing of the sandbox is left. Its reader need not wait for that. */
    nsbox_closep(&S.out_fd);
    struct nsbox_err e2;
    pool_entry_remove(&S);
    nsbox_sandbox_destroy(&S.sb, &e2);
    if (S.tomb_later[0]) /* the id stays in S.sb.st */
        nsbox_tombstone_write(S.sb.st.id, S.tomb_later);
    if (ok < 0) {
        snprintf(line, sizeof line, "ERR %d %s\n", e.code, e.msg);
        report_ready(S.ready_fd, line);
    }
    if (S.claimed && refill)
        refill(spec); /* returns only if it could not */
    _exit(ok < 0 ? 125 : 0);
}

/* The supervisor's answer into buf, at most n - 1 bytes and a '\0': "OK <id>\n", or "ERR ...",
 * which may span lines (a set-up script's output), up to the end (the supervisor exits after
 * it). sfd >= 0: a signalfd of the stop signals; the first is put in *signo and passed on to the
 * supervisor ('X'), which then abandons the creation unless the id is already out. */
static size_t read_answer(int fd, int sfd, int *signo, char *buf, size_t n)
{
    size_t have = 0;
    while (have + 1 < n) {
        if (have >= 3 && !strncmp(buf, "OK ", 3) && memchr(buf, '\n', have))
            break; /* the id, whole */
        struct pollfd pf[2] = {{fd, POLLIN, 0}, {sfd, POLLIN, 0}};
        if (poll(pf, 2, -1) < 0)
            continue; /* EINTR: nothing of ours is caught, but a traced stop */
        struct signalfd_siginfo si;
        if ((pf[1].revents & POLLIN) && read(sfd, &si, sizeof si) == (ssize_t)sizeof si &&
            !*signo) {
            *signo = (int)si.ssi_signo;
            ssize_t w = send(fd, "X", 1, MSG_NOSIGNAL);
            (void)w; /* a supervisor gone meanwhile has answered, or will be seen gone */
        }
        if (!(pf[0].revents & (POLLIN | POLLHUP | POLLERR)))
            continue;
        ssize_t r = read(fd, buf + have, n - 1 - have);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        have += (size_t)r;
    }
    buf[have] = '\0';
    return have;
}

int nsbox_session_create(const struct nsbox_spec *s, int owner_pid, const char *pool_key, char *id,
                         const struct nsbox_id_out *out, struct nsbox_err *e)
{
    /* Opened here, before the forks: the pid is checked while it surely names the caller's
     * process, and the descriptor keeps naming it whatever pids are reused later. */
    cleanup_close int owner_fd = -1;
    if (owner_pid > 0) {
        owner_fd = (int)syscall(SYS_pidfd_open, owner_pid, 0);
        if (owner_fd < 0)
            return nsbox_err_set(e, NSBOX_E_INVALID, errno, "--owner-pid %d: %s", owner_pid,
                                 errno == ESRCH ? "no such process" : strerror(errno));
    }
    /* The supervisor's own descriptor of create's stdout: it writes the id there itself. */
    cleanup_close int out_fd = out ? fcntl(out->fd, F_DUPFD_CLOEXEC, 3) : -1;
    if (out && out_fd < 0)
        return nsbox_err_sys(e, "create: stdout");
    /* A socket, not a pipe: the answer goes one way, an interruption the other. */
    int p[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, p) < 0)
        return nsbox_err_sys(e, "socketpair");
    /* From here the stop signals are read, not taken: one stops the creation through the
     * supervisor (read_answer), which answers once nothing of the sandbox is left. Without a
     * signalfd they stay as they were, and kill us: the supervisor sees its socket close. */
    sigset_t stop, old;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT), sigaddset(&stop, SIGTERM), sigaddset(&stop, SIGHUP);
    sigaddset(&stop, SIGQUIT);
    if (out)
        sigprocmask(SIG_BLOCK, &stop, &old);
    pid_t pid = fork();
    if (pid < 0) {
        int err = errno;
        close(p[0]), close(p[1]);
        if (out)
            sigprocmask(SIG_SETMASK, &old, NULL);
        errno = err;
        return nsbox_err_sys(e, "fork");
    }
    if (pid == 0) {
        /* Detach: a session of its own, no terminal, stdio on /dev/null. The caller may exit
         * at once; the sandbox stays. One fork, not the classic two: our callers are nsbox
         * commands that exit once the sandbox is ready, never wait for us, and have no other
         * children to mix us up with; when they exit we are reparented as a grandchild would
         * be. The second fork cost a whole process per create (docs/benchmarks.md, session
         * 18). As a session leader the supervisor would take a terminal it opened as its
         * controlling one. What it opens of paths a sandbox or a client can steer (workspace
         * files) is O_NOCTTY; the rest (cgroup, /proc, state files, /dev/null) cannot be a
         * terminal; a sandbox's pty is opened by its init, inside, with O_NOCTTY, and only
         * its master is passed here. New opens of other paths need O_NOCTTY too. */
        close(p[0]);
        setsid();
        if (out)
            sigprocmask(SIG_SETMASK, &old, NULL);
        int null = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (null >= 0) {
            dup2(null, 0), dup2(null, 1), dup2(null, 2);
            if (null > 2)
                close(null);
        }
        if (chdir("/") < 0)
            _exit(125);
        /* Nothing of the caller's: an inherited descriptor would live as long as the sandbox
         * (a flock'ed file would stay locked, a pipe's reader would never see its end). Its
         * stdout only until the id is written there (give_id). */
        int keep[] = {p[1], owner_fd, out_fd};
        nsbox_close_fds_keep(keep, 3);
        supervise(s, p[1], owner_fd, owner_pid, pool_key, out_fd, out);
    }
    nsbox_closep(&out_fd);
    int sfd = out ? signalfd(-1, &stop, SFD_CLOEXEC | SFD_NONBLOCK) : -1;
    if (out && sfd < 0)
        sigprocmask(SIG_SETMASK, &old, NULL);
    int signo = 0;
    close(p[1]);
    char buf[NSBOX_ERR_MSG_MAX + 64];
    size_t got = read_answer(p[0], sfd, &signo, buf, sizeof buf);
    close(p[0]);
    /* One that failed may still be ending: then it is a zombie of ours only until we exit,
     * moments later (both callers do), and is reparented with the rest. */
    waitpid(pid, NULL, WNOHANG);
    bool made = !strncmp(buf, "OK ", 3) && got >= 3 + NSBOX_ID_LEN;
    if (sfd >= 0) {
        /* Made: a stop signal that came meanwhile, or comes until create has exited, is too
         * late, the id is out (a caller that checks our exit code must not drop an id that
         * names a live sandbox; it may have read the id before we exit): they stay blocked,
         * and those already here are discarded. */
        struct timespec now = {0, 0};
        while (made && sigtimedwait(&stop, NULL, &now) > 0)
            ;
        close(sfd);
        if (!made)
            sigprocmask(SIG_SETMASK, &old, NULL);
    }
    if (out && out->signo)
        *out->signo = made ? 0 : signo;
    if (made) {
        memcpy(id, buf + 3, NSBOX_ID_LEN);
        id[NSBOX_ID_LEN] = '\0';
        return 0;
    }
    if (signo)
        return nsbox_err_set(e, NSBOX_E_SYS, EINTR,
                             "create: stopped by signal %d (%s) before the sandbox was ready; "
                             "nothing was created",
                             signo, strsignal(signo));
    if (!strncmp(buf, "ERR ", 4)) {
        char *end;
        long code = strtol(buf + 4, &end, 10);
        size_t l = strlen(end);
        if (l && end[l - 1] == '\n')
            end[l - 1] = '\0';
        return nsbox_err_set(e, (int)code, 0, "%s", *end == ' ' ? end + 1 : end);
    }
    return nsbox_err_set(e, NSBOX_E_SYS, EPIPE, "the sandbox supervisor died while starting");
}
