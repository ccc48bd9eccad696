/* The image store: names, atomic builds, locks, resolve, rm, ls.
 *
 * Concurrency model. Three kinds of flock:
 *   .lock-<name>     LOCK_EX by whoever builds or removes <name>: one writer per name.
 *   .tmp-<name>-PID  LOCK_EX by the builder (inherited by debootstrap and its children), so a
 *                    leftover whose lock can be taken belongs to a dead build.
 *   <name>/          LOCK_SH by every sandbox using the image (nsbox_image.lock_fd). A rebuild
 *                    or rm swaps the name away at once but deletes the old tree only when it
 *                    can take LOCK_EX, i.e. no running sandbox still has it mounted; otherwise
 *                    the tree waits as .old-<name>-* and the next build or rm sweeps it.
 */
#include "image.h"
#include "cleanup.h"
#include "cleanup_cjson.h"
#include "oci_layers.h"
#include "oci_overlay.h"
#include "oci_lookup.h"
#include "util.h"
#include "paths.h"
#include "grow.h"
#include "suggest.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif
#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1 << 1)
#endif

static void closedirp(DIR **d)
{
    if (*d)
        closedir(*d);
}
#define cleanup_dir __attribute__((cleanup(closedirp)))

bool nsbox_image_name_valid(const char *name)
{
    if (!name || !name[0] || strlen(name) > NSBOX_IMAGE_NAME_MAX)
        return false;
    if (!islower((unsigned char)name[0]) && !isdigit((unsigned char)name[0]))
        return false;
    for (const char *p = name; *p; p++) {
        unsigned char c = (unsigned char)*p;
        /* islower/isdigit are locale-dependent only beyond ASCII; check the range explicitly */
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
              c == '-'))
            return false;
    }
    return true;
}

static int images_path(char *out, size_t n, struct nsbox_err *e)
{
    return nsbox_paths_images(out, n, e, "%s", "");
}

/* The mode of the store's directories whose files belong to the image ids
 * (NSBOX_IMAGE_ID_BASE): the layer store and every OCI image's directory, retired and
 * unfinished ones too. Open to others, a user granted those ids in /etc/subuid could become
 * their owner in a user namespace and rewrite a layer that every later sandbox runs. Nothing
 * but nsbox needs them open: it opens the layers and mounts them for its sandboxes. The rest
 * of the store stays 0755 (another user may run root's debian rootfs as a directory image). */
#define CLOSED_MODE 0700

static bool holds_image_ids(const char *name)
{
    static const char old[] = ".old-" NSBOX_OCI_NAME_PREFIX, tmp[] = ".tmp-" NSBOX_OCI_NAME_PREFIX;
    return nsbox_oci_lookup_has_prefix(name) || !strncmp(name, old, sizeof old - 1) ||
           !strncmp(name, tmp, sizeof tmp - 1);
}

static int close_one(int dfd, const char *images, const char *name, struct nsbox_err *e)
{
    cleanup_close int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (fd < 0) /* gone meanwhile, or not a directory: nothing of the image ids below it */
        return errno == ENOENT || errno == ENOTDIR || errno == ELOOP
                   ? 0
                   : nsbox_err_sys(e, "cannot open %s/%s", images, name);
    if (fstat(fd, &st) < 0 || ((st.st_mode & 07777) != CLOSED_MODE && fchmod(fd, CLOSED_MODE) < 0))
        return nsbox_err_sys(e, "cannot close %s/%s to other users (mode 0700)", images, name);
    return 0;
}

/* A directory of the store (name) that is not closed yet; exists (when given): whether it is
 * a directory at all. Besides the directories of the image ids, the references (.refs) are
 * closed: their names say which images root pulled and from which registries, nothing another
 * user needs (a sandbox's image is resolved by nsbox). */
static bool dir_open_to_others(int dfd, const char *name, bool *exists)
{
    struct stat st;
    bool is_dir = fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode);
    if (exists)
        *exists = is_dir;
    return is_dir && (st.st_mode & 07777) != CLOSED_MODE;
}

/* A store made by a build that left those directories 0755 is closed on first use. The layer
 * store's own mode says it was done (it is closed last), and the references' (closed by builds
 * that closed the layer store already): two stats when it was. */
static int close_store(const char *images, struct nsbox_err *e)
{
    cleanup_close int dfd = open(images, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd < 0)
        return errno == ENOENT ? 0 : nsbox_err_sys(e, "cannot open %s", images);
    bool has_layers;
    bool layers_open = dir_open_to_others(dfd, ".layers", &has_layers);
    if (dir_open_to_others(dfd, ".refs", NULL) && close_one(dfd, images, ".refs", e) < 0)
        return -1;
    if (has_layers && !layers_open)
        return 0;
    int lfd = dup(dfd);
    cleanup_dir DIR *d = lfd < 0 ? NULL : fdopendir(lfd);
    if (!d) {
        if (lfd >= 0)
            close(lfd);
        return nsbox_err_sys(e, "cannot read %s", images);
    }
    struct dirent *de;
    while ((de = readdir(d)))
        if (holds_image_ids(de->d_name) && close_one(dfd, images, de->d_name, e) < 0)
            return -1;
    return has_layers ? close_one(dfd, images, ".layers", e) : 0;
}

