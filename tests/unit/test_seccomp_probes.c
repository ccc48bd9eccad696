/* Seccomp: the default filter's behaviour (test_seccomp.c tells how), checked by really loading
 * it in forked children and probing with side-effect-free arguments. */

#include "seccomp_fixture.h"

#ifndef AF_VSOCK
#define AF_VSOCK 40
#endif
#ifndef AF_ALG
#define AF_ALG 38
#endif
#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif
#ifndef UFFD_USER_MODE_ONLY
#define UFFD_USER_MODE_ONLY 1
#endif

/* ---- behaviour: the default filter, loaded for real -------------------------------------- */

struct probe_result {
    long ret;
    int err;
    int sig; /* killed by this signal, 0 if it exited */
    uint64_t extra;
    pid_t pid; /* the probe child's pid */
};

typedef long (*probe_fn)(const void *arg, uint64_t *extra);

/* Fork; in the child optionally run `pre` (e.g. enter a user namespace), then load `prog` (after
 * no_new_privs, as nsbox does) and run `fn`. The child reports through a pipe. */
static struct probe_result run_probe(const struct sock_fprog *prog, probe_fn pre, probe_fn fn,
                                     const void *arg)
{
    int fds[2];
    pid_t pid = probe_fork(fds);
    if (pid == 0) {
        struct {
            long ret;
            int err;
            uint64_t extra;
        } out = {-1, 0, 0};
        close(fds[0]);
        /* cmocka's handlers must not turn a SIGSYS (or a crash) in the child into a test
         * failure reported from the child: let the signal kill it, for the parent to see. */
        static const int sigs[] = {SIGSYS, SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
        for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
            signal(sigs[i], SIG_DFL);
        /* No controlling terminal: a probe that the filter failed to stop (vhangup, TIOCSTI)
         * can then not touch the terminal the tests run in. */
        setsid();
        if (pre && pre(arg, &out.extra) < 0) _exit(3);
        if (prog) {
            struct nsbox_err e;
            if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || nsbox_seccomp_prog_load(prog, &e) < 0)
                _exit(2);
        }
        errno = 0;
        out.ret = fn(arg, &out.extra);
        out.err = errno;
        if (write(fds[1], &out, sizeof out) != (ssize_t)sizeof out) _exit(4);
        _exit(0);
    }
    close(fds[1]);
    struct {
        long ret;
        int err;
        uint64_t extra;
    } in;
    ssize_t n = read(fds[0], &in, sizeof in);
    close(fds[0]);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    struct probe_result r = {.ret = -1, .err = 0, .sig = 0, .pid = pid};
    if (WIFSIGNALED(status)) {
        r.sig = WTERMSIG(status);
        return r;
    }
    if (WEXITSTATUS(status) != 0 || n != (ssize_t)sizeof in)
        fail_msg("probe child failed to run (exit %d)", WEXITSTATUS(status));
    r.ret = in.ret;
    r.err = in.err;
    r.extra = in.extra;
    return r;
}

#define SELF_PID (-4242) /* placeholder argument: the probe child's own pid */

struct sys_probe {
    const char *what;
    long nr;
    long a[6];
    int want_errno; /* 0: must not be denied (its result must equal the unfiltered one) */
    bool proves;    /* unfiltered, the kernel's answer differs on any machine */
};

static long probe_syscall(const void *arg, uint64_t *extra)
{
    const struct sys_probe *p = arg;
    long a[6];
    for (int i = 0; i < 6; i++)
        a[i] = p->a[i] == SELF_PID ? (long)getpid() : p->a[i];
    return syscall(p->nr, a[0], a[1], a[2], a[3], a[4], a[5]);
}

static int devnull_fd = -1;

static void check_probe(const struct sys_probe *p)
{
    struct probe_result f = run_probe(&default_prog, NULL, probe_syscall, p);
    struct probe_result u = run_probe(NULL, NULL, probe_syscall, p);
    print_message("  %-42s filtered: %ld/%s   unfiltered: %ld/%s\n", p->what, f.ret,
                  f.ret == -1 ? strerror(f.err) : "ok", u.ret,
                  u.ret == -1 ? strerror(u.err) : "ok");
    if (f.sig) fail_msg("%s: killed by signal %d", p->what, f.sig);
    if (p->want_errno) {
        if (f.ret != -1 || f.err != p->want_errno)
            fail_msg("%s: want errno %d (%s), got ret %ld errno %d (%s)", p->what, p->want_errno,
                     strerror(p->want_errno), f.ret, f.err, strerror(f.err));
        if (p->proves && u.ret == -1 && u.err == p->want_errno)
            fail_msg("%s: the kernel alone already answers %s, so this probe proves nothing",
                     p->what, strerror(u.err));
    } else {
        /* Allowed: same outcome as without the filter. */
        if ((f.ret == -1) != (u.ret == -1) || (f.ret == -1 && f.err != u.err))
            fail_msg("%s: filtered ret %ld errno %d, unfiltered ret %ld errno %d", p->what, f.ret,
                     f.err, u.ret, u.err);
    }
}

