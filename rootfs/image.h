/* Images: the store, the `host` and `debian` builders, and resolving an image name.
 *
 * Store: <data>/images/<name>/ holds image.json (metadata) and either etc/ (host) or rootfs/
 * (debian and other stored images). Builds happen in <data>/images/.tmp-<name>-<pid>/ and are
 * swapped in with one rename, so the real name only ever holds a complete image. See
 * docs/images.md for the user-facing rules. */
#ifndef NSBOX_IMAGE_H
#define NSBOX_IMAGE_H

#include "nsbox.h"
#include "util.h"

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <time.h>

/* Bumped whenever a builder's output changes, so images made by an older nsbox are rebuilt
 * (host: automatically; debian: `nsbox image ls` shows the version). */
#define NSBOX_IMAGE_BUILDER_VERSION 2
#define NSBOX_IMAGE_NAME_MAX 63
#define NSBOX_APPUSER_UID 1000
#define NSBOX_APPUSER_GID 1000
#define NSBOX_APPUSER_NAME "appuser"
#define NSBOX_APPUSER_HOME "/workspace"

enum nsbox_image_kind {
    NSBOX_IMAGE_HOST, /* host's /usr (+ /bin, /lib* as on the host) read-only, prebuilt /etc */
    NSBOX_IMAGE_DIR,  /* a directory holding a whole root filesystem */
};

struct nsbox_image {
    enum nsbox_image_kind kind;
    char name[64];
    char root[PATH_MAX]; /* DIR: the root filesystem directory; HOST: "/" */
    char etc[PATH_MAX];  /* HOST: the prebuilt /etc directory; DIR: "" (the image's own) */
    /* Stored images only (else -1): an O_CLOEXEC fd holding a shared flock on the image's store
     * directory. While it is open, a rebuild or `nsbox image rm` swaps the name away but does
     * not delete the files this sandbox mounted. Keep it open for the sandbox's lifetime (the
     * supervisor), or close it with nsbox_image_release(). */
    int lock_fd;
    /* A stored image made of layers (rootfs/oci_layers.h), else -1: the overlay of its layers,
     * a detached read-only mount whose root is the image's root (img->root is then its empty
     * mount point). Closed by nsbox_image_release(). */
    int mount_fd;
};

/* Resolve "host", a stored image name ("debian", ...) or an absolute directory path.
 * "host" builds its /etc on first use (milliseconds) and rebuilds it when it is stale: the
 * host's ld.so.cache, /etc/alternatives or /etc/ssl/certs changed (package installs), or the
 * builder version changed. The fresh check costs a few system calls (readlink + 3 stats).
 * A stored image that is missing fails with NSBOX_E_NOTFOUND and the fix ("run `nsbox image
 * build debian`"). A DIR image must contain bin/sh, resolved inside the image root. */
int nsbox_image_resolve(const char *name, struct nsbox_image *img, struct nsbox_err *e);
/* Close img->lock_fd (if any). Safe to call twice. */
void nsbox_image_release(struct nsbox_image *img);

/* A string that changes whenever the image `name` resolves to changes (a rebuild, a replaced
 * directory, for "host" a change of the host files its /etc comes from). For the warm pool's
 * key; a few stats, never fails. */
#define NSBOX_IMAGE_IDENTITY_MAX 512
void nsbox_image_identity(const char *name, char *out, size_t n);

/* Build (or rebuild, idempotently) a stored image: "host" or "debian". progress: lines told to
 * the note set below. */
int nsbox_image_build(const char *name, bool progress, struct nsbox_err *e);
/* Who is told of a build's progress ("image debian: running debootstrap..."): cli/ prints it.
 * None set: nobody. */
void nsbox_image_set_note(nsbox_note_fn *note, void *ctx);

/* Remove a stored image. A missing image is NSBOX_E_NOTFOUND unless missing_ok. Files of an
 * image that running sandboxes still hold are deleted at the next build or rm. */
int nsbox_image_remove(const char *name, bool missing_ok, struct nsbox_err *e);

struct nsbox_image_info {
    char name[64];
    char kind[16];    /* "host", "debian", or "dir" (a rootfs/ put in the store by hand) */
    char created[32]; /* RFC 3339, UTC */
    int builder_version;
    char path[PATH_MAX]; /* host: the etc/ directory; others: the rootfs/ directory */
};
/* The stored images, sorted by name. *out is malloc'd (free it); *n may be 0. */
int nsbox_image_list(struct nsbox_image_info **out, size_t *n, struct nsbox_err *e);

/* The /etc/hosts and /etc/resolv.conf every image gets (network modes bind their own). */
extern const char nsbox_image_hosts_text[];
extern const char nsbox_image_resolv_text[];

/* Remove leftovers of interrupted builds from the store (for `nsbox gc`). */
void nsbox_image_sweep_store(void);

/* ---- internals shared by image*.c; pure functions are exposed for the unit tests ---------- */

/* [a-z0-9][a-z0-9._-]*, at most NSBOX_IMAGE_NAME_MAX: no '/', no leading '.', so a name can
 * never reach outside the store or collide with the store's own .tmp-* / .lock-* entries. */
bool nsbox_image_name_valid(const char *name);

