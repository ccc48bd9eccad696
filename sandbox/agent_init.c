/* init's end of the agent protocol (agent.h, agent_init.h): the requests of the supervisor and of a
 * pooled sandbox's run socket served, the commands started, reaped and reported. */
#define _GNU_SOURCE
#include "agent_init.h"
#include "agent.h"
#include "agent_exec.h"
#include "agent_user.h"
#include "cgroup_util.h"
#include "cleanup.h"
#include "dnsstub.h"
#include "mounts.h"
#include "signals.h"
#include "util.h"

#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static void extra_close(struct nsbox_agent_extra *x)
{
    for (; x && x->n > 0; x->n--)
        close(x->fd[x->n - 1]);
}

#define MAX_CHILDREN 4096

static struct {
    pid_t pid;
    uint32_t seq;
    bool last; /* NSBOX_AGENT_F_LAST */
    bool run;  /* the command of the run socket's run */
    bool ended; /* reaped, its status not yet reported (report_ended) */
    int status;
} children[MAX_CHILDREN];

/* nsbox-oci: the container's own process, which init forked before it served (contain.c). Its
 * end is the sandbox's, and the signals init is sent are for it. 0 otherwise. */
static pid_t container_pid;

/* The run socket of a pooled sandbox (agent.h): listening until a run takes the sandbox, then
 * the connection of that run until its status is out. */
static struct {
    int listen_fd, conn, oom_fd;
    bool claimed;
    pid_t pid;    /* its command, once started */
    uint32_t seq; /* the client's seq, echoed */
} run = {-1, -1, -1, false, 0, 0};

/* Every process of the sandbox but init: in a pid namespace, kill(-1) from its init reaches
 * them all, and SIGKILL takes effect before any of them runs another instruction. */
static void kill_all_others(void)
{
    kill(-1, SIGKILL);
}

static void reply_fd(int sock, uint32_t type, uint32_t seq, int pid, int status, const char *msg,
                     int fd)
{
    struct nsbox_agent_hdr h = {.type = type,
                                .seq = seq,
                                .pid = pid,
                                .status = status,
                                .len = msg ? (uint32_t)strlen(msg) : 0};
    nsbox_agent_send_msg(sock, &h, msg, fd >= 0 ? &fd : NULL, fd >= 0 ? 1 : 0);
}

static void reply(int sock, uint32_t type, uint32_t seq, int pid, int status, const char *msg)
{
    reply_fd(sock, type, seq, pid, status, msg, -1);
}

/* exec -t: a pseudo-terminal of the sandbox's own devpts, so that the command's tty is a
 * /dev/pts/N that exists in here (ttyname, tty, ps). The slave's fd fills fds[]. */
int nsbox_agent_init_open_pty(uint32_t winsize, int fds[3], int *master)
{
    int m = open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC);
    int unlock = 0;
    if (m < 0 || ioctl(m, TIOCSPTLCK, &unlock) < 0) {
        if (m >= 0)
            close(m);
        return -1;
    }
    int s = ioctl(m, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (s < 0) {
        close(m);
        return -1;
    }
    struct winsize ws = {.ws_row = (unsigned short)(winsize >> 16),
                         .ws_col = (unsigned short)(winsize & 0xffff)};
    if (ws.ws_row && ws.ws_col)
        ioctl(s, TIOCSWINSZ, &ws);
    fds[0] = s;
    fds[1] = dup(s);
    fds[2] = dup(s);
    *master = m;
    return fds[1] < 0 || fds[2] < 0 ? -1 : 0;
}

static _Alignas(16) char spawn_stack[256 * 1024];

/* Commands are the OOM killer's first choice over init, whose end deletes the sandbox (the
 * supervisor also lowers init's own to -999 where it may: protect_init). A command inherits
 * its oom_score_adj at the clone; it cannot set its own (its /proc files are root's, unmapped
 * here, until its execve, and making it dumpable would make init's memory, which it shares
 * until then, dumpable too). So init raises its own to 500 for the clone and sets it back:
 * raising is allowed to anyone, and lowering back to where it was too (the kernel refuses
 * only going below the lowest a privileged writer set). The descriptor was opened before init
 * changed its ids (contain.c); -1: not done. */
