/* The client <-> supervisor wire protocol (docs/protocol.md): length-prefixed JSON messages with
 * optional SCM_RIGHTS descriptors. Parsing is pure and bounded (fuzzed by tests/fuzz/fuzz_proto.c);
 * everything that arrives is untrusted. */
#ifndef NSBOX_PROTO_H
#define NSBOX_PROTO_H

#include "nsbox.h"

#include <cjson/cJSON.h>
#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NSBOX_PROTO_VERSION 1
#define NSBOX_PROTO_MAX (1u << 20)
#define NSBOX_PROTO_MAX_FDS 3
/* logs offsets: exact in a JSON number (a double) */
#define NSBOX_PROTO_MAX_OFFSET ((1ull << 53) - 1)
#define NSBOX_PROTO_MAX_ARGS 4096
#define NSBOX_PROTO_MAX_ENV 1024

enum nsbox_op {
    NSBOX_OP_PING,
    NSBOX_OP_INSPECT,
    NSBOX_OP_EXEC,
    NSBOX_OP_START,
    NSBOX_OP_PS,
    NSBOX_OP_KILL,
    NSBOX_OP_LOGS,
    NSBOX_OP_SIGNAL,
    NSBOX_OP_DELETE,
    NSBOX_OP_READ,
    NSBOX_OP_WRITE,
    NSBOX_OP_LIST,
    NSBOX_OP_STAT,
    NSBOX_OP_REMOVE,
    NSBOX_OP_MKDIR,
    NSBOX_OP_HOLD, /* delete the sandbox when this connection closes (its client's process ends) */
    NSBOX_OP_WAIT, /* reply when a background process has ended */
};

struct nsbox_request {
    enum nsbox_op op;
    char tag[65];
    /* exec / start: argv (heap, NULL-terminated); cmd becomes {"/bin/sh","-c",cmd} */
    char **argv;
    size_t argc;
    char **env; /* "K=V", heap, NULL-terminated */
    size_t nenv;
    char cwd[PATH_MAX];
    uint64_t timeout_ms;
    /* kill / signal / logs */
    int pid;
    int sig;
    /* logs: the stream offsets to start from (a previous reply's stdout_end/stderr_end), or
     * UINT64_MAX: not given, the whole kept log */
    uint64_t stdout_from, stderr_from;
    /* files */
    char path[PATH_MAX];
    /* list: where to go on, the previous reply's "next" (a position in the directory, in
     * decimal: it may not fit a JSON number's 53 bits, and the last entry's when the listing
     * began after a ':'); "" from the start */
    char cursor[48];
    unsigned mode;
    bool mkdir, recursive, parents;
    bool set_mode; /* write: mode applies to an existing file too (else only to a new one) */
    /* write from a stream: at its end, ask the client (end_of_content) and keep the content
     * only if it answers commit (protocol.md) */
    bool confirm;
    bool tty; /* exec: run the command on a pseudo-terminal of the sandbox (protocol.md) */
    bool by_session; /* delete: "by": "session", a client's session ended (its tombstone) */
    uint32_t rows, cols; /* exec with tty: the terminal's size */
};

const char *nsbox_proto_op_name(enum nsbox_op op);

/* A request of op with every field at what the parser gives when it is not sent (logs: no
 * offsets; files: mode 0644; exec: cwd "", which is not sent: the supervisor's /workspace), for
 * a client to fill in and encode. */
void nsbox_proto_request_init(struct nsbox_request *req, enum nsbox_op op);
/* value into the request's string field (of size bytes) named key: 0, or -1 with e saying what
 * the parser says of a value that long. */
int nsbox_proto_request_set(char *field, size_t size, const char *key, const char *value,
                            struct nsbox_err *e);

/* Parse and validate one request; on error e names the field. req must be freed even on error. */
int nsbox_proto_parse(const char *buf, size_t len, struct nsbox_request *req, struct nsbox_err *e);
void nsbox_proto_request_free(struct nsbox_request *req);

/* The encoders, the parser's other half: what a client sends. A request {"v", "op"} (op: a
 * request's name, or "commit", the answer to a write's end_of_content); caller frees, NULL when
 * out of memory. */
cJSON *nsbox_proto_encode_head(const char *op);
/* The whole request, as nsbox_proto_parse reads it back: parse(encode(r)) gives r again (fuzzed
 * by tests/fuzz/fuzz_proto.c). NULL when out of memory, or r is not one the parser could give. */
cJSON *nsbox_proto_encode(const struct nsbox_request *req);

/* Framing over a stream socket. recv: *out malloc'd (NUL-terminated), fds[] filled (-1 unused),
 * returns the length, 0 on orderly EOF before a message, -1 on error. */
int nsbox_proto_send(int sock, const char *json, const int *fds, size_t nfds, struct nsbox_err *e);
int nsbox_proto_send_obj(int sock, cJSON *obj, const int *fds, size_t nfds, struct nsbox_err *e);
ssize_t nsbox_proto_recv(int sock, char **out, int fds[NSBOX_PROTO_MAX_FDS], struct nsbox_err *e);
/* From now on, in this process, a whole message sent or received must take at most ms (0: no
 * limit, the default): a peer that dribbles it fails with ETIMEDOUT instead of holding a
 * single-threaded server (the supervisor) for as long as it likes. */
void nsbox_proto_frame_limit(int ms);

/* Replies. */
cJSON *nsbox_proto_reply_ok(const char *tag);
cJSON *nsbox_proto_reply_error(const char *tag, int code, const char *msg);
const char *nsbox_proto_errcode_wire(int code);
int nsbox_proto_errcode_from_wire(const char *s);

#endif
