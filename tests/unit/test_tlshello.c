/* The ClientHello's server name (policy/tlshello.c): real hellos, hand-built ones per RFC 8446
 * (split over records and reads, large key shares, TLS 1.2 without extensions) and everything
 * the egress helper must refuse. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tlshello.h"
#include "tlshello_samples.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

static struct nsbox_tlshello H;

struct buf {
    uint8_t b[80000];
    size_t n;
};

static void put8(struct buf *b, unsigned v) { b->b[b->n++] = (uint8_t)v; }
static void put16(struct buf *b, unsigned v) { put8(b, v >> 8); put8(b, v); }
static void put24(struct buf *b, unsigned v) { put8(b, v >> 16); put16(b, v); }
static void putn(struct buf *b, const void *p, size_t n) { memcpy(b->b + b->n, p, n); b->n += n; }
static void fill(struct buf *b, uint8_t c, size_t n) { memset(b->b + b->n, c, n); b->n += n; }
/* Back-patches a length of `bytes` at `at` to cover everything written since. */
static void patch(struct buf *b, size_t at, unsigned bytes)
{
    size_t v = b->n - at - bytes;
    for (unsigned i = 0; i < bytes; i++)
        b->b[at + i] = (uint8_t)(v >> (8 * (bytes - 1 - i)));
}

struct hello {
    const char *names[3]; /* host_name entries of server_name; none: no extension */
    int sni_exts;         /* server_name extensions (default 1 when names[0]) */
    size_t key_share;     /* bytes of one key share entry (0: none) */
    size_t padding;       /* bytes of a padding extension (RFC 7685) */
    int tls12_no_ext;     /* a TLS 1.2 hello with no extensions block at all */
};

/* A ClientHello handshake message (header included), RFC 8446 4.1.2. */
static void build_hello(struct buf *m, const struct hello *h)
{
    m->n = 0;
    put8(m, 1); /* client_hello */
    size_t len = m->n;
    put24(m, 0);
    put16(m, 0x0303);
    fill(m, 0xab, 32);              /* random */
    put8(m, 32); fill(m, 0x5e, 32); /* legacy_session_id */
    put16(m, 6); put16(m, 0x1301); put16(m, 0x1302); put16(m, 0xc02f);
    put8(m, 1); put8(m, 0);         /* compression: null */
    if (!h->tls12_no_ext) {
        size_t exts = m->n;
        put16(m, 0);
        int sni_exts = h->names[0] ? (h->sni_exts ? h->sni_exts : 1) : 0;
        for (int x = 0; x < sni_exts; x++) {
            put16(m, 0); /* server_name */
            size_t ext = m->n;
            put16(m, 0);
            size_t list = m->n;
            put16(m, 0);
            for (int i = 0; i < 3 && h->names[i]; i++) {
                put8(m, 0);
                put16(m, (unsigned)strlen(h->names[i]));
                putn(m, h->names[i], strlen(h->names[i]));
            }
            patch(m, list, 2);
            patch(m, ext, 2);
        }
        put16(m, 43); put16(m, 3); put8(m, 2); put16(m, 0x0304); /* supported_versions */
        if (h->key_share) {
            put16(m, 51); /* key_share: one entry of a hybrid group's size */
            put16(m, (unsigned)h->key_share + 6);
            put16(m, (unsigned)h->key_share + 4);
            put16(m, 0x6399); put16(m, (unsigned)h->key_share); fill(m, 0x4b, h->key_share);
        }
        if (h->padding) {
            put16(m, 21); put16(m, (unsigned)h->padding); fill(m, 0, h->padding);
        }
        patch(m, exts, 2);
    }
    patch(m, len, 3);
}

/* The message in handshake records of at most `frag` bytes each. */
static void records(struct buf *out, const struct buf *m, size_t frag)
{
    out->n = 0;
    for (size_t off = 0; off < m->n; off += frag) {
        size_t n = m->n - off < frag ? m->n - off : frag;
        put8(out, 22); put16(out, 0x0301); put16(out, (unsigned)n);
        putn(out, m->b + off, n);
    }
}

static struct buf M, R;

/* Every proper prefix asks for more; the whole gives `want`; the same from
 * nsbox_tlshello_parse_more fed the prefixes one after the other, as the helper's reads grow
 * its buffer. */
