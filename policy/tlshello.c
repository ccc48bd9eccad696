/* The ClientHello's server name (policy/tlshello.h). Formats: RFC 8446 4.1.2 (ClientHello) and
 * 5.1 (records), RFC 6066 3 (server_name); TLS 1.2 hellos (RFC 5246 7.4.1.2) have the same
 * layout, extensions optional. Pure. */
#include "tlshello.h"

#include <stdbool.h>
#include <string.h>

#define REC_HANDSHAKE 22
#define REC_HEADER 5
#define REC_MAX 16384 /* 2^14: a plaintext record's largest fragment */
#define HS_CLIENT_HELLO 1
#define HS_HEADER 4
#define EXT_SERVER_NAME 0
#define SNI_HOST_NAME 0

static bool is_alnum(uint8_t c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

int nsbox_tlshello_check_name(const uint8_t *name, size_t n, char *out)
{
    if (n == 0 || n > NSBOX_TLSHELLO_NAME_MAX)
        return -1;
    size_t start = 0;
    bool last_all_digits = true;
    for (size_t i = 0; i <= n; i++) {
        if (i < n && name[i] != '.') {
            uint8_t c = name[i];
            if (!is_alnum(c) && c != '-')
                return -1;
            out[i] = (char)(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
            continue;
        }
        size_t len = i - start;
        if (len == 0 || len > 63 || name[start] == '-' || name[i - 1] == '-')
            return -1; /* also a trailing dot, which RFC 6066 forbids */
        last_all_digits = true;
        for (size_t j = start; j < i; j++)
            if (name[j] < '0' || name[j] > '9')
                last_all_digits = false;
        if (i < n)
            out[i] = '.';
        start = i + 1;
    }
    out[n] = '\0';
    /* "10.0.0.1", "127.1": an address in disguise, and RFC 6066 allows no literal */
    return last_all_digits ? -1 : 0;
}

/* A bounded reader over the reassembled message. */
struct rd {
    const uint8_t *p;
    size_t n;
    bool bad;
};

static void rd_skip(struct rd *r, size_t bytes)
{
    if (r->bad || r->n < bytes) {
        r->bad = true;
        return;
    }
    r->p += bytes;
    r->n -= bytes;
}

static uint32_t rd_uint(struct rd *r, size_t bytes)
{
    uint32_t v = 0;
    if (r->bad || r->n < bytes) {
        r->bad = true;
        return 0;
    }
    for (size_t i = 0; i < bytes; i++)
        v = v << 8 | r->p[i];
    r->p += bytes;
    r->n -= bytes;
    return v;
}

/* A length-prefixed vector (bytes of length, then that many bytes) as a sub-reader. */
static struct rd rd_vec(struct rd *r, size_t len_bytes, size_t min, size_t max)
{
    struct rd sub = {.bad = true};
    size_t len = rd_uint(r, len_bytes);
    if (r->bad || len < min || len > max || len > r->n) {
        r->bad = true;
        return sub;
    }
    sub = (struct rd){.p = r->p, .n = len};
    r->p += len;
    r->n -= len;
    return sub;
}

static enum nsbox_tlshello_verdict bad(struct nsbox_tlshello *h, const char *why)
{
    h->why = why;
    return NSBOX_TLSHELLO_BAD;
}

/* server_name's extension_data: a list of (type, name); one host_name at most (RFC 6066 3). */
static enum nsbox_tlshello_verdict parse_sni(struct rd ext, struct nsbox_tlshello *h)
{
    struct rd list = rd_vec(&ext, 2, 1, 0xffff);
    bool found = false;
    if (ext.bad || ext.n != 0)
        return bad(h, "malformed server_name extension");
    while (list.n > 0) {
        uint32_t type = rd_uint(&list, 1);
        struct rd name = rd_vec(&list, 2, 1, 0xffff);
        if (list.bad)
            return bad(h, "malformed server_name list");
        if (type != SNI_HOST_NAME)
            continue; /* no other type is defined; a client would not send one */
        if (found)
            return bad(h, "two host names in server_name");
        if (nsbox_tlshello_check_name(name.p, name.n, h->name) < 0)
            return bad(h, "server_name is not a valid host name");
        found = true;
    }
    return found ? NSBOX_TLSHELLO_SNI : NSBOX_TLSHELLO_NO_SNI;
}

/* The ClientHello body, complete. */
static enum nsbox_tlshello_verdict parse_body(struct rd r, struct nsbox_tlshello *h)
{
    uint32_t version = rd_uint(&r, 2);
    rd_skip(&r, 32); /* random */
    if (r.bad || version < 0x0300 || version > 0x03ff)
        return bad(h, "ClientHello version or random");
    (void)rd_vec(&r, 1, 0, 32);                        /* legacy_session_id */
    struct rd suites = rd_vec(&r, 2, 2, 0xfffe);       /* cipher_suites */
    (void)rd_vec(&r, 1, 1, 0xff);                      /* legacy_compression_methods */
    if (r.bad || suites.n % 2 != 0)
        return bad(h, "malformed ClientHello");
    if (r.n == 0)
        return NSBOX_TLSHELLO_NO_SNI; /* TLS 1.2 and older: extensions are optional */
    struct rd exts = rd_vec(&r, 2, 0, 0xffff);
    if (r.bad || r.n != 0)
        return bad(h, "malformed ClientHello extensions");
    enum nsbox_tlshello_verdict v = NSBOX_TLSHELLO_NO_SNI;
    bool seen = false;
    while (exts.n > 0) {
        uint32_t type = rd_uint(&exts, 2);
        struct rd data = rd_vec(&exts, 2, 0, 0xffff);
        if (exts.bad)
            return bad(h, "malformed extension");
        if (type != EXT_SERVER_NAME)
            continue;
        if (seen) /* RFC 8446 4.2: no extension twice; two names would be ambiguous */
            return bad(h, "two server_name extensions");
        seen = true;
        v = parse_sni(data, h);
        if (v == NSBOX_TLSHELLO_BAD)
            return v;
    }
    return v;
}

enum nsbox_tlshello_verdict nsbox_tlshello_parse(const uint8_t *in, size_t len,
                                                 struct nsbox_tlshello *h)
{
    h->rec_off = h->have = h->need = 0;
    return nsbox_tlshello_parse_more(in, len, h);
}

enum nsbox_tlshello_verdict nsbox_tlshello_parse_more(const uint8_t *in, size_t len,
                                                      struct nsbox_tlshello *h)
{
    /* message bytes reassembled; its full size; the input's records they came from */
    size_t have = h->have, need = h->need, off = h->rec_off;
    if (off > len) /* not the input of the last call grown: from the start */
        have = need = off = 0;
    h->name[0] = '\0';
    h->why = NULL;
    h->consumed = 0;
    if (len > 0 && in[0] != REC_HANDSHAKE) {
        h->why = "not a TLS handshake record";
        return NSBOX_TLSHELLO_NOT_TLS;
    }
    if (len > 1 && in[1] != 3) {
        h->why = "not a TLS record version";
        return NSBOX_TLSHELLO_NOT_TLS;
    }
    for (;; h->rec_off = off, h->have = have, h->need = need) {
        if (len - off < REC_HEADER)
            break;
        const uint8_t *rec = in + off;
        size_t rlen = (size_t)rec[3] << 8 | rec[4];
        if (rec[0] != REC_HANDSHAKE)
            return bad(h, "a record other than handshake before the ClientHello's end");
        if (rec[1] != 3)
            return bad(h, "not a TLS record version");
        if (rlen == 0 || rlen > REC_MAX)
            return bad(h, "handshake record of length 0 or over 2^14");
        if (len - off - REC_HEADER < rlen)
            break; /* a record is only used whole: its length is checked first */
        const uint8_t *frag = rec + REC_HEADER;
        size_t take = rlen;
        if (have < HS_HEADER) { /* the message header may itself be split */
            size_t hdr = HS_HEADER - have < take ? HS_HEADER - have : take;
            memcpy(h->msg + have, frag, hdr);
            have += hdr;
            frag += hdr;
            take -= hdr;
            if (have == HS_HEADER) {
                if (h->msg[0] != HS_CLIENT_HELLO)
                    return bad(h, "first handshake message is not a ClientHello");
                need = HS_HEADER + ((size_t)h->msg[1] << 16 | (size_t)h->msg[2] << 8 |
                                    h->msg[3]);
                if (need > NSBOX_TLSHELLO_MAX)
                    return bad(h, "ClientHello over 16 KB");
            }
        }
        if (have >= HS_HEADER) {
            if (take > need - have) /* the rest of the record is the next message */
                take = need - have;
            memcpy(h->msg + have, frag, take);
            have += take;
        }
        off += REC_HEADER + rlen;
        if (have >= HS_HEADER && have == need) {
            h->consumed = off;
            return parse_body((struct rd){.p = h->msg + HS_HEADER, .n = need - HS_HEADER}, h);
        }
    }
    if (len >= NSBOX_TLSHELLO_INPUT_MAX)
        return bad(h, "no complete ClientHello in the first bytes");
    return NSBOX_TLSHELLO_MORE;
}

const char *nsbox_tlshello_verdict_name(enum nsbox_tlshello_verdict v)
{
    switch (v) {
    case NSBOX_TLSHELLO_MORE: return "more";
    case NSBOX_TLSHELLO_NOT_TLS: return "not TLS";
    case NSBOX_TLSHELLO_BAD: return "malformed";
    case NSBOX_TLSHELLO_NO_SNI: return "no SNI";
    case NSBOX_TLSHELLO_SNI: return "SNI";
    }
    return "?";
}
