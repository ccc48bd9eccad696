/* The kernel's floor for a whole sandbox on this machine: clone_floor.c's clone into six
 * namespaces, plus the kernel work that an nsbox sandbox's create + rm needs, done directly with
 * syscalls in the fewest processes (the looping process and the sandbox's init), with no exec,
 * no supervisor, no state directory, no JSON: what no implementation of nsbox's contract on this
 * kernel can beat. Two processes loop for SECONDS; prints the total creates+deletes per second.
 *
 *     cc -O2 -o setup_floor bench/setup_floor.c && sudo ./setup_floor [SECONDS] [OPTIONS]
 *
 * One iteration, mirroring sandbox/sandbox.c, contain.c, rootfs/mounts.c, cgroup.c and
 * workspace.c (a persistent sandbox, instance type medium, network none, the host image):
 *   parent  [cgroup] mkdir one cgroup per v1 hierarchy (memory, cpu, pids, cpuacct, freezer)
 *                    and write memory, memsw, cfs period/quota and pids limits
 *           [ext4]   sparse 10 GiB backing file, loop device (LOOP_CONFIGURE, autoclear), the
 *                    cached empty filesystem copied onto it, fsmount (detached), chown its root
 *           clone3 into user, pid, mount, net, uts, ipc namespaces (+ pidfd); id maps
 *           (setgroups deny, uid_map, gid_map), sync bytes 'g' and 'n'
 *   child   pdeath signal, [cgroup] join by writing "0" to each hierarchy's tasks file
 *           [rootfs] / private, detached clones of the bind sources (/usr recursive, /etc of
 *                    the image, a hosts file, 6 device nodes) with their attributes, tmpfs root,
 *                    become uid 1000, skeleton (symlinks, mkdirs), the binds, /workspace, /tmp,
 *                    /run, /dev (tmpfs, nodes, links, devpts, shm, read-only), /proc with
 *                    [masks] 7 masked files, 2 masked dirs, 5 read-only subtrees; pivot_root,
 *                    detach the old root, / read-only
 *           hostname; [net] lo up (ioctl); [cgroup] unshare(CLONE_NEWCGROUP)
 *           [harden] rlimits, not dumpable, securebits, drop bounding set and capabilities,
 *                    no_new_privs, a seccomp filter of the size of nsbox's default (~300 insns)
 *           then ready (closes its report pipe) and waits
 *   parent  sees ready; rm: SIGKILL, waitpid, [cgroup] rmdir the cgroups, [ext4] unlink the
 *           backing file (the mount and the loop device go with the namespace)
 *
 * Options (each removes one piece, so that rows with and without it can be compared):
 *   --no-cgroup  --no-rootfs  --no-masks  --no-net  --no-harden  --no-seccomp (harden without
 *   the filter)
 *   --ws=ext4|tmpfs|none   the workspace (default ext4: what nsbox makes as root)
 *   -v       also print, to stderr, the iterations, the machine's busy share and the CPU ms per
 *            iteration (whole machine, from /proc/stat, as bench/profile_create.py computes it)
 *   --show   run one sandbox, have it print its mounts and ids to stderr, and stop
 *
 * Needs root (loop devices, cgroups). Everything it makes lives in a mktemp directory under
 * /var/tmp, in bench-owned cgroups below this process's own ones (where nsbox puts its own),
 * and in the sandboxes' private mount namespaces; all of it is removed at exit (SIGINT/SIGTERM
 * included). The rate is the sum over the two processes of iterations / their own elapsed
 * time. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/loop.h>
#include <linux/mount.h>
#include <linux/openat2.h>
#include <linux/sched.h>
#include <linux/seccomp.h>
#include <linux/securebits.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef CGROUP_SUPER_MAGIC
#define CGROUP_SUPER_MAGIC 0x27e0eb
#endif

/* nsbox's values: instance type medium, appuser, the uid range of privileged sandboxes */
#define MEM_BYTES (4ull << 30)
#define CPUS 2u
#define CPU_PERIOD_US 100000u
#define PIDS 1024u
#define DISK_BYTES (10ull << 30)
#define BYTES_PER_INODE 16384u
#define SANDBOX_UID 1000u
#define UID_BASE 2000000000u
#define UID_SLOTS 65536u
#define SECCOMP_DENIED 148 /* 2 insns each: with the rest, the size of nsbox's default filter */

