/* The child side of a launch: the containment sequence, in the order it must happen.
 *
 * Runs as pid 1 of the new pid namespace, inside new user, mount, uts, ipc, net (and cgroup)
 * namespaces. The parent has prepared everything that could be computed once (mount plan,
 * seccomp program, environment, rlimits); this side only performs the steps. */
#define _GNU_SOURCE
#include "cleanup.h"
#include "agent.h"
#include "agent_init.h"
#include "dnsstub.h"
#include "agent_user.h"
#include "caps.h"
#include "idmap.h"
#include "cmdline.h"
#include "launch.h"
#include "pathsearch.h"
#include "safepath.h"
#include "util.h"
#include "seccomp_prog.h"
#include "signals.h"
#include "sys.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/securebits.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

__attribute__((noreturn)) static void report_and_exit(struct nsbox_launch *L, int code, const struct nsbox_err *e)
{
    struct nsbox_child_report r = {.exit_code = code};
    r.err = *e;
    ssize_t w = write(L->report_wr, &r, sizeof r);
    (void)w;
    _exit(code);
}

/* ---- steps run by pid 1 before the workload exists ---------------------------------------- */

static int read_sync_byte(struct nsbox_launch *L, char want, struct nsbox_err *e)
{
    char c = 0;
    ssize_t n;
    do
        n = read(L->sync_rd, &c, 1);
    while (n < 0 && errno == EINTR);
    if (n != 1 || c != want)
        return nsbox_err_set(e, NSBOX_E_SYS, EPIPE, "parent went away during set-up");
    return 0;
}

