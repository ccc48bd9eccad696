/* Where nsbox keeps things (docs/architecture.md, "State"). root: /run/nsbox, /var/lib/nsbox,
 * /root/.cache/nsbox; a user: $XDG_RUNTIME_DIR/nsbox (or /tmp/nsbox-<uid>), ~/.local/share/nsbox,
 * ~/.cache/nsbox. NSBOX_STATE_DIR, NSBOX_DATA_DIR and NSBOX_CACHE_DIR override (tests). */
#ifndef NSBOX_PATHS_H
#define NSBOX_PATHS_H

#include "nsbox.h"

#include <stddef.h>

/* Where nsbox_paths_runtime_dir looks, without NSBOX_STATE_DIR: root's; $XDG_RUNTIME_DIR plus
 * NSBOX_RUNTIME_SUBDIR when writable; else NSBOX_TMP_RUNTIME_FMT with the uid. */
#define NSBOX_ROOT_RUNTIME_DIR "/run/nsbox"
#define NSBOX_RUNTIME_SUBDIR "/nsbox"
#define NSBOX_TMP_RUNTIME_FMT "/tmp/nsbox-%s"
int nsbox_paths_runtime_dir(char *out, size_t n, struct nsbox_err *e); /* state: <..>/<id>/ */
int nsbox_paths_data_dir(char *out, size_t n, struct nsbox_err *e);    /* images, caches */
int nsbox_paths_cache_dir(char *out, size_t n, struct nsbox_err *e);   /* workspaces */
/* A path in the image store, <data dir>/images followed by fmt ("/%s/rootfs"; "%s", "" for the
 * store itself); made by nobody here (nsbox_image_store_dir makes the store). */
int nsbox_paths_images(char *out, size_t n, struct nsbox_err *e, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* As root, the three above also refuse (NSBOX_E_POLICY) a directory that another user could
 * write, or one below such a directory: nsbox_paths_check_private. */
/* dir (made absolute), each directory above it and where its symlinks lead (also a link to a
 * place not made yet): owned by root or us and writable by no one else (a sticky directory
 * above it may be everyone's). -1 (e: "<label> <dir>: <component> belongs to uid N ... (mode
 * M): another user could <why>; <fix>", or that it cannot be resolved, and fix). */
int nsbox_paths_check_private(const char *label, const char *dir, const char *why, const char *fix,
                              struct nsbox_err *e);
/* mkdir -p: path itself with mode, the missing directories on the way mode | 0711 (less the
 * umask); existing ones are left as they are. */
int nsbox_paths_mkdir_p(const char *path, unsigned mode, struct nsbox_err *e);
/* Remove a directory tree without following symlinks and without crossing mount points. */
int nsbox_paths_rm_rf(const char *path, struct nsbox_err *e);

#endif
