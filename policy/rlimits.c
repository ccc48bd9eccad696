#include "rlimits.h"

uint64_t nsbox_rlimits_user_share(uint64_t user_max)
{
    return user_max == 0 ? 0 : user_max < 2 ? 1 : user_max / 2;
}

void nsbox_rlimits_core_floor(struct nsbox_rlimit *r)
{
    if (r->resource != RLIMIT_CORE)
        return;
    if (r->lim.rlim_cur == 0)
        r->lim.rlim_cur = 1;
    if (r->lim.rlim_max == 0)
        r->lim.rlim_max = 1;
}

static void add_share(struct nsbox_rlimit out[NSBOX_RLIMITS_MAX], size_t *n, int resource,
                      rlim_t user_max)
{
    if (user_max == 0 || user_max == RLIM_INFINITY)
        return;
    rlim_t v = (rlim_t)nsbox_rlimits_user_share(user_max);
    out[(*n)++] = (struct nsbox_rlimit){resource, {v, v}};
}

size_t nsbox_rlimits_for(const struct nsbox_spec *s, bool privileged,
                         const struct nsbox_rlimits_caller *caller,
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
    /* The kernel counts a sandbox's queued signals and message queue bytes against its
     * processes' limit in its own user namespace, and against the user's up the chain: with
     * half the caller's, a sandbox that takes all it may leaves the caller's other processes
     * theirs. A root sandbox has a host uid, so counts, of its own. */
    if (!privileged && caller) {
        add_share(out, &n, RLIMIT_SIGPENDING, caller->sigpending);
        add_share(out, &n, RLIMIT_MSGQUEUE, caller->msgqueue);
    }
    return n;
}
