/* Network policy of a sandbox (docs/network.md): none, all, allow(hosts),
 * plus egress CIDRs. The plan (addresses, routes, ruleset) is computed by policy/netplan; this
 * module applies it with libnl-route-3 (netlink) and libnftables (one transaction), never by
 * running `ip` or `nft`.
 *
 * Sides of the clone (docs/network.md has the details):
 *   parent, before clone:  nsbox_net_prepare      (checks, config, resolvers, names; the
 *                                                  sandbox's resolv.conf/hosts; nothing on the
 *                                                  host's network yet)
 *   parent, after clone:   nsbox_net_attach       (claim an address slot and add the sandbox's
 *                                                  nftables elements in one transaction; the
 *                                                  veth, its peer born in the child's netns)
 *   child, before exec:    nsbox_net_child_setup  (lo up; eth0 address and default route). The
 *                                                  struct is shared with the parent (MAP_SHARED):
 *                                                  it must run after nsbox_net_attach returned,
 *                                                  which the sync pipe orders; it fails if not.
 *   parent, at the end:    nsbox_net_teardown     (one transaction removing the elements; the
 *                                                  veth goes with the child's netns)
 *   anyone, after a crash: nsbox_net_gc           (remove leftovers of a dead sandbox id) */
#ifndef NSBOX_NET_H
#define NSBOX_NET_H

#include "nsbox.h"
#include "spec.h"
#include "dnsquery.h"

#include <limits.h>
#include <stdbool.h>
#include <sys/types.h>

struct nsbox_net;

/* Fails before anything is set up when the policy cannot be enforced here (no CAP_NET_ADMIN for
 * all/allow/egress, IPv6 destinations, no reachable DNS resolver for all, a name that does not
 * resolve, ...), with the fix. A kernel without nf_tables shows in nsbox_net_attach.
 * state_dir: the sandbox's state directory, where per-sandbox files (resolv.conf, hosts, and the
 * marker gc looks for) are written. */
int nsbox_net_prepare(const struct nsbox_spec *s, const char *id, const char *state_dir,
                      struct nsbox_net **out, struct nsbox_err *e);
/* As root, before nsbox_net_attach: the host uid and gid of the egress helper
 * (nsbox_idmap_egress_id of the sandbox's slot). Without it the helper keeps the caller's. */
void nsbox_net_set_egress_id(struct nsbox_net *n, uint32_t id);
int nsbox_net_attach(struct nsbox_net *n, pid_t child, struct nsbox_err *e);
/* Child side, inside the new network namespace (has CAP_NET_ADMIN there). */
int nsbox_net_child_setup(const struct nsbox_net *n, struct nsbox_err *e);
/* Host paths of files to bind over the sandbox's /etc/resolv.conf and /etc/hosts, or NULL. */
/* The stub resolver of network none and allow (dnsstub.h): its socket, opened by the child in
 * its network namespace (-1: none for this sandbox, or it could not be); the table of names
 * init fills, in the struct's shared memory (NULL: no stub); the names asked since the last
 * take (the launcher's side: the parent of a one-shot run, a supervisor). */
int nsbox_net_dns_open(const struct nsbox_net *n);
struct nsbox_dnsquery_table *nsbox_net_dns_table(const struct nsbox_net *n);
size_t nsbox_net_dns_take(struct nsbox_net *n,
                          char names[NSBOX_DNSQUERY_NAMES][NSBOX_DNSQUERY_NAME_MAX + 1]);
const char *nsbox_net_resolv_conf(const struct nsbox_net *n);
const char *nsbox_net_hosts(const struct nsbox_net *n);
/* ...or, where nothing rewrites it (loopback only), the text of the sandbox's /etc/hosts, made
 * inside it; NULL otherwise. */
const char *nsbox_net_hosts_text(const struct nsbox_net *n);
/* The system trust bundle's path inside the sandbox, which nsbox replaces with a copy that also
 * holds the sandbox's CA when it has header bindings. */
#define NSBOX_NET_BUNDLE "/etc/ssl/certs/ca-certificates.crt"
/* With header bindings: the image's bundle and the sandbox's CA into the state directory (the
 * host path is then nsbox_net_bundle, bound read-only over NSBOX_NET_BUNDLE); else nothing.
 * image_fd (>= 0) is the image's root when it is a mount of its layers (rootfs/image.h
 * mount_fd), which image_root then does not hold; -1: image_root. */
int nsbox_net_write_bundle(struct nsbox_net *n, int image_fd, const char *image_root,
                           const char *state_dir, struct nsbox_err *e);
const char *nsbox_net_bundle(const struct nsbox_net *n);
/* nsbox_netplan_describe of the sandbox's plan (n NULL: loopback only); NULL on ENOMEM. */
struct cJSON *nsbox_net_describe(const struct nsbox_net *n, enum nsbox_net_mode mode);
void nsbox_net_teardown(struct nsbox_net *n);
int nsbox_net_gc(const char *id, struct nsbox_err *e);
/* The config's "network" section parses (nsbox info; a run reads it only when it needs it). */
int nsbox_net_config_check(struct nsbox_err *e);

#endif
