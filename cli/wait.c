/* `nsbox wait [--timeout S] ID PID`: until a background process ends; its exit code is ours. */
#define _GNU_SOURCE
#include "cleanup.h"
#include "cli.h"
#include "client.h"
#include "connect.h"
#include "say.h"
#include "util.h"

#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int still_running(long pid, const char *seconds)
{
    fprintf(stderr, "nsbox: process %ld is still running after %s s (it runs on)\n", pid,
            seconds);
    return EXIT_TIMEOUT;
}

/* wait against the supervisor of an older nsbox, which has no wait op (a sandbox outlives an
 * upgrade): ask ps every 50 ms, as the Python client does. */
static int wait_by_polling(const char *id, long pid, int64_t deadline, const char *seconds)
{
    for (;;) {
        struct nsbox_err e = {0};
        cJSON *reply;
        struct nsbox_request req;
        nsbox_proto_request_init(&req, NSBOX_OP_PS);
        if (nsbox_client_simple_call(id, &req, &reply, &e) < 0)
            return nsbox_say_fail(&e);
        const cJSON *it, *found = NULL;
        cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(reply, "processes"))
        {
            const cJSON *p = cJSON_GetObjectItemCaseSensitive(it, "pid");
            if (cJSON_IsNumber(p) && p->valuedouble == (double)pid)
                found = it; /* after pid reuse, ps cannot tell which is ours (no order) */
        }
        int rc = -1;
        if (!found) {
            nsbox_err_set(&e, NSBOX_E_NOTFOUND, ESRCH, "no background process %ld", pid);
            rc = nsbox_say_fail(&e);
        } else if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(found, "running"))) {
            const cJSON *code = cJSON_GetObjectItemCaseSensitive(found, "exit_code");
            rc = cJSON_IsNumber(code) ? code->valueint : EXIT_NSBOX;
        }
        cJSON_Delete(reply);
        if (rc >= 0)
            return rc;
        if (deadline >= 0 && nsbox_now_ms() >= deadline)
            return still_running(pid, seconds);
        usleep(50 * 1000);
    }
}

/* nsbox wait [--timeout S] ID PID: until a background process (exec -d) ends; its exit code
 * is ours. After S seconds without its end: 124, and the process runs on. */
int nsbox_cli_wait(int argc, char **argv)
{
    int i = 1, timeout_ms = -1;
    if (i + 1 < argc && !strcmp(argv[i], "--timeout")) {
        uint64_t ms;
        if (nsbox_parse_seconds(argv[i + 1], 24 * 86400, &ms) < 0) /* poll's int: < 24.8 days */
            return nsbox_say_usage("%s",
                                   "wait: --timeout needs a number of seconds (at most 24 days)");
        /* at least 50 ms: time for the answer about a process that has already ended */
        timeout_ms = ms < 50 ? 50 : (int)ms;
        i += 2;
    }
    if (argc - i != 2)
        return nsbox_say_usage("%s", "wait needs a sandbox id and a pid: nsbox wait [--timeout S] "
                                     "ID PID");
    const char *id = argv[i];
    long pid = nsbox_parse_pid(argv[i + 1]);
    if (pid < 0)
        return nsbox_say_pid_usage("wait", argv[i + 1], "which ends only with the sandbox");
    struct nsbox_err e = {0};
    cleanup_close int sock = nsbox_connect_ctl(id, &e);
    if (sock < 0)
        return nsbox_say_fail(&e);
    struct nsbox_request req;
    nsbox_proto_request_init(&req, NSBOX_OP_WAIT);
    req.pid = (int)pid;
    cJSON *reply = NULL;
    if (nsbox_client_send(sock, &req, NULL, 0, &e) < 0)
        return nsbox_say_fail(&e);
    struct pollfd pf = {sock, POLLIN, 0};
    int64_t deadline = timeout_ms < 0 ? -1 : nsbox_now_ms() + timeout_ms;
    for (;;) {
        int left = deadline < 0 ? -1 : (int)(deadline - nsbox_now_ms());
        if (deadline >= 0 && left < 0)
            left = 0;
        int n = poll(&pf, 1, left);
        if (n > 0)
            break;
        if (n == 0)
            return still_running(pid, argv[2]);
        if (errno != EINTR) {
            nsbox_err_sys(&e, "wait: poll");
            return nsbox_say_fail(&e);
        }
    }
    if (nsbox_client_recv(sock, &reply, NULL, &e) < 0 || nsbox_client_reply_error(reply, &e) < 0) {
        cJSON_Delete(reply);
        /* an older supervisor, or one with as many waits as it takes: ps, which it answers */
        if ((e.code == NSBOX_E_INVALID && strstr(e.msg, "unknown op")) || e.code == NSBOX_E_BUSY)
            return wait_by_polling(id, pid, deadline, timeout_ms < 0 ? NULL : argv[2]);
        /* the sandbox deleted during the wait (its ttl, an rm) says why, as exec does */
        return nsbox_say_fail(nsbox_client_lost(id, &e));
    }
    /* its exit code, and why when nsbox ended it (its --timeout, the OOM killer), as exec
     * says: a 124 or 137 of the process's own has no such line */
    return nsbox_say_exit(reply);
}
