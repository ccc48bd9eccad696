/* The client side of the protocol of persistent sandboxes (docs/protocol.md): a request on a
 * connection of its own to a sandbox's supervisor and its reply. Nothing here prints: the
 * commands (cli/exec.c and the other command files), the warm pool and the workspace's
 * eviction use it. */
#ifndef NSBOX_CLIENT_H
#define NSBOX_CLIENT_H

#include "nsbox.h"
#include "proto.h"

#include <cjson/cJSON.h>
#include <limits.h>
#include <stdbool.h>
#include <stddef.h>

/* Requests are a struct nsbox_request (nsbox_proto_request_init, then its fields), encoded here by
 * nsbox_proto_encode: the one encoder, the parser's other half. */

/* One request/reply round trip on a new connection to sandbox id. fds: sent with the request;
 * *reply: the parsed reply (caller frees); rfd: a descriptor that came with the reply, or -1. */
int nsbox_client_call(const char *id, const struct nsbox_request *req, const int *fds, size_t nfds, cJSON **reply,
                      int *rfd, struct nsbox_err *e);
/* Ask sandbox id's supervisor to delete it (the "delete" op). 0 once it said yes; with wait,
 * once the sandbox is gone (as rm does). */
int nsbox_client_delete(const char *id, bool wait, struct nsbox_err *e);
/* A reply's error as an nsbox_err; returns -1 when the reply is an error, 0 when ok. */
int nsbox_client_reply_error(const cJSON *reply, struct nsbox_err *e);

/* ---- the parts, for commands that need more than one round trip --------------------------- */

/* The supervisor answers inspect, ps, kill, logs and delete at once (a sleeping sandbox is
 * thawed in well under a millisecond): a longer silence is a supervisor that is stuck, and a
 * command must not hang on it for ever. */
#define NSBOX_CLIENT_ANSWER_S 30
/* How long a "busy" refusal is sent again (nsbox_client_again_if_busy); BUSY_FOREVER: until it
 * is taken (what waits for a command's end anyway, exec and wait, waits its turn so). */
#define NSBOX_CLIENT_BUSY_RETRY_MS 60000u
#define NSBOX_CLIENT_BUSY_FOREVER UINT_MAX

/* Send req with fds on sock. A send that failed because the supervisor hung up ("busy") is no
 * error: the reply (or the hang-up) is read as usual. */
int nsbox_client_send(int sock, const struct nsbox_request *req, const int *fds, size_t nfds, struct nsbox_err *e);
/* Read one reply (and the descriptor that comes with it into *rfd, when rfd is given). */
int nsbox_client_recv(int sock, cJSON **reply, int *rfd, struct nsbox_err *e);
/* A connection lost during a command: when the sandbox has been deleted meanwhile, e says that
 * (nsbox_connect_lost). Returns e. */
struct nsbox_err *nsbox_client_lost(const char *id, struct nsbox_err *e);
/* *reply is a "busy" refusal and limit_ms has not passed (*waited_ms counts): true after
 * freeing it, closing *sock and pausing, for the request to be sent again. */
bool nsbox_client_again_if_busy(cJSON **reply, int *sock, unsigned *waited_ms, unsigned limit_ms);
/* One request on a connection of its own, left open in *sock for the caller: connect, send req
 * with fds, read the reply (and its descriptor into *rfd, when given) within seconds (0: no
 * limit). A "busy" refusal is sent again for up to busy_ms. */
int nsbox_client_exchange(const char *id, const struct nsbox_request *req, const int *fds, size_t nfds, int seconds,
                          unsigned busy_ms, int *sock, cJSON **reply, int *rfd,
                          struct nsbox_err *e);
/* One request on a connection of its own; the reply within seconds. */
int nsbox_client_call_within(const char *id, const struct nsbox_request *req, int seconds, cJSON **reply,
                             struct nsbox_err *e);
/* One request and its reply within NSBOX_CLIENT_ANSWER_S; an error reply becomes e. */
int nsbox_client_simple_call(const char *id, const struct nsbox_request *req, cJSON **reply, struct nsbox_err *e);

#endif
