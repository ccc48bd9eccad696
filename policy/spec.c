/* The sandbox spec (docs/spec.md): defaults, JSON and CLI input through the option table,
 * cross-field validation. Pure. The rest of it: spec_net.c (hosts, CIDRs), spec_json.c (JSON
 * values, rendering), spec_types.c (instance types, the config file). */
#include "spec_impl.h"
#include "ociref.h"
#include "suggest.h"
#include "cleanup.h"
#include "cleanup_cjson.h"

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

/* ---- small syntax checks -------------------------------------------------------------------- */

static bool is_lower_alnum(char c)
{
    return (c >= 'a' && c <= 'z') || is_digit(c);
}

/* [a-z0-9][a-z0-9._-]{0,62}: instance types and stored image names become directory names and
 * cgroup names; the leading alnum rules out "." and "..", and the alphabet rules out "/". */
bool nsbox_spec_name_valid(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n >= NSBOX_NAME_MAX || !is_lower_alnum(s[0]))
        return false;
    for (size_t i = 1; i < n; i++)
        if (!is_lower_alnum(s[i]) && s[i] != '.' && s[i] != '_' && s[i] != '-')
            return false;
    return true;
}

static bool region_valid(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n >= NSBOX_NAME_MAX)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!is_lower_alnum(s[i]) && s[i] != '-')
            return false;
    return true;
}

/* Environment names as POSIX shells accept them, so that `env` inside the sandbox and `$K` in
 * a setup script see the same variable. */
bool nsbox_spec_env_name_valid(const char *s, size_t n)
{
    if (n == 0 || (!is_alpha(s[0]) && s[0] != '_'))
        return false;
    for (size_t i = 1; i < n; i++)
        if (!is_alpha(s[i]) && !is_digit(s[i]) && s[i] != '_')
            return false;
    return true;
}

/* Decimal digits only: no sign, no spaces, no hex, as strtoull would otherwise accept. */
bool nsbox_spec_parse_decimal(const char *s, size_t n, uint64_t *out)
{
    uint64_t v = 0;
    if (n == 0)
        return false;
    for (size_t i = 0; i < n; i++) {
        if (!is_digit(s[i]))
            return false;
        unsigned d = (unsigned)(s[i] - '0');
        if (v > (UINT64_MAX - d) / 10)
            return false;
        v = v * 10 + d;
    }
    *out = v;
    return true;
}


/* ---- env ------------------------------------------------------------------------------------ */

int nsbox_spec_parse_env(const char *kv, struct nsbox_err *e)
{
    if (!kv)
        return invalid(e, "env: missing NAME=VALUE");
    const char *eq = strchr(kv, '=');
    if (!eq)
        return invalid(e, "env '%s': expected NAME=VALUE", SHOW(kv));
    if (!nsbox_spec_env_name_valid(kv, (size_t)(eq - kv)))
        return invalid(e, "env '%s': invalid name (must match [A-Za-z_][A-Za-z0-9_]*)",
                       SHOW(kv));
    if (strnlen(kv, NSBOX_ENV_MAX) >= NSBOX_ENV_MAX)
        return invalid(e, "env '%s': longer than %d bytes", SHOW(kv), NSBOX_ENV_MAX - 1);
    return 0;
}

static ssize_t env_find(const struct nsbox_spec *s, const char *name, size_t n)
{
    for (size_t i = 0; i < s->n_env; i++)
        if (strncmp(s->env[i], name, n) == 0 && s->env[i][n] == '=')
            return (ssize_t)i;
    return -1;
}

const char *nsbox_spec_getenv(const struct nsbox_spec *s, const char *name)
{
    ssize_t i = env_find(s, name, strlen(name));
    return i < 0 ? NULL : strchr(s->env[i], '=') + 1;
}

/* Takes ownership of kv (already checked by nsbox_spec_parse_env). A repeated name replaces the
 * value in place, as a later `-e K=V` or `export` would. */
static int env_put(struct nsbox_spec *s, char *kv, struct nsbox_err *e)
{
    ssize_t i = env_find(s, kv, (size_t)(strchr(kv, '=') - kv));
    if (i >= 0) {
        free(s->env[i]);
        s->env[i] = kv;
        return 0;
    }
    if (s->n_env >= NSBOX_MAX_ENV) {
        free(kv);
        return invalid(e, "env: too many variables (at most %d)", NSBOX_MAX_ENV);
    }
    s->env[s->n_env++] = kv;
    return 0;
}

static void env_clear(struct nsbox_spec *s)
{
    for (size_t i = 0; i < s->n_env; i++) {
        free(s->env[i]);
        s->env[i] = NULL;
    }
    s->n_env = 0;
}