static int child_wait_for_parent(struct nsbox_launch *L, struct nsbox_err *e)
{
    /* If the parent dies between clone and here, the death signal below may have been armed
     * too late; EOF on the sync pipe tells us the same thing. */
    if (!L->sibling && prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
        return nsbox_err_sys(e, "prctl(PR_SET_PDEATHSIG)");
    close(L->sync_wr);
    close(L->report_rd);
    return read_sync_byte(L, 'g', e);
}

/* cgroup v1: the child moves itself. Writing "0" (the caller) to a hierarchy's "tasks" file
 * migrates one thread without taking the global threadgroup lock for writing, which for a
 * move by pid (cgroup.procs) waits for an RCU grace period: milliseconds per sandbox. This
 * process is single-threaded, so the whole of it moves. Done before anything else: as the
 * caller's host uid (the owner of the cgroup files) and before any untrusted code exists. With
 * v2 the clone itself placed us (CLONE_INTO_CGROUP). */
static int child_join_cgroup(struct nsbox_launch *L, struct nsbox_err *e)
{
    if (!L->cg || L->cg->version != 1)
        return 0;
    for (size_t i = 0; i < L->cg->n_v1; i++) {
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%s/tasks", L->cg->v1[i].path);
        int fd = open(path, O_WRONLY | O_CLOEXEC);
        if (fd < 0)
            return nsbox_err_sys(e, "cgroup: open %s", path);
        ssize_t w = write(fd, "0", 1);
        int err = errno;
        close(fd);
        if (w != 1) {
            errno = err;
            return nsbox_err_sys(e, "cgroup: join %s", L->cg->v1[i].path);
        }
    }
    return 0;
}

/* An unprivileged caller's sandbox: its user namespace's own inotify limits, a share of the
 * caller's user's (sandbox.c), which the kernel checks besides the user's own, so that one
 * sandbox cannot take all the user's other processes have. Written while the host's /proc is
 * still reachable and the clone holds every capability in its namespace (CAP_SYS_RESOURCE:
 * /proc/sys/user shows the opener's namespace's values). Left as they were where they cannot
 * be written: the sandbox then shares the user's, as the user's own processes do. */
static void child_user_counts(const struct nsbox_launch *L)
{
    static const char *const files[] = {"/proc/sys/user/max_inotify_instances",
                                        "/proc/sys/user/max_inotify_watches"};
    const uint64_t values[] = {L->inotify_instances, L->inotify_watches};
    for (size_t i = 0; i < NSBOX_ARRAY_LEN(files); i++) {
        if (!values[i])
            continue;
        char text[32];
        int n = snprintf(text, sizeof text, "%llu\n", (unsigned long long)values[i]);
        int fd = open(files[i], O_WRONLY | O_CLOEXEC);
        if (fd >= 0) {
            ssize_t w = write(fd, text, (size_t)n); /* short or failed: the user's limit holds */
            (void)w;
            close(fd);
        }
    }
}

static int child_become_appuser(struct nsbox_launch *L, struct nsbox_err *e)
{
    /* Files the set-up creates must belong to a mapped id: appuser's. The capabilities the
     * clone granted in the new user namespace survive this change because none of our ids is
     * the namespace's root uid (host root is not mapped, an unprivileged caller is appuser),
     * so the kernel's setuid fix-up does not apply. */
    /* A persistent sandbox's init writes its own oom_score_adj around each command's start
     * (agent_init.c): the file is its owner's to open only until the ids change. */
    if (L->agent_fd >= 0)
        L->oom_fd = open("/proc/self/oom_score_adj", O_RDWR | O_CLOEXEC);
    /* Not glibc's setgroups or setresuid: we are a clone of a process that may have threads
     * (util.h). The groups inherited from the caller are host groups: replaced by the
     * config's (nsbox-oci) where the maps allow it. */
    gid_t groups[NSBOX_ARRAY_LEN(L->groups)];
    for (size_t i = 0; i < L->n_groups && i < NSBOX_ARRAY_LEN(groups); i++)
        groups[i] = (gid_t)L->groups[i];
    if (L->set_groups && syscall(SYS_setgroups, L->n_groups, groups) < 0)
        return nsbox_err_sys(e, "cannot set the supplementary groups");
    if (nsbox_set_ids(L->uid, L->gid) < 0)
        return nsbox_err_sys(e, "cannot become uid %u gid %u", L->uid, L->gid);
    /* A change of credentials clears the parent-death signal: arm it again. The parent keeps
     * its end of the sync pipe open while it lives, so a hang-up here means it died in the
     * window between the two. */
    if (!L->sibling && prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
        return nsbox_err_sys(e, "prctl(PR_SET_PDEATHSIG)");
    struct pollfd pf = {L->sync_rd, POLLIN, 0};
    if (poll(&pf, 1, 0) > 0 && (pf.revents & (POLLHUP | POLLERR)))
        return nsbox_err_set(e, NSBOX_E_SYS, EPIPE, "parent went away during set-up");
    return 0;
}

static int mount_fds[NSBOX_MOUNT_PLAN_OPS];
static int new_rootfd = -1;

static int child_clone_mount_sources(struct nsbox_launch *L, struct nsbox_err *e)
{
    int ws_fd = L->ws_fd, image_fd = L->image_fd;
    L->ws_fd = -1; /* the plan's workspace op owns it now */
    L->image_fd = -1;
    return nsbox_mounts_prepare(&nsbox_sys_real, L->plan, L->st->dir, L->image_root, image_fd,
                                ws_fd, mount_fds, &new_rootfd, e);
}

static int child_mount_root(struct nsbox_launch *L, struct nsbox_err *e)
{
    if (nsbox_mounts_enter(&nsbox_sys_real, L->plan, new_rootfd, mount_fds, e) < 0)
        return -1;
    close(new_rootfd);
    if (nsbox_mounts_propagate(&nsbox_sys_real, "/", &L->root_propagation, true,
                               L->root_propagation.recursive) < 0)
        return nsbox_err_sys(e, "linux.rootfsPropagation %s",
                             nsbox_propagation_name(&L->root_propagation));
    return 0;
}

static int child_set_hostname(struct nsbox_launch *L, struct nsbox_err *e)
{
    if (nsbox_launch_joins(L, CLONE_NEWUTS))
        return 0; /* a pod's: its hostname is the one its owner set */
    if (sethostname(L->hostname, strlen(L->hostname)) < 0)
        return nsbox_err_sys(e, "sethostname");
    return 0;
}

static int child_network(struct nsbox_launch *L, struct nsbox_err *e)
{
    /* The parent set up the host side of the network while we built the root ('n'). none: the
     * new namespace has only lo, down; all/allow: also the interface the parent moved in (see
     * sandbox/net.h). */
    int r = read_sync_byte(L, 'n', e);
    close(L->sync_rd);
    if (r < 0)
        return -1;
    if (nsbox_launch_joins(L, CLONE_NEWNET))
        return 0; /* set up by whoever made it (another container, a CNI plugin) */
    if (nsbox_net_child_setup(L->net, e) < 0)
        return -1;
    /* nsbox's own sandboxes only (nsbox-oci's have a start barrier): a container's names are
     * its config's business */
    if (L->start_fd < 0)
        L->dns_fd = nsbox_net_dns_open(L->net);
    return 0;
}

static int child_cgroup_namespace(struct nsbox_launch *L, struct nsbox_err *e)
{
    /* With cgroup v1 the parent moved us into our cgroups after the clone, so the cgroup
     * namespace is made now, rooted at them; with v2 the clone itself did it. */
    if (!L->cgroup_ns_in_clone && unshare(CLONE_NEWCGROUP) < 0)
        return nsbox_err_sys(e, "unshare(CLONE_NEWCGROUP)");
    return 0;
}

/* ---- steps shared by init and the workload ------------------------------------------------ */

static int set_rlimits(struct nsbox_launch *L, struct nsbox_err *e)
{
    for (size_t i = 0; i < L->n_rlimits; i++) {
        struct rlimit want = L->rlimits[i].lim, cur;
        /* An unprivileged caller cannot raise a hard limit; never ask for more than it has. */
        if (getrlimit(L->rlimits[i].resource, &cur) == 0) {
            if (want.rlim_max > cur.rlim_max)
                want.rlim_max = cur.rlim_max;
            if (want.rlim_cur > want.rlim_max)
                want.rlim_cur = want.rlim_max;
        }
        if (setrlimit(L->rlimits[i].resource, &want) < 0)
            return nsbox_err_sys(e, "setrlimit(%d)", L->rlimits[i].resource);
    }
    return 0;
}


static int new_session(struct nsbox_err *e)
{
    /* No controlling terminal: TIOCSTI into the caller's terminal needs one (and seccomp blocks
     * the ioctl as well). */
    if (setsid() < 0)
        return nsbox_err_sys(e, "setsid");
    return 0;
}

static int drop_capabilities(struct nsbox_err *e)
{
    /* Lock the securebits first (needs CAP_SETPCAP, still held): even if a future change mapped
     * uid 0, exec would grant no capabilities and ambient ones could never be raised. */
    unsigned long bits = SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP_LOCKED |
                         SECBIT_KEEP_CAPS_LOCKED | SECBIT_NO_CAP_AMBIENT_RAISE |
                         SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED;
    if (prctl(PR_SET_SECUREBITS, bits) < 0)
        return nsbox_err_sys(e, "prctl(PR_SET_SECUREBITS)");
    for (int cap = 0; prctl(PR_CAPBSET_READ, cap) >= 0; cap++)
        if (prctl(PR_CAPBSET_DROP, cap) < 0)
            return nsbox_err_sys(e, "prctl(PR_CAPBSET_DROP, %d)", cap);
    if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
        return nsbox_err_sys(e, "prctl(PR_CAP_AMBIENT_CLEAR_ALL)");
    if (nsbox_caps_set(0, 0, 0) < 0)
        return nsbox_err_sys(e, "capset");
    return 0;
}

/* The capability sets a config names (nsbox-oci), within the user namespace: the bounding set
 * cut to its own, the three sets, then the ambient ones. The kernel's own capabilities beyond
 * what it knows are left out of every mask. extra stays in the permitted and effective sets
 * until the caller drops it with a second call (extra 0); keep stays in the bounding and
 * permitted sets (launch.h, cap_keep). */
static int set_config_caps(const struct nsbox_launch *L, uint64_t extra, uint64_t keep,
                           struct nsbox_err *e)
{
    int last = nsbox_caps_last();
    uint64_t known = nsbox_caps_known(last);
    for (int cap = 0; cap <= last; cap++)
        if (!((L->cap_bounding | extra | keep) & (UINT64_C(1) << cap)) &&
            prctl(PR_CAPBSET_DROP, cap) < 0)
            return nsbox_err_sys(e, "prctl(PR_CAPBSET_DROP, %d)", cap);
    uint64_t eff = (L->cap_effective | extra) & known;
    uint64_t prm = (L->cap_permitted | extra | keep) & known;
    uint64_t inh = L->cap_inheritable & known;
    if (nsbox_caps_set(eff, prm, inh) < 0)
        return nsbox_err_sys(e, "capset (process.capabilities)");
    if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
        return nsbox_err_sys(e, "prctl(PR_CAP_AMBIENT_CLEAR_ALL)");
    /* The kernel raises only what is permitted and inheritable; the rest of the ambient set is
     * left out, as runc and crun leave it (configs such as `runc spec`'s name ambient
     * capabilities without inheritable ones). */
    uint64_t amb = L->cap_ambient & L->cap_permitted & inh;
    for (int cap = 0; cap <= last; cap++)
        if ((amb & (UINT64_C(1) << cap)) &&
            prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, cap, 0, 0) < 0)
            return nsbox_err_sys(e, "prctl(PR_CAP_AMBIENT_RAISE, %d)", cap);
    return 0;
}

static int no_new_privs(struct nsbox_err *e)
{
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
        return nsbox_err_sys(e, "prctl(PR_SET_NO_NEW_PRIVS)");
    return 0;
}

/* Whether path names nothing at all (ENOENT, ENOTDIR): what cannot be decided here (a
 * directory this user may not search) is left to the exec to report. */
static bool path_missing(const char *path)
{
    struct stat st;
    return stat(path, &st) < 0 && (errno == ENOENT || errno == ENOTDIR);
}

/* nsbox-oci, before the start barrier: a program that is nowhere fails the create, as runc's
 * does ("executable file not found in $PATH", which engines turn into exit code 127 and show),
 * instead of a start that succeeds and a container that ends at once with 127 and no word:
 * after the start, the workload's report has no reader and its stderr may be no one's. */
static int program_check(const struct nsbox_launch *L, struct nsbox_err *e)
{
    const char *name = L->argv[0], *path = nsbox_pathsearch_env(L->envp), *cand;
    char buf[PATH_MAX];
    struct nsbox_pathsearch s;
    int r;
    /* the places the workload's execvp will try, in the directory it will run in */
    nsbox_pathsearch_init(&s, name, path, L->cwd);
    while ((r = nsbox_pathsearch_next(&s, buf, sizeof buf, &cand)) != 0)
        if (r < 0 || !path_missing(cand)) /* too long to tell here: the exec will say */
            return 0;
    if (strchr(name, '/'))
        return nsbox_err_set(e, NSBOX_E_EXEC, ENOENT,
                             "process.args[0] %s: no such file or directory in the container",
                             name);
    return nsbox_err_set(e, NSBOX_E_EXEC, ENOENT,
                         "process.args[0] %s: executable file not found in $PATH (PATH=%.512s)",
                         name, path ? path : NSBOX_PATHSEARCH_DEFAULT);
}

/* nsbox-oci's start barrier (docs/oci.md): the sandbox is whole, hardened, and waits for
 * `nsbox-oci start` before the workload exists. Anything but 's' (the runtime went away, the
 * container was deleted before its start) ends init without running it. */
static int start_barrier(struct nsbox_launch *L, struct nsbox_err *e)
{
    char c = 'r';
    ssize_t n;
    int master = -1, slave[3] = {-1, -1, -1};
    if (L->console && nsbox_agent_init_open_pty(0, slave, &master) < 0)
        return nsbox_err_sys(e, "console: cannot make a pseudo-terminal in the container");
    struct iovec iov = {&c, 1};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } u;
    if (master >= 0) { /* the console's master goes with 'r' */
        nsbox_cmsg_put_fds(&msg, u.buf, &master, 1);
        L->console_fd = slave[0];
        /* and init lets go of the caller's streams, which are not the container's: a caller
         * waits for their end */
        for (int fd = 0; fd < 3; fd++)
            dup2(slave[1], fd);
        close(slave[1]);
        close(slave[2]);
    }
    n = sendmsg(L->start_fd, &msg, MSG_NOSIGNAL);
    if (master >= 0)
        close(master);
    if (n != 1)
        return nsbox_err_sys(e, "start barrier");
    do
        n = read(L->start_fd, &c, 1);
    while (n < 0 && errno == EINTR);
    if (n != 1 || c != 's')
        return nsbox_err_set(e, NSBOX_E_SYS, EPIPE, "deleted before its start");
    return 0; /* start_fd says 'x' once the workload has exec'd */
}

