/* The id maps of a sandbox's user namespace, written from the host (policy/idmap.h decides
 * them): by nsbox itself as root or for a single id, through the set-user-ID helpers
 * newuidmap/newgidmap (Debian's uidmap) for an unprivileged caller's subordinate ids. */
#ifndef NSBOX_USERNS_H
#define NSBOX_USERNS_H

#include "nsbox.h"
#include "idmap.h"
#include "image.h"
#include "mounts.h"

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define NSBOX_NEWUIDMAP "/usr/bin/newuidmap"
#define NSBOX_NEWGIDMAP "/usr/bin/newgidmap"

/* Whether an unprivileged caller (the real uid and gid) can have a range of ids: both helpers
 * are set-user-ID root and /etc/subuid and /etc/subgid grant it NSBOX_ID_COUNT ids each. 1 with
 * *sub filled; 0 with why (of n bytes) saying what is missing. */
int nsbox_userns_subids(struct nsbox_subids *sub, char *why, size_t n);
/* The maps of pid's new user namespace: setgroups denied first, then uid_map and gid_map.
 * helper: through newuidmap/newgidmap (else written by us, which needs root for more than the
 * caller's own id). A helper that fails before writing anything leaves the single-id maps
 * (*fell_back true): the sandbox then has appuser only, as without subordinate ids.
 * allow_setgroups (not with a helper): setgroups stays allowed, for an init that sets the
 * workload's supplementary groups itself. */
int nsbox_userns_write_maps(pid_t pid, const struct nsbox_idmaps *m, bool helper,
                            bool allow_setgroups, bool *fell_back, struct nsbox_err *e);

/* Root's side of making a sandbox's user namespace owned by the host uid `owner`
 * (nsbox_idmap_userns_owner): the calling thread's effective and saved uid become owner (the
 * real uid stays 0, and the file system uid 0, so that the clone reads root's files as before)
 * until nsbox_userns_owner_end, which makes it root again. Only the calling thread changes (no
 * other thread may clone meanwhile); its dumpable flag is restored. */
enum nsbox_userns_owner_step {
    NSBOX_USERNS_OWNER_OK,
    NSBOX_USERNS_OWNER_UID,   /* the effective and saved uid could not become owner */
    NSBOX_USERNS_OWNER_FSUID, /* the file system uid did not stay 0 */
};
struct nsbox_userns_owner {
    int dumpable;
    bool changed;
};
/* Async-signal-safe, for it runs in a bare clone's child too (the join helper, launch.h): no
 * message, only which step failed (returned) with errno set; the parent says it
 * (nsbox_userns_owner_fail). 0 when owner's ids are taken. */
enum nsbox_userns_owner_step nsbox_userns_owner_begin(uint32_t owner,
                                                      struct nsbox_userns_owner *o);
int nsbox_userns_owner_end(struct nsbox_userns_owner *o);
/* What nsbox_userns_owner_begin's failure at step, of errno err, means: e filled, -1. */
int nsbox_userns_owner_fail(uint32_t owner, enum nsbox_userns_owner_step step, int err,
                            struct nsbox_err *e);

/* A user namespace with the given maps (n lines each, uid and gid alike), as an fd for
 * MOUNT_ATTR_IDMAP. A short-lived child makes it; we write its maps. */
int nsbox_userns_fd(const struct nsbox_idmap *um, unsigned nu, const struct nsbox_idmap *gm,
                    unsigned ng, struct nsbox_err *e);

/* A detached, read-only (nosuid, nodev) copy of the OCI image tree img->root (or, for an
 * image made of layers, their overlay) whose owners
 * (NSBOX_IMAGE_ID_BASE + N on disk) are the ids N of the sandbox whose id 0 is host id
 * slot_base. 0 with *mount_fd; 1 when the filesystem or kernel has no idmapped mounts (the
 * caller binds plainly: the owners then show as nobody). */
int nsbox_userns_image_tree(const struct nsbox_image *img, uint32_t slot_base, int *mount_fd,
                            struct nsbox_err *e);

/* nsbox-oci's writable root: a detached, writable (nosuid, nodev) copy of the directory root
 * whose host ids N (the bundle's owners, 0-65535) are the sandbox's ids N, so that the
 * container's root writes as the bundle's owner, host root included, while it runs as
 * slot_base. On an engine's overlay, which the kernel does not idmap, the same overlay made
 * again over idmapped layers (rootfs/ovl_root.h). 0 with *mount_fd; 1 when neither can be made
 * there (Linux before 5.12, no CAP_SYS_ADMIN, an overlay nsbox-oci cannot make again), with e
 * saying why; < 0 otherwise. */
struct nsbox_setid_list;
/* *seal_list: on an engine's overlay, its layers' set-id candidates (rootfs/setid_layers.h) or
 * NULL; the caller's to free. */
int nsbox_userns_root_tree(const char *root, uint32_t slot_base, int *mount_fd,
                           struct nsbox_setid_list **seal_list, struct nsbox_err *e);

/* A config's idmapped volume (im->idmap): a detached copy of the host directory m->source,
 * nosuid and nodev (read-only and noexec as m asks), whose on-disk ids are the sandbox's as im's
 * maps say (none: on-disk N is the sandbox's id N, as nsbox_userns_root_tree's), the sandbox's
 * id 0 being host id slot_base. m->recursive clones its submounts, im->recursive idmaps them;
 * an engine's volume (im->engine_volume) is cloned from im->source_fd. 0 with *mount_fd; 1 (e
 * says why) for an engine's volume whose idmap the kernel or the filesystem refuses, which the
 * caller leaves a plain bind; < 0 otherwise, NSBOX_E_UNSUPPORTED where the kernel or the
 * filesystem refuses an idmap the config asked for. */
int nsbox_userns_volume_tree(const struct nsbox_rootfs_mount *m,
                             const struct nsbox_rootfs_idmap *im, uint32_t slot_base, int *mount_fd,
                             struct nsbox_err *e);

#endif
