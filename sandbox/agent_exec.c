/* The child of an agent's command up to its exec, and the search it is executed by
 * (agent_exec.h). */
#define _GNU_SOURCE
#include "agent_exec.h"
#include "agent_user.h"
#include "pathsearch.h"
#include "safepath.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <unistd.h>

int nsbox_agent_exec_search(char **argv, char **env)
{
    char path[PATH_MAX];
    const char *file;
    int err = ENOENT, r;
    bool eacces = false;
    struct nsbox_pathsearch s;
    /* init's child has entered the command's cwd: "." */
    nsbox_pathsearch_init(&s, argv[0], nsbox_pathsearch_env(env), ".");
    while ((r = nsbox_pathsearch_next(&s, path, sizeof path, &file)) != 0) {
        if (r < 0) {
            if (err == ENOENT)
                err = ENAMETOOLONG; /* as execvp says it: not "not found" */
            continue;
        }
        execve(file, argv, env);
        err = errno;
        if (err == ENOEXEC) {
            size_t argc = 0;
            while (argv[argc])
                argc++;
            /* on this 256 KiB stack: 32 KiB at most. 4096 is the most an exec request has
             * (NSBOX_PROTO_MAX_ARGS); a pooled run with more, which no real script takes,
             * gets 126 where a cold run would run it with sh */
            if (argc <= 4096) {
                char *sh[argc + 2];
                sh[0] = "/bin/sh";
                sh[1] = (char *)file;
                memcpy(sh + 2, argv + 1, argc * sizeof *sh); /* with the NULL */
                execve("/bin/sh", sh, env);
            }
            return errno;
        }
        if (err == EACCES)
            eacces = true;
        else if (err != ENOENT && err != ENOTDIR && err != ESTALE)
            return err;
    }
    return eacces ? EACCES : err;
}

int nsbox_agent_exec_fail_status(int kind, int err)
{
    return kind != 'E' ? 125 : err == ENOENT ? 127 : 126;
}

/* The child runs on init's clone stack (agent_init.c's spawn_stack), which AddressSanitizer
 * does not know as a thread's. Its runtime, called before each noreturn call of instrumented
 * code (child_fail, _exit), would take the span from here to the thread's own stack as the
 * stack to clean, refuse it as absurd, and say so on the command's stderr ("ASan is ignoring
 * requested __asan_handle_no_return"), mixed into what the user's command wrote: these two
 * functions are not instrumented by it. No effect in other builds. */
#define CHILD_ON_CLONE_STACK __attribute__((no_sanitize("address")))

/* The child could not start the command: kind and err in c (init reads them there after a
 * vfork, and words them itself), or its report on the status pipe (forked); then it exits. */
CHILD_ON_CLONE_STACK __attribute__((noreturn)) static void
child_fail(struct nsbox_agent_exec_child *c, int kind, int err)
{
    c->fail_kind = kind;
    c->fail_errno = err;
    struct nsbox_agent_exec_report r = {.status = nsbox_agent_exec_fail_status(kind, err)};
    if (c->status_fd >= 0) {
        nsbox_agent_exec_fail_msg(c, r.msg, sizeof r.msg);
        ssize_t w = write(c->status_fd, &r, sizeof r); /* under PIPE_BUF: whole */
        (void)w;
    }
    _exit(r.status);
}

static int nondefault[NSIG];
static size_t n_nondefault;

void nsbox_agent_exec_find_signals(void)
{
    for (int sig = 1; sig < NSIG; sig++) {
        struct sigaction old;
        if (sig != SIGKILL && sig != SIGSTOP && sigaction(sig, NULL, &old) == 0 &&
            old.sa_handler != SIG_DFL)
            nondefault[n_nondefault++] = sig;
    }
}

