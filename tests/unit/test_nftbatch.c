/* A sandbox's set elements as an nf_tables netlink batch (policy/nftbatch.c): the messages, their
 * flags and order, the key encodings (checked byte for byte against what libnftables 1.0.6
 * sends for the same `nft` text), and the reading of the kernel's replies. Pure; no root. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "nftbatch.h"

#include <arpa/inet.h>
#include <errno.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netlink.h>
#include <stdlib.h>
#include <string.h>

#define NEWSETELEM ((NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_NEWSETELEM)
#define DELSETELEM ((NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_DELSETELEM)

static struct in_addr a4(const char *s)
{
    struct in_addr a;
    assert_int_equal(inet_pton(AF_INET, s, &a), 1);
    return a;
}

/* A plan as nsbox_netplan_build makes it, slot 1 of the default pool: subnet 10.171.0.4,
 * sandbox 10.171.0.6. */
static void plan(struct nsbox_netplan *p, enum nsbox_net_mode mode)
{
    memset(p, 0, sizeof *p);
    p->mode = mode;
    p->link = true;
    strcpy(p->id, "0123456789ab");
    strcpy(p->ifname, "nsb0123456789ab");
    assert_int_equal(nsbox_netplan_pool_parse(NSBOX_NET_DEFAULT_POOL, &p->pool, NULL), 0);
    assert_int_equal(nsbox_netplan_set_slot(p, 1, NULL), 0);
}

/* ---- walking the batch ----------------------------------------------------------------------- */

struct msg {
    const struct nlmsghdr *h;
    const struct nfgenmsg *g;
    const unsigned char *attrs;
    size_t attrs_len;
};

static size_t split(const struct nsbox_nftbatch *b, struct msg *out, size_t max)
{
    size_t n = 0, left = b->len;
    for (const struct nlmsghdr *h = (const void *)b->buf; left > 0; h = NLMSG_NEXT(h, left)) {
        assert_true(NLMSG_OK(h, left));
        assert_true(n < max);
        out[n].h = h;
        out[n].g = NLMSG_DATA(h);
        out[n].attrs = (const unsigned char *)NLMSG_DATA(h) + NLMSG_ALIGN(sizeof(struct nfgenmsg));
        out[n].attrs_len = h->nlmsg_len - NLMSG_LENGTH(NLMSG_ALIGN(sizeof(struct nfgenmsg)));
        n++;
    }
    return n;
}

/* The payload of attribute `type` (nested flag ignored) among attrs, or NULL. */
static const unsigned char *find(const unsigned char *attrs, size_t len, uint16_t type,
                                 size_t *plen)
{
    size_t off = 0;
    while (off + NLA_HDRLEN <= len) {
        const struct nlattr *a = (const void *)(attrs + off);
        assert_true(a->nla_len >= NLA_HDRLEN && off + a->nla_len <= len);
        if ((a->nla_type & NLA_TYPE_MASK) == type) {
            *plen = a->nla_len - NLA_HDRLEN;
            return attrs + off + NLA_HDRLEN;
        }
        off += NLA_ALIGN(a->nla_len);
    }
    return NULL;
}

static const char *set_of(const struct msg *m)
{
    size_t n;
    const unsigned char *t = find(m->attrs, m->attrs_len, NFTA_SET_ELEM_LIST_TABLE, &n);
    assert_non_null(t);
    assert_string_equal((const char *)t, "nsbox");
    const unsigned char *s = find(m->attrs, m->attrs_len, NFTA_SET_ELEM_LIST_SET, &n);
    assert_non_null(s);
    assert_int_equal(strlen((const char *)s) + 1, n);
    return (const char *)s;
}

static const unsigned char *elements(const struct msg *m, size_t *len)
{
    const unsigned char *l = find(m->attrs, m->attrs_len, NFTA_SET_ELEM_LIST_ELEMENTS, len);
    assert_non_null(l);
    return l;
}

/* ---- the batch ------------------------------------------------------------------------------- */

