/* nsbox-oci list: the containers under --root, as runc's list prints them (a table, or its
 * JSON: each container's state, as `state` prints it). A state directory that cannot be read
 * is named on stderr and the others are listed all the same. */
#include "ocirt.h"
#include "cleanup.h"
#include "cleanup_cjson.h"
#include "grow.h"
#include "shown.h"
#include "util.h"

#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum list_format { LIST_TABLE, LIST_JSON, LIST_QUIET };

static int parse_args(int argc, char **argv, enum list_format *f, struct nsbox_err *e)
{
    static const struct option opts[] = {
        {"format", required_argument, NULL, 'f'},
        {"quiet", no_argument, NULL, 'q'},
        {NULL, 0, NULL, 0},
    };
    bool quiet = false;
    int o;
    optind = 1;
    *f = LIST_TABLE;
    while ((o = getopt_long(argc, argv, "+f:q", opts, NULL)) != -1) {
        if (o == 'q')
            quiet = true;
        else if (o == 'f' && !strcmp(optarg, "json"))
            *f = LIST_JSON;
        else if (o == 'f' && !strcmp(optarg, "table"))
            *f = LIST_TABLE;
        else if (o == 'f')
            return nsbox_err_invalid(e, "list: --format is table or json, not '%s'",
                                     NSBOX_SHOW(optarg));
        else
            return nsbox_err_invalid(e, "list: unknown option (see nsbox-oci list --help)");
    }
    if (optind != argc)
        return nsbox_err_invalid(e, "list: takes no arguments ('%s')", NSBOX_SHOW(argv[optind]));
    if (quiet)
        *f = LIST_QUIET;
    return 0;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The ids under --root, sorted (as runc lists them): malloc'd, *n of them; NULL with e set,
 * or with *n 0 when the root does not exist yet (no container was ever made). */
static char **read_ids(const struct nsbox_ocirt *g, size_t *n, struct nsbox_err *e)
{
    *n = 0;
    DIR *d = opendir(g->root);
    if (!d) {
        if (errno != ENOENT)
            nsbox_err_sys(e, "list: open --root %s", g->root);
        return NULL;
    }
    char **ids = NULL;
    size_t cap = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (!nsbox_ocistate_id_valid(de->d_name))
            continue; /* ".", "..", and nothing create makes */
        if (nsbox_grow(&ids, &cap, *n, sizeof *ids, 16, 0) < 0 || !(ids[*n] = strdup(de->d_name)))
            break;
        (*n)++;
    }
    if (de)
        fprintf(stderr, "nsbox-oci: list: out of memory: the list is cut short\n");
    closedir(d);
    if (*n)
        qsort(ids, *n, sizeof *ids, by_name);
    return ids;
}

/* One container's state as `state` prints it, or NULL with the reason on stderr. */
static cJSON *one_state(const struct nsbox_ocirt *g, const char *id)
{
    struct nsbox_err e = {0};
    struct nsbox_ocistate s;
    cleanup_free char *text = NULL;
    if (nsbox_ocistate_read(g, id, &s, &e) == 0)
        text = nsbox_ocistate_json(g, &s, nsbox_ocistate_status(g, &s), false, &e);
    cJSON *j = text ? cJSON_Parse(text) : NULL;
    if (!j && e.code == NSBOX_E_NOTFOUND)
        snprintf(e.msg, sizeof e.msg,
                 "%s/%s has no state.json: a container being created or "
                 "deleted, or a directory that is not nsbox-oci's",
                 g->root, id);
    if (!j)
        nsbox_ocilog_say(NULL, NSBOX_OCILOG_STDERR, "error", "list: skipping %s: %s", id,
                         e.msg[0] ? e.msg : "out of memory");
    return j;
}

/* A cell of the table: the state's number (pid), or its string field shown by the rule of every
 * message (policy/shown.h), as the bundle's path is the caller's text and reaches a terminal. */
static void cell(const cJSON *j, const char *name, char *out, size_t n)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, name);
    const char *text = cJSON_IsString(v) ? v->valuestring : "";
    if (cJSON_IsNumber(v))
        snprintf(out, n, "%d", v->valueint);
    else
        nsbox_shown_copy(out, n, text, strlen(text), SIZE_MAX, 0);
}

/* runc's table: columns as wide as their widest cell and 3 spaces, at least 12 (its
 * tabwriter's), the last as it is. */
static void print_table(const cJSON *all)
{
    static const char *const keys[] = {"id", "pid", "status", "bundle", "created", "owner"};
    static const char *const heads[] = {"ID", "PID", "STATUS", "BUNDLE", "CREATED", "OWNER"};
    int width[NSBOX_ARRAY_LEN(keys)];
    char text[PATH_MAX];
    for (size_t k = 0; k < NSBOX_ARRAY_LEN(keys); k++) {
        size_t w = strlen(heads[k]);
        const cJSON *j;
        cJSON_ArrayForEach(j, all)
        {
            cell(j, keys[k], text, sizeof text);
            w = strlen(text) > w ? strlen(text) : w;
        }
        width[k] = w + 3 < 12 ? 12 : (int)(w + 3);
    }
    for (const cJSON *j = NULL;; j = j ? j->next : all->child) {
        for (size_t k = 0; k < NSBOX_ARRAY_LEN(keys); k++) {
            if (j)
                cell(j, keys[k], text, sizeof text);
            else /* the header first */
                snprintf(text, sizeof text, "%s", heads[k]);
            if (k + 1 < NSBOX_ARRAY_LEN(keys))
                printf("%-*s", width[k], text);
            else
                printf("%s\n", text);
        }
        if (j ? !j->next : !all->child)
            break;
    }
}

int nsbox_ocilist_list(const struct nsbox_ocirt *g, int argc, char **argv, struct nsbox_err *e)
{
    enum list_format f;
    size_t n = 0;
    if (parse_args(argc, argv, &f, e) < 0)
        return 1;
    char **ids = read_ids(g, &n, e);
    if (!ids && e->msg[0])
        return 1;
    cleanup_cjson cJSON *all = cJSON_CreateArray();
    for (size_t i = 0; i < n; i++) {
        cJSON *j = all ? one_state(g, ids[i]) : NULL;
        if (j && !cJSON_AddItemToArray(all, j))
            cJSON_Delete(j);
        free(ids[i]);
    }
    free(ids);
    cleanup_free char *text = all && f == LIST_JSON ? cJSON_PrintUnformatted(all) : NULL;
    if (!all || (f == LIST_JSON && !text)) {
        nsbox_err_set(e, NSBOX_E_NOMEM, ENOMEM, "out of memory");
        return 1;
    }
    if (f == LIST_JSON) {
        printf("%s\n", text);
    } else if (f == LIST_TABLE) {
        print_table(all);
    } else {
        const cJSON *j;
        cJSON_ArrayForEach(j, all)
        {
            char id[NSBOX_OCI_ID_MAX + 1];
            cell(j, "id", id, sizeof id);
            printf("%s\n", id);
        }
    }
    return 0;
}