CHILD_ON_CLONE_STACK int nsbox_agent_exec_child_main(void *arg)
{
    struct nsbox_agent_exec_child *c = arg;
    struct sigaction dfl = {.sa_handler = SIG_DFL};
    for (size_t i = 0; i < n_nondefault; i++)
        sigaction(nondefault[i], &dfl, NULL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    /* Its own session and process group: kill and timeouts reach the whole tree. And a child
     * subreaper (kept across execve): what its tree detaches (setsid and a double fork) is
     * reparented to it, not to init, so that kill_tree still finds it while the command
     * lives. The command also reaps those orphans (shells and most programs reap any child;
     * one that does not leaves them zombies until it ends, when init takes them). */
    setsid();
    prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    size_t n_extra = c->n_extra;
    /* the status pipe out of the way of the descriptors placed at 0, 1, 2, 3... */
    if (c->status_fd >= 0 && c->status_fd < 3 + (int)n_extra)
        c->status_fd = fcntl(c->status_fd, F_DUPFD_CLOEXEC, 3 + (int)n_extra);
    for (int i = 0; i < 3; i++)
        if (dup2(c->fds[i], i) < 0)
            child_fail(c, 'E', errno);
    /* exec -t: the client's pseudo-terminal becomes the command's controlling terminal, for
     * job control and Ctrl-C; TIOCSTI stays denied by seccomp. */
    if (c->tty && isatty(0))
        ioctl(0, TIOCSCTTY, 0);
    if (n_extra && nsbox_fds_place(c->extra, n_extra, 3) < 0)
        child_fail(c, 'F', errno);
    /* before resolving cwd: no way out through /proc/self/fd but what the caller passed on */
    nsbox_close_fds_keep_from(3 + (int)n_extra, &c->status_fd, c->status_fd >= 0 ? 1 : 0);
    /* the user before cwd: the directory is entered with the command's own rights */
    bool caps_failed;
    int err;
    if (c->user && (err = nsbox_agent_user_become(c->user, &caps_failed)) != 0)
        child_fail(c, caps_failed ? 'K' : 'U', err);
    /* the process's own noNewPrivileges, which init lacks when the container's has none */
    if (c->user && c->user->no_new_privs && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
        child_fail(c, 'N', errno);
    struct nsbox_err ce;
    if (nsbox_sp_chdir_in_root(c->cwd, &ce) < 0)
        child_fail(c, 'C', ce.sys_errno ? ce.sys_errno : EINVAL);
    child_fail(c, 'E', nsbox_agent_exec_search(c->argv, c->env));
}

void nsbox_agent_exec_fail_msg(const struct nsbox_agent_exec_child *c, char *msg, size_t n)
{
    int err = c->fail_errno;
    if (c->fail_kind == 'C')
        snprintf(msg, n, "cannot enter %.200s: %s", c->cwd, strerror(err));
    else if (c->fail_kind == 'F')
        snprintf(msg, n, "cannot pass on the descriptors from 3 up: %s", strerror(err));
    else if (c->fail_kind == 'U')
        snprintf(msg, n,
                 "cannot become uid %u gid %u: %s (the container's init changes ids "
                 "only with CAP_SETUID and CAP_SETGID)",
                 c->user->uid, c->user->gid, strerror(err));
    else if (c->fail_kind == 'K')
        snprintf(msg, n,
                 "cannot give the process its capabilities: %s (an exec'd process has at most "
                 "the container's; cutting the bounding set takes CAP_SETPCAP)",
                 strerror(err));
    else if (c->fail_kind == 'N')
        snprintf(msg, n, "cannot set no_new_privs (the process's noNewPrivileges): %s",
                 strerror(err));
    else if (err == E2BIG) /* a string over 128 KiB (MAX_ARG_STRLEN), or all of them */
        snprintf(msg, n,
                 "%.200s: %s (the kernel takes 128 KiB per argument or "
                 "variable, and less than the stack limit in all: put "
                 "long inputs in a file)",
                 c->argv[0], strerror(err));
    else
        snprintf(msg, n, "%.200s: %s", c->argv[0],
                 err == ENOENT ? "command not found" : strerror(err));
}
