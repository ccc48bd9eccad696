/* Header bindings of the spec (docs/spec.md, "header_bindings"; docs/network.md, "Header
 * bindings"): a host, a header and a secret value that the egress helper adds to every HTTPS
 * request the sandbox sends to that host. The value is the one field of a spec that is never
 * rendered: inspect, state files and pool keys see the host and the header only. */
#include "spec_impl.h"
#include "httphead.h"
#include "cleanup.h"

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

static void wipe(char *v)
{
    if (v) {
        explicit_bzero(v, strlen(v));
        free(v);
    }
}

void nsbox_spec_bind_forget(struct nsbox_spec *s)
{
    for (size_t i = 0; i < s->n_bindings && i < NSBOX_MAX_BINDINGS; i++) {
        wipe(s->bindings[i].value);
        s->bindings[i].value = NULL;
    }
}

void nsbox_spec_bind_clear(struct nsbox_spec *s)
{
    nsbox_spec_bind_forget(s);
    s->n_bindings = 0;
}

int nsbox_spec_bind_add(struct nsbox_spec *s, const char *host, const char *header,
                        const char *value, struct nsbox_err *e)
{
    struct nsbox_header_binding b = {0};
    if (nsbox_spec_net_parse_host(host, &b.host, e) < 0)
        return -1;
    if (is_literal(b.host.name))
        return invalid(e,
                       "host '%s': an IP address; a binding names a host by its TLS server "
                       "name (SNI), which cannot be an address",
                       SHOW(host));
    const char *why = nsbox_httphead_check_name(header);
    if (why)
        return invalid(e, "header '%s': %s", SHOW(header), why);
    snprintf(b.header, sizeof b.header, "%s", header);
    if (!value)
        return invalid(e,
                       "%s: no value (inspect and rendered specs leave values out; give "
                       "the value again)",
                       b.header);
    why = nsbox_httphead_check_value(value);
    if (why)
        return invalid(e, "%s for %s: %s", b.header, b.host.name, why); /* never the value */
    if (strlen(value) < NSBOX_BINDING_VALUE_MIN)
        return invalid(e,
                       "%s for %s: value shorter than %d bytes (a secret that short would "
                       "be guessed; and its bytes are masked in every response from the host)",
                       b.header, b.host.name, NSBOX_BINDING_VALUE_MIN);
    for (size_t i = 0; i < s->n_bindings; i++)
        if (!strcmp(s->bindings[i].host.name, b.host.name) &&
            s->bindings[i].host.port == b.host.port && !strcasecmp(s->bindings[i].header, b.header))
            return invalid(e, "%s is bound twice for %s", b.header, b.host.name);
    if (s->n_bindings >= NSBOX_MAX_BINDINGS)
        return invalid(e, "too many bindings (at most %d)", NSBOX_MAX_BINDINGS);
    if (!(b.value = strdup(value)))
        return nsbox_err_sys(e, "spec");
    s->bindings[s->n_bindings++] = b;
    return 0;
}

int nsbox_spec_bind_json(struct nsbox_spec *s, const cJSON *it, struct nsbox_err *e)
{
    static const char *const form =
        "must be an array of {\"host\": \"api.example.com\", \"header\": \"Authorization\", "
        "\"value\": \"...\"}";
    if (!cJSON_IsArray(it) && !cJSON_IsNull(it))
        return invalid(e, "%s", form);
    nsbox_spec_bind_clear(s);
    const cJSON *c;
    size_t i = 0;
    cJSON_ArrayForEach(c, it)
    {
        const cJSON *host = NULL, *header = NULL, *value = NULL, *k;
        if (!cJSON_IsObject(c))
            return invalid(e, "%s", form);
        cJSON_ArrayForEach(k, c)
        {
            const char *n = k->string ? k->string : "";
            const cJSON **slot = !strcmp(n, "host")     ? &host
                                 : !strcmp(n, "header") ? &header
                                 : !strcmp(n, "value")  ? &value
                                                        : NULL;
            if (!slot)
                return invalid(e, "[%zu]: unknown key '%s' (%s)", i, SHOW(n), form);
            if (!cJSON_IsString(k))
                return invalid(e, "[%zu]: '%s' must be a string", i, n);
            *slot = k;
        }
        if (!host || !header)
            return invalid(e, "[%zu]: needs \"host\" and \"header\"", i);
        if (nsbox_spec_bind_add(s, host->valuestring, header->valuestring,
                                value ? value->valuestring : NULL, e) < 0)
            return nsbox_err_wrap(e, "[%zu]", i);
        i++;
    }
    return 0;
}

