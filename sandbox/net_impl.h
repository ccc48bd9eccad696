/* Internals of the network module (sandbox/net*.c): the kernel-facing halves of the plan that
 * policy/netplan computes. net_link.c talks rtnetlink through libnl-route-3, net_nft.c talks
 * nf_tables through libnftables; both libraries are loaded on first use, so that `nsbox run`
 * with network none (the default) maps neither. */
#ifndef NSBOX_NET_IMPL_H
#define NSBOX_NET_IMPL_H

#include "nsbox.h"

#include <netinet/in.h>
#include <stdbool.h>
#include <sys/types.h>

/* ---- links, addresses, routes (net_link.c) -------------------------------------------------- */

/* Loads libnl-route-3 (NSBOX_E_UNSUPPORTED with the package to install when missing). */
int nsbox_netlink_load(struct nsbox_err *e);
/* Parent side: a veth pair, `host_if` up in our namespace with host/prefix, its peer `peer_if`
 * created directly inside the network namespace of `pid` (left down for the child). */
int nsbox_netlink_veth(const char *host_if, const char *peer_if, pid_t pid, struct in_addr host,
                       unsigned prefix, struct nsbox_err *e);
/* Child side, inside the sandbox's namespace: `ifname` up with addr/prefix, default route via gw;
 * helper: the egress helper listens on gw, and the route to it takes reno (never paced).
 * The interface gets no IPv6 link-local address: sandboxes have IPv4 only. */
int nsbox_netlink_sandbox(const char *ifname, struct in_addr addr, unsigned prefix,
                          struct in_addr gw, bool helper, struct nsbox_err *e);
/* Removes a link if it exists (gc only: deleting a veth costs tens of milliseconds; in normal
 * operation it goes away with the sandbox's namespace). Returns 1 removed, 0 absent. */
int nsbox_netlink_delete(const char *ifname, struct nsbox_err *e);

/* ---- nftables (net_nft.c) ------------------------------------------------------------------- */

struct nsbox_nft;
struct nsbox_nftbatch;

/* Loads nothing yet: libnftables is loaded by the first nsbox_nft_run or nsbox_nft_list_json. */
int nsbox_nft_open(struct nsbox_nft **out, struct nsbox_err *e);
/* Does not wait for the kernel to release committed transactions (see close_in_background). */
void nsbox_nft_close(struct nsbox_nft *n);
/* Sends a sandbox's element batch (policy/nftbatch.h) on nsbox's own netfilter socket: one
 * transaction, without libnftables. On failure e->sys_errno is the kernel's errno (EEXIST: the
 * slot is taken; ENOENT: no table or set) and e->msg names the set. */
int nsbox_nft_batch(struct nsbox_nft *n, const struct nsbox_nftbatch *b, struct nsbox_err *e);
/* Through libnftables: runs one batch of commands (text, or JSON when `json`) as one transaction. On failure e->msg
 * has libnftables' first error line and e->sys_errno the errno it names (EEXIST, ENOENT, EPERM,
 * ...) when it names one. */
int nsbox_nft_run(struct nsbox_nft *n, const char *cmds, bool json, struct nsbox_err *e);
/* The JSON listing of `what` (e.g. "table inet nsbox"); *out malloc'd. ENOENT when absent. */
int nsbox_nft_list_json(struct nsbox_nft *n, const char *what, char **out, struct nsbox_err *e);

/* ---- the sandbox's elements in the table (net_table.c) -------------------------------------- */

struct nsbox_netplan;

/* net.ipv4.ip_forward of our network namespace. */
int nsbox_net_forwarding(bool *on, struct nsbox_err *e);
int nsbox_net_forwarding_enable(struct nsbox_err *e);
/* Claims a free address slot (sets plan->slot) and adds the sandbox's elements, in one
 * transaction; creates the table first when it does not exist (forward_guard: see
 * nsbox_netplan_table_text). *del (zeroed on failure): the batch that removes exactly them. */
int nsbox_net_table_add(struct nsbox_nft *nft, struct nsbox_netplan *plan, bool forward_guard,
                        struct nsbox_nftbatch *del, struct nsbox_err *e);
/* Removes every element of sandbox `id`, found by listing the table. */
int nsbox_net_table_remove(struct nsbox_nft *nft, const char *id, struct nsbox_err *e);

#endif
