/* Wire protocol: framing and request validation. */
#define _GNU_SOURCE
#include "proto.h"
#include "agent.h"
#include "cleanup.h"
#include "cleanup_cjson.h"
#include "spec.h"
#include "util.h"

#include <errno.h>
#include <stddef.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static const char *const op_names[] = {
    [NSBOX_OP_PING] = "ping",   [NSBOX_OP_INSPECT] = "inspect", [NSBOX_OP_EXEC] = "exec",
    [NSBOX_OP_START] = "start", [NSBOX_OP_PS] = "ps",           [NSBOX_OP_KILL] = "kill",
    [NSBOX_OP_LOGS] = "logs",   [NSBOX_OP_SIGNAL] = "signal",   [NSBOX_OP_DELETE] = "delete",
    [NSBOX_OP_READ] = "read",   [NSBOX_OP_WRITE] = "write",     [NSBOX_OP_LIST] = "list",
    [NSBOX_OP_STAT] = "stat",   [NSBOX_OP_REMOVE] = "remove",   [NSBOX_OP_MKDIR] = "mkdir",
    [NSBOX_OP_HOLD] = "hold",   [NSBOX_OP_WAIT] = "wait",
};

const char *nsbox_proto_op_name(enum nsbox_op op)
{
    return (unsigned)op < NSBOX_ARRAY_LEN(op_names) ? op_names[op] : "?";
}

void nsbox_proto_request_free(struct nsbox_request *req)
{
    if (req->argv)
        for (size_t i = 0; i < req->argc; i++)
            free(req->argv[i]);
    free(req->argv);
    if (req->env)
        for (size_t i = 0; i < req->nenv; i++)
            free(req->env[i]);
    free(req->env);
    req->argv = req->env = NULL;
    req->argc = req->nenv = 0;
}

void nsbox_proto_request_init(struct nsbox_request *req, enum nsbox_op op)
{
    memset(req, 0, sizeof *req);
    req->op = op;
    req->stdout_from = req->stderr_from = UINT64_MAX;
    req->mode = 0644;
}

static int too_long(const char *key, size_t n, struct nsbox_err *e)
{
    return nsbox_err_set(e, NSBOX_E_INVALID, ENAMETOOLONG,
                         "request: '%s' is longer than %zu bytes", key, n - 1);
}

int nsbox_proto_request_set(char *field, size_t size, const char *key, const char *value,
                            struct nsbox_err *e)
{
    size_t len = strlen(value);
    if (len >= size)
        return too_long(key, size, e);
    memcpy(field, value, len + 1);
    return 0;
}

/* Strings from the wire: bounded, and no NUL inside (cJSON would cut at it silently). */
static int get_string(const cJSON *obj, const char *key, char *out, size_t n, bool required,
                      struct nsbox_err *e)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!v) {
        if (required)
            return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL, "request: '%s' is required", key);
        return 0;
    }
    if (!cJSON_IsString(v) || !v->valuestring)
        return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL, "request: '%s' must be a string", key);
    return nsbox_proto_request_set(out, n, key, v->valuestring, e) < 0 ? -1 : 1;
}

static int get_uint_in(const cJSON *obj, const char *key, uint64_t min, uint64_t max,
                       uint64_t *out, struct nsbox_err *e)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!v)
        return 0;
    if (!cJSON_IsNumber(v) || v->valuedouble < (double)min || v->valuedouble > (double)max ||
        v->valuedouble != (double)(uint64_t)v->valuedouble)
        return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL,
                             "request: '%s' must be an integer between %llu and %llu", key,
                             (unsigned long long)min, (unsigned long long)max);
    *out = (uint64_t)v->valuedouble;
    return 1;
}

static int get_uint(const cJSON *obj, const char *key, uint64_t max, uint64_t *out,
                    struct nsbox_err *e)
{
    return get_uint_in(obj, key, 0, max, out, e);
}

