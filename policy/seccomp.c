/* Seccomp profiles: JSON -> validated struct -> libseccomp -> classic BPF (see seccomp_profile.h
 * and docs/seccomp.md). The parser trusts nothing: sizes are bounded, every key is known, every
 * value is range checked, and anything libseccomp would silently reinterpret (two actions for
 * one syscall, a rule equal to the default) is refused with a message naming the field. */
#define _GNU_SOURCE
#include "seccomp_profile.h"
#include "cleanup.h"
#include "cleanup_cjson.h"
#include "grow.h"
#include "shown.h"
#include "spec.h"

#include <cjson/cJSON.h>
#include <seccomp.h>

#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern const char nsbox_seccomp_default_json_text[];
extern const char nsbox_seccomp_egress_json_text[];
extern const char nsbox_seccomp_root_json_text[];

const char *nsbox_seccomp_default_json(void)
{
    return nsbox_seccomp_default_json_text;
}

const char *nsbox_seccomp_egress_json(void)
{
    return nsbox_seccomp_egress_json_text;
}

const char *nsbox_seccomp_root_json(void)
{
    return nsbox_seccomp_root_json_text;
}

/* ---- names ------------------------------------------------------------------------------- */

static const struct {
    const char *name;
    enum nsbox_scmp_action action;
} action_names[] = {
    {"SCMP_ACT_ALLOW", NSBOX_SCMP_ALLOW},
    {"SCMP_ACT_ERRNO", NSBOX_SCMP_ERRNO},
    {"SCMP_ACT_KILL_PROCESS", NSBOX_SCMP_KILL_PROCESS},
    {"SCMP_ACT_KILL_THREAD", NSBOX_SCMP_KILL_THREAD},
    {"SCMP_ACT_KILL", NSBOX_SCMP_KILL_THREAD}, /* libseccomp's old name for KILL_THREAD */
    {"SCMP_ACT_TRAP", NSBOX_SCMP_TRAP},
    {"SCMP_ACT_LOG", NSBOX_SCMP_LOG},
};

static const struct {
    const char *name;
    enum nsbox_scmp_op op;
} op_names[] = {
    {"SCMP_CMP_EQ", NSBOX_OP_EQ},
    {"SCMP_CMP_NE", NSBOX_OP_NE},
    {"SCMP_CMP_LT", NSBOX_OP_LT},
    {"SCMP_CMP_LE", NSBOX_OP_LE},
    {"SCMP_CMP_GT", NSBOX_OP_GT},
    {"SCMP_CMP_GE", NSBOX_OP_GE},
    {"SCMP_CMP_MASKED_EQ", NSBOX_OP_MASKED_EQ},
};

const char *nsbox_seccomp_action_name(enum nsbox_scmp_action a)
{
    for (size_t i = 0; i < NSBOX_ARRAY_LEN(action_names); i++)
        if (action_names[i].action == a)
            return action_names[i].name;
    return "(invalid action)";
}

static bool action_valid(enum nsbox_scmp_action a)
{
    return a >= NSBOX_SCMP_ALLOW && a <= NSBOX_SCMP_KILL_THREAD;
}

/* Echo untrusted text (JSON keys, values) into messages without control characters
 * (policy/shown.h). */
static const char *printable(const char *s, char *buf, size_t n)
{
    nsbox_shown_copy(buf, n, s, strlen(s), SIZE_MAX, 0);
    return buf;
}

/* ---- JSON helpers ------------------------------------------------------------------------ */

/* Collect an object's fields into out[] by key. Unknown keys are errors, not ignored: a typo
 * such as "errnoret" must not silently weaken a rule. A key given twice is an error too (cJSON
 * keeps both and lookups would see only the first). */
static int object_fields(const cJSON *obj, const char *path, const char *const *keys, size_t n,
                         const cJSON **out, struct nsbox_err *e)
{
    char tmp[48];
    const char *sep = *path ? "." : ""; /* path "" is the top level */
    for (size_t i = 0; i < n; i++)
        out[i] = NULL;
    if (!cJSON_IsObject(obj))
        return nsbox_err_set(e, NSBOX_E_INVALID, 0, "%s: must be an object", path);
    for (const cJSON *it = obj->child; it; it = it->next) {
        size_t i = 0;
        while (i < n && strcmp(keys[i], it->string) != 0)
            i++;
        if (i == n) {
            if (!strcmp(it->string, "architectures") || !strcmp(it->string, "archMap"))
                return nsbox_err_set(e, NSBOX_E_INVALID, 0,
                                     "%s%s%s: not supported: nsbox filters the native "
                                     "architecture only and gives every other ABI the "
                                     "badArchAction",
                                     path, sep, it->string);
            return nsbox_err_set(e, NSBOX_E_INVALID, 0, "%s%sunknown key '%s'", path,
                                 *path ? ": " : "", printable(it->string, tmp, sizeof tmp));
        }
        if (out[i])
            return nsbox_err_set(e, NSBOX_E_INVALID, 0, "%s%s%s: given twice", path, sep, keys[i]);
        out[i] = it;
    }
    return 0;
}

