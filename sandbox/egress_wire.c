/* The egress helper's configuration on its socketpair (sandbox/egress_wire.h). */
#define _GNU_SOURCE
#include "egress_wire.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

int nsbox_egress_wire_init(struct nsbox_egress_wire *w)
{
    memset(w, 0, sizeof *w);
    void *p = mmap(NULL, NSBOX_EGRESS_WIRE_MAX, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                   -1, 0);
    if (p == MAP_FAILED)
        return -1;
    /* out of core dumps; and never in a child forked while it holds the values */
    if (madvise(p, NSBOX_EGRESS_WIRE_MAX, MADV_DONTDUMP) < 0 ||
        madvise(p, NSBOX_EGRESS_WIRE_MAX, MADV_WIPEONFORK) < 0) {
        int err = errno;
        munmap(p, NSBOX_EGRESS_WIRE_MAX);
        errno = err;
        return -1;
    }
    w->p = p;
    return 0;
}

void nsbox_egress_wire_free(struct nsbox_egress_wire *w)
{
    if (!w->p)
        return;
    explicit_bzero(w->p, w->n);
    munmap(w->p, NSBOX_EGRESS_WIRE_MAX);
    memset(w, 0, sizeof *w);
}

static void put(struct nsbox_egress_wire *w, const void *p, size_t n)
{
    if (w->over || n > NSBOX_EGRESS_WIRE_MAX - w->n) {
        w->over = true;
        return;
    }
    memcpy(w->p + w->n, p, n);
    w->n += n;
}

void nsbox_egress_wire_put_u32(struct nsbox_egress_wire *w, uint32_t v)
{
    put(w, &v, sizeof v);
}

void nsbox_egress_wire_put_bytes(struct nsbox_egress_wire *w, const void *p, size_t n)
{
    if (n > UINT32_MAX) {
        w->over = true;
        return;
    }
    nsbox_egress_wire_put_u32(w, (uint32_t)n);
    put(w, p, n);
}

void nsbox_egress_wire_put_str(struct nsbox_egress_wire *w, const char *s)
{
    nsbox_egress_wire_put_bytes(w, s, strlen(s));
}

uint8_t *nsbox_egress_wire_put_space(struct nsbox_egress_wire *w, size_t n)
{
    if (n > UINT32_MAX || n + sizeof(uint32_t) > NSBOX_EGRESS_WIRE_MAX - w->n) {
        w->over = true;
        return NULL;
    }
    nsbox_egress_wire_put_u32(w, (uint32_t)n);
    uint8_t *p = w->over ? NULL : w->p + w->n;
    if (p)
        w->n += n;
    return p;
}

static bool get(struct nsbox_egress_wire *w, void *out, size_t n)
{
    if (w->over || n > w->n - w->at) {
        w->over = true;
        return false;
    }
    memcpy(out, w->p + w->at, n);
    w->at += n;
    return true;
}

bool nsbox_egress_wire_get_u32(struct nsbox_egress_wire *w, uint32_t *v)
{
    return get(w, v, sizeof *v);
}

bool nsbox_egress_wire_get_bytes(struct nsbox_egress_wire *w, const uint8_t **p, size_t *n)
{
    uint32_t len;
    if (!nsbox_egress_wire_get_u32(w, &len))
        return false;
    if (len > w->n - w->at) {
        w->over = true;
        return false;
    }
    *p = w->p + w->at;
    *n = len;
    w->at += len;
    return true;
}

bool nsbox_egress_wire_get_str(struct nsbox_egress_wire *w, char *out, size_t size)
{
    const uint8_t *p;
    size_t n;
    if (!nsbox_egress_wire_get_bytes(w, &p, &n))
        return false;
    if (n >= size || memchr(p, '\0', n)) {
        w->over = true;
        return false;
    }
    memcpy(out, p, n);
    out[n] = '\0';
    return true;
}

