/* The egress helper's configuration on its socketpair (sandbox/egress_wire.c): what is put is
 * got back in order, with the descriptors sent beside it; a get past the end, a string too long
 * or holding a NUL, and a message cut short are refused, never read past; a child forked while
 * the buffer holds values sees zeros. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "egress_wire.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static void test_items_come_back_in_order(void **state)
{
    (void)state;
    struct nsbox_egress_wire w;
    assert_int_equal(nsbox_egress_wire_init(&w), 0);
    nsbox_egress_wire_put_u32(&w, 7);
    nsbox_egress_wire_put_str(&w, "api.example.com");
    nsbox_egress_wire_put_bytes(&w, "a\0b", 3);
    uint8_t *room = nsbox_egress_wire_put_space(&w, 4);
    assert_non_null(room);
    memcpy(room, "DER!", 4);
    assert_false(w.over);
    uint32_t v;
    char name[64];
    const uint8_t *p;
    size_t n;
    assert_true(nsbox_egress_wire_get_u32(&w, &v));
    assert_int_equal(v, 7);
    assert_true(nsbox_egress_wire_get_str(&w, name, sizeof name));
    assert_string_equal(name, "api.example.com");
    /* bytes with a NUL are bytes, not a string */
    size_t at = w.at;
    assert_false(nsbox_egress_wire_get_str(&w, name, sizeof name));
    w.at = at;
    w.over = false;
    assert_true(nsbox_egress_wire_get_bytes(&w, &p, &n));
    assert_int_equal(n, 3);
    assert_memory_equal(p, "a\0b", 3);
    assert_true(nsbox_egress_wire_get_bytes(&w, &p, &n));
    assert_memory_equal(p, "DER!", 4);
    /* the end: nothing more, and it stays refused */
    assert_false(nsbox_egress_wire_get_u32(&w, &v));
    assert_true(w.over);
    assert_false(nsbox_egress_wire_get_bytes(&w, &p, &n));
    nsbox_egress_wire_free(&w);
    assert_null(w.p);
}

static void test_lengths_past_the_end_are_refused(void **state)
{
    (void)state;
    struct nsbox_egress_wire w;
    assert_int_equal(nsbox_egress_wire_init(&w), 0);
    nsbox_egress_wire_put_u32(&w, 1000); /* a length of 1000, then 2 bytes */
    nsbox_egress_wire_put_u32(&w, 0x4141);
    const uint8_t *p;
    size_t n;
    assert_false(nsbox_egress_wire_get_bytes(&w, &p, &n));
    assert_true(w.over);
    nsbox_egress_wire_free(&w);
    /* a string longer than its buffer */
    assert_int_equal(nsbox_egress_wire_init(&w), 0);
    nsbox_egress_wire_put_str(&w, "0123456789");
    char small[8];
    assert_false(nsbox_egress_wire_get_str(&w, small, sizeof small));
    nsbox_egress_wire_free(&w);
    /* a message over the bound is not written */
    assert_int_equal(nsbox_egress_wire_init(&w), 0);
    assert_null(nsbox_egress_wire_put_space(&w, NSBOX_EGRESS_WIRE_MAX));
    assert_true(w.over);
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    assert_int_equal(nsbox_egress_wire_send(sv[0], &w, NULL, 0), -1);
    assert_int_equal(errno, EMSGSIZE);
    close(sv[0]);
    close(sv[1]);
    nsbox_egress_wire_free(&w);
}