static void test_all_add_messages(void **state)
{
    (void)state;
    struct nsbox_netplan p;
    plan(&p, NSBOX_NET_ALL);
    p.dns.n_ns = 1;
    p.dns.ns[0] = a4("192.0.2.53");
    p.n_cidr = 1;
    p.cidr[0] = (struct nsbox_netcidr){a4("203.0.113.0"), 24};
    struct nsbox_nftbatch b;
    assert_int_equal(nsbox_nftbatch_elements(&b, &p, true, 100), 0);
    struct msg m[16];
    size_t n = split(&b, m, 16);
    assert_int_equal(n, 7);
    assert_int_equal(b.n_msgs, 5);
    assert_int_equal(b.seq0, 100);

    /* one transaction: BATCH_BEGIN ... BATCH_END, addressed to nf_tables */
    assert_int_equal(m[0].h->nlmsg_type, NFNL_MSG_BATCH_BEGIN);
    assert_int_equal(m[6].h->nlmsg_type, NFNL_MSG_BATCH_END);
    for (int i = 0; i < 7; i += 6) {
        assert_int_equal(m[i].h->nlmsg_flags, NLM_F_REQUEST);
        assert_int_equal(m[i].g->nfgen_family, AF_UNSPEC);
        assert_int_equal(ntohs(m[i].g->res_id), NFNL_SUBSYS_NFTABLES);
        assert_int_equal(m[i].h->nlmsg_len, NLMSG_LENGTH(sizeof(struct nfgenmsg)));
    }
    static const char *const sets[] = {"sb_slot", "sb_src", "sb_all", "sb_dns", "sb_cidr"};
    for (int i = 0; i < 7; i++)
        assert_int_equal(m[i].h->nlmsg_seq, 100 + i);
    for (int i = 1; i <= 5; i++) {
        assert_int_equal(m[i].h->nlmsg_type, NEWSETELEM);
        assert_int_equal(m[i].g->nfgen_family, NFPROTO_INET);
        assert_int_equal(m[i].g->version, NFNETLINK_V0);
        /* each one acknowledged; only the slot is `create` (EEXIST when taken) */
        uint16_t want = NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | (i == 1 ? NLM_F_EXCL : 0);
        assert_int_equal(m[i].h->nlmsg_flags, want);
        assert_string_equal(set_of(&m[i]), sets[i - 1]);
        assert_string_equal(b.set[i - 1], sets[i - 1]);
    }

    /* create element inet nsbox sb_slot { 10.171.0.4 comment "0123456789ab" }, as libnftables
     * encodes it (the comment is libnftnl's user data TLV, type 0, with its NUL) */
    static const unsigned char slot[] = {
        0x24, 0x00, 0x01, 0x80,                         /* element 1 */
        0x0c, 0x00, 0x01, 0x80,                         /*  key */
        0x08, 0x00, 0x01, 0x00, 0x0a, 0xab, 0x00, 0x04, /*   value 10.171.0.4 */
        0x13, 0x00, 0x06, 0x00, 0x00, 0x0d,             /*  user data: comment, 13 bytes */
        '0', '1', '2', '3', '4', '5', '6', '7', '8', '9', 'a', 'b', 0x00, 0x00 /* + pad */};
    size_t len;
    const unsigned char *el = elements(&m[1], &len);
    assert_int_equal(len, sizeof slot);
    assert_memory_equal(el, slot, sizeof slot);

    /* add element inet nsbox sb_src { "nsb0123456789ab" . 10.171.0.6 }: ifname in 16 bytes */
    static const unsigned char src[] = {
        0x20, 0x00, 0x01, 0x80, 0x1c, 0x00, 0x01, 0x80, 0x18, 0x00, 0x01, 0x00,
        'n', 's', 'b', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9', 'a', 'b', 0x00,
        0x0a, 0xab, 0x00, 0x06};
    el = elements(&m[2], &len);
    assert_int_equal(len, sizeof src);
    assert_memory_equal(el, src, sizeof src);

    /* add element inet nsbox sb_all { "nsb0123456789ab" } */
    el = elements(&m[3], &len);
    assert_int_equal(len, 28);
    assert_memory_equal(el + 12, "nsb0123456789ab", 16);

    /* add element inet nsbox sb_dns { "nsb0123456789ab" . 192.0.2.53 } */
    el = elements(&m[4], &len);
    assert_int_equal(len, 32);
    assert_memory_equal(el + 28, "\xc0\x00\x02\x35", 4);

    /* add element inet nsbox sb_cidr { "nsb0123456789ab" . 203.0.113.0/24 }: a concatenation
     * with flags interval takes the range's first and last keys */
    static const unsigned char cidr[] = {
        0x3c, 0x00, 0x01, 0x80,                   /* element 1 */
        0x1c, 0x00, 0x01, 0x80, 0x18, 0x00, 0x01, 0x00, /* key */
        'n', 's', 'b', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9', 'a', 'b', 0x00,
        0xcb, 0x00, 0x71, 0x00,
        0x1c, 0x00, 0x0a, 0x80, 0x18, 0x00, 0x01, 0x00, /* key end */
        'n', 's', 'b', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9', 'a', 'b', 0x00,
        0xcb, 0x00, 0x71, 0xff};
    el = elements(&m[5], &len);
    assert_int_equal(len, sizeof cidr);
    assert_memory_equal(el, cidr, sizeof cidr);
    nsbox_nftbatch_free(&b);
    assert_null(b.buf);
}