/* test_denied_syscalls's probes: mounts, namespaces and clone3. */
static void denied_mounts_namespaces(void)
{
    const struct sys_probe probes[] = {
        {"mount(NULL, NULL, NULL, 0, NULL)", SYS_mount, {0}, EPERM, true},
        /* Invalid flags: even run unfiltered as root this must not unmount anything. */
        {"umount2(\"/\", 0xffffffff)", SYS_umount2, {(long)"/", 0xffffffffL}, EPERM, true},
        {"unshare(0)", SYS_unshare, {0}, EPERM, true},
        {"unshare(CLONE_NEWUSER)", SYS_unshare, {CLONE_NEWUSER}, EPERM, false},
        {"setns(-1, 0)", SYS_setns, {-1, 0}, EPERM, true},
        {"chroot(\"/\")", SYS_chroot, {(long)"/"}, EPERM, false},
        {"clone3(NULL, 0)", SYS_clone3, {0, 0}, ENOSYS, true},
    };
    for (size_t i = 0; i < sizeof probes / sizeof probes[0]; i++)
        check_probe(&probes[i]);
}

/* test_denied_syscalls's probes: ioctl: TIOCSTI and TIOCLINUX only, whatever the high bits. */
static void denied_ioctls(void)
{
    long nul = devnull_fd;
    const struct sys_probe probes[] = {
        {"ioctl(devnull, TIOCSTI, NULL)", SYS_ioctl, {nul, 0x5412, 0}, EPERM, true},
        {"ioctl(devnull, 0x100005412, NULL)", SYS_ioctl, {nul, 0x100005412L, 0}, EPERM, true},
        {"ioctl(devnull, 0xffffffff00005412, NULL)",
         SYS_ioctl,
         {nul, (long)0xffffffff00005412ull, 0},
         EPERM,
         true},
        {"ioctl(devnull, TIOCLINUX, NULL)", SYS_ioctl, {nul, 0x541C, 0}, EPERM, true},
        {"ioctl(devnull, 0x10000541C, NULL)", SYS_ioctl, {nul, 0x10000541CL, 0}, EPERM, true},
        {"ioctl(devnull, TIOCGWINSZ) still reaches the driver",
         SYS_ioctl,
         {nul, 0x5413, 0},
         0,
         false},
        {"ioctl(devnull, 0x5412 | 0x10000) still reaches it",
         SYS_ioctl,
         {nul, 0x15412, 0},
         0,
         false},
    };
    for (size_t i = 0; i < sizeof probes / sizeof probes[0]; i++)
        check_probe(&probes[i]);
}

/* test_denied_syscalls's probes: socket families. */
static void denied_sockets(void)
{
    const struct sys_probe probes[] = {
        {"socket(AF_VSOCK, SOCK_STREAM, 0)",
         SYS_socket,
         {AF_VSOCK, SOCK_STREAM, 0},
         EAFNOSUPPORT,
         false},
        {"socket(AF_ALG, SOCK_SEQPACKET, 0)",
         SYS_socket,
         {AF_ALG, SOCK_SEQPACKET, 0},
         EAFNOSUPPORT,
         false},
        {"socket(AF_PACKET, SOCK_RAW, 0)",
         SYS_socket,
         {AF_PACKET, SOCK_RAW, 0},
         EAFNOSUPPORT,
         false},
        {"socket(AF_KEY, SOCK_RAW, 2)", SYS_socket, {AF_KEY, SOCK_RAW, 2}, EAFNOSUPPORT, false},
        {"socket(AF_PACKET | 1<<32, SOCK_RAW, 0)",
         SYS_socket,
         {AF_PACKET | (1L << 32), SOCK_RAW, 0},
         EAFNOSUPPORT,
         false},
        {"socket(AF_INET | 1<<32, SOCK_STREAM, 0)",
         SYS_socket,
         {AF_INET | (1L << 32), SOCK_STREAM, 0},
         EAFNOSUPPORT,
         false},
        {"socketpair(AF_VSOCK, SOCK_STREAM, 0, sv)",
         SYS_socketpair,
         {AF_VSOCK, SOCK_STREAM, 0, 0},
         EAFNOSUPPORT,
         false},
        {"socket(AF_UNIX, SOCK_STREAM, 0)", SYS_socket, {AF_UNIX, SOCK_STREAM, 0}, 0, false},
        {"socket(AF_INET, SOCK_STREAM, 0)", SYS_socket, {AF_INET, SOCK_STREAM, 0}, 0, false},
        {"socket(AF_INET6, SOCK_DGRAM, 0)", SYS_socket, {AF_INET6, SOCK_DGRAM, 0}, 0, false},
        {"socket(AF_NETLINK, SOCK_RAW, NETLINK_ROUTE)",
         SYS_socket,
         {AF_NETLINK, SOCK_RAW, 0},
         0,
         false},
    };
    for (size_t i = 0; i < sizeof probes / sizeof probes[0]; i++)
        check_probe(&probes[i]);
}

