/* HTTP/1.1 request heads as the egress helper relays them to a host bound to a header
 * (docs/network.md, "Header bindings"): a strict reader of what a sandbox sends, and the
 * rewriting that removes every copy of the bound header and adds the bound one. Pure: bytes in,
 * a verdict and a rewritten head out; no I/O, no allocation.
 *
 * Strict where a lenient reader and the origin could disagree on where a request ends or what
 * it says (request smuggling, RFC 9112 11.2): CRLF line ends only, no obsolete line folding, no
 * space before a colon, exactly one Host equal to the TLS server name, one Content-Length of
 * digits or one Transfer-Encoding of exactly "chunked", never both, and no Connection option
 * naming either or Host (hop-by-hop, an intermediary would drop it); origin-form targets only;
 * an Upgrade only to websocket, on a GET without a body that lists upgrade in Connection.
 * The input is everything received so far; call again with more after each read. */
#ifndef NSBOX_HTTPHEAD_H
#define NSBOX_HTTPHEAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NSBOX_HTTPHEAD_MAX 32768      /* request line and headers, CRLFs included */
#define NSBOX_HTTPHEAD_FIELDS_MAX 100 /* header lines */
#define NSBOX_HTTPHEAD_NAME_MAX 64    /* a bound header's name */
#define NSBOX_HTTPHEAD_VALUE_MAX 8192 /* a bound header's value */

enum nsbox_httphead_verdict {
    NSBOX_HTTPHEAD_MORE = 0, /* a prefix of a head: read more */
    NSBOX_HTTPHEAD_OK,       /* a complete head that may be relayed */
    NSBOX_HTTPHEAD_REFUSED,  /* refused: status and why say so */
};

enum nsbox_httphead_body {
    NSBOX_HTTPBODY_NONE = 0,
    NSBOX_HTTPBODY_LENGTH,  /* content_length bytes */
    NSBOX_HTTPBODY_CHUNKED, /* chunked framing (nsbox_httpchunk) */
};

struct nsbox_httphead {
    size_t head_len;               /* OK: bytes of input up to the empty line's end */
    char method[24];               /* OK */
    enum nsbox_httphead_body body; /* OK */
    uint64_t content_length;       /* OK, NSBOX_HTTPBODY_LENGTH */
    bool close;                    /* OK: Connection: close */
    bool upgrade;                  /* OK: a WebSocket handshake (GET, Upgrade: websocket,
                                      Connection: upgrade, no body) */
    int status;                    /* REFUSED: 400, 403, 405, 431, 505 */
    const char *why;               /* REFUSED: for the error response and the log */
};

/* sni: the connection's TLS server name (lower case); port: its port (a Host with a port must
 * name this one). */
enum nsbox_httphead_verdict nsbox_httphead_parse(const uint8_t *in, size_t len, const char *sni,
                                                 uint16_t port, struct nsbox_httphead *h);

/* nsbox_httphead_parse for a head that comes in many pieces: *scanned (0 at a head's start,
 * kept by the calls) is how much of in an earlier call found to hold neither the head's end nor
 * a bad line end, so that each call reads only what is new until the head is whole. A head
 * sent a byte at a time (one TLS record each) then costs its length, not its square. The
 * verdict is nsbox_httphead_parse's for the same bytes. */
enum nsbox_httphead_verdict nsbox_httphead_parse_more(const uint8_t *in, size_t len,
                                                      size_t *scanned, const char *sni,
                                                      uint16_t port, struct nsbox_httphead *h);

/* A header name as the bindings accept it: an RFC 9110 token of at most NSBOX_HTTPHEAD_NAME_MAX
 * bytes that is none of the headers that frame or route a request (Host, Content-Length,
 * Transfer-Encoding, Connection, Upgrade, TE, Trailer, Expect). NULL if fine, else why not. */
const char *nsbox_httphead_check_name(const char *name);
/* A value: 1..NSBOX_HTTPHEAD_VALUE_MAX bytes of visible ASCII, spaces and tabs inside, none at
 * either end (no CR, LF, NUL: it cannot end the header). NULL if fine, else why not. */
const char *nsbox_httphead_check_value(const char *value);

