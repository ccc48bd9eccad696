/* Folding one seccomp profile into another: the single profile whose filter answers every call
 * as the two filters would, stacked (see seccomp_profile.h). One BPF program runs per system
 * call instead of two. */
#define _GNU_SOURCE
#include "seccomp_profile.h"
#include "grow.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct verdict {
    enum nsbox_scmp_action action;
    int err; /* ERRNO's; 0 for the others */
};

/* The kernel runs every stacked filter and keeps the answer whose action comes first in this
 * order (SECCOMP_RET_ACTION_FULL, compared as signed), so smaller is stricter. */
int nsbox_seccomp_fold_rank(enum nsbox_scmp_action a)
{
    switch (a) {
    case NSBOX_SCMP_KILL_PROCESS:
        return 0;
    case NSBOX_SCMP_KILL_THREAD:
        return 1;
    case NSBOX_SCMP_TRAP:
        return 2;
    case NSBOX_SCMP_ERRNO:
        return 3;
    case NSBOX_SCMP_LOG:
        return 4;
    case NSBOX_SCMP_ALLOW:
        return 5;
    }
    return 0;
}

static struct verdict fold_verdict(enum nsbox_scmp_action a, int err)
{
    return (struct verdict){a, a == NSBOX_SCMP_ERRNO ? err : 0};
}

/* The answer of two stacked filters, `last` loaded last: of two equally strict answers the
 * kernel keeps the last filter's (it walks from the newest and replaces only on stricter), so
 * its errno. */
static struct verdict fold_stack(struct verdict first, struct verdict last)
{
    return nsbox_seccomp_fold_rank(first.action) < nsbox_seccomp_fold_rank(last.action) ? first
                                                                                        : last;
}

static bool fold_same(struct verdict a, struct verdict b)
{
    return a.action == b.action && a.err == b.err;
}

/* What p answers for name: its rules' action (one per call, the parser's rule), and whether
 * that depends on the arguments (every rule has comparisons; an unconditional one among them
 * makes libseccomp ignore the others). No rule: the default. */
static struct verdict fold_lookup(const struct nsbox_seccomp_profile *p, const char *name,
                                  bool *conditional, bool *listed)
{
    struct verdict v = fold_verdict(p->default_action, p->default_errno);
    *conditional = false;
    *listed = false;
    for (size_t i = 0; i < p->n_rules; i++) {
        const struct nsbox_scmp_rule *r = &p->rules[i];
        if (strcmp(r->name, name) != 0)
            continue;
        v = fold_verdict(r->action, r->errno_ret);
        *conditional = *listed ? *conditional && r->n_args > 0 : r->n_args > 0;
        *listed = true;
    }
    return v;
}

static bool fold_has(const struct nsbox_scmp_rule *rules, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(rules[i].name, name))
            return true;
    return false;
}

struct fold_out {
    struct nsbox_scmp_rule *rules;
    size_t n, cap;
    struct verdict dflt;
};

static int fold_emit(struct fold_out *o, const struct nsbox_scmp_rule *r, struct verdict v,
                     bool keep_args, struct nsbox_err *e)
{
    if (fold_same(v, o->dflt))
        return 0; /* the default answers it; libseccomp refuses such a rule */
    if (!keep_args && fold_has(o->rules, o->n, r->name))
        return 0; /* one unconditional rule says it all */
    if (o->n == NSBOX_SECCOMP_MAX_RULES)
        return nsbox_err_set(e, NSBOX_E_INVALID, 0,
                             "seccomp profile: more than %d rules once folded",
                             NSBOX_SECCOMP_MAX_RULES);
    if (nsbox_grow(&o->rules, &o->cap, o->n, sizeof *o->rules, 64, NSBOX_SECCOMP_MAX_RULES) < 0)
        return nsbox_err_set(e, NSBOX_E_NOMEM, ENOMEM, "seccomp profile: out of memory");
    struct nsbox_scmp_rule *out = &o->rules[o->n++];
    *out = *r;
    out->action = v.action;
    out->errno_ret = v.err;
    if (!keep_args)
        out->n_args = 0;
    return 0;
}

