/* nsbox-oci run: create, then start, as runc's run. In the foreground it waits for the
 * container's end, passing on the signals it is sent, exits with the container's status and
 * deletes it (unless --keep); with --detach it returns once the container has started. */
#include "ocirt.h"
#include "cleanup.h"
#include "signals.h"
#include "tty.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

/* Until init (our child: the monitor cloned it as its sibling) ends, passing on the signals
 * of set but SIGCHLD (init relays them to the container's process) and, with a terminal lent
 * (master >= 0), copying it both ways: init's status as a shell gives it (128+N for signal
 * N), or -1. */
static int wait_relaying(pid_t init, int master, const sigset_t *set)
{
    int sfd = signalfd(-1, set, SFD_CLOEXEC);
    if (sfd < 0)
        return -1;
    struct nsbox_ocitty t;
    nsbox_ocitty_begin(&t, master);
    int code = -1;
    for (;;) {
        int st;
        pid_t r = waitpid(init, &st, WNOHANG);
        if (r == init)
            code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        if (r == init || (r < 0 && errno != EINTR))
            break;
        struct pollfd pf[3] = {{sfd, POLLIN, 0}};
        nsbox_ocitty_pollfds(&t, pf + 1);
        if (poll(pf, 3, -1) < 0)
            continue;
        nsbox_ocitty_events(&t, pf + 1);
        struct signalfd_siginfo si;
        if ((pf[0].revents & POLLIN) && read(sfd, &si, sizeof si) == (ssize_t)sizeof si) {
            if (si.ssi_signo == SIGWINCH && master >= 0)
                nsbox_tty_resize(master);
            else if (si.ssi_signo != SIGCHLD)
                kill(init, (int)si.ssi_signo);
        }
    }
    nsbox_ocitty_restore(master);
    close(sfd);
    return code;
}

/* A stop (INT, TERM, HUP, QUIT) that comes while the container is made is noted, not fatal,
 * so that run removes the created container it would leave behind. Not blocked instead: the
 * hooks create runs would inherit the mask; a handler is reset by their exec. */
static const int stops[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
static volatile sig_atomic_t stopped_by;
static struct sigaction saved_stops[NSBOX_ARRAY_LEN(stops)];

static void note_stop(int sig)
{
    stopped_by = sig;
}

static void note_stops(bool on)
{
    struct sigaction sa = {.sa_handler = note_stop, .sa_flags = SA_RESTART};
    for (size_t i = 0; i < NSBOX_ARRAY_LEN(stops); i++)
        sigaction(stops[i], on ? &sa : &saved_stops[i], on ? &saved_stops[i] : NULL);
}

/* The container and its state removed, as `delete --force ID` does; what it leaves us to
 * reap (init, the monitor) reaped. */
static void remove_container(const struct nsbox_ocirt *g, const char *id)
{
    char *argv[] = {"delete", "--force", (char *)id, NULL};
    struct nsbox_err e = {0};
    if (nsbox_ocicmds_delete(g, 3, argv, &e) != 0)
        nsbox_ocilog_say(NULL, NSBOX_OCILOG_STDERR, "warning", "run: %s", e.msg);
    while (waitpid(-1, NULL, WNOHANG) > 0) {
    }
}

/* create, with our own console socket when our stdin is a terminal to lend: the master, or
 * -1 when there is none to lend; -2 when create failed. */
static int create(const struct nsbox_ocirt *g, struct nsbox_ocicreate_args *a, struct nsbox_err *e)
{
    char sock[PATH_MAX];
    int lsock = -1, master = -1;
    if (!a->detach && !a->console_socket && isatty(0)) {
        if ((lsock = nsbox_ociconsole_listen(sock, sizeof sock, e)) < 0)
            return -2;
        a->tty_socket = sock;
    }
    int r = nsbox_ocicreate_make(g, a, e);
    if (r == 0 && a->lent_tty && (master = nsbox_ociconsole_receive(lsock, e)) < 0)
        remove_container(g, a->id);
    if (lsock >= 0) {
        close(lsock);
        nsbox_ociconsole_remove(sock);
    }
    a->tty_socket = NULL; /* sock is ours, gone once we return */
    if (a->lent_tty)
        a->console_socket = NULL;
    return r < 0 || (a->lent_tty && master < 0) ? -2 : master;
}

int nsbox_ocirun_run(const struct nsbox_ocirt *g, int argc, char **argv, struct nsbox_err *e)
{
    struct nsbox_ocicreate_args a = {.run = true};
    signal(SIGCHLD, SIG_DFL); /* inherited ignored, init would be reaped before our wait */
    if (nsbox_ocicreate_parse(argc, argv, &a, e) < 0)
        return 1;
    note_stops(true);
    int master = create(g, &a, e);
    /* held from before start, so that none is lost between start and the wait */
    sigset_t set, old;
    sigemptyset(&set);
    for (size_t i = 0; i < NSBOX_ARRAY_LEN(nsbox_signals_relayed); i++)
        sigaddset(&set, nsbox_signals_relayed[i]);
    sigaddset(&set, SIGCHLD);
    sigprocmask(SIG_BLOCK, &set, &old);
    note_stops(false);
    if (master >= 0 && stopped_by)
        close(master);
    if (master != -2 && stopped_by)
        remove_container(g, a.id);
    if (master == -2 || stopped_by)
        return stopped_by ? 128 + stopped_by : 1;
    if (a.detach)
        sigprocmask(SIG_SETMASK, &old, NULL);
    char *start[] = {"start", (char *)a.id, NULL};
    if (nsbox_ocicmds_start(g, 2, start, e) != 0) {
        remove_container(g, a.id);
        return 1;
    }
    if (a.detach)
        return 0;
    struct nsbox_ocistate s;
    if (nsbox_ocistate_read(g, a.id, &s, e) < 0)
        return 1;
    int code = wait_relaying(s.pid, master, &set);
    if (master >= 0)
        close(master);
    if (code < 0) {
        nsbox_err_sys(e, "run: wait for container %s", a.id);
        return 1;
    }
    /* the monitor, our child too, exits once it has removed the sandbox */
    waitpid(s.monitor, NULL, 0);
    if (!a.keep)
        remove_container(g, a.id);
    sigprocmask(SIG_SETMASK, &old, NULL);
    return code;
}
