/* Text a sandbox or an image controls, as nsbox shows it (shown.h). */
#include "shown.h"

#include <stdlib.h>
#include <string.h>

size_t nsbox_shown_utf8(const char *s, size_t len)
{
    const unsigned char *u = (const unsigned char *)s;
    unsigned c = u[0], min, cp;
    size_t n;
    if (c < 0x80)
        return 1;
    if ((c & 0xe0) == 0xc0)
        n = 2, min = 0x80, cp = c & 0x1f;
    else if ((c & 0xf0) == 0xe0)
        n = 3, min = 0x800, cp = c & 0x0f;
    else if ((c & 0xf8) == 0xf0)
        n = 4, min = 0x10000, cp = c & 0x07;
    else
        return 0;
    if (n > len)
        return 0;
    for (size_t i = 1; i < n; i++) {
        if ((u[i] & 0xc0) != 0x80)
            return 0;
        cp = (cp << 6) | (u[i] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return n;
}

size_t nsbox_shown_char(const char *s, size_t len, unsigned keep, bool *as_is)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t k = nsbox_shown_utf8(s, len);
    if (k == 0) {
        *as_is = false;
        return 1;
    }
    if (k == 1) {
        bool kept = (u[0] == '\t' && (keep & NSBOX_SHOWN_TAB)) ||
                    (u[0] == '\n' && (keep & NSBOX_SHOWN_NEWLINE));
        *as_is = kept || (u[0] >= 0x20 && u[0] != 0x7f);
    } else {
        *as_is = !(k == 2 && u[0] == 0xc2 && u[1] <= 0x9f); /* U+0080-U+009F: C1 */
    }
    return k;
}

/* The bytes s takes as shown, whole. */
static size_t shown_len(const char *s, size_t len, unsigned keep)
{
    size_t w = 0;
    for (size_t i = 0; i < len;) {
        bool as_is;
        size_t k = nsbox_shown_char(s + i, len - i, keep, &as_is);
        w += as_is ? k : 1;
        i += k;
    }
    return w;
}

size_t nsbox_shown_copy(char *out, size_t n, const char *s, size_t len, size_t max, unsigned keep)
{
    size_t o = 0, i = 0;
    if (n == 0)
        return 0;
    /* room for "..." is kept only when s will not fit whole */
    size_t dots = len <= max && shown_len(s, len, keep) < n ? 0 : 3;
    while (i < len) {
        bool as_is;
        size_t k = nsbox_shown_char(s + i, len - i, keep, &as_is);
        size_t w = as_is ? k : 1;
        if (i + k > max || o + w + dots + 1 > n)
            break;
        if (as_is)
            memcpy(out + o, s + i, k);
        else
            out[o] = '?';
        o += w, i += k;
    }
    if (i < len && o + 4 <= n) {
        memcpy(out + o, "...", 3);
        o += 3;
    }
    out[o] = '\0';
    return o;
}

char *nsbox_shown_lines(const char *s, size_t len, const char *indent, bool every_line)
{
    size_t il = strlen(indent), lines = 0;
    for (size_t i = 0; i < len; i++)
        lines += s[i] == '\n';
    /* a character is shown in at most its own bytes */
    char *out = malloc(len + lines * il + 1);
    if (!out)
        return NULL;
    size_t o = 0;
    for (size_t i = 0; i < len;) {
        bool as_is;
        size_t k = nsbox_shown_char(s + i, len - i, NSBOX_SHOWN_TAB | NSBOX_SHOWN_NEWLINE, &as_is);
        if (as_is)
            memcpy(out + o, s + i, k);
        else
            out[o] = '?';
        o += as_is ? k : 1;
        bool newline = as_is && s[i] == '\n';
        i += k;
        if (newline && (every_line || i == len || (s[i] != ' ' && s[i] != '\t'))) {
            memcpy(out + o, indent, il);
            o += il;
        }
    }
    out[o] = '\0';
    return out;
}
