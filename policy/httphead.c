/* HTTP/1.1 request heads (policy/httphead.h). Syntax: RFC 9112 2-3 (message, request line),
 * 5 (fields), 6 (body length), 7.1 (chunked); RFC 9110 5.6.2 (tokens), 5.5 (field values). Pure. */
#include "httphead.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

static bool is_tchar(uint8_t c)
{
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
        return true;
    return c && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

/* field-value octets: VCHAR, obs-text, SP, HTAB */
static bool is_vchar_ws(uint8_t c)
{
    return c == ' ' || c == '\t' || (c >= 0x21 && c != 0x7f);
}

static bool eq_token(const uint8_t *p, size_t n, const char *name)
{
    return strlen(name) == n && strncasecmp((const char *)p, name, n) == 0;
}

/* The headers a binding may not name: they frame or route the request, so replacing them
 * would be smuggling done by nsbox itself. */
static const char *const framing[] = {
    "host",    "content-length", "transfer-encoding", "connection",       "upgrade", "te",
    "trailer", "expect",         "keep-alive",        "proxy-connection", NULL};

const char *nsbox_httphead_check_name(const char *name)
{
    size_t n = strlen(name);
    if (n == 0)
        return "empty header name";
    if (n > NSBOX_HTTPHEAD_NAME_MAX)
        return "header name longer than 64 bytes";
    for (size_t i = 0; i < n; i++)
        if (!is_tchar((uint8_t)name[i]))
            return "header name is not an HTTP token (letters, digits, -, and !#$%&'*+.^_`|~)";
    for (const char *const *f = framing; *f; f++)
        if (!strcasecmp(name, *f))
            return "this header frames or routes the request and cannot be bound";
    return NULL;
}

const char *nsbox_httphead_check_value(const char *value)
{
    size_t n = strnlen(value, NSBOX_HTTPHEAD_VALUE_MAX + 1);
    if (n == 0)
        return "empty value";
    if (n > NSBOX_HTTPHEAD_VALUE_MAX)
        return "value longer than 8192 bytes";
    for (size_t i = 0; i < n; i++) {
        uint8_t c = (uint8_t)value[i];
        if (c != ' ' && c != '\t' && (c < 0x21 || c > 0x7e))
            return "value has a byte that is not visible ASCII, space or tab (CR, LF, NUL, "
                   "control characters and non-ASCII cannot be sent safely)";
    }
    if (value[0] == ' ' || value[0] == '\t' || value[n - 1] == ' ' || value[n - 1] == '\t')
        return "value begins or ends with white space";
    return NULL;
}

static enum nsbox_httphead_verdict refuse(struct nsbox_httphead *h, int status, const char *why)
{
    h->status = status;
    h->why = why;
    return NSBOX_HTTPHEAD_REFUSED;
}

/* The end of the head: the offset just past "\r\n\r\n", or 0. A CR not followed by LF, or a
 * bare LF, makes *bad. in[0..from) is known to hold neither but for its last 3 bytes, which
 * may begin the end or be a CR whose next byte had not come. */
static size_t head_end(const uint8_t *in, size_t len, size_t from, bool *bad)
{
    *bad = false;
    for (size_t i = from > 3 ? from - 3 : 0; i < len; i++) {
        if (in[i] == '\n' && (i == 0 || in[i - 1] != '\r')) {
            *bad = true;
            return 0;
        }
        if (in[i] == '\r' && i + 1 < len && in[i + 1] != '\n') {
            *bad = true;
            return 0;
        }
        if (in[i] == '\n' && i >= 3 && in[i - 2] == '\n')
            return i + 1;
    }
    return 0;
}

static enum nsbox_httphead_verdict request_line(const uint8_t *p, size_t n,
                                                struct nsbox_httphead *h)
{
    size_t m = 0;
    while (m < n && is_tchar(p[m]))
        m++;
    if (m == 0 || m >= n || p[m] != ' ')
        return refuse(h, 400, "malformed request line (expected METHOD SP TARGET SP HTTP/1.1)");
    if (m >= sizeof h->method)
        return refuse(h, 405, "unknown method");
    memcpy(h->method, p, m);
    h->method[m] = '\0';
    if (!strcmp(h->method, "TRACE") || !strcmp(h->method, "CONNECT"))
        return refuse(h, 405,
                      "TRACE and CONNECT are refused on a bound host (TRACE would echo "
                      "the bound header back; CONNECT would open a tunnel around it)");
    if (!strcmp(h->method, "PRI"))
        return refuse(h, 505,
                      "HTTP/2 is not relayed to a bound host: the egress helper speaks "
                      "HTTP/1.1 there (ALPN http/1.1); use HTTP/1.1 (curl --http1.1)");
    size_t t = m + 1, te = t;
    while (te < n && p[te] > 0x20 && p[te] < 0x7f)
        te++;
    if (te == t || te >= n || p[te] != ' ')
        return refuse(h, 400, "malformed request target");
    bool star = te - t == 1 && p[t] == '*';
    if (p[t] != '/' && !(star && !strcmp(h->method, "OPTIONS")))
        return refuse(h, 400,
                      "only origin-form targets (/path) are accepted on a bound host: "
                      "an absolute URL could name another host than the TLS server "
                      "name");
    const char ver[] = "HTTP/1.1";
    if (n - te - 1 != sizeof ver - 1 || memcmp(p + te + 1, ver, sizeof ver - 1))
        return refuse(h, 505, "only HTTP/1.1 is relayed to a bound host");
    return NSBOX_HTTPHEAD_OK;
}

/* Host: the TLS server name, optionally with the connection's port. */
static bool host_matches(const uint8_t *v, size_t n, const char *sni, uint16_t port)
{
    size_t hn = n;
    for (size_t i = 0; i < n; i++)
        if (v[i] == ':') {
            hn = i;
            break;
        }
    if (hn < n) {
        unsigned long p = 0;
        if (hn + 1 == n || n - hn - 1 > 5)
            return false;
        for (size_t i = hn + 1; i < n; i++) {
            if (v[i] < '0' || v[i] > '9')
                return false;
            p = p * 10 + (v[i] - '0');
        }
        if (p != port)
            return false;
    }
    return eq_token(v, hn, sni);
}

struct fields {
    int host, cl, te, upgrade;
    bool conn_upgrade;
};

void nsbox_httphead_trim(const uint8_t **v, size_t *n)
{
    while (*n && (**v == ' ' || **v == '\t'))
        (*v)++, (*n)--;
    while (*n && ((*v)[*n - 1] == ' ' || (*v)[*n - 1] == '\t'))
        (*n)--;
}

void nsbox_httphead_list_start(struct nsbox_httplist *l, const uint8_t *v, size_t n)
{
    *l = (struct nsbox_httplist){.v = v, .n = n};
}

bool nsbox_httphead_list_next(struct nsbox_httplist *l, const uint8_t **e, size_t *en)
{
    if (l->at > l->n)
        return false;
    size_t end = l->at;
    while (end < l->n && l->v[end] != ',')
        end++;
    *e = l->v + l->at;
    *en = end - l->at;
    nsbox_httphead_trim(e, en);
    l->at = end + 1;
    return true;
}

/* Is name one of the comma-separated tokens of v (any case)? */
static bool has_token(const uint8_t *v, size_t n, const char *name)
{
    struct nsbox_httplist l;
    const uint8_t *e;
    size_t en;
    nsbox_httphead_list_start(&l, v, n);
    while (nsbox_httphead_list_next(&l, &e, &en))
        if (eq_token(e, en, name))
            return true;
    return false;
}

static enum nsbox_httphead_verdict one_field(const uint8_t *p, size_t n, const char *sni,
                                             uint16_t port, struct fields *f,
                                             struct nsbox_httphead *h)
{
    if (p[0] == ' ' || p[0] == '\t')
        return refuse(h, 400,
                      "obsolete line folding (a header line that begins with white "
                      "space) is refused");
    size_t c = 0;
    while (c < n && is_tchar(p[c]))
        c++;
    if (c == 0 || c >= n || p[c] != ':')
        return refuse(h, 400, "malformed header line (a name, then ':' with no space before it)");
    for (size_t i = c + 1; i < n; i++)
        if (!is_vchar_ws(p[i]))
            return refuse(h, 400, "a header value has a control character");
    const uint8_t *v = p + c + 1;
    size_t vn = n - c - 1;
    nsbox_httphead_trim(&v, &vn);
    if (eq_token(p, c, "host")) {
        if (f->host++)
            return refuse(h, 400, "more than one Host header");
        if (!host_matches(v, vn, sni, port))
            return refuse(h, 403, "the Host header names another host than the TLS server name");
    } else if (eq_token(p, c, "content-length")) {
        if (f->cl++)
            return refuse(h, 400, "more than one Content-Length header");
        if (vn == 0 || vn > 15)
            return refuse(h, 400, "Content-Length is not a number of at most 15 digits");
        h->content_length = 0;
        for (size_t i = 0; i < vn; i++) {
            if (v[i] < '0' || v[i] > '9')
                return refuse(h, 400, "Content-Length is not a number of at most 15 digits");
            h->content_length = h->content_length * 10 + (v[i] - '0');
        }
    } else if (eq_token(p, c, "transfer-encoding")) {
        if (f->te++)
            return refuse(h, 400, "more than one Transfer-Encoding header");
        if (!eq_token(v, vn, "chunked"))
            return refuse(h, 400, "Transfer-Encoding other than exactly 'chunked' is refused");
    } else if (eq_token(p, c, "connection")) {
        if (has_token(v, vn, "host") || has_token(v, vn, "content-length") ||
            has_token(v, vn, "transfer-encoding"))
            return refuse(h, 400,
                          "the Connection header names Host, Content-Length or "
                          "Transfer-Encoding: an intermediary would drop it, and read the "
                          "request otherwise than the egress helper did");
        h->close |= has_token(v, vn, "close");
        f->conn_upgrade |= has_token(v, vn, "upgrade");
    } else if (eq_token(p, c, "upgrade")) {
        if (f->upgrade++)
            return refuse(h, 400, "more than one Upgrade header");
        if (!eq_token(v, vn, "websocket"))
            return refuse(h, 400,
                          "Upgrade to another protocol than websocket (h2c, TLS) is not "
                          "relayed to a bound host");
    }
    return NSBOX_HTTPHEAD_OK;
}

enum nsbox_httphead_verdict nsbox_httphead_parse(const uint8_t *in, size_t len, const char *sni,
                                                 uint16_t port, struct nsbox_httphead *h)
{
    memset(h, 0, sizeof *h);
    bool bad;
    size_t end = head_end(in, len < NSBOX_HTTPHEAD_MAX ? len : NSBOX_HTTPHEAD_MAX, 0, &bad);
    if (bad)
        return refuse(h, 400, "a line does not end with CRLF (bare CR or LF)");
    if (!end)
        return len >= NSBOX_HTTPHEAD_MAX ? refuse(h, 431, "request head larger than 32 KiB")
                                         : NSBOX_HTTPHEAD_MORE;
    if (end == 2 || end == 4)
        return refuse(h, 400, "empty request line");
    size_t eol = 0;
    while (in[eol] != '\r')
        eol++;
    if (request_line(in, eol, h) != NSBOX_HTTPHEAD_OK)
        return NSBOX_HTTPHEAD_REFUSED;
    struct fields f = {0};
    size_t nf = 0;
    for (size_t at = eol + 2; at < end - 2;) {
        size_t le = at;
        while (in[le] != '\r')
            le++;
        if (++nf > NSBOX_HTTPHEAD_FIELDS_MAX)
            return refuse(h, 431, "more than 100 header lines");
        if (one_field(in + at, le - at, sni, port, &f, h) != NSBOX_HTTPHEAD_OK)
            return NSBOX_HTTPHEAD_REFUSED;
        at = le + 2;
    }
    if (!f.host)
        return refuse(h, 400, "no Host header");
    if (f.cl && f.te)
        return refuse(h, 400, "both Content-Length and Transfer-Encoding");
    /* a WebSocket handshake (RFC 6455 4.1): after its 101 the connection is no longer HTTP, so
     * the helper must know it is one exactly when the origin does */
    if (f.upgrade &&
        (!f.conn_upgrade || strcmp(h->method, "GET") || f.te || (f.cl && h->content_length)))
        return refuse(h, 400,
                      "a WebSocket upgrade must be a GET without a body whose Connection "
                      "header lists upgrade");
    h->upgrade = f.upgrade;
    h->body = f.te                        ? NSBOX_HTTPBODY_CHUNKED
              : f.cl && h->content_length ? NSBOX_HTTPBODY_LENGTH
                                          : NSBOX_HTTPBODY_NONE;
    h->head_len = end;
    return NSBOX_HTTPHEAD_OK;
}

enum nsbox_httphead_verdict nsbox_httphead_parse_more(const uint8_t *in, size_t len,
                                                      size_t *scanned, const char *sni,
                                                      uint16_t port, struct nsbox_httphead *h)
{
    bool bad;
    if (len < NSBOX_HTTPHEAD_MAX && *scanned <= len && !head_end(in, len, *scanned, &bad) && !bad) {
        memset(h, 0, sizeof *h);
        *scanned = len;
        return NSBOX_HTTPHEAD_MORE;
    }
    *scanned = 0; /* a verdict: the next head starts afresh */
    return nsbox_httphead_parse(in, len, sni, port, h);
}

static bool put(uint8_t *out, size_t outmax, size_t *k, const void *p, size_t n)
{
    if (*k + n > outmax)
        return false;
    memcpy(out + *k, p, n);
    *k += n;
    return true;
}

/* A header name as CGI, WSGI and PHP give it to an application (HTTP_X_API_KEY): any case, '-'
 * and '_' alike. X_Api_Key is another header to HTTP, and the same one to such an origin's
 * code, which would see the sandbox's value beside (or instead of) the bound one. */
static bool same_name(const uint8_t *a, const char *b, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint8_t x = (uint8_t)tolower(a[i]), y = (uint8_t)tolower((uint8_t)b[i]);
        if (x != y && !((x == '-' || x == '_') && (y == '-' || y == '_')))
            return false;
    }
    return true;
}