int nsbox_image_store_dir(char *out, size_t n, struct nsbox_err *e)
{
    if (images_path(out, n, e) < 0)
        return -1;
    if (nsbox_paths_mkdir_p(out, 0755, e) < 0)
        return nsbox_err_wrap(e, "cannot create the image store");
    return close_store(out, e);
}

static int join(char *out, size_t n, struct nsbox_err *e, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int join(char *out, size_t n, struct nsbox_err *e, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int r = vsnprintf(out, n, fmt, ap);
    va_end(ap);
    if (r < 0 || (size_t)r >= n)
        return nsbox_err_set(e, NSBOX_E_INVALID, ENAMETOOLONG, "path too long");
    return 0;
}

/* ---- small file helpers ------------------------------------------------------------------ */

int nsbox_image_write_at(int dfd, const char *path, const char *data, size_t len, mode_t mode,
                         struct nsbox_err *e)
{
    /* Unlink first: the existing entry may be a symlink (debootstrap's resolv.conf can be), and
     * writing through it would land outside the image. */
    if (unlinkat(dfd, path, 0) < 0 && errno != ENOENT)
        return nsbox_err_sys(e, "cannot replace %s", path);
    cleanup_close int fd =
        openat(dfd, path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
    if (fd < 0)
        return nsbox_err_sys(e, "cannot create %s", path);
    while (len > 0) {
        ssize_t w = write(fd, data, len);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return nsbox_err_sys(e, "cannot write %s", path);
        }
        data += w;
        len -= (size_t)w;
    }
    /* the mode passed to openat is filtered by umask; the image must not depend on it */
    if (fchmod(fd, mode) < 0)
        return nsbox_err_sys(e, "cannot chmod %s", path);
    int r = close(nsbox_steal_fd(&fd));
    if (r < 0)
        return nsbox_err_sys(e, "cannot write %s", path);
    return 0;
}

char *nsbox_image_read_text(int dfd, const char *path, size_t limit)
{
    return nsbox_read_text_at(dfd, path, limit);
}

int nsbox_image_check_exec_in_root(int root_fd, const char *path)
{
    /* RESOLVE_IN_ROOT treats the image directory as "/" while resolving, so a hostile image
     * whose bin is a symlink to /usr/bin (or ../../..) is judged by its own contents, not the
     * host's. */
    struct open_how how = {
        .flags = O_PATH | O_CLOEXEC,
        .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
    };
    cleanup_close int fd = nsbox_openat2(root_fd, path, &how);
    if (fd < 0)
        return -1;
    struct stat st;
    if (fstat(fd, &st) < 0)
        return -1;
    if (!S_ISREG(st.st_mode) || !(st.st_mode & 0111)) {
        errno = EACCES;
        return -1;
    }
    return 0;
}

/* ---- locks and leftovers ----------------------------------------------------------------- */

static int flock_retry(int fd, int op)
{
    int r;
    do
        r = flock(fd, op);
    while (r < 0 && errno == EINTR);
    return r;
}

static void sweep_leftovers(const char *images);

static bool pid_alive(pid_t pid)
{
    return nsbox_pid_alive((int)pid);
}

void nsbox_image_sweep_store(void)
{
    char images[PATH_MAX];
    struct nsbox_err e;
    if (images_path(images, sizeof images, &e) < 0)
        return;
    sweep_leftovers(images);
}

/* Delete an unused tree (dfd/name); leave it if anyone still holds a lock on it. */
static void remove_if_unused(int dfd, const char *dir, const char *name, bool check_pid)
{
    cleanup_close int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return;
    if (flock_retry(fd, LOCK_EX | LOCK_NB) < 0)
        return;
    if (check_pid) {
        /* .tmp-<name>-<pid>: between its mkdir and its flock the lock is free, so a build is
         * also considered alive while its pid is. Both must say "dead". */
        const char *dash = strrchr(name, '-');
        pid_t pid = dash ? (pid_t)strtol(dash + 1, NULL, 10) : 0;
        if (pid_alive(pid))
            return;
    }
    char path[PATH_MAX];
    if (snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path)
        return;
    struct nsbox_err ignored;
    nsbox_paths_rm_rf(path, &ignored); /* best effort: a later sweep tries again */
}

static void sweep_leftovers(const char *images)
{
    cleanup_dir DIR *d = opendir(images);
    if (!d)
        return;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (!strncmp(de->d_name, ".tmp-", 5))
            remove_if_unused(dirfd(d), images, de->d_name, true);
        else if (!strncmp(de->d_name, ".old-", 5))
            remove_if_unused(dirfd(d), images, de->d_name, false);
    }
}

