/* The in-sandbox attacker (attack.c): what beyond the sandbox it could reach. Socket families
 * and terminals, /proc, /sys and cgroups, the descriptors and working directory it was handed,
 * the launcher, the host's files and processes, the root filesystem, the network. */
#define _GNU_SOURCE
#include "attack.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/capability.h>
#include <linux/magic.h>
#include <linux/sched.h>
#include <net/if.h>
#include <netinet/in.h>
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
#include <sys/mman.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

/* ---- sockets -------------------------------------------------------------------------------- */

static struct outcome try_socket(long family, long type, long proto, bool pair)
{
    long r;
    int sv[2];
    if (pair)
        r = syscall(SYS_socketpair, family, type, proto, sv);
    else
        r = syscall(SYS_socket, family, type, proto);
    struct outcome o = now(r);
    if (r >= 0) {
        if (pair) {
            close(sv[0]);
            close(sv[1]);
        } else {
            close((int)r);
        }
    }
    return o;
}

void attack_host_sockets(void)
{
    static const int denied[] = {EAFNOSUPPORT, EPERM, 0};
    report("socket_packet_raw", try_socket(AF_PACKET, SOCK_RAW, 0, false), denied);
    report("socket_packet_dgram", try_socket(AF_PACKET, SOCK_DGRAM, 0, false), denied);
    report("socket_packet_highbit", try_socket(0x100000000L | AF_PACKET, SOCK_RAW, 0, false),
           denied);
    report("socket_inet_raw", try_socket(AF_INET, SOCK_RAW, IPPROTO_RAW, false), denied);
    report("socket_inet6_raw", try_socket(AF_INET6, SOCK_RAW, IPPROTO_RAW, false), denied);
    report("socket_vsock", try_socket(AF_VSOCK, SOCK_STREAM, 0, false), denied);
    report("socketpair_vsock", try_socket(AF_VSOCK, SOCK_STREAM, 0, true), denied);
    report("socket_alg", try_socket(AF_ALG, SOCK_SEQPACKET, 0, false), denied);
    report("socket_key", try_socket(AF_KEY, SOCK_RAW, 2 /* PF_KEY_V2 */, false), denied);
    /* a family one of the equality rules names, with the upper 32 bits the kernel drops */
    report("socket_key_highbit",
           try_socket((1L << 32) | AF_KEY, SOCK_RAW, 2 /* PF_KEY_V2 */, false), denied);
    report("socket_unspec_highbit_unix", try_socket(0x100000000L | AF_UNIX, SOCK_STREAM, 0, false),
           denied);
    /* Every other family up to AF_MAX (46 here): only UNIX, INET, INET6 and NETLINK may pass. */
    char bad[512] = "";
    size_t k = 0;
    for (long fam = 0; fam < 64; fam++) {
        if (fam == AF_UNIX || fam == AF_INET || fam == AF_INET6 || fam == AF_NETLINK) continue;
        static const long types[] = {SOCK_DGRAM, SOCK_STREAM, SOCK_RAW, SOCK_SEQPACKET};
        for (size_t t = 0; t < 4; t++) {
            struct outcome o = try_socket(fam, types[t], 0, false);
            if (!failed_with(&o, denied) && k + 32 < sizeof bad)
                k += (size_t)snprintf(bad + k, sizeof bad - k, "%s%ld/%ld:%s", k ? "," : "", fam,
                                      types[t], o.ret >= 0 ? "created" : ename(o.err));
        }
    }
    emit("socket_other_families", k == 0,
         k ? "reached the family's code: %s"
           : "families 0-63 except 1,2,10,16: all EAFNOSUPPORT/EPERM%s",
         bad);
}

/* ---- terminals ------------------------------------------------------------------------------ */

static long p_tty_ioctl_ctty(const void *a)
{
    /* A terminal of our own as controlling tty, so that the kernel, were the ioctl let through,
     * would get as far as reading the (bad) character pointer: EFAULT. The filter says EPERM. */
    if (setsid() < 0) return -1;
    int m = open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (m < 0) return -1;
    int unlock = 0;
    if (ioctl(m, TIOCSPTLCK, &unlock) < 0) return -1;
    int s = ioctl(m, TIOCGPTPEER, O_RDWR); /* opens the slave; becomes our controlling tty */
    if (s < 0) {
        char name[64];
        int n;
        if (ioctl(m, TIOCGPTN, &n) < 0) return -1;
        snprintf(name, sizeof name, "/dev/pts/%d", n);
        s = open(name, O_RDWR);
        if (s < 0) return -1;
    }
    ioctl(s, TIOCSCTTY, 0);
    return syscall(SYS_ioctl, (long)s, *(const unsigned long *)a, BAD);
}

