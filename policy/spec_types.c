/* The instance types (docs/spec.md): the built-in table, and the one the config file's section
 * replaces it with (os/config.c reads the file). */
#include "spec_impl.h"
#include "cleanup.h"
#include "cfgsection.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- instance types ------------------------------------------------------------------------- */

#define DEFAULT_TYPES                                                                              \
    {"small", {1, 1 * GiB, 256, 2 * GiB}}, {"medium", {2, 4 * GiB, 1024, 10 * GiB}},               \
        {"large", {4, 8 * GiB, 4096, 20 * GiB}}

static const struct nsbox_instance_type default_types[] = {DEFAULT_TYPES};
static struct nsbox_instance_type types[NSBOX_MAX_INSTANCE_TYPES] = {DEFAULT_TYPES};
static size_t n_types = NSBOX_ARRAY_LEN(default_types);

const struct nsbox_instance_type *nsbox_spec_types_find(const char *name)
{
    for (size_t i = 0; name && i < n_types; i++)
        if (strcmp(types[i].name, name) == 0)
            return &types[i];
    return NULL;
}

const struct nsbox_instance_type *nsbox_spec_types(size_t *n)
{
    *n = n_types;
    return types;
}

void nsbox_spec_types_reset(void)
{
    memset(types, 0, sizeof types);
    memcpy(types, default_types, sizeof default_types);
    n_types = NSBOX_ARRAY_LEN(default_types);
}

void nsbox_spec_types_names(char *buf, size_t n)
{
    size_t o = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < n_types && o < n; i++) {
        int r = snprintf(buf + o, n - o, "%s%s", i ? ", " : "", types[i].name);
        if (r < 0)
            break;
        o += (size_t)r;
    }
}


/* ---- instance type config ------------------------------------------------------------------- */

static int type_field(struct nsbox_instance_type *t, const cJSON *c, unsigned *seen,
                      struct nsbox_err *e)
{
    uint64_t v = 0;
    const char *k = c->string ? c->string : "";
    if (strcmp(k, "cpus") == 0) {
        if (nsbox_spec_json_uint(c, 1, CPUS_MAX, &v, e) < 0)
            return -1;
        t->limits.cpus = (uint32_t)v;
        *seen |= 1;
    } else if (strcmp(k, "memory") == 0) {
        if (nsbox_spec_json_bytes(c, &t->limits.memory_bytes, e) < 0)
            return -1;
        *seen |= 2;
    } else if (strcmp(k, "pids") == 0) {
        if (nsbox_spec_json_pids(c, &v, e) < 0)
            return -1;
        t->limits.pids = v;
        *seen |= 4;
    } else if (strcmp(k, "disk") == 0) {
        if (nsbox_spec_json_bytes(c, &t->limits.disk_bytes, e) < 0)
            return -1;
        *seen |= 8;
    } else {
        return invalid(e, "unknown key (expected cpus, memory, pids, disk)");
    }
    return 0;
}

static int load_type(struct nsbox_instance_type *tbl, size_t *n, const cJSON *entry,
                     struct nsbox_err *e)
{
    const char *name = entry->string ? entry->string : "";
    if (!nsbox_spec_name_valid(name))
        return invalid(e, "instance_types: '%s' is not a valid name ([a-z0-9][a-z0-9._-]*"
                       ", at most %d characters)", SHOW(name), NSBOX_NAME_MAX - 1);
    if (!cJSON_IsObject(entry))
        return invalid(e, "instance_types.%s: must be an object", name);
    struct nsbox_instance_type *t = NULL;
    for (size_t i = 0; i < *n; i++)
        if (strcmp(tbl[i].name, name) == 0)
            t = &tbl[i];
    bool is_new = !t;
    if (is_new) {
        if (*n >= NSBOX_MAX_INSTANCE_TYPES)
            return invalid(e, "instance_types: more than %d types",
                           NSBOX_MAX_INSTANCE_TYPES);
        t = &tbl[(*n)++];
        memset(t, 0, sizeof *t);
        memcpy(t->name, name, strlen(name) + 1);
    }
    unsigned seen = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, entry) {
        if (type_field(t, c, &seen, e) < 0)
            return nsbox_err_wrap(e, "instance_types.%s.%s", name, SHOW(c->string));
    }
    if (is_new && seen != 15)
        return invalid(e, "instance_types.%s: a new type needs cpus, memory, pids and "
                       "disk", name);
    return 0;
}

int nsbox_spec_types_parse(const cJSON *root, struct nsbox_err *e)
{
    struct nsbox_instance_type tbl[NSBOX_MAX_INSTANCE_TYPES];
    size_t n = NSBOX_ARRAY_LEN(default_types);
    const cJSON *it;

    if (nsbox_cfgsection_check_keys(root, e) < 0)
        return -1;
    memset(tbl, 0, sizeof tbl);
    memcpy(tbl, default_types, sizeof default_types);
    const cJSON *section = cJSON_GetObjectItemCaseSensitive(root, "instance_types");
    if (section && !cJSON_IsObject(section))
        return invalid(e, "instance_types: must be an object of {name: {cpus, memory, "
                       "pids, disk}}");
    cJSON_ArrayForEach(it, section) {
        if (load_type(tbl, &n, it, e) < 0)
            return -1;
    }
    memcpy(types, tbl, sizeof types);
    n_types = n;
    return 0;
}
