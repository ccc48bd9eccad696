/* config.json of an OCI bundle, read into struct nsbox_ocispec (ocispec.h). */
#include "ocispec.h"
#include "ocispec_impl.h"
#include "cleanup.h"
#include "cleanup_cjson.h"
#include "spec.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/resource.h>

static const char *const ns_names[] = {
    [NSBOX_OCI_NS_PID] = "pid",     [NSBOX_OCI_NS_NETWORK] = "network",
    [NSBOX_OCI_NS_MOUNT] = "mount", [NSBOX_OCI_NS_IPC] = "ipc",
    [NSBOX_OCI_NS_UTS] = "uts",     [NSBOX_OCI_NS_USER] = "user",
    [NSBOX_OCI_NS_CGROUP] = "cgroup", [NSBOX_OCI_NS_TIME] = "time",
};

const char *nsbox_ocispec_ns_name(enum nsbox_ocispec_ns t)
{
    return (size_t)t < sizeof ns_names / sizeof ns_names[0] ? ns_names[t] : "?";
}

void nsbox_ocispec_init(struct nsbox_ocispec *c)
{
    memset(c, 0, sizeof *c);
    strcpy(c->cwd, "/");
    c->memory_limit = c->cpu_quota = c->pids_limit = -1;
    c->umask = -1;
    nsbox_ocicgroup_memory_init(&c->memory);
}

static void free_strv(char **v)
{
    for (size_t i = 0; v && v[i]; i++)
        free(v[i]);
    free(v);
}

void nsbox_ocispec_hooks_free(struct nsbox_ocispec_hooks *h)
{
    for (size_t i = 0; i < h->n; i++) {
        free_strv(h->h[i].args);
        free_strv(h->h[i].env);
        h->h[i].args = h->h[i].env = NULL;
    }
    h->n = 0;
}

void nsbox_ocispec_free(struct nsbox_ocispec *c)
{
    for (size_t i = 0; c->args && i < c->n_args; i++)
        free(c->args[i]);
    free(c->args);
    c->args = NULL;
    c->n_args = 0;
    for (size_t i = 0; i < c->n_env; i++)
        free(c->env[i]);
    c->env[0] = NULL;
    c->n_env = 0;
    free(c->annotations);
    c->annotations = NULL;
    free(c->hooks_json);
    c->hooks_json = NULL;
    nsbox_ocispec_hooks_free(&c->hooks);
    nsbox_seccomp_profile_free(&c->seccomp);
    free(c->seccomp_text);
    c->seccomp_text = NULL;
}

int nsbox_ocispec_bad(struct nsbox_err *e, const char *key, const char *what)
{
    return nsbox_err_invalid(e, "config.json: key '%s': %s", key, what);
}

/* A string member of obj into out (n bytes); absent is fine unless required. */
int nsbox_ocispec_get_str(const cJSON *obj, const char *name, const char *key, char *out, size_t n,
                          bool required, struct nsbox_err *e)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, name);
    if (!v)
        return required ? nsbox_ocispec_bad(e, key, "missing") : 0;
    if (!cJSON_IsString(v) || !v->valuestring)
        return nsbox_ocispec_bad(e, key, "must be a string");
    size_t len = strlen(v->valuestring);
    if (len >= n)
        return nsbox_err_invalid(e, "config.json: key '%s': longer than %zu bytes", key, n - 1);
    memcpy(out, v->valuestring, len + 1);
    return 0;
}

int nsbox_ocispec_get_bool(const cJSON *obj, const char *name, const char *key, bool *out,
                           struct nsbox_err *e)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, name);
    if (!v)
        return 0;
    if (!cJSON_IsBool(v))
        return nsbox_ocispec_bad(e, key, "must be true or false");
    *out = cJSON_IsTrue(v);
    return 0;
}

/* An integer member in [lo, hi]; absent leaves *out. JSON numbers are doubles: beyond 2^53
 * they are not exact, so the range check is done on the double before the conversion. */
int nsbox_ocispec_get_int(const cJSON *obj, const char *name, const char *key, double lo, double hi,
                          int64_t *out, struct nsbox_err *e)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, name);
    if (!v || cJSON_IsNull(v))
        return 0;
    /* [-2^63, 2^63) before the cast: converting a double outside int64's range is undefined,
     * whatever hi says */
    if (!cJSON_IsNumber(v) || v->valuedouble != v->valuedouble || v->valuedouble < lo ||
        v->valuedouble > hi || v->valuedouble < -0x1p63 || v->valuedouble >= 0x1p63 ||
        (double)(int64_t)v->valuedouble != v->valuedouble)
        return nsbox_err_invalid(e,
                                 "config.json: key '%s': must be an integer between %.0f and "
                                 "%.0f",
                                 key, lo, hi > 0x1p63 ? 0x1p63 : hi);
    *out = (int64_t)v->valuedouble;
    return 0;
}

/* 18446744073709551615 (the kernel's RLIM_INFINITY, which configs write for "unlimited") reads
 * as the double 2^64: that one is taken as UINT64_MAX; anything above it is refused. */
int nsbox_ocispec_get_u64(const cJSON *obj, const char *name, const char *key, uint64_t *out,
                          struct nsbox_err *e)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, name);
    if (!v || cJSON_IsNull(v))
        return 0;
    if (!cJSON_IsNumber(v) || v->valuedouble != v->valuedouble || v->valuedouble < 0 ||
        v->valuedouble > 0x1p64 ||
        (v->valuedouble < 0x1p64 && (double)(uint64_t)v->valuedouble != v->valuedouble))
        return nsbox_err_invalid(e,
                                 "config.json: key '%s': must be an integer between 0 and "
                                 "18446744073709551615",
                                 key);
    *out = v->valuedouble == 0x1p64 ? UINT64_MAX : (uint64_t)v->valuedouble;
    return 0;
}

