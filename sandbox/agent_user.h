/* The user an agent's command runs as (NSBOX_AGENT_F_USER, agent.h), in the child init
 * forks for it. */
#ifndef NSBOX_AGENT_USER_H
#define NSBOX_AGENT_USER_H

#include "spawnuser.h"

#include <stdbool.h>

/* The calling process (init's child for a command, before it enters cwd) becomes u: groups,
 * gid, then uid (last: a uid that leaves 0 takes the capabilities the others need), each only
 * when it differs, so that an init without CAP_SETUID and CAP_SETGID still runs commands as
 * itself; then u's umask, if it has one. With u's own capability sets: the bounding set is cut
 * first, and after the ids the effective, permitted, inheritable and ambient sets are u's, cut
 * from init's (the kernel refuses more; keep-caps carries the permitted set over a uid that
 * leaves 0). Raw system calls: the child may share init's memory (agent_exec.h), and glibc's
 * set*id would act on init's threads. 0, or the errno, with *caps_failed saying whether the
 * capabilities failed (else the ids). */
int nsbox_agent_user_become(const struct nsbox_spawnuser *u, bool *caps_failed);

/* nsbox-oci's init: the container's capability sets, which a SPAWN without sets of its own
 * gets, so that what init keeps beyond them for its children (keep: launch.h, cap_keep) is
 * given up by every command. */
void nsbox_agent_user_set_caps(uint64_t bounding, uint64_t effective, uint64_t permitted,
                               uint64_t inheritable, uint64_t ambient, uint64_t keep);
/* The user a SPAWN's command becomes, u as parsed when given: with sets set by
 * nsbox_agent_user_set_caps, one that names no capability sets gets those, and one without a
 * user string init's own ids. Whether the command is to become u (else it keeps init's ids and
 * sets, as in nsbox's own sandboxes). */
bool nsbox_agent_user_fill(struct nsbox_spawnuser *u, bool given);

#endif
