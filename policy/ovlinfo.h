/* An overlayfs mount as /proc/self/mountinfo describes it: its layers and the options nsbox-oci
 * needs to make the same overlay again over idmapped layers (an engine's container root,
 * docs/oci.md, "The root"). The text is the engine's (its paths, as it gave them to the
 * kernel), read with the kernel's escapes: \ooo (octal) for a space, tab, newline, backslash,
 * and, in the filesystem's options, ',' and '='; overlayfs's own '\' before a ':' in a
 * lowerdir path. Pure: unit tested (tests/unit/test_ovlinfo.c) and fuzzed
 * (tests/fuzz/fuzz_ovlinfo.c). */
#ifndef NSBOX_OVLINFO_H
#define NSBOX_OVLINFO_H

#include "nsbox.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The kernel's limit on an overlay's lower layers (OVL_MAX_STACK). */
#define NSBOX_OVLINFO_LAYERS_MAX 500

struct nsbox_ovlinfo {
    uint64_t mount_id;
    const char *root;        /* the mount's root in its filesystem: "/" for a whole overlay */
    const char *mount_point; /* as this mount namespace sees it */
    const char *fstype;
    const char *lower[NSBOX_OVLINFO_LAYERS_MAX]; /* top first */
    size_t n_lower;
    size_t n_data;            /* data-only layers ("::" or datadir+), not in lower[] */
    const char *upper, *work; /* NULL: none (a read-only overlay) */
    const char *redirect_dir; /* as the mount shows it; NULL: the kernel's default */
    bool read_only;           /* the superblock's "ro" */
    bool index, nfs_export, metacopy, userxattr, volatile_;
    /* index=..., nfs_export=... and metacopy=... shown: the kernel shows them only when they
     * differ from its default (the overlay module's parameters), which then decides */
    bool index_shown, nfs_export_shown, metacopy_shown;
    /* the directory its relative paths were given from (nsbox_ovlinfo_relative_from), or NULL:
     * a relative path is then refused */
    const char *from;
    char from_dir[4096];
};

/* The line of mount mount_id in a mountinfo table (NUL-terminated text, lines ending in '\n'):
 * NUL-terminated in place, or NULL when the table has none. */
char *nsbox_ovlinfo_find(char *table, uint64_t mount_id);

/* One mountinfo line (no '\n') into o, unescaped in place: o's strings point into line.
 * NSBOX_E_INVALID when it is not a mountinfo line, or not an overlay's, or an escape gives a
 * NUL or a control character. */
int nsbox_ovlinfo_parse(char *line, struct nsbox_ovlinfo *o, struct nsbox_err *e);

/* Where the relative paths of an overlay were given from, when it has the shape Docker's and
 * Podman's give it where the options are longer than a page: mounted from their storage
 * directory D at D/ID/merged, with upperdir ID/diff and workdir ID/work, the layers as
 * l/NAME. Then o->from is D (in o->from_dir), which the caller must verify (the overlay's
 * upper directory is D/ID/diff); otherwise it stays NULL. */
void nsbox_ovlinfo_relative_from(struct nsbox_ovlinfo *o);

/* Whether nsbox-oci can make the overlay again, writable, over idmapped layers: 0, or
 * NSBOX_E_UNSUPPORTED with the reason (no upper directory, a relative path without o->from, a
 * "."/".." component, data layers, userxattr, index or nfs_export on, a read-only
 * superblock). */
int nsbox_ovlinfo_check(const struct nsbox_ovlinfo *o, struct nsbox_err *e);

/* upper and work under one directory, as the kernel wants them (one mount): their deepest
 * common directory into base (n bytes; "." for two relative paths with none), and their paths
 * below it (pointers into o's strings). Both must have passed nsbox_ovlinfo_check. */
int nsbox_ovlinfo_upper_base(const struct nsbox_ovlinfo *o, char *base, size_t n,
                             const char **upper_rel, const char **work_rel, struct nsbox_err *e);

/* A layer's path split where it is opened: the directory two levels up (into dir, n bytes:
 * "/" at the least) and the rest ("l/ABC" of ".../overlay2/l/ABC"), which may be a symlink
 * followed only beneath dir (Docker's and Podman's short links). */
int nsbox_ovlinfo_split_layer(const char *path, char *dir, size_t n, const char **rest,
                              struct nsbox_err *e);

#endif