const cJSON *nsbox_ocispec_get_obj(const cJSON *obj, const char *name, const char *key, int *r,
                                   struct nsbox_err *e)
{
    const cJSON *v = obj ? cJSON_GetObjectItemCaseSensitive(obj, name) : NULL;
    *r = 0;
    if (v && !cJSON_IsObject(v)) {
        *r = nsbox_ocispec_bad(e, key, "must be an object");
        return NULL;
    }
    return v;
}

/* An array of strings, each shorter than NSBOX_OCISPEC_STR_MAX. */
int nsbox_ocispec_check_str_array(const cJSON *v, const char *key, size_t max, struct nsbox_err *e)
{
    if (!cJSON_IsArray(v))
        return nsbox_ocispec_bad(e, key, "must be an array of strings");
    size_t n = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, v) {
        if (!cJSON_IsString(it) || !it->valuestring)
            return nsbox_ocispec_bad(e, key, "must be an array of strings");
        if (strlen(it->valuestring) >= NSBOX_OCISPEC_STR_MAX)
            return nsbox_ocispec_bad(e, key, "an entry is too long");
        if (++n > max)
            return nsbox_err_invalid(e, "config.json: key '%s': more than %zu entries", key, max);
    }
    return 0;
}

static int parse_args(const cJSON *proc, struct nsbox_ocispec *c, struct nsbox_err *e)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(proc, "args");
    if (!v || !cJSON_IsArray(v) || cJSON_GetArraySize(v) == 0)
        return nsbox_ocispec_bad(e, "process.args", "must be a non-empty array of strings");
    if (nsbox_ocispec_check_str_array(v, "process.args", NSBOX_OCISPEC_ARGS_MAX, e) < 0)
        return -1;
    size_t n = (size_t)cJSON_GetArraySize(v);
    c->args = calloc(n + 1, sizeof *c->args);
    if (!c->args)
        return nsbox_err_set(e, NSBOX_E_NOMEM, ENOMEM, "config.json: out of memory");
    const cJSON *it;
    cJSON_ArrayForEach(it, v) {
        if (!(c->args[c->n_args] = strdup(it->valuestring)))
            return nsbox_err_set(e, NSBOX_E_NOMEM, ENOMEM, "config.json: out of memory");
        c->n_args++;
    }
    if (!c->args[0][0])
        return nsbox_ocispec_bad(e, "process.args", "the command is empty");
    return 0;
}

static int parse_env(const cJSON *proc, struct nsbox_ocispec *c, struct nsbox_err *e)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(proc, "env");
    if (!v || cJSON_IsNull(v))
        return 0;
    if (nsbox_ocispec_check_str_array(v, "process.env", NSBOX_OCISPEC_ENV_MAX, e) < 0)
        return -1;
    const cJSON *it;
    cJSON_ArrayForEach(it, v) {
        const char *eq = strchr(it->valuestring, '=');
        if (!eq || eq == it->valuestring)
            return nsbox_err_invalid(e, "config.json: key 'process.env': '%s' is not KEY=value",
                                     NSBOX_SHOW(it->valuestring));
        if (!(c->env[c->n_env] = strdup(it->valuestring)))
            return nsbox_err_set(e, NSBOX_E_NOMEM, ENOMEM, "config.json: out of memory");
        c->n_env++;
    }
    return 0;
}

static const struct {
    const char *name;
    unsigned long set, clear;
} mount_flags[] = {
    {"ro", MS_RDONLY, 0},
    {"rw", 0, MS_RDONLY},
    {"nosuid", MS_NOSUID, 0},
    {"suid", 0, MS_NOSUID},
    {"nodev", MS_NODEV, 0},
    {"dev", 0, MS_NODEV},
    {"noexec", MS_NOEXEC, 0},
    {"exec", 0, MS_NOEXEC},
    {"sync", MS_SYNCHRONOUS, 0},
    {"async", 0, MS_SYNCHRONOUS},
    {"noatime", MS_NOATIME, 0},
    {"atime", 0, MS_NOATIME},
    {"nodiratime", MS_NODIRATIME, 0},
    {"diratime", 0, MS_NODIRATIME},
    {"relatime", MS_RELATIME, 0},
    {"norelatime", 0, MS_RELATIME},
    {"strictatime", MS_STRICTATIME, 0},
    {"nostrictatime", 0, MS_STRICTATIME},
    {"dirsync", MS_DIRSYNC, 0},
    {"mand", MS_MANDLOCK, 0},
    {"nomand", 0, MS_MANDLOCK},
    {"defaults", 0, 0},
};

const char *nsbox_ocispec_mount_option(size_t i)
{
    static const char *const binds[] = {"bind",       "rbind",       "private", "rprivate",
                                        "shared",     "rshared",     "slave",   "rslave",
                                        "unbindable", "runbindable", "idmap",   "ridmap"};
    if (i < NSBOX_ARRAY_LEN(mount_flags))
        return mount_flags[i].name;
    i -= NSBOX_ARRAY_LEN(mount_flags);
    return i < NSBOX_ARRAY_LEN(binds) ? binds[i] : NULL;
}

void nsbox_ocispec_mount_opts(const struct nsbox_ocispec_mount *m,
                              struct nsbox_ocispec_mount_opts *o)
{
    memset(o, 0, sizeof *o);
    o->bind = !strcmp(m->type, "bind");
    const char *p = m->options;
    size_t used = 0;
    while (*p) {
        size_t len = strcspn(p, ",");
        char one[NSBOX_OCISPEC_OPTS_MAX];
        snprintf(one, sizeof one, "%.*s", (int)len, p);
        p += len + (p[len] == ',');
        size_t k = 0;
        while (k < NSBOX_ARRAY_LEN(mount_flags) && strcmp(mount_flags[k].name, one))
            k++;
        if (k < NSBOX_ARRAY_LEN(mount_flags)) {
            o->flags = (o->flags | mount_flags[k].set) & ~mount_flags[k].clear;
        } else if (nsbox_propagation_option(one, &o->propagation)) {
            /* which one: parse_mount refused two different ones */
        } else if (!strcmp(one, "bind") || !strcmp(one, "rbind")) {
            o->bind = true;
            o->recursive |= one[0] == 'r';
        } else if (!strcmp(one, "idmap") || !strcmp(one, "ridmap")) {
            /* the mount's idmap (nsbox_ocispec_mount's), not the filesystem's */
        } else if (one[0] && used + len + 2 <= sizeof o->data) {
            /* the whole options text fits in data: nothing is cut */
            used += (size_t)snprintf(o->data + used, sizeof o->data - used, "%s%s", used ? "," : "",
                                     one);
        }
    }
}