static int env_put_pair(struct nsbox_spec *s, const char *name, const char *value,
                        struct nsbox_err *e)
{
    size_t nl = strlen(name), vl = strlen(value);
    if (nl + vl + 2 > NSBOX_ENV_MAX)
        return invalid(e, "env '%s': longer than %d bytes", SHOW(name), NSBOX_ENV_MAX - 1);
    char *kv = malloc(nl + vl + 2);
    if (!kv)
        return nsbox_err_sys(e, "env");
    memcpy(kv, name, nl);
    kv[nl] = '=';
    memcpy(kv + nl + 1, value, vl + 1);
    if (nsbox_spec_parse_env(kv, e) < 0) {
        free(kv);
        return -1;
    }
    return env_put(s, kv, e);
}


/* ---- sizes ---------------------------------------------------------------------------------- */

int nsbox_spec_parse_size(const char *s, uint64_t *out, struct nsbox_err *e)
{
    static const struct {
        const char *unit;
        unsigned shift;
    } units[] = {
        {"", 0},    {"b", 0},     {"k", 10},  {"kb", 10}, {"kib", 10}, {"m", 20},
        {"mb", 20}, {"mib", 20},  {"g", 30},  {"gb", 30}, {"gib", 30}, {"t", 40},
        {"tb", 40}, {"tib", 40},
    };
    if (!s)
        return invalid(e, "size: missing");
    size_t nd = strspn(s, "0123456789");
    uint64_t v = 0;
    const char *unit = s + nd;
    if (nd == 0 || !nsbox_spec_parse_decimal(s, nd, &v) || strlen(unit) > 3)
        return invalid(e, "size '%s': expected a whole number of bytes with an optional unit "
                       "(B, KiB, MiB, GiB, TiB), e.g. 512MiB", SHOW(s));
    char lower[4] = {0};
    for (size_t i = 0; unit[i]; i++)
        lower[i] = to_lower(unit[i]);
    for (size_t i = 0; i < NSBOX_ARRAY_LEN(units); i++) {
        if (strcmp(lower, units[i].unit) != 0)
            continue;
        if (v > (UINT64_MAX >> units[i].shift))
            return invalid(e, "size '%s': too large", SHOW(s));
        *out = v << units[i].shift;
        return 0;
    }
    return invalid(e, "size '%s': unknown unit '%s' (use B, KiB, MiB, GiB or TiB)", SHOW(s),
                   SHOW(unit));
}


/* ---- string options (shared by JSON and the CLI) -------------------------------------------- */

/* value NULL is JSON null: back to the default, for the options that are "none" by default. */

static int set_instance_type(struct nsbox_spec *s, const char *v, struct nsbox_err *e)
{
    if (!nsbox_spec_name_valid(v))
        return invalid(e, "'%s' is not an instance type name (e.g. small, medium, large)",
                       SHOW(v));
    memcpy(s->instance_type, v, strlen(v) + 1);
    /* Stale limits of the previous type must never be enforced: validate() fills them. */
    memset(&s->limits, 0, sizeof s->limits);
    return 0;
}

static int set_region(struct nsbox_spec *s, const char *v, struct nsbox_err *e)
{
    if (!region_valid(v))
        return invalid(e, "'%s' is not a region name (lower-case letters, digits and '-', "
                       "e.g. nl-north-1)", SHOW(v));
    memcpy(s->region, v, strlen(v) + 1);
    return 0;
}

static int set_image(struct nsbox_spec *s, const char *v, struct nsbox_err *e)
{
    size_t n = strnlen(v, PATH_MAX);
    if (v[0] == '/') {
        if (n >= PATH_MAX)
            return invalid(e, "path is longer than %d bytes", PATH_MAX - 1);
    } else if (!nsbox_spec_name_valid(v) && !nsbox_ociref_is_reference(v)) {
        return invalid(e, "'%s' is neither \"host\", an image reference (python:3.12), an image "
                          "name ([a-z0-9][a-z0-9._-]*, at "
                       "most %d characters) nor an absolute path", SHOW(v), NSBOX_NAME_MAX - 1);
    }
    memcpy(s->image, v, n + 1);
    return 0;
}

static const char *const pull_names[] = {"", "missing", "always", "never"};

static int set_pull(struct nsbox_spec *s, const char *v, struct nsbox_err *e)
{
    for (int i = NSBOX_PULL_MISSING; i <= NSBOX_PULL_NEVER; i++)
        if (!strcmp(v, pull_names[i])) {
            s->pull = (enum nsbox_pull)i;
            return 0;
        }
    return invalid(e, "'%s' is not a pull policy (missing, always or never)", SHOW(v));
}

