/* Safe path resolution inside a root: see safepath.h.
 *
 * Internal helpers return a non-negative fd or -errno; the public functions turn that into a
 * struct nsbox_err with a message that names the (sanitized) path.
 *
 * The fallback walker's safety argument, for reviewers: it only ever hands the kernel a single
 * component name that is neither "." nor "..", relative to a directory fd it already holds, with
 * O_NOFOLLOW. So the kernel never follows a symlink for it (the walker reads the link text and
 * resolves it itself, inside the root) and never walks `..` (the walker pops its own list of
 * resolved components and re-opens the parent from the root). A concurrent rename can therefore
 * make a lookup land elsewhere inside the root, or fail, but never outside it: there is no step
 * that goes up. */
#include "safepath.h"

#include "cleanup.h"
#include "shown.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

/* How often a lookup is retried when a rename raced it. openat2(RESOLVE_IN_ROOT) fails with
 * EAGAIN on `..` whenever any rename or mount happened anywhere on the system during the walk
 * (rename_lock is global), so a few retries are normal on a busy host; a sandbox renaming in a
 * tight loop can at worst make its own request fail, hence a bound. */
#define SP_RACE_RETRIES NSBOX_OPENAT2_RETRIES

#define SP_HOW_ALL (NSBOX_SP_NOFOLLOW_ANY | NSBOX_SP_NO_XDEV | NSBOX_SP_BENEATH)

/* ---- messages ------------------------------------------------------------------------------ */

/* Paths come from the sandbox or an image: they may hold newlines or terminal escape sequences
 * (C1's too, U+009B is CSI) that would forge log lines when main() prints the message, and may
 * be PATH_MAX bytes long: shown by policy/shown.h's rule, at most SP_DISP_MAX bytes of them. */
#define SP_DISP_MAX 160

static const char *sp_hint(int err)
{
    switch (err) {
    case ELOOP:
        return " (a symlink or /proc magic link was refused, or more than 40 were chained)";
    case EXDEV:
        return " (the path crosses a mount point or leaves the root)";
    case EAGAIN:
        return " (renames kept racing the lookup; try again)";
    }
    return "";
}

static int sp_fail(struct nsbox_err *e, int err, const char *what, const char *path)
{
    char d[SP_DISP_MAX + 8];
    nsbox_shown_copy(d, sizeof d, path, strlen(path), SP_DISP_MAX, 0);
    int code = err == ENOENT ? NSBOX_E_NOTFOUND : err == ENOMEM ? NSBOX_E_NOMEM : NSBOX_E_SYS;
    nsbox_err_set(e, code, err, "%s '%s' inside the root: %s%s", what, d, strerror(err),
                  sp_hint(err));
    errno = err;
    return -1;
}

/* ---- pure checks --------------------------------------------------------------------------- */

static int check_path(const char *path, size_t len, bool allow_empty, struct nsbox_err *e)
{
    if (!path) return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL, "path is NULL");
    if (len == 0 && !allow_empty) return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL, "path is empty");
    if (len >= PATH_MAX)
        return nsbox_err_set(e, NSBOX_E_INVALID, ENAMETOOLONG,
                             "path is %zu bytes long; the limit is %d", len, PATH_MAX - 1);
    /* A NUL inside the request would make the checked path and the one the kernel sees
     * differ: "a\0/../../etc" checks as one thing and opens another. */
    const char *nul = memchr(path, '\0', len);
    if (nul)
        return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL, "path contains a NUL byte at offset %zu",
                             (size_t)(nul - path));
    size_t start = 0;
    for (size_t i = 0; i <= len; i++) {
        if (i == len || path[i] == '/') {
            if (i - start > NAME_MAX)
                return nsbox_err_set(e, NSBOX_E_INVALID, ENAMETOOLONG,
                                     "path component at offset %zu is %zu bytes long; the limit "
                                     "is %d",
                                     start, i - start, NAME_MAX);
            start = i + 1;
        }
    }
    return 0;
}

int nsbox_sp_validate(const char *path, size_t len, struct nsbox_err *e)
{
    return check_path(path, len, false, e);
}

static bool is_dot(const char *c, size_t n)
{
    return n == 1 && c[0] == '.';
}

