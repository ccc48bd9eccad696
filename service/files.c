/* File operations under /workspace (docs/files.md): paths, messages, and the operations on one
 * name (read, write, stat, mkdir, remove). Listing and recursive removal are in files_tree.c,
 * the bounded copy of a write in files_copy.c.
 *
 * The rule every operation follows: the workspace is the root. A path is resolved with
 * nsbox_sp_open (openat2 RESOLVE_IN_ROOT, or the walker), so `..` stops at the workspace and a
 * symlink, absolute or relative, is resolved as if the workspace were "/". An operation that acts
 * on a name itself (write, stat, remove, mkdir) resolves the parent that way and then acts on the
 * final name with a *at() call that never follows it: a symlink the sandbox planted or swapped in
 * at the last moment is refused (write) or acted on as a symlink (stat, remove), never followed
 * out. Files are opened O_NONBLOCK and checked with fstat, so a FIFO cannot block the supervisor.
 */
#define _GNU_SOURCE
#include "files.h"
#include "util.h"

#include "cleanup.h"
#include "files_impl.h"
#include "idmap.h"
#include "safepath.h"
#include "shown.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- text for messages and JSON ------------------------------------------------------------ */

void files_disp(char *out, size_t n, const char *s, size_t len, size_t max)
{
    nsbox_shown_copy(out, n, s, len, max, 0);
}

void files_utf8(char *out, size_t n, const char *s, size_t len)
{
    size_t o = 0, i = 0;
    if (n == 0) return;
    while (i < len) {
        size_t k = nsbox_shown_utf8(s + i, len - i);
        const char *src = s + i;
        size_t w = k;
        if (k == 0) {
            src = "\xef\xbf\xbd"; /* U+FFFD */
            w = 3;
            k = 1;
        }
        if (o + w + 1 > n) break;
        memcpy(out + o, src, w);
        o += w, i += k;
    }
    out[o] = '\0';
}

/* ---- errors -------------------------------------------------------------------------------- */

static int fail_named(struct nsbox_err *e, int err, const char *verb, const char *disp)
{
    switch (err) {
    case ENOENT:
        return nsbox_err_set(e, NSBOX_E_NOTFOUND, err, "no such file: %s", disp);
    case ENOTDIR:
        return nsbox_err_set(e, NSBOX_E_INVALID, err,
                             "%s %s: a component of the path is not a directory", verb, disp);
    case ELOOP:
        return nsbox_err_set(e, NSBOX_E_INVALID, err,
                             "%s %s: a symlink loop, more than %d symlinks, or a symlink nsbox "
                             "refuses to follow",
                             verb, disp, NSBOX_SP_MAX_SYMLINKS);
    case EXDEV:
        return nsbox_err_set(e, NSBOX_E_INVALID, err, "%s %s: the path crosses a mount point", verb,
                             disp);
    case ENAMETOOLONG:
        return nsbox_err_set(e, NSBOX_E_INVALID, err, "%s %s: the path is too long", verb, disp);
    case EISDIR:
        return nsbox_err_set(e, NSBOX_E_INVALID, err, "%s %s: it is a directory", verb, disp);
    case EEXIST:
        return nsbox_err_set(e, NSBOX_E_INVALID, err, "%s %s: it already exists", verb, disp);
    case ENOTEMPTY:
        return nsbox_err_set(e, NSBOX_E_INVALID, err, "%s %s: the directory is not empty", verb,
                             disp);
    case EINVAL:
        return nsbox_err_set(e, NSBOX_E_INVALID, err, "%s %s: invalid argument", verb, disp);
    case ENOSPC:
    case EDQUOT:
        return nsbox_err_set(e, NSBOX_E_NOSPACE, err, "%s %s: the workspace's disk is full", verb,
                             disp);
    case EAGAIN:
        return nsbox_err_set(e, NSBOX_E_SYS, err,
                             "%s %s: the workspace kept changing during the lookup, or the file "
                             "is locked (a lease) inside the sandbox; try again",
                             verb, disp);
    case ENOMEM:
        return nsbox_err_set(e, NSBOX_E_NOMEM, err, "%s %s: out of memory", verb, disp);
    default:
        return nsbox_err_set(e, NSBOX_E_SYS, err, "%s %s: %s", verb, disp, strerror(err));
    }
}

