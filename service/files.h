/* File operations on a sandbox's /workspace, done by the supervisor on the host side
 * (docs/protocol.md: read, write, list, stat, remove, mkdir; docs/files.md). Every path is
 * resolved inside the workspace with rootfs/safepath (openat2 RESOLVE_IN_ROOT or the walker):
 * `..`, symlinks and races cannot reach outside it. Content never passes through a message:
 * `read` hands the client a read-only descriptor, `write` copies from a descriptor the client
 * sent, so a 1 GiB file streams in bounded memory. Files created for the sandbox belong to its
 * user. */
#ifndef NSBOX_FILES_H
#define NSBOX_FILES_H

#include "nsbox.h"
#include "proto.h"
#include "state.h"

#include <cjson/cJSON.h>
#include <stdint.h>

/* `list` returns at most this many entries (and "truncated": true when there were more, or when
 * the reply would not fit in one message). */
#define NSBOX_FILES_LIST_MAX 100000
/* `remove` with recursive descends at most this deep (one descriptor per level). */
#define NSBOX_FILES_RM_MAX_DEPTH 256
/* A `write` whose source (a pipe or socket) sends nothing for this long fails, so that a stalled
 * client cannot hold the supervisor. */
#define NSBOX_FILES_STALL_MS_DEFAULT 60000

struct nsbox_files_opts {
    uint64_t max_write_bytes; /* the instance type's limits.disk_bytes; 0: no limit */
    int stall_ms;             /* 0: NSBOX_FILES_STALL_MS_DEFAULT */
    /* the requesting client's connection: a stream write whose client hangs up before the
     * stream's end fails at once, and one whose client has hung up by then keeps nothing;
     * 0 or -1: none (never stdin) */
    int client_fd;
    /* when set, called at a stream's end (bytes: its length): the content is kept only if it
     * returns 0 (the client confirmed that this was the whole of it) */
    int (*confirm_end)(void *arg, uint64_t bytes);
    void *confirm_arg;
};

/* ws_fd: O_PATH|O_DIRECTORY fd of the workspace on the host. in_fd: the descriptor sent with a
 * `write` (else -1; never closed here). On success fills reply's fields and, for `read`,
 * *out_fd (the caller sends and closes it). opts may be NULL (no write limit, default stall). */
int nsbox_files_op_ex(int ws_fd, const struct nsbox_state *st, const struct nsbox_files_opts *opts,
                      const struct nsbox_request *rq, int in_fd, cJSON *reply, int *out_fd,
                      struct nsbox_err *e);

/* nsbox_files_op_ex with opts NULL. */
int nsbox_files_op(int ws_fd, const struct nsbox_state *st, const struct nsbox_request *rq,
                   int in_fd, cJSON *reply, int *out_fd, struct nsbox_err *e);

#endif