static int take_build_lock(const char *images, const char *name, bool progress,
                           struct nsbox_err *e)
{
    char path[PATH_MAX];
    if (join(path, sizeof path, e, "%s/.lock-%s", images, name) < 0)
        return -1;
    cleanup_close int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0)
        return nsbox_err_sys(e, "cannot open %s", path);
    if (flock_retry(fd, LOCK_EX | LOCK_NB) < 0) {
        if (errno != EWOULDBLOCK)
            return nsbox_err_sys(e, "cannot lock %s", path);
        nsbox_image_note(progress, "image %s: waiting for another build of it to finish...", name);
        if (flock_retry(fd, LOCK_EX) < 0)
            return nsbox_err_sys(e, "cannot lock %s", path);
    }
    return nsbox_steal_fd(&fd);
}

/* Move <images>/<name> out of the way as .old-<name>-*, then delete it unless in use. */
static int retire(const char *images, const char *from_path, const char *name,
                  struct nsbox_err *e)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    char old[PATH_MAX];
    if (join(old, sizeof old, e, "%s/.old-%s-%d-%lld%09ld", images, name, (int)getpid(),
             (long long)ts.tv_sec, ts.tv_nsec) < 0)
        return -1;
    if (rename(from_path, old) < 0)
        return nsbox_err_sys(e, "cannot move %s aside", from_path);
    cleanup_close int dfd = open(images, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0)
        remove_if_unused(dfd, images, strrchr(old, '/') + 1, false);
    return 0;
}

/* ---- build transactions ------------------------------------------------------------------ */

