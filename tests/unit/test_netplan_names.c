/* allow by name (policy/netplan_names.c): names pinned to the gateway and open only there, IP
 * literals by address as before, the egress helper's decisions, the config key. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "cfgtext.h"
#include "netplan.h"

#include <arpa/inet.h>
#include <cJSON.h>
#include <stdlib.h>
#include <string.h>

static struct in_addr ip(const char *t)
{
    struct in_addr a;
    assert_int_equal(inet_pton(AF_INET, t, &a), 1);
    return a;
}

static int never_resolve(void *ctx, const char *name, struct in_addr *out, size_t max,
                         size_t *n, struct nsbox_err *e)
{
    (void)ctx, (void)name, (void)out, (void)max, (void)n;
    fail_msg("a name was resolved at creation: %s", name);
    return nsbox_err_set(e, NSBOX_E_INVALID, 0, "no");
}

static void plan_for(const char *net, struct nsbox_netplan *p)
{
    struct nsbox_spec *s = malloc(sizeof *s);
    struct nsbox_err e = {0};
    struct nsbox_netpool pool;
    nsbox_spec_init(s);
    assert_int_equal(nsbox_spec_set(s, "network", net, &e), 0);
    assert_int_equal(nsbox_netplan_pool_parse("10.171.0.0/16", &pool, &e), 0);
    assert_true(nsbox_netplan_has_names(s));
    struct nsbox_spec *lit = nsbox_netplan_literals_only(s);
    assert_non_null(lit);
    assert_int_equal(nsbox_netplan_build(lit, "0123456789ab", &pool, NULL, NULL, never_resolve,
                                         NULL, p, &e), 0);
    free(lit);
    assert_int_equal(nsbox_netplan_add_names(p, s, &e), 0);
    assert_int_equal(nsbox_netplan_set_slot(p, 5, &e), 0);
    nsbox_spec_free(s);
    free(s);
}

static void test_names_go_to_the_gateway(void **state)
{
    (void)state;
    struct nsbox_netplan p;
    plan_for("allow=api.example.com,API.example.com:8443,203.0.113.7:80,api.example.com,"
             "pypi.org",
             &p);
    assert_true(p.by_name);
    assert_int_equal(p.slot.host.s_addr, ip("10.171.0.21").s_addr);
    /* open: the literal by address, the gateway at the names' ports, nothing else */
    assert_int_equal(p.n_tcp, 3);
    assert_int_equal(p.tcp[0].addr.s_addr, ip("203.0.113.7").s_addr);
    assert_int_equal(p.tcp[0].port, 80);
    assert_int_equal(p.tcp[1].addr.s_addr, p.slot.host.s_addr);
    assert_int_equal(p.tcp[1].port, 443);
    assert_int_equal(p.tcp[2].addr.s_addr, p.slot.host.s_addr);
    assert_int_equal(p.tcp[2].port, 8443);
    /* each name pinned once, to the gateway */
    assert_int_equal(p.n_pins, 2);
    assert_string_equal(p.pins[0].name, "api.example.com");
    assert_int_equal(p.pins[0].n, 1);
    assert_int_equal(p.pins[0].addr[0].s_addr, p.slot.host.s_addr);
    assert_string_equal(p.pins[1].name, "pypi.org");
    bool oom;
    char *hosts = nsbox_netplan_hosts(&p, "nsbox-0123456789ab", &oom);
    assert_non_null(strstr(hosts, "10.171.0.21\tapi.example.com\n"));
    assert_non_null(strstr(hosts, "10.171.0.21\tpypi.org\n"));
    free(hosts);
    /* the helper's list: name and port pairs, once each */
    assert_int_equal(p.n_names, 3);
    assert_true(nsbox_netplan_name_allowed(&p, "api.example.com", 443));
    assert_true(nsbox_netplan_name_allowed(&p, "api.example.com", 8443));
    assert_true(nsbox_netplan_name_allowed(&p, "pypi.org", 443));
    assert_false(nsbox_netplan_name_allowed(&p, "pypi.org", 8443));
    assert_false(nsbox_netplan_name_allowed(&p, "example.com", 443));
    assert_false(nsbox_netplan_name_allowed(&p, "evil.api.example.com", 443));
    assert_false(nsbox_netplan_name_allowed(&p, "203.0.113.7", 80)); /* literals: by address */
    nsbox_netplan_free(&p);
}

