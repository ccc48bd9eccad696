/* Unpacking a layer: see oci_layer.h. libarchive reads the tar from the blob's stream
 * (oci_stream.h: decompressed and hashed twice by a thread of its own); nsbox writes the
 * entries itself with *at calls below directories opened with RESOLVE_IN_ROOT, so that no
 * entry, however named and whatever symlinks earlier entries made, lands outside the root. */
#include "oci_layer.h"
#include "oci_stream.h"
#include "cleanup.h"
#include "idmap.h"
#include "ocimanifest.h"
#include "util.h"
#include "grow.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

void nsbox_oci_layer_limits(struct nsbox_oci_limits *l)
{
    l->max_bytes = 64ull << 30;
    l->max_entries = 2000000;
    const char *b = getenv("NSBOX_OCI_MAX_BYTES"), *n = getenv("NSBOX_OCI_MAX_ENTRIES");
    if (b && *b)
        l->max_bytes = strtoull(b, NULL, 10);
    if (n && *n)
        l->max_entries = strtoull(n, NULL, 10);
}

mode_t nsbox_oci_layer_umask(void)
{
    /* read, not set and restored: layers may be unpacked by several threads at once */
    cleanup_free char *text = nsbox_read_text_at(AT_FDCWD, "/proc/self/status", 4096);
    const char *u = text ? strstr(text, "\nUmask:") : NULL;
    return u ? (mode_t)(strtoul(u + 7, NULL, 8) & 0777) : 0777;
}

/* ---- directories inside the root ---------------------------------------------------------- */

static int openat2_in_root(int root_fd, const char *rel, int flags)
{
    struct open_how how = {
        .flags = (uint64_t)(flags | O_CLOEXEC),
        .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV,
    };
    return nsbox_openat2(root_fd, rel[0] ? rel : ".", &how);
}

int nsbox_oci_layer_open_dir(int root_fd, const char *rel, bool create)
{
    int fd = openat2_in_root(root_fd, rel, O_PATH | O_DIRECTORY);
    if (fd >= 0 || errno != ENOENT || !create || !rel[0])
        return fd;
    char parent[PATH_MAX];
    snprintf(parent, sizeof parent, "%s", rel);
    char *slash = strrchr(parent, '/');
    const char *base = slash ? slash + 1 : parent;
    if (slash)
        *slash = '\0';
    cleanup_close int pfd = nsbox_oci_layer_open_dir(root_fd, slash ? parent : "", true);
    if (pfd < 0)
        return -1;
    if (mkdirat(pfd, base, 0755) < 0 && errno != EEXIST)
        return -1;
    if (geteuid() == 0) { /* image root's, as the layer's own directories are theirs */
        int r = fchownat(pfd, base, nsbox_idmap_image_owner(0), nsbox_idmap_image_owner(0),
                         AT_SYMLINK_NOFOLLOW);
        (void)r;
    }
    return openat2_in_root(root_fd, rel, O_PATH | O_DIRECTORY);
}

static int remove_entry(int pfd, const char *name);

static int empty_dir(int dfd)
{
    int fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        return -1;
    }
    int r = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        if (remove_entry(dirfd(d), de->d_name) < 0) {
            r = -1;
            break;
        }
    }
    closedir(d);
    return r;
}

