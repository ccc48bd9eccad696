/* Where each frame of a WebSocket stream ends (RFC 6455 5.2), read as the egress helper relays
 * what a bound host sends after its 101 (Switching Protocols): the masking of bound values
 * (policy/scrub.h) lets go of a held-back tail at each frame's end, so that a message whose last
 * bytes could begin a value is not kept from the sandbox until the next one comes. It only
 * reads: the frames are relayed as they came. Pure. */
#ifndef NSBOX_WSFRAME_H
#define NSBOX_WSFRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct nsbox_wsframe {
    uint8_t head[14]; /* the frame's header so far: 2 to 14 bytes */
    size_t head_n;
    uint64_t left; /* payload bytes still to come, once the header is whole */
    bool in_payload;
};

/* Reads n bytes; returns how many belong to the current frame: all n, or fewer when it ended
 * inside them (*end; the rest begins the next frame). Zero it to start. */
size_t nsbox_wsframe_feed(struct nsbox_wsframe *f, const uint8_t *p, size_t n, bool *end);

#endif