/* Capability names as runtime-spec writes them, by number (linux/capability.h). */
static const char *const cap_names[] = {
    "CAP_CHOWN",
    "CAP_DAC_OVERRIDE",
    "CAP_DAC_READ_SEARCH",
    "CAP_FOWNER",
    "CAP_FSETID",
    "CAP_KILL",
    "CAP_SETGID",
    "CAP_SETUID",
    "CAP_SETPCAP",
    "CAP_LINUX_IMMUTABLE",
    "CAP_NET_BIND_SERVICE",
    "CAP_NET_BROADCAST",
    "CAP_NET_ADMIN",
    "CAP_NET_RAW",
    "CAP_IPC_LOCK",
    "CAP_IPC_OWNER",
    "CAP_SYS_MODULE",
    "CAP_SYS_RAWIO",
    "CAP_SYS_CHROOT",
    "CAP_SYS_PTRACE",
    "CAP_SYS_PACCT",
    "CAP_SYS_ADMIN",
    "CAP_SYS_BOOT",
    "CAP_SYS_NICE",
    "CAP_SYS_RESOURCE",
    "CAP_SYS_TIME",
    "CAP_SYS_TTY_CONFIG",
    "CAP_MKNOD",
    "CAP_LEASE",
    "CAP_AUDIT_WRITE",
    "CAP_AUDIT_CONTROL",
    "CAP_SETFCAP",
    "CAP_MAC_OVERRIDE",
    "CAP_MAC_ADMIN",
    "CAP_SYSLOG",
    "CAP_WAKE_ALARM",
    "CAP_BLOCK_SUSPEND",
    "CAP_AUDIT_READ",
    "CAP_PERFMON",
    "CAP_BPF",
    "CAP_CHECKPOINT_RESTORE",
};

const char *nsbox_ocispec_cap_name(int n)
{
    return n >= 0 && (size_t)n < NSBOX_ARRAY_LEN(cap_names) ? cap_names[n] : NULL;
}

int nsbox_ocispec_cap_number(const char *name)
{
    for (size_t i = 0; i < NSBOX_ARRAY_LEN(cap_names); i++)
        if (!strcmp(cap_names[i], name))
            return (int)i;
    return -1;
}

#define CAP_BIT(n) (UINT64_C(1) << (n))
#define ADMIN_CAPS (CAP_BIT(21) | CAP_BIT(16)) /* CAP_SYS_ADMIN, CAP_SYS_MODULE */

static int parse_caps(const cJSON *proc, struct nsbox_ocispec *c, struct nsbox_err *e)
{
    int r;
    const cJSON *caps = nsbox_ocispec_get_obj(proc, "capabilities", "process.capabilities", &r, e);
    if (r < 0 || !caps)
        return r;
    c->has_caps = true;
    static const char *const sets[] = {[NSBOX_OCI_CAPS_BOUNDING] = "bounding",
                                       [NSBOX_OCI_CAPS_EFFECTIVE] = "effective",
                                       [NSBOX_OCI_CAPS_INHERITABLE] = "inheritable",
                                       [NSBOX_OCI_CAPS_PERMITTED] = "permitted",
                                       [NSBOX_OCI_CAPS_AMBIENT] = "ambient"};
    for (size_t i = 0; i < NSBOX_ARRAY_LEN(sets); i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(caps, sets[i]);
        if (!v || cJSON_IsNull(v))
            continue;
        char key[64];
        snprintf(key, sizeof key, "process.capabilities.%s", sets[i]);
        if (nsbox_ocispec_check_str_array(v, key, 64, e) < 0)
            return -1;
        const cJSON *it;
        cJSON_ArrayForEach(it, v)
        {
            int n = nsbox_ocispec_cap_number(it->valuestring);
            if (n < 0)
                return nsbox_err_invalid(e, "config.json: key '%s': unknown capability '%s'", key,
                                         NSBOX_SHOW(it->valuestring));
            c->caps[i] |= CAP_BIT(n);
        }
        c->cap_sys_admin |= (c->caps[i] & ADMIN_CAPS) != 0;
    }
    return 0;
}

/* process.user: uid, gid, additionalGids, umask. */
static int parse_user(const cJSON *proc, struct nsbox_ocispec *c, struct nsbox_err *e)
{
    int r;
    const cJSON *user = nsbox_ocispec_get_obj(proc, "user", "process.user", &r, e);
    if (r < 0 || !user)
        return r;
    int64_t uid = 0, gid = 0, umask = -1;
    if (nsbox_ocispec_get_int(user, "uid", "process.user.uid", 0, 4294967294.0, &uid, e) < 0 ||
        nsbox_ocispec_get_int(user, "gid", "process.user.gid", 0, 4294967294.0, &gid, e) < 0 ||
        nsbox_ocispec_get_int(user, "umask", "process.user.umask", 0, 0777, &umask, e) < 0)
        return -1;
    c->uid = (uint32_t)uid, c->gid = (uint32_t)gid, c->umask = (int)umask;
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(user, "additionalGids");
    if (!v || cJSON_IsNull(v))
        return 0;
    if (!cJSON_IsArray(v))
        return nsbox_ocispec_bad(e, "process.user.additionalGids", "must be an array of integers");
    const cJSON *it;
    cJSON_ArrayForEach(it, v)
    {
        if (c->n_groups == NSBOX_OCISPEC_GROUPS_MAX)
            return nsbox_err_invalid(e,
                                     "config.json: key 'process.user.additionalGids': more "
                                     "than %d entries",
                                     NSBOX_OCISPEC_GROUPS_MAX);
        if (!cJSON_IsNumber(it) || it->valuedouble < 0 || it->valuedouble > 4294967294.0 ||
            (double)(int64_t)it->valuedouble != it->valuedouble)
            return nsbox_ocispec_bad(e, "process.user.additionalGids",
                                     "must be an array of integers");
        c->groups[c->n_groups++] = (uint32_t)it->valuedouble;
    }
    return 0;
}

