/* `nsbox logs [-f] ID PID`: a background process's output, once or as it is written.
 * `nsbox logs --network [-f] ID`: the sandbox's network log (sandbox/egress_log.h), read from
 * its state directory. */
#define _GNU_SOURCE
#include "cli.h"
#include "client.h"
#include "egress_log.h"
#include "paths.h"
#include "state.h"
#include "say.h"
#include "util.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* One logs reply: its stdout on ours, its stderr on ours, and a note when output was dropped
 * (following: between two reads). -1 with errno when our output cannot be written (EPIPE: the
 * reader is gone). */
static int print_logs(const cJSON *reply, long pid, bool following)
{
    const char *out = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(reply, "stdout"));
    const char *err = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(reply, "stderr"));
    /* A log that starts mid-line is not a bug in the program: say that its start was dropped */
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(reply, "truncated"))) {
        fflush(stdout);
        fprintf(stderr,
                following ? "nsbox: note: output of process %ld was dropped here: it wrote more "
                            "than the 64 KiB kept of each stream between two reads\n"
                          : "nsbox: note: earlier output of process %ld was dropped (the last "
                            "64 KiB of each stream are kept)\n",
                pid);
    }
    errno = 0;
    if ((out && *out && fputs(out, stdout) < 0) || fflush(stdout) != 0)
        return -1;
    if (err && *err && (fputs(err, stderr) < 0 || fflush(stderr) != 0))
        return -1;
    return 0;
}

static int output_failed(void)
{
    if (errno == EPIPE)
        return 0; /* the reader had what it wanted (| head, | grep -m1): not an error */
    int err = errno ? errno : EIO;
    fprintf(stderr, "nsbox: cannot write the logs: %s\n", strerror(err));
    return EXIT_NSBOX;
}

static bool reply_number(const cJSON *reply, const char *key, double *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(reply, key);
    if (!cJSON_IsNumber(v) || v->valuedouble < 0)
        return false;
    *out = v->valuedouble;
    return true;
}

/* A stream's end as a reply gave it (>= 0), as the next request's offset: one past what the
 * protocol takes, when it is beyond it, for the supervisor to refuse as before. */
static uint64_t log_offset(double end)
{
    return end <= (double)NSBOX_PROTO_MAX_OFFSET ? (uint64_t)end : NSBOX_PROTO_MAX_OFFSET + 1;
}

/* Sleep ms, or less when our stdout's reader goes away (a pipe whose reader closed reports
 * POLLERR; a terminal that hung up, POLLHUP): then true. A process that writes only to
 * stderr would otherwise keep a `logs -f | grep -m1 ready` waiting for ever. */
static bool reader_gone_within(int ms)
{
    struct pollfd p = {STDOUT_FILENO, 0, 0};
    int64_t end = nsbox_now_ms() + ms;
    for (;;) {
        int left = (int)(end - nsbox_now_ms());
        if (left < 0)
            left = 0;
        int r = poll(&p, 1, left);
        if (r > 0 && (p.revents & POLLNVAL)) {
            errno = EBADF; /* no stdout at all: an error, not a reader that left */
            return true;
        }
        if (r > 0) {
            errno = 0;
            return (p.revents & (POLLERR | POLLHUP)) != 0;
        }
        if (r == 0 || errno != EINTR)
            return false;
    }
}

/* logs -f: what the process writes, as it writes it, until it has ended and its output is all
 * read (its pipes closed, or nothing more for FOLLOW_QUIET_MS after its end: a child it left
 * may hold them), or until our own reader is gone. Polls: every FOLLOW_MIN_MS while output
 * comes (at once after a reply that brought more than half of what is kept), backing off to
 * FOLLOW_MAX_MS; the polls do not count as activity, so a followed sandbox still goes to sleep
 * when idle, which is said once per sleep. */
#define FOLLOW_MIN_MS 20
#define FOLLOW_MAX_MS 250
#define FOLLOW_QUIET_MS 1000
static int follow_logs(const char *id, long pid)
{
    double out_end = -1, err_end = -1;
    int delay = FOLLOW_MIN_MS;
    int64_t ended_at = -1;
    bool asleep = false;
    for (;;) {
        struct nsbox_err e = {0};
        struct nsbox_request req;
        nsbox_proto_request_init(&req, NSBOX_OP_LOGS);
        req.pid = (int)pid;
        if (out_end >= 0) {
            req.stdout_from = log_offset(out_end);
            req.stderr_from = log_offset(err_end);
        }
        cJSON *reply;
        if (nsbox_client_simple_call(id, &req, &reply, &e) < 0)
            return nsbox_say_fail(&e);
        double o0 = out_end, e0 = err_end;
        if (!reply_number(reply, "stdout_end", &out_end) ||
            !reply_number(reply, "stderr_end", &err_end)) {
            cJSON_Delete(reply);
            nsbox_err_set(&e, NSBOX_E_UNSUPPORTED, ENOTSUP,
                          "sandbox %s was made by an older nsbox, whose supervisor cannot follow "
                          "logs; run nsbox logs without -f",
                          id);
            return nsbox_say_fail(&e);
        }
        if (print_logs(reply, pid, o0 >= 0) < 0) {
            cJSON_Delete(reply);
            return output_failed();
        }
        double got = (out_end - (o0 < 0 ? out_end : o0)) + (err_end - (e0 < 0 ? err_end : e0));
        bool news = out_end != o0 || err_end != e0;
        bool running = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(reply, "running"));
        bool eof = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(reply, "eof"));
        bool lost = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(reply, "truncated"));
        bool sleeping = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(reply, "sleeping"));
        cJSON_Delete(reply);
        if (sleeping && !asleep && running)
            fprintf(stderr, "nsbox: note: sandbox %s is asleep (idle_timeout_seconds): process "
                            "%ld is frozen until a request wakes the sandbox; following on\n",
                    id, pid);
        asleep = sleeping;
        if (!running) {
            int64_t now = nsbox_now_ms();
            if (ended_at < 0 || news)
                ended_at = now;
            if (eof || now - ended_at >= FOLLOW_QUIET_MS)
                return 0;
        }
        delay = lost || got >= 32768 ? 0
                : news               ? FOLLOW_MIN_MS
                : delay * 2 > FOLLOW_MAX_MS ? FOLLOW_MAX_MS
                                            : delay * 2;
        if (reader_gone_within(delay))
            return errno == EBADF ? output_failed() : 0;
    }
}

