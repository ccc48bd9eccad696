/* The egress helper's jail (docs/network.md, "The egress helper's jail"): what the helper
 * gives up before it serves a connection. It reads what the sandbox sends, so it is treated as
 * the first thing an attacker inside would aim at: its own uid and gid (policy/idmap.h
 * NSBOX_EGRESS_ID_BASE + the sandbox's slot) with no supplementary groups and no capability,
 * not dumpable (no ptrace, /proc/PID/mem or core file by anyone but root), no_new_privs, a
 * seccomp allow-list (policy/seccomp-egress.json), and death with the process that started it. */
#ifndef NSBOX_EGRESS_JAIL_H
#define NSBOX_EGRESS_JAIL_H

#include "nsbox.h"

#include <linux/filter.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct nsbox_egress_jail {
    struct sock_fprog prog; /* compiled in the parent: the child only loads it */
    bool set_ids;           /* false: the caller is not root and keeps its own ids */
    uint32_t uid, gid;
};

/* Parent side, before the fork: compiles the filter. set_ids with uid/gid: the ids to take. */
int nsbox_egress_jail_prepare(struct nsbox_egress_jail *j, bool set_ids, uint32_t uid, uint32_t gid,
                              struct nsbox_err *e);
void nsbox_egress_jail_free(struct nsbox_egress_jail *j);
/* Child side, single-threaded, after its listeners are bound and before it reads anything
 * from the sandbox. parent: the pid the helper must die with. 0, or -1 with errno (the helper
 * must then exit: it never serves unjailed). */
int nsbox_egress_jail_enter(const struct nsbox_egress_jail *j, pid_t parent);

#endif