static bool is_dotdot(const char *c, size_t n)
{
    return n == 2 && c[0] == '.' && c[1] == '.';
}

/* The next component of the path from *p to end, past slashes and "." ones: its start and its
 * length (*n), with *p just past it; NULL when none is left. */
static const char *next_component(const char **p, const char *end, size_t *n)
{
    while (*p < end) {
        while (*p < end && **p == '/')
            (*p)++;
        const char *c = *p;
        while (*p < end && **p != '/')
            (*p)++;
        *n = (size_t)(*p - c);
        if (*n && !is_dot(c, *n))
            return c;
    }
    return NULL;
}

int nsbox_sp_normalize(const char *in, char *out, size_t n, struct nsbox_err *e)
{
    if (!in || !out || n == 0)
        return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL, "normalize: no input or output buffer");
    size_t len = strnlen(in, PATH_MAX);
    if (check_path(in, len, true, e) < 0) return -1;

    /* The result is never longer than the input (every output byte copies an input byte, or
     * is the "." of an empty result), so a PATH_MAX scratch buffer always suffices and out only
     * needs to hold the final result. */
    char buf[PATH_MAX];
    size_t o = 0;
    const char *p = in, *end = in + len, *c;
    size_t cl;
    while ((c = next_component(&p, end, &cl))) {
        if (is_dotdot(c, cl)) {
            /* Clamped at the root, as RESOLVE_IN_ROOT does: "/../x" is "x". */
            while (o > 0 && buf[o - 1] != '/')
                o--;
            if (o > 0) o--;
            continue;
        }
        if (o > 0) buf[o++] = '/';
        memcpy(buf + o, c, cl);
        o += cl;
    }
    if (o == 0) buf[o++] = '.';
    if (o + 1 > n)
        return nsbox_err_set(e, NSBOX_E_INVALID, ENAMETOOLONG,
                             "normalized path needs %zu bytes; the buffer has %zu", o + 1, n);
    memcpy(out, buf, o);
    out[o] = '\0';
    return (int)o;
}

/* ---- backend selection --------------------------------------------------------------------- */

static atomic_int sp_backend = NSBOX_SP_BACKEND_AUTO;
static atomic_int sp_openat2_state; /* 0 not probed, 1 works, -1 missing or blocked */

enum nsbox_sp_backend nsbox_sp_set_backend(enum nsbox_sp_backend b)
{
    if (b == NSBOX_SP_BACKEND_AUTO) atomic_store(&sp_openat2_state, 0);
    return (enum nsbox_sp_backend)atomic_exchange(&sp_backend, (int)b);
}

/* Whether openat2 reaches the kernel: a size below the first version of struct open_how makes
 * a kernel that has openat2 fail with EINVAL before it looks at the path. ENOSYS means no
 * openat2 (Linux < 5.6); EPERM is how seccomp profiles of container runtimes refuse syscalls
 * they do not know. A real open could not tell a blocked syscall from a denied file. */
static bool sp_openat2_probe(void)
{
    int saved = errno;
    struct open_how how;
    memset(&how, 0, sizeof how);
    long r = syscall(SYS_openat2, AT_FDCWD, "/", &how, (size_t)0);
    if (r >= 0)
        close((int)r);
    bool ok = r < 0 && errno == EINVAL;
    errno = saved;
    return ok;
}

bool nsbox_sp_have_openat2(void)
{
    int s = atomic_load(&sp_openat2_state);
    if (s == 0) {
        s = sp_openat2_probe() ? 1 : -1;
        atomic_store(&sp_openat2_state, s);
    }
    return s > 0;
}

static bool sp_use_walker(void)
{
    switch (atomic_load(&sp_backend)) {
    case NSBOX_SP_BACKEND_WALK:
        return true;
    case NSBOX_SP_BACKEND_OPENAT2:
        return false;
    default:
        return !nsbox_sp_have_openat2();
    }
}

/* ---- openat2 backend ----------------------------------------------------------------------- */

