/* The stub resolver a sandbox's init runs in network none and allow (docs/network.md, "Names
 * that do not resolve"): UDP 127.0.0.1:53 in the sandbox's network namespace, where glibc and
 * musl send a query when resolv.conf names no other server. Every query that parses
 * (policy/dnsquery.h) is answered at once (NXDOMAIN), so that glibc's and musl's resolvers alike
 * fail without waiting for a timeout; the first names go to a table in memory the launcher shares
 * (net.c), which says after the command why they did not resolve. Run by init, in the sandbox's
 * cgroup: a flood of packets costs the sandbox its own CPU, and init's loop is never blocked
 * (a bounded batch per wake-up, no wait to send). */
#ifndef NSBOX_DNSSTUB_H
#define NSBOX_DNSSTUB_H

#include "dnsquery.h"

/* The socket, bound (run in the sandbox's network namespace, with CAP_NET_BIND_SERVICE there):
 * non-blocking, close-on-exec; -1 when it cannot be (nothing is said: the note is a help). */
int nsbox_dnsstub_open(void);
/* Answer what is waiting on fd, at most a batch, recording the names in t. */
void nsbox_dnsstub_serve(int fd, struct nsbox_dnsquery_table *t);
/* Answer what is waiting on fd (nothing when fd is -1), up to more packets than its receive
 * buffer can hold: called when a command has ended and before its names are taken, so that a
 * query it sent just before it ended is in its note, not left for the next command's. */
void nsbox_dnsstub_drain(int fd, struct nsbox_dnsquery_table *t);

#endif