const char *nsbox_spec_pull_name(enum nsbox_pull p)
{
    return p > NSBOX_PULL_DEFAULT && p <= NSBOX_PULL_NEVER ? pull_names[p] : NULL;
}

static int set_setup_script(struct nsbox_spec *s, const char *v, struct nsbox_err *e)
{
    char *copy = NULL;
    size_t n = v ? strnlen(v, NSBOX_SCRIPT_MAX + 1) : 0;
    if (n > NSBOX_SCRIPT_MAX)
        return invalid(e, "longer than %u bytes", NSBOX_SCRIPT_MAX);
    /* An empty script does nothing: store it as "no script" so there is one way to say it. */
    if (n > 0 && !(copy = strndup(v, n)))
        return nsbox_err_sys(e, "setup_script");
    free(s->setup_script);
    s->setup_script = copy;
    return 0;
}

static int set_workspace(struct nsbox_spec *s, const char *v, struct nsbox_err *e)
{
    if (!v || !*v) {
        s->workspace[0] = '\0';
        return 0;
    }
    size_t n = strnlen(v, PATH_MAX);
    if (v[0] != '/')
        return invalid(e, "'%s' must be an absolute path (or \"\" for a fresh directory)",
                       SHOW(v));
    if (n >= PATH_MAX)
        return invalid(e, "path is longer than %d bytes", PATH_MAX - 1);
    memcpy(s->workspace, v, n + 1);
    return 0;
}

/* ---- network, egress ------------------------------------------------------------------------ */

static int add_host(struct nsbox_spec *s, const char *text, struct nsbox_err *e)
{
    struct nsbox_host h;
    if (nsbox_spec_net_parse_host(text, &h, e) < 0)
        return -1;
    for (size_t i = 0; i < s->n_hosts; i++)
        if (s->hosts[i].port == h.port && strcmp(s->hosts[i].name, h.name) == 0)
            return 0;
    if (s->n_hosts >= NSBOX_MAX_HOSTS)
        return invalid(e, "too many hosts (at most %d)", NSBOX_MAX_HOSTS);
    s->hosts[s->n_hosts++] = h;
    return 0;
}

static int add_cidr(struct nsbox_spec *s, const char *text, struct nsbox_err *e)
{
    struct nsbox_cidr c;
    if (nsbox_spec_net_parse_cidr(text, &c, e) < 0)
        return -1;
    for (size_t i = 0; i < s->n_egress; i++)
        if (memcmp(&s->egress[i], &c, sizeof c) == 0)
            return 0;
    if (s->n_egress >= NSBOX_MAX_CIDRS)
        return invalid(e, "too many entries (at most %d)", NSBOX_MAX_CIDRS);
    s->egress[s->n_egress++] = c;
    return 0;
}

static const char *const network_forms =
    "must be \"none\", \"all\" or {\"allow\": [\"host\", \"host:port\", ...]}";

static int json_network(struct nsbox_spec *s, const cJSON *it, struct nsbox_err *e)
{
    if (cJSON_IsString(it)) {
        if (strcmp(it->valuestring, "none") == 0)
            s->net = NSBOX_NET_NONE;
        else if (strcmp(it->valuestring, "all") == 0)
            s->net = NSBOX_NET_ALL;
        else
            return invalid(e, "%s", network_forms);
        s->n_hosts = 0;
        return 0;
    }
    if (!cJSON_IsObject(it))
        return invalid(e, "%s", network_forms);
    const cJSON *allow = NULL, *c;
    cJSON_ArrayForEach(c, it) {
        if (!c->string || strcmp(c->string, "allow") != 0)
            return invalid(e, "unknown key '%s' (%s)", SHOW(c->string), network_forms);
        allow = c;
    }
    if (!cJSON_IsArray(allow))
        return invalid(e, "'allow' must be an array of host strings");
    s->n_hosts = 0;
    cJSON_ArrayForEach(c, allow) {
        if (!cJSON_IsString(c))
            return invalid(e, "'allow' must be an array of host strings");
        if (add_host(s, c->valuestring, e) < 0)
            return -1;
    }
    if (s->n_hosts == 0)
        return invalid(e, "'allow' needs at least one host (use \"none\" to block everything)");
    s->net = NSBOX_NET_ALLOW;
    return 0;
}

/* Calls fn on each comma-separated item, spaces around items trimmed (shell users write
 * "a, b"). Empty items are errors: "a,,b" is a typo, not a wish. */
