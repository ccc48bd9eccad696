/* The warm pool's pure decisions (see pool.h). */
#define _GNU_SOURCE
#include "pool.h"
#include "cleanup.h"
#include "cfgsection.h"
#include "cleanup_cjson.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void nsbox_pool_config_init(struct nsbox_pool_config *c)
{
    c->size = NSBOX_POOL_AUTO_SIZE;
    c->on_repeat = true;
    c->ttl_seconds = NSBOX_POOL_AUTO_TTL;
}

static int get_uint(const cJSON *it, uint64_t min, uint64_t max, uint64_t *out)
{
    if (!cJSON_IsNumber(it))
        return -1;
    double v = it->valuedouble;
    /* the range first: converting a negative or huge double to an integer is undefined */
    if (!(v >= (double)min && v <= (double)max) || v != (double)(uint64_t)v)
        return -1;
    *out = (uint64_t)v;
    return 0;
}

int nsbox_pool_config_from_json(const cJSON *root, struct nsbox_pool_config *c,
                                struct nsbox_err *e)
{
    const cJSON *pool;
    if (nsbox_cfgsection_find(root, "pool", "{\"size\": 1}", &pool, e) < 0)
        return -1;
    struct nsbox_pool_config out = *c;
    bool ttl_given = false;
    const cJSON *it;
    cJSON_ArrayForEach(it, pool)
    {
        uint64_t v;
        if (!strcmp(it->string, "size")) {
            if (cJSON_IsString(it) && !strcmp(it->valuestring, "auto")) {
                out.size = NSBOX_POOL_AUTO_SIZE;
                out.on_repeat = true;
            } else if (get_uint(it, 0, NSBOX_POOL_MAX_SIZE, &v) < 0) {
                return nsbox_cfgsection_bad(
                    e, "pool", "size", "must be \"auto\" or an integer from 0 (no pool) to 16");
            } else {
                out.size = (unsigned)v;
                out.on_repeat = false;
            }
        } else if (!strcmp(it->string, "ttl_seconds")) {
            if (get_uint(it, 1, 86400, &v) < 0)
                return nsbox_cfgsection_bad(e, "pool", "ttl_seconds",
                                            "must be an integer from 1 to 86400");
            out.ttl_seconds = v;
            ttl_given = true;
        } else {
            return nsbox_cfgsection_unknown(e, "pool", it->string, "size, ttl_seconds");
        }
    }
    if (!ttl_given)
        out.ttl_seconds = out.on_repeat ? NSBOX_POOL_AUTO_TTL : NSBOX_POOL_DEFAULT_TTL;
    *c = out;
    return 0;
}

bool nsbox_pool_spec_poolable(const struct nsbox_spec *s)
{
    /* an always-pull must reach the registry: a pooled sandbox holds the image it had; a
     * binding's secret would wait in a pooled sandbox's helper for a run that may never come */
    return s->workspace[0] == '\0' && !s->setup_script && s->pull != NSBOX_PULL_ALWAYS &&
           !s->n_bindings;
}

int nsbox_pool_member_spec(const struct nsbox_spec *s, uint64_t ttl_seconds,
                           struct nsbox_spec *dst, struct nsbox_err *e)
{
    if (!nsbox_pool_spec_poolable(s))
        return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL,
                             "a run with --workspace, a setup script, --pull always or header "
                             "bindings cannot use the pool");
    *dst = *s;
    /* per-command: the run passes them with its command */
    dst->n_env = 0;
    memset(dst->env, 0, sizeof dst->env);
    dst->setup_script = NULL;
    dst->idle_timeout_seconds = 0;
    dst->ttl_seconds = ttl_seconds;
    return 0;
}

/* FNV-1a, 64 bits: a name for a set of settings, not a defence (the pool directory is the
 * user's own, mode 0700). */
static uint64_t fnv1a(uint64_t h, const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)p[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

int nsbox_pool_key(const struct nsbox_spec *s, const char *extra, size_t extra_len,
                   char out[NSBOX_POOL_KEY_LEN + 1])
{
    struct nsbox_spec k = *s;
    k.n_env = 0;
    memset(k.env, 0, sizeof k.env);
    k.idle_timeout_seconds = 0;
    k.ttl_seconds = 0;
    k.pull = NSBOX_PULL_DEFAULT; /* how the image came is not what the sandbox is */
    cleanup_cjson cJSON *o = nsbox_spec_to_cjson(&k);
    cleanup_free char *text = o ? cJSON_PrintUnformatted(o) : NULL;
    if (!text)
        return -1;
    uint64_t h = fnv1a(0xcbf29ce484222325ULL, text, strlen(text));
    h = fnv1a(h, "\0", 1);
    if (extra)
        h = fnv1a(h, extra, extra_len);
    snprintf(out, NSBOX_POOL_KEY_LEN + 1, "%016llx", (unsigned long long)h);
    return 0;
}

static bool all_hex(const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!((p[i] >= '0' && p[i] <= '9') || (p[i] >= 'a' && p[i] <= 'f')))
            return false;
    return true;
}

bool nsbox_pool_entry_parse(const char *name, char key[NSBOX_POOL_KEY_LEN + 1],
                            char id[NSBOX_POOL_ID_LEN + 1])
{
    if (strlen(name) != NSBOX_POOL_KEY_LEN + 1 + NSBOX_POOL_ID_LEN ||
        name[NSBOX_POOL_KEY_LEN] != '-' || !all_hex(name, NSBOX_POOL_KEY_LEN) ||
        !all_hex(name + NSBOX_POOL_KEY_LEN + 1, NSBOX_POOL_ID_LEN))
        return false;
    memcpy(key, name, NSBOX_POOL_KEY_LEN);
    key[NSBOX_POOL_KEY_LEN] = '\0';
    memcpy(id, name + NSBOX_POOL_KEY_LEN + 1, NSBOX_POOL_ID_LEN);
    id[NSBOX_POOL_ID_LEN] = '\0';
    return true;
}

bool nsbox_pool_claim_parse(const char *name, char key[NSBOX_POOL_KEY_LEN + 1],
                            char id[NSBOX_POOL_ID_LEN + 1])
{
    size_t n = strlen(NSBOX_POOL_CLAIM);
    return !strncmp(name, NSBOX_POOL_CLAIM, n) && nsbox_pool_entry_parse(name + n, key, id);
}

bool nsbox_pool_key_file(const char *name, const char *suffix, char key[NSBOX_POOL_KEY_LEN + 1])
{
    if (strlen(name) != NSBOX_POOL_KEY_LEN + strlen(suffix) || !all_hex(name, NSBOX_POOL_KEY_LEN) ||
        strcmp(name + NSBOX_POOL_KEY_LEN, suffix) != 0)
        return false;
    memcpy(key, name, NSBOX_POOL_KEY_LEN);
    key[NSBOX_POOL_KEY_LEN] = '\0';
    return true;
}

void nsbox_pool_format_age(char *out, size_t n, int64_t seconds)
{
    if (seconds <= 0)
        snprintf(out, n, "just now");
    else if (seconds < 120)
        snprintf(out, n, "%lld s ago", (long long)seconds);
    else if (seconds < 2 * 3600)
        snprintf(out, n, "%lld min ago", (long long)(seconds / 60));
    else if (seconds < 2 * 86400)
        snprintf(out, n, "%lld h ago", (long long)(seconds / 3600));
    else
        snprintf(out, n, "%lld days ago", (long long)(seconds / 86400));
}