static int get_bool(const cJSON *obj, const char *key, bool *out, struct nsbox_err *e)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!v)
        return 0;
    if (!cJSON_IsBool(v))
        return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL, "request: '%s' must be true or false",
                             key);
    *out = cJSON_IsTrue(v);
    return 1;
}

static char *dup_checked(const char *s, size_t max, const char *what, struct nsbox_err *e)
{
    size_t len = strlen(s);
    if (len > max) {
        nsbox_err_set(e, NSBOX_E_INVALID, E2BIG, "request: %s longer than %zu bytes", what, max);
        return NULL;
    }
    char *d = strdup(s);
    if (!d)
        nsbox_err_sys(e, "strdup");
    return d;
}

static int parse_command(const cJSON *obj, struct nsbox_request *r, struct nsbox_err *e)
{
    const cJSON *argv = cJSON_GetObjectItemCaseSensitive(obj, "argv");
    const cJSON *cmd = cJSON_GetObjectItemCaseSensitive(obj, "cmd");
    if (!!argv == !!cmd)
        return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL,
                             "request: exactly one of 'argv' and 'cmd' is required");
    if (cmd) {
        if (!cJSON_IsString(cmd) || !cmd->valuestring)
            return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL, "request: 'cmd' must be a string");
        r->argv = calloc(4, sizeof *r->argv);
        if (!r->argv)
            return nsbox_err_sys(e, "calloc");
        r->argc = 3;
        if (!(r->argv[0] = strdup("/bin/sh")) || !(r->argv[1] = strdup("-c")) ||
            !(r->argv[2] = dup_checked(cmd->valuestring, NSBOX_PROTO_MAX, "'cmd'", e)))
            return -1;
    } else {
        if (!cJSON_IsArray(argv))
            return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL,
                                 "request: 'argv' must be an array of strings");
        int n = cJSON_GetArraySize(argv);
        if (n < 1 || n > NSBOX_PROTO_MAX_ARGS)
            return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL,
                                 "request: 'argv' needs 1 to %d strings", NSBOX_PROTO_MAX_ARGS);
        r->argv = calloc((size_t)n + 1, sizeof *r->argv);
        if (!r->argv)
            return nsbox_err_sys(e, "calloc");
        const cJSON *it;
        cJSON_ArrayForEach(it, argv)
        {
            if (!cJSON_IsString(it) || !it->valuestring)
                return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL,
                                     "request: 'argv[%zu]' must be a string", r->argc);
            if (!(r->argv[r->argc] = dup_checked(it->valuestring, NSBOX_PROTO_MAX, "'argv'", e)))
                return -1;
            r->argc++;
        }
        if (!r->argv[0][0])
            return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL, "request: 'argv[0]' is empty");
    }
    const cJSON *env = cJSON_GetObjectItemCaseSensitive(obj, "env");
    if (env) {
        if (!cJSON_IsObject(env))
            return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL,
                                 "request: 'env' must be an object of strings");
        int n = cJSON_GetArraySize(env);
        if (n > NSBOX_PROTO_MAX_ENV)
            return nsbox_err_set(e, NSBOX_E_INVALID, E2BIG, "request: more than %d 'env' entries",
                                 NSBOX_PROTO_MAX_ENV);
        r->env = calloc((size_t)n + 1, sizeof *r->env);
        if (!r->env)
            return nsbox_err_sys(e, "calloc");
        const cJSON *it;
        cJSON_ArrayForEach(it, env)
        {
            const char *k = it->string;
            bool ok = k && ((k[0] >= 'A' && k[0] <= 'Z') || (k[0] >= 'a' && k[0] <= 'z') ||
                            k[0] == '_');
            for (const char *p = k; ok && *p; p++)
                ok = (*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
                     (*p >= '0' && *p <= '9') || *p == '_';
            if (!ok) {
                char shown[68]; /* which one, printable and bounded: it is the client's */
                size_t j = 0;
                for (const char *p = k; p && *p && j < 64; p++)
                    shown[j++] = *p >= 0x20 && *p < 0x7f && *p != '\'' ? *p : '?';
                shown[j] = '\0';
                return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL,
                                     "request: 'env' has an invalid name '%s'%s (letters, "
                                     "digits and _, not first a digit)",
                                     shown, k && strlen(k) > 64 ? "..." : "");
            }
            if (!cJSON_IsString(it) || !it->valuestring)
                return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL,
                                     "request: 'env.%s' must be a string", k);
            size_t len = strlen(k) + strlen(it->valuestring) + 2;
            char *kv = malloc(len);
            if (!kv)
                return nsbox_err_sys(e, "malloc");
            snprintf(kv, len, "%s=%s", k, it->valuestring);
            r->env[r->nenv++] = kv;
        }
    }
    strcpy(r->cwd, "/workspace");
    if (get_string(obj, "cwd", r->cwd, sizeof r->cwd, false, e) < 0)
        return -1;
    if (r->cwd[0] != '/')
        return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL, "request: 'cwd' must be absolute");
    return 0;
}

