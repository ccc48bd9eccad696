/* `nsbox inspect ID` and `nsbox ls`, which inspects every sandbox: what their supervisors
 * say of them, as JSON or (ls) a table. */
#define _GNU_SOURCE
#include "cli.h"
#include "client.h"
#include "gc.h"
#include "paths.h"
#include "say.h"
#include "state.h"

#include <dirent.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>


/* What inspect and ls print of a reply: the sandbox, without the protocol's envelope. */
static cJSON *unwrapped(cJSON *reply)
{
    cJSON_DeleteItemFromObjectCaseSensitive(reply, "ok");
    cJSON_DeleteItemFromObjectCaseSensitive(reply, "v");
    return reply;
}

int nsbox_cli_inspect(int argc, char **argv)
{
    if (argc != 2)
        return nsbox_say_usage("%s", "inspect needs one sandbox id");
    struct nsbox_err e = {0};
    cJSON *reply;
    struct nsbox_request req;
    nsbox_proto_request_init(&req, NSBOX_OP_INSPECT);
    if (nsbox_client_simple_call(argv[1], &req, &reply, &e) < 0)
        return nsbox_say_fail(&e);
    char *s = cJSON_Print(unwrapped(reply));
    printf("%s\n", s ? s : "{}");
    free(s);
    cJSON_Delete(reply);
    return 0;
}

int nsbox_cli_ls(int argc, char **argv)
{
    /* -q: the ids alone, one a line, for `nsbox rm $(nsbox ls -q)`, as docker ps -q; -a: the
     * warm pool's waiting sandboxes too, which are nsbox's own, not the user's (docs/pool.md) */
    bool json = false, quiet = false, with_pool = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--json") && !json)
            json = true;
        else if ((!strcmp(a, "-q") || !strcmp(a, "--quiet")) && !quiet)
            quiet = true;
        else if ((!strcmp(a, "-a") || !strcmp(a, "--all")) && !with_pool)
            with_pool = true;
        else if ((!strcmp(a, "-aq") || !strcmp(a, "-qa")) && !with_pool && !quiet)
            with_pool = quiet = true;
        else /* an unknown word is refused, never read as no option (a typo of --json) */
            return nsbox_say_usage("ls takes no argument but --json, -q or -a, not '%s' "
                                   "(nsbox ls [-a] [--json | -q])",
                                   a);
    }
    if (json && quiet)
        return nsbox_say_usage("%s", "ls: --json or -q, not both (nsbox ls [-a] [--json | -q])");
    struct nsbox_err e = {0};
    nsbox_gc(false, &e);
    char rt[PATH_MAX];
    if (nsbox_paths_runtime_dir(rt, sizeof rt, &e) < 0)
        return nsbox_say_fail(&e);
    cJSON *all = cJSON_CreateArray();
    DIR *d = opendir(rt);
    struct dirent *de;
    while (d && (de = readdir(d))) {
        if (!nsbox_state_valid_id(de->d_name))
            continue;
        char ctl[PATH_MAX];
        struct stat st;
        snprintf(ctl, sizeof ctl, "%s/%s/ctl", rt, de->d_name);
        if (stat(ctl, &st) < 0)
            continue; /* a one-shot sandbox, or one still starting */
        /* One stuck supervisor must not hide the others: after 10 s it is listed as such. */
        struct nsbox_request req;
        nsbox_proto_request_init(&req, NSBOX_OP_INSPECT);
        cJSON *reply;
        int r = nsbox_client_call_within(de->d_name, &req, 10, &reply, &e);
        if (r == 0 && nsbox_client_reply_error(reply, &e) == 0) {
            cJSON *one = unwrapped(reply);
            const cJSON *state = cJSON_GetObjectItemCaseSensitive(one, "state");
            if (!with_pool && cJSON_IsString(state) && !strcmp(state->valuestring, "pooled")) {
                cJSON_Delete(one);
                continue;
            }
            /* listed by its directory's name whatever its supervisor answered */
            if (!cJSON_IsString(cJSON_GetObjectItemCaseSensitive(one, "id"))) {
                cJSON_DeleteItemFromObjectCaseSensitive(one, "id");
                cJSON_AddStringToObject(one, "id", de->d_name);
            }
            cJSON_AddItemToArray(all, one);
            continue;
        }
        cJSON_Delete(reply);
        if (e.code != NSBOX_E_TIMEOUT && e.code != NSBOX_E_BUSY)
            continue; /* gone meanwhile */
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "id", de->d_name);
        cJSON_AddStringToObject(o, "state", e.code == NSBOX_E_BUSY ? "busy" : "stuck");
        cJSON_AddStringToObject(o, "error", e.msg);
        cJSON_AddItemToArray(all, o);
    }
    if (d)
        closedir(d);
    if (json) {
        char *s = cJSON_PrintUnformatted(all);
        printf("%s\n", s ? s : "[]");
        free(s);
    } else if (quiet) {
        const cJSON *it;
        cJSON_ArrayForEach(it, all)
        {
            const cJSON *err = cJSON_GetObjectItemCaseSensitive(it, "error");
            if (cJSON_IsString(err))
                fprintf(stderr, "nsbox: %s\n", err->valuestring);
            printf("%s\n", cJSON_GetObjectItemCaseSensitive(it, "id")->valuestring);
        }
    } else {
        printf("%-12s  %-8s  %-8s  %-20s  %s\n", "ID", "STATE", "TYPE", "CREATED", "EXPIRES");
        const cJSON *it;
        cJSON_ArrayForEach(it, all)
        {
            const cJSON *spec = cJSON_GetObjectItemCaseSensitive(it, "spec");
            const cJSON *type = cJSON_GetObjectItemCaseSensitive(spec, "instance_type");
            char created[32] = "-", expires[32] = "-";
            const cJSON *cj = cJSON_GetObjectItemCaseSensitive(it, "created");
            const cJSON *xj = cJSON_GetObjectItemCaseSensitive(it, "expires");
            struct tm tm;
            time_t c = cJSON_IsNumber(cj) ? (time_t)cj->valuedouble : 0;
            time_t x = cJSON_IsNumber(xj) ? (time_t)xj->valuedouble : 0;
            if (c)
                strftime(created, sizeof created, "%Y-%m-%d %H:%M:%S", localtime_r(&c, &tm));
            if (x)
                strftime(expires, sizeof expires, "%Y-%m-%d %H:%M:%S", localtime_r(&x, &tm));
            const cJSON *err = cJSON_GetObjectItemCaseSensitive(it, "error");
            if (cJSON_IsString(err))
                fprintf(stderr, "nsbox: %s\n", err->valuestring);
            const cJSON *state = cJSON_GetObjectItemCaseSensitive(it, "state");
            printf("%-12s  %-8s  %-8s  %-20s  %s\n",
                   cJSON_GetObjectItemCaseSensitive(it, "id")->valuestring,
                   cJSON_IsString(state) ? state->valuestring : "?",
                   cJSON_IsString(type) ? type->valuestring : "?", created, expires);
        }
    }
    cJSON_Delete(all);
    return 0;
}
