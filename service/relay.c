/* The command line's stdio for a sandboxed command: passed on when harmless, else relayed
 * through a pipe (relay.h). */
#define _GNU_SOURCE
#include "relay.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#define RELAY_BUF 65536
#define RELAY_STACK (256 * 1024)

enum nsbox_relay_stdio_way nsbox_relay_stdio_way(int fd, int which, bool outlives)
{
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0)
        return NSBOX_STDIO_AS_IS; /* closed: stays closed */
    int fl = fcntl(fd, F_GETFL);
    if (S_ISDIR(st.st_mode) || (fl >= 0 && (fl & O_PATH)))
        return NSBOX_STDIO_AS_IS; /* refused as it is, with its reason (nsbox_check_stdio) */
    if (S_ISCHR(st.st_mode) && st.st_rdev == makedev(1, 3))
        return NSBOX_STDIO_AS_IS; /* /dev/null */
    /* What the command leaves running outlives an exec: it would keep anything else of the
     * caller's (write into its output after exec returned, keep `$(nsbox exec ...)` waiting,
     * read the caller's stdin meant for what comes next). */
    if (outlives)
        return NSBOX_STDIO_RELAY;
    /* An anonymous pipe, opened anew: the command's own open file description of the same
     * pipe, so that its fcntl(F_SETFL) (O_NONBLOCK) does not change the caller's. Not a named
     * FIFO: its mode is a file's on disk, and through /proc/self/fd/1 the command could open it
     * for reading (a mkfifo's 0644 lets others) and take what other writers put in it. Not a
     * socket: it is of the host's network namespace. A command could accept on it, sendto
     * another address with it (UDP: anywhere; a unix one: the host's abstract names), read
     * what was sent to the caller, or shut it down. */
    if (nsbox_is_anon_pipe(fd, &st))
        return NSBOX_STDIO_REOPEN;
    /* A file read from: the command may read it (and move the offset, as any reader of a
     * shared stdin does), not truncate or write it; unless others may write it, which the
     * command could do through /proc/self/fd/0 (a magic link: the directories' modes do not
     * stop it). */
    if (which == 0 && S_ISREG(st.st_mode) && fl >= 0 && (fl & O_ACCMODE) == O_RDONLY &&
        !(st.st_mode & S_IWOTH))
        return NSBOX_STDIO_AS_IS;
    return NSBOX_STDIO_RELAY;
}

/* Wait until fd is ready for events (0) or stop (when >= 0) has been written (1). */
static int wait_for(int fd, short events, int stop)
{
    for (;;) {
        struct pollfd pf[2] = {{fd, events, 0}, {stop, POLLIN, 0}};
        int n = poll(pf, stop >= 0 ? 2 : 1, -1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return 0; /* the read or write that follows says what is wrong */
        if (stop >= 0 && (pf[1].revents & POLLIN))
            return 1;
        if (pf[0].revents)
            return 0;
    }
}

/* All of buf to fd, through short writes, EINTR and a non-blocking fd (the host's may be one:
 * its flags are not ours to change). stop >= 0: give up when it is written (1). -1 with errno. */
static int write_all(int fd, const char *buf, size_t n, int stop)
{
    while (n) {
        ssize_t w = write(fd, buf, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && errno == EAGAIN) {
            if (wait_for(fd, POLLOUT, stop) == 1)
                return 1;
            continue;
        }
        if (w <= 0) {
            if (w == 0)
                errno = EIO;
            return -1;
        }
        buf += w;
        n -= (size_t)w;
    }
    return 0;
}

/* stdout, stderr: from the pipe to the host until the pipe's end, or once the command has ended,
 * what the pipe holds then. Our end is closed at the end: a writer left behind gets EPIPE. */
static void *output_main(void *arg)
{
    struct nsbox_relay_stream *s = arg;
    char buf[RELAY_BUF];
    bool stopping = false;
    size_t left = 0; /* after the stop: what the pipe held then and is not copied yet */
    for (;;) {
        if (!stopping && wait_for(s->pipe_end, POLLIN, s->stop) == 1) {
            int n = 0;
            if (ioctl(s->pipe_end, FIONREAD, &n) < 0 || n <= 0)
                break;
            stopping = true;
            left = (size_t)n;
        }
        size_t want = stopping && left < sizeof buf ? left : sizeof buf;
        ssize_t n = read(s->pipe_end, buf, want);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN) {
            if (stopping)
                break;
            continue;
        }
        if (n <= 0)
            break; /* every writer has closed it */
        if (write_all(s->host, buf, (size_t)n, -1) < 0) {
            s->err = errno;
            break;
        }
        if (stopping && (left -= (size_t)n) == 0)
            break;
    }
    close(s->pipe_end);
    s->pipe_end = -1;
    return NULL;
}

/* stdin: from the host to the pipe until the host's end (then the command sees its own), until
 * the command stops reading (EPIPE), or until it has ended: nothing more is taken from the host
 * then, which the next reader of it still finds. */
