/* Fuzz the response scrubber (policy/scrub.c) with any bytes as a bound host may send them:
 * the first bytes name a secret and how the rest is split into reads. It checks what the
 * sandbox relies on: the output is exactly as long as the input, holds no occurrence of the
 * secret, and equals the input wherever the input had no secret. */
#include "cstring.h"
#include "scrub.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct nsbox_scrub s;
static uint8_t out[65536 + NSBOX_SCRUB_SECRET_MAX], all[65536];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 3 || size > 60000)
        return 0;
    size_t slen = 8 + data[0] % 24, step = 1 + data[1] % 64;
    if (size < 2 + slen)
        return 0;
    char *secret = cstring_dup(data + 2, slen);
    if (strlen(secret) != slen || strchr(secret, ' ')) {
        free(secret);
        return 0;
    }
    nsbox_scrub_init(&s);
    if (nsbox_scrub_add(&s, secret) < 0)
        abort();
    const uint8_t *in = data + 2 + slen;
    size_t n = size - 2 - slen, k = 0;
    for (size_t at = 0; at < n; at += step) {
        size_t m = n - at < step ? n - at : step;
        size_t w = nsbox_scrub_feed(&s, in + at, m, out);
        memcpy(all + k, out, w);
        k += w;
    }
    size_t w = nsbox_scrub_flush(&s, out);
    memcpy(all + k, out, w);
    k += w;
    if (k != n)
        abort();
    for (size_t i = 0; i + slen <= n; i++)
        if (!memcmp(all + i, secret, slen))
            abort();
    for (size_t i = 0; i < n; i++)
        if (all[i] != in[i] && all[i] != s.mask)
            abort();
    free(secret);
    return 0;
}
