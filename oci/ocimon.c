/* The monitor's services beyond pause and resume (ocirt.h): exec through init's agent, the
 * container's processes, new limits. The monitor owns the sandbox's cgroup and init's agent
 * socket; nsbox-oci's commands reach them over the control socket. */
#include "ocirt.h"
#include "agent.h"
#include "cgroup.h"
#include "cleanup.h"
#include "launch.h"
#include "util.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* What procs sends: 64 KiB, one message on the control socket. */
#define PIDS_MAX 16384

void nsbox_ocimon_init(struct nsbox_ocimon *m)
{
    memset(m, 0, sizeof *m);
    m->agent = m->console = -1;
    for (size_t i = 0; i < NSBOX_OCIMON_EXECS; i++)
        m->execs[i].conn = -1;
}

int nsbox_ocimon_prepare(struct nsbox_ocimon *m, struct nsbox_launch *L, bool console,
                         const struct nsbox_cgroup *cg, struct nsbox_err *e)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
        return nsbox_err_sys(e, "socketpair");
    m->agent = sv[0];
    L->agent_fd = sv[1]; /* nsbox_sandbox_start closes our copy */
    L->console = console;
    m->cg = cg;
    return 0;
}

int nsbox_ocimon_ready(struct nsbox_ocimon *m, int start_sock)
{
    char c = 0;
    struct iovec iov = {&c, 1};
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } u;
    struct msghdr msg = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof u.buf};
    ssize_t n;
    do
        n = recvmsg(start_sock, &msg, MSG_CMSG_CLOEXEC);
    while (n < 0 && errno == EINTR);
    if (n != 1)
        return -1;
    struct cmsghdr *h = CMSG_FIRSTHDR(&msg);
    if (h && h->cmsg_level == SOL_SOCKET && h->cmsg_type == SCM_RIGHTS &&
        h->cmsg_len == CMSG_LEN(sizeof(int))) {
        nsbox_closep(&m->console);
        memcpy(&m->console, CMSG_DATA(h), sizeof(int));
    }
    return (unsigned char)c;
}

static void reply(int fd, const char *op, int pid, int status, const char *text, int pass_fd)
{
    struct nsbox_ocictl_msg r = {
        .pid = pid, .status = status, .len = text ? (uint32_t)strlen(text) : 0};
    snprintf(r.op, sizeof r.op, "%s", op);
    struct nsbox_err e;
    nsbox_ocictl_send(fd, &r, text, pass_fd >= 0 ? &pass_fd : NULL, pass_fd >= 0 ? 1 : 0, &e);
}

static void reply_error(int fd, const struct nsbox_err *e)
{
    reply(fd, "error", 0, e->code ? e->code : NSBOX_E_SYS, e->msg, -1);
}

static void end_exec(struct nsbox_ocimon *m, size_t i)
{
    nsbox_closep(&m->execs[i].conn);
    m->execs[i].pid = 0;
}

/* "cwd\0argv...\0env...\0" (len bytes) into pointers into payload: argv and env
 * NULL-terminated. */
static int split(char *payload, size_t len, const struct nsbox_ocictl_msg *r, char ***argv,
                 char ***env, struct nsbox_err *e)
{
    size_t need = 1 + (size_t)r->argc + r->envc, count = 0;
    if (r->argc == 0 || r->argc > 65536 || r->envc > 65536 || len == 0 || payload[len - 1] != '\0')
        return nsbox_err_invalid(e, "exec: a malformed request");
    char **strs = calloc(need + 2, sizeof *strs);
    if (!strs)
        return nsbox_err_sys(e, "calloc");
    for (size_t off = 0; off < len && count <= need; off += strlen(payload + off) + 1)
        strs[count++] = payload + off;
    if (count != need) {
        free(strs);
        return nsbox_err_invalid(e, "exec: a malformed request");
    }
    /* [cwd, argv..., NULL, env..., NULL]: shift env by one to end argv */
    memmove(strs + 2 + r->argc, strs + 1 + r->argc, r->envc * sizeof *strs);
    strs[1 + r->argc] = NULL;
    strs[2 + r->argc + r->envc] = NULL;
    *argv = strs;
    *env = strs + 2 + r->argc;
    return 0;
}

