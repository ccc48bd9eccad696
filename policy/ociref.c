/* OCI image references (distribution's reference grammar, as docker normalises it). */
#include "ociref.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#define SHOW(t) NSBOX_SHOW(t)

static bool is_lower_alnum(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

static bool is_hex(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

bool nsbox_ociref_digest_valid(const char *d)
{
    if (!d || strncmp(d, "sha256:", 7) != 0 || strlen(d) != NSBOX_OCI_DIGEST_LEN)
        return false;
    for (const char *p = d + 7; *p; p++)
        if (!is_hex(*p))
            return false;
    return true;
}

/* path component: [a-z0-9]+ separated by '.', '_', '__' or runs of '-' */
static bool component_valid(const char *s, size_t n)
{
    if (n == 0 || !is_lower_alnum(s[0]) || !is_lower_alnum(s[n - 1]))
        return false;
    for (size_t i = 1; i < n; i++) {
        char c = s[i];
        if (is_lower_alnum(c) || c == '-')
            continue;
        if (c == '.' && is_lower_alnum(s[i - 1]))
            continue;
        if (c == '_' && (is_lower_alnum(s[i - 1]) || (s[i - 1] == '_' && i >= 2 &&
                                                      is_lower_alnum(s[i - 2]))))
            continue;
        return false;
    }
    return true;
}

static bool path_valid(const char *s)
{
    size_t n = strlen(s);
    if (n == 0)
        return false;
    const char *p = s;
    for (;;) {
        const char *slash = strchr(p, '/');
        size_t len = slash ? (size_t)(slash - p) : strlen(p);
        if (!component_valid(p, len))
            return false;
        if (!slash)
            return true;
        p = slash + 1;
    }
}

/* host[:port]: letters, digits, '.', '-'; a port of digits; or a bracketed IPv6 address */
static bool domain_valid(const char *s)
{
    size_t n = strlen(s);
    if (n == 0)
        return false;
    const char *colon = NULL;
    if (s[0] == '[') {
        const char *end = strchr(s, ']');
        if (!end || end == s + 1)
            return false;
        for (const char *p = s + 1; p < end; p++)
            if (!is_hex(*p) && *p != ':' && !(*p >= 'A' && *p <= 'F'))
                return false;
        if (end[1] == '\0')
            return true;
        if (end[1] != ':')
            return false;
        colon = end + 1;
    } else {
        colon = strchr(s, ':');
        size_t hn = colon ? (size_t)(colon - s) : n;
        if (hn == 0)
            return false;
        for (size_t i = 0; i < hn; i++) {
            char c = s[i];
            if (!is_lower_alnum(c) && !(c >= 'A' && c <= 'Z') && c != '.' && c != '-')
                return false;
        }
    }
    if (!colon)
        return true;
    if (!colon[1] || strlen(colon + 1) > 5)
        return false;
    for (const char *p = colon + 1; *p; p++)
        if (*p < '0' || *p > '9')
            return false;
    return true;
}

static bool tag_valid(const char *t)
{
    size_t n = strlen(t);
    if (n == 0 || n > 128)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = t[i];
        bool word = is_lower_alnum(c) || (c >= 'A' && c <= 'Z') || c == '_';
        if (!word && (i == 0 || (c != '.' && c != '-')))
            return false;
    }
    return true;
}

int nsbox_ociref_parse(const char *text, struct nsbox_ociref *r, struct nsbox_err *e)
{
    memset(r, 0, sizeof *r);
    char buf[2 * NSBOX_OCIREF_MAX];
    if (!text || !text[0])
        return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL, "empty image reference");
    if (strlen(text) >= sizeof buf)
        return nsbox_err_set(e, NSBOX_E_INVALID, ENAMETOOLONG, "image reference '%s' is too long",
                             SHOW(text));
    strcpy(buf, text);
    char *at = strchr(buf, '@');
    if (at) {
        *at = '\0';
        if (!nsbox_ociref_digest_valid(at + 1))
            return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL,
                                 "image reference '%s': the digest must be sha256: and 64 "
                                 "lower-case hex digits",
                                 SHOW(text));
        strcpy(r->digest, at + 1);
    }
    /* the tag is after the last ':' that follows the last '/' (a port's ':' comes before) */
    char *slash = strrchr(buf, '/');
    char *colon = strrchr(slash ? slash : buf, ':');
    if (colon) {
        *colon = '\0';
        if (!tag_valid(colon + 1))
            return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL,
                                 "image reference '%s': invalid tag (letters, digits, '_', '.', "
                                 "'-', at most 128, not starting with '.' or '-')",
                                 SHOW(text));
        snprintf(r->tag, sizeof r->tag, "%s", colon + 1);
    }
    const char *name = buf;
    const char *first_slash = strchr(buf, '/');
    const char *domain = "docker.io";
    char dom[NSBOX_OCIREF_MAX + 1];
    if (first_slash) {
        size_t dn = (size_t)(first_slash - buf);
        /* docker: the first component is a registry if it has a '.' or ':', or is localhost */
        if (memchr(buf, '.', dn) || memchr(buf, ':', dn) ||
            (dn == 9 && !strncmp(buf, "localhost", 9)) || (dn > 0 && buf[0] == '[')) {
            if (dn >= sizeof dom)
                return nsbox_err_set(e, NSBOX_E_INVALID, ENAMETOOLONG,
                                     "image reference '%s': registry name too long", SHOW(text));
            memcpy(dom, buf, dn);
            dom[dn] = '\0';
            if (!domain_valid(dom))
                return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL,
                                     "image reference '%s': invalid registry '%s'", SHOW(text),
                                     SHOW(dom));
            domain = !strcmp(dom, "index.docker.io") ? "docker.io" : dom;
            name = first_slash + 1;
        }
    }
    if (!path_valid(name))
        return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL,
                             "image reference '%s': invalid repository name (lower-case letters, "
                             "digits and separators '.', '_', '-', '/')",
                             SHOW(text));
    bool library = !strcmp(domain, "docker.io") && !strchr(name, '/');
    int n = snprintf(r->path, sizeof r->path, "%s%s", library ? "library/" : "", name);
    if (n < 0 || (size_t)n >= sizeof r->path)
        return nsbox_err_set(e, NSBOX_E_INVALID, ENAMETOOLONG, "image reference '%s' is too long",
                             SHOW(text));
    snprintf(r->domain, sizeof r->domain, "%s", domain);
    if (!r->tag[0] && !r->digest[0])
        strcpy(r->tag, "latest");
    char canon[NSBOX_OCIREF_MAX + 1];
    if (nsbox_ociref_format(r, canon, sizeof canon) < 0)
        return nsbox_err_set(e, NSBOX_E_INVALID, ENAMETOOLONG,
                             "image reference '%s' is too long (at most %d characters)",
                             SHOW(text), NSBOX_OCIREF_MAX);
    return 0;
}

int nsbox_ociref_format(const struct nsbox_ociref *r, char *out, size_t n)
{
    int k = snprintf(out, n, "%s/%s%s%s%s%s", r->domain, r->path, r->tag[0] ? ":" : "", r->tag,
                     r->digest[0] ? "@" : "", r->digest);
    if (k < 0 || (size_t)k >= n || k > NSBOX_OCIREF_MAX)
        return -1;
    return k;
}

bool nsbox_ociref_is_reference(const char *text)
{
    if (!text || !text[0] || text[0] == '/' || text[0] == '.' || text[0] == '~')
        return false;
    if (text[strlen(text) - 1] == '/')
        return false;
    /* a bare word is a stored image's name ("debian", "mine"): a reference says more */
    if (!strpbrk(text, ":/@"))
        return false;
    struct nsbox_ociref r;
    struct nsbox_err e;
    return nsbox_ociref_parse(text, &r, &e) == 0;
}
