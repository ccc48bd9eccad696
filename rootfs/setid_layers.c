/* An overlay's layers walked for the merged root's seal (setid_layers.h). */
#define _GNU_SOURCE
#include "setid_layers.h"
#include "cleanup.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/mount.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <unistd.h>

/* The attributes by which overlayfs shows a layer's entry elsewhere or with another's data. */
#define OVL_REDIRECT "trusted.overlay.redirect"
#define OVL_METACOPY "trusted.overlay.metacopy"
#define XATTR_CAPS "security.capability"
#define XATTR_ACL "system.posix_acl_access"

struct lwalk {
    struct nsbox_setid_list *l;
    char path[PATH_MAX]; /* the directory being read, relative, "" for the layer's root */
    size_t len;
    int cwd; /* the directory that is the working one, -1 none known */
    struct nsbox_err *why;
};

static int refuse(struct lwalk *w, const char *name, const char *what)
{
    return nsbox_err_set(w->why, NSBOX_E_UNSUPPORTED, errno ? errno : EINVAL,
                         "setid: layer entry %.*s%s%s: %s", (int)w->len, w->path, w->len ? "/" : "",
                         name, what);
}

static int add(struct lwalk *w, const char *name, enum nsbox_setidcand kind)
{
    struct nsbox_setid_list *l = w->l;
    if (l->n == NSBOX_SETID_LAYERS_MAX)
        return errno = E2BIG, refuse(w, name, "too many candidates");
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 64;
        struct nsbox_setid_cand *c = realloc(l->c, cap * sizeof *c);
        if (!c)
            return refuse(w, name, "out of memory");
        l->c = c;
        l->cap = cap;
    }
    char *p = malloc(w->len + 1 + strlen(name) + 1);
    if (!p)
        return refuse(w, name, "out of memory");
    if (w->len)
        strcpy(stpcpy(stpcpy(p, w->path), "/"), name);
    else
        strcpy(p, name);
    l->c[l->n++] = (struct nsbox_setid_cand){kind, p};
    return 0;
}

/* Has the entry (fd, or name in the working directory with fd -1) the attribute? Any answer
 * but "no" is yes: what cannot be told is a candidate, or no list. */
static bool has_attr(int fd, const char *name, const char *attr)
{
    ssize_t r = fd >= 0 ? fgetxattr(fd, attr, NULL, 0) : lgetxattr(name, attr, NULL, 0);
    return r >= 0 || (errno != ENODATA && errno != EOPNOTSUPP);
}

/* Does the attribute list of n bytes in names hold attr? */
static bool listed(const char *names, ssize_t n, const char *attr)
{
    for (ssize_t i = 0; i < n; i += (ssize_t)strlen(names + i) + 1)
        if (!strcmp(names + i, attr))
            return true;
    return false;
}

/* An entry's attributes, their names read once (fd, or name in the working directory dfd with
 * fd -1): *mark set when it has mark (a redirect or metacopy), *attr when it has attr (a
 * capability, an ACL). What cannot be told has both. */
static int attrs(struct lwalk *w, int fd, int dfd, const char *name, const char *mark,
                 const char *attr, bool *has_mark, bool *has_attr_)
{
    if (fd < 0 && w->cwd != dfd) {
        if (fchdir(dfd) < 0)
            return refuse(w, name, "cannot enter its directory");
        w->cwd = dfd;
    }
    char names[1024];
    ssize_t n =
        fd >= 0 ? flistxattr(fd, names, sizeof names) : llistxattr(name, names, sizeof names);
    if (n < 0 && errno == ERANGE) {
        *has_mark = has_attr(fd, name, mark);
        *has_attr_ = has_attr(fd, name, attr);
        return 0;
    }
    if (n < 0 && errno != EOPNOTSUPP)
        return refuse(w, name, "cannot list its attributes");
    *has_mark = listed(names, n, mark);
    *has_attr_ = listed(names, n, attr);
    return 0;
}

static int walk_dir(struct lwalk *w, int dfd, unsigned depth);

