/* The stub resolver's reading of a query, its NXDOMAIN answer and the table of names asked
 * (dnsquery.h). */
#include "dnsquery.h"

#include <string.h>

#define FLAG_QR 0x8000u
#define OPCODE_MASK 0x7800u
#define FLAG_RD 0x0100u
#define RCODE_FORMERR 1u
#define RCODE_NXDOMAIN 3u
#define RCODE_REFUSED 5u

static unsigned be16(const uint8_t *p)
{
    return (unsigned)p[0] << 8 | p[1];
}

static bool label_char(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '-' || c == '_';
}

/* A query this stub reads: opcode QUERY, exactly one question and no answer or authority
 * records; additional records (EDNS's OPT) are allowed and not read. */
static bool plain_query(const uint8_t *pkt)
{
    unsigned flags = be16(pkt + 2);
    return !(flags & OPCODE_MASK) && be16(pkt + 4) == 1 && !be16(pkt + 6) && !be16(pkt + 8);
}

/* The question's end (past QTYPE and QCLASS) when it is well formed: labels within the packet,
 * no compression pointer, a wire form of at most 255 bytes. 0 when not. name: the name in lower
 * case, or "" for one never kept (the root, or a character no host name has). */
static size_t question(const uint8_t *pkt, size_t len, char name[NSBOX_DNSQUERY_NAME_MAX + 1])
{
    size_t at = NSBOX_DNSQUERY_HDR, out = 0, wire = 1;
    bool keep = true;
    for (;;) {
        if (at >= len)
            return 0;
        unsigned l = pkt[at++];
        if (l == 0)
            break;
        if (l > 63) /* 0xc0: a compression pointer, 0x40 and 0x80: reserved */
            return 0;
        wire += 1 + l;
        if (l > len - at || wire > 255) /* 255 bytes of wire form: 253 of text at most */
            return 0;
        if (out)
            name[out++] = '.';
        for (unsigned i = 0; i < l; i++) {
            unsigned char c = pkt[at + i];
            keep = keep && label_char(c);
            name[out++] = (char)(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
        }
        at += l;
    }
    if (len - at < 4) /* no QTYPE and QCLASS */
        return 0;
    name[keep ? out : 0] = '\0';
    return at + 4;
}

size_t nsbox_dnsquery_answer(const uint8_t *pkt, size_t len, struct nsbox_dnsquery *q,
                             uint8_t *out)
{
    q->name[0] = '\0';
    q->question_end = 0;
    if (!pkt || len < NSBOX_DNSQUERY_HDR || (be16(pkt + 2) & FLAG_QR))
        return 0;
    unsigned rcode = RCODE_REFUSED;
    size_t n = NSBOX_DNSQUERY_HDR;
    if (plain_query(pkt)) {
        size_t end = question(pkt, len, q->name);
        if (end) {
            /* no such name here rather than REFUSED: musl ignores an answer of any code but
             * NOERROR and NXDOMAIN and waits its whole timeout (5 s) for another, and the name
             * cannot resolve in this sandbox however often it is asked */
            n = q->question_end = end;
            rcode = RCODE_NXDOMAIN;
        } else {
            q->name[0] = '\0'; /* what was read of it before it failed */
            rcode = RCODE_FORMERR;
        }
    }
    /* the question echoed when it was read (a resolver matches its answer by it), else the
     * header alone, with no question */
    memcpy(out, pkt, n);
    unsigned flags = FLAG_QR | (be16(pkt + 2) & (OPCODE_MASK | FLAG_RD)) | rcode;
    out[2] = (uint8_t)(flags >> 8);
    out[3] = (uint8_t)flags;
    memset(out + 4, 0, 8);
    out[5] = n > NSBOX_DNSQUERY_HDR; /* QDCOUNT: 1 or 0; no answer, authority or additional */
    return n;
}

bool nsbox_dnsquery_name_valid(const char *s)
{
    size_t n = s ? strnlen(s, NSBOX_DNSQUERY_NAME_MAX + 1) : 0;
    if (n == 0 || n > NSBOX_DNSQUERY_NAME_MAX || s[0] == '.' || s[n - 1] == '.')
        return false;
    size_t label = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '.') {
            if (label == 0)
                return false;
            label = 0;
        } else if (!label_char(c) || (c >= 'A' && c <= 'Z') || ++label > 63) {
            return false;
        }
    }
    return true;
}

static bool ends_with(const char *s, const char *tail)
{
    size_t n = strlen(s), t = strlen(tail);
    return n >= t && strcmp(s + n - t, tail) == 0;
}

void nsbox_dnsquery_table_add(struct nsbox_dnsquery_table *t, const char *name)
{
    uint32_t take = __atomic_load_n(&t->take, __ATOMIC_ACQUIRE);
    uint32_t n = t->n;
    if (take != t->taken) {
        n = 0;
        __atomic_store_n(&t->n, 0, __ATOMIC_RELEASE);
        __atomic_store_n(&t->taken, take, __ATOMIC_RELEASE);
    }
    /* one label: the sandbox's own hostname (its AAAA query, which /etc/hosts cannot answer)
     * or a name no network would resolve without a search domain, which --network cannot
     * help with: never said, never taking a place */
    if (n >= NSBOX_DNSQUERY_NAMES || !strchr(name, '.'))
        return;
    /* a reverse lookup (an address's name): no host to allow */
    if (ends_with(name, ".in-addr.arpa") || ends_with(name, ".ip6.arpa"))
        return;
    /* an SRV name, _service._proto.host: the host is what --network allow takes */
    const char *proto = name[0] == '_' ? strchr(name, '.') : NULL;
    const char *host = proto && proto[1] == '_' ? strchr(proto + 1, '.') : NULL;
    if (host && strchr(host + 1, '.'))
        name = host + 1;
    for (uint32_t i = 0; i < n; i++)
        if (strcmp(t->name[i], name) == 0)
            return;
    size_t l = strnlen(name, NSBOX_DNSQUERY_NAME_MAX);
    memcpy(t->name[n], name, l);
    t->name[n][l] = '\0';
    __atomic_store_n(&t->n, n + 1, __ATOMIC_RELEASE);
}

size_t nsbox_dnsquery_table_take(struct nsbox_dnsquery_table *t,
                                 char out[NSBOX_DNSQUERY_NAMES][NSBOX_DNSQUERY_NAME_MAX + 1])
{
    /* taken before the writer started over: none since */
    if (__atomic_load_n(&t->taken, __ATOMIC_ACQUIRE) != t->take)
        return 0;
    uint32_t n = __atomic_load_n(&t->n, __ATOMIC_ACQUIRE);
    size_t k = 0;
    for (uint32_t i = 0; i < n && i < NSBOX_DNSQUERY_NAMES; i++) {
        memcpy(out[k], t->name[i], NSBOX_DNSQUERY_NAME_MAX + 1);
        out[k][NSBOX_DNSQUERY_NAME_MAX] = '\0';
        if (nsbox_dnsquery_name_valid(out[k]))
            k++;
    }
    if (n)
        __atomic_fetch_add(&t->take, 1, __ATOMIC_RELEASE);
    return k;
}
