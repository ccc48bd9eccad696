/* OCI images in the store: import, references, removal. See oci_store.h. */
#include "oci_store.h"
#include "cleanup.h"
#include "idmap.h"
#include "image.h"
#include "imagelibs.h"
#include "oci_etc.h"
#include "oci_layer.h"
#include "oci_layers.h"
#include "oci_overlay.h"
#include "ocimanifest.h"
#include "paths.h"
#include "util.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#define SHOW(t) NSBOX_SHOW(t)
#define MEMBERS_MAX 100000

/* ---- a source: a layout directory, or an archive's members staged by their digest -------- */

struct member {
    char *name;
    char digest[NSBOX_OCI_DIGEST_LEN + 1];
};

struct source {
    int dir_fd; /* the layout, or the staging directory (members in blobs/sha256/) */
    struct member *m;
    size_t n, cap;
    bool archive;
};

static void source_free(struct source *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->m[i].name);
    free(s->m);
    nsbox_closep(&s->dir_fd);
}

static int openat_beneath(int dfd, const char *path, int flags)
{
    struct open_how how = {.flags = (uint64_t)(flags | O_CLOEXEC),
                           .resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS};
    return nsbox_openat2(dfd, path, &how);
}

static const char *member_digest(const struct source *s, const char *name)
{
    while (name[0] == '.' && name[1] == '/')
        name += 2;
    for (size_t i = 0; i < s->n; i++)
        if (!strcmp(s->m[i].name, name))
            return s->m[i].digest;
    return NULL;
}

static int open_blob(const struct source *s, const char *digest)
{
    char path[128];
    snprintf(path, sizeof path, "blobs/sha256/%s", digest + 7);
    return openat_beneath(s->dir_fd, path, O_RDONLY);
}

/* A whole small blob, verified against its digest. */
static char *read_blob(const struct source *s, const char *digest, size_t *len,
                       const char *what, struct nsbox_err *e)
{
    cleanup_close int fd = open_blob(s, digest);
    if (fd < 0) {
        nsbox_err_set(e, NSBOX_E_INVALID, errno, "%s %s is missing from the image (%s)", what,
                      digest, strerror(errno));
        return NULL;
    }
    cleanup_free char *buf = malloc(NSBOX_OCI_JSON_MAX + 2);
    if (!buf) {
        nsbox_err_set(e, NSBOX_E_NOMEM, ENOMEM, "out of memory");
        return NULL;
    }
    size_t n = nsbox_read_bounded(fd, buf, NSBOX_OCI_JSON_MAX + 2);
    if (n > NSBOX_OCI_JSON_MAX) {
        nsbox_err_set(e, NSBOX_E_INVALID, EFBIG, "%s %s is larger than %u bytes", what, digest,
                      NSBOX_OCI_JSON_MAX);
        return NULL;
    }
    buf[n] = '\0';
    unsigned char d[EVP_MAX_MD_SIZE];
    unsigned dl = 0;
    char got[NSBOX_OCI_DIGEST_LEN + 1] = "sha256:";
    EVP_Digest(buf, n, d, &dl, EVP_sha256(), NULL);
    for (unsigned i = 0; i < dl && i < 32; i++)
        snprintf(got + 7 + 2 * i, 3, "%02x", d[i]);
    if (strcmp(got, digest) != 0) {
        nsbox_err_set(e, NSBOX_E_INVALID, EBADMSG,
                      "digest mismatch: %s %s has sha256 %s: the image is corrupt or was "
                      "tampered with; nothing was kept",
                      what, digest, got + 7);
        return NULL;
    }
    *len = n;
    return nsbox_steal_ptr(&buf);
}

/* A small named file of the source (index.json, manifest.json): not content-addressed. */
static char *read_named(const struct source *s, const char *name, size_t *len,
                        struct nsbox_err *e)
{
    cleanup_close int fd = -1;
    if (s->archive) {
        const char *d = member_digest(s, name);
        if (!d) {
            errno = ENOENT;
            return NULL;
        }
        fd = open_blob(s, d);
    } else {
        fd = openat_beneath(s->dir_fd, name, O_RDONLY);
    }
    if (fd < 0)
        return NULL;
    cleanup_free char *buf = malloc(NSBOX_OCI_JSON_MAX + 2);
    if (!buf) {
        nsbox_err_set(e, NSBOX_E_NOMEM, ENOMEM, "out of memory");
        errno = ENOMEM;
        return NULL;
    }
    size_t n = nsbox_read_bounded(fd, buf, NSBOX_OCI_JSON_MAX + 2);
    if (n > NSBOX_OCI_JSON_MAX) {
        nsbox_err_set(e, NSBOX_E_INVALID, EFBIG, "%s is larger than %u bytes", name,
                      NSBOX_OCI_JSON_MAX);
        errno = EFBIG;
        return NULL;
    }
    buf[n] = '\0';
    *len = n;
    return nsbox_steal_ptr(&buf);
}

static int add_member(struct source *s, const char *name, const char *digest,
                      struct nsbox_err *e)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 32;
        struct member *v = realloc(s->m, cap * sizeof *v);
        if (!v)
            return nsbox_err_set(e, NSBOX_E_NOMEM, ENOMEM, "out of memory");
        s->m = v;
        s->cap = cap;
    }
    if (!(s->m[s->n].name = strdup(name)))
        return nsbox_err_set(e, NSBOX_E_NOMEM, ENOMEM, "out of memory");
    snprintf(s->m[s->n++].digest, NSBOX_OCI_DIGEST_LEN + 1, "%s", digest);
    return 0;
}