/* kill: the signal (15 when not given), 1 to 64. */
static int parse_signal(const cJSON *obj, struct nsbox_request *r, struct nsbox_err *e)
{
    uint64_t u = 15;
    if (get_uint(obj, "signal", 64, &u, e) < 0)
        return -1;
    if (u < 1 || u > 64)
        return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL, "request: 'signal' must be 1 to 64");
    r->sig = (int)u;
    return 0;
}

static int parse_exec(const cJSON *obj, struct nsbox_request *r, struct nsbox_err *e)
{
    if (get_uint(obj, "timeout_ms", NSBOX_TIMEOUT_MAX_S * 1000ull, &r->timeout_ms, e) < 0)
        return -1;
    if (r->op == NSBOX_OP_START)
        return parse_command(obj, r, e);
    uint64_t rows = 0, cols = 0;
    if (get_bool(obj, "tty", &r->tty, e) < 0 || get_uint(obj, "rows", 65535, &rows, e) < 0)
        return -1;
    r->rows = (uint32_t)rows;
    if (get_uint(obj, "cols", 65535, &cols, e) < 0)
        return -1;
    r->cols = (uint32_t)cols;
    return parse_command(obj, r, e);
}

/* kill, logs, wait: a process. */
static int parse_pid(const cJSON *obj, struct nsbox_request *r, struct nsbox_err *e)
{
    uint64_t u = 0;
    int got = get_uint_in(obj, "pid", 1, 1u << 22, &u, e);
    if (got < 0)
        return -1;
    if (got == 0)
        return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL, "request: 'pid' is required");
    r->pid = (int)u;
    if (r->op == NSBOX_OP_LOGS &&
        (get_uint(obj, "stdout_from", NSBOX_PROTO_MAX_OFFSET, &r->stdout_from, e) < 0 ||
         get_uint(obj, "stderr_from", NSBOX_PROTO_MAX_OFFSET, &r->stderr_from, e) < 0))
        return -1;
    return r->op == NSBOX_OP_KILL ? parse_signal(obj, r, e) : 0;
}

/* The flags of file operations, in the order they are checked. */
static const struct {
    const char *key;
    size_t off;
} file_flags[] = {
    {"mkdir", offsetof(struct nsbox_request, mkdir)},
    {"recursive", offsetof(struct nsbox_request, recursive)},
    {"parents", offsetof(struct nsbox_request, parents)},
    {"set_mode", offsetof(struct nsbox_request, set_mode)},
    {"confirm", offsetof(struct nsbox_request, confirm)},
};