static bool is_bound(const uint8_t *line, size_t n, const char *const *names, size_t nn)
{
    for (size_t i = 0; i < nn; i++) {
        size_t l = strlen(names[i]);
        if (n > l && line[l] == ':' && same_name(line, names[i], l))
            return true;
    }
    return false;
}

bool nsbox_httphead_hop_names(const uint8_t *in, const struct nsbox_httphead *h,
                              const char *const *names, size_t n)
{
    size_t at = 0, end = h->head_len - 2;
    while (at < end) {
        size_t le = at;
        while (in[le] != '\r')
            le++;
        const uint8_t *colon = memchr(in + at, ':', le - at);
        if (at > 0 && colon && eq_token(in + at, (size_t)(colon - in - at), "connection")) {
            const uint8_t *v = colon + 1;
            size_t vn = (size_t)(in + le - v);
            for (size_t i = 0; i < n; i++)
                if (has_token(v, vn, names[i]))
                    return true;
        }
        at = le + 2;
    }
    return false;
}

size_t nsbox_httphead_rewrite(const uint8_t *in, const struct nsbox_httphead *h,
                              const char *const *names, const char *const *values, size_t n,
                              uint8_t *out, size_t outmax)
{
    size_t k = 0, at = 0, end = h->head_len - 2;
    while (at < end) {
        size_t le = at;
        while (in[le] != '\r')
            le++;
        bool drop = at > 0 && is_bound(in + at, le - at, names, n);
        if (!drop && !put(out, outmax, &k, in + at, le - at + 2))
            return 0;
        at = le + 2;
    }
    for (size_t i = 0; i < n; i++)
        if (!put(out, outmax, &k, names[i], strlen(names[i])) || !put(out, outmax, &k, ": ", 2) ||
            !put(out, outmax, &k, values[i], strlen(values[i])) || !put(out, outmax, &k, "\r\n", 2))
            return 0;
    return put(out, outmax, &k, "\r\n", 2) ? k : 0;
}