/* ---- the workload -------------------------------------------------------------------------- */

/* launch.h, listen_pid_self: in the forked workload, whose memory is its own. */
static void listen_pid_self(char **envp)
{
    static char own[32];
    for (size_t i = 0; envp && envp[i]; i++)
        if (!strcmp(envp[i], "LISTEN_PID=1")) {
            snprintf(own, sizeof own, "LISTEN_PID=%d", (int)getpid());
            envp[i] = own;
        }
}

/* What init keeps for its children beyond the config's sets (launch.h, cap_keep) goes: CAP_SETPCAP
 * into the effective set from the permitted one, to cut the bounding set, then the config's
 * sets alone. */
static int give_up_kept(const struct nsbox_launch *L, struct nsbox_err *e)
{
    int last = nsbox_caps_last();
    uint64_t known = nsbox_caps_known(last);
    uint64_t eff = (L->cap_effective | (UINT64_C(1) << CAP_SETPCAP)) & known;
    uint64_t prm = (L->cap_permitted | L->cap_keep) & known, inh = L->cap_inheritable & known;
    if (nsbox_caps_set(eff, prm, inh) < 0)
        return nsbox_err_sys(e, "capset (CAP_SETPCAP to cut the bounding set)");
    return set_config_caps(L, 0, 0, e);
}

