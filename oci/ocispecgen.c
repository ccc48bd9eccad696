/* nsbox-oci spec: runc's default config.json (policy/ocidefault.c) written into a bundle, never
 * over one that is there. */
#include "ocirt.h"
#include "cleanup.h"
#include "cleanup_cjson.h"
#include "jsontext.h"
#include "ocidefault.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int nsbox_ocispecgen_spec(const struct nsbox_ocirt *g, int argc, char **argv, struct nsbox_err *e)
{
    (void)g;
    static const struct option opts[] = {
        {"bundle", required_argument, NULL, 'b'},
        {"rootless", no_argument, NULL, 'r'},
        {NULL, 0, NULL, 0},
    };
    const char *bundle = ".";
    bool rootless = false;
    int o;
    optind = 1;
    while ((o = getopt_long(argc, argv, "+b:", opts, NULL)) != -1) {
        if (o == 'b')
            bundle = optarg;
        else if (o == 'r')
            rootless = true;
        else
            return nsbox_err_invalid(e, "spec: unknown option (see nsbox-oci spec --help)"), 1;
    }
    if (optind != argc) {
        nsbox_err_invalid(e, "spec: takes no arguments ('%s'); the bundle is --bundle DIR",
                          NSBOX_SHOW(argv[optind]));
        return 1;
    }
    cleanup_cjson cJSON *j = nsbox_ocidefault_config(rootless);
    cleanup_free char *text = j ? nsbox_jsontext_print(j) : NULL;
    if (!text) {
        nsbox_err_set(e, NSBOX_E_NOMEM, ENOMEM, "out of memory");
        return 1;
    }
    char path[PATH_MAX];
    if ((size_t)snprintf(path, sizeof path, "%s/config.json", bundle) >= sizeof path) {
        nsbox_err_invalid(e,
                          "spec: --bundle DIR: DIR/config.json would be longer than a path "
                          "may be (%d bytes): give a shorter DIR",
                          PATH_MAX);
        return 1;
    }
    /* O_EXCL: a config someone wrote is never replaced (runc's words) */
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd < 0) {
        if (errno == EEXIST)
            nsbox_err_set(e, NSBOX_E_INVALID, EEXIST, "File %s exists. Remove it first.",
                          strcmp(bundle, ".") ? path : "config.json");
        else
            nsbox_err_sys(e, "spec: cannot write %s", path);
        return 1;
    }
    size_t len = strlen(text);
    int r = nsbox_pwrite_all(fd, text, len, 0);
    if (r == 0)
        r = nsbox_pwrite_all(fd, "\n", 1, (off_t)len);
    if (close(fd) < 0)
        r = -1;
    if (r < 0) {
        nsbox_err_sys(e, "spec: write %s", path);
        unlink(path); /* ours: O_EXCL made it */
        return 1;
    }
    return 0;
}
