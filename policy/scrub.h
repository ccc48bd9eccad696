/* Keeps secrets out of a byte stream: what the egress helper does to every response of a bound
 * host, so that an origin that echoes the request (a debugging endpoint, an error page quoting
 * the headers) does not carry the bound header's value back into the sandbox. Each occurrence
 * is replaced by as many '*' (lengths, and so Content-Length, stay right), or by another byte
 * that no secret holds when one holds '*': masks next to other bytes could otherwise spell a
 * secret again. Streaming: a tail
 * that could be the start of a secret is held back until the next bytes show what it is, and
 * only such a tail, so that server-sent events keep their timing. Pure. */
#ifndef NSBOX_SCRUB_H
#define NSBOX_SCRUB_H

#include <stddef.h>
#include <stdint.h>

#define NSBOX_SCRUB_MAX 8           /* secrets per stream */
#define NSBOX_SCRUB_SECRET_MAX 8192 /* bytes of one */
#define NSBOX_SCRUB_SECRET_MIN 8    /* shorter ones are not added: they would mask anything */

struct nsbox_scrub {
    size_t n;
    const char *secret[NSBOX_SCRUB_MAX];
    size_t len[NSBOX_SCRUB_MAX];
    size_t longest;
    uint8_t mask; /* the byte of the masks: in no secret */
    size_t held;
    uint8_t tail[NSBOX_SCRUB_SECRET_MAX];
};

void nsbox_scrub_init(struct nsbox_scrub *s);
/* The secret must outlive s. A header value "Scheme token" (Bearer, token, Basic...) adds its
 * token too, which an origin may echo alone. Returns -1 when full or out of bounds. */
int nsbox_scrub_add(struct nsbox_scrub *s, const char *secret);
/* n bytes in; out (room for n + NSBOX_SCRUB_SECRET_MAX) gets what may be sent now. */
size_t nsbox_scrub_feed(struct nsbox_scrub *s, const uint8_t *in, size_t n, uint8_t *out);
/* At the stream's end: the held tail (it is no secret: the stream ended inside it). */
size_t nsbox_scrub_flush(struct nsbox_scrub *s, uint8_t *out);

#endif
