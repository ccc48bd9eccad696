/* Starting the egress helper (sandbox/egress.h): the listeners bound and the network log opened
 * here, while privileged; then a child takes the helper's ids, arms its death with this
 * process and runs nsbox-egress, the executable installed beside the running one (found
 * through /proc/self/exe, opened before the fork), with an empty environment and no secret in
 * its argv. Its configuration (the plan's names, the pool, the bindings with their values and
 * the leaves' key, the seccomp filter compiled here) goes over a socketpair
 * (sandbox/egress_wire.h); this waits for its word that it is jailed. */
#ifndef NSBOX_EGRESS_SPAWN_H
#define NSBOX_EGRESS_SPAWN_H

#include "nsbox.h"
#include "netplan.h"

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define NSBOX_EGRESS_SPAWN_BIN "nsbox-egress"

struct nsbox_egress_tls;

/* After the gateway address exists (nsbox_net_attach). exe: nsbox_egress_spawn_open's
 * descriptor (the caller's: it stays open), path its name for messages. tls (NULL: none): the
 * header bindings (egress_tls.h), whose hosts the helper ends TLS for. log_dir (may be NULL): where
 * its network log goes (sandbox/egress_log.h). helper_id (NULL: keep the caller's ids, when it is
 * not root): the host uid and gid the helper runs as. */
int nsbox_egress_spawn(int exe, const char *path, const struct nsbox_netplan *p,
                       const struct nsbox_egress_tls *tls, const char *log_dir,
                       const uint32_t *helper_id, pid_t *pid, struct nsbox_err *e);
/* Kills and reaps the helper (pid <= 0: nothing). */
void nsbox_egress_spawn_stop(pid_t pid);
/* The helper's executable: NSBOX_EGRESS_SPAWN_BIN in the directory of the running one. */
int nsbox_egress_spawn_path(char *out, size_t n, struct nsbox_err *e);
/* That file opened (close-on-exec) once it is found executable, path set; or -1 with e naming
 * it and the fix. nsbox_net_prepare opens it, so that a missing helper fails a sandbox before
 * anything of it exists, and keeps the descriptor for nsbox_egress_spawn: the file checked is
 * the file run. */
int nsbox_egress_spawn_open(char *path, size_t n, struct nsbox_err *e);

#endif