static int check_comment(const cJSON *v, const char *path, struct nsbox_err *e)
{
    if (v && !cJSON_IsString(v))
        return nsbox_err_set(e, NSBOX_E_INVALID, 0, "%s%scomment: must be a string", path,
                             *path ? "." : "");
    return 0;
}

/* Strict: "0x" followed by hex digits, or decimal digits; no sign, no spaces, no overflow. */
static bool parse_u64_text(const char *s, uint64_t *out)
{
    unsigned base = 10;
    if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
        base = 16;
        s += 2;
    }
    if (!*s)
        return false;
    uint64_t v = 0;
    for (; *s; s++) {
        unsigned d;
        if (*s >= '0' && *s <= '9')
            d = (unsigned)(*s - '0');
        else if (base == 16 && *s >= 'a' && *s <= 'f')
            d = (unsigned)(*s - 'a' + 10);
        else if (base == 16 && *s >= 'A' && *s <= 'F')
            d = (unsigned)(*s - 'A' + 10);
        else
            return false;
        if (v > (UINT64_MAX - d) / base)
            return false;
        v = v * base + d;
    }
    *out = v;
    return true;
}

/* cJSON stores numbers as doubles: an integer above 2^53 has already been rounded by the time we
 * see it (0xffffffffffffffff would become 2^64), so such values must be written as strings. */
#define JSON_EXACT_MAX 9007199254740992.0 /* 2^53 */

static int json_u64(const cJSON *v, const char *path, uint64_t *out, struct nsbox_err *e)
{
    char tmp[48];
    if (cJSON_IsNumber(v)) {
        double d = v->valuedouble;
        if (!(d >= 0) || !(d < JSON_EXACT_MAX) || d != (double)(uint64_t)d)
            return nsbox_err_set(e, NSBOX_E_INVALID, 0,
                                 "%s: must be an integer from 0 to 2^53-1 (write larger values "
                                 "as a string, e.g. \"0xffffffffffffffff\")",
                                 path);
        *out = (uint64_t)d;
        return 0;
    }
    if (cJSON_IsString(v)) {
        if (!parse_u64_text(v->valuestring, out))
            return nsbox_err_set(e, NSBOX_E_INVALID, 0,
                                 "%s: '%s' is not an unsigned 64-bit integer (decimal or 0x hex)",
                                 path, printable(v->valuestring, tmp, sizeof tmp));
        return 0;
    }
    return nsbox_err_set(e, NSBOX_E_INVALID, 0, "%s: must be an integer (number or string)", path);
}

static int json_int(const cJSON *v, const char *path, int lo, int hi, int *out, struct nsbox_err *e)
{
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= lo) || !(v->valuedouble <= hi) ||
        v->valuedouble != (double)(int)v->valuedouble)
        return nsbox_err_set(e, NSBOX_E_INVALID, 0, "%s: must be an integer from %d to %d", path,
                             lo, hi);
    *out = (int)v->valuedouble;
    return 0;
}

static int json_action(const cJSON *v, const char *path, enum nsbox_scmp_action *out,
                       struct nsbox_err *e)
{
    char tmp[48];
    if (!cJSON_IsString(v))
        return nsbox_err_set(e, NSBOX_E_INVALID, 0,
                             "%s: must be a string such as "
                             "\"SCMP_ACT_ERRNO\"",
                             path);
    for (size_t i = 0; i < NSBOX_ARRAY_LEN(action_names); i++) {
        if (!strcmp(v->valuestring, action_names[i].name)) {
            *out = action_names[i].action;
            return 0;
        }
    }
    if (!strcmp(v->valuestring, "SCMP_ACT_TRACE") || !strcmp(v->valuestring, "SCMP_ACT_NOTIFY"))
        return nsbox_err_set(e, NSBOX_E_INVALID, 0,
                             "%s: %s is not supported (nsbox runs no tracer or notification "
                             "listener, so the syscall would fail with ENOSYS or hang)",
                             path, v->valuestring);
    return nsbox_err_set(e, NSBOX_E_INVALID, 0, "%s: unknown action '%s'", path,
                         printable(v->valuestring, tmp, sizeof tmp));
}

