/* Pure cgroup helpers: see cgroup_util.h. */
#include "cgroup_util.h"
#include "mntescape.h"
#include "safename.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static bool is_sep(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == ',';
}

static bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static int copy_span(char *dst, size_t n, const char *src, size_t len)
{
    if (len >= n) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(dst, src, len);
    dst[len] = '\0';
    return 0;
}

/* ---- /proc/self/cgroup --------------------------------------------------------------------- */

static int parse_self_line(const char *line, size_t len, struct nsbox_cg_self *out)
{
    const char *end = line + len;
    const char *c1 = memchr(line, ':', len);
    if (!c1 || c1 == line)
        goto bad;
    const char *c2 = memchr(c1 + 1, ':', (size_t)(end - c1 - 1));
    if (!c2)
        goto bad;
    /* The path is everything after the second colon: it may itself contain colons. */
    const char *path = c2 + 1;
    size_t plen = (size_t)(end - path);
    if (plen == 0 || path[0] != '/')
        goto bad;

    unsigned long hier = 0;
    for (const char *p = line; p < c1; p++) {
        if (*p < '0' || *p > '9' || hier > 1000000)
            goto bad;
        hier = hier * 10 + (unsigned long)(*p - '0');
    }
    size_t clen = (size_t)(c2 - c1 - 1);

    if (hier == 0 && clen == 0) {
        out->has_v2 = true;
        return copy_span(out->v2_path, sizeof out->v2_path, path, plen);
    }
    if (clen == 0)
        goto bad; /* a v1 hierarchy always names its controllers (or name=) */
    if (out->n >= NSBOX_CG_SELF_MAX) {
        errno = E2BIG;
        return -1;
    }
    struct nsbox_cg_self_entry *en = &out->v1[out->n];
    en->hier = (unsigned)hier;
    if (copy_span(en->controllers, sizeof en->controllers, c1 + 1, clen) < 0 ||
        copy_span(en->path, sizeof en->path, path, plen) < 0)
        return -1;
    out->n++;
    return 0;
bad:
    errno = EINVAL;
    return -1;
}

int nsbox_cg_parse_self(const char *text, struct nsbox_cg_self *out)
{
    memset(out, 0, sizeof *out);
    const char *p = text;
    while (*p) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        if (len > 0 && parse_self_line(p, len, out) < 0)
            return -1;
        p += len + (nl ? 1 : 0);
    }
    return 0;
}

const struct nsbox_cg_self_entry *nsbox_cg_self_find(const struct nsbox_cg_self *s,
                                                     const char *controller)
{
    for (size_t i = 0; i < s->n; i++)
        if (nsbox_cg_list_has(s->v1[i].controllers, controller))
            return &s->v1[i];
    return NULL;
}

/* ---- lists and keyed files ----------------------------------------------------------------- */

bool nsbox_cg_list_has(const char *list, const char *word)
{
    size_t wl = strlen(word);
    if (wl == 0)
        return false;
    const char *p = list;
    while (*p) {
        while (*p && is_sep(*p))
            p++;
        const char *s = p;
        while (*p && !is_sep(*p))
            p++;
        if ((size_t)(p - s) == wl && memcmp(s, word, wl) == 0)
            return true;
    }
    return false;
}

size_t nsbox_cg_missing(const char *list, const char *const *need, size_t n, char *out,
                        size_t outn)
{
    size_t missing = 0, used = 0;
    if (outn)
        out[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        if (nsbox_cg_list_has(list, need[i]))
            continue;
        int w = snprintf(out + used, outn > used ? outn - used : 0, "%s%s", missing ? "," : "",
                         need[i]);
        if (w > 0 && used + (size_t)w < outn)
            used += (size_t)w;
        missing++;
    }
    return missing;
}

static int parse_u64_span(const char *s, const char **end, uint64_t *out)
{
    uint64_t v = 0;
    const char *p = s;
    if (*p < '0' || *p > '9')
        return -1;
    for (; *p >= '0' && *p <= '9'; p++) {
        unsigned d = (unsigned)(*p - '0');
        if (v > (UINT64_MAX - d) / 10)
            return -1;
        v = v * 10 + d;
    }
    *out = v;
    *end = p;
    return 0;
}

