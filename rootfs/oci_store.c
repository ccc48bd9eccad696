/* OCI images in the store: import, references, removal. See oci_store.h. */
#include "oci_store.h"
#include "cleanup.h"
#include "cleanup_cjson.h"
#include "image.h"
#include "imagelibs.h"
#include "oci_layers.h"
#include "oci_source.h"
#include "oci_unpack.h"
#include "paths.h"
#include "util.h"
#include "grow.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- references ------------------------------------------------------------------------- */

static int refs_dir(char *out, size_t n, struct nsbox_err *e)
{
    char images[PATH_MAX];
    if (nsbox_image_store_dir(images, sizeof images, e) < 0)
        return -1;
    int r = snprintf(out, n, "%s/.refs", images);
    if (r < 0 || (size_t)r >= n)
        return nsbox_err_set(e, NSBOX_E_INVALID, ENAMETOOLONG, "path too long");
    /* 0700 as the layer store: which images root pulled is nobody else's. mkdir leaves an
     * existing directory's mode alone, so image.c's close_store closes one found open. */
    if (mkdir(out, 0700) < 0 && errno != EEXIST)
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
    char path[PATH_MAX + 80];
    struct nsbox_err ignored; /* no image store: no image; making it says why it cannot be */
    if (nsbox_paths_images(path, sizeof path, &ignored, "/%s/rootfs", name) < 0)
        return 0;
    struct stat st;
    return lstat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static int import_source(const struct nsbox_oci_source *s, const char *ref, bool progress,
                         struct nsbox_oci_imported *out, struct nsbox_err *e)
{
    cleanup_free struct nsbox_oci_plan *p = calloc(1, sizeof *p);
    if (!p)
        return nsbox_err_set(e, NSBOX_E_NOMEM, ENOMEM, "out of memory");
    int rc = -1;
    if (nsbox_oci_source_plan(s, p, e) < 0)
        goto out;
    snprintf(out->name, sizeof out->name, NSBOX_OCI_NAME_PREFIX "%.48s", p->config_digest + 7);
    snprintf(out->digest, sizeof out->digest, "%s", p->manifest_digest);
    out->existed = image_exists(out->name);
    if (!out->existed && nsbox_oci_unpack_image(s, p, out->name, progress, e) < 0)
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
    nsbox_oci_source_plan_free(p);
    return rc;
}

int nsbox_oci_store_import(const char *src, const char *ref, bool progress,
                           struct nsbox_oci_imported *out, struct nsbox_err *e)
{
    memset(out, 0, sizeof *out);
    if (nsbox_imagelibs_load(e) < 0)
        return -1;
    if (ref) { /* checked first: a bad name must not cost an unpack */
        char canon[NSBOX_OCIREF_MAX + 1], file[NSBOX_OCIREF_MAX + 1];
        if (nsbox_oci_lookup_ref_file(ref, canon, file, e) < 0)
            return -1;
    }
    struct nsbox_oci_source s = {.dir_fd = -1, .want = ref};
    int rc = -1;
    bool is_stdin = !strcmp(src, "-");
    cleanup_close int fd = is_stdin ? dup(0) : open(src, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0)
        return nsbox_err_sys(e, "cannot open %s", src);
    if (S_ISDIR(st.st_mode)) {
        s.dir_fd = nsbox_steal_fd(&fd);
        rc = import_source(&s, ref, progress, out, e);
        nsbox_oci_source_free(&s);
        return rc;
    }
    struct nsbox_image_txn stage;
    if (nsbox_image_txn_begin(&stage, "oci-staging", progress, e) < 0) {
        nsbox_image_txn_end(&stage);
        return -1;
    }
    s.archive = true;
    s.dir_fd = dup(stage.tmp_fd);
    if (s.dir_fd >= 0 && nsbox_oci_source_stage(fd, stage.tmp_fd, &s, e) == 0)
        rc = import_source(&s, ref, progress, out, e);
    else if (s.dir_fd < 0)
        nsbox_err_sys(e, "dup");
    nsbox_oci_source_free(&s);
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
    char dir[PATH_MAX + 16];
    if (nsbox_paths_images(dir, sizeof dir, e, "/.refs") < 0)
        return -1;
    DIR *d = opendir(dir);
    if (!d)
        return errno == ENOENT ? 0 : nsbox_err_sys(e, "cannot read %s", dir);
    size_t cap = 0, len = 0;
    struct nsbox_oci_ref *v = NULL;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.' || strlen(de->d_name) > NSBOX_OCIREF_MAX)
            continue;
        if (nsbox_grow(&v, &cap, len, sizeof *v, 16, 0) < 0) {
            free(v);
            closedir(d);
            return nsbox_err_set(e, NSBOX_E_NOMEM, ENOMEM, "out of memory");
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
    char path[PATH_MAX + 80];
    struct nsbox_err ignored; /* no image store: nothing in it is in use */
    if (nsbox_paths_images(path, sizeof path, &ignored, "/%s", name) < 0)
        return false;
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

/* Whether a reference other than canon names image name; also when the references cannot be
 * read: then the caller keeps what it would remove. */
static bool has_other_refs(const char *name, const char *canon)
{
    struct nsbox_oci_ref *v = NULL;
    size_t n = 0;
    struct nsbox_err ignored; /* the image is then taken as in use by its last name */
    bool found = false;
    if (nsbox_oci_store_refs(&v, &n, &ignored) < 0)
        return false;
    for (size_t i = 0; i < n && !found; i++)
        found = !strcmp(v[i].name, name) && strcmp(v[i].ref, canon) != 0;
    free(v);
    return found;
}

int nsbox_oci_store_remove(const char *ref, struct nsbox_err *e)
{
    char name[64];
    if (nsbox_oci_lookup_name(ref, name, sizeof name, e) < 0)
        return -1;
    bool by_name = !strcmp(ref, name);
    char canon[NSBOX_OCIREF_MAX + 1], file[NSBOX_OCIREF_MAX + 1];
    if (!by_name && nsbox_oci_lookup_ref_file(ref, canon, file, e) < 0)
        return -1;
    /* a name that is not the image's last goes whatever uses the image, as docker's untag */
    if (nsbox_oci_store_in_use(name) && (by_name || !has_other_refs(name, canon)))
        return nsbox_err_set(e, NSBOX_E_BUSY, EBUSY,
                             "image %s is in use by a sandbox: remove the sandbox first (`nsbox "
                             "ls`; the warm pool's, listed as pooled, go with `nsbox pool "
                             "drain`)",
                             ref);
    if (!by_name) {
        char dir[PATH_MAX];
        if (refs_dir(dir, sizeof dir, e) < 0)
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

/* A user's store is theirs alone: an image pulled or imported with sudo is in root's, which the
 * user cannot list (its references are 0700), so this is said without looking there, at the end
 * of e's message; what came before is shortened to make room, as the hint is the way out. */
static void store_say_per_user(const char *image, struct nsbox_err *e)
{
    char data[PATH_MAX], hint[PATH_MAX + 2 * NSBOX_OCIREF_MAX + 400];
    struct nsbox_err ignored;
    if (geteuid() == 0)
        return;
    if (nsbox_paths_data_dir(data, sizeof data, &ignored) < 0)
        snprintf(data, sizeof data, "~/.local/share/nsbox");
    snprintf(hint, sizeof hint,
             "; images are stored per user: one pulled or imported with sudo is in root's store, "
             "not in yours (%s/images): pull or import it as yourself, e.g. `docker save %s | "
             "nsbox image import -`",
             data, image);
    size_t l = strlen(e->msg), h = strlen(hint);
    if (h + 4 >= sizeof e->msg)
        return;
    if (l + h >= sizeof e->msg) {
        l = sizeof e->msg - h - 4;
        memcpy(e->msg + l, "...", 4);
        l += 3;
    }
    snprintf(e->msg + l, sizeof e->msg - l, "%s", hint);
}

/* A reference the store lacks, where it has the same repository under another tag (a tag left
 * off means latest): those, at the end of e's message, so that an offline run or a CI job
 * that pulls nothing sees the image it probably meant rather than only a registry's error.
 * Whether it said any. */
static bool store_say_other_tags(const char *image, struct nsbox_err *e)
{
    struct nsbox_ociref r;
    struct nsbox_err ignored;
    char repo[2 * NSBOX_OCIREF_MAX + 2];
    if (nsbox_ociref_parse(image, &r, &ignored) < 0)
        return false;
    snprintf(repo, sizeof repo, "%s/%s", r.domain, r.path);
    size_t rl = strlen(repo), shown = 0;
    struct nsbox_oci_ref *v = NULL;
    size_t n = 0;
    if (nsbox_oci_store_refs(&v, &n, &ignored) < 0)
        return false;
    for (size_t i = 0; i < n && shown < 3; i++) {
        if (strncmp(v[i].ref, repo, rl) != 0 || (v[i].ref[rl] != ':' && v[i].ref[rl] != '@'))
            continue;
        size_t l = strlen(e->msg);
        snprintf(e->msg + l, sizeof e->msg - l, "%s%s", shown ? ", " : "; the store has ",
                 v[i].ref);
        shown++;
    }
    free(v);
    return shown > 0;
}

/* pull=never (said: the flag's or NSBOX_PULL's name) and the store lacks image: e names the
 * way to bring it in once. For a user who is not root that is the per-user store's hint (which
 * says to pull or import it as themselves), in place of the lookup's own `nsbox image pull`. */
static void store_say_never(const char *image, const char *said, struct nsbox_err *e)
{
    char canon[NSBOX_OCIREF_MAX + 1], file[NSBOX_OCIREF_MAX + 1];
    struct nsbox_err ignored;
    nsbox_err_wrap(e, "%s=never", said);
    if (store_say_other_tags(image, e) || geteuid() == 0)
        return;
    if (e->code == NSBOX_E_NOTFOUND && nsbox_oci_lookup_ref_file(image, canon, file, &ignored) == 0)
        nsbox_err_set(e, NSBOX_E_NOTFOUND, ENOENT, "%s=never: image %s is not in the store", said,
                      canon);
    store_say_per_user(image, e);
}

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
    if (pull == NSBOX_PULL_NEVER) {
        store_say_never(image, said, e);
        return -1;
    }
    /* a pull can take minutes before the sandbox starts: said where a note is wanted */
    nsbox_image_note(true, "pulling %s (%s)", image,
                     pull == NSBOX_PULL_ALWAYS ? "pull=always" : "not in the store");
    struct nsbox_oci_imported im;
    if (nsbox_oci_pull(image, false, true, &im, e) < 0) {
        if (pull != NSBOX_PULL_ALWAYS && !store_say_other_tags(image, e))
            store_say_per_user(image, e);
        return -1;
    }
    snprintf(name, n, "%s", im.name);
    return 0;
}

/* Image name's store directory (*dir_fd) and its image.json, parsed; NULL when there is none
 * (no directory, or no metadata nsbox wrote). */
static cJSON *store_image_json(const char *name, int *dir_fd)
{
    char dir[PATH_MAX + 80];
    struct nsbox_err ignored; /* NULL says "no metadata"; the callers give no reasons */
    *dir_fd = -1;
    if (nsbox_paths_images(dir, sizeof dir, &ignored, "/%s", name) < 0)
        return NULL;
    *dir_fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    cleanup_free char *text = *dir_fd >= 0 ? nsbox_read_text_at(*dir_fd, "image.json", 65536)
                                           : NULL;
    return text ? cJSON_Parse(text) : NULL;
}

static const char *store_json_str(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

int nsbox_oci_store_created(const char *name, char *out, size_t n)
{
    cleanup_close int fd = -1;
    cleanup_cjson cJSON *o = store_image_json(name, &fd);
    const char *c = o ? store_json_str(o, "image_created") : NULL;
    snprintf(out, n, "%s", c ? c : "");
    return o ? 0 : -1;
}

int nsbox_oci_store_meta(const char *name, char *digest, size_t dn, uint64_t *size,
                         char **config_json, char **manifest_json)
{
    cleanup_close int fd = -1;
    cleanup_cjson cJSON *o = store_image_json(name, &fd);
    if (fd < 0)
        return -1;
    const char *d = o ? store_json_str(o, "digest") : NULL;
    const char *sz = o ? store_json_str(o, "size") : NULL;
    snprintf(digest, dn, "%s", d ? d : "");
    *size = sz ? strtoull(sz, NULL, 10) : 0;
    if (config_json)
        *config_json = nsbox_read_text_at(fd, "config.json", NSBOX_OCI_JSON_MAX);
    if (manifest_json)
        *manifest_json = nsbox_read_text_at(fd, "manifest.json", NSBOX_OCI_JSON_MAX);
    return 0;
}
