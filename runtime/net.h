/* Network policy of a sandbox (DESIGN.md 1.1, issue "Network policy"): none, all, allow(hosts),
 * plus egress CIDRs. The plan (addresses, routes, ruleset) is computed by policy/netplan; this
 * module applies it with libnl-route-3 (netlink) and libnftables (one transaction), never by
 * running `ip` or `nft`.
 *
 * Sides of the clone:
 *   parent, before clone:  nsbox_net_prepare      (checks, allocations, host-side objects)
 *   parent, after clone:   nsbox_net_attach       (move the sandbox end into the child's netns)
 *   child, before exec:    nsbox_net_child_setup  (lo up; eth0 address and default route)
 *   parent, at the end:    nsbox_net_teardown     (remove what was added; idempotent)
 *   anyone, after a crash: nsbox_net_gc           (remove leftovers of a dead sandbox id) */
#ifndef NSBOX_NET_H
#define NSBOX_NET_H

#include "nsbox.h"
#include "spec.h"

#include <limits.h>
#include <stdbool.h>
#include <sys/types.h>

struct nsbox_net;

/* Fails before anything is set up when the policy cannot be enforced here (no CAP_NET_ADMIN for
 * all/allow, nf_tables missing, ...), with the fix. state_dir: the sandbox's state directory, where
 * per-sandbox files (resolv.conf, hosts) may be written. */
int nsbox_net_prepare(const struct nsbox_spec *s, const char *id, const char *state_dir,
                      struct nsbox_net **out, struct nsbox_err *e);
int nsbox_net_attach(struct nsbox_net *n, pid_t child, struct nsbox_err *e);
/* Child side, inside the new network namespace (has CAP_NET_ADMIN there). */
int nsbox_net_child_setup(const struct nsbox_net *n, struct nsbox_err *e);
/* Host paths of files to bind over the sandbox's /etc/resolv.conf and /etc/hosts, or NULL. */
const char *nsbox_net_resolv_conf(const struct nsbox_net *n);
const char *nsbox_net_hosts(const struct nsbox_net *n);
void nsbox_net_teardown(struct nsbox_net *n);
int nsbox_net_gc(const char *id, struct nsbox_err *e);

#endif
