/* The egress helper of a sandbox whose allow list names hosts (docs/network.md, "allow by
 * name"): one process per sandbox, on the host side of its veth, listening on the gateway
 * address at the allowed names' ports (the sandbox's /etc/hosts pins the names there, and its
 * nftables elements open only gateway:port for them). Per connection it reads the TLS
 * ClientHello (policy/tlshello.h), lets through only a server name the allow list has for that
 * port, resolves it on the host at connect time, refuses addresses a sandbox must not reach
 * (nsbox_netplan_upstream_refusal, and the host's own), connects, and splices both ways. Plain
 * text, no SNI, another name: the connection is reset. It runs jailed (sandbox/egress_jail.h)
 * and writes one line per connection to the sandbox's network log (sandbox/egress_log.h). */
#ifndef NSBOX_EGRESS_H
#define NSBOX_EGRESS_H

#include "nsbox.h"
#include "netplan.h"

#include <stdint.h>
#include <sys/types.h>

struct nsbox_egress_log;

#define NSBOX_EGRESS_MAX_CONNS 128   /* connections at once; more are reset */
#define NSBOX_EGRESS_HELLO_MS 10000  /* for the whole ClientHello to arrive */
#define NSBOX_EGRESS_CONNECT_MS 10000

/* After the gateway address exists (nsbox_net_attach): binds the listeners, then forks the
 * helper and waits until it is jailed (sandbox/egress_jail.h). log_dir (may be NULL): where
 * its network log goes (sandbox/egress_log.h). helper_id (NULL: keep the caller's ids, when it
 * is not root): the host uid and gid the helper runs as. */
int nsbox_egress_start(const struct nsbox_netplan *p, const char *log_dir,
                       const uint32_t *helper_id, pid_t *pid, struct nsbox_err *e);
/* In the helper: its network log, for a path that writes entries of its own (a bound host's
 * requests: verdict "bound" with method, path and status, sandbox/egress_log.h). */
struct nsbox_egress_log *nsbox_egress_helper_log(void);
/* Kills and reaps the helper (pid <= 0: nothing). */
void nsbox_egress_stop(pid_t pid);

#endif