int nsbox_image_txn_begin(struct nsbox_image_txn *t, const char *name, bool progress,
                          struct nsbox_err *e)
{
    memset(t, 0, sizeof *t);
    t->tmp_fd = t->build_lock_fd = -1;
    if (!nsbox_image_name_valid(name))
        return nsbox_err_set(e, NSBOX_E_INVALID, 0, "invalid image name '%s'", name);
    snprintf(t->name, sizeof t->name, "%s", name);
    if (nsbox_image_store_dir(t->images, sizeof t->images, e) < 0)
        return -1;
    t->build_lock_fd = take_build_lock(t->images, name, progress, e);
    if (t->build_lock_fd < 0)
        return -1;
    sweep_leftovers(t->images);
    if (join(t->tmp, sizeof t->tmp, e, "%s/.tmp-%s-%d", t->images, name, (int)getpid()) < 0)
        return -1;
    if (nsbox_paths_rm_rf(t->tmp, e) < 0) /* ours from an earlier failed attempt in this process */
        return -1;
    if (mkdir(t->tmp, 0700) < 0)
        return nsbox_err_sys(e, "cannot create %s", t->tmp);
    t->tmp_fd = open(t->tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (t->tmp_fd < 0)
        return nsbox_err_sys(e, "cannot open %s", t->tmp);
    if (flock_retry(t->tmp_fd, LOCK_EX | LOCK_NB) < 0)
        return nsbox_err_sys(e, "cannot lock %s", t->tmp);
    /* created 0700 so nothing reads a half-built tree; the finished image is 0755, but for
     * an OCI image's (CLOSED_MODE) */
    return 0;
}

static void rfc3339_now(char *out, size_t n)
{
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(out, n, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static int write_metadata(struct nsbox_image_txn *t, const char *kind, const char *const *pkgs,
                          const char *const *extra_kv, struct nsbox_err *e)
{
    char created[32];
    rfc3339_now(created, sizeof created);
    cleanup_cjson cJSON *o = cJSON_CreateObject();
    if (!o || !cJSON_AddStringToObject(o, "name", t->name) ||
        !cJSON_AddStringToObject(o, "kind", kind) ||
        !cJSON_AddStringToObject(o, "created", created) ||
        !cJSON_AddNumberToObject(o, "builder_version", NSBOX_IMAGE_BUILDER_VERSION) ||
        !cJSON_AddStringToObject(o, "nsbox_version", NSBOX_VERSION))
        return nsbox_err_set(e, NSBOX_E_NOMEM, ENOMEM, "out of memory");
    cJSON *arr = cJSON_AddArrayToObject(o, "packages");
    if (!arr)
        return nsbox_err_set(e, NSBOX_E_NOMEM, ENOMEM, "out of memory");
    for (size_t i = 0; pkgs && pkgs[i]; i++)
        cJSON_AddItemToArray(arr, cJSON_CreateString(pkgs[i]));
    for (size_t i = 0; extra_kv && extra_kv[i] && extra_kv[i + 1]; i += 2)
        cJSON_AddStringToObject(o, extra_kv[i], extra_kv[i + 1]);
    cleanup_free char *text = cJSON_Print(o);
    if (!text)
        return nsbox_err_set(e, NSBOX_E_NOMEM, ENOMEM, "out of memory");
    size_t len = strlen(text);
    text[len] = '\n'; /* cJSON_Print's buffer has the NUL there: overwrite it, write len+1 */
    return nsbox_image_write_at(t->tmp_fd, "image.json", text, len + 1, 0644, e);
}

int nsbox_image_txn_commit(struct nsbox_image_txn *t, const char *kind, const char *const *pkgs,
                           const char *const *extra_kv, struct nsbox_err *e)
{
    if (write_metadata(t, kind, pkgs, extra_kv, e) < 0)
        return -1;
    if (fchmod(t->tmp_fd, holds_image_ids(t->name) ? CLOSED_MODE : 0755) < 0)
        return nsbox_err_sys(e, "cannot chmod %s", t->tmp);
    char real[PATH_MAX];
    if (join(real, sizeof real, e, "%s/%s", t->images, t->name) < 0)
        return -1;

    /* RENAME_EXCHANGE swaps the two directories in one step, so the name never points at
     * nothing (a concurrent `nsbox run` would fail) nor at a half-built tree. */
    bool had_old = false;
    if (renameat2(AT_FDCWD, t->tmp, AT_FDCWD, real, RENAME_NOREPLACE) < 0) {
        if (errno != EEXIST && errno != ENOTEMPTY && errno != EINVAL)
            return nsbox_err_sys(e, "cannot install image %s", real);
        if (renameat2(AT_FDCWD, t->tmp, AT_FDCWD, real, RENAME_EXCHANGE) == 0) {
            had_old = true;
        } else if (errno == EINVAL) {
            /* a filesystem without rename flags: two renames, with a short window where the
             * name is missing */
            struct stat st;
            if (lstat(real, &st) == 0 && retire(t->images, real, t->name, e) < 0)
                return -1;
            if (rename(t->tmp, real) < 0)
                return nsbox_err_sys(e, "cannot install image %s", real);
        } else {
            return nsbox_err_sys(e, "cannot install image %s", real);
        }
    }
    /* The image is installed; release our exclusive lock so sandboxes can take theirs. */
    nsbox_closep(&t->tmp_fd);
    t->tmp_fd = -1;
    if (had_old) {
        /* the old image now sits at the tmp path; if it cannot go now, sweep_leftovers takes it
         * later: the new one is installed either way */
        struct nsbox_err ignored;
        retire(t->images, t->tmp, t->name, &ignored);
    }
    t->tmp[0] = '\0';
    return 0;
}

void nsbox_image_txn_end(struct nsbox_image_txn *t)
{
    if (t->tmp[0]) {
        struct nsbox_err ignored; /* an unfinished build's; sweep_leftovers takes what stays */
        nsbox_paths_rm_rf(t->tmp, &ignored);
        t->tmp[0] = '\0';
    }
    nsbox_closep(&t->tmp_fd);
    t->tmp_fd = -1;
    nsbox_closep(&t->build_lock_fd); /* releases the build lock */
    t->build_lock_fd = -1;
}

/* ---- resolve ----------------------------------------------------------------------------- */

/* Open <images>/<name> and take a shared lock on the directory that is still installed under
 * that name: a rebuild may swap it between our open and our flock, so re-check the identity
 * after locking and retry. Returns the fd, or -1 with errno. */
static int open_locked(const char *path)
{
    for (int attempt = 0; attempt < 16; attempt++) {
        cleanup_close int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
            return -1;
        if (flock_retry(fd, LOCK_SH) < 0)
            return -1;
        struct stat a, b;
        if (fstat(fd, &a) < 0)
            return -1;
        if (stat(path, &b) < 0) {
            if (errno == ENOENT)
                continue;
            return -1;
        }
        if (nsbox_same_inode(&a, &b))
            return nsbox_steal_fd(&fd);
    }
    errno = EAGAIN;
    return -1;
}

void nsbox_image_release(struct nsbox_image *img)
{
    if (img && img->lock_fd >= 0) {
        close(img->lock_fd);
        img->lock_fd = -1;
    }
    if (img && img->mount_fd >= 0) {
        close(img->mount_fd);
        img->mount_fd = -1;
    }
}

static int resolve_host(const char *images, struct nsbox_image *img, struct nsbox_err *e)
{
    char dir[PATH_MAX];
    if (join(dir, sizeof dir, e, "%s/host", images) < 0)
        return -1;
    for (int attempt = 0; attempt < 2; attempt++) {
        cleanup_close int fd = open_locked(dir);
        if (fd < 0 && errno != ENOENT)
            return nsbox_err_sys(e, "cannot open image %s", dir);
        if (fd >= 0) {
            char stamp[256];
            ssize_t n = readlinkat(fd, "stamp", stamp, sizeof stamp - 1);
            struct nsbox_host_probe probe;
            nsbox_image_host_probe(&probe);
            if (n > 0)
                stamp[n] = '\0';
            /* After one rebuild, take what is there even if the host changed again meanwhile
             * (apt running right now): the next run rebuilds. */
            if (attempt > 0 || !nsbox_image_host_stale(n > 0 ? stamp : NULL, &probe)) {
                img->kind = NSBOX_IMAGE_HOST;
                snprintf(img->name, sizeof img->name, "host");
                snprintf(img->root, sizeof img->root, "/");
                if (join(img->etc, sizeof img->etc, e, "%s/etc", dir) < 0)
                    return -1;
                img->lock_fd = nsbox_steal_fd(&fd);
                return 0;
            }
        }
        nsbox_closep(&fd);
        fd = -1;
        if (nsbox_image_build_host(false, false, e) < 0)
            return nsbox_err_wrap(e, "cannot build the host image");
    }
    return nsbox_err_set(e, NSBOX_E_SYS, EAGAIN, "the host image in %s keeps disappearing", dir);
}

/* The stored image name, or host or debian, that a missing name is a typo of (`debain`, a
 * CI file's image misspelt), or NULL: the store's own names, not the OCI images' ids. */
static const char *meant_name(const char *images, const char *name)
{
    enum { MEANT_MAX = 32 }; /* a store's first names: enough for a typo's guess */
    static __thread char stored[MEANT_MAX][NAME_MAX + 1];
    const char *names[MEANT_MAX + 2] = {"host", "debian"};
    size_t n = 2;
    cleanup_dir DIR *d = opendir(images);
    struct dirent *de;
    /* copied: a later readdir may reuse the buffer a name points into */
    while (d && n < NSBOX_ARRAY_LEN(names) && (de = readdir(d)))
        if (de->d_name[0] != '.' && !holds_image_ids(de->d_name)) {
            snprintf(stored[n - 2], sizeof stored[0], "%s", de->d_name);
            names[n] = stored[n - 2];
            n++;
        }
    return nsbox_suggest(name, names, n);
}

static int resolve_stored(const char *images, const char *name, struct nsbox_image *img,
                          struct nsbox_err *e)
{
    char dir[PATH_MAX];
    if (join(dir, sizeof dir, e, "%s/%s", images, name) < 0)
        return -1;
    cleanup_close int fd = open_locked(dir);
    if (fd < 0) {
        if (errno != ENOENT)
            return nsbox_err_sys(e, "cannot open image %s", dir);
        if (!strcmp(name, "debian"))
            return nsbox_err_set(e, NSBOX_E_NOTFOUND, ENOENT,
                                 "image 'debian' is not built: run `nsbox image build debian`");
        char meant[NAME_MAX + 32] = "";
        const char *m = meant_name(images, name);
        if (m)
            snprintf(meant, sizeof meant, "did you mean '%s'? ", m);
        return nsbox_err_set(e, NSBOX_E_NOTFOUND, ENOENT,
                             "image '%s' does not exist in %s: %sgive `host`, `debian` (after "
                             "`nsbox image build debian`), a name `nsbox image ls` lists, an "
                             "OCI reference (a bare word is never one: `%s:latest` is "
                             "docker.io/library/%s) or a directory's path (with a '/': "
                             "`./%s`)",
                             name, images, meant, name, name, name);
    }
    /* this one closed whatever the layer store's mode says of the rest (close_store), and the
     * references, which a store whose layers were closed already may have left open */
    struct stat st;
    if (holds_image_ids(name)) {
        bool open_dir = fstat(fd, &st) == 0 && (st.st_mode & 07777) != CLOSED_MODE;
        if (open_dir && fchmod(fd, CLOSED_MODE) < 0)
            return nsbox_err_sys(e, "cannot close %s to other users (mode 0700)", dir);
        cleanup_close int ifd = open(images, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        bool open_refs = ifd >= 0 && dir_open_to_others(ifd, ".refs", NULL);
        if ((open_dir || open_refs) && close_store(images, e) < 0)
            return nsbox_err_wrap(e, "image '%s'", name);
    }
    cleanup_close int rfd = openat(fd, "rootfs", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    cleanup_close int mfd = -1;
    /* made of layers: checked (and later scanned) through their overlay, as a sandbox sees it */
    if (rfd >= 0 && nsbox_oci_layers_is_layered(fd)) {
        if (nsbox_oci_overlay_image(dir, -1, &mfd, e) < 0)
            return nsbox_err_wrap(e, "image '%s'", name);
        nsbox_closep(&rfd);
        rfd = fcntl(mfd, F_DUPFD_CLOEXEC, 0);
    }
    if (rfd < 0)
        return nsbox_err_set(e, NSBOX_E_NOTFOUND, errno,
                             "image '%s' is incomplete (no rootfs/ in %s): rebuild or remove it "
                             "with `nsbox image rm %s`",
                             name, dir, name);
    if (nsbox_image_check_exec_in_root(rfd, "bin/sh") < 0)
        return nsbox_err_set(e, NSBOX_E_NOTFOUND, errno,
                             "image '%s' has no executable /bin/sh (in %s/rootfs): an image must "
                             "provide /bin/sh and python3",
                             name, dir);
    if (nsbox_oci_lookup_has_prefix(name) && nsbox_oci_lookup_check(rfd, dir, e) < 0)
        return -1;
    img->kind = NSBOX_IMAGE_DIR;
    snprintf(img->name, sizeof img->name, "%s", name);
    if (join(img->root, sizeof img->root, e, "%s/rootfs", dir) < 0)
        return -1;
    img->etc[0] = '\0';
    img->lock_fd = nsbox_steal_fd(&fd);
    img->mount_fd = nsbox_steal_fd(&mfd);
    return 0;
}

static int resolve_path(const char *path, struct nsbox_image *img, struct nsbox_err *e)
{
    cleanup_close int fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOTDIR) /* an image.tar that was meant for import */
            return nsbox_err_set(e, NSBOX_E_INVALID, errno,
                                 "image %s: not a directory; an image archive (docker save, "
                                 "OCI) is imported first: `nsbox image import %s`, then "
                                 "--image with the reference it prints",
                                 path, path);
        if (errno == ENOENT)
            return nsbox_err_set(e, NSBOX_E_NOTFOUND, errno, "image %s: no such directory",
                                 path);
        return nsbox_err_sys(e, "image %s", path);
    }
    if (nsbox_image_check_exec_in_root(fd, "bin/sh") < 0) {
        if (errno == ENOSYS)
            return nsbox_err_set(e, NSBOX_E_UNSUPPORTED, errno,
                                 "image %s: checking a directory image needs openat2 (Linux 5.6 "
                                 "or newer)",
                                 path);
        int err = errno;
        struct stat st;
        if (fstatat(fd, "oci-layout", &st, 0) == 0) /* a layout is no root filesystem */
            return nsbox_err_set(e, NSBOX_E_INVALID, err,
                                 "image %s: an OCI image layout, not a root filesystem: "
                                 "`nsbox image import %s` first, then --image with the "
                                 "reference it prints (or import --name REF)",
                                 path, path);
        return nsbox_err_set(e, NSBOX_E_INVALID, err,
                             "image %s: no executable bin/sh inside it (%s); a directory image "
                             "must provide /bin/sh and python3",
                             path, strerror(err));
    }
    /* The user named a host path: resolving host symlinks in it is what they asked for. The
     * canonical form keeps later mounts from re-resolving a changed symlink. */
    char real[PATH_MAX];
    if (!realpath(path, real))
        return nsbox_err_sys(e, "image %s", path);
    /* The host's own root (by any path that reaches it) would give the sandbox, read-only,
     * every file the sandbox's uid may read: homes, /root's readable parts, the other users'
     * workspaces' parents. "host" is the image that shares the host's system safely. */
    struct stat is;
    if (fstat(fd, &is) == 0 && nsbox_is_host_root(&is))
        return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL,
                             "image %s: that is the host's own root filesystem, which would show "
                             "the sandbox every file it may read; use --image host (the host's "
                             "/usr, read-only, with an /etc of its own)",
                             path);
    img->kind = NSBOX_IMAGE_DIR;
    snprintf(img->name, sizeof img->name, "dir");
    snprintf(img->root, sizeof img->root, "%s", real);
    img->etc[0] = '\0';
    return 0;
}

int nsbox_image_resolve(const char *name, struct nsbox_image *img, struct nsbox_err *e)
{
    memset(img, 0, sizeof *img);
    img->lock_fd = img->mount_fd = -1;
    if (!name || !name[0])
        return nsbox_err_set(e, NSBOX_E_INVALID, 0, "empty image name");
    if (name[0] == '/')
        return resolve_path(name, img, e);
    char oci_name[64];
    const char *ref = NULL;
    if (nsbox_oci_lookup_is_ref(name)) { /* python:3.12, 127.0.0.1:5000/team/py:1 */
        if (nsbox_oci_lookup_name(name, oci_name, sizeof oci_name, e) < 0)
            return -1;
        ref = name;
        name = oci_name;
    }
    if (!nsbox_image_name_valid(name))
        return nsbox_err_set(e, NSBOX_E_INVALID, 0,
                             "invalid image '%s': give `host`, `debian`, another stored image "
                             "name, an OCI reference (python:3.12) or a directory path",
                             name);
    char images[PATH_MAX];
    /* no mkdir here: the fast path of `nsbox run` must not write anything */
    if (images_path(images, sizeof images, e) < 0)
        return -1;
    if (!strcmp(name, "host"))
        return resolve_host(images, img, e);
    /* the image as the user named it, not only by the id it is stored as */
    if (resolve_stored(images, name, img, e) < 0)
        return ref ? nsbox_err_wrap(e, "%s", ref) : -1;
    return 0;
}

/* Which image a sandbox made now would get, as a string that changes with it. A sandbox's
 * root is made of its image's top-level entries, each mounted when the sandbox is made (what
 * changes below them is seen live), so: the image root's inode (a switched link, a replaced
 * tree) and its change times (an entry added, removed or renamed over), and for a stored image
 * also the store directory's inode, which every build swaps. For "host", whose root is the
 * host's, the host files its /etc is made from (a stale host image is rebuilt by the next
 * sandbox). Cheap (a few stats): the warm pool puts it in its key, so that a pooled sandbox
 * made before a change is never handed out after it. Never fails: what cannot be stat'ed is
 * "-", and the resolve of the sandbox's own image reports it. */
static int identity_of(const char *path, char *out, size_t n)
{
    struct stat st;
    if (!path || stat(path, &st) < 0)
        return snprintf(out, n, "- ");
    return snprintf(out, n, "%llx:%llx:%lld.%ld:%lld.%ld ", (unsigned long long)st.st_dev,
                    (unsigned long long)st.st_ino, (long long)st.st_mtim.tv_sec,
                    st.st_mtim.tv_nsec, (long long)st.st_ctim.tv_sec, st.st_ctim.tv_nsec);
}

void nsbox_image_identity(const char *name, char *out, size_t n)
{
    char dir[PATH_MAX], root[PATH_MAX + 8], images[PATH_MAX];
    struct nsbox_err e;
    const char *store = NULL, *top = name;
    char oci_name[64];
    if (nsbox_oci_lookup_is_ref(name) && nsbox_oci_lookup_name(name, oci_name, sizeof oci_name, &e) == 0)
        name = oci_name; /* a re-tag or newer pull changes the store directory below */
    if (name[0] != '/') {
        top = NULL;
        if (nsbox_image_name_valid(name) && images_path(images, sizeof images, &e) == 0 &&
            (size_t)snprintf(dir, sizeof dir, "%s/%s", images, name) < sizeof dir) {
            store = dir;
            snprintf(root, sizeof root, "%s/rootfs", dir);
            top = strcmp(name, "host") ? root : NULL;
        }
    }
    out[0] = '\0';
    size_t len = 0;
    const char *parts[] = {store, top};
    for (size_t i = 0; i < 2 && len < n; i++) {
        int r = identity_of(parts[i], out + len, n - len);
        if (r < 0 || (size_t)r >= n - len) {
            out[len] = '\0';
            return;
        }
        len += (size_t)r;
    }
    if (!strcmp(name, "host") && len < n) {
        struct nsbox_host_probe probe;
        nsbox_image_host_probe(&probe);
        if (nsbox_image_host_stamp(&probe, out + len, n - len) < 0)
            out[len] = '\0';
    }
}

/* ---- build, rm, ls ----------------------------------------------------------------------- */

static struct nsbox_note note;

void nsbox_image_set_note(nsbox_note_fn *fn, void *ctx)
{
    note = (struct nsbox_note){fn, ctx};
}

void nsbox_image_note(bool progress, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    nsbox_note_vsay(progress ? &note : NULL, fmt, ap); /* a debootstrap line (8 KiB) whole */
    va_end(ap);
}

int nsbox_image_build(const char *name, bool progress, struct nsbox_err *e)
{
    if (name && !strcmp(name, "host"))
        return nsbox_image_build_host(true, progress, e);
    if (name && !strcmp(name, "debian"))
        return nsbox_image_build_debian(progress, e);
    return nsbox_err_set(e, NSBOX_E_INVALID, 0,
                         "cannot build image '%s': nsbox builds `host` and `debian`",
                         name ? name : "");
}

static int not_found(const char *name, bool missing_ok, struct nsbox_err *e)
{
    if (missing_ok)
        return 0;
    /* `nsbox image pull python` stores docker.io/library/python:latest, which a bare word
     * never names: say how to name it */
    char latest[80], oci_name[64];
    struct nsbox_err ignored;
    if (nsbox_image_name_valid(name) &&
        (size_t)snprintf(latest, sizeof latest, "%s:latest", name) < sizeof latest &&
        nsbox_oci_lookup_name(latest, oci_name, sizeof oci_name, &ignored) == 0)
        return nsbox_err_set(e, NSBOX_E_NOTFOUND, ENOENT,
                             "image '%s' does not exist; the reference docker.io/library/%s "
                             "does: `nsbox image rm %s` (a bare word names a stored image, "
                             "never a reference)",
                             name, latest, latest);
    return nsbox_err_set(e, NSBOX_E_NOTFOUND, ENOENT, "image '%s' does not exist", name);
}

int nsbox_image_remove(const char *name, bool missing_ok, struct nsbox_err *e)
{
    if (!nsbox_image_name_valid(name))
        return nsbox_err_set(e, NSBOX_E_INVALID, 0,
                             "invalid image name '%s' (only stored images can be removed)",
                             name);
    char images[PATH_MAX], real[PATH_MAX];
    if (images_path(images, sizeof images, e) < 0)
        return -1;
    if (join(real, sizeof real, e, "%s/%s", images, name) < 0)
        return -1;
    /* trees retired earlier and released since go now (the sweep needs no build lock: it
     * takes each tree's own lock) */
    sweep_leftovers(images);
    struct stat st;
    /* checked before taking the lock too, so that removing a name that was never there leaves
     * no lock file (or store) behind */
    if (lstat(real, &st) < 0 && errno == ENOENT)
        return not_found(name, missing_ok, e);
    cleanup_close int lock = take_build_lock(images, name, false, e);
    if (lock < 0)
        return -1;
    if (lstat(real, &st) < 0) {
        if (errno == ENOENT)
            return not_found(name, missing_ok, e);
        return nsbox_err_sys(e, "cannot remove image %s", real);
    }
    if (retire(images, real, name, e) < 0)
        return nsbox_err_wrap(e, "cannot remove image '%s'", name);
    return 0;
}

static int cmp_info(const void *a, const void *b)
{
    return strcmp(((const struct nsbox_image_info *)a)->name,
                  ((const struct nsbox_image_info *)b)->name);
}

static bool read_info(int images_fd, const char *images, const char *name,
                      struct nsbox_image_info *info)
{
    memset(info, 0, sizeof *info);
    if (strlen(name) >= sizeof info->name)
        return false;
    memcpy(info->name, name, strlen(name) + 1);
    cleanup_close int fd =
        openat(images_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return false;
    cleanup_free char *text = nsbox_image_read_text(fd, "image.json", 65536);
    cleanup_cjson cJSON *o = text ? cJSON_Parse(text) : NULL;
    const cJSON *kind = cJSON_GetObjectItemCaseSensitive(o, "kind");
    const cJSON *created = cJSON_GetObjectItemCaseSensitive(o, "created");
    const cJSON *bv = cJSON_GetObjectItemCaseSensitive(o, "builder_version");
    if (cJSON_IsString(kind))
        snprintf(info->kind, sizeof info->kind, "%s", kind->valuestring);
    if (cJSON_IsString(created))
        snprintf(info->created, sizeof info->created, "%s", created->valuestring);
    if (cJSON_IsNumber(bv))
        info->builder_version = bv->valueint;
    bool host = !strcmp(info->kind, "host");
    struct stat st;
    if (fstatat(fd, host ? "etc" : "rootfs", &st, AT_SYMLINK_NOFOLLOW) < 0 ||
        !S_ISDIR(st.st_mode))
        return false; /* not an image (or a broken one): resolve would refuse it too */
    if (!info->kind[0])
        snprintf(info->kind, sizeof info->kind, "dir");
    if (!info->created[0]) {
        struct tm tm;
        gmtime_r(&st.st_mtime, &tm);
        strftime(info->created, sizeof info->created, "%Y-%m-%dT%H:%M:%SZ", &tm);
    }
    int r = snprintf(info->path, sizeof info->path, "%s/%s/%s", images, name,
                     host ? "etc" : "rootfs");
    return r > 0 && (size_t)r < sizeof info->path;
}

int nsbox_image_list(struct nsbox_image_info **out, size_t *n, struct nsbox_err *e)
{
    *out = NULL;
    *n = 0;
    char images[PATH_MAX];
    if (images_path(images, sizeof images, e) < 0)
        return -1;
    cleanup_dir DIR *d = opendir(images);
    if (!d) {
        if (errno == ENOENT)
            return 0;
        return nsbox_err_sys(e, "cannot read %s", images);
    }
    size_t cap = 0, len = 0;
    cleanup_free struct nsbox_image_info *v = NULL;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.' || !nsbox_image_name_valid(de->d_name))
            continue;
        if (nsbox_grow(&v, &cap, len, sizeof *v, 8, 0) < 0)
            return nsbox_err_set(e, NSBOX_E_NOMEM, ENOMEM, "out of memory");
        if (read_info(dirfd(d), images, de->d_name, &v[len]))
            len++;
    }
    if (len)
        qsort(v, len, sizeof *v, cmp_info);
    *out = nsbox_steal_ptr(&v);
    *n = len;
    return 0;
}
