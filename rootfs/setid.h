/* nsbox-oci's writable root (mounts.h, root_in_place) and writable idmapped volumes: their set-id
 * programs and those with a file capability, each bound read-only onto itself before the
 * container runs.
 *
 * The container's root writes the bundle as its owner, host root for most bundles. nsbox's
 * seccomp profile keeps it from making a set-id file or setting a file capability, and the
 * kernel clears both when such a file is written with write(2) or truncated; but not when it is
 * written through a shared writable mapping (mmap), which keeps the bits and the capability
 * while the content becomes the container's: a set-user-ID-root program of the container's
 * making on the host's disk, for any host user who can reach the bundle. A read-only bind makes
 * the file's every path unwritable inside (EROFS), its removal and renaming refused (EBUSY: a
 * mount point), and a hard link to it impossible (EXDEV: another mount). */
#ifndef NSBOX_SETID_H
#define NSBOX_SETID_H

#include "nsbox.h"
#include "setidcand.h"
#include "sys.h"

#include <stddef.h>

/* Directories deeper than this below the root fail the walk (a file there could not be
 * sealed); files sealed at most (each is a mount of the container's namespace). */
#define NSBOX_SETID_DEPTH_MAX 256
#define NSBOX_SETID_FILES_MAX 4096

/* Walks the tree at rootfd (the root in place, before anything is mounted in it, or a writable
 * idmapped volume once attached; the mounts that came with it too, but for the kernel's own
 * filesystems) and binds every regular file with
 * S_ISUID, S_ISGID with group execute, or a security.capability attribute read-only onto itself;
 * a directory it cannot list (EACCES: of an id the idmap does not map, which the container may
 * still pass through by name) is bound read-only whole. The working directory is rootfd again
 * after. *sealed: how many. 0, or -1 with e. The cost is a
 * stat per entry and an attribute read per regular file: about 25 ms for 7,000 entries on this
 * 2-core machine. */
int nsbox_setid_seal(const struct nsbox_sys *sys, int rootfd, size_t *sealed, struct nsbox_err *e);

/* The same seal of a tree other containers may write at once (a writable idmapped volume),
 * whose walk is not atomic: a running container could rename a directory holding a set-id
 * program from the part not yet walked into one already walked, and the program would stay
 * writable here. So each directory above a sealed entry is also bound onto itself: a mount
 * point of this container's namespace, which its processes cannot rename or remove (EBUSY).
 * Every container on the volume holds so the directories of the programs its own walk found,
 * and none can move a program out of another's walk. The container sees a recursive clone of
 * the sealed tree over rootfd, made before those binds (which, of a directory alone, would
 * hide its seals). rootfd's mount then has that clone on it. */
int nsbox_setid_seal_shared(const struct nsbox_sys *sys, int rootfd, size_t *sealed,
                            struct nsbox_err *e);

struct nsbox_setid_cand {
    enum nsbox_setidcand kind;
    char *path; /* relative to the root, "usr/bin/su" */
};

/* Paths for the seal to look at (setid_layers.h makes them), sorted in nsbox_setidcand_cmp's
 * order: a directory, then what is below it. */
struct nsbox_setid_list {
    size_t n, cap;
    struct nsbox_setid_cand *c;
};

/* l (NULL: nothing) and its paths freed. */
void nsbox_setid_list_free(struct nsbox_setid_list *l);

/* The same seal of an overlay root, rootfd (with nothing mounted below it), from its layers'
 * candidates (setid_layers.h) instead of a walk of it: each path looked up in the merged view
 * with no symlink followed, a regular file sealed where it is a program there, a directory
 * sealed whole where it cannot be listed there (and what is below it passed over, as the walk
 * does). A path that is not there (hidden by a whiteout or an opaque directory, replaced by a
 * symlink's parent) is passed over. 0; -1 with e; 1 when a path cannot be looked up for another
 * reason (the caller then walks the root whole: a program could sit where the list cannot
 * reach). */
int nsbox_setid_seal_listed(const struct nsbox_sys *sys, int rootfd,
                            const struct nsbox_setid_list *l, size_t *sealed, struct nsbox_err *e);

#endif
