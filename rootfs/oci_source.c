/* The source of an import: see oci_source.h. */
#include "oci_source.h"
#include "cleanup.h"
#include "oci_layer.h"
#include "ocimanifest.h"
#include "util.h"
#include "grow.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#define SHOW(t) NSBOX_SHOW(t)
#define MEMBERS_MAX 100000

/* ---- a source: a layout directory, or an archive's members staged by their digest -------- */

void nsbox_oci_source_free(struct nsbox_oci_source *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->m[i].name);
    free(s->m);
    nsbox_closep(&s->dir_fd);
}

/* A regular file of the source, or -1 with errno (EINVAL: something else). A source comes
 * from outside: a FIFO (which tar makes when it unpacks a layout) would block the open or the
 * read for good, a device such as /dev/zero read endlessly (and opening some devices acts).
 * Looked at through an O_PATH descriptor, then that same file reopened to read it. */
static int open_file_beneath(int dfd, const char *path)
{
    struct open_how how = {.flags = O_PATH | O_CLOEXEC,
                           .resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS};
    cleanup_close int pfd = nsbox_openat2(dfd, path, &how);
    struct stat st;
    if (pfd < 0 || fstat(pfd, &st) < 0)
        return -1;
    if (!S_ISREG(st.st_mode)) {
        errno = EINVAL;
        return -1;
    }
    char self[64];
    snprintf(self, sizeof self, "/proc/self/fd/%d", pfd);
    return open(self, O_RDONLY | O_CLOEXEC);
}

static const char *member_digest(const struct nsbox_oci_source *s, const char *name)
{
    while (name[0] == '.' && name[1] == '/')
        name += 2;
    for (size_t i = 0; i < s->n; i++)
        if (!strcmp(s->m[i].name, name))
            return s->m[i].digest;
    return NULL;
}

int nsbox_oci_source_open_blob(const struct nsbox_oci_source *s, const char *digest)
{
    char path[128];
    snprintf(path, sizeof path, "blobs/sha256/%s", digest + 7);
    return open_file_beneath(s->dir_fd, path);
}

