/* libarchive and libcrypto, loaded on first call (imagelibs.c): the image code (and the egress
 * helper's CA and TLS, libcrypto only) calls their functions as usual, and a command that
 * imports no image and makes no sandbox with header bindings maps neither library. */
#ifndef NSBOX_IMAGELIBS_H
#define NSBOX_IMAGELIBS_H

#include "nsbox.h"

/* Both libraries loaded now, or -1 with e filled (NSBOX_E_UNSUPPORTED, what is missing and the
 * packages to install): called before an import starts, so that a broken install is said as
 * such and not as the failure of a call into a library that is not there. */
int nsbox_imagelibs_load(struct nsbox_err *e);

/* ISA-L's inflate (libisal2), about twice zlib's speed, for gzip layers (rootfs/oci_stream.c):
 * its three functions, or NULL where the library cannot be loaded or is not the release the
 * build's <isa-l.h> describes (policy/isalver.h), and libarchive's gzip (zlib) does the work.
 * Loaded once, on the first call. */
struct inflate_state;
struct nsbox_imagelibs_isal {
    void (*init)(struct inflate_state *st);
    void (*reset)(struct inflate_state *st);
    int (*inflate)(struct inflate_state *st);
};
const struct nsbox_imagelibs_isal *nsbox_imagelibs_isal(void);

/* Why nsbox_imagelibs_isal() is NULL, and how to mend it ("" when it is not). */
const char *nsbox_imagelibs_isal_why(void);

#endif