/* Forked from an init that is already contained (rlimits, capabilities and no_new_privs as
 * nsbox or the OCI config sets them, seccomp: init_harden), so the workload inherits all of it
 * and loads no filter of its own; what is left is per process: signals, descriptors, session,
 * working directory, and what init keeps for exec's children (cap_keep). */
__attribute__((noreturn)) static void workload_exec(struct nsbox_launch *L, int exec_wr)
{
    struct nsbox_err e = {0};
    nsbox_reset_signals(); /* a caller's ignored SIGPIPE/SIGINT must not reach the command */
    for (int fd = 0; L->console_fd >= 0 && fd < 3; fd++)
        if (dup2(L->console_fd, fd) < 0) {
            nsbox_err_sys(&e, "console");
            report_and_exit(L, 125, &e);
        }
    /* all but the report pipe and exec_wr (close-on-exec), also what nsbox's caller leaked,
     * but for the descriptors it passes on (launch.h) */
    int keep[] = {L->report_wr, exec_wr};
    nsbox_close_fds_keep_from(3 + (int)L->preserve_fds, keep, exec_wr >= 0 ? 2 : 1);
    if (new_session(&e) < 0)
        report_and_exit(L, 125, &e);
    /* the console is the controlling terminal (job control, ^C); TIOCSTI stays denied */
    if (L->console_fd >= 0 && ioctl(0, TIOCSCTTY, 0) < 0) {
        nsbox_err_sys(&e, "console: TIOCSCTTY");
        report_and_exit(L, 125, &e);
    }
    if (nsbox_sp_chdir_in_root(L->cwd, &e) < 0)
        report_and_exit(L, 125, &e);
    if (L->umask >= 0)
        umask((mode_t)L->umask);
    if (L->listen_pid_self)
        listen_pid_self(L->envp);
    if (L->cap_keep && give_up_kept(L, &e) < 0)
        report_and_exit(L, 125, &e);
    extern char **environ;
    environ = L->envp; /* execvp searches the PATH of the sandbox's environment */
    execvp(L->argv[0], L->argv);
    int err = errno;
    nsbox_err_set(&e, NSBOX_E_EXEC, err, "%s: %s", L->argv[0],
                  err == ENOENT ? "command not found" : strerror(err));
    report_and_exit(L, err == ENOENT ? 127 : 126, &e);
}

