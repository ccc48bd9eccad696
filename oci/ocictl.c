/* The monitor's control socket (ocirt.h): how pause and resume reach the process that owns the
 * sandbox's cgroup. The path goes through /proc/self/fd/N of the state directory, so that a
 * deep --root never meets sun_path's 108 bytes. */
#include "ocirt.h"
#include "cleanup.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

static int sock_addr(const char *dir, int *dirfd, struct sockaddr_un *sa, struct nsbox_err *e)
{
    *dirfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (*dirfd < 0)
        return nsbox_err_sys(e, "open %s", dir);
    memset(sa, 0, sizeof *sa);
    sa->sun_family = AF_UNIX;
    snprintf(sa->sun_path, sizeof sa->sun_path, "/proc/self/fd/%d/%s", *dirfd,
             NSBOX_OCI_CTL_SOCK);
    return 0;
}

int nsbox_ocictl_listen(const char *dir, struct nsbox_err *e)
{
    struct sockaddr_un sa;
    int dfd;
    if (sock_addr(dir, &dfd, &sa, e) < 0)
        return -1;
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(fd, 8) < 0) {
        nsbox_err_sys(e, "control socket in %s", dir);
        if (fd >= 0)
            close(fd);
        close(dfd);
        return -1;
    }
    close(dfd);
    return fd;
}

int nsbox_ocictl_connect(const struct nsbox_ocirt *g, const struct nsbox_ocistate *s,
                         struct nsbox_err *e)
{
    char dir[PATH_MAX];
    struct sockaddr_un sa;
    int dfd;
    if (nsbox_ocistate_dir(g, s->id, dir, sizeof dir, e) < 0 || sock_addr(dir, &dfd, &sa, e) < 0)
        return -1;
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        close(dfd);
        return nsbox_err_sys(e, "socket");
    }
    int r = connect(fd, (struct sockaddr *)&sa, sizeof sa);
    close(dfd);
    if (r < 0) {
        close(fd);
        return nsbox_err_set(e, NSBOX_E_INVALID, errno, "container %s: container not running",
                             s->id);
    }
    return fd;
}

int nsbox_ocictl_call(const struct nsbox_ocirt *g, const struct nsbox_ocistate *s, const char *op,
                      struct nsbox_err *e)
{
    int fd = nsbox_ocictl_connect(g, s, e);
    if (fd < 0)
        return -1;
    struct timeval tv = {10, 0}; /* a freeze waits at most 2 s */
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    struct nsbox_err reply;
    ssize_t n = -1;
    if (send(fd, op, strlen(op), MSG_NOSIGNAL) == (ssize_t)strlen(op))
        n = recv(fd, &reply, sizeof reply, 0);
    close(fd);
    if (n != (ssize_t)sizeof reply)
        return nsbox_err_set(e, NSBOX_E_SYS, n < 0 ? errno : EPIPE,
                             "container %s: no answer from its monitor to %s", s->id, op);
    if (reply.code != 0) {
        reply.msg[sizeof reply.msg - 1] = '\0';
        *e = reply;
        return -1;
    }
    return 0;
}

int nsbox_ocictl_send(int fd, const struct nsbox_ocictl_msg *m, const void *payload, const int *fds,
                      size_t nfds, struct nsbox_err *e)
{
    if (nsbox_msg_send(fd, m, sizeof *m, payload, m->len, fds, nfds) < 0)
        return nsbox_err_sys(e, "control socket: send %s", m->op);
    return 0;
}

int nsbox_ocictl_recv(int fd, struct nsbox_ocictl_msg *m, void *payload, size_t max, int fds[3],
                      struct nsbox_err *e)
{
    size_t got;
    return nsbox_ocictl_recv_fds(fd, m, payload, max, fds, 3, &got, e);
}

int nsbox_ocictl_recv_fds(int fd, struct nsbox_ocictl_msg *m, void *payload, size_t max, int *fds,
                          size_t cap, size_t *got, struct nsbox_err *e)
{
    int flags;
    ssize_t n = nsbox_msg_recv_fds(fd, m, sizeof *m, payload, max, fds, cap, got, &flags);
    if (n == 0)
        return 0;
    if (n < 0)
        return nsbox_err_sys(e, "control socket: receive");
    if ((size_t)n < sizeof *m || (flags & (MSG_TRUNC | MSG_CTRUNC)) ||
        m->len != (size_t)n - sizeof *m) {
        for (size_t i = 0; i < *got; i++)
            nsbox_closep(&fds[i]);
        *got = 0;
        return nsbox_err_set(e, NSBOX_E_INVALID, EBADMSG, "control socket: a malformed message");
    }
    m->op[sizeof m->op - 1] = '\0';
    return 1;
}

int nsbox_ocictl_ask(const struct nsbox_ocirt *g, const struct nsbox_ocistate *s,
                     const struct nsbox_ocictl_msg *req, const void *payload,
                     struct nsbox_ocictl_msg *r, char *buf, size_t max, struct nsbox_err *e)
{
    int fd = nsbox_ocictl_connect(g, s, e);
    if (fd < 0)
        return -1;
    int fds[3] = {-1, -1, -1}, got = -1;
    if (nsbox_ocictl_send(fd, req, payload, NULL, 0, e) == 0)
        got = nsbox_ocictl_recv(fd, r, buf, max - 1, fds, e);
    close(fd);
    for (int i = 0; i < 3; i++)
        nsbox_closep(&fds[i]);
    if (got == 0)
        return nsbox_err_set(e, NSBOX_E_INVALID, ESRCH, "container %s: container not running",
                             s->id);
    if (got < 0)
        return -1;
    buf[r->len] = '\0';
    if (!strcmp(r->op, "error"))
        return nsbox_err_set(e, r->status > 0 ? r->status : NSBOX_E_SYS, EINVAL, "%s", buf);
    return 0;
}