/* base's rule r, answered with extra's verdict x for its call stacked over. */
static int fold_base_rule(const struct nsbox_seccomp_profile *base, const struct nsbox_scmp_rule *r,
                          struct verdict x, bool extra_listed, struct fold_out *o,
                          struct nsbox_err *e)
{
    bool conditional, listed;
    struct verdict matched = fold_stack(fold_lookup(base, r->name, &conditional, &listed), x);
    if (!conditional)
        return fold_emit(o, r, matched, false, e);
    /* The arguments that match none of base's rules get base's default, stacked with x. */
    struct verdict other = fold_stack(fold_verdict(base->default_action, base->default_errno), x);
    if (fold_same(matched, other))
        return fold_emit(o, r, matched, false, e);
    if (!extra_listed) /* other is then the folded default: base's comparisons still decide */
        return fold_emit(o, r, matched, true, e);
    return nsbox_err_set(e, NSBOX_E_INVALID, 0,
                         "seccomp profile: syscalls[%u] ('%s'): its arguments decide between "
                         "two actions once the other filter's rule for the call is added, and "
                         "one filter cannot order two actions for one call (make the rule "
                         "unconditional, or give both the same action)",
                         r->src_index, r->name);
}

int nsbox_seccomp_fold(struct nsbox_seccomp_profile *base,
                       const struct nsbox_seccomp_profile *extra, struct nsbox_err *e)
{
    if (nsbox_seccomp_profile_check(base, e) < 0 || nsbox_seccomp_profile_check(extra, e) < 0)
        return -1;
    for (size_t i = 0; i < extra->n_rules; i++)
        if (extra->rules[i].n_args)
            return nsbox_err_set(e, NSBOX_E_INVALID, 0,
                                 "seccomp profile: syscalls[%u] ('%s') of the profile folded "
                                 "in compares arguments; only unconditional rules fold",
                                 extra->rules[i].src_index, extra->rules[i].name);
    struct fold_out o = {
        .dflt = fold_stack(fold_verdict(base->default_action, base->default_errno),
                           fold_verdict(extra->default_action, extra->default_errno)),
    };
    bool cond, listed;
    for (size_t i = 0; i < base->n_rules; i++) {
        struct verdict x = fold_lookup(extra, base->rules[i].name, &cond, &listed);
        if (fold_base_rule(base, &base->rules[i], x, listed, &o, e) < 0)
            goto fail;
    }
    struct verdict dflt = fold_verdict(base->default_action, base->default_errno);
    for (size_t i = 0; i < extra->n_rules; i++) {
        const struct nsbox_scmp_rule *r = &extra->rules[i];
        if (fold_has(base->rules, base->n_rules, r->name))
            continue; /* folded with base's rules above */
        if (fold_emit(&o, r, fold_stack(dflt, fold_verdict(r->action, r->errno_ret)), false, e) < 0)
            goto fail;
    }
    struct verdict badarch =
        fold_stack(fold_verdict(base->badarch_action, 0), fold_verdict(extra->badarch_action, 0));
    free(base->rules);
    base->rules = o.rules;
    base->n_rules = o.n;
    base->default_action = o.dflt.action;
    base->default_errno = o.dflt.err;
    base->badarch_action = badarch.action;
    base->n_skipped += extra->n_skipped;
    return 0;
fail:
    free(o.rules);
    return -1;
}

int nsbox_seccomp_fold_root(struct nsbox_seccomp_profile *p, struct nsbox_err *e)
{
    struct nsbox_seccomp_profile root;
    const char *json = nsbox_seccomp_root_json();
    if (nsbox_seccomp_profile_parse(json, strlen(json), &root, e) < 0)
        return nsbox_err_wrap(e, "built-in writable-root profile");
    int rc = nsbox_seccomp_fold(p, &root, e);
    nsbox_seccomp_profile_free(&root);
    return rc < 0 ? nsbox_err_wrap(e, "folding the writable root's refusals") : 0;
}