static const struct {
    const char *name;
    int resource;
} rlimit_names[] = {
    {"RLIMIT_AS", RLIMIT_AS},
    {"RLIMIT_CORE", RLIMIT_CORE},
    {"RLIMIT_CPU", RLIMIT_CPU},
    {"RLIMIT_DATA", RLIMIT_DATA},
    {"RLIMIT_FSIZE", RLIMIT_FSIZE},
    {"RLIMIT_LOCKS", RLIMIT_LOCKS},
    {"RLIMIT_MEMLOCK", RLIMIT_MEMLOCK},
    {"RLIMIT_MSGQUEUE", RLIMIT_MSGQUEUE},
    {"RLIMIT_NICE", RLIMIT_NICE},
    {"RLIMIT_NOFILE", RLIMIT_NOFILE},
    {"RLIMIT_NPROC", RLIMIT_NPROC},
    {"RLIMIT_RSS", RLIMIT_RSS},
    {"RLIMIT_RTPRIO", RLIMIT_RTPRIO},
    {"RLIMIT_RTTIME", RLIMIT_RTTIME},
    {"RLIMIT_SIGPENDING", RLIMIT_SIGPENDING},
    {"RLIMIT_STACK", RLIMIT_STACK},
};

static int parse_rlimit(const cJSON *it, struct nsbox_ocispec *c, struct nsbox_err *e)
{
    char type[32];
    if (!cJSON_IsObject(it))
        return nsbox_ocispec_bad(e, "process.rlimits", "each entry must be an object");
    const cJSON *sv = cJSON_GetObjectItemCaseSensitive(it, "soft");
    const cJSON *hv = cJSON_GetObjectItemCaseSensitive(it, "hard");
    if (!sv || cJSON_IsNull(sv) || !hv || cJSON_IsNull(hv))
        return nsbox_ocispec_bad(e, "process.rlimits", "each entry needs 'soft' and 'hard'");
    uint64_t soft = 0, hard = 0;
    if (nsbox_ocispec_get_str(it, "type", "process.rlimits.type", type, sizeof type, true, e) < 0 ||
        nsbox_ocispec_get_u64(it, "soft", "process.rlimits.soft", &soft, e) < 0 ||
        nsbox_ocispec_get_u64(it, "hard", "process.rlimits.hard", &hard, e) < 0)
        return -1;
    if (soft > hard)
        return nsbox_err_invalid(e,
                                 "config.json: key 'process.rlimits': %s: soft limit above "
                                 "the hard one",
                                 type);
    size_t k = 0;
    while (k < NSBOX_ARRAY_LEN(rlimit_names) && strcmp(rlimit_names[k].name, type))
        k++;
    if (k == NSBOX_ARRAY_LEN(rlimit_names))
        return nsbox_err_invalid(e,
                                 "config.json: key 'process.rlimits.type': unknown limit "
                                 "'%s'",
                                 NSBOX_SHOW(type));
    for (size_t i = 0; i < c->n_rlimits; i++)
        if (c->rlimits[i].resource == rlimit_names[k].resource)
            return nsbox_err_invalid(e, "config.json: key 'process.rlimits': '%s' given twice",
                                     type);
    c->rlimits[c->n_rlimits++] =
        (struct nsbox_ocispec_rlimit){rlimit_names[k].resource, soft, hard};
    return 0;
}

static int parse_rlimits(const cJSON *proc, struct nsbox_ocispec *c, struct nsbox_err *e)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(proc, "rlimits");
    if (!v || cJSON_IsNull(v))
        return 0;
    if (!cJSON_IsArray(v))
        return nsbox_ocispec_bad(e, "process.rlimits", "must be an array");
    const cJSON *it;
    cJSON_ArrayForEach(it, v)
    {
        if (c->n_rlimits == NSBOX_OCISPEC_RLIMITS_MAX)
            return nsbox_ocispec_bad(e, "process.rlimits", "too many entries");
        if (parse_rlimit(it, c, e) < 0)
            return -1;
    }
    return 0;
}

static int parse_process(const cJSON *root, struct nsbox_ocispec *c, struct nsbox_err *e)
{
    int r;
    const cJSON *proc = nsbox_ocispec_get_obj(root, "process", "process", &r, e);
    if (r < 0)
        return -1;
    if (!proc)
        return nsbox_ocispec_bad(e, "process", "missing");
    if (parse_args(proc, c, e) < 0 || parse_env(proc, c, e) < 0 || parse_caps(proc, c, e) < 0 ||
        nsbox_ocispec_get_str(proc, "cwd", "process.cwd", c->cwd, sizeof c->cwd, false, e) < 0 ||
        nsbox_ocispec_get_bool(proc, "terminal", "process.terminal", &c->terminal, e) < 0 ||
        nsbox_ocispec_get_bool(proc, "noNewPrivileges", "process.noNewPrivileges",
                               &c->no_new_privileges, e) < 0)
        return -1;
    if (c->cwd[0] != '/')
        return nsbox_ocispec_bad(e, "process.cwd", "must be an absolute path");
    int64_t oom = 0;
    const cJSON *o = cJSON_GetObjectItemCaseSensitive(proc, "oomScoreAdj");
    if (nsbox_ocispec_get_int(proc, "oomScoreAdj", "process.oomScoreAdj", -1000, 1000, &oom, e) < 0)
        return -1;
    c->has_oom_score_adj = o && !cJSON_IsNull(o);
    c->oom_score_adj = (int)oom;
    return parse_user(proc, c, e) < 0 || parse_rlimits(proc, c, e) < 0 ? -1 : 0;
}