static int parse_file(const cJSON *obj, struct nsbox_request *r, struct nsbox_err *e)
{
    bool list = r->op == NSBOX_OP_LIST;
    if (list)
        strcpy(r->path, ".");
    if (get_string(obj, "path", r->path, sizeof r->path, !list, e) < 0)
        return -1;
    if (list && get_string(obj, "cursor", r->cursor, sizeof r->cursor, false, e) < 0)
        return -1;
    uint64_t u = 0644;
    if (get_uint(obj, "mode", 07777, &u, e) < 0)
        return -1;
    if (u > 0777) /* they were dropped without a word: say so instead */
        return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL,
                             "request: 'mode' %#llo has bits beyond 0777: setuid, setgid and "
                             "sticky bits are never given to a file made through nsbox",
                             (unsigned long long)u);
    r->mode = (unsigned)u;
    for (size_t i = 0; i < NSBOX_ARRAY_LEN(file_flags); i++)
        if (get_bool(obj, file_flags[i].key, (bool *)((char *)r + file_flags[i].off), e) < 0)
            return -1;
    return 0;
}

static int parse_delete(const cJSON *obj, struct nsbox_request *r, struct nsbox_err *e)
{
    char by[16] = "";
    if (get_string(obj, "by", by, sizeof by, false, e) < 0)
        return -1;
    if (by[0] && strcmp(by, "rm") != 0 && strcmp(by, "session") != 0)
        return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL,
                             "request: 'by' must be \"rm\" or \"session\"");
    r->by_session = !strcmp(by, "session");
    return 0;
}

/* Each op's fields (NULL: it has none beyond v, op and tag). */
static int (*const op_fields[])(const cJSON *obj, struct nsbox_request *r, struct nsbox_err *e) = {
    [NSBOX_OP_EXEC] = parse_exec,     [NSBOX_OP_START] = parse_exec,
    [NSBOX_OP_KILL] = parse_pid,      [NSBOX_OP_LOGS] = parse_pid,
    [NSBOX_OP_WAIT] = parse_pid,      [NSBOX_OP_SIGNAL] = parse_signal,
    [NSBOX_OP_READ] = parse_file,     [NSBOX_OP_WRITE] = parse_file,
    [NSBOX_OP_LIST] = parse_file,     [NSBOX_OP_STAT] = parse_file,
    [NSBOX_OP_REMOVE] = parse_file,   [NSBOX_OP_MKDIR] = parse_file,
    [NSBOX_OP_DELETE] = parse_delete,
};

/* What every request has: the protocol's version, the op, the tag. */
static int parse_head(const cJSON *obj, struct nsbox_request *r, struct nsbox_err *e)
{
    uint64_t v = 0;
    if (get_uint(obj, "v", 1000, &v, e) < 0)
        return -1;
    if (v != NSBOX_PROTO_VERSION)
        return nsbox_err_set(e, NSBOX_E_INVALID, EPROTO,
                             "request: protocol version %llu is not supported (this nsbox speaks "
                             "%d)",
                             (unsigned long long)v, NSBOX_PROTO_VERSION);
    char op[16] = "";
    if (get_string(obj, "op", op, sizeof op, true, e) < 0 ||
        get_string(obj, "tag", r->tag, sizeof r->tag, false, e) < 0)
        return -1;
    size_t i = 0;
    for (; i < NSBOX_ARRAY_LEN(op_names); i++)
        if (!strcmp(op, op_names[i]))
            break;
    if (i == NSBOX_ARRAY_LEN(op_names))
        return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL, "request: unknown op '%s'", op);
    r->op = (enum nsbox_op)i;
    return 0;
}

int nsbox_proto_parse(const char *buf, size_t len, struct nsbox_request *r, struct nsbox_err *e)
{
    memset(r, 0, sizeof *r);
    r->stdout_from = r->stderr_from = UINT64_MAX;
    if (len > NSBOX_PROTO_MAX)
        return nsbox_err_set(e, NSBOX_E_INVALID, E2BIG, "request larger than %u bytes",
                             NSBOX_PROTO_MAX);
    /* before cJSON, which cuts a string at a NUL, raw or escaped, and reads on */
    struct nsbox_err nul;
    if (nsbox_spec_json_check_nul(buf, len, &nul) < 0)
        return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL, "request %s", nul.msg);
    const char *end = NULL;
    cleanup_cjson cJSON *obj = cJSON_ParseWithLengthOpts(buf, len, &end, false);
    if (!obj)
        return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL, "request is not valid JSON");
    if (!cJSON_IsObject(obj))
        return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL, "request must be a JSON object");
    if (parse_head(obj, r, e) < 0)
        return -1;
    if ((unsigned)r->op < NSBOX_ARRAY_LEN(op_fields) && op_fields[r->op])
        return op_fields[r->op](obj, r, e) < 0 ? -1 : 0;
    return 0;
}