/* The head of an OK request (in[0..h->head_len)) with every header named by one of names (any
 * case, '-' and '_' alike, as CGI and WSGI name headers) removed and "names[i]: values[i]" added last, for i < n. Returns the length written to
 * out, or 0 when outmax is too small (NSBOX_HTTPHEAD_MAX + the bindings' lengths + 4 each is
 * always enough). The result may hold one field per binding more than the limit of a head
 * received: it is sent, not read again. */
size_t nsbox_httphead_rewrite(const uint8_t *in, const struct nsbox_httphead *h,
                              const char *const *names, const char *const *values, size_t n,
                              uint8_t *out, size_t outmax);

/* Whether a Connection header of an OK head (in[0..h->head_len)) lists one of names (any case)
 * as an option: a header so named is hop-by-hop, and an intermediary before the origin (a CDN,
 * a load balancer) removes it, so that the request would reach the origin without it. */
bool nsbox_httphead_hop_names(const uint8_t *in, const struct nsbox_httphead *h,
                              const char *const *names, size_t n);

/* A refusal as an HTTP response (status line, Content-Type, Content-Length, Connection: close,
 * the reason as the body). Returns the length, or 0 when outmax is too small. */
size_t nsbox_httphead_error(int status, const char *why, char *out, size_t outmax);

/* For the network log: the request target of an OK head (in[0..h->head_len)) up to its query
 * or fragment (they may hold tokens of their own), NUL-terminated, cut to outmax - 1 bytes. */
void nsbox_httphead_log_path(const uint8_t *in, const struct nsbox_httphead *h, char *out,
                             size_t outmax);
/* The status of a response from its first bytes ("HTTP/1.x NNN " or "HTTP/1.x NNN\r"):
 * 100..599, -1 when fewer than NSBOX_HTTPHEAD_STATUS_LEN bytes are there yet, 0 when they are
 * not a status line. */
#define NSBOX_HTTPHEAD_STATUS_LEN 13
int nsbox_httphead_status(const uint8_t *p, size_t n);

/* ---- field values (RFC 9110 5.5, 5.6.1), for the request heads here and the responses of
 * policy/httpresp.h ---------------------------------------------------------------------------- */

/* *v[0..*n) without the optional white space (spaces and tabs) at either end. */
void nsbox_httphead_trim(const uint8_t **v, size_t *n);

/* The elements of a comma-separated list, in order, each trimmed; an empty one (",," or a
 * trailing comma, or an empty value) is given as such, for the caller to refuse or skip. */
struct nsbox_httplist {
    const uint8_t *v;
    size_t n, at;
};
void nsbox_httphead_list_start(struct nsbox_httplist *l, const uint8_t *v, size_t n);
/* The next element into *e, *en; false after the last. */
bool nsbox_httphead_list_next(struct nsbox_httplist *l, const uint8_t **e, size_t *en);

/* ---- chunked request bodies (RFC 9112 7.1) --------------------------------------------------- */

struct nsbox_httpchunk {
    int state;
    uint64_t left;   /* bytes of the current chunk's data still to come */
    size_t line;     /* bytes of the current size line */
    bool response;   /* set before the first feed: a response's body, read as clients read
                        it (RFC 9112 7.1.1, 2.2): trailer fields are skipped rather than
                        refused, LF alone ends a line, whitespace may come before a chunk
                        extension's ";" (a request's stays strict: the origin reads its
                        framing as it came) */
    bool done;       /* the last chunk and the empty trailer line have passed */
    const char *why; /* after -1 */
};

/* What the next byte fed to c belongs to: a chunk's data (c->left bytes of it), the framing
 * (a size line and its extensions, the CRLF after data), or the trailer section (after the
 * last chunk's size line, its final CRLF included). */
enum nsbox_httpchunk_part {
    NSBOX_HTTPCHUNK_FRAMING = 0,
    NSBOX_HTTPCHUNK_DATA,
    NSBOX_HTTPCHUNK_TRAILER,
};
enum nsbox_httpchunk_part nsbox_httphead_chunk_part(const struct nsbox_httpchunk *c);

/* Feeds n bytes of body; returns how many belong to the body (< n only once done: the rest is
 * the next request), or -1 on a malformed body (why says what). Trailer fields are refused:
 * they could carry a second copy of the bound header after it was checked. */
long nsbox_httphead_chunk_feed(struct nsbox_httpchunk *c, const uint8_t *p, size_t n);

#endif