/* ---- profile parsing --------------------------------------------------------------------- */

#define ERRNO_MAX 4095 /* the kernel's MAX_ERRNO: larger values are not errors to userspace */

static bool same_action(enum nsbox_scmp_action a, int ea, enum nsbox_scmp_action b, int eb)
{
    return a == b && (a != NSBOX_SCMP_ERRNO || ea == eb);
}

static int parse_arg(const cJSON *obj, const char *path, struct nsbox_scmp_arg *arg,
                     struct nsbox_err *e)
{
    enum { K_INDEX, K_VALUE, K_VALUE2, K_OP, K_COMMENT, K__N };
    static const char *const keys[K__N] = {"index", "value", "valueTwo", "op", "comment"};
    const cJSON *f[K__N];
    char fp[96], tmp[48];
    int idx = 0;

    if (object_fields(obj, path, keys, K__N, f, e) < 0 || check_comment(f[K_COMMENT], path, e) < 0)
        return -1;
    for (int k = K_INDEX; k <= K_OP; k++)
        if (!f[k] && k != K_VALUE2)
            return nsbox_err_set(e, NSBOX_E_INVALID, 0, "%s.%s: missing", path, keys[k]);

    snprintf(fp, sizeof fp, "%s.index", path);
    if (json_int(f[K_INDEX], fp, 0, NSBOX_SECCOMP_MAX_ARGS - 1, &idx, e) < 0)
        return -1;
    arg->index = (unsigned)idx;

    snprintf(fp, sizeof fp, "%s.op", path);
    if (!cJSON_IsString(f[K_OP]))
        return nsbox_err_set(e, NSBOX_E_INVALID, 0,
                             "%s: must be a string such as "
                             "\"SCMP_CMP_EQ\"",
                             fp);
    size_t i = 0;
    while (i < NSBOX_ARRAY_LEN(op_names) && strcmp(op_names[i].name, f[K_OP]->valuestring))
        i++;
    if (i == NSBOX_ARRAY_LEN(op_names))
        return nsbox_err_set(e, NSBOX_E_INVALID, 0, "%s: unknown operator '%s'", fp,
                             printable(f[K_OP]->valuestring, tmp, sizeof tmp));
    arg->op = op_names[i].op;

    snprintf(fp, sizeof fp, "%s.value", path);
    if (json_u64(f[K_VALUE], fp, &arg->value, e) < 0)
        return -1;
    arg->value2 = 0;
    snprintf(fp, sizeof fp, "%s.valueTwo", path);
    if (f[K_VALUE2] && json_u64(f[K_VALUE2], fp, &arg->value2, e) < 0)
        return -1;
    if (arg->op != NSBOX_OP_MASKED_EQ && arg->value2 != 0)
        return nsbox_err_set(e, NSBOX_E_INVALID, 0, "%s: only SCMP_CMP_MASKED_EQ uses valueTwo",
                             fp);
    /* value is the mask, valueTwo the bits expected under it. Bits outside the mask can never
     * match: the rule would silently never fire (typically mask and value swapped). */
    if (arg->op == NSBOX_OP_MASKED_EQ && (arg->value2 & ~arg->value) != 0)
        return nsbox_err_set(e, NSBOX_E_INVALID, 0,
                             "%s: 0x%" PRIx64 " has bits outside the mask 0x%" PRIx64
                             " (value is the mask, valueTwo the expected bits): the rule "
                             "could never match",
                             fp, arg->value2, arg->value);
    return 0;
}

struct builder {
    struct nsbox_seccomp_profile *p;
    size_t cap;
    bool oci; /* a bundle's linux.seccomp (nsbox_seccomp_profile_parse_oci) */
};

/* libseccomp cannot order two different actions for one syscall: an unconditional rule silently
 * replaces conditional ones, and overlapping conditions pick an action by tree order. So every
 * rule for a syscall must carry the same action; the profile says what it means or fails. */
static int check_conflict(const struct nsbox_seccomp_profile *p, const struct nsbox_scmp_rule *r,
                          const char *path, struct nsbox_err *e)
{
    for (size_t i = 0; i < p->n_rules; i++) {
        const struct nsbox_scmp_rule *q = &p->rules[i];
        if (strcmp(q->name, r->name) != 0)
            continue;
        if (!same_action(q->action, q->errno_ret, r->action, r->errno_ret))
            return nsbox_err_set(e, NSBOX_E_INVALID, 0,
                                 "%s: '%s' already has a different action in syscalls[%u]; "
                                 "all rules for one syscall must share one action (libseccomp "
                                 "cannot order two)",
                                 path, r->name, q->src_index);
    }
    return 0;
}