void attack_host_terminals(void)
{
    static const int eperm[] = {EPERM, 0};
    /* fd -1: if the filter let the ioctl through, the kernel would say EBADF. */
    report("ioctl_tiocsti", now(syscall(SYS_ioctl, -1L, 0x5412L, BAD)), eperm);
    report("ioctl_tiocsti_highbit", now(syscall(SYS_ioctl, -1L, 0x100005412L, BAD)), eperm);
    report("ioctl_tioclinux", now(syscall(SYS_ioctl, -1L, 0x541cL, BAD)), eperm);
    report("ioctl_tioclinux_highbit", now(syscall(SYS_ioctl, -1L, 0xffffffff0000541cL, BAD)),
           eperm);
    unsigned long req = 0x5412, hreq = 0x100005412UL;
    report("ioctl_tiocsti_own_ctty", in_child(p_tty_ioctl_ctty, &req), eperm);
    report("ioctl_tiocsti_own_ctty_highbit", in_child(p_tty_ioctl_ctty, &hreq), eperm);
}

/* The real thing, on the terminal nsbox's caller handed us as stdin: push a character into its
 * input queue, which the caller's shell would read once the sandbox is gone. Only run when the
 * test gives us a terminal of its own (--tiocsti-stdin). */
void attack_host_tiocsti_stdin(void)
{
    static const int eperm[] = {EPERM, 0};
    char c = 'Z';
    report("ioctl_tiocsti_callers_terminal", now(syscall(SYS_ioctl, 0L, 0x5412L, (long)&c)), eperm);
    report("ioctl_tiocsti_callers_terminal_highbit",
           now(syscall(SYS_ioctl, 0L, 0x100005412L, (long)&c)), eperm);
}

/* ---- /proc, /sys, cgroups: writes and reads ------------------------------------------------ */

/* Open for writing only: a successful open is already the failure; nothing is ever written. */
static void probe_open_write(const char *name, const char *path)
{
    int fd = open(path, O_WRONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    struct outcome o = now(fd);
    if (fd >= 0) close(fd);
    static const int deny[] = {EROFS, EACCES, EPERM, ENOENT, 0};
    char d[300];
    describe(&o, d, sizeof d);
    emit(name, failed_with(&o, deny), "%s: %s%s", path, d,
         o.err == ENOENT ? " (absent in the sandbox)" : "");
}

/* Blocked when it cannot be opened, or reads as empty (masked with /dev/null). */
static void probe_read(const char *name, const char *path)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        emit(name, true, "%s: open %s%s", path, ename(errno),
             errno == ENOENT ? " (absent here)" : "");
        return;
    }
    char buf[256];
    ssize_t n = read(fd, buf, sizeof buf);
    int e = errno;
    close(fd);
    if (n < 0)
        emit(name, true, "%s: read %s", path, ename(e));
    else
        emit(name, n == 0, n == 0 ? "%s: reads as empty (masked)" : "%s: read %zd bytes", path, n);
}

/* A read that finds nothing does not tell a mask from a file that is empty to this user (its
 * own keys, none; an address list of zeros): the masked files must be the sandbox's /dev/null,
 * bound over them, wherever the kernel has them. */
static void probe_masked(const char *name, const char *path)
{
    struct stat st;
    if (stat(path, &st) < 0) {
        emit(name, errno == ENOENT, "%s: stat %s%s", path, ename(errno),
             errno == ENOENT ? " (absent here)" : "");
        return;
    }
    bool null = S_ISCHR(st.st_mode) && st.st_rdev == makedev(1, 3);
    emit(name, null, null ? "%s: /dev/null bound over it" : "%s: not masked (mode %o)", path,
         (unsigned)st.st_mode);
}

static void probe_kallsyms(void)
{
    char *s = read_file("/proc/kallsyms", NULL);
    if (!s) {
        emit("kallsyms_addresses_hidden", true, "/proc/kallsyms unreadable: %s", ename(errno));
        return;
    }
    unsigned long nonzero = 0, lines = 0;
    for (char *l = s; *l && lines < 200;) {
        if (strtoull(l, NULL, 16) != 0) nonzero++;
        lines++;
        char *nl = strchr(l, '\n');
        if (!nl) break;
        l = nl + 1;
    }
    emit("kallsyms_addresses_hidden", nonzero == 0, "%lu of the first %lu symbols have an address",
         nonzero, lines);
}

