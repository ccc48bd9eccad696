/* Looking OCI images up in the store (rootfs/oci_lookup.c): references to store names, and
 * what a sandbox made from an OCI image needs. Read-only; the store itself is oci_store.h. */
#ifndef NSBOX_OCI_LOOKUP_H
#define NSBOX_OCI_LOOKUP_H

#include "nsbox.h"
#include "ociref.h"

#include <stdbool.h>
#include <stddef.h>

#define NSBOX_OCI_NAME_PREFIX "oci-"

#include <string.h>
/* Does name have the prefix of an OCI image's store name ("oci-<id>")? */
static inline bool nsbox_oci_lookup_has_prefix(const char *name)
{
    return !strncmp(name, NSBOX_OCI_NAME_PREFIX, sizeof NSBOX_OCI_NAME_PREFIX - 1);
}

/* Is `image` (a spec's image) to be looked up as a reference? Bare names are stored names. */
bool nsbox_oci_lookup_is_ref(const char *image);

/* The store name an image reference (or "oci-<id>") stands for. NSBOX_E_NOTFOUND when the
 * store has no such reference. */
int nsbox_oci_lookup_name(const char *ref, char *name, size_t n, struct nsbox_err *e);

/* The canonical form of ref (canon) and its file name in .refs/ ('/' as '+'), both of
 * NSBOX_OCIREF_MAX + 1 bytes. */
int nsbox_oci_lookup_ref_file(const char *ref, char *canon, char *file, struct nsbox_err *e);

/* The image config's Env of the image a spec names in *out (NULL-terminated, one malloc'd
 * block; NULL when the image is not an OCI image, is not stored or has none); -1 when its
 * stored config does not parse. */
int nsbox_oci_lookup_env(const char *image, char ***out, struct nsbox_err *e);

/* The check made when a sandbox is created from a stored OCI image (dir: its store directory):
 * python3 on the image's PATH (bin/sh is checked for every image). */
int nsbox_oci_lookup_check(int rootfs_fd, const char *dir, struct nsbox_err *e);

#endif