/* Copy one archive member into staging as blobs/sha256/<its sha256>. */
static int stage_member(struct archive *a, int stage_fd, int blobs_fd, const char *name,
                        uint64_t *total, const struct nsbox_oci_limits *lim, char *digest,
                        struct nsbox_err *e)
{
    cleanup_close int fd = openat(stage_fd, "incoming", O_RDWR | O_CREAT | O_TRUNC | O_NOFOLLOW |
                                  O_CLOEXEC, 0600);
    if (fd < 0)
        return nsbox_err_sys(e, "cannot stage %s", name);
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    if (!md || EVP_DigestInit_ex(md, EVP_sha256(), NULL) != 1) {
        EVP_MD_CTX_free(md);
        return nsbox_err_set(e, NSBOX_E_NOMEM, ENOMEM, "out of memory");
    }
    const void *buf;
    size_t len;
    la_int64_t off;
    int r, rc = 0;
    uint64_t pos = 0;
    while ((r = archive_read_data_block(a, &buf, &len, &off)) == ARCHIVE_OK) {
        if ((uint64_t)off != pos) { /* members are hashed as a stream: no sparse files */
            rc = nsbox_err_set(e, NSBOX_E_INVALID, EINVAL, "archive member %s is sparse",
                               SHOW(name));
            break;
        }
        *total += len;
        if (*total > lim->max_bytes) {
            rc = nsbox_err_set(e, NSBOX_E_INVALID, EFBIG,
                               "archive is larger than %llu bytes (NSBOX_OCI_MAX_BYTES)",
                               (unsigned long long)lim->max_bytes);
            break;
        }
        EVP_DigestUpdate(md, buf, len);
        if (nsbox_pwrite_all(fd, buf, len, (off_t)pos) < 0) {
            rc = errno == ENOSPC ? nsbox_err_set(e, NSBOX_E_NOSPACE, ENOSPC,
                                                 "out of disk space while reading the archive")
                                 : nsbox_err_sys(e, "cannot stage %s", name);
            break;
        }
        pos += len;
    }
    if (rc == 0 && r != ARCHIVE_EOF)
        rc = nsbox_err_set(e, NSBOX_E_INVALID, EINVAL, "archive member %s: %s", SHOW(name),
                           archive_error_string(a) ? archive_error_string(a) : "read error");
    unsigned char d[EVP_MAX_MD_SIZE];
    unsigned dl = 0;
    EVP_DigestFinal_ex(md, d, &dl);
    EVP_MD_CTX_free(md);
    if (rc < 0)
        return rc;
    strcpy(digest, "sha256:");
    for (unsigned i = 0; i < dl && i < 32; i++)
        snprintf(digest + 7 + 2 * i, 3, "%02x", d[i]);
    if (renameat(stage_fd, "incoming", blobs_fd, digest + 7) < 0)
        return nsbox_err_sys(e, "cannot stage %s", name);
    return 0;
}

/* The members of an archive (any of the three formats) into staging, each by its sha256. A
 * member named blobs/sha256/<hex> must have that digest. */
static int stage_archive(int in_fd, int stage_fd, struct source *s, struct nsbox_err *e)
{
    struct nsbox_oci_limits lim;
    nsbox_oci_layer_limits(&lim);
    if (mkdirat(stage_fd, "blobs", 0700) < 0 || mkdirat(stage_fd, "blobs/sha256", 0700) < 0)
        return nsbox_err_sys(e, "cannot create the staging directory");
    cleanup_close int blobs_fd = openat(stage_fd, "blobs/sha256", O_PATH | O_DIRECTORY | O_CLOEXEC);
    struct archive *a = archive_read_new();
    if (!a || blobs_fd < 0)
        return nsbox_err_set(e, NSBOX_E_NOMEM, ENOMEM, "out of memory");
    archive_read_support_filter_gzip(a);
    archive_read_support_filter_zstd(a);
    archive_read_support_format_tar(a);
    int rc = -1;
    if (archive_read_open_fd(a, in_fd, 128 * 1024) != ARCHIVE_OK) {
        nsbox_err_set(e, NSBOX_E_INVALID, EINVAL, "not a tar archive: %s",
                      archive_error_string(a) ? archive_error_string(a) : "?");
        goto out;
    }
    struct archive_entry *ent;
    uint64_t total = 0;
    char path[PATH_MAX];
    for (;;) {
        int r = archive_read_next_header(a, &ent);
        if (r == ARCHIVE_EOF)
            break;
        if (r != ARCHIVE_OK && r != ARCHIVE_WARN) {
            nsbox_err_set(e, NSBOX_E_INVALID, EINVAL, "not a valid image archive: %s",
                          archive_error_string(a) ? archive_error_string(a) : "?");
            goto out;
        }
        enum nsbox_oci_entry_kind k;
        const char *raw = archive_entry_pathname(ent);
        if (!raw || nsbox_ocimanifest_entry_path(raw, path, sizeof path, &k) < 0) {
            nsbox_err_set(e, NSBOX_E_INVALID, EPERM, "archive: refused member name '%s'",
                          SHOW(raw ? raw : "?"));
            goto out;
        }
        if (archive_entry_filetype(ent) != AE_IFREG || archive_entry_hardlink(ent))
            continue; /* directories; links (old docker save) are not followed */
        if (s->n >= MEMBERS_MAX) {
            nsbox_err_set(e, NSBOX_E_INVALID, E2BIG, "archive has over %d files", MEMBERS_MAX);
            goto out;
        }
        char digest[NSBOX_OCI_DIGEST_LEN + 1];
        if (stage_member(a, stage_fd, blobs_fd, path, &total, &lim, digest, e) < 0)
            goto out;
        if (!strncmp(path, "blobs/sha256/", 13) && strcmp(path + 13, digest + 7) != 0) {
            nsbox_err_set(e, NSBOX_E_INVALID, EBADMSG,
                          "digest mismatch: archive member %s has sha256 %s: the image is "
                          "corrupt or was tampered with; nothing was kept",
                          SHOW(path), digest + 7);
            goto out;
        }
        if (add_member(s, path, digest, e) < 0)
            goto out;
    }
    rc = 0;
out:
    archive_read_free(a);
    return rc;
}

