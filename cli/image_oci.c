/* `nsbox image pull|import|inspect|tag|prune`, and the OCI side of `image ls` and `image rm`:
 * argument parsing and printing over rootfs/oci_store.c. */
#include "image_oci.h"
#include "image.h"
#include "cleanup.h"
#include "cli.h"
#include "oci_store.h"
#include "ociref.h"
#include "say.h"
#include "shown.h"
#include "spec.h"

#include <cjson/cJSON.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Progress (skopeo's and the layers') only on a terminal: on a pipe only the result. */
static bool progress_wanted(bool quiet)
{
    return !quiet && isatty(STDERR_FILENO);
}

/* The result on stdout: a line, or with --json an object (name, ref, digest, existed); with
 * progress, on stderr, that nothing was unpacked. */
static int report(const struct nsbox_oci_imported *im, bool json, bool progress)
{
    if (json) {
        cJSON *o = cJSON_CreateObject();
        if (!o || !cJSON_AddStringToObject(o, "name", im->name) ||
            !cJSON_AddStringToObject(o, "ref", im->ref) ||
            !cJSON_AddStringToObject(o, "digest", im->digest) ||
            !cJSON_AddBoolToObject(o, "existed", im->existed)) {
            cJSON_Delete(o);
            fprintf(stderr, "nsbox: out of memory\n");
            return EXIT_NSBOX;
        }
        char *text = cJSON_PrintUnformatted(o);
        cJSON_Delete(o);
        if (!text) {
            fprintf(stderr, "nsbox: out of memory\n");
            return EXIT_NSBOX;
        }
        printf("%s\n", text);
        free(text);
        return 0;
    }
    printf("%s%s%s%s\n", im->ref[0] ? im->ref : im->name, im->ref[0] ? " (" : "",
           im->ref[0] ? im->name : "", im->ref[0] ? ")" : "");
    if (im->existed && progress)
        fprintf(stderr, "nsbox: image %s was in the store already: its layers were not unpacked "
                        "again\n",
                im->name);
    return 0;
}


static int cmd_pull(int argc, char **argv)
{
    const char *ref = NULL;
    bool quiet = false, tls_verify = true, json = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-q") || !strcmp(argv[i], "--quiet"))
            quiet = true;
        else if (!strcmp(argv[i], "--json"))
            json = true;
        else if (!strcmp(argv[i], "--tls-verify=false"))
            tls_verify = false;
        else if (!strcmp(argv[i], "--tls-verify=true") || !strcmp(argv[i], "--tls-verify"))
            tls_verify = true; /* skopeo's and podman's spellings, e.g. --tls-verify=$VERIFY */
        else if (argv[i][0] == '-')
            return nsbox_say_usage("image: unknown option '%s' for pull", argv[i]);
        else if (ref)
            return nsbox_say_usage("image: pull takes one reference, got also '%s'", argv[i]);
        else
            ref = argv[i];
    }
    if (!ref)
        return nsbox_say_usage("%s", "image: pull needs a reference (e.g. python:3.12)");
    struct nsbox_err e = {0};
    struct nsbox_oci_imported im;
    nsbox_image_set_note(nsbox_say_note, stderr);
    if (nsbox_oci_pull(ref, progress_wanted(quiet), tls_verify, &im, &e) < 0)
        return nsbox_say_fail(&e);
    return report(&im, json, progress_wanted(quiet));
}

static int cmd_import(int argc, char **argv)
{
    const char *src = NULL, *name = NULL;
    bool quiet = false, json = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-q") || !strcmp(argv[i], "--quiet"))
            quiet = true;
        else if (!strcmp(argv[i], "--json"))
            json = true;
        else if (!strcmp(argv[i], "--name") || !strcmp(argv[i], "-t")) {
            if (i + 1 >= argc)
                return nsbox_say_usage("image: %s needs a reference", argv[i]);
            name = argv[++i];
        } else if (argv[i][0] == '-' && argv[i][1])
            return nsbox_say_usage("image: unknown option '%s' for import", argv[i]);
        else if (src)
            return nsbox_say_usage("image: import takes one file or directory, got also '%s'",
                                   argv[i]);
        else
            src = argv[i];
    }
    if (!src)
        return nsbox_say_usage(
            "%s", "image: import needs FILE (docker save or OCI archive), DIR (OCI layout) or -");
    struct nsbox_err e = {0};
    struct nsbox_oci_imported im;
    nsbox_image_set_note(nsbox_say_note, stderr);
    if (nsbox_oci_store_import(src, name, progress_wanted(quiet), &im, &e) < 0)
        return nsbox_say_fail(&e);
    return report(&im, json, progress_wanted(quiet));
}

