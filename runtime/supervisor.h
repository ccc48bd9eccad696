/* The supervisor of a persistent sandbox: one process per sandbox, on the host side, detached
 * from whoever created it. It owns the sandbox (init, cgroup, network, state directory), its
 * control socket (docs/protocol.md) and its timers (ttl, idle sleep), in one event loop. */
#ifndef NSBOX_SUPERVISOR_H
#define NSBOX_SUPERVISOR_H

#include "nsbox.h"
#include "state.h" /* tombstones */
#include "spec.h"

#include <stdbool.h>

/* Create a persistent sandbox: fork a detached supervisor and wait until the sandbox is ready
 * (set-up script included). Fills id (NSBOX_ID_LEN + 1 bytes). */
/* owner_pid > 0: the sandbox is deleted when that process ends (create --owner-pid).
 * The supervisor deletes the sandbox again if its caller goes before it acknowledges the id:
 * ack_fd NULL acknowledges at once; else *ack_fd is the socket to pass to nsbox_session_ack
 * before the id is given out, or to close without it to abandon the sandbox. */
int nsbox_session_create(const struct nsbox_spec *s, int owner_pid, const char *pool_key, char *id,
                         int *ack_fd, struct nsbox_err *e);
void nsbox_session_ack(int fd);

/* Connect to a sandbox's control socket. A sandbox that is gone gets NSBOX_E_DELETED with the
 * tombstone's reason, one that never existed NSBOX_E_NOTFOUND. */
int nsbox_session_connect(const char *id, struct nsbox_err *e);
/* The run socket of pooled sandbox id (agent.h), connected, its listener checked as above. */
int nsbox_session_connect_run(const char *id, struct nsbox_err *e);

#endif