static void check_all_prefixes(const struct buf *r, enum nsbox_tlshello_verdict want)
{
    static struct nsbox_tlshello more;
    memset(&more, 0, sizeof more);
    for (size_t i = 0; i < r->n; i++) {
        assert_int_equal(nsbox_tlshello_parse(r->b, i, &H), NSBOX_TLSHELLO_MORE);
        assert_int_equal(nsbox_tlshello_parse_more(r->b, i, &more), NSBOX_TLSHELLO_MORE);
    }
    assert_int_equal(nsbox_tlshello_parse(r->b, r->n, &H), want);
    assert_int_equal(H.consumed, r->n);
    assert_int_equal(nsbox_tlshello_parse_more(r->b, r->n, &more), want);
    assert_int_equal(more.consumed, r->n);
    assert_string_equal(more.name, H.name);
}

static void test_real_clients(void **state)
{
    (void)state;
    struct buf r = {.n = 0};
    putn(&r, hello_openssl, sizeof hello_openssl);
    check_all_prefixes(&r, NSBOX_TLSHELLO_SNI);
    assert_string_equal(H.name, "api.example.com");
    r.n = 0;
    putn(&r, hello_curl, sizeof hello_curl);
    check_all_prefixes(&r, NSBOX_TLSHELLO_SNI);
    assert_string_equal(H.name, "api.example.com"); /* sent as API.Example.com */
}

static void test_one_record(void **state)
{
    (void)state;
    build_hello(&M, &(struct hello){.names = {"api.example.com"}});
    records(&R, &M, 16384);
    check_all_prefixes(&R, NSBOX_TLSHELLO_SNI);
    assert_string_equal(H.name, "api.example.com");
    /* what follows the ClientHello (early data, a second read) does not change the verdict */
    put8(&R, 23); put16(&R, 0x0303); put16(&R, 3); fill(&R, 1, 3);
    assert_int_equal(nsbox_tlshello_parse(R.b, R.n, &H), NSBOX_TLSHELLO_SNI);
    assert_int_equal(H.consumed, R.n - 8);
}

static void test_split_records(void **state)
{
    (void)state;
    /* a post-quantum sized key share: ~1.3 KB of message, over one Ethernet frame */
    build_hello(&M, &(struct hello){.names = {"Pypi.ORG"}, .key_share = 1216});
    assert_true(M.n > 1300);
    size_t frags[] = {1, 2, 3, 4, 5, 7, 100, 512, 1400};
    for (size_t i = 0; i < sizeof frags / sizeof *frags; i++) {
        records(&R, &M, frags[i]);
        check_all_prefixes(&R, NSBOX_TLSHELLO_SNI);
        assert_string_equal(H.name, "pypi.org");
    }
    /* the record with the message's end also holds the start of another message */
    records(&R, &M, 16384);
    put8(&M, 2); /* appended to the message buffer: records() below puts it in the record */
    records(&R, &M, 16384);
    assert_int_equal(nsbox_tlshello_parse(R.b, R.n, &H), NSBOX_TLSHELLO_SNI);
}

