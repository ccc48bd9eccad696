/* The stub resolver's reading of a query, its REFUSED answer and the table of names asked
 * (dnsquery.h). */
#include "dnsquery.h"

#include <string.h>

#define FLAG_QR 0x8000u
#define OPCODE_MASK 0x7800u
#define FLAG_RD 0x0100u
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

int nsbox_dnsquery_parse(const uint8_t *pkt, size_t len, struct nsbox_dnsquery *q)
{
    if (!pkt || len < NSBOX_DNSQUERY_HDR + 1 + 4)
        return -1;
    unsigned flags = be16(pkt + 2);
    /* a query (not an answer), opcode QUERY, exactly one question and no answers; additional
     * records (EDNS's OPT) are allowed and not read */
    if ((flags & FLAG_QR) || (flags & OPCODE_MASK) || be16(pkt + 4) != 1 || be16(pkt + 6) ||
        be16(pkt + 8))
        return -1;
    size_t at = NSBOX_DNSQUERY_HDR, out = 0;
    for (;;) {
        if (at >= len)
            return -1;
        unsigned l = pkt[at++];
        if (l == 0)
            break;
        if (l > 63) /* 0xc0: a compression pointer, 0x40 and 0x80: reserved */
            return -1;
        if (l > len - at || out + (out ? 1 : 0) + l > NSBOX_DNSQUERY_NAME_MAX)
            return -1;
        if (out)
            q->name[out++] = '.';
        for (unsigned i = 0; i < l; i++) {
            unsigned char c = pkt[at + i];
            if (!label_char(c))
                return -1;
            q->name[out++] = (char)(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
        }
        at += l;
    }
    if (out == 0 || len - at < 4) /* the root itself, or no QTYPE and QCLASS */
        return -1;
    q->name[out] = '\0';
    q->question_end = at + 4;
    return 0;
}

size_t nsbox_dnsquery_refused(const uint8_t *pkt, const struct nsbox_dnsquery *q, uint8_t *out)
{
    size_t n = q->question_end;
    memcpy(out, pkt, n);
    unsigned flags = FLAG_QR | (be16(pkt + 2) & FLAG_RD) | RCODE_REFUSED;
    out[2] = (uint8_t)(flags >> 8);
    out[3] = (uint8_t)flags;
    memset(out + 6, 0, 6); /* no answer, authority or additional records */
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
