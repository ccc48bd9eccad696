/* `nsbox run`: a one-shot sandbox, from the warm pool or cold. The cold run's parent side:
 * prepare once, clone once, write the id maps, put the child in its cgroup, relay signals,
 * wait, and remove everything. */
#define _GNU_SOURCE
#include "cleanup.h"
#include "cli.h"
#include "image.h"
#include "options.h"
#include "relay.h"
#include "say.h"
#include "warmpool.h"
#include "signals.h"
#include "client.h"
#include "egress_log.h"
#include "dnsnote.h"
#include "net.h"
#include "netplan.h"
#include "sandbox.h"
#include "util.h"
#include "filemax.h"
#include "wsdir.h"

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
    return w->timed_out ? EXIT_TIMEOUT : nsbox_exit_code(w->status);
}

/* ---- the network log ------------------------------------------------------------------------ */

struct copy_to {
    int fd;
    off_t off;
};

static int copy_line(void *ctx, const char *text, size_t len)
{
    struct copy_to *c = ctx;
    if (nsbox_pwrite_all(c->fd, text, len, c->off) < 0 ||
        nsbox_pwrite_all(c->fd, "\n", 1, c->off + (off_t)len) < 0)
        return -1;
    c->off += (off_t)len + 1;
    return 0;
}

/* --network-log FILE: the sandbox's network log, copied before its state directory goes. A
 * sandbox whose names went by address (the config's opt-out) has none: FILE stays empty. */
static int save_network_log(const struct nsbox_sandbox *sb, int fd, const char *path,
                            struct nsbox_err *e)
{
    struct nsbox_egress_reader r;
    if (nsbox_egress_reader_open(&r, sb->st.dir) < 0)
        return errno == ENOENT ? 0 : nsbox_err_sys(e, "--network-log: cannot read the log");
    struct copy_to to = {fd, 0};
    int n = nsbox_egress_reader_next(&r, copy_line, &to);
    nsbox_egress_reader_close(&r);
    if (n < 0)
        return nsbox_err_sys(e, "--network-log: cannot write %s", path);
    return 0;
}

static int open_network_log(const char *path, int *fd, struct nsbox_err *e)
{
    *fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOCTTY, 0644);
    if (*fd < 0)
        return nsbox_err_sys(e, "--network-log %s: cannot create it (a file of yours, in a "
                                "directory you can write)", path);
    return 0;
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
        if (o && o->dns_note && o->dns_note_size) {
            char names[NSBOX_DNSQUERY_NAMES][NSBOX_DNSQUERY_NAME_MAX + 1];
            size_t k = nsbox_net_dns_take(sb.net, names);
            nsbox_dnsnote_format(s, (const char(*)[NSBOX_DNSQUERY_NAME_MAX + 1])names, k,
                                 o->dns_note, o->dns_note_size);
        }
        if (o && o->timed_out)
            *o->timed_out = ret == 0 && w.timed_out;
    }
    struct nsbox_err e3;
    if (o && o->network_log && sb.st.dir[0] &&
        save_network_log(&sb, o->network_log_fd, o->network_log, ret < 0 ? &e3 : e) < 0)
        ret = -1;
    struct nsbox_err e2;
    if (nsbox_sandbox_destroy(&sb, ret < 0 ? &e2 : e) < 0)
        ret = -1;
    nsbox_closep(&sfd);
    sigprocmask(SIG_SETMASK, &oldmask, NULL);
    return ret;
}

/* ---- the command ---------------------------------------------------------------------------- */

/* A run given no command (spec is freed): EXIT_USAGE. docker run IMAGE runs the image's own
 * command; a sandbox runs only the one given, which an image named says. */
static int no_command(struct nsbox_spec *spec)
{
    bool image = spec->image[0] && strcmp(spec->image, "host") != 0;
    nsbox_spec_free(spec);
    return nsbox_say_usage("%s", image ? "run needs a command: nsbox run [OPTIONS] -- CMD "
                                         "[ARG...] (an image's Entrypoint and Cmd are not "
                                         "run: a sandbox runs the command it is given)"
                                       : "run needs a command: nsbox run [OPTIONS] -- CMD "
                                         "[ARG...]");
}