/* Remove name (a whole tree if a directory) from pfd; a missing name is fine. */
static int remove_entry(int pfd, const char *name)
{
    if (unlinkat(pfd, name, 0) == 0 || errno == ENOENT)
        return 0;
    if (errno != EISDIR && errno != EPERM)
        return -1;
    cleanup_close int fd = openat(pfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return -1;
    if (geteuid() != 0)
        fchmod(fd, 0700); /* a 0555 directory of the image: its entries must go too */
    if (empty_dir(fd) < 0)
        return -1;
    return unlinkat(pfd, name, AT_REMOVEDIR) == 0 || errno == ENOENT ? 0 : -1;
}

static void split(char *path, const char **parent, const char **base)
{
    char *slash = strrchr(path, '/');
    if (slash) {
        *slash = '\0';
        *parent = path;
        *base = slash + 1;
    } else {
        *parent = "";
        *base = path;
    }
}

/* ---- the two passes ----------------------------------------------------------------------- */

struct whiteout {
    enum nsbox_oci_entry_kind kind;
    char *path;
};

struct layer {
    int root_fd;
    const char *digest, *diff_id;
    const struct nsbox_oci_limits *lim;
    struct nsbox_oci_layer_stats *st;
    const struct nsbox_oci_layer_form *form; /* NULL: merged */
    struct whiteout *wh;
    size_t n_wh, cap_wh;
    bool root;    /* euid 0: modes need no owner bits added to keep working */
    mode_t umask; /* a mode it leaves whole is given at creation, no chmod after */
    /* the directory of the last entry: consecutive entries of one directory resolve it once;
     * forgotten whenever an entry is removed or replaced, the only change that could make
     * the same path resolve elsewhere */
    char parent[PATH_MAX];
    int parent_fd;
    bool parent_valid;
    /* the layers below (form->lowers), asked for at the first hard link that needs them */
    bool lowers_asked;
    const int *lower_fds;
    size_t n_lower;
    /* merged (no form->shared): the image's decompressed bytes so far, and this layer's own,
     * which bound its second reading */
    _Atomic uint64_t inflated;
    uint64_t own_inflated;
    int64_t size; /* the blob's, as its manifest gives it, or -1 */
};

static bool overlay_form(const struct layer *L)
{
    return L->form && L->form->overlay;
}

/* The tar, read by libarchive from the blob's stream (oci_stream.h), which hashes the blob and
 * the uncompressed tar: the latter's sha256 is the layer's diff_id, which the image config (and
 * so the image id) names. */
struct chain {
    struct nsbox_oci_stream *stream;
    struct archive *tar;
};

static void close_chain(struct chain *c)
{
    if (c->tar)
        archive_read_free(c->tar);
    nsbox_oci_stream_free(c->stream);
    c->tar = NULL;
    c->stream = NULL;
}

/* libarchive's tar reader fails a tar cut inside an entry without a word: one for it */
static const char *tar_why(struct archive *a)
{
    const char *why = archive_error_string(a);
    return why && why[0] ? why : "truncated or malformed tar";
}

/* The stream's bound (oci_stream.h) passed: the image's limit, which it counts too. */
static int too_big(struct layer *L, struct nsbox_err *e)
{
    return nsbox_err_set(e, NSBOX_E_INVALID, EFBIG,
                         "image unpacks to more than %llu bytes (NSBOX_OCI_MAX_BYTES): layer %s "
                         "decompresses past it",
                         (unsigned long long)L->lim->max_bytes, L->digest);
}

static int open_chain(struct layer *L, struct chain *c, int blob_fd,
                      const struct nsbox_oci_stream_bound *bound, struct nsbox_err *e)
{
    if (nsbox_oci_stream_open(blob_fd, bound, &c->stream, e) < 0)
        return e->code == NSBOX_E_NOMEM ? -1 : nsbox_err_wrap(e, "layer %s: cannot read it",
                                                                L->digest);
    c->tar = archive_read_new();
    if (!c->tar)
        return nsbox_err_set(e, NSBOX_E_NOMEM, ENOMEM, "out of memory");
    archive_read_support_format_tar(c->tar);
    if (archive_read_open(c->tar, c->stream, NULL, nsbox_oci_stream_read, NULL) != ARCHIVE_OK)
        return archive_errno(c->tar) == EFBIG
                   ? too_big(L, e)
                   : nsbox_err_set(e, NSBOX_E_INVALID, EINVAL, "layer %s: cannot read it: %s",
                                   L->digest, tar_why(c->tar));
    return 0;
}

static int tar_error(struct layer *L, struct archive *a, struct nsbox_err *e)
{
    if (archive_errno(a) == EFBIG)
        return too_big(L, e);
    return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL, "layer %s is not a valid tar archive: %s",
                         L->digest, tar_why(a));
}

/* The layer's next entry into *ent: 1, 0 at its end, -1 (e filled) where the tar is broken.
 * Both passes read the blob so. */
static int next_entry(struct layer *L, struct archive *a, struct archive_entry **ent,
                      struct nsbox_err *e)
{
    int r = archive_read_next_header(a, ent);
    if (r == ARCHIVE_EOF)
        return 0;
    return r == ARCHIVE_OK || r == ARCHIVE_WARN ? 1 : tar_error(L, a, e);
}

static int add_whiteout(struct layer *L, enum nsbox_oci_entry_kind kind, const char *path,
                        struct nsbox_err *e)
{
    if (nsbox_grow(&L->wh, &L->cap_wh, L->n_wh, sizeof *L->wh, 16, 0) < 0)
        return nsbox_err_set(e, NSBOX_E_NOMEM, ENOMEM, "out of memory");
    if (!(L->wh[L->n_wh].path = strdup(path)))
        return nsbox_err_set(e, NSBOX_E_NOMEM, ENOMEM, "out of memory");
    L->wh[L->n_wh++].kind = kind;
    return 0;
}