static void test_literals_only(void **state)
{
    (void)state;
    struct nsbox_spec *s = malloc(sizeof *s);
    struct nsbox_err e = {0};
    nsbox_spec_init(s);
    assert_int_equal(nsbox_spec_set(s, "network", "allow=192.0.2.1,192.0.2.2:80", &e), 0);
    assert_false(nsbox_netplan_has_names(s)); /* no helper for literals alone */
    assert_int_equal(nsbox_spec_set(s, "network", "all", &e), 0);
    assert_false(nsbox_netplan_has_names(s));
    nsbox_spec_free(s);
    free(s);
}

static void test_upstream_refusal(void **state)
{
    (void)state;
    struct nsbox_netplan p;
    plan_for("allow=api.example.com", &p);
    const char *refused[] = {"127.0.0.1", "127.255.0.1", "0.0.0.0", "169.254.169.254",
                             "169.254.1.1", "224.0.0.1", "239.1.1.1", "255.255.255.255",
                             "240.0.0.1", "10.171.0.21", "10.171.255.254"};
    for (size_t i = 0; i < sizeof refused / sizeof *refused; i++)
        assert_non_null(nsbox_netplan_upstream_refusal(&p, ip(refused[i])));
    const char *ok[] = {"198.51.100.10", "10.170.255.255", "10.172.0.0", "192.168.1.1",
                        "8.8.8.8", "223.255.255.255"};
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++)
        assert_null(nsbox_netplan_upstream_refusal(&p, ip(ok[i])));
    nsbox_netplan_free(&p);
}

static void test_localhost_refused(void **state)
{
    (void)state;
    const char *bad[] = {"allow=localhost:11434", "allow=pypi.org,LOCALHOST.",
                         "allow=x.localhost", "allow=a.b.localhost:8080"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        struct nsbox_spec *s = malloc(sizeof *s);
        struct nsbox_netplan p;
        struct nsbox_err e = {0};
        nsbox_spec_init(s);
        assert_int_equal(nsbox_spec_set(s, "network", bad[i], &e), 0);
        memset(&p, 0, sizeof p);
        assert_int_equal(nsbox_netplan_add_names(&p, s, &e), -1);
        assert_int_equal(e.code, NSBOX_E_INVALID);
        assert_non_null(strstr(e.msg, "loopback"));
        assert_non_null(strstr(e.msg, "a service on this host is reached"));
        nsbox_netplan_free(&p);
        nsbox_spec_free(s);
        free(s);
    }
    /* names that merely contain it are names like any other */
    struct nsbox_netplan p;
    plan_for("allow=localhost.example.com,mylocalhost", &p);
    assert_int_equal(p.n_names, 2);
    nsbox_netplan_free(&p);
}

static void test_described_for_inspect(void **state)
{
    (void)state;
    struct nsbox_netplan p;
    plan_for("allow=api.example.com:8443,203.0.113.7:80,pypi.org", &p);
    cJSON *o = nsbox_netplan_describe(&p);
    assert_non_null(o);
    char *text = cJSON_PrintUnformatted(o);
    /* what is open and pinned is the gateway's; "names" is what the helper lets through */
    assert_string_equal(text, "{\"mode\":\"allow\",\"address\":\"10.171.0.22\",\"gateway\":"
                              "\"10.171.0.21\",\"host_interface\":\"nsb0123456789ab\","
                              "\"allowed\":[\"203.0.113.7:80\",\"10.171.0.21:8443\","
                              "\"10.171.0.21:443\"],\"pinned\":{\"api.example.com\":"
                              "[\"10.171.0.21\"],\"pypi.org\":[\"10.171.0.21\"]},\"names\":"
                              "[\"api.example.com:8443\",\"pypi.org:443\"],\"egress\":[]}");
    free(text);
    cJSON_Delete(o);
    nsbox_netplan_free(&p);
}

static int parse(struct nsbox_netconfig *c, const char *text, struct nsbox_err *e)
{
    cleanup_cjson cJSON *root = cfgtext(text);
    return nsbox_netplan_config_from_json(c, root, e);
}

