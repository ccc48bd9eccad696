/* An engine's named volume told from any other bind by its path (nsbox-oci's
 * --idmap-volumes=engine, docs/oci.md, "Idmapped volumes"). Docker keeps a container's root and
 * its named volumes below one data root <R>: the root at <R>/overlay2/<id>/merged or
 * <R>/vfs/dir/<id>, a volume of its local driver at <R>/volumes/<name>/_data. The root path
 * gives <R>; a bind whose source is exactly one of its volumes' paths is that engine's volume.
 * Only the text is read here: the caller opens both below <R> with no symlink followed and
 * checks that they are the directories the config names. Pure: unit tested
 * (tests/unit/test_enginevol.c) and fuzzed (tests/fuzz/fuzz_enginevol.c). */
#ifndef NSBOX_ENGINEVOL_H
#define NSBOX_ENGINEVOL_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>

/* A container root of an engine's: its data root <R> and the root's path below it. */
struct nsbox_enginevol_root {
    char data_root[PATH_MAX]; /* absolute, not "/" */
    char root_rel[PATH_MAX];  /* "vfs/dir/<id>" or "overlay2/<id>/merged" */
};

/* Is root (an absolute path without symlinks, "." or "..", "//" or a trailing '/') a container
 * root of Docker's overlay2 or vfs driver? out filled when it is. */
bool nsbox_enginevol_root(const char *root, struct nsbox_enginevol_root *out);

/* Is source exactly <R>/volumes/<name>/_data, <R> r's data root and <name> a volume's name as
 * Docker allows them ([A-Za-z0-9][A-Za-z0-9_.-]*)? rel ("volumes/<name>/_data", n bytes) filled
 * when it is. */
bool nsbox_enginevol_volume(const struct nsbox_enginevol_root *r, const char *source, char *rel,
                            size_t n);

#endif
