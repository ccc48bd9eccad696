/* A field of the kernel's mount table (/proc/self/mountinfo) as it was before the kernel escaped
 * it: a space, tab, newline or backslash in a path or an option is written as \ooo (octal).
 * The readers of that table (ovlinfo.c; the cgroup code's in sandbox/) undo it here. */
#ifndef NSBOX_MNTESCAPE_H
#define NSBOX_MNTESCAPE_H

#include <stdbool.h>
#include <stddef.h>

/* The len bytes at s with each \ooo (000 to 377) undone, into out (n bytes, NUL-terminated);
 * out may be s itself (n > len), as a field never grows. With refuse_control, a control
 * character (below 0x20, or 0x7f), escaped or not, a NUL included, is refused: for a reader
 * whose fields are later used as paths or options that such a character would confuse. 0, or
 * -1 with errno EINVAL (a control character refused) or ENAMETOOLONG (out too small). */
int nsbox_mntescape_decode(const char *s, size_t len, char *out, size_t n, bool refuse_control);

#endif