static void test_config_key(void **state)
{
    (void)state;
    struct nsbox_netconfig c;
    struct nsbox_err e = {0};
    nsbox_netplan_config_init(&c);
    assert_true(c.allow_by_name); /* by name is the default (docs/network.md) */
    const char *addr = "{\"network\": {\"allow_names\": \"address\"}}";
    assert_int_equal(parse(&c, addr, &e), 0);
    assert_false(c.allow_by_name);
    const char *tls = "{\"network\": {\"allow_names\": \"tls\"}}";
    assert_int_equal(parse(&c, tls, &e), 0);
    assert_true(c.allow_by_name);
    /* and back to address: the key, not the order of calls, decides */
    assert_int_equal(parse(&c, addr, &e), 0);
    assert_false(c.allow_by_name);
    const char *bad = "{\"network\": {\"allow_names\": true}}";
    assert_int_equal(parse(&c, bad, &e), -1);
    assert_non_null(strstr(e.msg, "allow_names"));
}

static void test_upstream_ca_key(void **state)
{
    (void)state;
    struct nsbox_netconfig c;
    struct nsbox_err e = {0};
    nsbox_netplan_config_init(&c);
    assert_string_equal(c.upstream_ca, ""); /* the host's system bundle */
    const char *ok = "{\"network\": {\"upstream_ca\": \"/etc/nsbox/ca.pem\"}}";
    assert_int_equal(parse(&c, ok, &e), 0);
    assert_string_equal(c.upstream_ca, "/etc/nsbox/ca.pem");
    const char *bad[] = {"{\"network\": {\"upstream_ca\": \"ca.pem\"}}",
                         "{\"network\": {\"upstream_ca\": 1}}"};
    for (size_t i = 0; i < 2; i++) {
        assert_int_equal(parse(&c, bad[i], &e), -1);
        assert_non_null(strstr(e.msg, "absolute path"));
    }
}

/* network all with header bindings: the bound hosts, and only they, go through the helper */
static void test_bound_hosts_under_all(void **state)
{
    (void)state;
    struct nsbox_spec *s = malloc(sizeof *s);
    struct nsbox_err e = {0};
    struct nsbox_netpool pool;
    struct nsbox_resolv dns = {.n_ns = 1};
    struct nsbox_netplan p;
    nsbox_spec_init(s);
    dns.ns[0] = ip("192.0.2.53");
    assert_int_equal(nsbox_spec_set(s, "network", "all", &e), 0);
    assert_int_equal(nsbox_spec_bind_add(s, "api.github.com", "Authorization", "Bearer 0123456789",
                                         &e), 0);
    assert_int_equal(nsbox_spec_bind_add(s, "api.github.com", "X-Other", "0123456789", &e), 0);
    assert_int_equal(nsbox_spec_bind_add(s, "x.test:8443", "X-Key", "0123456789", &e), 0);
    assert_int_equal(nsbox_netplan_pool_parse("10.171.0.0/16", &pool, &e), 0);
    assert_int_equal(nsbox_netplan_build(s, "0123456789ab", &pool, &dns, "test", never_resolve,
                                         NULL, &p, &e), 0);
    assert_int_equal(nsbox_netplan_add_bound(&p, s, &e), 0);
    assert_int_equal(nsbox_netplan_set_slot(&p, 5, &e), 0);
    assert_true(p.by_name);
    assert_int_equal(p.n_names, 2); /* one per host:port, not per header */
    assert_true(nsbox_netplan_name_allowed(&p, "api.github.com", 443));
    assert_true(nsbox_netplan_name_allowed(&p, "x.test", 8443));
    assert_false(nsbox_netplan_name_allowed(&p, "github.com", 443));
    /* open on the gateway at both ports; the rest is all's */
    assert_int_equal(p.n_tcp, 2);
    for (size_t i = 0; i < p.n_tcp; i++)
        assert_int_equal(p.tcp[i].addr.s_addr, p.slot.host.s_addr);
    bool oom;
    char *hosts = nsbox_netplan_hosts(&p, "nsbox-0123456789ab", &oom);
    assert_non_null(hosts);
    assert_non_null(strstr(hosts, "10.171.0.21\tapi.github.com\n"));
    assert_non_null(strstr(hosts, "10.171.0.21\tx.test\n"));
    free(hosts);
    nsbox_netplan_free(&p);
    nsbox_spec_free(s);
    free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_upstream_ca_key),
        cmocka_unit_test(test_bound_hosts_under_all),
        cmocka_unit_test(test_names_go_to_the_gateway),
        cmocka_unit_test(test_literals_only),
        cmocka_unit_test(test_upstream_refusal),
        cmocka_unit_test(test_localhost_refused),
        cmocka_unit_test(test_described_for_inspect),
        cmocka_unit_test(test_config_key),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
