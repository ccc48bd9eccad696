/* The egress helper's jail (sandbox/egress_jail.c): a child enters it, as the helper does, and
 * then attempts what an attacker who took over the helper would: run a program, make a process,
 * open a netlink or packet socket, trace, mount, regain root, use io_uring. Each must fail,
 * while what the helper needs (threads, IPv4 sockets, name resolution from files) still works.
 * As root the child also takes the helper's ids; otherwise it keeps the caller's. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "egress_jail.h"
#include "idmap.h"
#include "seccomp_profile.h"
#include "util.h"

#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static void *thread_fn(void *arg)
{
    return arg;
}

static bool denied(long r)
{
    return r == -1 && errno == EPERM;
}

/* In the jailed child: 0 when every attempt came out as it should, else the failed check's
 * number. */
static int attempts(bool as_root, uint32_t id)
{
    char *const argv[] = {"/bin/false", NULL}; /* run, it would exit 1: this check failed */
    if (!denied(execve("/bin/false", argv, NULL)))
        return 1;
    if (!denied(syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0))) /* a process, not a thread */
        return 2;
    if (!denied(socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, 0)))
        return 3;
    if (!denied(socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, 0)))
        return 4;
    if (!denied(ptrace(PTRACE_TRACEME, 0, NULL, NULL)))
        return 5;
    if (!denied(mount("none", "/tmp", "tmpfs", 0, NULL)))
        return 6;
    if (!denied(syscall(SYS_setresuid, 0, 0, 0)))
        return 7;
    if (!denied(syscall(SYS_io_uring_setup, 1, NULL)))
        return 8;
    if (!denied(prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)))
        return 9;
    /* what the helper needs */
    pthread_t t;
    if (pthread_create(&t, NULL, thread_fn, NULL) != 0 || pthread_join(t, NULL) != 0)
        return 20;
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0)
        return 21;
    close(s);
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *res = NULL;
    if (getaddrinfo("localhost", "443", &hints, &res) != 0)
        return 22;
    freeaddrinfo(res);
    if (as_root && (getuid() != id || geteuid() != id || getgid() != id || getegid() != id))
        return 23;
    if (as_root && getgroups(0, NULL) != 0)
        return 24;
    /* capget is not in the filter: the kernel's own account */
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    int zero = 0;
    while (f && fgets(line, sizeof line, f))
        if (!strcmp(line, "CapPrm:\t0000000000000000\n") ||
            !strcmp(line, "CapEff:\t0000000000000000\n") ||
            !strcmp(line, "CapAmb:\t0000000000000000\n") || !strcmp(line, "NoNewPrivs:\t1\n") ||
            !strcmp(line, "Seccomp:\t2\n"))
            zero++;
    if (f)
        fclose(f);
    if (zero != 5)
        return 25;
    return 0;
}

/* The helper's filter, compiled as its parent does (sandbox/egress_spawn.c). */
static void compile(struct sock_fprog *prog)
{
    struct nsbox_seccomp_profile p;
    struct nsbox_err e = {0};
    const char *json = nsbox_seccomp_egress_json();
    assert_int_equal(nsbox_seccomp_profile_parse(json, strlen(json), &p, &e), 0);
    assert_int_equal(nsbox_seccomp_compile(&p, prog, &e), 0);
    nsbox_seccomp_profile_free(&p);
}

static void test_attacks_fail_in_the_jail(void **state)
{
    (void)state;
    bool root = geteuid() == 0;
    uint32_t id = nsbox_idmap_egress_id(NSBOX_UID_SLOTS - 1);
    struct sock_fprog prog;
    compile(&prog);
    pid_t parent = getpid();
    pid_t c = fork();
    assert_true(c >= 0);
    if (c == 0) {
        /* the ids as the helper's parent takes them before the exec (egress_spawn.c) */
        if (root && (syscall(SYS_setgroups, 0, NULL) < 0 || nsbox_set_ids(id, id) < 0))
            _exit(101);
        if (nsbox_egress_jail_seal() < 0 || nsbox_egress_jail_enter(&prog, parent) < 0)
            _exit(100);
        _exit(attempts(root, id));
    }
    nsbox_seccomp_compile_free(&prog);
    int status;
    assert_int_equal(waitpid(c, &status, 0), c);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

/* The helper refuses to serve when its parent is not the one it must die with. */
static void test_orphan_does_not_enter(void **state)
{
    (void)state;
    struct sock_fprog prog;
    compile(&prog);
    pid_t c = fork();
    assert_true(c >= 0);
    if (c == 0)
        _exit(nsbox_egress_jail_enter(&prog, 1) < 0 && errno == ESRCH ? 0 : 1);
    nsbox_seccomp_compile_free(&prog);
    int status;
    assert_int_equal(waitpid(c, &status, 0), c);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_attacks_fail_in_the_jail),
        cmocka_unit_test(test_orphan_does_not_enter),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
