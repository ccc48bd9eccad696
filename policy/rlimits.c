#include "rlimits.h"

size_t nsbox_rlimits_for(const struct nsbox_spec *s, bool privileged,
                         struct nsbox_rlimit out[NSBOX_RLIMITS_MAX])
{
    size_t n = 0;
    /* No core dumps: a file one would be written into /workspace with the sandbox's memory,
     * and a pipe one (core_pattern "|systemd-coredump ...") runs the host's helper as host root,
     * outside the sandbox's cgroups, for every crash. 1 byte, not 0: a file needs a page, and the
     * kernel refuses a pipe dump at exactly 1 (its mark for a helper's own crash), while at 0 it
     * still runs the helper. The seccomp profile keeps the sandbox from changing it. */
    out[n++] = (struct nsbox_rlimit){RLIMIT_CORE, {1, 1}};
    /* Enough descriptors for language servers and test runners. Per process only: a sandbox
     * may hold its pids limit times this, and files kept by mappings past it; its memory limit
     * bounds them, and the host's table is made larger than memory could fill
     * (sandbox/filemax.c). */
    out[n++] = (struct nsbox_rlimit){RLIMIT_NOFILE, {4096, 4096}};
    if (privileged && s->limits.pids > 0)
        out[n++] = (struct nsbox_rlimit){RLIMIT_NPROC, {s->limits.pids, s->limits.pids}};
    return n;
}