/* test_denied_syscalls's probes: the rest: bpf, perf, keys, ptrace, personality... */
static void denied_others(void)
{
    const struct sys_probe probes[] = {
        {"bpf(BPF_MAP_CREATE, NULL, 0)", SYS_bpf, {0, 0, 0}, EPERM, false},
        {"perf_event_open(NULL, 0, -1, -1, 0)",
         SYS_perf_event_open,
         {0, 0, -1, -1, 0},
         EPERM,
         true},
        {"keyctl(KEYCTL_GET_KEYRING_ID, SESSION, 0)", SYS_keyctl, {0, -3, 0}, EPERM, false},
        {"userfaultfd(UFFD_USER_MODE_ONLY)", SYS_userfaultfd, {UFFD_USER_MODE_ONLY}, EPERM, false},
        {"io_uring_setup(1, NULL)", SYS_io_uring_setup, {1, 0}, EPERM, false},
        {"ptrace(PTRACE_TRACEME)", SYS_ptrace, {0, 0, 0, 0}, EPERM, true},
        {"process_vm_readv(self, NULL, 0, NULL, 0, 0)",
         SYS_process_vm_readv,
         {SELF_PID, 0, 0, 0, 0, 0},
         EPERM,
         true},
        {"process_vm_writev(self, NULL, 0, NULL, 0, 0)",
         SYS_process_vm_writev,
         {SELF_PID, 0, 0, 0, 0, 0},
         EPERM,
         true},
        {"personality(PER_LINUX32)", SYS_personality, {PER_LINUX32}, EPERM, true},
        {"personality(READ_IMPLIES_EXEC)", SYS_personality, {READ_IMPLIES_EXEC}, EPERM, true},
        {"personality(1<<32): PER_LINUX after truncation",
         SYS_personality,
         {1L << 32},
         EPERM,
         true},
        {"personality(0xffffffff) query", SYS_personality, {0xffffffffL}, 0, false},
        {"personality(ADDR_NO_RANDOMIZE)", SYS_personality, {ADDR_NO_RANDOMIZE}, 0, false},
        {"personality(PER_LINUX)", SYS_personality, {0}, 0, false},
        {"kcmp(self, self, KCMP_VM, 0, 0)", SYS_kcmp, {SELF_PID, SELF_PID, 1, 0, 0}, 0, false},
        {"getppid()", SYS_getppid, {0}, 0, false},
    };
    for (size_t i = 0; i < sizeof probes / sizeof probes[0]; i++)
        check_probe(&probes[i]);
}

static void test_denied_syscalls(void **state)
{
    devnull_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
    assert_true(devnull_fd >= 0);
    denied_mounts_namespaces();
    denied_ioctls();
    denied_sockets();
    denied_others();
    /* getpid() still works and is really ours. */
    struct sys_probe gp = {"getpid()", SYS_getpid, {0}, 0, false};
    struct probe_result r = run_probe(&default_prog, NULL, probe_syscall, &gp);
    assert_int_equal(r.sig, 0);
    assert_int_equal(r.ret, r.pid);
    close(devnull_fd);
}

/* Every unconditional deny of the default profile, called with all arguments -1 (invalid for
 * every one of them, so the unfiltered kernel would fail with EINVAL/EFAULT/EBADF and do
 * nothing): under the filter each must fail with exactly the profile's errno. */