static int for_each_item(struct nsbox_spec *s, const char *list,
                         int (*fn)(struct nsbox_spec *, const char *, struct nsbox_err *),
                         struct nsbox_err *e)
{
    cleanup_free char *copy = strdup(list);
    if (!copy)
        return nsbox_err_sys(e, "spec");
    char *p = copy;
    for (;;) {
        char *comma = strchr(p, ',');
        if (comma)
            *comma = '\0';
        while (*p == ' ')
            p++;
        size_t n = strlen(p);
        while (n > 0 && p[n - 1] == ' ')
            p[--n] = '\0';
        if (n == 0)
            return invalid(e, "empty item in list '%s'", SHOW(list));
        if (fn(s, p, e) < 0)
            return -1;
        if (!comma)
            break;
        p = comma + 1;
    }
    return 0;
}

static int text_network(struct nsbox_spec *s, const char *v, struct nsbox_err *e)
{
    if (strcmp(v, "none") == 0 || strcmp(v, "all") == 0) {
        s->net = v[0] == 'n' ? NSBOX_NET_NONE : NSBOX_NET_ALL;
        s->n_hosts = 0;
        return 0;
    }
    /* docker's and podman's network modes: the nearest of nsbox's, not only the syntax */
    if (!strcmp(v, "host") || !strcmp(v, "bridge") || !strcmp(v, "default") ||
        !strcmp(v, "slirp4netns") || !strcmp(v, "pasta"))
        return invalid(e,
                       "'%s' is docker's or podman's mode; here all (a veth pair with "
                       "masquerade: the internet, never the host itself), none (loopback only) "
                       "or allow=HOST[,HOST...] (those hosts only; docs/network.md)",
                       v);
    if (strncmp(v, "allow=", 6) != 0)
        return invalid(e, "must be none, all or allow=HOST[,HOST...]");
    s->n_hosts = 0;
    if (for_each_item(s, v + 6, add_host, e) < 0)
        return -1;
    s->net = NSBOX_NET_ALLOW;
    return 0;
}

static int json_egress(struct nsbox_spec *s, const cJSON *it, struct nsbox_err *e)
{
    const cJSON *c;
    if (!cJSON_IsNull(it) && !cJSON_IsArray(it))
        return invalid(e, "must be an array of CIDR strings (e.g. [\"10.0.0.0/8\"])");
    s->n_egress = 0;
    cJSON_ArrayForEach(c, it) {
        if (!cJSON_IsString(c))
            return invalid(e, "must be an array of CIDR strings (e.g. [\"10.0.0.0/8\"])");
        if (add_cidr(s, c->valuestring, e) < 0)
            return -1;
    }
    return 0;
}

static int json_env(struct nsbox_spec *s, const cJSON *it, struct nsbox_err *e)
{
    const cJSON *c;
    if (!cJSON_IsObject(it))
        return invalid(e, "must be an object of strings ({\"NAME\": \"value\"})");
    env_clear(s);
    cJSON_ArrayForEach(c, it) {
        if (!c->string || !nsbox_spec_env_name_valid(c->string, strlen(c->string)))
            return invalid(e, "'%s' is not a valid name (must match [A-Za-z_][A-Za-z0-9_]*)",
                           SHOW(c->string));
        if (!cJSON_IsString(c))
            return invalid(e, "value of '%s' must be a string", c->string);
        if (env_put_pair(s, c->string, c->valuestring, e) < 0)
            return -1;
    }
    return 0;
}

static int text_env(struct nsbox_spec *s, const char *v, struct nsbox_err *e)
{
    if (nsbox_spec_parse_env(v, e) < 0)
        return -1;
    char *kv = strdup(v);
    if (!kv)
        return nsbox_err_sys(e, "env");
    return env_put(s, kv, e);
}

/* "limits" is output-only (the instance type decides it), but inspect output must be usable
 * as a spec again. So it is accepted when it matches what instance_type resolves to, and
 * refused otherwise: ignoring it would let a user believe they had set limits. */
static int json_limits(const cJSON *it, struct nsbox_limits *l, struct nsbox_err *e)
{
    const cJSON *c;
    if (!cJSON_IsObject(it))
        return invalid(e, "must be an object");
    memset(l, 0, sizeof *l);
    cJSON_ArrayForEach(c, it) {
        uint64_t v = 0;
        const char *k = c->string ? c->string : "";
        bool cpus = strcmp(k, "cpus") == 0, pids = strcmp(k, "pids") == 0;
        bool mem = strcmp(k, "memory_bytes") == 0, disk = strcmp(k, "disk_bytes") == 0;
        if (!cpus && !pids && !mem && !disk)
            return invalid(e, "unknown key '%s'", SHOW(k));
        if ((pids ? nsbox_spec_json_pids(c, &v, e)
                  : nsbox_spec_json_uint(c, cpus ? 1 : 0, cpus ? CPUS_MAX : BYTES_MAX, &v, e)) < 0)
            return nsbox_err_wrap(e, "'%s'", k);
        if (cpus)
            l->cpus = (uint32_t)v;
        else if (pids)
            l->pids = v;
        else if (mem)
            l->memory_bytes = v;
        else
            l->disk_bytes = v;
    }
    return 0;
}

