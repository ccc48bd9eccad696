/* The command line's stdio for a sandboxed command: which descriptors are passed on as they are,
 * and the relay of the others (service/relay.h). */
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

static void test_ways(void **state)
{
    (void)state;
    int p[2], sp[2];
    assert_int_equal(pipe(p), 0);
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sp), 0);
    int null = open("/dev/null", O_RDONLY);
    int zero = open("/dev/zero", O_RDONLY);
    int ro = open_file("ro", O_RDONLY);
    int rw = open_file("rw", O_RDWR);
    int ap = open_file("ap", O_WRONLY | O_APPEND);
    int ro_others_write = open_file("ow", O_RDONLY);
    assert_int_equal(fchmod(ro_others_write, 0666), 0);
    char fifo[128];
    snprintf(fifo, sizeof fifo, "%s/fifo", dir);
    assert_int_equal(mkfifo(fifo, 0644), 0);
    int named = open(fifo, O_RDWR);
    assert_true(named >= 0);
    for (int which = 0; which < 3; which++) {
        /* a run's */
        assert_int_equal(nsbox_relay_stdio_way(p[0], which, false), NSBOX_STDIO_REOPEN);
        assert_int_equal(nsbox_relay_stdio_way(p[1], which, false), NSBOX_STDIO_REOPEN);
        assert_int_equal(nsbox_relay_stdio_way(sp[0], which, false), NSBOX_STDIO_RELAY);
        assert_int_equal(nsbox_relay_stdio_way(named, which, false), NSBOX_STDIO_RELAY);
        assert_int_equal(nsbox_relay_stdio_way(null, which, false), NSBOX_STDIO_AS_IS);
        assert_int_equal(nsbox_relay_stdio_way(-1, which, false), NSBOX_STDIO_AS_IS);
        assert_int_equal(nsbox_relay_stdio_way(zero, which, false), NSBOX_STDIO_RELAY);
        assert_int_equal(nsbox_relay_stdio_way(rw, which, false), NSBOX_STDIO_RELAY);
        assert_int_equal(nsbox_relay_stdio_way(ap, which, false), NSBOX_STDIO_RELAY);
        /* a file read from: only as stdin, and only when others may not write it */
        assert_int_equal(nsbox_relay_stdio_way(ro, which, false),
                         which == 0 ? NSBOX_STDIO_AS_IS : NSBOX_STDIO_RELAY);
        assert_int_equal(nsbox_relay_stdio_way(ro_others_write, which, false), NSBOX_STDIO_RELAY);
        /* an exec's: all but /dev/null (and what keeps its own handling) */
        assert_int_equal(nsbox_relay_stdio_way(p[0], which, true), NSBOX_STDIO_RELAY);
        assert_int_equal(nsbox_relay_stdio_way(p[1], which, true), NSBOX_STDIO_RELAY);
        assert_int_equal(nsbox_relay_stdio_way(ro, which, true), NSBOX_STDIO_RELAY);
        assert_int_equal(nsbox_relay_stdio_way(null, which, true), NSBOX_STDIO_AS_IS);
        assert_int_equal(nsbox_relay_stdio_way(-1, which, true), NSBOX_STDIO_AS_IS);
    }
    int fds[] = {p[0], p[1], sp[0], sp[1], null, zero, ro, rw, ap, ro_others_write, named};
    for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++)
        close(fds[i]);
    unlink(fifo);
}

/* A run's pipes: a new open of each, no thread; what the command does to its open file
 * description (O_NONBLOCK) is not the caller's. */
static void test_a_runs_pipes_are_reopened(void **state)
{
    (void)state;
    int in[2], out[2];
    assert_int_equal(pipe(in), 0);
    assert_int_equal(pipe(out), 0);
    int null = open("/dev/null", O_RDONLY);
    int fds[3] = {in[0], out[1], null};
    struct nsbox_relay r;
    assert_int_equal(nsbox_relay_start(&r, fds, false), 0);
    assert_int_equal(r.stop, -1); /* no thread */
    assert_int_equal(fds[2], null);
    struct stat a, b;
    for (int i = 0; i < 2; i++) {
        int caller = i == 0 ? in[0] : out[1];
        assert_int_not_equal(fds[i], caller);
        assert_true(fds[i] > 2);
        assert_int_equal(fstat(fds[i], &a), 0);
        assert_int_equal(fstat(caller, &b), 0);
        assert_true(a.st_ino == b.st_ino && a.st_dev == b.st_dev); /* the same pipe */
        assert_int_equal(fcntl(fds[i], F_GETFL) & O_ACCMODE, i == 0 ? O_RDONLY : O_WRONLY);
        assert_int_equal(fcntl(fds[i], F_SETFL, O_NONBLOCK), 0);
        assert_false(fcntl(caller, F_GETFL) & O_NONBLOCK);
    }
    assert_int_equal(write(fds[1], "x", 1), 1);
    char c;
    assert_int_equal(read(out[0], &c, 1), 1);
    assert_int_equal(write(in[1], "y", 1), 1);
    assert_int_equal(read(fds[0], &c, 1), 1);
    assert_int_equal(c, 'y');
    int given0 = fds[0];
    nsbox_relay_finish(&r);
    assert_int_equal(fcntl(given0, F_GETFD), -1); /* ours, closed */
    int all[] = {in[0], in[1], out[0], out[1], null};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        close(all[i]);
}

/* An exec's pipe is relayed: once it has finished, what the command left behind (a copy of
 * the pipe's end) reaches nothing of the caller's, whose pipe ends there. */
static void test_an_execs_pipe_is_relayed_and_let_go(void **state)
{
    (void)state;
    int out[2];
    assert_int_equal(pipe(out), 0);
    int fds[3] = {-1, out[1], -1};
    struct nsbox_relay r;
    assert_int_equal(nsbox_relay_start(&r, fds, true), 0);
    assert_int_not_equal(fds[1], out[1]);
    int held = dup(fds[1]); /* a background child's */
    assert_int_equal(write(fds[1], "done\n", 5), 5);
    nsbox_relay_finish(&r);
    close(out[1]); /* the caller's own copy: the pipe's last writer now */
    char buf[16];
    assert_int_equal(read(out[0], buf, sizeof buf), 5);
    assert_int_equal(read(out[0], buf, sizeof buf), 0); /* the end, though `held` lives */
    signal(SIGPIPE, SIG_IGN);
    assert_int_equal(write(held, "late", 4), -1);
    close(held);
    close(out[0]);
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
    assert_int_equal(nsbox_relay_start(&r, fds, false), 0);
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
    assert_int_equal(nsbox_relay_start(&r, fds, false), 0);
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
        cmocka_unit_test(test_ways),
        cmocka_unit_test(test_a_runs_pipes_are_reopened),
        cmocka_unit_test(test_an_execs_pipe_is_relayed_and_let_go),
        cmocka_unit_test(test_relays_a_file_and_ends_without_eof),
        cmocka_unit_test(test_same_file_keeps_the_order_of_both),
    };
    int r = cmocka_run_group_tests(tests, NULL, NULL);
    teardown(NULL);
    return r;
}
