/* WebSocket frame boundaries (policy/wsframe.h). RFC 6455 5.2: FIN/opcode byte, mask bit and a
 * 7-bit length, 126 for a 16-bit and 127 for a 64-bit length after it, a 4-byte masking key when
 * the mask bit is set, then the payload. Pure. */
#include "wsframe.h"

#include <string.h>

/* The header's length once its first two bytes are known. */
static size_t head_len(const uint8_t *h)
{
    size_t len7 = h[1] & 0x7f;
    return 2 + (len7 == 126 ? 2 : len7 == 127 ? 8 : 0) + (h[1] & 0x80 ? 4 : 0);
}

static uint64_t payload_len(const uint8_t *h)
{
    size_t len7 = h[1] & 0x7f, bytes = len7 == 126 ? 2 : len7 == 127 ? 8 : 0;
    if (!bytes)
        return len7;
    uint64_t n = 0;
    for (size_t i = 0; i < bytes; i++)
        n = n << 8 | h[2 + i];
    return n;
}

size_t nsbox_wsframe_feed(struct nsbox_wsframe *f, const uint8_t *p, size_t n, bool *end)
{
    size_t i = 0;
    *end = false;
    while (i < n && !*end) {
        if (!f->in_payload) {
            f->head[f->head_n++] = p[i++];
            if (f->head_n < 2 || f->head_n < head_len(f->head))
                continue;
            f->left = payload_len(f->head);
            f->in_payload = true;
        } else {
            size_t take = n - i < f->left ? n - i : (size_t)f->left;
            f->left -= take;
            i += take;
        }
        if (f->in_payload && !f->left) {
            *end = true;
            memset(f, 0, sizeof *f);
        }
    }
    return i;
}
