/* The spec and JSON: reading bounded values from JSON input (spec.c's options, spec_types.c's
 * config), and rendering a spec as JSON. Pure. */
#include "spec_impl.h"
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

/* ---- JSON input helpers --------------------------------------------------------------------- */

static int hex_value(char c)
{
    if (is_digit(c))
        return c - '0';
    c = to_lower(c);
    return (c >= 'a' && c <= 'f') ? c - 'a' + 10 : -1;
}

/* cJSON turns "\u0000" into a NUL inside the decoded string and keeps going, so
 * "/good\u0000/../evil" would silently become "/good"; a \u escape with non-hex digits decodes
 * to 0 as well, and a raw NUL byte cuts the string the same way. JSON text has no reason to
 * carry any of them, so all are refused before parsing. Backslashes are only legal inside
 * strings, so skipping each escaped character is enough to tell "\\u0000" (a backslash, then
 * text) from "\u0000". */
int nsbox_spec_json_check_nul(const char *json, size_t len, struct nsbox_err *e)
{
    for (size_t i = 0; i < len; i++) {
        if (json[i] == '\0')
            return invalid(e, "contains a NUL byte");
        if (json[i] != '\\' || i + 1 >= len)
            continue;
        if (json[i + 1] == 'u') {
            unsigned v = 0;
            if (i + 5 >= len) /* cut short: the parse fails at the end and says the text ended */
                continue;
            for (size_t k = i + 2; k < i + 6; k++) {
                int h = hex_value(json[k]);
                if (h < 0)
                    return invalid(e, "invalid \\u escape at byte %zu", i);
                v = v * 16 + (unsigned)h;
            }
            if (v == 0)
                return invalid(e, "contains a NUL character (\\u0000) in a string");
        }
        i++;
    }
    return 0;
}

static bool is_json_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

enum json_end { JSON_END_CLOSED, JSON_END_IN_BRACKETS, JSON_END_IN_STRING };

/* Whether the text stops inside a value: in a string (*quote its opening quote), or with more
 * brackets opened than closed. The bracket kinds are not matched: a mismatch is an error cJSON
 * places itself. */
static enum json_end json_end_state(const char *json, size_t len, size_t *quote)
{
    size_t depth = 0;
    bool in_string = false;
    for (size_t i = 0; i < len; i++) {
        if (in_string) {
            if (json[i] == '\\')
                i++;
            else if (json[i] == '"')
                in_string = false;
        } else if (json[i] == '"') {
            in_string = true;
            *quote = i;
        } else if (json[i] == '{' || json[i] == '[') {
            depth++;
        } else if ((json[i] == '}' || json[i] == ']') && depth > 0) {
            depth--;
        }
    }
    return in_string ? JSON_END_IN_STRING : depth ? JSON_END_IN_BRACKETS : JSON_END_CLOSED;
}

/* Whether cJSON failed, at byte at, only because the text ended. It places a failure in a string
 * just after its opening quote. At the end it steps back to the last byte ("{" fails "near byte
 * 0"), where the failure may also be that byte's own: given one more byte (a space), a text
 * that only ended fails on that byte, one whose last byte is wrong fails where it did. The
 * scanner's state cannot tell them apart: "[1,2" and "[1 2" both end in brackets, cJSON failing
 * at their last byte, and only the first ended early. */
static bool json_ended_early(const char *json, size_t len, size_t at)
{
    size_t quote = 0, last = len;
    enum json_end state = json_end_state(json, len, &quote);
    if (state == JSON_END_IN_STRING && at == quote + 1)
        return true;
    while (last > 0 && is_json_space(json[last - 1]))
        last--;
    if (state == JSON_END_CLOSED || at + 1 < last)
        return false;
    cleanup_free char *more = malloc(len + 1);
    if (!more)
        return false;
    memcpy(more, json, len);
    more[len] = ' ';
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(more, len + 1, &end, 0);
    cJSON_Delete(root);
    return !root && end && (size_t)(end - more) == len;
}

