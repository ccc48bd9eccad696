/* The supervisor's state (supervisor_impl.h): its processes and the logs of the background
 * ones, its clients and the replies to them, and what the rest of the supervisor shares. */
#define _GNU_SOURCE
#include "supervisor_impl.h"
#include "cleanup.h"
#include "files_impl.h"
#include "util.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

/* The sandbox's record for later requests ("was deleted by rm", state.h). Where the state
 * lives has no inode left, the record's file cannot be made until the sandbox's own files are
 * gone: it is written again after the teardown, else later requests would say that the sandbox
 * never existed. */
void nsbox_sup_tomb(struct sup *S, const char *reason)
{
    if (nsbox_state_tombstone_write(S->sb.st.id, reason) < 0)
        snprintf(S->tomb_later, sizeof S->tomb_later, "%s", reason);
}

/* noinline: inlined into nsbox_sup_drain(), gcc's -Warray-bounds mistakes the n >= LOG_MAX branch
 * for a read past drain's 16 KiB buffer, which it can never take there. */
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
char *nsbox_sup_ring_text(const struct ring *r, uint64_t from, bool more, uint64_t *end, bool *lost)
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

void nsbox_sup_set_timer(int fd, uint64_t seconds)
{
    struct itimerspec its = {.it_value = {.tv_sec = (time_t)seconds}};
    timerfd_settime(fd, 0, &its, NULL);
}

void nsbox_sup_touch(struct sup *S)
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
        nsbox_sup_set_timer(S->idle_fd, S->spec->idle_timeout_seconds);
}

void nsbox_sup_reply(struct sup *S, int ci, cJSON *r, const int *fds, size_t nfds)
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

void nsbox_sup_reply_err(struct sup *S, int ci, const char *tag, const struct nsbox_err *e)
{
    nsbox_sup_reply(S, ci, nsbox_proto_reply_error(tag, e->code ? e->code : NSBOX_E_SYS, e->msg),
                    NULL, 0);
}

void nsbox_sup_close_client(struct sup *S, int ci)
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
        nsbox_sup_tomb(S, "deleted because the client holding it went away");
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
void nsbox_sup_reply_wait(struct sup *S, int ci, const char *tag, const struct proc *p)
{
    cJSON *r = nsbox_proto_reply_ok(tag);
    cJSON_AddNumberToObject(r, "pid", p->pid);
    cJSON_AddNumberToObject(r, "exit_code", p->exit_code);
    cJSON_AddBoolToObject(r, "timed_out", p->timed_out);
    cJSON_AddBoolToObject(r, "oom_killed", p->oom_killed);
    nsbox_sup_reply(S, ci, r, NULL, 0);
}

/* A connection waits for one thing at a time: a command (exec, start) or a process's end. */
bool nsbox_sup_client_waits(const struct client *c)
{
    return c->waiting >= 0 || c->waits >= 0;
}

/* Refuse a second thing to wait for on connection ci; true when refused. */
bool nsbox_sup_refuse_if_waiting(struct sup *S, int ci, const char *tag)
{
    if (!nsbox_sup_client_waits(&S->clients[ci]))
        return false;
    struct nsbox_err e;
    nsbox_err_set(&e, NSBOX_E_INVALID, EBUSY,
                  "this connection already waits for a command; open another one");
    nsbox_sup_reply_err(S, ci, tag, &e);
    return true;
}

/* Refuse a request that keeps connection ci at work when MAX_AT_WORK are; true when refused.
 * Nothing has started: the client may send it again (the CLI and the Python client do). */
bool nsbox_sup_refuse_if_busy(struct sup *S, int ci, const char *tag, bool wait)
{
    int n = 0, waits = 0;
    for (int i = 0; i < MAX_CLIENTS; i++) {
        const struct client *c = &S->clients[i];
        n += c->job != 0 || (c->fd >= 0 && nsbox_sup_client_waits(c));
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
    nsbox_sup_reply_err(S, ci, tag, &e);
    return true;
}

void nsbox_sup_free_proc(struct proc *p)
{
    nsbox_closep(&p->out_fd);
    nsbox_closep(&p->err_fd);
    free(p->out.buf);
    free(p->err.buf);
    memset(p, 0, sizeof *p);
    p->out_fd = p->err_fd = -1;
    p->client = -1;
}

struct proc *nsbox_sup_new_proc(struct sup *S, int *idx)
{
    /* Reuse the slot of a finished background process when full. */
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < MAX_PROCS; i++) {
            struct proc *p = &S->procs[i];
            if (!p->used || (pass == 1 && !p->running && p->client < 0 && p->spawned)) {
                if (p->used)
                    nsbox_sup_free_proc(p);
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

struct proc *nsbox_sup_proc_by_seq(struct sup *S, uint32_t seq)
{
    for (int i = 0; i < S->nprocs; i++)
        if (S->procs[i].used && S->procs[i].seq == seq)
            return &S->procs[i];
    return NULL;
}

uint64_t nsbox_sup_oom_kills(struct sup *S)
{
    return nsbox_cgroup_oom_kills(&S->sb.cg);
}

/* The process with that pid: the running one when an ended one had the pid before (the
 * sandbox's pids wrap around). */
struct proc *nsbox_sup_proc_by_pid(struct sup *S, int pid)
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

/* A listening unix socket dir/name, mode 0600 from the start: no window in which another user
 * could connect. The control socket, and a pooled sandbox's run socket. */
int nsbox_sup_listen_in_dir(const char *dir, const char *name, int type, int backlog,
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

/* Read what fd has into r, at most max bytes (a writer faster than us must not keep us here);
 * at its end, close it. Returns the bytes read. */
size_t nsbox_sup_drain(int *fd, struct ring *r, size_t max)
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

/* The signals that came (the signalfd is non-blocking): the first that is not SIGCHLD (a
 * stop: TERM, INT, HUP), or 0. A SIGCHLD needs no more than its read: the callers look at
 * their children anyway. */
int nsbox_sup_stop_signal(struct sup *S)
{
    struct signalfd_siginfo si;
    while (read(S->sfd, &si, sizeof si) == (ssize_t)sizeof si)
        if (si.ssi_signo != SIGCHLD)
            return (int)si.ssi_signo;
    return 0;
}