void attack_host_proc_sys(void)
{
    probe_open_write("write_proc_sysrq_trigger", "/proc/sysrq-trigger");
    probe_open_write("write_proc_sys_core_pattern", "/proc/sys/kernel/core_pattern");
    probe_open_write("write_proc_sys_modprobe", "/proc/sys/kernel/modprobe");
    probe_open_write("write_proc_sys_drop_caches", "/proc/sys/vm/drop_caches");
    probe_open_write("write_proc_sys_ns_last_pid", "/proc/sys/kernel/ns_last_pid");
    probe_open_write("write_proc_sys_hostname", "/proc/sys/kernel/hostname");
    probe_open_write("write_proc_sys_ip_forward", "/proc/sys/net/ipv4/ip_forward");
    probe_open_write("write_proc_sys_max_user_namespaces", "/proc/sys/user/max_user_namespaces");
    int fd = open("/proc/sys/.nsbox-probe", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    struct outcome o = now(fd);
    if (fd >= 0) close(fd);
    static const int deny[] = {EROFS, EACCES, EPERM, ENOENT, 0};
    report("create_in_proc_sys", o, deny);
    probe_open_write("write_sys_uevent_helper", "/sys/kernel/uevent_helper");
    probe_open_write("write_sys_fs_cgroup_procs", "/sys/fs/cgroup/cgroup.procs");
    probe_open_write("write_sys_fs_cgroup_release_agent", "/sys/fs/cgroup/memory/release_agent");
    probe_open_write("write_sys_power_state", "/sys/power/state");
    attack_cgview(); /* /sys: only the sandbox's own cgroup, read-only */
    /* cgroup namespace: the sandbox sees its own cgroups as the root, never the host's path. */
    char *cg = read_file("/proc/self/cgroup", NULL);
    bool rooted = cg != NULL;
    char first_bad[256] = "";
    for (char *l = cg; l && *l;) {
        char *nl = strchr(l, '\n');
        if (nl) *nl = '\0';
        char *path = strrchr(l, ':');
        if (path && strcmp(path + 1, "/") && rooted) {
            rooted = false;
            snprintf(first_bad, sizeof first_bad, "%s", l);
        }
        l = nl ? nl + 1 : NULL;
    }
    emit("cgroup_namespace_hides_host_path", rooted,
         rooted ? "every hierarchy reads '/'%s" : "host cgroup path visible: %s", first_bad);

    probe_read("read_proc_kcore", "/proc/kcore");
    probe_read("read_proc_keys", "/proc/keys");
    probe_read("read_proc_timer_list", "/proc/timer_list");
    probe_read("read_proc_sched_debug", "/proc/sched_debug");
    probe_read("read_proc_kmsg", "/proc/kmsg");
    probe_read("read_dev_kmsg", "/dev/kmsg");
    probe_read("read_dev_mem", "/dev/mem");
    static const char *const masked[] = {"kcore", "keys", "timer_list", "sched_debug",
                                         "latency_stats", "timer_stats", "kallsyms"};
    for (size_t i = 0; i < sizeof masked / sizeof *masked; i++) {
        char name[64], path[64];
        snprintf(name, sizeof name, "proc_masked_%s", masked[i]);
        snprintf(path, sizeof path, "/proc/%s", masked[i]);
        probe_masked(name, path);
    }
    probe_kallsyms();
}

/* ---- file descriptors, the launcher, the working directory -------------------------------- */

void attack_host_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (!d) {
        emit("fds_only_stdio", false, "cannot list /proc/self/fd: %s", ename(errno));
        return;
    }
    int self = dirfd(d);
    char extra[1024] = "";
    size_t k = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.') continue;
        int fd = atoi(de->d_name);
        if (fd <= 2 || fd == self) continue;
        char p[64], target[256] = "?";
        snprintf(p, sizeof p, "/proc/self/fd/%d", fd);
        ssize_t n = readlink(p, target, sizeof target - 1);
        if (n >= 0) target[n] = '\0';
        if (k + 300 < sizeof extra)
            k += (size_t)snprintf(extra + k, sizeof extra - k, " %d->%s", fd, target);
    }
    closedir(d);
    emit("fds_only_stdio", k == 0, k ? "extra descriptors:%s" : "only 0, 1, 2 open%s", extra);
    /* None of 0-2 may be a directory (a host directory as stdin would be a way out). */
    bool dirs = false;
    for (int fd = 0; fd <= 2; fd++) {
        struct stat st;
        if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) dirs = true;
    }
    emit("stdio_not_directories", !dirs, dirs ? "a standard descriptor is a directory" : "ok");
}

