/* `nsbox image build|ls|rm`: argument parsing and printing over the image store. */
#include "image.h"
#include "cleanup.h"
#include "cli.h"
#include "help.h"
#include "image_oci.h"
#include "say.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmd_build(int argc, char **argv)
{
    const char *name = NULL;
    bool quiet = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quiet") || !strcmp(argv[i], "-q"))
            quiet = true;
        else if (argv[i][0] == '-')
            return nsbox_say_usage("image: unknown option '%s' for build", argv[i]);
        else if (name)
            return nsbox_say_usage("image: build takes one image name, got also '%s'", argv[i]);
        else
            name = argv[i];
    }
    if (!name)
        return nsbox_say_usage("%s", "image: build needs an image name: host or debian");
    if (strcmp(name, "host") != 0 && strcmp(name, "debian") != 0)
        return nsbox_say_usage("image: cannot build '%s': nsbox builds `host` and `debian`", name);
    struct nsbox_err e = {0};
    nsbox_image_set_note(nsbox_say_note, stderr);
    if (nsbox_image_build(name, !quiet, &e) < 0)
        return nsbox_say_fail(&e);
    return 0;
}

static int print_json(const struct nsbox_image_info *v, size_t n)
{
    cJSON *arr = cJSON_CreateArray();
    for (size_t i = 0; arr && i < n; i++) {
        if (!strcmp(v[i].kind, "oci")) {
            nsbox_cli_image_oci_ls_row(v[i].name, v[i].created, v[i].path, 0, arr);
            continue;
        }
        cJSON *o = cJSON_CreateObject();
        if (!o)
            break;
        cJSON_AddItemToArray(arr, o);
        cJSON_AddStringToObject(o, "name", v[i].name);
        cJSON_AddStringToObject(o, "kind", v[i].kind);
        cJSON_AddStringToObject(o, "created", v[i].created);
        cJSON_AddNumberToObject(o, "builder_version", v[i].builder_version);
        cJSON_AddStringToObject(o, "path", v[i].path);
    }
    char *text = arr ? cJSON_Print(arr) : NULL;
    cJSON_Delete(arr);
    if (!text) {
        fprintf(stderr, "nsbox: out of memory\n");
        return EXIT_NSBOX;
    }
    puts(text);
    free(text);
    return 0;
}

static int cmd_ls(int argc, char **argv)
{
    bool json = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json"))
            json = true;
        else
            return nsbox_say_usage("image: unexpected argument '%s' for ls", argv[i]);
    }
    struct nsbox_err e = {0};
    cleanup_free struct nsbox_image_info *v = NULL;
    size_t n = 0;
    if (nsbox_image_list(&v, &n, &e) < 0)
        return nsbox_say_fail(&e);
    if (json)
        return print_json(v, n);
    /* as wide as the longest name, an OCI image's references included (a registry's
     * host:port and path make them long), so that every row's columns line up */
    int wname = 24;
    for (size_t i = 0; i < n; i++) {
        int ln = (int)strlen(v[i].name);
        wname = ln > wname && strcmp(v[i].kind, "oci") ? ln : wname;
    }
    int wref = nsbox_cli_image_oci_ref_width();
    wname = wref > wname ? wref : wname;
    /* DIGEST, SIZE and IN-USE are an OCI image's (docker's columns); "-" for the others */
    nsbox_cli_image_oci_print_row(wname, "NAME", "KIND", "DIGEST", "SIZE", "CREATED", "USE",
                                  "PATH");
    for (size_t i = 0; i < n; i++) {
        if (!strcmp(v[i].kind, "oci"))
            nsbox_cli_image_oci_ls_row(v[i].name, v[i].created, v[i].path, wname, NULL);
        else
            nsbox_cli_image_oci_print_row(wname, v[i].name, v[i].kind, "-", "-", v[i].created, "-",
                                          v[i].path);
    }
    return 0;
}

static int cmd_rm(int argc, char **argv)
{
    bool force = false;
    int names = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-f") || !strcmp(argv[i], "--force"))
            force = true;
        else if (argv[i][0] == '-')
            return nsbox_say_usage("image: unknown option '%s' for rm", argv[i]);
        else
            names++;
    }
    if (!names)
        return nsbox_say_usage("%s", "image: rm needs at least one image name");
    int rc = 0;
    for (int i = 1; i < argc; i++) {
        if (argv[i][0] == '-')
            continue;
        struct nsbox_err e = {0};
        if (nsbox_cli_image_oci_owns(argv[i])) {
            int r = nsbox_cli_image_oci_rm(argv[i], force);
            rc = r ? r : rc;
        } else if (nsbox_image_remove(argv[i], force, &e) < 0) {
            rc = nsbox_say_fail(&e); /* go on with the other names, like rm(1) */
        }
    }
    return rc;
}

int nsbox_cli_image(int argc, char **argv)
{
    if (argc < 2)
        return nsbox_say_usage(
            "%s", "image: missing subcommand: build, pull, import, ls, inspect, tag, rm or prune");
    const char *sub = argv[1];
    if (!strcmp(sub, "--help") || !strcmp(sub, "-h") || !strcmp(sub, "help")) {
        nsbox_help_print("image", stdout);
        return 0;
    }
    /* nsbox image pull --help: among the subcommand's leading options, as for every command */
    for (int k = 2; k < argc && argv[k][0] == '-' && argv[k][1]; k++)
        if (!strcmp(argv[k], "--help") || !strcmp(argv[k], "-h")) {
            nsbox_help_print("image", stdout);
            return 0;
        }
    int oci = nsbox_cli_image_oci(argc, argv);
    if (oci >= 0)
        return oci;
    if (!strcmp(sub, "build"))
        return cmd_build(argc - 1, argv + 1);
    if (!strcmp(sub, "ls") || !strcmp(sub, "list"))
        return cmd_ls(argc - 1, argv + 1);
    if (!strcmp(sub, "rm") || !strcmp(sub, "remove"))
        return cmd_rm(argc - 1, argv + 1);
    return nsbox_say_usage(
        "image: unknown subcommand '%s': use build, pull, import, ls, inspect, tag, rm or prune",
        sub);
}
