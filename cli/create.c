/* `nsbox create`: a persistent sandbox, whose id is printed (with --json, as JSON) once it is
 * ready. */
#define _GNU_SOURCE
#include "cleanup.h"
#include "cli.h"
#include "diagnose.h"
#include "gc.h"
#include "image.h"
#include "oci_lookup.h"
#include "oci_store.h"
#include "options.h"
#include "paths.h"
#include "proto.h"
#include "say.h"
#include "supervisor.h"
#include "util.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* What follows the id with --json: "\",\"runtime_dir\":\"...\"}\n", as cJSON prints it (ids need
 * no escaping). NULL with e filled. */
static char *json_after_id(struct nsbox_err *e)
{
    char rt[PATH_MAX], *after = NULL;
    if (nsbox_paths_runtime_dir(rt, sizeof rt, e) < 0)
        rt[0] = '\0';
    cJSON *s = cJSON_CreateString(rt);
    char *quoted = s ? cJSON_PrintUnformatted(s) : NULL;
    cJSON_Delete(s);
    if (!quoted || asprintf(&after, "\",\"runtime_dir\":%s}\n", quoted) < 0) {
        free(quoted);
        nsbox_err_set(e, NSBOX_E_SYS, ENOMEM, "create: out of memory");
        return NULL;
    }
    free(quoted);
    return after;
}

/* With --json, a failure is machine-readable too: clients map the code to their typed errors. */
static void print_json_error(const struct nsbox_err *e)
{
    cJSON *o = cJSON_CreateObject(), *er = cJSON_AddObjectToObject(o, "error");
    cJSON_AddStringToObject(er, "code", nsbox_proto_errcode_wire(e->code));
    cJSON_AddStringToObject(er, "message", e->msg);
    char *t = cJSON_PrintUnformatted(o);
    printf("%s\n", t ? t : "{}");
    free(t);
    cJSON_Delete(o);
}

/* An image reference is resolved here, before the supervisor is forked, and pulled as the
 * spec's pull says (not stored, or always): the supervisor has no terminal, and a large image
 * takes minutes (a create that looks hung). On a terminal the pull is said, as run says it; on
 * a pipe nothing is. The supervisor is handed the stored image (name) and pulls nothing. name
 * "": no reference. */
static int resolve_image(const struct nsbox_spec *s, char *name, size_t n, struct nsbox_err *e)
{
    name[0] = '\0';
    if (!nsbox_oci_lookup_is_ref(s->image))
        return 0;
    /* Root without CAP_SYS_ADMIN is refused by nsbox_sandbox_prepare, for every caller (the
     * supervisor this create forks, the pool's, run, nsbox-oci); said here too only because
     * this pull comes before that supervisor, and nothing may be pulled for a sandbox that
     * cannot be made. */
    if (nsbox_diagnose_root_caps(e) < 0)
        return -1;
    if (isatty(STDERR_FILENO))
        nsbox_image_set_note(nsbox_say_note, stderr);
    return nsbox_oci_store_resolve(s->image, s->pull, name, n, e);
}

int nsbox_cli_create(int argc, char **argv)
{
    struct nsbox_spec spec;
    nsbox_spec_init(&spec);
    struct nsbox_err e = {0};
    bool json = false;
    long owner_pid = 0;
    const struct nsbox_own_flag own[] = {
        {"--json", &json, NULL, 0, 0, NULL},
        {"--owner-pid", NULL, &owner_pid, 1, 4194304, "a process id"},
    };
    if (nsbox_options_strip_own(&argc, argv, own, NSBOX_ARRAY_LEN(own)) != 0) {
        nsbox_spec_free(&spec);
        return EXIT_USAGE;
    }
    int rc = nsbox_options_parse_no_command(argc, argv, &spec, "create", "; use nsbox exec");
    if (rc >= 0)
        return rc;
    /* The id is the only handle on the sandbox: with nowhere to print it, nobody could use or
     * remove the sandbox. (A closed descriptor 1 would also be taken by the first file nsbox
     * opens, and the id written there.) */
    if (fcntl(STDOUT_FILENO, F_GETFD) < 0) {
        nsbox_spec_free(&spec);
        nsbox_err_set(&e, NSBOX_E_INVALID, EBADF,
                      "create: stdout is closed, so the new sandbox's id could not be given; "
                      "nothing was created");
        return nsbox_say_fail(&e);
    }
    /* What goes around the id on stdout: the supervisor writes it there itself, and that
     * write is the moment the sandbox is given (nsbox_session_create). */
    /* With --json, {"id":"ID","runtime_dir":"..."} as cJSON prints it (ids need no escaping). */
    char *after = NULL;
    if (json && !(after = json_after_id(&e))) {
        nsbox_spec_free(&spec);
        return nsbox_say_fail(&e);
    }
    char id[NSBOX_ID_LEN + 1];
    int signo = 0;
    const struct nsbox_id_out out = {STDOUT_FILENO, json ? "{\"id\":\"" : "",
                                     json ? after : "\n", &signo};
    struct nsbox_err ge;
    nsbox_gc_implicit(&ge); /* at most once a second: it visits every sandbox */
    char image[64];
    /* a --workspace of root's, fs.file-max raised or not raisable */
    nsbox_session_set_note(nsbox_say_note, stderr);
    int r = nsbox_spec_validate(&spec, &e) < 0 ||
                    resolve_image(&spec, image, sizeof image, &e) < 0 ||
                    nsbox_session_create(&spec, image[0] ? image : NULL, (int)owner_pid, NULL, id,
                                         &out, &e) < 0
                ? -1
                : 0;
    nsbox_spec_free(&spec);
    free(after);
    if (r == 0)
        return 0;
    if (json)
        print_json_error(&e);
    int code = nsbox_say_fail(&e);
    if (signo) {
        /* Ended by the signal, as the caller expects of an interrupted command (a shell's
         * loop stops on it), now that nothing of the sandbox is left. */
        fflush(stdout);
        signal(signo, SIG_DFL);
        raise(signo);
    }
    return code;
}