static int cmd_tag(int argc, char **argv)
{
    if (argc != 3)
        return nsbox_say_usage("%s", "image: tag takes SOURCE TARGET");
    struct nsbox_err e = {0};
    if (nsbox_oci_store_tag(argv[1], argv[2], &e) < 0)
        return nsbox_say_fail(&e);
    return 0;
}

static int cmd_prune(int argc, char **argv)
{
    (void)argv;
    if (argc != 1)
        return nsbox_say_usage("%s", "image: prune takes no arguments");
    struct nsbox_err e = {0};
    unsigned n = 0, layers = 0;
    if (nsbox_oci_store_prune(&n, &layers, &e) < 0)
        return nsbox_say_fail(&e);
    printf("removed %u unreferenced image%s and %u unreferenced layer%s\n", n, n == 1 ? "" : "s",
           layers, layers == 1 ? "" : "s");
    return 0;
}

static int cmd_inspect(int argc, char **argv)
{
    if (argc != 2)
        return nsbox_say_usage("%s", "image: inspect takes one image reference");
    struct nsbox_err e = {0};
    char name[64], digest[80];
    if (nsbox_oci_lookup_name(argv[1], name, sizeof name, &e) < 0)
        return nsbox_say_fail(&e);
    uint64_t size = 0;
    cleanup_free char *config = NULL, *manifest = NULL;
    if (nsbox_oci_store_meta(name, digest, sizeof digest, &size, &config, &manifest) < 0) {
        fprintf(stderr, "nsbox: image %s is gone from the store\n", name);
        return EXIT_NSBOX;
    }
    /* the texts as the import checked them; one an older nsbox stored may hold a NUL, at which
     * cJSON would cut the value shown */
    struct nsbox_err nul;
    const char *bad =
        config && nsbox_spec_json_check_nul(config, strlen(config), &nul) < 0         ? "config"
        : manifest && nsbox_spec_json_check_nul(manifest, strlen(manifest), &nul) < 0 ? "manifest"
                                                                                      : NULL;
    if (bad) {
        nsbox_say_line("image %s: its stored %s %s: remove it (nsbox image rm) and pull or "
                       "import it again",
                       argv[1], bad, nul.msg);
        return EXIT_NSBOX;
    }
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "id", name);
    cJSON_AddStringToObject(o, "digest", digest);
    cJSON_AddNumberToObject(o, "size", (double)size);
    cJSON_AddBoolToObject(o, "in_use", nsbox_oci_store_in_use(name));
    cJSON *refs = cJSON_AddArrayToObject(o, "refs");
    struct nsbox_oci_ref *v = NULL;
    size_t n = 0;
    if (nsbox_oci_store_refs(&v, &n, &e) == 0)
        for (size_t i = 0; i < n; i++)
            if (!strcmp(v[i].name, name))
                cJSON_AddItemToArray(refs, cJSON_CreateString(v[i].ref));
    free(v);
    cJSON *c = config ? cJSON_Parse(config) : NULL;
    cJSON *m = manifest ? cJSON_Parse(manifest) : NULL;
    cJSON_AddItemToObject(o, "config", c ? c : cJSON_CreateNull());
    cJSON_AddItemToObject(o, "manifest", m ? m : cJSON_CreateNull());
    char *text = cJSON_Print(o);
    cJSON_Delete(o);
    if (!text)
        return EXIT_NSBOX;
    puts(text);
    free(text);
    return 0;
}

int nsbox_cli_image_oci(int argc, char **argv)
{
    const char *sub = argv[1];
    if (!strcmp(sub, "pull"))
        return cmd_pull(argc - 1, argv + 1);
    if (!strcmp(sub, "import") || !strcmp(sub, "load"))
        return cmd_import(argc - 1, argv + 1);
    if (!strcmp(sub, "tag"))
        return cmd_tag(argc - 1, argv + 1);
    if (!strcmp(sub, "prune"))
        return cmd_prune(argc - 1, argv + 1);
    if (!strcmp(sub, "inspect"))
        return cmd_inspect(argc - 1, argv + 1);
    return -1;
}

