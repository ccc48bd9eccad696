/* The stub resolver's reading of queries, its NXDOMAIN answer, the table of names asked
 * (policy/dnsquery.c) and the note made of them (policy/dnsnote.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "dnsnote.h"
#include "dnsquery.h"

#include <stdio.h>
#include <string.h>

/* A query for name (dotted, as given) with qdcount 1 and ar additional records. */
static size_t query(uint8_t *p, const char *name, unsigned ar)
{
    uint8_t hdr[12] = {0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, (uint8_t)ar};
    memcpy(p, hdr, 12);
    size_t at = 12;
    const char *s = name;
    while (*s) {
        const char *dot = strchr(s, '.');
        size_t l = dot ? (size_t)(dot - s) : strlen(s);
        p[at++] = (uint8_t)l;
        memcpy(p + at, s, l);
        at += l;
        s += l + (dot ? 1 : 0);
    }
    p[at++] = 0;
    memcpy(p + at, "\x00\x01\x00\x01", 4);
    return at + 4;
}

/* 0 and q->name when the stub answers the packet and keeps its name, else -1 */
static int parse(const uint8_t *p, size_t n, struct nsbox_dnsquery *q)
{
    uint8_t r[NSBOX_DNSQUERY_REPLY_MAX];
    return nsbox_dnsquery_answer(p, n, q, r) && q->name[0] ? 0 : -1;
}

static void test_parses_a_query(void **state)
{
    (void)state;
    uint8_t p[600], r[NSBOX_DNSQUERY_REPLY_MAX];
    struct nsbox_dnsquery q;
    size_t n = query(p, "PyPI.org", 0);
    size_t rn = nsbox_dnsquery_answer(p, n, &q, r);
    assert_string_equal(q.name, "pypi.org");
    assert_int_equal(q.question_end, n);
    assert_int_equal(rn, n);
    assert_int_equal(r[0], 0x12);
    assert_int_equal(r[1], 0x34);
    assert_int_equal(r[2], 0x81); /* QR, RD kept */
    assert_int_equal(r[3] & 0x0f, 3); /* NXDOMAIN: musl takes no other code at once */
    assert_int_equal(r[5], 1);
    assert_memory_equal(r + 12, p + 12, n - 12);
    /* EDNS's OPT record after the question: answered without it */
    n = query(p, "_http._tcp.example.com", 1);
    memcpy(p + n, "\x00\x00\x29\x04\xd0\x00\x00\x00\x00\x00\x00", 11);
    rn = nsbox_dnsquery_answer(p, n + 11, &q, r);
    assert_string_equal(q.name, "_http._tcp.example.com");
    assert_int_equal(rn, n);
    assert_int_equal(r[11], 0);
}

/* rcode and question count of the answer to b, which is the header alone when qd is 0 */
static void answered(const uint8_t *b, size_t n, unsigned rcode, unsigned qd)
{
    uint8_t r[NSBOX_DNSQUERY_REPLY_MAX];
    struct nsbox_dnsquery q;
    size_t rn = nsbox_dnsquery_answer(b, n, &q, r);
    assert_int_equal(rn, qd ? q.question_end : 12);
    assert_true(rn <= n);
    assert_memory_equal(r, b, 2);
    assert_true(r[2] & 0x80);
    assert_int_equal(r[3] & 0x0f, rcode);
    assert_int_equal(r[4] << 8 | r[5], qd);
    for (int i = 6; i < 12; i++)
        assert_int_equal(r[i], 0);
    assert_string_equal(q.name, "");
}

