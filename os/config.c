/* The config file (docs/spec.md, "Config file"): where it is, reading it with the same rules
 * for every module that has a section in it, and handing each its section's parser. What a
 * section means is its module's (policy/spec_types.c the instance types, sandbox/net.c,
 * sandbox/workspace.c, service/warmpool.c, sandbox/filemax.c; what their parsers share,
 * policy/cfgsection.c). */
#define _GNU_SOURCE
#include "config.h"

#include "cleanup.h"
#include "spec.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static int config_read(int fd, const char *path, char **out, size_t *len, struct nsbox_err *e)
{
    struct stat st;
    if (fstat(fd, &st) < 0)
        return nsbox_err_sys(e, "config %s", path);
    if (!S_ISREG(st.st_mode))
        return nsbox_err_invalid(e, "config %s: not a regular file", path);
    if ((uint64_t)st.st_size > NSBOX_SPEC_JSON_MAX)
        return nsbox_err_invalid(e, "config %s: larger than %u bytes", path, NSBOX_SPEC_JSON_MAX);
    if (st.st_size == 0)
        return nsbox_err_invalid(e, "config %s: empty file (write {} for the defaults)", path);
    cleanup_free char *buf = malloc((size_t)st.st_size + 1);
    size_t n = 0;
    if (!buf)
        return nsbox_err_sys(e, "config %s", path);
    /* Read at most the size fstat() reported, plus one byte to notice a file that grew. */
    while (n <= (size_t)st.st_size) {
        ssize_t r = read(fd, buf + n, (size_t)st.st_size + 1 - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return nsbox_err_sys(e, "config %s: read", path);
        if (r == 0)
            break;
        n += (size_t)r;
    }
    if (n > (size_t)st.st_size)
        return nsbox_err_invalid(e, "config %s: changed while being read", path);
    *out = nsbox_steal_ptr(&buf);
    *len = n;
    return 0;
}

int nsbox_config_text(const char *path, char **text, size_t *len, char *used, size_t usedn,
                      struct nsbox_err *e)
{
    *text = NULL;
    *len = 0;
    bool must_exist = false;
    if (!path) {
        const char *env = getenv("NSBOX_CONFIG");
        /* An explicit $NSBOX_CONFIG that is missing is a typo to report, not a default. */
        must_exist = env && *env;
        path = must_exist ? env : NSBOX_CONFIG_DEFAULT_PATH;
    }
    if (used)
        snprintf(used, usedn, "%s", path);
    cleanup_close int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        if (errno == ENOENT && !must_exist)
            return 1;
        int code = errno == ENOENT ? NSBOX_E_NOTFOUND : NSBOX_E_SYS;
        nsbox_err_sys(e, "config %s", path);
        if (e)
            e->code = code;
        return -1;
    }
    return config_read(fd, path, text, len, e);
}

/* The config text (nsbox_config_text's rules) given to parse, whose errors get the file's name
 * in front (after prefix). With text, the caller keeps the text (NULL without a file). Returns
 * 0, 1 when there is no config file (parse not called), -1. */
static int config_parse(const char *path, const char *prefix,
                        int (*parse)(const char *text, size_t len, void *out, struct nsbox_err *e),
                        void *out, char **text, size_t *len, struct nsbox_err *e)
{
    cleanup_free char *buf = NULL;
    size_t n = 0;
    char used[PATH_MAX];
    int r = nsbox_config_text(path, &buf, &n, used, sizeof used, e);
    if (r < 0)
        return -1;
    if (r == 0 && parse(buf, n, out, e) < 0)
        return nsbox_err_wrap(e, "%s%s", prefix, used);
    if (text) {
        *text = nsbox_steal_ptr(&buf);
        *len = n;
    }
    return r;
}

int nsbox_config_section(int (*parse)(const char *text, size_t len, void *out, struct nsbox_err *e),
                         void *out, char **text, size_t *len, struct nsbox_err *e)
{
    return config_parse(NULL, "", parse, out, text, len, e) < 0 ? -1 : 0;
}

static int config_types(const char *text, size_t len, void *out, struct nsbox_err *e)
{
    (void)out;
    return nsbox_spec_types_parse(text, len, e);
}

int nsbox_config_load_types(const char *path, struct nsbox_err *e)
{
    int r = config_parse(path, "config ", config_types, NULL, NULL, NULL, e);
    if (r == 1)
        nsbox_spec_types_reset();
    return r < 0 ? -1 : 0;
}