/* ---- what to unpack --------------------------------------------------------------------- */

struct plan {
    char manifest_digest[NSBOX_OCI_DIGEST_LEN + 1];
    char *manifest_text; /* the manifest (OCI) or NULL (docker save's manifest.json) */
    size_t manifest_len;
    char config_digest[NSBOX_OCI_DIGEST_LEN + 1];
    char *config_text;
    size_t config_len;
    struct nsbox_oci_config cfg;
    size_t n_layers;
    struct {
        char digest[NSBOX_OCI_DIGEST_LEN + 1];
        int64_t size;
    } layers[NSBOX_OCI_LAYERS_MAX];
    char repo_tag[NSBOX_OCIREF_MAX + 1];
};

static void plan_free(struct plan *p)
{
    free(p->manifest_text);
    free(p->config_text);
    nsbox_ocimanifest_config_free(&p->cfg);
}

static const char *host_arch(void)
{
    struct utsname u;
    static char arch[32];
    if (uname(&u) < 0)
        return "amd64";
    if (!strcmp(u.machine, "x86_64"))
        return "amd64";
    if (!strcmp(u.machine, "aarch64"))
        return "arm64";
    snprintf(arch, sizeof arch, "%s", u.machine);
    return arch;
}

static int plan_oci(const struct source *s, const char *index, size_t ilen, struct plan *p,
                    struct nsbox_err *e)
{
    struct nsbox_oci_desc d;
    if (nsbox_ocimanifest_pick(index, ilen, NULL, "linux", host_arch(), &d, e) < 0)
        return nsbox_err_wrap(e, "index.json");
    for (int depth = 0;; depth++) {
        size_t len;
        cleanup_free char *text = read_blob(s, d.digest, &len, "manifest", e);
        if (!text)
            return -1;
        enum nsbox_ocimanifest_kind kind;
        if (nsbox_ocimanifest_kind(text, len, &kind, e) < 0)
            return -1;
        if (kind == NSBOX_OCI_DOC_INDEX) {
            if (depth >= 4)
                return nsbox_err_set(e, NSBOX_E_INVALID, ELOOP, "image indexes nest too deep");
            if (nsbox_ocimanifest_pick(text, len, NULL, "linux", host_arch(), &d, e) < 0)
                return -1;
            continue;
        }
        cleanup_free struct nsbox_oci_manifest *m = malloc(sizeof *m);
        if (!m)
            return nsbox_err_set(e, NSBOX_E_NOMEM, ENOMEM, "out of memory");
        if (nsbox_ocimanifest_parse(text, len, m, e) < 0)
            return -1;
        snprintf(p->manifest_digest, sizeof p->manifest_digest, "%s", d.digest);
        snprintf(p->config_digest, sizeof p->config_digest, "%s", m->config.digest);
        p->n_layers = m->n_layers;
        for (size_t i = 0; i < m->n_layers; i++) {
            strcpy(p->layers[i].digest, m->layers[i].digest);
            p->layers[i].size = m->layers[i].size;
        }
        p->manifest_text = nsbox_steal_ptr(&text);
        p->manifest_len = len;
        if (d.ref_name[0] && strchr(d.ref_name, '/'))
            snprintf(p->repo_tag, sizeof p->repo_tag, "%s", d.ref_name);
        return 0;
    }
}

static int plan_docker(const struct source *s, const char *text, size_t len, struct plan *p,
                       struct nsbox_err *e)
{
    cleanup_free struct nsbox_docker_save *d = malloc(sizeof *d);
    if (!d)
        return nsbox_err_set(e, NSBOX_E_NOMEM, ENOMEM, "out of memory");
    if (nsbox_ocimanifest_docker_save(text, len, NULL, d, e) < 0)
        return -1;
    const char *cd = member_digest(s, d->config);
    if (!cd)
        return nsbox_err_set(e, NSBOX_E_INVALID, ENOENT, "manifest.json names config %s, which "
                             "the archive does not have", SHOW(d->config));
    snprintf(p->config_digest, sizeof p->config_digest, "%s", cd);
    p->n_layers = d->n_layers;
    for (size_t i = 0; i < d->n_layers; i++) {
        const char *ld = member_digest(s, d->layers[i]);
        if (!ld)
            return nsbox_err_set(e, NSBOX_E_INVALID, ENOENT, "manifest.json names layer %s, "
                                 "which the archive does not have", SHOW(d->layers[i]));
        strcpy(p->layers[i].digest, ld);
        p->layers[i].size = -1;
    }
    snprintf(p->repo_tag, sizeof p->repo_tag, "%s", d->repo_tag);
    return 0;
}

