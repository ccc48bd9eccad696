/* The config file (docs/spec.md, "Config file"): where it is, reading and parsing it once per
 * process (again when the file at its path changed), and handing each module's parser the
 * parsed object. What a section means is its module's (policy/spec_types.c the instance types,
 * sandbox/net.c, sandbox/workspace.c, service/warmpool.c, sandbox/filemax.c; what their parsers
 * share, policy/cfgsection.c). */
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
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int config_read(int fd, const struct stat *st, const char *path, char **out, size_t *len,
                       struct nsbox_err *e)
{
    if (!S_ISREG(st->st_mode))
        return nsbox_err_invalid(e, "config %s: not a regular file", path);
    if ((uint64_t)st->st_size > NSBOX_SPEC_JSON_MAX)
        return nsbox_err_invalid(e, "config %s: larger than %u bytes", path, NSBOX_SPEC_JSON_MAX);
    if (st->st_size == 0)
        return nsbox_err_invalid(e, "config %s: empty file (write {} for the defaults)", path);
    cleanup_free char *buf = malloc((size_t)st->st_size + 1);
    size_t n = 0;
    if (!buf)
        return nsbox_err_sys(e, "config %s", path);
    /* Read at most the size fstat() reported, plus one byte to notice a file that grew. */
    while (n <= (size_t)st->st_size) {
        ssize_t r = read(fd, buf + n, (size_t)st->st_size + 1 - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return nsbox_err_sys(e, "config %s: read", path);
        if (r == 0)
            break;
        n += (size_t)r;
    }
    if (n > (size_t)st->st_size)
        return nsbox_err_invalid(e, "config %s: changed while being read", path);
    *out = nsbox_steal_ptr(&buf);
    *len = n;
    return 0;
}

/* The process's one config: how many reads, what the path held then, and the error of a
 * file that could not be read or parsed (kept until the file changes). */
static struct nsbox_config loaded;
static bool loaded_must_exist;
static int loaded_status; /* 0 read (or no file), -1 failed: loaded_err */
static struct nsbox_err loaded_err;

static void config_id_of(const struct stat *st, struct nsbox_config_id *id)
{
    *id = (struct nsbox_config_id){.present = true,
                                   .dev = st->st_dev,
                                   .ino = st->st_ino,
                                   .size = st->st_size,
                                   .mtim = st->st_mtim,
                                   .ctim = st->st_ctim};
}

static bool config_id_same(const struct nsbox_config_id *a, const struct nsbox_config_id *b)
{
    if (a->present != b->present)
        return false;
    return !a->present ||
           (a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
            a->mtim.tv_sec == b->mtim.tv_sec && a->mtim.tv_nsec == b->mtim.tv_nsec &&
            a->ctim.tv_sec == b->ctim.tv_sec && a->ctim.tv_nsec == b->ctim.tv_nsec);
}

static void config_drop(void)
{
    free(loaded.text);
    cJSON_Delete(loaded.root);
    loaded.text = NULL;
    loaded.root = NULL;
    loaded.len = 0;
}

/* Read and parse the file at loaded.path into loaded (its identity that of the file read). */
static int config_load(bool must_exist, struct nsbox_err *e)
{
    const char *path = loaded.path;
    loaded.reads++;
    loaded.id = (struct nsbox_config_id){0};
    cleanup_close int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        if (errno == ENOENT && !must_exist)
            return 0;
        int code = errno == ENOENT ? NSBOX_E_NOTFOUND : NSBOX_E_SYS;
        nsbox_err_sys(e, "config %s", path);
        e->code = code;
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) < 0)
        return nsbox_err_sys(e, "config %s", path);
    config_id_of(&st, &loaded.id);
    if (config_read(fd, &st, path, &loaded.text, &loaded.len, e) < 0)
        return -1;
    if (nsbox_spec_json_parse_object(loaded.text, loaded.len, NSBOX_SPEC_JSON_MAX, &loaded.root,
                                     e) < 0)
        return nsbox_err_wrap(e, "config %s", path);
    return 0;
}

int nsbox_config_get(const char *path, const struct nsbox_config **out, struct nsbox_err *e)
{
    struct nsbox_err ignored;
    if (!e)
        e = &ignored;
    *out = NULL;
    bool must_exist = false;
    if (!path) {
        const char *env = getenv("NSBOX_CONFIG");
        /* An explicit $NSBOX_CONFIG that is missing is a typo to report, not a default. */
        must_exist = env && *env;
        path = must_exist ? env : NSBOX_CONFIG_DEFAULT_PATH;
    }
    struct stat st;
    struct nsbox_config_id now = {0};
    bool known = stat(path, &st) == 0 ? (config_id_of(&st, &now), true) : errno == ENOENT;
    /* the same file as the one loaded, asked for the same way */
    bool same_source =
        loaded.reads && must_exist == loaded_must_exist && strcmp(path, loaded.path) == 0;
    if (same_source && known && config_id_same(&now, &loaded.id)) {
        if (loaded_status < 0) {
            *e = loaded_err;
            return -1;
        }
        *out = &loaded;
        return 0;
    }
    /* The text before, to tell a file rewritten with the same bytes (touched, chmod'ed, saved
     * unchanged, renamed over by a copy) from an edit: what was made of it still holds. */
    bool comparable = same_source && loaded_status == 0;
    cleanup_free char *before = nsbox_steal_ptr(&loaded.text);
    size_t before_len = loaded.len;
    config_drop();
    if (strlen(path) >= sizeof loaded.path) {
        loaded.path[0] = '\0';
        return nsbox_err_set(e, NSBOX_E_INVALID, ENAMETOOLONG, "config %.200s...: path too long",
                             path);
    }
    memcpy(loaded.path, path, strlen(path) + 1);
    loaded_must_exist = must_exist;
    loaded_status = config_load(must_exist, e);
    bool same = comparable && loaded_status == 0 && before_len == loaded.len &&
                (!loaded.len || memcmp(before, loaded.text, loaded.len) == 0);
    if (!same)
        loaded.text_since = loaded.reads;
    if (loaded_status < 0) {
        config_drop();
        loaded_err = *e;
        return -1;
    }
    *out = &loaded;
    return 0;
}

int nsbox_config_section(int (*parse)(const cJSON *root, void *out, struct nsbox_err *e),
                         void *out, const struct nsbox_config **used, struct nsbox_err *e)
{
    const struct nsbox_config *c;
    if (used)
        *used = NULL;
    if (nsbox_config_get(NULL, &c, e) < 0)
        return -1;
    if (c->root && parse(c->root, out, e) < 0)
        return nsbox_err_wrap(e, "%s", c->path);
    if (used)
        *used = c;
    return 0;
}

int nsbox_config_same_text_since(unsigned long since, const struct nsbox_config **out,
                                 struct nsbox_err *e)
{
    if (nsbox_config_get(NULL, out, e) < 0)
        return -1;
    return since && (*out)->text_since <= since && since <= (*out)->reads;
}

unsigned long nsbox_config_reads(void)
{
    return loaded.reads;
}

static unsigned long types_read;

int nsbox_config_load_types(const char *path, struct nsbox_err *e)
{
    const struct nsbox_config *c;
    if (nsbox_config_get(path, &c, e) < 0)
        return -1;
    if (!c->root)
        nsbox_spec_types_reset();
    else if (nsbox_spec_types_parse(c->root, e) < 0)
        return nsbox_err_wrap(e, "config %s", c->path);
    types_read = c->reads;
    return 0;
}

unsigned long nsbox_config_types_read(void)
{
    return types_read;
}
