/* exec's process.json and update's resources (ociproc.h), read as parts of a config.json; the
 * socket activation environment nsbox-oci is started with. */
#include "ociproc.h"
#include "cleanup.h"
#include "cleanup_cjson.h"
#include "spec.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* "config.json: key 'process.args': ..." -> "<doc>: key 'args': ..." (strip drops the part of
 * the key that the wrapping added). */
static int rename_error(struct nsbox_err *e, const char *doc, const char *strip)
{
    char msg[sizeof e->msg];
    const char *rest = e->msg;
    if (!strncmp(rest, "config.json: ", 13))
        rest += 13;
    char key[64];
    snprintf(key, sizeof key, "key '%s", strip);
    if (!strncmp(rest, key, strlen(key))) {
        snprintf(msg, sizeof msg, "%s: key '%s", doc, rest + strlen(key));
    } else
        snprintf(msg, sizeof msg, "%s: %s", doc, rest);
    snprintf(e->msg, sizeof e->msg, "%s", msg);
    return -1;
}

/* A config.json around obj (placed at path: "process", or "linux" then "resources") and the
 * parse of it. obj is moved into the document. */
static int parse_wrapped(cJSON *obj, const char *outer, const char *inner, struct nsbox_ocispec *c,
                         struct nsbox_err *e)
{
    cleanup_cjson cJSON *doc = cJSON_CreateObject();
    cJSON *root = doc ? cJSON_AddObjectToObject(doc, "root") : NULL, *proc = NULL;
    if (!root || !cJSON_AddStringToObject(doc, "ociVersion", "1.0.2") ||
        !cJSON_AddStringToObject(root, "path", "rootfs")) {
        cJSON_Delete(obj);
        return nsbox_err_set(e, NSBOX_E_NOMEM, ENOMEM, "out of memory");
    }
    cJSON *at = doc;
    if (inner) {
        at = cJSON_AddObjectToObject(doc, outer);
        if (!at || !(proc = cJSON_AddObjectToObject(doc, "process")) ||
            !cJSON_AddItemToObject(proc, "args",
                                   cJSON_CreateStringArray((const char *[]){"-"}, 1))) {
            cJSON_Delete(obj);
            return nsbox_err_set(e, NSBOX_E_NOMEM, ENOMEM, "out of memory");
        }
    }
    if (!cJSON_AddItemToObject(at, inner ? inner : outer, obj)) {
        cJSON_Delete(obj);
        return nsbox_err_set(e, NSBOX_E_NOMEM, ENOMEM, "out of memory");
    }
    cleanup_free char *text = cJSON_PrintUnformatted(doc);
    if (!text)
        return nsbox_err_set(e, NSBOX_E_NOMEM, ENOMEM, "out of memory");
    return nsbox_ocispec_parse(text, strlen(text), c, e);
}

static cJSON *parse_object(const char *text, size_t len, const char *doc, struct nsbox_err *e)
{
    if (len > NSBOX_OCISPEC_JSON_MAX) {
        nsbox_err_invalid(e, "%s: larger than %u bytes", doc, NSBOX_OCISPEC_JSON_MAX);
        return NULL;
    }
    /* before cJSON, which cuts a string at a NUL, raw or escaped, and reads on */
    struct nsbox_err nul;
    if (nsbox_spec_json_check_nul(text, len, &nul) < 0) {
        nsbox_err_invalid(e, "%s: %s", doc, nul.msg);
        return NULL;
    }
    cJSON *obj = cJSON_ParseWithLength(text, len);
    if (!cJSON_IsObject(obj)) {
        cJSON_Delete(obj);
        nsbox_err_invalid(e, "%s: not a JSON object", doc);
        return NULL;
    }
    return obj;
}

int nsbox_ociproc_parse_process(const char *text, size_t len, struct nsbox_ocispec *c,
                                struct nsbox_err *e)
{
    nsbox_ocispec_init(c);
    nsbox_err_clear(e);
    cJSON *obj = parse_object(text, len, "process.json", e);
    if (!obj)
        return -1;
    if (parse_wrapped(obj, "process", NULL, c, e) < 0)
        return rename_error(e, "process.json", "process.");
    return 0;
}

/* A value that leaves its limit as it is: null, and, as runc's update reads them, 0 and "".
 * Docker's `docker update --pids-limit N` sends every limit, those not given as 0. */
static bool leaves(const cJSON *v)
{
    return cJSON_IsNull(v) || (cJSON_IsNumber(v) && v->valuedouble == 0) ||
           (cJSON_IsString(v) && !*v->valuestring);
}