/* The checked relative path of an entry (1: skip it). */
static int entry_path(struct layer *L, const char *raw, char *out, enum nsbox_oci_entry_kind *k,
                      struct nsbox_err *e)
{
    int r = raw ? nsbox_ocimanifest_entry_path(raw, out, PATH_MAX, k) : -1;
    if (r < 0)
        return nsbox_err_set(e, NSBOX_E_INVALID, EPERM,
                             "layer %s: refused entry '%s': an absolute path, a '..' component "
                             "or a path too long or deep would leave the image",
                             L->digest, NSBOX_SHOW(raw ? raw : "(unreadable name)"));
    return r;
}

static int extract_one(struct layer *L, struct archive *a, struct archive_entry *ent, char *name,
                       struct nsbox_err *e);

/* overlayfs's form, in this layer's own directory: a whiteout is a 0/0 character device (which
 * the kernel lets any user make), an opaque directory is marked with an xattr. A whiteout of a
 * name this layer has made already is not made: an entry of the same name in the same layer
 * wins, wherever it is in the tar (and one that comes after the whiteout replaces it). A
 * layer's own device nodes are never unpacked, so every such device here is one of these. */
static int overlay_whiteout(struct layer *L, enum nsbox_oci_entry_kind kind, char *path,
                            struct nsbox_err *e)
{
    if (kind == NSBOX_OCI_ENTRY_OPAQUE) {
        cleanup_close int dfd = nsbox_oci_layer_open_dir(L->root_fd, path, true);
        cleanup_close int rfd = dfd < 0 ? -1 : openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (rfd < 0 || fsetxattr(rfd, NSBOX_OCI_OPAQUE_XATTR, "y", 1, 0) < 0)
            return nsbox_err_sys(e, "layer %s: opaque directory /%s", L->digest, path);
        return 0;
    }
    const char *parent, *base;
    split(path, &parent, &base);
    cleanup_close int pfd = nsbox_oci_layer_open_dir(L->root_fd, parent, true);
    struct stat st;
    if (pfd >= 0 && fstatat(pfd, base, &st, AT_SYMLINK_NOFOLLOW) == 0)
        return 0;
    if (pfd < 0 || mknodat(pfd, base, S_IFCHR | 0600, makedev(0, 0)) < 0)
        return nsbox_err_sys(e, "layer %s: whiteout of /%s%s%s", L->digest, parent,
                             parent[0] ? "/" : "", base);
    return 0;
}

/* Add n to a total of the image: this layer's alone (*own, on top of the layers before it), or
 * the total of all the layers unpacked beside it. The new total. */
static uint64_t charge(struct layer *L, bool entries, uint64_t *own, uint64_t n)
{
    struct nsbox_oci_layer_shared *sh = L->form ? L->form->shared : NULL;
    if (!sh)
        return *own += n;
    return atomic_fetch_add(entries ? &sh->entries : &sh->bytes, n) + n;
}

/* Another layer of the image failed: this one stops too, and keeps nothing. */
static bool stopped(struct layer *L, struct nsbox_err *e)
{
    struct nsbox_oci_layer_shared *sh = L->form ? L->form->shared : NULL;
    if (!sh || !atomic_load(&sh->cancel))
        return false;
    nsbox_err_set(e, NSBOX_E_INVALID, ECANCELED,
                  "layer %s: stopped, another layer of the image failed", L->digest);
    return true;
}

/* An entry's checks: its name (and a hard link's target), then the image's limits, charged
 * with it. 0, 1 to skip it, or -1. */
static int check_entry(struct layer *L, struct archive_entry *ent, char *path,
                       enum nsbox_oci_entry_kind *k, uint64_t *entries, uint64_t *bytes,
                       struct nsbox_err *e)
{
    int p = entry_path(L, archive_entry_pathname(ent), path, k, e);
    if (p < 0)
        return -1;
    const char *hl = archive_entry_hardlink(ent);
    if (hl) {
        char t[PATH_MAX];
        enum nsbox_oci_entry_kind tk;
        if (entry_path(L, hl, t, &tk, e) < 0)
            return -1;
        if (tk != NSBOX_OCI_ENTRY_PLAIN)
            return nsbox_err_set(e, NSBOX_E_INVALID, EPERM, "layer %s: a hard link to a whiteout",
                                 L->digest);
    }
    if (stopped(L, e))
        return -1;
    if (charge(L, true, entries, 1) > L->lim->max_entries)
        return nsbox_err_set(e, NSBOX_E_INVALID, E2BIG,
                             "image has more than %llu entries (NSBOX_OCI_MAX_ENTRIES)",
                             (unsigned long long)L->lim->max_entries);
    uint64_t n = archive_entry_size(ent) > 0 ? (uint64_t)archive_entry_size(ent) : 0;
    if (charge(L, false, bytes, n) > L->lim->max_bytes)
        return nsbox_err_set(e, NSBOX_E_INVALID, EFBIG,
                             "image unpacks to more than %llu bytes (NSBOX_OCI_MAX_BYTES)",
                             (unsigned long long)L->lim->max_bytes);
    return p;
}