enum ws_kind { WS_NONE, WS_TMPFS, WS_EXT4 };

static struct {
    double seconds;
    bool cgroup, rootfs, masks, net, harden, seccomp, verbose, show;
    enum ws_kind ws;
} opt = {3.0, true, true, true, true, true, true, false, false, WS_EXT4};

static char tmpdir[64];      /* mktemp dir: staging roots, hosts files, template, backing files */
static char image_root[64] = "/";
static char image_etc[256];  /* the image's /etc */
static const char *image_links[8][2]; /* name, link text: the host image's top-level symlinks */
static size_t n_image_links;
static bool image_has_usr;
static char template_path[128];

static const char *const v1_names[] = {"memory", "cpu", "pids", "cpuacct", "freezer"};
static char cg_parent[5][512]; /* the bench's own cgroup, per distinct hierarchy */
static char cg_ctl[5][64];     /* the controllers in it, comma separated */
static size_t n_cg;

static volatile sig_atomic_t stop;

/* ---- small helpers ----------------------------------------------------------------------- */

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static int write_file(const char *path, const char *val)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    size_t len = strlen(val);
    ssize_t w = write(fd, val, len);
    int err = errno;
    close(fd);
    errno = err;
    return w == (ssize_t)len ? 0 : -1;
}

static int write_at(const char *dir, const char *name, const char *val)
{
    char path[768];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return write_file(path, val);
}

static void on_signal(int sig)
{
    (void)sig;
    stop = 1;
}

/* ---- the sandbox's init (the child) ------------------------------------------------------- */

struct launch {
    int sync_rd, sync_wr, report_rd, report_wr;
    int ws_fd; /* ext4: the detached mount */
    int worker;
    char staging[128], hosts[128];
    char cg[5][600];
};

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
#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

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

/* Phase 2, as appuser, relative to the new root: the plan nsbox's mounts.c builds for the host
 * image, network none, then pivot_root. */