/* A member's limit: absent or a value that leaves it does not name it. */
static bool names(const cJSON *res, const char *obj, const char *key)
{
    const cJSON *o = cJSON_GetObjectItemCaseSensitive(res, obj);
    const cJSON *v = cJSON_IsObject(o) ? cJSON_GetObjectItemCaseSensitive(o, key) : NULL;
    return v && !leaves(v);
}

int nsbox_ociproc_parse_resources(const char *text, size_t len, struct nsbox_ociproc_resources *r,
                                  struct nsbox_err *e)
{
    memset(r, 0, sizeof *r);
    nsbox_err_clear(e);
    cJSON *obj = parse_object(text, len, "resources", e);
    if (!obj)
        return -1;
    r->has_memory = names(obj, "memory", "limit");
    r->has_quota = names(obj, "cpu", "quota");
    r->has_cpu = r->has_quota || names(obj, "cpu", "period");
    r->has_pids = names(obj, "pids", "limit");
    /* what else it names: a limit nsbox does not change */
    static const char *const known[] = {"memory.limit", "memory.swap", "cpu.quota",
                                        "cpu.period",   "pids.limit",  "devices"};
    const cJSON *it, *sub;
    cJSON_ArrayForEach(it, obj)
    {
        if (!strcmp(it->string, "devices") || cJSON_IsNull(it))
            continue;
        if (!cJSON_IsObject(it)) {
            r->other = true;
            continue;
        }
        cJSON_ArrayForEach(sub, it)
        {
            char key[128];
            snprintf(key, sizeof key, "%s.%s", it->string, sub->string);
            bool k = leaves(sub);
            for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
                k = k || !strcmp(key, known[i]);
            r->other = r->other || !k;
        }
    }
    static struct nsbox_ocispec c; /* large: the mounts */
    if (parse_wrapped(obj, "linux", "resources", &c, e) < 0)
        return rename_error(e, "resources", "linux.resources.");
    if (c.all_devices) {
        nsbox_ocispec_free(&c);
        return nsbox_err_set(e, NSBOX_E_POLICY, EPERM,
                             "resources: key 'devices': allowing every device of the host is "
                             "not supported (a privileged container)");
    }
    if (c.memory.swap == -1) {
        nsbox_ocispec_free(&c);
        return nsbox_err_set(e, NSBOX_E_POLICY, EPERM,
                             "resources: key 'memory.swap': -1 (unlimited swap) is not given: "
                             "nsbox-oci bounds a container's memory and swap; give memory plus "
                             "swap in bytes (--memory-swap N)");
    }
    r->has_swap = c.memory.swap > 0;
    r->swap_bytes = r->has_swap ? (uint64_t)c.memory.swap : 0;
    r->memory_bytes = c.memory_limit > 0 ? (uint64_t)c.memory_limit : 0;
    r->cpu_quota_us = c.cpu_quota > 0 ? (uint64_t)c.cpu_quota : 0;
    r->cpu_period_us = c.cpu_period;
    r->pids = c.pids_limit > 0 ? (uint64_t)c.pids_limit : 0;
    nsbox_ocispec_free(&c);
    return 0;
}

/* A decimal number without sign, spaces or excess; false for anything else. */
static bool decimal(const char *s, unsigned long *v)
{
    if (!s || s[0] < '0' || s[0] > '9')
        return false;
    char *end;
    errno = 0;
    *v = strtoul(s, &end, 10);
    return !*end && !errno;
}

int nsbox_ociproc_listen_fds(const char *listen_pid, const char *listen_fds, long self,
                             unsigned max, unsigned *n, struct nsbox_err *e)
{
    *n = 0;
    unsigned long pid, v;
    if (!listen_fds || !decimal(listen_pid, &pid) || pid != (unsigned long)self)
        return 0; /* systemd's rule: not passed to this process */
    if (!decimal(listen_fds, &v) || v > max)
        return nsbox_err_invalid(e,
                                 "LISTEN_FDS '%s' (with LISTEN_PID this process's, %ld): give "
                                 "the number of descriptors from 3 up that socket activation "
                                 "passes on, 0 to %u, or unset LISTEN_FDS",
                                 NSBOX_SHOW(listen_fds), self, max);
    *n = (unsigned)v;
    return 0;
}