int files_fail(const struct files_ctx *c, struct nsbox_err *e, int err, const char *verb)
{
    return fail_named(e, err, verb, c->disp);
}

static void disp_rel(char *out, size_t n, const char *rel)
{
    char d[FILES_DISP_MAX + 8];
    files_disp(d, sizeof d, rel, strlen(rel), FILES_DISP_MAX);
    if (!strcmp(rel, "."))
        snprintf(out, n, "/workspace");
    else
        snprintf(out, n, "/workspace/%s", d);
}

int files_fail_at(const struct files_ctx *c, struct nsbox_err *e, int err, const char *verb,
                  const char *rel)
{
    char d[FILES_DISP_MAX + 32];
    (void)c;
    disp_rel(d, sizeof d, rel);
    return fail_named(e, err, verb, d);
}

static const char *type_phrase(mode_t m)
{
    switch (m & S_IFMT) {
    case S_IFDIR:
        return "a directory";
    case S_IFLNK:
        return "a symlink";
    case S_IFIFO:
        return "a FIFO";
    case S_IFSOCK:
        return "a socket";
    case S_IFCHR:
        return "a character device";
    case S_IFBLK:
        return "a block device";
    }
    return "not a regular file";
}

static int not_regular(const struct files_ctx *c, struct nsbox_err *e, const char *verb, mode_t m)
{
    return nsbox_err_set(e, NSBOX_E_INVALID, S_ISDIR(m) ? EISDIR : EINVAL,
                         "%s %s: not a regular file (it is %s)", verb, c->disp, type_phrase(m));
}

/* ---- shared helpers ------------------------------------------------------------------------ */

const char *files_type_name(mode_t m)
{
    if (S_ISREG(m)) return "file";
    if (S_ISDIR(m)) return "dir";
    if (S_ISLNK(m)) return "symlink";
    return "other";
}

void files_stat_json(cJSON *obj, const struct stat *sb, int dirfd, const char *name)
{
    cJSON_AddStringToObject(obj, "type", files_type_name(sb->st_mode));
    cJSON_AddNumberToObject(obj, "size", (double)sb->st_size);
    cJSON_AddNumberToObject(obj, "mode", (double)(sb->st_mode & 07777));
    cJSON_AddNumberToObject(obj, "mtime",
                            (double)sb->st_mtim.tv_sec + (double)sb->st_mtim.tv_nsec / 1e9);
    char u[FILES_LINK_TEXT_MAX];
    if (S_ISLNK(sb->st_mode) && name && files_link_text(dirfd, name, u))
        cJSON_AddStringToObject(obj, "target", u);
}

bool files_link_text(int dirfd, const char *name, char out[FILES_LINK_TEXT_MAX])
{
    /* The link's text, as the sandbox wrote it: only a string, never followed here. */
    char t[PATH_MAX];
    ssize_t n = readlinkat(dirfd, name, t, sizeof t - 1);
    if (n < 0)
        return false;
    files_utf8(out, FILES_LINK_TEXT_MAX, t, (size_t)n);
    return true;
}

int files_mnt_id(int fd, uint64_t *id)
{
    struct statx stx;
    if (statx(fd, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW, STATX_MNT_ID, &stx) == 0 &&
        (stx.stx_mask & STATX_MNT_ID)) {
        *id = stx.stx_mnt_id;
        return 0;
    }
    struct stat sb;
    if (fstat(fd, &sb) < 0) return -1;
    *id = (uint64_t)sb.st_dev | (1ull << 63); /* never equal to a real mount id */
    return 0;
}

int files_adopt_fd(const struct files_ctx *c, int fd, mode_t mode)
{
    if (c->chown && fchown(fd, c->uid, c->gid) < 0) return -1;
    /* Exactly the mode asked for: the supervisor's umask belongs to whoever started it. */
    return fchmod(fd, mode & 0777);
}

/* rel split into the directory part and the final name: "a/b/c" -> "a/b/", "c"; "c" -> ".",
 * "c". False when the path does not end in a name ("", ".", "a/..", "/"). */
