/* An OCI image unpacked into the store, under the store name it will have (an image.c
 * transaction: whole or not at all).
 *
 * As shared layers (oci_layers.h) with a top layer of nsbox's /etc files, or, with
 * NSBOX_OCI_LAYOUT=merged or for a user who cannot mount an overlay here (said in a note),
 * merged into one rootfs/. Shared layers that are not stored yet are unpacked side by side,
 * NSBOX_OCI_JOBS at once (by default one per processor, at most 4): they share the image's
 * limits, and the first that fails stops the others; a failed import keeps no layer. */
#ifndef NSBOX_OCI_UNPACK_H
#define NSBOX_OCI_UNPACK_H

#include "nsbox.h"
#include "oci_source.h"

#include <stdbool.h>

int nsbox_oci_unpack_image(const struct nsbox_oci_source *s, const struct nsbox_oci_plan *p,
                           const char *name, bool progress, struct nsbox_err *e);

#endif
