/* Supervisor of a persistent sandbox (see supervisor.h, docs/protocol.md): its life, from the
 * sandbox's start to its teardown, and the event loop in between. */
#define _GNU_SOURCE
#include "supervisor_impl.h"
#include "cleanup.h"
#include "cmdline.h"
#include "config.h"
#include "dnsnote.h"
#include "net.h"
#include "util.h"
#include "filemax.h"
#include "wsdir.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ---- small helpers -------------------------------------------------------------------------- */

static int64_t wall_s(void)
{
    return (int64_t)time(NULL);
}

/* ---- events --------------------------------------------------------------------------------- */

/* The names asked of the sandbox's stub resolver since the last exec that said them
 * (docs/network.md, "Names that do not resolve"), as the note for the client to print. */
static void add_dns_note(struct sup *S, cJSON *rep)
{
    char names[NSBOX_DNSQUERY_NAMES][NSBOX_DNSQUERY_NAME_MAX + 1], note[4096];
    size_t k = nsbox_net_dns_take(S->sb.net, names);
    if (k && nsbox_dnsnote_format(S->spec, (const char(*)[NSBOX_DNSQUERY_NAME_MAX + 1])names, k,
                                  note, sizeof note))
        cJSON_AddStringToObject(rep, "dns_note", note);
}

static void on_agent(struct sup *S)
{
    struct nsbox_agent_event ev;
    struct nsbox_err e = {0};
    int r = nsbox_agent_recv(S->agent, &ev, &e);
    if (r <= 0) {
        if (r == 0 || e.sys_errno != EBADMSG) {
            /* init is gone: so is the sandbox */
            nsbox_sup_tomb(S, "deleted because its init process ended");
            S->quit = true;
        }
        return;
    }
    if (ev.type == NSBOX_AGENT_CLAIMED || ev.seq == NSBOX_AGENT_SEQ_RUN) {
        nsbox_sup_pool_on_event(&ev, S);
        return;
    }
    struct proc *p = nsbox_sup_proc_by_seq(S, ev.seq);
    if (!p)
        return;
    int ci = p->client;
    if (ev.type == NSBOX_AGENT_SPAWNED) {
        p->pid = ev.pid;
        p->spawned = true;
        if (ev.fd >= 0) {
            /* exec -t: the terminal's master goes to the client now; the exit status later */
            if (p->tty && ci >= 0) {
                cJSON *rep = nsbox_proto_reply_ok(p->tag);
                cJSON_AddBoolToObject(rep, "tty", true);
                cJSON_AddNumberToObject(rep, "pid", p->pid);
                nsbox_sup_reply(S, ci, rep, &ev.fd, 1);
            }
            nsbox_closep(&ev.fd);
        }
        if (p->orphaned)
            nsbox_agent_kill(S->agent, p->pid, SIGKILL, &e);
        else if (p->pending_sig)
            nsbox_agent_kill(S->agent, p->pid, p->pending_sig, &e);
        if (p->background && ci >= 0) {
            cJSON *rep = nsbox_proto_reply_ok(p->tag);
            cJSON_AddNumberToObject(rep, "pid", p->pid);
            if (p->deadline) /* says the timeout was taken: an older supervisor ignored it */
                cJSON_AddNumberToObject(rep, "timeout_ms", (double)p->timeout_ms);
            nsbox_sup_reply(S, ci, rep, NULL, 0);
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
            cJSON *rep = nsbox_proto_reply_error(
                p->tag, ev.status == 125 ? NSBOX_E_INVALID : NSBOX_E_EXEC, ev.msg);
            cJSON_AddNumberToObject(rep, "exit_code", ev.status);
            nsbox_sup_reply(S, ci, rep, NULL, 0);
            S->clients[ci].waiting = -1;
        }
        nsbox_sup_free_proc(p);
        return;
    }
    /* EXITED */
    p->running = false;
    p->exit_code = p->timed_out ? 124 : ev.status;
    bool oom =
        ev.status == 128 + SIGKILL && nsbox_sup_oom_kills(S) > p->oom_before; /* only then read */
    if (ci >= 0) {
        cJSON *rep = nsbox_proto_reply_ok(p->tag);
        cJSON_AddNumberToObject(rep, "exit_code", p->exit_code);
        cJSON_AddBoolToObject(rep, "timed_out", p->timed_out);
        cJSON_AddBoolToObject(rep, "oom_killed", oom);
        add_dns_note(S, rep);
        nsbox_sup_reply(S, ci, rep, NULL, 0);
        S->clients[ci].waiting = -1;
        p->client = -1;
    }
    if (p->background) {
        p->oom_killed = oom;
        int idx = (int)(p - S->procs);
        for (int i = 0; i < MAX_CLIENTS; i++)
            if (S->clients[i].fd >= 0 && S->clients[i].waits == idx) {
                S->clients[i].waits = -1;
                nsbox_sup_reply_wait(S, i, S->clients[i].wait_tag, p);
            }
    }
    if (!p->background)
        nsbox_sup_free_proc(p);
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
        nsbox_sup_close_client(S, ci);
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
            nsbox_sup_reply_err(S, ci, NULL, &e);
        nsbox_sup_close_client(S, ci);
        return;
    }
    nsbox_sup_requests_handle(S, ci, buf, (size_t)n, fds);
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
    cJSON *r =
        nsbox_proto_reply_error(NULL, NSBOX_E_BUSY,
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
            nsbox_sup_touch(
                S); /* a sleeping sandbox's init must be awake to kill (a background one's) */
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
        if (S->clients[i].fd >= 0 && nsbox_sup_client_waits(&S->clients[i]))
            return true; /* a command's client, or one waiting for a background process */
    return false;
}