static void test_largest(void **state)
{
    (void)state;
    /* exactly 16 KB of message: needs two records */
    build_hello(&M, &(struct hello){.names = {"a.b"}, .padding = 1});
    size_t pad = NSBOX_TLSHELLO_MAX - M.n + 1;
    build_hello(&M, &(struct hello){.names = {"a.b"}, .padding = pad});
    assert_int_equal(M.n, NSBOX_TLSHELLO_MAX);
    records(&R, &M, 16384);
    assert_int_equal(nsbox_tlshello_parse(R.b, R.n, &H), NSBOX_TLSHELLO_SNI);
    /* one byte more is refused as soon as the record with the message's header is in */
    build_hello(&M, &(struct hello){.names = {"a.b"}, .padding = pad + 1});
    records(&R, &M, 4);
    assert_int_equal(nsbox_tlshello_parse(R.b, 9, &H), NSBOX_TLSHELLO_BAD);
    /* split into so many records that their headers exceed the input bound: refused */
    build_hello(&M, &(struct hello){.names = {"a.b"}, .padding = 8000});
    records(&R, &M, 1);
    assert_true(R.n > NSBOX_TLSHELLO_INPUT_MAX);
    assert_int_equal(nsbox_tlshello_parse(R.b, NSBOX_TLSHELLO_INPUT_MAX - 1, &H),
                     NSBOX_TLSHELLO_MORE);
    assert_int_equal(nsbox_tlshello_parse(R.b, NSBOX_TLSHELLO_INPUT_MAX, &H),
                     NSBOX_TLSHELLO_BAD);
    /* the same, a read a byte: linear. Each read's parse from the start took 0.2 s of CPU
     * (-O2) for 20 KiB of one-byte records, which a sandbox could have the helper, outside its
     * cgroup, spend on each of 128 connections every 10 s */
    static struct nsbox_tlshello more;
    memset(&more, 0, sizeof more);
    struct timespec t0, t1;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
    enum nsbox_tlshello_verdict v = NSBOX_TLSHELLO_MORE;
    size_t k;
    for (k = 1; k <= NSBOX_TLSHELLO_INPUT_MAX && v == NSBOX_TLSHELLO_MORE; k++)
        v = nsbox_tlshello_parse_more(R.b, k, &more);
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t1);
    assert_int_equal(v, NSBOX_TLSHELLO_BAD);
    assert_int_equal(k - 1, NSBOX_TLSHELLO_INPUT_MAX);
    double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    if (s > 0.03)
        fail_msg("20 KiB of one-byte records read a byte at a time took %.3f s of CPU", s);
}

static void test_no_sni(void **state)
{
    (void)state;
    build_hello(&M, &(struct hello){.key_share = 32});
    records(&R, &M, 16384);
    check_all_prefixes(&R, NSBOX_TLSHELLO_NO_SNI);
    build_hello(&M, &(struct hello){.tls12_no_ext = 1});
    records(&R, &M, 16384);
    check_all_prefixes(&R, NSBOX_TLSHELLO_NO_SNI);
    /* a server_name extension with an empty list is malformed (the list has 1..2^16-1) */
    build_hello(&M, &(struct hello){.names = {NULL}, .sni_exts = 0});
    records(&R, &M, 16384);
    assert_int_equal(nsbox_tlshello_parse(R.b, R.n, &H), NSBOX_TLSHELLO_NO_SNI);
}

static enum nsbox_tlshello_verdict verdict_for(const char *n0, const char *n1, int exts)
{
    build_hello(&M, &(struct hello){.names = {n0, n1}, .sni_exts = exts});
    records(&R, &M, 16384);
    return nsbox_tlshello_parse(R.b, R.n, &H);
}

static void test_names(void **state)
{
    (void)state;
    char long_label[80], long_name[300];
    memset(long_label, 'a', 64);
    strcpy(long_label + 64, ".com");
    memset(long_name, 0, sizeof long_name);
    for (int i = 0; i < 4; i++)
        memcpy(long_name + i * 64, i ? ".aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
                                     : "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaab",
               64); /* 4 labels of 63 + 3 dots = 255 bytes: over 253 */
    assert_int_equal(strlen(long_name), 256);
    long_name[254] = '\0';
    const char *refused[] = {
        "api.example.com.", /* RFC 6066: no trailing dot */
        "10.0.0.1",         /* an address literal */
        "127.1",
        "a..b", ".a", "-a.com", "a-.com", "a_b.com", "a b.com", "a\xc3\xa9.com",
        long_label, long_name,
    };
    for (size_t i = 0; i < sizeof refused / sizeof *refused; i++) {
        assert_int_equal(verdict_for(refused[i], NULL, 1), NSBOX_TLSHELLO_BAD);
        assert_non_null(H.why);
    }
    assert_int_equal(verdict_for("xn--bcher-kva.example", NULL, 1), NSBOX_TLSHELLO_SNI);
    assert_string_equal(H.name, "xn--bcher-kva.example");
    assert_int_equal(verdict_for("a1.2-3.B", NULL, 1), NSBOX_TLSHELLO_SNI);
    assert_string_equal(H.name, "a1.2-3.b");
    /* two names, or the extension twice: which one would the server use? refused */
    assert_int_equal(verdict_for("a.com", "b.com", 1), NSBOX_TLSHELLO_BAD);
    assert_int_equal(verdict_for("a.com", NULL, 2), NSBOX_TLSHELLO_BAD);
    /* a name with a NUL inside would compare equal as a C string: refused */
    assert_int_equal(nsbox_tlshello_check_name((const uint8_t *)"a.com\0.evil", 11, H.name), -1);
    char out[8];
    assert_int_equal(nsbox_tlshello_check_name((const uint8_t *)"A.cOm", 5, out), 0);
    assert_string_equal(out, "a.com");
}