static void test_answers_every_query_keeps_no_odd_name(void **state)
{
    (void)state;
    uint8_t p[600], r[NSBOX_DNSQUERY_REPLY_MAX];
    struct nsbox_dnsquery q;
    size_t n = query(p, "example.com", 0);
    /* shorter than a header, or an answer: nothing to answer */
    for (size_t cut = 0; cut < 12; cut++)
        assert_int_equal(nsbox_dnsquery_answer(p, cut, &q, r), 0);
    for (size_t cut = 12; cut < n; cut++) /* a question cut short: FORMERR, header alone */
        answered(p, cut, 1, 0);
    uint8_t b[600];
    memcpy(b, p, n);
    b[2] |= 0x80;
    assert_int_equal(nsbox_dnsquery_answer(b, n, &q, r), 0);
    /* not a standard query of one question: REFUSED, header alone */
    memcpy(b, p, n);
    b[2] |= 0x28; /* opcode 5, UPDATE */
    answered(b, n, 5, 0);
    memcpy(b, p, n);
    b[7] = 1; /* an answer record */
    answered(b, n, 5, 0);
    memcpy(b, p, n);
    b[9] = 1; /* an authority record */
    answered(b, n, 5, 0);
    /* a pointer, a label past the end: FORMERR */
    const uint8_t ptr[] = {0, 1, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1, 'a', 0xc0, 12, 0, 1, 0, 1};
    answered(ptr, sizeof ptr, 1, 0);
    const uint8_t past[] = {0, 1, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 9, 'a', 'b', 0, 0, 1, 0, 1};
    answered(past, sizeof past, 1, 0);
    /* the root, characters no host name has: NXDOMAIN with the question, no name kept */
    answered(p, query(p, "", 0), 3, 1);
    answered(p, query(p, "a\x1b[2Jb.com", 0), 3, 1);
    answered(p, query(p, "a b.com", 0), 3, 1);
    answered(p, query(p, "a!b.com", 0), 3, 1);
    /* a name of more than 253 bytes: FORMERR */
    char name[300], l63[64];
    memset(l63, 'a', 63);
    l63[63] = '\0';
    snprintf(name, sizeof name, "%s.%s.%s.%.62s", l63, l63, l63, l63);
    answered(p, query(p, name, 0), 1, 0);
}

static void test_drops_what_is_not_a_plain_query(void **state)
{
    (void)state;
    uint8_t p[600];
    struct nsbox_dnsquery q;
    size_t n = query(p, "example.com", 0);
    for (size_t cut = 0; cut < n; cut++) /* every truncation */
        assert_int_equal(parse(p, cut, &q), -1);
    uint8_t b[600];
    memcpy(b, p, n);
    b[2] |= 0x80; /* an answer */
    assert_int_equal(parse(b, n, &q), -1);
    memcpy(b, p, n);
    b[2] |= 0x28; /* opcode 5, UPDATE */
    assert_int_equal(parse(b, n, &q), -1);
    memcpy(b, p, n);
    b[5] = 2; /* two questions */
    assert_int_equal(parse(b, n, &q), -1);
    memcpy(b, p, n);
    b[7] = 1; /* an answer record */
    assert_int_equal(parse(b, n, &q), -1);
    /* a compression pointer, reserved label types, a label past the end */
    const uint8_t ptr[] = {0, 1, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1, 'a', 0xc0, 12, 0, 1, 0, 1};
    assert_int_equal(parse(ptr, sizeof ptr, &q), -1);
    const uint8_t rsv[] = {0, 1, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0x41, 'a', 0, 0, 1, 0, 1};
    assert_int_equal(parse(rsv, sizeof rsv, &q), -1);
    const uint8_t past[] = {0, 1, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 9, 'a', 'b', 0, 0, 1, 0, 1};
    assert_int_equal(parse(past, sizeof past, &q), -1);
    /* the root name, and characters that are no host name's (a terminal's escape) */
    assert_int_equal(parse(p, query(p, "", 0), &q), -1);
    assert_int_equal(parse(p, query(p, "a\x1b[2Jb.com", 0), &q), -1);
    assert_int_equal(parse(p, query(p, "a b.com", 0), &q), -1);
}