/* A whole small blob, verified against its digest. */
static char *read_blob(const struct nsbox_oci_source *s, const char *digest, size_t *len,
                       const char *what, struct nsbox_err *e)
{
    cleanup_close int fd = nsbox_oci_source_open_blob(s, digest);
    if (fd < 0) {
        nsbox_err_set(e, NSBOX_E_INVALID, errno, "%s %s is %s from the image (%s)", what,
                      digest, errno == EINVAL ? "not a regular file" : "missing",
                      strerror(errno));
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
static char *read_named(const struct nsbox_oci_source *s, const char *name, size_t *len,
                        struct nsbox_err *e)
{
    cleanup_close int fd = -1;
    if (s->archive) {
        const char *d = member_digest(s, name);
        if (!d) {
            errno = ENOENT;
            return NULL;
        }
        fd = nsbox_oci_source_open_blob(s, d);
    } else {
        fd = open_file_beneath(s->dir_fd, name);
    }
    if (fd < 0) {
        if (errno == EINVAL)
            nsbox_err_set(e, NSBOX_E_INVALID, EINVAL, "%s is not a regular file", name);
        return NULL;
    }
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

static int add_member(struct nsbox_oci_source *s, const char *name, const char *digest,
                      struct nsbox_err *e)
{
    if (nsbox_grow(&s->m, &s->cap, s->n, sizeof *s->m, 32, 0) < 0)
        return nsbox_err_set(e, NSBOX_E_NOMEM, ENOMEM, "out of memory");
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
    cleanup_close int fd =
        openat(stage_fd, "incoming", O_RDWR | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
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
int nsbox_oci_source_stage(int in_fd, int stage_fd, struct nsbox_oci_source *s, struct nsbox_err *e)
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
        nsbox_err_set(e, NSBOX_E_INVALID, EINVAL,
                      "not a tar archive (import takes a `docker save` or OCI archive, "
                      "compressed or not, or an OCI layout directory): %s",
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

void nsbox_oci_source_plan_free(struct nsbox_oci_plan *p)
{
    free(p->manifest_text);
    free(p->config_text);
    nsbox_ocimanifest_config_free(&p->cfg);
}

const char *nsbox_oci_source_arch(void)
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

static int plan_oci(const struct nsbox_oci_source *s, const char *index, size_t ilen,
                    struct nsbox_oci_plan *p, struct nsbox_err *e)
{
    struct nsbox_oci_desc d;
    if (nsbox_ocimanifest_pick(index, ilen, s->want, "linux", nsbox_oci_source_arch(), &d, e) <
        0)
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
            if (nsbox_ocimanifest_pick(text, len, NULL, "linux", nsbox_oci_source_arch(), &d, e) <
                0)
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

static int plan_docker(const struct nsbox_oci_source *s, const char *text, size_t len,
                       struct nsbox_oci_plan *p, struct nsbox_err *e)
{
    cleanup_free struct nsbox_docker_save *d = malloc(sizeof *d);
    if (!d)
        return nsbox_err_set(e, NSBOX_E_NOMEM, ENOMEM, "out of memory");
    if (nsbox_ocimanifest_docker_save(text, len, s->want, d, e) < 0)
        return -1;
    const char *cd = member_digest(s, d->config);
    if (!cd)
        return nsbox_err_set(e, NSBOX_E_INVALID, ENOENT,
                             "manifest.json names config %s, which "
                             "the archive does not have",
                             SHOW(d->config));
    snprintf(p->config_digest, sizeof p->config_digest, "%s", cd);
    p->n_layers = d->n_layers;
    for (size_t i = 0; i < d->n_layers; i++) {
        const char *ld = member_digest(s, d->layers[i]);
        if (!ld)
            return nsbox_err_set(e, NSBOX_E_INVALID, ENOENT,
                                 "manifest.json names layer %s, "
                                 "which the archive does not have",
                                 SHOW(d->layers[i]));
        strcpy(p->layers[i].digest, ld);
        p->layers[i].size = -1;
    }
    snprintf(p->repo_tag, sizeof p->repo_tag, "%s", d->repo_tag);
    return 0;
}

static int read_plan(const struct nsbox_oci_source *s, struct nsbox_oci_plan *p,
                     struct nsbox_err *e)
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

static int load_config(const struct nsbox_oci_source *s, struct nsbox_oci_plan *p,
                       struct nsbox_err *e)
{
    p->config_text = read_blob(s, p->config_digest, &p->config_len, "config", e);
    if (!p->config_text)
        return -1;
    if (nsbox_ocimanifest_config(p->config_text, p->config_len, &p->cfg, e) < 0)
        return -1;
    if ((p->cfg.os[0] && strcmp(p->cfg.os, "linux")) ||
        (p->cfg.arch[0] && strcmp(p->cfg.arch, nsbox_oci_source_arch())))
        return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL,
                             "no platform match: the image is for %s/%s, this host is linux/%s",
                             p->cfg.os, p->cfg.arch, nsbox_oci_source_arch());
    if (p->cfg.n_diff_ids != p->n_layers)
        return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL,
                             "image config lists %zu layers, the manifest %zu", p->cfg.n_diff_ids,
                             p->n_layers);
    /* docker save (manifest.json) layers are uncompressed tars: their digest is the diff_id */
    for (size_t i = 0; !p->manifest_text && i < p->n_layers; i++)
        if (strcmp(p->layers[i].digest, p->cfg.diff_ids[i]) != 0)
            return nsbox_err_set(e, NSBOX_E_INVALID, EBADMSG,
                                 "digest mismatch: layer %zu has sha256 %s, the config says %s; "
                                 "nothing was kept",
                                 i + 1, p->layers[i].digest + 7, p->cfg.diff_ids[i]);
    return 0;
}

int nsbox_oci_source_plan(const struct nsbox_oci_source *s, struct nsbox_oci_plan *p,
                          struct nsbox_err *e)
{
    return read_plan(s, p, e) < 0 || load_config(s, p, e) < 0 ? -1 : 0;
}