/* ---- init: pid 1 stays as a minimal reaper and signal relay -------------------------------- */

/* nsbox-oci: the bundle's filter, over nsbox's. Here, in init, and not in the workload just
 * before its exec: without no_new_privs loading a filter needs CAP_SYS_ADMIN, which init holds
 * only until the next step, and the processes `nsbox-oci exec` starts are forked by init too,
 * so they inherit it as the workload does (as runc, which loads it before it drops
 * capabilities). What init calls from here on the front end has checked the profile allows
 * (contain_calls.c). */
static int load_bundle_filter(struct nsbox_launch *L, struct nsbox_err *e)
{
    if (!L->seccomp_bundle.filter)
        return 0;
    if (nsbox_seccomp_prog_load_flags(&L->seccomp_bundle, L->seccomp_bundle_flags, e) < 0)
        return nsbox_err_wrap(e, "linux.seccomp");
    return 0;
}

static int init_harden(struct nsbox_launch *L, struct nsbox_err *e)
{
    /* Not dumpable: the workload cannot open /proc/1/exe (the nsbox binary on the host,
     * CVE-2019-5736), /proc/1/mem or /proc/1/environ, nor ptrace init. */
    if (prctl(PR_SET_DUMPABLE, 0) < 0)
        return nsbox_err_sys(e, "prctl(PR_SET_DUMPABLE)");
    if (L->config_caps) {
        /* Without no_new_privs the filter needs CAP_SYS_ADMIN (of this user namespace) to be
         * loaded, and the second pass CAP_SETPCAP to cut the bounding set: both kept until
         * then, never past it. */
        const uint64_t extra = (UINT64_C(1) << CAP_SYS_ADMIN) | (UINT64_C(1) << CAP_SETPCAP);
        if (set_config_caps(L, extra, L->cap_keep, e) < 0 ||
            (L->no_new_privs && no_new_privs(e) < 0) ||
            nsbox_seccomp_prog_load(&L->seccomp, e) < 0 || load_bundle_filter(L, e) < 0)
            return -1;
        return set_config_caps(L, 0, L->cap_keep, e);
    }
    if (drop_capabilities(e) < 0 || no_new_privs(e) < 0)
        return -1;
    return nsbox_seccomp_prog_load(&L->seccomp, e) < 0 ? -1 : load_bundle_filter(L, e);
}