/* The host files whose change makes the host image stale. */
enum {
    NSBOX_HOST_SRC_LDCACHE,      /* /etc/ld.so.cache: rewritten by ldconfig on library installs */
    NSBOX_HOST_SRC_ALTERNATIVES, /* /etc/alternatives: update-alternatives on package installs */
    NSBOX_HOST_SRC_CERTS,        /* /etc/ssl/certs: update-ca-certificates replaces the bundle */
    NSBOX_HOST_SRC_COUNT
};
struct nsbox_host_probe {
    struct {
        bool present;
        dev_t dev;
        ino_t ino;
        struct timespec mtime;
    } src[NSBOX_HOST_SRC_COUNT];
};
/* Stat the sources (NSBOX_HOST_SRC_COUNT stat calls, nothing else). */
void nsbox_image_host_probe(struct nsbox_host_probe *p);
/* The stamp text recorded at build time: builder version plus identity and mtime of each
 * source. Returns the length, or -1 when n is too small. */
int nsbox_image_host_stamp(const struct nsbox_host_probe *p, char *out, size_t n);
/* Pure: is an image built with stamp `stored` (NULL: none recorded) stale for the host as
 * probed now? */
bool nsbox_image_host_stale(const char *stored, const struct nsbox_host_probe *now);

/* passwd/group for images. shell: appuser's login shell. The generated ones hold root, appuser
 * and nobody; the *_add_appuser forms take an existing file (debian) and replace any entry that
 * is named appuser or uses id 1000. Return malloc'd text or NULL (ENOMEM). */
char *nsbox_image_passwd_add_appuser(const char *passwd, const char *shell);
char *nsbox_image_group_add_appuser(const char *group);
char *nsbox_image_passwd_generate(const char *shell);
char *nsbox_image_group_generate(void);

/* apt sources, to pick the mirror for debootstrap. */
enum nsbox_image_debian_file_kind {
    NSBOX_APT_FILE_IGNORE,
    NSBOX_APT_FILE_LIST,
    NSBOX_APT_FILE_SOURCES
};
/* Which files in sources.list.d apt reads: *.list (one-line format) and *.sources (deb822)
 * whose names use only [A-Za-z0-9_.-]; anything else (*.disabled, *.save, editor backups) is
 * ignored, as apt does. */
enum nsbox_image_debian_file_kind nsbox_image_debian_file_kind(const char *filename);

struct nsbox_mirror_pick {
    char uri[512];
    bool exact; /* the chosen entry lists `suite` itself (not only suite-security etc.) */
};
/* Feed files in apt's order (sources.list, then sources.list.d sorted). The pick is the first
 * `deb` URI (deb-src ignored, disabled stanzas ignored) whose suites include `suite`; failing
 * that, the first `deb` URI at all. Only http, https and file URIs count (debootstrap's). */
void nsbox_image_debian_pick_from_list(const char *text, const char *suite,
                                       struct nsbox_mirror_pick *p);
void nsbox_image_debian_pick_from_sources(const char *text, const char *suite,
                                          struct nsbox_mirror_pick *p);

/* VERSION_CODENAME from os-release text (quotes removed). 0, or -1 if absent/empty. */
int nsbox_image_debian_codename(const char *text, char *out, size_t n);

/* -- store plumbing (image.c), used by the builders -- */
struct nsbox_image_txn {
    char images[PATH_MAX]; /* <data>/images */
    char name[64];
    char tmp[PATH_MAX]; /* <data>/images/.tmp-<name>-<pid> */
    int tmp_fd;         /* O_DIRECTORY fd of tmp, flock(LOCK_EX) while building */
    int build_lock_fd;  /* <data>/images/.lock-<name>, flock(LOCK_EX): one builder at a time */
};
/* <data>/images, created if needed. */
int nsbox_image_store_dir(char *out, size_t n, struct nsbox_err *e);
/* Take the build lock, remove leftovers of dead builds, create the tmp directory. */
int nsbox_image_txn_begin(struct nsbox_image_txn *t, const char *name, bool progress,
                          struct nsbox_err *e);
/* Write image.json (name, kind, created, builder_version, packages, then the extra string
 * pairs: key, value, ..., NULL), swap the tmp directory in under the real name, drop the old
 * one (or leave it for later if running sandboxes hold it). */
int nsbox_image_txn_commit(struct nsbox_image_txn *t, const char *kind, const char *const *pkgs,
                           const char *const *extra_kv, struct nsbox_err *e);
/* Remove the tmp directory and release the locks (safe after commit: then a no-op). */
void nsbox_image_txn_end(struct nsbox_image_txn *t);

/* Create or replace a file relative to dfd with exactly `mode` (umask does not apply). */
int nsbox_image_write_at(int dfd, const char *path, const char *data, size_t len, mode_t mode,
                         struct nsbox_err *e);
/* Read a whole small file (limit bytes) into a malloc'd NUL-terminated string; NULL + errno. */
char *nsbox_image_read_text(int dfd, const char *path, size_t limit);
/* 0 if `path` opened inside `root_fd` (RESOLVE_IN_ROOT: symlinks, even absolute ones, stay in
 * the image) is an executable regular file; -1 with errno otherwise. */
int nsbox_image_check_exec_in_root(int root_fd, const char *path);

/* A line of a build's progress, with progress, to the note set (nsbox_image_set_note). */
__attribute__((format(printf, 2, 3))) void nsbox_image_note(bool progress, const char *fmt, ...);

int nsbox_image_build_host(bool force, bool progress, struct nsbox_err *e);
int nsbox_image_build_debian(bool progress, struct nsbox_err *e);

#endif