static bool split_leaf(const char *rel, char *parent, size_t pn, char *leaf, size_t ln)
{
    size_t end = strlen(rel);
    while (end > 0 && rel[end - 1] == '/')
        end--;
    size_t s = end;
    while (s > 0 && rel[s - 1] != '/')
        s--;
    size_t nl = end - s;
    if (nl == 0 || nl + 1 > ln || (nl == 1 && rel[s] == '.') ||
        (nl == 2 && rel[s] == '.' && rel[s + 1] == '.'))
        return false;
    if (s == 0)
        snprintf(parent, pn, ".");
    else
        snprintf(parent, pn, "%.*s", (int)s, rel);
    memcpy(leaf, rel + s, nl);
    leaf[nl] = '\0';
    return true;
}

/* The parent directory of the request's path, resolved inside the workspace (symlinks followed
 * inside it), as an O_PATH fd. */
static int open_parent(const struct files_ctx *c, char *leaf, const char *verb, struct nsbox_err *e)
{
    char parent[PATH_MAX];
    if (!split_leaf(c->rel, parent, sizeof parent, leaf, NAME_MAX + 1))
        return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL,
                             "%s %s: the path does not end in a file name", verb, c->disp);
    struct nsbox_err se = {0};
    int fd = nsbox_sp_open(c->ws, parent, O_PATH | O_DIRECTORY, 0, 0, &se);
    if (fd < 0) return files_fail(c, e, se.sys_errno, verb);
    return fd;
}

/* mkdir -p of rel inside the workspace, following no symlink at all (a symlink where a directory
 * is expected is refused: resolving `..` lexically is then exact). Directories created get mode
 * 0755 (the last one final_mode) and the sandbox's owner. *out_fd: O_PATH fd of the last one. */