static int parse_root(const cJSON *root, struct nsbox_ocispec *c, struct nsbox_err *e)
{
    int r;
    const cJSON *rt = nsbox_ocispec_get_obj(root, "root", "root", &r, e);
    if (r < 0)
        return -1;
    if (!rt)
        return nsbox_ocispec_bad(e, "root", "missing");
    if (nsbox_ocispec_get_str(rt, "path", "root.path", c->root_path, sizeof c->root_path, true, e) <
            0 ||
        nsbox_ocispec_get_bool(rt, "readonly", "root.readonly", &c->root_readonly, e) < 0)
        return -1;
    if (!c->root_path[0])
        return nsbox_ocispec_bad(e, "root.path", "is empty");
    return 0;
}

static int parse_mount(const cJSON *m, struct nsbox_ocispec_mount *out, struct nsbox_err *e)
{
    if (!cJSON_IsObject(m))
        return nsbox_ocispec_bad(e, "mounts", "each entry must be an object");
    if (nsbox_ocispec_get_str(m, "destination", "mounts.destination", out->destination,
                              sizeof out->destination, true, e) < 0 ||
        nsbox_ocispec_get_str(m, "type", "mounts.type", out->type, sizeof out->type, false, e) <
            0 ||
        nsbox_ocispec_get_str(m, "source", "mounts.source", out->source, sizeof out->source, false,
                              e) < 0)
        return -1;
    if (out->destination[0] != '/')
        return nsbox_ocispec_bad(e, "mounts.destination", "must be an absolute path");
    const cJSON *opts = cJSON_GetObjectItemCaseSensitive(m, "options");
    if (!opts || cJSON_IsNull(opts))
        return nsbox_ocispec_parse_mount_idmap(m, out, e);
    if (nsbox_ocispec_check_str_array(opts, "mounts.options", 64, e) < 0)
        return -1;
    size_t len = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, opts) {
        size_t l = strlen(it->valuestring);
        if (len + l + 2 > sizeof out->options)
            return nsbox_ocispec_bad(e, "mounts.options", "too long");
        if (len)
            out->options[len++] = ',';
        memcpy(out->options + len, it->valuestring, l + 1);
        len += l;
    }
    /* its propagation: one of them, and never one that would bring the host's mounts into a
     * read-only bind writable (propagation.h) */
    struct nsbox_ocispec_mount_opts o;
    nsbox_ocispec_mount_opts(out, &o);
    struct nsbox_propagation p;
    if (nsbox_propagation_parse(out->options, out->destination, &p, e) < 0 ||
        (o.bind && nsbox_propagation_check_bind(&p, o.flags & MS_RDONLY, out->destination, e) < 0))
        return -1;
    return nsbox_ocispec_parse_mount_idmap(m, out, e);
}

static int parse_mounts(const cJSON *root, struct nsbox_ocispec *c, struct nsbox_err *e)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, "mounts");
    if (!v || cJSON_IsNull(v))
        return 0;
    if (!cJSON_IsArray(v))
        return nsbox_ocispec_bad(e, "mounts", "must be an array");
    const cJSON *it;
    cJSON_ArrayForEach(it, v) {
        if (c->n_mounts == NSBOX_OCISPEC_MOUNTS_MAX)
            return nsbox_err_invalid(e, "config.json: key 'mounts': more than %d entries",
                                     NSBOX_OCISPEC_MOUNTS_MAX);
        if (parse_mount(it, &c->mounts[c->n_mounts], e) < 0)
            return -1;
        c->n_mounts++;
    }
    return 0;
}

static int parse_namespaces(const cJSON *lx, struct nsbox_ocispec *c, struct nsbox_err *e)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(lx, "namespaces");
    if (!v || cJSON_IsNull(v))
        return 0;
    if (!cJSON_IsArray(v))
        return nsbox_ocispec_bad(e, "linux.namespaces", "must be an array");
    const cJSON *it;
    cJSON_ArrayForEach(it, v) {
        char type[16], path[NSBOX_OCISPEC_PATH_MAX] = "";
        if (!cJSON_IsObject(it))
            return nsbox_ocispec_bad(e, "linux.namespaces", "each entry must be an object");
        if (nsbox_ocispec_get_str(it, "type", "linux.namespaces.type", type, sizeof type, true, e) <
                0 ||
            nsbox_ocispec_get_str(it, "path", "linux.namespaces.path", path, sizeof path, false,
                                  e) < 0)
            return -1;
        size_t t = 0;
        while (t < sizeof ns_names / sizeof ns_names[0] && strcmp(ns_names[t], type))
            t++;
        if (t == sizeof ns_names / sizeof ns_names[0])
            return nsbox_err_invalid(e, "config.json: key 'linux.namespaces.type': unknown "
                                     "namespace '%s'", NSBOX_SHOW(type));
        for (size_t i = 0; i < c->n_namespaces; i++)
            if (c->namespaces[i].type == (enum nsbox_ocispec_ns)t)
                return nsbox_err_invalid(e, "config.json: key 'linux.namespaces': '%s' given "
                                         "twice", type);
        if (path[0] && path[0] != '/')
            return nsbox_ocispec_bad(e, "linux.namespaces.path", "must be an absolute path");
        struct nsbox_ocispec_namespace *ns = &c->namespaces[c->n_namespaces++];
        ns->type = (enum nsbox_ocispec_ns)t;
        ns->has_path = path[0] != '\0';
        snprintf(ns->path, sizeof ns->path, "%s", path);
    }
    return 0;
}

