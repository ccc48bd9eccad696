/* Which installed ISA-L nsbox may call (os/imagelibs.c): rootfs/oci_stream.c allocates
 * struct inflate_state by the build's <isa-l.h> and reads its fields, and that struct's layout
 * has changed between releases under the one soname libisal.so.2. Only the release the build
 * was made against is used; its file is named libisal.so.MAJOR.0.MINOR (libtool's name, e.g.
 * libisal.so.2.0.30 for 2.30). Pure: unit tested (tests/unit/test_isalver.c). */
#ifndef NSBOX_ISALVER_H
#define NSBOX_ISALVER_H

#include <stdbool.h>

/* Is the library file at path (its real name, symbolic links resolved; only the last component
 * is read) ISA-L major.minor? A name of another release, another library or none: no. */
bool nsbox_isalver_matches(const char *path, int major, int minor);

#endif
