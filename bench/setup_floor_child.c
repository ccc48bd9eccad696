/* setup_floor's sandbox init: what the child does between its clone and "ready" (the mounts,
 * pivot_root, lo, hardening), as nsbox's contain.c and rootfs/mounts.c do. */
#define _GNU_SOURCE
#include "setup_floor.h"

__attribute__((noreturn, format(printf, 2, 3))) static void child_fail(struct launch *L,
                                                                       const char *fmt, ...)
{
    char msg[512];
    int err = errno;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof msg)
        n = (int)sizeof msg - 1;
    n += snprintf(msg + n, sizeof msg - (size_t)n, ": %s", strerror(err));
    ssize_t w = write(L->report_wr, msg, strlen(msg));
    (void)w;
    _exit(125);
}

static void read_sync(struct launch *L, char want)
{
    char c = 0;
    ssize_t n;
    do
        n = read(L->sync_rd, &c, 1);
    while (n < 0 && errno == EINTR);
    if (n != 1 || c != want) {
        errno = EPIPE;
        child_fail(L, "parent went away");
    }
}

static int open_tree_clone(int dfd, const char *path, unsigned flags)
{
    return (int)syscall(SYS_open_tree, dfd, path, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | flags);
}

static int setattr_fd(int fd, bool recursive, uint64_t set)
{
    struct mount_attr a = {.attr_set = set};
    return (int)syscall(SYS_mount_setattr, fd, "", AT_EMPTY_PATH | (recursive ? AT_RECURSIVE : 0),
                        &a, sizeof a);
}

static int move_to(int fd, const char *target)
{
    return (int)syscall(SYS_move_mount, fd, "", AT_FDCWD, target, MOVE_MOUNT_F_EMPTY_PATH);
}

/* A bind source, cloned while host paths are reachable, with its attributes already set. */
static int clone_source(struct launch *L, int dfd, const char *path, bool recursive, uint64_t attr)
{
    int fd = open_tree_clone(dfd, path, (recursive ? AT_RECURSIVE : 0) |
                                            (dfd != AT_FDCWD ? AT_SYMLINK_NOFOLLOW : 0));
    if (fd < 0)
        child_fail(L, "open_tree %s", path);
    if (attr && setattr_fd(fd, recursive, attr) < 0)
        child_fail(L, "mount_setattr %s", path);
    return fd;
}

static const char *const dev_nodes[] = {"null", "zero", "full", "random", "urandom", "tty"};
static const char *const proc_masked_files[] = {"kcore", "keys", "timer_list", "sched_debug",
                                                "latency_stats", "timer_stats", "kallsyms"};
static const char *const proc_masked_dirs[] = {"acpi", "scsi"};
static const char *const proc_readonly[] = {"sys", "sysrq-trigger", "irq", "bus", "fs"};

struct sources {
    int usr, etc, hosts, dev[N_OF(dev_nodes)], rootfd;
};

