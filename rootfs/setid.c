/* The writable root's set-id and file-capability programs, sealed read-only (setid.h). */
#define _GNU_SOURCE
#include "setid.h"
#include "cleanup.h"
#include "util.h"
#include "grow.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/magic.h>
#include <linux/mount.h>
#include <linux/openat2.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/xattr.h>
#include <unistd.h>

struct walk {
    const struct nsbox_sys *sys;
    size_t sealed;
    char path[PATH_MAX]; /* the directory being read, "/a/b", for messages */
    size_t len;
    int cwd;   /* the directory that is the working one */
    dev_t dev; /* the filesystem of the directory being read */
    bool hold; /* the directories above each sealed entry noted (nsbox_setid_seal_shared) */
    unsigned lost; /* directories entered whose names did not fit in path */
    char *held;    /* those directories' paths, "a/b\0a/b/c\0", in the walk's order */
    size_t held_len, held_cap;
};

/* The directory being read noted as one to hold in place, unless it is the root. A directory
 * of several programs is noted again for each: hold_dirs holds it once, as it does a path
 * shared with the one before. */
static int note_held(struct walk *w, struct nsbox_err *e)
{
    if (!w->len)
        return 0;
    if (w->lost)
        return nsbox_err_set(e, NSBOX_E_UNSUPPORTED, ENAMETOOLONG,
                             "root: a set-id program's directory %.*s/... has a path longer "
                             "than %zu bytes, which cannot be held in place; make the volume "
                             "read-only (its \"ro\")",
                             (int)w->len, w->path, sizeof w->path);
    size_t n = w->len - 1; /* without its leading '/' */
    while (w->held_cap <= w->held_len + n)
        if (nsbox_grow(&w->held, &w->held_cap, w->held_cap, 1, 256, 0) < 0)
            return nsbox_err_set(e, NSBOX_E_NOMEM, ENOMEM, "out of memory");
    memcpy(w->held + w->held_len, w->path + 1, n);
    w->held[w->held_len + n] = '\0';
    w->held_len += n + 1;
    return 0;
}

/* Whether running the file (name in dfd) gives more than its runner has: set-user-ID,
 * set-group-ID (with group execute: without it the bit means mandatory locking), a file
 * capability. */
static bool privileged(struct walk *w, int dfd, const char *name, const struct stat *st)
{
    if (!S_ISREG(st->st_mode))
        return false;
    if ((st->st_mode & S_ISUID) || (st->st_mode & (S_ISGID | S_IXGRP)) == (S_ISGID | S_IXGRP))
        return true;
    /* no *xattrat call before Linux 6.13: the name from its directory as the working one (a
     * third of the cost of a /proc/self/fd path), with no symlink followed (l*) */
    if (w->cwd != dfd) {
        if (fchdir(dfd) < 0)
            return true; /* cannot tell: sealed, which costs nothing it needs */
        w->cwd = dfd;
    }
    /* an attribute that is there but cannot be read is sealed too, as what cannot be told:
     * EOVERFLOW is a version 3 capability whose root id the idmap does not map (host id
     * 70000), which a shared mapping's writes keep as any other */
    return lgetxattr(name, "security.capability", NULL, 0) >= 0 ||
           (errno != ENODATA && errno != EOPNOTSUPP && errno != ENOENT);
}

/* A filesystem of the kernel's (proc, sysfs, cgroup, ...): no file on it is a program. */
static bool kernel_fs(int fd)
{
    static const unsigned long types[] = {
        PROC_SUPER_MAGIC,   SYSFS_MAGIC,   CGROUP_SUPER_MAGIC, CGROUP2_SUPER_MAGIC,
        DEVPTS_SUPER_MAGIC, DEBUGFS_MAGIC, TRACEFS_MAGIC,      SECURITYFS_MAGIC,
        BPF_FS_MAGIC,       NSFS_MAGIC,    EFIVARFS_MAGIC,
    };
    struct statfs sf;
    if (fstatfs(fd, &sf) < 0)
        return false;
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        if ((unsigned long)sf.f_type == types[i])
            return true;
    return false;
}

static int fail(struct walk *w, const char *name, const char *what, struct nsbox_err *e)
{
    return nsbox_err_sys(e, "root: %s %.*s/%s", what, (int)w->len, w->path, name);
}

