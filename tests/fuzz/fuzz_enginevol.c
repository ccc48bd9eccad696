/* Fuzz the recognition of Docker's named volumes (policy/enginevol.c): the root path and a
 * mount's source are config.json's. The input is "<root>\n<source>". Besides crashes (ASan),
 * it checks what oci/ocivolumes.c relies on when a path is taken: the data root is the root's
 * own prefix, not "/", and the relative paths it opens below it have no "." or ".." component
 * and say exactly the rest of the path. */
#include "cstring.h"
#include "enginevol.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Does rel have an empty, "." or ".." component, or start with '/'? */
static bool bad_rel(const char *rel)
{
    for (const char *c = rel;;) {
        size_t len = strcspn(c, "/");
        if (!len || (len == 1 && c[0] == '.') || (len == 2 && c[0] == '.' && c[1] == '.'))
            return true;
        if (!c[len])
            return false;
        c += len + 1;
    }
}

/* path is r's data root, '/', rel: nothing cut, nothing added. */
static void whole(const struct nsbox_enginevol_root *r, const char *path, const char *rel)
{
    size_t n = strlen(r->data_root);
    if (strncmp(path, r->data_root, n) || path[n] != '/' || strcmp(path + n + 1, rel) ||
        bad_rel(rel))
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = cstring_dup(data, size);
    char *source = strchr(s, '\n');
    if (source)
        *source++ = '\0';
    struct nsbox_enginevol_root *r = malloc(sizeof *r);
    if (r && nsbox_enginevol_root(s, r)) {
        if (r->data_root[0] != '/' || !strcmp(r->data_root, "/"))
            abort();
        whole(r, s, r->root_rel);
        char rel[PATH_MAX];
        if (source && nsbox_enginevol_volume(r, source, rel, sizeof rel)) {
            whole(r, source, rel);
            if (strncmp(rel, "volumes/", 8) || strcmp(rel + strlen(rel) - 6, "/_data"))
                abort();
        }
    }
    free(r);
    free(s);
    return 0;
}