void attack_host_launcher(void)
{
    static const int deny[] = {EACCES, EPERM, ENOENT, 0};
    char buf[PATH_MAX];
    ssize_t n = readlink("/proc/1/exe", buf, sizeof buf - 1);
    if (n >= 0) buf[n] = '\0';
    struct outcome o = {.ret = n, .err = n < 0 ? errno : 0};
    char d[PATH_MAX + 64];
    describe(&o, d, 256);
    emit("readlink_proc_1_exe", failed_with(&o, deny), "%s%s%s", d, n >= 0 ? " -> " : "",
         n >= 0 ? buf : "");
    int fd = open("/proc/1/exe", O_RDONLY | O_CLOEXEC);
    o = now(fd);
    if (fd >= 0) close(fd);
    report("open_proc_1_exe_rdonly", o, deny);
    /* CVE-2019-5736: open the runtime's binary, then reopen it for writing. */
    static const int deny_w[] = {EACCES, EPERM, ENOENT, ETXTBSY, 0};
    fd = open("/proc/1/exe", O_WRONLY | O_CLOEXEC);
    o = now(fd);
    if (fd >= 0) close(fd);
    report("open_proc_1_exe_wronly", o, deny_w);
    fd = open("/proc/1/exe", O_PATH | O_CLOEXEC);
    o = now(fd);
    if (fd >= 0) {
        char p[64];
        snprintf(p, sizeof p, "/proc/self/fd/%d", fd);
        int w = open(p, O_WRONLY | O_CLOEXEC);
        emit("open_proc_1_exe_path_then_write", w < 0,
             "O_PATH open SUCCEEDED; reopen for writing: %s", w < 0 ? ename(errno) : "SUCCEEDED");
        if (w >= 0) close(w);
        close(fd);
    } else {
        report("open_proc_1_exe_path_then_write", o, deny);
    }
    /* Every other process's executable: either unreachable, or a file inside the root. */
    DIR *d2 = opendir("/proc");
    char bad[512] = "";
    size_t k = 0;
    int seen = 0;
    struct dirent *de;
    while (d2 && (de = readdir(d2))) {
        int pid = atoi(de->d_name);
        if (pid <= 0 || pid == getpid()) continue;
        seen++;
        char p[64];
        snprintf(p, sizeof p, "/proc/%d/exe", pid);
        int f = open(p, O_RDONLY | O_CLOEXEC);
        if (f < 0) continue;
        struct stat a, b;
        char t[PATH_MAX];
        ssize_t m = readlink(p, t, sizeof t - 1);
        bool inside = false;
        if (m >= 0) {
            t[m] = '\0';
            inside = fstat(f, &a) == 0 && stat(t, &b) == 0 && a.st_dev == b.st_dev &&
                     a.st_ino == b.st_ino;
        }
        close(f);
        if (!inside && k + 100 < sizeof bad)
            k += (size_t)snprintf(bad + k, sizeof bad - k, " pid %d -> %s", pid, m >= 0 ? t : "?");
    }
    if (d2) closedir(d2);
    if (k)
        emit("other_exes_inside_root", false, "executable outside the root reachable:%s", bad);
    else
        emit("other_exes_inside_root", true, "%d other processes checked", seen);
}

static bool same_file(const char *a, const char *b)
{
    struct stat x, y;
    return stat(a, &x) == 0 && stat(b, &y) == 0 && x.st_dev == y.st_dev && x.st_ino == y.st_ino;
}

void attack_host_cwd(void)
{
    /* CVE-2024-21626: a working directory outside the root (a leaked host directory) lets
     * "../.." walk the host's tree. Inside the root, getcwd works and ".." stops at "/". */
    char cwd[PATH_MAX];
    char *c = getcwd(cwd, sizeof cwd);
    int e = errno;
    char up[200] = "";
    for (int i = 0; i < 40; i++)
        strcat(up, "../");
    bool root_reached = same_file(up, "/");
    bool ok = c && cwd[0] == '/' && root_reached;
    emit("cwd_inside_root", ok, "getcwd=%s; 40x.. %s the root", c ? cwd : ename(e),
         root_reached ? "is" : "is NOT");
    emit("root_parent_is_root", same_file("/..", "/"), "stat(/..) vs stat(/)");
    char link[PATH_MAX];
    ssize_t n = readlink("/proc/self/cwd", link, sizeof link - 1);
    if (n >= 0) link[n] = '\0';
    emit("proc_self_cwd_reachable", n > 0 && link[0] == '/' && !strstr(link, "(unreachable)"),
         "/proc/self/cwd -> %s", n >= 0 ? link : ename(errno));
}