size_t nsbox_httphead_error(int status, const char *why, char *out, size_t outmax)
{
    const char *reason = status == 403   ? "Forbidden"
                         : status == 405 ? "Method Not Allowed"
                         : status == 431 ? "Request Header Fields Too Large"
                         : status == 502 ? "Bad Gateway"
                         : status == 505 ? "HTTP Version Not Supported"
                                         : "Bad Request";
    char body[512];
    int bn = snprintf(body, sizeof body, "nsbox egress: %s\n", why);
    if (bn < 0 || (size_t)bn >= sizeof body)
        bn = (int)sizeof body - 1;
    int n = snprintf(out, outmax,
                     "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\n"
                     "Content-Length: %d\r\nConnection: close\r\n\r\n%.*s",
                     status, reason, bn, bn, body);
    return n < 0 || (size_t)n >= outmax ? 0 : (size_t)n;
}

/* ---- chunked bodies ------------------------------------------------------------------------- */

enum {
    CH_SIZE = 0,
    CH_BWS,
    CH_EXT,
    CH_SIZE_LF,
    CH_DATA,
    CH_DATA_CR,
    CH_DATA_LF,
    CH_END_CR,
    CH_END_LF,
    CH_TRAILER
};

#define CH_LINE_MAX 4096

static long chunk_bad(struct nsbox_httpchunk *c, const char *why)
{
    c->why = why;
    return -1;
}

