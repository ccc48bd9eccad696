/* Mount propagation a bundle asks for (a mount's "shared", "rslave", "private", "unbindable", ...
 * options; linux.rootfsPropagation), and the steps that give it without ever making a
 * sandbox's mount a peer of the host's (docs/decisions.md, "Mount propagation: shared is the
 * container's own"). A bind of a host path starts as a slave of the host's mount (the mount
 * namespace is made a slave of the host's as a whole), so it can receive the host's later
 * mounts; shared is always a slave first, then shared in a peer group of its own, so nothing
 * the container mounts can reach the host. Pure: unit tested (tests/unit/test_propagation.c). */
#ifndef NSBOX_PROPAGATION_H
#define NSBOX_PROPAGATION_H

#include "nsbox.h"

#include <stdbool.h>
#include <stddef.h>

enum nsbox_propagation_kind {
    NSBOX_PROP_NONE, /* not asked: a bind is private, a new filesystem as it is made */
    NSBOX_PROP_PRIVATE,
    NSBOX_PROP_SLAVE,
    NSBOX_PROP_SHARED,
    NSBOX_PROP_UNBINDABLE,
};

struct nsbox_propagation {
    enum nsbox_propagation_kind kind;
    bool recursive; /* the option's "r" form (rshared, ...) */
};

/* Is opt a propagation option? Its kind into p when it is. */
bool nsbox_propagation_option(const char *opt, struct nsbox_propagation *p);
/* The propagation of a mount's comma-separated options into p (NSBOX_PROP_NONE when none).
 * Two different ones ("shared,private") are refused (NSBOX_E_INVALID) naming both and where
 * (the mount's destination). */
int nsbox_propagation_parse(const char *options, const char *where, struct nsbox_propagation *p,
                            struct nsbox_err *e);
/* linux.rootfsPropagation: "" (none) or one of the options. */
int nsbox_propagation_parse_root(const char *value, struct nsbox_propagation *p,
                                 struct nsbox_err *e);
/* The floor for a bind of a host path: read-only with slave or shared propagation is refused
 * (NSBOX_E_POLICY): the host's later mounts arrive with their own flags, writable, below a bind
 * the config says is read-only. */
int nsbox_propagation_check_bind(const struct nsbox_propagation *p, bool readonly,
                                 const char *where, struct nsbox_err *e);

/* The mount(2) propagation flags to apply in order (MS_PRIVATE, MS_SLAVE, MS_SHARED,
 * MS_UNBINDABLE, each with MS_REC when it covers every mount below), at most 2; how many.
 * host: the mount is a bind of a host path (a slave of the host's, as cloned); tree: it is a
 * recursive bind. A bind that asks for nothing is made private (all of its tree); slave and
 * shared cover the whole tree of a bind, so that no mount of it stays a peer of anything;
 * shared is a slave first. */
size_t nsbox_propagation_steps(const struct nsbox_propagation *p, bool host, bool tree,
                               unsigned long steps[2]);
/* The option's name ("rshared"), for messages and `features`; NULL for NSBOX_PROP_NONE. */
const char *nsbox_propagation_name(const struct nsbox_propagation *p);

#endif
