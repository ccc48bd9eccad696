/* nsbox public API: one error type, specs, one-shot runs.
 *
 * Conventions (docs/architecture.md): every function that can fail returns < 0 and fills a
 * struct nsbox_err; callers add context with nsbox_err_wrap() on the way up and only main()
 * prints. Nothing below main() calls exit().
 */
#ifndef NSBOX_H
#define NSBOX_H

#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

#define NSBOX_ERR_MSG_MAX 1024

enum nsbox_errcode {
    NSBOX_OK = 0,
    NSBOX_E_INVALID = 1,     /* bad input: spec, flag, path, request */
    NSBOX_E_SYS = 2,         /* a system call failed; sys_errno says which errno */
    NSBOX_E_UNSUPPORTED = 3, /* a prerequisite is missing on this machine; msg has the fix */
    NSBOX_E_POLICY = 4,      /* a policy that cannot be enforced here (region rule, ...) */
    NSBOX_E_NOTFOUND = 5,    /* image, sandbox, file does not exist */
    NSBOX_E_NOMEM = 6,
    NSBOX_E_TIMEOUT = 7,
    NSBOX_E_DELETED = 8, /* sandbox was deleted (ttl, rm) */
    NSBOX_E_EXEC = 9,    /* the command could not be executed (126/127) */
    NSBOX_E_NOSPACE = 10, /* the workspace's disk (bytes or inodes) is full */
    NSBOX_E_BUSY = 11,    /* the sandbox has as much under way as it takes: retry later */
};

struct nsbox_err {
    int code;
    int sys_errno;
    char msg[NSBOX_ERR_MSG_MAX];
};

/* User text echoed in one-line error messages that end up on terminals and in logs (a spec's
 * value, an id that is not one, an unknown command): at most 64 bytes, then "...", with control
 * characters (C0, DEL, C1) and invalid UTF-8 as '?' (policy/shown.h), so that it cannot forge
 * extra lines or escape sequences. By value, so that two can appear in one nsbox_err_set()
 * call: NSBOX_SHOW(text). */
struct nsbox_shown {
    char s[100];
};
struct nsbox_shown nsbox_show(const char *text);
#define NSBOX_SHOW(t) (nsbox_show(t).s)

/* All return -1 so that `return nsbox_err_set(...)` reads naturally. */
int nsbox_err_set(struct nsbox_err *e, int code, int sys_errno, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* code NSBOX_E_SYS, sys_errno = errno, message "<fmt>: strerror(errno)". */
int nsbox_err_sys(struct nsbox_err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* code NSBOX_E_INVALID, sys_errno EINVAL: bad input. */
int nsbox_err_invalid(struct nsbox_err *e, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Prefix context: msg becomes "<fmt>: <old msg>"; code and errno are kept. */
int nsbox_err_wrap(struct nsbox_err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void nsbox_err_clear(struct nsbox_err *e);
const char *nsbox_errcode_name(int code);

/* ---- spec ---------------------------------------------------------------------------------- */
struct nsbox_spec; /* defined in policy/spec.h; opaque to library users */

struct nsbox_spec *nsbox_spec_new(void);
void nsbox_spec_destroy(struct nsbox_spec *s);
/* Overlay a JSON object on the spec (unknown keys, wrong types, out-of-range values fail). */
int nsbox_spec_load_json(struct nsbox_spec *s, const char *json, size_t len, struct nsbox_err *e);
/* Set one option by its spec name (docs/spec.md), value as text (what CLI flags do). */
int nsbox_spec_set_option(struct nsbox_spec *s, const char *key, const char *value,
                          struct nsbox_err *e);
/* Cross-field rules (region vs network, instance type resolution). */
int nsbox_spec_check(struct nsbox_spec *s, struct nsbox_err *e);

/* ---- one-shot run -------------------------------------------------------------------------- */
struct nsbox_run_opts {
    int stdin_fd, stdout_fd, stderr_fd; /* given to the command as 0, 1, 2 */
    uint64_t timeout_ms;                /* 0: none; on expiry the sandbox is killed, status 124 */
    const char *cwd;                    /* inside the sandbox; NULL: /workspace */
    int *oom_kills;                     /* out (may be NULL): processes the memory limit killed */
    bool *timed_out;                    /* out (may be NULL): timeout_ms ended the command */
    const char *network_log;            /* --network-log FILE (NULL: none) */
    int network_log_fd;                 /* FILE, opened: the network log is copied there */
    char *dns_note;                     /* out (may be NULL): the note on the names asked that
                                           the network did not let resolve, "" for none */
    size_t dns_note_size;
};

/* Create a sandbox from a checked spec, run argv inside, delete it. Returns 0 and sets
 * *exit_status to nsbox's exit code (the command's own, 124 after a timeout, 128+N after
 * signal N) when the command ran;
 * when it could not be executed returns -1 with code NSBOX_E_EXEC and *exit_status 126 or 127;
 * any other failure returns -1 (exit code 125 for the CLI). Everything the sandbox made on the
 * host is removed before this returns. */
int nsbox_run(const struct nsbox_spec *s, char *const argv[], const struct nsbox_run_opts *o,
              int *exit_status, struct nsbox_err *e);
/* What a one-shot run refuses in a checked spec (setup_script, idle_timeout_seconds: they are
 * for persistent sandboxes), NSBOX_E_UNSUPPORTED; nsbox_run checks it first. */
int nsbox_run_check(const struct nsbox_spec *s, struct nsbox_err *e);

#ifdef __cplusplus
}
#endif
#endif