/* The file name in dfd onto itself, read-only; with whole, the directory name, with what is
 * mounted below it. The clone's mode is checked again: the walk saw a name, the bind is of
 * whatever the name is now. */
static int seal(struct walk *w, int dfd, const char *name, bool whole, struct nsbox_err *e)
{
    if (w->sealed == NSBOX_SETID_FILES_MAX)
        return nsbox_err_set(e, NSBOX_E_UNSUPPORTED, E2BIG,
                             "root: more than %d set-id or file-capability programs in the "
                             "tree; a writable root or idmapped volume binds each read-only; "
                             "make it read-only (root.readonly: true, or the volume's \"ro\")",
                             NSBOX_SETID_FILES_MAX);
    cleanup_close int m =
        w->sys->open_tree(dfd, name, AT_SYMLINK_NOFOLLOW | (whole ? AT_RECURSIVE : 0));
    if (m < 0)
        return fail(w, name, "cannot bind", e);
    struct stat st;
    if (fstat(m, &st) < 0)
        return fail(w, name, "cannot stat", e);
    if (whole ? !S_ISDIR(st.st_mode) : !privileged(w, dfd, name, &st))
        return 0;
    cleanup_close int t = openat(dfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
    /* the name must still be the file bound: renamed in between (by another process writing
     * the tree), the program would stay writable where it went, and the read-only bind cover
     * whatever took its name */
    struct stat ts;
    if (t < 0 || fstat(t, &ts) < 0)
        return fail(w, name, "cannot make read-only", e);
    if (ts.st_dev != st.st_dev || ts.st_ino != st.st_ino)
        return nsbox_err_set(e, NSBOX_E_SYS, EAGAIN,
                             "root: %.*s/%s changed while it was sealed (another process is "
                             "renaming in the tree): create the container again",
                             (int)w->len, w->path, name);
    if (w->sys->mount_setattr_fd(m, whole, MOUNT_ATTR_RDONLY, 0) < 0 ||
        w->sys->move_mount_to_fd(m, t) < 0)
        return fail(w, name, "cannot make read-only", e);
    w->sealed++;
    return w->hold ? note_held(w, e) : 0;
}

static int walk_dir(struct walk *w, int dfd, unsigned depth, struct nsbox_err *e);

/* The entry name of the directory dfd. */
static int walk_entry(struct walk *w, int dfd, const char *name, unsigned char type, unsigned depth,
                      struct nsbox_err *e)
{
    struct stat st;
    if (type == DT_UNKNOWN) {
        if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
            return errno == ENOENT ? 0 : fail(w, name, "cannot stat", e);
        type = S_ISDIR(st.st_mode) ? DT_DIR : S_ISREG(st.st_mode) ? DT_REG : DT_LNK;
    }
    if (type == DT_REG) {
        if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
            return errno == ENOENT ? 0 : fail(w, name, "cannot stat", e);
        return privileged(w, dfd, name, &st) ? seal(w, dfd, name, false, e) : 0;
    }
    if (type != DT_DIR)
        return 0;
    if (depth == NSBOX_SETID_DEPTH_MAX)
        return nsbox_err_set(e, NSBOX_E_UNSUPPORTED, ELOOP,
                             "root: %.*s/%s is deeper than %d directories; a writable root or "
                             "idmapped volume is walked whole for its set-id programs; make it "
                             "read-only (root.readonly: true, or the volume's \"ro\")",
                             (int)w->len, w->path, name, NSBOX_SETID_DEPTH_MAX);
    int sub = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    /* EACCES: a directory of an id the idmap does not map, which the walk cannot list, but
     * which the container's processes may pass through by name where it lets others search it
     * (mode 0711): a set-id program of host root's inside would be theirs to rewrite (through
     * a shared mapping, on the host's disk). What the walk cannot see is sealed whole. */
    if (sub < 0 && errno == EACCES)
        return seal(w, dfd, name, true, e);
    if (sub < 0)
        return errno == ENOENT ? 0 : fail(w, name, "cannot read", e);
    /* A filesystem mounted below the bundle's root came with it, idmapped and writable as
     * the rest: walked too, but for the kernel's own, which hold no program and whose walk
     * could be endless (a host's /proc) */
    if (fstat(sub, &st) < 0) {
        close(sub);
        return fail(w, name, "cannot stat", e);
    }
    if (st.st_dev != w->dev && kernel_fs(sub)) {
        close(sub);
        return 0;
    }
    dev_t dev = w->dev;
    w->dev = st.st_dev;
    size_t len = w->len, nl = strlen(name);
    bool fits = len + 1 + nl < sizeof w->path;
    if (fits) {
        w->path[len] = '/';
        memcpy(w->path + len + 1, name, nl);
        w->len = len + 1 + nl;
    } else {
        w->lost++;
    }
    int r = walk_dir(w, sub, depth + 1, e); /* sub is the walk's */
    w->len = len;
    w->dev = dev;
    w->lost -= !fits;
    return r;
}

/* Every entry of the directory dfd (taken over, closed here). */
static int walk_dir(struct walk *w, int dfd, unsigned depth, struct nsbox_err *e)
{
    DIR *d = fdopendir(dfd);
    if (!d) {
        close(dfd);
        return nsbox_err_sys(e, "root: cannot read %.*s/", (int)w->len, w->path);
    }
    int r = 0;
    struct dirent *de;
    errno = 0;
    while (r == 0 && (de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        r = walk_entry(w, dirfd(d), de->d_name, de->d_type, depth, e);
        errno = 0;
    }
    if (r == 0 && errno)
        r = nsbox_err_sys(e, "root: cannot read %.*s/", (int)w->len, w->path);
    if (w->cwd == dirfd(d))
        w->cwd = -1; /* its number may be the next directory's */
    closedir(d);
    return r;
}

static int seal_walk(struct walk *w, int rootfd, size_t *sealed, struct nsbox_err *e)
{
    *sealed = 0;
    int fd = openat(rootfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return nsbox_err_sys(e, "root: cannot read /");
    struct stat st;
    if (fstat(fd, &st) < 0) {
        close(fd);
        return nsbox_err_sys(e, "root: cannot stat /");
    }
    w->dev = st.st_dev;
    int r = walk_dir(w, fd, 0, e);
    *sealed = w->sealed;
    if (fchdir(rootfd) < 0 && r == 0) /* the root is the working directory again */
        r = nsbox_err_sys(e, "rootfs: enter the new root");
    return r;
}

int nsbox_setid_seal(const struct nsbox_sys *sys, int rootfd, size_t *sealed, struct nsbox_err *e)
{
    struct walk w = {.sys = sys, .cwd = -1};
    return seal_walk(&w, rootfd, sealed, e);
}

/* The directory rel (n bytes of it) bound onto itself: a mount point of the container's
 * namespace, which its processes cannot rename or remove (EBUSY). */
static int hold_one(struct walk *w, int rootfd, const char *rel, size_t n, struct nsbox_err *e)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%.*s", (int)n, rel);
    cleanup_close int t = nsbox_open_dir(rootfd, path, 0);
    if (t < 0 && (errno == ENOENT || errno == ENOTDIR || errno == ELOOP || errno == EXDEV))
        return nsbox_err_set(e, NSBOX_E_SYS, EAGAIN,
                             "root: /%s changed while it was sealed (another process is "
                             "renaming in the tree): create the container again",
                             path);
    cleanup_close int m = t < 0 ? -1 : w->sys->open_tree(t, "", AT_EMPTY_PATH);
    if (m < 0 || w->sys->move_mount_to_fd(m, t) < 0)
        return nsbox_err_sys(e, "root: cannot hold /%s in place", path);
    return 0;
}

/* Every directory noted held in place, under a recursive clone of the tree taken before
 * them, with its seals, put over the tree's root: what the container sees is that clone (a
 * directory's bind alone would show it without the seals below it), and the directories'
 * binds, unseen below it, are mount points of its namespace all the same. In the walk's
 * order, a directory shared with the path before was held with it. */
static int hold_dirs(struct walk *w, int rootfd, struct nsbox_err *e)
{
    cleanup_close int top = w->sys->open_tree(rootfd, "", AT_EMPTY_PATH | AT_RECURSIVE);
    if (top < 0)
        return nsbox_err_sys(e, "root: cannot bind /");
    const char *prev = "";
    for (size_t off = 0; off < w->held_len; off += strlen(w->held + off) + 1) {
        const char *p = w->held + off;
        for (size_t i = 1;; i++) {
            if (p[i] != '/' && p[i] != '\0')
                continue;
            bool done = !strncmp(prev, p, i) && (prev[i] == '/' || prev[i] == '\0');
            if (!done && hold_one(w, rootfd, p, i, e) < 0)
                return -1;
            if (!p[i])
                break;
        }
        prev = p;
    }
    if (w->sys->move_mount_to_fd(top, rootfd) < 0)
        return nsbox_err_sys(e, "root: cannot bind / over its directories held in place");
    return 0;
}

int nsbox_setid_seal_shared(const struct nsbox_sys *sys, int rootfd, size_t *sealed,
                            struct nsbox_err *e)
{
    struct walk w = {.sys = sys, .cwd = -1, .hold = true};
    int r = seal_walk(&w, rootfd, sealed, e);
    if (r == 0 && w.held_len)
        r = hold_dirs(&w, rootfd, e);
    free(w.held);
    return r;
}

void nsbox_setid_list_free(struct nsbox_setid_list *l)
{
    for (size_t i = 0; l && i < l->n; i++)
        free(l->c[i].path);
    if (l)
        free(l->c);
    free(l);
}

/* The candidate c's directory in the merged root (its name in *name), or -1: errno ENOENT
 * when the path is not there as a path of directories (ENOTDIR, ELOOP: a symlink on the way). */
static int cand_parent(struct walk *w, int rootfd, const char *path, const char **name)
{
    const char *slash = strrchr(path, '/');
    *name = slash ? slash + 1 : path;
    size_t n = slash ? (size_t)(slash - path) : 0;
    if (n >= sizeof w->path - 1)
        return errno = ENAMETOOLONG, -1;
    w->path[0] = '/';
    memcpy(w->path + 1, path, n);
    w->path[n + 1] = 0;
    w->len = n ? n + 1 : 0;
    int fd = nsbox_open_dir(rootfd, n ? w->path + 1 : ".", RESOLVE_NO_XDEV);
    if (fd < 0 && (errno == ENOTDIR || errno == ELOOP))
        errno = ENOENT;
    return fd;
}

/* One candidate; *whole set to it when it is a directory sealed whole. 0, -1 with e, 1. */
static int seal_cand(struct walk *w, int rootfd, const struct nsbox_setid_cand *c,
                     const char **whole, struct nsbox_err *e)
{
    const char *name;
    int pfd = cand_parent(w, rootfd, c->path, &name);
    if (pfd < 0)
        return errno == ENOENT ? 0 : 1;
    struct stat st;
    int r = 0;
    if (c->kind == NSBOX_SETIDCAND_DIR) {
        int fd = openat(pfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd >= 0)
            close(fd);
        else if (errno == EACCES) {
            size_t before = w->sealed;
            r = seal(w, pfd, name, true, e);
            if (r == 0 && w->sealed > before)
                *whole = c->path;
        } else if (errno != ENOENT && errno != ENOTDIR && errno != ELOOP)
            r = 1;
    } else if (fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        r = errno == ENOENT ? 0 : 1;
    else if (privileged(w, pfd, name, &st))
        r = seal(w, pfd, name, false, e);
    w->cwd = -1; /* pfd's number may be the next one's */
    close(pfd);
    return r;
}

int nsbox_setid_seal_listed(const struct nsbox_sys *sys, int rootfd,
                            const struct nsbox_setid_list *l, size_t *sealed, struct nsbox_err *e)
{
    struct walk w = {.sys = sys, .cwd = -1};
    const char *whole = NULL;
    int r = 0;
    for (size_t i = 0; r == 0 && i < l->n; i++)
        if (!whole || !nsbox_setidcand_below(whole, l->c[i].path))
            r = seal_cand(&w, rootfd, &l->c[i], &whole, e);
    *sealed = w.sealed;
    if (fchdir(rootfd) < 0 && r == 0)
        r = nsbox_err_sys(e, "rootfs: enter the new root");
    return r;
}
