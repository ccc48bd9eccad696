/* `nsbox pool fill|drain|ls`: the warm pool of sandboxes made ahead (docs/pool.md). */
#include "cleanup.h"
#include "cleanup_cjson.h"
#include "cli.h"
#include "options.h"
#include "pool.h"
#include "say.h"
#include "spec.h"
#include "util.h"
#include "warmpool.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* pool ls [--json]: one "ID KEY" line each (json: an array of objects), then the fills that
 * failed on stderr. */
static int pool_ls(bool json)
{
    struct nsbox_err e = {0};
    if (!json)
        printf("%-12s  %s\n", "ID", "KEY");
    struct nsbox_pool_entry *v;
    size_t n;
    if (nsbox_warmpool_list(&v, &n, &e) < 0)
        return nsbox_say_fail(&e);
    if (json) {
        cleanup_cjson cJSON *all = cJSON_CreateArray();
        for (size_t i = 0; i < n; i++) {
            cJSON *o = cJSON_CreateObject();
            cJSON_AddStringToObject(o, "id", v[i].id);
            cJSON_AddStringToObject(o, "key", v[i].key);
            cJSON_AddItemToArray(all, o);
        }
        cleanup_free char *t = cJSON_PrintUnformatted(all);
        printf("%s\n", t ? t : "[]");
    } else {
        for (size_t i = 0; i < n; i++)
            printf("%-12s  %s\n", v[i].id, v[i].key);
    }
    free(v);
    nsbox_warmpool_set_note(nsbox_say_note, stderr);
    nsbox_warmpool_report_failures();
    return 0;
}

/* nsbox pool fill [--size N] [OPTIONS] | drain | ls [--json] */
int nsbox_cli_pool(int argc, char **argv)
{
    struct nsbox_err e = {0};
    const char *sub = argc > 1 ? argv[1] : "";
    if (!strcmp(sub, "drain") && argc == 2) {
        int n = nsbox_warmpool_drain(&e);
        if (n < 0)
            return nsbox_say_fail(&e);
        printf("deleted %d pooled sandbox%s\n", n, n == 1 ? "" : "es");
        return 0;
    }
    if (!strcmp(sub, "ls") && (argc == 2 || (argc == 3 && !strcmp(argv[2], "--json"))))
        return pool_ls(argc == 3);
    if (strcmp(sub, "fill") != 0)
        return nsbox_say_usage("%s", "usage: nsbox pool fill [--size N] [OPTIONS] | drain | "
                                     "ls [--json]");
    long size = 0, since_ns = 0;
    bool refill = false; /* internal: a used pooled sandbox's replacement */
    const struct nsbox_own_flag own[] = {
        {"--refill", &refill, NULL, 0, 0, NULL},
        /* internal: started by a run at this time (ns), which a later drain stops */
        {"--after-run", NULL, &since_ns, 1, LONG_MAX, "a time in nanoseconds"},
        {"--size", NULL, &size, 1, NSBOX_POOL_MAX_SIZE, "a number from 1 to 16"},
    };
    argc--, argv++; /* argv[0] is "fill" now */
    for (int k = 1; k < argc && strcmp(argv[k], "--") != 0; k++) {
        static const char *const no[] = {"--ttl", "--idle-timeout", "-e", "--env"};
        for (size_t j = 0; j < NSBOX_ARRAY_LEN(no); j++) {
            size_t n = strlen(no[j]);
            if (!strncmp(argv[k], no[j], n) && (!argv[k][n] || argv[k][n] == '='))
                return nsbox_say_usage("pool fill: %s does not apply to pooled sandboxes (they "
                                       "live the pool's ttl_seconds and never sleep; a run "
                                       "brings its own -e; docs/pool.md)",
                                       no[j]);
        }
    }
    if (nsbox_options_strip_own(&argc, argv, own, NSBOX_ARRAY_LEN(own)) != 0)
        return EXIT_USAGE;
    struct nsbox_spec spec;
    nsbox_spec_init(&spec);
    int rc = nsbox_options_parse_no_command(argc, argv, &spec, "pool fill", "");
    if (rc >= 0)
        return rc;
    unsigned ready = 0;
    if (nsbox_spec_validate(&spec, &e) < 0 ||
        nsbox_warmpool_fill(&spec, (unsigned)size, refill, since_ns, &ready, &e) < 0) {
        nsbox_spec_free(&spec);
        return nsbox_say_fail(&e);
    }
    nsbox_spec_free(&spec);
    printf("%u pooled sandbox%s ready\n", ready, ready == 1 ? "" : "es");
    return 0;
}
