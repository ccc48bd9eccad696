/* A bundle's rules of several actions for one call (see seccomp_profile.h,
 * nsbox_seccomp_oci_merge): nsbox's own profiles may not have them, engines' do. */
#define _GNU_SOURCE
#include "seccomp_profile.h"

#include <stdint.h>
#include <string.h>

static bool oci_stricter(const struct nsbox_scmp_rule *a, const struct nsbox_scmp_rule *b)
{
    return nsbox_seccomp_fold_rank(a->action) < nsbox_seccomp_fold_rank(b->action);
}

static int oci_unorderable(const struct nsbox_scmp_rule *r, unsigned other, const char *path,
                           struct nsbox_err *e)
{
    return nsbox_err_set(e, NSBOX_E_INVALID, 0,
                         "%s: '%s' has an unconditional rule (syscalls[%u]) and a stricter one "
                         "by its arguments: one filter cannot give both (put the condition in "
                         "both rules, or in neither)",
                         path, r->name, other);
}

/* Drop every rule of r's call (r itself is appended after). */
static void oci_drop_call(struct nsbox_seccomp_profile *p, const char *name)
{
    size_t k = 0;
    for (size_t i = 0; i < p->n_rules; i++)
        if (strcmp(p->rules[i].name, name) != 0)
            p->rules[k++] = p->rules[i];
    p->n_rules = k;
}

int nsbox_seccomp_oci_merge(struct nsbox_seccomp_profile *p, const struct nsbox_scmp_rule *r,
                            const char *path, bool *append, struct nsbox_err *e)
{
    struct nsbox_scmp_rule *uncond = NULL, *stricter = NULL;
    bool any = false;
    *append = true;
    for (size_t i = 0; i < p->n_rules; i++) {
        struct nsbox_scmp_rule *q = &p->rules[i];
        if (strcmp(q->name, r->name) != 0)
            continue;
        any = true;
        if (q->n_args == 0)
            uncond = q;
        else if (oci_stricter(q, r) && !stricter)
            stricter = q;
    }
    if (uncond) {
        /* the call is decided whatever its arguments: libseccomp ignores conditional rules
         * beside an unconditional one, and of two unconditional ones keeps the first; here the
         * stricter (the profile asks for it somewhere) */
        *append = false;
        if (r->n_args == 0 && oci_stricter(r, uncond)) {
            uncond->action = r->action;
            uncond->errno_ret = r->errno_ret;
        } else if (r->n_args > 0 && oci_stricter(r, uncond))
            return oci_unorderable(r, uncond->src_index, path, e);
        return 0;
    }
    if (r->n_args == 0 && any) {
        /* an unconditional rule replaces the call's conditional ones, unless one is stricter */
        if (stricter)
            return oci_unorderable(stricter, r->src_index, path, e);
        oci_drop_call(p, r->name);
    }
    return 0;
}
