/* Where each response of an HTTP/1.1 stream ends (RFC 9112 6.3), read as the egress helper
 * relays a bound host's responses: so that each request's entry in the network log gets its own
 * response's status and bytes when a client pipelines (responses come in the order of the
 * requests), so that a tail held back by the masking of values (policy/scrub.h) is let go at the
 * end of each response rather than when the next one begins, so that a 101 (Switching
 * Protocols) is known, and so that a chunked body's data can be told from its framing (the
 * helper sends that data in chunks of its own). It only reads; the relay decides what to write.
 * Lenient where the client will be (LF line ends, trailer fields, a status line without a
 * reason, whitespace before a chunk extension); a stream it cannot frame (not a status line,
 * conflicting Content-Length, malformed chunks) or one a client could frame otherwise (two
 * Transfer-Encoding lines, a coding other than chunked last with a Content-Length, chunked
 * before another coding, a framing field continued on a folded line) is "lost", and why is
 * said: the rest of the stream belongs to the current response. A final coding of chunked
 * frames the body whatever a Content-Length says (RFC 9112 6.3). Pure. */
#ifndef NSBOX_HTTPRESP_H
#define NSBOX_HTTPRESP_H

#include "httphead.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NSBOX_HTTPRESP_LINE_MAX 256 /* of a head's line, the part read (the rest is skipped) */

enum nsbox_httpresp_state {
    NSBOX_HTTPRESP_IDLE = 0, /* no response expected (nsbox_httpresp_start not called) */
    NSBOX_HTTPRESP_HEAD,     /* a head (interim ones included) */
    NSBOX_HTTPRESP_LENGTH,   /* Content-Length bytes of body */
    NSBOX_HTTPRESP_CHUNKED,  /* a chunked body */
    NSBOX_HTTPRESP_CLOSE,    /* a body that ends with the stream */
    NSBOX_HTTPRESP_TUNNEL,   /* after a 101: the stream is another protocol's */
    NSBOX_HTTPRESP_LOST,     /* framing this reader cannot read, or a client could read
                                otherwise (why): until the stream's end */
};

struct nsbox_httpresp {
    enum nsbox_httpresp_state state;
    int status;    /* the response's status once its head is read (a 1xx other than 101 is
                      not kept: the final one follows); 0 before, or when lost at once */
    bool done;     /* the response just ended (nsbox_httpresp_feed stopped there) */
    bool no_body;  /* the request was HEAD */
    uint64_t left; /* LENGTH: bytes still to come */
    struct nsbox_httpchunk chunk;
    const char *why; /* LOST: what of the framing */
    /* the head being read */
    bool first_line, chunked, other_coding, has_length;
    bool te_mixed;     /* a Transfer-Encoding named a coding after chunked */
    bool framing_line; /* the last field line was Content-Length or Transfer-Encoding */
    unsigned te_lines;
    uint64_t length;
    size_t line_n, line_len;
    uint8_t line[NSBOX_HTTPRESP_LINE_MAX];
};

/* A request was sent and its response comes next (after the current one's end). head_method:
 * it was HEAD, so the response has no body whatever its head says. */
void nsbox_httpresp_start(struct nsbox_httpresp *r, bool head_method);

/* Reads n bytes of the stream; returns how many belong to the current response: all n, or fewer
 * when it ended inside them (r->done; the rest is the next response's, to be fed after the next
 * nsbox_httpresp_start). In IDLE nothing is expected and 0 is returned. */
size_t nsbox_httpresp_feed(struct nsbox_httpresp *r, const uint8_t *p, size_t n);

#endif