long nsbox_httphead_chunk_feed(struct nsbox_httpchunk *c, const uint8_t *p, size_t n)
{
    size_t i = 0;
    while (i < n && !c->done) {
        uint8_t b = p[i];
        switch (c->state) {
        case CH_SIZE:
        case CH_BWS:
        case CH_EXT: {
            if (++c->line > CH_LINE_MAX)
                return chunk_bad(c, "chunk size line too long");
            int d = b >= '0' && b <= '9'   ? b - '0'
                    : b >= 'a' && b <= 'f' ? b - 'a' + 10
                    : b >= 'A' && b <= 'F' ? b - 'A' + 10
                                           : -1;
            if (c->state == CH_SIZE && d >= 0) {
                if (c->left >> 56)
                    return chunk_bad(c, "chunk size too large");
                c->left = c->left * 16 + (uint64_t)d;
            } else if (c->line == 1 && (b == '\r' || b == '\n' || b == ';')) {
                return chunk_bad(c, "chunk without a size");
            } else if (b == '\r') {
                c->state = CH_SIZE_LF;
            } else if (b == '\n' && c->response) {
                c->line = 0;
                c->state = c->left ? CH_DATA : CH_END_CR;
            } else if (c->state == CH_EXT) {
                if (!is_vchar_ws(b))
                    return chunk_bad(c, "control character in a chunk extension");
            } else if (b == ';') {
                c->state = CH_EXT;
            } else if ((b == ' ' || b == '\t') && c->response && c->line > 1) {
                c->state = CH_BWS; /* RFC 9112 7.1.1: BWS before an extension's ";" */
            } else {
                return chunk_bad(c, "malformed chunk size");
            }
            i++;
            break;
        }
        case CH_SIZE_LF:
            if (b != '\n')
                return chunk_bad(c, "chunk size line not ended by CRLF");
            c->line = 0;
            c->state = c->left ? CH_DATA : CH_END_CR;
            i++;
            break;
        case CH_DATA: {
            size_t take = n - i < c->left ? n - i : (size_t)c->left;
            c->left -= take;
            i += take;
            if (!c->left)
                c->state = CH_DATA_CR;
            break;
        }
        case CH_TRAILER: /* a trailer field of a response: skipped to its LF */
            if (b == '\n')
                c->state = CH_END_CR;
            i++;
            break;
        case CH_END_CR:
            if (c->response && b != '\r') {
                /* LF alone ends the trailer section; anything else begins a trailer field */
                c->done = b == '\n';
                c->state = b == '\n' ? CH_SIZE : CH_TRAILER;
                i++;
                break;
            }
            /* fall through */
        case CH_DATA_CR:
            if (b == '\n' && c->response && c->state == CH_DATA_CR) {
                c->state = CH_SIZE; /* LF alone after a response's chunk data */
                i++;
                break;
            }
            if (b != '\r')
                return chunk_bad(c, c->state == CH_END_CR
                                        ? "trailer fields are refused on a bound host"
                                        : "chunk data not followed by CRLF");
            c->state = c->state == CH_DATA_CR ? CH_DATA_LF : CH_END_LF;
            i++;
            break;
        case CH_DATA_LF:
        case CH_END_LF:
            if (b != '\n')
                return chunk_bad(c, "bare CR in chunked framing");
            if (c->state == CH_END_LF)
                c->done = true;
            c->state = CH_SIZE;
            i++;
            break;
        }
    }
    return (long)i;
}