int nsbox_cg_parse_u64(const char *text, uint64_t *out)
{
    const char *p = text;
    while (is_space(*p))
        p++;
    const char *end;
    if (parse_u64_span(p, &end, out) < 0)
        return -1;
    while (is_space(*end))
        end++;
    return *end ? -1 : 0;
}

int nsbox_cg_parse_keyed(const char *text, const char *key, uint64_t *out)
{
    size_t kl = strlen(key);
    const char *p = text;
    while (*p) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        /* A whole first field: "oom_kill" must not match "oom_kill_disable" nor "oom". */
        if (len > kl && memcmp(p, key, kl) == 0 && p[kl] == ' ') {
            const char *v = p + kl;
            while (*v == ' ')
                v++;
            const char *end;
            if (parse_u64_span(v, &end, out) < 0)
                return -1;
            return 0;
        }
        p += len + (nl ? 1 : 0);
    }
    return -1;
}

int nsbox_cg_parse_limit(const char *text, uint64_t *out)
{
    const char *p = text;
    while (is_space(*p))
        p++;
    if (strncmp(p, "max", 3) == 0 || strncmp(p, "-1", 2) == 0) {
        const char *q = p + (p[0] == 'm' ? 3 : 2);
        while (is_space(*q))
            q++;
        if (*q)
            return -1;
        *out = UINT64_MAX;
        return 0;
    }
    if (nsbox_cg_parse_u64(p, out) < 0)
        return -1;
    /* v1 prints "no limit" as PAGE_COUNTER_MAX pages, i.e. LONG_MAX rounded down to the page
     * size (9223372036854771712 with 4 KiB pages). Anything that large is not a real limit on
     * any machine, so treat the whole top range as unlimited whatever the page size. */
    if (*out >= ((uint64_t)INT64_MAX & ~(uint64_t)0xffffff))
        *out = UINT64_MAX;
    return 0;
}

bool nsbox_cg_next_pid(const char **cursor, pid_t *pid)
{
    const char *p = *cursor;
    for (;;) {
        while (*p && (*p < '0' || *p > '9'))
            p++;
        if (!*p) {
            *cursor = p;
            return false;
        }
        uint64_t v;
        const char *end;
        if (parse_u64_span(p, &end, &v) < 0) {
            while (*p >= '0' && *p <= '9')
                p++;
            continue;
        }
        p = end;
        if (v > 1 && v <= INT32_MAX) {
            *pid = (pid_t)v;
            *cursor = p;
            return true;
        }
    }
}

/* ---- formatting ---------------------------------------------------------------------------- */

static int fmt(char *out, size_t n, const char *f, ...) __attribute__((format(printf, 3, 4)));
static int fmt(char *out, size_t n, const char *f, ...)
{
    va_list ap;
    va_start(ap, f);
    int w = vsnprintf(out, n, f, ap);
    va_end(ap);
    if (w < 0 || (size_t)w >= n) {
        errno = ENOSPC;
        return -1;
    }
    return 0;
}

int nsbox_cg_fmt_cpu_max(uint32_t cpus, char *out, size_t n)
{
    if (cpus == 0)
        return fmt(out, n, "max %u", NSBOX_CG_CPU_PERIOD_US);
    return fmt(out, n, "%" PRIu64 " %u", (uint64_t)cpus * NSBOX_CG_CPU_PERIOD_US,
               NSBOX_CG_CPU_PERIOD_US);
}

int nsbox_cg_fmt_cfs_quota(uint32_t cpus, char *out, size_t n)
{
    if (cpus == 0)
        return fmt(out, n, "-1");
    return fmt(out, n, "%" PRIu64, (uint64_t)cpus * NSBOX_CG_CPU_PERIOD_US);
}

int nsbox_cg_fmt_limit(uint64_t v, int version, char *out, size_t n)
{
    if (v == 0)
        return fmt(out, n, "%s", version == 2 ? "max" : "-1");
    return fmt(out, n, "%" PRIu64, v);
}

/* ---- paths --------------------------------------------------------------------------------- */

bool nsbox_cg_valid_id(const char *id)
{
    return id && strlen(id) <= 64 && nsbox_safename_valid(id, strlen(id));
}

