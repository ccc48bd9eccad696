/* Small texts (see text.h). */
#define _GNU_SOURCE
#include "text.h"
#include "cleanup.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void nsbox_text_appendf(char *dst, size_t n, const char *fmt, ...)
{
    size_t len = strnlen(dst, n);
    if (len + 1 >= n) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(dst + len, n - len, fmt, ap);
    va_end(ap);
}

const char *nsbox_text_errname(int err)
{
    const char *s = strerrorname_np(err);
    return s ? s : "error";
}

ssize_t nsbox_text_read(const char *path, char *buf, size_t n)
{
    cleanup_close int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) return -1;
    size_t off = 0;
    while (off + 1 < n) {
        ssize_t r = read(fd, buf + off, n - 1 - off);
        if (r < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        if (r == 0) break;
        off += (size_t)r;
    }
    buf[off] = '\0';
    return (ssize_t)off;
}

int nsbox_text_parse_long(const char *content, long *out)
{
    if (!content) return -1;
    while (isspace((unsigned char)*content))
        content++;
    if (!*content) return -1;
    char *end;
    errno = 0;
    long v = strtol(content, &end, 10);
    if (errno || end == content) return -1;
    while (isspace((unsigned char)*end))
        end++;
    if (*end) return -1;
    *out = v;
    return 0;
}

int nsbox_text_read_long(const char *path, long *out)
{
    char buf[64];
    if (nsbox_text_read(path, buf, sizeof buf) < 0) return -1;
    if (nsbox_text_parse_long(buf, out) < 0) {
        errno = EINVAL;
        return -1;
    }
    return 0;
}
