/* The client side of the protocol (see client.h, docs/protocol.md): a request on a connection
 * of its own, its reply, and what a lost connection or a "busy" refusal means. */
#define _GNU_SOURCE
#include "client.h"
#include "cleanup.h"
#include "cleanup_cjson.h"
#include "connect.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

/* req as the wire has it (caller frees), or NULL with e filled. */
static cJSON *encode(const struct nsbox_request *req, struct nsbox_err *e)
{
    cJSON *o = nsbox_proto_encode(req);
    if (!o)
        nsbox_err_set(e, NSBOX_E_NOMEM, ENOMEM, "cannot make a request");
    return o;
}

int nsbox_client_reply_error(const cJSON *reply, struct nsbox_err *e)
{
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(reply, "ok")))
        return 0;
    const cJSON *err = cJSON_GetObjectItemCaseSensitive(reply, "error");
    const cJSON *code = cJSON_GetObjectItemCaseSensitive(err, "code");
    const cJSON *msg = cJSON_GetObjectItemCaseSensitive(err, "message");
    return nsbox_err_set(
        e, nsbox_proto_errcode_from_wire(cJSON_IsString(code) ? code->valuestring : NULL), 0, "%s",
        cJSON_IsString(msg) ? msg->valuestring : "the supervisor said no");
}

int nsbox_client_recv(int sock, cJSON **reply, int *rfd, struct nsbox_err *e)
{
    cleanup_free char *buf = NULL;
    int fds[NSBOX_PROTO_MAX_FDS];
    ssize_t n = nsbox_proto_recv(sock, &buf, fds, e);
    for (int i = rfd ? 1 : 0; i < NSBOX_PROTO_MAX_FDS; i++)
        nsbox_closep(&fds[i]);
    if (rfd)
        *rfd = fds[0];
    if (n == 0)
        return nsbox_err_set(e, NSBOX_E_DELETED, EPIPE,
                             "the sandbox's supervisor closed the connection (sandbox deleted?)");
    if (n < 0)
        return -1;
    *reply = cJSON_ParseWithLength(buf, (size_t)n);
    if (!*reply)
        return nsbox_err_set(e, NSBOX_E_INVALID, EPROTO, "unreadable reply from the supervisor");
    return 0;
}


