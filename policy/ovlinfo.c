/* An overlayfs mount's line of mountinfo: see ovlinfo.h. */
#include "ovlinfo.h"
#include "mntescape.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *nsbox_ovlinfo_find(char *table, uint64_t mount_id)
{
    for (char *line = table; line && *line;) {
        char *nl = strchr(line, '\n');
        char *end;
        errno = 0;
        unsigned long long id = strtoull(line, &end, 10);
        if (errno == 0 && end != line && *end == ' ' && id == mount_id) {
            if (nl)
                *nl = '\0';
            return line;
        }
        line = nl ? nl + 1 : NULL;
    }
    return NULL;
}

/* The next field of s (separated by one character sep), NUL-terminated in place; NULL when
 * there is none. */
static char *next_field(char **s, char sep)
{
    if (!*s)
        return NULL;
    char *f = *s, *end = strchr(f, sep);
    if (end) {
        *end = '\0';
        *s = end + 1;
    } else {
        *s = NULL;
    }
    return f;
}

/* The kernel's \ooo escapes undone in place; -1 for a control character, escaped (a NUL
 * included) or left as it is: a path or option of the overlay's that nsbox-oci mounts again. */
static int unescape(char *s)
{
    size_t len = strlen(s);
    return nsbox_mntescape_decode(s, len, s, len + 1, true);
}

/* A layer's path (lowerdir+) or lowerdir's list of them, top first; "::" starts data-only
 * layers, counted. */
static int add_lowers(struct nsbox_ovlinfo *o, char *list, bool split, struct nsbox_err *e)
{
    bool data = false;
    char *s = list;
    while (s) {
        char *p = s;
        if (split)
            p = next_field(&s, ':');
        else
            s = NULL;
        if (!*p) {
            /* "::": what follows is data-only; an empty path elsewhere is no layer */
            if (data || !s || !*s || o->n_lower == 0)
                return nsbox_err_invalid(e, "overlay: an empty lowerdir path");
            data = true;
            continue;
        }
        if (data) {
            o->n_data++;
            continue;
        }
        if (o->n_lower >= NSBOX_OVLINFO_LAYERS_MAX)
            return nsbox_err_invalid(e, "overlay: more than %d lower layers",
                                     NSBOX_OVLINFO_LAYERS_MAX);
        o->lower[o->n_lower++] = p;
    }
    return 0;
}

static bool is_on(const char *v)
{
    return v && !strcmp(v, "on");
}

/* One of the filesystem's options (key, value or NULL). */
static int super_option(struct nsbox_ovlinfo *o, const char *key, char *v, struct nsbox_err *e)
{
    bool path_key = !strcmp(key, "lowerdir") || !strcmp(key, "lowerdir+") ||
                    !strcmp(key, "datadir+") || !strcmp(key, "upperdir") || !strcmp(key, "workdir");
    if (path_key && (!v || !*v))
        return nsbox_err_invalid(e, "overlay: %s without a path", key);
    if (!strcmp(key, "ro"))
        o->read_only = true;
    else if (!strcmp(key, "lowerdir"))
        return add_lowers(o, v, true, e);
    else if (!strcmp(key, "lowerdir+"))
        return add_lowers(o, v, false, e);
    else if (!strcmp(key, "datadir+"))
        o->n_data++;
    else if (!strcmp(key, "upperdir"))
        o->upper = v;
    else if (!strcmp(key, "workdir"))
        o->work = v;
    else if (!strcmp(key, "redirect_dir"))
        o->redirect_dir = v;
    else if (!strcmp(key, "index"))
        o->index = is_on(v), o->index_shown = true;
    else if (!strcmp(key, "nfs_export"))
        o->nfs_export = is_on(v), o->nfs_export_shown = true;
    else if (!strcmp(key, "metacopy"))
        o->metacopy = is_on(v), o->metacopy_shown = true;
    else if (!strcmp(key, "userxattr"))
        o->userxattr = true;
    else if (!strcmp(key, "volatile"))
        o->volatile_ = true;
    return 0; /* the rest (xino, uuid, verity, ...) are the kernel's to choose again */
}