static void test_not_tls(void **state)
{
    (void)state;
    const char *plain[] = {"GET / HTTP/1.1\r\n", "SSH-2.0-OpenSSH_9.2\r\n", "\x16\x02", "C"};
    for (size_t i = 0; i < sizeof plain / sizeof *plain; i++)
        assert_int_equal(nsbox_tlshello_parse((const uint8_t *)plain[i], strlen(plain[i]), &H),
                         NSBOX_TLSHELLO_NOT_TLS);
    assert_int_equal(nsbox_tlshello_parse((const uint8_t *)"", 0, &H), NSBOX_TLSHELLO_MORE);
    assert_int_equal(nsbox_tlshello_parse((const uint8_t *)"\x16", 1, &H), NSBOX_TLSHELLO_MORE);
    /* SSLv2-compatible hello (0x80 ...): not TLS's record layer, no SNI possible */
    assert_int_equal(nsbox_tlshello_parse((const uint8_t *)"\x80\x2e\x01", 3, &H),
                     NSBOX_TLSHELLO_NOT_TLS);
}

static void test_malformed(void **state)
{
    (void)state;
    build_hello(&M, &(struct hello){.names = {"api.example.com"}});
    records(&R, &M, 16384);
    struct buf x;
    /* record lengths of 0 and over 2^14 */
    x = R; x.b[3] = 0; x.b[4] = 0;
    assert_int_equal(nsbox_tlshello_parse(x.b, x.n, &H), NSBOX_TLSHELLO_BAD);
    x = R; x.b[3] = 0x40; x.b[4] = 1;
    assert_int_equal(nsbox_tlshello_parse(x.b, 5, &H), NSBOX_TLSHELLO_BAD);
    /* another handshake message first (a ServerHello) */
    x = R; x.b[5] = 2;
    assert_int_equal(nsbox_tlshello_parse(x.b, x.n, &H), NSBOX_TLSHELLO_BAD);
    /* an alert record between two fragments */
    records(&x, &M, 10);
    x.b[15] = 21;
    assert_int_equal(nsbox_tlshello_parse(x.b, x.n, &H), NSBOX_TLSHELLO_BAD);
    /* a second record whose version byte is not TLS's */
    records(&x, &M, 10);
    x.b[16] = 2;
    assert_int_equal(nsbox_tlshello_parse(x.b, x.n, &H), NSBOX_TLSHELLO_BAD);
    /* every length of the body one too long or short: malformed, never out of bounds */
    for (size_t i = 9; i < R.n; i++) {
        for (int d = -1; d <= 1; d += 2) {
            x = R;
            x.b[i] = (uint8_t)(x.b[i] + d);
            enum nsbox_tlshello_verdict v = nsbox_tlshello_parse(x.b, x.n, &H);
            assert_true(v == NSBOX_TLSHELLO_BAD || v == NSBOX_TLSHELLO_SNI ||
                        v == NSBOX_TLSHELLO_NO_SNI || v == NSBOX_TLSHELLO_MORE);
        }
    }
    /* an empty ClientHello */
    uint8_t empty[] = {22, 3, 1, 0, 4, 1, 0, 0, 0};
    assert_int_equal(nsbox_tlshello_parse(empty, sizeof empty, &H), NSBOX_TLSHELLO_BAD);
    /* truncated after the compression methods' length */
    build_hello(&M, &(struct hello){.tls12_no_ext = 1});
    M.n -= 1;
    patch(&M, 1, 3);
    records(&R, &M, 16384);
    assert_int_equal(nsbox_tlshello_parse(R.b, R.n, &H), NSBOX_TLSHELLO_BAD);
    assert_string_equal(nsbox_tlshello_verdict_name(NSBOX_TLSHELLO_BAD), "malformed");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_real_clients), cmocka_unit_test(test_one_record),
        cmocka_unit_test(test_split_records), cmocka_unit_test(test_largest),
        cmocka_unit_test(test_no_sni), cmocka_unit_test(test_names),
        cmocka_unit_test(test_not_tls), cmocka_unit_test(test_malformed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