static int walk_entry(struct lwalk *w, int dfd, const char *name, unsigned char type,
                      unsigned depth)
{
    struct stat st;
    if (type != DT_REG && type != DT_DIR && type != DT_UNKNOWN)
        return 0; /* a symlink, a whiteout (a device), ...: never a program */
    if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return refuse(w, name, "cannot stat");
    if (S_ISREG(st.st_mode)) {
        bool metacopy, cap;
        if (attrs(w, -1, dfd, name, OVL_METACOPY, XATTR_CAPS, &metacopy, &cap) < 0)
            return -1;
        if (metacopy)
            return refuse(w, name, "a metacopy attribute");
        return nsbox_setidcand_of(st.st_mode, st.st_uid, st.st_gid, cap, false)
                   ? add(w, name, NSBOX_SETIDCAND_FILE)
                   : 0;
    }
    if (!S_ISDIR(st.st_mode))
        return 0;
    if (depth == NSBOX_SETID_DEPTH_MAX)
        return errno = ELOOP, refuse(w, name, "too deep");
    int sub = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (sub < 0)
        return refuse(w, name, "cannot read");
    bool redirect = false, acl = true;
    if (attrs(w, sub, -1, name, OVL_REDIRECT, XATTR_ACL, &redirect, &acl) < 0 || redirect) {
        close(sub);
        return redirect ? refuse(w, name, "a redirect attribute") : -1;
    }
    if (nsbox_setidcand_of(st.st_mode, st.st_uid, st.st_gid, false, acl) &&
        add(w, name, NSBOX_SETIDCAND_DIR) < 0) {
        close(sub);
        return -1;
    }
    size_t len = w->len, nl = strlen(name);
    if (len + 1 + nl >= sizeof w->path) {
        close(sub);
        return errno = ENAMETOOLONG, refuse(w, name, "path too long");
    }
    if (len)
        w->path[len++] = '/';
    memcpy(w->path + len, name, nl + 1);
    w->len = len + nl;
    int r = walk_dir(w, sub, depth + 1);
    w->len = len ? len - 1 : 0;
    w->path[w->len] = 0;
    return r;
}

/* Every entry of the directory dfd (taken over, closed here). */
static int walk_dir(struct lwalk *w, int dfd, unsigned depth)
{
    DIR *d = fdopendir(dfd);
    if (!d) {
        close(dfd);
        return refuse(w, "", "cannot read");
    }
    int r = 0;
    struct dirent *de;
    errno = 0;
    while (r == 0 && (de = readdir(d))) {
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
            r = walk_entry(w, dirfd(d), de->d_name, de->d_type, depth);
        errno = 0;
    }
    if (r == 0 && errno)
        r = refuse(w, "", "cannot read");
    if (w->cwd == dirfd(d))
        w->cwd = -1;
    closedir(d);
    return r;
}

/* One layer: a clone of its mount alone (open_tree without AT_RECURSIVE), so that a filesystem
 * mounted below it on the host, which the overlay does not see, is not walked instead. */
static int walk_layer(struct lwalk *w, int dir)
{
    cleanup_close int m =
        (int)syscall(SYS_open_tree, dir, "", AT_EMPTY_PATH | OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
    if (m < 0)
        return refuse(w, "", "cannot clone the layer's mount");
    int fd = openat(m, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return refuse(w, "", "cannot read the layer");
    if (has_attr(fd, NULL, OVL_REDIRECT)) {
        close(fd);
        return refuse(w, "", "a redirect attribute");
    }
    w->len = 0;
    w->path[0] = 0;
    return walk_dir(w, fd, 0);
}

static int cand_cmp(const void *a, const void *b)
{
    const struct nsbox_setid_cand *x = a, *y = b;
    int r = nsbox_setidcand_cmp(x->path, y->path);
    return r ? r : (int)x->kind - (int)y->kind;
}

int nsbox_setid_layers_list(const int *dirs, size_t n, struct nsbox_setid_list **out,
                            struct nsbox_err *why)
{
    *out = NULL;
    struct lwalk w = {.l = calloc(1, sizeof *w.l), .cwd = -1, .why = why};
    cleanup_close int here = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
    int r = !w.l       ? (errno = ENOMEM, refuse(&w, "", "out of memory"))
            : here < 0 ? refuse(&w, "", "cannot open the working directory to return to")
                       : 0;
    /* from the last: an overlay's upper directory, given last, is where a redirect that ends
     * the list is likeliest (an engine's container renamed a directory), best found first */
    for (size_t i = n; r == 0 && i-- > 0;)
        r = walk_layer(&w, dirs[i]);
    if (here >= 0 && fchdir(here) < 0 && r == 0)
        r = refuse(&w, "", "cannot return to the working directory");
    if (r < 0) {
        nsbox_err_wrap(why, "the layers' walk for the set-id seal");
        nsbox_setid_list_free(w.l);
        return 1;
    }
    if (w.l->n > 1) /* none: no array at all, which qsort may not be given */
        qsort(w.l->c, w.l->n, sizeof *w.l->c, cand_cmp);
    /* a path in several layers once: each is a bind at the seal */
    size_t k = 0;
    for (size_t i = 0; i < w.l->n; i++) {
        if (k && !cand_cmp(&w.l->c[k - 1], &w.l->c[i]))
            free(w.l->c[i].path);
        else
            w.l->c[k++] = w.l->c[i];
    }
    w.l->n = k;
    *out = w.l;
    return 0;
}