/* linux.maskedPaths or linux.readonlyPaths: absolute paths. */
static int parse_paths(const cJSON *lx, const char *name, char (*out)[NSBOX_OCISPEC_MASK_PATH_MAX],
                       size_t *n, struct nsbox_err *e)
{
    char key[32];
    snprintf(key, sizeof key, "linux.%s", name);
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(lx, name);
    if (!v || cJSON_IsNull(v))
        return 0;
    if (nsbox_ocispec_check_str_array(v, key, NSBOX_OCISPEC_MASKS_MAX, e) < 0)
        return -1;
    const cJSON *it;
    cJSON_ArrayForEach(it, v) {
        if (it->valuestring[0] != '/')
            return nsbox_err_invalid(e, "config.json: key '%s': '%s' is not an absolute path",
                                     key, NSBOX_SHOW(it->valuestring));
        if (strlen(it->valuestring) >= NSBOX_OCISPEC_MASK_PATH_MAX)
            return nsbox_err_invalid(e, "config.json: key '%s': a path longer than %d bytes",
                                     key, NSBOX_OCISPEC_MASK_PATH_MAX - 1);
        snprintf(out[(*n)++], NSBOX_OCISPEC_MASK_PATH_MAX, "%s", it->valuestring);
    }
    return 0;
}

/* linux.seccomp: the bundle's profile, read by nsbox's strict parser in its OCI form
 * (policy/seccomp_profile.h), from its own text, bounded as nsbox's profiles are. */
static int parse_seccomp(const cJSON *sc, struct nsbox_ocispec *c, struct nsbox_err *e)
{
    if (!cJSON_IsObject(sc))
        return nsbox_ocispec_bad(e, "linux.seccomp", "must be an object");
    /* cJSON's unformatted print: one text for one profile, however config.json spaced it */
    c->seccomp_text = cJSON_PrintUnformatted(sc);
    if (!c->seccomp_text)
        return nsbox_err_set(e, NSBOX_E_NOMEM, ENOMEM, "out of memory");
    const char *t = c->seccomp_text;
    if (nsbox_seccomp_profile_parse_oci(t, strlen(t), &c->seccomp, e) < 0)
        return nsbox_err_wrap(e, "config.json: key 'linux.seccomp'");
    return 0;
}

static int parse_linux(const cJSON *root, struct nsbox_ocispec *c, struct nsbox_err *e)
{
    int r;
    const cJSON *lx = nsbox_ocispec_get_obj(root, "linux", "linux", &r, e);
    if (r < 0 || !lx)
        return r;
    if (parse_namespaces(lx, c, e) < 0 || nsbox_ocispec_parse_linux(lx, c, e) < 0 ||
        parse_paths(lx, "maskedPaths", c->masked, &c->n_masked, e) < 0 ||
        parse_paths(lx, "readonlyPaths", c->readonly, &c->n_readonly, e) < 0)
        return -1;
    const cJSON *maps = cJSON_GetObjectItemCaseSensitive(lx, "uidMappings");
    c->has_uid_mappings = cJSON_IsArray(maps) && cJSON_GetArraySize(maps) > 0;
    const cJSON *sc = cJSON_GetObjectItemCaseSensitive(lx, "seccomp");
    c->has_seccomp = sc && !cJSON_IsNull(sc);
    return c->has_seccomp ? parse_seccomp(sc, c, e) : 0;
}

static int parse_annotations(const cJSON *root, struct nsbox_ocispec *c, struct nsbox_err *e)
{
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(root, "annotations");
    if (a && !cJSON_IsNull(a)) {
        if (!cJSON_IsObject(a))
            return nsbox_ocispec_bad(e, "annotations", "must be an object of strings");
        size_t n = 0;
        const cJSON *v;
        cJSON_ArrayForEach(v, a) {
            if (!cJSON_IsString(v) || !v->string[0])
                return nsbox_ocispec_bad(e, "annotations", "must be an object of strings");
            if (++n > NSBOX_OCISPEC_ANNOT_MAX)
                return nsbox_ocispec_bad(e, "annotations", "too many entries");
        }
        c->annotations = cJSON_PrintUnformatted(a);
    } else
        c->annotations = strdup("{}");
    if (!c->annotations)
        return nsbox_err_set(e, NSBOX_E_NOMEM, ENOMEM, "out of memory");
    if (strlen(c->annotations) > NSBOX_OCISPEC_ANNOT_BYTES)
        return nsbox_ocispec_bad(e, "annotations", "larger than 64 KiB");
    return 0;
}

static const char *const hook_names[] = {
    [NSBOX_OCI_HOOK_PRESTART] = "prestart",
    [NSBOX_OCI_HOOK_CREATE_RUNTIME] = "createRuntime",
    [NSBOX_OCI_HOOK_CREATE_CONTAINER] = "createContainer",
    [NSBOX_OCI_HOOK_START_CONTAINER] = "startContainer",
    [NSBOX_OCI_HOOK_POSTSTART] = "poststart",
    [NSBOX_OCI_HOOK_POSTSTOP] = "poststop",
};

const char *nsbox_ocispec_hook_name(enum nsbox_ocispec_hook_kind k)
{
    return (size_t)k < NSBOX_ARRAY_LEN(hook_names) ? hook_names[k] : "?";
}

/* A NULL-terminated copy of an array of strings (checked by check_str_array). */
static char **dup_strv(const cJSON *v, struct nsbox_err *e)
{
    size_t n = v ? (size_t)cJSON_GetArraySize(v) : 0, i = 0;
    char **out = calloc(n + 1, sizeof *out);
    if (!out) {
        nsbox_err_set(e, NSBOX_E_NOMEM, ENOMEM, "config.json: out of memory");
        return NULL;
    }
    const cJSON *it;
    if (v)
        cJSON_ArrayForEach(it, v)
        {
            if (!(out[i++] = strdup(it->valuestring))) {
                free_strv(out);
                nsbox_err_set(e, NSBOX_E_NOMEM, ENOMEM, "config.json: out of memory");
                return NULL;
            }
        }
    return out;
}