/* Phase 1, still the caller's host uid: private mounts, the sources, the root's tmpfs. */
static void rootfs_prepare(struct launch *L, struct sources *s)
{
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
        child_fail(L, "make / private");
    int img = open(image_root, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (img < 0)
        child_fail(L, "open %s", image_root);
    const uint64_t ro = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
    s->usr = image_has_usr ? clone_source(L, img, "usr", true, ro) : -1;
    close(img);
    s->etc = clone_source(L, AT_FDCWD, image_etc, false, ro);
    s->hosts = clone_source(L, AT_FDCWD, L->hosts, false, ro | MOUNT_ATTR_NOEXEC);
    for (size_t i = 0; i < N_OF(dev_nodes); i++) {
        char p[32];
        snprintf(p, sizeof p, "/dev/%s", dev_nodes[i]);
        s->dev[i] = clone_source(L, AT_FDCWD, p, false, 0);
    }
    if (mount("tmpfs", L->staging, "tmpfs", MS_NOSUID | MS_NODEV,
              "mode=0755,size=1m,uid=1000,gid=1000") < 0)
        child_fail(L, "tmpfs root on %s", L->staging);
    s->rootfd = open(L->staging, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (s->rootfd < 0)
        child_fail(L, "open %s", L->staging);
}

static void mk(struct launch *L, const char *path, mode_t mode)
{
    if (mkdir(path, mode) < 0 && errno != EEXIST)
        child_fail(L, "mkdir /%s", path);
}

static void attach(struct launch *L, int *fd, const char *target)
{
    if (move_to(*fd, target) < 0)
        child_fail(L, "move_mount to /%s", target);
    close(*fd);
    *fd = -1;
}

static void tmpfs(struct launch *L, const char *target, unsigned long flags, const char *data)
{
    if (mount("tmpfs", target, "tmpfs", flags, data) < 0)
        child_fail(L, "tmpfs on /%s", target);
}

/* The image: /usr bound read-only, its merged-/usr links, its /etc and the sandbox's hosts. */
static void rootfs_image(struct launch *L, struct sources *s)
{
    for (size_t i = 0; i < n_image_links; i++)
        if (symlink(image_links[i][1], image_links[i][0]) < 0)
            child_fail(L, "symlink /%s", image_links[i][0]);
    if (s->usr >= 0) {
        mk(L, "usr", 0755);
        attach(L, &s->usr, "usr");
    }
    mk(L, "etc", 0755);
    attach(L, &s->etc, "etc");
    /* the sandbox's hosts file over the image's, its target resolved without symlinks */
    struct open_how how = {.flags = O_PATH | O_CLOEXEC,
                           .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS};
    int here = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
    int tfd = here < 0 ? -1 : (int)syscall(SYS_openat2, here, "etc/hosts", &how, sizeof how);
    if (tfd >= 0) { /* optional, as for nsbox's network none */
        if (syscall(SYS_move_mount, s->hosts, "", tfd, "",
                    MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
            child_fail(L, "mount /etc/hosts");
        close(tfd);
    }
    close(s->hosts);
    if (here >= 0)
        close(here);
}

/* /workspace, /tmp, /run. */
static void rootfs_writable(struct launch *L)
{
    char data[128];
    mk(L, "workspace", 0755);
    if (opt.ws == WS_EXT4) {
        attach(L, &L->ws_fd, "workspace");
    } else if (opt.ws == WS_TMPFS) {
        snprintf(data, sizeof data, "mode=0755,size=%llu,nr_inodes=%llu",
                 (unsigned long long)DISK_BYTES, (unsigned long long)(DISK_BYTES / BYTES_PER_INODE));
        tmpfs(L, "workspace", MS_NOSUID | MS_NODEV, data);
    }
    mk(L, "tmp", 01777);
    snprintf(data, sizeof data, "mode=1777,size=%llu", (unsigned long long)(MEM_BYTES / 2));
    tmpfs(L, "tmp", MS_NOSUID | MS_NODEV, data);
    mk(L, "run", 0755);
    tmpfs(L, "run", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=0755,size=1m");
}

/* /dev: a tmpfs with the nodes, links, devpts and shm, then read-only. */
static void rootfs_dev(struct launch *L, struct sources *s)
{
    char data[128];
    mk(L, "dev", 0755);
    tmpfs(L, "dev", MS_NOSUID | MS_NOEXEC, "mode=0755,size=64k,nr_inodes=64");
    for (size_t i = 0; i < N_OF(dev_nodes); i++) {
        char p[32];
        snprintf(p, sizeof p, "dev/%s", dev_nodes[i]);
        int fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0666);
        if (fd < 0)
            child_fail(L, "create /%s", p);
        close(fd);
        attach(L, &s->dev[i], p);
    }
    static const char *const links[][2] = {{"dev/ptmx", "pts/ptmx"},
                                           {"dev/fd", "/proc/self/fd"},
                                           {"dev/stdin", "/proc/self/fd/0"},
                                           {"dev/stdout", "/proc/self/fd/1"},
                                           {"dev/stderr", "/proc/self/fd/2"}};
    for (size_t i = 0; i < N_OF(links); i++)
        if (symlink(links[i][1], links[i][0]) < 0)
            child_fail(L, "symlink /%s", links[i][0]);
    mk(L, "dev/pts", 0755);
    if (mount("devpts", "dev/pts", "devpts", MS_NOSUID | MS_NOEXEC,
              "newinstance,ptmxmode=0666,mode=0620") < 0)
        child_fail(L, "devpts");
    mk(L, "dev/shm", 01777);
    snprintf(data, sizeof data, "mode=1777,size=%llu", (unsigned long long)(MEM_BYTES / 4));
    tmpfs(L, "dev/shm", MS_NOSUID | MS_NODEV, data);
    struct mount_attr da = {.attr_set =
                                MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC};
    if (syscall(SYS_mount_setattr, AT_FDCWD, "dev", 0, &da, sizeof da) < 0)
        child_fail(L, "read-only /dev");
}

/* /proc, its masked and read-only parts. */
static void rootfs_proc(struct launch *L)
{
    mk(L, "proc", 0555);
    if (mount("proc", "proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
        child_fail(L, "mount proc");
    if (opt.masks) {
        char p[64];
        for (size_t i = 0; i < N_OF(proc_masked_files); i++) {
            snprintf(p, sizeof p, "proc/%s", proc_masked_files[i]);
            if (mount("dev/null", p, NULL, MS_BIND, NULL) < 0 && errno != ENOENT)
                child_fail(L, "mask /%s", p);
        }
        for (size_t i = 0; i < N_OF(proc_masked_dirs); i++) {
            snprintf(p, sizeof p, "proc/%s", proc_masked_dirs[i]);
            if (mount("tmpfs", p, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
                      "size=0,nr_inodes=1") < 0 && errno != ENOENT)
                child_fail(L, "mask /%s", p);
        }
        for (size_t i = 0; i < N_OF(proc_readonly); i++) {
            snprintf(p, sizeof p, "proc/%s", proc_readonly[i]);
            int fd = open_tree_clone(AT_FDCWD, p, AT_RECURSIVE);
            if (fd < 0) {
                if (errno == ENOENT)
                    continue;
                child_fail(L, "read-only /%s", p);
            }
            if (setattr_fd(fd, true, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV |
                                         MOUNT_ATTR_NOEXEC) < 0 ||
                move_to(fd, p) < 0)
                child_fail(L, "read-only /%s", p);
            close(fd);
        }
    }
}

/* Phase 2, as appuser, relative to the new root: the plan nsbox's mounts.c builds for the host
 * image, network none, then pivot_root. */
static void rootfs_enter(struct launch *L, struct sources *s)
{
    if (fchdir(s->rootfd) < 0)
        child_fail(L, "enter the new root");
    /* the image: /usr bound read-only, its merged-/usr links recreated, the image's /etc */
    rootfs_image(L, s);
    rootfs_writable(L);
    rootfs_dev(L, s);
    rootfs_proc(L);
    /* pivot_root(".", "."): the old root stacks on the new one and is detached */
    if (syscall(SYS_pivot_root, ".", ".") < 0)
        child_fail(L, "pivot_root");
    if (umount2(".", MNT_DETACH) < 0)
        child_fail(L, "detach the old root");
    if (chdir("/") < 0)
        child_fail(L, "chdir /");
    if (mount(NULL, "/", NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL) < 0)
        child_fail(L, "read-only /");
    close(s->rootfd);
}


static void loopback_up(struct launch *L)
{
    int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (s < 0)
        child_fail(L, "socket");
    struct ifreq ifr;
    memset(&ifr, 0, sizeof ifr);
    strcpy(ifr.ifr_name, "lo");
    if (ioctl(s, SIOCGIFFLAGS, &ifr) < 0)
        child_fail(L, "SIOCGIFFLAGS lo");
    ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
    if (ioctl(s, SIOCSIFFLAGS, &ifr) < 0)
        child_fail(L, "lo up");
    close(s);
}

static void harden(struct launch *L)
{
    struct rlimit core = {0, 0}, nofile = {4096, 4096}, nproc = {PIDS, PIDS};
    if (setrlimit(RLIMIT_CORE, &core) < 0 || setrlimit(RLIMIT_NOFILE, &nofile) < 0 ||
        setrlimit(RLIMIT_NPROC, &nproc) < 0)
        child_fail(L, "setrlimit");
    if (prctl(PR_SET_DUMPABLE, 0) < 0)
        child_fail(L, "PR_SET_DUMPABLE");
    unsigned long bits = SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP_LOCKED |
                         SECBIT_KEEP_CAPS_LOCKED | SECBIT_NO_CAP_AMBIENT_RAISE |
                         SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED;
    if (prctl(PR_SET_SECUREBITS, bits) < 0)
        child_fail(L, "PR_SET_SECUREBITS");
    for (int cap = 0; prctl(PR_CAPBSET_READ, cap) >= 0; cap++)
        if (prctl(PR_CAPBSET_DROP, cap) < 0)
            child_fail(L, "PR_CAPBSET_DROP");
    prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
    struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct caps[2];
    memset(caps, 0, sizeof caps);
    if (syscall(SYS_capset, &hdr, caps) < 0)
        child_fail(L, "capset");
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
        child_fail(L, "PR_SET_NO_NEW_PRIVS");
    if (!opt.seccomp)
        return;
    /* A deny list as long as nsbox's default profile: arch check, then two instructions per
     * denied number. The numbers exist in no kernel, so init's own calls pass. */
    struct sock_filter f[4 + 2 * SECCOMP_DENIED + 1];
    size_t k = 0;
#if defined(__x86_64__)
    const uint32_t arch = AUDIT_ARCH_X86_64;
#elif defined(__aarch64__)
    const uint32_t arch = AUDIT_ARCH_AARCH64;
#else
#error "add this architecture's AUDIT_ARCH"
#endif
    f[k++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
                                          offsetof(struct seccomp_data, arch));
    f[k++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, arch, 1, 0);
    f[k++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS);
    f[k++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
                                          offsetof(struct seccomp_data, nr));
    for (unsigned i = 0; i < SECCOMP_DENIED; i++) {
        f[k++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 100000u + i, 0, 1);
        f[k++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM);
    }
    f[k++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
    struct sock_fprog prog = {(unsigned short)k, f};
    if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) < 0)
        child_fail(L, "seccomp");
}

static void show(void)
{
    char buf[8192];
    int fd = open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC);
    ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof buf - 1);
    if (fd >= 0)
        close(fd);
    fprintf(stderr, "--- sandbox: uid %u gid %u, mountinfo:\n%.*s", getuid(), getgid(),
            n > 0 ? (int)n : 0, buf);
    fd = open("/proc/self/cgroup", O_RDONLY | O_CLOEXEC);
    n = fd < 0 ? -1 : read(fd, buf, sizeof buf - 1);
    if (fd >= 0)
        close(fd);
    fprintf(stderr, "--- sandbox: /proc/self/cgroup:\n%.*s", n > 0 ? (int)n : 0, buf);
    struct statfs sf;
    if (statfs("/workspace", &sf) == 0)
        fprintf(stderr, "--- /workspace: f_type %#lx, %llu MiB\n", (unsigned long)sf.f_type,
                (unsigned long long)sf.f_blocks * (unsigned long long)sf.f_bsize >> 20);
    fd = open("/workspace/probe", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    fprintf(stderr, "--- appuser can write /workspace: %s\n", fd >= 0 ? "yes" : strerror(errno));
    if (fd >= 0)
        close(fd);
}

__attribute__((noreturn)) void floor_child_main(struct launch *L)
{
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
        child_fail(L, "PR_SET_PDEATHSIG");
    close(L->sync_wr);
    close(L->report_rd);
    read_sync(L, 'g'); /* the id maps are written */
    if (opt.cgroup)
        for (size_t i = 0; i < n_cg; i++)
            if (floor_write_at(L->cg[i], "tasks", "0") < 0)
                child_fail(L, "join %s", L->cg[i]);
    struct sources s;
    if (opt.rootfs)
        rootfs_prepare(L, &s);
    /* raw syscalls, as nsbox (a clone of a process that could have threads) */
    if (syscall(SYS_setresgid, SANDBOX_UID, SANDBOX_UID, SANDBOX_UID) < 0 ||
        syscall(SYS_setresuid, SANDBOX_UID, SANDBOX_UID, SANDBOX_UID) < 0)
        child_fail(L, "become uid %u", SANDBOX_UID);
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
        child_fail(L, "PR_SET_PDEATHSIG");
    if (opt.rootfs)
        rootfs_enter(L, &s);
    char host[32];
    snprintf(host, sizeof host, "floor-%d", L->worker);
    if (sethostname(host, strlen(host)) < 0)
        child_fail(L, "sethostname");
    read_sync(L, 'n');
    close(L->sync_rd);
    if (opt.net)
        loopback_up(L);
    if (opt.cgroup && unshare(CLONE_NEWCGROUP) < 0)
        child_fail(L, "unshare(CLONE_NEWCGROUP)");
    if (opt.harden)
        harden(L);
    if (opt.show)
        show();
    close(L->report_wr); /* ready */
    for (;;)
        pause();
}
