/* Small texts: appending to a fixed buffer, reading a small procfs or sysfs file whole, and the
 * one-number files of /proc/sys. Shared by the checks of `nsbox info` and the diagnosis of a
 * failed clone (sandbox/diagnose.c), which both read the kernel's switches. */
#ifndef NSBOX_TEXT_H
#define NSBOX_TEXT_H

#include <stddef.h>
#include <sys/types.h>

/* Append to a fixed-size string; what does not fit is cut (report text may be). */
void nsbox_text_appendf(char *dst, size_t n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The symbolic name of err ("EPERM"), "error" when it has none. */
const char *nsbox_text_errname(int err);

/* Read a small text file (procfs, sysfs) whole into buf, NUL-terminated. The bytes read, or -1
 * with errno. */
ssize_t nsbox_text_read(const char *path, char *buf, size_t n);

/* A sysctl file's text: one decimal integer, surrounding whitespace allowed. 0 or -1. */
int nsbox_text_parse_long(const char *content, long *out);

/* The number in the file at path (a sysctl): 0, or -1 with errno (EINVAL when it is none). */
int nsbox_text_read_long(const char *path, long *out);

#endif
