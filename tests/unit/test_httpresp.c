/* Where HTTP/1.1 responses end (policy/httpresp.c): pipelined responses told apart whatever
 * their framing and however the bytes are cut, interim responses skipped, HEAD, 204 and 304
 * without a body, chunked bodies with trailers, a 101 that ends HTTP, and streams it cannot
 * frame. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "httpresp.h"

#include <stdio.h>
#include <string.h>

/* Feeds text in pieces of step bytes as responses to n requests (head_at[i]: the i-th was HEAD);
 * records each response's status and length; returns how many ended. */
static size_t split(const char *text, size_t step, size_t n, const bool *head_at, int *status,
                    size_t *len)
{
    struct nsbox_httpresp r;
    size_t total = strlen(text), at = 0, ended = 0, cur = 0;
    nsbox_httpresp_start(&r, head_at && head_at[0]);
    while (at < total) {
        size_t k = total - at < step ? total - at : step;
        size_t used = nsbox_httpresp_feed(&r, (const uint8_t *)text + at, k);
        if (ended == n) /* a response nobody asked for: not fed */
            assert_int_equal(used, 0);
        cur += used;
        at += used;
        if (r.done) {
            status[ended] = r.status;
            len[ended++] = cur;
            cur = 0;
            if (r.state == NSBOX_HTTPRESP_TUNNEL)
                break;
            if (ended < n)
                nsbox_httpresp_start(&r, head_at && head_at[ended]);
        } else if (used == 0) {
            break;
        }
    }
    if (ended < n) {
        status[ended] = r.status;
        len[ended] = cur;
    }
    return ended;
}

/* Every cut of the stream gives the same answer. */
static void check(const char *text, size_t n, const bool *head_at, size_t ended_want,
                  const int *status_want, const size_t *len_want)
{
    for (size_t step = 1; step <= strlen(text) + 1; step++) {
        int status[8] = {0};
        size_t len[8] = {0};
        size_t ended = split(text, step, n, head_at, status, len);
        if (ended != ended_want)
            fail_msg("step %zu: %zu responses ended, want %zu", step, ended, ended_want);
        for (size_t i = 0; i < n && i <= ended; i++)
            if (i < ended_want + (ended_want < n) &&
                (status[i] != status_want[i] || len[i] != len_want[i]))
                fail_msg("step %zu, response %zu: status %d length %zu, want %d %zu", step, i,
                         status[i], len[i], status_want[i], len_want[i]);
    }
}

#define R1 "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"
#define R2 "HTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"
#define R3 "HTTP/1.1 201 Created\r\ncontent-length: 0\r\n\r\n"

static void test_pipelined_lengths_and_chunks(void **state)
{
    (void)state;
    int st[] = {200, 404, 201};
    size_t len[] = {strlen(R1), strlen(R2), strlen(R3)};
    check(R1 R2 R3, 3, NULL, 3, st, len);
}

static void test_interim_and_bodiless(void **state)
{
    (void)state;
    /* 100 and 103 are not the response: the final one follows on the same request */
    const char *a = "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n"
                    "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
    /* HEAD: a Content-Length and no body; 204 and 304 have none either */
    const char *b = "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n";
    const char *c = "HTTP/1.1 204 No Content\r\nContent-Length: 7\r\n\r\n";
    const char *d = "HTTP/1.1 304 Not Modified\r\nTransfer-Encoding: chunked\r\n\r\n";
    char all[512];
    snprintf(all, sizeof all, "%s%s%s%s%s", a, b, c, d, R1);
    bool head_at[] = {false, true, false, false, false};
    int st[] = {200, 200, 204, 304, 200};
    size_t len[] = {strlen(a), strlen(b), strlen(c), strlen(d), strlen(R1)};
    check(all, 5, head_at, 5, st, len);
}