static int check_limits_match(const struct nsbox_spec *s, const struct nsbox_limits *l,
                              struct nsbox_err *e)
{
    const struct nsbox_instance_type *t = nsbox_spec_types_find(s->instance_type);
    if (!t)
        return invalid(e, "instance_type '%s' is unknown", SHOW(s->instance_type));
    if (memcmp(&t->limits, l, sizeof *l) != 0)
        return invalid(e, "do not match instance_type '%s'; limits are output only (define an "
                       "instance type in the config file to change them)",
                       SHOW(s->instance_type));
    return 0;
}

/* ---- the key table -------------------------------------------------------------------------- */

enum key_kind {
    KEY_UINT,
    KEY_BOOL,
    KEY_STRING,
    KEY_NETWORK,
    KEY_EGRESS,
    KEY_ENV,
    KEY_LIMITS,
    KEY_BINDINGS,
};

struct spec_key {
    const char *name;
    enum key_kind kind;
    size_t off; /* KEY_UINT: offset of the uint64_t field; KEY_BOOL: of the bool field */
    uint64_t min, max;
    int (*set_string)(struct nsbox_spec *, const char *, struct nsbox_err *);
    bool nullable; /* KEY_STRING: JSON null means the default */
};

static const struct spec_key keys[] = {
    {"instance_type", KEY_STRING, 0, 0, 0, set_instance_type, false},
    {"idle_timeout_seconds", KEY_UINT, offsetof(struct nsbox_spec, idle_timeout_seconds), 0,
     NSBOX_TTL_MAX, NULL, false},
    {"ttl_seconds", KEY_UINT, offsetof(struct nsbox_spec, ttl_seconds), 1, NSBOX_TTL_MAX, NULL,
     false},
    {"region", KEY_STRING, 0, 0, 0, set_region, false},
    {"network", KEY_NETWORK, 0, 0, 0, NULL, false},
    {"egress", KEY_EGRESS, 0, 0, 0, NULL, true},
    {"image", KEY_STRING, 0, 0, 0, set_image, false},
    {"pull", KEY_STRING, 0, 0, 0, set_pull, false},
    {"setup_script", KEY_STRING, 0, 0, 0, set_setup_script, true},
    {"setup_script_timeout_seconds", KEY_UINT,
     offsetof(struct nsbox_spec, setup_script_timeout_seconds), 1, SETUP_TIMEOUT_MAX, NULL,
     false},
    {"workspace", KEY_STRING, 0, 0, 0, set_workspace, true},
    {"env", KEY_ENV, 0, 0, 0, NULL, false},
    {"limits", KEY_LIMITS, 0, 0, 0, NULL, false},
    {"supports_background_processes", KEY_BOOL,
     offsetof(struct nsbox_spec, supports_background_processes), 0, 0, NULL, false},
    {"header_bindings", KEY_BINDINGS, 0, 0, 0, NULL, true},
};

static const struct spec_key *key_find(const char *name)
{
    for (size_t i = 0; name && i < NSBOX_ARRAY_LEN(keys); i++)
        if (strcmp(keys[i].name, name) == 0)
            return &keys[i];
    return NULL;
}

/* The key that begins with `name` and then '_' ("ttl": ttl_seconds, "instance":
 * instance_type), the first in the table; NULL when none does. */
static const char *key_by_first_word(const char *name)
{
    size_t n = strlen(name);
    for (size_t i = 0; n >= 3 && i < NSBOX_ARRAY_LEN(keys); i++)
        if (!strncmp(keys[i].name, name, n) && keys[i].name[n] == '_')
            return keys[i].name;
    return NULL;
}

/* A key (what: "key" in JSON, "option" from a flag) the spec does not have: refused, with the
 * key meant when one is that close, where sizes come from when it names one, and else every
 * key a spec takes (a hosted or docker habit, "timeout", "environment", is no spelling of one). */
