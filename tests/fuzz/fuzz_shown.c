/* Fuzz the one rule for text nsbox shows (policy/shown.c). The input is two bytes of settings
 * (the kept controls and the room in out; the bound on s) and the text. Besides crashes
 * (ASan), it checks with a decoder of its own what every message relies on: what comes out is
 * valid UTF-8 with no control but the kept ones (no C0, DEL or C1, raw or encoded), fits in
 * out with its NUL, takes at most max bytes of s (then "..."), is whole when it fits, and is
 * shown again unchanged. */
#include "shown.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Is out valid UTF-8 without a control character (but tab and newline when kept)? Decoded
 * here by another route than shown.c's: each code point whole, then judged. */
static int clean(const unsigned char *out, size_t len, unsigned keep)
{
    for (size_t i = 0; i < len;) {
        unsigned c = out[i], cp;
        size_t n = c < 0x80 ? 1 : c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3
                                                        : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
        if (!n || i + n > len)
            return 0;
        cp = n == 1 ? c : c & (0x7f >> n);
        for (size_t k = 1; k < n; k++) {
            if ((out[i + k] & 0xc0) != 0x80)
                return 0;
            cp = cp << 6 | (out[i + k] & 0x3f);
        }
        static const unsigned least[] = {0, 0, 0x80, 0x800, 0x10000};
        if (cp < least[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
            return 0;
        if ((cp < 0x20 && !(cp == '\t' && (keep & NSBOX_SHOWN_TAB)) &&
             !(cp == '\n' && (keep & NSBOX_SHOWN_NEWLINE))) ||
            (cp >= 0x7f && cp <= 0x9f))
            return 0;
        i += n;
    }
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    unsigned keep = data[0] & 3;
    size_t n = (size_t)(data[0] >> 2) * 4, max = data[1] == 0xff ? SIZE_MAX : data[1];
    const char *s = (const char *)data + 2;
    size_t len = size - 2;
    char *out = malloc(n + 1), *again = malloc(n + 1);
    if (!out || !again)
        abort();
    out[n] = again[n] = 'X'; /* past the room given: never written */
    size_t o = nsbox_shown_copy(out, n, s, len, max, keep);
    if (out[n] != 'X' || (n == 0 && o != 0))
        abort();
    if (n > 0) {
        if (o >= n || strlen(out) != o || !clean((const unsigned char *)out, o, keep))
            abort();
        /* at most max bytes of s (a character shown as '?' is shorter, never longer), and
         * then "..." */
        if (max != SIZE_MAX && o > max + 3)
            abort();
        /* whole when max and the room allow: nothing is left out for no reason */
        if (len <= max && len < n) {
            char *whole = malloc(len + 1);
            if (!whole)
                abort();
            nsbox_shown_copy(whole, len + 1, s, len, SIZE_MAX, keep);
            if (strcmp(whole, out))
                abort();
            free(whole);
        }
        /* shown text is shown as it is: the rule is applied once, not twice differently */
        if (nsbox_shown_copy(again, n, out, o, SIZE_MAX, keep) != o || memcmp(again, out, o))
            abort();
    }
    free(out);
    free(again);
    return 0;
}