static void test_delete_removes_the_same_keys(void **state)
{
    (void)state;
    struct nsbox_netplan p;
    plan(&p, NSBOX_NET_ALL);
    p.dns.n_ns = 2;
    p.dns.ns[0] = a4("192.0.2.53");
    p.dns.ns[1] = a4("192.0.2.54");
    struct nsbox_nftbatch add, del;
    assert_int_equal(nsbox_nftbatch_elements(&add, &p, true, 1), 0);
    assert_int_equal(nsbox_nftbatch_elements(&del, &p, false, 4096), 0);
    struct msg ma[16], md[16];
    size_t na = split(&add, ma, 16), nd = split(&del, md, 16);
    assert_int_equal(na, 6);
    assert_int_equal(nd, 6);
    for (size_t i = 1; i + 1 < nd; i++) {
        assert_int_equal(md[i].h->nlmsg_type, DELSETELEM);
        assert_int_equal(md[i].h->nlmsg_flags, NLM_F_REQUEST | NLM_F_ACK);
        assert_int_equal(md[i].h->nlmsg_seq, 4096 + i);
        assert_string_equal(set_of(&md[i]), set_of(&ma[i]));
    }
    /* delete element inet nsbox sb_slot { 10.171.0.4 }: the key, no comment */
    static const unsigned char slot[] = {0x10, 0x00, 0x01, 0x80, 0x0c, 0x00, 0x01, 0x80,
                                         0x08, 0x00, 0x01, 0x00, 0x0a, 0xab, 0x00, 0x04};
    size_t len, len2;
    const unsigned char *el = elements(&md[1], &len);
    assert_int_equal(len, sizeof slot);
    assert_memory_equal(el, slot, sizeof slot);
    /* the others: exactly the elements that were added */
    for (size_t i = 2; i + 1 < nd; i++) {
        el = elements(&md[i], &len);
        const unsigned char *el2 = elements(&ma[i], &len2);
        assert_int_equal(len, len2);
        assert_memory_equal(el, el2, len);
    }
    /* two resolvers: two elements in one message, numbered */
    el = elements(&md[4], &len);
    assert_int_equal(len, 64);
    assert_int_equal(((const struct nlattr *)el)->nla_type, NLA_F_NESTED | 1);
    assert_int_equal(((const struct nlattr *)(el + 32))->nla_type, NLA_F_NESTED | 2);
    assert_memory_equal(el + 32 + 28, "\xc0\x00\x02\x36", 4);
    nsbox_nftbatch_free(&add);
    nsbox_nftbatch_free(&del);
}

static void test_allow_tcp_and_egress_keys(void **state)
{
    (void)state;
    struct nsbox_netplan p;
    plan(&p, NSBOX_NET_ALLOW);
    struct nsbox_nettcp tcp[2] = {{a4("198.51.100.10"), 443}, {a4("198.51.100.11"), 8080}};
    p.tcp = tcp;
    p.n_tcp = 2;
    p.n_cidr = 2;
    p.cidr[0] = (struct nsbox_netcidr){a4("192.0.2.7"), 32};
    p.cidr[1] = (struct nsbox_netcidr){a4("0.0.0.0"), 0};
    struct nsbox_nftbatch b;
    assert_int_equal(nsbox_nftbatch_elements(&b, &p, true, 1), 0);
    struct msg m[16];
    size_t n = split(&b, m, 16);
    /* allow: no sb_all, no sb_dns */
    assert_int_equal(n, 6);
    assert_string_equal(set_of(&m[1]), "sb_slot");
    assert_string_equal(set_of(&m[2]), "sb_src");
    assert_string_equal(set_of(&m[3]), "sb_cidr");
    assert_string_equal(set_of(&m[4]), "sb_tcp");

    /* add element inet nsbox sb_tcp { "nsb0123456789ab" . 198.51.100.10 . 443, ... }: the port
     * in network order, padded to 4 bytes */
    size_t len;
    const unsigned char *el = elements(&m[4], &len);
    assert_int_equal(len, 2 * 36);
    assert_int_equal(((const struct nlattr *)el)->nla_len, 36);
    assert_memory_equal(el + 12, "nsb0123456789ab", 16);
    assert_memory_equal(el + 28, "\xc6\x33\x64\x0a\x01\xbb\x00\x00", 8);
    assert_memory_equal(el + 36 + 28, "\xc6\x33\x64\x0b\x1f\x90\x00\x00", 8);

    /* a /32 ends where it starts; /0 spans everything */
    el = elements(&m[3], &len);
    assert_int_equal(len, 2 * 60);
    assert_memory_equal(el + 28, "\xc0\x00\x02\x07", 4);
    assert_memory_equal(el + 56, "\xc0\x00\x02\x07", 4);
    assert_memory_equal(el + 60 + 28, "\x00\x00\x00\x00", 4);
    assert_memory_equal(el + 60 + 56, "\xff\xff\xff\xff", 4);
    nsbox_nftbatch_free(&b);
}

