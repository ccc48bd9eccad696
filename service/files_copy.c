/* The copy of a `write`: from the descriptor the client sent into a new or truncated file in the
 * workspace, in bounded memory whatever the size (at most one 256 KiB buffer, and none at all
 * when the kernel copies: copy_file_range, sendfile, splice).
 *
 * The source is the client's and the client may be slow, stuck or hostile: a pipe or socket that
 * sends nothing for opts.stall_ms fails the write, and no more than opts.max_write_bytes are
 * accepted (the sandbox's workspace disk limit), so `nsbox cp /dev/zero ID:f` stops. */
#define _GNU_SOURCE
#include "cleanup.h"
#include "files_impl.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#define COPY_BUF (256 * 1024)
#define COPY_CHUNK (64ull << 20) /* per system call: keeps each one short */

static int copy_err(struct nsbox_err *e, int err, const char *what)
{
    if (err == ENOSPC || err == EDQUOT)
        return nsbox_err_set(e, NSBOX_E_NOSPACE, err, "the workspace's disk is full");
    return nsbox_err_set(e, err == ENOMEM ? NSBOX_E_NOMEM : NSBOX_E_SYS, err, "%s: %s", what,
                         strerror(err));
}

static int too_big(struct nsbox_err *e, uint64_t max)
{
    return nsbox_err_set(e, NSBOX_E_NOSPACE, EFBIG,
                         "the content is larger than the sandbox's workspace disk limit of %llu "
                         "bytes",
                         (unsigned long long)max);
}

static int write_all(int out, const char *buf, size_t len, off_t *outoff, struct nsbox_err *e)
{
    if (nsbox_pwrite_all(out, buf, len, *outoff) < 0)
        return copy_err(e, errno, "writing the file");
    *outoff += (off_t)len;
    return 0;
}

/* Copy len bytes of a regular file at inoff to out at outoff. *got: bytes copied (fewer than
 * len when the source shrank meanwhile). The kernel copies when it can; else a buffer. */
struct range_state {
    int how; /* 0 copy_file_range, 1 sendfile, 2 buffer: the first that works is kept */
    char *buf;
};

static int copy_range(int in, off_t inoff, int out, off_t outoff, uint64_t len, uint64_t *got,
                      struct range_state *rs, struct nsbox_err *e)
{
    int how = rs->how;
    char **buf = &rs->buf;
    *got = 0;
    while (len > 0) {
        size_t chunk = len > COPY_CHUNK ? COPY_CHUNK : (size_t)len;
        ssize_t n;
        if (how == 0) {
            n = copy_file_range(in, &inoff, out, &outoff, chunk, 0);
            if (n < 0 && (errno == EXDEV || errno == EINVAL || errno == ENOSYS ||
                          errno == EOPNOTSUPP || errno == EBADF || errno == EPERM)) {
                how = rs->how = 1;
                continue;
            }
        } else if (how == 1) {
            if (lseek(out, outoff, SEEK_SET) < 0) return copy_err(e, errno, "writing the file");
            n = sendfile(out, in, &inoff, chunk);
            if (n < 0 && (errno == EINVAL || errno == ENOSYS)) {
                how = rs->how = 2;
                continue;
            }
            if (n > 0) outoff += n;
        } else {
            if (!*buf && !(*buf = malloc(COPY_BUF))) return copy_err(e, ENOMEM, "copy buffer");
            n = pread(in, *buf, chunk < COPY_BUF ? chunk : COPY_BUF, inoff);
            if (n > 0) {
                if (write_all(out, *buf, (size_t)n, &outoff, e) < 0) return -1;
                inoff += n;
            }
        }
        if (n < 0) {
            if (errno == EINTR) continue;
            return copy_err(e, errno, "copying the content");
        }
        if (n == 0) return 0; /* the source ended early */
        len -= (uint64_t)n;
        *got += (uint64_t)n;
    }
    return 0;
}

/* A regular file: from its current offset to its size when the copy starts. Holes stay holes
 * (SEEK_DATA/SEEK_HOLE): a sparse 1 GiB file costs what its data costs. */
static int copy_regular(const struct files_ctx *c, int in, const struct stat *sb, int out,
                        uint64_t *written, struct nsbox_err *e)
{
    off_t start = lseek(in, 0, SEEK_CUR);
    if (start < 0 || start > sb->st_size) start = start < 0 ? 0 : sb->st_size;
    off_t end = sb->st_size, pos = start;
    uint64_t max = c->opts.max_write_bytes;
    if (max && (uint64_t)(end - start) > max) return too_big(e, max);
    struct range_state rs = {0};
    int ret = -1;
    while (pos < end) {
        off_t data = lseek(in, pos, SEEK_DATA), hole;
        if (data < 0) {
            if (errno == ENXIO) break; /* a hole up to the end */
            data = pos, hole = end;    /* no SEEK_DATA here: copy everything */
        } else {
            hole = lseek(in, data, SEEK_HOLE);
            if (hole < 0 || hole > end) hole = end;
        }
        if (data >= end) break;
        uint64_t got;
        if (copy_range(in, data, out, data - start, (uint64_t)(hole - data), &got, &rs, e) < 0)
            goto out;
        if (got < (uint64_t)(hole - data)) {
            end = data + (off_t)got; /* the source shrank */
            break;
        }
        pos = hole;
    }
    if (ftruncate(out, end - start) < 0) {
        copy_err(e, errno, "writing the file");
        goto out;
    }
    lseek(in, end, SEEK_SET); /* as if read: the client's offset is at the end */
    *written = (uint64_t)(end - start);
    ret = 0;
out:
    free(rs.buf);
    return ret;
}