static void test_message_and_descriptors_cross_a_socketpair(void **state)
{
    (void)state;
    int sv[2], pp[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    assert_int_equal(pipe2(pp, O_CLOEXEC), 0);
    struct nsbox_egress_wire out, in;
    assert_int_equal(nsbox_egress_wire_init(&out), 0);
    assert_int_equal(nsbox_egress_wire_init(&in), 0);
    /* written after the fork: a child forked while the buffer holds values sees zeros there
     * (test_values_are_zeros_in_a_child); larger than a socket buffer, so that the reader
     * drains while the writer writes */
    pid_t c = fork();
    assert_true(c >= 0);
    if (c == 0) {
        uint8_t *big = nsbox_egress_wire_put_space(&out, 600 * 1024);
        if (!big)
            _exit(2);
        memset(big, 'x', 600 * 1024);
        nsbox_egress_wire_put_str(&out, "end");
        _exit(nsbox_egress_wire_send(sv[0], &out, pp, 2) == 0 ? 0 : 1);
    }
    int fds[4];
    size_t n_fds = 0;
    assert_int_equal(nsbox_egress_wire_recv(sv[1], &in, fds, 4, &n_fds), 0);
    assert_int_equal(n_fds, 2);
    const uint8_t *p;
    size_t n;
    char end[8];
    assert_true(nsbox_egress_wire_get_bytes(&in, &p, &n));
    assert_int_equal(n, 600 * 1024);
    assert_true(nsbox_egress_wire_get_str(&in, end, sizeof end));
    assert_string_equal(end, "end");
    assert_int_equal(in.at, in.n);
    /* the descriptors are the pipe's ends, close-on-exec */
    struct stat a, b;
    assert_int_equal(fstat(fds[0], &a), 0);
    assert_int_equal(fstat(pp[0], &b), 0);
    assert_int_equal(a.st_ino, b.st_ino);
    assert_true(fcntl(fds[1], F_GETFD) & FD_CLOEXEC);
    /* the status after it */
    assert_int_equal(nsbox_egress_wire_send_status(sv[1], EPERM, "what failed"), 0);
    struct nsbox_egress_status st;
    assert_int_equal(nsbox_egress_wire_recv_status(sv[0], &st), 0);
    assert_int_equal(st.err, EPERM);
    assert_string_equal(st.what, "what failed");
    int status;
    assert_int_equal(waitpid(c, &status, 0), c);
    assert_int_equal(WEXITSTATUS(status), 0);
    for (int i = 0; i < 2; i++) {
        close(fds[i]);
        close(pp[i]);
    }
    close(sv[0]);
    close(sv[1]);
    nsbox_egress_wire_free(&out);
    nsbox_egress_wire_free(&in);
}

/* The values never reach a child forked while they are held (the sandbox's init, the helper
 * before its exec): MADV_WIPEONFORK. */
static void test_values_are_zeros_in_a_child(void **state)
{
    (void)state;
    struct nsbox_egress_wire w;
    assert_int_equal(nsbox_egress_wire_init(&w), 0);
    nsbox_egress_wire_put_str(&w, "Bearer secret");
    pid_t c = fork();
    assert_true(c >= 0);
    if (c == 0) {
        for (size_t i = 0; i < w.n; i++)
            if (w.p[i])
                _exit(1);
        _exit(0);
    }
    int status;
    assert_int_equal(waitpid(c, &status, 0), c);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    assert_memory_equal(w.p + 4, "Bearer secret", 13); /* the parent keeps them */
    nsbox_egress_wire_free(&w);
}

static void test_a_message_cut_short_is_refused(void **state)
{
    (void)state;
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    uint32_t len = 100; /* announces 100 bytes, sends 10, then ends */
    assert_int_equal(write(sv[0], &len, sizeof len), sizeof len);
    assert_int_equal(write(sv[0], "0123456789", 10), 10);
    close(sv[0]);
    struct nsbox_egress_wire in;
    assert_int_equal(nsbox_egress_wire_init(&in), 0);
    int fds[1];
    size_t n_fds;
    assert_int_equal(nsbox_egress_wire_recv(sv[1], &in, fds, 1, &n_fds), -1);
    assert_int_equal(errno, EPROTO);
    /* a status that never comes: the helper ended without a word */
    struct nsbox_egress_status st;
    assert_int_equal(nsbox_egress_wire_recv_status(sv[1], &st), -1);
    assert_int_equal(errno, EIO);
    close(sv[1]);
    nsbox_egress_wire_free(&in);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_items_come_back_in_order),
        cmocka_unit_test(test_lengths_past_the_end_are_refused),
        cmocka_unit_test(test_message_and_descriptors_cross_a_socketpair),
        cmocka_unit_test(test_values_are_zeros_in_a_child),
        cmocka_unit_test(test_a_message_cut_short_is_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
