/* nsbox-oci create: a sandbox from an OCI bundle, its workload held at a start barrier.
 *
 * The lifecycle (docs/oci.md): create forks the monitor and waits until the sandbox is set up.
 * The monitor makes the sandbox, but clones its init as its own sibling (CLONE_PARENT): init is
 * create's child, the pid-file process, and once create has exited the caller's (a subreaper:
 * containerd's shim, conmon), which waits for it as for runc's init and reads its status, the
 * container's. The monitor holds the sandbox's cgroup and state, watches init through its
 * pidfd and removes the sandbox once it has ended. Init waits, whole and hardened, on a
 * socket; `nsbox-oci start` writes to exec.fifo in the state directory, which the monitor
 * turns into the byte that lets init fork the workload. */
#include "ocirt.h"
#include "filemax.h"
#include "cleanup.h"
#include "ociproc.h"
#include "rlimits.h"
#include "ocispec.h"
#include "safepath.h"
#include "sandbox.h"
#include "seccomp_prog.h"
#include "signals.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <linux/capability.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/socket.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* What the monitor tells create once the sandbox is set up, or why it is not. */
struct ready_msg {
    int ok;
    pid_t init_pid;
    pid_t helper; /* what entered the joined namespaces (launch.h): create reaps it */
    bool root_read_only; /* root.readonly false, but the kernel refused the writable root */
    struct nsbox_err volumes_why; /* an engine's volume left a plain bind: why (code 0: none) */
    char sandbox[64];
    struct nsbox_err err;
};

int nsbox_ocicreate_parse(int argc, char **argv, struct nsbox_ocicreate_args *a,
                          struct nsbox_err *e)
{
    static const struct option opts[] = {
        {"bundle", required_argument, NULL, 'b'},
        {"pid-file", required_argument, NULL, 'p'},
        {"console-socket", required_argument, NULL, 'c'},
        {"no-pivot", no_argument, NULL, 'n'},
        {"no-new-keyring", no_argument, NULL, 'k'},
        {"preserve-fds", required_argument, NULL, 'f'},
        {"detach", no_argument, NULL, 'd'}, /* run's */
        {"keep", no_argument, NULL, 'K'},   /* run's */
        {NULL, 0, NULL, 0},
    };
    const char *bundle = ".", *cmd = a->run ? "run" : "create";
    int o;
    optind = 1;
    while ((o = getopt_long(argc, argv, a->run ? "+b:d" : "+b:", opts, NULL)) != -1) {
        if (o == 'b')
            bundle = optarg;
        else if (o == 'p')
            a->pid_file = optarg;
        else if (o == 'c')
            a->console_socket = optarg;
        else if (o == 'f' && nsbox_ocifds_parse(cmd, optarg, &a->preserve_fds, e) < 0)
            return -1;
        else if ((o == 'd' || o == 'K') && a->run)
            *(o == 'd' ? &a->detach : &a->keep) = true;
        else if (o == '?' || o == 'd' || o == 'K')
            return nsbox_err_invalid(e, "%s: unknown option (see nsbox-oci %s --help)", cmd, cmd);
    }
    if (optind != argc - 1)
        return nsbox_err_invalid(e, "%s: give exactly one container id", cmd);
    a->id = argv[optind];
    if (!realpath(bundle, a->bundle))
        return nsbox_err_sys(e, "bundle %s", NSBOX_SHOW(bundle));
    return 0;
}

/* The sandbox spec of a bundle: its root as a directory image, its environment, its limits
 * over those of nsbox's default instance type. */
static int build_spec(const struct nsbox_ocicreate_args *a, const struct nsbox_ocispec *c,
                      struct nsbox_spec *s, struct nsbox_err *e)
{
    char root[2 * PATH_MAX];
    if (c->root_path[0] == '/')
        snprintf(root, sizeof root, "%s", c->root_path);
    else
        snprintf(root, sizeof root, "%s/%s", a->bundle, c->root_path);
    if (!realpath(root, s->image))
        return nsbox_err_sys(e, "root.path %s", NSBOX_SHOW(root));
    for (size_t i = 0; i < c->n_env; i++)
        if (nsbox_spec_set(s, "env", c->env[i], e) < 0)
            return nsbox_err_wrap(e, "config.json: key 'process.env'");
    if (nsbox_spec_validate(s, e) < 0)
        return -1;
    if (c->memory_limit > 0)
        s->limits.memory_bytes = (uint64_t)c->memory_limit;
    /* whole CPUs, rounded up; a quota of more than nsbox's spec allows (1024) is that many,
     * not a count wrapped to 32 bits */
    if (c->cpu_quota > 0 && c->cpu_period > 0) {
        uint64_t cpus =
            ((uint64_t)c->cpu_quota + (uint64_t)c->cpu_period - 1) / (uint64_t)c->cpu_period;
        s->limits.cpus = cpus > 1024 ? 1024 : (uint32_t)cpus;
    }
    if (c->pids_limit > 0)
        s->limits.pids = (uint64_t)c->pids_limit;
    return 0;
}