static int write_all(int sock, const uint8_t *p, size_t n)
{
    while (n > 0) {
        ssize_t k = send(sock, p, n, MSG_NOSIGNAL);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

int nsbox_egress_wire_send(int sock, const struct nsbox_egress_wire *w, const int *fds,
                           size_t n_fds)
{
    if (w->over || n_fds > NSBOX_EGRESS_WIRE_FDS) {
        errno = EMSGSIZE;
        return -1;
    }
    uint32_t len = (uint32_t)w->n;
    union {
        struct cmsghdr h;
        char buf[CMSG_SPACE(sizeof(int) * NSBOX_EGRESS_WIRE_FDS)];
    } c;
    struct iovec iov = {.iov_base = &len, .iov_len = sizeof len};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
    if (n_fds)
        nsbox_cmsg_put_fds(&m, c.buf, fds, n_fds);
    ssize_t k;
    do
        k = sendmsg(sock, &m, MSG_NOSIGNAL);
    while (k < 0 && errno == EINTR);
    if (k != (ssize_t)sizeof len)
        return -1;
    return write_all(sock, w->p, w->n);
}

static int read_all(int sock, uint8_t *p, size_t n)
{
    while (n > 0) {
        ssize_t k = read(sock, p, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0)
            return -1;
        if (k == 0) {
            errno = EPROTO;
            return -1;
        }
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

/* The descriptors that came with the first bytes: kept up to max, the rest closed. */
static void take_fds(struct msghdr *m, int *fds, size_t max, size_t *n_fds)
{
    for (struct cmsghdr *h = CMSG_FIRSTHDR(m); h; h = CMSG_NXTHDR(m, h)) {
        if (h->cmsg_level != SOL_SOCKET || h->cmsg_type != SCM_RIGHTS)
            continue;
        size_t n = (h->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < n; i++) {
            int fd;
            memcpy(&fd, CMSG_DATA(h) + i * sizeof(int), sizeof fd);
            if (*n_fds < max)
                fds[(*n_fds)++] = fd;
            else
                close(fd);
        }
    }
}

int nsbox_egress_wire_recv(int sock, struct nsbox_egress_wire *w, int *fds, size_t max,
                           size_t *n_fds)
{
    uint32_t len = 0;
    union {
        struct cmsghdr h;
        char buf[CMSG_SPACE(sizeof(int) * NSBOX_EGRESS_WIRE_FDS)];
    } c;
    struct iovec iov = {.iov_base = &len, .iov_len = sizeof len};
    struct msghdr m = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = c.buf, .msg_controllen = sizeof c.buf};
    *n_fds = 0;
    ssize_t k;
    do
        k = recvmsg(sock, &m, MSG_CMSG_CLOEXEC);
    while (k < 0 && errno == EINTR);
    if (k < 0)
        return -1;
    take_fds(&m, fds, max, n_fds);
    /* the length may come in pieces; descriptors cut off (MSG_CTRUNC) are a message not whole */
    if (k == 0 || (m.msg_flags & MSG_CTRUNC) ||
        ((size_t)k < sizeof len &&
         read_all(sock, (uint8_t *)&len + k, sizeof len - (size_t)k) < 0)) {
        errno = EPROTO;
        return -1;
    }
    if (len > NSBOX_EGRESS_WIRE_MAX) {
        errno = EPROTO;
        return -1;
    }
    if (read_all(sock, w->p, len) < 0)
        return -1;
    w->n = len;
    w->at = 0;
    return 0;
}

int nsbox_egress_wire_send_status(int sock, int err, const char *what)
{
    struct nsbox_egress_status st = {.err = err};
    snprintf(st.what, sizeof st.what, "%s", what ? what : "");
    return write_all(sock, (const uint8_t *)&st, sizeof st);
}

int nsbox_egress_wire_recv_status(int sock, struct nsbox_egress_status *st)
{
    memset(st, 0, sizeof *st);
    if (read_all(sock, (uint8_t *)st, sizeof *st) < 0) {
        if (errno == EPROTO)
            errno = EIO;
        return -1;
    }
    st->what[sizeof st->what - 1] = '\0';
    return 0;
}
