/* Fuzz the supervisor's request parser: any bytes a client can send after the length prefix.
 * Besides not crashing or leaking, a request that parses must satisfy what the supervisor relies
 * on: a NULL-terminated argv of argc non-empty-first strings, env entries "K=V", an absolute cwd,
 * a known op, a signal in 1..64. And the client's encoder must say it again: encoding what the
 * parser gave and parsing that gives the same request. */
#include "proto.h"

#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void assert_same_strings(char **a, size_t na, char **b, size_t nb)
{
    assert(na == nb);
    for (size_t i = 0; i < na; i++)
        assert(strcmp(a[i], b[i]) == 0);
}

static void assert_same(const struct nsbox_request *a, const struct nsbox_request *b)
{
    assert(a->op == b->op && strcmp(a->tag, b->tag) == 0);
    assert_same_strings(a->argv, a->argc, b->argv, b->argc);
    assert_same_strings(a->env, a->nenv, b->env, b->nenv);
    assert(strcmp(a->cwd, b->cwd) == 0 && a->timeout_ms == b->timeout_ms);
    assert(a->pid == b->pid && a->sig == b->sig);
    assert(a->stdout_from == b->stdout_from && a->stderr_from == b->stderr_from);
    assert(strcmp(a->path, b->path) == 0 && strcmp(a->cursor, b->cursor) == 0);
    assert(a->mode == b->mode && a->mkdir == b->mkdir && a->recursive == b->recursive);
    assert(a->parents == b->parents && a->set_mode == b->set_mode && a->confirm == b->confirm);
    assert(a->tty == b->tty && a->by_session == b->by_session);
    assert(a->rows == b->rows && a->cols == b->cols);
}

/* parse -> encode -> parse gives the same request. */
static void round_trip(const struct nsbox_request *rq)
{
    cJSON *o = nsbox_proto_encode(rq);
    assert(o);
    char *text = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    assert(text);
    size_t len = strlen(text);
    struct nsbox_request again;
    struct nsbox_err e = {0};
    int r = nsbox_proto_parse(text, len, &again, &e);
    /* What the parser refuses of a request that it accepted before: one that grew past the
     * limit (cJSON writes a raw control character as \uXXXX, six bytes). */
    if (r < 0 && len > NSBOX_PROTO_MAX) {
        nsbox_proto_request_free(&again);
        free(text);
        return;
    }
    assert(r == 0);
    assert_same(rq, &again);
    nsbox_proto_request_free(&again);
    free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct nsbox_request rq;
    struct nsbox_err e = {0};
    if (nsbox_proto_parse((const char *)data, size, &rq, &e) == 0) {
        assert(strcmp(nsbox_proto_op_name(rq.op), "?") != 0);
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
        round_trip(&rq);
    } else {
        assert(e.msg[0] != '\0');
    }
    nsbox_proto_request_free(&rq);
    return 0;
}