/* ---- encoding: what the parser reads, one encoder per kind of request ------------------------ */

cJSON *nsbox_proto_encode_head(const char *op)
{
    cJSON *o = cJSON_CreateObject();
    if (!o || !cJSON_AddNumberToObject(o, "v", NSBOX_PROTO_VERSION) ||
        !cJSON_AddStringToObject(o, "op", op)) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

static bool encode_signal(cJSON *o, const struct nsbox_request *r)
{
    return cJSON_AddNumberToObject(o, "signal", r->sig);
}

/* argv, never cmd: the parser has made a cmd the argv {"/bin/sh", "-c", cmd} */
static bool encode_exec(cJSON *o, const struct nsbox_request *r)
{
    if (r->timeout_ms && !cJSON_AddNumberToObject(o, "timeout_ms", (double)r->timeout_ms))
        return false;
    if (r->op == NSBOX_OP_EXEC &&
        ((r->tty && !cJSON_AddTrueToObject(o, "tty")) ||
         (r->rows && !cJSON_AddNumberToObject(o, "rows", r->rows)) ||
         (r->cols && !cJSON_AddNumberToObject(o, "cols", r->cols))))
        return false;
    cJSON *argv = cJSON_AddArrayToObject(o, "argv");
    for (size_t i = 0; argv && i < r->argc; i++) {
        cJSON *s = cJSON_CreateString(r->argv[i]);
        if (!s || !cJSON_AddItemToArray(argv, s)) {
            cJSON_Delete(s);
            return false;
        }
    }
    cJSON *env = r->nenv ? cJSON_AddObjectToObject(o, "env") : NULL;
    for (size_t i = 0; env && i < r->nenv; i++) {
        const char *eq = strchr(r->env[i], '=');
        cleanup_free char *name = eq ? strndup(r->env[i], (size_t)(eq - r->env[i])) : NULL;
        if (!name || !cJSON_AddStringToObject(env, name, eq + 1))
            return false;
    }
    /* no cwd (a client's request that names none): the parser's default */
    return argv && (!r->nenv || env) && (!r->cwd[0] || cJSON_AddStringToObject(o, "cwd", r->cwd));
}

/* An offset as its exact digits: cJSON prints a number with 15 significant digits when that
 * reads back within its rounding tolerance, which loses the last digit of an integer past 10^15
 * (offsets go to 2^53 - 1). */
static bool add_offset(cJSON *o, const char *key, uint64_t v)
{
    char text[24];
    snprintf(text, sizeof text, "%llu", (unsigned long long)v);
    return cJSON_AddRawToObject(o, key, text) != NULL;
}

static bool encode_pid(cJSON *o, const struct nsbox_request *r)
{
    if (!cJSON_AddNumberToObject(o, "pid", r->pid))
        return false;
    if (r->op == NSBOX_OP_LOGS &&
        ((r->stdout_from != UINT64_MAX &&
          !add_offset(o, "stdout_from", r->stdout_from)) ||
         (r->stderr_from != UINT64_MAX &&
          !add_offset(o, "stderr_from", r->stderr_from))))
        return false;
    return r->op != NSBOX_OP_KILL || encode_signal(o, r);
}

static bool encode_file(cJSON *o, const struct nsbox_request *r)
{
    if (!cJSON_AddStringToObject(o, "path", r->path) ||
        (r->cursor[0] && !cJSON_AddStringToObject(o, "cursor", r->cursor)) ||
        (r->mode != 0644 && !cJSON_AddNumberToObject(o, "mode", r->mode)))
        return false;
    for (size_t i = 0; i < NSBOX_ARRAY_LEN(file_flags); i++)
        if (*(const bool *)((const char *)r + file_flags[i].off) &&
            !cJSON_AddTrueToObject(o, file_flags[i].key))
            return false;
    return true;
}

static bool encode_delete(cJSON *o, const struct nsbox_request *r)
{
    return !r->by_session || cJSON_AddStringToObject(o, "by", "session");
}

/* Each op's fields, as op_fields reads them (NULL: none). */
static bool (*const op_encoders[])(cJSON *o, const struct nsbox_request *r) = {
    [NSBOX_OP_EXEC] = encode_exec,     [NSBOX_OP_START] = encode_exec,
    [NSBOX_OP_KILL] = encode_pid,      [NSBOX_OP_LOGS] = encode_pid,
    [NSBOX_OP_WAIT] = encode_pid,      [NSBOX_OP_SIGNAL] = encode_signal,
    [NSBOX_OP_READ] = encode_file,     [NSBOX_OP_WRITE] = encode_file,
    [NSBOX_OP_LIST] = encode_file,     [NSBOX_OP_STAT] = encode_file,
    [NSBOX_OP_REMOVE] = encode_file,   [NSBOX_OP_MKDIR] = encode_file,
    [NSBOX_OP_DELETE] = encode_delete,
};

cJSON *nsbox_proto_encode(const struct nsbox_request *r)
{
    const char *name = nsbox_proto_op_name(r->op);
    if (!strcmp(name, "?"))
        return NULL;
    cJSON *o = nsbox_proto_encode_head(name);
    if (!o || (r->tag[0] && !cJSON_AddStringToObject(o, "tag", r->tag)) ||
        (op_encoders[r->op] && !op_encoders[r->op](o, r))) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

/* ---- framing --------------------------------------------------------------------------------- */

static int frame_limit_ms; /* 0: a message may take as long as its peer takes */

void nsbox_proto_frame_limit(int ms)
{
    frame_limit_ms = ms;
}

static int64_t frame_deadline(void)
{
    return frame_limit_ms > 0 ? nsbox_now_ms() + frame_limit_ms : 0;
}

/* Wait until sock is ready for ev, at most until deadline: -1 with ETIMEDOUT past it. */
static int wait_ready(int sock, short ev, int64_t deadline)
{
    for (;;) {
        int64_t left = deadline - nsbox_now_ms();
        struct pollfd p = {.fd = sock, .events = ev};
        int r = left > 0 ? poll(&p, 1, (int)left) : 0;
        if (r > 0)
            return 0;
        if (r == 0) {
            errno = ETIMEDOUT;
            return -1;
        }
        if (errno != EINTR)
            return -1;
    }
}

int nsbox_proto_send(int sock, const char *json, const int *fds, size_t nfds, struct nsbox_err *e)
{
    int64_t deadline = frame_deadline();
    size_t len = strlen(json);
    if (len > NSBOX_PROTO_MAX || nfds > NSBOX_PROTO_MAX_FDS)
        return nsbox_err_set(e, NSBOX_E_INVALID, E2BIG,
                             "a message of %zu bytes, more than the protocol's %u (a "
                             "command's arguments and environment may hold %u KiB in all; pass "
                             "long inputs in a file)",
                             len, NSBOX_PROTO_MAX, NSBOX_AGENT_PAYLOAD_MAX / 1024);
    unsigned char hdr[4] = {(unsigned char)(len >> 24), (unsigned char)(len >> 16),
                            (unsigned char)(len >> 8), (unsigned char)len};
    struct iovec iov[2] = {{hdr, 4}, {(void *)json, len}};
    union {
        char buf[CMSG_SPACE(sizeof(int) * NSBOX_PROTO_MAX_FDS)];
        struct cmsghdr align;
    } u;
    struct msghdr msg = {.msg_iov = iov, .msg_iovlen = 2};
    if (nfds > 0)
        nsbox_cmsg_put_fds(&msg, u.buf, fds, nfds);
    size_t total = 4 + len, sent = 0;
    while (sent < total) {
        ssize_t n = sendmsg(sock, &msg, MSG_NOSIGNAL | (deadline ? MSG_DONTWAIT : 0));
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (deadline && errno == EAGAIN && wait_ready(sock, POLLOUT, deadline) == 0)
                continue;
            return nsbox_err_sys(e, "send");
        }
        sent += (size_t)n;
        msg.msg_control = NULL;
        msg.msg_controllen = 0;
        /* advance the iovecs past what was sent */
        size_t skip = (size_t)n;
        for (size_t i = 0; i < msg.msg_iovlen && skip; i++) {
            size_t take = skip < msg.msg_iov[i].iov_len ? skip : msg.msg_iov[i].iov_len;
            msg.msg_iov[i].iov_base = (char *)msg.msg_iov[i].iov_base + take;
            msg.msg_iov[i].iov_len -= take;
            skip -= take;
        }
    }
    return 0;
}

int nsbox_proto_send_obj(int sock, cJSON *obj, const int *fds, size_t nfds, struct nsbox_err *e)
{
    char *s = cJSON_PrintUnformatted(obj);
    if (!s)
        return nsbox_err_set(e, NSBOX_E_NOMEM, ENOMEM, "cannot render a message");
    int r = nsbox_proto_send(sock, s, fds, nfds, e);
    free(s);
    return r;
}

static ssize_t recv_exact(int sock, char *buf, size_t n, int fds[NSBOX_PROTO_MAX_FDS],
                          bool *got_any, bool *ctrunc, int64_t deadline)
{
    size_t got = 0;
    while (got < n) {
        union {
            char b[CMSG_SPACE(sizeof(int) * NSBOX_PROTO_MAX_FDS)];
            struct cmsghdr align;
        } u;
        struct iovec iov = {buf + got, n - got};
        struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
        if (fds) {
            msg.msg_control = u.b;
            msg.msg_controllen = sizeof u.b;
        }
        ssize_t r = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC | (deadline ? MSG_DONTWAIT : 0));
        if (r < 0) {
            if (errno == EINTR)
                continue;
            if (deadline && errno == EAGAIN && wait_ready(sock, POLLIN, deadline) == 0)
                continue;
            return -1;
        }
        if (r == 0)
            return (ssize_t)got;
        *got_any = true;
        for (struct cmsghdr *c = fds ? CMSG_FIRSTHDR(&msg) : NULL; c; c = CMSG_NXTHDR(&msg, c)) {
            if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
                continue;
            size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
            int *in = (int *)CMSG_DATA(c);
            for (size_t i = 0; i < k; i++) {
                /* Keep the first NSBOX_PROTO_MAX_FDS; close any extra a client pushed on us. */
                size_t slot = 0;
                while (slot < NSBOX_PROTO_MAX_FDS && fds[slot] >= 0)
                    slot++;
                if (slot < NSBOX_PROTO_MAX_FDS)
                    fds[slot] = in[i];
                else
                    close(in[i]);
            }
        }
        if (msg.msg_flags & MSG_CTRUNC)
            *ctrunc = true; /* descriptors were lost: no room for them in this process */
        got += (size_t)r;
        fds = NULL; /* descriptors ride on the first bytes only */
    }
    return (ssize_t)got;
}

