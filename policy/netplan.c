/* The network plan: pure computations behind sandbox/net.c (see netplan.h, docs/network.md). */
#define _GNU_SOURCE
#include "netplan.h"
#include "cleanup.h"
#include "cfgsection.h"
#include "cleanup_cjson.h"

#include <arpa/inet.h>
#include <cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- a growing string ------------------------------------------------------------------------ */

struct sbuf {
    char *p;
    size_t len, cap;
    bool oom;
};

__attribute__((format(printf, 2, 3))) static void sb_printf(struct sbuf *b, const char *fmt, ...)
{
    if (b->oom)
        return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->p ? b->p + b->len : NULL, b->p ? b->cap - b->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->oom = true;
            return;
        }
        if (b->p && b->len + (size_t)n < b->cap) {
            b->len += (size_t)n;
            return;
        }
        size_t cap = b->cap ? b->cap : 512;
        while (cap <= b->len + (size_t)n)
            cap *= 2;
        char *np = realloc(b->p, cap);
        if (!np) {
            b->oom = true;
            return;
        }
        b->p = np;
        b->cap = cap;
    }
}

static char *sb_steal(struct sbuf *b)
{
    if (b->oom || !b->p) {
        free(b->p);
        return NULL;
    }
    return b->p;
}

static const char *ip4(struct in_addr a, char *buf)
{
    return inet_ntop(AF_INET, &a, buf, INET_ADDRSTRLEN);
}

/* Bad input: NSBOX_E_INVALID with the message (policy/err.c). */
#define invalid nsbox_err_invalid

/* ---- address pool ---------------------------------------------------------------------------- */

static uint32_t mask_of(unsigned prefix)
{
    return prefix == 0 ? 0 : 0xffffffffu << (32 - prefix);
}

static bool in_net(uint32_t a, uint32_t net, unsigned prefix)
{
    return (a & mask_of(prefix)) == (net & mask_of(prefix));
}

/* A CIDR's IPv4 address (network byte order) as a number. */
static uint32_t be32(const uint8_t *b)
{
    return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
}

/* IPv4 ranges with a meaning of their own. All but link-local (which an explicit entry may
 * open: a cloud VPC's services live there) are never a destination outside the sandbox: from
 * inside its network namespace, 0/8 and 127/8 are the sandbox itself, and multicast and
 * 240/4 (broadcast included) are not TCP peers. An allow or egress entry there would open
 * nothing, while the user most likely meant the host's own "localhost" service. */
static const struct {
    uint32_t net;
    unsigned prefix;
    const char *what; /* NULL: may be named explicitly */
} special4[] = {
    {0x00000000u, 8, "'this network' (0.0.0.0/8): from inside the sandbox that is the sandbox "
                     "itself"},
    {0x7f000000u, 8, "loopback (127.0.0.0/8): inside the sandbox that is the sandbox itself, "
                     "always reachable without an entry"},
    {0xa9fe0000u, 16, NULL},
    {0xe0000000u, 4, "multicast (224.0.0.0/4): not a destination a sandbox can reach"},
    {0xf0000000u, 4, "reserved (240.0.0.0/4, broadcast included): not a destination a sandbox "
                     "can reach"},
};

/* What makes a.b.c.d/prefix meaningless as a destination (it lies wholly inside one of the
 * sandbox-local ranges above), or NULL. */
static const char *sandbox_local(uint32_t a, unsigned prefix)
{
    for (size_t i = 0; i < NSBOX_ARRAY_LEN(special4); i++)
        if (special4[i].what && prefix >= special4[i].prefix &&
            in_net(a, special4[i].net, special4[i].prefix))
            return special4[i].what;
    return NULL;
}

#define LOCAL_HINT NSBOX_NET_LOCAL_HINT

int nsbox_netplan_pool_parse(const char *text, struct nsbox_netpool *p, struct nsbox_err *e)
{
    struct nsbox_cidr c;
    if (nsbox_spec_net_parse_cidr(text, &c, e) < 0)
        return nsbox_err_wrap(e, "network pool");
    if (c.family != AF_INET)
        return invalid(e, "network pool '%s': must be an IPv4 range (sandboxes have IPv4 only)",
                       text);
    if (c.prefix < 8 || c.prefix > NSBOX_NET_SLOT_PREFIX)
        return invalid(e, "network pool '%s': prefix must be between /8 and /%d (one /%d per "
                       "sandbox)", text, NSBOX_NET_SLOT_PREFIX, NSBOX_NET_SLOT_PREFIX);
    uint32_t base = be32(c.addr);
    /* Ranges with a meaning of their own: the sandbox-local ones below, and link-local
     * (blocked for sandboxes as cloud metadata). */
    for (size_t i = 0; i < NSBOX_ARRAY_LEN(special4); i++) {
        unsigned m = c.prefix < special4[i].prefix ? c.prefix : special4[i].prefix;
        if (in_net(base, special4[i].net, m))
            return invalid(e, "network pool '%s': overlaps a reserved range (this host, "
                           "loopback, link-local, multicast or reserved)", text);
    }
    p->base = base;
    p->prefix = c.prefix;
    return 0;
}

