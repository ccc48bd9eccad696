/* The user an agent's command runs as (agent_user.h). */
#define _GNU_SOURCE
#include "agent_user.h"

#include <errno.h>
#include <stdbool.h>
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

/* The highest capability this kernel knows. */
static int last_cap(void)
{
    int last = 0;
    while (prctl(PR_CAPBSET_READ, last + 1, 0, 0, 0) >= 0)
        last++;
    return last;
}

static int caps_get(uint64_t *eff, uint64_t *prm, uint64_t *inh)
{
    struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct d[2] = {{0}};
    if (syscall(SYS_capget, &hdr, d) < 0)
        return -1;
    *eff = (uint64_t)d[1].effective << 32 | d[0].effective;
    *prm = (uint64_t)d[1].permitted << 32 | d[0].permitted;
    *inh = (uint64_t)d[1].inheritable << 32 | d[0].inheritable;
    return 0;
}

static int caps_set(uint64_t eff, uint64_t prm, uint64_t inh)
{
    struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct d[2] = {
        {(uint32_t)eff, (uint32_t)prm, (uint32_t)inh},
        {(uint32_t)(eff >> 32), (uint32_t)(prm >> 32), (uint32_t)(inh >> 32)}};
    return (int)syscall(SYS_capset, &hdr, d);
}

/* The bounding set cut to the process's. Dropping needs CAP_SETPCAP in the effective set: raised
 * from the permitted one (exec checks that init has it there), and gone again once the
 * process's own sets are set. */
static int cut_bounding(const struct nsbox_spawnuser *u, int last)
{
    uint64_t drop = 0, eff, prm, inh;
    for (int cap = 0; cap <= last; cap++)
        if (!(u->caps[NSBOX_SPAWNUSER_BOUNDING] & BIT(cap)) &&
            prctl(PR_CAPBSET_READ, cap, 0, 0, 0) == 1)
            drop |= BIT(cap);
    if (!drop)
        return 0;
    if (caps_get(&eff, &prm, &inh) < 0 ||
        (!(eff & BIT(CAP_SETPCAP)) && caps_set(eff | BIT(CAP_SETPCAP), prm, inh) < 0))
        return errno;
    for (int cap = 0; cap <= last; cap++)
        if ((drop & BIT(cap)) && prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0)
            return errno;
    return 0;
}

/* The process's effective, permitted and inheritable sets, then its ambient ones: the kernel
 * raises only what is permitted and inheritable, so the rest of the ambient set is left out,
 * as create leaves it for the container's process (sandbox/contain.c). */
static int set_own_caps(const struct nsbox_spawnuser *u, int last)
{
    uint64_t known = last >= 63 ? ~UINT64_C(0) : BIT(last + 1) - 1;
    uint64_t eff = u->caps[NSBOX_SPAWNUSER_EFFECTIVE] & known;
    uint64_t prm = u->caps[NSBOX_SPAWNUSER_PERMITTED] & known;
    uint64_t inh = u->caps[NSBOX_SPAWNUSER_INHERITABLE] & known;
    if (caps_set(eff, prm, inh) < 0 || prctl(PR_SET_KEEPCAPS, 0, 0, 0, 0) < 0)
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

int nsbox_agent_user_become(const struct nsbox_spawnuser *u, bool *caps_failed)
{
    int last = u->set_caps ? last_cap() : 0, err;
    *caps_failed = true;
    /* the bounding set while CAP_SETPCAP may still be had; keep-caps so that a uid that
     * leaves 0 keeps the permitted set the process's own sets are cut from */
    if (u->set_caps && (err = cut_bounding(u, last)) != 0)
        return err;
    if (u->set_caps && prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0) < 0)
        return errno;
    *caps_failed = false;
    if ((err = set_ids(u)) != 0)
        return err;
    *caps_failed = u->set_caps;
    if (u->set_caps && (err = set_own_caps(u, last)) != 0)
        return err;
    *caps_failed = false;
    if (u->umask >= 0)
        umask((mode_t)u->umask);
    return 0;
}
