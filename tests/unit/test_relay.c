/* The command line's stdio for a sandboxed command: which descriptors are passed on as they are,
 * and the relay of the others (runtime/relay.h). */
#include "relay.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[] = "/tmp/nsbox-relay-XXXXXX";

static int open_file(const char *name, int flags)
{
    char path[128];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int fd = open(path, flags | O_CREAT | O_CLOEXEC, 0644);
    assert_true(fd >= 0);
    return fd;
}

static void test_shareable(void **state)
{
    (void)state;
    int p[2], sp[2];
    assert_int_equal(pipe(p), 0);
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sp), 0);
    int null = open("/dev/null", O_WRONLY);
    int zero = open("/dev/zero", O_RDONLY);
    int ro = open_file("ro", O_RDONLY);
    int rw = open_file("rw", O_RDWR);
    int ap = open_file("ap", O_WRONLY | O_APPEND);
    for (int which = 0; which < 3; which++) {
        assert_true(nsbox_stdio_shareable(p[0], which));
        assert_false(nsbox_stdio_shareable(sp[0], which)); /* the host's network namespace */
        assert_true(nsbox_stdio_shareable(null, which));
        assert_true(nsbox_stdio_shareable(-1, which)); /* closed stays closed */
        assert_false(nsbox_stdio_shareable(zero, which)); /* another device */
        assert_false(nsbox_stdio_shareable(rw, which));
        assert_false(nsbox_stdio_shareable(ap, which));
        /* a file read from: only as stdin */
        assert_int_equal(nsbox_stdio_shareable(ro, which), which == 0);
    }
    int fds[] = {p[0], p[1], sp[0], sp[1], null, zero, ro, rw, ap};
    for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++)
        close(fds[i]);
}

static void test_fast_path_makes_nothing(void **state)
{
    (void)state;
    int p[2];
    assert_int_equal(pipe(p), 0);
    int null = open("/dev/null", O_RDONLY);
    int fds[3] = {null, p[1], p[1]};
    struct nsbox_relay r;
    assert_int_equal(nsbox_relay_start(&r, fds), 0);
    assert_int_equal(fds[0], null);
    assert_int_equal(fds[1], p[1]);
    assert_int_equal(fds[2], p[1]);
    assert_int_equal(r.stop, -1);
    nsbox_relay_finish(&r);
    close(p[0]);
    close(p[1]);
    close(null);
}

/* A file's output through the relay: all of it, after the writer ended, even though a copy of
 * the pipe's end (a background child's) stays open. */
static void test_relays_a_file_and_ends_without_eof(void **state)
{
    (void)state;
    int out = open_file("out", O_WRONLY | O_TRUNC | O_APPEND);
    int null = open("/dev/null", O_RDONLY);
    int fds[3] = {null, out, -1};
    struct nsbox_relay r;
    assert_int_equal(nsbox_relay_start(&r, fds), 0);
    assert_int_not_equal(fds[1], out);
    struct stat st;
    assert_int_equal(fstat(fds[1], &st), 0);
    assert_true(S_ISFIFO(st.st_mode));
    int held = dup(fds[1]); /* the background child's */
    size_t total = 0;
    char buf[4096];
    for (int i = 0; i < 1000; i++) {
        memset(buf, 'a' + i % 26, sizeof buf);
        assert_int_equal(write(fds[1], buf, sizeof buf), (ssize_t)sizeof buf);
        total += sizeof buf;
    }
    nsbox_relay_finish(&r); /* returns although `held` keeps the pipe open */
    assert_int_equal(fstat(out, &st), 0);
    assert_int_equal((size_t)st.st_size, total);
    assert_true(fcntl(out, F_GETFL) & O_APPEND);
    /* our end is closed: a later writer gets EPIPE, not a pipe that fills for ever */
    signal(SIGPIPE, SIG_IGN);
    assert_int_equal(write(held, "x", 1), -1);
    close(held);
    close(out);
    close(null);
}

/* `> log 2>&1`: one pipe for both, so that the file has the command's order. */
static void test_same_file_keeps_the_order_of_both(void **state)
{
    (void)state;
    int out = open_file("both", O_RDWR | O_TRUNC);
    int fds[3] = {-1, out, out};
    struct nsbox_relay r;
    assert_int_equal(nsbox_relay_start(&r, fds), 0);
    assert_int_not_equal(fds[1], out);
    assert_int_equal(fds[2], fds[1]);
    for (int i = 0; i < 200; i++)
        assert_int_equal(write(fds[1 + i % 2], i % 2 ? "e\n" : "o\n", 2), 2);
    nsbox_relay_finish(&r);
    char buf[512];
    assert_int_equal(pread(out, buf, sizeof buf, 0), 400);
    for (int i = 0; i < 200; i++)
        assert_int_equal(buf[2 * i], i % 2 ? 'e' : 'o');
    close(out);
}

static int teardown(void **state)
{
    (void)state;
    char cmd[64];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

int main(void)
{
    if (!mkdtemp(dir))
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shareable),
        cmocka_unit_test(test_fast_path_makes_nothing),
        cmocka_unit_test(test_relays_a_file_and_ends_without_eof),
        cmocka_unit_test(test_same_file_keeps_the_order_of_both),
    };
    int r = cmocka_run_group_tests(tests, NULL, NULL);
    teardown(NULL);
    return r;
}