ssize_t nsbox_proto_recv(int sock, char **out, int fds[NSBOX_PROTO_MAX_FDS], struct nsbox_err *e)
{
    *out = NULL;
    if (fds)
        for (int i = 0; i < NSBOX_PROTO_MAX_FDS; i++)
            fds[i] = -1;
    unsigned char hdr[4];
    bool any = false, ctrunc = false;
    int64_t deadline = frame_deadline();
    ssize_t n = recv_exact(sock, (char *)hdr, 4, fds, &any, &ctrunc, deadline);
    if (n == 0)
        return 0;
    if (n < 0)
        return nsbox_err_sys(e, "receive");
    if (n < 4)
        return nsbox_err_set(e, NSBOX_E_INVALID, EPROTO, "truncated message header");
    size_t len = (size_t)hdr[0] << 24 | (size_t)hdr[1] << 16 | (size_t)hdr[2] << 8 | hdr[3];
    if (len == 0 || len > NSBOX_PROTO_MAX)
        return nsbox_err_set(e, NSBOX_E_INVALID, EMSGSIZE,
                             "message of %zu bytes (1 to %u allowed)", len, NSBOX_PROTO_MAX);
    char *buf = malloc(len + 1);
    if (!buf)
        return nsbox_err_sys(e, "malloc");
    n = recv_exact(sock, buf, len, NULL, &any, &ctrunc, deadline);
    if (n < 0 || (size_t)n < len) {
        free(buf);
        return n < 0 ? nsbox_err_sys(e, "receive")
                     : nsbox_err_set(e, NSBOX_E_INVALID, EPROTO, "truncated message");
    }
    if (ctrunc) {
        /* Read whole, so the stream stays in step; but a request without the descriptors it
         * came with (a write's content) must not be mistaken for one that had none. */
        free(buf);
        int got = 0;
        for (int i = 0; fds && i < NSBOX_PROTO_MAX_FDS; i++)
            if (fds[i] >= 0) {
                got++;
                close(fds[i]);
                fds[i] = -1;
            }
        if (got == NSBOX_PROTO_MAX_FDS) /* the buffer was full: more were sent than it holds */
            return nsbox_err_set(e, NSBOX_E_INVALID, EMSGSIZE,
                                 "more than %d descriptors came with the message",
                                 NSBOX_PROTO_MAX_FDS);
        return nsbox_err_set(e, NSBOX_E_SYS, EMFILE,
                             "the descriptors sent with the message were lost: the receiver is "
                             "at its limit of open files (ulimit -n)");
    }
    buf[len] = '\0';
    *out = buf;
    return (ssize_t)len;
}