uint32_t nsbox_netplan_pool_slots(const struct nsbox_netpool *p)
{
    return 1u << (NSBOX_NET_SLOT_PREFIX - p->prefix);
}

int nsbox_netplan_pool_slot(const struct nsbox_netpool *p, uint32_t index,
                            struct nsbox_netslot *out, struct nsbox_err *e)
{
    if (index >= nsbox_netplan_pool_slots(p))
        return invalid(e, "network slot %u outside the pool (%u slots)", index,
                       nsbox_netplan_pool_slots(p));
    uint32_t sub = p->base + (index << (32 - NSBOX_NET_SLOT_PREFIX));
    out->index = index;
    out->subnet.s_addr = htonl(sub);
    out->host.s_addr = htonl(sub + 1);
    out->sandbox.s_addr = htonl(sub + 2);
    return 0;
}

bool nsbox_netplan_pool_overlaps(const struct nsbox_netpool *p, const struct nsbox_cidr *c)
{
    if (c->family != AF_INET)
        return false;
    uint32_t a = be32(c->addr);
    unsigned m = c->prefix < p->prefix ? c->prefix : p->prefix;
    return in_net(a, p->base, m);
}

/* ---- configuration --------------------------------------------------------------------------- */

void nsbox_netplan_config_init(struct nsbox_netconfig *c)
{
    memset(c, 0, sizeof *c);
    nsbox_netplan_pool_parse(NSBOX_NET_DEFAULT_POOL, &c->pool, NULL);
    c->allow_by_name = true; /* "address" is the opt-out (docs/network.md) */
}

int nsbox_netplan_config_from_json(struct nsbox_netconfig *c, const cJSON *root,
                                   struct nsbox_err *e)
{
    const cJSON *net;
    if (nsbox_cfgsection_find(root, "network", NULL, &net, e) < 0)
        return -1;
    struct nsbox_netconfig out = *c;
    const cJSON *it;
    cJSON_ArrayForEach(it, net)
    {
        if (!strcmp(it->string, "pool")) {
            if (!cJSON_IsString(it))
                return nsbox_cfgsection_bad(e, "network", "pool",
                                            "must be a string (an IPv4 CIDR)");
            if (nsbox_netplan_pool_parse(it->valuestring, &out.pool, e) < 0)
                return nsbox_err_wrap(e, "config: key 'network.pool'");
        } else if (!strcmp(it->string, "dns")) {
            int n = cJSON_GetArraySize(it);
            if (!cJSON_IsArray(it) || n < 1 || n > NSBOX_NET_MAX_DNS)
                return nsbox_cfgsection_bad(e, "network", "dns",
                                            "must be a list of 1 to %d IPv4 addresses",
                                            NSBOX_NET_MAX_DNS);
            out.n_dns = 0;
            const cJSON *a;
            cJSON_ArrayForEach(a, it)
            {
                if (!cJSON_IsString(a) || inet_pton(AF_INET, a->valuestring,
                                                    &out.dns[out.n_dns]) != 1)
                    return nsbox_cfgsection_bad(e, "network", "dns", "'%s' is not an IPv4 address",
                                                cJSON_IsString(a) ? a->valuestring
                                                                  : "(not a string)");
                out.n_dns++;
            }
        } else if (!strcmp(it->string, "allow_names")) {
            if (!cJSON_IsString(it) || (strcmp(it->valuestring, "tls") &&
                                        strcmp(it->valuestring, "address")))
                return nsbox_cfgsection_bad(e, "network", "allow_names",
                                            "must be \"tls\" (by name, through the egress "
                                            "helper) or \"address\"");
            out.allow_by_name = !strcmp(it->valuestring, "tls");
        } else if (!strcmp(it->string, "upstream_ca")) {
            if (!cJSON_IsString(it) || it->valuestring[0] != '/' ||
                strlen(it->valuestring) >= sizeof out.upstream_ca)
                return nsbox_cfgsection_bad(e, "network", "upstream_ca",
                                            "must be the absolute path of a PEM file of CA "
                                            "certificates");
            snprintf(out.upstream_ca, sizeof out.upstream_ca, "%s", it->valuestring);
        } else {
            return nsbox_cfgsection_unknown(e, "network", it->string,
                                            "pool, dns, allow_names, upstream_ca");
        }
    }
    *c = out;
    return 0;
}

/* ---- resolv.conf ----------------------------------------------------------------------------- */

static bool usable_resolver(const char *text, struct in_addr *out)
{
    if (inet_pton(AF_INET, text, out) != 1)
        return false; /* IPv6: sandboxes have IPv4 only */
    uint32_t a = ntohl(out->s_addr);
    return a != 0 && (a >> 24) != 127;
}

