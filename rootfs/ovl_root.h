/* nsbox-oci's writable root where the bundle's root is an engine's overlay (Docker's overlay2,
 * containerd's overlayfs snapshotter, Podman's overlay): the kernel does not idmap an overlay
 * mount, but takes idmapped layers, so the same overlay is made again, over idmapped clones of
 * the engine's layer directories and with the engine's upper directory, read from the mount
 * table (policy/ovlinfo.h). What the container writes lands in the engine's upper directory,
 * owned on disk as the engine would write it (docs/oci.md, "The root"; docs/decisions.md, "An
 * engine's overlay root is made again over idmapped layers"). */
#ifndef NSBOX_OVL_ROOT_H
#define NSBOX_OVL_ROOT_H

#include "nsbox.h"

#include <stdbool.h>
#include <stdint.h>

/* Is the directory root on overlayfs? */
bool nsbox_ovl_root_is_overlay(const char *root);

/* The overlay whose root directory is root, made again writable: a detached mount (nosuid,
 * nodev) in *mount_fd whose host ids N (0-65535) are the ids N of the sandbox whose user
 * namespace is userns_fd (its id 0 host id slot_base). Its work directory is its own,
 * "nsbox" inside the engine's (whose "work" the kernel would otherwise empty under the
 * engine's overlay). 0; 1 when it cannot be made here, e saying why (the caller keeps the
 * read-only root). Layer paths are opened with no symlink, but for a layer's last two
 * components (Docker's and Podman's short links, l/ID), which are followed only beneath the
 * directory above them. Relative paths are read from the storage directory the mount point
 * names (policy/ovlinfo.h). The upper directory found, absolute or relative, must be the
 * overlay's (its root directory has the upper's inode number): the mount table keeps the paths
 * the engine mounted with, which may lead elsewhere later. */
struct nsbox_setid_list;
/* *list: the layers' set-id candidates for the seal (setid_layers.h), or NULL (the seal walks
 * the merged root); the caller's to free. */
int nsbox_ovl_root_make(const char *root, int userns_fd, uint32_t slot_base, int *mount_fd,
                        struct nsbox_setid_list **list, struct nsbox_err *e);

#endif
