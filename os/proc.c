/* Helper programs run to their end (proc.h). */
#include "proc.h"
#include "cleanup.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* In the child: the descriptors in place, then the program. Never returns. */
static void child(const struct nsbox_proc *p, int in, int err_w)
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
    if ((p->keep_fd >= 0 && keep < 0) || null < 0 || dup2(in >= 0 ? in : null, 0) < 0 ||
        dup2(out, 1) < 0 || dup2(err_w, 2) < 0 || (keep >= 0 && dup2(keep, 3) < 0))
        _exit(126);
    nsbox_close_fds_except(keep >= 0 ? 3 : -1);
    char *const *envp = p->envp ? p->envp : environ;
    const char *prog = p->path ? p->path : p->argv[0];
    if (p->path_lookup)
        execvpe(prog, p->argv, envp);
    else
        execve(prog, p->argv, envp);
    dprintf(2, "cannot execute %s: %s", prog, strerror(errno));
    _exit(127);
}

/* stdin_text as a descriptor at offset 0: a memfd, which holds any length without a reader. */
static int stdin_fd(const char *text, struct nsbox_err *e)
{
    int fd = memfd_create("nsbox-stdin", MFD_CLOEXEC);
    if (fd < 0)
        return nsbox_err_sys(e, "memfd_create");
    if (nsbox_pwrite_all(fd, text, strlen(text), 0) < 0) {
        close(fd);
        return nsbox_err_sys(e, "write stdin");
    }
    return fd;
}

/* The program's stderr until it closes it or its time is up (then it is killed). */
static size_t read_until(int fd, pid_t pid, int timeout_s, char *buf, size_t n, bool *killed)
{
    if (timeout_s <= 0)
        return nsbox_read_bounded(fd, buf, n);
    int64_t deadline = nsbox_now_ms() + (int64_t)timeout_s * 1000;
    size_t have = 0;
    for (;;) {
        int64_t left = deadline - nsbox_now_ms();
        struct pollfd pf = {fd, POLLIN, 0};
        int r = left > 0 ? poll(&pf, 1, (int)left) : 0;
        if (r < 0 && errno == EINTR)
            continue;
        if (r == 0) {
            kill(pid, SIGKILL);
            *killed = true;
            break;
        }
        if (nsbox_read_bounded_once(fd, buf, n, &have) <= 0)
            break;
    }
    if (n)
        buf[have] = '\0';
    return have;
}

int nsbox_proc_run(const struct nsbox_proc *p, int *status, char *err, size_t n,
                   struct nsbox_err *e)
{
    int pipefd[2];
    int in = p->stdin_text ? stdin_fd(p->stdin_text, e) : -1;
    if (p->stdin_text && in < 0)
        return -1;
    if (pipe2(pipefd, O_CLOEXEC) < 0) {
        nsbox_closep(&in);
        return nsbox_err_sys(e, "pipe");
    }
    pid_t pid = fork();
    if (pid < 0) {
        close(pipefd[0]);
        close(pipefd[1]);
        nsbox_closep(&in);
        return nsbox_err_sys(e, "fork");
    }
    if (pid == 0)
        child(p, in, pipefd[1]);
    close(pipefd[1]);
    nsbox_closep(&in);
    bool killed = false;
    size_t have = read_until(pipefd[0], pid, p->timeout_s, err, n, &killed);
    close(pipefd[0]);
    if (killed)
        have = (size_t)snprintf(err, n, "timed out after %d s: killed", p->timeout_s);
    while (have && (err[have - 1] == '\n' || err[have - 1] == ' '))
        err[--have] = '\0';
    while (waitpid(pid, status, 0) < 0)
        if (errno != EINTR)
            return nsbox_err_sys(e, "waitpid %s", p->argv[0]);
    return 0;
}

void nsbox_proc_status_text(int status, char *buf, size_t n)
{
    if (WIFSIGNALED(status))
        snprintf(buf, n, "killed by signal %d", WTERMSIG(status));
    else
        snprintf(buf, n, "exit code %d", WEXITSTATUS(status));
}