static int mkdir_p(const struct files_ctx *c, const char *rel, mode_t final_mode, int *out_fd,
                   const char *verb, struct nsbox_err *e)
{
    char norm[PATH_MAX];
    struct nsbox_err se = {0};
    if (nsbox_sp_normalize(rel, norm, sizeof norm, &se) < 0)
        return files_fail(c, e, se.sys_errno, verb);
    cleanup_close int cur = openat(c->ws, ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (cur < 0) return files_fail(c, e, errno, verb);
    if (strcmp(norm, ".") != 0) {
        char *p = norm;
        for (;;) {
            char *slash = strchr(p, '/');
            if (slash) *slash = '\0';
            bool last = !slash;
            int fd = -1;
            for (int tries = 0; fd < 0; tries++) {
                fd = openat(cur, p, O_PATH | O_NOFOLLOW | O_CLOEXEC);
                if (fd >= 0) break;
                if (errno != ENOENT || tries > 16) return files_fail_at(c, e, errno, verb, norm);
                if (mkdirat(cur, p, 0700) < 0) {
                    if (errno == EEXIST) continue; /* made meanwhile: look at it again */
                    return files_fail_at(c, e, errno, verb, norm);
                }
                /* O_NOFOLLOW|O_DIRECTORY: if the sandbox swapped something else in since the
                 * mkdirat, this fails rather than changing the owner of what it put there. */
                cleanup_close int dfd =
                    openat(cur, p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (dfd < 0 || files_adopt_fd(c, dfd, last ? final_mode : 0755) < 0)
                    return files_fail_at(c, e, errno, verb, norm);
            }
            struct stat sb;
            if (fstat(fd, &sb) < 0) {
                int err = errno;
                close(fd);
                return files_fail_at(c, e, err, verb, norm);
            }
            if (!S_ISDIR(sb.st_mode)) {
                char d[FILES_DISP_MAX + 32];
                close(fd);
                disp_rel(d, sizeof d, norm);
                if (S_ISLNK(sb.st_mode))
                    return nsbox_err_set(e, NSBOX_E_INVALID, ELOOP,
                                         "%s %s: %s is a symlink; refusing to create directories "
                                         "through it",
                                         verb, c->disp, d);
                return nsbox_err_set(e, NSBOX_E_INVALID, ENOTDIR,
                                     "%s %s: %s exists and is not a directory", verb, c->disp, d);
            }
            nsbox_closep(&cur);
            cur = fd;
            if (last) break;
            *slash = '/';
            p = slash + 1;
        }
    }
    if (out_fd) *out_fd = nsbox_steal_fd(&cur);
    return 0;
}

static int clear_nonblock(int fd)
{
    int fl = fcntl(fd, F_GETFL);
    return fl < 0 ? -1 : fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
}

/* ---- operations ---------------------------------------------------------------------------- */

/* After ENOENT: when the final name is a symlink, say so. A link such as x -> /etc/shadow is
 * resolved inside the workspace (to /workspace/etc/shadow), which is why it names nothing. */
static int enoent_hint(const struct files_ctx *c, struct nsbox_err *e)
{
    char parent[PATH_MAX], leaf[NAME_MAX + 1], t[PATH_MAX], d[FILES_DISP_MAX + 8];
    struct nsbox_err se = {0};
    if (e->code != NSBOX_E_NOTFOUND ||
        !split_leaf(c->rel, parent, sizeof parent, leaf, sizeof leaf))
        return -1;
    cleanup_close int pfd = nsbox_sp_open(c->ws, parent, O_PATH | O_DIRECTORY, 0, 0, &se);
    if (pfd < 0) return -1;
    ssize_t n = readlinkat(pfd, leaf, t, sizeof t - 1);
    if (n < 0) return -1;
    files_disp(d, sizeof d, t, (size_t)n, FILES_DISP_MAX);
    size_t l = strlen(e->msg);
    snprintf(e->msg + l, sizeof e->msg - l,
             " (a symlink to '%s'; symlinks are resolved inside /workspace)", d);
    return -1;
}

static int op_read(struct files_ctx *c, cJSON *reply, int *out_fd, struct nsbox_err *e)
{
    struct nsbox_err se = {0};
    /* O_NONBLOCK: opening a FIFO the sandbox planted would otherwise wait for a writer forever;
     * O_NOCTTY: a terminal must not become the supervisor's. */
    cleanup_close int fd =
        nsbox_sp_open(c->ws, c->rel, O_RDONLY | O_NONBLOCK | O_NOCTTY, 0, 0, &se);
    if (fd < 0) {
        if (se.sys_errno == ENXIO) /* a socket */
            return not_regular(c, e, "cannot read", S_IFSOCK);
        files_fail(c, e, se.sys_errno, "cannot read");
        return enoent_hint(c, e);
    }
    struct stat sb;
    if (fstat(fd, &sb) < 0) return files_fail(c, e, errno, "cannot read");
    if (!S_ISREG(sb.st_mode)) return not_regular(c, e, "cannot read", sb.st_mode);
    if (clear_nonblock(fd) < 0) return files_fail(c, e, errno, "cannot read");
    cJSON_AddNumberToObject(reply, "size", (double)sb.st_size);
    cJSON_AddNumberToObject(reply, "mode", (double)(sb.st_mode & 07777));
    *out_fd = nsbox_steal_fd(&fd);
    return 0;
}

/* The leaf of a write, opened for writing without following a symlink and not truncated yet;
 * *created tells whether this call made it. */
static int open_leaf_for_write(const struct files_ctx *c, int pfd, const char *leaf, bool *created,
                               struct nsbox_err *e)
{
    /* O_NONBLOCK: a FIFO with no reader fails (ENXIO) instead of blocking, and so does a file
     * the sandbox holds a lease on (EWOULDBLOCK instead of waiting for the lease break). */
    const int common = O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC;
    for (int tries = 0;; tries++) {
        /* O_EXCL never follows a symlink, not even a dangling one: the file is ours. */
        int fd = openat(pfd, leaf, common | O_CREAT | O_EXCL, 0600);
        if (fd >= 0) {
            *created = true;
            return fd;
        }
        if (errno == EEXIST) {
            fd = openat(pfd, leaf, common);
            if (fd >= 0) {
                *created = false;
                return fd;
            }
            if (errno == ENOENT && tries < 16) continue; /* removed meanwhile */
        }
        switch (errno) {
        case ELOOP:
            return nsbox_err_set(e, NSBOX_E_INVALID, ELOOP,
                                 "cannot write %s: it is a symlink; refusing to write through it",
                                 c->disp);
        case ENXIO: /* a FIFO nobody reads, or a socket */
            return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL,
                                 "cannot write %s: not a regular file (a FIFO or a socket)",
                                 c->disp);
        case EWOULDBLOCK:
            return nsbox_err_set(e, NSBOX_E_SYS, EWOULDBLOCK,
                                 "cannot write %s: the file is locked (a lease) inside the sandbox",
                                 c->disp);
        }
        return files_fail(c, e, errno, "cannot write");
    }
}

static void human_bytes(uint64_t b, char *out, size_t n)
{
    if (b >= (1ull << 30) && b % (1ull << 30) == 0)
        snprintf(out, n, "%llu GiB", (unsigned long long)(b >> 30));
    else if (b >= (1ull << 20) && b % (1ull << 20) == 0)
        snprintf(out, n, "%llu MiB", (unsigned long long)(b >> 20));
    else
        snprintf(out, n, "%llu bytes", (unsigned long long)b);
}

/* Overwriting an existing file: the content goes to a new file beside it, renamed over the
 * name once whole, so that a write that fails half-way (a full disk, a client gone) leaves the
 * file as it was; in place, it was left truncated. Only where the new file can be the old one's
 * twin: a single link (a hard link stays one only in place), an owner we can give (root's
 * chown, or the file is already ours), a directory we may create in. 1 replaced, 0 when it
 * could not be done so (write in place instead), -1 with e when the content failed. mode: the
 * new file's (set_mode), or -1 for the old one's. */
static int replace_whole(struct files_ctx *c, int pfd, const char *leaf, const struct stat *old,
                         int mode, int in_fd, uint64_t *written, struct nsbox_err *e)
{
    if (old->st_nlink != 1 || (!c->chown && old->st_uid != (uid_t)setfsuid((uid_t)-1)))
        return 0;
    char tmp[NAME_MAX + 1];
    unsigned rnd = 0;
    if (getrandom(&rnd, sizeof rnd, GRND_NONBLOCK) != (ssize_t)sizeof rnd)
        rnd = (unsigned)getpid() ^ (unsigned)(uintptr_t)&rnd;
    snprintf(tmp, sizeof tmp, ".nsbox-write-%08x", rnd);
    cleanup_close int tfd =
        openat(pfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (tfd < 0)
        return 0; /* no room for a name, no write permission on the directory: in place */
    if ((c->chown && fchown(tfd, old->st_uid, old->st_gid) < 0) ||
        fchmod(tfd, (mode >= 0 ? (mode_t)mode : old->st_mode) & 0777) < 0) {
        unlinkat(pfd, tmp, 0);
        return 0;
    }
    if (files_copy_in(c, in_fd, tfd, written, e) < 0) {
        unlinkat(pfd, tmp, 0);
        return nsbox_err_wrap(e, "cannot write %s (the file is unchanged)", c->disp);
    }
    /* The sandbox may have put something else at either name meanwhile: rename moves names,
     * never follows a link, and stays in this directory. */
    if (renameat(pfd, tmp, pfd, leaf) < 0) {
        int err = errno;
        unlinkat(pfd, tmp, 0);
        return files_fail(c, e, err, "cannot write");
    }
    return 1;
}

static int op_write(struct files_ctx *c, const struct nsbox_request *rq, int in_fd, cJSON *reply,
                    struct nsbox_err *e)
{
    if (in_fd < 0)
        return nsbox_err_set(e, NSBOX_E_INVALID, EBADF,
                             "write %s: the request carries no descriptor with the content",
                             c->disp);
    struct stat in_sb;
    if (fstat(in_fd, &in_sb) < 0)
        return nsbox_err_sys(e, "write %s: the content descriptor", c->disp);
    if (S_ISDIR(in_sb.st_mode))
        return nsbox_err_set(e, NSBOX_E_INVALID, EISDIR,
                             "write %s: the content descriptor is a directory", c->disp);
    uint64_t max = c->opts.max_write_bytes;
    if (max && S_ISREG(in_sb.st_mode)) {
        /* Refused before anything is touched: the file already there stays as it was. */
        off_t pos = lseek(in_fd, 0, SEEK_CUR);
        uint64_t len =
            (uint64_t)in_sb.st_size - (pos > 0 && pos <= in_sb.st_size ? (uint64_t)pos : 0);
        if (len > max) {
            char a[32], b[32];
            human_bytes(len, a, sizeof a);
            human_bytes(max, b, sizeof b);
            return nsbox_err_set(e, NSBOX_E_NOSPACE, EFBIG,
                                 "cannot write %s: the file is %s, more than the sandbox's "
                                 "workspace disk limit of %s",
                                 c->disp, a, b);
        }
    }

    char leaf[NAME_MAX + 1];
    struct nsbox_err pe = {0};
    cleanup_close int pfd = open_parent(c, leaf, "cannot write", &pe);
    if (pfd < 0) {
        if (pe.sys_errno != ENOENT) {
            *e = pe;
            return -1;
        }
        if (!rq->mkdir)
            return nsbox_err_set(e, NSBOX_E_NOTFOUND, ENOENT,
                                 "cannot write %s: its directory does not exist (create it, or "
                                 "ask for it: nsbox cp -p, write_file(mkdir=True), \"mkdir\": "
                                 "true)",
                                 c->disp);
        char parent[PATH_MAX];
        split_leaf(c->rel, parent, sizeof parent, leaf, sizeof leaf);
        if (mkdir_p(c, parent, 0755, &pfd, "cannot write", e) < 0) return -1;
    }

    bool created = false;
    cleanup_close int fd = open_leaf_for_write(c, pfd, leaf, &created, e);
    if (fd < 0) return -1;
    struct stat sb;
    if (fstat(fd, &sb) < 0) return files_fail(c, e, errno, "cannot write");
    if (!S_ISREG(sb.st_mode)) /* a FIFO that has a reader */
        return not_regular(c, e, "cannot write", sb.st_mode);
    /* Truncated only now that it is known to be a regular file, and not the source itself
     * (`nsbox cp <workspace on the host>/f ID:f` would otherwise empty it). */
    if (S_ISREG(in_sb.st_mode) && nsbox_same_inode(&in_sb, &sb))
        return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL,
                             "cannot write %s: it is the source file itself", c->disp);
    uint64_t written = 0;
    if (!created) {
        int r = replace_whole(c, pfd, leaf, &sb, rq->set_mode ? (int)rq->mode : -1, in_fd,
                              &written, e);
        if (r < 0) return -1;
        if (r > 0) {
            cJSON_AddNumberToObject(reply, "size", (double)written);
            return 0;
        }
    }
    /* the mode first: a file we may not chmod (another owner's) is left as it was */
    if ((!created && rq->set_mode && fchmod(fd, rq->mode & 0777) < 0) ||
        (!created && ftruncate(fd, 0) < 0) ||
        (created && files_adopt_fd(c, fd, rq->mode & 0777) < 0) || clear_nonblock(fd) < 0)
        return files_fail(c, e, errno, "cannot write");

    if (files_copy_in(c, in_fd, fd, &written, e) < 0) {
        /* Do not leave a truncated file that looks complete. Remove it only if the name still
         * names the file made here (the sandbox may have replaced it meanwhile). */
        struct stat now;
        if (created && fstatat(pfd, leaf, &now, AT_SYMLINK_NOFOLLOW) == 0 &&
            nsbox_same_inode(&now, &sb) && unlinkat(pfd, leaf, 0) == 0)
            return nsbox_err_wrap(e, "cannot write %s (nothing was written)", c->disp);
        return nsbox_err_wrap(e, "cannot write %s (the file is incomplete)", c->disp);
    }
    cJSON_AddNumberToObject(reply, "size", (double)written);
    return 0;
}

static int op_stat(struct files_ctx *c, cJSON *reply, struct nsbox_err *e)
{
    char parent[PATH_MAX], leaf[NAME_MAX + 1];
    struct stat sb;
    if (!split_leaf(c->rel, parent, sizeof parent, leaf, sizeof leaf)) {
        /* "/workspace", "a/..": a directory, named by no final name; nothing to not follow. */
        struct nsbox_err se = {0};
        cleanup_close int fd = nsbox_sp_open(c->ws, c->rel, O_PATH | O_DIRECTORY, 0, 0, &se);
        if (fd < 0) return files_fail(c, e, se.sys_errno, "cannot stat");
        if (fstat(fd, &sb) < 0) return files_fail(c, e, errno, "cannot stat");
        files_stat_json(reply, &sb, -1, NULL);
        return 0;
    }
    cleanup_close int pfd = open_parent(c, leaf, "cannot stat", e);
    if (pfd < 0) return -1;
    /* lstat semantics: a symlink is reported as one, with its text, never followed. */
    if (fstatat(pfd, leaf, &sb, AT_SYMLINK_NOFOLLOW) < 0)
        return files_fail(c, e, errno, "cannot stat");
    files_stat_json(reply, &sb, pfd, leaf);
    return 0;
}

static int op_mkdir(struct files_ctx *c, const struct nsbox_request *rq, struct nsbox_err *e)
{
    /* The request's mode defaults to 0644 (a file's); a directory asked for with the default
     * gets 0755. */
    mode_t mode = rq->mode == 0644 ? 0755 : (mode_t)(rq->mode & 0777);
    if (rq->parents) return mkdir_p(c, c->rel, mode, NULL, "cannot create directory", e);
    char leaf[NAME_MAX + 1];
    cleanup_close int pfd = open_parent(c, leaf, "cannot create directory", e);
    if (pfd < 0) return -1;
    if (mkdirat(pfd, leaf, 0700) < 0) return files_fail(c, e, errno, "cannot create directory");
    cleanup_close int dfd = openat(pfd, leaf, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd < 0 || files_adopt_fd(c, dfd, mode) < 0)
        return files_fail(c, e, errno, "cannot create directory");
    return 0;
}

static int op_remove(struct files_ctx *c, const struct nsbox_request *rq, struct nsbox_err *e)
{
    char parent[PATH_MAX], leaf[NAME_MAX + 1], norm[PATH_MAX];
    if (!split_leaf(c->rel, parent, sizeof parent, leaf, sizeof leaf)) {
        struct nsbox_err se = {0};
        if (nsbox_sp_normalize(c->rel, norm, sizeof norm, &se) >= 0 && !strcmp(norm, "."))
            return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL,
                                 "cannot remove %s: refusing to remove the workspace itself",
                                 c->disp);
        return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL,
                             "cannot remove %s: the path does not end in a file name", c->disp);
    }
    cleanup_close int pfd = open_parent(c, leaf, "cannot remove", e);
    if (pfd < 0) return -1;
    struct stat sb;
    if (fstatat(pfd, leaf, &sb, AT_SYMLINK_NOFOLLOW) < 0)
        return files_fail(c, e, errno, "cannot remove");
    if (!S_ISDIR(sb.st_mode)) {
        /* unlinkat removes the name itself: a symlink goes, its target stays. */
        if (unlinkat(pfd, leaf, 0) < 0) return files_fail(c, e, errno, "cannot remove");
        return 0;
    }
    if (!rq->recursive)
        return nsbox_err_set(e, NSBOX_E_INVALID, EISDIR,
                             "cannot remove %s: it is a directory (pass recursive to remove it "
                             "and its contents)",
                             c->disp);
    return files_remove_tree(c, pfd, leaf, e);
}