/* The bundle's linux.seccomp, compiled by create (the monitor it forks has a copy) so that a
 * profile libseccomp refuses fails before anything is made; filter NULL: none. Compiled once
 * per profile text: the disk cache of nsbox's own programs keeps it (an engine gives every
 * container the same default profile). */
static struct sock_fprog bundle_seccomp;

static int compile_seccomp(const struct nsbox_ocispec *c, struct nsbox_err *e)
{
    char cache[PATH_MAX];
    if (!c->has_seccomp)
        return 0;
    struct nsbox_err ignored = {0}; /* without a cache directory, the profile is compiled */
    bool cached = nsbox_seccomp_prog_cache_dir(cache, sizeof cache, &ignored) == 0;
    if (nsbox_contain_calls_check(&c->seccomp, e) < 0 ||
        nsbox_seccomp_prog_bundle(cached ? cache : NULL, c->seccomp_text, strlen(c->seccomp_text),
                                  &c->seccomp, &bundle_seccomp, e) < 0)
        return nsbox_err_wrap(e, "config.json: key 'linux.seccomp'");
    return 0;
}

/* config.json into c, and its text into *text (malloc'd): what create keeps for exec. */
static int load_config(struct nsbox_ocicreate_args *a, struct nsbox_ocispec *c, char **text,
                       struct nsbox_err *e)
{
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/config.json", a->bundle);
    int r = nsbox_read_small(path, text, e);
    if (r < 0)
        return -1;
    if (r == 1)
        return nsbox_err_set(e, NSBOX_E_NOTFOUND, ENOENT,
                             "%s does not exist: the bundle is --bundle DIR, or the current "
                             "directory, and holds config.json and the root",
                             path);
    if (nsbox_ocispec_parse(*text, strlen(*text), c, e) < 0)
        return -1;
    if (nsbox_ocispec_check_floor(c, e) < 0 || nsbox_ocispec_check_namespaces(c, e) < 0 ||
        nsbox_ocispec_check_devices(c, e) < 0 || nsbox_ocispec_check_sysctl(c, e) < 0 ||
        compile_seccomp(c, e) < 0)
        return -1;
    if (c->terminal && !a->console_socket && a->tty_socket) {
        a->console_socket = a->tty_socket;
        a->lent_tty = true;
    }
    if (c->terminal && !a->console_socket && a->run)
        return nsbox_err_invalid(e, "process.terminal is true but run has no terminal to lend "
                                    "the container (its stdin is not one, or --detach): set "
                                    "\"terminal\": false in config.json (the container then "
                                    "has run's stdin, stdout and stderr), or give "
                                    "--console-socket");
    if (c->terminal && !a->console_socket)
        return nsbox_err_invalid(e, "process.terminal is true but no --console-socket was "
                                    "given: the terminal's master has nowhere to go (runc's "
                                    "rule: give the socket, or set terminal to false)");
    return 0;
}

/* ---- the monitor ---------------------------------------------------------------------------- */

struct monitor {
    struct nsbox_sandbox sb;
    int start_sock; /* our end of init's start barrier */
    int fifo;       /* exec.fifo, read end (opened read-write: never EOF, never blocks) */
    int ctl;        /* the control socket (ocictl.c): pause, resume */
    const char *dir; /* the state directory */
    struct nsbox_ocimon mon; /* exec, procs, update (ocimon.c) */
    unsigned preserve_fds;   /* --preserve-fds: init's to hold, not ours (launch.h) */
    bool engine_volumes;     /* --idmap-volumes=engine (ocivolumes.c) */
};