static void on_idle(struct sup *S)
{
    uint64_t x;
    if (read(S->idle_fd, &x, sizeof x) < 0)
        return;
    if (busy(S)) {
        nsbox_sup_set_timer(S->idle_fd, S->spec->idle_timeout_seconds);
        return;
    }
    struct nsbox_err e;
    if (!S->sleeping && nsbox_cgroup_freeze(&S->sb.cg, true, &e) == 0) {
        S->sleeping = true;
        S->sleeps++;
    }
}

/* The descriptors the loop polls, in this order: the fixed ones, the clients (from *first_client
 * on, map[] says which), the background streams (from *first_log on, map[]: 2 * slot, + 1 for
 * stderr). Returns how many, and sets *timeout. */
enum { F_LISTEN, F_SIG, F_TTL, F_IDLE, F_AGENT, F_OWNER, F_FIXED };
#define POLL_MAX (F_FIXED + MAX_CLIENTS + 2 * MAX_PROCS)

static size_t poll_set(struct sup *S, struct pollfd *pf, int *map, int64_t now, size_t *first_log,
                       int *timeout)
{
    size_t n = 0;
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
    *first_log = n;
    *timeout = next_timeout(S, now);
    if (paused && (*timeout < 0 || S->accept_after - now < *timeout))
        *timeout = (int)(S->accept_after - now);
    bool logs = !S->sleeping && log_budget(S, now) > 0;
    if (!S->sleeping && !logs) { /* spent: the writers wait on full pipes until the next */
        int until = (int)(S->log_window + LOG_WINDOW_MS - now);
        *timeout = *timeout < 0 || until < *timeout ? until : *timeout;
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
    return n;
}

static void on_signals(struct sup *S)
{
    if (nsbox_sup_stop_signal(S)) {
        nsbox_sup_tomb(S, "deleted: its supervisor was stopped");
        S->quit = true;
    }
    nsbox_sup_files_reap_jobs(S);
    int status;
    if (S->sb.pid > 0 && waitpid(S->sb.pid, &status, WNOHANG) == S->sb.pid) {
        S->sb.pid = 0;
        nsbox_sup_tomb(S, "deleted because its init process ended");
        S->quit = true;
    }
}

static void on_ttl(struct sup *S)
{
    char why[96];
    snprintf(why, sizeof why, "deleted because ttl_seconds=%llu expired",
             (unsigned long long)S->spec->ttl_seconds);
    if (!S->pool_key[0]) /* nobody knows a pooled sandbox's id */
        nsbox_sup_tomb(S, why);
    int pr = nsbox_sup_pool_retire(S);
    if (pr == 1)
        S->quit = true;
    else if (pr < 0)
        nsbox_sup_set_timer(S->ttl_fd, 1); /* init was busy: ask again in a second */
    /* 0: a run has just taken it */
}

static void on_owner(struct sup *S)
{
    char why[96];
    snprintf(why, sizeof why, "deleted because its owner process (pid %d) ended", S->owner_pid);
    nsbox_sup_tomb(S, why);
    S->quit = true;
}

/* Background output: each ready stream gets its part of what is left of the budget (at least
 * LOG_CHUNK), beginning after the stream last read, so that a slow writer is read in every
 * window (with more than budget / LOG_CHUNK streams ready, in turn) however many fast ones there
 * are, and only the fast ones wait. */
static void read_logs(struct sup *S, const struct pollfd *pf, const int *map, size_t first_log,
                      size_t n)
{
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
        S->log_left -= map[i] % 2 ? nsbox_sup_drain(&p->err_fd, &p->err, max)
                                  : nsbox_sup_drain(&p->out_fd, &p->out, max);
        S->log_next = map[i] + 1;
    }
}