static long probe_all_denies(const void *arg, uint64_t *extra)
{
    const struct nsbox_seccomp_profile *p = arg;
    for (size_t i = 0; i < p->n_rules; i++) {
        const struct nsbox_scmp_rule *r = &p->rules[i];
        if (r->n_args != 0 || r->action != NSBOX_SCMP_ERRNO) continue;
        int nr = seccomp_syscall_resolve_name(r->name);
        if (nr < 0) /* pseudo-syscall: does not exist on this architecture */
            continue;
        errno = 0;
        long ret = syscall(nr, -1L, -1L, -1L, -1L, -1L, -1L);
        if (ret != -1 || errno != r->errno_ret) {
            *extra = i;
            return -2;
        }
        (*extra)++;
    }
    return 0;
}

static void test_all_unconditional_denies(void **state)
{
    struct nsbox_seccomp_profile p;
    parse_ok(nsbox_seccomp_default_json(), &p);
    struct probe_result r = run_probe(&default_prog, NULL, probe_all_denies, &p);
    assert_int_equal(r.sig, 0);
    if (r.ret != 0)
        fail_msg("%s was not denied with errno %d (got errno %d)", p.rules[r.extra].name,
                 p.rules[r.extra].errno_ret, r.err);
    size_t want = 0;
    for (size_t i = 0; i < p.n_rules; i++)
        if (p.rules[i].n_args == 0 && p.rules[i].action == NSBOX_SCMP_ERRNO &&
            seccomp_syscall_resolve_name(p.rules[i].name) >= 0)
            want++;
    print_message("  %llu unconditionally denied syscalls checked\n", (unsigned long long)r.extra);
    assert_int_equal(r.extra, want);
    assert_true(want > 50);
    nsbox_seccomp_profile_free(&p);
}

/* personality: exactly {0, ADDR_NO_RANDOMIZE, 0xffffffff} pass, checked against the kernel over
 * every single bit, every pair of bits, their complements, high-bit variants and random values. */
static bool personality_allowed(uint64_t v)
{
    return v == 0 || v == ADDR_NO_RANDOMIZE || v == 0xffffffffu;
}

static int check_personality(uint64_t v)
{
    errno = 0;
    long r = syscall(SYS_personality, (unsigned long)v);
    bool passed = !(r == -1 && errno == EPERM);
    if (passed && v != 0xffffffffu) syscall(SYS_personality, 0UL); /* back to PER_LINUX */
    return passed == personality_allowed(v) ? 0 : -1;
}

static long probe_personality_sweep(const void *arg, uint64_t *extra)
{
    long checked = 0;
    uint64_t vals[4];
    for (int i = -1; i < 32; i++) {
        for (int j = -1; j < 32; j++) {
            uint64_t v = (i >= 0 ? 1ull << i : 0) | (j >= 0 ? 1ull << j : 0);
            vals[0] = v;
            vals[1] = ~v & 0xffffffffu;
            vals[2] = v | (1ull << 32);
            vals[3] = v | 0xffffffff00000000ull;
            for (int k = 0; k < 4; k++, checked++)
                if (check_personality(vals[k]) < 0) {
                    *extra = vals[k];
                    return -1;
                }
        }
    }
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (int n = 0; n < 20000; n++, checked++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        uint64_t v = n & 1 ? x & 0xffffffffu : x; /* mostly 32-bit values */
        if (check_personality(v) < 0) {
            *extra = v;
            return -1;
        }
    }
    static const uint64_t edge[] = {
        0,       ADDR_NO_RANDOMIZE, 0xffffffffu,    0xfffffffeu,    0x7fffffffu,
        0x40001, 0x3ffff,           0x60000,        0xc0000,        0x20000,
        0x8,     0x20008,           0x100040000ull, 0x1ffffffffull, UINT64_MAX};
    for (size_t i = 0; i < sizeof edge / sizeof edge[0]; i++, checked++)
        if (check_personality(edge[i]) < 0) {
            *extra = edge[i];
            return -1;
        }
    *extra = (uint64_t)checked;
    return 0;
}

static void test_personality_values(void **state)
{
    struct probe_result r = run_probe(&default_prog, NULL, probe_personality_sweep, NULL);
    assert_int_equal(r.sig, 0);
    if (r.ret != 0)
        fail_msg("personality(0x%llx): filter decision is wrong", (unsigned long long)r.extra);
    print_message("  personality: %llu values checked\n", (unsigned long long)r.extra);
}

