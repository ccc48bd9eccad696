/* Connecting to a sandbox's supervisor (its control socket "ctl", or a pooled sandbox's run
 * socket), and what a refused or lost connection means: a sandbox deleted meanwhile (its
 * tombstone says why), a supervisor that died (gc removes what it left), or one that lives and
 * hung up. The client side of every command that talks to a sandbox (client.c, warmpool.c). */
#ifndef NSBOX_CONNECT_H
#define NSBOX_CONNECT_H

#include "nsbox.h"

/* Connect to a sandbox's control socket. A sandbox that is gone gets NSBOX_E_DELETED with the
 * tombstone's reason, one that never existed NSBOX_E_NOTFOUND. */
int nsbox_connect_ctl(const char *id, struct nsbox_err *e);
/* A connection to sandbox id's supervisor ended (err: its errno) without an answer: e says why,
 * and -1. Deleted (NSBOX_E_DELETED): the tombstone's reason, or the supervisor died (it waits
 * up to a second to tell, and gc removes what it left and records that). Otherwise the
 * supervisor lives and hung up (NSBOX_E_SYS). */
int nsbox_connect_lost(const char *id, int err, struct nsbox_err *e);
/* The run socket of pooled sandbox id (agent.h), connected, its listener checked as above. */
int nsbox_connect_run(const char *id, struct nsbox_err *e);

#endif
