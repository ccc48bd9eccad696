/* allow(hosts) by name (docs/network.md, "allow by name"): the names of the allow list are not
 * resolved at creation; the sandbox's /etc/hosts pins them to its gateway, where the egress
 * helper (sandbox/egress.c) checks each connection's TLS server name against them, resolves the
 * name on the host and connects. The plan's part: which names and ports, what is open on the
 * gateway, and the checks the helper applies. Pure. */
#include "netplan.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static bool is_literal(const char *name)
{
    struct in_addr a;
    struct in6_addr a6;
    return inet_pton(AF_INET, name, &a) == 1 || inet_pton(AF_INET6, name, &a6) == 1;
}

bool nsbox_netplan_has_names(const struct nsbox_spec *s)
{
    if (s->net != NSBOX_NET_ALLOW)
        return false;
    for (size_t i = 0; i < s->n_hosts; i++)
        if (!is_literal(s->hosts[i].name))
            return true;
    return false;
}

struct nsbox_spec *nsbox_netplan_literals_only(const struct nsbox_spec *s)
{
    struct nsbox_spec *c = malloc(sizeof *c);
    if (!c)
        return NULL;
    *c = *s; /* the plan reads only the network fields; pointers are not followed */
    c->n_hosts = 0;
    for (size_t i = 0; i < s->n_hosts; i++)
        if (is_literal(s->hosts[i].name))
            c->hosts[c->n_hosts++] = s->hosts[i];
    return c;
}

/* The gateway is not known before the slot is: 0.0.0.0 stands for it until then (never a
 * valid entry otherwise: 0/8 is refused as an allowed address). */
static int add_gateway_tcp(struct nsbox_netplan *p, uint16_t port)
{
    for (size_t i = 0; i < p->n_tcp; i++)
        if (p->tcp[i].addr.s_addr == 0 && p->tcp[i].port == port)
            return 0;
    p->tcp[p->n_tcp++] = (struct nsbox_nettcp){.addr = {0}, .port = port};
    return 0;
}

/* "localhost" and the names below it are loopback wherever they are resolved (RFC 6761), and
 * so the sandbox itself: refused at creation as the address mode refuses 127.0.0.1, rather than
 * at every connection by the helper. */
static bool is_localhost(const char *name)
{
    size_t n = strlen(name);
    if (n && name[n - 1] == '.')
        n--;
    static const char lh[] = "localhost";
    size_t l = sizeof lh - 1;
    return n >= l && !strncasecmp(name + n - l, lh, l) && (n == l || name[n - l - 1] == '.');
}

int nsbox_netplan_add_names(struct nsbox_netplan *p, const struct nsbox_spec *s,
                            struct nsbox_err *e)
{
    for (size_t i = 0; i < s->n_hosts; i++)
        if (is_localhost(s->hosts[i].name))
            return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL,
                                 "allowed host '%s': a loopback name (127.0.0.0/8): inside the "
                                 "sandbox that is the sandbox itself" NSBOX_NET_LOCAL_HINT,
                                 s->hosts[i].name);
    size_t n = s->n_hosts;
    struct nsbox_nettcp *tcp = realloc(p->tcp, (p->n_tcp + n + 1) * sizeof *tcp);
    if (tcp)
        p->tcp = tcp;
    struct nsbox_netpin *pins = realloc(p->pins, (p->n_pins + n + 1) * sizeof *pins);
    if (pins)
        p->pins = pins;
    p->names = calloc(n + 1, sizeof *p->names);
    if (!tcp || !pins || !p->names)
        return nsbox_err_set(e, NSBOX_E_NOMEM, ENOMEM, "out of memory");
    p->by_name = true;
    for (size_t i = 0; i < n; i++) {
        const struct nsbox_host *h = &s->hosts[i];
        if (is_literal(h->name))
            continue;
        bool dup = false, pinned = false;
        for (size_t j = 0; j < p->n_names; j++)
            dup |= !strcasecmp(p->names[j].name, h->name) && p->names[j].port == h->port;
        for (size_t j = 0; j < p->n_pins; j++)
            pinned |= !strcasecmp(p->pins[j].name, h->name);
        if (!dup)
            p->names[p->n_names++] = *h;
        if (!pinned) {
            struct nsbox_netpin *pin = &p->pins[p->n_pins++];
            memset(pin, 0, sizeof *pin);
            snprintf(pin->name, sizeof pin->name, "%s", h->name);
            pin->n = 1; /* the gateway, once known */
        }
        add_gateway_tcp(p, h->port);
    }
    return 0;
}

int nsbox_netplan_add_bound(struct nsbox_netplan *p, const struct nsbox_spec *s,
                            struct nsbox_err *e)
{
    struct nsbox_spec *b = malloc(sizeof *b);
    if (!b)
        return nsbox_err_set(e, NSBOX_E_NOMEM, ENOMEM, "out of memory");
    b->n_hosts = 0;
    for (size_t i = 0; i < s->n_bindings && i < NSBOX_MAX_BINDINGS; i++) {
        bool dup = false;
        for (size_t j = 0; j < b->n_hosts; j++)
            dup |= !strcmp(b->hosts[j].name, s->bindings[i].host.name) &&
                   b->hosts[j].port == s->bindings[i].host.port;
        if (!dup)
            b->hosts[b->n_hosts++] = s->bindings[i].host;
    }
    int r = nsbox_netplan_add_names(p, b, e);
    free(b);
    return r;
}

void nsbox_netplan_names_gateway(struct nsbox_netplan *p)
{
    if (!p->by_name)
        return;
    for (size_t i = 0; i < p->n_tcp; i++)
        if (p->tcp[i].addr.s_addr == 0)
            p->tcp[i].addr = p->slot.host;
    for (size_t i = 0; i < p->n_pins; i++)
        for (size_t j = 0; j < p->n_names; j++)
            if (!strcasecmp(p->pins[i].name, p->names[j].name))
                p->pins[i].addr[0] = p->slot.host;
}

bool nsbox_netplan_name_allowed(const struct nsbox_netplan *p, const char *name, uint16_t port)
{
    for (size_t i = 0; i < p->n_names; i++)
        if (p->names[i].port == port && !strcasecmp(p->names[i].name, name))
            return true;
    return false;
}

const char *nsbox_netplan_upstream_refusal(const struct nsbox_netplan *p, struct in_addr a)
{
    static const struct {
        uint32_t net;
        unsigned prefix;
        const char *why;
    } refused[] = {
        {0x00000000, 8, "0.0.0.0/8 (this host)"},
        {0x7f000000, 8, "loopback (this host)"},
        {0xa9fe0000, 16, "link-local or cloud metadata (169.254.0.0/16)"},
        {0xe0000000, 4, "multicast"},
        {0xf0000000, 4, "reserved or broadcast (240.0.0.0/4)"},
    };
    uint32_t h = ntohl(a.s_addr);
    for (size_t i = 0; i < sizeof refused / sizeof *refused; i++)
        if ((h >> (32 - refused[i].prefix)) == (refused[i].net >> (32 - refused[i].prefix)))
            return refused[i].why;
    uint32_t mask = p->pool.prefix ? ~0u << (32 - p->pool.prefix) : 0;
    if ((h & mask) == p->pool.base)
        return "the sandbox address pool";
    return NULL;
}