/* clone with a namespace flag. Inside a fresh user namespace (where nsbox's sandbox processes
 * also live, but with capabilities here) the unfiltered kernel grants each flag, so a denial
 * proves the rule for that flag. */
static long enter_userns(const void *arg, uint64_t *extra)
{
    return unshare(CLONE_NEWUSER);
}

static long probe_clone(const void *arg, uint64_t *extra)
{
    unsigned long flags = *(const unsigned long *)arg;
    long r = syscall(SYS_clone, flags | SIGCHLD, 0L, 0L, 0L, 0L);
    if (r == 0) _exit(0);
    if (r > 0) {
        waitpid((pid_t)r, NULL, 0);
        errno = 0;
    }
    return r;
}

static void *thread_main(void *arg)
{
    return (void *)42;
}

static long probe_thread_and_spawn(const void *arg, uint64_t *extra)
{
    pthread_t t;
    void *ret = NULL;
    int rc = pthread_create(&t, NULL, thread_main, NULL);
    if (rc != 0) {
        errno = rc;
        return 1;
    }
    if ((rc = pthread_join(t, &ret)) != 0 || ret != (void *)42) {
        errno = rc;
        return 2;
    }
    pid_t pid;
    char *argv[] = {"true", NULL};
    char *envp[] = {NULL};
    const char *bin = access("/bin/true", X_OK) == 0 ? "/bin/true" : "/usr/bin/true";
    if ((rc = posix_spawn(&pid, bin, NULL, NULL, argv, envp)) != 0) {
        errno = rc;
        return 3;
    }
    int status;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return 4;
    errno = 0;
    return 0;
}

static void test_clone_namespace_flags(void **state)
{
    static const struct {
        const char *name;
        unsigned long flag;
    } flags[] = {
        {"CLONE_NEWNS", CLONE_NEWNS},     {"CLONE_NEWCGROUP", CLONE_NEWCGROUP},
        {"CLONE_NEWUTS", CLONE_NEWUTS},   {"CLONE_NEWIPC", CLONE_NEWIPC},
        {"CLONE_NEWUSER", CLONE_NEWUSER}, {"CLONE_NEWPID", CLONE_NEWPID},
        {"CLONE_NEWNET", CLONE_NEWNET},   {"CLONE_NEWTIME (0x80)", CLONE_NEWTIME},
    };
    /* Can this machine make user namespaces (so that the control runs mean something)? */
    unsigned long none = 0;
    struct probe_result ctl = run_probe(NULL, enter_userns, probe_clone, &none);
    bool userns = ctl.sig == 0 && ctl.ret > 0;
    if (!userns) print_message("  (no unprivileged user namespaces here: controls skipped)\n");

    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++) {
        unsigned long f = flags[i].flag;
        /* A nested user namespace needs the creator's uid mapped in its parent, which the
         * fresh (unmapped) one does not give: that flag is probed from the top level. */
        probe_fn pre = userns && f != CLONE_NEWUSER ? enter_userns : NULL;
        struct probe_result r = run_probe(&default_prog, pre, probe_clone, &f);
        struct probe_result u = run_probe(NULL, pre, probe_clone, &f);
        print_message("  clone(%-22s filtered: %ld/%s   unfiltered: %s\n", flags[i].name, r.ret,
                      r.ret == -1 ? strerror(r.err) : "ok",
                      u.ret > 0 ? "created" : strerror(u.err));
        assert_int_equal(r.sig, 0);
        assert_int_equal(r.ret, -1);
        assert_int_equal(r.err, EPERM);
        if (userns && f != CLONE_NEWTIME && u.ret <= 0)
            fail_msg("control: clone(%s) failed unfiltered in a user namespace: %s", flags[i].name,
                     strerror(u.err));
    }
    /* Plain clone (what fork() and pthread_create() use) still works. */
    struct probe_result r = run_probe(&default_prog, NULL, probe_clone, &none);
    assert_int_equal(r.sig, 0);
    assert_true(r.ret > 0);
    /* glibc's pthread_create and posix_spawn try clone3 first and must fall back to clone on
     * ENOSYS (glibc >= 2.34), with flags the filter lets through. */
    r = run_probe(&default_prog, NULL, probe_thread_and_spawn, NULL);
    assert_int_equal(r.sig, 0);
    if (r.ret != 0)
        fail_msg("pthread_create/posix_spawn under the filter: step %ld failed: %s", r.ret,
                 strerror(r.err));
}

