/* The in-sandbox attacker: run inside an nsbox sandbox, it attempts every attack the security
 * tests know of and prints one JSON object per probe on stdout:
 *
 *     {"name": "mount", "blocked": true, "detail": "ret=-1 errno=EPERM"}
 *
 * "blocked": true means the defence held. tests/security/test_attacks.py runs it, checks that
 * every probe it expects is present and blocked, and prints the table.
 *
 * Probes are side-effect free: syscalls get bad pointers or bad descriptors, so that a call the
 * filter lets through fails with EFAULT/EBADF (and is reported as not blocked) while a blocked one
 * fails with EPERM/ENOSYS before the kernel looks at its arguments. Probes that would change the
 * prober itself if they succeeded (unshare, clone, personality, setuid, foreign ABIs that the
 * filter answers with a process kill) run in a forked child; death by SIGSYS counts as blocked.
 *
 * Usage:
 *   attack [--host-pid N] [--host-port P] [--abstract NAME] [--hidden PATH]... [--tiocsti-stdin]
 *   attack inspect [--secret S] [--mount PATH:KIND]... [PATH...]   (hostile-image checks)
 *   attack mkfiles DIR MAX SECONDS                                  (inode/file-count abuse)
 *   attack holdfiles TARGET MAPS          (open files held until stdin closes: file table)
 *   attack setid DIR                           (the set-id probes alone, with DIR their place)
 *   attack ids                          (its effective uid and capabilities, as run: set-id?)
 *
 * Static (tests/CMakeLists.txt), so that it runs in any image. x86_64 only for the foreign-ABI
 * probes. Its parts: this file (output, the probe runner, syscalls, other processes, foreign
 * ABIs, devices and set-id files, the modes), attack_self.c (the prober's own powers) and
 * attack_host.c (what beyond the sandbox it could reach); attack.h is what they share. */
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
#include <sys/resource.h>
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
#include <sys/xattr.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

/* ---- output ------------------------------------------------------------------------------- */

static void json_str(char *out, size_t cap, const char *s)
{
    size_t k = 0;
    for (; *s && k + 8 < cap; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            out[k++] = '\\';
            out[k++] = (char)c;
        } else if (c < 0x20 || c >= 0x7f) {
            k += (size_t)snprintf(out + k, cap - k, "\\u%04x", c);
        } else {
            out[k++] = (char)c;
        }
    }
    out[k] = '\0';
}

/* One line per probe, written with write(2) in one piece: forked children never inherit a
 * half-filled stdio buffer, and a line is never interleaved. */
void emit(const char *name, bool blocked, const char *fmt, ...)
{
    char detail[1024], ename[512], edetail[2200], line[3000];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    json_str(ename, sizeof ename, name);
    json_str(edetail, sizeof edetail, detail);
    int n = snprintf(line, sizeof line, "{\"name\": \"%s\", \"blocked\": %s, \"detail\": \"%s\"}\n",
                     ename, blocked ? "true" : "false", edetail);
    if (n > 0 && write(1, line, (size_t)n) < 0) _exit(3);
}

const char *ename(int e)
{
    const char *n = strerrorname_np(e);
    static char buf[32];
    if (n) return n;
    snprintf(buf, sizeof buf, "errno%d", e);
    return buf;
}

/* ---- running a probe ---------------------------------------------------------------------- */

void describe(const struct outcome *o, char *buf, size_t cap)
{
    if (o->sig)
        snprintf(buf, cap, "killed by signal %d (%s)", o->sig,
                 sigabbrev_np(o->sig) ? sigabbrev_np(o->sig) : "?");
    else if (o->crashed)
        snprintf(buf, cap, "probe child gave no result");
    else if (o->ret < 0)
        snprintf(buf, cap, "ret=%ld errno=%s", o->ret, ename(o->err));
    else
        snprintf(buf, cap, "ret=%ld (call succeeded)", o->ret);
}

struct outcome now(long ret)
{
    struct outcome o = {.ret = ret, .err = ret < 0 ? errno : 0};
    return o;
}

/* Blocked: failed with one of the errnos given (0-terminated list). */
bool failed_with(const struct outcome *o, const int *errs)
{
    if (o->sig || o->crashed || o->ret >= 0) return false;
    for (; *errs; errs++)
        if (o->err == *errs) return true;
    return false;
}

const int EPERM_ENOSYS[] = {EPERM, ENOSYS, 0};

void report(const char *name, struct outcome o, const int *blocked_errs)
{
    char d[256];
    describe(&o, d, sizeof d);
    emit(name, failed_with(&o, blocked_errs), "%s", d);
}

/* A syscall that the filter must answer with EPERM or ENOSYS (arguments chosen so that, were
 * it allowed, the kernel would fail it with EFAULT/EBADF/EINVAL instead). */
#define SYS_PROBE(name, ...) report(name, now(syscall(__VA_ARGS__)), EPERM_ENOSYS)

/* Run fn in a forked child; its result (or the signal that killed it) comes back here. The child
 * has 5 seconds. A child that created a grandchild (clone probes) ends it itself. */