void nsbox_netplan_resolv_parse(const char *text, struct nsbox_resolv *r)
{
    memset(r, 0, sizeof *r);
    while (text && *text) {
        size_t len = strcspn(text, "\n");
        char line[512];
        size_t n = len < sizeof line - 1 ? len : sizeof line - 1;
        memcpy(line, text, n);
        line[n] = '\0';
        text += len + (text[len] == '\n');
        char *save = NULL, *key = strtok_r(line, " \t\r", &save);
        if (!key || key[0] == '#' || key[0] == ';')
            continue;
        char *rest = save ? save + strspn(save, " \t") : NULL;
        if (rest) {
            /* strip trailing blanks and comments */
            rest[strcspn(rest, "#;\r")] = '\0';
            size_t l = strlen(rest);
            while (l && (rest[l - 1] == ' ' || rest[l - 1] == '\t'))
                rest[--l] = '\0';
        }
        if (!strcmp(key, "nameserver") && rest && *rest) {
            char addr[64];
            snprintf(addr, sizeof addr, "%.*s", (int)strcspn(rest, " \t"), rest);
            struct in_addr a;
            if (!usable_resolver(addr, &a)) {
                if (!r->n_skipped++)
                    snprintf(r->skipped, sizeof r->skipped, "%s", addr);
                continue;
            }
            bool dup = false;
            for (size_t i = 0; i < r->n_ns; i++)
                dup |= r->ns[i].s_addr == a.s_addr;
            if (!dup && r->n_ns < NSBOX_NET_MAX_DNS)
                r->ns[r->n_ns++] = a;
        } else if ((!strcmp(key, "search") || !strcmp(key, "domain")) && rest) {
            snprintf(r->search, sizeof r->search, "%s", rest); /* the last one wins, as in glibc */
        } else if (!strcmp(key, "options") && rest && *rest) {
            size_t used = strlen(r->options);
            if (used + strlen(rest) + 2 < sizeof r->options)
                snprintf(r->options + used, sizeof r->options - used, "%s%s", used ? " " : "",
                         rest);
        }
    }
}

/* ---- the plan -------------------------------------------------------------------------------- */

static bool valid_id(const char *id)
{
    size_t n = 0;
    for (; id[n]; n++)
        if (!((id[n] >= '0' && id[n] <= '9') || (id[n] >= 'a' && id[n] <= 'z')))
            return false;
    return n >= 1 && n <= NSBOX_NET_ID_MAX;
}

static bool cidr_within(const struct nsbox_netcidr *inner, const struct nsbox_netcidr *outer)
{
    return outer->prefix <= inner->prefix &&
           in_net(ntohl(inner->addr.s_addr), ntohl(outer->addr.s_addr), outer->prefix);
}

/* A concatenated interval set refuses overlapping elements: keep only ranges not inside
 * another (two CIDRs are either nested or disjoint). */
static void cidr_minimise(struct nsbox_netplan *p)
{
    size_t k = 0;
    for (size_t i = 0; i < p->n_cidr; i++) {
        bool covered = false;
        for (size_t j = 0; j < p->n_cidr && !covered; j++) {
            if (i == j || !cidr_within(&p->cidr[i], &p->cidr[j]))
                continue;
            /* equal ranges: keep the first */
            covered = p->cidr[j].prefix < p->cidr[i].prefix || j < i;
        }
        if (!covered)
            p->cidr[k++] = p->cidr[i];
    }
    p->n_cidr = k;
}

static int plan_egress(const struct nsbox_spec *s, struct nsbox_netplan *p, struct nsbox_err *e)
{
    for (size_t i = 0; i < s->n_egress; i++) {
        char text[INET6_ADDRSTRLEN + 8];
        if (nsbox_spec_net_cidr_format(&s->egress[i], text, sizeof text) < 0)
            snprintf(text, sizeof text, "?");
        if (s->egress[i].family != AF_INET)
            return nsbox_err_set(e, NSBOX_E_UNSUPPORTED, ENOTSUP,
                                 "egress '%s': IPv6 destinations are not supported: sandboxes "
                                 "have IPv4 only (docs/network.md)", text);
        const char *local = sandbox_local(be32(s->egress[i].addr), s->egress[i].prefix);
        if (local)
            return invalid(e, "egress '%s': %s" LOCAL_HINT, text, local);
        if (nsbox_netplan_pool_overlaps(&p->pool, &s->egress[i]))
            return invalid(e, "egress '%s': overlaps the sandbox address pool, which other "
                           "sandboxes use; egress never opens them (network.pool in the config "
                           "moves the pool)", text);
        struct nsbox_netcidr *c = &p->cidr[p->n_cidr++];
        memcpy(&c->addr, s->egress[i].addr, 4);
        c->prefix = s->egress[i].prefix;
    }
    cidr_minimise(p);
    return 0;
}

static int add_tcp(struct nsbox_netplan *p, struct in_addr a, uint16_t port, size_t cap)
{
    for (size_t i = 0; i < p->n_tcp; i++)
        if (p->tcp[i].addr.s_addr == a.s_addr && p->tcp[i].port == port)
            return 0;
    if (p->n_tcp >= cap)
        return -1;
    p->tcp[p->n_tcp].addr = a;
    p->tcp[p->n_tcp].port = port;
    p->n_tcp++;
    return 0;
}