static int client_gone(struct nsbox_err *e)
{
    return nsbox_err_set(e, NSBOX_E_INVALID, ECONNABORTED,
                         "its client went away before the end of the content");
}

/* Wait until in is readable, at most stall_ms; or until the client hangs up (it is not there
 * to see the content through: reading on would fill the disk for nothing, for as long as the
 * source lives). A client that only shut down its writing half still reads: not gone. */
static int wait_readable(const struct files_ctx *c, int in, struct nsbox_err *e)
{
    for (;;) {
        struct pollfd p[2] = {{.fd = in, .events = POLLIN},
                              {.fd = c->opts.client_fd > 0 ? c->opts.client_fd : -1}};
        int r = poll(p, 2, c->opts.stall_ms);
        if (r > 0 && (p[1].revents & (POLLHUP | POLLERR))) return client_gone(e);
        if (r > 0) return 0;
        if (r == 0)
            return nsbox_err_set(e, NSBOX_E_TIMEOUT, ETIMEDOUT,
                                 "the content stopped arriving (nothing for %d ms)",
                                 c->opts.stall_ms);
        if (errno != EINTR) return copy_err(e, errno, "waiting for the content");
    }
}

/* A pipe, a socket, a terminal, a device: read until end of file. */
static int copy_stream(const struct files_ctx *c, int in, bool pipe, bool sock, int out,
                       uint64_t *written, struct nsbox_err *e)
{
    uint64_t max = c->opts.max_write_bytes, total = 0;
    off_t outoff = 0;
    cleanup_free char *buf = NULL;
    for (;;) {
        if (wait_readable(c, in, e) < 0) return -1;
        /* Ask for one byte more than the limit allows, to see that it is exceeded. */
        size_t want = 1u << 20;
        if (max && max - total + 1 < want) want = (size_t)(max - total + 1);
        ssize_t n;
        if (pipe) {
            /* SPLICE_F_NONBLOCK: an empty pipe (another reader was faster) returns EAGAIN
             * instead of blocking the supervisor. */
            n = splice(in, NULL, out, &outoff, want, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
            if (n < 0 && errno == EINVAL) {
                pipe = false; /* this file system cannot splice: use the buffer */
                continue;
            }
        } else {
            if (!buf && !(buf = malloc(COPY_BUF))) return copy_err(e, ENOMEM, "copy buffer");
            if (want > COPY_BUF) want = COPY_BUF;
            n = sock ? recv(in, buf, want, MSG_DONTWAIT) : read(in, buf, want);
            if (n > 0 && write_all(out, buf, (size_t)n, &outoff, e) < 0) return -1;
        }
        if (n < 0) {
            if (errno == EINTR || errno == EAGAIN) continue;
            return copy_err(e, errno, "reading the content");
        }
        if (n == 0) break;
        total += (uint64_t)n;
        if (max && total > max) return too_big(e, max);
    }
    /* A stream's end cannot say whether its writer finished or was killed (Ctrl-C on
     * `producer | nsbox cp - ID:f` ends both, the producer often first). A client that asked
     * for it confirms the end; one that did not is at least asked whether it is still there.
     * Either way, a write that fails here keeps the old file (or removes the new one). */
    if (c->opts.confirm_end) {
        if (c->opts.confirm_end(c->opts.confirm_arg, total) < 0)
            return nsbox_err_set(e, NSBOX_E_INVALID, ECONNABORTED,
                                 "its client did not confirm the end of the content (it was "
                                 "interrupted, or went away)");
    } else if (c->opts.client_fd > 0) {
        struct pollfd p = {.fd = c->opts.client_fd};
        if (poll(&p, 1, 0) > 0 && (p.revents & (POLLHUP | POLLERR))) return client_gone(e);
    }
    *written = total;
    return 0;
}

int files_copy_in(const struct files_ctx *c, int in, int out, uint64_t *written,
                  struct nsbox_err *e)
{
    struct stat sb;
    *written = 0;
    if (fstat(in, &sb) < 0) return copy_err(e, errno, "the content descriptor");
    if (S_ISREG(sb.st_mode)) return copy_regular(c, in, &sb, out, written, e);
    return copy_stream(c, in, S_ISFIFO(sb.st_mode), S_ISSOCK(sb.st_mode), out, written, e);
}