/* Check every name, count, and verify the digests. Without unpack (a merged layer's first
 * pass), nothing is written: the whiteouts are collected, to remove what lower layers put there
 * before this layer's entries are written. With it (the overlay form, where whiteouts are this
 * layer's own entries), every entry is written as it comes, in one reading of the blob: a
 * mismatch is found at its end, and the caller removes the layer's directory. */
static int scan(struct layer *L, int blob_fd, int64_t size, bool unpack, struct nsbox_err *e)
{
    struct chain c = {0};
    int rc = -1;
    bool finished = false;
    char got[NSBOX_OCI_DIGEST_LEN + 1], diff[NSBOX_OCI_DIGEST_LEN + 1];
    uint64_t blob_bytes = 0;
    struct archive *a = NULL;
    struct nsbox_oci_layer_shared *sh = L->form ? L->form->shared : NULL;
    uint64_t before = atomic_load(&L->inflated);
    struct nsbox_oci_stream_bound bound = {sh ? &sh->inflated : &L->inflated, L->lim->max_bytes,
                                           size >= 0 ? (uint64_t)size : NSBOX_OCI_STREAM_NO_SIZE};
    if (open_chain(L, &c, blob_fd, &bound, e) < 0)
        goto out;
    a = c.tar;
    struct archive_entry *ent;
    char path[PATH_MAX];
    uint64_t bytes = L->st->bytes, entries = L->st->entries;
    for (;;) {
        int r = next_entry(L, a, &ent, e);
        if (r < 0)
            goto out;
        if (r == 0)
            break;
        enum nsbox_oci_entry_kind k;
        int p = check_entry(L, ent, path, &k, &entries, &bytes, e);
        if (p < 0)
            goto out;
        if (!unpack) {
            if (p == 0 && k != NSBOX_OCI_ENTRY_PLAIN && add_whiteout(L, k, path, e) < 0)
                goto out;
            continue; /* data is read (and hashed) by the next call */
        }
        L->st->entries++;
        if (p == 0 && (k != NSBOX_OCI_ENTRY_PLAIN ? overlay_whiteout(L, k, path, e)
                                                  : extract_one(L, a, ent, path, e)) < 0)
            goto out;
    }
    if (nsbox_oci_stream_finish(c.stream, got, diff, &blob_bytes, e) < 0) {
        if (e->sys_errno == EFBIG)
            too_big(L, e);
        else
            nsbox_err_wrap(e, "layer %s is not a valid tar archive", L->digest);
        goto out;
    }
    L->own_inflated = atomic_load(&L->inflated) - before; /* merged: read alone */
    finished = true;
    if (strcmp(diff, L->diff_id) != 0) {
        nsbox_err_set(e, NSBOX_E_INVALID, EBADMSG,
                      "digest mismatch: layer %s unpacks to sha256 %s, the image config says "
                      "%s; nothing was kept",
                      L->digest, diff + 7, L->diff_id);
        goto out;
    }
    if (strcmp(got, L->digest) != 0 || (size >= 0 && blob_bytes != (uint64_t)size)) {
        nsbox_err_set(e, NSBOX_E_INVALID, EBADMSG,
                      "digest mismatch: layer %s has sha256 %s and %llu bytes (expected %lld): "
                      "the blob is corrupt or was tampered with; nothing was kept",
                      L->digest, got + 7, (unsigned long long)blob_bytes, (long long)size);
        goto out;
    }
    rc = 0;
out:
    /* a corrupt blob usually breaks the tar or the compression first: say what it is */
    if (rc < 0 && !finished && e->code != NSBOX_E_NOMEM && e->sys_errno != ECANCELED &&
        c.stream && nsbox_oci_stream_blob_digest(c.stream, got) == 0 &&
        strcmp(got, L->digest) != 0)
        nsbox_err_set(e, NSBOX_E_INVALID, EBADMSG,
                      "digest mismatch: layer %s has sha256 %s: the blob is corrupt or was "
                      "tampered with; nothing was kept",
                      L->digest, got + 7);
    close_chain(&c);
    return rc;
}

