/* The shared store of unpacked OCI layers, and the overlay a sandbox's root is made of.
 *
 * <data>/images/.layers/<chain id>/ holds diff/, one layer unpacked alone in overlayfs's form
 * (oci_layer.h), and info (its bytes and entries). A layer is keyed by its chain id (the
 * layer's diff_id hashed with the chain id of the layers below it, as docker's layer ids), so
 * that two images with a common base hold its layers once. Each is unpacked once, into
 * .layers/.tmp-<chain>-<pid>/, and renamed into place whole: a layer under its own name is
 * never half unpacked. Layers are read-only once in place.
 *
 * An image made of layers names them in its store directory's `layers` file,
 * one chain id a line, bottom first; its own top/ holds what nsbox generates (/etc/passwd with
 * appuser, group, hosts, resolv.conf), and its rootfs/ is an empty directory that a sandbox's
 * mount namespace covers with the overlay. The references are counted from those files when
 * layers are collected (nsbox_oci_layers_gc), never kept as counters that a crash could leave
 * wrong. Importers hold .layers/.lock shared from their first layer to the image's commit; the
 * collector takes it exclusively, so that it never removes a layer an import is about to name. */
#ifndef NSBOX_OCI_LAYERS_H
#define NSBOX_OCI_LAYERS_H

#include "nsbox.h"
#include "oci_layer.h"

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>

#define NSBOX_OCI_CHAIN_HEX 64
#define NSBOX_OCI_LAYERS_FILE "layers"

struct nsbox_oci_layers {
    char dir[PATH_MAX]; /* <data>/images/.layers */
    int dir_fd;
    int lock_fd; /* .lock, held shared */
};

/* Open the store for an import (created if needed), holding its lock shared until close. */
int nsbox_oci_layers_open(struct nsbox_oci_layers *s, struct nsbox_err *e);
void nsbox_oci_layers_close(struct nsbox_oci_layers *s);

/* The chain id (hex) of a layer whose diff_id ("sha256:...") lies on parent ("" at the
 * bottom): sha256 of "sha256:<parent> <diff_id>", as the OCI image spec defines it. */
void nsbox_oci_layers_chain(const char *parent, const char *diff_id,
                            char out[NSBOX_OCI_CHAIN_HEX + 1]);

/* The stored layer `chain`: 1 with *diff_fd an O_PATH fd of its diff/ and its totals added to
 * *st (checked against lim), 0 when it is not stored. */
int nsbox_oci_layers_find(struct nsbox_oci_layers *s, const char *chain,
                          const struct nsbox_oci_limits *lim, struct nsbox_oci_layer_stats *st,
                          int *diff_fd, struct nsbox_err *e);

/* The layer `chain`, unpacked once: found in the store (1, *st gets its totals), or unpacked
 * from blob_fd (0; digest, diff_id, size, lim and form, whose overlay must be set, as
 * nsbox_oci_layer_apply). *diff_fd: an O_PATH fd of its diff/. Layers of one image may be got
 * by several threads at once. */
int nsbox_oci_layers_get(struct nsbox_oci_layers *s, const char *chain, int blob_fd,
                         const char *digest, const char *diff_id, int64_t size,
                         const struct nsbox_oci_limits *lim,
                         const struct nsbox_oci_layer_form *form, struct nsbox_oci_layer_stats *st,
                         int *diff_fd, struct nsbox_err *e);

/* Is the store directory image_dir_fd an image made of layers? */
bool nsbox_oci_layers_is_layered(int image_dir_fd);

/* The chain ids image_dir_fd's image names (its `layers` file), bottom first: *n of them, in
 * ids (NSBOX_OCI_LAYERS_MAX entries). -1 with errno. */
int nsbox_oci_layers_read(int image_dir_fd, char (*ids)[NSBOX_OCI_CHAIN_HEX + 1], size_t *n);

/* Remove every layer no image names. *removed: how many. Nothing when an import holds the
 * store (its layers are not yet named): the next collection takes them. */
int nsbox_oci_layers_gc(unsigned *removed, struct nsbox_err *e);

#endif
