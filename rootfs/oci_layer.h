/* Unpacking one OCI/Docker layer (tar, tar+gzip, tar+zstd) onto a root directory, with the
 * layer semantics of Docker: whiteouts (.wh.NAME) and opaque directories (.wh..wh..opq) remove
 * what lower layers put there; hard links, symlinks, modes and mtimes are kept. Dropped: device
 * nodes, sockets, every xattr (security.* included), setuid and setgid bits. As root, owners
 * are kept as image ids (policy/idmap.h); otherwise files belong to whoever unpacks.
 *
 * The layer is hostile input. Every entry name is checked (policy/ocimanifest.h: no absolute
 * name, no ".."), every directory is opened with openat2(RESOLVE_IN_ROOT): a symlink, from this
 * layer or a lower one, resolves inside the root, never out of it. Sizes and entry counts are
 * bounded; the blob's sha256 is computed while it is read and a mismatch fails the layer. */
#ifndef NSBOX_OCI_LAYER_H
#define NSBOX_OCI_LAYER_H

#include "nsbox.h"
#include "ociref.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct nsbox_oci_limits {
    uint64_t max_bytes;   /* unpacked bytes of one image, all layers */
    uint64_t max_entries; /* entries of one image, all layers */
};
/* The defaults (64 GiB, 2 million entries), or NSBOX_OCI_MAX_BYTES / NSBOX_OCI_MAX_ENTRIES. */
void nsbox_oci_layer_limits(struct nsbox_oci_limits *l);

struct nsbox_oci_layer_stats {
    uint64_t bytes;   /* regular files' sizes */
    uint64_t entries; /* entries seen */
    uint64_t skipped; /* device nodes and sockets left out */
    uint64_t inflated; /* the layers' decompressed bytes (tars whole) */
};

/* What the layers of one image unpacked side by side share: the image's totals, charged
 * entry by entry against its limits, and a flag that stops the others when one fails. */
struct nsbox_oci_layer_shared {
    _Atomic uint64_t bytes, entries, inflated;
    atomic_bool cancel;
};

/* How a layer is written. NULL: merged onto the layers below it in one tree (whiteouts and
 * opaque directories remove what lower layers put there). overlay: alone in its own directory,
 * in overlayfs's form: a whiteout is a 0/0 character device, an opaque directory has
 * user.overlay.opaque=y (read by a mount with userxattr). lowers (may be NULL): the diff/ of
 * the layers below it, top first, from which a hard link's target is copied up into this
 * layer; asked for only by a layer that has such a link, it may wait until they are whole, and
 * fails when one of them failed. shared (may be NULL): what it shares with the layers unpacked
 * beside it. */
#define NSBOX_OCI_OPAQUE_XATTR "user.overlay.opaque"
struct nsbox_oci_layer_form {
    bool overlay;
    int (*lowers)(void *ctx, const int **fds, size_t *n, struct nsbox_err *e);
    void *ctx;
    struct nsbox_oci_layer_shared *shared;
};

/* Apply the layer in blob_fd (a regular file) onto root_fd. digest: the blob's expected sha256
 * ("sha256:..."); diff_id: the expected sha256 of the uncompressed tar (the image config's);
 * size: the blob's size, or -1. Merged (form NULL), the blob is read twice, and nothing is
 * written before both digests are verified: its whiteouts remove what the layers below put
 * there. In the overlay form, it is read once and its entries written as they come into the
 * layer's own directory, which the caller removes when this fails (a mismatch is found at the
 * end). Totals are added to *st, checked against *lim
 * (with form->shared, the image's totals there). */
int nsbox_oci_layer_apply(int root_fd, int blob_fd, const char *digest, const char *diff_id,
                          int64_t size, const struct nsbox_oci_limits *lim,
                          const struct nsbox_oci_layer_form *form, struct nsbox_oci_layer_stats *st,
                          struct nsbox_err *e);

/* The process's umask, read without changing it (0777, that is "every mode needs a chmod",
 * when /proc does not say). */
mode_t nsbox_oci_layer_umask(void);

/* Open the directory `rel` inside root_fd (RESOLVE_IN_ROOT), creating missing components
 * (0755) when create. O_PATH fd, or -1 with errno. */
int nsbox_oci_layer_open_dir(int root_fd, const char *rel, bool create);

#endif
