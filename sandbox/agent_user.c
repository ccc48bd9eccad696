/* The user an agent's command runs as (agent_user.h). */
#define _GNU_SOURCE
#include "agent_user.h"
#include "caps.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>
#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define BIT(cap) (UINT64_C(1) << (cap))

/* Are the supplementary groups already these (in any order)? */
static bool same_groups(const struct nsbox_spawnuser *u)
{
    gid_t cur[NSBOX_SPAWNUSER_GROUPS_MAX];
    int n = getgroups(NSBOX_SPAWNUSER_GROUPS_MAX, cur); /* -1: more than any request has */
    if (n != (int)u->n_groups)
        return false;
    for (size_t i = 0; i < u->n_groups; i++) {
        int k = 0;
        while (k < n && cur[k] != (gid_t)u->groups[i])
            k++;
        if (k == n)
            return false;
    }
    return true;
}

/* The container's sets (nsbox_agent_user_set_caps), for a SPAWN that names none, and init's
 * own effective, permitted and inheritable sets. */
static bool have_default;
static uint64_t default_caps[NSBOX_SPAWNUSER_CAPSETS], init_sets[3];

/* What the changes take, from the permitted set into the effective one: CAP_SETPCAP to cut the
 * bounding set, CAP_SETUID and CAP_SETGID to change ids (init keeps them permitted for this:
 * sandbox/launch.h, cap_keep). The process's own sets replace them before it execs. */
static int raise_for_changes(int last)
{
    uint64_t eff, prm, inh, known = nsbox_caps_known(last);
    const uint64_t need = BIT(CAP_SETPCAP) | BIT(CAP_SETUID) | BIT(CAP_SETGID);
    /* init's sets as nsbox-oci set them, known without capget (which a bundle's seccomp
     * profile need not allow: sandbox/contain_calls.c) */
    if (have_default)
        eff = init_sets[0] & known, prm = init_sets[1] & known, inh = init_sets[2] & known;
    else if (nsbox_caps_get(&eff, &prm, &inh) < 0)
        return errno;
    if ((prm & need & ~eff) && nsbox_caps_set(eff | (prm & need), prm, inh) < 0)
        return errno;
    return 0;
}

/* The bounding set cut to the process's. */
static int cut_bounding(const struct nsbox_spawnuser *u, int last)
{
    for (int cap = 0; cap <= last; cap++)
        if (!(u->caps[NSBOX_SPAWNUSER_BOUNDING] & BIT(cap)) &&
            prctl(PR_CAPBSET_READ, cap, 0, 0, 0) == 1 && prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0)
            return errno;
    return 0;
}

/* The process's effective, permitted and inheritable sets, then its ambient ones: the kernel
 * raises only what is permitted and inheritable, so the rest of the ambient set is left out,
 * as create leaves it for the container's process (sandbox/contain.c). */
static int set_own_caps(const struct nsbox_spawnuser *u, int last, bool kept)
{
    uint64_t known = nsbox_caps_known(last);
    uint64_t eff = u->caps[NSBOX_SPAWNUSER_EFFECTIVE] & known;
    uint64_t prm = u->caps[NSBOX_SPAWNUSER_PERMITTED] & known;
    uint64_t inh = u->caps[NSBOX_SPAWNUSER_INHERITABLE] & known;
    if (nsbox_caps_set(eff, prm, inh) < 0 || (kept && prctl(PR_SET_KEEPCAPS, 0, 0, 0, 0) < 0))
        return errno;
    if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
        return errno;
    uint64_t amb = u->caps[NSBOX_SPAWNUSER_AMBIENT] & prm & inh;
    for (int cap = 0; cap <= last; cap++)
        if ((amb & BIT(cap)) && prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, cap, 0, 0) < 0)
            return errno;
    return 0;
}

/* Groups, gid, then uid, each only when it differs. */
static int set_ids(const struct nsbox_spawnuser *u)
{
    uid_t ru, eu, su;
    gid_t rg, eg, sg;
    if (getresuid(&ru, &eu, &su) < 0 || getresgid(&rg, &eg, &sg) < 0)
        return errno;
    gid_t groups[NSBOX_SPAWNUSER_GROUPS_MAX];
    for (size_t i = 0; i < u->n_groups; i++)
        groups[i] = (gid_t)u->groups[i];
    if (!same_groups(u) && syscall(SYS_setgroups, u->n_groups, groups) < 0)
        return errno;
    gid_t g = (gid_t)u->gid;
    if ((rg != g || eg != g || sg != g) && syscall(SYS_setresgid, g, g, g) < 0)
        return errno;
    uid_t id = (uid_t)u->uid;
    if ((ru != id || eu != id || su != id) && syscall(SYS_setresuid, id, id, id) < 0)
        return errno;
    return 0;
}