static int apply_whiteouts(struct layer *L, struct nsbox_err *e)
{
    for (size_t i = 0; i < L->n_wh; i++) {
        char *path = L->wh[i].path;
        if (L->wh[i].kind == NSBOX_OCI_ENTRY_OPAQUE) {
            cleanup_close int dfd = nsbox_oci_layer_open_dir(L->root_fd, path, false);
            if (dfd < 0)
                continue; /* nothing below to hide */
            if (empty_dir(dfd) < 0)
                return nsbox_err_sys(e, "layer %s: opaque directory /%s", L->digest, path);
            continue;
        }
        const char *parent, *base;
        split(path, &parent, &base);
        cleanup_close int pfd = nsbox_oci_layer_open_dir(L->root_fd, parent, false);
        if (pfd < 0)
            continue;
        if (remove_entry(pfd, base) < 0)
            return nsbox_err_sys(e, "layer %s: whiteout of /%s%s%s", L->digest, parent,
                                 parent[0] ? "/" : "", base);
    }
    return 0;
}

static int write_data(struct layer *L, struct archive *a, int fd, int64_t size,
                      struct nsbox_err *e)
{
    const void *buf;
    size_t len;
    la_int64_t off;
    int r;
    uint64_t end = 0; /* the furthest byte written */
    while ((r = archive_read_data_block(a, &buf, &len, &off)) == ARCHIVE_OK) {
        if (off < 0 || (uint64_t)off + len > (uint64_t)(size < 0 ? 0 : size))
            return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL,
                                 "layer %s: an entry's data exceeds its size", L->digest);
        const char *p = buf;
        while (len > 0) {
            ssize_t w = pwrite(fd, p, len, off);
            if (w < 0) {
                if (errno == EINTR)
                    continue;
                if (errno == ENOSPC || errno == EDQUOT)
                    return nsbox_err_set(e, NSBOX_E_NOSPACE, errno,
                                         "out of disk space while unpacking layer %s", L->digest);
                return nsbox_err_sys(e, "layer %s: write", L->digest);
            }
            p += w;
            off += w;
            len -= (size_t)w;
        }
        if ((uint64_t)off > end)
            end = (uint64_t)off;
    }
    if (r != ARCHIVE_EOF)
        return tar_error(L, a, e);
    /* a sparse file's hole at its end: the only case where the size is not written already */
    if (size > 0 && end < (uint64_t)size && ftruncate(fd, size) < 0)
        return nsbox_err_sys(e, "layer %s: truncate", L->digest);
    return 0;
}

/* The entry's mtime (and atime), on fd when it is open (base NULL), else on pfd/base. */
static void set_times(int pfd, const char *base, struct archive_entry *ent)
{
    if (!archive_entry_mtime_is_set(ent))
        return; /* nothing to set: the creation's time stays */
    struct timespec ts[2];
    ts[1].tv_sec = archive_entry_mtime(ent);
    ts[1].tv_nsec = archive_entry_mtime_nsec(ent);
    ts[0] = ts[1];
    if (base)
        utimensat(pfd, base, ts, AT_SYMLINK_NOFOLLOW);
    else
        futimens(pfd, ts);
}

/* As root, the owner the layer gives, as an image id (NSBOX_IMAGE_ID_BASE + N): a sandbox sees
 * it as its own id N through an idmapped mount. Before any chmod (a chown clears set-id bits,
 * which are dropped anyway). A failure leaves host root, which a sandbox sees as nobody, the
 * owner of every file before images kept theirs. On fd when it is open (base NULL). */
static void set_owner(const struct layer *L, int pfd, const char *base,
                      struct archive_entry *ent)
{
    if (!L->root)
        return;
    la_int64_t uid = archive_entry_uid(ent), gid = archive_entry_gid(ent);
    uid_t u = nsbox_idmap_image_owner(uid < 0 ? 65534 : (uint64_t)uid);
    gid_t g = nsbox_idmap_image_owner(gid < 0 ? 65534 : (uint64_t)gid);
    int r = base ? fchownat(pfd, base, u, g, AT_SYMLINK_NOFOLLOW) : fchown(pfd, u, g);
    (void)r;
}