static int add_rule(struct builder *b, const struct nsbox_scmp_rule *r, const char *path,
                    struct nsbox_err *e)
{
    struct nsbox_seccomp_profile *p = b->p;
    bool append = true;
    if (b->oci ? nsbox_seccomp_oci_merge(p, r, path, &append, e) < 0
               : check_conflict(p, r, path, e) < 0)
        return -1;
    if (!append)
        return 0;
    if (p->n_rules == NSBOX_SECCOMP_MAX_RULES)
        return nsbox_err_set(e, NSBOX_E_INVALID, 0,
                             "syscalls: more than %d rules (one per name in every \"names\")",
                             NSBOX_SECCOMP_MAX_RULES);
    if (nsbox_grow(&p->rules, &b->cap, p->n_rules, sizeof *p->rules, 64,
                   NSBOX_SECCOMP_MAX_RULES) < 0)
        return nsbox_err_set(e, NSBOX_E_NOMEM, ENOMEM, "seccomp profile: out of memory");
    p->rules[p->n_rules++] = *r;
    return 0;
}

/* A bundle's rule comparing one argument twice, as one rule per comparison. */
static int add_split_rules(struct builder *b, const struct nsbox_scmp_rule *r, const char *path,
                           struct nsbox_err *e)
{
    for (size_t j = 0; j < r->n_args; j++) {
        struct nsbox_scmp_rule one = *r;
        one.n_args = 1;
        one.args[0] = r->args[j];
        if (add_rule(b, &one, path, e) < 0)
            return -1;
    }
    return 0;
}

static bool syscall_name_ok(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n >= NSBOX_SECCOMP_NAME_MAX)
        return false;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '_'))
            return false;
    return true;
}

/* A rule's "args" (path: the rule's, "syscalls[N]"): its comparisons, into r. */
static int parse_rule_args(const cJSON *args, const char *path, bool oci, bool *split,
                           struct nsbox_scmp_rule *r, struct nsbox_err *e)
{
    char fp[96];
    if (!cJSON_IsArray(args))
        return nsbox_err_set(e, NSBOX_E_INVALID, 0, "%s.args: must be an array", path);
    unsigned used = 0; /* bit per argument index */
    int j = 0;
    for (const cJSON *a = args->child; a; a = a->next, j++) {
        if (r->n_args == NSBOX_SECCOMP_MAX_ARGS)
            return nsbox_err_set(e, NSBOX_E_INVALID, 0, "%s.args: more than %d comparisons", path,
                                 NSBOX_SECCOMP_MAX_ARGS);
        snprintf(fp, sizeof fp, "%s.args[%d]", path, j);
        struct nsbox_scmp_arg *arg = &r->args[r->n_args];
        if (parse_arg(a, fp, arg, e) < 0)
            return -1;
        /* libseccomp takes one comparison per argument per rule (it returns EINVAL
         * otherwise); "x not in {a, b}" is written as several rules instead. A bundle's rule
         * that has two becomes one rule per comparison, as runc makes it (they OR). */
        if ((used & (1u << arg->index)) && oci)
            *split = true;
        else if (used & (1u << arg->index))
            return nsbox_err_set(e, NSBOX_E_INVALID, 0,
                                 "%s.index: argument %u is already compared in this rule "
                                 "(one comparison per argument; use several rules to OR)",
                                 fp, arg->index);
        used |= 1u << arg->index;
        r->n_args++;
    }
    return 0;
}