static bool addr_in_pool(const struct nsbox_netpool *pool, struct in_addr a)
{
    return in_net(ntohl(a.s_addr), pool->base, pool->prefix);
}

static int plan_allow(const struct nsbox_spec *s, nsbox_netplan_resolve_fn resolve, void *rctx,
                      struct nsbox_netplan *p, struct nsbox_err *e)
{
    size_t cap = s->n_hosts * NSBOX_NET_MAX_ADDRS;
    p->pins = calloc(s->n_hosts ? s->n_hosts : 1, sizeof *p->pins);
    p->tcp = calloc(cap ? cap : 1, sizeof *p->tcp);
    if (!p->pins || !p->tcp)
        return nsbox_err_set(e, NSBOX_E_NOMEM, ENOMEM, "out of memory");
    for (size_t i = 0; i < s->n_hosts; i++) {
        const struct nsbox_host *h = &s->hosts[i];
        struct in_addr a;
        struct in6_addr a6;
        if (inet_pton(AF_INET6, h->name, &a6) == 1)
            return nsbox_err_set(e, NSBOX_E_UNSUPPORTED, ENOTSUP,
                                 "allowed host '%s': IPv6 destinations are not supported: "
                                 "sandboxes have IPv4 only (docs/network.md)", h->name);
        struct in_addr addrs[NSBOX_NET_MAX_ADDRS];
        size_t n = 0;
        if (inet_pton(AF_INET, h->name, &a) == 1) {
            addrs[n++] = a;
        } else {
            struct nsbox_netpin *pin = NULL;
            for (size_t j = 0; j < p->n_pins && !pin; j++)
                if (!strcasecmp(p->pins[j].name, h->name))
                    pin = &p->pins[j];
            if (!pin) {
                if (!resolve)
                    return invalid(e, "allowed host '%s': no resolver", h->name);
                pin = &p->pins[p->n_pins];
                snprintf(pin->name, sizeof pin->name, "%s", h->name);
                if (resolve(rctx, h->name, pin->addr, NSBOX_NET_MAX_ADDRS, &pin->n, e) < 0)
                    return nsbox_err_wrap(e, "allowed host '%s'", h->name);
                if (pin->n == 0)
                    return nsbox_err_set(e, NSBOX_E_UNSUPPORTED, ENOTSUP,
                                         "allowed host '%s': has no IPv4 address (sandboxes "
                                         "have IPv4 only)", h->name);
                p->n_pins++;
            }
            memcpy(addrs, pin->addr, pin->n * sizeof *addrs);
            n = pin->n;
        }
        for (size_t j = 0; j < n; j++) {
            char buf[INET_ADDRSTRLEN];
            ip4(addrs[j], buf);
            const char *local = sandbox_local(ntohl(addrs[j].s_addr), 32);
            if (local && !strcmp(buf, h->name)) /* an address given as such */
                return invalid(e, "allowed host '%s': %s" LOCAL_HINT, h->name, local);
            if (local)
                return invalid(e, "allowed host '%s': resolves to %s, %s" LOCAL_HINT, h->name,
                               buf, local);
            if (addr_in_pool(&p->pool, addrs[j]))
                return invalid(e, "allowed host '%s': address %s lies in the sandbox address "
                               "pool, which other sandboxes use", h->name, buf);
            if (add_tcp(p, addrs[j], h->port, cap) < 0)
                return nsbox_err_set(e, NSBOX_E_NOMEM, ENOMEM, "too many allowed addresses");
        }
    }
    return 0;
}

int nsbox_netplan_build(const struct nsbox_spec *s, const char *id,
                        const struct nsbox_netpool *pool, const struct nsbox_resolv *dns,
                        const char *dns_source, nsbox_netplan_resolve_fn resolve, void *rctx,
                        struct nsbox_netplan *p, struct nsbox_err *e)
{
    memset(p, 0, sizeof *p);
    p->mode = s->net;
    p->link = s->net != NSBOX_NET_NONE || s->n_egress > 0;
    if (!id || !valid_id(id))
        return invalid(e, "network: sandbox id '%s' is not 1 to %d lowercase letters or digits",
                       id ? id : "", NSBOX_NET_ID_MAX);
    snprintf(p->id, sizeof p->id, "%s", id);
    snprintf(p->ifname, sizeof p->ifname, NSBOX_NET_IFPREFIX "%s", id);
    p->pool = *pool;
    if (!p->link)
        return 0;
    if (plan_egress(s, p, e) < 0)
        goto fail;
    if (s->net == NSBOX_NET_ALLOW && plan_allow(s, resolve, rctx, p, e) < 0)
        goto fail;
    if (s->net == NSBOX_NET_ALL) {
        if (!dns || dns->n_ns == 0) {
            char found[160] = "";
            if (dns && dns->n_skipped)
                snprintf(found, sizeof found, " (%s lists only %s, which a sandbox cannot reach)",
                         dns_source && *dns_source ? dns_source : "resolv.conf", dns->skipped);
            nsbox_err_set(e, NSBOX_E_UNSUPPORTED, ENOENT,
                          "network all: no DNS resolver a sandbox can reach%s; fix: name "
                          "resolvers with \"network\": {\"dns\": [\"ADDRESS\"]} in "
                          "/etc/nsbox/config.json, or point NSBOX_RESOLV_CONF at a resolv.conf "
                          "that lists upstream resolvers", found);
            goto fail;
        }
        p->dns = *dns;
        snprintf(p->dns_source, sizeof p->dns_source, "%s", dns_source ? dns_source : "");
    }
    return 0;
fail:
    nsbox_netplan_free(p);
    return -1;
}