int nsbox_ovlinfo_parse(char *line, struct nsbox_ovlinfo *o, struct nsbox_err *e)
{
    memset(o, 0, sizeof *o);
    char *s = line, *f[6];
    for (int i = 0; i < 6; i++)
        if (!(f[i] = next_field(&s, ' ')) || !*f[i])
            return nsbox_err_invalid(e, "mountinfo: a line of fewer than 10 fields");
    char *end;
    errno = 0;
    o->mount_id = strtoull(f[0], &end, 10);
    if (errno || *end || f[0][0] == '-')
        return nsbox_err_invalid(e, "mountinfo: %s is no mount id", NSBOX_SHOW(f[0]));
    const char *sep;
    do /* the optional fields, up to "-" */
        sep = next_field(&s, ' ');
    while (sep && strcmp(sep, "-"));
    char *fstype = next_field(&s, ' '), *source = next_field(&s, ' '), *opts = s;
    if (!sep || !fstype || !source || !opts)
        return nsbox_err_invalid(e, "mountinfo: a line of fewer than 10 fields");
    if (unescape(f[3]) < 0 || unescape(f[4]) < 0 || unescape(fstype) < 0)
        return nsbox_err_invalid(e, "mountinfo: a control character in a path");
    o->root = f[3];
    o->mount_point = f[4];
    o->fstype = fstype;
    if (strcmp(fstype, "overlay"))
        return nsbox_err_invalid(e, "mountinfo: %s is a %s mount, not an overlay",
                                 NSBOX_SHOW(o->mount_point), NSBOX_SHOW(fstype));
    while (opts) {
        char *kv = next_field(&opts, ','), *eq = strchr(kv, '=');
        if (eq)
            *eq = '\0';
        if (unescape(kv) < 0 || (eq && unescape(eq + 1) < 0))
            return nsbox_err_invalid(e, "overlay: a control character in option %s",
                                     NSBOX_SHOW(kv));
        if (super_option(o, kv, eq ? eq + 1 : NULL, e) < 0)
            return -1;
    }
    return 0;
}

/* The length of path's first component. */
static size_t first_len(const char *path)
{
    return strcspn(path, "/");
}

void nsbox_ovlinfo_relative_from(struct nsbox_ovlinfo *o)
{
    o->from = NULL;
    const char *mp = o->mount_point;
    if (!o->upper || !o->work || o->upper[0] == '/' || o->work[0] == '/' || !mp || mp[0] != '/')
        return;
    /* mp is D/ID/LEAF: ID is the upper's and work's first component */
    const char *leaf = strrchr(mp, '/');
    if (!leaf || leaf == mp || !leaf[1])
        return;
    const char *id = leaf - 1;
    while (id > mp && *id != '/')
        id--;
    size_t id_len = (size_t)(leaf - id - 1), d_len = (size_t)(id - mp);
    if (!id_len || first_len(o->upper) != id_len || first_len(o->work) != id_len ||
        strncmp(o->upper, id + 1, id_len) || strncmp(o->work, id + 1, id_len) ||
        d_len + 2 > sizeof o->from_dir)
        return;
    snprintf(o->from_dir, sizeof o->from_dir, "%.*s", (int)(d_len ? d_len : 1), mp);
    o->from = o->from_dir;
}

/* Why path cannot be opened as the engine gave it: relative (to the directory the engine
 * mounted from, which the table does not say) where from is NULL, a "." or ".." component, a
 * backslash (overlayfs's own escape, which the two forms of lowerdir read differently), too
 * long. */
static const char *path_problem(const char *path, const char *from)
{
    if (path[0] != '/' && !from)
        return "is relative to the directory its engine mounted from, which the mount table "
               "does not say (Docker's form for layer paths longer than a page: an image of "
               "fewer layers)";
    if (strlen(path) >= PATH_MAX)
        return "is too long";
    if (strchr(path, '\\'))
        return "has a backslash";
    if (!path[strspn(path, "/")])
        return "is the root directory";
    for (const char *c = path; *c;) {
        while (*c == '/')
            c++;
        size_t len = strcspn(c, "/");
        if ((len == 1 && c[0] == '.') || (len == 2 && c[0] == '.' && c[1] == '.'))
            return "has a \".\" or \"..\" component";
        c += len;
    }
    return NULL;
}

