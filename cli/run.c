/* The parent side of a one-shot sandbox: prepare once, clone once, write the id maps, put the
 * child in its cgroup, relay signals, wait, and remove everything. */
#define _GNU_SOURCE
#include "cleanup.h"
#include "signals.h"
#include "client.h"
#include "sandbox.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>


/* ---- preparation (once, before the clone) -------------------------------------------------- */

int nsbox_run_check(const struct nsbox_spec *s, struct nsbox_err *e)
{
    if (s->setup_script)
        return nsbox_err_set(e, NSBOX_E_UNSUPPORTED, ENOTSUP,
                             "setup_script is supported for persistent sandboxes (nsbox create), "
                             "not for nsbox run");
    /* Idle means no request for N seconds; a run's one command is in flight for the sandbox's
     * whole life, so it would never sleep. Accepting it would promise what never happens. */
    if (s->idle_timeout_seconds)
        return nsbox_err_set(e, NSBOX_E_UNSUPPORTED, ENOTSUP,
                             "idle_timeout_seconds is supported for persistent sandboxes (nsbox "
                             "create), not for nsbox run: a run's sandbox is busy until its "
                             "command ends, so it never sleeps");
    return 0;
}

/* ---- waiting -------------------------------------------------------------------------------- */

struct wait_result {
    int status;
    bool timed_out;
    bool have_report;
    struct nsbox_child_report report;
};

static void read_report(int *fd, struct wait_result *w)
{
    ssize_t n;
    do
        n = read(*fd, &w->report, sizeof w->report);
    while (n < 0 && errno == EINTR);
    if (n == (ssize_t)sizeof w->report)
        w->have_report = true;
    if (n <= 0 || n == (ssize_t)sizeof w->report) {
        close(*fd);
        *fd = -1;
    }
}

static int parent_wait(pid_t pid, int *report_fd, int sfd, uint64_t timeout_ms,
                       struct wait_result *w, struct nsbox_err *e)
{
    int64_t deadline = timeout_ms ? nsbox_now_ms() + (int64_t)timeout_ms : 0;
    int stops = 0;
    for (;;) {
        struct pollfd pf[2] = {{sfd, POLLIN, 0}, {*report_fd, POLLIN, 0}};
        int tmo = -1;
        if (deadline) {
            int64_t left = deadline - nsbox_now_ms();
            tmo = left > 0 ? (int)(left > 1000000 ? 1000000 : left) : 0;
        }
        int r = poll(pf, *report_fd >= 0 ? 2 : 1, tmo);
        if (r < 0 && errno != EINTR)
            return nsbox_err_sys(e, "poll");
        if (r == 0 && deadline && nsbox_now_ms() >= deadline && !w->timed_out) {
            w->timed_out = true;
            kill(pid, SIGKILL); /* pid 1's death takes the whole namespace with it */
            deadline = 0;
        }
        if (*report_fd >= 0 && (pf[1].revents & (POLLIN | POLLHUP)))
            read_report(report_fd, w);
        if (pf[0].revents & POLLIN) {
            struct signalfd_siginfo si;
            if (read(sfd, &si, sizeof si) == (ssize_t)sizeof si && si.ssi_signo != SIGCHLD)
                kill(pid, nsbox_signals_relay((int)si.ssi_signo, &stops));
        }
        int status;
        pid_t p = waitpid(pid, &status, WNOHANG);
        if (p == pid) {
            w->status = status;
            if (*report_fd >= 0)
                read_report(report_fd, w);
            return 0;
        }
    }
}

static int exit_code_of(const struct wait_result *w)
{
    if (w->timed_out)
        return 124;
    if (WIFEXITED(w->status))
        return WEXITSTATUS(w->status);
    return 128 + WTERMSIG(w->status);
}

/* ---- the run -------------------------------------------------------------------------------- */

int nsbox_run(const struct nsbox_spec *s, char *const argv[], const struct nsbox_run_opts *o,
              int *exit_status, struct nsbox_err *e)
{
    if (!argv || !argv[0])
        return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL, "no command given");
    if (nsbox_run_check(s, e) < 0)
        return -1;
    *exit_status = 125;
    struct nsbox_sandbox sb;
    nsbox_sandbox_init(&sb);
    sigset_t mask, oldmask;
    sigemptyset(&mask);
    for (size_t i = 0; i < NSBOX_ARRAY_LEN(nsbox_signals_relayed); i++)
        sigaddset(&mask, nsbox_signals_relayed[i]);
    sigaddset(&mask, SIGCHLD);
    if (sigprocmask(SIG_BLOCK, &mask, &oldmask) < 0)
        return nsbox_err_sys(e, "sigprocmask");
    sb.L.blocked = mask;
    int sfd = -1;
    int stdio[3] = {o ? o->stdin_fd : 0, o ? o->stdout_fd : 1, o ? o->stderr_fd : 2};
    int ret = nsbox_check_stdio(stdio, e);
    if (ret == 0)
        ret = nsbox_sandbox_prepare(&sb, s, argv, o ? o->cwd : NULL, e);
    if (ret == 0) {
        sfd = signalfd(-1, &mask, SFD_CLOEXEC);
        if (sfd < 0)
            ret = nsbox_err_sys(e, "signalfd");
    }
    if (ret == 0)
        ret = nsbox_sandbox_start(&sb, stdio, e);
    if (ret == 0) {
        struct wait_result w = {0};
        ret = parent_wait(sb.pid, &sb.L.report_rd, sfd, o ? o->timeout_ms : 0, &w, e);
        if (ret == 0)
            sb.pid = 0; /* reaped */
        if (ret == 0 && w.have_report && !w.timed_out) {
            *e = w.report.err;
            *exit_status = w.report.exit_code;
            if (w.report.exit_code == 125)
                nsbox_err_wrap(e, "sandbox set-up failed");
            else
                e->code = NSBOX_E_EXEC;
            ret = -1;
        } else if (ret == 0) {
            *exit_status = exit_code_of(&w);
        }
        if (o && o->oom_kills)
            *o->oom_kills = (int)nsbox_cgroup_oom_kills(&sb.cg);
        if (o && o->timed_out)
            *o->timed_out = ret == 0 && w.timed_out;
    }
    struct nsbox_err e2;
    if (nsbox_sandbox_destroy(&sb, ret < 0 ? &e2 : e) < 0)
        ret = -1;
    nsbox_closep(&sfd);
    sigprocmask(SIG_SETMASK, &oldmask, NULL);
    return ret;
}
