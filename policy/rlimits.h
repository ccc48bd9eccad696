/* Resource limits applied to every sandbox process (pure computation). */
#ifndef NSBOX_RLIMITS_H
#define NSBOX_RLIMITS_H

#include "spec.h"

#include <stdbool.h>
#include <sys/resource.h>

#define NSBOX_RLIMITS_MAX 20

struct nsbox_rlimit {
    int resource;
    struct rlimit lim;
};

/* privileged: the sandbox has a host uid of its own, so RLIMIT_NPROC (counted per host uid)
 * can back the pids cgroup limit without touching the caller's other processes. */
size_t nsbox_rlimits_for(const struct nsbox_spec *s, bool privileged,
                         struct nsbox_rlimit out[NSBOX_RLIMITS_MAX]);

#endif