int nsbox_ovlinfo_check(const struct nsbox_ovlinfo *o, struct nsbox_err *e)
{
    const char *why = NULL;
    if (o->read_only)
        why = "it is mounted read-only";
    else if (!o->upper || !o->work)
        why = "it has no upper directory";
    else if (!o->n_lower)
        why = "it has no lower layer";
    else if (o->n_data)
        why = "it has data-only layers (metacopy's), which nsbox-oci does not turn on";
    else if (o->userxattr)
        why = "its layers are marked with user.overlay.* attributes (userxattr), an engine "
              "without root's";
    else if (o->index || o->nfs_export)
        why = "it has index=on, and the kernel lends an upper directory to one such overlay at "
              "a time (EBUSY): the engine's overlays need index=off, which Docker gives";
    if (why)
        return nsbox_err_set(e, NSBOX_E_UNSUPPORTED, EINVAL, "%s", why);
    for (size_t i = 0; i < o->n_lower + 2; i++) {
        size_t k = o->n_lower;
        const char *what = i < k ? "lowerdir" : i == k ? "upperdir" : "workdir";
        const char *path = i < k ? o->lower[i] : i == k ? o->upper : o->work;
        if ((why = path_problem(path, o->from)))
            return nsbox_err_set(e, NSBOX_E_UNSUPPORTED, EINVAL, "its %s %s %s", what, path, why);
    }
    return 0;
}

/* The next component of *p (slashes skipped): its start and length; 0 at the end. */
static size_t component(const char **p, const char **start)
{
    while (**p == '/')
        (*p)++;
    *start = *p;
    size_t len = strcspn(*p, "/");
    *p += len;
    return len;
}

int nsbox_ovlinfo_upper_base(const struct nsbox_ovlinfo *o, char *base, size_t n,
                             const char **upper_rel, const char **work_rel, struct nsbox_err *e)
{
    const char *u = o->upper, *w = o->work, *us, *ws;
    const char *u_end = u; /* the end of the last common component in upper */
    for (;;) {
        size_t ul = component(&u, &us), wl = component(&w, &ws);
        if (!ul || !wl || ul != wl || memcmp(us, ws, ul)) {
            if (!ul || !wl)
                return nsbox_err_set(e, NSBOX_E_UNSUPPORTED, EINVAL,
                                     "its upperdir and workdir are one inside the other");
            *upper_rel = us;
            *work_rel = ws;
            break;
        }
        u_end = u;
    }
    size_t len = (size_t)(u_end - o->upper);
    if (len + 2 > n)
        return nsbox_err_invalid(e, "its upperdir %s is too long", o->upper);
    if (len == 0)
        snprintf(base, n, "%s", o->upper[0] == '/' ? "/" : ".");
    else
        snprintf(base, n, "%.*s", (int)len, o->upper);
    return 0;
}

int nsbox_ovlinfo_split_layer(const char *path, char *dir, size_t n, const char **rest,
                              struct nsbox_err *e)
{
    const char *starts[2] = {NULL, NULL}, *p = path, *s;
    size_t len;
    while ((len = component(&p, &s)) > 0) {
        starts[0] = starts[1];
        starts[1] = s;
    }
    const char *r = starts[0] ? starts[0] : starts[1];
    if (!r || path[0] != '/')
        return nsbox_err_invalid(e, "a layer's path %s: not an absolute path to a directory", path);
    size_t dlen = (size_t)(r - path);
    while (dlen > 1 && path[dlen - 1] == '/')
        dlen--;
    if (dlen + 1 > n)
        return nsbox_err_invalid(e, "a layer's path %s: too long", path);
    snprintf(dir, n, "%.*s", (int)dlen, path);
    *rest = r;
    return 0;
}