static void test_trailers_and_lenient_lines(void **state)
{
    (void)state;
    /* trailer fields after the last chunk; LF-only lines; a status line with no reason; an
     * extension; a list of equal lengths */
    const char *a = "HTTP/1.1 200 OK\r\nTransfer-Encoding: Chunked\r\n\r\n"
                    "2;x=y\r\nab\r\n0\r\nX-Digest: 1\r\nX-More: 2\r\n\r\n";
    const char *b = "HTTP/1.1 202\nContent-Length: 3, 3\n\nxyz";
    const char *c = "HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\nz";
    /* chunks framed as http.client and curl read them: whitespace before an extension, LF */
    const char *d = "HTTP/1.1 200 OK\nTransfer-Encoding: chunked\n\n2 ;x\nab\n1\t\r\nc\r\n0\n\n";
    char all[512];
    snprintf(all, sizeof all, "%s%s%s%s", a, b, c, d);
    int st[] = {200, 202, 200, 200};
    size_t len[] = {strlen(a), strlen(b), strlen(c), strlen(d)};
    check(all, 4, NULL, 4, st, len);
}

static void test_body_until_close(void **state)
{
    (void)state;
    /* no length, or a coding other than chunked last: the body is the rest of the stream, and
     * the requests after it get nothing */
    const char *a = "HTTP/1.1 200 OK\r\n\r\nall of it" R1;
    int st[] = {200, 0};
    size_t len[] = {strlen(a), 0};
    check(a, 2, NULL, 0, st, len);
    const char *b = "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n0\r\n\r\n" R1;
    size_t lb[] = {strlen(b), 0};
    check(b, 2, NULL, 0, st, lb);
}

static void test_chunked_overrides_a_length(void **state)
{
    (void)state;
    /* a final coding of chunked frames the body whatever Content-Length says, in either order,
     * and whatever codings come before it (RFC 9112 6.3) */
    const char *a = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 99\r\n\r\n"
                    "3\r\nabc\r\n0\r\n\r\n";
    const char *b = "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n"
                    "3\r\nabc\r\n0\r\n\r\n";
    const char *c = "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"
                    "3\r\nabc\r\n0\r\n\r\n";
    char all[512];
    snprintf(all, sizeof all, "%s%s%s%s", a, b, c, R1);
    int st[] = {200, 200, 200, 200};
    size_t len[] = {strlen(a), strlen(b), strlen(c), strlen(R1)};
    check(all, 4, NULL, 4, st, len);
}

static void test_switching_protocols(void **state)
{
    (void)state;
    /* a 101 ends HTTP on the connection: what follows is the new protocol's */
    const char *a = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                    "Connection: Upgrade\r\n\r\n";
    char all[256];
    snprintf(all, sizeof all, "%s\x81\x05hello", a);
    struct nsbox_httpresp r;
    nsbox_httpresp_start(&r, false);
    size_t used = nsbox_httpresp_feed(&r, (const uint8_t *)all, strlen(all));
    assert_int_equal(used, strlen(a));
    assert_true(r.done);
    assert_int_equal(r.status, 101);
    assert_int_equal(r.state, NSBOX_HTTPRESP_TUNNEL);
    used = nsbox_httpresp_feed(&r, (const uint8_t *)all + used, 7);
    assert_int_equal(used, 7);
    assert_false(r.done);
}