/* ---- entry --------------------------------------------------------------------------------- */

/* The request's path relative to the workspace: "a/b" and "/workspace/a/b" are the same file.
 * Any other absolute path is refused: "/tmp/out.txt" taken as /workspace/tmp/out.txt would be a
 * file an agent that wrote /tmp/out.txt with a command would never find there. */
static int set_path(struct files_ctx *c, const char *path, struct nsbox_err *e)
{
    size_t len = strnlen(path, PATH_MAX);
    char d[FILES_DISP_MAX + 8];
    files_disp(d, sizeof d, path, len, FILES_DISP_MAX);
    if (nsbox_sp_validate(path, len, e) < 0) return nsbox_err_wrap(e, "invalid path '%s'", d);
    const char *p = path;
    if (p[0] == '/') {
        while (*p == '/')
            p++;
        if (strncmp(p, "workspace", 9) != 0 || (p[9] != '\0' && p[9] != '/'))
            return nsbox_err_set(e, NSBOX_E_INVALID, EXDEV,
                                 "path '%s' is outside /workspace: file operations reach only "
                                 "the workspace (a relative path, or one under /workspace/); "
                                 "other files are read and written by a command in the sandbox",
                                 d);
        p += 9;
        while (*p == '/')
            p++;
    }
    snprintf(c->rel, sizeof c->rel, "%s", *p ? p : ".");
    disp_rel(c->disp, sizeof c->disp, c->rel);
    return 0;
}