static int oom_fd = -1;
/* init's own value, read once, at its first command: the supervisor has set it by then
 * (protect_init comes before the sandbox is ready) */
static char oom_base[16];

/* the stub resolver (dnsstub.h): its socket and the table of names it fills */
static int dns_fd = -1;
static struct nsbox_dnsquery_table *dns_table;

void nsbox_agent_init_set_dns(int fd, struct nsbox_dnsquery_table *t)
{
    dns_fd = fd;
    dns_table = t;
}

void nsbox_agent_init_set_oom_fd(int fd)
{
    oom_fd = fd;
}

/* true when raised: oom_restore must follow the clone */
static bool oom_raise(void)
{
    if (oom_fd >= 0 && !oom_base[0]) {
        ssize_t r = pread(oom_fd, oom_base, sizeof oom_base - 1, 0);
        if (r <= 0)
            nsbox_closep(&oom_fd);
        else
            oom_base[r] = '\0';
    }
    return oom_fd >= 0 && pwrite(oom_fd, "500", 3, 0) == 3;
}

static void oom_restore(bool raised)
{
    if (!raised)
        return;
    ssize_t w = pwrite(oom_fd, oom_base, strlen(oom_base), 0);
    (void)w; /* failed: init stays as likely a victim as its commands, nothing better to do */
}

/* Split a SPAWN's payload into [user,] cwd, argv (argc) and env (envc): it must hold exactly
 * that many strings, and the descriptors must all be there. The array, with room for two more
 * slots, or NULL when the request is malformed. */
static char **spawn_split(const struct nsbox_agent_hdr *h, char *payload, const int fds[3])
{
    size_t need = 1 + ((h->flags & NSBOX_AGENT_F_USER) ? 1 : 0) + (size_t)h->argc + h->envc;
    size_t count = 0;
    if (h->argc == 0 || h->argc > 65536 || h->envc > 65536 || fds[0] < 0 || fds[1] < 0 ||
        fds[2] < 0 || h->len == 0 || payload[h->len - 1] != '\0')
        return NULL;
    char **strs = calloc(need + 2, sizeof *strs);
    if (!strs)
        return NULL;
    for (size_t off = 0; off < h->len; off += strlen(payload + off) + 1) {
        if (count == need) {
            free(strs);
            return NULL;
        }
        strs[count++] = payload + off;
    }
    if (count != need) {
        free(strs);
        return NULL;
    }
    return strs;
}

/* Clone the command's child with every signal blocked (the child resets its handlers before
 * it unblocks them) and the OOM score raised for it to inherit. Its pid, or -1 and errno.
 * With c->status_fd (nsbox-oci) it is forked, and init goes on at once: a process of the
 * container's uid can stop the child before it changes ids, and a vfork'd child stopped
 * would hold init, every later exec and the signals init relays until it is continued. The
 * forked child's memory is a copy of init's, as unreachable (not dumpable, of the host's
 * user namespace). */
static pid_t spawn_clone(struct nsbox_agent_exec_child *c)
{
    sigset_t all, saved_mask;
    sigfillset(&all);
    sigprocmask(SIG_SETMASK, &all, &saved_mask);
    bool raised = oom_raise();
    pid_t pid = c->status_fd >= 0
                    ? fork()
                    : clone(nsbox_agent_exec_child_main, spawn_stack + sizeof spawn_stack,
                            CLONE_VM | CLONE_VFORK | SIGCHLD, c);
    if (pid == 0)
        nsbox_agent_exec_child_main(c); /* forked: it never returns */
    int clone_errno = errno;
    oom_restore(raised);
    sigprocmask(SIG_SETMASK, &saved_mask, NULL);
    errno = clone_errno;
    return pid;
}

/* nsbox-oci's forked children until they have exec'd or said why not (their status pipe). */
#define MAX_PENDING 64
static struct {
    pid_t pid; /* 0: a free slot */
    uint32_t seq;
    int status_fd, master;
} pending[MAX_PENDING];

/* The command runs: init reaps it and reports its end; SPAWNED now (with a terminal's
 * master). */