struct outcome in_child(probe_fn fn, const void *arg)
{
    struct outcome o = {0};
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0) {
        o.ret = -1;
        o.err = errno;
        o.crashed = true;
        return o;
    }
    pid_t pid = fork();
    if (pid == 0) {
        close(p[0]);
        alarm(5);
        errno = 0;
        long r = fn(arg);
        struct outcome c = {.ret = r, .err = r < 0 ? errno : 0};
        if (write(p[1], &c, sizeof c) < 0) _exit(2);
        _exit(0);
    }
    close(p[1]);
    if (pid < 0) {
        o.ret = -1;
        o.err = errno;
        o.crashed = true;
        close(p[0]);
        return o;
    }
    ssize_t n = read(p[0], &o, sizeof o);
    close(p[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (WIFSIGNALED(status)) {
        memset(&o, 0, sizeof o);
        o.sig = WTERMSIG(status);
    } else if (n != (ssize_t)sizeof o) {
        memset(&o, 0, sizeof o);
        o.crashed = true;
    }
    return o;
}

/* ---- identity: capabilities, no_new_privs, seccomp, uid ------------------------------------ */

char *read_file(const char *path, size_t *len)
{
    static char buf[1 << 16];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return NULL;
    size_t k = 0;
    ssize_t n;
    while (k < sizeof buf - 1 && (n = read(fd, buf + k, sizeof buf - 1 - k)) > 0)
        k += (size_t)n;
    close(fd);
    buf[k] = '\0';
    if (len) *len = k;
    return buf;
}

/* ---- syscalls the filter denies (native ABI) ----------------------------------------------- */

static long p_unshare(const void *a)
{
    return syscall(SYS_unshare, *(const long *)a);
}

static long p_clone(const void *a)
{
    long r = syscall(SYS_clone, *(const long *)a | SIGCHLD, 0L, 0L, 0L, 0L);
    if (r == 0) _exit(0); /* the grandchild, should the call ever succeed */
    if (r > 0) waitpid((pid_t)r, NULL, 0);
    return r;
}

static long p_clone3(const void *a)
{
    struct clone_args ca;
    memset(&ca, 0, sizeof ca);
    ca.flags = *(const unsigned long *)a;
    ca.exit_signal = SIGCHLD;
    long r = syscall(SYS_clone3, &ca, sizeof ca);
    if (r == 0) _exit(0);
    if (r > 0) waitpid((pid_t)r, NULL, 0);
    return r;
}

struct core_set {
    const char *name;
    long nr, resource;
};

/* Asks for no core dump (a limit of 0) with the call and resource given; 1 when the limit is
 * still 1 byte afterwards, 0 when it changed, -1 when it cannot be read. */
static long p_core_set(const void *a)
{
    const struct core_set *c = a;
    struct rlimit zero = {0, 0}, after;
    if (c->nr == SYS_setrlimit)
        syscall(SYS_setrlimit, c->resource, &zero);
    else
        syscall(SYS_prlimit64, 0L, c->resource, &zero, NULL);
    if (syscall(SYS_prlimit64, 0L, (long)RLIMIT_CORE, NULL, &after) < 0) return -1;
    return after.rlim_cur == 1 && after.rlim_max == 1;
}

static long p_personality(const void *a)
{
    return syscall(SYS_personality, *(const unsigned long *)a);
}

static long p_userfaultfd(const void *a)
{
    long r = syscall(SYS_userfaultfd, 1L /* UFFD_USER_MODE_ONLY: allowed to anyone */);
    if (r >= 0) close((int)r);
    return r;
}

static long p_fanotify(const void *a)
{
    /* FAN_CLASS_NOTIF | FAN_REPORT_FID: the variant unprivileged users may create (5.13+). */
    long r = syscall(SYS_fanotify_init, 0x00000200L, (long)O_RDONLY);
    if (r >= 0) close((int)r);
    return r;
}

static const struct {
    const char *name;
    long flag;
} ns_flags[] = {
    {"newuser", CLONE_NEWUSER},     {"newns", CLONE_NEWNS},   {"newnet", CLONE_NEWNET},
    {"newpid", CLONE_NEWPID},       {"newipc", CLONE_NEWIPC}, {"newuts", CLONE_NEWUTS},
    {"newcgroup", CLONE_NEWCGROUP},
};

static void probe_namespaces(void)
{
    char name[64];
    for (size_t i = 0; i < sizeof ns_flags / sizeof ns_flags[0]; i++) {
        snprintf(name, sizeof name, "unshare_%s", ns_flags[i].name);
        report(name, in_child(p_unshare, &ns_flags[i].flag), EPERM_ENOSYS);
        snprintf(name, sizeof name, "clone_%s", ns_flags[i].name);
        report(name, in_child(p_clone, &ns_flags[i].flag), EPERM_ENOSYS);
        snprintf(name, sizeof name, "clone3_%s", ns_flags[i].name);
        unsigned long f = (unsigned long)ns_flags[i].flag;
        report(name, in_child(p_clone3, &f), EPERM_ENOSYS);
    }
    long newtime = 0x80; /* CLONE_NEWTIME */
    report("unshare_newtime", in_child(p_unshare, &newtime), EPERM_ENOSYS);
    unsigned long nt = 0x80;
    report("clone3_newtime", in_child(p_clone3, &nt), EPERM_ENOSYS);
    /* setns with a bad descriptor: EBADF if the filter let it through. */
    SYS_PROBE("setns", SYS_setns, -1L, 0L);
    /* A real nested user namespace, the way unshare(1) would make it. */
    long all = CLONE_NEWUSER | CLONE_NEWNS;
    report("nested_userns_and_mountns", in_child(p_unshare, &all), EPERM_ENOSYS);
}

static void probe_syscalls(void)
{
    /* The mount API, old and new. */
    SYS_PROBE("mount", SYS_mount, BAD, BAD, BAD, 0L, BAD);
    SYS_PROBE("umount2", SYS_umount2, BAD, 0L);
    SYS_PROBE("pivot_root", SYS_pivot_root, BAD, BAD);
    SYS_PROBE("chroot", SYS_chroot, BAD);
    SYS_PROBE("open_tree", SYS_open_tree, -1L, BAD, 0L);
    SYS_PROBE("move_mount", SYS_move_mount, -1L, BAD, -1L, BAD, 0L);
    SYS_PROBE("fsopen", SYS_fsopen, BAD, 0L);
    SYS_PROBE("fsconfig", SYS_fsconfig, -1L, 0L, 0L, 0L, 0L);
    SYS_PROBE("fsmount", SYS_fsmount, -1L, 0L, 0L);
    SYS_PROBE("fspick", SYS_fspick, -1L, BAD, 0L);
    SYS_PROBE("mount_setattr", SYS_mount_setattr, -1L, BAD, 0L, BAD, 32L);
    /* Kernel attack surfaces. */
    SYS_PROBE("bpf", SYS_bpf, 0L /* BPF_MAP_CREATE */, BAD, 64L);
    SYS_PROBE("perf_event_open", SYS_perf_event_open, BAD, 0L, -1L, -1L, 0L);
    report("userfaultfd", in_child(p_userfaultfd, NULL), EPERM_ENOSYS);
    SYS_PROBE("io_uring_setup", SYS_io_uring_setup, 1L, BAD);
    SYS_PROBE("io_uring_enter", SYS_io_uring_enter, -1L, 0L, 0L, 0L, 0L, 0L);
    SYS_PROBE("io_uring_register", SYS_io_uring_register, -1L, 0L, 0L, 0L);
    /* the host's one pool of AIO events: EFAULT (the context pointer) if let through */
    SYS_PROBE("io_setup", SYS_io_setup, 1L, BAD);
    SYS_PROBE("keyctl", SYS_keyctl, 0x7fffffffL, 0L, 0L, 0L, 0L);
    SYS_PROBE("add_key", SYS_add_key, BAD, BAD, 0L, 0L, 0L);
    SYS_PROBE("request_key", SYS_request_key, BAD, BAD, 0L, 0L);
    /* Core dumps: 1 byte (none at all, nor the host's pipe helper run), not to be changed. */
    struct rlimit core;
    bool one = syscall(SYS_prlimit64, 0L, (long)RLIMIT_CORE, NULL, &core) == 0 &&
               core.rlim_cur == 1 && core.rlim_max == 1;
    emit("core_limit_one", one, "cur=%llu max=%llu", (unsigned long long)core.rlim_cur,
         (unsigned long long)core.rlim_max);
    /* A change answers success and changes nothing: blocked when the limit is still 1 byte.
     * Each in a child of its own, so that one that got through cannot mislead the next. The
     * resource with the upper 32 bits set is RLIMIT_CORE to the kernel too. */
    static const struct core_set sets[] = {
        {"setrlimit_core", SYS_setrlimit, RLIMIT_CORE},
        {"setrlimit_core_highbit", SYS_setrlimit, (1L << 32) | RLIMIT_CORE},
        {"prlimit64_core", SYS_prlimit64, RLIMIT_CORE},
        {"prlimit64_core_highbit", SYS_prlimit64, (1L << 32) | RLIMIT_CORE},
    };
    for (size_t i = 0; i < sizeof sets / sizeof sets[0]; i++) {
        struct outcome o = in_child(p_core_set, &sets[i]);
        emit(sets[i].name, !o.sig && !o.crashed && o.ret == 1, "%s",
             o.ret == 1 ? "limit still 1 byte" : o.ret == 0 ? "limit changed" : "probe failed");
    }
    /* Leaving the command's process tree: clearing the child-subreaper flag, the option also
     * with its upper 32 bits set (an int to the kernel). */
    SYS_PROBE("prctl_subreaper_clear", SYS_prctl, (long)PR_SET_CHILD_SUBREAPER, 0L, 0L, 0L, 0L);
    SYS_PROBE("prctl_subreaper_clear_highbit", SYS_prctl, (1L << 32) | PR_SET_CHILD_SUBREAPER, 0L,
              0L, 0L, 0L);
    /* Whole-machine operations. */
    SYS_PROBE("kexec_load", SYS_kexec_load, 0L, 0L, 0L, 0xdead0000L);
    SYS_PROBE("kexec_file_load", SYS_kexec_file_load, -1L, -1L, 0L, 0L, 0xdead0000L);
    SYS_PROBE("init_module", SYS_init_module, BAD, 1L, BAD);
    SYS_PROBE("finit_module", SYS_finit_module, -1L, BAD, 0L);
    SYS_PROBE("delete_module", SYS_delete_module, BAD, 0L);
    SYS_PROBE("reboot", SYS_reboot, 0L, 0L, 0L, 0L); /* bad magic */
    SYS_PROBE("swapon", SYS_swapon, BAD, 0L);
    SYS_PROBE("swapoff", SYS_swapoff, BAD);
    SYS_PROBE("acct", SYS_acct, BAD);
    SYS_PROBE("iopl", SYS_iopl, 0L);
    SYS_PROBE("ioperm", SYS_ioperm, 0L, 0L, 0L);
    /* The clock. */
    SYS_PROBE("settimeofday", SYS_settimeofday, BAD, 0L);
    SYS_PROBE("clock_settime", SYS_clock_settime, (long)CLOCK_REALTIME, BAD);
    SYS_PROBE("clock_adjtime", SYS_clock_adjtime, (long)CLOCK_REALTIME, BAD);
    SYS_PROBE("adjtimex", SYS_adjtimex, BAD);
    /* The kernel log. */
    SYS_PROBE("syslog", SYS_syslog, 3L /* READ_ALL */, BAD, 16L);
    /* File handles ("shocker"). */
    SYS_PROBE("open_by_handle_at", SYS_open_by_handle_at, -1L, BAD, 0L);
    SYS_PROBE("name_to_handle_at", SYS_name_to_handle_at, (long)AT_FDCWD, BAD, BAD, BAD, 0L);
    /* Host-wide views. */
    report("fanotify_init", in_child(p_fanotify, NULL), EPERM_ENOSYS);
    /* personality: only 0, 0x40000 and the query may pass. */
    static const struct {
        const char *name;
        unsigned long val;
    } pers[] = {{"personality_linux32", PER_LINUX32},
                {"personality_read_implies_exec", READ_IMPLIES_EXEC},
                {"personality_mmap_page_zero", MMAP_PAGE_ZERO},
                {"personality_addr_compat_layout", ADDR_COMPAT_LAYOUT},
                {"personality_highbit_zero", 0x100000000UL},
                {"personality_highbit_rie", 0x100000000UL | READ_IMPLIES_EXEC}};
    for (size_t i = 0; i < sizeof pers / sizeof pers[0]; i++)
        report(pers[i].name, in_child(p_personality, &pers[i].val), EPERM_ENOSYS);
}

/* ---- other processes: ptrace and friends --------------------------------------------------- */

static pid_t sibling = -1;
static volatile char sibling_secret[32] = "sibling-secret-0123456789";

static void start_sibling(void)
{
    sibling = fork();
    if (sibling == 0) {
        for (;;)
            pause();
    }
}

static long p_ptrace_attach(const void *a)
{
    pid_t pid = *(const pid_t *)a;
    long r = ptrace(PTRACE_ATTACH, pid, 0, 0);
    if (r == 0) {
        waitpid(pid, NULL, __WALL);
        ptrace(PTRACE_DETACH, pid, 0, 0);
    }
    return r;
}

static long p_ptrace_seize(const void *a)
{
    /* SEIZE does not stop the tracee; the child's exit detaches. */
    return ptrace(PTRACE_SEIZE, *(const pid_t *)a, 0, 0);
}

static long p_ptrace_traceme(const void *a)
{
    return ptrace(PTRACE_TRACEME, 0, 0, 0);
}

static long p_pidfd_getfd(const void *a)
{
    int pfd = (int)syscall(SYS_pidfd_open, *(const pid_t *)a, 0);
    if (pfd < 0) return -1;
    long r = syscall(SYS_pidfd_getfd, pfd, 0, 0);
    int e = errno;
    if (r >= 0) close((int)r);
    close(pfd);
    errno = e;
    return r;
}

static void probe_other_processes(void)
{
    start_sibling();
    if (sibling < 0) {
        emit("ptrace_attach_sibling", false, "cannot fork a sibling: %s", ename(errno));
        return;
    }
    report("ptrace_attach_sibling", in_child(p_ptrace_attach, &sibling), EPERM_ENOSYS);
    pid_t init = 1;
    report("ptrace_seize_init", in_child(p_ptrace_seize, &init), EPERM_ENOSYS);
    report("ptrace_traceme", in_child(p_ptrace_traceme, NULL), EPERM_ENOSYS);
    char buf[8];
    struct iovec local = {buf, sizeof buf}, remote = {(void *)BAD, 1};
    SYS_PROBE("process_vm_readv", SYS_process_vm_readv, (long)sibling, (long)&local, 1L,
              (long)&remote, 1L, 0L);
    SYS_PROBE("process_vm_writev", SYS_process_vm_writev, (long)sibling, (long)&local, 1L,
              (long)&remote, 1L, 0L);
    report("pidfd_getfd_sibling", in_child(p_pidfd_getfd, &sibling), EPERM_ENOSYS);

    /* /proc/PID/mem of a sibling: not a syscall the filter sees. Reported, not counted as a
     * defence (see docs/security.md: processes of one sandbox are one trust domain). */
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/mem", (int)sibling);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    char got[32] = {0};
    ssize_t n = fd < 0 ? -1 : pread(fd, got, sizeof got - 1, (off_t)(uintptr_t)sibling_secret);
    int e = errno;
    if (fd >= 0) close(fd);
    if (n > 0)
        emit("proc_pid_mem_sibling", false, "read %zd bytes of a sibling's memory (%s)", n, got);
    else
        emit("proc_pid_mem_sibling", true, "open/read failed: %s", ename(e));

    /* init (the nsbox binary, forked from the host's nsbox) is non-dumpable: none of these. */
    static const char *const init_paths[] = {
        "/proc/1/mem", "/proc/1/environ",   "/proc/1/fd", "/proc/1/root",
        "/proc/1/cwd", "/proc/1/map_files", NULL};
    for (const char *const *p = init_paths; *p; p++) {
        char nm[64];
        snprintf(nm, sizeof nm, "open_%s", *p + 1);
        for (char *c = nm; *c; c++)
            if (*c == '/') *c = '_';
        int f = open(*p, O_RDONLY | O_CLOEXEC);
        struct outcome o = {.ret = f, .err = f < 0 ? errno : 0};
        if (f >= 0) close(f);
        static const int deny[] = {EACCES, EPERM, ENOENT, 0};
        report(nm, o, deny);
    }
}

static void stop_sibling(void)
{
    if (sibling > 0) {
        kill(sibling, SIGKILL);
        waitpid(sibling, NULL, 0);
    }
}

/* ---- foreign ABIs: i386 (int $0x80) and x32 ------------------------------------------------ */

#if defined(__x86_64__)
struct abi_call {
    long nr;
    long a, b, c, d, e;
};

static long p_int80(const void *arg)
{
    const struct abi_call *c = arg;
    long ret;
    __asm__ volatile("int $0x80"
                     : "=a"(ret)
                     : "a"(c->nr), "b"(c->a), "c"(c->b), "d"(c->c), "S"(c->d), "D"(c->e)
                     : "memory", "r8", "r9", "r10", "r11");
    if (ret > 0 && (c->nr == 120 /* clone */)) _exit(0);
    if (ret < 0 && ret > -4096) {
        errno = (int)-ret;
        return -1;
    }
    return ret;
}

static long p_x32(const void *arg)
{
    const struct abi_call *c = arg;
    long r = syscall(c->nr | 0x40000000L, c->a, c->b, c->c, c->d, c->e, 0L);
    if (r == 0 && c->nr == 56 /* clone */) _exit(0);
    return r;
}

static void probe_foreign_abis(void)
{
    /* i386 numbers (arch/x86/entry/syscalls/syscall_32.tbl). Arguments as for the native probes;
     * getpid is harmless and must be killed too: the filter kills every non-native call. */
    static const struct {
        const char *name;
        struct abi_call c;
    } i386[] = {
        {"i386_getpid", {20, 0, 0, 0, 0, 0}},
        {"i386_mount", {21, BAD, BAD, BAD, 0, BAD}},
        {"i386_umount2", {52, BAD, 0, 0, 0, 0}},
        {"i386_ptrace", {26, PTRACE_ATTACH, 1, 0, 0, 0}},
        {"i386_chroot", {61, BAD, 0, 0, 0, 0}},
        {"i386_ioctl_tiocsti", {54, -1, 0x5412, BAD, 0, 0}},
        {"i386_reboot", {88, 0, 0, 0, 0, 0}},
        {"i386_syslog", {103, 3, BAD, 16, 0, 0}},
        {"i386_clone_newuser", {120, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0}},
        {"i386_init_module", {128, BAD, 1, BAD, 0, 0}},
        {"i386_personality", {136, READ_IMPLIES_EXEC, 0, 0, 0, 0}},
        {"i386_kexec_load", {283, 0, 0, 0, 0xdead0000L, 0}},
        {"i386_keyctl", {288, 0x7fffffff, 0, 0, 0, 0}},
        {"i386_unshare", {310, CLONE_NEWUSER, 0, 0, 0, 0}},
        {"i386_perf_event_open", {336, BAD, 0, -1, -1, 0}},
        {"i386_open_by_handle_at", {342, -1, BAD, 0, 0, 0}},
        {"i386_setns", {346, -1, 0, 0, 0, 0}},
        {"i386_bpf", {357, 0, BAD, 64, 0, 0}},
        {"i386_socket_packet", {359, 17, 3, 0, 0, 0}},
        {"i386_userfaultfd", {374, 1, 0, 0, 0, 0}},
        {"i386_io_uring_setup", {425, 1, BAD, 0, 0, 0}},
    };
    for (size_t i = 0; i < sizeof i386 / sizeof i386[0]; i++) {
        struct outcome o = in_child(p_int80, &i386[i].c);
        char d[256];
        describe(&o, d, sizeof d);
        bool blocked = o.sig == SIGSYS || failed_with(&o, EPERM_ENOSYS);
        emit(i386[i].name, blocked, "%s", d);
    }
    /* x32: the syscall instruction with bit 0x40000000 (arch/x86/entry/syscalls/syscall_64.tbl,
     * x32 numbers: the common ones plus 512+ for the compat ones). */
    static const struct {
        const char *name;
        struct abi_call c;
    } x32[] = {
        {"x32_getpid", {39, 0, 0, 0, 0, 0}},
        {"x32_socket_packet", {41, 17, 3, 0, 0, 0}},
        {"x32_clone_newuser", {56, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0}},
        {"x32_syslog", {103, 3, BAD, 16, 0, 0}},
        {"x32_personality", {135, READ_IMPLIES_EXEC, 0, 0, 0, 0}},
        {"x32_chroot", {161, BAD, 0, 0, 0, 0}},
        {"x32_mount", {165, BAD, BAD, BAD, 0, BAD}},
        {"x32_umount2", {166, BAD, 0, 0, 0, 0}},
        {"x32_reboot", {169, 0, 0, 0, 0, 0}},
        {"x32_init_module", {175, BAD, 1, BAD, 0, 0}},
        {"x32_keyctl", {250, 0x7fffffff, 0, 0, 0, 0}},
        {"x32_unshare", {272, CLONE_NEWUSER, 0, 0, 0, 0}},
        {"x32_perf_event_open", {298, BAD, 0, -1, -1, 0}},
        {"x32_open_by_handle_at", {304, -1, BAD, 0, 0, 0}},
        {"x32_setns", {308, -1, 0, 0, 0, 0}},
        {"x32_bpf", {321, 0, BAD, 64, 0, 0}},
        {"x32_userfaultfd", {323, 1, 0, 0, 0, 0}},
        {"x32_io_uring_setup", {425, 1, BAD, 0, 0, 0}},
        {"x32_ioctl_tiocsti", {514, -1, 0x5412, BAD, 0, 0}},
        {"x32_ptrace", {521, PTRACE_ATTACH, 1, 0, 0, 0}},
        {"x32_kexec_load", {528, 0, 0, 0, 0xdead0000L, 0}},
    };
    for (size_t i = 0; i < sizeof x32 / sizeof x32[0]; i++) {
        struct outcome o = in_child(p_x32, &x32[i].c);
        char d[256];
        describe(&o, d, sizeof d);
        bool blocked = o.sig == SIGSYS || failed_with(&o, EPERM_ENOSYS);
        emit(x32[i].name, blocked, "%s", d);
    }
}

/* `attack int80`, run on the host by the tests: whether this kernel has the i386 entry at all.
 * Without it (IA32 emulation off: ia32_emulation=0, or a kernel built so), int 0x80 is a general
 * protection fault (SIGSEGV) before any filter sees it, in a sandbox or not. */
static int int80_main(void)
{
    static const struct abi_call getpid32 = {20, 0, 0, 0, 0, 0};
    struct outcome o = in_child(p_int80, &getpid32);
    char d[256];
    describe(&o, d, sizeof d);
    printf("int80_getpid %s\n", !o.sig && !o.crashed && o.ret > 0 ? "works" : d);
    return 0;
}
#else
static void probe_foreign_abis(void) {}
static int int80_main(void)
{
    puts("int80_getpid not x86_64");
    return 0;
}
#endif

/* ---- devices -------------------------------------------------------------------------------- */

static void probe_mknod(const char *name, const char *path, mode_t type, dev_t dev)
{
    int r = mknod(path, type | 0666, dev);
    int e = errno;
    if (r < 0) {
        static const int deny[] = {EPERM, EACCES, EROFS, 0};
        report(name, (struct outcome){.ret = -1, .err = e}, deny);
        return;
    }
    /* Created: it must at least be unusable (nodev). */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    int oe = errno;
    if (fd >= 0) close(fd);
    unlink(path);
    emit(name, fd < 0, "mknod succeeded; open %s",
         fd < 0 ? ename(oe) : "SUCCEEDED (device usable)");
}

/* Set-user-ID and set-group-ID files: on a --workspace DIR of the caller's (idmapped: what the
 * sandbox creates belongs on disk to the directory's owner, root included) a setuid file would
 * be a setuid-root program on the host. Every way to give a file those bits must fail, and no
 * such file may exist afterwards. */
static bool has_setid(const char *path)
{
    struct stat sb;
    return lstat(path, &sb) == 0 && (sb.st_mode & (S_ISUID | S_ISGID));
}

static void report_setid(const char *name, const char *path, struct outcome o)
{
    char d[256];
    describe(&o, d, sizeof d);
    bool setid = has_setid(path);
    emit(name, failed_with(&o, EPERM_ENOSYS) && !setid, "%s%s", d,
         setid ? "; the file HAS a set-id bit" : "");
    unlink(path);
}

static void probe_setid(void)
{
    static const char *const f = ".nsbox-probe-setid";
    int fd = open(f, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
    if (fd >= 0) close(fd);
    report_setid("chmod_setuid", f, now(chmod(f, 04755)));
    fd = open(f, O_WRONLY | O_CREAT | O_CLOEXEC, 0755);
    report_setid("chmod_setgid", f, now(chmod(f, 02755)));
    if (fd >= 0) close(fd);
    fd = open(f, O_WRONLY | O_CREAT | O_CLOEXEC, 0755);
    report_setid("fchmod_setuid", f, now(fd < 0 ? -1 : fchmod(fd, 04755)));
    if (fd >= 0) close(fd);
    fd = open(f, O_WRONLY | O_CREAT | O_CLOEXEC, 0755);
    if (fd >= 0) close(fd);
    report_setid("fchmodat_setuid", f, now(syscall(SYS_fchmodat, AT_FDCWD, f, 04755)));
    fd = open(f, O_WRONLY | O_CREAT | O_CLOEXEC, 0755);
    if (fd >= 0) close(fd);
    report_setid("fchmodat2_setuid", f, now(syscall(452 /* fchmodat2 */, AT_FDCWD, f, 04755, 0)));
    report_setid("open_create_setuid", f,
                 now(syscall(SYS_open, f, O_WRONLY | O_CREAT | O_CLOEXEC, 04755)));
    report_setid("openat_create_setgid", f,
                 now(syscall(SYS_openat, AT_FDCWD, f, O_WRONLY | O_CREAT | O_CLOEXEC, 02755)));
    report_setid("creat_setuid", f, now(syscall(SYS_creat, f, 04755)));
    report_setid("mknod_regular_setuid", f, now(mknod(f, S_IFREG | 04755, 0)));
    report_setid("mknodat_regular_setgid", f,
                 now(syscall(SYS_mknodat, AT_FDCWD, f, S_IFREG | 02755, 0)));
    /* O_TMPFILE takes the mode too: an unnamed set-id file, linked in afterwards. */
    unlink(f);
    struct outcome t = now(syscall(SYS_openat, AT_FDCWD, ".", O_TMPFILE | O_WRONLY | O_CLOEXEC,
                                   04755));
    if (t.ret >= 0) {
        char p[64];
        snprintf(p, sizeof p, "/proc/self/fd/%ld", t.ret);
        linkat(AT_FDCWD, p, AT_FDCWD, f, AT_SYMLINK_FOLLOW);
        close((int)t.ret);
    }
    report_setid("openat_tmpfile_setuid", f, t);
    /* Without O_CREAT or O_TMPFILE the mode is unused, and some libcs leave whatever their
     * register held there (the static busybox of runtime-tools' root): such an open works. */
    long r = syscall(SYS_openat, AT_FDCWD, "/dev/null", O_RDONLY | O_CLOEXEC, 04755 | 02000);
    emit("openat_plain_mode_ignored", r >= 0, "%s",
         r >= 0 ? "opened: the set-id bits of an unused mode are not looked at"
                : "a plain open was refused for the set-id bits of its unused mode");
    if (r >= 0) close((int)r);
    /* openat2 keeps its mode in memory that seccomp cannot read: refused whole (ENOSYS). */
    struct {
        unsigned long long flags, mode, resolve;
    } how = {O_WRONLY | O_CREAT | O_CLOEXEC, 04755, 0};
    report_setid("openat2_create_setuid", f,
                 now(syscall(437 /* openat2 */, AT_FDCWD, f, &how, sizeof how)));
}

static void probe_devices(void)
{
    probe_mknod("mknod_char_tmp", "/tmp/.nsbox-probe-mem", S_IFCHR, makedev(1, 1));
    probe_mknod("mknod_char_workspace", ".nsbox-probe-mem", S_IFCHR, makedev(1, 1));
    probe_mknod("mknod_block_tmp", "/tmp/.nsbox-probe-blk", S_IFBLK, makedev(8, 0));
    probe_mknod("mknod_char_dev_shm", "/dev/shm/.nsbox-probe-mem", S_IFCHR, makedev(1, 1));
    /* /dev holds exactly the minimal set. */
    static const char *const allowed[] = {"null",  "zero",   "full",   "random", "urandom",
                                          "tty",   "pts",    "shm",    "ptmx",   "fd",
                                          "stdin", "stdout", "stderr", NULL};
    char extra[512] = "";
    size_t k = 0;
    DIR *d = opendir("/dev");
    if (d) {
        struct dirent *de;
        while ((de = readdir(d))) {
            if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
            bool ok = false;
            for (const char *const *a = allowed; *a; a++)
                ok |= !strcmp(*a, de->d_name);
            if (!ok && k + 40 < sizeof extra)
                k += (size_t)snprintf(extra + k, sizeof extra - k, " %s", de->d_name);
        }
        closedir(d);
    }
    emit("dev_minimal", d && k == 0,
         d ? (k ? "unexpected entries:%s" : "only the minimal set%s") : "cannot list /dev%s",
         extra);
    int fd = open("/dev/.nsbox-probe", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    struct outcome o = now(fd);
    if (fd >= 0) {
        close(fd);
        unlink("/dev/.nsbox-probe");
    }
    static const int rofs[] = {EROFS, EACCES, EPERM, 0};
    report("create_in_dev", o, rofs);
}

/* ---- modes ---------------------------------------------------------------------------------- */

static int attack_main(int argc, char **argv)
{
    pid_t host_pid = 0;
    int host_port = 0;
    const char *abstract = NULL;
    bool tiocsti_stdin = false;
    const char *hidden[32];
    size_t n_hidden = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--host-pid") && i + 1 < argc)
            host_pid = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--host-port") && i + 1 < argc)
            host_port = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--abstract") && i + 1 < argc)
            abstract = argv[++i];
        else if (!strcmp(argv[i], "--tiocsti-stdin"))
            tiocsti_stdin = true;
        else if (!strcmp(argv[i], "--hidden") && i + 1 < argc && n_hidden < 32)
            hidden[n_hidden++] = argv[++i];
        else {
            fprintf(stderr, "attack: unknown argument %s\n", argv[i]);
            return 2;
        }
    }
    /* First, before anything of ours is open: descriptors and the working directory as the
     * sandbox handed them over. */
    attack_host_fds();
    attack_host_cwd();
    attack_self_identity();
    attack_self_privilege_gain();
    probe_namespaces();
    probe_syscalls();
    probe_other_processes();
    probe_foreign_abis();
    attack_host_sockets();
    attack_host_terminals();
    if (tiocsti_stdin)
        attack_host_tiocsti_stdin();
    probe_devices();
    probe_setid();
    attack_host_proc_sys();
    attack_host_launcher();
    attack_host_view(host_pid);
    for (size_t i = 0; i < n_hidden; i++)
        attack_host_hidden_path(hidden[i]);
    attack_host_rootfs();
    attack_host_network(host_port, abstract);
    stop_sibling();
    emit("done", true, "all probes ran");
    return 0;
}

/* inspect: for hostile images. Each PATH must not contain the secret; each --mount PATH:KIND
 * must be a real directory of that filesystem (proc, tmpfs, devpts) set up by nsbox, not
 * something an image redirected. */
static int inspect_main(int argc, char **argv)
{
    const char *secret = NULL;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--secret") && i + 1 < argc) {
            secret = argv[++i];
        } else if (!strcmp(argv[i], "--mount") && i + 1 < argc) {
            char spec[PATH_MAX];
            snprintf(spec, sizeof spec, "%s", argv[++i]);
            char *colon = strrchr(spec, ':');
            if (!colon) return 2;
            *colon = '\0';
            const char *kind = colon + 1;
            struct stat st;
            struct statfs sf;
            char name[PATH_MAX + 16];
            snprintf(name, sizeof name, "mount:%s", spec);
            if (lstat(spec, &st) < 0 || statfs(spec, &sf) < 0) {
                emit(name, false, "%s: %s", spec, ename(errno));
                continue;
            }
            unsigned long want = !strcmp(kind, "proc")     ? PROC_SUPER_MAGIC
                                 : !strcmp(kind, "devpts") ? DEVPTS_SUPER_MAGIC
                                                           : TMPFS_MAGIC;
            bool any = !strcmp(kind, "any");
            emit(name, S_ISDIR(st.st_mode) && (any || (unsigned long)sf.f_type == want),
                 "%s: %s, fs magic %#lx (want %s)", spec,
                 S_ISDIR(st.st_mode)   ? "directory"
                 : S_ISLNK(st.st_mode) ? "SYMLINK"
                                       : "not a directory",
                 (unsigned long)sf.f_type, kind);
        } else {
            const char *p = argv[i];
            char name[PATH_MAX + 16];
            snprintf(name, sizeof name, "no_secret:%s", p);
            int fd = open(p, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
            if (fd < 0) {
                emit(name, true, "open %s", ename(errno));
                continue;
            }
            char buf[4096];
            ssize_t n = read(fd, buf, sizeof buf - 1);
            close(fd);
            if (n < 0) {
                emit(name, true, "read %s", ename(errno));
                continue;
            }
            buf[n] = '\0';
            bool leaked = secret && strstr(buf, secret);
            emit(name, !leaked, leaked ? "READ THE HOST'S SECRET" : "read %zd bytes, no secret", n);
        }
    }
    emit("done", true, "inspect finished");
    return 0;
}

/* `attack ids`: what running this file gave its process: its effective uid and capabilities
 * (a set-user-ID or file-capability copy of it, run where set-id programs count or do not). */
static int ids_main(void)
{
    char line[256], eff[64] = "?";
    FILE *f = fopen("/proc/self/status", "r");
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "CapEff: %63s", eff) == 1)
            break;
    if (f)
        fclose(f);
    printf("euid=%d CapEff=%s\n", (int)geteuid(), eff);
    return 0;
}