static int parse_rule(const cJSON *obj, unsigned idx, struct builder *b, struct nsbox_err *e)
{
    enum { K_NAMES, K_ACTION, K_ERRNO, K_ARGS, K_OPTIONAL, K_COMMENT, K__N };
    static const char *const keys[K__N] = {"names", "action",   "errnoRet",
                                           "args",  "optional", "comment"};
    const cJSON *f[K__N];
    char path[32], fp[96], tmp[48];
    struct nsbox_scmp_rule r;
    memset(&r, 0, sizeof r);
    r.src_index = idx;

    snprintf(path, sizeof path, "syscalls[%u]", idx);
    if (object_fields(obj, path, keys, K__N, f, e) < 0 || check_comment(f[K_COMMENT], path, e) < 0)
        return -1;
    if (!f[K_NAMES])
        return nsbox_err_set(e, NSBOX_E_INVALID, 0, "%s.names: missing", path);
    if (!f[K_ACTION])
        return nsbox_err_set(e, NSBOX_E_INVALID, 0, "%s.action: missing", path);

    snprintf(fp, sizeof fp, "%s.action", path);
    if (json_action(f[K_ACTION], fp, &r.action, e) < 0)
        return -1;
    r.errno_ret = EPERM; /* as Docker: SCMP_ACT_ERRNO without errnoRet means EPERM */
    if (f[K_ERRNO]) {
        snprintf(fp, sizeof fp, "%s.errnoRet", path);
        if (r.action != NSBOX_SCMP_ERRNO)
            return nsbox_err_set(e, NSBOX_E_INVALID, 0, "%s: only valid with SCMP_ACT_ERRNO", fp);
        if (json_int(f[K_ERRNO], fp, 0, ERRNO_MAX, &r.errno_ret, e) < 0)
            return -1;
    }
    if (r.action != NSBOX_SCMP_ERRNO)
        r.errno_ret = 0;
    /* A bundle's rule that the default already answers is dropped, as runc drops it: an
     * engine's profile has them (a user's, or its own for another architecture). */
    bool no_effect = same_action(r.action, r.errno_ret, b->p->default_action, b->p->default_errno);
    if (no_effect && !b->oci)
        return nsbox_err_set(e, NSBOX_E_INVALID, 0,
                             "%s.action: same as defaultAction, the rule would have no effect "
                             "(libseccomp refuses it)",
                             path);
    if (f[K_OPTIONAL]) {
        if (!cJSON_IsBool(f[K_OPTIONAL]))
            return nsbox_err_set(e, NSBOX_E_INVALID, 0, "%s.optional: must be true or false", path);
        r.optional = cJSON_IsTrue(f[K_OPTIONAL]);
    }

    bool split = false;
    if (f[K_ARGS] && parse_rule_args(f[K_ARGS], path, b->oci, &split, &r, e) < 0)
        return -1;

    if (!cJSON_IsArray(f[K_NAMES]) || !f[K_NAMES]->child)
        return nsbox_err_set(e, NSBOX_E_INVALID, 0,
                             "%s.names: must be a non-empty array of "
                             "syscall names",
                             path);
    int j = 0;
    for (const cJSON *n = f[K_NAMES]->child; n; n = n->next, j++) {
        snprintf(fp, sizeof fp, "%s.names[%d]", path, j);
        if (!cJSON_IsString(n))
            return nsbox_err_set(e, NSBOX_E_INVALID, 0, "%s: must be a string", fp);
        if (!syscall_name_ok(n->valuestring))
            return nsbox_err_set(e, NSBOX_E_INVALID, 0,
                                 "%s: '%s' is not a syscall name (a-z, 0-9, _; under %d "
                                 "characters)",
                                 fp, printable(n->valuestring, tmp, sizeof tmp),
                                 NSBOX_SECCOMP_NAME_MAX);
        /* __NR_SCMP_ERROR: neither libseccomp nor nsbox's table of late calls knows it. Other
         * negative numbers are libseccomp's pseudo-syscalls, real on some architecture but not this
         * one (vm86 on x86_64): accepted, they compile to nothing here. */
        if (no_effect)
            continue;
        /* A bundle's profile names the calls of the newest kernels its engine knows: runc
         * skips those its libseccomp cannot resolve, and so does nsbox-oci. */
        if (nsbox_seccomp_names_resolve(n->valuestring) == __NR_SCMP_ERROR) {
            if (r.optional || b->oci) {
                b->p->n_skipped++;
                continue;
            }
            return nsbox_err_set(e, NSBOX_E_INVALID, 0,
                                 "%s: unknown syscall '%s' (mark the rule \"optional\": true "
                                 "to skip names this libseccomp does not know)",
                                 fp, n->valuestring);
        }
        memcpy(r.name, n->valuestring, strlen(n->valuestring) + 1);
        struct nsbox_scmp_rule one = r;
        if (!b->oci)
            nsbox_seccomp_width_narrow(&one);
        if (split ? add_split_rules(b, &one, fp, e) < 0 : add_rule(b, &one, fp, e) < 0)
            return -1;
    }
    return 0;
}

/* ---- a bundle's keys ------------------------------------------------------------------------ */

static const struct {
    const char *name;
    unsigned bit; /* SECCOMP_FILTER_FLAG_*, as the loader passes it; 0: accepted, not passed */
} flag_names[] = {
    {"SECCOMP_FILTER_FLAG_LOG", 2u},        /* SECCOMP_FILTER_FLAG_LOG: log all but ALLOW */
    {"SECCOMP_FILTER_FLAG_SPEC_ALLOW", 4u}, /* SECCOMP_FILTER_FLAG_SPEC_ALLOW */
    /* TSYNC syncs the filter to the caller's other threads: init has none when it loads it */
    {"SECCOMP_FILTER_FLAG_TSYNC", 0u},
};

