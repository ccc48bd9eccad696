/* Creating a persistent sandbox (supervisor.h): fork its supervisor, detached, and wait for its
 * answer, passing a stop signal on to it. */
#define _GNU_SOURCE
#include "supervisor_impl.h"
#include "cleanup.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* The warm pool's refill, handed down by it (supervisor.h). */
static nsbox_session_refill_fn refill;

void nsbox_session_set_refill(nsbox_session_refill_fn fn)
{
    refill = fn;
}

static struct nsbox_note note;

void nsbox_session_set_note(nsbox_note_fn *fn, void *ctx)
{
    note = (struct nsbox_note){fn, ctx};
}

/* The notes at the start of buf (have bytes), each a whole line, said and taken out. */
static size_t say_notes(char *buf, size_t have)
{
    const size_t tag = strlen(NSBOX_SESSION_NOTE);
    char *nl;
    while (have > tag && !strncmp(buf, NSBOX_SESSION_NOTE, tag) &&
           (nl = memchr(buf, '\n', have))) {
        *nl = '\0';
        nsbox_note_say(&note, "%s", buf + tag);
        have -= (size_t)(nl + 1 - buf);
        memmove(buf, nl + 1, have);
    }
    return have;
}

/* The supervisor's answer into buf, at most n - 1 bytes and a '\0': "OK <id>\n", or "ERR ...",
 * which may span lines (a set-up script's output), up to the end (the supervisor exits after
 * it); the notes before it are said as they come (say_notes). sfd >= 0: a signalfd of the stop
 * signals; the first is put in *signo and passed on to the supervisor ('X'), which then
 * abandons the creation unless the id is already out. */
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
        have = say_notes(buf, have + (size_t)r);
    }
    buf[have] = '\0';
    return have;
}

/* The forked child: detach, and become the supervisor. Never returns. */
__attribute__((noreturn)) static void become_supervisor(const struct nsbox_supervisor_args *a,
                                                        int other_end, const sigset_t *old)
{
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
    close(other_end);
    setsid();
    if (a->out)
        sigprocmask(SIG_SETMASK, old, NULL);
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
    int keep[] = {a->ready_fd, a->owner_fd, a->out_fd};
    nsbox_close_fds_keep(keep, 3);
    nsbox_supervisor_main(a);
}

/* What the supervisor answered (got bytes in buf; signo: a stop signal that came meanwhile):
 * 0 with id filled when the sandbox was made. */
static int answer(char *buf, size_t got, int signo, char *id, struct nsbox_err *e)
{
    if (!strncmp(buf, "OK ", 3) && got >= 3 + NSBOX_ID_LEN) {
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

/* Wait for the supervisor's answer on sock, passing on a stop signal (out given: they are
 * blocked, old the mask before); restore the mask unless the sandbox was made. */
static int wait_answer(pid_t pid, int sock, const sigset_t *stop, const sigset_t *old,
                       const struct nsbox_id_out *out, char *id, struct nsbox_err *e)
{
    int sfd = out ? signalfd(-1, stop, SFD_CLOEXEC | SFD_NONBLOCK) : -1;
    if (out && sfd < 0)
        sigprocmask(SIG_SETMASK, old, NULL);
    int signo = 0;
    char buf[NSBOX_ERR_MSG_MAX + 64 + NSBOX_NOTE_MAX]; /* room for a whole note before it */
    size_t got = read_answer(sock, sfd, &signo, buf, sizeof buf);
    close(sock);
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
        while (made && sigtimedwait(stop, NULL, &now) > 0)
            ;
        close(sfd);
        if (!made)
            sigprocmask(SIG_SETMASK, old, NULL);
    }
    if (out && out->signo)
        *out->signo = made ? 0 : signo;
    return answer(buf, got, signo, id, e);
}

int nsbox_session_create(const struct nsbox_spec *s, const char *image, int owner_pid,
                         const char *pool_key, char *id, const struct nsbox_id_out *out,
                         struct nsbox_err *e)
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
        struct nsbox_supervisor_args a = {.spec = s,
                                          .image = image,
                                          .ready_fd = p[1],
                                          .owner_fd = owner_fd,
                                          .owner_pid = owner_pid,
                                          .pool_key = pool_key,
                                          .out_fd = out_fd,
                                          .out = out,
                                          .refill = refill};
        become_supervisor(&a, p[0], &old);
    }
    nsbox_closep(&out_fd);
    close(p[1]);
    return wait_answer(pid, p[0], &stop, &old, out, id, e);
}