/* ---- the host: files, processes, environment ------------------------------------------------ */

void attack_host_hidden_path(const char *path)
{
    char name[PATH_MAX + 32];
    snprintf(name, sizeof name, "host_path_invisible:%s", path);
    struct stat st;
    int r = lstat(path, &st);
    if (r < 0) {
        emit(name, errno == ENOENT || errno == EACCES, "lstat %s", ename(errno));
        return;
    }
    emit(name, false, "%s exists in the sandbox (mode %o, size %lld)", path, st.st_mode,
         (long long)st.st_size);
}

void attack_host_view(pid_t host_pid)
{
    static const char *const fixed[] = {
        "/etc/shadow", "/etc/gshadow", "/etc/sudoers",   "/root",    "/home",
        "/var",        "/boot",        "/srv",           "/mnt",     "/media",
        "/opt",        "/run/nsbox",   "/var/lib/nsbox", "/etc/ssh", "/etc/machine-id",
        NULL};
    for (const char *const *p = fixed; *p; p++)
        attack_host_hidden_path(*p);
    /* Processes: only the sandbox's own (init, this prober, the probes' children). */
    DIR *d = opendir("/proc");
    int count = 0, maxpid = 0;
    struct dirent *de;
    while (d && (de = readdir(d))) {
        int pid = atoi(de->d_name);
        if (pid > 0) {
            count++;
            if (pid > maxpid) maxpid = pid;
        }
    }
    if (d) closedir(d);
    emit("host_processes_invisible", d && count <= 8 && maxpid < 1000,
         "%d processes visible, highest pid %d", count, maxpid);
    if (host_pid > 0) {
        int r = kill(host_pid, 0);
        struct outcome o = now(r);
        static const int esrch[] = {ESRCH, 0};
        char name[64];
        snprintf(name, sizeof name, "host_pid_unreachable");
        char dd[128];
        describe(&o, dd, sizeof dd);
        emit(name, failed_with(&o, esrch), "kill(%d, 0): %s", (int)host_pid, dd);
    }
    extern char **environ;
    char leaked[512] = "";
    size_t k = 0;
    for (char **e = environ; *e; e++)
        if ((!strncmp(*e, "HOSTENV_", 8) || !strncmp(*e, "NSBOX_", 6) || !strncmp(*e, "SSH_", 4) ||
             !strncmp(*e, "SUDO_", 5)) &&
            k + 80 < sizeof leaked)
            k += (size_t)snprintf(leaked + k, sizeof leaked - k, " %.60s", *e);
    emit("host_environment_not_inherited", k == 0, k ? "leaked:%s" : "clean%s", leaked);
}

/* ---- the root filesystem: read-only, nosuid, nodev ----------------------------------------- */

static void probe_create(const char *name, const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    struct outcome o = now(fd);
    if (fd >= 0) {
        close(fd);
        unlink(path);
    }
    /* ENOENT: procfs refuses to create anything at its top level. */
    static const int deny[] = {EROFS, EACCES, EPERM, ENOENT, 0};
    report(name, o, deny);
}