static int parse_hook(const cJSON *it, enum nsbox_ocispec_hook_kind k, struct nsbox_ocispec_hook *h,
                      struct nsbox_err *e)
{
    char key[64];
    snprintf(key, sizeof key, "hooks.%s", hook_names[k]);
    if (!cJSON_IsObject(it))
        return nsbox_ocispec_bad(e, key, "each entry must be an object");
    int64_t timeout = 0;
    h->kind = k;
    if (nsbox_ocispec_get_str(it, "path", "hooks.path", h->path, sizeof h->path, true, e) < 0 ||
        nsbox_ocispec_get_int(it, "timeout", "hooks.timeout", 1, 86400, &timeout, e) < 0)
        return -1;
    if (h->path[0] != '/')
        return nsbox_ocispec_bad(e, "hooks.path", "must be an absolute path");
    h->timeout = (int)timeout;
    const cJSON *args = cJSON_GetObjectItemCaseSensitive(it, "args");
    const cJSON *env = cJSON_GetObjectItemCaseSensitive(it, "env");
    if (cJSON_IsNull(args) || (args && cJSON_GetArraySize(args) == 0))
        args = NULL;
    if (cJSON_IsNull(env))
        env = NULL;
    if ((args &&
         nsbox_ocispec_check_str_array(args, "hooks.args", NSBOX_OCISPEC_ARGS_MAX, e) < 0) ||
        (env && nsbox_ocispec_check_str_array(env, "hooks.env", NSBOX_OCISPEC_ENV_MAX, e) < 0))
        return -1;
    if (args)
        h->args = dup_strv(args, e);
    else if ((h->args = calloc(2, sizeof *h->args)) && !(h->args[0] = strdup(h->path))) {
        free(h->args);
        h->args = NULL;
    }
    if (!h->args)
        return nsbox_err_set(e, NSBOX_E_NOMEM, ENOMEM, "config.json: out of memory");
    h->env = dup_strv(env, e);
    return h->env ? 0 : -1;
}

static int parse_hooks_obj(const cJSON *v, struct nsbox_ocispec_hooks *h, struct nsbox_err *e)
{
    if (!v || cJSON_IsNull(v))
        return 0;
    if (!cJSON_IsObject(v))
        return nsbox_ocispec_bad(e, "hooks", "must be an object");
    for (size_t k = 0; k < NSBOX_ARRAY_LEN(hook_names); k++) {
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(v, hook_names[k]);
        if (!list || cJSON_IsNull(list))
            continue;
        if (!cJSON_IsArray(list))
            return nsbox_err_invalid(e, "config.json: key 'hooks.%s': must be an array",
                                     hook_names[k]);
        const cJSON *it;
        cJSON_ArrayForEach(it, list)
        {
            if (h->n == NSBOX_OCISPEC_HOOKS_MAX)
                return nsbox_err_invalid(e, "config.json: key 'hooks': more than %d hooks",
                                         NSBOX_OCISPEC_HOOKS_MAX);
            /* counted before the parse: a failed entry's allocations are freed with the rest */
            if (parse_hook(it, (enum nsbox_ocispec_hook_kind)k, &h->h[h->n++], e) < 0)
                return -1;
        }
    }
    return 0;
}

int nsbox_ocispec_hooks_parse(const char *text, struct nsbox_ocispec_hooks *h, struct nsbox_err *e)
{
    memset(h, 0, sizeof *h);
    struct nsbox_err nul;
    if (text && nsbox_spec_json_check_nul(text, strlen(text), &nul) < 0)
        return nsbox_err_invalid(e, "hooks: %s", nul.msg);
    cleanup_cjson cJSON *v = cJSON_Parse(text);
    if (!v)
        return nsbox_err_invalid(e, "hooks: not valid JSON");
    if (parse_hooks_obj(v, h, e) < 0) {
        nsbox_ocispec_hooks_free(h);
        return -1;
    }
    return 0;
}

static int parse_hooks(const cJSON *root, struct nsbox_ocispec *c, struct nsbox_err *e)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, "hooks");
    if (parse_hooks_obj(v, &c->hooks, e) < 0)
        return -1;
    c->hooks_json = v && !cJSON_IsNull(v) ? cJSON_PrintUnformatted(v) : strdup("{}");
    if (!c->hooks_json)
        return nsbox_err_set(e, NSBOX_E_NOMEM, ENOMEM, "out of memory");
    if (strlen(c->hooks_json) > NSBOX_OCISPEC_HOOKS_BYTES)
        return nsbox_ocispec_bad(e, "hooks", "larger than 256 KiB");
    return 0;
}

static int parse_doc(const cJSON *root, struct nsbox_ocispec *c, struct nsbox_err *e)
{
    if (!cJSON_IsObject(root))
        return nsbox_err_invalid(e, "config.json: not a JSON object");
    if (nsbox_ocispec_get_str(root, "ociVersion", "ociVersion", c->oci_version,
                              sizeof c->oci_version, true, e) < 0)
        return -1;
    if (strncmp(c->oci_version, "1.", 2))
        return nsbox_err_invalid(e, "config.json: key 'ociVersion': '%s' is not 1.x",
                                 NSBOX_SHOW(c->oci_version));
    if (parse_process(root, c, e) < 0 || parse_root(root, c, e) < 0 ||
        nsbox_ocispec_get_str(root, "hostname", "hostname", c->hostname, sizeof c->hostname, false,
                              e) < 0 ||
        parse_mounts(root, c, e) < 0 || parse_linux(root, c, e) < 0 ||
        nsbox_ocispec_resolve_mount_idmaps(root, c, e) < 0 || parse_annotations(root, c, e) < 0 ||
        parse_hooks(root, c, e) < 0)
        return -1;
    return 0;
}

int nsbox_ocispec_parse(const char *text, size_t len, struct nsbox_ocispec *c,
                        struct nsbox_err *e)
{
    nsbox_ocispec_init(c);
    nsbox_err_clear(e);
    if (len > NSBOX_OCISPEC_JSON_MAX)
        return nsbox_err_invalid(e, "config.json: larger than %u bytes", NSBOX_OCISPEC_JSON_MAX);
    /* before cJSON, which cuts a string at a NUL, raw or escaped, and reads on: a path or an
     * argument acted on would not be the bundle's */
    struct nsbox_err nul;
    if (nsbox_spec_json_check_nul(text, len, &nul) < 0)
        return nsbox_err_invalid(e, "config.json: %s", nul.msg);
    cleanup_cjson cJSON *root = cJSON_ParseWithLength(text, len);
    if (!root)
        return nsbox_err_invalid(e, "config.json: not valid JSON");
    if (parse_doc(root, c, e) < 0) {
        nsbox_ocispec_free(c);
        return -1;
    }
    return 0;
}