int nsbox_files_op_ex(int ws_fd, const struct nsbox_state *st, const struct nsbox_files_opts *opts,
                      const struct nsbox_request *rq, int in_fd, cJSON *reply, int *out_fd,
                      struct nsbox_err *e)
{
    struct files_ctx c;
    memset(&c, 0, sizeof c);
    *out_fd = -1;
    if (ws_fd < 0) return nsbox_err_set(e, NSBOX_E_SYS, EBADF, "the sandbox has no workspace");
    c.ws = ws_fd;
    c.st = st;
    if (opts) c.opts = *opts;
    if (c.opts.stall_ms <= 0) c.opts.stall_ms = NSBOX_FILES_STALL_MS_DEFAULT;
    if (st && st->privileged) {
        struct nsbox_idmaps m;
        if (nsbox_idmap_compute(true, 0, 0, st->slot, NULL, &m, e) < 0) return -1;
        c.chown = true;
        c.uid = m.app_uid;
        c.gid = m.app_gid;
    }
    if (set_path(&c, rq->path, e) < 0) return -1;
    /* In any workspace but nsbox's own ext4 (whose every file is the sandbox's, or made by us
     * and handed to it), act as the sandbox's user, with its permissions:
     * - through an idmapped --workspace (workspace.h), and in a tmpfs workspace (mounted inside
     *   the sandbox's user namespace), only the sandbox's own host ids are mapped: root's
     *   would fail with EOVERFLOW;
     * - a --workspace bound plainly (root's, never idmapped) holds files the sandbox may not
     *   read or write. As root we would, and a symlink the sandbox plants in a directory it
     *   may write (out/result -> /secret.key, resolved inside the workspace) would steer our
     *   reads, writes, removals to them. */
    bool as_sandbox = st && st->privileged && st->ws_kind != NSBOX_WS_EXT4;
    if (as_sandbox) {
        setfsgid(c.gid);
        setfsuid(c.uid);
        if ((uint32_t)setfsuid(c.uid) != c.uid || (uint32_t)setfsgid(c.gid) != c.gid) {
            setfsuid(0);
            setfsgid(0);
            return nsbox_err_set(e, NSBOX_E_SYS, EPERM, "cannot act as uid %u for the workspace",
                                 c.uid);
        }
    }
    int r;
    switch (rq->op) {
    case NSBOX_OP_READ:
        r = op_read(&c, reply, out_fd, e);
        break;
    case NSBOX_OP_WRITE:
        r = op_write(&c, rq, in_fd, reply, e);
        break;
    case NSBOX_OP_LIST:
        r = files_list(&c, rq->cursor, reply, e);
        break;
    case NSBOX_OP_STAT:
        r = op_stat(&c, reply, e);
        break;
    case NSBOX_OP_REMOVE:
        r = op_remove(&c, rq, e);
        break;
    case NSBOX_OP_MKDIR:
        r = op_mkdir(&c, rq, e);
        break;
    default:
        r = nsbox_err_set(e, NSBOX_E_INVALID, EINVAL, "'%s' is not a file operation",
                          nsbox_proto_op_name(rq->op));
    }
    if (as_sandbox) {
        setfsuid(0);
        setfsgid(0);
    }
    return r;
}

int nsbox_files_op(int ws_fd, const struct nsbox_state *st, const struct nsbox_request *rq,
                   int in_fd, cJSON *reply, int *out_fd, struct nsbox_err *e)
{
    return nsbox_files_op_ex(ws_fd, st, NULL, rq, in_fd, reply, out_fd, e);
}
