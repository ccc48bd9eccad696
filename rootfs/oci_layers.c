/* The shared layer store and the overlay of an image's layers: see oci_layers.h. */
#define _GNU_SOURCE
#include "oci_layers.h"
#include "cleanup.h"
#include "idmap.h"
#include "ocimanifest.h"
#include "paths.h"
#include "util.h"
#include "grow.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define LAYERS_MAX NSBOX_OCI_LAYERS_MAX
#define LAYERS_TEXT_MAX (LAYERS_MAX * (NSBOX_OCI_CHAIN_HEX + 1) + 1)

static void closedirp(DIR **d)
{
    if (*d)
        closedir(*d);
}
#define cleanup_dir __attribute__((cleanup(closedirp)))

static int flock_wait(int fd, int op)
{
    int r;
    while ((r = flock(fd, op)) < 0 && errno == EINTR) {
    }
    return r;
}

static bool is_chain(const char *s)
{
    if (strlen(s) != NSBOX_OCI_CHAIN_HEX)
        return false;
    for (const char *p = s; *p; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
            return false;
    return true;
}

static int layers_path(char *out, size_t n, struct nsbox_err *e)
{
    return nsbox_paths_images(out, n, e, "/.layers");
}

/* Remove dfd/name, a leftover of an unpack that died (.tmp-<chain>-<pid>: its lock is free and
 * its process gone; between its mkdir and its flock only the pid says it is alive). */
static void sweep_one(int dfd, const char *dir, const char *name, bool check)
{
    if (check) {
        cleanup_close int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        const char *dash = strrchr(name, '-');
        if (fd < 0 || flock(fd, LOCK_EX | LOCK_NB) < 0 ||
            (dash && nsbox_pid_alive((int)strtol(dash + 1, NULL, 10))))
            return;
    }
    char path[2 * PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    struct nsbox_err ignored; /* best effort: the next sweep tries again */
    nsbox_paths_rm_rf(path, &ignored);
}

static void sweep(int dir_fd, const char *dir, bool all)
{
    int fd = openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    cleanup_dir DIR *d = fd < 0 ? NULL : fdopendir(fd);
    if (!d) {
        if (fd >= 0)
            close(fd);
        return;
    }
    struct dirent *de;
    while ((de = readdir(d)))
        if (!strncmp(de->d_name, ".tmp-", 5) || !strncmp(de->d_name, ".del-", 5))
            sweep_one(dirfd(d), dir, de->d_name, !all && de->d_name[1] == 't');
}

int nsbox_oci_layers_open(struct nsbox_oci_layers *s, struct nsbox_err *e)
{
    s->dir_fd = s->lock_fd = -1;
    if (layers_path(s->dir, sizeof s->dir, e) < 0 || nsbox_paths_mkdir_p(s->dir, 0700, e) < 0)
        return nsbox_err_wrap(e, "the layer store");
    s->dir_fd = open(s->dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    s->lock_fd = s->dir_fd < 0
                     ? -1
                     : openat(s->dir_fd, ".lock", O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (s->lock_fd < 0 || flock_wait(s->lock_fd, LOCK_SH) < 0)
        return nsbox_err_sys(e, "the layer store %s", s->dir);
    sweep(s->dir_fd, s->dir, false);
    return 0;
}

void nsbox_oci_layers_close(struct nsbox_oci_layers *s)
{
    nsbox_closep(&s->dir_fd);
    nsbox_closep(&s->lock_fd);
    s->dir_fd = s->lock_fd = -1;
}

void nsbox_oci_layers_chain(const char *parent, const char *diff_id,
                            char out[NSBOX_OCI_CHAIN_HEX + 1])
{
    if (!parent[0]) {
        snprintf(out, NSBOX_OCI_CHAIN_HEX + 1, "%s", diff_id + 7);
        return;
    }
    char text[2 * NSBOX_OCI_DIGEST_LEN + 8];
    int n = snprintf(text, sizeof text, "sha256:%s %s", parent, diff_id);
    unsigned char d[EVP_MAX_MD_SIZE];
    unsigned dl = 0;
    EVP_Digest(text, (size_t)n, d, &dl, EVP_sha256(), NULL);
    for (unsigned i = 0; i < dl && i < 32; i++)
        snprintf(out + 2 * i, 3, "%02x", d[i]);
}

static int read_info(int layer_fd, struct nsbox_oci_layer_stats *own)
{
    cleanup_free char *text = nsbox_read_text_at(layer_fd, "info", 128);
    unsigned long long b, n;
    if (!text || sscanf(text, "%llu %llu", &b, &n) != 2)
        return -1;
    own->bytes = b;
    own->entries = n;
    return 0;
}

int nsbox_oci_layers_find(struct nsbox_oci_layers *s, const char *chain,
                          const struct nsbox_oci_limits *lim, struct nsbox_oci_layer_stats *st,
                          int *diff_fd, struct nsbox_err *e)
{
    cleanup_close int fd =
        openat(s->dir_fd, chain, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT)
            return 0;
        return nsbox_err_sys(e, "layer %.19s in %s", chain, s->dir);
    }
    struct nsbox_oci_layer_stats own = {0};
    *diff_fd = openat(fd, "diff", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (*diff_fd < 0 || read_info(fd, &own) < 0) {
        nsbox_closep(diff_fd);
        *diff_fd = -1;
        return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL,
                             "layer %s/%s is damaged (no diff/ or info): remove it and import "
                             "the image again",
                             s->dir, chain);
    }
    st->bytes += own.bytes;
    st->entries += own.entries;
    if (st->bytes > lim->max_bytes || st->entries > lim->max_entries) {
        nsbox_closep(diff_fd);
        *diff_fd = -1;
        return nsbox_err_set(e, NSBOX_E_INVALID, EFBIG,
                             "image unpacks to more than %llu bytes or %llu entries "
                             "(NSBOX_OCI_MAX_BYTES, NSBOX_OCI_MAX_ENTRIES)",
                             (unsigned long long)lim->max_bytes,
                             (unsigned long long)lim->max_entries);
    }
    return 1;
}

static int unpack_into(int tmp_fd, int blob_fd, const char *digest, const char *diff_id,
                       int64_t size, const struct nsbox_oci_limits *lim,
                       const struct nsbox_oci_layer_form *form, struct nsbox_oci_layer_stats *st,
                       struct nsbox_err *e)
{
    if (mkdirat(tmp_fd, "diff", 0755) < 0)
        return nsbox_err_sys(e, "layer %s: mkdir", digest);
    cleanup_close int diff = openat(tmp_fd, "diff", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (diff < 0)
        return nsbox_err_sys(e, "layer %s", digest);
    if (geteuid() == 0 && fchownat(diff, "", nsbox_idmap_image_owner(0), nsbox_idmap_image_owner(0),
                                   AT_EMPTY_PATH) < 0)
        return nsbox_err_sys(e, "layer %s: chown", digest);
    struct nsbox_oci_layer_stats before = *st;
    if (nsbox_oci_layer_apply(diff, blob_fd, digest, diff_id, size, lim, form, st, e) < 0)
        return -1;
    char info[64];
    int n =
        snprintf(info, sizeof info, "%llu %llu\n", (unsigned long long)(st->bytes - before.bytes),
                 (unsigned long long)(st->entries - before.entries));
    cleanup_close int fd = openat(tmp_fd, "info", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0 || nsbox_pwrite_all(fd, info, (size_t)n, 0) < 0 || fchmod(tmp_fd, 0755) < 0 ||
        syncfs(tmp_fd) < 0)
        return nsbox_err_sys(e, "layer %s", digest);
    return 0;
}

int nsbox_oci_layers_get(struct nsbox_oci_layers *s, const char *chain, int blob_fd,
                         const char *digest, const char *diff_id, int64_t size,
                         const struct nsbox_oci_limits *lim,
                         const struct nsbox_oci_layer_form *form, struct nsbox_oci_layer_stats *st,
                         int *diff_fd, struct nsbox_err *e)
{
    *diff_fd = -1;
    int r = nsbox_oci_layers_find(s, chain, lim, st, diff_fd, e);
    if (r != 0)
        return r;
    char tmp[NSBOX_OCI_CHAIN_HEX + 32], path[2 * PATH_MAX];
    snprintf(tmp, sizeof tmp, ".tmp-%s-%d", chain, (int)getpid());
    snprintf(path, sizeof path, "%s/%s", s->dir, tmp);
    if (nsbox_paths_rm_rf(path, e) < 0) /* ours from an earlier failed attempt in this process */
        return -1;
    if (mkdirat(s->dir_fd, tmp, 0700) < 0)
        return nsbox_err_sys(e, "cannot create %s", path);
    cleanup_close int tfd = openat(s->dir_fd, tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    struct nsbox_oci_layer_stats mine = *st;
    if (tfd < 0 || flock(tfd, LOCK_EX | LOCK_NB) < 0)
        r = nsbox_err_sys(e, "cannot lock %s", path);
    else
        r = unpack_into(tfd, blob_fd, digest, diff_id, size, lim, form, &mine, e);
    /* whole, or not at all: a crash before this rename leaves a .tmp- that the next import
     * sweeps; another import that stored the same layer first wins, and ours goes */
    if (r == 0 && renameat2(s->dir_fd, tmp, s->dir_fd, chain, RENAME_NOREPLACE) < 0) {
        if (errno != EEXIST && errno != ENOTEMPTY)
            r = nsbox_err_sys(e, "cannot store layer %s", chain);
        else
            r = 1;
    }
    if (r != 0) {
        struct nsbox_err ignored; /* swept later if it cannot go now */
        nsbox_paths_rm_rf(path, &ignored);
        if (r < 0)
            return -1;
        return nsbox_oci_layers_find(s, chain, lim, st, diff_fd, e) == 1 ? 1 : -1;
    }
    *st = mine;
    snprintf(path, sizeof path, "%s/diff", chain);
    *diff_fd = openat(s->dir_fd, path, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    return *diff_fd < 0 ? nsbox_err_sys(e, "layer %s", chain) : 0;
}

bool nsbox_oci_layers_is_layered(int image_dir_fd)
{
    struct stat st;
    return fstatat(image_dir_fd, NSBOX_OCI_LAYERS_FILE, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
           S_ISREG(st.st_mode);
}

/* The chain ids an image names (its `layers` file), bottom first; *n of them. */
int nsbox_oci_layers_read(int image_fd, char (*ids)[NSBOX_OCI_CHAIN_HEX + 1], size_t *n)
{
    *n = 0;
    cleanup_free char *text = nsbox_read_text_at(image_fd, NSBOX_OCI_LAYERS_FILE, LAYERS_TEXT_MAX);
    if (!text)
        return -1;
    char *save = NULL;
    for (char *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        if (!is_chain(l) || *n == LAYERS_MAX) {
            errno = EINVAL;
            return -1;
        }
        strcpy(ids[(*n)++], l);
    }
    return 0;
}

/* ---- collection ------------------------------------------------------------------------------ */

struct refs {
    char (*ids)[NSBOX_OCI_CHAIN_HEX + 1];
    size_t n, cap;
};

static bool referenced(const struct refs *r, const char *id)
{
    for (size_t i = 0; i < r->n; i++)
        if (!strcmp(r->ids[i], id))
            return true;
    return false;
}

/* Every chain id some image directory of the store names (retired and unfinished ones too). */
static int collect_refs(const char *images, struct refs *r, struct nsbox_err *e)
{
    cleanup_dir DIR *d = opendir(images);
    if (!d)
        return nsbox_err_sys(e, "cannot read %s", images);
    cleanup_free char(*ids)[NSBOX_OCI_CHAIN_HEX + 1] = malloc(LAYERS_MAX * sizeof *ids);
    if (!ids)
        return nsbox_err_set(e, NSBOX_E_NOMEM, ENOMEM, "out of memory");
    struct dirent *de;
    while ((de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..") || !strcmp(de->d_name, ".layers"))
            continue;
        cleanup_close int fd =
            openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        size_t n = 0;
        if (fd < 0 || !nsbox_oci_layers_is_layered(fd))
            continue;
        if (nsbox_oci_layers_read(fd, ids, &n) <
            0) /* unreadable: keep every layer rather than guess */
            return nsbox_err_sys(e, "image %s: its list of layers", de->d_name);
        for (size_t i = 0; i < n; i++) {
            if (nsbox_grow(&r->ids, &r->cap, r->n, sizeof *r->ids, 64, 0) < 0)
                return nsbox_err_set(e, NSBOX_E_NOMEM, ENOMEM, "out of memory");
            strcpy(r->ids[r->n++], ids[i]);
        }
    }
    return 0;
}

int nsbox_oci_layers_gc(unsigned *removed, struct nsbox_err *e)
{
    *removed = 0;
    char dir[PATH_MAX];
    if (layers_path(dir, sizeof dir, e) < 0)
        return -1;
    cleanup_close int dfd = open(dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd < 0)
        return errno == ENOENT ? 0 : nsbox_err_sys(e, "the layer store %s", dir);
    cleanup_close int lock = openat(dfd, ".lock", O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (lock < 0)
        return nsbox_err_sys(e, "the layer store %s", dir);
    if (flock(lock, LOCK_EX | LOCK_NB) < 0)
        return errno == EWOULDBLOCK ? 0 : nsbox_err_sys(e, "the layer store %s", dir);
    struct refs r = {0};
    char images[PATH_MAX];
    snprintf(images, sizeof images, "%.*s", (int)(strrchr(dir, '/') - dir), dir);
    int rc = collect_refs(images, &r, e);
    cleanup_dir DIR *d = rc < 0 ? NULL : opendir(dir);
    if (rc == 0 && !d)
        rc = nsbox_err_sys(e, "cannot read %s", dir);
    struct dirent *de;
    while (rc == 0 && (de = readdir(d))) {
        if (!is_chain(de->d_name) || referenced(&r, de->d_name))
            continue;
        /* out of its name first: a removal cut short leaves a .del- (swept), never a half
         * layer under a name an import would reuse */
        char del[NSBOX_OCI_CHAIN_HEX + 32];
        snprintf(del, sizeof del, ".del-%s-%d", de->d_name, (int)getpid());
        if (renameat(dirfd(d), de->d_name, dirfd(d), del) < 0) {
            rc = nsbox_err_sys(e, "cannot remove layer %s", de->d_name);
            break;
        }
        (*removed)++;
    }
    if (rc == 0)
        sweep(dfd, dir, true); /* no import runs: every .tmp- and .del- is a leftover */
    free(r.ids);
    return rc;
}
