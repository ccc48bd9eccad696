/* Docker's named volumes told by their paths: see enginevol.h. */
#include "enginevol.h"
#include "safename.h"

#include <stdio.h>
#include <string.h>

/* A name as Docker makes a container's layer id or allows a volume's, len bytes of s. */
static bool good_name(const char *s, size_t len)
{
    return len <= NAME_MAX && nsbox_safename_valid(s, len);
}

/* Absolute, no empty, "." or ".." component, no trailing '/', no control character: a path
 * whose text says where it leads (symlinks aside, which the caller's open refuses). */
static bool clean_path(const char *p)
{
    if (p[0] != '/' || strlen(p) >= PATH_MAX)
        return false;
    for (const char *c = p + 1;;) {
        size_t len = strcspn(c, "/");
        if (!len || (len == 1 && c[0] == '.') || (len == 2 && c[0] == '.' && c[1] == '.'))
            return false;
        for (size_t i = 0; i < len; i++)
            if ((unsigned char)c[i] < 0x20 || c[i] == 0x7f)
                return false;
        if (!c[len])
            return true;
        c += len + 1;
    }
}

/* The last component of p before its end end (p < end): its start, or NULL when p has none. */
static const char *last_component(const char *p, const char *end)
{
    const char *s = end;
    while (s > p && s[-1] != '/')
        s--;
    return s > p ? s : NULL;
}

/* Does p's text end at *end with "/<name>" (name given)? *end moves to the '/' before it. */
static bool ends_with(const char *p, const char **end, const char *name)
{
    const char *s = last_component(p, *end);
    size_t len = strlen(name);
    if (!s || (size_t)(*end - s) != len || strncmp(s, name, len))
        return false;
    *end = s - 1;
    return true;
}

/* Does p end at *end with "/<id>", id a good name? *end moves before it. */
static bool ends_with_id(const char *p, const char **end)
{
    const char *s = last_component(p, *end);
    if (!s || !good_name(s, (size_t)(*end - s)))
        return false;
    *end = s - 1;
    return true;
}

bool nsbox_enginevol_root(const char *root, struct nsbox_enginevol_root *out)
{
    if (!clean_path(root))
        return false;
    const char *end = root + strlen(root), *vfs = end, *ovl = end;
    /* <R>/vfs/dir/<id>, or <R>/overlay2/<id>/merged */
    bool is_vfs =
        ends_with_id(root, &vfs) && ends_with(root, &vfs, "dir") && ends_with(root, &vfs, "vfs");
    bool is_ovl = !is_vfs && ends_with(root, &ovl, "merged") && ends_with_id(root, &ovl) &&
                  ends_with(root, &ovl, "overlay2");
    const char *r_end = is_vfs ? vfs : ovl;
    if ((!is_vfs && !is_ovl) || r_end <= root)
        return false; /* <R> is "/" (or nothing): no engine's data root */
    size_t r_len = (size_t)(r_end - root);
    snprintf(out->data_root, sizeof out->data_root, "%.*s", (int)r_len, root);
    snprintf(out->root_rel, sizeof out->root_rel, "%s", r_end + 1);
    return true;
}

bool nsbox_enginevol_volume(const struct nsbox_enginevol_root *r, const char *source, char *rel,
                            size_t n)
{
    static const char vols[] = "/volumes/", data[] = "/_data";
    size_t r_len = strlen(r->data_root);
    if (!clean_path(source) || strncmp(source, r->data_root, r_len) ||
        strncmp(source + r_len, vols, sizeof vols - 1))
        return false;
    const char *name = source + r_len + sizeof vols - 1;
    size_t len = strcspn(name, "/");
    if (!good_name(name, len) || strcmp(name + len, data))
        return false;
    return (size_t)snprintf(rel, n, "%s", source + r_len + 1) < n;
}
