/* Resource limits applied to every sandbox process (pure computation). */
#ifndef NSBOX_RLIMITS_H
#define NSBOX_RLIMITS_H

#include "spec.h"

#include <stdbool.h>
#include <stdint.h>
#include <sys/resource.h>

#define NSBOX_RLIMITS_MAX 20

struct nsbox_rlimit {
    int resource;
    struct rlimit lim;
};

/* The caller's own soft limits of the counts the kernel keeps per user (queued signals,
 * message queue bytes), of which an unprivileged caller's sandbox gets a share; 0: not known. */
struct nsbox_rlimits_caller {
    rlim_t sigpending, msgqueue;
};

/* privileged: the sandbox has a host uid of its own, so RLIMIT_NPROC (counted per host uid)
 * can back the pids cgroup limit without touching the caller's other processes. Unprivileged,
 * the sandbox's processes are the caller's user, whose counts they share: caller (or NULL)
 * gives the limits the sandbox takes half of. */
size_t nsbox_rlimits_for(const struct nsbox_spec *s, bool privileged,
                         const struct nsbox_rlimits_caller *caller,
                         struct nsbox_rlimit out[NSBOX_RLIMITS_MAX]);

/* A sandbox's share of a count its unprivileged caller's user has user_max of (the kernel
 * counts it in the sandbox's user namespace and again, up the chain, in the user's): half,
 * so that one sandbox leaves the user's other processes the rest; at least 1; 0 for 0. */
uint64_t nsbox_rlimits_user_share(uint64_t user_max);

/* A core limit a configuration gives (nsbox-oci's process.rlimits, docker run --ulimit core=0)
 * as the sandbox takes it: 0, soft or hard, becomes 1 byte, which dumps no file either but
 * keeps the kernel from running a piped core_pattern's host helper for each crash (at 0 it
 * does, and the seccomp profile keeps the sandbox from changing it). Other resources as
 * given. */
void nsbox_rlimits_core_floor(struct nsbox_rlimit *r);

#endif