static void spawn_started(int sock, uint32_t seq, pid_t pid, unsigned flags, bool is_run,
                          int master)
{
    size_t i = 0;
    while (i < MAX_CHILDREN && children[i].pid)
        i++;
    if (i < MAX_CHILDREN) {
        children[i].pid = pid;
        children[i].seq = seq;
        children[i].last = (flags & NSBOX_AGENT_F_LAST) != 0;
        children[i].run = is_run;
    }
    reply_fd(sock, NSBOX_AGENT_SPAWNED, seq, pid, 0, NULL, master);
    if (master >= 0)
        close(master);
}

/* A pending child's word: its report (FAILED; the reaper collects it unreported), or its
 * pipe's end, at its exec or its end (SPAWNED, before its EXITED). */
static void pending_done(int sock, size_t i)
{
    struct nsbox_agent_exec_report r;
    ssize_t n;
    do
        n = read(pending[i].status_fd, &r, sizeof r);
    while (n < 0 && errno == EINTR);
    close(pending[i].status_fd);
    if (n == (ssize_t)sizeof r) {
        r.msg[sizeof r.msg - 1] = '\0';
        reply(sock, NSBOX_AGENT_FAILED, pending[i].seq, pending[i].pid, r.status, r.msg);
        if (pending[i].master >= 0)
            close(pending[i].master);
    } else {
        spawn_started(sock, pending[i].seq, pending[i].pid, 0, false, pending[i].master);
    }
    pending[i].pid = 0;
}

/* Why the child could not be cloned, into msg. */
static void spawn_clone_msg(int err, char *msg, size_t n)
{
    if (err == EAGAIN) /* the pids cgroup's limit (or RLIMIT_NPROC) */
        snprintf(msg, n,
                 "cannot start: the sandbox has as many processes as its instance type "
                 "allows (its pids limit, shown by nsbox inspect); end some, or use a larger "
                 "instance type");
    else if (err == EBUSY)
        snprintf(msg, n,
                 "cannot start: %d execs are still starting (held before their exec: stopped, "
                 "say): let them go on, or end them",
                 MAX_PENDING);
    else
        snprintf(msg, n, "cannot start: %s", strerror(err));
}

/* Answer FAILED for a command that did not start, after ending the others when it was to be
 * the last one. Returns 0 (do_spawn's "could not start"). */
static int spawn_failed(int sock, const struct nsbox_agent_hdr *h, pid_t pid, int status,
                        const char *msg, int master, char **strs)
{
    if (h->flags & NSBOX_AGENT_F_LAST)
        kill_all_others();
    reply(sock, NSBOX_AGENT_FAILED, h->seq, pid, status, msg);
    if (master >= 0)
        close(master);
    free(strs);
    return 0;
}

/* Why a SPAWN's terminal could not be made (err: the open's errno): ENOSPC is the devpts's
 * bound (NSBOX_PTYS_MAX), which a bare "No space left on device" would not name. */
static void pty_failure(char *msg, size_t n, int err)
{
    if (err == ENOSPC)
        snprintf(msg, n,
                 "cannot make a pseudo-terminal: none left (a sandbox has at most %d at once, "
                 "and the host's are shared by every sandbox): end some exec -t sessions or "
                 "programs that hold one",
                 NSBOX_PTYS_MAX);
    else
        snprintf(msg, n, "cannot make a pseudo-terminal: %s", strerror(err));
}

/* Start the command of a SPAWN; the answer goes to sock. Returns its pid, 0 when it could not
 * start (FAILED sent with 125/126/127), -1 when the request was malformed (FAILED sent, 125;
 * on the run socket: status 0, "refused", and nothing was touched). */