/* ---- the network log ---------------------------------------------------------------------- */

static int print_line(void *ctx, const char *text, size_t len)
{
    (void)ctx;
    errno = 0;
    if (fwrite(text, 1, len, stdout) != len || putchar('\n') == EOF)
        return -1;
    return 0;
}

/* Whether the sandbox of state directory dir still lives: its lock is held (a lock that was
 * free is let go at once: gc takes it next). */
static bool sandbox_alive(const char *dir)
{
    int fd = nsbox_state_lock(dir);
    if (fd >= 0) {
        close(fd);
        return false;
    }
    return nsbox_state_maybe_alive(errno);
}

static int open_network_log(const char *id, char *dir, size_t n, struct nsbox_egress_reader *r)
{
    struct nsbox_err e = {0};
    char rt[PATH_MAX];
    if (!nsbox_state_valid_id(id)) {
        nsbox_err_set(&e, NSBOX_E_INVALID, EINVAL,
                      "'%s' is not a sandbox id (nsbox ls lists them)", id);
        return nsbox_say_fail(&e);
    }
    if (nsbox_paths_runtime_dir(rt, sizeof rt, &e) < 0)
        return nsbox_say_fail(&e);
    snprintf(dir, n, "%s/%s", rt, id);
    if (nsbox_egress_reader_open(r, dir) == 0)
        return 0;
    int err = errno;
    if (err == ENOENT && access(dir, F_OK) < 0) {
        if (nsbox_state_tombstone_err(id, ENOENT, &e) == 0)
            nsbox_state_not_found(id, ENOENT, &e);
    } else if (err == ENOENT) {
        nsbox_err_set(&e, NSBOX_E_NOTFOUND, ENOENT,
                      "sandbox %s has no network log: only a sandbox whose --network allow= names "
                      "hosts, enforced by name, or that has header bindings has one "
                      "(docs/network.md, \"The network log\")",
                      id);
    } else {
        errno = err;
        nsbox_err_sys(&e, "cannot read the network log of sandbox %s", id);
    }
    return nsbox_say_fail(&e);
}

/* The entries so far; following, the new ones as they come, until the sandbox has ended and
 * its log is read to the end, or our reader is gone. */
static int network_logs(const char *id, bool follow)
{
    char dir[PATH_MAX];
    struct nsbox_egress_reader r;
    int rc = open_network_log(id, dir, sizeof dir, &r);
    if (rc != 0)
        return rc;
    int delay = FOLLOW_MIN_MS;
    for (;;) {
        bool alive = follow && sandbox_alive(dir); /* before the read: nothing comes after */
        int n = nsbox_egress_reader_next(&r, print_line, NULL);
        if (n < 0 || fflush(stdout) != 0) {
            nsbox_egress_reader_close(&r);
            return output_failed();
        }
        if (r.dropped) {
            fprintf(stderr, "nsbox: note: entries of the network log were dropped here: more "
                            "than it keeps (docs/network.md) came between two reads\n");
            r.dropped = false;
        }
        if (!alive)
            break;
        delay = n > 0 ? FOLLOW_MIN_MS : delay * 2 > FOLLOW_MAX_MS ? FOLLOW_MAX_MS : delay * 2;
        if (reader_gone_within(delay)) {
            nsbox_egress_reader_close(&r);
            return errno == EBADF ? output_failed() : 0;
        }
    }
    nsbox_egress_reader_close(&r);
    return 0;
}

int nsbox_cli_logs(int argc, char **argv)
{
    bool follow = false, network = false;
    char *args[2];
    int n = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-f") || !strcmp(argv[i], "--follow"))
            follow = true;
        else if (!strcmp(argv[i], "--network"))
            network = true;
        else if (n < 2)
            args[n++] = argv[i];
        else
            n = 3;
    }
    if (network && n == 1)
        return network_logs(args[0], follow);
    if (network)
        return nsbox_say_usage("%s", "logs --network needs a sandbox id and nothing more: nsbox "
                                     "logs --network [-f] ID");
    if (n != 2)
        return nsbox_say_usage("%s", "logs needs a sandbox id and a pid: nsbox logs [-f] ID PID");
    long pid = nsbox_parse_pid(args[1]);
    if (pid < 0)
        return nsbox_say_pid_usage("logs", args[1], "which has no logs");
    if (follow)
        return follow_logs(args[0], pid);
    struct nsbox_err e = {0};
    struct nsbox_request req;
    nsbox_proto_request_init(&req, NSBOX_OP_LOGS);
    req.pid = (int)pid;
    cJSON *reply;
    if (nsbox_client_simple_call(args[0], &req, &reply, &e) < 0)
        return nsbox_say_fail(&e);
    int r = print_logs(reply, pid, false);
    cJSON_Delete(reply);
    return r < 0 ? output_failed() : 0;
}