/* ---- replies --------------------------------------------------------------------------------- */

/* What every reply starts with: the version, whether it succeeded, the request's tag. */
static cJSON *reply(const char *tag, bool ok)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    cJSON_AddNumberToObject(o, "v", NSBOX_PROTO_VERSION);
    cJSON_AddBoolToObject(o, "ok", ok);
    if (tag && tag[0])
        cJSON_AddStringToObject(o, "tag", tag);
    return o;
}

cJSON *nsbox_proto_reply_ok(const char *tag)
{
    return reply(tag, true);
}

/* The wire's names are nsbox_errcode_name's (policy/err.c, the one list), except that running
 * out of memory is said as "system". */
const char *nsbox_proto_errcode_wire(int code)
{
    const char *name = code == NSBOX_E_NOMEM ? "system" : nsbox_errcode_name(code);
    return strcmp(name, "unknown") ? name : "system";
}

int nsbox_proto_errcode_from_wire(const char *s)
{
    /* the codes are 0, 1, 2, ...: the first without a name ends them */
    for (int code = 0; s && strcmp(nsbox_errcode_name(code), "unknown"); code++)
        if (code != NSBOX_E_NOMEM && !strcmp(nsbox_errcode_name(code), s))
            return code;
    return NSBOX_E_SYS;
}

cJSON *nsbox_proto_reply_error(const char *tag, int code, const char *msg)
{
    cJSON *o = reply(tag, false);
    if (!o)
        return NULL;
    cJSON *err = cJSON_AddObjectToObject(o, "error");
    if (err) {
        cJSON_AddStringToObject(err, "code", nsbox_proto_errcode_wire(code));
        cJSON_AddStringToObject(err, "message", msg ? msg : "");
    }
    return o;
}