void attack_host_rootfs(void)
{
    probe_create("write_root", "/.nsbox-probe");
    probe_create("write_usr", "/usr/.nsbox-probe");
    probe_create("write_usr_bin", "/usr/bin/.nsbox-probe");
    probe_create("write_etc", "/etc/.nsbox-probe");
    probe_create("write_proc_root", "/proc/.nsbox-probe");
    static const char *const mounts[] = {"/",        "/usr", "/etc",     "/workspace", "/tmp",
                                         "/dev/shm", "/run", "/dev/pts", NULL};
    char bad[256] = "";
    size_t k = 0;
    for (const char *const *m = mounts; *m; m++) {
        struct statvfs sv;
        if (statvfs(*m, &sv) < 0) continue;
        bool need_nodev = strcmp(*m, "/dev/pts") != 0;
        if (!(sv.f_flag & ST_NOSUID) || (need_nodev && !(sv.f_flag & ST_NODEV)))
            if (k + 40 < sizeof bad)
                k += (size_t)snprintf(bad + k, sizeof bad - k, " %s(flags %#lx)", *m, sv.f_flag);
    }
    emit("mounts_nosuid_nodev", k == 0, k ? "missing nosuid/nodev:%s" : "all nosuid (and nodev)%s",
         bad);
    /* the host's /usr and /etc are root's: appuser's create fails on their modes alone, so the
     * mounts' own flag is what says they are read-only */
    static const char *const ro[] = {"/", "/usr", "/usr/bin", "/etc", NULL};
    k = 0;
    bad[0] = '\0';
    for (const char *const *m = ro; *m; m++) {
        struct statvfs sv;
        if (statvfs(*m, &sv) == 0 && (sv.f_flag & ST_RDONLY))
            continue;
        if (k + 40 < sizeof bad)
            k += (size_t)snprintf(bad + k, sizeof bad - k, " %s", *m);
    }
    emit("mounts_read_only", k == 0, k ? "not read-only mounts:%s" : "/ /usr /usr/bin /etc%s",
         bad);
}

/* ---- network: policy none ------------------------------------------------------------------- */

static struct outcome udp_connect(int family, const char *addr)
{
    int s = socket(family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (s < 0) return now(-1);
    int r;
    if (family == AF_INET) {
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(9)};
        inet_pton(AF_INET, addr, &a.sin_addr);
        r = connect(s, (struct sockaddr *)&a, sizeof a);
    } else {
        struct sockaddr_in6 a = {.sin6_family = AF_INET6, .sin6_port = htons(9)};
        inet_pton(AF_INET6, addr, &a.sin6_addr);
        r = connect(s, (struct sockaddr *)&a, sizeof a);
    }
    struct outcome o = now(r);
    close(s);
    return o;
}

static struct outcome tcp_connect_local(int port)
{
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (s < 0) return now(-1);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int r = connect(s, (struct sockaddr *)&a, sizeof a);
    if (r < 0 && errno == EINPROGRESS) {
        struct pollfd p = {s, POLLOUT, 0};
        if (poll(&p, 1, 2000) == 1) {
            int err = 0;
            socklen_t l = sizeof err;
            getsockopt(s, SOL_SOCKET, SO_ERROR, &err, &l);
            r = err ? -1 : 0;
            errno = err;
        } else {
            errno = ETIMEDOUT;
        }
    }
    struct outcome o = now(r);
    close(s);
    return o;
}

void attack_host_network(int host_port, const char *abstract)
{
    struct if_nameindex *ifs = if_nameindex();
    char names[256] = "";
    size_t k = 0;
    bool only_lo = ifs != NULL;
    for (struct if_nameindex *i = ifs; i && i->if_index; i++) {
        if (strcmp(i->if_name, "lo")) only_lo = false;
        if (k + 20 < sizeof names)
            k += (size_t)snprintf(names + k, sizeof names - k, "%s%s", k ? "," : "", i->if_name);
    }
    if (ifs) if_freenameindex(ifs);
    emit("net_only_loopback", only_lo, "interfaces: %s", names);
    /* UDP connect only picks a route: nothing is sent. TEST-NET addresses. */
    static const int unreach[] = {ENETUNREACH, EHOSTUNREACH, EADDRNOTAVAIL, 0};
    report("net_no_route_ipv4", udp_connect(AF_INET, "192.0.2.1"), unreach);
    report("net_no_route_ipv6", udp_connect(AF_INET6, "2001:db8::1"), unreach);
    if (host_port > 0) {
        static const int refused[] = {ECONNREFUSED, ENETUNREACH, ETIMEDOUT, 0};
        report("net_host_loopback_tcp_unreachable", tcp_connect_local(host_port), refused);
    }
    if (abstract) {
        int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_un a = {.sun_family = AF_UNIX};
        size_t l = strlen(abstract);
        if (l > sizeof a.sun_path - 2) l = sizeof a.sun_path - 2;
        memcpy(a.sun_path + 1, abstract, l);
        int r = connect(s, (struct sockaddr *)&a,
                        (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + l));
        struct outcome o = now(r);
        close(s);
        static const int refused[] = {ECONNREFUSED, ENOENT, 0};
        report("net_host_abstract_unix_unreachable", o, refused);
    }
}