/* What nsbox cannot give a container, though the floor would allow it. */
static int check_limits(const struct nsbox_ocispec *c, struct nsbox_err *e)
{
    uint32_t top = c->uid > c->gid ? c->uid : c->gid;
    for (size_t i = 0; i < c->n_groups; i++)
        if (c->groups[i] > top)
            top = c->groups[i];
    if (top > NSBOX_OCISPEC_ID_MAX)
        return nsbox_err_set(e, NSBOX_E_UNSUPPORTED, EINVAL,
                             "process.user: id %u is outside the container's user namespace, "
                             "which has ids 0-%u: choose an id in that range",
                             top, NSBOX_OCISPEC_ID_MAX);
    for (size_t i = 0; i < c->hooks.n; i++)
        if (c->hooks.h[i].kind == NSBOX_OCI_HOOK_CREATE_CONTAINER ||
            c->hooks.h[i].kind == NSBOX_OCI_HOOK_START_CONTAINER)
            return nsbox_err_set(e, NSBOX_E_UNSUPPORTED, ENOTSUP,
                                 "hooks.%s: hooks that run inside the container are not "
                                 "supported by nsbox-oci; run it from the container's process "
                                 "or as a prestart hook on the host",
                                 hook_names[c->hooks.h[i].kind]);
    return 0;
}

int nsbox_ocispec_check_floor(const struct nsbox_ocispec *c, struct nsbox_err *e)
{
    if (c->cap_sys_admin || c->all_devices)
        return nsbox_err_set(
            e, NSBOX_E_POLICY, EPERM,
            "privileged containers are not supported: nsbox-oci never gives a "
            "container %s; drop %s",
            c->cap_sys_admin ? "CAP_SYS_ADMIN or CAP_SYS_MODULE" : "every device of the host",
            c->cap_sys_admin ? "--privileged (docker exec's too) and --cap-add SYS_ADMIN or "
                               "SYS_MODULE (Kubernetes: privileged, capabilities.add)"
                             : "--privileged (Kubernetes: privileged)");
    for (size_t i = 0; i < c->n_namespaces; i++) {
        const struct nsbox_ocispec_namespace *ns = &c->namespaces[i];
        if (ns->has_path && ns->type != NSBOX_OCI_NS_NETWORK && ns->type != NSBOX_OCI_NS_IPC &&
            ns->type != NSBOX_OCI_NS_UTS && ns->type != NSBOX_OCI_NS_USER)
            return nsbox_err_set(e, NSBOX_E_POLICY, EPERM,
                                 "joining an existing %s namespace (linux.namespaces.path %s) "
                                 "is not supported: %s; only network, ipc, uts and user "
                                 "namespaces are joined (a pod's shared ones)",
                                 ns_names[ns->type], NSBOX_SHOW(ns->path),
                                 ns->type == NSBOX_OCI_NS_PID
                                     ? "nsbox's init is pid 1 of the container's own pid "
                                       "namespace, whose end ends every process of the "
                                       "container (docker run --pid=container:NAME: drop it; "
                                       "Kubernetes: leave shareProcessNamespace off)"
                                 : ns->type == NSBOX_OCI_NS_MOUNT
                                     ? "every nsbox sandbox builds its own root in its own "
                                       "mount namespace"
                                     : "every nsbox sandbox has its own, rooted at its cgroup");
    }
    return check_limits(c, e);
}

/* A type left out of linux.namespaces means the host's namespace of that type (runtime-spec
 * config-linux.md): how docker run --pid=host, --ipc=host, --uts=host and --network=host and
 * Kubernetes' hostPID, hostIPC and hostNetwork say it. nsbox gives every sandbox its own, so
 * such a config is refused rather than run in a namespace it did not ask for. user is not
 * here: without one nsbox adds its own (never host root). cgroup is not here either: Docker's
 * default on a cgroup v1 host (cgroupns host) leaves it out of every config, and a sandbox's
 * cgroup namespace, made all the same, only hides the host's cgroup paths. */
static const struct {
    enum nsbox_ocispec_ns type;
    const char *fix; /* names the option that asked, as the caller knows it */
} required_ns[] = {
    {NSBOX_OCI_NS_PID, "drop --pid=host (Kubernetes: hostPID)"},
    {NSBOX_OCI_NS_IPC, "drop --ipc=host (Kubernetes: hostIPC)"},
    {NSBOX_OCI_NS_UTS, "drop --uts=host (Kubernetes: hostNetwork)"},
    {NSBOX_OCI_NS_NETWORK, "drop --network=host (Kubernetes: hostNetwork)"},
    {NSBOX_OCI_NS_MOUNT, "add a mount entry to linux.namespaces"},
};

static bool has_ns(const struct nsbox_ocispec *c, enum nsbox_ocispec_ns t)
{
    for (size_t i = 0; i < c->n_namespaces; i++)
        if (c->namespaces[i].type == t)
            return true;
    return false;
}

int nsbox_ocispec_check_namespaces(const struct nsbox_ocispec *c, struct nsbox_err *e)
{
    for (size_t i = 0; i < sizeof required_ns / sizeof required_ns[0]; i++) {
        const char *n = ns_names[required_ns[i].type];
        if (!has_ns(c, required_ns[i].type))
            return nsbox_err_set(e, NSBOX_E_POLICY, EPERM,
                                 "sharing the host's %s namespace is not supported: "
                                 "linux.namespaces has no %s entry, which asks for the host's, "
                                 "and nsbox-oci never shares a host namespace with a container; "
                                 "%s to give it its own",
                                 n, n, required_ns[i].fix);
    }
    return 0;
}
