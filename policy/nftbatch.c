/* One sandbox's set elements as an nf_tables netlink batch (see nftbatch.h). */
#define _GNU_SOURCE
#include "nftbatch.h"

#include <arpa/inet.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netlink.h>
#include <stdlib.h>
#include <string.h>

#define IFNAME_LEN 16   /* the ifname type: IFNAMSIZ bytes, zero padded */
#define UDATA_COMMENT 0 /* libnftnl's NFTNL_UDATA_SET_ELEM_COMMENT: what `nft list` shows */

/* ---- appending ------------------------------------------------------------------------------- */

static void *grow(struct nsbox_nftbatch *b, size_t n)
{
    if (b->oom)
        return NULL;
    size_t need = b->len + NLMSG_ALIGN(n);
    if (need > b->cap) {
        size_t cap = b->cap ? b->cap : 1024;
        while (cap < need)
            cap *= 2;
        unsigned char *p = realloc(b->buf, cap);
        if (!p) {
            b->oom = true;
            return NULL;
        }
        b->buf = p;
        b->cap = cap;
    }
    unsigned char *at = b->buf + b->len;
    memset(at, 0, NLMSG_ALIGN(n));
    b->len = need;
    return at;
}

/* Starts a message; its length is fixed by msg_end. Returns its offset. */
static size_t msg_begin(struct nsbox_nftbatch *b, uint16_t type, uint16_t flags, uint32_t seq,
                        uint8_t family, uint16_t res_id)
{
    size_t off = b->len;
    struct nlmsghdr *h = grow(b, NLMSG_HDRLEN + sizeof(struct nfgenmsg));
    if (!h)
        return off;
    h->nlmsg_type = type;
    h->nlmsg_flags = NLM_F_REQUEST | flags;
    h->nlmsg_seq = seq;
    struct nfgenmsg *g = NLMSG_DATA(h);
    g->nfgen_family = family;
    g->version = NFNETLINK_V0;
    g->res_id = htons(res_id);
    return off;
}

static void msg_end(struct nsbox_nftbatch *b, size_t off)
{
    if (!b->oom)
        ((struct nlmsghdr *)(b->buf + off))->nlmsg_len = (uint32_t)(b->len - off);
}

static void attr(struct nsbox_nftbatch *b, uint16_t type, const void *data, size_t n)
{
    struct nlattr *a = grow(b, NLA_HDRLEN + n);
    if (!a)
        return;
    a->nla_type = type;
    a->nla_len = (uint16_t)(NLA_HDRLEN + n);
    memcpy((unsigned char *)a + NLA_HDRLEN, data, n);
}

static void attr_str(struct nsbox_nftbatch *b, uint16_t type, const char *s)
{
    attr(b, type, s, strlen(s) + 1);
}

static size_t nest_begin(struct nsbox_nftbatch *b, uint16_t type)
{
    size_t off = b->len;
    struct nlattr *a = grow(b, NLA_HDRLEN);
    if (a)
        a->nla_type = NLA_F_NESTED | type;
    return off;
}

static void nest_end(struct nsbox_nftbatch *b, size_t off)
{
    if (!b->oom)
        ((struct nlattr *)(b->buf + off))->nla_len = (uint16_t)(b->len - off);
}

/* ---- keys ------------------------------------------------------------------------------------ */

/* A key: the concatenation of up to three fields, each padded to a multiple of 4 bytes. */
struct key {
    unsigned char v[IFNAME_LEN + 4 + 4];
    size_t len;
};

static void key_ifname(struct key *k, const char *ifname)
{
    memset(k->v + k->len, 0, IFNAME_LEN);
    memcpy(k->v + k->len, ifname, strnlen(ifname, IFNAME_LEN - 1));
    k->len += IFNAME_LEN;
}

static void key_addr(struct key *k, struct in_addr a)
{
    memcpy(k->v + k->len, &a.s_addr, 4);
    k->len += 4;
}

