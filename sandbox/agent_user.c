/* The user an agent's command runs as (agent_user.h). */
#define _GNU_SOURCE
#include "agent_user.h"

#include <errno.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

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

int nsbox_agent_user_become(const struct nsbox_spawnuser *u)
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
    if (u->umask >= 0)
        umask((mode_t)u->umask);
    return 0;
}
