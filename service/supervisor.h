/* The supervisor of a persistent sandbox: one process per sandbox, on the host side, detached
 * from whoever created it. It owns the sandbox (init, cgroup, network, state directory), its
 * control socket (docs/protocol.md) and its timers (ttl, idle sleep), in one event loop. */
#ifndef NSBOX_SUPERVISOR_H
#define NSBOX_SUPERVISOR_H

#include "nsbox.h"
#include "state.h" /* tombstones */
#include "spec.h"
#include "util.h"

#include <stdbool.h>

/* Create a persistent sandbox: fork a detached supervisor and wait until the sandbox is ready
 * (set-up script included). Fills id (NSBOX_ID_LEN + 1 bytes). */
/* owner_pid > 0: the sandbox is deleted when that process ends (create --owner-pid).
 * out NULL (a pool fill): the id is only returned. Else the supervisor itself writes
 * before, the id and after to out->fd (nsbox create's stdout), once the sandbox is ready: that
 * write is the moment the sandbox is given, and keeps it. Until it, this call's end (any
 * signal, SIGKILL included) ends the sandbox, and INT, TERM, HUP and QUIT, blocked here, stop
 * the creation: it fails with *out->signo set, once nothing of the sandbox is left. One that
 * comes after the write is discarded (the creation succeeded): after a success they stay
 * blocked, for the caller exits at once.
 * image: the stored image ("oci-<id>") the caller resolved s's image reference to, pulling it
 * as s's pull says, before this call (nsbox_oci_store_resolve): the sandbox is made of it,
 * and nothing is pulled again. NULL: the supervisor resolves the reference, and pulls it. */
struct nsbox_id_out {
    int fd;
    const char *before, *after;
    int *signo;
};
int nsbox_session_create(const struct nsbox_spec *s, const char *image, int owner_pid,
                         const char *pool_key, char *id, const struct nsbox_id_out *out,
                         struct nsbox_err *e);

/* What the supervisor of a pooled sandbox that was used and removed becomes: the warm pool's
 * refill (nsbox_warmpool_refill_exec; returns only if it could not start). The pool is built on
 * sessions (it creates them), so it hands its refill down (nsbox_warmpool_install) rather than
 * the supervisor calling up into it; without one, a used pooled sandbox is not replaced. */
typedef void (*nsbox_session_refill_fn)(const struct nsbox_spec *s);
void nsbox_session_set_refill(nsbox_session_refill_fn fn);
/* Where a creation's notes go (nsbox_session_create): what the sandbox layer says while the
 * supervisor makes the sandbox (a --workspace of root's, wsdir.h), which it passes on as
 * "NOTE <line>" before its answer. */
void nsbox_session_set_note(nsbox_note_fn *fn, void *ctx);
#define NSBOX_SESSION_NOTE "NOTE "

#endif
