/* Fuzz an overlay's line of mountinfo (policy/ovlinfo.c): the text is an engine's paths, as the
 * kernel shows them. Any byte string as a table (its line of mount 1 found) and as a line.
 * Besides crashes (ASan), it checks what rootfs/ovl_root.c relies on when a line is accepted:
 * no control character in a path, at most the kernel's number of layers, and, when it passes
 * the check, paths without "." or ".." (absolute unless they are read from a directory the
 * mount point names), and upperdir and workdir below their base. */
#include "cstring.h"
#include "nsbox.h"
#include "ovlinfo.h"

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void no_control(const char *s)
{
    for (; s && *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f)
            abort();
}

/* Does path have a "." or ".." component (which would lead a path opened below a directory
 * out of it, or somewhere its text does not say)? */
static bool dot_component(const char *path)
{
    for (const char *c = path; *c;) {
        size_t len = strcspn(c, "/");
        if ((len == 1 && c[0] == '.') || (len == 2 && c[0] == '.' && c[1] == '.'))
            return true;
        c += len;
        c += strspn(c, "/");
    }
    return false;
}

static void checked(const struct nsbox_ovlinfo *o)
{
    /* every layer, not only the first: each is opened */
    for (size_t i = 0; i < o->n_lower + 2; i++) {
        const char *p = i < o->n_lower ? o->lower[i] : i == o->n_lower ? o->upper : o->work;
        if (!p || (p[0] != '/' && !o->from) || dot_component(p) || strchr(p, '\\'))
            abort();
    }
    char base[PATH_MAX];
    const char *ur, *wr;
    struct nsbox_err e = {0};
    if (nsbox_ovlinfo_upper_base(o, base, sizeof base, &ur, &wr, &e) < 0) {
        if (!e.msg[0])
            abort();
        return;
    }
    if (!*ur || !*wr || *ur == '/' || *wr == '/' ||
        (strcmp(base, ".") && strncmp(o->upper, base, strlen(base))))
        abort();
    if (o->from && (o->from[0] != '/' || strncmp(o->mount_point, o->from, strlen(o->from))))
        abort();
    char dir[PATH_MAX];
    const char *rest;
    for (size_t i = 0; i < o->n_lower; i++) {
        if (o->lower[i][0] != '/')
            continue; /* opened below o->from as it is */
        if (nsbox_ovlinfo_split_layer(o->lower[i], dir, sizeof dir, &rest, &e) < 0 || !*rest ||
            *rest == '/' || dir[0] != '/')
            abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = cstring_dup(data, size);
    char *line = nsbox_ovlinfo_find(s, 1);
    if (!line)
        line = s;
    struct nsbox_ovlinfo *o = malloc(sizeof *o);
    struct nsbox_err e = {0};
    if (o && nsbox_ovlinfo_parse(line, o, &e) == 0) {
        if (o->n_lower > NSBOX_OVLINFO_LAYERS_MAX)
            abort();
        no_control(o->mount_point);
        no_control(o->upper);
        no_control(o->work);
        for (size_t i = 0; i < o->n_lower; i++)
            no_control(o->lower[i]);
        nsbox_ovlinfo_relative_from(o);
        if (nsbox_ovlinfo_check(o, &e) == 0)
            checked(o);
        else if (!e.msg[0])
            abort();
    } else if (o && !e.msg[0]) {
        abort();
    }
    free(o);
    free(s);
    return 0;
}