static int do_spawn(int sock, const struct nsbox_agent_hdr *h, char *payload, int fds[3],
                    struct nsbox_agent_extra *x, bool is_run)
{
    char msg[600];
    char **strs = NULL;
    int master = -1;
    if ((h->flags & NSBOX_AGENT_F_TTY) && fds[0] < 0 &&
        nsbox_agent_init_open_pty((uint32_t)h->status, fds, &master) < 0) {
        pty_failure(msg, sizeof msg, errno);
        for (int i = 0; i < 3; i++)
            if (fds[i] >= 0)
                close(fds[i]), fds[i] = -1;
        extra_close(x);
        reply(sock, NSBOX_AGENT_FAILED, h->seq, 0, 125, msg);
        return 0;
    }
    strs = spawn_split(h, payload, fds);
    /* never from the run socket's client: take_run sets a run's flags itself */
    bool as_user = (h->flags & NSBOX_AGENT_F_USER) != 0;
    struct nsbox_spawnuser user;
    struct nsbox_err ue;
    if (!strs || (as_user && nsbox_spawnuser_parse(strs[0], &user, &ue) < 0))
        goto bad;
    bool become = nsbox_agent_user_fill(&user, as_user);
    char *cwd = strs[as_user];
    char **argv = strs + as_user + 1;
    char **env = calloc(h->envc + 1, sizeof *env);
    if (!env)
        goto bad;
    memcpy(env, argv + h->argc, h->envc * sizeof *env);
    char *saved = argv[h->argc];
    argv[h->argc] = NULL;

