/* The ISA-L release a library file is (policy/isalver.h). */
#include "isalver.h"

#include <stdio.h>
#include <string.h>

bool nsbox_isalver_matches(const char *path, int major, int minor)
{
    if (!path || major < 0 || minor < 0)
        return false;
    const char *slash = strrchr(path, '/');
    const char *name = slash ? slash + 1 : path;
    char want[64];
    snprintf(want, sizeof want, "libisal.so.%d.0.%d", major, minor);
    return strcmp(name, want) == 0;
}
