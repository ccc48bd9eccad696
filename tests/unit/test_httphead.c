/* HTTP/1.1 request heads (policy/httphead.c): what the egress helper relays to a bound host,
 * every smuggling shape it must refuse, the rewriting of the bound header and chunked bodies. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "httphead.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SNI "api.lab.test"

static struct nsbox_httphead H;

static enum nsbox_httphead_verdict parse(const char *text)
{
    return nsbox_httphead_parse((const uint8_t *)text, strlen(text), SNI, 443, &H);
}

static void refused(const char *text, int status, const char *why_part)
{
    enum nsbox_httphead_verdict v = parse(text);
    if (v != NSBOX_HTTPHEAD_REFUSED || H.status != status || !strstr(H.why, why_part))
        fail_msg("%s: verdict %d status %d why %s", text, v, H.status, H.why ? H.why : "-");
}

static void test_plain_get(void **state)
{
    (void)state;
    const char *r = "GET /repos?x=1 HTTP/1.1\r\nHost: api.lab.test\r\nAccept: */*\r\n\r\nNEXT";
    assert_int_equal(parse(r), NSBOX_HTTPHEAD_OK);
    assert_int_equal(H.head_len, strlen(r) - 4);
    assert_string_equal(H.method, "GET");
    assert_int_equal(H.body, NSBOX_HTTPBODY_NONE);
    assert_false(H.close);
    /* every shorter prefix asks for more */
    for (size_t n = 0; n < H.head_len; n++)
        assert_int_equal(nsbox_httphead_parse((const uint8_t *)r, n, SNI, 443, &H),
                         NSBOX_HTTPHEAD_MORE);
}

static void test_host_forms(void **state)
{
    (void)state;
    assert_int_equal(parse("GET / HTTP/1.1\r\nHost: API.Lab.Test:443\r\n\r\n"), NSBOX_HTTPHEAD_OK);
    assert_int_equal(parse("GET / HTTP/1.1\r\nhost:api.lab.test \r\n\r\n"), NSBOX_HTTPHEAD_OK);
    refused("GET / HTTP/1.1\r\nHost: other.lab.test\r\n\r\n", 403, "another host");
    refused("GET / HTTP/1.1\r\nHost: api.lab.test.evil\r\n\r\n", 403, "another host");
    refused("GET / HTTP/1.1\r\nHost: api.lab.test:8443\r\n\r\n", 403, "another host");
    refused("GET / HTTP/1.1\r\nHost: api.lab.test:\r\n\r\n", 403, "another host");
    refused("GET / HTTP/1.1\r\nHost: api.lab.test\r\nHost: api.lab.test\r\n\r\n", 400,
            "more than one Host");
    refused("GET / HTTP/1.1\r\nAccept: x\r\n\r\n", 400, "no Host");
}

static void test_bodies(void **state)
{
    (void)state;
    assert_int_equal(parse("POST /x HTTP/1.1\r\nHost: api.lab.test\r\nContent-Length: 12\r\n\r\n"),
                     NSBOX_HTTPHEAD_OK);
    assert_int_equal(H.body, NSBOX_HTTPBODY_LENGTH);
    assert_int_equal(H.content_length, 12);
    assert_int_equal(parse("POST /x HTTP/1.1\r\nHost: api.lab.test\r\n"
                           "Transfer-Encoding: Chunked\r\nConnection: close\r\n\r\n"),
                     NSBOX_HTTPHEAD_OK);
    assert_int_equal(H.body, NSBOX_HTTPBODY_CHUNKED);
    assert_true(H.close);
}

