/* Where HTTP/1.1 responses end (policy/httpresp.h). RFC 9112 4 (status line), 6.3 (message body
 * length), 7.1 (chunked, trailer fields). Pure. */
#include "httpresp.h"

#include <string.h>
#include <strings.h>

void nsbox_httpresp_start(struct nsbox_httpresp *r, bool head_method)
{
    memset(r, 0, offsetof(struct nsbox_httpresp, line));
    r->state = NSBOX_HTTPRESP_HEAD;
    r->first_line = true;
    r->no_body = head_method;
}

static void end_response(struct nsbox_httpresp *r)
{
    r->done = true;
    r->state = NSBOX_HTTPRESP_IDLE;
}

/* "N" or "N, N, ..." with one N (RFC 9110 8.6 lets a recipient take a list of equal values);
 * false for anything else. */
static bool length_value(const uint8_t *v, size_t n, uint64_t *out)
{
    bool any = false;
    struct nsbox_httplist l;
    const uint8_t *t;
    size_t tn;
    nsbox_httphead_list_start(&l, v, n);
    while (nsbox_httphead_list_next(&l, &t, &tn)) {
        if (tn == 0 || tn > 15)
            return false;
        uint64_t x = 0;
        for (size_t k = 0; k < tn; k++) {
            if (t[k] < '0' || t[k] > '9')
                return false;
            x = x * 10 + (uint64_t)(t[k] - '0');
        }
        if (any && x != *out)
            return false;
        *out = x;
        any = true;
    }
    return any;
}

static void lose(struct nsbox_httpresp *r, const char *why)
{
    r->state = NSBOX_HTTPRESP_LOST;
    r->why = why;
}

/* A field line of the head: only the ones that frame the body matter. */
static void field(struct nsbox_httpresp *r, const uint8_t *p, size_t n, bool cut)
{
    bool folded = n && (p[0] == ' ' || p[0] == '\t');
    if (folded && r->framing_line) {
        lose(r, "a framing header continued on a folded line");
        return;
    }
    r->framing_line = false;
    const uint8_t *colon = memchr(p, ':', n);
    if (!colon || folded)
        return;
    size_t nn = (size_t)(colon - p);
    bool cl = nn == 14 && !strncasecmp((const char *)p, "content-length", 14);
    bool te = nn == 17 && !strncasecmp((const char *)p, "transfer-encoding", 17);
    if (!cl && !te)
        return;
    r->framing_line = true;
    const uint8_t *v = colon + 1;
    size_t vn = n - nn - 1;
    nsbox_httphead_trim(&v, &vn);
    uint64_t x = 0;
    if (cut) {
        lose(r, "a framing header too long to read");
        return;
    }
    if (cl && (!length_value(v, vn, &x) || (r->has_length && x != r->length))) {
        lose(r, "a Content-Length that is not one number");
        return;
    }
    if (cl) {
        r->has_length = true;
        r->length = x;
        return;
    }
    /* a final coding of chunked frames the body in chunks (RFC 9112 6.3), whatever codings
     * come before it; chunked anywhere else is not a framing clients agree on */
    r->te_lines++;
    struct nsbox_httplist l;
    const uint8_t *e;
    size_t en;
    bool chunked = false;
    nsbox_httphead_list_start(&l, v, vn);
    while (nsbox_httphead_list_next(&l, &e, &en)) {
        r->te_mixed |= chunked; /* a coding after chunked */
        chunked = en == 7 && !strncasecmp((const char *)e, "chunked", 7);
    }
    r->chunked = chunked;
    r->other_coding = !chunked;
}

/* A head whose body the client could frame otherwise than this reader does: the client would
 * decode what the relay passes as it came. */
static const char *ambiguous(const struct nsbox_httpresp *r)
{
    if (r->te_lines > 1)
        return "more than one Transfer-Encoding line";
    /* chunked overrides a Content-Length (RFC 9112 6.3), which the relay drops from the head;
     * another coding leaves the client to choose between them */
    if (r->other_coding && r->has_length)
        return "both Transfer-Encoding and Content-Length";
    if (r->te_mixed)
        return "a Transfer-Encoding naming chunked before another coding";
    return NULL;
}

static void end_head(struct nsbox_httpresp *r)
{
    if (r->status < 200 && r->status != 101) { /* interim: the final head follows */
        bool head_method = r->no_body;
        nsbox_httpresp_start(r, head_method);
        return;
    }
    const char *why = ambiguous(r);
    if (r->status == 101) {
        r->done = true;
        r->state = NSBOX_HTTPRESP_TUNNEL;
    } else if (r->no_body || r->status == 204 || r->status == 304) {
        end_response(r);
    } else if (why) {
        lose(r, why);
    } else if (r->chunked) {
        r->state = NSBOX_HTTPRESP_CHUNKED;
        r->chunk = (struct nsbox_httpchunk){.response = true};
    } else if (r->other_coding || !r->has_length) {
        r->state = NSBOX_HTTPRESP_CLOSE;
    } else if (r->length) {
        r->state = NSBOX_HTTPRESP_LENGTH;
        r->left = r->length;
    } else {
        end_response(r);
    }
}

/* A line of the head ended (its LF read). */
static void head_line(struct nsbox_httpresp *r)
{
    bool cut = r->line_len > r->line_n;
    size_t n = r->line_n;
    if (r->first_line) {
        r->first_line = false;
        /* a status line may end right after the code ("HTTP/1.1 200\r\n") */
        uint8_t line[NSBOX_HTTPHEAD_STATUS_LEN];
        size_t k = n < sizeof line ? n : sizeof line;
        memcpy(line, r->line, k);
        if (k < sizeof line)
            line[k++] = ' ';
        int st = nsbox_httphead_status(line, k);
        if (st <= 0)
            lose(r, "not an HTTP/1.x status line");
        else
            r->status = st;
    } else {
        if (!cut && n && r->line[n - 1] == '\r')
            n--;
        if (n == 0 && !cut)
            end_head(r);
        else
            field(r, r->line, n, cut);
    }
    r->line_n = r->line_len = 0;
}

size_t nsbox_httpresp_feed(struct nsbox_httpresp *r, const uint8_t *p, size_t n)
{
    size_t i = 0;
    r->done = false;
    while (i < n && !r->done) {
        switch (r->state) {
        case NSBOX_HTTPRESP_IDLE:
            return i;
        case NSBOX_HTTPRESP_HEAD: {
            uint8_t b = p[i++];
            if (b == '\n') {
                head_line(r);
            } else {
                if (r->line_n < sizeof r->line)
                    r->line[r->line_n++] = b;
                r->line_len++;
            }
            break;
        }
        case NSBOX_HTTPRESP_LENGTH: {
            size_t take = n - i < r->left ? n - i : (size_t)r->left;
            r->left -= take;
            i += take;
            if (!r->left)
                end_response(r);
            break;
        }
        case NSBOX_HTTPRESP_CHUNKED: {
            long k = nsbox_httphead_chunk_feed(&r->chunk, p + i, n - i);
            if (k < 0) {
                lose(r, r->chunk.why);
                break;
            }
            i += (size_t)k;
            if (r->chunk.done)
                end_response(r);
            break;
        }
        default: /* CLOSE, TUNNEL, LOST: the rest of the stream */
            i = n;
        }
    }
    return i;
}