static int make_plan(const struct source *s, struct plan *p, struct nsbox_err *e)
{
    size_t len;
    struct nsbox_err ne = {0};
    cleanup_free char *index = read_named(s, "index.json", &len, &ne);
    if (index)
        return plan_oci(s, index, len, p, e);
    if (ne.code)
        return *e = ne, -1;
    cleanup_free char *manifest = read_named(s, "manifest.json", &len, &ne);
    if (manifest) {
        if (plan_docker(s, manifest, len, p, e) < 0)
            return -1;
    } else {
        if (ne.code)
            return *e = ne, -1;
        return nsbox_err_set(e, NSBOX_E_INVALID, ENOENT,
                             "not an image: no index.json (OCI layout) nor manifest.json "
                             "(docker save)");
    }
    return 0;
}

static int load_config(const struct source *s, struct plan *p, struct nsbox_err *e)
{
    p->config_text = read_blob(s, p->config_digest, &p->config_len, "config", e);
    if (!p->config_text)
        return -1;
    if (nsbox_ocimanifest_config(p->config_text, p->config_len, &p->cfg, e) < 0)
        return -1;
    if ((p->cfg.os[0] && strcmp(p->cfg.os, "linux")) ||
        (p->cfg.arch[0] && strcmp(p->cfg.arch, host_arch())))
        return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL,
                             "no platform match: the image is for %s/%s, this host is linux/%s",
                             p->cfg.os, p->cfg.arch, host_arch());
    if (p->cfg.n_diff_ids != p->n_layers)
        return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL,
                             "image config lists %zu layers, the manifest %zu",
                             p->cfg.n_diff_ids, p->n_layers);
    /* docker save (manifest.json) layers are uncompressed tars: their digest is the diff_id */
    for (size_t i = 0; !p->manifest_text && i < p->n_layers; i++)
        if (strcmp(p->layers[i].digest, p->cfg.diff_ids[i]) != 0)
            return nsbox_err_set(e, NSBOX_E_INVALID, EBADMSG,
                                 "digest mismatch: layer %zu has sha256 %s, the config says %s; "
                                 "nothing was kept",
                                 i + 1, p->layers[i].digest + 7, p->cfg.diff_ids[i]);
    return 0;
}

/* ---- references ------------------------------------------------------------------------- */

static int refs_dir(char *out, size_t n, struct nsbox_err *e)
{
    char images[PATH_MAX];
    if (nsbox_image_store_dir(images, sizeof images, e) < 0)
        return -1;
    int r = snprintf(out, n, "%s/.refs", images);
    if (r < 0 || (size_t)r >= n)
        return nsbox_err_set(e, NSBOX_E_INVALID, ENAMETOOLONG, "path too long");
    if (mkdir(out, 0755) < 0 && errno != EEXIST)
        return nsbox_err_sys(e, "cannot create %s", out);
    return 0;
}

static int write_ref(const char *ref, const char *name, struct nsbox_err *e)
{
    char dir[PATH_MAX], canon[NSBOX_OCIREF_MAX + 1], file[NSBOX_OCIREF_MAX + 1];
    if (refs_dir(dir, sizeof dir, e) < 0 || nsbox_oci_lookup_ref_file(ref, canon, file, e) < 0)
        return -1;
    cleanup_close int dfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    char tmp[64];
    snprintf(tmp, sizeof tmp, ".new-%d", (int)getpid());
    unlinkat(dfd, tmp, 0);
    if (dfd < 0 || symlinkat(name, dfd, tmp) < 0 || renameat(dfd, tmp, dfd, file) < 0)
        return nsbox_err_sys(e, "cannot tag %s", canon);
    return 0;
}

/* ---- import ------------------------------------------------------------------------------ */