static int unknown_key(struct nsbox_err *e, const char *what, const char *name)
{
    const char *names[NSBOX_ARRAY_LEN(keys)];
    for (size_t i = 0; i < NSBOX_ARRAY_LEN(keys); i++)
        names[i] = keys[i].name;
    const char *near = name ? nsbox_suggest(name, names, NSBOX_ARRAY_LEN(names)) : NULL;
    if (!near && name)
        near = key_by_first_word(name);
    if (near)
        return invalid(e, "spec: unknown %s '%s' (did you mean '%s'?)", what, SHOW(name), near);
    static const char *const sizes[] = {"cpus", "memory", "pids", "disk", "memory_bytes",
                                        "disk_bytes"};
    for (size_t i = 0; name && i < NSBOX_ARRAY_LEN(sizes); i++)
        if (!strcmp(name, sizes[i]))
            return invalid(e,
                           "spec: unknown %s '%s': CPUs, memory, pids and disk come from "
                           "instance_type; other sizes are an instance type of their own in the "
                           "config file (docs/spec.md)",
                           what, name);
    char list[512];
    size_t len = 0;
    for (size_t i = 0; i < NSBOX_ARRAY_LEN(keys) && len < sizeof list; i++)
        if (keys[i].kind != KEY_LIMITS) /* output only: inspect's, taken back unchanged */
            len += (size_t)snprintf(list + len, sizeof list - len, "%s%s", len ? ", " : "",
                                    keys[i].name);
    return invalid(e, "spec: unknown %s '%s' (a spec's keys: %s; docs/spec.md)", what,
                   SHOW(name), list);
}

static uint64_t *uint_field(struct nsbox_spec *s, const struct spec_key *k)
{
    return (uint64_t *)((char *)s + k->off);
}

static bool *bool_field(struct nsbox_spec *s, const struct spec_key *k)
{
    return (bool *)((char *)s + k->off);
}

static int apply_json(struct nsbox_spec *s, const struct spec_key *k, const cJSON *it,
                      struct nsbox_err *e)
{
    switch (k->kind) {
    case KEY_UINT:
        return nsbox_spec_json_uint(it, k->min, k->max, uint_field(s, k), e);
    case KEY_BOOL:
        if (!cJSON_IsBool(it))
            return invalid(e, "must be true or false");
        *bool_field(s, k) = cJSON_IsTrue(it);
        return 0;
    case KEY_STRING:
        if (k->nullable && cJSON_IsNull(it))
            return k->set_string(s, NULL, e);
        if (!cJSON_IsString(it))
            return invalid(e, k->nullable ? "must be a string or null" : "must be a string");
        return k->set_string(s, it->valuestring, e);
    case KEY_NETWORK:
        return json_network(s, it, e);
    case KEY_EGRESS:
        return json_egress(s, it, e);
    case KEY_ENV:
        return json_env(s, it, e);
    case KEY_LIMITS:
        break; /* checked after all keys, against the final instance_type */
    case KEY_BINDINGS:
        return nsbox_spec_bind_json(s, it, e);
    }
    return 0;
}

static int apply_text(struct nsbox_spec *s, const struct spec_key *k, const char *v,
                      struct nsbox_err *e)
{
    switch (k->kind) {
    case KEY_UINT:
        return nsbox_spec_json_text_uint(v, k->min, k->max, uint_field(s, k), e);
    case KEY_BOOL:
        if (strcmp(v, "true") && strcmp(v, "false"))
            return invalid(e, "'%s' is not true or false", SHOW(v));
        *bool_field(s, k) = !strcmp(v, "true");
        return 0;
    case KEY_STRING:
        return k->set_string(s, v, e);
    case KEY_NETWORK:
        return text_network(s, v, e);
    case KEY_EGRESS:
        return for_each_item(s, v, add_cidr, e);
    case KEY_ENV:
        return text_env(s, v, e);
    case KEY_LIMITS:
        return invalid(e, "is output only; choose an instance_type");
    case KEY_BINDINGS:
        return nsbox_spec_bind_text(s, v, e);
    }
    return 0;
}

/* ---- spec lifecycle ------------------------------------------------------------------------- */

void nsbox_spec_init(struct nsbox_spec *s)
{
    memset(s, 0, sizeof *s);
    strcpy(s->instance_type, NSBOX_DEFAULT_INSTANCE_TYPE);
    s->idle_timeout_seconds = 0;
    s->ttl_seconds = NSBOX_DEFAULT_TTL;
    strcpy(s->region, NSBOX_DEFAULT_REGION);
    s->net = NSBOX_NET_NONE;
    strcpy(s->image, NSBOX_DEFAULT_IMAGE);
    s->setup_script = NULL;
    s->setup_script_timeout_seconds = NSBOX_DEFAULT_SETUP_TIMEOUT;
    s->workspace[0] = '\0';
    s->supports_background_processes = true;
}

void nsbox_spec_free(struct nsbox_spec *s)
{
    if (!s)
        return;
    free(s->setup_script);
    s->setup_script = NULL;
    env_clear(s);
    nsbox_spec_bind_clear(s);
}