void nsbox_netplan_free(struct nsbox_netplan *p)
{
    free(p->pins);
    free(p->tcp);
    free(p->names);
    p->pins = NULL;
    p->tcp = NULL;
    p->names = NULL;
    p->n_pins = p->n_tcp = p->n_names = 0;
}

int nsbox_netplan_set_slot(struct nsbox_netplan *p, uint32_t index, struct nsbox_err *e)
{
    if (nsbox_netplan_pool_slot(&p->pool, index, &p->slot, e) < 0)
        return -1;
    nsbox_netplan_names_gateway(p);
    return 0;
}

/* ---- description (nsbox inspect) ------------------------------------------------------------ */

static bool add_ip(cJSON *to, const char *key, struct in_addr a)
{
    char buf[INET_ADDRSTRLEN];
    cJSON *v = cJSON_CreateString(ip4(a, buf) ? buf : "?");
    return v && (key ? cJSON_AddItemToObject(to, key, v) : cJSON_AddItemToArray(to, v));
}

/* "a.b.c.d<sep>n" (an address and port, or a range) at the end of array `to`. */
static bool add_ip_n(cJSON *to, struct in_addr a, char sep, unsigned n)
{
    char ip[INET_ADDRSTRLEN], buf[INET_ADDRSTRLEN + 8];
    snprintf(buf, sizeof buf, "%s%c%u", ip4(a, ip) ? ip : "?", sep, n);
    return cJSON_AddItemToArray(to, cJSON_CreateString(buf));
}

cJSON *nsbox_netplan_describe(const struct nsbox_netplan *p)
{
    static const char *const modes[] = {[NSBOX_NET_NONE] = "none", [NSBOX_NET_ALL] = "all",
                                        [NSBOX_NET_ALLOW] = "allow"};
    cleanup_cjson cJSON *o = cJSON_CreateObject();
    if (!o || !cJSON_AddStringToObject(o, "mode", modes[p->mode]))
        return NULL;
    if (!p->link) { /* loopback only */
        bool ok = cJSON_AddNullToObject(o, "address") && cJSON_AddArrayToObject(o, "egress");
        return ok ? nsbox_steal_ptr(&o) : NULL;
    }
    bool ok = add_ip(o, "address", p->slot.sandbox) && add_ip(o, "gateway", p->slot.host) &&
              cJSON_AddStringToObject(o, "host_interface", p->ifname);
    if (p->mode == NSBOX_NET_ALL) {
        cJSON *d = cJSON_AddArrayToObject(o, "dns");
        ok = ok && d;
        for (size_t i = 0; ok && i < p->dns.n_ns; i++)
            ok = add_ip(d, NULL, p->dns.ns[i]);
    }
    if (p->mode == NSBOX_NET_ALLOW) {
        /* what is open, address by address, and the names pinned in its /etc/hosts */
        cJSON *t = cJSON_AddArrayToObject(o, "allowed");
        ok = ok && t;
        for (size_t i = 0; ok && i < p->n_tcp; i++)
            ok = add_ip_n(t, p->tcp[i].addr, ':', p->tcp[i].port);
        cJSON *pins = cJSON_AddObjectToObject(o, "pinned");
        ok = ok && pins;
        /* by name: what the egress helper lets through (the pins and the open entries of the
         * names are the gateway's address, which says nothing of the names' own) */
        cJSON *names = p->by_name ? cJSON_AddArrayToObject(o, "names") : NULL;
        ok = ok && (names || !p->by_name);
        for (size_t i = 0; ok && names && i < p->n_names; i++) {
            char buf[NSBOX_HOSTNAME_MAX + 8];
            snprintf(buf, sizeof buf, "%s:%u", p->names[i].name, (unsigned)p->names[i].port);
            ok = cJSON_AddItemToArray(names, cJSON_CreateString(buf));
        }
        for (size_t i = 0; ok && i < p->n_pins; i++) {
            cJSON *l = cJSON_AddArrayToObject(pins, p->pins[i].name);
            ok = l != NULL;
            for (size_t j = 0; ok && j < p->pins[i].n; j++)
                ok = add_ip(l, NULL, p->pins[i].addr[j]);
        }
    }
    cJSON *eg = cJSON_AddArrayToObject(o, "egress");
    ok = ok && eg;
    for (size_t i = 0; ok && i < p->n_cidr; i++)
        ok = add_ip_n(eg, p->cidr[i].addr, '/', p->cidr[i].prefix);
    return ok ? nsbox_steal_ptr(&o) : NULL;
}

