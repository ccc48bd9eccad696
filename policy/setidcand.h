/* What a walk of an overlay's layer directories (rootfs/setid_layers.h) must hand to the seal of
 * the merged root (rootfs/setid.h) so that the seal, checking only those paths in the merged
 * view, binds read-only every program the walk of the whole merged root would: the decision
 * per entry, and the order the seal takes them in. Pure: unit tested (tests/unit/test_setidcand.c).
 *
 * Without redirects (which the layer walk refuses), every entry the merged root shows at a path
 * is a layer's entry at that same path, with the mode, owner and attributes of the topmost
 * layer that has it; so a program of the merged root is a regular file that is a program in
 * one layer at least, and a directory the merged walk cannot list (it seals it whole) is one
 * whose permission to the container's root is not certain in one layer at least. */
#ifndef NSBOX_SETIDCAND_H
#define NSBOX_SETIDCAND_H

#include <stdbool.h>
#include <sys/types.h>

enum nsbox_setidcand {
    NSBOX_SETIDCAND_NONE,
    NSBOX_SETIDCAND_FILE, /* a regular file that may be a program in the merged root */
    NSBOX_SETIDCAND_DIR,  /* a directory the merged walk may be unable to list */
};

/* One layer entry: its on-disk mode and owner as host root reads them (no idmap), whether it
 * has a security.capability attribute (or whether it could not be told: true), and whether it
 * has a POSIX access ACL (or could not be told: true). A regular file: S_ISUID, S_ISGID with
 * group execute, a capability (the merged walk's test, setid.h). A directory: an owner or group
 * outside the idmap's 0-65535 (no capability of the container's root overrides its modes), a
 * mode that does not let everyone list and search it, or an ACL (which may refuse the
 * container's root what the mode's other bits grant). */
enum nsbox_setidcand nsbox_setidcand_of(mode_t mode, uid_t uid, gid_t gid, bool cap, bool acl);

/* strcmp's order but with '/' below every other byte: a directory's path, then every path
 * below it, one after another, then its next sibling ("a", "a/b", "a!" and not "a", "a!",
 * "a/b"). <0, 0, >0. */
int nsbox_setidcand_cmp(const char *a, const char *b);

/* Is path dir itself or below it ("a/b" below "a"; "ab" is not)? */
bool nsbox_setidcand_below(const char *dir, const char *path);

#endif
