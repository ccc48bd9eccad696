/* `nsbox ps ID`: a sandbox's background processes (exec -d). */
#include "cli.h"
#include "client.h"
#include "say.h"

#include <stdio.h>

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
        /* one line per process: control characters of the command (a script's newlines) are
         * shown escaped, and a long command is cut */
        const char *cmd = cJSON_GetObjectItemCaseSensitive(it, "cmd")->valuestring;
        char shown[200];
        size_t k = 0;
        const unsigned char *c = (const unsigned char *)cmd;
        for (; *c && k + 5 < sizeof shown; c++) {
            if (*c == '\n')
                shown[k++] = '\\', shown[k++] = 'n';
            else if (*c < 0x20 || *c == 0x7f)
                k += (size_t)snprintf(shown + k, sizeof shown - k, "\\x%02x", *c);
            else
                shown[k++] = (char)*c;
        }
        shown[k] = '\0';
        printf("%-8d  %-8s  %s%s\n", cJSON_GetObjectItemCaseSensitive(it, "pid")->valueint,
               status, shown, *c ? "..." : "");
    }
    cJSON_Delete(reply);
    return 0;
}
