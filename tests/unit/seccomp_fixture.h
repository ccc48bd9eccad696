/* What both seccomp test files share (test_seccomp.c: parsing, compiling, the cache;
 * test_seccomp_probes.c: the default filter loaded for real): the default program, compiled once
 * per group, and parse_ok. */
#ifndef NSBOX_TESTS_SECCOMP_FIXTURE_H
#define NSBOX_TESTS_SECCOMP_FIXTURE_H
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "seccomp_prog.h"
#include <seccomp.h>

#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static struct sock_fprog default_prog;

static int group_setup(void **state)
{
    struct nsbox_err e = {0};
    if (nsbox_seccomp_prog_default(NULL, &default_prog, &e) < 0) {
        fprintf(stderr, "default program: %s\n", e.msg);
        return -1;
    }
    return 0;
}

static int group_teardown(void **state)
{
    nsbox_seccomp_compile_free(&default_prog);
    return 0;
}

/* Fork a probe child with a pipe back to the parent: 0 in the child, which writes to fds[1];
 * the child's pid in the parent, which reads fds[0]. */
static inline pid_t probe_fork(int fds[2])
{
    assert_int_equal(pipe2(fds, O_CLOEXEC), 0);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    return pid;
}

static void parse_ok(const char *json, struct nsbox_seccomp_profile *p)
{
    struct nsbox_err e = {0};
    if (nsbox_seccomp_profile_parse(json, strlen(json), p, &e) < 0)
        fail_msg("unexpected parse error: %s\n  for: %s", e.msg, json);
}

#endif