static int recv_reply_within(int sock, const char *id, int seconds, cJSON **reply,
                             struct nsbox_err *e)
{
    struct timeval tv = {.tv_sec = seconds};
    setsockopt(sock, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    int r = nsbox_client_recv(sock, reply, NULL, e);
    if (r < 0 && (e->sys_errno == EAGAIN || e->sys_errno == EWOULDBLOCK))
        nsbox_err_set(e, NSBOX_E_TIMEOUT, ETIMEDOUT,
                      "sandbox %s: its supervisor did not answer within %d s (stuck; the "
                      "process 'nsbox %s' on the host: kill it, then nsbox gc)",
                      id, seconds, id);
    return r;
}

/* A connection lost during a command: when the sandbox has been deleted meanwhile (its ttl,
 * an rm), say that, rather than "Connection reset by peer". */
struct nsbox_err *nsbox_client_lost(const char *id, struct nsbox_err *e)
{
    if (e->code == NSBOX_E_DELETED || e->sys_errno == ECONNRESET || e->sys_errno == EPIPE)
        nsbox_connect_lost(id, e->sys_errno, e);
    return e;
}

/* A sandbox with as much under way as it takes refuses more with "busy" before it starts
 * anything (sup.c nsbox_sup_refuse_if_busy): such a request is sent again, after 5 ms, then up to
 * 50 ms apart (so not in the order they came), for limit_ms at most (BUSY_FOREVER: until it is
 * taken; what waits for a command's end anyway, exec and wait, waits its turn so); then
 * the refusal is the answer. *waited_ms counts. */
bool nsbox_client_again_if_busy(cJSON **reply, int *sock, unsigned *waited_ms, unsigned limit_ms)
{
    const cJSON *err = *reply ? cJSON_GetObjectItemCaseSensitive(*reply, "error") : NULL;
    const cJSON *code = err ? cJSON_GetObjectItemCaseSensitive(err, "code") : NULL;
    if (!cJSON_IsString(code) || strcmp(code->valuestring, "busy") != 0 || *waited_ms >= limit_ms)
        return false;
    unsigned pause = *waited_ms < 5 ? 5 : *waited_ms > 50 ? 50 : *waited_ms;
    cJSON_Delete(*reply);
    *reply = NULL;
    nsbox_closep(sock);
    usleep(pause * 1000u);
    if (*waited_ms < NSBOX_CLIENT_BUSY_FOREVER - pause)
        *waited_ms += pause;
    return true;
}

/* Send a request. A supervisor with every connection taken answers "busy" and hangs up
 * without reading: a send that fails for that is no answer, the reply is read as usual (one
 * that is not there is a hang-up, which nsbox_client_lost explains). */
static int send_encoded(int sock, cJSON *req, const int *fds, size_t nfds, struct nsbox_err *e)
{
    if (nsbox_proto_send_obj(sock, req, fds, nfds, e) == 0)
        return 0;
    return e->sys_errno == EPIPE || e->sys_errno == ECONNRESET ? 0 : -1;
}

int nsbox_client_send(int sock, const struct nsbox_request *req, const int *fds, size_t nfds,
                      struct nsbox_err *e)
{
    cleanup_cjson cJSON *o = encode(req, e);
    return o ? send_encoded(sock, o, fds, nfds, e) : -1;
}

/* One request on a connection of its own, left open in *sock for the caller: connect, send req
 * with fds, read the reply (and the descriptor that comes with it into *rfd, when rfd is given)
 * within seconds (0: no limit). A "busy" refusal is sent again for up to busy_ms. */
int nsbox_client_exchange(const char *id, const struct nsbox_request *rq, const int *fds,
                          size_t nfds, int seconds, unsigned busy_ms, int *sock, cJSON **reply,
                          int *rfd, struct nsbox_err *e)
{
    unsigned waited_ms = 0;
    *reply = NULL;
    cleanup_cjson cJSON *req = encode(rq, e);
    if (!req)
        return -1;
    do {
        *sock = nsbox_connect_ctl(id, e);
        if (*sock < 0)
            return -1;
        /* a connection lost to a deletion (an rm, the ttl) says which */
        if (send_encoded(*sock, req, fds, nfds, e) < 0 ||
            (seconds ? recv_reply_within(*sock, id, seconds, reply, e)
                     : nsbox_client_recv(*sock, reply, rfd, e)) < 0) {
            nsbox_client_lost(id, e);
            return -1;
        }
    } while (nsbox_client_again_if_busy(reply, sock, &waited_ms, busy_ms));
    return 0;
}

/* One request on a connection of its own; the reply within seconds. */
int nsbox_client_call_within(const char *id, const struct nsbox_request *req, int seconds,
                             cJSON **reply, struct nsbox_err *e)
{
    cleanup_close int sock = -1;
    return nsbox_client_exchange(id, req, NULL, 0, seconds, (unsigned)seconds * 1000u, &sock, reply, NULL, e);
}

/* One request and its reply (within NSBOX_CLIENT_ANSWER_S) on a connection of its own; an error reply
 * becomes e. */
int nsbox_client_simple_call(const char *id, const struct nsbox_request *req, cJSON **reply,
                             struct nsbox_err *e)
{
    if (nsbox_client_call_within(id, req, NSBOX_CLIENT_ANSWER_S, reply, e) < 0)
        return -1;
    if (nsbox_client_reply_error(*reply, e) < 0) {
        cJSON_Delete(*reply);
        *reply = NULL;
        return -1;
    }
    return 0;
}

/* The supervisor replies to a delete before it tears the sandbox down, and closes its
 * connections only when it exits, after the teardown: with wait, return only then (at most
 * 4 s; a teardown that takes longer is finished by the supervisor, or by gc if it dies). */
int nsbox_client_delete(const char *id, bool wait, struct nsbox_err *e)
{
    cleanup_close int sock = -1;
    struct nsbox_request rq;
    nsbox_proto_request_init(&rq, NSBOX_OP_DELETE);
    cJSON *reply = NULL;
    int r = nsbox_client_exchange(id, &rq, NULL, 0, NSBOX_CLIENT_ANSWER_S, NSBOX_CLIENT_BUSY_RETRY_MS, &sock, &reply, NULL, e);
    if (r == 0)
        r = nsbox_client_reply_error(reply, e);
    cJSON_Delete(reply);
    char buf[256];
    struct pollfd pf = {sock, POLLIN, 0};
    while (r == 0 && wait && poll(&pf, 1, 4000) == 1 && read(sock, buf, sizeof buf) > 0)
        ; /* nothing more is sent; EOF (or an error) is the supervisor's exit */
    return r;
}

int nsbox_client_call(const char *id, const struct nsbox_request *req, const int *fds, size_t nfds, cJSON **reply,
                      int *rfd, struct nsbox_err *e)
{
    *reply = NULL;
    if (rfd)
        *rfd = -1;
    cleanup_close int sock = -1;
    /* a file operation under way when the sandbox is deleted (its ttl, an rm) says so */
    if (nsbox_client_exchange(id, req, fds, nfds, 0, NSBOX_CLIENT_BUSY_RETRY_MS, &sock, reply, rfd, e) < 0)
        return -1;
    /* A write with confirm: its stream ended, and we are still here, so that was its end (a
     * Ctrl-C that killed the producer killed us too, and nothing is kept). */
    if (cJSON_GetObjectItemCaseSensitive(*reply, "end_of_content")) {
        cJSON_Delete(*reply);
        *reply = NULL;
        cJSON *commit = nsbox_proto_encode_head("commit");
        int r = nsbox_proto_send_obj(sock, commit, NULL, 0, e);
        cJSON_Delete(commit);
        if (r < 0 || nsbox_client_recv(sock, reply, rfd, e) < 0) {
            nsbox_client_lost(id, e);
            return -1;
        }
    }
    return 0;
}