static void test_name_lengths(void **state)
{
    (void)state;
    uint8_t p[600];
    struct nsbox_dnsquery q;
    char name[300], l63[64];
    memset(l63, 'a', 63);
    l63[63] = '\0';
    /* 63+1+63+1+63+1+61 = 253: the longest; one more is refused */
    snprintf(name, sizeof name, "%s.%s.%s.%.61s", l63, l63, l63, l63);
    assert_int_equal(strlen(name), 253);
    assert_int_equal(parse(p, query(p, name, 0), &q), 0);
    assert_string_equal(q.name, name);
    assert_true(nsbox_dnsquery_name_valid(q.name));
    snprintf(name, sizeof name, "%s.%s.%s.%.62s", l63, l63, l63, l63);
    assert_int_equal(parse(p, query(p, name, 0), &q), -1);
    assert_false(nsbox_dnsquery_name_valid(name));
    snprintf(name, sizeof name, "%sa.com", l63); /* a label of 64 */
    assert_int_equal(parse(p, query(p, name, 0), &q), -1);
    assert_false(nsbox_dnsquery_name_valid(name));
    const char *bad[] = {"", ".", "a..b", ".a", "a.", "A.com", "a\nb", "a/b"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_false(nsbox_dnsquery_name_valid(bad[i]));
    assert_false(nsbox_dnsquery_name_valid(NULL));
}

static void test_table(void **state)
{
    (void)state;
    static struct nsbox_dnsquery_table t;
    char out[NSBOX_DNSQUERY_NAMES][NSBOX_DNSQUERY_NAME_MAX + 1];
    assert_int_equal(nsbox_dnsquery_table_take(&t, out), 0);
    /* one label (the sandbox's hostname, asked for its IPv6 address) is never kept */
    /* reverse lookups are never kept; an SRV name is kept as its host */
    nsbox_dnsquery_table_add(&t, "3.2.1.10.in-addr.arpa");
    nsbox_dnsquery_table_add(&t, "1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.8.b.d.0.1.0.0.2.ip6.arpa");
    nsbox_dnsquery_table_add(&t, "_http._tcp.srv.example.com");
    assert_int_equal(nsbox_dnsquery_table_take(&t, out), 1);
    assert_string_equal(out[0], "srv.example.com");
    nsbox_dnsquery_table_add(&t, "_x._tcp.localhost"); /* no host of two labels: kept whole */
    assert_int_equal(nsbox_dnsquery_table_take(&t, out), 1);
    assert_string_equal(out[0], "_x._tcp.localhost");
    const char *names[] = {"nsbox-0123", "a.com", "b.com", "a.com", "c.com", "d.com", "e.com",
                           "f.com"};
    for (size_t i = 0; i < 8; i++)
        nsbox_dnsquery_table_add(&t, names[i]);
    assert_int_equal(nsbox_dnsquery_table_take(&t, out), 4); /* distinct, the first four */
    assert_string_equal(out[0], "a.com");
    assert_string_equal(out[3], "d.com");
    /* taken: not again until the writer starts over with a new name */
    assert_int_equal(nsbox_dnsquery_table_take(&t, out), 0);
    nsbox_dnsquery_table_add(&t, "g.com");
    assert_int_equal(nsbox_dnsquery_table_take(&t, out), 1);
    assert_string_equal(out[0], "g.com");
    /* what the reader finds there is checked: a name the parser could not give is left out */
    nsbox_dnsquery_table_add(&t, "h.com");
    nsbox_dnsquery_table_add(&t, "i.com");
    memcpy(t.name[0], "\x1b]0;x", 6);
    memset(t.name[1], 'x', sizeof t.name[1]); /* no NUL at all */
    assert_int_equal(nsbox_dnsquery_table_take(&t, out), 0);
}

static size_t note(const struct nsbox_spec *s, const char *a, const char *b, char *buf, size_t n)
{
    char names[2][NSBOX_DNSQUERY_NAME_MAX + 1];
    snprintf(names[0], sizeof names[0], "%s", a);
    snprintf(names[1], sizeof names[1], "%s", b ? b : "");
    return nsbox_dnsnote_format(s, (const char(*)[NSBOX_DNSQUERY_NAME_MAX + 1])names, b ? 2 : 1,
                                buf, n);
}

static void test_note(void **state)
{
    (void)state;
    static struct nsbox_spec s;
    char buf[1024];
    memset(&s, 0, sizeof s);
    assert_true(nsbox_dnsnote_stub_wanted(&s));
    assert_true(note(&s, "pypi.org", NULL, buf, sizeof buf) > 0);
    assert_string_equal(buf, "nsbox: the command looked up pypi.org, but this sandbox has no "
                             "network (network none); to reach it: --network allow=pypi.org "
                             "(or all); docs/network.md");
    note(&s, "pypi.org", "files.pythonhosted.org", buf, sizeof buf);
    assert_non_null(strstr(buf, "looked up pypi.org and files.pythonhosted.org, but"));
    assert_non_null(strstr(buf, "to reach them: --network allow=pypi.org,files.pythonhosted.org "));
    s.net = NSBOX_NET_ALLOW;
    s.n_hosts = 1;
    snprintf(s.hosts[0].name, sizeof s.hosts[0].name, "api.github.com");
    s.hosts[0].port = 443;
    note(&s, "example.com", NULL, buf, sizeof buf);
    assert_string_equal(buf, "nsbox: the command looked up example.com, which is not in the allow "
                             "list; add it: --network allow=api.github.com,example.com");
    /* an allowed name asked of the stub anyway (an AAAA query /etc/hosts could not answer) */
    assert_int_equal(note(&s, "API.github.com", NULL, buf, sizeof buf), 0);
    assert_string_equal(buf, "");
    note(&s, "api.github.com", "example.com", buf, sizeof buf);
    assert_non_null(strstr(buf, "looked up example.com, which"));
    /* a room too small: cut, still a string */
    assert_true(note(&s, "example.com", NULL, buf, 10) <= 9);
    assert_int_equal(strlen(buf), 9);
    /* an option that does not fit is left out whole, never cut inside a host */
    static struct nsbox_spec many;
    many.net = NSBOX_NET_ALLOW;
    many.n_hosts = NSBOX_MAX_HOSTS;
    for (size_t i = 0; i < many.n_hosts; i++) {
        snprintf(many.hosts[i].name, sizeof many.hosts[i].name, "host-%02zu.%s", i,
                 "a-rather-long-domain-name-for-a-package-registry.example.com");
        many.hosts[i].port = 443;
    }
    char big[4096];
    size_t bn = note(&many, "pypi.org", "files.pythonhosted.org", big, sizeof big);
    assert_int_equal(bn, strlen(big));
    assert_string_equal(big, "nsbox: the command looked up pypi.org and files.pythonhosted.org, "
                             "which are not in the allow list; add them to --network allow");
    many.n_hosts = 2; /* it fits: given whole */
    note(&many, "pypi.org", NULL, big, sizeof big);
    assert_non_null(strstr(big, "add it: --network allow=host-00.a-rather-long-domain-name-for-a-package-"
                                "registry.example.com,host-01."));
    assert_true(strstr(big, ",pypi.org") == big + strlen(big) - strlen(",pypi.org"));
    /* all, and none with egress ranges: nothing (they have a resolver, or say there is none) */
    s.net = NSBOX_NET_ALL;
    assert_false(nsbox_dnsnote_stub_wanted(&s));
    assert_int_equal(note(&s, "example.com", NULL, buf, sizeof buf), 0);
    s.net = NSBOX_NET_NONE;
    s.n_egress = 1;
    assert_false(nsbox_dnsnote_stub_wanted(&s));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parses_a_query),
        cmocka_unit_test(test_answers_every_query_keeps_no_odd_name),
        cmocka_unit_test(test_drops_what_is_not_a_plain_query),
        cmocka_unit_test(test_name_lengths),
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_note),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
