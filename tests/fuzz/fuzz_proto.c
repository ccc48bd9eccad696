/* Fuzz the supervisor's request parser: any bytes a client can send after the length prefix.
 * Besides not crashing or leaking, a request that parses must satisfy what the supervisor relies
 * on: a NULL-terminated argv of argc non-empty-first strings, env entries "K=V", an absolute cwd,
 * a known op, a signal in 1..64. */
#include "proto.h"

#include <assert.h>
#include <stdint.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct nsbox_request rq;
    struct nsbox_err e = {0};
    if (nsbox_proto_parse((const char *)data, size, &rq, &e) == 0) {
        assert(strcmp(nsbox_op_name(rq.op), "?") != 0);
        if (rq.op == NSBOX_OP_EXEC || rq.op == NSBOX_OP_START) {
            assert(rq.argv && rq.argc >= 1 && rq.argv[rq.argc] == NULL && rq.argv[0][0]);
            for (size_t i = 0; i < rq.nenv; i++)
                assert(strchr(rq.env[i], '=') && rq.env[i][0] != '=');
            assert(rq.cwd[0] == '/');
        }
        if (rq.op == NSBOX_OP_KILL || rq.op == NSBOX_OP_SIGNAL)
            assert(rq.sig >= 1 && rq.sig <= 64);
        if (rq.op == NSBOX_OP_KILL || rq.op == NSBOX_OP_LOGS)
            assert(rq.pid > 0);
    } else {
        assert(e.msg[0] != '\0');
    }
    nsbox_request_free(&rq);
    return 0;
}
