/* `nsbox ps ID`: a sandbox's background processes (exec -d). */
#include "cli.h"
#include "client.h"
#include "say.h"
#include "shown.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

int nsbox_cli_ps(int argc, char **argv)
{
    if (argc != 2)
        return nsbox_say_usage("%s", "ps needs one sandbox id");
    struct nsbox_err e = {0};
    cJSON *reply;
    struct nsbox_request req;
    nsbox_proto_request_init(&req, NSBOX_OP_PS);
    if (nsbox_client_simple_call(argv[1], &req, &reply, &e) < 0)
        return nsbox_say_fail(&e);
    printf("%-8s  %-8s  %s\n", "PID", "STATUS", "COMMAND");
    const cJSON *it;
    cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(reply, "processes"))
    {
        char status[32] = "running";
        if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(it, "running")))
            snprintf(status, sizeof status, "exit %d",
                     cJSON_GetObjectItemCaseSensitive(it, "exit_code")->valueint);
        /* one line per process, shown by the rule of every message (policy/shown.h): a
         * script's newlines as "\n", other controls, C1's too, and invalid UTF-8 as '?'; a long
         * command cut between characters, with "..." */
        const char *cmd = cJSON_GetObjectItemCaseSensitive(it, "cmd")->valuestring;
        char shown[200];
        nsbox_shown_copy(shown, sizeof shown, cmd, strlen(cmd), SIZE_MAX, NSBOX_SHOWN_NEWLINE);
        printf("%-8d  %-8s  ", cJSON_GetObjectItemCaseSensitive(it, "pid")->valueint, status);
        for (const char *p = shown; *p; p++)
            if (*p == '\n')
                fputs("\\n", stdout);
            else
                putchar(*p);
        putchar('\n');
    }
    cJSON_Delete(reply);
    return 0;
}