int nsbox_spec_copy(struct nsbox_spec *dst, const struct nsbox_spec *src, struct nsbox_err *e)
{
    if (src->n_env > NSBOX_MAX_ENV || src->n_hosts > NSBOX_MAX_HOSTS ||
        src->n_egress > NSBOX_MAX_CIDRS || src->n_bindings > NSBOX_MAX_BINDINGS)
        return invalid(e, "spec: too many hosts, egress entries or env variables");
    memcpy(dst, src, sizeof *dst);
    dst->setup_script = NULL;
    dst->n_env = 0;
    memset(dst->env, 0, sizeof dst->env);
    if (nsbox_spec_bind_copy(dst, src) < 0)
        goto nomem;
    if (src->setup_script && !(dst->setup_script = strdup(src->setup_script)))
        goto nomem;
    for (size_t i = 0; i < src->n_env; i++) {
        if (!(dst->env[i] = strdup(src->env[i])))
            goto nomem;
        dst->n_env = i + 1;
    }
    return 0;
nomem:
    nsbox_spec_free(dst);
    errno = ENOMEM;
    return nsbox_err_sys(e, "spec: copy");
}

static void spec_discard(struct nsbox_spec **p)
{
    if (*p) {
        nsbox_spec_free(*p);
        free(*p);
    }
}
#define cleanup_spec __attribute__((cleanup(spec_discard)))

/* Every change is made on a copy and committed whole, so a failed load or set leaves the
 * caller's spec exactly as it was (a CLI that reports the error and goes on, a supervisor
 * that refuses one request, must not run with half a spec). */
static struct nsbox_spec *spec_clone(const struct nsbox_spec *src, struct nsbox_err *e)
{
    struct nsbox_spec *t = malloc(sizeof *t);
    if (!t) {
        nsbox_err_sys(e, "spec");
        return NULL;
    }
    if (nsbox_spec_copy(t, src, e) < 0) {
        free(t);
        return NULL;
    }
    return t;
}

static void spec_commit(struct nsbox_spec *dst, struct nsbox_spec **tmp)
{
    nsbox_spec_free(dst);
    memcpy(dst, *tmp, sizeof *dst);
    free(*tmp);
    *tmp = NULL;
}

int nsbox_spec_from_json(struct nsbox_spec *s, const char *json, size_t len, struct nsbox_err *e)
{
    cleanup_cjson cJSON *root = NULL;
    if (nsbox_spec_json_parse_object(json, len, NSBOX_SPEC_JSON_MAX, &root, e) < 0)
        return nsbox_err_wrap(e, "spec");
    cleanup_spec struct nsbox_spec *t = spec_clone(s, e);
    if (!t)
        return -1;
    const cJSON *it, *limits = NULL;
    /* Keys are applied in document order, so a repeated key behaves as "the last one wins". */
    cJSON_ArrayForEach(it, root) {
        const struct spec_key *k = key_find(it->string);
        if (!k)
            return unknown_key(e, "key", it->string);
        if (k->kind == KEY_LIMITS)
            limits = it;
        else if (apply_json(t, k, it, e) < 0)
            return nsbox_err_wrap(e, "spec: key '%s'", k->name);
    }
    if (limits) {
        struct nsbox_limits l;
        if (json_limits(limits, &l, e) < 0 || check_limits_match(t, &l, e) < 0)
            return nsbox_err_wrap(e, "spec: key 'limits'");
        t->limits = l;
    }
    spec_commit(s, &t);
    return 0;
}

int nsbox_spec_set(struct nsbox_spec *s, const char *key, const char *value, struct nsbox_err *e)
{
    const struct spec_key *k = key_find(key);
    if (!k)
        return unknown_key(e, "option", key);
    if (!value)
        return invalid(e, "spec: option '%s': missing value", k->name);
    cleanup_spec struct nsbox_spec *t = spec_clone(s, e);
    if (!t)
        return -1;
    if (apply_text(t, k, value, e) < 0)
        return nsbox_err_wrap(e, "spec: option '%s'", k->name);
    spec_commit(s, &t);
    return 0;
}

/* ---- validation ----------------------------------------------------------------------------- */

static bool terminated(const char *buf, size_t n)
{
    return memchr(buf, '\0', n) != NULL;
}

/* The structure is public to the library: re-check what the setters guarantee, so that a
 * spec filled by hand cannot carry an out-of-range value or an unterminated string past here. */
