/* File operations under /workspace: not implemented yet. */
#define _GNU_SOURCE
#include "files.h"

#include <errno.h>

int nsbox_files_op(int ws_fd, const struct nsbox_state *st, const struct nsbox_request *rq,
                   int in_fd, cJSON *reply, int *out_fd, struct nsbox_err *e)
{
    return nsbox_err_set(e, NSBOX_E_UNSUPPORTED, ENOTSUP, "file operation '%s' is not supported yet",
                         nsbox_op_name(rq->op));
}
