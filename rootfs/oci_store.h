/* OCI and Docker images in the image store.
 *
 * An image is a stored image (image.c's store: atomic builds, locks, rm) named
 * oci-<first 48 hex digits of its config digest> (its id, as docker's image id) holding
 * manifest.json and config.json and, in root's store, `layers` (the layers it is made of, each
 * stored once in the shared layer store, oci_layers.h), its top/ layer of nsbox's /etc files
 * and rootfs/, the mount point of their overlay; in an unprivileged store (or with
 * NSBOX_OCI_LAYOUT=merged) rootfs/ is the merge of its layers, made at import. References name
 * images through <data>/images/.refs/<ref, '/' as '+'>, a symlink whose text is the image's store
 * name, replaced atomically by a tag or a newer pull.
 *
 * Sources: an OCI layout directory, an OCI archive (a tar of one), a `docker save` archive
 * (either format: manifest.json, or the OCI layout docker 25+ writes), or a registry through
 * skopeo (oci_pull.c), which writes an OCI layout that is then imported. Every blob is hashed
 * while read and refused unless it matches its digest; a failed import leaves nothing. */
#ifndef NSBOX_OCI_STORE_H
#define NSBOX_OCI_STORE_H

#include "nsbox.h"
#include "oci_lookup.h"
#include "ociref.h"
#include "spec.h"

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>


struct nsbox_oci_imported {
    char name[64];                         /* store name: oci-<hex> */
    char ref[NSBOX_OCIREF_MAX + 1];        /* the reference it was tagged with, or "" */
    char digest[NSBOX_OCI_DIGEST_LEN + 1]; /* manifest digest ("" for docker save v1) */
    bool existed;                          /* the same image was in the store already */
};

/* Import src: a directory (OCI layout), a file or "-" (stdin: an archive). ref: the name to
 * tag it with (NULL: the archive's own RepoTag, if any). progress: lines on stderr. */
int nsbox_oci_store_import(const char *src, const char *ref, bool progress,
                           struct nsbox_oci_imported *out, struct nsbox_err *e);

/* Point ref at the image named by `from` (a reference or store name). */
int nsbox_oci_store_tag(const char *from, const char *ref, struct nsbox_err *e);

/* Remove a reference; the image goes with its last reference, and is refused (NSBOX_E_BUSY)
 * while a sandbox uses it. */
int nsbox_oci_store_remove(const char *ref, struct nsbox_err *e);

/* Remove every OCI image that no reference names and no sandbox uses, then every stored layer
 * that no image names. *removed, *layers: how many. */
int nsbox_oci_store_prune(unsigned *removed, unsigned *layers, struct nsbox_err *e);

struct nsbox_oci_ref {
    char ref[NSBOX_OCIREF_MAX + 1];
    char name[64];
};
/* Every reference, sorted. *out malloc'd. */
int nsbox_oci_store_refs(struct nsbox_oci_ref **out, size_t *n, struct nsbox_err *e);

/* Is the stored image `name` in use by a sandbox (someone holds its lock)? */
bool nsbox_oci_store_in_use(const char *name);

/* The store name for a reference, pulling it as pull says (missing: when it is not stored;
 * always: again; never: refuse a missing one; DEFAULT: as NSBOX_PULL says, else missing). An
 * id (oci-...) is never pulled. Before nsbox_image_resolve(), which does not pull. */
int nsbox_oci_store_resolve(const char *image, enum nsbox_pull pull, char *name, size_t n,
                            struct nsbox_err *e);

/* From image `name`'s store directory: its manifest digest, unpacked size, and (when asked,
 * malloc'd, NULL if absent) its config and manifest JSON. */
int nsbox_oci_store_meta(const char *name, char *digest, size_t dn, uint64_t *size,
                         char **config_json, char **manifest_json);

/* Image `name`'s own creation time, from its config (RFC 3339, as the image's builder wrote
 * it), into out; "" when the config has none. -1 when the image has no metadata. */
int nsbox_oci_store_created(const char *name, char *out, size_t n);

/* oci_pull.c: pull ref from its registry with skopeo and import it. tls_verify false: plain
 * HTTP or an untrusted certificate is accepted (skopeo's --src-tls-verify=false). */
int nsbox_oci_pull(const char *ref, bool progress, bool tls_verify,
                   struct nsbox_oci_imported *out, struct nsbox_err *e);

#endif