static int copy_data(int src, int dst)
{
    for (;;) {
        ssize_t n = copy_file_range(src, NULL, dst, NULL, 1u << 30, 0);
        if (n == 0)
            return 0;
        if (n > 0)
            continue;
        if (errno == EINTR)
            continue;
        if (errno != EXDEV && errno != ENOSYS && errno != EOPNOTSUPP && errno != EINVAL)
            return -1;
        char buf[65536];
        ssize_t r;
        off_t at = lseek(dst, 0, SEEK_CUR);
        while ((r = read(src, buf, sizeof buf)) > 0) {
            if (nsbox_pwrite_all(dst, buf, (size_t)r, at) < 0)
                return -1;
            at += r;
        }
        return r < 0 ? -1 : 0;
    }
}

/* A hard link's target that is not in this layer (a layer alone cannot link across layers):
 * copied up from the highest lower layer that has it, as overlayfs copies a file up before a
 * change, so that both names are one file here. A whiteout on the way ends the search. 0
 * copied, 1 not found. */
static int copy_up(struct layer *L, const char *parent, const char *base, struct nsbox_err *e)
{
    if (!L->lowers_asked && L->form->lowers) {
        L->lowers_asked = true;
        if (L->form->lowers(L->form->ctx, &L->lower_fds, &L->n_lower, e) < 0)
            return nsbox_err_wrap(e, "layer %s: a hard link to a file of a layer below", L->digest);
    }
    for (size_t i = 0; i < L->n_lower; i++) {
        cleanup_close int lp = openat2_in_root(L->lower_fds[i], parent, O_PATH | O_DIRECTORY);
        struct stat st;
        if (lp < 0 || fstatat(lp, base, &st, AT_SYMLINK_NOFOLLOW) < 0)
            continue;
        if (!S_ISREG(st.st_mode))
            return 1; /* a whiteout, or not a file */
        cleanup_close int src = openat(lp, base, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        cleanup_close int dp = nsbox_oci_layer_open_dir(L->root_fd, parent, true);
        cleanup_close int dst =
            dp < 0 ? -1
                   : openat(dp, base, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (src < 0 || dst < 0 || copy_data(src, dst) < 0)
            return errno == ENOSPC || errno == EDQUOT
                       ? nsbox_err_set(e, NSBOX_E_NOSPACE, errno,
                                       "out of disk space while unpacking layer %s", L->digest)
                       : nsbox_err_sys(e, "layer %s: copy up /%s/%s", L->digest, parent, base);
        if (L->root) {
            int r = fchown(dst, st.st_uid, st.st_gid); /* an image id already */
            (void)r;
        }
        struct timespec ts[2] = {st.st_atim, st.st_mtim};
        if (fchmod(dst, st.st_mode & 07777) < 0 || futimens(dst, ts) < 0)
            return nsbox_err_sys(e, "layer %s: copy up /%s/%s", L->digest, parent, base);
        L->st->bytes += (uint64_t)st.st_size;
        return 0;
    }
    return 1;
}

/* A hard link: to a file of this layer, or (overlay form) of a lower one, copied up. */
static int hard_link(struct layer *L, int pfd, const char *path, const char *base, const char *hl,
                     struct nsbox_err *e)
{
    char t[PATH_MAX];
    enum nsbox_oci_entry_kind tk;
    if (nsbox_ocimanifest_entry_path(hl, t, sizeof t, &tk) != 0)
        return nsbox_err_set(e, NSBOX_E_INVALID, EPERM, "layer %s: bad hard link", L->digest);
    const char *tparent, *tbase;
    split(t, &tparent, &tbase);
    cleanup_close int tfd = nsbox_oci_layer_open_dir(L->root_fd, tparent, false);
    struct stat ts;
    bool found = tfd >= 0 && fstatat(tfd, tbase, &ts, AT_SYMLINK_NOFOLLOW) == 0;
    if (!found && overlay_form(L)) {
        int r = copy_up(L, tparent, tbase, e);
        if (r < 0)
            return -1;
        nsbox_closep(&tfd);
        tfd = r == 0 ? nsbox_oci_layer_open_dir(L->root_fd, tparent, false) : -1;
        found = tfd >= 0 && fstatat(tfd, tbase, &ts, AT_SYMLINK_NOFOLLOW) == 0;
    }
    if (!found || S_ISDIR(ts.st_mode) || S_ISCHR(ts.st_mode) || S_ISBLK(ts.st_mode))
        return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL,
                             "layer %s: hard link /%s points at /%s, which is not a file of "
                             "the image",
                             L->digest, path, NSBOX_SHOW(hl));
    if (linkat(tfd, tbase, pfd, base, 0) < 0)
        return nsbox_err_sys(e, "layer %s: hard link /%s", L->digest, path);
    return 0;
}

/* The directory `parent` of the layer, created if missing: a descriptor the layer keeps (the
 * last one asked for), or -1 with errno. */
static int parent_dir(struct layer *L, const char *parent)
{
    if (L->parent_valid && !strcmp(L->parent, parent))
        return L->parent_fd;
    nsbox_closep(&L->parent_fd);
    L->parent_fd = nsbox_oci_layer_open_dir(L->root_fd, parent, true);
    L->parent_valid = L->parent_fd >= 0;
    if (L->parent_valid)
        snprintf(L->parent, sizeof L->parent, "%s", parent);
    return L->parent_fd;
}

/* Remove what an entry replaces; the remembered directory may have gone with it. */
static int replace(struct layer *L, int pfd, const char *base)
{
    L->parent_valid = false; /* pfd stays open for this entry; the next resolves again */
    return remove_entry(pfd, base);
}

static int extract_dir(struct layer *L, struct archive_entry *ent, int pfd, const char *path,
                       const char *base, mode_t perm, struct nsbox_err *e)
{
    if (!L->root)
        perm |= S_IRWXU;
    bool chmod_needed = (perm & ~L->umask) != perm;
    if (mkdirat(pfd, base, perm) < 0) {
        struct stat old;
        if (errno != EEXIST || fstatat(pfd, base, &old, AT_SYMLINK_NOFOLLOW) < 0)
            return nsbox_err_sys(e, "layer %s: mkdir /%s", L->digest, path);
        chmod_needed = true;
        if (!S_ISDIR(old.st_mode) && (replace(L, pfd, base) < 0 || mkdirat(pfd, base, perm) < 0))
            return nsbox_err_sys(e, "layer %s: replace /%s", L->digest, path);
    }
    set_owner(L, pfd, base, ent);
    if (chmod_needed && fchmodat(pfd, base, perm, 0) < 0)
        return nsbox_err_sys(e, "layer %s: chmod /%s", L->digest, path);
    return 0;
}

/* A regular file: created with its mode (when the umask keeps it whole), written, owned and
 * timed through its descriptor; a name in the way is replaced only when the create finds it. */
static int extract_file(struct layer *L, struct archive *a, struct archive_entry *ent, int pfd,
                        const char *path, const char *base, mode_t perm, struct nsbox_err *e)
{
    bool chmod_needed = (perm & ~L->umask) != perm;
    int flags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
    mode_t mode = chmod_needed ? 0600 : perm;
    cleanup_close int fd = openat(pfd, base, flags, mode);
    if (fd < 0 && errno == EEXIST) {
        if (replace(L, pfd, base) < 0)
            return nsbox_err_sys(e, "layer %s: replace /%s", L->digest, path);
        fd = openat(pfd, base, flags, mode);
    }
    if (fd < 0)
        return nsbox_err_sys(e, "layer %s: create /%s", L->digest, path);
    if (write_data(L, a, fd, archive_entry_size(ent), e) < 0)
        return -1;
    set_owner(L, fd, NULL, ent);
    if (chmod_needed && fchmod(fd, perm) < 0)
        return nsbox_err_sys(e, "layer %s: chmod /%s", L->digest, path);
    set_times(fd, NULL, ent);
    L->st->bytes += archive_entry_size(ent) > 0 ? (uint64_t)archive_entry_size(ent) : 0;
    return 0;
}

static int extract_one(struct layer *L, struct archive *a, struct archive_entry *ent, char *name,
                       struct nsbox_err *e)
{
    char path[PATH_MAX]; /* whole, for messages: name is split in two */
    snprintf(path, sizeof path, "%s", name);
    const char *parent, *base;
    split(name, &parent, &base);
    int pfd = parent_dir(L, parent);
    if (pfd < 0)
        return nsbox_err_sys(e, "layer %s: directory /%s", L->digest, parent);
    mode_t perm = archive_entry_perm(ent) & 07777 & ~(mode_t)(S_ISUID | S_ISGID);
    mode_t type = archive_entry_filetype(ent);
    const char *hl = archive_entry_hardlink(ent);
    if (!hl && type == AE_IFDIR)
        return extract_dir(L, ent, pfd, path, base, perm, e);
    if (!hl && type == AE_IFREG)
        return extract_file(L, a, ent, pfd, path, base, perm, e);
    if (!hl && type != AE_IFLNK && type != AE_IFIFO) {
        L->st->skipped++; /* device nodes, sockets: a sandbox gets nsbox's /dev */
        return 0;
    }
    if (!hl && type == AE_IFLNK) {
        const char *target = archive_entry_symlink(ent);
        if (!target || !target[0] || strlen(target) >= PATH_MAX)
            return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL, "layer %s: bad symlink /%s",
                                 L->digest, path);
        int r = symlinkat(target, pfd, base);
        if (r < 0 && errno == EEXIST) {
            if (replace(L, pfd, base) < 0)
                return nsbox_err_sys(e, "layer %s: replace /%s", L->digest, path);
            r = symlinkat(target, pfd, base);
        }
        if (r < 0)
            return nsbox_err_sys(e, "layer %s: symlink /%s", L->digest, path);
        set_owner(L, pfd, base, ent);
        set_times(pfd, base, ent);
        return 0;
    }
    struct stat old;
    if (fstatat(pfd, base, &old, AT_SYMLINK_NOFOLLOW) == 0 && replace(L, pfd, base) < 0)
        return nsbox_err_sys(e, "layer %s: replace /%s", L->digest, path);
    if (hl)
        return hard_link(L, pfd, path, base, hl, e);
    if (mknodat(pfd, base, S_IFIFO | perm, 0) < 0)
        return nsbox_err_sys(e, "layer %s: fifo /%s", L->digest, path);
    set_owner(L, pfd, base, ent);
    return fchmodat(pfd, base, perm, 0) < 0
               ? nsbox_err_sys(e, "layer %s: chmod /%s", L->digest, path)
               : 0;
}