int nsbox_spec_json_parse_object(const char *json, size_t len, size_t max, cJSON **out,
                             struct nsbox_err *e)
{
    const char *end = NULL;
    if (!json || len == 0)
        return invalid(e, "empty input (expected a JSON object)");
    if (len > max)
        return invalid(e, "larger than %zu bytes", max);
    if (nsbox_spec_json_check_nul(json, len, e) < 0)
        return -1;
    cJSON *root = cJSON_ParseWithLengthOpts(json, len, &end, 0);
    if (!root) {
        size_t at = (end && end >= json && end <= json + len) ? (size_t)(end - json) : 0;
        if (json_ended_early(json, len, at)) {
            size_t first = 0;
            while (first < len && is_json_space(json[first]))
                first++;
            return invalid(e, "invalid JSON: the text ends before its %s does, after %zu byte%s: "
                              "is it whole?",
                           first < len && json[first] == '{' ? "object" : "value", len,
                           len == 1 ? "" : "s");
        }
        return invalid(e, "invalid JSON near byte %zu", at);
    }
    /* cJSON stops after the first value; anything but whitespace after it is a second
     * document or garbage, which a strict reader must not ignore. */
    for (const char *p = end; p && p < json + len; p++)
        if (!is_json_space(*p)) {
            cJSON_Delete(root);
            return invalid(e, "unexpected text after the JSON value at byte %zu",
                           (size_t)(p - json));
        }
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return invalid(e, "must be a JSON object");
    }
    *out = root;
    return 0;
}

/* Integral, in range. cJSON keeps numbers as doubles; every range here is far below 2^53, so
 * the comparison and the cast are exact. 2.0 is accepted as 2, 2.5 is not. */
int nsbox_spec_json_uint(const cJSON *it, uint64_t min, uint64_t max, uint64_t *out,
                     struct nsbox_err *e)
{
    double d = cJSON_IsNumber(it) ? it->valuedouble : -1;
    if (!(d >= (double)min && d <= (double)max) || (double)(uint64_t)d != d)
        return invalid(e, "must be an integer between %" PRIu64 " and %" PRIu64, min, max);
    *out = (uint64_t)d;
    return 0;
}

int nsbox_spec_json_pids(const cJSON *it, uint64_t *out, struct nsbox_err *e)
{
    if (nsbox_spec_json_uint(it, PIDS_MIN, PIDS_MAX, out, e) < 0)
        return invalid(e, "must be an integer between %u and %u (the sandbox's init counts: "
                          "1 would leave no process for a command)",
                       PIDS_MIN, PIDS_MAX);
    return 0;
}

int nsbox_spec_json_text_uint(const char *v, uint64_t min, uint64_t max, uint64_t *out,
                     struct nsbox_err *e)
{
    uint64_t x = 0;
    if (!nsbox_spec_parse_decimal(v, strlen(v), &x) || x < min || x > max)
        return invalid(e, "must be an integer between %" PRIu64 " and %" PRIu64, min, max);
    *out = x;
    return 0;
}

/* Memory and disk: bytes as a number, or a size string. */
int nsbox_spec_json_bytes(const cJSON *it, uint64_t *out, struct nsbox_err *e)
{
    uint64_t v = 0;
    if (cJSON_IsString(it)) {
        if (nsbox_spec_parse_size(it->valuestring, &v, e) < 0)
            return -1;
    } else if (nsbox_spec_json_uint(it, 0, BYTES_MAX, &v, e) < 0) {
        return invalid(e, "must be a size (\"4GiB\") or a number of bytes");
    }
    if (v < BYTES_MIN || v > BYTES_MAX)
        return invalid(e, "must be between 1MiB and 1PiB");
    *out = v;
    return 0;
}


/* ---- rendering ------------------------------------------------------------------------------ */

static bool add_limits(cJSON *o, const struct nsbox_limits *l)
{
    cJSON *lim = cJSON_AddObjectToObject(o, "limits");
    return lim && cJSON_AddNumberToObject(lim, "cpus", l->cpus) &&
           cJSON_AddNumberToObject(lim, "memory_bytes", (double)l->memory_bytes) &&
           cJSON_AddNumberToObject(lim, "pids", (double)l->pids) &&
           cJSON_AddNumberToObject(lim, "disk_bytes", (double)l->disk_bytes);
}

