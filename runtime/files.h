/* File operations on a sandbox's /workspace, done by the supervisor on the host side
 * (docs/protocol.md: read, write, list, stat, remove, mkdir). Every path is resolved inside the
 * workspace with rootfs/safepath (openat2 RESOLVE_IN_ROOT or the walker): `..`, symlinks and
 * races cannot reach outside it. Content never passes through a message: `read` hands the client
 * a read-only descriptor, `write` copies from a descriptor the client sent, so a 1 GiB file
 * streams in bounded memory. Files created for the sandbox belong to its user. */
#ifndef NSBOX_FILES_H
#define NSBOX_FILES_H

#include "nsbox.h"
#include "proto.h"
#include "state.h"

#include <cjson/cJSON.h>

/* ws_fd: O_PATH|O_DIRECTORY fd of the workspace on the host. in_fd: the descriptor sent with a
 * `write` (else -1). On success fills reply's fields and, for `read`, *out_fd (the caller sends
 * and closes it). */
int nsbox_files_op(int ws_fd, const struct nsbox_state *st, const struct nsbox_request *rq,
                   int in_fd, cJSON *reply, int *out_fd, struct nsbox_err *e);

#endif
