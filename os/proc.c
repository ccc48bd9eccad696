/* Helper programs run to their end (proc.h). */
#include "proc.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* In the child: the descriptors in place, then the program. Never returns. */
static void child(const struct nsbox_proc *p, int err_w)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    /* keep_fd out of the way of the dup2s below, then at 3, without O_CLOEXEC (a dup2 onto
     * itself would keep the flag) */
    int keep = p->keep_fd >= 0 ? fcntl(p->keep_fd, F_DUPFD_CLOEXEC, 10) : -1;
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    int out = p->stdout_fd == NSBOX_PROC_STDOUT_NULL       ? null
              : p->stdout_fd == NSBOX_PROC_STDOUT_CAPTURED ? err_w
                                                           : p->stdout_fd;
    /* in this order: stdout may be our stderr, which is replaced last */
    if ((p->keep_fd >= 0 && keep < 0) || null < 0 || dup2(null, 0) < 0 || dup2(out, 1) < 0 ||
        dup2(err_w, 2) < 0 || (keep >= 0 && dup2(keep, 3) < 0))
        _exit(126);
    nsbox_close_fds_except(keep >= 0 ? 3 : -1);
    char *const *envp = p->envp ? p->envp : environ;
    if (p->path_lookup)
        execvpe(p->argv[0], p->argv, envp);
    else
        execve(p->argv[0], p->argv, envp);
    dprintf(2, "cannot execute %s: %s", p->argv[0], strerror(errno));
    _exit(127);
}

int nsbox_proc_run(const struct nsbox_proc *p, int *status, char *err, size_t n,
                   struct nsbox_err *e)
{
    int pipefd[2];
    if (pipe2(pipefd, O_CLOEXEC) < 0)
        return nsbox_err_sys(e, "pipe");
    pid_t pid = fork();
    if (pid < 0) {
        close(pipefd[0]);
        close(pipefd[1]);
        return nsbox_err_sys(e, "fork");
    }
    if (pid == 0)
        child(p, pipefd[1]);
    close(pipefd[1]);
    size_t have = nsbox_read_bounded(pipefd[0], err, n);
    close(pipefd[0]);
    while (have && (err[have - 1] == '\n' || err[have - 1] == ' '))
        err[--have] = '\0';
    while (waitpid(pid, status, 0) < 0)
        if (errno != EINTR)
            return nsbox_err_sys(e, "waitpid %s", p->argv[0]);
    return 0;
}