static void test_none_with_egress(void **state)
{
    (void)state;
    struct nsbox_netplan p;
    plan(&p, NSBOX_NET_NONE);
    p.dns.n_ns = 1; /* ignored: DNS is for network all only */
    p.dns.ns[0] = a4("192.0.2.53");
    p.n_cidr = 1;
    p.cidr[0] = (struct nsbox_netcidr){a4("198.51.100.16"), 28};
    struct nsbox_nftbatch b;
    assert_int_equal(nsbox_nftbatch_elements(&b, &p, true, 1), 0);
    struct msg m[16];
    assert_int_equal(split(&b, m, 16), 5);
    assert_string_equal(set_of(&m[1]), "sb_slot");
    assert_string_equal(set_of(&m[2]), "sb_src");
    assert_string_equal(set_of(&m[3]), "sb_cidr");
    size_t len;
    const unsigned char *el = elements(&m[3], &len);
    assert_memory_equal(el + 28, "\xc6\x33\x64\x10", 4);
    assert_memory_equal(el + 56, "\xc6\x33\x64\x1f", 4);
    nsbox_nftbatch_free(&b);
}

/* ---- replies --------------------------------------------------------------------------------- */

struct replies {
    unsigned char buf[1024];
    size_t len;
};

static void reply(struct replies *r, uint32_t seq, int error)
{
    struct nlmsghdr *h = (void *)(r->buf + r->len);
    size_t n = NLMSG_LENGTH(sizeof(struct nlmsgerr));
    memset(h, 0, NLMSG_ALIGN(n));
    h->nlmsg_len = (uint32_t)n;
    h->nlmsg_type = NLMSG_ERROR;
    h->nlmsg_seq = seq;
    ((struct nlmsgerr *)NLMSG_DATA(h))->error = error;
    r->len += NLMSG_ALIGN(n);
}

static void test_replies(void **state)
{
    (void)state;
    struct nsbox_netplan p;
    plan(&p, NSBOX_NET_ALL); /* no resolvers: sb_slot, sb_src, sb_all */
    struct nsbox_nftbatch b;
    assert_int_equal(nsbox_nftbatch_elements(&b, &p, true, 17), 0);
    assert_int_equal(b.n_msgs, 3);

    /* all acknowledged, over two reads, with a stale reply of an earlier batch */
    struct nsbox_nftverdict v = {0};
    struct replies r = {.len = 0};
    reply(&r, 5, -EEXIST);
    reply(&r, 18, 0);
    assert_int_equal(nsbox_nftbatch_replies(&b, r.buf, r.len, &v), 0);
    assert_false(v.done);
    r.len = 0;
    reply(&r, 19, 0);
    reply(&r, 20, 0);
    assert_int_equal(nsbox_nftbatch_replies(&b, r.buf, r.len, &v), 0);
    assert_true(v.done);
    assert_int_equal(v.err, 0);

    /* the slot is taken: the batch is aborted, every message still answered */
    v = (struct nsbox_nftverdict){0};
    r.len = 0;
    reply(&r, 18, -EEXIST);
    reply(&r, 19, 0);
    reply(&r, 20, 0);
    assert_int_equal(nsbox_nftbatch_replies(&b, r.buf, r.len, &v), 0);
    assert_true(v.done);
    assert_int_equal(v.err, EEXIST);
    assert_string_equal(v.set, "sb_slot");

    /* no table: the first error is the one reported */
    v = (struct nsbox_nftverdict){0};
    r.len = 0;
    reply(&r, 18, -ENOENT);
    reply(&r, 19, -ENOENT);
    reply(&r, 20, -ENOENT);
    assert_int_equal(nsbox_nftbatch_replies(&b, r.buf, r.len, &v), 0);
    assert_true(v.done);
    assert_int_equal(v.err, ENOENT);
    assert_string_equal(v.set, "sb_slot");

    /* refused as a whole (no CAP_NET_ADMIN): one reply, to BATCH_BEGIN */
    v = (struct nsbox_nftverdict){0};
    r.len = 0;
    reply(&r, 17, -EPERM);
    assert_int_equal(nsbox_nftbatch_replies(&b, r.buf, r.len, &v), 0);
    assert_true(v.done);
    assert_int_equal(v.err, EPERM);
    assert_null(v.set);

    /* truncated */
    v = (struct nsbox_nftverdict){0};
    r.len = 0;
    reply(&r, 18, 0);
    assert_int_equal(nsbox_nftbatch_replies(&b, r.buf, 10, &v), -1);
    nsbox_nftbatch_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_all_add_messages),
        cmocka_unit_test(test_delete_removes_the_same_keys),
        cmocka_unit_test(test_allow_tcp_and_egress_keys),
        cmocka_unit_test(test_none_with_egress),
        cmocka_unit_test(test_replies),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
