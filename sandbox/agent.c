/* The agent protocol (agent.h): its messages on the socket, for both ends, and the
 * supervisor's end; init's end is agent_init.c. */
#define _GNU_SOURCE
#include "agent.h"
#include "cleanup.h"
#include "util.h"

#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int nsbox_agent_send_msg(int sock, const struct nsbox_agent_hdr *h, const char *payload,
                         const int *fds, size_t nfds)
{
    return nsbox_msg_send(sock, h, sizeof *h, payload, h->len, fds, nfds) < 0 ? -1 : 0;
}

ssize_t nsbox_agent_recv_msg(int sock, struct nsbox_agent_hdr *h, char *payload, size_t max,
                             int *fds, struct nsbox_agent_extra *x)
{
    int got[3 + NSBOX_AGENT_EXTRA_MAX], flags;
    size_t n_got, extra = 0, cap = x ? NSBOX_ARRAY_LEN(got) : 3;
    ssize_t n = nsbox_msg_recv_fds(sock, h, sizeof *h, payload, max, got, cap, &n_got, &flags);
    bool whole =
        n > 0 && (size_t)n >= sizeof *h && !(flags & MSG_TRUNC) && h->len == (size_t)n - sizeof *h;
    if (whole && x && h->type == NSBOX_AGENT_SPAWN)
        extra = NSBOX_AGENT_EXTRA_OF(h->flags);
    bool ok = whole && !(flags & MSG_CTRUNC) && extra <= n_got && n_got - extra <= 3;
    for (size_t i = 0; i < 3; i++) {
        int fd = ok && i < n_got - extra ? got[i] : -1;
        if (fds)
            fds[i] = fd;
        else if (fd >= 0)
            close(fd);
    }
    if (x && (x->n = ok ? extra : 0))
        memcpy(x->fd, got + n_got - extra, extra * sizeof *got);
    for (size_t i = 0; !ok && i < n_got; i++)
        close(got[i]);
    if (n > 0 && !ok) {
        /* EMFILE: the message came whole, but not its descriptors (no room in our table: the
         * sandbox, whose uid init shares, can lower init's RLIMIT_NOFILE with prlimit). The
         * header is good, so that the sender can be told. */
        errno = whole && (flags & MSG_CTRUNC) ? EMFILE : EBADMSG;
        return -1;
    }
    return n;
}

/* ---- supervisor side ---------------------------------------------------------------------- */

static int append(char *buf, size_t *off, const char *s, struct nsbox_err *e)
{
    size_t len = strlen(s) + 1;
    if (*off + len > NSBOX_AGENT_PAYLOAD_MAX)
        return nsbox_err_set(e, NSBOX_E_INVALID, E2BIG,
                             "command line and environment exceed %u KiB; pass long inputs in a "
                             "file", NSBOX_AGENT_PAYLOAD_MAX / 1024);
    memcpy(buf + *off, s, len);
    *off += len;
    return 0;
}

int nsbox_agent_spawn(int sock, uint32_t seq, char *const argv[], char *const env[],
                      const char *cwd, const int fds[3], const int *extra, size_t n_extra,
                      unsigned flags, uint32_t winsize, const struct nsbox_spawnuser *user,
                      struct nsbox_err *e)
{
    if (n_extra > NSBOX_AGENT_EXTRA_MAX)
        return nsbox_err_invalid(e, "agent: more than %u descriptors to pass on",
                                 NSBOX_AGENT_EXTRA_MAX);
    char utext[NSBOX_SPAWNUSER_TEXT_MAX];
    if (user && nsbox_spawnuser_format(user, utext, sizeof utext) < 0)
        return nsbox_err_invalid(e, "exec: the user's ids are out of range");
    if (user)
        flags |= NSBOX_AGENT_F_USER;
    else
        flags &= ~NSBOX_AGENT_F_USER;
    /* as large as this request (append() bounds it): a 192 KiB buffer would be a fresh mmap,
     * page faults and a munmap on every exec */
    size_t need = strlen(cwd) + 1 + (user ? strlen(utext) + 1 : 0);
    for (size_t i = 0; argv[i] && need <= NSBOX_AGENT_PAYLOAD_MAX; i++)
        need += strlen(argv[i]) + 1;
    for (size_t i = 0; env && env[i] && need <= NSBOX_AGENT_PAYLOAD_MAX; i++)
        need += strlen(env[i]) + 1;
    cleanup_free char *buf = malloc(need < NSBOX_AGENT_PAYLOAD_MAX ? need : NSBOX_AGENT_PAYLOAD_MAX);
    if (!buf)
        return nsbox_err_sys(e, "malloc");
    size_t off = 0;
    struct nsbox_agent_hdr h = {.type = NSBOX_AGENT_SPAWN,
                                .seq = seq,
                                .flags = flags | NSBOX_AGENT_F_EXTRA(n_extra),
                                .status = (int32_t)winsize};
    if ((user && append(buf, &off, utext, e) < 0) || append(buf, &off, cwd, e) < 0)
        return -1;
    for (; argv[h.argc]; h.argc++)
        if (append(buf, &off, argv[h.argc], e) < 0)
            return -1;
    for (; env && env[h.envc]; h.envc++)
        if (append(buf, &off, env[h.envc], e) < 0)
            return -1;
    h.len = (uint32_t)off;
    int all[3 + NSBOX_AGENT_EXTRA_MAX];
    size_t n = 0;
    if (!(flags & NSBOX_AGENT_F_TTY)) {
        nsbox_share_pipes(fds);
        for (; n < 3; n++)
            all[n] = fds[n];
    }
    if (n_extra)
        memcpy(all + n, extra, n_extra * sizeof *extra);
    if (nsbox_agent_send_msg(sock, &h, buf, all, n + n_extra) < 0)
        return nsbox_err_sys(e, "agent: send");
    return 0;
}