static int check_fields(const struct nsbox_spec *s, struct nsbox_err *e)
{
    if (!terminated(s->instance_type, sizeof s->instance_type) ||
        !terminated(s->region, sizeof s->region) || !terminated(s->image, sizeof s->image) ||
        !terminated(s->workspace, sizeof s->workspace))
        return invalid(e, "spec: unterminated string field");
    for (size_t i = 0; i < NSBOX_ARRAY_LEN(keys); i++) {
        if (keys[i].kind != KEY_UINT)
            continue;
        uint64_t v = *uint_field((struct nsbox_spec *)s, &keys[i]);
        if (v < keys[i].min || v > keys[i].max)
            return invalid(e, "spec: key '%s': must be an integer between %" PRIu64
                           " and %" PRIu64, keys[i].name, keys[i].min, keys[i].max);
    }
    if (s->n_hosts > NSBOX_MAX_HOSTS || s->n_egress > NSBOX_MAX_CIDRS ||
        s->n_env > NSBOX_MAX_ENV)
        return invalid(e, "spec: too many hosts, egress entries or env variables");
    if (s->net != NSBOX_NET_NONE && s->net != NSBOX_NET_ALL && s->net != NSBOX_NET_ALLOW)
        return invalid(e, "spec: key 'network': unknown mode %d", (int)s->net);
    if (s->pull != NSBOX_PULL_DEFAULT && !nsbox_spec_pull_name(s->pull))
        return invalid(e, "spec: key 'pull': unknown policy %d", (int)s->pull);
    if (s->net == NSBOX_NET_ALLOW && s->n_hosts == 0)
        return invalid(e, "spec: key 'network': allow needs at least one host (use \"none\" to "
                       "block everything)");
    if (!region_valid(s->region))
        return invalid(e, "spec: key 'region': '%s' is not a region name", SHOW(s->region));
    return 0;
}

int nsbox_spec_validate(struct nsbox_spec *s, struct nsbox_err *e)
{
    if (check_fields(s, e) < 0)
        return -1;
    const struct nsbox_instance_type *t = nsbox_spec_types_find(s->instance_type);
    if (!t) {
        char names[512];
        nsbox_spec_types_names(names, sizeof names);
        return invalid(e, "spec: key 'instance_type': unknown type '%s' (valid: %s)",
                       SHOW(s->instance_type), names);
    }
    /* Only nl-north-1 can block traffic (docs/spec.md); elsewhere anything but all() would be
     * a policy the sandbox claims and does not enforce. The message is the hosted service's,
     * word for word, so that code handling it there handles it here. Egress entries are extra
     * addresses on top of network, so with all() they add nothing and are harmless. */
    if (strcmp(s->region, NSBOX_DEFAULT_REGION) != 0 && s->net != NSBOX_NET_ALL)
        return nsbox_err_set(e, NSBOX_E_POLICY, 0,
                             "This network policy is not supported in region '%s'; it is "
                             "supported only in nl-north-1. Pass network=Network.all() or a "
                             "supported region.",
                             s->region);
    if (nsbox_spec_bind_check(s, e) < 0)
        return -1;
    s->limits = t->limits;
    return 0;
}

bool nsbox_spec_equal(const struct nsbox_spec *a, const struct nsbox_spec *b)
{
    if (strcmp(a->instance_type, b->instance_type) || strcmp(a->region, b->region) ||
        strcmp(a->image, b->image) || strcmp(a->workspace, b->workspace) ||
        memcmp(&a->limits, &b->limits, sizeof a->limits) ||
        a->idle_timeout_seconds != b->idle_timeout_seconds ||
        a->ttl_seconds != b->ttl_seconds ||
        a->setup_script_timeout_seconds != b->setup_script_timeout_seconds || a->net != b->net ||
        a->pull != b->pull ||
        a->supports_background_processes != b->supports_background_processes ||
        a->n_hosts != b->n_hosts || a->n_egress != b->n_egress || a->n_env != b->n_env ||
        a->n_hosts > NSBOX_MAX_HOSTS || a->n_egress > NSBOX_MAX_CIDRS || a->n_env > NSBOX_MAX_ENV)
        return false;
    if (!a->setup_script != !b->setup_script ||
        (a->setup_script && strcmp(a->setup_script, b->setup_script)))
        return false;
    for (size_t i = 0; i < a->n_hosts; i++)
        if (a->hosts[i].port != b->hosts[i].port || strcmp(a->hosts[i].name, b->hosts[i].name))
            return false;
    for (size_t i = 0; i < a->n_egress; i++)
        if (a->egress[i].family != b->egress[i].family ||
            a->egress[i].prefix != b->egress[i].prefix ||
            memcmp(a->egress[i].addr, b->egress[i].addr, sizeof a->egress[i].addr))
            return false;
    for (size_t i = 0; i < a->n_env; i++)
        if (strcmp(a->env[i], b->env[i]))
            return false;
    return nsbox_spec_bind_equal(a, b);
}