static int image_exists(const char *name)
{
    char images[PATH_MAX], path[PATH_MAX + 80];
    struct nsbox_err ignored; /* no image store: no image; making it says why it cannot be */
    if (nsbox_path_data_dir(images, sizeof images, &ignored) < 0)
        return 0;
    snprintf(path, sizeof path, "%s/images/%s/rootfs", images, name);
    struct stat st;
    return lstat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static int open_layer_blob(const struct source *s, const struct plan *p, size_t i,
                           struct nsbox_err *e)
{
    int fd = open_blob(s, p->layers[i].digest);
    if (fd < 0)
        nsbox_err_set(e, NSBOX_E_INVALID, errno, "layer %s is missing from the image",
                      p->layers[i].digest);
    return fd;
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* A layer done: its size unpacked, the time and the rate, or that it was stored already. */
static void note_layer(bool progress, const struct nsbox_image_txn *t, const struct plan *p,
                       size_t i, uint64_t bytes, uint64_t since, bool stored)
{
    double s = (double)(now_ns() - since) / 1e9, mb = (double)bytes / 1e6;
    if (stored)
        nsbox_image_note(progress, "image %s: layer %zu/%zu %.19s: stored already (%.1f MB)",
                         t->name, i + 1, p->n_layers, p->layers[i].digest, mb);
    else
        nsbox_image_note(progress, "image %s: layer %zu/%zu %.19s: %.1f MB in %.1f s (%.1f MB/s)",
                         t->name, i + 1, p->n_layers, p->layers[i].digest, mb, s,
                         s > 0 ? mb / s : 0.0);
}

/* NSBOX_OCI_LAYOUT=merged, or no overlay for this user: the layers merged into one rootfs/. */
static int unpack_merged(const struct source *s, const struct plan *p, struct nsbox_image_txn *t,
                         const struct nsbox_oci_limits *lim, struct nsbox_oci_layer_stats *st,
                         bool progress, struct nsbox_err *e)
{
    if (mkdirat(t->tmp_fd, "rootfs", 0755) < 0)
        return nsbox_err_sys(e, "cannot create %s/rootfs", t->tmp);
    cleanup_close int root_fd = openat(t->tmp_fd, "rootfs", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (root_fd < 0)
        return nsbox_err_sys(e, "cannot open %s/rootfs", t->tmp);
    for (size_t i = 0; i < p->n_layers; i++) {
        uint64_t since = now_ns(), before = st->bytes;
        cleanup_close int fd = open_layer_blob(s, p, i, e);
        if (fd < 0 || nsbox_oci_layer_apply(root_fd, fd, p->layers[i].digest, p->cfg.diff_ids[i],
                                            p->layers[i].size, lim, NULL, st, e) < 0)
            return -1;
        note_layer(progress, t, p, i, st->bytes - before, since, false);
    }
    return nsbox_oci_etc_write(root_fd, root_fd, e);
}

/* nsbox's /etc files in the image's own top layer, read from the merge of the layers below
 * (chains: their chain ids, bottom first; diffs: their diff/). */
static int write_top(struct nsbox_image_txn *t, char (*chains)[NSBOX_OCI_CHAIN_HEX + 1],
                     const int *diffs, size_t n, struct nsbox_err *e)
{
    if (mkdirat(t->tmp_fd, "top", 0755) < 0 || mkdirat(t->tmp_fd, "rootfs", 0755) < 0)
        return nsbox_err_sys(e, "cannot create %s/top", t->tmp);
    cleanup_close int top = openat(t->tmp_fd, "top", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (top < 0)
        return nsbox_err_sys(e, "cannot open %s/top", t->tmp);
    /* the mount point of the overlay, which sandbox.c finds owned as an image root is */
    if (geteuid() == 0 && fchownat(t->tmp_fd, "rootfs", nsbox_idmap_image_owner(0),
                                   nsbox_idmap_image_owner(0), AT_SYMLINK_NOFOLLOW) < 0)
        return nsbox_err_sys(e, "cannot chown %s/rootfs", t->tmp);
    cleanup_close int view = -1;
    if (n > 1) { /* an overlay needs two layers at least */
        char(*rel)[NSBOX_OCI_CHAIN_HEX + 16] = malloc(n * sizeof *rel);
        const char **rv = malloc(n * sizeof *rv);
        int r = rel && rv ? 0 : nsbox_err_set(e, NSBOX_E_NOMEM, ENOMEM, "out of memory");
        for (size_t i = 0; r == 0 && i < n; i++) {
            snprintf(rel[i], sizeof rel[i], ".layers/%s/diff", chains[n - 1 - i]);
            rv[i] = rel[i];
        }
        if (r == 0)
            r = nsbox_oci_overlay_lowers(t->images, -1, rv, n, &view, e);
        free(rel);
        free(rv);
        if (r < 0)
            return -1;
    }
    int v = n > 1 ? view : n == 1 ? diffs[0] : top;
    return nsbox_oci_etc_write(v, top, e);
}

/* As root: each layer once in the shared store (oci_layers.h), named by the image's `layers`;
 * ls stays open (its lock held) until the image is committed. */
static int unpack_layered(const struct source *s, const struct plan *p, struct nsbox_image_txn *t,
                          struct nsbox_oci_layers *ls, const struct nsbox_oci_limits *lim,
                          struct nsbox_oci_layer_stats *st, bool progress, struct nsbox_err *e)
{
    if (nsbox_oci_layers_open(ls, e) < 0)
        return -1;
    int diffs[NSBOX_OCI_LAYERS_MAX], lowers[NSBOX_OCI_LAYERS_MAX];
    char chain[NSBOX_OCI_CHAIN_HEX + 1] = "";
    cleanup_free char(*chains)[NSBOX_OCI_CHAIN_HEX + 1] =
        malloc(NSBOX_OCI_LAYERS_MAX * sizeof *chains);
    if (!chains)
        return nsbox_err_set(e, NSBOX_E_NOMEM, ENOMEM, "out of memory");
    char text[NSBOX_OCI_LAYERS_MAX * (NSBOX_OCI_CHAIN_HEX + 1) + 1];
    size_t len = 0, got = 0;
    int rc = 0;
    for (size_t i = 0; i < p->n_layers && rc == 0; i++) {
        char parent[NSBOX_OCI_CHAIN_HEX + 1];
        strcpy(parent, chain);
        nsbox_oci_layers_chain(parent, p->cfg.diff_ids[i], chain);
        for (size_t j = 0; j < i; j++)
            lowers[j] = diffs[i - 1 - j];
        uint64_t since = now_ns(), before = st->bytes;
        cleanup_close int fd = open_layer_blob(s, p, i, e);
        int r = fd < 0
                    ? -1
                    : nsbox_oci_layers_get(ls, chain, fd, p->layers[i].digest, p->cfg.diff_ids[i],
                                           p->layers[i].size, lim, lowers, i, st, &diffs[i], e);
        if (r < 0) {
            rc = -1;
            break;
        }
        strcpy(chains[got++], chain);
        note_layer(progress, t, p, i, st->bytes - before, since, r == 1);
        len += (size_t)snprintf(text + len, sizeof text - len, "%s\n", chain);
    }
    if (rc == 0)
        rc = write_top(t, chains, diffs, p->n_layers, e);
    if (rc == 0)
        rc = nsbox_image_write_at(t->tmp_fd, NSBOX_OCI_LAYERS_FILE, text, len, 0644, e);
    for (size_t i = 0; i < got; i++)
        close(diffs[i]);
    return rc;
}

/* Layers in the shared store, unless NSBOX_OCI_LAYOUT=merged asks for the merged form, or
 * this user cannot mount an overlay (an unprivileged user where the kernel forbids overlays in
 * user namespaces): then merged, as said. Tried on two empty directories of the transaction. */
static bool layered_store(struct nsbox_image_txn *t)
{
    const char *v = getenv("NSBOX_OCI_LAYOUT");
    if (v && !strcmp(v, "merged"))
        return false;
    if (geteuid() == 0)
        return true;
    const char *tmp = strrchr(t->tmp, '/') + 1;
    char a[PATH_MAX], b[PATH_MAX];
    snprintf(a, sizeof a, "%s/probe-a", tmp);
    snprintf(b, sizeof b, "%s/probe-b", tmp);
    const char *rel[] = {a, b};
    struct nsbox_err e = {0};
    cleanup_close int m = -1;
    bool ok = mkdirat(t->tmp_fd, "probe-a", 0755) == 0 &&
              mkdirat(t->tmp_fd, "probe-b", 0755) == 0 &&
              nsbox_oci_overlay_lowers(t->images, -1, rel, 2, &m, &e) == 0;
    unlinkat(t->tmp_fd, "probe-a", AT_REMOVEDIR);
    unlinkat(t->tmp_fd, "probe-b", AT_REMOVEDIR);
    if (!ok)
        nsbox_image_note(true, "note: image %s is stored merged, not as shared layers: this user "
                               "cannot mount an overlay here (%s)",
                         t->name, e.msg[0] ? e.msg : strerror(errno));
    return ok;
}

static int unpack(const struct source *s, const struct plan *p, const char *name, bool progress,
                  struct nsbox_err *e)
{
    struct nsbox_image_txn t;
    struct nsbox_oci_layers ls = {.dir_fd = -1, .lock_fd = -1};
    int rc = -1;
    if (nsbox_image_txn_begin(&t, name, progress, e) < 0)
        goto out;
    struct nsbox_oci_limits lim;
    nsbox_oci_layer_limits(&lim);
    struct nsbox_oci_layer_stats st = {0};
    if ((layered_store(&t) ? unpack_layered(s, p, &t, &ls, &lim, &st, progress, e)
                         : unpack_merged(s, p, &t, &lim, &st, progress, e)) < 0)
        goto out;
    if ((p->manifest_text && nsbox_image_write_at(t.tmp_fd, "manifest.json", p->manifest_text,
                                                  p->manifest_len, 0644, e) < 0) ||
        nsbox_image_write_at(t.tmp_fd, "config.json", p->config_text, p->config_len, 0644, e) < 0)
        goto out;
    if (syncfs(t.tmp_fd) < 0) {
        nsbox_err_sys(e, "syncfs");
        goto out;
    }
    char size[32];
    snprintf(size, sizeof size, "%llu", (unsigned long long)st.bytes);
    const char *kv[] = {"digest", p->manifest_digest, "config", p->config_digest, "size", size,
                        "image_created", p->cfg.created, NULL};
    rc = nsbox_image_txn_commit(&t, "oci", NULL, kv, e);
out:
    nsbox_image_txn_end(&t);
    bool opened = ls.dir_fd >= 0;
    nsbox_oci_layers_close(&ls); /* after the commit: the image names its layers now */
    if (rc < 0 && opened) {
        /* a failed import keeps nothing: the layers it stored that no image names go */
        struct nsbox_err ignored;
        unsigned n;
        nsbox_oci_layers_gc(&n, &ignored);
    }
    return rc;
}

static int import_source(const struct source *s, const char *ref, bool progress,
                         struct nsbox_oci_imported *out, struct nsbox_err *e)
{
    cleanup_free struct plan *p = calloc(1, sizeof *p);
    if (!p)
        return nsbox_err_set(e, NSBOX_E_NOMEM, ENOMEM, "out of memory");
    int rc = -1;
    if (make_plan(s, p, e) < 0 || load_config(s, p, e) < 0)
        goto out;
    snprintf(out->name, sizeof out->name, NSBOX_OCI_NAME_PREFIX "%.48s", p->config_digest + 7);
    snprintf(out->digest, sizeof out->digest, "%s", p->manifest_digest);
    out->existed = image_exists(out->name);
    if (!out->existed && unpack(s, p, out->name, progress, e) < 0)
        goto out;
    const char *tag = ref ? ref : (p->repo_tag[0] ? p->repo_tag : NULL);
    if (tag) {
        char canon[NSBOX_OCIREF_MAX + 1], file[NSBOX_OCIREF_MAX + 1];
        if (nsbox_oci_lookup_ref_file(tag, canon, file, e) < 0 || write_ref(canon, out->name, e) < 0)
            goto out;
        snprintf(out->ref, sizeof out->ref, "%s", canon);
    }
    rc = 0;
out:
    plan_free(p);
    return rc;
}

int nsbox_oci_store_import(const char *src, const char *ref, bool progress,
                           struct nsbox_oci_imported *out, struct nsbox_err *e)
{
    memset(out, 0, sizeof *out);
    if (nsbox_imagelibs_load(e) < 0)
        return -1;
    if (ref) { /* checked first: a bad name must not cost an unpack */
        struct nsbox_ociref r;
        if (nsbox_ociref_parse(ref, &r, e) < 0)
            return -1;
    }
    struct source s = {.dir_fd = -1};
    int rc = -1;
    bool is_stdin = !strcmp(src, "-");
    cleanup_close int fd = is_stdin ? dup(0) : open(src, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0)
        return nsbox_err_sys(e, "cannot open %s", src);
    if (S_ISDIR(st.st_mode)) {
        s.dir_fd = nsbox_steal_fd(&fd);
        rc = import_source(&s, ref, progress, out, e);
        source_free(&s);
        return rc;
    }
    struct nsbox_image_txn stage;
    if (nsbox_image_txn_begin(&stage, "oci-staging", progress, e) < 0) {
        nsbox_image_txn_end(&stage);
        return -1;
    }
    s.archive = true;
    s.dir_fd = dup(stage.tmp_fd);
    if (s.dir_fd >= 0 && stage_archive(fd, stage.tmp_fd, &s, e) == 0)
        rc = import_source(&s, ref, progress, out, e);
    else if (s.dir_fd < 0)
        nsbox_err_sys(e, "dup");
    source_free(&s);
    nsbox_image_txn_end(&stage);
    return rc;
}

/* ---- tag, rm, prune, ls ------------------------------------------------------------------- */

int nsbox_oci_store_tag(const char *from, const char *ref, struct nsbox_err *e)
{
    char name[64];
    if (nsbox_oci_lookup_name(from, name, sizeof name, e) < 0)
        return -1;
    if (!image_exists(name))
        return nsbox_err_set(e, NSBOX_E_NOTFOUND, ENOENT, "image %s does not exist", name);
    return write_ref(ref, name, e);
}

static int cmp_ref(const void *a, const void *b)
{
    return strcmp(((const struct nsbox_oci_ref *)a)->ref, ((const struct nsbox_oci_ref *)b)->ref);
}

int nsbox_oci_store_refs(struct nsbox_oci_ref **out, size_t *n, struct nsbox_err *e)
{
    *out = NULL;
    *n = 0;
    char data[PATH_MAX], dir[PATH_MAX + 16];
    if (nsbox_path_data_dir(data, sizeof data, e) < 0)
        return -1;
    snprintf(dir, sizeof dir, "%s/images/.refs", data);
    DIR *d = opendir(dir);
    if (!d)
        return errno == ENOENT ? 0 : nsbox_err_sys(e, "cannot read %s", dir);
    size_t cap = 0, len = 0;
    struct nsbox_oci_ref *v = NULL;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.' || strlen(de->d_name) > NSBOX_OCIREF_MAX)
            continue;
        if (len == cap) {
            cap = cap ? 2 * cap : 16;
            struct nsbox_oci_ref *nv = realloc(v, cap * sizeof *v);
            if (!nv) {
                free(v);
                closedir(d);
                return nsbox_err_set(e, NSBOX_E_NOMEM, ENOMEM, "out of memory");
            }
            v = nv;
        }
        ssize_t l = readlinkat(dirfd(d), de->d_name, v[len].name, sizeof v[len].name - 1);
        if (l <= 0)
            continue;
        v[len].name[l] = '\0';
        strcpy(v[len].ref, de->d_name);
        for (char *p = v[len].ref; *p; p++)
            if (*p == '+')
                *p = '/';
        len++;
    }
    closedir(d);
    if (len)
        qsort(v, len, sizeof *v, cmp_ref);
    *out = v;
    *n = len;
    return 0;
}

bool nsbox_oci_store_in_use(const char *name)
{
    char data[PATH_MAX], path[PATH_MAX + 80];
    struct nsbox_err ignored; /* no image store: nothing in it is in use */
    if (nsbox_path_data_dir(data, sizeof data, &ignored) < 0)
        return false;
    snprintf(path, sizeof path, "%s/images/%s", data, name);
    cleanup_close int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return false;
    return flock(fd, LOCK_EX | LOCK_NB) < 0 && errno == EWOULDBLOCK;
}

/* Whether a reference names image name; also when the references cannot be read (no memory,
 * no permission): an image that may be tagged is kept, never removed on a guess. */
static bool has_refs(const char *name)
{
    struct nsbox_oci_ref *v = NULL;
    size_t n = 0;
    struct nsbox_err ignored; /* rm and prune keep the image instead */
    bool found = nsbox_oci_store_refs(&v, &n, &ignored) < 0;
    for (size_t i = 0; i < n && !found; i++)
        found = !strcmp(v[i].name, name);
    free(v);
    return found;
}

int nsbox_oci_store_remove(const char *ref, struct nsbox_err *e)
{
    char name[64];
    if (nsbox_oci_lookup_name(ref, name, sizeof name, e) < 0)
        return -1;
    bool by_name = !strcmp(ref, name);
    if (nsbox_oci_store_in_use(name))
        return nsbox_err_set(e, NSBOX_E_BUSY, EBUSY,
                             "image %s is in use by a sandbox: remove the sandbox first", ref);
    if (!by_name) {
        char dir[PATH_MAX], canon[NSBOX_OCIREF_MAX + 1], file[NSBOX_OCIREF_MAX + 1];
        if (refs_dir(dir, sizeof dir, e) < 0 || nsbox_oci_lookup_ref_file(ref, canon, file, e) < 0)
            return -1;
        cleanup_close int dfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0 || unlinkat(dfd, file, 0) < 0)
            return nsbox_err_sys(e, "cannot remove %s", canon);
        if (has_refs(name))
            return 0; /* other names keep the image */
    } else {
        /* by id: its references go with it */
        struct nsbox_oci_ref *v = NULL;
        size_t n = 0;
        if (nsbox_oci_store_refs(&v, &n, e) < 0)
            return -1;
        for (size_t i = 0; i < n; i++)
            if (!strcmp(v[i].name, name)) {
                /* one that cannot be named stays, dangling: a lookup of it finds no image */
                struct nsbox_err ignored;
                char dir[PATH_MAX], canon[NSBOX_OCIREF_MAX + 1], file[NSBOX_OCIREF_MAX + 1];
                if (refs_dir(dir, sizeof dir, &ignored) == 0 &&
                    nsbox_oci_lookup_ref_file(v[i].ref, canon, file, &ignored) == 0) {
                    char p[2 * PATH_MAX];
                    snprintf(p, sizeof p, "%s/%s", dir, file);
                    unlink(p);
                }
            }
        free(v);
    }
    if (nsbox_image_remove(name, true, e) < 0)
        return -1;
    unsigned layers;
    return nsbox_oci_layers_gc(&layers, e);
}

int nsbox_oci_store_prune(unsigned *removed, unsigned *layers, struct nsbox_err *e)
{
    *removed = *layers = 0;
    struct nsbox_image_info *v = NULL;
    size_t n = 0;
    if (nsbox_image_list(&v, &n, e) < 0)
        return -1;
    int rc = 0;
    for (size_t i = 0; i < n; i++) {
        if (strcmp(v[i].kind, "oci") != 0 || has_refs(v[i].name) ||
            nsbox_oci_store_in_use(v[i].name))
            continue;
        if (nsbox_image_remove(v[i].name, true, e) < 0) {
            rc = -1;
            break;
        }
        (*removed)++;
    }
    free(v);
    return rc < 0 ? -1 : nsbox_oci_layers_gc(layers, e);
}

/* ---- what a sandbox needs ----------------------------------------------------------------- */

int nsbox_oci_store_resolve(const char *image, enum nsbox_pull pull, char *name, size_t n,
                            struct nsbox_err *e)
{
    const char *said = "pull";
    if (pull == NSBOX_PULL_DEFAULT) {
        const char *env = getenv("NSBOX_PULL");
        said = "NSBOX_PULL";
        pull = !env || !*env || !strcmp(env, "missing") ? NSBOX_PULL_MISSING
               : !strcmp(env, "always")                 ? NSBOX_PULL_ALWAYS
               : !strcmp(env, "never")                  ? NSBOX_PULL_NEVER
                                                        : NSBOX_PULL_DEFAULT;
        if (pull == NSBOX_PULL_DEFAULT)
            return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL,
                                 "NSBOX_PULL='%.32s' is not a pull policy (missing, always or "
                                 "never)",
                                 env);
    }
    bool is_id = nsbox_oci_lookup_has_prefix(image);
    if ((pull != NSBOX_PULL_ALWAYS || is_id) && nsbox_oci_lookup_name(image, name, n, e) == 0)
        return 0;
    if (pull != NSBOX_PULL_ALWAYS && (e->code != NSBOX_E_NOTFOUND || is_id))
        return -1;
    if (is_id)
        return -1;
    if (pull == NSBOX_PULL_NEVER)
        return nsbox_err_wrap(e, "%s=never", said);
    struct nsbox_oci_imported im;
    if (nsbox_oci_pull(image, false, true, &im, e) < 0)
        return -1;
    snprintf(name, n, "%s", im.name);
    return 0;
}

int nsbox_oci_store_meta(const char *name, char *digest, size_t dn, uint64_t *size,
                         char **config_json, char **manifest_json)
{
    char data[PATH_MAX], dir[PATH_MAX + 80];
    struct nsbox_err ignored; /* -1 says "no metadata"; this function gives no reasons */
    if (nsbox_path_data_dir(data, sizeof data, &ignored) < 0)
        return -1;
    snprintf(dir, sizeof dir, "%s/images/%s", data, name);
    cleanup_close int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return -1;
    cleanup_free char *text = nsbox_read_text_at(fd, "image.json", 65536);
    digest[0] = '\0';
    *size = 0;
    if (text) {
        /* flat keys written by nsbox itself: a light scan is enough */
        const char *d = strstr(text, "\"digest\":");
        const char *s = strstr(text, "\"size\":");
        if (d && (d = strchr(d + 9, '"')))
            snprintf(digest, dn, "%.*s", (int)strcspn(d + 1, "\""), d + 1);
        if (s && (s = strchr(s + 7, '"')))
            *size = strtoull(s + 1, NULL, 10);
    }
    if (config_json)
        *config_json = nsbox_read_text_at(fd, "config.json", NSBOX_OCI_JSON_MAX);
    if (manifest_json)
        *manifest_json = nsbox_read_text_at(fd, "manifest.json", NSBOX_OCI_JSON_MAX);
    return 0;
}