/* With F_USER, the user before cwd: *user filled and *skip past its string. */
static int take_user(const char *payload, const struct nsbox_ocictl_msg *r,
                     struct nsbox_spawnuser *user, size_t *skip, struct nsbox_err *e)
{
    *skip = 0;
    if (!(r->flags & NSBOX_OCICTL_F_USER))
        return 0;
    size_t n = strnlen(payload, r->len);
    if (n == r->len)
        return nsbox_err_invalid(e, "exec: a malformed request");
    if (nsbox_spawnuser_parse(payload, user, e) < 0)
        return -1;
    *skip = n + 1;
    return 1;
}

static void serve_exec(struct nsbox_ocimon *m, int fd)
{
    struct nsbox_err e = {0};
    struct nsbox_ocictl_msg r;
    int fds[3 + NSBOX_AGENT_EXTRA_MAX];
    size_t got = 0;
    cleanup_free char *payload = malloc(NSBOX_AGENT_PAYLOAD_MAX + 1);
    char **strs = NULL, **env = NULL;
    struct nsbox_spawnuser user;
    size_t i = 0, skip = 0;
    int has_user = 0;
    while (i < NSBOX_OCIMON_EXECS && m->execs[i].conn >= 0)
        i++;
    if (!payload || nsbox_ocictl_recv_fds(fd, &r, payload, NSBOX_AGENT_PAYLOAD_MAX, fds,
                                          NSBOX_ARRAY_LEN(fds), &got, &e) <= 0) {
        close(fd);
        return;
    }
    bool tty = r.flags & NSBOX_OCICTL_F_TTY;
    /* stdin, stdout and stderr first (none with a tty), then those passed on at 3, 4, ... */
    size_t n_std = tty ? 0 : 3, n_extra = NSBOX_OCICTL_EXTRA_OF(r.flags);
    int stdio[3] = {-1, -1, -1};
    for (size_t k = 0; k < n_std && k < got; k++)
        stdio[k] = fds[k];
    if (m->agent < 0)
        nsbox_err_set(&e, NSBOX_E_INVALID, ESRCH, "container not running");
    else if (i == NSBOX_OCIMON_EXECS)
        nsbox_err_set(&e, NSBOX_E_INVALID, EAGAIN,
                      "%d execs already run in this container: wait for one to end",
                      NSBOX_OCIMON_EXECS);
    else if (got != n_std + n_extra || n_extra > NSBOX_AGENT_EXTRA_MAX)
        nsbox_err_invalid(&e,
                          "exec: stdin, stdout and stderr (without a terminal) and the "
                          "%zu descriptors to pass on must come with the request",
                          n_extra);
    if (!e.code && (has_user = take_user(payload, &r, &user, &skip, &e)) >= 0 &&
        split(payload + skip, r.len - skip, &r, &strs, &env, &e) == 0 &&
        nsbox_agent_spawn(m->agent, ++m->seq, strs + 1, env, strs[0], stdio, fds + n_std, n_extra,
                          tty ? NSBOX_AGENT_F_TTY : 0, r.winsize, has_user ? &user : NULL,
                          &e) == 0) {
        m->execs[i].conn = fd;
        m->execs[i].seq = m->seq;
        m->execs[i].pid = 0;
    }
    free(strs);
    for (size_t k = 0; k < got; k++)
        nsbox_closep(&fds[k]);
    if (e.code) {
        reply_error(fd, &e);
        close(fd);
    }
}

/* procs: the first max pids (the request's status, at most PIDS_MAX: one message), and in
 * status how many the cgroup has, which ps says when it is more. */
