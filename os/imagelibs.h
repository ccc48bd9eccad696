/* libarchive and libcrypto, loaded on first call (imagelibs.c): the image code calls their
 * functions as usual, and a command that imports no image maps neither library. */
#ifndef NSBOX_IMAGELIBS_H
#define NSBOX_IMAGELIBS_H

#include "nsbox.h"

/* Both libraries loaded now, or -1 with e filled (NSBOX_E_UNSUPPORTED, what is missing and the
 * packages to install): called before an import starts, so that a broken install is said as
 * such and not as the failure of a call into a library that is not there. */
int nsbox_imagelibs_load(struct nsbox_err *e);

#endif
