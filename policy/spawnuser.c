/* The user of an exec'd process, as a string (spawnuser.h). */
#include "spawnuser.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#define ID_MAX 4294967294ULL

static bool in_range(const struct nsbox_spawnuser *u)
{
    if (u->uid > ID_MAX || u->gid > ID_MAX || u->umask < -1 || u->umask > 0777 ||
        u->n_groups > NSBOX_SPAWNUSER_GROUPS_MAX)
        return false;
    for (size_t i = 0; i < u->n_groups; i++)
        if (u->groups[i] > ID_MAX)
            return false;
    return true;
}

int nsbox_spawnuser_format(const struct nsbox_spawnuser *u, char *buf, size_t size)
{
    if (!in_range(u))
        return -1;
    int n = snprintf(buf, size, "%u %u %d", u->uid, u->gid, u->umask);
    for (size_t i = 0; i < u->n_groups && n > 0 && (size_t)n < size; i++)
        n += snprintf(buf + n, size - (size_t)n, " %u", u->groups[i]);
    if (u->no_new_privs && n > 0 && (size_t)n < size)
        n += snprintf(buf + n, size - (size_t)n, " nnp");
    if (u->set_caps && n > 0 && (size_t)n < size)
        n += snprintf(buf + n, size - (size_t)n, " caps");
    for (size_t i = 0; u->set_caps && i < NSBOX_SPAWNUSER_CAPSETS && n > 0 && (size_t)n < size; i++)
        n += snprintf(buf + n, size - (size_t)n, " %llx", (unsigned long long)u->caps[i]);
    return n > 0 && (size_t)n < size ? 0 : -1;
}

/* A decimal id at s (at most ID_MAX, no sign): where it ends, or NULL. */
static const char *number(const char *s, unsigned long long *v)
{
    unsigned long long x = 0;
    int digits = 0;
    for (; *s >= '0' && *s <= '9'; s++)
        if (++digits > 10 || (x = x * 10 + (unsigned)(*s - '0')) > ID_MAX)
            return NULL;
    *v = x;
    return digits ? s : NULL;
}

/* One field at *p: an id, or "-1", then a space or the end. */
static int field(const char **p, long long *v)
{
    bool neg = **p == '-';
    unsigned long long x;
    const char *s = number(*p + neg, &x);
    if (!s || (neg && x != 1))
        return -1;
    if (*s == ' ' && s[1])
        s++;
    else if (*s)
        return -1;
    *v = neg ? -1 : (long long)x;
    *p = s;
    return 0;
}

/* "B E P I A": five masks of 1 to 16 lowercase hex digits, single spaces between. */
static int parse_caps(const char *p, struct nsbox_spawnuser *u)
{
    for (size_t i = 0; i < NSBOX_SPAWNUSER_CAPSETS; i++) {
        uint64_t v = 0;
        int digits = 0;
        for (; (*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f'); p++) {
            if (++digits > 16)
                return -1;
            v = v << 4 | (uint64_t)(*p <= '9' ? *p - '0' : *p - 'a' + 10);
        }
        if (!digits || (i + 1 < NSBOX_SPAWNUSER_CAPSETS ? *p++ != ' ' : *p != '\0'))
            return -1;
        u->caps[i] = v;
    }
    u->set_caps = true;
    return 0;
}

int nsbox_spawnuser_parse(const char *text, struct nsbox_spawnuser *u, struct nsbox_err *e)
{
    memset(u, 0, sizeof *u);
    if (strnlen(text, NSBOX_SPAWNUSER_TEXT_MAX) == NSBOX_SPAWNUSER_TEXT_MAX)
        return nsbox_err_invalid(e, "exec user: longer than %d bytes", NSBOX_SPAWNUSER_TEXT_MAX);
    const char *p = text;
    long long uid, gid, mask;
    if (field(&p, &uid) < 0 || field(&p, &gid) < 0 || field(&p, &mask) < 0 || uid < 0 || gid < 0 ||
        mask > 0777)
        return nsbox_err_invalid(e,
                                 "exec user '%s': give \"uid gid umask group...\" in decimal, "
                                 "umask -1 or 0-511",
                                 NSBOX_SHOW(text));
    u->uid = (uint32_t)uid, u->gid = (uint32_t)gid, u->umask = (int)mask;
    while (*p && strncmp(p, "caps ", 5) && strncmp(p, "nnp", 3)) {
        long long g;
        if (u->n_groups == NSBOX_SPAWNUSER_GROUPS_MAX)
            return nsbox_err_invalid(e, "exec user: more than %d groups",
                                     NSBOX_SPAWNUSER_GROUPS_MAX);
        if (field(&p, &g) < 0 || g < 0)
            return nsbox_err_invalid(e, "exec user '%s': a group is not a decimal id",
                                     NSBOX_SHOW(text));
        u->groups[u->n_groups++] = (uint32_t)g;
    }
    if (!strncmp(p, "nnp", 3) && (p[3] == '\0' || !strncmp(p + 3, " caps ", 6))) {
        u->no_new_privs = true;
        p += p[3] ? 4 : 3;
    }
    if (*p && (strncmp(p, "caps ", 5) || parse_caps(p + 5, u) < 0))
        return nsbox_err_invalid(e,
                                 "exec user '%s': after the groups only \"nnp\", then \"caps\" "
                                 "and 5 capability sets as masks in lowercase hex, may follow",
                                 NSBOX_SHOW(text));
    return 0;
}

int nsbox_spawnuser_add_gids(const char *list, uint32_t *groups, size_t *n, size_t max,
                             struct nsbox_err *e)
{
    for (const char *p = list;;) {
        unsigned long long g;
        const char *s = number(p, &g);
        if (!s || (*s && *s != ','))
            return nsbox_err_invalid(e,
                                     "--additional-gids '%s': give group ids (0-4294967294) in "
                                     "decimal, separated by commas",
                                     NSBOX_SHOW(list));
        if (*n == max)
            return nsbox_err_invalid(e, "--additional-gids: more than %zu groups", max);
        groups[(*n)++] = (uint32_t)g;
        if (!*s)
            return 0;
        p = s + 1;
    }
}
