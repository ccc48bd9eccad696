/* A name that is one path component and nothing more: [A-Za-z0-9][A-Za-z0-9_.-]*, the rule
 * Docker gives its names (a volume's, a container's) and nsbox its sandbox ids. Never empty, "."
 * or "..", never a '/', a control character or a name that starts like an option or a hidden
 * file; the length is the caller's to bound (a cgroup's "nsbox-<id>", NAME_MAX). Pure: unit
 * tested (tests/unit/test_safename.c). */
#ifndef NSBOX_SAFENAME_H
#define NSBOX_SAFENAME_H

#include <stdbool.h>
#include <stddef.h>

/* Are the len bytes of s such a name (len 0: no)? */
bool nsbox_safename_valid(const char *s, size_t len);

#endif