static void key_port(struct key *k, uint16_t port)
{
    uint16_t be = htons(port);
    memset(k->v + k->len, 0, 4);
    memcpy(k->v + k->len, &be, 2);
    k->len += 4;
}

static void key_attr(struct nsbox_nftbatch *b, uint16_t type, const struct key *k)
{
    size_t n = nest_begin(b, type);
    attr(b, NFTA_DATA_VALUE, k->v, k->len);
    nest_end(b, n);
}

/* ---- messages -------------------------------------------------------------------------------- */

struct setmsg {
    struct nsbox_nftbatch *b;
    size_t msg, list;
    uint16_t n_elems;
};

static void set_begin(struct setmsg *m, struct nsbox_nftbatch *b, const char *set, bool add,
                      bool excl)
{
    m->b = b;
    m->n_elems = 0;
    uint16_t type = (NFNL_SUBSYS_NFTABLES << 8) | (add ? NFT_MSG_NEWSETELEM : NFT_MSG_DELSETELEM);
    uint16_t flags = NLM_F_ACK | (add ? NLM_F_CREATE : 0) | (excl ? NLM_F_EXCL : 0);
    if (b->n_msgs < NSBOX_NFTBATCH_MAX_MSGS)
        b->set[b->n_msgs] = set;
    b->n_msgs++;
    m->msg = msg_begin(b, type, flags, b->seq0 + b->n_msgs, NFPROTO_INET, 0);
    attr_str(b, NFTA_SET_ELEM_LIST_TABLE, NSBOX_NET_TABLE);
    attr_str(b, NFTA_SET_ELEM_LIST_SET, set);
    m->list = nest_begin(b, NFTA_SET_ELEM_LIST_ELEMENTS);
}

/* One element: its key, the end of its range (interval sets), a comment (add only). */
static void set_elem(struct setmsg *m, const struct key *k, const struct key *end,
                     const char *comment)
{
    size_t el = nest_begin(m->b, ++m->n_elems); /* numbered as libnftnl does; the kernel ignores it */
    key_attr(m->b, NFTA_SET_ELEM_KEY, k);
    if (end)
        key_attr(m->b, NFTA_SET_ELEM_KEY_END, end);
    if (comment) {
        unsigned char tlv[2 + NSBOX_NET_ID_MAX + 1];
        size_t n = strnlen(comment, NSBOX_NET_ID_MAX) + 1;
        tlv[0] = UDATA_COMMENT;
        tlv[1] = (unsigned char)n;
        memcpy(tlv + 2, comment, n - 1);
        tlv[2 + n - 1] = '\0';
        attr(m->b, NFTA_SET_ELEM_USERDATA, tlv, 2 + n);
    }
    nest_end(m->b, el);
}

static void set_end(struct setmsg *m)
{
    nest_end(m->b, m->list);
    msg_end(m->b, m->msg);
}

static void batch_marker(struct nsbox_nftbatch *b, uint16_t type, uint32_t seq)
{
    size_t off = msg_begin(b, type, 0, seq, AF_UNSPEC, NFNL_SUBSYS_NFTABLES);
    msg_end(b, off);
}

static struct key ifkey(const struct nsbox_netplan *p)
{
    struct key k = {.len = 0};
    key_ifname(&k, p->ifname);
    return k;
}