static void serve_procs(struct nsbox_ocimon *m, int fd, int32_t asked)
{
    struct nsbox_err e = {0};
    size_t max = asked > 0 && asked < PIDS_MAX ? (size_t)asked : PIDS_MAX;
    cleanup_free pid_t *pids = malloc(max * sizeof *pids);
    int n = pids ? nsbox_cgroup_pids(m->cg, pids, max, &e) : nsbox_err_sys(&e, "malloc");
    if (n < 0) {
        reply_error(fd, &e);
        return;
    }
    size_t sent = (size_t)n < max ? (size_t)n : max;
    struct nsbox_ocictl_msg r = {
        .op = "procs", .status = n, .len = (uint32_t)(sent * sizeof *pids)};
    nsbox_ocictl_send(fd, &r, pids, NULL, 0, &e);
}

static void serve_update(struct nsbox_ocimon *m, int fd)
{
    struct nsbox_err e = {0};
    struct nsbox_ocictl_msg r;
    struct nsbox_cgroup_update u;
    int fds[3];
    if (nsbox_ocictl_recv(fd, &r, &u, sizeof u, fds, &e) <= 0)
        return;
    for (int k = 0; k < 3; k++)
        nsbox_closep(&fds[k]);
    if (r.len != sizeof u)
        nsbox_err_invalid(&e, "update: a malformed request");
    else if (nsbox_cgroup_update(m->cg, &u, &e) == 0) {
        reply(fd, "ok", 0, 0, NULL, -1);
        return;
    }
    reply_error(fd, &e);
}

/* kill --all: every process of the cgroup, frozen meanwhile (as runc does), so that none
 * reacts before all have their signal: otherwise the container's process could die of it first
 * and init end the rest with SIGKILL. Init last all the same. A paused container (flags)
 * stays frozen. */
static void serve_killall(struct nsbox_ocimon *m, int fd, pid_t init_pid)
{
    struct nsbox_err e = {0}, e2;
    struct nsbox_ocictl_msg r;
    int fds[3];
    if (nsbox_ocictl_recv(fd, &r, NULL, 0, fds, &e) <= 0)
        return;
    for (int k = 0; k < 3; k++)
        nsbox_closep(&fds[k]);
    bool paused = r.flags & NSBOX_OCICTL_F_PAUSED;
    bool frozen = !paused && nsbox_cgroup_freeze(m->cg, true, &e2) == 0;
    /* Frozen, a listed process can still end (SIGKILL goes through a v2 freeze; a failed freeze
     * leaves the cgroup running) and its pid go to another process of the host's: signalled
     * through pidfds, only those still in the cgroup; the whole list, however long. */
    int n = nsbox_cgroup_signal_all(m->cg, init_pid, r.status, &e) < 0
                ? nsbox_err_wrap(&e, "kill --all")
                : 0;
    if (n >= 0 && kill(init_pid, r.status) < 0 && errno != ESRCH)
        n = nsbox_err_sys(&e, "kill --all: init");
    if (frozen)
        nsbox_cgroup_freeze(m->cg, false, &e2);
    if (n < 0)
        reply_error(fd, &e);
    else
        reply(fd, "ok", 0, 0, NULL, -1);
}

bool nsbox_ocimon_ctl(struct nsbox_ocimon *m, int fd, const char *op)
{
    if (!strcmp(op, "exec")) {
        serve_exec(m, fd); /* keeps fd for the exec's life */
        return true;
    }
    if (!strcmp(op, "procs")) {
        struct nsbox_ocictl_msg r;
        int fds[3];
        struct nsbox_err e;
        if (nsbox_ocictl_recv(fd, &r, NULL, 0, fds, &e) > 0)
            serve_procs(m, fd, r.status);
        for (int k = 0; k < 3; k++)
            nsbox_closep(&fds[k]);
    } else if (!strcmp(op, "update"))
        serve_update(m, fd);
    else if (!strcmp(op, "killall"))
        serve_killall(m, fd, m->init_pid);
    else
        return false;
    close(fd);
    return true;
}

