/* Fuzz the search of a command along PATH (policy/pathsearch.c), whose name, PATH and cwd come
 * from a bundle's config.json or an exec request. Input: a byte giving the room of the buffer,
 * then name, PATH and cwd separated by NULs (a missing PATH: unset). What the callers rely on:
 * the search ends, within one place per PATH entry; a place given in the buffer fits it and
 * ends with "/" and the name; a place that is not in the buffer is the name itself, a path. */
#include "cstring.h"
#include "pathsearch.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    size_t room = (size_t)data[0] + 1;
    char *text = cstring_dup(data + 1, size - 1);
    char *buf = malloc(room);
    if (!buf)
        abort();
    const char *name = text, *end = text + size - 1;
    const char *path = name + strlen(name) < end ? name + strlen(name) + 1 : NULL;
    const char *cwd = path && path + strlen(path) < end ? path + strlen(path) + 1 : "/";
    size_t entries = 1, name_len = strlen(name), n = 0;
    for (const char *p = path ? path : NSBOX_PATHSEARCH_DEFAULT; *p; p++)
        entries += *p == ':';
    struct nsbox_pathsearch s;
    const char *out;
    int r;
    nsbox_pathsearch_init(&s, name, path, cwd);
    while ((r = nsbox_pathsearch_next(&s, buf, room, &out)) != 0) {
        if (++n > entries || (r > 0 && !out))
            abort();
        if (r < 0)
            continue;
        size_t len = strlen(out);
        if (out == buf ? len >= room || len <= name_len || out[len - name_len - 1] != '/' ||
                             strcmp(out + len - name_len, name) != 0
                       : out != name || !strchr(name, '/'))
            abort();
    }
    if (!name[0] && n)
        abort(); /* an empty name is nowhere */
    free(buf);
    free(text);
    return 0;
}
