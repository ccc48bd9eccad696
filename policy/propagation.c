/* Mount propagation of a bundle's mounts and root (propagation.h). */
#include "propagation.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>

static const struct {
    const char *name;
    enum nsbox_propagation_kind kind;
    bool recursive;
} options[] = {
    {"private", NSBOX_PROP_PRIVATE, false},       {"rprivate", NSBOX_PROP_PRIVATE, true},
    {"slave", NSBOX_PROP_SLAVE, false},           {"rslave", NSBOX_PROP_SLAVE, true},
    {"shared", NSBOX_PROP_SHARED, false},         {"rshared", NSBOX_PROP_SHARED, true},
    {"unbindable", NSBOX_PROP_UNBINDABLE, false}, {"runbindable", NSBOX_PROP_UNBINDABLE, true},
};

bool nsbox_propagation_option(const char *opt, struct nsbox_propagation *p)
{
    for (size_t i = 0; i < sizeof options / sizeof options[0]; i++)
        if (!strcmp(opt, options[i].name)) {
            *p = (struct nsbox_propagation){options[i].kind, options[i].recursive};
            return true;
        }
    return false;
}

const char *nsbox_propagation_name(const struct nsbox_propagation *p)
{
    for (size_t i = 0; i < sizeof options / sizeof options[0]; i++)
        if (options[i].kind == p->kind && options[i].recursive == p->recursive)
            return options[i].name;
    return NULL;
}

int nsbox_propagation_parse(const char *options_csv, const char *where, struct nsbox_propagation *p,
                            struct nsbox_err *e)
{
    *p = (struct nsbox_propagation){NSBOX_PROP_NONE, false};
    const char *s = options_csv ? options_csv : "";
    while (*s) {
        size_t len = strcspn(s, ",");
        char opt[16];
        struct nsbox_propagation q;
        if (len < sizeof opt) {
            memcpy(opt, s, len);
            opt[len] = '\0';
            if (nsbox_propagation_option(opt, &q)) {
                if (p->kind != NSBOX_PROP_NONE &&
                    (p->kind != q.kind || p->recursive != q.recursive))
                    return nsbox_err_invalid(e,
                                             "mounts: %s asks for two propagations, %s and %s: "
                                             "keep one",
                                             where, nsbox_propagation_name(p), opt);
                *p = q;
            }
        }
        s += len + (s[len] == ',');
    }
    return 0;
}

int nsbox_propagation_parse_root(const char *value, struct nsbox_propagation *p,
                                 struct nsbox_err *e)
{
    *p = (struct nsbox_propagation){NSBOX_PROP_NONE, false};
    if (!value || !value[0] || nsbox_propagation_option(value, p))
        return 0;
    return nsbox_err_invalid(e,
                             "config.json: key 'linux.rootfsPropagation': '%s' is not one of "
                             "shared, slave, private, unbindable (or their r forms)",
                             NSBOX_SHOW(value));
}

int nsbox_propagation_check_bind(const struct nsbox_propagation *p, bool readonly,
                                 const char *where, struct nsbox_err *e)
{
    if (!readonly || (p->kind != NSBOX_PROP_SLAVE && p->kind != NSBOX_PROP_SHARED))
        return 0;
    return nsbox_err_set(e, NSBOX_E_POLICY, EPERM,
                         "mounts: the read-only bind at %s asks for %s propagation: a mount the "
                         "host makes below its source later would arrive with the host's own "
                         "flags, writable, inside a bind the config says is read-only; drop ro, "
                         "or drop %s to see the source as it is at create (private)",
                         where, nsbox_propagation_name(p), nsbox_propagation_name(p));
}

size_t nsbox_propagation_steps(const struct nsbox_propagation *p, bool host, bool tree,
                               unsigned long steps[2])
{
    unsigned long all = tree ? MS_REC : 0, rec = p->recursive ? MS_REC : 0;
    /* a bind of a host path is cut from the host's peer group over its whole tree */
    unsigned long scope = host ? all : rec;
    size_t n = 0;
    switch (p->kind) {
    case NSBOX_PROP_NONE:
        if (host)
            steps[n++] = MS_PRIVATE | all;
        break;
    case NSBOX_PROP_PRIVATE:
        steps[n++] = MS_PRIVATE | scope;
        break;
    case NSBOX_PROP_UNBINDABLE:
        if (host && !(rec && all))
            steps[n++] = MS_PRIVATE | all;
        steps[n++] = MS_UNBINDABLE | rec;
        break;
    case NSBOX_PROP_SLAVE:
        steps[n++] = MS_SLAVE | scope;
        break;
    case NSBOX_PROP_SHARED:
        /* a slave first: out of any peer group it came with (the host's), then a group of its
         * own, of which the container's mount namespace holds every member */
        steps[n++] = MS_SLAVE | scope;
        steps[n++] = MS_SHARED | rec;
        break;
    }
    return n;
}