enum nsbox_httpchunk_part nsbox_httphead_chunk_part(const struct nsbox_httpchunk *c)
{
    if (c->done)
        return NSBOX_HTTPCHUNK_FRAMING;
    switch (c->state) {
    case CH_DATA:
        return NSBOX_HTTPCHUNK_DATA;
    case CH_END_CR:
    case CH_END_LF:
    case CH_TRAILER:
        return NSBOX_HTTPCHUNK_TRAILER;
    default:
        return NSBOX_HTTPCHUNK_FRAMING;
    }
}

void nsbox_httphead_log_path(const uint8_t *in, const struct nsbox_httphead *h, char *out,
                             size_t outmax)
{
    size_t i = 0, o = 0;
    while (i < h->head_len && in[i] != ' ')
        i++;
    for (i++; i < h->head_len && o + 1 < outmax; i++) {
        if (in[i] == ' ' || in[i] == '?' || in[i] == '#' || in[i] == '\r')
            break;
        out[o++] = (char)in[i];
    }
    if (outmax)
        out[o] = '\0';
}

int nsbox_httphead_status(const uint8_t *p, size_t n)
{
    if (n < NSBOX_HTTPHEAD_STATUS_LEN)
        return -1;
    if (memcmp(p, "HTTP/1.", 7) || (p[7] != '0' && p[7] != '1') || p[8] != ' ' ||
        (p[12] != ' ' && p[12] != '\r'))
        return 0;
    int st = 0;
    for (int i = 9; i < 12; i++) {
        if (p[i] < '0' || p[i] > '9')
            return 0;
        st = st * 10 + (p[i] - '0');
    }
    return st >= 100 && st <= 599 ? st : 0;
}