/* ---- foreign ABIs ------------------------------------------------------------------------ */

#if defined(__x86_64__)
static long probe_int80_getpid(const void *arg, uint64_t *extra)
{
    long ret;
    /* i386 getpid is 20; int $0x80 enters the kernel's compat (i386) path, whose syscalls
     * carry AUDIT_ARCH_I386 and i386 numbers (20 is not getpid on x86_64: it is writev). */
    __asm__ volatile("int $0x80" : "=a"(ret) : "a"(20L) : "memory", "r8", "r9", "r10", "r11");
    return ret;
}

static long probe_x32(const void *arg, uint64_t *extra)
{
    /* The syscall instruction with the x32 bit: AUDIT_ARCH_X86_64 like native calls, so only
     * the number tells them apart. */
    return syscall(*(const long *)arg | 0x40000000L, 0L, 0L, 0L, 0L, 0L, 0L);
}

static void test_foreign_abis(void **state)
{
    struct probe_result u = run_probe(NULL, NULL, probe_int80_getpid, NULL);
    bool ia32 = u.sig == 0 && u.ret == u.pid;
    print_message("  int $0x80 getpid unfiltered: %s\n",
                  ia32 ? "works (IA32 emulation on): the filter must stop it"
                       : "unavailable on this kernel");
    struct probe_result f = run_probe(&default_prog, NULL, probe_int80_getpid, NULL);
    print_message("  int $0x80 getpid filtered: %s %d\n", f.sig ? "killed by signal" : "returned",
                  f.sig ? f.sig : (int)f.ret);
    if (ia32)
        assert_int_equal(f.sig, SIGSYS);
    else
        assert_true(f.sig != 0 || f.ret != f.pid);

    /* x32: getpid (39) and mount (165). seccomp sees the number before the kernel decides
     * whether it has an x32 ABI at all, so the filter's verdict is the same on every kernel. */
    static const long nrs[] = {39, 165};
    for (size_t i = 0; i < 2; i++) {
        u = run_probe(NULL, NULL, probe_x32, &nrs[i]);
        f = run_probe(&default_prog, NULL, probe_x32, &nrs[i]);
        print_message("  x32 syscall %ld: unfiltered %ld/%s, filtered %s %d\n", nrs[i], u.ret,
                      u.ret == -1 ? strerror(u.err) : "ok", f.sig ? "killed by signal" : "ret",
                      f.sig ? f.sig : (int)f.ret);
        assert_int_equal(f.sig, SIGSYS);
    }
}
#else
static void test_foreign_abis(void **state)
{
    skip();
}
#endif

static void test_load_errors(void **state)
{
    struct nsbox_err e = {0};
    struct sock_fprog empty = {0, NULL};
    assert_int_equal(nsbox_seccomp_prog_load(&empty, &e), -1);
    assert_int_equal(e.code, NSBOX_E_INVALID);
    assert_int_equal(nsbox_seccomp_prog_load(NULL, &e), -1);
}

static long probe_load_without_nnp(const void *arg, uint64_t *extra)
{
    struct nsbox_err e = {0};
    if (nsbox_seccomp_prog_load(arg, &e) == 0)
        return 0;
    errno = e.sys_errno;
    return strstr(e.msg, "no_new_privs") ? -1 : -2;
}

/* Root (CAP_SYS_ADMIN) may load a filter without no_new_privs: become nobody first, which
 * drops every capability, as nsbox's sandbox user has none. */
static long drop_root(const void *arg, uint64_t *extra)
{
    if (geteuid() != 0) return 0;
    if (setresgid(65534, 65534, 65534) < 0 || setresuid(65534, 65534, 65534) < 0) return -1;
    return 0;
}

static void test_load_needs_nnp(void **state)
{
    struct probe_result r = run_probe(NULL, drop_root, probe_load_without_nnp, &default_prog);
    assert_int_equal(r.sig, 0);
    assert_int_equal(r.ret, -1);
    assert_int_equal(r.err, EACCES);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_denied_syscalls),
        cmocka_unit_test(test_all_unconditional_denies),
        cmocka_unit_test(test_personality_values),
        cmocka_unit_test(test_clone_namespace_flags),
        cmocka_unit_test(test_foreign_abis),
        cmocka_unit_test(test_load_errors),
        cmocka_unit_test(test_load_needs_nnp),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