/* `attack setid DIR`: the set-id probes alone, their files made in DIR (a root of nsbox-oci's
 * on an engine's overlay, where they would be the engine's files, host root's). */
static int setid_main(int argc, char **argv)
{
    if (argc != 3)
        return 2;
    if (chdir(argv[2]) < 0) {
        perror(argv[2]);
        return 1;
    }
    probe_setid();
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "xattr")) return attack_files_xattr_main(argc, argv);
    if (argc > 1 && !strcmp(argv[1], "mmap-write"))
        return attack_files_mmap_write_main(argc, argv);
    if (argc > 1 && !strcmp(argv[1], "inspect")) return inspect_main(argc, argv);
    if (argc > 1 && !strcmp(argv[1], "mkfiles")) return attack_files_mkfiles_main(argc, argv);
    if (argc > 1 && !strcmp(argv[1], "holdfiles")) return attack_files_hold_main(argc, argv);
    if (argc > 1 && !strcmp(argv[1], "setid"))
        return setid_main(argc, argv);
    if (argc > 1 && !strcmp(argv[1], "int80")) return int80_main();
    if (argc > 1 && !strcmp(argv[1], "ids")) return ids_main();
    if (argc > 1 && !strcmp(argv[1], "bind"))
        return attack_sock_bind_main(argc, argv);
    if (argc > 1 && !strcmp(argv[1], "sockact"))
        return attack_sock_activated_main();
    if (argc > 1 && !strcmp(argv[1], "catch-spawn"))
        return attack_spawn_catch_main(argc > 2 && !strcmp(argv[2], "hold"));
    return attack_main(argc, argv);
}
