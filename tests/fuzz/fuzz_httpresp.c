/* Fuzz the response framing reader (policy/httpresp.c) with any bytes, as a bound host may send
 * them to the egress helper, and what follows a 101 with the WebSocket frame reader
 * (policy/wsframe.c), as the helper does. The first byte picks which of the (up to 8) requests were
 * HEAD. Besides crashes (ASan, UBSan), it checks what the helper relies on: every byte fed goes to
 * some response (never more than fed, never 0 while a response is awaited), a lost response
 * says why (the helper logs it), a status is 0 or
 * 100..599, and the stream read whole and one byte at a time ends the same responses at the
 * same offsets with the same statuses; the same for the frames after a 101 (ends at the same
 * offsets whole and byte by byte, every byte in a frame). */
#include "httpresp.h"
#include "wsframe.h"

#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct run {
    size_t ends[8];
    int status[8];
    size_t n;
    size_t tunnel; /* where a 101's head ended; 0: none */
};

/* The frames of p[0..size) read step bytes at a time: a checksum of where they end. */
static uint64_t frames(const uint8_t *p, size_t size, size_t step)
{
    struct nsbox_wsframe f = {0};
    uint64_t sum = 0;
    for (size_t at = 0; at < size;) {
        size_t k = size - at < step ? size - at : step;
        bool end = false;
        size_t used = nsbox_wsframe_feed(&f, p + at, k, &end);
        if (used == 0 || used > k || (!end && used < k))
            abort();
        at += used;
        if (end)
            sum = sum * 1000003u + at;
    }
    return sum;
}

static void run(const uint8_t *p, size_t size, uint8_t heads, size_t step, struct run *out)
{
    struct nsbox_httpresp r;
    size_t at = 0;
    out->n = 0;
    out->tunnel = 0;
    nsbox_httpresp_start(&r, heads & 1);
    while (at < size) {
        size_t k = size - at < step ? size - at : step;
        size_t used = nsbox_httpresp_feed(&r, p + at, k);
        if (used > k || (used == 0 && r.state != NSBOX_HTTPRESP_IDLE) ||
            (r.state == NSBOX_HTTPRESP_LOST && !r.why) ||
            (r.status != 0 && (r.status < 100 || r.status > 599)))
            abort();
        at += used;
        if (r.done) {
            out->ends[out->n] = at;
            out->status[out->n++] = r.status;
            if (r.state == NSBOX_HTTPRESP_TUNNEL)
                out->tunnel = at;
            if (out->n == 8 || r.state == NSBOX_HTTPRESP_TUNNEL)
                return;
            nsbox_httpresp_start(&r, (heads >> out->n) & 1);
        } else if (used < k) {
            abort(); /* it stops early only at a response's end */
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    struct run whole, bytes;
    run(data + 1, size - 1, data[0], size, &whole);
    run(data + 1, size - 1, data[0], 1, &bytes);
    if (whole.n != bytes.n || whole.tunnel != bytes.tunnel)
        abort();
    if (whole.tunnel && frames(data + 1 + whole.tunnel, size - 1 - whole.tunnel, size) !=
                            frames(data + 1 + whole.tunnel, size - 1 - whole.tunnel, 1))
        abort();
    for (size_t i = 0; i < whole.n; i++)
        if (whole.ends[i] != bytes.ends[i] || whole.status[i] != bytes.status[i])
            abort();
    return 0;
}
