/* `nsbox kill ID PID [SIG]`: a signal to a background process (exec -d). */
#define _GNU_SOURCE
#include "cli.h"
#include "client.h"
#include "say.h"
#include "util.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* "9", "KILL", "SIGKILL", "sigkill"; -1 when it is none of these. */
static int parse_signal(const char *s)
{
    char *end;
    long n = strtol(s, &end, 10);
    if (*s && !*end)
        return n >= 1 && n <= 64 ? (int)n : -1;
    if (!strncasecmp(s, "SIG", 3))
        s += 3;
    for (int sig = 1; sig < 32; sig++) {
        const char *name = sigabbrev_np(sig);
        if (name && !strcasecmp(name, s))
            return sig;
    }
    return -1;
}

int nsbox_cli_kill(int argc, char **argv)
{
    if (argc < 3 || argc > 4)
        return nsbox_say_usage("%s", "kill needs a sandbox id, a pid and optionally a signal "
                                     "(number or name)");
    long pid = nsbox_parse_pid(argv[2]);
    if (pid < 0)
        return nsbox_say_pid_usage("kill", argv[2],
                                   "which ends only with the sandbox (nsbox rm ID)");
    int sig = argc == 4 ? parse_signal(argv[3]) : SIGTERM;
    if (sig < 0)
        return nsbox_say_usage("%s", "kill: not a signal (a number 1-64, or a name: TERM, "
                                     "SIGKILL, ...)");
    struct nsbox_err e = {0};
    struct nsbox_request req;
    nsbox_proto_request_init(&req, NSBOX_OP_KILL);
    req.pid = (int)pid;
    req.sig = sig;
    cJSON *reply;
    if (nsbox_client_simple_call(argv[1], &req, &reply, &e) < 0)
        return nsbox_say_fail(&e);
    cJSON_Delete(reply);
    return 0;
}
