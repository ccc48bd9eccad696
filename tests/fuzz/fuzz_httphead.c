/* Fuzz the request-head reader (policy/httphead.c) with any bytes, as a sandbox may send them to
 * the egress helper on a bound host. Besides crashes (ASan, UBSan), it checks what the helper
 * relies on: a refusal has a status and a reason; an accepted head's verdict does not change
 * with what follows it, one byte less asks for more; its rewriting holds exactly one copy of
 * the bound header and reads back as an accepted head (or one with a field too many: the
 * rewriting adds one); the path it logs has no query, fragment, space or CR. The same bytes
 * also go through the chunked-body reader (a request's and a response's), whole and one at a
 * time, which must agree, the reader of a head in pieces (nsbox_httphead_parse_more), which must
 * say what the one-shot reader says at each length, and the response status reader, whose
 * answer is -1 (too short), 0 or a status. */
#include "httphead.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_chunked(const uint8_t *data, size_t size, bool response)
{
    struct nsbox_httpchunk whole = {.response = response}, bytes = {.response = response};
    long w = nsbox_httphead_chunk_feed(&whole, data, size), b = 0;
    for (size_t i = 0; i < size && !bytes.done; i++) {
        long r = nsbox_httphead_chunk_feed(&bytes, data + i, 1);
        if (r < 0) {
            b = -1;
            break;
        }
        b += r;
    }
    if (w != b || whole.done != bytes.done || (w < 0 && !whole.why) || w > (long)size ||
        ((size_t)w < size && w >= 0 && !whole.done))
        abort();
}

/* The head read in pieces with nsbox_httphead_parse_more, as the helper reads it: at each
 * length the verdict, status and head's length are those of nsbox_httphead_parse. */
static void check_more(const uint8_t *data, size_t size)
{
    static struct nsbox_httphead a, b;
    size_t step = size ? 1 + data[0] % 7 : 1, scanned = 0;
    for (size_t k = step < size ? step : size; k <= size && size <= 4096; k += step) {
        enum nsbox_httphead_verdict va =
            nsbox_httphead_parse_more(data, k, &scanned, "a.test", 443, &a);
        enum nsbox_httphead_verdict vb = nsbox_httphead_parse(data, k, "a.test", 443, &b);
        if (va != vb || a.status != b.status || a.head_len != b.head_len)
            abort();
        if (va != NSBOX_HTTPHEAD_MORE)
            return;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct nsbox_httphead h, again;
    static uint8_t out[NSBOX_HTTPHEAD_MAX + 64];
    check_chunked(data, size, false);
    check_chunked(data, size, true);
    check_more(data, size);
    int st = nsbox_httphead_status(data, size);
    if (st < -1 || (st > 0 && (st < 100 || st > 599)) ||
        (st == -1) != (size < NSBOX_HTTPHEAD_STATUS_LEN))
        abort();
    enum nsbox_httphead_verdict v = nsbox_httphead_parse(data, size, "a.test", 443, &h);
    if (v == NSBOX_HTTPHEAD_MORE && size >= NSBOX_HTTPHEAD_MAX)
        abort();
    if (v == NSBOX_HTTPHEAD_REFUSED && (!h.why || h.status < 400 || h.status > 599))
        abort();
    if (v != NSBOX_HTTPHEAD_OK)
        return 0;
    if (h.head_len == 0 || h.head_len > size ||
        nsbox_httphead_parse(data, h.head_len, "a.test", 443, &again) != v ||
        again.head_len != h.head_len ||
        nsbox_httphead_parse(data, h.head_len - 1, "a.test", 443, &again) != NSBOX_HTTPHEAD_MORE)
        abort();
    char path[64];
    nsbox_httphead_log_path(data, &h, path, sizeof path);
    if (strlen(path) >= sizeof path || strpbrk(path, "?# \r"))
        abort();
    const char *name = "X-Key", *value = "v";
    size_t n = nsbox_httphead_rewrite(data, &h, &name, &value, 1, out, sizeof out);
    if (n == 0)
        abort();
    v = nsbox_httphead_parse(out, n, "a.test", 443, &again);
    if (v == NSBOX_HTTPHEAD_REFUSED && again.status == 431)
        return 0;
    if (v != NSBOX_HTTPHEAD_OK || again.head_len != n || again.body != h.body ||
        again.content_length != h.content_length)
        abort();
    int copies = 0;
    for (size_t i = 1; i + 6 < n; i++)
        copies += out[i - 1] == '\n' && !strncasecmp((const char *)out + i, "x-key:", 6);
    if (copies != 1)
        abort();
    return 0;
}
