/* A field of the kernel's mount table, unescaped (mntescape.h). */
#include "mntescape.h"

#include <errno.h>

static bool is_octal(char c, char top)
{
    return c >= '0' && c <= top;
}

int nsbox_mntescape_decode(const char *s, size_t len, char *out, size_t n, bool refuse_control)
{
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '\\' && i + 3 < len && is_octal(s[i + 1], '3') && is_octal(s[i + 2], '7') &&
            is_octal(s[i + 3], '7')) {
            c = (unsigned char)((s[i + 1] - '0') << 6 | (s[i + 2] - '0') << 3 | (s[i + 3] - '0'));
            i += 3;
        }
        if (refuse_control && (c < 0x20 || c == 0x7f)) {
            errno = EINVAL;
            return -1;
        }
        if (o + 1 >= n) {
            errno = ENAMETOOLONG;
            return -1;
        }
        out[o++] = (char)c;
    }
    if (n == 0) {
        errno = ENAMETOOLONG;
        return -1;
    }
    out[o] = '\0';
    return 0;
}