/* "architectures": the ABIs the bundle's filter would admit besides the native one. nsbox's
 * own filter, loaded before it, kills every foreign ABI's calls whatever a bundle says, so
 * the names are only checked for their form. */
static bool oci_arch_known(const char *s, unsigned *bits)
{
    (void)bits;
    bool ok = !strncmp(s, "SCMP_ARCH_", 10) && s[10] && strlen(s) < 32;
    for (size_t i = 10; ok && s[i]; i++)
        ok = (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '_';
    return ok;
}

/* "flags": those of flag_names, their bits added to *bits. */
static bool oci_flag_known(const char *s, unsigned *bits)
{
    for (size_t i = 0; i < NSBOX_ARRAY_LEN(flag_names); i++)
        if (!strcmp(flag_names[i].name, s)) {
            *bits |= flag_names[i].bit;
            return true;
        }
    return false;
}

/* A bundle's array of names (key), each of which known() accepts: the first that is not a
 * string or not known fails, named by key and index, with what (what a name must be). */
static int oci_names(const cJSON *v, const char *key, bool (*known)(const char *, unsigned *),
                     const char *what, unsigned *bits, struct nsbox_err *e)
{
    char tmp[48];
    if (!cJSON_IsArray(v))
        return nsbox_err_set(e, NSBOX_E_INVALID, 0, "%s: must be an array of names, each %s", key,
                             what);
    int j = 0;
    for (const cJSON *a = v->child; a; a = a->next, j++)
        if (!cJSON_IsString(a) || !known(a->valuestring, bits))
            return nsbox_err_set(e, NSBOX_E_INVALID, 0, "%s[%d]: '%s' is not %s", key, j,
                                 cJSON_IsString(a) ? printable(a->valuestring, tmp, sizeof tmp)
                                                   : "(not a string)",
                                 what);
    return 0;
}

/* A listener (SCMP_ACT_NOTIFY's agent) would answer the calls nsbox's filter let through: there
 * is none, so a profile that needs one cannot run as written. An empty path means none. */
static int oci_listener(const cJSON *path, const cJSON *meta, struct nsbox_err *e)
{
    if (path && (!cJSON_IsString(path) || path->valuestring[0]))
        return nsbox_err_set(e, NSBOX_E_INVALID, 0,
                             "listenerPath: not supported: nsbox-oci runs no seccomp agent "
                             "(remove listenerPath and the SCMP_ACT_NOTIFY rules)");
    if (meta && !cJSON_IsString(meta))
        return nsbox_err_set(e, NSBOX_E_INVALID, 0, "listenerMetadata: must be a string");
    return 0;
}

const char *nsbox_seccomp_oci_action(size_t i)
{
    return i < NSBOX_ARRAY_LEN(action_names) ? action_names[i].name : NULL;
}

const char *nsbox_seccomp_oci_op(size_t i)
{
    return i < NSBOX_ARRAY_LEN(op_names) ? op_names[i].name : NULL;
}

const char *nsbox_seccomp_oci_flag(size_t i)
{
    return i < NSBOX_ARRAY_LEN(flag_names) ? flag_names[i].name : NULL;
}

const char *nsbox_seccomp_arch_name(void)
{
    switch (seccomp_arch_native()) {
    case SCMP_ARCH_X86_64:
        return "SCMP_ARCH_X86_64";
    case SCMP_ARCH_AARCH64:
        return "SCMP_ARCH_AARCH64";
    default:
        return NULL;
    }
}

/* ---- the profile ----------------------------------------------------------------------------- */

static int parse_profile(const cJSON *root, bool oci, struct nsbox_seccomp_profile *p,
                         struct nsbox_err *e)
{
    enum {
        K_DEFAULT,
        K_DEFAULT_ERRNO,
        K_BADARCH,
        K_SYSCALLS,
        K_COMMENT,
        K_ARCHS, /* from here on a bundle's only */
        K_FLAGS,
        K_LISTENER,
        K_LISTENER_META,
        K__N
    };
    static const char *const keys[K__N] = {"defaultAction", "defaultErrnoRet", "badArchAction",
                                           "syscalls",      "comment",         "architectures",
                                           "flags",         "listenerPath",    "listenerMetadata"};
    const cJSON *f[K__N];
    struct builder b = {.p = p, .cap = 0, .oci = oci};

    if (object_fields(root, "", keys, oci ? K__N : K_ARCHS, f, e) < 0 ||
        check_comment(f[K_COMMENT], "", e) < 0)
        return -1;
    for (int k = oci ? K__N : K_ARCHS; k < K__N; k++)
        f[k] = NULL;
    unsigned no_bits = 0;
    if ((f[K_ARCHS] && oci_names(f[K_ARCHS], "architectures", oci_arch_known,
                                 "an architecture such as SCMP_ARCH_X86_64", &no_bits, e) < 0) ||
        (f[K_FLAGS] && oci_names(f[K_FLAGS], "flags", oci_flag_known,
                                 "supported (nsbox-oci takes SECCOMP_FILTER_FLAG_LOG, "
                                 "SECCOMP_FILTER_FLAG_SPEC_ALLOW and SECCOMP_FILTER_FLAG_TSYNC)",
                                 &p->load_flags, e) < 0) ||
        oci_listener(f[K_LISTENER], f[K_LISTENER_META], e) < 0)
        return -1;
    if (!f[K_DEFAULT])
        return nsbox_err_set(e, NSBOX_E_INVALID, 0, "defaultAction: missing");
    if (json_action(f[K_DEFAULT], "defaultAction", &p->default_action, e) < 0)
        return -1;
    p->default_errno = p->default_action == NSBOX_SCMP_ERRNO ? EPERM : 0;
    if (f[K_DEFAULT_ERRNO]) {
        if (p->default_action != NSBOX_SCMP_ERRNO)
            return nsbox_err_set(e, NSBOX_E_INVALID, 0,
                                 "defaultErrnoRet: only valid with defaultAction SCMP_ACT_ERRNO");
        if (json_int(f[K_DEFAULT_ERRNO], "defaultErrnoRet", 0, ERRNO_MAX, &p->default_errno, e) < 0)
            return -1;
    }

    /* Syscalls from another ABI (i386 via int 0x80, x32) have other numbers and would match
     * none of the rules: they must never be let through. */
    p->badarch_action = NSBOX_SCMP_KILL_PROCESS;
    if (f[K_BADARCH]) {
        if (json_action(f[K_BADARCH], "badArchAction", &p->badarch_action, e) < 0)
            return -1;
        if (p->badarch_action != NSBOX_SCMP_KILL_PROCESS &&
            p->badarch_action != NSBOX_SCMP_KILL_THREAD && p->badarch_action != NSBOX_SCMP_TRAP)
            return nsbox_err_set(e, NSBOX_E_INVALID, 0,
                                 "badArchAction: must be SCMP_ACT_KILL_PROCESS, "
                                 "SCMP_ACT_KILL_THREAD or SCMP_ACT_TRAP (a foreign ABI's "
                                 "syscalls match none of the rules)");
    }

    if (f[K_SYSCALLS]) {
        if (!cJSON_IsArray(f[K_SYSCALLS]))
            return nsbox_err_set(e, NSBOX_E_INVALID, 0, "syscalls: must be an array");
        unsigned i = 0;
        for (const cJSON *r = f[K_SYSCALLS]->child; r; r = r->next, i++) {
            if (i >= NSBOX_SECCOMP_MAX_RULES)
                return nsbox_err_set(e, NSBOX_E_INVALID, 0, "syscalls: more than %d entries",
                                     NSBOX_SECCOMP_MAX_RULES);
            if (parse_rule(r, i, &b, e) < 0)
                return -1;
        }
    }
    return 0;
}

static int profile_parse(const char *json, size_t len, bool oci, struct nsbox_seccomp_profile *p,
                         struct nsbox_err *e)
{
    memset(p, 0, sizeof *p);
    if (!json)
        return nsbox_err_set(e, NSBOX_E_INVALID, 0, "seccomp profile: no text");
    if (len > NSBOX_SECCOMP_JSON_MAX)
        return nsbox_err_set(e, NSBOX_E_INVALID, 0,
                             "seccomp profile: %zu bytes, more than the limit of %u", len,
                             NSBOX_SECCOMP_JSON_MAX);
    /* the spec's strict reader: one object, nothing after it, no NUL, a cut text said to end */
    cleanup_cjson cJSON *root = NULL;
    if (nsbox_spec_json_parse_object(json, len, NSBOX_SECCOMP_JSON_MAX, &root, e) < 0)
        return nsbox_err_wrap(e, "seccomp profile");
    if (parse_profile(root, oci, p, e) < 0) {
        nsbox_seccomp_profile_free(p);
        return oci ? -1 : nsbox_err_wrap(e, "seccomp profile");
    }
    return 0;
}

int nsbox_seccomp_profile_parse(const char *json, size_t len, struct nsbox_seccomp_profile *p,
                                struct nsbox_err *e)
{
    return profile_parse(json, len, false, p, e);
}

int nsbox_seccomp_profile_parse_oci(const char *json, size_t len, struct nsbox_seccomp_profile *p,
                                    struct nsbox_err *e)
{
    return profile_parse(json, len, true, p, e);
}

void nsbox_seccomp_profile_free(struct nsbox_seccomp_profile *p)
{
    if (!p)
        return;
    free(p->rules);
    memset(p, 0, sizeof *p);
}

/* ---- checking ---------------------------------------------------------------------------- */

/* A profile may also be built by hand: check what libseccomp would misread. */
int nsbox_seccomp_profile_check(const struct nsbox_seccomp_profile *p, struct nsbox_err *e)
{
    if (!action_valid(p->default_action) || !action_valid(p->badarch_action))
        return nsbox_err_set(e, NSBOX_E_INVALID, 0, "seccomp profile: invalid default action");
    if (p->badarch_action == NSBOX_SCMP_ALLOW || p->badarch_action == NSBOX_SCMP_LOG ||
        p->badarch_action == NSBOX_SCMP_ERRNO)
        return nsbox_err_set(e, NSBOX_E_INVALID, 0,
                             "seccomp profile: badArchAction %s would let foreign-ABI syscalls "
                             "past the rules",
                             nsbox_seccomp_action_name(p->badarch_action));
    if (p->default_errno < 0 || p->default_errno > ERRNO_MAX)
        return nsbox_err_set(e, NSBOX_E_INVALID, 0,
                             "seccomp profile: defaultErrnoRet %d out "
                             "of range",
                             p->default_errno);
    if (p->n_rules > NSBOX_SECCOMP_MAX_RULES || (p->n_rules && !p->rules))
        return nsbox_err_set(e, NSBOX_E_INVALID, 0, "seccomp profile: bad rule count %zu",
                             p->n_rules);
    for (size_t i = 0; i < p->n_rules; i++) {
        const struct nsbox_scmp_rule *r = &p->rules[i];
        if (!memchr(r->name, '\0', sizeof r->name) || !action_valid(r->action) ||
            r->errno_ret < 0 || r->errno_ret > ERRNO_MAX || r->n_args > NSBOX_SECCOMP_MAX_ARGS)
            return nsbox_err_set(e, NSBOX_E_INVALID, 0, "seccomp profile: rule %zu is invalid", i);
        for (size_t j = 0; j < r->n_args; j++)
            if (r->args[j].index >= NSBOX_SECCOMP_MAX_ARGS)
                return nsbox_err_set(e, NSBOX_E_INVALID, 0,
                                     "seccomp profile: rule %zu: argument index %u", i,
                                     r->args[j].index);
    }
    return 0;
}

/* ---- answering --------------------------------------------------------------------------- */

static bool arg_matches(const struct nsbox_scmp_arg *a, uint64_t x)
{
    switch (a->op) {
    case NSBOX_OP_EQ:
        return x == a->value;
    case NSBOX_OP_NE:
        return x != a->value;
    case NSBOX_OP_LT:
        return x < a->value;
    case NSBOX_OP_LE:
        return x <= a->value;
    case NSBOX_OP_GT:
        return x > a->value;
    case NSBOX_OP_GE:
        return x >= a->value;
    case NSBOX_OP_MASKED_EQ:
        return (x & a->value) == a->value2;
    }
    return false;
}

enum nsbox_scmp_action nsbox_seccomp_profile_answer(const struct nsbox_seccomp_profile *p,
                                                    const char *name,
                                                    const uint64_t args[NSBOX_SECCOMP_MAX_ARGS],
                                                    int *err)
{
    const struct nsbox_scmp_rule *best = NULL;
    for (size_t i = 0; i < p->n_rules; i++) {
        const struct nsbox_scmp_rule *r = &p->rules[i];
        if (strcmp(r->name, name) != 0)
            continue;
        bool all = true;
        for (size_t j = 0; j < r->n_args && all; j++)
            all = r->args[j].index < NSBOX_SECCOMP_MAX_ARGS &&
                  arg_matches(&r->args[j], args[r->args[j].index]);
        if (all &&
            (!best || nsbox_seccomp_fold_rank(r->action) < nsbox_seccomp_fold_rank(best->action)))
            best = r;
    }
    if (best) {
        *err = best->action == NSBOX_SCMP_ERRNO ? best->errno_ret : 0;
        return best->action;
    }
    *err = p->default_action == NSBOX_SCMP_ERRNO ? p->default_errno : 0;
    return p->default_action;
}