static void rootfs_enter(struct launch *L, struct sources *s)
{
    char data[128];
    if (fchdir(s->rootfd) < 0)
        child_fail(L, "enter the new root");
    /* the image: /usr bound read-only, its merged-/usr links recreated, the image's /etc */
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

    /* /dev */
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

    /* /proc, its masked and read-only parts */
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

__attribute__((noreturn)) static void child_main(struct launch *L)
{
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
        child_fail(L, "PR_SET_PDEATHSIG");
    close(L->sync_wr);
    close(L->report_rd);
    read_sync(L, 'g'); /* the id maps are written */
    if (opt.cgroup)
        for (size_t i = 0; i < n_cg; i++)
            if (write_at(L->cg[i], "tasks", "0") < 0)
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

/* ---- the looping process (the parent) ------------------------------------------------------ */

/* name is one item of the comma-separated list */
static bool has_ctl(const char *list, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = list; (p = strstr(p, name)); p += n)
        if ((p == list || p[-1] == ',') && (p[n] == ',' || p[n] == '\0'))
            return true;
    return false;
}

static int cg_create(struct launch *L, const char *name)
{
    char mem[32], period[16], quota[16], pids[16];
    snprintf(mem, sizeof mem, "%llu", (unsigned long long)MEM_BYTES);
    snprintf(period, sizeof period, "%u", CPU_PERIOD_US);
    snprintf(quota, sizeof quota, "%u", CPUS * CPU_PERIOD_US);
    snprintf(pids, sizeof pids, "%u", PIDS);
    for (size_t i = 0; i < n_cg; i++) {
        snprintf(L->cg[i], sizeof L->cg[i], "%s/%s", cg_parent[i], name);
        if (mkdir(L->cg[i], 0755) < 0) {
            fprintf(stderr, "mkdir %s: %s\n", L->cg[i], strerror(errno));
            L->cg[i][0] = '\0';
            return -1;
        }
        const char *c = cg_ctl[i];
        if (has_ctl(c, "memory") &&
            (write_at(L->cg[i], "memory.limit_in_bytes", mem) < 0 ||
             (write_at(L->cg[i], "memory.memsw.limit_in_bytes", mem) < 0 && errno != ENOENT)))
            return fprintf(stderr, "%s: memory limit: %s\n", L->cg[i], strerror(errno)), -1;
        /* period first: the quota is checked against it */
        if (has_ctl(c, "cpu") && (write_at(L->cg[i], "cpu.cfs_period_us", period) < 0 ||
                                  write_at(L->cg[i], "cpu.cfs_quota_us", quota) < 0))
            return fprintf(stderr, "%s: cpu limit: %s\n", L->cg[i], strerror(errno)), -1;
        if (has_ctl(c, "pids") && write_at(L->cg[i], "pids.max", pids) < 0)
            return fprintf(stderr, "%s: pids limit: %s\n", L->cg[i], strerror(errno)), -1;
    }
    return 0;
}

/* rmdir each, retrying while a dying task still holds one (as nsbox's destroy does). */
static int cg_destroy(struct launch *L)
{
    int ret = 0;
    for (size_t i = 0; i < n_cg; i++) {
        if (!L->cg[i][0])
            continue;
        unsigned us = 50;
        int tries = 0;
        while (rmdir(L->cg[i]) < 0 && errno != ENOENT) {
            if (errno != EBUSY || ++tries > 200) {
                fprintf(stderr, "rmdir %s: %s\n", L->cg[i], strerror(errno));
                ret = -1;
                break;
            }
            struct timespec ts = {0, (long)us * 1000};
            nanosleep(&ts, NULL);
            us = us >= 5000 ? 10000 : us * 2;
        }
        L->cg[i][0] = '\0';
    }
    return ret;
}

static int fs_flag(int fs, const char *key)
{
    return (int)syscall(SYS_fsconfig, fs, FSCONFIG_SET_FLAG, key, NULL, 0);
}

/* A loop device for backing_fd, autoclear: it detaches itself when its last user goes. */
static int loop_attach(int backing_fd, char *dev, size_t n)
{
    int ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
    if (ctl < 0)
        return -1;
    for (int tries = 0; tries < 64; tries++) {
        int nr = ioctl(ctl, LOOP_CTL_GET_FREE);
        if (nr < 0)
            break;
        snprintf(dev, n, "/dev/loop%d", nr);
        int fd = open(dev, O_RDWR | O_CLOEXEC);
        if (fd < 0)
            break;
        struct loop_config c;
        memset(&c, 0, sizeof c);
        c.fd = (uint32_t)backing_fd;
        c.info.lo_flags = LO_FLAGS_AUTOCLEAR;
        snprintf((char *)c.info.lo_file_name, sizeof c.info.lo_file_name, "setup-floor");
        if (ioctl(fd, LOOP_CONFIGURE, &c) == 0) {
            close(ctl);
            return fd;
        }
        int err = errno;
        close(fd);
        if (err != EBUSY) {
            errno = err;
            break;
        }
    }
    int err = errno;
    close(ctl);
    errno = err;
    return -1;
}

/* A detached mount of the ext4 filesystem on dev (nsbox's options). */
static int mount_dev(const char *dev)
{
    int fs = (int)syscall(SYS_fsopen, "ext4", FSOPEN_CLOEXEC);
    if (fs < 0)
        return -1;
    int mfd = -1;
    if (syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, "source", dev, 0) == 0 &&
        fs_flag(fs, "noinit_itable") == 0 && fs_flag(fs, "nobarrier") == 0 &&
        syscall(SYS_fsconfig, fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) == 0)
        mfd = (int)syscall(SYS_fsmount, fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
    int err = errno;
    close(fs);
    errno = err;
    return mfd;
}

/* The data extents of in onto out (a fresh loop device reads as zeros elsewhere): workspace.c's
 * copy_sparse restated, as the other pieces here restate theirs, so that this file compiles
 * alone with cc wherever the bench runs. */
static int copy_sparse(int in, int out)
{
    static char buf[65536];
    off_t pos = 0;
    for (;;) {
        off_t data = lseek(in, pos, SEEK_DATA);
        if (data < 0)
            return errno == ENXIO ? 0 : -1;
        off_t hole = lseek(in, data, SEEK_HOLE);
        if (hole < 0)
            return -1;
        for (off_t off = data; off < hole;) {
            size_t want = (size_t)(hole - off) < sizeof buf ? (size_t)(hole - off) : sizeof buf;
            ssize_t r = pread(in, buf, want, off);
            if (r <= 0 || pwrite(out, buf, (size_t)r, off) != r)
                return -1;
            off += r;
        }
        pos = hole;
    }
}

/* The per-sandbox part of nsbox's ext4_make + give_root: a detached mount, or -1. */
static int ws_ext4_make(const char *backing, int tpl, uid_t owner)
{
    int fd = open(backing, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return perror(backing), -1;
    int mfd = -1, lfd = -1;
    char dev[32] = "?";
    if (ftruncate(fd, (off_t)DISK_BYTES) < 0) {
        perror("ftruncate");
        goto out;
    }
    lfd = loop_attach(fd, dev, sizeof dev);
    if (lfd < 0) {
        perror("loop device");
        goto out;
    }
    if (copy_sparse(tpl, lfd) < 0 ||
        sync_file_range(lfd, 0, 0, SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE |
                                       SYNC_FILE_RANGE_WAIT_AFTER) < 0) {
        perror("copy the template");
        goto out;
    }
    mfd = mount_dev(dev);
    if (mfd < 0) {
        fprintf(stderr, "mount ext4 on %s: %s\n", dev, strerror(errno));
        goto out;
    }
    if (fchownat(mfd, "", owner, owner, AT_EMPTY_PATH) < 0) {
        perror("chown the workspace");
        close(mfd);
        mfd = -1;
    }
out:
    if (lfd >= 0)
        close(lfd); /* the mount holds the device now */
    close(fd);
    return mfd;
}

static int write_proc(pid_t pid, const char *name, const char *val)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/%s", (int)pid, name);
    return write_file(path, val);
}

/* One create + rm. 0, or -1 with a message on stderr (everything made is undone). */
static int one_sandbox(int worker, long iter, int tpl)
{
    struct launch L;
    memset(&L, 0, sizeof L);
    L.worker = worker;
    L.ws_fd = -1;
    snprintf(L.staging, sizeof L.staging, "%s/stage%d", tmpdir, worker);
    snprintf(L.hosts, sizeof L.hosts, "%s/hosts%d", tmpdir, worker);
    char name[64], backing[160] = "";
    snprintf(name, sizeof name, "sb-%d-%ld", worker, iter);
    uid_t owner = UID_BASE + UID_SLOTS - 1 - (uid_t)worker; /* a slot nsbox reaches last */
    int ret = -1, pidfd = -1;
    pid_t pid = -1;
    int sp[2] = {-1, -1}, rp[2] = {-1, -1};

    if (opt.cgroup && cg_create(&L, name) < 0)
        goto out;
    if (opt.rootfs && opt.ws == WS_EXT4) {
        snprintf(backing, sizeof backing, "%s/%s.ext4", tmpdir, name);
        L.ws_fd = ws_ext4_make(backing, tpl, owner);
        if (L.ws_fd < 0)
            goto out;
    }
    if (pipe2(sp, O_CLOEXEC) < 0 || pipe2(rp, O_CLOEXEC) < 0) {
        perror("pipe");
        goto out;
    }
    L.sync_rd = sp[0], L.sync_wr = sp[1], L.report_rd = rp[0], L.report_wr = rp[1];
    struct clone_args a;
    memset(&a, 0, sizeof a);
    a.flags = CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC |
              CLONE_NEWNET | CLONE_PIDFD;
    a.pidfd = (uintptr_t)&pidfd;
    a.exit_signal = SIGCHLD;
    pid = (pid_t)syscall(SYS_clone3, &a, sizeof a);
    if (pid < 0) {
        perror("clone3");
        goto out;
    }
    if (pid == 0)
        child_main(&L);
    if (L.ws_fd >= 0)
        close(L.ws_fd); /* the child has its copy */
    L.ws_fd = -1;
    close(sp[0]), sp[0] = -1;
    close(rp[1]), rp[1] = -1;
    char map[64];
    snprintf(map, sizeof map, "%u %u 1\n", SANDBOX_UID, owner);
    if (write_proc(pid, "setgroups", "deny") < 0 || write_proc(pid, "uid_map", map) < 0 ||
        write_proc(pid, "gid_map", map) < 0) {
        perror("id maps");
        goto out;
    }
    if (write(sp[1], "g", 1) != 1 || write(sp[1], "n", 1) != 1) {
        perror("sync");
        goto out;
    }
    char msg[512];
    ssize_t n;
    do
        n = read(rp[0], msg, sizeof msg - 1);
    while (n < 0 && errno == EINTR);
    if (n != 0) {
        fprintf(stderr, "sandbox set-up failed: %.*s\n", n > 0 ? (int)n : 0, msg);
        goto out;
    }
    if (opt.show) {
        snprintf(msg, sizeof msg, "/proc/%d/cgroup", (int)pid);
        FILE *f = fopen(msg, "r");
        fprintf(stderr, "--- host's view of the sandbox's cgroups:\n");
        while (f && fgets(msg, sizeof msg, f))
            fputs(msg, stderr);
        if (f)
            fclose(f);
    }
    ret = 0;
out:
    /* rm: kill init (the pid namespace goes with it), reap, remove the cgroups and the file */
    if (pid > 0) {
        kill(pid, SIGKILL);
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
            ;
    }
    if (opt.cgroup && cg_destroy(&L) < 0)
        ret = -1;
    if (backing[0] && unlink(backing) < 0 && errno != ENOENT)
        ret = -1;
    if (L.ws_fd >= 0)
        close(L.ws_fd);
    for (int i = 0; i < 2; i++) {
        if (sp[i] >= 0)
            close(sp[i]);
        if (rp[i] >= 0)
            close(rp[i]);
    }
    if (pidfd >= 0)
        close(pidfd);
    return ret;
}

/* ---- set-up and clean-up of the bench's own things ------------------------------------------ */

/* The host image as nsbox uses it: /usr, the merged-/usr links, a generated /etc. Without nsbox's
 * image store, a small /etc of our own in the temporary directory. */
static int find_image(void)
{
    static const char *const host_entries[] = {"usr", "bin", "sbin", "lib", "lib32", "lib64",
                                               "libx32"};
    static char links[8][256];
    for (size_t i = 0; i < N_OF(host_entries); i++) {
        char p[64];
        struct stat st;
        snprintf(p, sizeof p, "/%s", host_entries[i]);
        if (lstat(p, &st) < 0)
            continue;
        if (S_ISDIR(st.st_mode) && !strcmp(host_entries[i], "usr"))
            image_has_usr = true;
        else if (S_ISLNK(st.st_mode)) {
            ssize_t n = readlink(p, links[n_image_links], sizeof links[0] - 1);
            if (n < 0)
                continue;
            links[n_image_links][n] = '\0';
            image_links[n_image_links][0] = host_entries[i];
            image_links[n_image_links][1] = links[n_image_links];
            n_image_links++;
        }
    }
    struct stat st;
    if (stat("/var/lib/nsbox/images/host/etc", &st) == 0 && S_ISDIR(st.st_mode)) {
        snprintf(image_etc, sizeof image_etc, "/var/lib/nsbox/images/host/etc");
        return 0;
    }
    snprintf(image_etc, sizeof image_etc, "%s/etc", tmpdir);
    char p[300];
    snprintf(p, sizeof p, "%s/passwd", image_etc);
    if (mkdir(image_etc, 0755) < 0)
        return perror(image_etc), -1;
    FILE *f = fopen(p, "w");
    if (!f)
        return perror(p), -1;
    fputs("root:x:0:0::/root:/bin/sh\nappuser:x:1000:1000::/workspace:/bin/sh\n", f);
    fclose(f);
    snprintf(p, sizeof p, "%s/hosts", image_etc);
    f = fopen(p, "w");
    if (!f)
        return perror(p), -1;
    fputs("127.0.0.1 localhost\n", f);
    fclose(f);
    return 0;
}

/* The cached empty filesystem nsbox copies into every workspace (workspace.c make_template):
 * mkfs.ext4 with nsbox's options, then lost+found removed. */
static int make_template(void)
{
    snprintf(template_path, sizeof template_path, "%s/template.ext4", tmpdir);
    int fd = open(template_path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0 || ftruncate(fd, (off_t)DISK_BYTES) < 0)
        return perror(template_path), -1;
    close(fd);
    char inodes[32];
    snprintf(inodes, sizeof inodes, "%llu", (unsigned long long)(DISK_BYTES / BYTES_PER_INODE));
    pid_t p = fork();
    if (p < 0)
        return perror("fork"), -1;
    if (p == 0) {
        const char *mkfs = access("/usr/sbin/mkfs.ext4", X_OK) == 0 ? "/usr/sbin/mkfs.ext4"
                                                                    : "/sbin/mkfs.ext4";
        execl(mkfs, mkfs, "-q", "-F", "-t", "ext4", "-m", "0", "-N", inodes, "-G", "1024", "-O",
              "^has_journal,^resize_inode,sparse_super2", "-E",
              "lazy_itable_init=1,nodiscard,num_backup_sb=0", "-e", "remount-ro", "-L",
              "workspace", template_path, (char *)NULL);
        _exit(127);
    }
    int st;
    if (waitpid(p, &st, 0) != p || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
        return fprintf(stderr, "mkfs.ext4 failed\n"), -1;
    fd = open(template_path, O_RDWR | O_CLOEXEC);
    if (fd < 0)
        return perror(template_path), -1;
    char dev[32];
    int lfd = loop_attach(fd, dev, sizeof dev);
    int mfd = lfd < 0 ? -1 : mount_dev(dev);
    int r = mfd >= 0 && unlinkat(mfd, "lost+found", AT_REMOVEDIR) == 0 ? 0 : -1;
    if (r < 0)
        perror("template: loop, mount or lost+found");
    if (mfd >= 0)
        close(mfd);
    if (lfd >= 0)
        close(lfd);
    fsync(fd);
    close(fd);
    return r;
}

/* The bench's own cgroup in every v1 hierarchy nsbox uses, below this process's cgroup there
 * (where nsbox puts its sandboxes' cgroups). */
static int cg_setup(void)
{
    char self[4096];
    int fd = open("/proc/self/cgroup", O_RDONLY | O_CLOEXEC);
    ssize_t n = fd < 0 ? -1 : read(fd, self, sizeof self - 1);
    if (fd >= 0)
        close(fd);
    if (n <= 0)
        return perror("/proc/self/cgroup"), -1;
    self[n] = '\0';
    unsigned hier_of[5] = {0};
    for (size_t c = 0; c < N_OF(v1_names); c++) {
        char mount_at[128];
        struct statfs sf;
        snprintf(mount_at, sizeof mount_at, "/sys/fs/cgroup/%s", v1_names[c]);
        if (statfs(mount_at, &sf) < 0 || sf.f_type != CGROUP_SUPER_MAGIC) {
            fprintf(stderr, "no cgroup v1 %s hierarchy at %s\n", v1_names[c], mount_at);
            return -1;
        }
        /* "ID:ctl,ctl:/path" lines */
        unsigned id = 0;
        char path[512] = "", ctls[64] = "";
        for (char *line = self; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
            unsigned hid;
            char cl[64], pa[512];
            if (sscanf(line, "%u:%63[^:]:%511[^\n]", &hid, cl, pa) != 3)
                continue;
            char list[66];
            snprintf(list, sizeof list, ",%s,", cl);
            char want[32];
            snprintf(want, sizeof want, ",%s,", v1_names[c]);
            if (strstr(list, want)) {
                id = hid;
                snprintf(path, sizeof path, "%s", pa);
                snprintf(ctls, sizeof ctls, "%s", cl);
                break;
            }
        }
        if (!path[0]) {
            fprintf(stderr, "this process has no %s cgroup\n", v1_names[c]);
            return -1;
        }
        bool seen = false;
        for (size_t i = 0; i < n_cg; i++)
            seen |= hier_of[i] == id;
        if (seen)
            continue;
        hier_of[n_cg] = id;
        snprintf(cg_ctl[n_cg], sizeof cg_ctl[0], "%s", ctls);
        snprintf(cg_parent[n_cg], sizeof cg_parent[0], "%s%s/nsbox-floor.%d", mount_at,
                 strcmp(path, "/") ? path : "", (int)getpid());
        if (mkdir(cg_parent[n_cg], 0755) < 0)
            return perror(cg_parent[n_cg]), -1;
        n_cg++;
    }
    return 0;
}

static void cg_teardown(void)
{
    for (size_t i = 0; i < n_cg; i++) {
        /* a sandbox's cgroups left by a worker that was stopped mid-iteration first */
        for (int tries = 0; rmdir(cg_parent[i]) < 0 && errno == EBUSY && tries < 100; tries++) {
            DIR *d = opendir(cg_parent[i]);
            struct dirent *de;
            while (d && (de = readdir(d)))
                if (de->d_type == DT_DIR && de->d_name[0] != '.') {
                    char p[2900];
                    snprintf(p, sizeof p, "%s/%s", cg_parent[i], de->d_name);
                    rmdir(p);
                }
            if (d)
                closedir(d);
            usleep(10000);
        }
        if (access(cg_parent[i], F_OK) == 0)
            fprintf(stderr, "warning: could not remove %s\n", cg_parent[i]);
    }
    n_cg = 0;
}

static void rm_tmpdir(void)
{
    if (!tmpdir[0])
        return;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf -- '%s'", tmpdir);
    if (system(cmd) != 0)
        fprintf(stderr, "warning: could not remove %s\n", tmpdir);
    tmpdir[0] = '\0';
}

static void usage(void)
{
    fprintf(stderr, "usage: setup_floor [SECONDS] [--no-cgroup] [--no-rootfs] [--no-masks] "
                    "[--no-net] [--no-harden] [--no-seccomp] [--ws=ext4|tmpfs|none] [-v] "
                    "[--show]\n");
    exit(2);
}

static int busy_ticks(unsigned long long *busy, unsigned long long *total)
{
    FILE *f = fopen("/proc/stat", "r");
    if (!f)
        return -1;
    unsigned long long v[10] = {0};
    int n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1],
                   &v[2], &v[3], &v[4], &v[5], &v[6], &v[7], &v[8], &v[9]);
    fclose(f);
    if (n < 4)
        return -1;
    *total = 0;
    for (int i = 0; i < n; i++)
        *total += v[i];
    *busy = *total - v[3] - v[4];
    return 0;
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--no-cgroup"))
            opt.cgroup = false;
        else if (!strcmp(a, "--no-rootfs"))
            opt.rootfs = false;
        else if (!strcmp(a, "--no-masks"))
            opt.masks = false;
        else if (!strcmp(a, "--no-net"))
            opt.net = false;
        else if (!strcmp(a, "--no-harden"))
            opt.harden = false;
        else if (!strcmp(a, "--no-seccomp"))
            opt.seccomp = false;
        else if (!strcmp(a, "--ws=ext4"))
            opt.ws = WS_EXT4;
        else if (!strcmp(a, "--ws=tmpfs"))
            opt.ws = WS_TMPFS;
        else if (!strcmp(a, "--ws=none"))
            opt.ws = WS_NONE;
        else if (!strcmp(a, "-v"))
            opt.verbose = true;
        else if (!strcmp(a, "--show"))
            opt.show = true;
        else if (i == 1 && a[0] != '-')
            opt.seconds = atof(a);
        else
            usage();
    }
    if (opt.seconds <= 0)
        opt.seconds = 3.0;
    if (geteuid() != 0) {
        fprintf(stderr, "setup_floor: needs root (loop devices, cgroups)\n");
        return 1;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);

    snprintf(tmpdir, sizeof tmpdir, "/var/tmp/setup_floor.XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        tmpdir[0] = '\0';
        return 1;
    }
    int rc = 1, tpl = -1;
    pid_t workers[2] = {-1, -1};
    if (find_image() < 0)
        goto out;
    for (int w = 0; w < 2; w++) {
        char p[128];
        snprintf(p, sizeof p, "%s/stage%d", tmpdir, w);
        if (mkdir(p, 0755) < 0)
            goto out;
        snprintf(p, sizeof p, "%s/hosts%d", tmpdir, w);
        FILE *f = fopen(p, "w");
        if (!f)
            goto out;
        fprintf(f, "127.0.0.1 localhost\n::1 localhost\n127.0.1.1 floor-%d\n", w);
        fclose(f);
    }
    if (opt.rootfs && opt.ws == WS_EXT4) {
        if (make_template() < 0)
            goto out;
        tpl = open(template_path, O_RDONLY | O_CLOEXEC);
        if (tpl < 0)
            goto out;
    }
    if (opt.cgroup && cg_setup() < 0)
        goto out;

    if (opt.show) {
        rc = one_sandbox(0, 0, tpl) < 0 ? 1 : 0;
        goto out;
    }
    int counts[2];
    if (pipe(counts) < 0)
        goto out;
    unsigned long long b0, t0, b1, t1;
    busy_ticks(&b0, &t0);
    double w0 = now_s();
    for (int c = 0; c < 2; c++) {
        workers[c] = fork();
        if (workers[c] < 0) {
            perror("fork");
            break;
        }
        if (workers[c] > 0)
            continue;
        close(counts[0]);
        long n = 0;
        double start = now_s(), end = start + opt.seconds;
        int ok = 1;
        while (!stop && now_s() < end) {
            if (one_sandbox(c, n, tpl) < 0) {
                ok = 0;
                break;
            }
            n++;
        }
        double rate[2] = {ok ? (double)n / (now_s() - start) : -1.0, (double)n};
        _exit(write(counts[1], rate, sizeof rate) == (ssize_t)sizeof rate && ok ? 0 : 1);
    }
    close(counts[1]);
    double total = 0, iters = 0, r[2];
    int got = 0, failed = 0, status;
    for (int c = 0; c < 2; c++)
        if (read(counts[0], r, sizeof r) == (ssize_t)sizeof r && r[0] >= 0) {
            total += r[0];
            iters += r[1];
            got++;
        }
    for (int c = 0; c < 2; c++)
        if (workers[c] > 0) {
            while (waitpid(workers[c], &status, 0) < 0 && errno == EINTR)
                ;
            failed |= !WIFEXITED(status) || WEXITSTATUS(status) != 0;
            workers[c] = -1;
        }
    double wall = now_s() - w0;
    busy_ticks(&b1, &t1);
    if (failed || got != 2 || stop)
        goto out;
    printf("%.0f\n", total);
    if (opt.verbose) {
        double busy = t1 > t0 ? (double)(b1 - b0) / (double)(t1 - t0) : 0;
        long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
        fprintf(stderr, "%.0f iterations in %.2f s, machine busy %.0f%%, %.2f ms CPU per "
                        "iteration\n",
                iters, wall, busy * 100, busy * (double)ncpu * wall / iters * 1000);
    }
    rc = 0;
out:
    for (int c = 0; c < 2; c++)
        if (workers[c] > 0) {
            kill(workers[c], SIGTERM);
            waitpid(workers[c], NULL, 0);
        }
    if (tpl >= 0)
        close(tpl);
    cg_teardown();
    rm_tmpdir();
    return rc;
}