/* One request on the control socket: the operation, done while the caller waits. */
static void monitor_ctl(struct monitor *m)
{
    int fd = accept4(m->ctl, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0)
        return;
    struct timeval tv = {1, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char op[32] = {0};
    struct nsbox_err e = {0};
    ssize_t n = recv(fd, op, sizeof op - 1, MSG_PEEK);
    if (n > 0 && nsbox_ocimon_ctl(&m->mon, fd, op))
        return;
    n = recv(fd, op, sizeof op - 1, 0);
    char paused[PATH_MAX + 16];
    snprintf(paused, sizeof paused, "%s/%s", m->dir, NSBOX_OCI_PAUSED_FILE);
    if (n <= 0) {
        close(fd);
        return;
    }
    if (!strcmp(op, "pause") || !strcmp(op, "resume")) {
        bool freeze = op[0] == 'p';
        if (nsbox_cgroup_freeze(&m->sb.cg, freeze, &e) == 0) {
            if (freeze) {
                int pf = open(paused, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
                if (pf >= 0)
                    close(pf);
            } else
                unlink(paused);
        }
    } else
        nsbox_err_invalid(&e, "unknown request '%s'", NSBOX_SHOW(op));
    ssize_t w = send(fd, &e, sizeof e, MSG_NOSIGNAL);
    (void)w;
    close(fd);
}

/* Until init says 'r' (set up, waiting) or fails: its report, or its death. */
static int wait_ready(struct monitor *m, struct nsbox_err *e)
{
    for (;;) {
        struct pollfd pf[2] = {{m->start_sock, POLLIN, 0}, {m->sb.L.report_rd, POLLIN, 0}};
        if (poll(pf, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            return nsbox_err_sys(e, "poll");
        }
        if ((pf[0].revents & POLLIN) && nsbox_ocimon_ready(&m->mon, m->start_sock) == 'r')
            return 0;
        if (pf[1].revents & (POLLIN | POLLHUP)) {
            struct nsbox_child_report rep;
            if (read(m->sb.L.report_rd, &rep, sizeof rep) == (ssize_t)sizeof rep) {
                *e = rep.err;
                return nsbox_err_wrap(e, "sandbox set-up failed");
            }
            return nsbox_err_set(e, NSBOX_E_SYS, EPIPE, "sandbox set-up failed: init ended");
        }
        if (pf[0].revents & (POLLHUP | POLLERR))
            return nsbox_err_set(e, NSBOX_E_SYS, EPIPE, "sandbox set-up failed: init ended");
    }
}

static void monitor_event(struct monitor *m, bool *done)
{
    /* init is not our child: its pidfd is readable once it has ended */
    struct pollfd pf[3 + NSBOX_OCIMON_FDS] = {
        {m->sb.pidfd, POLLIN, 0}, {m->ctl, POLLIN, 0}, {m->fifo, POLLIN, 0}};
    size_t n = nsbox_ocimon_pollfds(&m->mon, pf + 3);
    int r = poll(pf, 3 + n, -1);
    if (r < 0)
        return;
    nsbox_ocimon_events(&m->mon, pf + 3, n);
    if (pf[1].revents & POLLIN)
        monitor_ctl(m);
    if (m->fifo >= 0 && (pf[2].revents & POLLIN)) {
        char c = 0;
        if (read(m->fifo, &c, 1) == 1 && c == 's') {
            ssize_t w = write(m->start_sock, "s", 1);
            (void)w;
            /* start waits for our end of exec.fifo to close: once init says that the program
             * was exec'd ('x'; its end of file if it ended first), so that a signal sent as
             * soon as start returns finds the program (runtime-tools' killsig) */
            struct pollfd ip = {m->start_sock, POLLIN, 0};
            if (poll(&ip, 1, 10000) > 0 && (ip.revents & POLLIN))
                w = read(m->start_sock, &c, 1);
            nsbox_closep(&m->fifo);
        }
    }
    if (pf[0].revents & (POLLIN | POLLHUP | POLLERR))
        *done = true;
}

/* The process as the config describes it: its ids, groups, umask, exactly its environment,
 * its rlimits over nsbox's (the config's win), its capabilities and no_new_privs. The floor
 * stays: the ids and capabilities are those of the sandbox's user namespace (0-65535 of its
 * own range, never host root; CAP_SYS_ADMIN was refused at create), nsbox's seccomp filter
 * (the bundle's is loaded after it: monitor_launch). */
static void apply_process(struct nsbox_launch *L, const struct nsbox_ocispec *c)
{
    L->uid = c->uid;
    L->gid = c->gid;
    L->set_groups = true;
    L->n_groups =
        c->n_groups < NSBOX_ARRAY_LEN(L->groups) ? c->n_groups : NSBOX_ARRAY_LEN(L->groups);
    memcpy(L->groups, c->groups, L->n_groups * sizeof L->groups[0]);
    L->umask = c->umask;
    L->config_caps = true;
    L->cap_bounding = c->caps[NSBOX_OCI_CAPS_BOUNDING];
    L->cap_effective = c->caps[NSBOX_OCI_CAPS_EFFECTIVE];
    L->cap_permitted = c->caps[NSBOX_OCI_CAPS_PERMITTED];
    L->cap_inheritable = c->caps[NSBOX_OCI_CAPS_INHERITABLE];
    L->cap_ambient = c->caps[NSBOX_OCI_CAPS_AMBIENT];
    /* init forks exec'd processes of any of the container's users with any of its sets */
    L->cap_keep =
        (UINT64_C(1) << CAP_SETUID) | (UINT64_C(1) << CAP_SETGID) | (UINT64_C(1) << CAP_SETPCAP);
    L->no_new_privs = c->no_new_privileges;
    L->envp = (char **)c->env;
    L->listen_pid_self = true; /* Podman's LISTEN_PID=1 is the process's pid under runc */
    for (size_t i = 0; i < c->n_rlimits; i++) {
        size_t k = 0;
        while (k < L->n_rlimits && L->rlimits[k].resource != c->rlimits[i].resource)
            k++;
        if (k == NSBOX_RLIMITS_MAX)
            break;
        if (k == L->n_rlimits)
            L->n_rlimits++;
        L->rlimits[k].resource = c->rlimits[i].resource;
        L->rlimits[k].lim.rlim_cur = (rlim_t)c->rlimits[i].soft;
        L->rlimits[k].lim.rlim_max = (rlim_t)c->rlimits[i].hard;
        nsbox_rlimits_core_floor(&L->rlimits[k]);
    }
}

static int set_oom_score_adj(pid_t pid, int adj, struct nsbox_err *e)
{
    char path[64], text[16];
    snprintf(path, sizeof path, "/proc/%d/oom_score_adj", (int)pid);
    int n = snprintf(text, sizeof text, "%d", adj);
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return nsbox_err_sys(e, "process.oomScoreAdj: open %s", path);
    int r = nsbox_pwrite_all(fd, text, (size_t)n, 0);
    close(fd);
    return r < 0 ? nsbox_err_sys(e, "process.oomScoreAdj: write %s", path) : 0;
}

/* The config's mounts as the mount plan takes them (rootfs/mounts.h): options split into
 * flags and data, whether a bind's source is a file. In a network namespace of the host's user
 * namespace (a CNI plugin's) the kernel lets only that namespace's owner mount sysfs: the
 * host's /sys is bound there instead, with the config's flags (read-only), as runc does
 * (docs/decisions.md). */
static int config_mounts(const struct nsbox_ocispec *c, bool host_net,
                         struct nsbox_rootfs_mount *out, struct nsbox_rootfs_idmap *idmaps,
                         struct nsbox_ocispec_mount_opts *opts, struct nsbox_err *e)
{
    for (size_t i = 0; i < c->n_mounts; i++) {
        const struct nsbox_ocispec_mount *m = &c->mounts[i];
        nsbox_ocispec_mount_opts(m, &opts[i]);
        bool host_sys = host_net && !opts[i].bind && !strcmp(m->type, "sysfs");
        if (host_sys) {
            opts[i].bind = opts[i].recursive = true; /* its submounts are locked to it */
            opts[i].data[0] = '\0';
        }
        struct stat st;
        if (opts[i].bind && stat(host_sys ? "/sys" : m->source, &st) < 0)
            return nsbox_err_sys(e, "mounts: the source of %s, %s", m->destination,
                                 NSBOX_SHOW(m->source));
        out[i] = (struct nsbox_rootfs_mount){
            .destination = m->destination,
            .type = opts[i].bind ? "bind" : m->type,
            .source = host_sys ? "/sys" : m->source,
            .flags = opts[i].flags,
            .recursive = opts[i].recursive,
            .source_is_file = opts[i].bind && !S_ISDIR(st.st_mode),
            .data = opts[i].data,
            .propagation = opts[i].propagation,
        };
        idmaps[i] = (struct nsbox_rootfs_idmap){
            .idmap = m->idmap,
            .recursive = m->idmap_recursive,
            .n_uid = m->n_uid_map,
            .n_gid = m->n_gid_map,
            .uid = m->uid_map,
            .gid = m->gid_map,
        };
        /* the volume's programs are sealed by a walk of its directory (setid.h) */
        if (m->idmap && !S_ISDIR(st.st_mode))
            return nsbox_err_set(e, NSBOX_E_UNSUPPORTED, ENOTDIR,
                                 "mounts: %s asks for an idmapped bind of %s, which is not a "
                                 "directory: nsbox-oci idmaps directories only; bind its "
                                 "directory, or leave idmap out",
                                 m->destination, NSBOX_SHOW(m->source));
        if (m->idmap) /* as the writable root: never a set-id program or device of its own */
            out[i].flags |= MS_NOSUID | MS_NODEV;
    }
    return 0;
}

/* A bind whose destination lies in the image (below one of its top-level directories) is
 * mounted onto that path inside the image, which the sandbox sees read-only: a missing
 * destination (Podman binds /etc/hosts and /etc/hostname, which small images lack) is created
 * here first, in the bundle's root on the host, as runc creates its mount points. The same
 * checks as the sandbox's own (safepath: no symlink, no `..`, inside the root); an empty file
 * or directory is all that is ever added. */
static int bundle_mount_points(const char *root, const struct nsbox_rootfs_mount *mounts,
                               size_t n, struct nsbox_err *e)
{
    int rootfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (rootfd < 0)
        return nsbox_err_sys(e, "root.path %s", NSBOX_SHOW(root));
    int r = 0;
    for (size_t i = 0; i < n && r == 0; i++) {
        const char *rel = mounts[i].destination + strspn(mounts[i].destination, "/");
        char top[NAME_MAX + 1];
        size_t len = strcspn(rel, "/");
        struct stat st;
        if (strcmp(mounts[i].type, "bind") || !rel[len] || len > NAME_MAX)
            continue; /* not a bind, or at the top: on nsbox's own root, not in the image */
        snprintf(top, sizeof top, "%.*s", (int)len, rel);
        if (fstatat(rootfd, top, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(st.st_mode))
            continue;
        int fd = nsbox_sp_mount_target(rootfd, rel, !mounts[i].source_is_file, e);
        if (fd < 0)
            r = nsbox_err_wrap(e, "mounts: the mount point of %s in the bundle's root",
                               mounts[i].destination);
        else
            close(fd);
    }
    close(rootfd);
    return r;
}

/* The sandbox made and started, with the joined namespaces (open in L->joins) and the cgroup
 * as create decided them. */
static int monitor_launch(struct monitor *m, const struct nsbox_spec *s,
                          const struct nsbox_ocispec *c, const struct nsbox_ociplace *place,
                          bool host_net, struct nsbox_err *e)
{
    static struct nsbox_rootfs_mount mounts[NSBOX_OCISPEC_MOUNTS_MAX + NSBOX_OCISPEC_DEVICES_MAX];
    static struct nsbox_rootfs_idmap idmaps[NSBOX_OCISPEC_MOUNTS_MAX + NSBOX_OCISPEC_DEVICES_MAX];
    static struct nsbox_ocispec_mount_opts opts[NSBOX_OCISPEC_MOUNTS_MAX];
    size_t n_dev = 0; /* linux.devices: binds after the config's mounts (ocidevices.c) */
    if (config_mounts(c, host_net, mounts, idmaps, opts, e) < 0 ||
        bundle_mount_points(s->image, mounts, c->n_mounts, e) < 0 ||
        nsbox_ocidevices_mounts(c, mounts + c->n_mounts, &n_dev, e) < 0)
        return -1;
    if (m->engine_volumes)
        nsbox_ocivolumes_mark(s->image, mounts, c->n_mounts, idmaps);
    static const char *masked[NSBOX_OCISPEC_MASKS_MAX], *readonly[NSBOX_OCISPEC_MASKS_MAX];
    for (size_t i = 0; i < c->n_masked; i++)
        masked[i] = c->masked[i];
    for (size_t i = 0; i < c->n_readonly; i++)
        readonly[i] = c->readonly[i];
    m->sb.mounts = mounts;
    m->sb.idmaps = idmaps; /* the devices' entries stay zero: none is idmapped */
    m->sb.n_mounts = c->n_mounts + n_dev;
    m->sb.masked = masked;
    m->sb.n_masked = c->n_masked;
    m->sb.readonly = readonly;
    m->sb.n_readonly = c->n_readonly;
    m->sb.cg_place = place->placed ? &place->place : NULL;
    m->sb.root_writable = !c->root_readonly;
    int prepared = nsbox_sandbox_prepare(&m->sb, s, c->args, c->cwd, e);
    nsbox_ocivolumes_close(idmaps, c->n_mounts); /* the sandbox has their trees */
    if (prepared < 0 || (place->placed && nsbox_ociplace_save(m->dir, &m->sb.cg, e) < 0) ||
        nsbox_ociplace_apply_memory(place, &m->sb.cg, e) < 0)
        return -1;
    apply_process(&m->sb.L, c);
    m->sb.L.seccomp_bundle = bundle_seccomp;
    m->sb.L.seccomp_bundle_flags = c->seccomp.load_flags;
    m->sb.L.root_propagation = c->root_propagation;
    if (c->hostname[0] && strlen(c->hostname) < sizeof m->sb.L.hostname)
        snprintf(m->sb.L.hostname, sizeof m->sb.L.hostname, "%s", c->hostname);
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
        return nsbox_err_sys(e, "socketpair");
    m->start_sock = sv[0];
    m->sb.L.start_fd = sv[1];
    if (nsbox_ocimon_prepare(&m->mon, &m->sb.L, c->terminal, &m->sb.cg, e) < 0)
        return -1;
    m->sb.L.preserve_fds = m->preserve_fds;
    int r = nsbox_sandbox_start(&m->sb, NULL, e);
    nsbox_closep(&m->sb.L.start_fd);
    nsbox_ocifds_close(m->preserve_fds); /* init has them: a caller's pipe ends with the workload */
    return r;
}

static int monitor_setup(struct monitor *m, const struct nsbox_spec *s,
                         const struct nsbox_ocispec *c, const struct nsbox_ociplace *place,
                         struct nsbox_err *e)
{
    /* Init inherits the mask: it takes the relayed signals (from kill, sent to it) with
     * sigwaitinfo. The monitor has nothing to do with them: the container is init. */
    sigset_t mask;
    sigemptyset(&mask);
    for (size_t i = 0; i < NSBOX_ARRAY_LEN(nsbox_signals_relayed); i++)
        sigaddset(&mask, nsbox_signals_relayed[i]);
    sigaddset(&mask, SIGCHLD);
    if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0)
        return nsbox_err_sys(e, "sigprocmask");
    m->sb.L.blocked = mask;
    m->sb.L.sibling = true;
    /* the joined namespaces first: whose they are decides how sysfs is mounted */
    bool host_net;
    if (nsbox_ocins_open(c, &m->sb.L, &host_net, e) < 0)
        return -1;
    int r = monitor_launch(m, s, c, place, host_net, e);
    nsbox_ocins_close(&m->sb.L);
    if (r < 0)
        return -1;
    m->mon.init_pid = m->sb.pid;
    if (m->sb.pidfd < 0 && (m->sb.pidfd = (int)syscall(SYS_pidfd_open, m->sb.pid, 0)) < 0)
        return nsbox_err_sys(e, "pidfd_open (Linux 5.3 or later is needed)");
    /* init's, which the workload it forks at start inherits */
    if (c->has_oom_score_adj && set_oom_score_adj(m->sb.pid, c->oom_score_adj, e) < 0)
        return -1;
    if (wait_ready(m, e) < 0)
        return -1;
    return nsbox_ocisysctl_apply(m->sb.pid, c, e); /* before start: the workload sees them */
}

__attribute__((noreturn)) static void monitor_main(const char *dir, const struct nsbox_spec *s,
                                                   const struct nsbox_ocispec *c,
                                                   const struct nsbox_ociplace *place,
                                                   const char *console, unsigned preserve_fds,
                                                   bool engine_volumes, int ready_fd)
{
    static struct monitor m; /* large: the sandbox's buffers */
    struct ready_msg msg = {0};
    nsbox_sandbox_init(&m.sb);
    nsbox_ocimon_init(&m.mon);
    m.start_sock = m.fifo = m.ctl = -1;
    m.dir = dir;
    m.preserve_fds = preserve_fds;
    m.engine_volumes = engine_volumes;
    setsid(); /* not in the caller's job control: a ^C to it is not for the container */
    char fifo[PATH_MAX + 16];
    snprintf(fifo, sizeof fifo, "%s/exec.fifo", dir);
    m.fifo = open(fifo, O_RDWR | O_NONBLOCK | O_CLOEXEC);
    if (m.fifo < 0)
        nsbox_err_sys(&msg.err, "open %s", fifo);
    else if ((m.ctl = nsbox_ocictl_listen(dir, &msg.err)) < 0)
        ;
    else if (monitor_setup(&m, s, c, place, &msg.err) == 0 &&
             (m.mon.console < 0 || nsbox_ociconsole_send(console, m.mon.console, &msg.err) == 0)) {
        msg.ok = 1;
        msg.init_pid = m.sb.pid;
        if (!c->root_readonly && !m.sb.root_writable) {
            msg.root_read_only = true;
            msg.err = m.sb.root_why;
        }
        snprintf(msg.sandbox, sizeof msg.sandbox, "%s", m.sb.st.id);
        msg.volumes_why = m.sb.volumes_why;
    }
    msg.helper = m.sb.helper;
    ssize_t w = write(ready_fd, &msg, sizeof msg);
    (void)w;
    close(ready_fd);
    if (msg.ok) {
        /* The caller's streams are the container's now, not ours to keep open. */
        int null = open("/dev/null", O_RDWR | O_CLOEXEC);
        for (int fd = 0; fd < 3 && null >= 0; fd++)
            dup2(null, fd);
        bool done = false;
        while (!done)
            monitor_event(&m, &done);
        m.sb.pid = 0; /* ended: its pid is its parent's to reap, and may be reused */
        nsbox_ocimon_finish(&m.mon);
    }
    struct nsbox_err e2;
    nsbox_sandbox_destroy(&m.sb, &e2);
    _exit(msg.ok ? 0 : 125);
}

/* ---- create ------------------------------------------------------------------------------- */

static int make_state_dir(const struct nsbox_ocirt *g, const char *id, char *dir, size_t n,
                          struct nsbox_err *e)
{
    if (nsbox_ocistate_dir(g, id, dir, n, e) < 0)
        return -1;
    char parent[PATH_MAX];
    snprintf(parent, sizeof parent, "%s", g->root);
    /* the whole path, as runc makes it (containerd's shim gives /run/containerd/runc/NS) */
    for (char *p = parent + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            if (mkdir(parent, 0711) < 0 && errno != EEXIST)
                return nsbox_err_sys(e, "--root %s", parent);
            *p = '/';
        }
    if (mkdir(g->root, 0711) < 0 && errno != EEXIST)
        return nsbox_err_sys(e, "--root %s", g->root);
    if (mkdir(dir, 0700) < 0)
        return errno == EEXIST ? nsbox_err_set(e, NSBOX_E_INVALID, EEXIST,
                                               "container with id %s already exists", id)
                               : nsbox_err_sys(e, "mkdir %s", dir);
    char fifo[PATH_MAX + 16];
    snprintf(fifo, sizeof fifo, "%s/exec.fifo", dir);
    if (mkfifo(fifo, 0600) < 0)
        return nsbox_err_sys(e, "mkfifo %s", fifo);
    return 0;
}

/* The bundle's annotations, for state to report as they were at create. */
static int write_annotations(const char *dir, const char *json, struct nsbox_err *e)
{
    return nsbox_ocistate_save(dir, NSBOX_OCI_ANNOTATIONS_FILE, json ? json : "{}", e);
}

static void now_rfc3339(char *out, size_t n)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char base[32];
    strftime(base, sizeof base, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out, n, "%s.%09ldZ", base, ts.tv_nsec);
}

/* create's stderr is the container's (an engine's logs, `docker logs`): a warning goes to
 * --log when there is one, which engines give, and to stderr only without it. */
static void warn(const struct nsbox_ocirt *g, const char *msg)
{
    nsbox_ocilog_say(g, NSBOX_OCILOG_LOG_ELSE_STDERR, "warning", "%s", msg);
}

/* A lower layer's line (the host's file table raised, or not) as a warning: nsbox-oci changes
 * that host-wide setting as nsbox does, and says so where the engine keeps its runtime's words. */
static void note_warn(void *ctx, const char *line)
{
    warn(ctx, line);
}

/* After a failed create: the monitor, which has removed the sandbox, and init (our child too,
 * ended by then), so that the caller is left nothing to reap. */
static void reap_children(pid_t monitor, pid_t helper)
{
    waitpid(monitor, NULL, 0);
    if (helper > 0)
        waitpid(helper, NULL, 0);
    while (waitpid(-1, NULL, WNOHANG) > 0)
        ;
}

/* The monitor is forked; create waits for its word, records the state, writes the pid file:
 * init's, our child (the monitor cloned it as its sibling). */
static int spawn_monitor(const struct nsbox_ocirt *g, const struct nsbox_ocicreate_args *a,
                         const char *dir, const struct nsbox_spec *s, const struct nsbox_ocispec *c,
                         const struct nsbox_ociplace *place, struct nsbox_err *e)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0)
        return nsbox_err_sys(e, "pipe");
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        return nsbox_err_sys(e, "fork");
    if (pid == 0) {
        close(p[0]);
        monitor_main(dir, s, c, place, a->console_socket, a->preserve_fds,
                     g->idmap_engine_volumes, p[1]);
    }
    close(p[1]);
    struct ready_msg msg = {0};
    ssize_t n;
    do
        n = read(p[0], &msg, sizeof msg);
    while (n < 0 && errno == EINTR);
    close(p[0]);
    if (n != (ssize_t)sizeof msg || !msg.ok) {
        if (n == (ssize_t)sizeof msg)
            *e = msg.err;
        else
            nsbox_err_set(e, NSBOX_E_SYS, EPIPE, "the container's monitor ended during set-up");
        reap_children(pid, n == (ssize_t)sizeof msg ? msg.helper : 0);
        return -1;
    }
    if (msg.helper > 0)
        waitpid(msg.helper, NULL, 0); /* it has sent init's pid and exited */
    if (msg.root_read_only) {
        char msg_ro[NSBOX_ERR_MSG_MAX + 320];
        snprintf(msg_ro, sizeof msg_ro,
                 "root.readonly is false, but the root is read-only: %s (a writable root is the "
                 "bundle's root through an idmapped mount, which needs root and a filesystem "
                 "that takes one, such as ext4, xfs, btrfs or tmpfs; on an engine's overlay, "
                 "the same overlay made again over idmapped mounts of its layers, which needs "
                 "Linux 5.19 or later and layer paths it can read: the config's mounts stay "
                 "writable)",
                 msg.err.msg);
        warn(g, msg_ro);
    }
    if (msg.volumes_why.code) {
        char msg_vol[NSBOX_ERR_MSG_MAX + 160];
        snprintf(msg_vol, sizeof msg_vol,
                 "--idmap-volumes=engine: a volume is bound as it is, not idmapped (its owner's "
                 "files are then read-only to the container's root): %s",
                 msg.volumes_why.msg);
        warn(g, msg_vol);
    }
    struct nsbox_ocistate st = {.pid = msg.init_pid, .monitor = pid};
    snprintf(st.id, sizeof st.id, "%s", a->id);
    snprintf(st.bundle, sizeof st.bundle, "%s", a->bundle);
    snprintf(st.rootfs, sizeof st.rootfs, "%s", s->image);
    snprintf(st.sandbox, sizeof st.sandbox, "%s", msg.sandbox);
    now_rfc3339(st.created, sizeof st.created);
    st.pid_start = nsbox_ocistate_start_time(msg.init_pid);
    st.monitor_start = nsbox_ocistate_start_time(pid);
    /* The hooks see a created container whose pid file is not written yet: a failed one
     * leaves nothing for the caller to wait on. */
    if (nsbox_ocistate_write(g, &st, e) < 0 ||
        nsbox_ocihooks_run(g, &st, NSBOX_OCI_HOOK_PRESTART, NSBOX_OCI_CREATED, e) < 0 ||
        nsbox_ocihooks_run(g, &st, NSBOX_OCI_HOOK_CREATE_RUNTIME, NSBOX_OCI_CREATED, e) < 0 ||
        (a->pid_file && nsbox_ocistate_write_pid_file(a->pid_file, msg.init_pid, e) < 0)) {
        kill(msg.init_pid, SIGKILL);
        reap_children(pid, 0);
        return -1;
    }
    return 0;
}