void nsbox_agent_user_set_caps(uint64_t bounding, uint64_t effective, uint64_t permitted,
                               uint64_t inheritable, uint64_t ambient, uint64_t keep)
{
    init_sets[0] = effective, init_sets[1] = permitted | keep, init_sets[2] = inheritable;
    default_caps[NSBOX_SPAWNUSER_BOUNDING] = bounding;
    default_caps[NSBOX_SPAWNUSER_EFFECTIVE] = effective;
    default_caps[NSBOX_SPAWNUSER_PERMITTED] = permitted;
    default_caps[NSBOX_SPAWNUSER_INHERITABLE] = inheritable;
    default_caps[NSBOX_SPAWNUSER_AMBIENT] = ambient;
    have_default = true;
}

bool nsbox_agent_user_fill(struct nsbox_spawnuser *u, bool given)
{
    if (!have_default)
        return given;
    if (!given) {
        gid_t groups[NSBOX_SPAWNUSER_GROUPS_MAX];
        int n = getgroups(NSBOX_SPAWNUSER_GROUPS_MAX, groups);
        uid_t ru, eu, su;
        gid_t rg, eg, sg;
        getresuid(&ru, &eu, &su);
        getresgid(&rg, &eg, &sg);
        *u = (struct nsbox_spawnuser){.uid = eu, .gid = eg, .umask = -1};
        for (int i = 0; i < n; i++)
            u->groups[u->n_groups++] = (uint32_t)groups[i];
    }
    if (!u->set_caps) {
        u->set_caps = true;
        memcpy(u->caps, default_caps, sizeof u->caps);
    }
    return true;
}

/* Are u's sets within the container's (nsbox_agent_user_set_caps), by the rules exec checks
 * them with (nsbox_ociproc_check_caps)? The kernel cannot be the floor for what init keeps
 * (cap_keep): init holds it, so a request that names it would get it. exec checks before it
 * asks, but the monitor relays whatever its control socket is sent; so init checks too,
 * against the sets it started the container with. */
static bool within_container(const struct nsbox_spawnuser *u)
{
    if (!have_default)
        return true;
    const uint64_t *d = default_caps, *w = u->caps;
    uint64_t prm = d[NSBOX_SPAWNUSER_PERMITTED], bnd = w[NSBOX_SPAWNUSER_BOUNDING];
    uint64_t raised =
        w[NSBOX_SPAWNUSER_PERMITTED] | w[NSBOX_SPAWNUSER_EFFECTIVE] | w[NSBOX_SPAWNUSER_AMBIENT];
    uint64_t inh = d[NSBOX_SPAWNUSER_INHERITABLE] | (prm & bnd);
    return !(bnd & ~d[NSBOX_SPAWNUSER_BOUNDING]) && !(raised & ~prm) &&
           !(w[NSBOX_SPAWNUSER_INHERITABLE] & ~inh);
}

int nsbox_agent_user_become(const struct nsbox_spawnuser *u, bool *caps_failed)
{
    int last = u->set_caps ? nsbox_caps_last() : 0, err;
    *caps_failed = true;
    if (u->set_caps && !within_container(u))
        return EPERM;
    /* the bounding set while CAP_SETPCAP may still be had; keep-caps so that a uid that
     * leaves 0 keeps the permitted set the process's own sets are cut from */
    if (u->set_caps && ((err = raise_for_changes(last)) != 0 || (err = cut_bounding(u, last)) != 0))
        return err;
    /* keep-caps only where the uid changes: a prctl a same-user exec need not make */
    uid_t ru, eu, su;
    if (getresuid(&ru, &eu, &su) < 0)
        return errno;
    bool keep = u->set_caps && (ru != u->uid || eu != u->uid || su != u->uid);
    if (keep && prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0) < 0)
        return errno;
    *caps_failed = false;
    if ((err = set_ids(u)) != 0)
        return err;
    *caps_failed = u->set_caps;
    if (u->set_caps && (err = set_own_caps(u, last, keep)) != 0)
        return err;
    *caps_failed = false;
    if (u->umask >= 0)
        umask((mode_t)u->umask);
    return 0;
}