/* Sets name=value in c's environment: in place of an entry of that name, or at its end. */
static int set_env(struct nsbox_ocispec *c, const char *name, const char *value,
                   struct nsbox_err *e)
{
    char *kv;
    if (asprintf(&kv, "%s=%s", name, value) < 0)
        return nsbox_err_set(e, NSBOX_E_NOMEM, ENOMEM, "out of memory");
    size_t len = strlen(name), i = 0;
    while (i < c->n_env && !(!strncmp(c->env[i], name, len) && c->env[i][len] == '='))
        i++;
    if (i == NSBOX_OCISPEC_ENV_MAX) {
        free(kv);
        return nsbox_err_invalid(e,
                                 "config.json: key 'process.env': no room for %s (socket "
                                 "activation) among %u entries: give fewer",
                                 name, NSBOX_OCISPEC_ENV_MAX);
    }
    if (i == c->n_env)
        c->env[++c->n_env] = NULL;
    else
        free(c->env[i]);
    c->env[i] = kv;
    return 0;
}

int nsbox_ociproc_listen_env(struct nsbox_ocispec *c, unsigned n, struct nsbox_err *e)
{
    char num[16];
    snprintf(num, sizeof num, "%u", n);
    return set_env(c, "LISTEN_FDS", num, e) < 0 ? -1 : set_env(c, "LISTEN_PID", "1", e);
}

/* The name of the lowest capability in mask (not 0). */
static const char *cap_of(uint64_t mask, char *buf, size_t n)
{
    int cap = __builtin_ctzll(mask);
    const char *name = nsbox_ocispec_cap_name(cap);
    if (name)
        return name;
    snprintf(buf, n, "capability %d", cap);
    return buf;
}

int nsbox_ociproc_check_caps(const uint64_t *want, const uint64_t *have, struct nsbox_err *e)
{
    static const struct {
        int set, within; /* the process's set, and the container's it must fit */
    } limits[] = {{NSBOX_OCI_CAPS_BOUNDING, NSBOX_OCI_CAPS_BOUNDING},
                  {NSBOX_OCI_CAPS_PERMITTED, NSBOX_OCI_CAPS_PERMITTED},
                  {NSBOX_OCI_CAPS_EFFECTIVE, NSBOX_OCI_CAPS_PERMITTED},
                  {NSBOX_OCI_CAPS_AMBIENT, NSBOX_OCI_CAPS_PERMITTED}};
    static const char *const names[] = {[NSBOX_OCI_CAPS_BOUNDING] = "bounding",
                                        [NSBOX_OCI_CAPS_EFFECTIVE] = "effective",
                                        [NSBOX_OCI_CAPS_INHERITABLE] = "inheritable",
                                        [NSBOX_OCI_CAPS_PERMITTED] = "permitted",
                                        [NSBOX_OCI_CAPS_AMBIENT] = "ambient"};
    char buf[32];
    for (size_t i = 0; i < NSBOX_ARRAY_LEN(limits); i++) {
        uint64_t extra = want[limits[i].set] & ~have[limits[i].within];
        if (!extra)
            continue;
        const char *cap = cap_of(extra, buf, sizeof buf);
        return nsbox_err_set(e, NSBOX_E_POLICY, EPERM,
                             "process.capabilities.%s: %s is not in the container's %s set: an "
                             "exec'd process has at most the container's capabilities "
                             "(nsbox-oci forks it from the container's init). Ask for fewer, "
                             "or give the container %s in config.json's process.capabilities",
                             names[limits[i].set], cap, names[limits[i].within], cap);
    }
    uint64_t extra = want[NSBOX_OCI_CAPS_EFFECTIVE] & ~want[NSBOX_OCI_CAPS_PERMITTED];
    if (extra)
        return nsbox_err_invalid(e,
                                 "process.capabilities.effective: %s is not in the process's "
                                 "permitted set (the kernel's rule): add it to permitted, or "
                                 "leave it out",
                                 cap_of(extra, buf, sizeof buf));
    const uint64_t *h = have;
    extra = want[NSBOX_OCI_CAPS_INHERITABLE] &
            ~(h[NSBOX_OCI_CAPS_INHERITABLE] |
              (h[NSBOX_OCI_CAPS_PERMITTED] & want[NSBOX_OCI_CAPS_BOUNDING]));
    if (extra) {
        const char *cap = cap_of(extra, buf, sizeof buf);
        return nsbox_err_set(e, NSBOX_E_POLICY, EPERM,
                             "process.capabilities.inheritable: %s is neither in the "
                             "container's inheritable set nor in its permitted set and the "
                             "process's bounding set (the kernel's rule for a process that "
                             "raises one without CAP_SETPCAP): ask for fewer, or give the "
                             "container %s",
                             cap, cap);
    }
    return 0;
}