/* What init waits for: its children's ends, and the signals it passes on to the workload. */
static void init_signals(sigset_t *set)
{
    sigemptyset(set);
    for (size_t i = 0; i < NSBOX_ARRAY_LEN(nsbox_signals_relayed); i++)
        sigaddset(set, nsbox_signals_relayed[i]);
    sigaddset(set, SIGCHLD);
}

/* The children that ended reaped; the workload's end is init's, with its status (when pid 1
 * exits the kernel kills everything left in the namespace). */
static void reap_ended(pid_t workload, int dns_fd, struct nsbox_dnsquery_table *t)
{
    int status;
    pid_t p;
    while ((p = waitpid(-1, &status, WNOHANG)) > 0)
        if (p == workload) {
            /* the queries it sent before it ended: their names are in the launcher's note */
            nsbox_dnsstub_drain(dns_fd, t);
            _exit(nsbox_exit_code(status));
        }
}

/* A signal init received, passed on to the workload's group (SIGCHLD is init's own). */
static void relay_to_workload(pid_t workload, int sig)
{
    if (sig > 0 && sig != SIGCHLD && kill(-workload, sig) < 0)
        kill(workload, sig); /* not yet a group leader: it is still before setsid */
}

__attribute__((noreturn)) static void init_reap(pid_t workload)
{
    /* The parent's signal mask is inherited: SIGCHLD and the relayed signals are blocked, so
     * they queue for sigwaitinfo even though pid 1 has no handlers for them. */
    sigset_t set;
    init_signals(&set);
    for (;;) {
        reap_ended(workload, -1, NULL);
        siginfo_t si;
        relay_to_workload(workload, sigwaitinfo(&set, &si));
    }
}