size_t nsbox_ocimon_pollfds(const struct nsbox_ocimon *m, struct pollfd *pf)
{
    size_t n = 0;
    pf[n++] = (struct pollfd){m->agent, POLLIN, 0};
    for (size_t i = 0; i < NSBOX_OCIMON_EXECS; i++)
        pf[n++] = (struct pollfd){m->execs[i].conn, POLLIN, 0};
    return n;
}

/* init's answers and ends, to the exec they belong to. */
static void on_agent(struct nsbox_ocimon *m)
{
    struct nsbox_agent_event ev;
    struct nsbox_err e;
    int r = nsbox_agent_recv(m->agent, &ev, &e);
    if (r == 0 || (r < 0 && e.sys_errno != EBADMSG)) {
        /* init is gone: so is every exec'd process (killed with the container) */
        nsbox_closep(&m->agent);
        for (size_t i = 0; i < NSBOX_OCIMON_EXECS; i++)
            end_exec(m, i);
        return;
    }
    size_t i = 0;
    while (r > 0 && i < NSBOX_OCIMON_EXECS && (m->execs[i].conn < 0 || m->execs[i].seq != ev.seq))
        i++;
    if (r > 0 && i < NSBOX_OCIMON_EXECS) {
        int fd = m->execs[i].conn;
        if (ev.type == NSBOX_AGENT_SPAWNED) {
            m->execs[i].pid = ev.pid;
            reply(fd, "spawned", ev.pid, 0, NULL, ev.fd);
        } else if (ev.type == NSBOX_AGENT_FAILED || ev.type == NSBOX_AGENT_EXITED) {
            reply(fd, ev.type == NSBOX_AGENT_FAILED ? "failed" : "exited", ev.pid, ev.status,
                  ev.msg[0] ? ev.msg : NULL, -1);
            end_exec(m, i);
        }
    }
    if (r > 0)
        nsbox_closep(&ev.fd);
}

/* The exec's caller: a signal for its process, or its end (its process goes too). */
static void on_exec_conn(struct nsbox_ocimon *m, size_t i)
{
    struct nsbox_ocictl_msg r;
    int fds[3];
    struct nsbox_err e;
    int got = nsbox_ocictl_recv(m->execs[i].conn, &r, NULL, 0, fds, &e);
    for (int k = 0; k < 3; k++)
        nsbox_closep(&fds[k]);
    if (got > 0 && !strcmp(r.op, "kill")) {
        if (m->execs[i].pid > 1 && r.status > 0 && r.status < 65 && m->agent >= 0)
            nsbox_agent_kill(m->agent, m->execs[i].pid, r.status, &e);
        return;
    }
    if (got < 0 && e.sys_errno == EBADMSG)
        return;
    if (m->execs[i].pid > 1 && m->agent >= 0)
        nsbox_agent_kill(m->agent, m->execs[i].pid, SIGKILL, &e);
    end_exec(m, i); /* its EXITED, if it comes, finds no one */
}

void nsbox_ocimon_events(struct nsbox_ocimon *m, const struct pollfd *pf, size_t n)
{
    if (n > 0 && m->agent >= 0 && (pf[0].revents & (POLLIN | POLLHUP | POLLERR)))
        on_agent(m);
    for (size_t i = 0; i + 1 < n && i < NSBOX_OCIMON_EXECS; i++)
        if (m->execs[i].conn >= 0 && m->execs[i].conn == pf[i + 1].fd &&
            (pf[i + 1].revents & (POLLIN | POLLHUP | POLLERR)))
            on_exec_conn(m, i);
}

void nsbox_ocimon_finish(struct nsbox_ocimon *m)
{
    /* init is gone: what it said before it ended is still to be read, then EOF */
    while (m->agent >= 0)
        on_agent(m);
}
