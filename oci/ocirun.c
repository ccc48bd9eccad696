/* nsbox-oci run: create, then start, as runc's run. In the foreground it waits for the
 * container's end, passing on the signals it is sent, exits with the container's status and
 * deletes it (unless --keep); with --detach it returns once the container has started. */
#include "ocirt.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>

/* The signals a shell or a supervisor sends to stop or tell a foreground program: the
 * container's process gets them (through init, which relays them). */
static const int relayed[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGWINCH};

/* Until init (our child: the monitor cloned it as its sibling) ends: its status as a shell
 * gives it (128+N for signal N), or -1. */
static int wait_relaying(pid_t init, const sigset_t *set)
{
    for (;;) {
        int st;
        pid_t r = waitpid(init, &st, WNOHANG);
        if (r == init)
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        if (r < 0 && errno != EINTR)
            return -1;
        int sig = sigwaitinfo(set, NULL);
        if (sig > 0 && sig != SIGCHLD)
            kill(init, sig);
    }
}

/* The container and its state removed, as `delete --force ID` does. */
static void remove_container(const struct nsbox_ocirt *g, const char *id)
{
    char *argv[] = {"delete", "--force", (char *)id, NULL};
    struct nsbox_err e = {0};
    if (nsbox_ocicmds_delete(g, 3, argv, &e) != 0)
        fprintf(stderr, "nsbox-oci: warning: run: %s\n", e.msg);
}

int nsbox_ocirun_run(const struct nsbox_ocirt *g, int argc, char **argv, struct nsbox_err *e)
{
    struct nsbox_ocicreate_args a = {.run = true};
    signal(SIGCHLD, SIG_DFL); /* inherited ignored, init would be reaped before our wait */
    if (nsbox_ocicreate_parse(argc, argv, &a, e) < 0 || nsbox_ocicreate_make(g, &a, e) < 0)
        return 1;
    /* held from before start, so that none is lost between start and the wait */
    sigset_t set, old;
    sigemptyset(&set);
    for (size_t i = 0; i < sizeof relayed / sizeof relayed[0]; i++)
        sigaddset(&set, relayed[i]);
    sigaddset(&set, SIGCHLD);
    if (!a.detach)
        sigprocmask(SIG_BLOCK, &set, &old);
    char *start[] = {"start", (char *)a.id, NULL};
    if (nsbox_ocicmds_start(g, 2, start, e) != 0) {
        remove_container(g, a.id);
        while (waitpid(-1, NULL, WNOHANG) > 0) {
        }
        return 1;
    }
    if (a.detach)
        return 0;
    struct nsbox_ocistate s;
    if (nsbox_ocistate_read(g, a.id, &s, e) < 0)
        return 1;
    int code = wait_relaying(s.pid, &set);
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
