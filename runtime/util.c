#define _GNU_SOURCE
#include "util.h"
#include "cleanup.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void nsbox_reset_signals(void)
{
    struct sigaction dfl = {.sa_handler = SIG_DFL};
    for (int sig = 1; sig < NSIG; sig++)
        if (sig != SIGKILL && sig != SIGSTOP)
            sigaction(sig, &dfl, NULL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
}

void nsbox_cmsg_put_fds(struct msghdr *msg, void *buf, const int *fds, size_t nfds)
{
    memset(buf, 0, CMSG_SPACE(sizeof(int) * nfds));
    msg->msg_control = buf;
    msg->msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
    struct cmsghdr *c = CMSG_FIRSTHDR(msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
    memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
}

char *nsbox_read_text_at(int dfd, const char *path, size_t limit)
{
    cleanup_close int fd = openat(dfd, path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    size_t cap = 4096, len = 0;
    cleanup_free char *buf = malloc(cap);
    if (!buf)
        return NULL;
    for (;;) {
        if (len + 1 >= cap) {
            if (cap > limit) {
                errno = EFBIG;
                return NULL;
            }
            char *nb = realloc(buf, cap * 2);
            if (!nb)
                return NULL;
            buf = nb;
            cap *= 2;
        }
        ssize_t r = read(fd, buf + len, cap - len - 1);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return NULL;
        }
        if (r == 0)
            break;
        len += (size_t)r;
    }
    if (len > limit) {
        errno = EFBIG;
        return NULL;
    }
    buf[len] = '\0';
    return nsbox_steal_ptr(&buf);
}