int nsbox_nftbatch_elements(struct nsbox_nftbatch *b, const struct nsbox_netplan *p, bool add,
                            uint32_t seq0)
{
    memset(b, 0, sizeof *b);
    b->seq0 = seq0;
    batch_marker(b, NFNL_MSG_BATCH_BEGIN, seq0);
    struct setmsg m;
    struct key k;

    /* the slot: `create`, so that a taken one fails the whole batch with EEXIST */
    set_begin(&m, b, "sb_slot", add, add);
    k = (struct key){.len = 0};
    key_addr(&k, p->slot.subnet);
    set_elem(&m, &k, NULL, add ? p->id : NULL);
    set_end(&m);

    set_begin(&m, b, "sb_src", add, false);
    k = ifkey(p);
    key_addr(&k, p->slot.sandbox);
    set_elem(&m, &k, NULL, NULL);
    set_end(&m);

    if (p->mode == NSBOX_NET_ALL) {
        set_begin(&m, b, "sb_all", add, false);
        k = ifkey(p);
        set_elem(&m, &k, NULL, NULL);
        set_end(&m);
    }
    if (p->mode == NSBOX_NET_ALL && p->dns.n_ns) {
        set_begin(&m, b, "sb_dns", add, false);
        for (size_t i = 0; i < p->dns.n_ns; i++) {
            k = ifkey(p);
            key_addr(&k, p->dns.ns[i]);
            set_elem(&m, &k, NULL, NULL);
        }
        set_end(&m);
    }
    if (p->n_cidr) {
        set_begin(&m, b, "sb_cidr", add, false);
        for (size_t i = 0; i < p->n_cidr; i++) {
            uint32_t host = ntohl(p->cidr[i].addr.s_addr);
            uint32_t mask = p->cidr[i].prefix ? ~0u << (32 - p->cidr[i].prefix) : 0;
            struct in_addr first = {htonl(host & mask)}, last = {htonl(host | ~mask)};
            struct key end = ifkey(p);
            key_addr(&end, last);
            k = ifkey(p);
            key_addr(&k, first);
            set_elem(&m, &k, &end, NULL);
        }
        set_end(&m);
    }
    if (p->n_tcp) {
        set_begin(&m, b, "sb_tcp", add, false);
        for (size_t i = 0; i < p->n_tcp; i++) {
            k = ifkey(p);
            key_addr(&k, p->tcp[i].addr);
            key_port(&k, p->tcp[i].port);
            set_elem(&m, &k, NULL, NULL);
        }
        set_end(&m);
    }
    batch_marker(b, NFNL_MSG_BATCH_END, seq0 + b->n_msgs + 1);
    if (b->oom) {
        nsbox_nftbatch_free(b);
        return -1;
    }
    return 0;
}

void nsbox_nftbatch_free(struct nsbox_nftbatch *b)
{
    free(b->buf);
    memset(b, 0, sizeof *b);
}

/* ---- replies --------------------------------------------------------------------------------- */

int nsbox_nftbatch_replies(const struct nsbox_nftbatch *b, const void *buf, size_t len,
                           struct nsbox_nftverdict *v)
{
    const struct nlmsghdr *h = buf;
    size_t left = len;
    for (; left > 0; h = NLMSG_NEXT(h, left)) {
        if (!NLMSG_OK(h, left))
            return -1;
        if (h->nlmsg_type != NLMSG_ERROR)
            continue;
        if (h->nlmsg_len < NLMSG_LENGTH(sizeof(int)))
            return -1;
        uint32_t seq = h->nlmsg_seq;
        if (seq < b->seq0 || seq > b->seq0 + b->n_msgs + 1)
            continue; /* not ours: left over from an earlier batch */
        const struct nlmsgerr *ne = NLMSG_DATA(h);
        int err = ne->error < 0 ? -ne->error : ne->error;
        if (seq == b->seq0 || seq == b->seq0 + b->n_msgs + 1) {
            /* about the batch as a whole (unknown subsystem, out of memory...) */
            if (err) {
                if (!v->err)
                    v->err = err, v->set = NULL;
                v->done = true;
            }
            continue;
        }
        if (err && !v->err) {
            uint32_t i = seq - b->seq0 - 1;
            v->err = err;
            v->set = i < NSBOX_NFTBATCH_MAX_MSGS ? b->set[i] : NULL;
        }
        if (++v->replies >= b->n_msgs)
            v->done = true;
    }
    return 0;
}
