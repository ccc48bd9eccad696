#include "rlimits.h"

size_t nsbox_rlimits_for(const struct nsbox_spec *s, bool privileged,
                         struct nsbox_rlimit out[NSBOX_RLIMITS_MAX])
{
    size_t n = 0;
    /* No core dumps: they would be written into /workspace with the sandbox's memory. */
    out[n++] = (struct nsbox_rlimit){RLIMIT_CORE, {0, 0}};
    /* Enough descriptors for language servers and test runners. Per process only: a sandbox
     * may hold its pids limit times this, and files kept by mappings past it; its memory limit
     * bounds them, and the host's table is made larger than memory could fill
     * (sandbox/filemax.c). */
    out[n++] = (struct nsbox_rlimit){RLIMIT_NOFILE, {4096, 4096}};
    if (privileged && s->limits.pids > 0)
        out[n++] = (struct nsbox_rlimit){RLIMIT_NPROC, {s->limits.pids, s->limits.pids}};
    return n;
}