int nsbox_ocicreate_make(const struct nsbox_ocirt *g, struct nsbox_ocicreate_args *a,
                         struct nsbox_err *e)
{
    unsigned listen = 0;
    if (nsbox_ocifds_listen(a->preserve_fds, &listen, e) < 0)
        return -1;
    static struct nsbox_ocispec c; /* large: the mounts */
    static struct nsbox_spec s;
    static struct nsbox_ociplace place; /* the cgroup, decided once */
    nsbox_spec_init(&s);
    char dir[PATH_MAX];
    /* runc's "stdio + $LISTEN_FDS + preserve-fds", and the process told of the first */
    a->preserve_fds += listen;
    cleanup_free char *config = NULL;
    if (load_config(a, &c, &config, e) < 0 ||
        (listen && nsbox_ociproc_listen_env(&c, listen, e) < 0) || build_spec(a, &c, &s, e) < 0 ||
        nsbox_ociplace_build(g, &c, &s, &place, e) < 0 ||
        make_state_dir(g, a->id, dir, sizeof dir, e) < 0)
        return -1;
    /* exec checks a process against the config the container was made with, never the
     * bundle's, which whoever can write the bundle may change after create */
    if (write_annotations(dir, c.annotations, e) < 0 ||
        nsbox_ocistate_save(dir, NSBOX_OCI_CONFIG_FILE, config, e) < 0 ||
        nsbox_ocihooks_save(dir, c.hooks_json, e) < 0) {
        struct nsbox_err e2;
        nsbox_ocistate_remove(g, a->id, &e2);
        return -1;
    }
    if (a->console_socket && !c.terminal)
        warn(g, "--console-socket given without process.terminal: unused");
    if (place.ignored[0]) {
        char ignored[sizeof place.ignored + 64];
        snprintf(ignored, sizeof ignored, "linux.resources.memory: not applied: %s", place.ignored);
        warn(g, ignored);
    }
    nsbox_filemax_set_note(note_warn, (void *)g);
    if (spawn_monitor(g, a, dir, &s, &c, &place, e) < 0) {
        struct nsbox_err e2;
        nsbox_ocistate_remove(g, a->id, &e2);
        return -1;
    }
    return 0;
}

int nsbox_ocicreate_create(const struct nsbox_ocirt *g, int argc, char **argv, struct nsbox_err *e)
{
    struct nsbox_ocicreate_args a = {.pid_file = NULL};
    if (nsbox_ocicreate_parse(argc, argv, &a, e) < 0 || nsbox_ocicreate_make(g, &a, e) < 0)
        return 1;
    return 0;
}
