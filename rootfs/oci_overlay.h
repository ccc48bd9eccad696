/* The root of an image made of layers (rootfs/oci_layers.h): a read-only overlay of its top/
 * and its layers, top first, mounted with userxattr (the layers' opaque directories are marked
 * with user.overlay.opaque, the one form an overlay in a user namespace reads too).
 *
 * As root the overlay is made here, and its layers may be seen through idmapped mounts, one
 * a layer (an overlay cannot be idmapped itself; its layers can). Other users cannot mount
 * in the host's namespaces: a short-lived child makes the overlay in a user and mount namespace
 * of its own (unprivileged overlay mounts, Linux 5.11) and hands it back, detached, over a
 * socket; a sandbox's mount namespace can attach it like any other.
 *
 * The same overlay, writable, is an engine's container root made again over idmapped mounts
 * of the engine's own layers (nsbox_oci_overlay_rw, for rootfs/ovl_root.c). */
#ifndef NSBOX_OCI_OVERLAY_H
#define NSBOX_OCI_OVERLAY_H

#include "nsbox.h"

#include <stddef.h>
#include <stdint.h>

/* The overlay of images/<rel[0]> (top) ... images/<rel[n - 1]> (bottom): a detached, read-only
 * (nosuid, nodev) mount. idmap_userns_fd >= 0 (root only): each layer seen through an idmapped
 * mount made with that user namespace; 1 when the kernel or filesystem has none (the caller
 * may ask again without). At least two layers. */
int nsbox_oci_overlay_lowers(const char *images, int idmap_userns_fd, const char *const *rel,
                             size_t n, int *mount_fd, struct nsbox_err *e);

/* The root of the layered image in image_dir (<images>/<name>). idmap_userns_fd: as for
 * nsbox_oci_overlay_lowers. */
int nsbox_oci_overlay_image(const char *image_dir, int idmap_userns_fd, int *mount_fd,
                            struct nsbox_err *e);

/* The kernel's limit on an overlay's lower layers. */
#define NSBOX_OCI_OVERLAY_RW_MAX 500

/* A writable overlay of an engine's layers (rootfs/ovl_root.c): O_PATH descriptors of the
 * host's directories, each seen through an idmapped mount made here with the user namespace
 * given, so that host id N on disk is the sandbox's id N. */
struct nsbox_oci_overlay_rw {
    const int *lower; /* top first */
    size_t n_lower;
    int upper_base; /* the directory holding upperdir and workdir: cloned once, as the
                     * kernel wants both on one mount */
    const char *upper_rel, *work_rel; /* below it, resolved with no symlink */
    const char *redirect_dir;         /* NULL: the kernel's default */
    bool metacopy;       /* the engine's: its upper directory's metadata-only copies up are read */
    uint32_t creator_id; /* the host id (uid and gid) the overlay makes its own files as: the
                          * sandbox's root, on disk the engine's 0 through the idmap */
};

/* The step of making an overlay that failed (0: none); the helper child of a user's overlay
 * makes only system calls (it is a bare clone), so it sends this back and its parent says it. */
enum nsbox_oci_overlay_step {
    NSBOX_OCI_OVERLAY_FSOPEN = 1,
    NSBOX_OCI_OVERLAY_USERXATTR,
    NSBOX_OCI_OVERLAY_LOWERDIR,
    NSBOX_OCI_OVERLAY_CREATE,
    NSBOX_OCI_OVERLAY_MOUNT,
    NSBOX_OCI_OVERLAY_MAPS,
    NSBOX_OCI_OVERLAY_UPPERDIR,
    NSBOX_OCI_OVERLAY_WORKDIR,
    NSBOX_OCI_OVERLAY_OPTION, /* index or redirect_dir */
    NSBOX_OCI_OVERLAY_METACOPY
};
struct nsbox_oci_overlay_fail {
    int step; /* an nsbox_oci_overlay_step; 0: none */
    int err;
    char log[256]; /* the kernel's own words (the fs context's log), or "" */
};

/* Did the kernel refuse the metacopy option itself: the option when it was set, or the
 * overlay's creation (EINVAL) with the kernel's log naming it? Not any failure of an overlay
 * made with metacopy=on: the advice to mount without metacopy fits only this one. */
bool nsbox_oci_overlay_metacopy_refused(const struct nsbox_oci_overlay_fail *f);

/* The overlay of rw: a detached, writable, nosuid and nodev mount, its lowers read-only,
 * nosuid and nodev too, with trusted.overlay.* attributes as the engine's layers have them
 * (not userxattr), index off, metacopy as rw->metacopy. 1 (e says why) when the kernel has no
 * idmapped mounts there or made the overlay read-only; < 0 otherwise. *fail: the kernel's
 * refusal of the mount, when that was the failure (its step, else 0). */
int nsbox_oci_overlay_rw(const struct nsbox_oci_overlay_rw *rw, int userns_fd, int *mount_fd,
                         struct nsbox_oci_overlay_fail *fail, struct nsbox_err *e);

#endif
