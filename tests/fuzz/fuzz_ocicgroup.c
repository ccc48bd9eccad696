/* Fuzz linux.cgroupsPath's resolution (policy/ocicgroup.c): any byte string, in both forms.
 * Besides crashes (ASan), it checks what the cgroup layer relies on when one is accepted: a
 * normalized path ('/' before each component, none doubled or at the end), no "." or ".."
 * component, no control character, within the bounds. */
#include "cstring.h"
#include "nsbox.h"
#include "ocicgroup.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(const struct nsbox_ocicgroup_path *p)
{
    size_t len = strlen(p->path), depth = 0;
    if (len == 0 || len >= NSBOX_OCICGROUP_PATH_MAX || p->path[0] != '/' || p->path[len - 1] == '/')
        abort();
    for (const char *s = p->path; *s; s++) {
        if ((unsigned char)*s < 0x20 || *s == 0x7f)
            abort();
        if (*s != '/')
            continue;
        depth++;
        if (s[1] == '/' || (s[1] == '.' && (s[2] == '/' || !s[2])) ||
            (s[1] == '.' && s[2] == '.' && (s[3] == '/' || !s[3])))
            abort();
    }
    if (depth > NSBOX_OCICGROUP_DEPTH_MAX)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = cstring_dup(data, size);
    for (int systemd = 0; systemd < 2; systemd++) {
        struct nsbox_ocicgroup_path p;
        struct nsbox_err e = {0};
        if (nsbox_ocicgroup_parse(s, systemd, &p, &e) == 0) {
            if (s[0])
                check(&p);
        } else if (!e.msg[0]) {
            abort();
        }
    }
    free(s);
    return 0;
}