/* ---- nftables text --------------------------------------------------------------------------- */

#define T "inet " NSBOX_NET_TABLE
#define SB "\"" NSBOX_NET_IFPREFIX "*\""
#define REJECT "reject with icmpx admin-prohibited"

/* Sets of per-sandbox elements; every element starts with the sandbox's interface name except
 * sb_slot's, which carry the id as a comment. */
static const char *const set_names[] = {"sb_slot", "sb_src", "sb_all", "sb_dns", "sb_cidr",
                                        "sb_tcp"};

char *nsbox_netplan_table_text(bool forward_guard)
{
    struct sbuf b = {0};
    sb_printf(&b,
              "create table " T "\n"
              "add set " T " sb_slot { type ipv4_addr; }\n"
              "add set " T " sb_src { type ifname . ipv4_addr; }\n"
              "add set " T " sb_all { type ifname; }\n"
              "add set " T " sb_dns { type ifname . ipv4_addr; }\n"
              "add set " T " sb_cidr { type ifname . ipv4_addr; flags interval; }\n"
              "add set " T " sb_tcp { type ifname . ipv4_addr . inet_service; }\n"
              "add chain " T " forward { type filter hook forward priority filter; "
              "policy accept; }\n"
              "add chain " T " input { type filter hook input priority filter; policy accept; }\n"
              "add chain " T " postrouting { type nat hook postrouting priority srcnat; "
              "policy accept; }\n"
              "add chain " T " from_sandbox\n"
              "add chain " T " to_host\n"
              /* only traffic of nsbox's interfaces is looked at; the host's own passes */
              "add rule " T " forward iifname " SB " jump from_sandbox\n"
              "add rule " T " forward oifname " SB " ct state established,related accept\n"
              "add rule " T " forward oifname " SB " " REJECT "\n");
    if (forward_guard)
        sb_printf(&b, "add rule " T " forward iifname != " SB " oifname != " SB
                      " drop comment \"nsbox: the host did not forward before nsbox set "
                      "ip_forward; see docs/network.md\"\n");
    sb_printf(&b,
              "add rule " T " input iifname " SB " jump to_host\n"
              "add rule " T " postrouting iifname " SB " oifname != " SB " masquerade\n"
              /* sandbox -> elsewhere (forwarded) */
              "add rule " T " from_sandbox ct state established,related accept\n"
              "add rule " T " from_sandbox meta nfproto ipv6 " REJECT "\n"
              "add rule " T " from_sandbox iifname . ip saddr != @sb_src drop\n"
              "add rule " T " from_sandbox oifname " SB " " REJECT "\n"
              "add rule " T " from_sandbox meta l4proto { tcp, udp } th dport 53 "
              "iifname . ip daddr @sb_dns accept\n"
              "add rule " T " from_sandbox iifname . ip daddr @sb_cidr accept\n"
              "add rule " T " from_sandbox iifname . ip daddr . tcp dport @sb_tcp accept\n"
              "add rule " T " from_sandbox ip daddr 169.254.0.0/16 " REJECT "\n"
              "add rule " T " from_sandbox iifname @sb_all accept\n"
              "add rule " T " from_sandbox meta l4proto tcp reject with tcp reset\n"
              "add rule " T " from_sandbox " REJECT "\n"
              /* sandbox -> any address of the host itself */
              "add rule " T " to_host ct state established,related accept\n"
              "add rule " T " to_host meta nfproto ipv6 " REJECT "\n"
              "add rule " T " to_host iifname . ip saddr != @sb_src drop\n"
              "add rule " T " to_host meta l4proto { tcp, udp } th dport 53 "
              "iifname . ip daddr @sb_dns accept\n"
              "add rule " T " to_host iifname . ip daddr @sb_cidr accept\n"
              "add rule " T " to_host iifname . ip daddr . tcp dport @sb_tcp accept\n"
              "add rule " T " to_host meta l4proto tcp reject with tcp reset\n"
              "add rule " T " to_host " REJECT "\n");
    return sb_steal(&b);
}

/* ---- garbage collection ---------------------------------------------------------------------- */

/* A listed element, unwrapped: {"elem": {"val": V, "comment": C}} or V itself. */
static const cJSON *elem_value(const cJSON *el, const char **comment)
{
    *comment = NULL;
    const cJSON *w = cJSON_IsObject(el) ? cJSON_GetObjectItemCaseSensitive(el, "elem") : NULL;
    if (!w)
        return el;
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(w, "comment");
    if (cJSON_IsString(c))
        *comment = c->valuestring;
    return cJSON_GetObjectItemCaseSensitive(w, "val");
}