static void *input_main(void *arg)
{
    struct nsbox_relay_stream *s = arg;
    char buf[RELAY_BUF];
    for (;;) {
        if (wait_for(s->host, POLLIN, s->stop) == 1)
            break;
        ssize_t n = read(s->host, buf, sizeof buf);
        if (n < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        /* EIO too: a terminal read from the background (SIGTTIN is blocked here) */
        if (n <= 0 || write_all(s->pipe_end, buf, (size_t)n, s->stop) != 0)
            break;
    }
    close(s->pipe_end);
    s->pipe_end = -1;
    return NULL;
}

/* fd moved above 2: with one of 0-2 closed (it stays closed for the command), a descriptor of
 * ours made meanwhile takes its number, and would be taken for the caller's. -1 on failure. */
static int above_stdio(int fd)
{
    if (fd < 0 || fd > 2)
        return fd;
    int moved = fcntl(fd, F_DUPFD_CLOEXEC, 3);
    int err = errno;
    close(fd);
    errno = err;
    return moved;
}

static void stream_undo(struct nsbox_relay_stream *s, int fds[3], int i)
{
    if (s->pipe_end >= 0)
        close(s->pipe_end);
    if (s->given >= 0)
        close(s->given);
    s->pipe_end = s->given = -1;
    fds[i] = s->host;
}

/* A new open file description of the anonymous pipe fd, the way stdio stream `which` uses it;
 * blocking. -1 when it cannot be had (no /proc, no reader left for an output, the pipe not
 * ours to open): then it is relayed. */
static int reopen_pipe(int fd, int which)
{
    char path[40];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    /* non-blocking: an output's open would wait for a reader for ever (ENXIO now) */
    int n = open(path, (which == 0 ? O_RDONLY : O_WRONLY) | O_NONBLOCK | O_CLOEXEC);
    if (n < 0)
        return -1;
    int fl = fcntl(n, F_GETFL);
    if (fl < 0 || fcntl(n, F_SETFL, fl & ~O_NONBLOCK) < 0) {
        close(n);
        return -1;
    }
    return above_stdio(n);
}

/* A start that failed: everything undone, fds the caller's again; -1 with errno err. */
static int start_undone(struct nsbox_relay *r, int fds[3], int err)
{
    nsbox_relay_finish(r);
    for (int i = 0; i < 3; i++)
        fds[i] = r->s[i].host;
    errno = err;
    return -1;
}

int nsbox_relay_start(struct nsbox_relay *r, int fds[3], bool outlives)
{
    r->stop = -1;
    bool any = false, shared[3];
    for (int i = 0; i < 3; i++) {
        r->s[i] = (struct nsbox_relay_stream){.host = fds[i], .pipe_end = -1, .given = -1,
                                              .stop = -1};
        enum nsbox_relay_stdio_way way = nsbox_relay_stdio_way(fds[i], i, outlives);
        if (way == NSBOX_STDIO_REOPEN && (r->s[i].given = reopen_pipe(fds[i], i)) >= 0)
            fds[i] = r->s[i].given; /* closed by nsbox_relay_finish, as a relay's end */
        shared[i] = way == NSBOX_STDIO_AS_IS || (way == NSBOX_STDIO_REOPEN && r->s[i].given >= 0);
        any = any || !shared[i];
    }
    if (!any)
        return 0; /* the fast path: no thread, no pipe */
    r->stop = above_stdio(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (r->stop < 0)
        return start_undone(r, fds, errno);
    /* The threads take no signal: ours are handled (signalfd, handlers) by the main thread, and
     * a write to a host whose reader left fails with EPIPE instead of killing us. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_attr_t attr;
    int err = pthread_attr_init(&attr);
    if (!err)
        err = pthread_attr_setstacksize(&attr, RELAY_STACK);
    for (int i = 0; i < 3 && !err; i++) {
        struct nsbox_relay_stream *s = &r->s[i];
        if (shared[i])
            continue;
        if (i == 2 && r->s[1].started && nsbox_fd_same_file(r->s[1].host, fds[2])) {
            fds[2] = r->s[1].given; /* written to our stdout, in order with it */
            continue;
        }
        int p[2];
        if (pipe2(p, O_CLOEXEC) < 0) {
            err = errno;
            break;
        }
        p[0] = above_stdio(p[0]);
        p[1] = above_stdio(p[1]);
        if (p[0] < 0 || p[1] < 0) {
            err = errno;
            if (p[0] >= 0)
                close(p[0]);
            if (p[1] >= 0)
                close(p[1]);
            break;
        }
        s->stop = r->stop;
        s->pipe_end = i == 0 ? p[1] : p[0];
        s->given = i == 0 ? p[0] : p[1];
        /* ours only, so non-blocking changes nothing of the host's */
        fcntl(s->pipe_end, F_SETFL, O_NONBLOCK);
        err = pthread_create(&s->thread, &attr, i == 0 ? input_main : output_main, s);
        if (err) {
            stream_undo(s, fds, i);
            break;
        }
        s->started = true;
        fds[i] = s->given;
    }
    pthread_attr_destroy(&attr);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return err ? start_undone(r, fds, err) : 0;
}

/* our copies of the command's ends */
static void given_close(struct nsbox_relay *r)
{
    for (int i = 0; i < 3; i++)
        if (r->s[i].given >= 0) {
            close(r->s[i].given);
            r->s[i].given = -1;
        }
}

static struct nsbox_note note;

void nsbox_relay_set_note(nsbox_note_fn *fn, void *ctx)
{
    note = (struct nsbox_note){fn, ctx};
}

void nsbox_relay_finish(struct nsbox_relay *r)
{
    given_close(r);
    if (r->stop < 0)
        return;
    uint64_t one = 1;
    if (write(r->stop, &one, sizeof one) != (ssize_t)sizeof one)
        nsbox_note_say(&note, "relay: %s", strerror(errno));
    static const char *const names[] = {"stdin", "stdout", "stderr"};
    for (int i = 0; i < 3; i++) {
        struct nsbox_relay_stream *s = &r->s[i];
        if (!s->started)
            continue;
        pthread_join(s->thread, NULL);
        s->started = false;
        if (i > 0 && s->err && s->err != EPIPE)
            nsbox_note_say(&note, "cannot write the command's %s: %s", names[i], strerror(s->err));
    }
    close(r->stop);
    r->stop = -1;
}