int nsbox_spec_bind_text(struct nsbox_spec *s, const char *v, struct nsbox_err *e)
{
    /* HOST[:PORT]:HEADER=VALUE: the header is after the last ':' before the '=' */
    const char *eq = strchr(v, '=');
    if (!eq)
        return invalid(e, "expected HOST:HEADER=VALUE");
    const char *colon = NULL;
    for (const char *p = v; p < eq; p++)
        if (*p == ':')
            colon = p;
    if (!colon || colon == v)
        return invalid(e, "expected HOST:HEADER=VALUE");
    cleanup_free char *host = strndup(v, (size_t)(colon - v));
    cleanup_free char *header = strndup(colon + 1, (size_t)(eq - colon - 1));
    if (!host || !header)
        return nsbox_err_sys(e, "spec");
    return nsbox_spec_bind_add(s, host, header, eq + 1, e);
}

int nsbox_spec_bind_copy(struct nsbox_spec *dst, const struct nsbox_spec *src)
{
    for (size_t i = 0; i < src->n_bindings; i++)
        dst->bindings[i].value = NULL;
    for (size_t i = 0; i < src->n_bindings; i++)
        if (src->bindings[i].value && !(dst->bindings[i].value = strdup(src->bindings[i].value)))
            return -1;
    return 0;
}

bool nsbox_spec_bind_equal(const struct nsbox_spec *a, const struct nsbox_spec *b)
{
    if (a->n_bindings != b->n_bindings || a->n_bindings > NSBOX_MAX_BINDINGS)
        return false;
    for (size_t i = 0; i < a->n_bindings; i++) {
        const struct nsbox_header_binding *x = &a->bindings[i], *y = &b->bindings[i];
        if (strcmp(x->host.name, y->host.name) || x->host.port != y->host.port ||
            strcmp(x->header, y->header) || !x->value != !y->value ||
            (x->value && strcmp(x->value, y->value)))
            return false;
    }
    return true;
}

bool nsbox_spec_bind_render(cJSON *o, const struct nsbox_spec *s)
{
    if (!s->n_bindings)
        return true;
    cJSON *a = cJSON_AddArrayToObject(o, "header_bindings");
    if (!a)
        return false;
    for (size_t i = 0; i < s->n_bindings && i < NSBOX_MAX_BINDINGS; i++) {
        char host[NSBOX_HOSTNAME_MAX + 8];
        cJSON *b = cJSON_CreateObject();
        if (!b || !cJSON_AddItemToArray(a, b) ||
            nsbox_spec_net_host_format(&s->bindings[i].host, host, sizeof host) < 0 ||
            !cJSON_AddStringToObject(b, "host", host) ||
            !cJSON_AddStringToObject(b, "header", s->bindings[i].header))
            return false;
    }
    return true;
}

int nsbox_spec_bind_check(const struct nsbox_spec *s, struct nsbox_err *e)
{
    if (!s->n_bindings)
        return 0;
    if (s->n_bindings > NSBOX_MAX_BINDINGS)
        return invalid(e, "spec: key 'header_bindings': too many bindings");
    if (s->net == NSBOX_NET_NONE)
        return invalid(e, "spec: key 'header_bindings': the network is none, so no bound host "
                          "can be reached; fix: network all, or allow with the bound hosts");
    for (size_t i = 0; i < s->n_bindings; i++) {
        const struct nsbox_header_binding *b = &s->bindings[i];
        if (!b->value || nsbox_httphead_check_value(b->value) ||
            nsbox_httphead_check_name(b->header) || is_literal(b->host.name))
            return invalid(e, "spec: key 'header_bindings': [%zu] is not a valid binding", i);
        if (s->net != NSBOX_NET_ALLOW)
            continue;
        bool allowed = false;
        const struct nsbox_host *other_port = NULL;
        for (size_t j = 0; j < s->n_hosts; j++) {
            bool same = !strcmp(s->hosts[j].name, b->host.name);
            allowed |= same && s->hosts[j].port == b->host.port;
            if (same && !other_port)
                other_port = &s->hosts[j];
        }
        if (!allowed) {
            char host[NSBOX_HOSTNAME_MAX + 8], listed[NSBOX_HOSTNAME_MAX + 8];
            nsbox_spec_net_host_format(&b->host, host, sizeof host);
            /* a binding without a port is port 443's: name the port the allow list has */
            if (other_port) {
                nsbox_spec_net_host_format(other_port, listed, sizeof listed);
                return invalid(e,
                               "spec: key 'header_bindings': host '%s' is bound on port %u, "
                               "but the network's allow list has '%s', another port; fix: "
                               "bind '%s' (--header-binding %s:HEADER=...), or allow '%s'",
                               host, (unsigned)b->host.port, listed, listed, listed, host);
            }
            return invalid(e,
                           "spec: key 'header_bindings': host '%s' is bound but not in the "
                           "network's allow list, so it cannot be reached; fix: add it to "
                           "allow (or use network all)",
                           host);
        }
    }
    return 0;
}