int nsbox_agent_kill(int sock, int pid, int sig, struct nsbox_err *e)
{
    struct nsbox_agent_hdr h = {.type = NSBOX_AGENT_KILL, .pid = pid, .status = sig};
    if (nsbox_agent_send_msg(sock, &h, NULL, NULL, 0) < 0)
        return nsbox_err_sys(e, "agent: send");
    return 0;
}

int nsbox_agent_listen(int sock, int listen_fd, int oom_fd, struct nsbox_err *e)
{
    struct nsbox_agent_hdr h = {.type = NSBOX_AGENT_LISTEN};
    int fds[2] = {listen_fd, oom_fd};
    if (nsbox_agent_send_msg(sock, &h, NULL, fds, oom_fd >= 0 ? 2 : 1) < 0)
        return nsbox_err_sys(e, "agent: send");
    return 0;
}

int nsbox_agent_retire(int sock, void (*on_event)(const struct nsbox_agent_event *ev, void *arg),
                       void *arg)
{
    struct nsbox_agent_hdr h = {.type = NSBOX_AGENT_RETIRE};
    if (nsbox_agent_send_msg(sock, &h, NULL, NULL, 0) < 0)
        return -1;
    /* init answers at once unless it is starting the run's command or waiting for a run
     * request (200 ms per connection): a few ms, seconds at worst */
    for (;;) {
        struct pollfd pf = {sock, POLLIN, 0};
        int pr = poll(&pf, 1, 5000);
        if (pr < 0 && errno == EINTR)
            continue;
        if (pr == 0)
            return -2;
        if (pr < 0)
            return -1;
        struct nsbox_agent_event ev;
        struct nsbox_err e;
        int r = nsbox_agent_recv(sock, &ev, &e);
        if (r == 0 || (r < 0 && e.sys_errno != EBADMSG))
            return -1;
        if (r < 0)
            continue; /* a message init should not have sent: skipped, as on_agent does */
        if (ev.type == NSBOX_AGENT_RETIRED) {
            nsbox_closep(&ev.fd);
            return ev.status ? 1 : 0;
        }
        on_event(&ev, arg);
        nsbox_closep(&ev.fd);
    }
}

int nsbox_agent_recv(int sock, struct nsbox_agent_event *ev, struct nsbox_err *e)
{
    struct nsbox_agent_hdr h;
    char payload[sizeof ev->msg];
    int fds[3];
    ev->fd = -1;
    ssize_t n = nsbox_agent_recv_msg(sock, &h, payload, sizeof payload - 1, fds, NULL);
    if (n == 0)
        return 0;
    if (n < 0)
        return nsbox_err_sys(e, "agent: receive");
    for (int i = 1; i < 3; i++)
        nsbox_closep(&fds[i]);
    if (h.type == NSBOX_AGENT_SPAWNED)
        ev->fd = fds[0];
    else
        nsbox_closep(&fds[0]);
    if (h.type != NSBOX_AGENT_SPAWNED && h.type != NSBOX_AGENT_EXITED &&
        h.type != NSBOX_AGENT_FAILED && h.type != NSBOX_AGENT_CLAIMED &&
        h.type != NSBOX_AGENT_RETIRED)
        return nsbox_err_set(e, NSBOX_E_INVALID, EBADMSG, "agent: unexpected message %u", h.type);
    ev->type = h.type;
    ev->seq = h.seq;
    ev->pid = h.pid;
    ev->status = h.status;
    ev->oom_kills = h.type == NSBOX_AGENT_EXITED ? h.argc : 0;
    payload[h.len] = '\0';
    snprintf(ev->msg, sizeof ev->msg, "%s", payload);
    return 1;
}

int nsbox_agent_recv_workspace(int sock, int *fd, struct nsbox_err *e)
{
    struct nsbox_agent_hdr h;
    char payload[16];
    int fds[3];
    *fd = -1;
    ssize_t n = nsbox_agent_recv_msg(sock, &h, payload, sizeof payload, fds, NULL);
    if (n == 0)
        return nsbox_err_set(e, NSBOX_E_SYS, EPIPE, "agent: init ended before it was ready");
    if (n < 0)
        return nsbox_err_sys(e, "agent: receive");
    for (int i = 1; i < 3; i++)
        nsbox_closep(&fds[i]);
    struct stat sb;
    if (h.type != NSBOX_AGENT_WORKSPACE || fds[0] < 0 || fstat(fds[0], &sb) < 0 ||
        !S_ISDIR(sb.st_mode)) {
        nsbox_closep(&fds[0]);
        return nsbox_err_set(e, NSBOX_E_INVALID, EBADMSG,
                             "agent: expected the workspace, got message %u", h.type);
    }
    *fd = fds[0];
    return 0;
}