    struct nsbox_agent_exec_child c = {.cwd = cwd,
                                       .argv = argv,
                                       .env = env,
                                       .fds = fds,
                                       .extra = x ? x->fd : NULL,
                                       .n_extra = x ? x->n : 0,
                                       .tty = (h->flags & NSBOX_AGENT_F_TTY) != 0,
                                       .user = become ? &user : NULL,
                                       .status_fd = -1};
    /* nsbox-oci's: forked, with a status pipe and a slot to wait in (spawn_clone) */
    size_t slot = 0;
    int status[2] = {-1, -1};
    while (container_pid && slot < MAX_PENDING && pending[slot].pid)
        slot++;
    pid_t pid = -1;
    errno = EBUSY;
    if (!container_pid || (slot < MAX_PENDING && pipe2(status, O_CLOEXEC) == 0)) {
        c.status_fd = status[1];
        pid = spawn_clone(&c);
    }
    int clone_errno = errno;
    argv[h->argc] = saved;
    free(env);
    for (int i = 0; i < 3; i++)
        close(fds[i]);
    extra_close(x);
    if (status[1] >= 0)
        close(status[1]);
    if (pid < 0) {
        if (status[0] >= 0)
            close(status[0]);
        spawn_clone_msg(clone_errno, msg, sizeof msg);
        return spawn_failed(sock, h, 0, 125, msg, master, strs);
    }
    if (c.fail_kind) {
        /* It failed before exec and has exited; the reaper collects it unreported. The
         * message names argv[0], which lives in strs: freed only once it is worded. */
        nsbox_agent_exec_fail_msg(&c, msg, sizeof msg);
        return spawn_failed(sock, h, pid, nsbox_agent_exec_fail_status(c.fail_kind, c.fail_errno),
                            msg, master, strs);
    }
    free(strs);
    if (status[0] >= 0) { /* its word comes on status[0] (pending_done) */
        pending[slot].pid = pid;
        pending[slot].seq = h->seq;
        pending[slot].status_fd = status[0];
        pending[slot].master = master;
        return pid;
    }
    spawn_started(sock, h->seq, pid, h->flags, is_run, master);
    return pid;
bad:
    if (master >= 0)
        close(master);
    free(strs);
    for (int i = 0; i < 3; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    extra_close(x);
    reply(sock, NSBOX_AGENT_FAILED, h->seq, 0, is_run ? 0 : 125,
          is_run ? "refused: malformed run request" : "malformed spawn request");
    return -1;
}

static int ppid_of(int pid)
{
    int ppid;
    return nsbox_proc_stat(pid, NULL, &ppid) == 0 ? ppid : -1;
}

/* Signal a command and everything it started: its process group, and every descendant that
 * left the group (setsid, setpgid) but is still below it. The sandbox has its own pid namespace,
 * so the scan of /proc is small. Orphans re-parented to init are out of reach: they belong to
 * the sandbox, which kills them when it ends. */
static void kill_tree(int root, int sig)
{
    int pids[4096], parents[4096];
    size_t n = 0;
    DIR *d = opendir("/proc");
    struct dirent *de;
    while (d && (de = readdir(d)) && n < 4096) {
        int pid = atoi(de->d_name);
        if (pid > 1) {
            pids[n] = pid;
            parents[n] = ppid_of(pid);
            n++;
        }
    }
    if (d)
        closedir(d);
    if (kill(-root, sig) < 0)
        kill(root, sig);
    /* mark descendants: repeat until no change (depth is small) */
    bool in[4096] = {false};
    for (bool changed = true; changed;) {
        changed = false;
        for (size_t i = 0; i < n; i++) {
            if (in[i])
                continue;
            bool below = parents[i] == root;
            for (size_t j = 0; !below && j < n; j++)
                below = in[j] && parents[i] == pids[j];
            if (below) {
                in[i] = true;
                changed = true;
            }
        }
    }
    for (size_t i = 0; i < n; i++)
        if (in[i])
            kill(pids[i], sig);
}

/* The OOM kills of the sandbox's memory cgroup, from the file the supervisor opened for us
 * (v1 memory.oom_control, v2 memory.events: an "oom_kill N" line in both). */
static unsigned oom_count(void)
{
    char buf[1024];
    ssize_t n = run.oom_fd >= 0 ? pread(run.oom_fd, buf, sizeof buf - 1, 0) : -1;
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    uint64_t v = 0;
    return nsbox_cg_parse_keyed(buf, "oom_kill", &v) == 0 && v < UINT32_MAX ? (unsigned)v : 0;
}

/* Close the run's connection. What the client sent and init did not read (a signal that came
 * as the command ended) is read first: a unix socket closed with unread data resets the
 * peer, whose next receive would fail instead of giving it our last message. */
static void close_run_conn(void)
{
    struct nsbox_agent_hdr h;
    char buf[64]; /* a longer message is cut (EBADMSG), and gone all the same */
    int fds[3];
    struct pollfd pf = {run.conn, POLLIN, 0};
    while (poll(&pf, 1, 0) == 1) {
        ssize_t n = nsbox_agent_recv_msg(run.conn, &h, buf, sizeof buf, fds, NULL);
        if (n == 0 || (n < 0 && errno != EBADMSG && errno != EMFILE))
            break;
        for (int i = 0; n > 0 && i < 3; i++)
            if (fds[i] >= 0)
                close(fds[i]);
    }
    close(run.conn);
    run.conn = -1;
}

/* The run's status: to its client, then (the sandbox is done) to the supervisor. */
static void end_run(int sock, uint32_t type, int pid, int code, const char *msg)
{
    if (run.conn >= 0) {
        /* the names asked of the stub: the run's, as its command was the sandbox's only one */
        char names[NSBOX_DNSQUERY_NAMES][NSBOX_DNSQUERY_NAME_MAX + 1];
        char lines[NSBOX_DNSQUERY_NAMES * (NSBOX_DNSQUERY_NAME_MAX + 1)] = "";
        size_t k = type == NSBOX_AGENT_EXITED && dns_table && !msg
                       ? nsbox_dnsquery_table_take(dns_table, names)
                       : 0;
        for (size_t i = 0, at = 0; i < k; i++)
            at += (size_t)snprintf(lines + at, sizeof lines - at, "%s%s", i ? "\n" : "",
                                   names[i]);
        if (k)
            msg = lines;
        struct nsbox_agent_hdr h = {.type = type,
                                    .seq = run.seq,
                                    .pid = pid,
                                    .status = code,
                                    .argc = type == NSBOX_AGENT_EXITED ? oom_count() : 0,
                                    .len = msg ? (uint32_t)strlen(msg) : 0};
        nsbox_agent_send_msg(run.conn, &h, msg, NULL, 0);
        close_run_conn();
        if (k)
            msg = NULL;
    }
    reply(sock, type, NSBOX_AGENT_SEQ_RUN, pid, code, msg);
}

/* Notes p's end: a pending process's is dealt with at once, a command's is reported by
 * report_ended, after the drain that reads the queries it sent before it ended. */
static void reaped(int sock, pid_t p, int status)
{
    for (size_t i = 0; i < MAX_PENDING; i++)
        if (pending[i].pid == p)
            pending_done(sock, i); /* it has ended: its pipe is closed */
    for (size_t i = 0; i < MAX_CHILDREN; i++)
        if (children[i].pid == p) {
            children[i].ended = true;
            children[i].status = status;
            break;
        }
}

/* Reports the commands reaped since the last report. One drain serves them all: each ended
 * before waitpid returned it, so the queries it sent are on the socket by then, and commands
 * ending together under a flood cost one drain, not one each. */
static void report_ended(int sock)
{
    bool any = false;
    for (size_t i = 0; i < MAX_CHILDREN && !any; i++)
        any = children[i].pid && children[i].ended;
    if (!any)
        return;
    /* the queries they sent before they ended: their own names, said with their status */
    nsbox_dnsstub_drain(dns_fd, dns_table);
    for (size_t i = 0; i < MAX_CHILDREN; i++) {
        if (!children[i].pid || !children[i].ended)
            continue;
        pid_t p = children[i].pid;
        int code = nsbox_exit_code(children[i].status);
        if (children[i].last)
            kill_all_others();
        if (children[i].run)
            end_run(sock, NSBOX_AGENT_EXITED, p, code, NULL);
        else
            reply(sock, NSBOX_AGENT_EXITED, children[i].seq, p, code, NULL);
        children[i].pid = 0;
        children[i].ended = false;
    }
}

/* The container's process ended: so does everything else in it, as in runc. Each exec'd
 * process's status is still reported, as it died (of a signal sent to it before, or of this
 * SIGKILL), before init ends with the container's status. */
__attribute__((noreturn)) static void container_end(int sock, int status)
{
    kill_all_others();
    for (;;) {
        int st;
        pid_t p = waitpid(-1, &st, 0);
        if (p < 0 && errno == EINTR)
            continue;
        if (p < 0)
            break;
        /* with those that ended alongside it: one report, one drain */
        do
            reaped(sock, p, st);
        while ((p = waitpid(-1, &st, WNOHANG)) > 0);
        report_ended(sock);
    }
    report_ended(sock);
    _exit(nsbox_exit_code(status));
}

/* Reaps at most this many between two reports: a sandbox that keeps making orphans for init to
 * reap would otherwise hold back every command's report until it paused. */
#define REAPS_PER_REPORT 64
/* Reaps at most this many in one turn of the event loop: a steady stream of orphans would
 * otherwise keep init from agent requests and the DNS stub for as long as it lasts. */
#define REAPS_PER_TURN 256

/* Whether it stopped at REAPS_PER_TURN: more may be waiting, and SIGCHLD, already read, will
 * not say so again. */
static bool reap(int sock)
{
    int status;
    pid_t p;
    unsigned n = 0;
    while (n < REAPS_PER_TURN && (p = waitpid(-1, &status, WNOHANG)) > 0) {
        if (container_pid && p == container_pid) {
            report_ended(sock);
            container_end(sock, status);
        }
        reaped(sock, p, status);
        if (++n % REAPS_PER_REPORT == 0)
            report_ended(sock); /* those reaped so far have ended: their drain may run */
    }
    report_ended(sock);
    return n == REAPS_PER_TURN;
}

/* A connection on the run socket: its one SPAWN either takes the sandbox or is refused. The
 * client sends it right after connecting; one that sends nothing within 200 ms is dropped (the
 * socket is the user's own: only a misbehaving or stopped program of theirs would), so that a
 * queue of silent connections cannot keep init from answering RETIRE. */
static void take_run(int sock, char *payload)
{
    int c = accept4(run.listen_fd, NULL, NULL, SOCK_CLOEXEC);
    if (c < 0)
        return;
    struct nsbox_agent_hdr h = {0};
    int fds[3] = {-1, -1, -1};
    struct pollfd pf = {c, POLLIN, 0};
    ssize_t n = poll(&pf, 1, 200) == 1
                    ? nsbox_agent_recv_msg(c, &h, payload, NSBOX_AGENT_PAYLOAD_MAX, fds, NULL)
                    : -1;
    /* the descriptors as the exec path checks them; missing ones are do_spawn's to refuse */
    struct nsbox_err se = {0};
    const char *why = n <= 0                        ? NULL
                      : h.type != NSBOX_AGENT_SPAWN ? "not a run request"
                      /* its client is gone already: nobody would get the status */
                      : (pf.revents & POLLHUP)          ? "the client went away"
                      : nsbox_check_stdio(fds, &se) < 0 ? se.msg
                                                        : NULL;
    if (n <= 0 || why) {
        for (int i = 0; i < 3; i++)
            if (fds[i] >= 0)
                close(fds[i]);
        char msg[NSBOX_ERR_MSG_MAX + 16];
        snprintf(msg, sizeof msg, "refused: %s", why ? why : "");
        if (why)
            reply(c, NSBOX_AGENT_FAILED, h.seq, 0, 0, msg);
        close(c);
        return;
    }
    h.flags = NSBOX_AGENT_F_LAST; /* no terminal of init's making; the sandbox ends with it */
    run.conn = c;
    run.seq = h.seq;
    int pid = do_spawn(c, &h, payload, fds, NULL, true);
    if (pid < 0) { /* refused: the next connection may still take the sandbox */
        close(c);
        run.conn = -1;
        return;
    }
    close(run.listen_fd);
    run.listen_fd = -1;
    run.claimed = true;
    run.pid = pid;
    reply(sock, NSBOX_AGENT_CLAIMED, NSBOX_AGENT_SEQ_RUN, pid, 0, NULL);
    if (pid == 0) { /* it could not start; the client has its FAILED */
        close_run_conn();
        reply(sock, NSBOX_AGENT_FAILED, NSBOX_AGENT_SEQ_RUN, 0, 125, NULL);
    }
}

/* The run's client: signals for its command; when it goes away, so does the sandbox. */
static void on_run_conn(char *payload)
{
    struct nsbox_agent_hdr h;
    int fds[3];
    ssize_t n = nsbox_agent_recv_msg(run.conn, &h, payload, NSBOX_AGENT_PAYLOAD_MAX, fds, NULL);
    for (int i = 0; i < 3; i++)
        if (n > 0 && fds[i] >= 0)
            close(fds[i]);
    if (n == 0 || (n < 0 && errno != EBADMSG && errno != EMFILE && errno != EINTR)) {
        kill_all_others(); /* nsbox run was killed: its command goes; reap() reports the end */
        close_run_conn();
        return;
    }
    if (n > 0 && h.type == NSBOX_AGENT_KILL && run.pid > 1 && h.status > 0 && h.status < 65)
        kill_tree(run.pid, h.status);
}

/* The signals init is sent go on to the container's process alone, as runc signals its pid 1:
 * an engine's `kill -s USR1` is meant for the program, not for the children it left in its
 * process group, which the default action would end (`kill --all` reaches those). */
static void relay_signals(int sfd)
{
    struct signalfd_siginfo si;
    while (read(sfd, &si, sizeof si) > 0) {
        int sig = (int)si.ssi_signo;
        if (sig != SIGCHLD && container_pid)
            kill(container_pid, sig);
    }
}

__attribute__((noreturn)) static void serve(int sock);

void nsbox_agent_init_send_workspace(int sock)
{
    int ws = open("/workspace", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    struct nsbox_agent_hdr wh = {.type = NSBOX_AGENT_WORKSPACE};
    if (ws < 0 || nsbox_agent_send_msg(sock, &wh, NULL, &ws, 1) < 0)
        _exit(125);
    close(ws);
}

void nsbox_agent_init_serve(int sock)
{
    serve(sock);
}

void nsbox_agent_init_serve_container(int sock, pid_t workload)
{
    container_pid = workload;
    serve(sock);
}

static void serve(int sock)
{
    /* SIGCHLD (and for a container the relayed signals) are blocked, by the inherited mask:
     * read them from a signalfd. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    for (size_t i = 0; container_pid && i < NSBOX_ARRAY_LEN(nsbox_signals_relayed); i++)
        sigaddset(&set, nsbox_signals_relayed[i]);
    int sfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
    nsbox_agent_exec_find_signals();
    char *payload = malloc(NSBOX_AGENT_PAYLOAD_MAX + 1);
    if (sfd < 0 || !payload)
        _exit(125);
    bool reap_more = false;
    for (;;) {
        /* only the descriptors that are open, and the pending children's pipes: poll fails
         * (EINVAL) for more entries than RLIMIT_NOFILE, which the workload may lower on init
         * (prlimit), and init must still answer that it cannot take a command's descriptors */
        struct pollfd pf[5 + MAX_PENDING] = {{sock, POLLIN, 0}, {sfd, POLLIN, 0}};
        size_t n_pf = 2, at[MAX_PENDING];
        struct pollfd *p_listen = NULL, *p_conn = NULL, *p_dns = NULL;
        if (run.listen_fd >= 0)
            *(p_listen = &pf[n_pf++]) = (struct pollfd){run.listen_fd, POLLIN, 0};
        if (run.conn >= 0)
            *(p_conn = &pf[n_pf++]) = (struct pollfd){run.conn, POLLIN, 0};
        if (dns_fd >= 0)
            *(p_dns = &pf[n_pf++]) = (struct pollfd){dns_fd, POLLIN, 0};
        size_t first_pending = n_pf;
        for (size_t i = 0; i < MAX_PENDING; i++)
            if (pending[i].pid) {
                at[n_pf - first_pending] = i;
                pf[n_pf++] = (struct pollfd){pending[i].status_fd, POLLIN, 0};
            }
        /* children left to reap from the last turn: look at the rest, without waiting */
        if (poll(pf, n_pf, reap_more ? 0 : -1) < 0 && errno != EINTR)
            _exit(125);
        /* the run's client first: a signal it sent is delivered before reap() reports */
        if (p_conn && run.conn >= 0 && (p_conn->revents & (POLLIN | POLLHUP | POLLERR)))
            on_run_conn(payload);
        if (pf[1].revents & POLLIN)
            relay_signals(sfd);
        if ((pf[1].revents & POLLIN) || reap_more)
            reap_more = reap(sock);
        for (size_t k = first_pending; k < n_pf; k++) { /* reap() may have done one already */
            size_t i = at[k - first_pending];
            if (pending[i].pid && pending[i].status_fd == pf[k].fd &&
                (pf[k].revents & (POLLIN | POLLHUP | POLLERR)))
                pending_done(sock, i);
        }
        if (p_listen && run.listen_fd >= 0 && (p_listen->revents & POLLIN))
            take_run(sock, payload);
        if (p_dns && (p_dns->revents & POLLIN))
            nsbox_dnsstub_serve(dns_fd, dns_table);
        if (pf[0].revents & (POLLIN | POLLHUP | POLLERR)) {
            struct nsbox_agent_hdr h;
            int fds[3];
            struct nsbox_agent_extra x;
            ssize_t n = nsbox_agent_recv_msg(sock, &h, payload, NSBOX_AGENT_PAYLOAD_MAX, fds, &x);
            if (n == 0 || (n < 0 && errno != EBADMSG && errno != EMFILE)) {
                /* the supervisor is gone: so is the sandbox. nsbox-oci's container ends as
                 * killed: its caller waits for init, and must not read a success */
                if (container_pid) {
                    kill(-container_pid, SIGKILL);
                    kill(container_pid, SIGKILL);
                    container_end(-1, SIGKILL);
                }
                _exit(0);
            }
            if (n < 0 && errno == EMFILE && h.type == NSBOX_AGENT_SPAWN)
                /* unanswered, the exec waiting for it would hang until the sandbox ends */
                reply(sock, NSBOX_AGENT_FAILED, h.seq, 0, 125,
                      "the sandbox's init could not take the command's descriptors: its "
                      "open-files limit is full (lowered from inside the sandbox, with prlimit "
                      "on pid 1?)");
            if (n < 0)
                continue;
            if (h.type == NSBOX_AGENT_SPAWN) {
                do_spawn(sock, &h, payload, fds, &x, false);
            } else if (h.type == NSBOX_AGENT_LISTEN && !run.claimed && run.listen_fd < 0 &&
                       fds[0] >= 0) {
                run.listen_fd = fds[0];
                run.oom_fd = fds[1];
                if (fds[2] >= 0)
                    close(fds[2]);
            } else {
                for (int i = 0; i < 3; i++)
                    if (fds[i] >= 0)
                        close(fds[i]);
                if (h.type == NSBOX_AGENT_KILL && h.pid > 1 && h.status > 0 && h.status < 65)
                    kill_tree(h.pid, h.status);
                if (h.type == NSBOX_AGENT_RETIRE) {
                    if (run.listen_fd >= 0)
                        close(run.listen_fd);
                    run.listen_fd = -1;
                    reply(sock, NSBOX_AGENT_RETIRED, h.seq, 0, run.claimed, NULL);
                }
            }
        }
    }
}