static void test_lost(void **state)
{
    (void)state;
    /* what cannot be framed takes the rest of the stream: no later response is made up */
    const char *cases[] = {
        "HTTP/2 200\r\n\r\n" R1,
        "garbage\r\n\r\n" R1,
        "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello" R1,
        "HTTP/1.1 200 OK\r\nContent-Length: 5, 6\r\n\r\nhello" R1,
        "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\nhello" R1,
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n" R1,
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        struct nsbox_httpresp r;
        nsbox_httpresp_start(&r, false);
        size_t n = strlen(cases[i]);
        assert_int_equal(nsbox_httpresp_feed(&r, (const uint8_t *)cases[i], n), n);
        assert_false(r.done);
        assert_true(r.state == NSBOX_HTTPRESP_LOST || r.state == NSBOX_HTTPRESP_CLOSE);
    }
    /* framing a client could read otherwise than this reader (and the relay's masking): lost,
     * whichever order its lines come in; a HEAD's, a 204's or a 304's frames nothing */
    static const struct {
        const char *head, *why;
    } ambiguous[] = {
        {"Transfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\n", "more than one"},
        {"Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n", "more than one"},
        {"Transfer-Encoding: gzip\r\nContent-Length: 9\r\n", "Content-Length"},
        {"Content-Length: 9\r\nTransfer-Encoding: gzip\r\n", "Content-Length"},
        {"Transfer-Encoding: chunked, gzip\r\n", "before another coding"},
        {"Transfer-Encoding: chunked, chunked\r\n", "before another coding"},
        {"Transfer-Encoding: identity\r\n chunked\r\n", "folded"},
    };
    for (size_t i = 0; i < sizeof ambiguous / sizeof *ambiguous; i++) {
        char text[256];
        snprintf(text, sizeof text, "HTTP/1.1 200 OK\r\n%s\r\n5\r\nhello\r\n0\r\n\r\n" R1,
                 ambiguous[i].head);
        struct nsbox_httpresp r;
        nsbox_httpresp_start(&r, false);
        assert_int_equal(nsbox_httpresp_feed(&r, (const uint8_t *)text, strlen(text)),
                         strlen(text));
        assert_int_equal(r.state, NSBOX_HTTPRESP_LOST);
        if (!strstr(r.why, ambiguous[i].why))
            fail_msg("%s: %s", ambiguous[i].head, r.why);
        if (!strcmp(ambiguous[i].why, "folded"))
            continue; /* a folded framing line is not read even when it frames nothing */
        nsbox_httpresp_start(&r, true);
        snprintf(text, sizeof text, "HTTP/1.1 200 OK\r\n%s\r\n", ambiguous[i].head);
        assert_int_equal(nsbox_httpresp_feed(&r, (const uint8_t *)text, strlen(text)),
                         strlen(text));
        assert_true(r.done);
    }
    /* a malformed chunk says what */
    {
        const char *t = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\nzz";
        struct nsbox_httpresp r;
        nsbox_httpresp_start(&r, false);
        nsbox_httpresp_feed(&r, (const uint8_t *)t, strlen(t));
        assert_int_equal(r.state, NSBOX_HTTPRESP_LOST);
        assert_string_equal(r.why, "malformed chunk size");
    }
    /* a Content-Length line too long to read is not guessed at */
    char big[1024];
    snprintf(big, sizeof big, "HTTP/1.1 200 OK\r\nContent-Length: %0300d5\r\n\r\nhello", 0);
    struct nsbox_httpresp r;
    nsbox_httpresp_start(&r, false);
    nsbox_httpresp_feed(&r, (const uint8_t *)big, strlen(big));
    assert_int_equal(r.state, NSBOX_HTTPRESP_LOST);
    /* a long line of another field is skipped */
    snprintf(big, sizeof big, "HTTP/1.1 200 OK\r\nX-Long: %0600d\r\nContent-Length: 2\r\n\r\nok",
             0);
    nsbox_httpresp_start(&r, false);
    assert_int_equal(nsbox_httpresp_feed(&r, (const uint8_t *)big, strlen(big)), strlen(big));
    assert_true(r.done);
    assert_int_equal(r.status, 200);
}

static void test_idle_reads_nothing(void **state)
{
    (void)state;
    struct nsbox_httpresp r;
    memset(&r, 0, sizeof r);
    assert_int_equal(nsbox_httpresp_feed(&r, (const uint8_t *)R1, strlen(R1)), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pipelined_lengths_and_chunks),
        cmocka_unit_test(test_interim_and_bodiless),
        cmocka_unit_test(test_trailers_and_lenient_lines),
        cmocka_unit_test(test_body_until_close),
        cmocka_unit_test(test_chunked_overrides_a_length),
        cmocka_unit_test(test_switching_protocols),
        cmocka_unit_test(test_lost),
        cmocka_unit_test(test_idle_reads_nothing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
