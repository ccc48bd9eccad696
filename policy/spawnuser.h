/* The user an exec'd process runs as, as the agent's SPAWN and nsbox-oci's exec request carry
 * it (sandbox/agent.h, oci/ocirt.h): one string of decimal numbers separated by single spaces,
 * "uid gid umask group...", umask -1 for "leave init's"; " nnp" after the groups when the
 * process asks for no_new_privs (its own noNewPrivileges, which init's lacks when the
 * container's config did not ask for it); and when the process has capability sets of its
 * own, " caps B E P I A" last: the bounding, effective, permitted, inheritable and ambient
 * sets as masks of 1 << CAP_*, in lowercase hex. The string comes from a peer of the agent's
 * socket, so its parser takes nothing unbounded. */
#ifndef NSBOX_SPAWNUSER_H
#define NSBOX_SPAWNUSER_H

#include "nsbox.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NSBOX_SPAWNUSER_GROUPS_MAX 32 /* as process.user.additionalGids (policy/ocispec.h) */
/* the longest string: 3 ids of 10 digits, "-1" or 3 digits, 32 groups, separators; " nnp";
 * " caps" and 5 masks of 16 digits */
#define NSBOX_SPAWNUSER_TEXT_MAX ((NSBOX_SPAWNUSER_GROUPS_MAX + 3) * 11 + 4 + 4 + 5 + 5 * 17)

enum nsbox_spawnuser_capset {
    NSBOX_SPAWNUSER_BOUNDING,
    NSBOX_SPAWNUSER_EFFECTIVE,
    NSBOX_SPAWNUSER_PERMITTED,
    NSBOX_SPAWNUSER_INHERITABLE,
    NSBOX_SPAWNUSER_AMBIENT,
    NSBOX_SPAWNUSER_CAPSETS,
};

struct nsbox_spawnuser {
    uint32_t uid, gid; /* at most 4294967294: (uid_t)-1 means "unchanged" to the kernel */
    int umask;         /* 0..0777, or -1 */
    size_t n_groups;
    uint32_t groups[NSBOX_SPAWNUSER_GROUPS_MAX];
    bool no_new_privs; /* set in the process before it execs (init's is kept when it has it) */
    /* the process's own capability sets; false: init's, as the kernel leaves them on a change
     * of ids */
    bool set_caps;
    uint64_t caps[NSBOX_SPAWNUSER_CAPSETS]; /* by enum nsbox_spawnuser_capset */
};

/* Into buf (NSBOX_SPAWNUSER_TEXT_MAX bytes at least): 0, or -1 when u is out of range. */
int nsbox_spawnuser_format(const struct nsbox_spawnuser *u, char *buf, size_t size);
/* From text (NUL-terminated): 0, or -1 with e saying what is wrong. */
int nsbox_spawnuser_parse(const char *text, struct nsbox_spawnuser *u, struct nsbox_err *e);

/* runc's --additional-gids value: a gid, or gids separated by commas, in decimal, appended to
 * groups (*n of max used): 0, or -1 with e (what, why, the fix). */
int nsbox_spawnuser_add_gids(const char *list, uint32_t *groups, size_t *n, size_t max,
                             struct nsbox_err *e);

#endif
