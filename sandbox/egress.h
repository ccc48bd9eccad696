/* The egress helper of a sandbox whose allow list names hosts (docs/network.md, "allow by
 * name"): one process per sandbox, nsbox-egress (egress/main.c), on the host side of its veth,
 * listening on the gateway address at the allowed names' ports (the sandbox's /etc/hosts pins
 * the names there, and its nftables elements open only gateway:port for them). Per connection
 * it reads the TLS ClientHello (policy/tlshello.h), lets through only a server name the allow
 * list has for that port, resolves it on the host at connect time, refuses addresses a sandbox
 * must not reach (nsbox_netplan_upstream_refusal, and the host's own), connects, and splices
 * both ways. Plain text, no SNI, another name: the connection is reset. It runs jailed
 * (sandbox/egress_jail.h) and writes one line per connection to the sandbox's network log
 * (sandbox/egress_log.h), one per request on a host bound to a header (sandbox/egress_tls.h).
 *
 * This is the helper's side; sandbox/egress_spawn.h starts it and gives it its configuration
 * on a socketpair (sandbox/egress_wire.h). */
#ifndef NSBOX_EGRESS_H
#define NSBOX_EGRESS_H

#define NSBOX_EGRESS_MAX_CONNS 128   /* connections at once; more are reset */
#define NSBOX_EGRESS_HELLO_MS 10000  /* for the whole ClientHello to arrive */
#define NSBOX_EGRESS_CONNECT_MS 10000
#define NSBOX_EGRESS_SOCK_FD 3 /* the helper's end of the socketpair, at its exec */

/* The helper's life, from its exec: not dumpable first, then its configuration read from sock
 * (descriptors, plan, bindings, its seccomp filter), its jail, its word to the parent on sock
 * (0, or an errno and what failed), then the listeners' loop. Returns (1) only when it cannot
 * serve. */
int nsbox_egress_main(int sock);

#endif