int nsbox_cli_run(int argc, char **argv)
{
    struct nsbox_spec spec;
    nsbox_spec_init(&spec);
    struct nsbox_err e = {0};
    struct nsbox_run_opts o = {.stdin_fd = 0, .stdout_fd = 1, .stderr_fd = 2,
                               .network_log_fd = -1};
    int rc = EXIT_NSBOX, i;
    int pr = nsbox_options_parse(argc, argv, &spec, &o, &i, &e);
    if (pr != 0) {
        nsbox_spec_free(&spec);
        return pr == 1 ? 0 : pr == -2 ? EXIT_USAGE : nsbox_say_fail(&e);
    }
    if (i >= argc)
        return no_command(&spec);
    /* on a terminal, that an image is being pulled (a pipe's reader gets the command's alone) */
    if (isatty(STDERR_FILENO))
        nsbox_image_set_note(nsbox_say_note, stderr);
    if (nsbox_spec_validate(&spec, &e) < 0 || nsbox_run_check(&spec, &e) < 0)
        goto out_err;
    if (o.network_log && !nsbox_netplan_has_names(&spec) && !spec.n_bindings) {
        nsbox_spec_free(&spec);
        return nsbox_say_usage("%s", "--network-log logs the connections to allowed host names "
                                     "(--network allow=NAME[:PORT],...) and the requests to "
                                     "hosts bound to a header (--header-binding), and this run "
                                     "has neither");
    }
    if (o.network_log && open_network_log(o.network_log, &o.network_log_fd, &e) < 0)
        goto out_err;
    /* ttl_seconds is a hard limit on the sandbox's life; for a one-shot sandbox it bounds the
     * command like --timeout does, whichever comes first. */
    uint64_t ttl_ms = spec.ttl_seconds * 1000;
    if (ttl_ms && (!o.timeout_ms || ttl_ms < o.timeout_ms))
        o.timeout_ms = ttl_ms;

    int status, oom_kills = 0;
    bool timed_out = false;
    char dns_note[4096] = "";
    o.oom_kills = &oom_kills;
    o.dns_note = dns_note;
    o.dns_note_size = sizeof dns_note;
    o.timed_out = &timed_out;
    /* A file, a terminal, a socket or a named FIFO of ours is relayed through a pipe, not
     * shared with the command; a pipe is opened anew; /dev/null is given as it is (relay.h).
     * The sandbox and all in it end with the command. */
    int stdio[3] = {o.stdin_fd, o.stdout_fd, o.stderr_fd};
    struct nsbox_relay relay;
    nsbox_relay_set_note(nsbox_say_note, stderr);
    nsbox_warmpool_set_note(nsbox_say_note, stderr); /* a pooled command that could not start */
    nsbox_wsdir_set_note(nsbox_say_note, stderr); /* a --workspace of root's */
    nsbox_filemax_set_note(nsbox_say_note, stderr); /* fs.file-max raised, or not raisable */
    if (nsbox_relay_start(&relay, stdio, false) < 0) {
        nsbox_err_sys(&e, "cannot relay the command's input and output");
        goto out_err;
    }
    o.stdin_fd = stdio[0], o.stdout_fd = stdio[1], o.stderr_fd = stdio[2];
    /* A sandbox made ahead for these settings, when the pool is on (docs/pool.md). */
    /* a pooled sandbox's log is not this run's to copy: a run that wants it runs cold */
    int pr2 = o.network_log ? 0 : nsbox_warmpool_run(&spec, argv + i, &o, &status, &oom_kills, &e);
    if (pr2 < 0) {
        nsbox_relay_finish(&relay);
        goto out_err;
    }
    bool made = true; /* the cold run made its sandbox (a failed command counts, too) */
    int r2 = pr2 == 1 ? 0 : nsbox_run(&spec, argv + i, &o, &status, &e);
    /* The command has ended: what it wrote is copied before anything of ours is said. */
    nsbox_relay_finish(&relay);
    if (pr2 == 1) {
        rc = status;
    } else if (r2 < 0) {
        if (e.code == NSBOX_E_EXEC) {
            nsbox_say_fail(&e); /* 126 or 127: the command's, not nsbox's */
            rc = status;
        } else {
            made = false;
            rc = nsbox_say_fail(&e);
        }
    } else {
        rc = status;
    }
    /* A run that could not make its sandbox (a missing image, no cgroup delegation) is no
     * sign of runs to come, and a fill would fail the same way. */
    if (pr2 == NSBOX_POOL_EMPTY && made)
        nsbox_warmpool_after_cold_run(&spec);
    if (timed_out) {
        char bound[96], s[32];
        nsbox_say_seconds(s, sizeof s, o.timeout_ms);
        snprintf(bound, sizeof bound, "%s of %s s",
                 o.timeout_ms == ttl_ms ? "the spec's ttl_seconds" : "--timeout", s);
        nsbox_say_timed_out(bound);
    }
    if (oom_kills > 0)
        nsbox_say_oom(spec.instance_type, spec.limits.memory_bytes, oom_kills,
                      geteuid() != 0 && !spec.workspace[0]);
    if (dns_note[0])
        fprintf(stderr, "%s\n", dns_note);
    nsbox_spec_free(&spec);
    nsbox_closep(&o.network_log_fd);
    return rc;
out_err:
    nsbox_closep(&o.network_log_fd);
    nsbox_spec_free(&spec);
    return nsbox_say_fail(&e);
}