static int sp_openat2(int rootfd, const char *path, int flags, mode_t mode, unsigned how)
{
    struct open_how oh;
    memset(&oh, 0, sizeof oh);
    oh.flags = (uint64_t)(unsigned)(flags | O_CLOEXEC);
    oh.mode = mode;
    /* NO_MAGICLINKS: /proc/<pid>/root, /proc/<pid>/fd/N and friends jump to wherever the
     * kernel says, ignoring the root; a sandbox's /proc is full of them. */
    oh.resolve = RESOLVE_NO_MAGICLINKS;
    oh.resolve |= (how & NSBOX_SP_BENEATH) ? RESOLVE_BENEATH : RESOLVE_IN_ROOT;
    if (how & NSBOX_SP_NOFOLLOW_ANY) oh.resolve |= RESOLVE_NO_SYMLINKS;
    if (how & NSBOX_SP_NO_XDEV) oh.resolve |= RESOLVE_NO_XDEV;
    int fd = nsbox_openat2(rootfd, path, &oh);
    return fd >= 0 ? fd : -errno;
}

/* ---- fallback walker ----------------------------------------------------------------------- */

/* Mount identity of fd, for NO_XDEV: st_dev alone cannot see a bind mount of the same file
 * system, which is exactly how a directory from outside would be grafted in. */
static int sp_mnt_id(int fd, uint64_t *id)
{
    struct statx stx;
    if (statx(fd, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW, STATX_MNT_ID, &stx) == 0 &&
        (stx.stx_mask & STATX_MNT_ID)) {
        *id = stx.stx_mnt_id;
        return 0;
    }
    /* Linux < 5.8 (where this walker mostly runs): fdinfo has shown mnt_id since 3.15. */
    char p[64], buf[512];
    snprintf(p, sizeof p, "/proc/self/fdinfo/%d", fd);
    cleanup_close int ifd = open(p, O_RDONLY | O_CLOEXEC);
    if (ifd < 0) return -1;
    ssize_t n = read(ifd, buf, sizeof buf - 1);
    if (n <= 0) return -1;
    buf[n] = '\0';
    const char *m = strstr(buf, "mnt_id:");
    unsigned long long v;
    if (!m || sscanf(m, "mnt_id: %llu", &v) != 1) return -1;
    *id = v;
    return 0;
}

struct sp_walk {
    int rootfd;
    unsigned how;
    int cur;                 /* O_PATH fd of the directory named by resolved; owned */
    char resolved[PATH_MAX]; /* real directories from the root, "a/b"; "" is the root */
    size_t rlen;
    char rest[PATH_MAX]; /* what is left to resolve */
    int links;
    bool have_mnt;
    uint64_t root_mnt;
    dev_t root_dev;
};

static int sp_same_mount(struct sp_walk *w, int fd)
{
    if (!(w->how & NSBOX_SP_NO_XDEV)) return 0;
    uint64_t id;
    if (w->have_mnt && sp_mnt_id(fd, &id) == 0) return id == w->root_mnt ? 0 : -EXDEV;
    struct stat st;
    if (fstat(fd, &st) < 0) return -errno;
    return st.st_dev == w->root_dev ? 0 : -EXDEV;
}