/* init_reap with the stub resolver (dnsstub.h) served too: the signals come from a signalfd
 * so that one poll waits for both. Falls back to init_reap when the signalfd cannot be made. */
static void init_reap_answering(pid_t workload, int dns_fd, struct nsbox_dnsquery_table *t)
{
    sigset_t set;
    init_signals(&set);
    int sfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
    if (sfd < 0) {
        close(dns_fd);
        return;
    }
    for (;;) {
        reap_ended(workload, dns_fd, t);
        struct pollfd pf[2] = {{sfd, POLLIN, 0}, {dns_fd, POLLIN, 0}};
        if (poll(pf, 2, -1) < 0)
            continue;
        if (pf[1].revents & POLLIN)
            nsbox_dnsstub_serve(dns_fd, t);
        struct signalfd_siginfo si;
        while (read(sfd, &si, sizeof si) == (ssize_t)sizeof si)
            relay_to_workload(workload, (int)si.ssi_signo);
    }
}

/* Init's /proc/1/cmdline is world-readable in the sandbox: replace nsbox's host command line
 * (paths, -e values) with a neutral name. */
static void wipe_cmdline(void)
{
    nsbox_cmdline_set("nsbox-init");
}

/* ---- the sequence --------------------------------------------------------------------------- */

void nsbox_contain_child_main(struct nsbox_launch *L)
{
    struct nsbox_err e = {0};
    if (child_wait_for_parent(L, &e) < 0 || /* user ns: the parent has written the maps */
        child_join_cgroup(L, &e) < 0)       /* cgroup (v1; v2 was joined by the clone) */
        report_and_exit(L, 125, &e);
    child_user_counts(L); /* unprivileged: half the user's counts, while /proc/sys is the host's */
    if (child_clone_mount_sources(L, &e) < 0 || /* mounts, while host paths are reachable */
        child_become_appuser(L, &e) < 0 ||         /* the set-up's files are appuser's */
        child_mount_root(L, &e) < 0 ||          /* mounts + pivot_root */
        child_set_hostname(L, &e) < 0 ||        /* hostname */
        child_network(L, &e) < 0 ||             /* network: lo up (+ eth0 for all/allow) */
        child_cgroup_namespace(L, &e) < 0)      /* rooted at our own cgroup */
        report_and_exit(L, 125, &e);

    if (L->agent_fd >= 0 && L->start_fd < 0) {
        /* A persistent sandbox: init serves the supervisor's requests (agent.h). Closing the
         * report pipe tells the supervisor that the sandbox is ready. */
        if (set_rlimits(L, &e) < 0 || init_harden(L, &e) < 0)
            report_and_exit(L, 125, &e);
        prctl(PR_SET_NAME, "nsbox-init");
        wipe_cmdline();
        /* The mount plan and environment were for set-up; an idle sandbox should cost little. */
        munmap((void *)L->plan, sizeof *L->plan); /* mapped by the launcher (sandbox.c) */
        L->plan = NULL;
        nsbox_agent_init_send_workspace(L->agent_fd); /* before the report pipe's end (agent.h) */
        int keep[] = {L->agent_fd, L->oom_fd, L->dns_fd};
        nsbox_close_fds_keep(keep, 3);
        nsbox_agent_init_set_oom_fd(L->oom_fd);
        nsbox_agent_init_set_dns(L->dns_fd, nsbox_net_dns_table(L->net));
        nsbox_agent_init_serve(L->agent_fd);
    }

    /* rlimits -> drop caps -> no_new_privs -> seccomp, once, in init: the workload forked next
     * inherits them, so the filter is loaded (and JIT-compiled) once per sandbox, not twice. */
    if (set_rlimits(L, &e) < 0 || init_harden(L, &e) < 0)
        report_and_exit(L, 125, &e);
    if (L->start_fd >= 0) {
        /* A sibling init (launch.h) has no parent-death signal: it learns of the launcher's
         * death by EOF at the barrier, which its own copy of the launcher's end would keep from
         * coming, so nothing of the launcher's is kept but what init uses from here on. An
         * init that is the launcher's child dies with it (child_wait_for_parent), and lets go
         * of the rest after the fork as every init does. */
        if (L->sibling) {
            int keep[] = {L->start_fd, L->report_wr, L->agent_fd, L->oom_fd};
            nsbox_close_fds_keep_from(3 + (int)L->preserve_fds, keep, NSBOX_ARRAY_LEN(keep));
        }
        if (program_check(L, &e) < 0)
            report_and_exit(L, 127, &e);
        if (start_barrier(L, &e) < 0)
            report_and_exit(L, 125, &e);
    }
    /* nsbox-oci: init relays the signals `kill` sends it, and lets `start` return, only once
     * the workload has exec'd (the pipe's end of file): relayed earlier, a signal would end the
     * forked child before it runs the program, whose handlers it was meant for. */
    int exec_pipe[2] = {-1, -1};
    if (L->sibling && pipe2(exec_pipe, O_CLOEXEC) < 0) {
        nsbox_err_sys(&e, "pipe");
        report_and_exit(L, 125, &e);
    }
    pid_t workload = fork();
    if (workload < 0) {
        nsbox_err_sys(&e, "fork");
        report_and_exit(L, 125, &e);
    }
    if (workload == 0)
        workload_exec(L, exec_pipe[1]); /* close fds, setsid, cwd, exec */
    if (exec_pipe[0] >= 0) {
        close(exec_pipe[1]);
        char c;
        while (read(exec_pipe[0], &c, 1) < 0 && errno == EINTR) {
        }
        close(exec_pipe[0]);
    }
    if (L->start_fd >= 0) {
        ssize_t w = write(L->start_fd, "x", 1); /* the launcher tells `start` (docs/oci.md) */
        (void)w;
        close(L->start_fd);
        L->start_fd = -1;
    }

    /* The workload has its own copy of the command line now (it was forked); init's may go. */
    wipe_cmdline();
    if (L->agent_fd >= 0) {
        /* nsbox-oci: the container's further processes (exec) are init's children too */
        int keep[] = {L->agent_fd, L->oom_fd};
        nsbox_close_fds_keep(keep, 2);
        nsbox_agent_init_set_oom_fd(L->oom_fd);
        if (L->cap_keep)
            nsbox_agent_user_set_caps(
                L->cap_bounding, L->cap_effective, L->cap_permitted, L->cap_inheritable,
                L->cap_ambient & L->cap_permitted & L->cap_inheritable, L->cap_keep);
        nsbox_agent_init_serve_container(L->agent_fd, workload);
    }
    nsbox_close_fds_except(L->dns_fd);
    if (L->dns_fd >= 0)
        init_reap_answering(workload, L->dns_fd, nsbox_net_dns_table(L->net));
    init_reap(workload);
}