/* The interface name an element starts with, or NULL. */
static const char *elem_ifname(const cJSON *v)
{
    if (cJSON_IsString(v))
        return v->valuestring;
    const cJSON *cat = cJSON_IsObject(v) ? cJSON_GetObjectItemCaseSensitive(v, "concat") : NULL;
    const cJSON *first = cJSON_IsArray(cat) ? cJSON_GetArrayItem(cat, 0) : NULL;
    return cJSON_IsString(first) ? first->valuestring : NULL;
}

static bool our_set(const char *name)
{
    for (size_t i = 0; i < NSBOX_ARRAY_LEN(set_names); i++)
        if (!strcmp(name, set_names[i]))
            return true;
    return false;
}

/* Calls fn for each listed set of the nsbox table. */
static void for_each_set(const cJSON *root, void (*fn)(const cJSON *set, void *ctx), void *ctx)
{
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(root, "nftables");
    const cJSON *it;
    cJSON_ArrayForEach(it, arr)
    {
        const cJSON *set = cJSON_GetObjectItemCaseSensitive(it, "set");
        const cJSON *table = set ? cJSON_GetObjectItemCaseSensitive(set, "table") : NULL;
        const cJSON *name = set ? cJSON_GetObjectItemCaseSensitive(set, "name") : NULL;
        if (!cJSON_IsString(table) || strcmp(table->valuestring, NSBOX_NET_TABLE) ||
            !cJSON_IsString(name) || !our_set(name->valuestring))
            continue;
        fn(set, ctx);
    }
}

struct gc_ctx {
    const char *id;
    char ifname[16];
    cJSON *cmds;
    bool oom, any;
};

static void gc_set(const cJSON *set, void *ctx)
{
    struct gc_ctx *g = ctx;
    const char *name = cJSON_GetObjectItemCaseSensitive(set, "name")->valuestring;
    cJSON *del = NULL;
    const cJSON *el;
    cJSON_ArrayForEach(el, cJSON_GetObjectItemCaseSensitive(set, "elem"))
    {
        const char *comment;
        const cJSON *v = elem_value(el, &comment);
        const char *ifn = v ? elem_ifname(v) : NULL;
        bool mine = !strcmp(name, "sb_slot") ? comment && !strcmp(comment, g->id)
                                             : ifn && !strcmp(ifn, g->ifname);
        if (!mine)
            continue;
        if (!del) {
            cJSON *cmd = cJSON_CreateObject(), *d = cJSON_AddObjectToObject(cmd, "delete");
            cJSON *e = d ? cJSON_AddObjectToObject(d, "element") : NULL;
            if (!e || !cJSON_AddStringToObject(e, "family", "inet") ||
                !cJSON_AddStringToObject(e, "table", NSBOX_NET_TABLE) ||
                !cJSON_AddStringToObject(e, "name", name) ||
                !(del = cJSON_AddArrayToObject(e, "elem"))) {
                cJSON_Delete(cmd);
                g->oom = true;
                return;
            }
            cJSON_AddItemToArray(g->cmds, cmd);
        }
        cJSON *copy = cJSON_Duplicate(v, true);
        if (!copy) {
            g->oom = true;
            return;
        }
        cJSON_AddItemToArray(del, copy);
        g->any = true;
    }
}

char *nsbox_netplan_gc_json(const char *listing, const char *id, bool *oom)
{
    *oom = false;
    if (!listing || !id || !valid_id(id))
        return NULL;
    cleanup_cjson cJSON *root = cJSON_Parse(listing);
    if (!root)
        return NULL;
    cleanup_cjson cJSON *out = cJSON_CreateObject();
    struct gc_ctx g = {.id = id};
    snprintf(g.ifname, sizeof g.ifname, NSBOX_NET_IFPREFIX "%s", id);
    g.cmds = out ? cJSON_AddArrayToObject(out, "nftables") : NULL;
    if (!g.cmds) {
        *oom = true;
        return NULL;
    }
    for_each_set(root, gc_set, &g);
    if (g.oom) {
        *oom = true;
        return NULL;
    }
    if (!g.any)
        return NULL;
    char *text = cJSON_PrintUnformatted(out);
    if (!text)
        *oom = true;
    return text;
}

/* Calls fn with the index and comment (or NULL) of each taken slot of the pool in a listing,
 * until fn returns false. */
typedef bool (*slot_fn)(uint32_t idx, const char *comment, void *ctx);

struct slot_ctx {
    const struct nsbox_netpool *pool;
    slot_fn fn;
    void *ctx;
    bool stop;
};

static void slot_set(const cJSON *set, void *ctx)
{
    struct slot_ctx *s = ctx;
    if (strcmp(cJSON_GetObjectItemCaseSensitive(set, "name")->valuestring, "sb_slot"))
        return;
    const cJSON *el;
    cJSON_ArrayForEach(el, cJSON_GetObjectItemCaseSensitive(set, "elem"))
    {
        const char *comment;
        const cJSON *v = elem_value(el, &comment);
        struct in_addr a;
        if (s->stop || !cJSON_IsString(v) || inet_pton(AF_INET, v->valuestring, &a) != 1)
            continue;
        uint32_t h = ntohl(a.s_addr);
        if (in_net(h, s->pool->base, s->pool->prefix))
            s->stop = !s->fn((h - s->pool->base) >> (32 - NSBOX_NET_SLOT_PREFIX), comment,
                             s->ctx);
    }
}