static void test_smuggling_shapes(void **state)
{
    (void)state;
    const char *h = "Host: api.lab.test\r\n";
    char r[512];
    static const struct {
        const char *fields;
        int status;
        const char *why;
    } cases[] = {
        {"Content-Length: 5\r\nContent-Length: 5\r\n", 400, "more than one Content-Length"},
        {"Content-Length: 5\r\nContent-Length: 6\r\n", 400, "more than one Content-Length"},
        {"Content-Length: 5, 5\r\n", 400, "not a number"},
        {"Content-Length: +5\r\n", 400, "not a number"},
        {"Content-Length: 0x5\r\n", 400, "not a number"},
        {"Content-Length:\r\n", 400, "not a number"},
        {"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n", 400, "both"},
        {"Transfer-Encoding: chunked\r\nContent-Length: 5\r\n", 400, "both"},
        {"Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n", 400,
         "more than one Transfer-Encoding"},
        {"Transfer-Encoding: gzip, chunked\r\n", 400, "exactly 'chunked'"},
        {"Transfer-Encoding: xchunked\r\n", 400, "exactly 'chunked'"},
        {"Transfer-Encoding : chunked\r\n", 400, "no space before"},
        {"X-A: 1\r\n folded\r\n", 400, "folding"},
        {"X-A: 1\r\n\tfolded\r\n", 400, "folding"},
        {"X-A: a\x01"
         "b\r\n",
         400, "control character"},
        {"X-A: a\rb\r\n", 400, "bare CR"},
        {"X-A: a\nX-B: b\r\n", 400, "bare CR or LF"},
        {"Upgrade: h2c\r\n", 400, "another protocol than websocket"},
        {"Connection: close, Content-Length\r\nContent-Length: 5\r\n", 400, "names Host"},
        {"Connection: Transfer-Encoding\r\n", 400, "names Host"},
        {"Connection: keep-alive\r\nConnection: host\r\n", 400, "names Host"},
        {": empty name\r\n", 400, "malformed header"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        snprintf(r, sizeof r, "POST / HTTP/1.1\r\n%s%s\r\n", h, cases[i].fields);
        refused(r, cases[i].status, cases[i].why);
    }
}

static void test_request_line(void **state)
{
    (void)state;
    refused("TRACE / HTTP/1.1\r\nHost: api.lab.test\r\n\r\n", 405, "TRACE and CONNECT");
    refused("CONNECT api.lab.test:443 HTTP/1.1\r\nHost: api.lab.test\r\n\r\n", 405,
            "TRACE and CONNECT");
    refused("GET http://other.lab.test/ HTTP/1.1\r\nHost: api.lab.test\r\n\r\n", 400,
            "origin-form");
    refused("GET https://api.lab.test/ HTTP/1.1\r\nHost: api.lab.test\r\n\r\n", 400, "origin-form");
    refused("GET * HTTP/1.1\r\nHost: api.lab.test\r\n\r\n", 400, "origin-form");
    assert_int_equal(parse("OPTIONS * HTTP/1.1\r\nHost: api.lab.test\r\n\r\n"), NSBOX_HTTPHEAD_OK);
    refused("GET / HTTP/1.0\r\nHost: api.lab.test\r\n\r\n", 505, "HTTP/1.1");
    refused("GET / HTTP/2\r\nHost: api.lab.test\r\n\r\n", 505, "HTTP/1.1");
    refused("GET  / HTTP/1.1\r\nHost: api.lab.test\r\n\r\n", 400, "target");
    refused("GET /\x7f HTTP/1.1\r\nHost: api.lab.test\r\n\r\n", 400, "target");
    refused("\r\nGET / HTTP/1.1\r\nHost: api.lab.test\r\n\r\n", 400, "request line");
    refused("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 505, "HTTP/2 is not relayed");
    refused("G@T / HTTP/1.1\r\nHost: api.lab.test\r\n\r\n", 400, "request line");
}

static void test_websocket_upgrade(void **state)
{
    (void)state;
    const char *ok[] = {
        "GET /ws HTTP/1.1\r\nHost: api.lab.test\r\nUpgrade: websocket\r\n"
        "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
        "Sec-WebSocket-Version: 13\r\n\r\n",
        /* as Firefox sends it */
        "GET /ws HTTP/1.1\r\nHost: api.lab.test\r\nConnection: keep-alive, Upgrade\r\n"
        "Upgrade: WebSocket\r\n\r\n",
    };
    for (size_t i = 0; i < 2; i++) {
        assert_int_equal(parse(ok[i]), NSBOX_HTTPHEAD_OK);
        assert_true(H.upgrade);
        assert_false(H.close);
    }
    assert_int_equal(parse("GET / HTTP/1.1\r\nHost: api.lab.test\r\nConnection: upgrade, close"
                           "\r\n\r\n"),
                     NSBOX_HTTPHEAD_OK);
    assert_false(H.upgrade);
    assert_true(H.close);
    /* the helper must know a handshake exactly when the origin does */
    refused("GET / HTTP/1.1\r\nHost: api.lab.test\r\nUpgrade: websocket\r\n\r\n", 400,
            "lists upgrade");
    refused("POST / HTTP/1.1\r\nHost: api.lab.test\r\nUpgrade: websocket\r\n"
            "Connection: upgrade\r\n\r\n",
            400, "a GET without a body");
    refused("GET / HTTP/1.1\r\nHost: api.lab.test\r\nUpgrade: websocket\r\n"
            "Connection: upgrade\r\nContent-Length: 3\r\n\r\nabc",
            400, "a GET without a body");
    refused("GET / HTTP/1.1\r\nHost: api.lab.test\r\nUpgrade: websocket\r\n"
            "Connection: upgrade\r\nTransfer-Encoding: chunked\r\n\r\n",
            400, "a GET without a body");
    refused("GET / HTTP/1.1\r\nHost: api.lab.test\r\nUpgrade: websocket\r\n"
            "Upgrade: websocket\r\nConnection: upgrade\r\n\r\n",
            400, "more than one Upgrade");
    refused("GET / HTTP/1.1\r\nHost: api.lab.test\r\nUpgrade: websocket, h2c\r\n"
            "Connection: upgrade\r\n\r\n",
            400, "another protocol");
    /* and the Host check holds for handshakes as for any request */
    refused("GET / HTTP/1.1\r\nHost: other.lab.test\r\nUpgrade: websocket\r\n"
            "Connection: upgrade\r\n\r\n",
            403, "another host");
}

static void test_oversize(void **state)
{
    (void)state;
    char *r = malloc(NSBOX_HTTPHEAD_MAX + 64);
    int n = sprintf(r, "GET / HTTP/1.1\r\nHost: api.lab.test\r\nX-Big: ");
    memset(r + n, 'a', NSBOX_HTTPHEAD_MAX);
    assert_int_equal(nsbox_httphead_parse((uint8_t *)r, NSBOX_HTTPHEAD_MAX - 1, SNI, 443, &H),
                     NSBOX_HTTPHEAD_MORE);
    assert_int_equal(nsbox_httphead_parse((uint8_t *)r, NSBOX_HTTPHEAD_MAX, SNI, 443, &H),
                     NSBOX_HTTPHEAD_REFUSED);
    assert_int_equal(H.status, 431);
    n = sprintf(r, "GET / HTTP/1.1\r\nHost: api.lab.test\r\n");
    for (int i = 0; i < 101; i++)
        n += sprintf(r + n, "X-%d: v\r\n", i);
    strcpy(r + n, "\r\n");
    refused(r, 431, "more than 100");
    free(r);
}

/* nsbox_httphead_parse_more, fed a byte at a time (as a client sending one-byte TLS records
 * makes the helper call it), says at each length what nsbox_httphead_parse says of the same
 * bytes. */
static void same_as_parse(const char *text)
{
    size_t n = strlen(text), scanned = 0;
    struct nsbox_httphead more;
    for (size_t k = 1; k <= n; k++) {
        enum nsbox_httphead_verdict a =
            nsbox_httphead_parse_more((const uint8_t *)text, k, &scanned, SNI, 443, &more);
        enum nsbox_httphead_verdict b =
            nsbox_httphead_parse((const uint8_t *)text, k, SNI, 443, &H);
        if (a != b || more.status != H.status || more.head_len != H.head_len)
            fail_msg("%s at %zu: %d, parse says %d", text, k, a, b);
        if (a != NSBOX_HTTPHEAD_MORE)
            return;
    }
}

static void test_parse_more(void **state)
{
    (void)state;
    same_as_parse("GET /a HTTP/1.1\r\nHost: api.lab.test\r\nX-A: 1\r\n\r\nGET /b");
    same_as_parse("GET / HTTP/1.1\r\nHost: api.lab.test\r\nX-A: a\rb\r\n\r\n");
    same_as_parse("GET / HTTP/1.1\r\nHost: api.lab.test\nX-A: 1\r\n\r\n");
    same_as_parse("GET / HTTP/1.1\r\nHost: other.test\r\n\r\n");
    same_as_parse("\r\n\r\n");
    /* the largest head, a byte at a time: linear. Read whole at each byte, it took 0.27 s of
     * CPU (-O2), which a sandbox could have the helper spend, outside the sandbox's cgroup,
     * for each of its connections over and over */
    char *r = malloc(NSBOX_HTTPHEAD_MAX + 1);
    int n = sprintf(r, "GET / HTTP/1.1\r\nHost: api.lab.test\r\n");
    for (int i = 0; n < NSBOX_HTTPHEAD_MAX - 500; i++)
        n += sprintf(r + n, "X-%d: %0400d\r\n", i, 0);
    n += sprintf(r + n, "\r\n");
    size_t scanned = 0;
    struct timespec t0, t1;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
    enum nsbox_httphead_verdict v = NSBOX_HTTPHEAD_MORE;
    for (int k = 1; k <= n && v == NSBOX_HTTPHEAD_MORE; k++)
        v = nsbox_httphead_parse_more((const uint8_t *)r, (size_t)k, &scanned, SNI, 443, &H);
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t1);
    assert_int_equal(v, NSBOX_HTTPHEAD_OK);
    assert_int_equal(H.head_len, n);
    double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    if (s > 0.05)
        fail_msg("a %d-byte head read a byte at a time took %.3f s of CPU", n, s);
    free(r);
}

/* head rewritten with the bindings Authorization and X-Org is want */
static void rewritten_with_two(const char *head, const char *want)
{
    const char *names[] = {"Authorization", "X-Org"}, *values[] = {"Bearer SECRET", "org-1"};
    uint8_t out[1024];
    assert_int_equal(parse(head), NSBOX_HTTPHEAD_OK);
    size_t n = nsbox_httphead_rewrite((const uint8_t *)head, &H, names, values, 2, out, sizeof out);
    assert_int_equal(n, strlen(want));
    assert_memory_equal(out, want, n);
}

static void test_rewrite_replaces_every_copy(void **state)
{
    (void)state;
    const char *r = "GET / HTTP/1.1\r\nAuthorization: Bearer mine\r\nHost: api.lab.test\r\n"
                    "authorization:other\r\nAuthorization-Extra: keep\r\n\r\n";
    assert_int_equal(parse(r), NSBOX_HTTPHEAD_OK);
    uint8_t out[1024];
    const char *names[] = {"Authorization", "X-Org"}, *values[] = {"Bearer SECRET", "org-1"};
    size_t n = nsbox_httphead_rewrite((const uint8_t *)r, &H, names, values, 1, out, sizeof out);
    assert_true(n > 0);
    const char *want;
    want = "GET / HTTP/1.1\r\nHost: api.lab.test\r\nAuthorization-Extra: keep\r\n"
           "Authorization: Bearer SECRET\r\n\r\n";
    assert_int_equal(n, strlen(want));
    assert_memory_equal(out, want, n);
    /* the rewritten head is a valid head again */
    assert_int_equal(nsbox_httphead_parse(out, n, SNI, 443, &H), NSBOX_HTTPHEAD_OK);
    assert_int_equal(H.head_len, n);
    /* too small an output: nothing */
    assert_int_equal(parse(r), NSBOX_HTTPHEAD_OK);
    assert_int_equal(nsbox_httphead_rewrite((const uint8_t *)r, &H, names, values, 1, out, 40), 0);
    /* two bindings of one host: both removed, both added */
    rewritten_with_two("GET / HTTP/1.1\r\nX-ORG: mine\r\nHost: api.lab.test\r\n"
                       "authorization: mine\r\n\r\n",
                       "GET / HTTP/1.1\r\nHost: api.lab.test\r\nAuthorization: Bearer SECRET\r\n"
                       "X-Org: org-1\r\n\r\n");
    /* X_Org is X-Org to an origin behind CGI or WSGI (HTTP_X_ORG): removed too */
    rewritten_with_two("GET / HTTP/1.1\r\nx_org: mine\r\nHost: api.lab.test\r\n"
                       "X_ORG-: keep\r\nXOrg: keep\r\n\r\n",
                       "GET / HTTP/1.1\r\nHost: api.lab.test\r\nX_ORG-: keep\r\nXOrg: keep\r\n"
                       "Authorization: Bearer SECRET\r\nX-Org: org-1\r\n\r\n");
}

static void test_hop_names(void **state)
{
    (void)state;
    const char *names[] = {"X-Key", "Authorization"};
    static const struct {
        const char *fields;
        bool hop;
    } cases[] = {
        {"Connection: close\r\n", false},
        {"Connection: close, authorization\r\n", true},
        {"Connection: keep-alive\r\nConnection:x-key \r\n", true},
        {"X-Connection: authorization\r\n", false},
        {"Connection: authorizations, x-keys\r\n", false},
        {"Authorization: Bearer mine\r\n", false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char r[256];
        snprintf(r, sizeof r, "GET / HTTP/1.1\r\nHost: api.lab.test\r\n%s\r\n", cases[i].fields);
        assert_int_equal(parse(r), NSBOX_HTTPHEAD_OK);
        if (nsbox_httphead_hop_names((const uint8_t *)r, &H, names, 2) != cases[i].hop)
            fail_msg("%s", cases[i].fields);
    }
}

static void test_names_and_values(void **state)
{
    (void)state;
    assert_null(nsbox_httphead_check_name("Authorization"));
    assert_null(nsbox_httphead_check_name("X-Api-Key"));
    assert_non_null(nsbox_httphead_check_name("Host"));
    assert_non_null(nsbox_httphead_check_name("content-length"));
    assert_non_null(nsbox_httphead_check_name("Transfer-Encoding"));
    assert_non_null(nsbox_httphead_check_name("X Key"));
    assert_non_null(nsbox_httphead_check_name("X:Key"));
    assert_non_null(nsbox_httphead_check_name(""));
    assert_null(nsbox_httphead_check_value("Bearer abc.def-123"));
    assert_non_null(nsbox_httphead_check_value("a\r\nX-Evil: 1"));
    assert_non_null(nsbox_httphead_check_value("a\nb"));
    assert_non_null(nsbox_httphead_check_value(" lead"));
    assert_non_null(nsbox_httphead_check_value("trail\t"));
    assert_non_null(nsbox_httphead_check_value(""));
    assert_non_null(nsbox_httphead_check_value("caf\xc3\xa9"));
}

static void test_error_response(void **state)
{
    (void)state;
    char out[1024];
    size_t n = nsbox_httphead_error(403, "the Host header names another host", out, sizeof out);
    assert_true(n > 0);
    assert_true(!strncmp(out, "HTTP/1.1 403 Forbidden\r\n", 24));
    assert_non_null(strstr(out, "Connection: close\r\n"));
    const char *body = strstr(out, "\r\n\r\n") + 4;
    char cl[64];
    snprintf(cl, sizeof cl, "Content-Length: %zu\r\n", strlen(body));
    assert_non_null(strstr(out, cl));
    assert_non_null(strstr(body, "another host"));
    assert_int_equal(nsbox_httphead_error(400, "x", out, 20), 0);
}

static long feed_all(struct nsbox_httpchunk *c, const char *s, size_t step)
{
    size_t n = strlen(s), at = 0;
    while (at < n && !c->done) {
        size_t k = n - at < step ? n - at : step;
        long r = nsbox_httphead_chunk_feed(c, (const uint8_t *)s + at, k);
        if (r < 0)
            return r;
        at += (size_t)r;
        if ((size_t)r < k)
            break;
    }
    return (long)at;
}

static void test_chunked(void **state)
{
    (void)state;
    const char *body = "5\r\nhello\r\n1A;ext=1\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\n\r\n";
    for (size_t step = 1; step <= strlen(body) + 5; step++) {
        struct nsbox_httpchunk c = {0};
        char in[256];
        snprintf(in, sizeof in, "%sGET / HTTP/1.1", body);
        assert_int_equal(feed_all(&c, in, step), strlen(body));
        assert_true(c.done);
    }
    static const struct {
        const char *in, *why;
    } bad[] = {
        {"5\r\nhello\r\n0\r\nX-Trailer: 1\r\n\r\n", "trailer"},
        {"5\r\nhelloXX", "not followed by CRLF"},
        {"\r\n", "without a size"},
        {"g\r\n", "malformed"},
        {"5\n", "malformed"},
        {"5\rX", "not ended by CRLF"},
        {"ffffffffffffffffff\r\n", "too large"},
        {";x\r\n", "without a size"},
        /* a request's framing goes to the origin as it came: no leniency it may not share */
        {"5 ;x\r\n", "malformed"},
        {"5\r\nhello\n", "not followed by CRLF"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        struct nsbox_httpchunk c = {0};
        if (feed_all(&c, bad[i].in, 1) != -1 || !strstr(c.why, bad[i].why))
            fail_msg("%s: %s", bad[i].in, c.why ? c.why : "accepted");
    }
}

/* Each byte of a response's chunked body fed alone: which part it was, as the relay asks before
 * feeding it (the data is what it masks as one stream). */
static void test_chunk_parts(void **state)
{
    (void)state;
    const char *body = "5;x=1\r\nhello\r\n3\r\nabc\r\n0\r\nT: v\r\n\r\n";
    const char *parts = "FFFFFFFDDDDDFFFFFDDDFFFFFTTTTTTTT";
    struct nsbox_httpchunk c = {.response = true};
    char seen[64] = {0};
    for (size_t i = 0; i < strlen(body); i++) {
        enum nsbox_httpchunk_part p = nsbox_httphead_chunk_part(&c);
        seen[i] = p == NSBOX_HTTPCHUNK_DATA ? 'D' : p == NSBOX_HTTPCHUNK_TRAILER ? 'T' : 'F';
        assert_int_equal(nsbox_httphead_chunk_feed(&c, (const uint8_t *)body + i, 1), 1);
    }
    assert_string_equal(seen, parts);
    assert_true(c.done);
    assert_int_equal(nsbox_httphead_chunk_part(&c), NSBOX_HTTPCHUNK_FRAMING);
}

/* A response's chunks read as clients read them: whitespace before an extension (RFC 9112
 * 7.1.1's BWS) and LF alone ending a line; what no client reads still fails. */
static void test_response_chunks_lenient(void **state)
{
    (void)state;
    const char *body = "5 ;x=1\r\nhello\r\n3\t\t;y\nabc\n2 \r\nde\r\n1\nf\n0 ; z\nT: v\n\n";
    const char *data = "helloabcdef";
    for (size_t step = 1; step <= strlen(body); step++) {
        struct nsbox_httpchunk c = {.response = true};
        char got[32] = {0};
        size_t at = 0, gn = 0;
        while (at < strlen(body) && !c.done) {
            /* data up to step bytes at a time, the framing a byte at a time, as the relay */
            bool is_data = nsbox_httphead_chunk_part(&c) == NSBOX_HTTPCHUNK_DATA;
            size_t k = strlen(body) - at < step ? strlen(body) - at : step;
            k = !is_data ? 1 : k < c.left ? k : (size_t)c.left;
            long r = nsbox_httphead_chunk_feed(&c, (const uint8_t *)body + at, k);
            if (r < 0)
                fail_msg("step %zu at %zu: %s", step, at, c.why);
            if (is_data)
                memcpy(got + gn, body + at, (size_t)r), gn += (size_t)r;
            at += (size_t)r;
        }
        assert_true(c.done);
        assert_int_equal(at, strlen(body));
        assert_string_equal(got, data);
    }
    static const char *bad[] = {" 5\r\n", "5 6\r\n", "5 x\r\n", "\n", "5\r\nhello\rX"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        struct nsbox_httpchunk c = {.response = true};
        if (feed_all(&c, bad[i], 1) != -1)
            fail_msg("%s: accepted", bad[i]);
    }
}

static void test_log_path_and_status(void **state)
{
    (void)state;
    static const char req[] =
        "GET /user/repos?token=abc#x HTTP/1.1\r\nHost: api.example.com\r\n\r\n";
    struct nsbox_httphead h;
    assert_int_equal(
        nsbox_httphead_parse((const uint8_t *)req, strlen(req), "api.example.com", 443, &h),
        NSBOX_HTTPHEAD_OK);
    char path[64];
    nsbox_httphead_log_path((const uint8_t *)req, &h, path, sizeof path);
    assert_string_equal(path, "/user/repos");
    char small[6];
    nsbox_httphead_log_path((const uint8_t *)req, &h, small, sizeof small);
    assert_string_equal(small, "/user");

    assert_int_equal(nsbox_httphead_status((const uint8_t *)"HTTP/1.1 200 OK\r\n", 17), 200);
    assert_int_equal(nsbox_httphead_status((const uint8_t *)"HTTP/1.0 404 ", 13), 404);
    assert_int_equal(nsbox_httphead_status((const uint8_t *)"HTTP/1.1 204\r\n", 14), 204);
    assert_int_equal(nsbox_httphead_status((const uint8_t *)"HTTP/1.1 20", 11), -1);
    assert_int_equal(nsbox_httphead_status((const uint8_t *)"HTTP/2.0 200 OK", 15), 0);
    assert_int_equal(nsbox_httphead_status((const uint8_t *)"HTTP/1.1 2x0 OK", 15), 0);
    assert_int_equal(nsbox_httphead_status((const uint8_t *)"HTTP/1.1 999 OK", 15), 0);
}

/* The list iterator both parsers walk field values with: every element in order, trimmed,
 * empty ones given as such (a trailing comma, ",,", an empty value). */
static void test_list(void **state)
{
    (void)state;
    static const struct {
        const char *in;
        const char *want; /* the elements joined by '|' */
    } cases[] = {
        {"", ""},         {"close", "close"}, {" \tkeep-alive ,\tUpgrade\t", "keep-alive|Upgrade"},
        {"a,,b", "a||b"}, {"5, 5,", "5|5|"},  {" , ", "|"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char got[64] = "";
        size_t k = 0, elements = 0;
        struct nsbox_httplist l;
        const uint8_t *e;
        size_t en;
        nsbox_httphead_list_start(&l, (const uint8_t *)cases[i].in, strlen(cases[i].in));
        while (nsbox_httphead_list_next(&l, &e, &en)) {
            if (elements++)
                got[k++] = '|';
            assert_true(k + en < sizeof got);
            memcpy(got + k, e, en);
            k += en;
        }
        got[k] = '\0';
        assert_true(elements >= 1);
        if (strcmp(got, cases[i].want))
            fail_msg("\"%s\": \"%s\", not \"%s\"", cases[i].in, got, cases[i].want);
    }
    const uint8_t *v = (const uint8_t *)" \t x y\t ";
    size_t n = 8;
    nsbox_httphead_trim(&v, &n);
    assert_int_equal(n, 3);
    assert_memory_equal(v, "x y", 3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plain_get),
        cmocka_unit_test(test_host_forms),
        cmocka_unit_test(test_bodies),
        cmocka_unit_test(test_smuggling_shapes),
        cmocka_unit_test(test_request_line),
        cmocka_unit_test(test_websocket_upgrade),
        cmocka_unit_test(test_oversize),
        cmocka_unit_test(test_parse_more),
        cmocka_unit_test(test_rewrite_replaces_every_copy),
        cmocka_unit_test(test_hop_names),
        cmocka_unit_test(test_names_and_values),
        cmocka_unit_test(test_error_response),
        cmocka_unit_test(test_chunked),
        cmocka_unit_test(test_chunk_parts),
        cmocka_unit_test(test_response_chunks_lenient),
        cmocka_unit_test(test_log_path_and_status),
        cmocka_unit_test(test_list),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
