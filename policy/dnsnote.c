/* The note on names that did not resolve (dnsnote.h). */
#include "dnsnote.h"

#include <stdarg.h>
#include <stdio.h>
#include <strings.h>

bool nsbox_dnsnote_stub_wanted(const struct nsbox_spec *s)
{
    return s->net == NSBOX_NET_ALLOW || (s->net == NSBOX_NET_NONE && s->n_egress == 0);
}

static bool allowed(const struct nsbox_spec *s, const char *name)
{
    for (size_t i = 0; i < s->n_hosts; i++)
        if (strcasecmp(s->hosts[i].name, name) == 0)
            return true;
    return false;
}

struct out {
    char *buf;
    size_t size, len;
    bool cut; /* something did not fit */
};

__attribute__((format(printf, 2, 3))) static void put(struct out *o, const char *fmt, ...)
{
    if (o->len + 1 >= o->size) {
        o->cut = true;
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    int r = vsnprintf(o->buf + o->len, o->size - o->len, fmt, ap);
    va_end(ap);
    if (r > 0 && (size_t)r >= o->size - o->len)
        o->cut = true;
    if (r > 0)
        o->len += (size_t)r < o->size - o->len ? (size_t)r : o->size - o->len - 1;
}

/* "a", "a and b", "a, b and c"; sep between them in a list for an option ("a,b") */
static void put_names(struct out *o, const char *const *v, size_t n, const char *sep)
{
    for (size_t i = 0; i < n; i++)
        put(o, "%s%s", i == 0 ? "" : sep ? sep : i + 1 == n ? " and " : ", ", v[i]);
}

static void put_allow_list(struct out *o, const struct nsbox_spec *s)
{
    for (size_t i = 0; i < s->n_hosts; i++) {
        char h[NSBOX_HOSTNAME_MAX + 16];
        if (nsbox_spec_net_host_format(&s->hosts[i], h, sizeof h) < 0)
            continue;
        put(o, "%s%s", i ? "," : "", h);
    }
}

size_t nsbox_dnsnote_format(const struct nsbox_spec *s,
                            const char names[][NSBOX_DNSQUERY_NAME_MAX + 1], size_t n, char *buf,
                            size_t size)
{
    const char *v[NSBOX_DNSQUERY_NAMES];
    size_t k = 0;
    for (size_t i = 0; i < n && k < NSBOX_DNSQUERY_NAMES; i++)
        if (!allowed(s, names[i]))
            v[k++] = names[i];
    if (!size)
        return 0;
    buf[0] = '\0';
    if (k == 0 || !nsbox_dnsnote_stub_wanted(s))
        return 0;
    struct out o = {buf, size, 0, false};
    put(&o, "nsbox: the command looked up ");
    put_names(&o, v, k, NULL);
    const char *them = k == 1 ? "it" : "them";
    if (s->net == NSBOX_NET_NONE)
        put(&o, ", but this sandbox has no network (network none); to reach %s: ", them);
    else
        put(&o, ", which %s not in the allow list; ", k == 1 ? "is" : "are");
    /* the option whole or not at all: a host cut in two is a wrong one to paste */
    size_t at = o.len;
    bool cut = o.cut;
    if (s->net != NSBOX_NET_NONE)
        put(&o, "add %s: ", them);
    put(&o, "--network allow=");
    if (s->net != NSBOX_NET_NONE) {
        put_allow_list(&o, s);
        put(&o, "%s", s->n_hosts ? "," : "");
    }
    put_names(&o, v, k, ",");
    put(&o, "%s", s->net == NSBOX_NET_NONE ? " (or all); docs/network.md" : "");
    if (o.cut && !cut) {
        o.len = at;
        o.cut = false;
        buf[at] = '\0';
        put(&o, "add %s to --network allow%s", them,
            s->net == NSBOX_NET_NONE ? " (or all); docs/network.md" : "");
    }
    return o.len;
}