bool nsbox_cli_image_oci_owns(const char *arg)
{
    return nsbox_oci_lookup_is_ref(arg) || !strncmp(arg, NSBOX_OCI_NAME_PREFIX, 4);
}

int nsbox_cli_image_oci_rm(const char *arg, bool force)
{
    struct nsbox_err e = {0};
    if (nsbox_oci_store_remove(arg, &e) < 0) {
        if (force && e.code == NSBOX_E_NOTFOUND)
            return 0;
        return nsbox_say_fail(&e);
    }
    return 0;
}

/* The rows `image ls` prints for one stored OCI image: one per reference (the id when none). */
int nsbox_cli_image_oci_ref_width(void)
{
    struct nsbox_oci_ref *v = NULL;
    size_t n = 0;
    struct nsbox_err e;
    int w = 0;
    if (nsbox_oci_store_refs(&v, &n, &e) == 0)
        for (size_t i = 0; i < n; i++) {
            int len = (int)strlen(v[i].ref);
            w = len > w ? len : w;
        }
    free(v);
    return w;
}

void nsbox_cli_image_oci_print_row(int wname, const char *name, const char *kind,
                                   const char *digest, const char *size, const char *created,
                                   const char *use, const char *path)
{
    char line[3 * PATH_MAX], shown[3 * PATH_MAX];
    int n = snprintf(line, sizeof line, "%-*s  %-6s  %-19.19s  %-8s  %-20s  %-3s  %s", wname, name,
                     kind, digest, size, created, use, path);
    size_t len = n < 0 ? 0 : (size_t)n < sizeof line ? (size_t)n : sizeof line - 1;
    nsbox_shown_copy(shown, sizeof shown, line, len, SIZE_MAX, 0);
    puts(shown);
}

void nsbox_cli_image_oci_ls_row(const char *name, const char *created, const char *path,
                                int wname, void *json_array)
{
    char digest[80];
    uint64_t size = 0;
    nsbox_oci_store_meta(name, digest, sizeof digest, &size, NULL, NULL);
    /* the image's own creation, as docker shows it, not when it came into the store */
    char own[40];
    if (nsbox_oci_store_created(name, own, sizeof own) == 0 && own[0])
        created = own;
    bool used = nsbox_oci_store_in_use(name);
    struct nsbox_oci_ref *v = NULL;
    size_t n = 0;
    struct nsbox_err e;
    nsbox_oci_store_refs(&v, &n, &e);
    bool any = false;
    for (size_t i = 0; i <= n; i++) {
        const char *label = i < n ? v[i].ref : name;
        if (i < n && strcmp(v[i].name, name) != 0)
            continue;
        if (i == n && any)
            break;
        any = true;
        if (json_array) {
            cJSON *o = cJSON_CreateObject();
            cJSON_AddItemToArray(json_array, o);
            cJSON_AddStringToObject(o, "name", label);
            cJSON_AddStringToObject(o, "kind", "oci");
            cJSON_AddStringToObject(o, "id", name);
            cJSON_AddStringToObject(o, "digest", digest);
            cJSON_AddNumberToObject(o, "size", (double)size);
            cJSON_AddStringToObject(o, "created", created);
            cJSON_AddBoolToObject(o, "in_use", used);
            cJSON_AddStringToObject(o, "path", path);
        } else {
            char sz[32], when[40];
            snprintf(sz, sizeof sz, "%.1fM", (double)size / 1e6);
            /* to the second, as the other rows: docker's configs say nanoseconds */
            const char *frac = strchr(created, '.');
            size_t digits = frac ? strspn(frac + 1, "0123456789") : 0;
            if (digits && (size_t)(frac - created) < sizeof when)
                snprintf(when, sizeof when, "%.*s%s", (int)(frac - created), created,
                         frac + 1 + digits);
            else
                snprintf(when, sizeof when, "%s", created);
            nsbox_cli_image_oci_print_row(wname, label, "oci", digest[0] ? digest : name, sz, when,
                                          used ? "yes" : "no", path);
        }
    }
    free(v);
}