bool nsbox_cg_is_sandbox_name(const char *name)
{
    return strncmp(name, "nsbox-", 6) == 0 && nsbox_cg_valid_id(name + 6);
}

int nsbox_cg_join(char *out, size_t n, const char *a, const char *rel, const char *leaf)
{
    while (rel && *rel == '/')
        rel++;
    size_t al = strlen(a);
    while (al > 1 && a[al - 1] == '/')
        al--;
    int w = snprintf(out, n, "%.*s%s%s%s%s", (int)al, a, rel && *rel ? "/" : "", rel ? rel : "",
                     leaf ? "/" : "", leaf ? leaf : "");
    if (w < 0 || (size_t)w >= n) {
        errno = ENAMETOOLONG;
        return -1;
    }
    return 0;
}

int nsbox_cg_normalize_parent(const char *in, const char *strip_prefix, char *out, size_t n)
{
    if (!in || in[0] != '/' || n < 2) {
        errno = EINVAL;
        return -1;
    }
    if (strip_prefix && *strip_prefix) {
        size_t sl = strlen(strip_prefix);
        if (strncmp(in, strip_prefix, sl) == 0 && (in[sl] == '/' || in[sl] == '\0'))
            in += sl;
        if (*in == '\0')
            in = "/";
    }
    size_t used = 0;
    const char *p = in;
    while (*p) {
        while (*p == '/')
            p++;
        const char *s = p;
        while (*p && *p != '/')
            p++;
        size_t len = (size_t)(p - s);
        if (len == 0)
            break;
        /* ".." would walk out of the configured place; "." is only noise but we refuse it to
         * keep one spelling per cgroup. */
        if ((len == 1 && s[0] == '.') || (len == 2 && s[0] == '.' && s[1] == '.')) {
            errno = EINVAL;
            return -1;
        }
        for (size_t i = 0; i < len; i++)
            if ((unsigned char)s[i] < 0x20) {
                errno = EINVAL;
                return -1;
            }
        if (used + 1 + len >= n) {
            errno = ENAMETOOLONG;
            return -1;
        }
        out[used++] = '/';
        memcpy(out + used, s, len);
        used += len;
    }
    if (used == 0)
        out[used++] = '/';
    out[used] = '\0';
    return 0;
}

/* A field of mountinfo unescaped (mntescape.h), control characters kept: a cgroup's name may
 * hold any byte but '/', and the root field is compared with /proc/self/cgroup's path, which is
 * not escaped, so refusing them would fail a cgroup that works. */
static int unescape_field(const char *s, size_t len, char *out, size_t n)
{
    return nsbox_mntescape_decode(s, len, out, n, false);
}

int nsbox_cg_mountinfo_root(const char *text, const char *mountpoint, char *root, size_t n)
{
    bool found = false;
    const char *p = text;
    while (*p) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        const char *f[5];
        size_t fl[5];
        size_t nf = 0;
        const char *q = p, *end = p + len;
        while (nf < 5 && q < end) {
            while (q < end && *q == ' ')
                q++;
            const char *s = q;
            while (q < end && *q != ' ')
                q++;
            if (q > s) {
                f[nf] = s;
                fl[nf] = (size_t)(q - s);
                nf++;
            }
        }
        if (nf == 5) {
            char mp[PATH_MAX];
            if (unescape_field(f[4], fl[4], mp, sizeof mp) == 0 && strcmp(mp, mountpoint) == 0) {
                /* Keep scanning: a later mount on the same point hides the earlier one. */
                if (unescape_field(f[3], fl[3], root, n) < 0)
                    return -1;
                found = true;
            }
        }
        p += len + (nl ? 1 : 0);
    }
    if (!found) {
        errno = ENOENT;
        return -1;
    }
    return 0;
}

int nsbox_cg_strip_root(const char *path, const char *mount_root, char *out, size_t n)
{
    size_t rl = strlen(mount_root);
    while (rl > 0 && mount_root[rl - 1] == '/')
        rl--;
    if (strncmp(path, mount_root, rl) != 0 || (path[rl] != '/' && path[rl] != '\0')) {
        errno = ENOENT;
        return -1;
    }
    const char *rest = path + rl;
    if (*rest == '\0')
        rest = "/";
    return copy_span(out, n, rest, strlen(rest));
}
