/* The supervisor while it makes its sandbox: the set-up script, what abandons the creation,
 * and handing out the id. */
#define _GNU_SOURCE
#include "supervisor_impl.h"
#include "cleanup.h"
#include "shown.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* Whether the sandbox being made is abandoned (when: where in its making), without waiting:
 * its caller's end (the socket hangs up: create or a pool filler killed, interrupted, timed
 * out) or its word (create's 'X': it got a stop signal), a stop signal, or the end of
 * --owner-pid's process. -1 with e filled when it is. */
int nsbox_sup_setup_abandoned(struct sup *S, const char *when, struct nsbox_err *e)
{
    struct pollfd pf[3] = {{S->sfd, POLLIN, 0}, {S->owner_fd, POLLIN, 0}, {S->ready_fd, POLLIN, 0}};
    if (poll(pf, 3, 0) <= 0)
        return 0;
    if (pf[2].revents) {
        char c = 0;
        ssize_t r = read(S->ready_fd, &c, 1);
        if (r == 1 && c == 'X')
            return nsbox_err_set(e, NSBOX_E_SYS, EINTR,
                                 "creation abandoned%s: nsbox create was interrupted", when);
        return nsbox_err_set(e, NSBOX_E_SYS, EPIPE, "creation abandoned%s: its caller is gone",
                             when);
    }
    if (pf[1].revents)
        return nsbox_err_set(e, NSBOX_E_SYS, EPIPE, "creation abandoned%s: its owner process ended",
                             when);
    int sig = nsbox_sup_stop_signal(S);
    if (sig)
        return nsbox_err_set(e, NSBOX_E_SYS, EINTR,
                             "creation abandoned%s: its supervisor was stopped (signal %d)", when,
                             sig);
    return 0;
}

/* ---- set-up ---------------------------------------------------------------------------------- */

/* The end of what a stream of the set-up script left, without its last newlines: at most
 * SETUP_TAIL_MAX bytes, from the start of a line where one starts in it, after "[...]" when
 * more came before. NULL when it left nothing. It goes into create's error, printed on the
 * host: control characters are shown as '?' and its lines after the first are indented
 * (nsbox_shown_lines), so that it cannot print lines that pass for nsbox's own. */
static char *setup_tail(struct ring *r)
{
    uint64_t end;
    bool lost;
    char *raw = nsbox_sup_ring_text(r, UINT64_MAX, false, &end, &lost);
    free(r->buf);
    r->buf = NULL;
    size_t tl = raw ? strlen(raw) : 0;
    while (tl && (raw[tl - 1] == '\n' || raw[tl - 1] == '\r'))
        raw[--tl] = '\0';
    char *text = tl ? nsbox_shown_lines(raw, tl, "  ", true) : NULL;
    free(raw);
    tl = text ? strlen(text) : 0;
    if (!tl) {
        free(text);
        return NULL;
    }
    static const char cut[] = "[...]\n";
    if (tl > SETUP_TAIL_MAX || lost) {
        size_t keep = tl > SETUP_TAIL_MAX - (sizeof cut - 1) ? SETUP_TAIL_MAX - (sizeof cut - 1)
                                                            : tl;
        const char *from = text + tl - keep, *nl = memchr(from, '\n', keep);
        if (nl && nl[1] && from > text && from[-1] != '\n')
            from = nl + 1; /* a whole first line */
        while (from > text && *from && ((unsigned char)*from & 0xc0) == 0x80)
            from++; /* a cut inside a character would show its rest as '?' */
        keep = (size_t)(text + tl - from);
        char *t = malloc(sizeof cut + keep);
        if (t) {
            memcpy(t, cut, sizeof cut - 1);
            memcpy(t + sizeof cut - 1, from, keep + 1);
        }
        free(text);
        return t;
    }
    return text;
}

/* Run the set-up script through the agent, as appuser in /workspace, bounded in time. Its stderr
 * (the end of it) goes into the error when it fails; when it wrote nothing there, the end of its
 * stdout does (pip, apt and make report there, and it was thrown away). */
int nsbox_sup_setup_run_script(struct sup *S, struct nsbox_err *e)
{
    int pe[2], po[2];
    if (pipe2(pe, O_CLOEXEC) < 0)
        return nsbox_err_sys(e, "pipe");
    if (pipe2(po, O_CLOEXEC) < 0) {
        close(pe[0]);
        close(pe[1]);
        return nsbox_err_sys(e, "pipe");
    }
    int fds[3] = {open("/dev/null", O_RDONLY | O_CLOEXEC), po[1], pe[1]};
    char *argv[] = {"/bin/sh", "-c", S->spec->setup_script, NULL};
    int r = nsbox_agent_spawn(S->agent, 0, argv, S->sb.envp, "/workspace", fds, NULL, 0, 0, 0, NULL, e);
    for (int i = 0; i < 3; i++)
        nsbox_closep(&fds[i]);
    if (r < 0) {
        close(pe[0]);
        close(po[0]);
        return -1;
    }
    fcntl(pe[0], F_SETFL, O_NONBLOCK);
    fcntl(po[0], F_SETFL, O_NONBLOCK);
    struct ring err = {0}, out = {0};
    int64_t deadline = nsbox_now_ms() + (int64_t)S->spec->setup_script_timeout_seconds * 1000;
    int pid = 0, status = -1, efd = pe[0], ofd = po[0];
    bool timed_out = false, done = false;
    char msg[512] = "";
    while (!done) {
        /* Also watched: what abandons the creation (its caller's socket, --owner-pid's
         * process, stop signals). Without them a script of up to 600 s would run on, and the
         * sandbox would be made, for nobody. */
        struct pollfd pf[6] = {{S->agent, POLLIN, 0},    {efd, POLLIN, 0},
                               {ofd, POLLIN, 0},         {S->ready_fd, POLLIN, 0},
                               {S->owner_fd, POLLIN, 0}, {S->sfd, POLLIN, 0}};
        int64_t left = deadline - nsbox_now_ms();
        int pr = poll(pf, 6, left > 0 ? (int)left : 0); /* a closed fd (-1) is skipped */
        if (pr > 0 && (pf[3].revents || pf[4].revents || pf[5].revents) &&
            nsbox_sup_setup_abandoned(S, " during the setup script", e) < 0) {
            nsbox_closep(&efd);
            nsbox_closep(&ofd);
            free(err.buf);
            free(out.buf);
            return -1;
        }
        if (pr == 0 && !timed_out) {
            timed_out = true;
            if (pid > 0)
                nsbox_agent_kill(S->agent, pid, SIGKILL, e);
            deadline = nsbox_now_ms() + 5000;
            continue;
        }
        if (pr == 0)
            break;
        if (efd >= 0 && (pf[1].revents & (POLLIN | POLLHUP)))
            nsbox_sup_drain(&efd, &err, LOG_ROUND);
        if (ofd >= 0 && (pf[2].revents & (POLLIN | POLLHUP)))
            nsbox_sup_drain(&ofd, &out, LOG_ROUND);
        if (pf[0].revents & (POLLIN | POLLHUP)) {
            struct nsbox_agent_event ev;
            int ar = nsbox_agent_recv(S->agent, &ev, e);
            if (ar <= 0)
                break;
            nsbox_closep(&ev.fd);
            if (ev.seq != 0)
                continue;
            if (ev.type == NSBOX_AGENT_SPAWNED)
                pid = ev.pid;
            else {
                status = ev.status;
                snprintf(msg, sizeof msg, "%s", ev.msg);
                done = true;
            }
        }
    }
    /* the end of what it left: only LOG_MAX are kept */
    if (efd >= 0)
        nsbox_sup_drain(&efd, &err, LOG_MAX);
    if (ofd >= 0)
        nsbox_sup_drain(&ofd, &out, LOG_MAX);
    nsbox_closep(&efd);
    nsbox_closep(&ofd);
    cleanup_free char *etext = setup_tail(&err);
    cleanup_free char *otext = setup_tail(&out);
    if (!timed_out && status == 0)
        return 0;
    /* what it said: stderr, else stdout, else (a failure) the agent's word or that it was mute */
    const char *said = "", *text = "";
    if (etext)
        said = timed_out ? "; its stderr: " : ": ", text = etext;
    else if (otext)
        said = "; nothing on stderr, the end of its stdout: ", text = otext;
    else if (!timed_out)
        said = ": ", text = msg[0] ? msg : "(no output on stderr or stdout)";
    if (timed_out)
        return nsbox_err_set(e, NSBOX_E_TIMEOUT, ETIMEDOUT,
                             "setup script timed out after setup_script_timeout_seconds=%llu%s%s",
                             (unsigned long long)S->spec->setup_script_timeout_seconds, said,
                             text);
    /* A first setup script installs packages (pip, npm, apt), in a sandbox whose default
     * network is none: what it said of that was a resolver's "Name or service not known"
     * after pip's retries, which names neither nsbox nor the option. Said as a fact, not a cause. */
    bool offline = S->spec->net == NSBOX_NET_NONE && S->spec->n_egress == 0;
    return nsbox_err_set(e, NSBOX_E_EXEC, 0, "setup script failed (exit code %d%s)%s%s", status,
                         offline ? "; the sandbox has network none: what a script downloads "
                                   "needs its hosts allowed, network allow=HOST[,HOST], or all"
                                 : "",
                         said, text);
}

int nsbox_sup_setup_open_listen(struct sup *S, struct nsbox_err *e)
{
    S->listen_fd = nsbox_sup_listen_in_dir(S->sb.st.dir, "ctl", SOCK_STREAM, 64, e);
    return S->listen_fd < 0 ? -1 : 0;
}

/* The id, written by the supervisor itself to nsbox create's stdout: that write is the moment
 * the sandbox is given. Before it, create's end or interruption ends the sandbox (abandoned),
 * and nothing reached the caller; after it, the caller has an id that names a sandbox that
 * stays, whatever happens to create then. Waits for room there (a pipe not yet read, a
 * terminal on hold), watching what abandons the creation until the first byte is out. */
int nsbox_sup_setup_give_id(struct sup *S, struct nsbox_err *e)
{
    size_t len = strlen(S->out->before) + NSBOX_ID_LEN + strlen(S->out->after), done = 0;
    char *text = malloc(len + 1);
    if (!text)
        return nsbox_err_sys(e, "malloc");
    snprintf(text, len + 1, "%s%s%s", S->out->before, S->sb.st.id, S->out->after);
    int r = 0;
    while (r == 0 && done < len) {
        struct pollfd pf[4] = {{S->out_fd, POLLOUT, 0},
                               {S->ready_fd, POLLIN, 0},
                               {S->sfd, POLLIN, 0},
                               {S->owner_fd, POLLIN, 0}};
        if (poll(pf, done ? 1 : 4, -1) < 0)
            continue; /* EINTR: none is caught, but a stop/continue of a traced process */
        if (!done && (pf[1].revents || pf[2].revents || pf[3].revents) &&
            (r = nsbox_sup_setup_abandoned(S, "", e)) < 0)
            break;
        if (!pf[0].revents)
            continue;
        ssize_t w = write(S->out_fd, text + done, len - done);
        if (w > 0)
            done += (size_t)w;
        else if (w < 0 && errno != EAGAIN && errno != EINTR)
            r = nsbox_err_set(e, NSBOX_E_SYS, errno,
                              "create: cannot write the new sandbox's id %s to stdout (%s); "
                              "it was deleted again",
                              S->sb.st.id, strerror(errno));
    }
    free(text);
    nsbox_closep(&S->out_fd); /* the caller's reader sees its end with create's */
    return r;
}

/* Whether the line reached whoever waits for it. It did not when that process is gone
 * (EPIPE): a create or pool filler interrupted, killed, timed out. */
bool nsbox_sup_setup_report_ready(int fd, const char *line)
{
    if (fd < 0)
        return false;
    size_t len = strlen(line);
    ssize_t w;
    do
        w = send(fd, line, len, MSG_NOSIGNAL);
    while (w < 0 && errno == EINTR);
    return w == (ssize_t)len;
}

/* Init is the sandbox: if the memory cgroup's OOM killer takes it, the sandbox is deleted with
 * its workspace. It is as small as a shell, and memory that no process owns (files in /tmp and
 * /dev/shm, up to the whole limit) can leave it among the few candidates. So its commands are
 * made likelier victims (agent_init.c: oom_score_adj 500), and, where we may (root: lowering needs
 * CAP_SYS_RESOURCE), init itself the last one: -999, not -1000, which would leave a cgroup
 * with only init in it no victim at all, and init waiting for memory for ever. */
void nsbox_sup_setup_protect_init(pid_t init)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/oom_score_adj", (int)init);
    int fd = open(path, O_WRONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return;
    ssize_t w = write(fd, "-999", 4);
    (void)w; /* not allowed (a user's nsbox): its commands still go first */
    close(fd);
}