static bool add_network(cJSON *o, const struct nsbox_spec *s)
{
    if (s->net != NSBOX_NET_ALLOW)
        return cJSON_AddStringToObject(o, "network", s->net == NSBOX_NET_ALL ? "all" : "none");
    cJSON *net = cJSON_AddObjectToObject(o, "network");
    cJSON *allow = cJSON_AddArrayToObject(net, "allow");
    if (!allow)
        return false;
    for (size_t i = 0; i < s->n_hosts && i < NSBOX_MAX_HOSTS; i++) {
        char buf[NSBOX_HOSTNAME_MAX + 16];
        cJSON *str;
        if (nsbox_spec_net_host_format(&s->hosts[i], buf, sizeof buf) < 0 ||
            !(str = cJSON_CreateString(buf)))
            return false;
        cJSON_AddItemToArray(allow, str);
    }
    return true;
}

static bool add_egress(cJSON *o, const struct nsbox_spec *s)
{
    cJSON *arr = cJSON_AddArrayToObject(o, "egress");
    if (!arr)
        return false;
    for (size_t i = 0; i < s->n_egress && i < NSBOX_MAX_CIDRS; i++) {
        char buf[INET6_ADDRSTRLEN + 8];
        cJSON *str;
        if (nsbox_spec_net_cidr_format(&s->egress[i], buf, sizeof buf) < 0 ||
            !(str = cJSON_CreateString(buf)))
            return false;
        cJSON_AddItemToArray(arr, str);
    }
    return true;
}

static bool add_env(cJSON *o, const struct nsbox_spec *s)
{
    cJSON *env = cJSON_AddObjectToObject(o, "env");
    if (!env)
        return false;
    for (size_t i = 0; i < s->n_env && i < NSBOX_MAX_ENV; i++) {
        const char *eq = strchr(s->env[i], '=');
        if (!eq)
            continue;
        cleanup_free char *name = strndup(s->env[i], (size_t)(eq - s->env[i]));
        if (!name || !cJSON_AddStringToObject(env, name, eq + 1))
            return false;
    }
    return true;
}

struct cJSON *nsbox_spec_to_cjson(const struct nsbox_spec *s)
{
    cleanup_cjson cJSON *o = cJSON_CreateObject();
    if (!o || !cJSON_AddStringToObject(o, "instance_type", s->instance_type))
        return NULL;
    /* Resolved limits when validate() ran, else what the table says now; an unknown type has
     * none, and then the key is left out rather than invented. */
    const struct nsbox_instance_type *t = nsbox_spec_types_find(s->instance_type);
    const struct nsbox_limits *l = s->limits.cpus ? &s->limits : t ? &t->limits : NULL;
    if (l && !add_limits(o, l))
        return NULL;
    if (!cJSON_AddNumberToObject(o, "idle_timeout_seconds", (double)s->idle_timeout_seconds) ||
        !cJSON_AddNumberToObject(o, "ttl_seconds", (double)s->ttl_seconds) ||
        !cJSON_AddStringToObject(o, "region", s->region) || !add_network(o, s) ||
        !add_egress(o, s) || !cJSON_AddStringToObject(o, "image", s->image))
        return NULL;
    /* only when said: a spec that does not say leaves it to NSBOX_PULL, also once re-read */
    const char *pull = nsbox_spec_pull_name(s->pull);
    if (pull && !cJSON_AddStringToObject(o, "pull", pull))
        return NULL;
    if (!(s->setup_script ? cJSON_AddStringToObject(o, "setup_script", s->setup_script)
                          : cJSON_AddNullToObject(o, "setup_script")))
        return NULL;
    if (!cJSON_AddNumberToObject(o, "setup_script_timeout_seconds",
                                 (double)s->setup_script_timeout_seconds) ||
        !cJSON_AddStringToObject(o, "workspace", s->workspace) || !add_env(o, s) ||
        !cJSON_AddBoolToObject(o, "supports_background_processes",
                               s->supports_background_processes) ||
        !nsbox_spec_bind_render(o, s))
        return NULL;
    return nsbox_steal_ptr(&o);
}

char *nsbox_spec_to_json(const struct nsbox_spec *s)
{
    cleanup_cjson cJSON *o = nsbox_spec_to_cjson(s);
    return o ? cJSON_Print(o) : NULL;
}