static void loop(struct sup *S)
{
    struct pollfd pf[POLL_MAX];
    int map[POLL_MAX];
    while (!S->quit) {
        size_t first_log;
        int timeout;
        size_t n = poll_set(S, pf, map, nsbox_now_ms(), &first_log, &timeout);
        int r = poll(pf, n, timeout);
        if (r < 0 && errno != EINTR)
            break;
        check_deadlines(S, nsbox_now_ms());
        if (pf[F_SIG].revents & POLLIN)
            on_signals(S);
        /* init's message before the ttl: a retire (the ttl's, or a delete's further down)
         * reads the agent socket itself, and what poll saw may be gone by then */
        if (pf[F_AGENT].revents & (POLLIN | POLLHUP | POLLERR))
            on_agent(S);
        if (pf[F_TTL].revents & POLLIN)
            on_ttl(S);
        if (pf[F_OWNER].revents & (POLLIN | POLLHUP))
            on_owner(S);
        if (pf[F_IDLE].revents & POLLIN)
            on_idle(S);
        for (size_t i = F_FIXED; i < first_log; i++) {
            if (!(pf[i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            if (S->clients[map[i]].job > 0)
                nsbox_sup_files_end_job(S, map[i]);
            else
                on_client(S, map[i]);
        }
        read_logs(S, pf, map, first_log, n);
        if (pf[F_LISTEN].revents & POLLIN)
            on_accept(S);
        for (int i = 0; i < MAX_CLIENTS; i++)
            if (S->clients[i].broken)
                nsbox_sup_close_client(S, i);
    }
}

/* The supervisor's state before anything is made: nothing open, no client. */
static void init_state(struct sup *S, const struct nsbox_supervisor_args *a)
{
    if (a->pool_key)
        snprintf(S->pool_key, sizeof S->pool_key, "%s", a->pool_key);
    /* without a look at the file: the read of its filler's, which the key covers */
    S->config_reads = nsbox_config_reads();
    S->owner_fd = a->owner_fd;
    S->owner_pid = a->owner_pid;
    S->ready_fd = a->ready_fd;
    S->out_fd = a->out_fd;
    S->out = a->out;
    S->spec = a->spec;
    S->agent = S->listen_fd = S->sfd = S->ttl_fd = S->idle_fd = S->ws_fd = -1;
    S->last_wake_us = -1;
    for (int i = 0; i < MAX_CLIENTS; i++)
        S->clients[i].fd = -1, S->clients[i].waiting = S->clients[i].waits = -1,
        S->clients[i].job_pidfd = -1;
    /* procs[] is not initialised here: a slot's fields are set when it is taken (new_proc), so
     * the untouched slots cost no memory. */
    nsbox_sandbox_init_zeroed(&S->sb); /* S is static, and this process's only one */
    S->sb.pooled = S->pool_key[0] != '\0';
    if (a->image)
        snprintf(S->sb.image_resolved, sizeof S->sb.image_resolved, "%s", a->image);
}

/* Start the sandbox (its init, the agent's socket, the timers) and wait until init is ready. */
static int start_sandbox(struct sup *S, const sigset_t *mask, struct nsbox_err *e)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
        return nsbox_err_sys(e, "socketpair");
    S->agent = sv[0];
    S->sfd = signalfd(-1, mask, SFD_CLOEXEC | SFD_NONBLOCK); /* read after poll only */
    S->ttl_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
    S->idle_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
    if (S->sfd < 0 || S->ttl_fd < 0 || S->idle_fd < 0)
        return nsbox_err_sys(e, "signalfd/timerfd");
    if (nsbox_sandbox_prepare(&S->sb, S->spec, NULL, NULL, e) < 0)
        return -1;
    S->sb.L.agent_fd = sv[1];
    S->sb.L.blocked = *mask;
    if (nsbox_sandbox_start(&S->sb, NULL, e) < 0)
        return -1;
    /* The bindings' values were wiped from the spec once the egress helper's state had them
     * (nsbox_sandbox_prepare); a supervisor with bindings leaves no core dump all the same. */
    if (S->spec->n_bindings)
        prctl(PR_SET_DUMPABLE, 0);
    nsbox_sup_setup_protect_init(S->sb.pid);
    /* Ready when init closes the report pipe; a report means set-up failed. */
    struct nsbox_child_report rep;
    ssize_t n;
    do
        n = read(S->sb.L.report_rd, &rep, sizeof rep);
    while (n < 0 && errno == EINTR);
    if (n == (ssize_t)sizeof rep) {
        *e = rep.err;
        return nsbox_err_wrap(e, "sandbox set-up failed");
    }
    /* The child has its own copy of the mount plan; ours is no longer needed. */
    nsbox_sandbox_free_plan(&S->sb);
    return nsbox_agent_recv_workspace(S->agent, &S->ws_fd, e);
}

/* After the start: the set-up script, the sockets, the timers, the pool entry; the id given out
 * and reported ready. 1: it is, and the loop may run; 0: nobody to give it to; -1: failed. */
static int make_ready(struct sup *S, struct nsbox_err *e)
{
    const struct nsbox_spec *spec = S->spec;
    char line[NSBOX_ID_LEN + 64];
    S->created = wall_s();
    S->expires = S->created + (int64_t)spec->ttl_seconds;
    nsbox_sup_set_timer(S->ttl_fd, spec->ttl_seconds);
    if (spec->setup_script && nsbox_sup_setup_run_script(S, e) < 0)
        return -1;
    if (nsbox_sup_setup_open_listen(S, e) < 0)
        return -1;
    if (spec->idle_timeout_seconds)
        nsbox_sup_set_timer(S->idle_fd, spec->idle_timeout_seconds);
    if (S->pool_key[0] &&
        (nsbox_sup_pool_listen(S, e) < 0 || nsbox_sup_pool_entry_create(S, e) < 0))
        return -1;
    snprintf(line, sizeof line, "OK %s\n", S->sb.st.id);
    /* what ps shows: not the command line of whoever made it (a pool filler's, say) */
    char title[64];
    snprintf(title, sizeof title, "nsbox %s%s", S->sb.st.id, S->pool_key[0] ? " pooled" : "");
    nsbox_cmdline_set(title);
    /* A stop signal or the owner's end during the set-up, seen only now: the id is not
     * given out, so that no caller gets the id of a sandbox about to go. */
    bool prints = S->out_fd >= 0;
    if (nsbox_sup_setup_abandoned(S, "", e) < 0 || (prints && nsbox_sup_setup_give_id(S, e) < 0))
        return -1;
    /* Nobody to give the id to: then nobody could ever use or remove the sandbox (until its
     * ttl, a day by default), so it goes now. When the id went to create's stdout (give_id),
     * it has been given, and create's end no longer matters. A pooled sandbox's handle is its
     * pool entry, made above: it is not its filler's. */
    return nsbox_sup_setup_report_ready(S->ready_fd, line) || prints;
}

/* Whatever ended the loop (ttl, owner, a holder gone, a signal), a frozen sandbox's processes
 * cannot die (cgroup v1 freezer) and the teardown's wait for init would last for ever. Kill
 * init first, so that nothing of the sandbox runs again, then thaw. */
static void end_sleep(struct sup *S)
{
    struct nsbox_err e;
    if (!S->sleeping)
        return;
    if (S->sb.pid > 0)
        kill(S->sb.pid, SIGKILL);
    if (nsbox_cgroup_freeze(&S->sb.cg, false, &e) == 0)
        S->sleeping = false;
}

/* A note of the sandbox layer's while the sandbox is made: to the creator, before the answer
 * (nsbox_session_set_note); ctx is the ready descriptor. */
static void pass_note(void *ctx, const char *line)
{
    char msg[sizeof NSBOX_SESSION_NOTE + NSBOX_NOTE_MAX];
    int n = snprintf(msg, sizeof msg - 1, NSBOX_SESSION_NOTE "%s", line);
    if (n < 0)
        return;
    n = n < (int)sizeof msg - 1 ? n : (int)sizeof msg - 2;
    /* one line: a newline in it (a directory's name may have one) would end the note early */
    for (char *p = msg; (p = strchr(p, '\n')); p++)
        *p = ' ';
    msg[n] = '\n', msg[n + 1] = '\0';
    nsbox_sup_setup_report_ready(*(int *)ctx, msg);
}

/* The soft limit of descriptors raised to the hard one: a supervisor holds its clients'
 * connections and descriptors, its commands' pidfds, pipes and log files, and a shell that
 * systemd started gives it 1,024 (its kill rounds cope with few, in batches, but a request
 * refused with EMFILE does not). Only its own: the sandbox's processes set theirs
 * (policy/rlimits.c, nsbox_rlimits_for). Failing to raise it is no error: the supervisor runs
 * with what it was given. */
static void raise_nofile(void)
{
    struct rlimit r;
    if (getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_cur < r.rlim_max) {
        r.rlim_cur = r.rlim_max;
        setrlimit(RLIMIT_NOFILE, &r);
    }
}

__attribute__((noreturn)) void nsbox_supervisor_main(const struct nsbox_supervisor_args *a)
{
    static struct sup S;
    /* Only the owner can connect (socket mode 0600), but a stalled client must not stall the
     * supervisor: every message in or out has CLIENT_FRAME_MS. */
    nsbox_proto_frame_limit(CLIENT_FRAME_MS);
    init_state(&S, a);
    struct nsbox_err e = {0};
    char line[NSBOX_ERR_MSG_MAX + 64];
    prctl(PR_SET_NAME, "nsbox-supervise");
    raise_nofile();
    signal(SIGPIPE, SIG_IGN);
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGCHLD);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGHUP);
    sigprocmask(SIG_BLOCK, &mask, NULL);
    nsbox_wsdir_set_note(pass_note, &S.ready_fd);
    nsbox_filemax_set_note(pass_note, &S.ready_fd);
    int ok = start_sandbox(&S, &mask, &e);
    int ready = ok < 0 ? -1 : make_ready(&S, &e);
    if (ready >= 0) {
        if (ready) {
            nsbox_closep(&S.ready_fd);
            loop(&S);
        }
        nsbox_sup_files_kill_jobs(&S);
        ok = 0;
        end_sleep(&S);
    } else {
        ok = -1;
    }
    /* Everything is removed before a failed creation is reported: when the caller sees the
     * error, nothing of the sandbox is left. Its reader need not wait for that. */
    nsbox_closep(&S.out_fd);
    struct nsbox_err e2;
    nsbox_sup_pool_entry_remove(&S);
    nsbox_sandbox_destroy(&S.sb, &e2);
    /* The control socket's inode is freed with its last descriptor, not by its unlink, and the
     * state directory's with the sandbox's mounts, which the workspace's descriptor holds: a
     * state filesystem out of inodes gets them back for the record below. */
    nsbox_closep(&S.listen_fd);
    nsbox_closep(&S.ws_fd);
    if (S.tomb_later[0]) /* the id stays in S.sb.st */
        nsbox_state_tombstone_write(S.sb.st.id, S.tomb_later);
    if (ok < 0) {
        snprintf(line, sizeof line, "ERR %d %s\n", e.code, e.msg);
        nsbox_sup_setup_report_ready(S.ready_fd, line);
    }
    if (S.claimed && a->refill)
        a->refill(a->spec); /* returns only if it could not */
    _exit(ok < 0 ? 125 : 0);
}
