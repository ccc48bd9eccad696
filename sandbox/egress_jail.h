/* The egress helper's jail (docs/network.md, "The egress helper's jail"): what the helper
 * gives up before it serves a connection. It reads what the sandbox sends, so it is treated as
 * the first thing an attacker inside would aim at: its own uid and gid (policy/idmap.h
 * NSBOX_EGRESS_ID_BASE + the sandbox's slot) with no supplementary groups and no capability,
 * not dumpable (no ptrace, /proc/PID/mem, /proc/PID/environ or core file by anyone but root),
 * no_new_privs, a seccomp allow-list (policy/seccomp-egress.json, compiled by the parent), and
 * death with the process that started it.
 *
 * The ids are taken before the helper's executable runs (sandbox/egress_spawn.c): the helper
 * never runs as root. The exec makes it dumpable again (its uid is its euid), so the first
 * thing the helper does is nsbox_egress_jail_seal, before it reads its configuration. */
#ifndef NSBOX_EGRESS_JAIL_H
#define NSBOX_EGRESS_JAIL_H

#include <linux/filter.h>
#include <sys/types.h>

/* Not dumpable. 0, or -1 with errno. */
int nsbox_egress_jail_seal(void);
/* Single-threaded, after the configuration is read and before anything of the sandbox's:
 * every capability dropped, the death signal armed again and the parent checked, no_new_privs,
 * then prog loaded. parent: the pid the helper must die with. 0, or -1 with errno (the helper
 * must then exit: it never serves unjailed). */
int nsbox_egress_jail_enter(const struct sock_fprog *prog, pid_t parent);

#endif