/* Pass 2: the entries, onto the root. The blob is hashed again: it must be what pass 1
 * verified. */
static int extract(struct layer *L, int blob_fd, struct nsbox_err *e)
{
    if (lseek(blob_fd, 0, SEEK_SET) < 0)
        return nsbox_err_sys(e, "layer %s: seek", L->digest);
    struct chain c = {0};
    int rc = -1;
    struct archive *a = NULL;
    /* the same bytes as the first reading, or it fails */
    _Atomic uint64_t again = 0;
    struct nsbox_oci_stream_bound bound = {
        &again, L->own_inflated, L->size >= 0 ? (uint64_t)L->size : NSBOX_OCI_STREAM_NO_SIZE};
    if (open_chain(L, &c, blob_fd, &bound, e) < 0)
        goto out;
    a = c.tar;
    struct archive_entry *ent;
    char path[PATH_MAX];
    for (;;) {
        int r = next_entry(L, a, &ent, e);
        if (r < 0)
            goto out;
        if (r == 0)
            break;
        L->st->entries++;
        if (stopped(L, e))
            goto out;
        enum nsbox_oci_entry_kind k;
        int p = entry_path(L, archive_entry_pathname(ent), path, &k, e);
        if (p < 0)
            goto out;
        if (p > 0 || k != NSBOX_OCI_ENTRY_PLAIN)
            continue;
        if (extract_one(L, a, ent, path, e) < 0)
            goto out;
    }
    char got[NSBOX_OCI_DIGEST_LEN + 1], diff[NSBOX_OCI_DIGEST_LEN + 1];
    uint64_t blob_bytes;
    if (nsbox_oci_stream_finish(c.stream, got, diff, &blob_bytes, e) < 0 ||
        strcmp(got, L->digest) != 0 || strcmp(diff, L->diff_id) != 0) {
        nsbox_err_set(e, NSBOX_E_INVALID, EBADMSG, "layer %s changed while it was unpacked",
                      L->digest);
        goto out;
    }
    rc = 0;
out:
    close_chain(&c);
    return rc;
}

int nsbox_oci_layer_apply(int root_fd, int blob_fd, const char *digest, const char *diff_id,
                          int64_t size, const struct nsbox_oci_limits *lim,
                          const struct nsbox_oci_layer_form *form, struct nsbox_oci_layer_stats *st,
                          struct nsbox_err *e)
{
    struct layer L = {.root_fd = root_fd,
                      .digest = digest,
                      .diff_id = diff_id,
                      .lim = lim,
                      .st = st,
                      .form = form,
                      .root = geteuid() == 0,
                      .umask = nsbox_oci_layer_umask(),
                      .parent_fd = -1,
                      .size = size,
                      .inflated = st->inflated};
    int r = scan(&L, blob_fd, size, overlay_form(&L), e);
    st->inflated = atomic_load(&L.inflated);
    if (r == 0 && !overlay_form(&L))
        r = apply_whiteouts(&L, e);
    if (r == 0 && !overlay_form(&L))
        r = extract(&L, blob_fd, e);
    for (size_t i = 0; i < L.n_wh; i++)
        free(L.wh[i].path);
    free(L.wh);
    nsbox_closep(&L.parent_fd);
    return r;
}