static int sp_walk_to_root(struct sp_walk *w)
{
    int fd = openat(w->rootfd, ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return -errno;
    nsbox_closep(&w->cur);
    w->cur = fd;
    w->rlen = 0;
    w->resolved[0] = '\0';
    return 0;
}

/* Re-open the directory named by resolved, from the root, one real directory at a time. Every
 * component was a directory a moment ago; if one is not any more (O_DIRECTORY|O_NOFOLLOW refuses
 * a swapped-in symlink), the tree changed under us and the whole lookup restarts. */
static int sp_walk_reopen(struct sp_walk *w)
{
    char path[PATH_MAX];
    size_t len = w->rlen;
    memcpy(path, w->resolved, len + 1);
    int r = sp_walk_to_root(w); /* clears resolved: it is rebuilt from path below */
    if (r < 0) return r;
    size_t s = 0;
    while (s < len) {
        size_t n = 0;
        while (s + n < len && path[s + n] != '/')
            n++;
        path[s + n] = '\0';
        int fd = openat(w->cur, path + s, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) return -EAGAIN;
        r = sp_same_mount(w, fd);
        if (r < 0) {
            close(fd);
            return r;
        }
        nsbox_closep(&w->cur);
        w->cur = fd;
        if (s + n < len) path[s + n] = '/';
        s += n + 1;
    }
    memcpy(w->resolved, path, len + 1);
    w->rlen = len;
    return 0;
}

static int sp_walk_push(struct sp_walk *w, const char *name, size_t nl, int fd)
{
    size_t need = w->rlen + (w->rlen ? 1 : 0) + nl;
    if (need + 1 > sizeof w->resolved) {
        close(fd);
        return -ENAMETOOLONG;
    }
    if (w->rlen) w->resolved[w->rlen++] = '/';
    memcpy(w->resolved + w->rlen, name, nl);
    w->rlen += nl;
    w->resolved[w->rlen] = '\0';
    nsbox_closep(&w->cur);
    w->cur = fd;
    return 0;
}

static int sp_walk_pop(struct sp_walk *w)
{
    while (w->rlen > 0 && w->resolved[w->rlen - 1] != '/')
        w->rlen--;
    if (w->rlen > 0) w->rlen--;
    w->resolved[w->rlen] = '\0';
    return sp_walk_reopen(w);
}

/* linkfd: O_PATH|O_NOFOLLOW fd of a symlink met at w->rest[at]; the text after its name
 * ("" or starting with '/') is kept and the link's text is put in front of it. */
static int sp_walk_follow(struct sp_walk *w, int linkfd, size_t at)
{
    if (w->how & NSBOX_SP_NOFOLLOW_ANY) return -ELOOP;
    if (++w->links > NSBOX_SP_MAX_SYMLINKS) return -ELOOP;
    char target[PATH_MAX];
    ssize_t n = readlinkat(linkfd, "", target, sizeof target);
    if (n < 0) return -errno;
    if ((size_t)n >= sizeof target) return -ENAMETOOLONG;
    if (n == 0) return -ENOENT; /* as the kernel: an empty link names nothing */
    target[n] = '\0';
    /* The walker follows a link by its text, so a magic link cannot make it jump; but the text
     * of /proc/<pid>/root is "/", of cwd, exe and fd/N a host path, of ns/<type> and of sockets and
     * pipes "type:[inode]": names that mean nothing inside the root. Refuse them, as
     * RESOLVE_NO_MAGICLINKS does. The plain procfs links (self, thread-self, mounts, net) have
     * relative texts without ':' and are followed like any link. */
    struct statfs sf;
    if (fstatfs(linkfd, &sf) < 0) return -errno;
    if (sf.f_type == PROC_SUPER_MAGIC && (target[0] == '/' || strchr(target, ':'))) return -ELOOP;
    size_t tail = strlen(w->rest + at);
    if ((size_t)n + tail + 1 > sizeof w->rest) return -ENAMETOOLONG;
    memmove(w->rest + n, w->rest + at, tail + 1);
    memcpy(w->rest, target, (size_t)n);
    if (target[0] == '/') {
        /* An absolute link restarts at the root, not at the host's "/". */
        if (w->how & NSBOX_SP_BENEATH) return -EXDEV;
        return sp_walk_to_root(w);
    }
    return 0;
}

/* The path ended on a directory (root, ".", "..", trailing '/'): open it with the caller's
 * flags through ".", which names cur itself and follows nothing. */
static int sp_walk_open_dir(struct sp_walk *w, int flags, mode_t mode)
{
    if (flags & O_CREAT) return -EISDIR; /* as open("dir/", O_CREAT) */
    int fd = openat(w->cur, ".", flags | O_CLOEXEC, mode);
    return fd < 0 ? -errno : fd;
}

/* The last component, named name, followed by nothing: returns 0 with *out set, 1 when it was
 * a symlink that has been followed (w->rest rewritten), or -errno. */
static int sp_walk_last(struct sp_walk *w, const char *name, size_t at, int flags, mode_t mode,
                        int *out)
{
    /* O_NOFOLLOW always: the kernel must not follow a link here, the walker does it. */
    cleanup_close int fd = openat(w->cur, name, flags | O_NOFOLLOW | O_CLOEXEC, mode);
    if (fd >= 0) {
        struct stat st;
        if ((flags & O_PATH) && !(flags & O_NOFOLLOW)) {
            /* O_PATH|O_NOFOLLOW opens a symlink itself rather than failing: see which. */
            if (fstat(fd, &st) < 0) return -errno;
            if (S_ISLNK(st.st_mode)) {
                int r = sp_walk_follow(w, fd, at);
                return r < 0 ? r : 1;
            }
        }
        int r = sp_same_mount(w, fd);
        if (r < 0) return r;
        *out = nsbox_steal_fd(&fd);
        return 0;
    }
    int err = errno;
    /* With O_NOFOLLOW a trailing symlink fails with ELOOP, or ENOTDIR when O_DIRECTORY is
     * set; look at what is there without following it. */
    if (err != ELOOP && err != ENOTDIR) return -err;
    cleanup_close int lfd = openat(w->cur, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (lfd < 0 || fstat(lfd, &st) < 0) return -err;
    if (!S_ISLNK(st.st_mode))
        return err == ELOOP ? -EAGAIN : -err; /* ELOOP but no link: it was just swapped */
    if (flags & O_NOFOLLOW) return -err;
    int r = sp_walk_follow(w, lfd, at);
    return r < 0 ? r : 1;
}

static int sp_walk_once(struct sp_walk *w, const char *path, int flags, mode_t mode)
{
    int r = sp_walk_to_root(w);
    if (r < 0) return r;
    if (path[0] == '/' && (w->how & NSBOX_SP_BENEATH)) return -EXDEV;
    w->links = 0;
    snprintf(w->rest, sizeof w->rest, "%s", path);
    size_t pos = 0;
    for (;;) {
        while (w->rest[pos] == '/')
            pos++;
        if (w->rest[pos] == '\0') return sp_walk_open_dir(w, flags, mode);
        char name[NAME_MAX + 1];
        size_t s = pos;
        while (w->rest[pos] != '\0' && w->rest[pos] != '/')
            pos++;
        size_t nl = pos - s;
        if (nl > NAME_MAX) return -ENAMETOOLONG;
        memcpy(name, w->rest + s, nl);
        name[nl] = '\0';
        bool last = w->rest[pos] == '\0';

        if (is_dot(name, nl)) continue;
        if (is_dotdot(name, nl)) {
            if (w->rlen == 0) {
                /* `..` at the root stays at the root (IN_ROOT) or is refused (BENEATH). */
                if (w->how & NSBOX_SP_BENEATH) return -EXDEV;
                continue;
            }
            r = sp_walk_pop(w);
            if (r < 0) return r;
            continue;
        }
        if (last) {
            int fd = -1;
            r = sp_walk_last(w, name, pos, flags, mode, &fd);
            if (r < 0) return r;
            if (r == 0) return fd;
            pos = 0;
            continue;
        }
        /* An intermediate component (or a last one with a trailing '/'): a directory, or a
         * symlink to follow. O_NOFOLLOW with O_PATH opens a link itself, so we look at the very
         * object we hold and nothing can be swapped between the check and the use. */
        cleanup_close int fd = openat(w->cur, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) return -errno;
        struct stat st;
        if (fstat(fd, &st) < 0) return -errno;
        if (S_ISLNK(st.st_mode)) {
            r = sp_walk_follow(w, fd, pos);
            if (r < 0) return r;
            pos = 0;
            continue;
        }
        if (!S_ISDIR(st.st_mode)) return -ENOTDIR;
        r = sp_same_mount(w, fd);
        if (r < 0) return r;
        r = sp_walk_push(w, name, nl, nsbox_steal_fd(&fd));
        if (r < 0) return r;
    }
}

static int sp_walk_open(int rootfd, const char *path, int flags, mode_t mode, unsigned how)
{
    struct sp_walk w = {.rootfd = rootfd, .how = how, .cur = -1};
    if (how & NSBOX_SP_NO_XDEV) {
        struct stat st;
        if (fstat(rootfd, &st) < 0) return -errno;
        w.root_dev = st.st_dev;
        w.have_mnt = sp_mnt_id(rootfd, &w.root_mnt) == 0;
    }
    int r = -EAGAIN;
    for (int i = 0; i < SP_RACE_RETRIES && r == -EAGAIN; i++)
        r = sp_walk_once(&w, path, flags, mode);
    nsbox_closep(&w.cur);
    return r;
}

/* ---- public: open -------------------------------------------------------------------------- */

static int sp_open_raw(int rootfd, const char *path, int flags, mode_t mode, unsigned how)
{
    if (!(flags & O_CREAT) && (flags & O_TMPFILE) != O_TMPFILE)
        mode = 0; /* openat2 rejects a mode that open(2) would ignore */
    if (sp_use_walker()) return sp_walk_open(rootfd, path, flags, mode, how);
    int fd = sp_openat2(rootfd, path, flags, mode, how);
    /* openat2 gives up on `..` whenever anything on the system renamed during the walk; the
     * walker resolves `..` without the kernel and is not disturbed by unrelated renames. */
    if (fd == -EAGAIN && atomic_load(&sp_backend) == NSBOX_SP_BACKEND_AUTO)
        fd = sp_walk_open(rootfd, path, flags, mode, how);
    /* A seccomp filter loaded since the probe (nsbox's own, in a sandbox's init that resolved
     * its root's mount targets before it) refuses openat2 with ENOSYS, an OCI bundle's loaded
     * after it with its own errno (Docker's EPERM, which a file may answer too: probed again):
     * the walker from now on. */
    if ((fd == -ENOSYS || (fd == -EPERM && !sp_openat2_probe())) &&
        atomic_load(&sp_backend) == NSBOX_SP_BACKEND_AUTO) {
        atomic_store(&sp_openat2_state, -1);
        fd = sp_walk_open(rootfd, path, flags, mode, how);
    }
    return fd;
}

int nsbox_sp_open(int rootfd, const char *path, int flags, mode_t mode, unsigned how,
                  struct nsbox_err *e)
{
    if (rootfd < 0) return nsbox_err_set(e, NSBOX_E_INVALID, EBADF, "open: no root directory fd");
    if (how & ~SP_HOW_ALL)
        return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL, "open: unknown resolve flags %#x", how);
    if (!path) return check_path(path, 0, false, e);
    if (check_path(path, strnlen(path, PATH_MAX), false, e) < 0) return nsbox_err_wrap(e, "open");
    int fd = sp_open_raw(rootfd, path, flags, mode, how);
    if (fd < 0) return sp_fail(e, -fd, "open", path);
    return fd;
}

/* ---- public: directories, parents, mount targets ------------------------------------------- */

/* Open the directory name inside dirfd, creating it with mode first when create and it is
 * missing, never following a symlink: -ELOOP when name is a symlink, -ENOTDIR when it is
 * something else. Returns an O_PATH fd. */
static int sp_dir_step(int dirfd, const char *name, bool create, mode_t mode)
{
    for (int i = 0; i < SP_RACE_RETRIES; i++) {
        cleanup_close int fd = openat(dirfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) {
            if (errno != ENOENT || !create) return -errno;
            /* mkdirat never follows a symlink in the last component (a dangling one gives
             * EEXIST); whoever created the entry in the meantime, look at it again. */
            if (mkdirat(dirfd, name, mode) < 0 && errno != EEXIST) return -errno;
            continue;
        }
        struct stat st;
        if (fstat(fd, &st) < 0) return -errno;
        if (S_ISLNK(st.st_mode)) return -ELOOP;
        if (!S_ISDIR(st.st_mode)) return -ENOTDIR;
        return nsbox_steal_fd(&fd);
    }
    return -EAGAIN;
}

/* As sp_dir_step for a non-directory mount target, created as an empty file. */
static int sp_file_step(int dirfd, const char *name)
{
    for (int i = 0; i < SP_RACE_RETRIES; i++) {
        cleanup_close int fd = openat(dirfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) {
            if (errno != ENOENT) return -errno;
            /* O_EXCL never follows a symlink, not even a dangling one planted in the race. */
            int c = openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
            if (c < 0 && errno != EEXIST) return -errno;
            nsbox_closep(&c);
            continue;
        }
        struct stat st;
        if (fstat(fd, &st) < 0) return -errno;
        if (S_ISLNK(st.st_mode)) return -ELOOP;
        if (S_ISDIR(st.st_mode)) return -EISDIR;
        return nsbox_steal_fd(&fd);
    }
    return -EAGAIN;
}

int nsbox_sp_mkdir_p(int rootfd, const char *path, mode_t mode, int *out_fd, struct nsbox_err *e)
{
    if (out_fd) *out_fd = -1;
    if (rootfd < 0) return nsbox_err_set(e, NSBOX_E_INVALID, EBADF, "mkdir: no root directory fd");
    /* No symlink is followed below, so resolving `..` lexically matches what the kernel would
     * do, and no "..", which could climb, is ever handed to it. */
    char norm[PATH_MAX];
    if (nsbox_sp_normalize(path, norm, sizeof norm, e) < 0) return nsbox_err_wrap(e, "mkdir");
    cleanup_close int cur = openat(rootfd, ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (cur < 0) return sp_fail(e, errno, "mkdir", "/");
    if (strcmp(norm, ".") != 0) {
        char *c = norm;
        for (;;) {
            char *slash = strchr(c, '/');
            if (slash) *slash = '\0';
            int fd = sp_dir_step(cur, c, true, mode);
            if (fd < 0) {
                /* norm up to here names the component that failed */
                char d[SP_DISP_MAX + 8];
                nsbox_shown_copy(d, sizeof d, norm, strlen(norm), SP_DISP_MAX, 0);
                if (fd == -ELOOP)
                    return nsbox_err_set(e, NSBOX_E_SYS, ENOTDIR,
                                         "mkdir: '%s' is a symlink; refusing to create "
                                         "directories through it",
                                         d);
                if (fd == -ENOTDIR)
                    return nsbox_err_set(e, NSBOX_E_SYS, ENOTDIR,
                                         "mkdir: '%s' exists and is not a directory", d);
                return sp_fail(e, -fd, "mkdir", norm);
            }
            nsbox_closep(&cur);
            cur = fd;
            if (!slash) break;
            *slash = '/';
            c = slash + 1;
        }
    }
    if (out_fd) *out_fd = nsbox_steal_fd(&cur);
    return 0;
}

int nsbox_sp_open_parent(int rootfd, const char *path, unsigned how, char *leaf, size_t leafn,
                         struct nsbox_err *e)
{
    if (!path) return check_path(path, 0, false, e);
    size_t len = strnlen(path, PATH_MAX);
    if (check_path(path, len, false, e) < 0) return nsbox_err_wrap(e, "open parent");
    size_t end = len;
    while (end > 0 && path[end - 1] == '/')
        end--;
    size_t s = end;
    while (s > 0 && path[s - 1] != '/')
        s--;
    size_t nl = end - s;
    char d[SP_DISP_MAX + 8];
    nsbox_shown_copy(d, sizeof d, path, len, SP_DISP_MAX, 0);
    if (nl == 0 || is_dot(path + s, nl) || is_dotdot(path + s, nl))
        return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL, "path '%s' does not end in a file name",
                             d);
    if (!leaf || nl + 1 > leafn)
        return nsbox_err_set(e, NSBOX_E_INVALID, ENAMETOOLONG,
                             "path '%s': the name buffer is too small", d);
    char parent[PATH_MAX];
    if (s == 0) {
        parent[0] = '.';
        parent[1] = '\0';
    } else {
        memcpy(parent, path, s); /* keeps the '/' before the leaf: "/x" -> parent "/" */
        parent[s] = '\0';
    }
    int fd = nsbox_sp_open(rootfd, parent, O_PATH | O_DIRECTORY, 0, how, e);
    if (fd < 0) return nsbox_err_wrap(e, "parent of '%s'", d);
    memcpy(leaf, path + s, nl);
    leaf[nl] = '\0';
    return fd;
}

/* Walked one component at a time, on both backends, because missing components are created on
 * the way: each step hands the kernel one name relative to a directory fd already held, with
 * O_NOFOLLOW, and refuses `..`; such a lookup can follow no symlink and leave no directory,
 * which is what RESOLVE_NO_SYMLINKS|RESOLVE_BENEATH would guarantee, and it needs no openat2. */
int nsbox_sp_mount_target(int rootfd, const char *path, bool dir, struct nsbox_err *e)
{
    if (rootfd < 0)
        return nsbox_err_set(e, NSBOX_E_INVALID, EBADF, "mount target: no root directory fd");
    if (!path) return check_path(path, 0, false, e);
    size_t len = strnlen(path, PATH_MAX);
    if (check_path(path, len, false, e) < 0) return nsbox_err_wrap(e, "mount target");

    /* shown: "/a/b" up to the component being handled, for messages */
    char shown[PATH_MAX + 1];
    size_t sl = 0;
    /* Messages show the target as "/a/b" whatever the spelling ("a//b/."), so they read like
     * the image's own paths. With `..` refused below, the lexical form is exact. */
    char norm[PATH_MAX + 1], disp_full[SP_DISP_MAX + 8];
    norm[0] = '/';
    if (nsbox_sp_normalize(path, norm + 1, sizeof norm - 1, e) < 0)
        return nsbox_err_wrap(e, "mount target");
    nsbox_shown_copy(disp_full, sizeof disp_full, norm, strlen(norm), SP_DISP_MAX, 0);

    cleanup_close int cur = openat(rootfd, ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (cur < 0) return sp_fail(e, errno, "mount target", "/");
    const char *p = path, *end = path + len, *c;
    size_t cl;
    bool any = false;
    while ((c = next_component(&p, end, &cl))) {
        /* A mount target is named by nsbox or an image; `..` there is a bug or an attack. */
        if (is_dotdot(c, cl)) {
            char raw[SP_DISP_MAX + 8];
            nsbox_shown_copy(raw, sizeof raw, path, len, SP_DISP_MAX, 0);
            return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL, "mount target '%s' contains '..'",
                                 raw);
        }
        const char *rest = p;
        size_t rl;
        bool last = !next_component(&rest, end, &rl);
        char name[NAME_MAX + 1];
        memcpy(name, c, cl);
        name[cl] = '\0';
        shown[sl++] = '/';
        memcpy(shown + sl, c, cl);
        sl += cl;
        shown[sl] = '\0';
        any = true;

        int fd = (last && !dir) ? sp_file_step(cur, name) : sp_dir_step(cur, name, true, 0755);
        if (fd < 0) {
            char ds[SP_DISP_MAX + 8];
            nsbox_shown_copy(ds, sizeof ds, shown, sl, SP_DISP_MAX, 0);
            /* Following it would let the image choose where on the host the mount lands. */
            if (fd == -ELOOP && last)
                return nsbox_err_set(e, NSBOX_E_INVALID, ELOOP,
                                     "%s is a symlink; refusing to mount over it", ds);
            if (fd == -ELOOP)
                return nsbox_err_set(e, NSBOX_E_INVALID, ELOOP,
                                     "%s is a symlink; refusing to mount %s through it", ds,
                                     disp_full);
            if (fd == -ENOTDIR && last)
                return nsbox_err_set(e, NSBOX_E_INVALID, ENOTDIR,
                                     "%s is not a directory; cannot mount a directory over it", ds);
            if (fd == -ENOTDIR)
                return nsbox_err_set(e, NSBOX_E_INVALID, ENOTDIR,
                                     "%s is not a directory; cannot create mount target %s", ds,
                                     disp_full);
            if (fd == -EISDIR)
                return nsbox_err_set(e, NSBOX_E_INVALID, EISDIR,
                                     "%s is a directory; cannot mount a file over it", ds);
            return sp_fail(e, -fd, "mount target", shown);
        }
        nsbox_closep(&cur);
        cur = fd;
        if (last) break;
    }
    if (!any)
        return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL, "mount target '%s' names the root itself",
                             disp_full);
    return nsbox_steal_fd(&cur);
}

int nsbox_sp_chdir_in_root(const char *path, struct nsbox_err *e)
{
    int root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (root < 0)
        return nsbox_err_sys(e, "open /");
    int fd = nsbox_sp_open(root, path, O_PATH | O_DIRECTORY, 0, 0, e);
    close(root);
    if (fd < 0)
        return nsbox_err_wrap(e, "cannot enter %s", path);
    int r = fchdir(fd);
    int err = errno;
    close(fd);
    if (r < 0) {
        errno = err;
        return nsbox_err_sys(e, "cannot enter %s", path);
    }
    return 0;
}