static void each_slot(const char *listing, const struct nsbox_netpool *pool, slot_fn fn,
                      void *ctx)
{
    cleanup_cjson cJSON *root = listing ? cJSON_Parse(listing) : NULL;
    struct slot_ctx s = {.pool = pool, .fn = fn, .ctx = ctx};
    if (root)
        for_each_set(root, slot_set, &s);
}

struct owners {
    bool (*fn)(const char *id, void *ctx);
    void *ctx;
};

static bool owner_of(uint32_t idx, const char *comment, void *ctx)
{
    const struct owners *o = ctx;
    (void)idx;
    return !comment || !valid_id(comment) || o->fn(comment, o->ctx);
}

void nsbox_netplan_slot_owners(const char *listing, const struct nsbox_netpool *pool,
                               bool (*fn)(const char *id, void *ctx), void *ctx)
{
    struct owners o = {fn, ctx};
    each_slot(listing, pool, owner_of, &o);
}

static bool mark_used(uint32_t idx, const char *comment, void *ctx)
{
    unsigned char *used = ctx;
    (void)comment;
    used[idx / 8] |= (unsigned char)(1u << (idx % 8));
    return true;
}

int64_t nsbox_netplan_free_slot(const char *listing, const struct nsbox_netpool *pool,
                                uint32_t rnd)
{
    uint32_t n = nsbox_netplan_pool_slots(pool);
    cleanup_free unsigned char *used = calloc(n / 8 + 1, 1);
    if (!used)
        return -1;
    each_slot(listing, pool, mark_used, used);
    for (uint32_t i = 0; i < n; i++) {
        uint32_t idx = (rnd + i) % n;
        if (!(used[idx / 8] & (1u << (idx % 8))))
            return idx;
    }
    return -1;
}

/* ---- /etc files ------------------------------------------------------------------------------ */

char *nsbox_netplan_resolv_conf(const struct nsbox_netplan *p)
{
    struct sbuf b = {0};
    char a[INET_ADDRSTRLEN];
    if (p->mode == NSBOX_NET_ALL) {
        sb_printf(&b, "# nsbox: network all; the host's resolvers%s%s\n",
                  p->dns_source[0] ? " from " : "", p->dns_source);
        for (size_t i = 0; i < p->dns.n_ns; i++)
            sb_printf(&b, "nameserver %s\n", ip4(p->dns.ns[i], a));
        if (p->dns.search[0])
            sb_printf(&b, "search %s\n", p->dns.search);
        if (p->dns.options[0])
            sb_printf(&b, "options %s\n", p->dns.options);
    } else if (p->mode == NSBOX_NET_ALLOW) {
        sb_printf(&b, "# nsbox: network allow: DNS is blocked in this sandbox. The allowed names\n"
                      "# were resolved by the host when it was created and are pinned in "
                      "/etc/hosts.\n"
                      "# 127.0.0.1 is the sandbox's init: it refuses every name, and nsbox says\n"
                      "# after the command which names were asked (docs/network.md).\n"
                      "nameserver 127.0.0.1\n");
    } else {
        sb_printf(&b, "# nsbox: network none with egress ranges: no DNS in this sandbox; connect\n"
                      "# to the allowed addresses directly.\n");
    }
    return sb_steal(&b);
}

char *nsbox_netplan_hosts(const struct nsbox_netplan *p, const char *hostname, bool *oom)
{
    *oom = false;
    struct sbuf b = {0};
    char a[INET_ADDRSTRLEN];
    sb_printf(&b, "127.0.0.1\tlocalhost\n"
                  "::1\tlocalhost ip6-localhost ip6-loopback\n"
                  "ff02::1\tip6-allnodes\n"
                  "ff02::2\tip6-allrouters\n");
    /* a name of letters, digits and hyphens only: nothing else can reach the file */
    size_t hl = hostname ? strlen(hostname) : 0;
    bool ok = hl > 0 && hl <= 63 && hostname[0] != '-';
    for (size_t i = 0; ok && i < hl; i++)
        ok = isalnum((unsigned char)hostname[i]) || hostname[i] == '-';
    if (ok)
        sb_printf(&b, "127.0.1.1\t%s\n", hostname);
    size_t pins = p && (p->mode == NSBOX_NET_ALLOW || p->by_name) ? p->n_pins : 0;
    if (pins)
        sb_printf(&b, p->by_name ? "# nsbox: names served by the egress helper on the gateway\n"
                                 : "# nsbox network allow: resolved by the host when this "
                                   "sandbox was created\n");
    for (size_t i = 0; i < pins; i++)
        for (size_t j = 0; j < p->pins[i].n; j++)
            sb_printf(&b, "%s\t%s\n", ip4(p->pins[i].addr[j], a), p->pins[i].name);
    char *r = sb_steal(&b);
    if (!r)
        *oom = true;
    return r;
}
