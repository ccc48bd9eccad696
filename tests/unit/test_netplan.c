/* The network plan (policy/netplan.c): pool and slots, configuration, resolv.conf parsing, the
 * plan a spec implies, the nftables text for the persistent table (a sandbox's own elements are
 * in test_nftbatch.c), gc of a dead sandbox's elements, and the /etc files. Pure; no root. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <cJSON.h>

#include "cfgtext.h"
#include "netplan.h"
#include "spec.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *ip(struct in_addr a)
{
    static char buf[4][INET_ADDRSTRLEN];
    static int k;
    k = (k + 1) % 4;
    return inet_ntop(AF_INET, &a, buf[k], INET_ADDRSTRLEN);
}

static struct nsbox_netpool default_pool(void)
{
    struct nsbox_netpool p;
    assert_int_equal(nsbox_netplan_pool_parse(NSBOX_NET_DEFAULT_POOL, &p, NULL), 0);
    return p;
}

/* ---- pool and slots -------------------------------------------------------------------------- */

static void test_pool_slots_are_consecutive_30s(void **state)
{
    (void)state;
    struct nsbox_netpool p = default_pool();
    assert_int_equal(p.prefix, 16);
    assert_int_equal(nsbox_netplan_pool_slots(&p), 16384);
    struct nsbox_netslot s;
    struct nsbox_err e = {0};
    assert_int_equal(nsbox_netplan_pool_slot(&p, 0, &s, &e), 0);
    assert_string_equal(ip(s.subnet), "10.171.0.0");
    assert_string_equal(ip(s.host), "10.171.0.1");
    assert_string_equal(ip(s.sandbox), "10.171.0.2");
    assert_int_equal(nsbox_netplan_pool_slot(&p, 65, &s, &e), 0);
    assert_string_equal(ip(s.subnet), "10.171.1.4");
    assert_string_equal(ip(s.host), "10.171.1.5");
    assert_string_equal(ip(s.sandbox), "10.171.1.6");
    assert_int_equal(nsbox_netplan_pool_slot(&p, 16383, &s, &e), 0);
    assert_string_equal(ip(s.sandbox), "10.171.255.254");
    assert_int_equal(nsbox_netplan_pool_slot(&p, 16384, &s, &e), -1);
    assert_int_equal(e.code, NSBOX_E_INVALID);
}

static void test_pool_rejects_bad_ranges(void **state)
{
    (void)state;
    struct nsbox_netpool p;
    struct nsbox_err e = {0};
    const char *bad[] = {"fd00::/64",       "10.0.0.0/31",   "10.0.0.0/7",    "127.0.0.0/16",
                         "169.254.0.0/16",  "224.0.0.0/8",   "0.0.0.0/8",     "10.1.2.3/16",
                         "not-an-address",  ""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        e.code = 0;
        assert_int_equal(nsbox_netplan_pool_parse(bad[i], &p, &e), -1);
        assert_int_equal(e.code, NSBOX_E_INVALID);
    }
    assert_int_equal(nsbox_netplan_pool_parse("192.168.77.0/24", &p, &e), 0);
    assert_int_equal(nsbox_netplan_pool_slots(&p), 64);
    assert_int_equal(nsbox_netplan_pool_parse("10.9.9.0/30", &p, &e), 0);
    assert_int_equal(nsbox_netplan_pool_slots(&p), 1);
}

static void test_pool_overlap(void **state)
{
    (void)state;
    struct nsbox_netpool p = default_pool();
    struct nsbox_cidr c;
    assert_int_equal(nsbox_spec_net_parse_cidr("10.0.0.0/8", &c, NULL), 0);
    assert_true(nsbox_netplan_pool_overlaps(&p, &c));
    assert_int_equal(nsbox_spec_net_parse_cidr("10.171.3.4", &c, NULL), 0);
    assert_true(nsbox_netplan_pool_overlaps(&p, &c));
    assert_int_equal(nsbox_spec_net_parse_cidr("10.172.0.0/16", &c, NULL), 0);
    assert_false(nsbox_netplan_pool_overlaps(&p, &c));
    assert_int_equal(nsbox_spec_net_parse_cidr("0.0.0.0/0", &c, NULL), 0);
    assert_true(nsbox_netplan_pool_overlaps(&p, &c));
    assert_int_equal(nsbox_spec_net_parse_cidr("fd00::/8", &c, NULL), 0);
    assert_false(nsbox_netplan_pool_overlaps(&p, &c));
}

/* ---- configuration --------------------------------------------------------------------------- */

static int parse(struct nsbox_netconfig *c, const char *text, struct nsbox_err *e)
{
    cleanup_cjson cJSON *root = cfgtext(text);
    return nsbox_netplan_config_from_json(c, root, e);
}

static void test_config(void **state)
{
    (void)state;
    struct nsbox_netconfig c;
    struct nsbox_err e = {0};
    nsbox_netplan_config_init(&c);
    const char *none = "{\"instance_types\": {}}";
    assert_int_equal(parse(&c, none, &e), 0);
    assert_int_equal(c.pool.prefix, 16);
    assert_int_equal(c.n_dns, 0);
    const char *ok = "{\"network\": {\"pool\": \"172.30.0.0/20\", \"dns\": [\"192.0.2.53\", "
                     "\"192.0.2.54\"]}}";
    assert_int_equal(parse(&c, ok, &e), 0);
    assert_int_equal(c.pool.prefix, 20);
    assert_int_equal(c.pool.base, 0xac1e0000u);
    assert_int_equal(c.n_dns, 2);
    assert_string_equal(ip(c.dns[1]), "192.0.2.54");
    const char *bad[] = {"{\"network\": {\"pool\": \"fd00::/64\"}}",
                         "{\"network\": {\"dns\": []}}",
                         "{\"network\": {\"dns\": [\"::1\"]}}",
                         "{\"network\": {\"poool\": \"10.0.0.0/16\"}}",
                         "{\"network\": \"all\"}"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct nsbox_netconfig before = c;
        assert_int_equal(parse(&c, bad[i], &e), -1);
        assert_int_equal(e.code, NSBOX_E_INVALID);
        assert_memory_equal(&before, &c, sizeof c); /* unchanged on error */
    }
    assert_string_equal(e.msg, "config: key 'network': must be an object");
}

/* ---- resolv.conf ----------------------------------------------------------------------------- */

static void test_resolv_skips_loopback_and_ipv6(void **state)
{
    (void)state;
    struct nsbox_resolv r;
    nsbox_netplan_resolv_parse("# generated\n"
                               "nameserver 127.0.0.53\n"
                               "nameserver ::1\n"
                               "nameserver 2001:db8::53\n"
                               "nameserver 192.0.2.1 # first\n"
                               "nameserver\t192.0.2.2\n"
                               "nameserver 192.0.2.1\n"
                               "nameserver 192.0.2.3\n"
                               "nameserver 192.0.2.4\n"
                               "domain old.example\n"
                               "search a.example b.example\n"
                               "options edns0 trust-ad\n"
                               "options ndots:2\n",
                               &r);
    assert_int_equal(r.n_ns, 3); /* MAXNS, duplicates dropped */
    assert_string_equal(ip(r.ns[0]), "192.0.2.1");
    assert_string_equal(ip(r.ns[1]), "192.0.2.2");
    assert_string_equal(ip(r.ns[2]), "192.0.2.3");
    assert_int_equal(r.n_skipped, 3);
    assert_string_equal(r.skipped, "127.0.0.53");
    assert_string_equal(r.search, "a.example b.example");
    assert_string_equal(r.options, "edns0 trust-ad ndots:2");

    nsbox_netplan_resolv_parse("nameserver 127.0.0.53\noptions edns0\n", &r);
    assert_int_equal(r.n_ns, 0);
    assert_string_equal(r.skipped, "127.0.0.53");
    nsbox_netplan_resolv_parse("", &r);
    assert_int_equal(r.n_ns + r.n_skipped, 0);
}

/* ---- the plan -------------------------------------------------------------------------------- */

struct fake_dns {
    int calls;
};

static int fake_resolve(void *ctx, const char *name, struct in_addr *out, size_t max, size_t *n,
                        struct nsbox_err *e)
{
    struct fake_dns *f = ctx;
    f->calls++;
    *n = 0;
    if (!strcmp(name, "api.example.com")) {
        inet_pton(AF_INET, "198.51.100.10", &out[(*n)++]);
        inet_pton(AF_INET, "198.51.100.11", &out[(*n)++]);
        return 0;
    }
    if (!strcmp(name, "v6only.example.com"))
        return 0;
    if (!strcmp(name, "localhost")) {
        inet_pton(AF_INET, "127.0.0.1", &out[(*n)++]);
        return 0;
    }
    if (!strcmp(name, "sinkholed.example.com")) { /* a DNS filter's answer for a blocked name */
        inet_pton(AF_INET, "198.51.100.12", &out[(*n)++]);
        inet_pton(AF_INET, "0.0.0.0", &out[(*n)++]);
        return 0;
    }
    if (!strcmp(name, "inpool.example.com")) {
        inet_pton(AF_INET, "10.171.9.9", &out[(*n)++]);
        return 0;
    }
    (void)max;
    return nsbox_err_set(e, NSBOX_E_INVALID, ENOENT, "no such name");
}

static struct nsbox_spec *spec_with(const char *net, const char *egress)
{
    struct nsbox_spec *s = malloc(sizeof *s);
    nsbox_spec_init(s);
    struct nsbox_err e = {0};
    if (net)
        assert_int_equal(nsbox_spec_set(s, "network", net, &e), 0);
    if (egress)
        assert_int_equal(nsbox_spec_set(s, "egress", egress, &e), 0);
    return s;
}

static void free_spec(struct nsbox_spec *s)
{
    nsbox_spec_free(s);
    free(s);
}

static struct nsbox_resolv lab_dns(void)
{
    struct nsbox_resolv r;
    nsbox_netplan_resolv_parse("nameserver 192.0.2.53\nsearch lab.test\n", &r);
    return r;
}

static int build(const char *net, const char *egress, struct nsbox_netplan *p,
                 struct nsbox_err *e)
{
    struct nsbox_spec *s = spec_with(net, egress);
    struct nsbox_netpool pool = default_pool();
    struct nsbox_resolv dns = lab_dns();
    struct fake_dns f = {0};
    int r = nsbox_netplan_build(s, "0123456789ab", &pool, &dns, "/etc/resolv.conf", fake_resolve,
                                &f, p, e);
    free_spec(s);
    return r;
}

static void test_plan_none_has_no_link(void **state)
{
    (void)state;
    struct nsbox_netplan p;
    struct nsbox_err e = {0};
    assert_int_equal(build("none", NULL, &p, &e), 0);
    assert_false(p.link);
    assert_string_equal(p.ifname, "nsb0123456789ab");
    nsbox_netplan_free(&p);
    assert_int_equal(build("none", "192.0.2.0/24", &p, &e), 0);
    assert_true(p.link);
    assert_int_equal(p.n_cidr, 1);
    nsbox_netplan_free(&p);
}

static void test_plan_allow_resolves_dedups_and_pins(void **state)
{
    (void)state;
    struct nsbox_netplan p;
    struct nsbox_err e = {0};
    assert_int_equal(build("allow=api.example.com,API.example.com:8443,203.0.113.7:80,"
                           "api.example.com",
                           NULL, &p, &e),
                     0);
    assert_int_equal(p.n_pins, 1); /* resolved once, case-insensitively */
    assert_int_equal(p.pins[0].n, 2);
    assert_int_equal(p.n_tcp, 5); /* 2 addrs x {443, 8443} + the literal */
    assert_string_equal(ip(p.tcp[0].addr), "198.51.100.10");
    assert_int_equal(p.tcp[0].port, 443);
    assert_int_equal(p.tcp[3].port, 8443);
    assert_string_equal(ip(p.tcp[4].addr), "203.0.113.7");
    assert_int_equal(p.tcp[4].port, 80);
    assert_int_equal(p.dns.n_ns, 0); /* no DNS in allow mode */
    nsbox_netplan_free(&p);
}

static void test_plan_refusals(void **state)
{
    (void)state;
    struct nsbox_netplan p;
    struct nsbox_err e = {0};
    assert_int_equal(build("allow=2001:db8::1", NULL, &p, &e), -1);
    assert_int_equal(e.code, NSBOX_E_UNSUPPORTED);
    assert_non_null(strstr(e.msg, "IPv6"));
    assert_int_equal(build("all", "2001:db8::/32", &p, &e), -1);
    assert_int_equal(e.code, NSBOX_E_UNSUPPORTED);
    assert_int_equal(build("allow=v6only.example.com", NULL, &p, &e), -1);
    assert_int_equal(e.code, NSBOX_E_UNSUPPORTED);
    assert_int_equal(build("allow=nowhere.example.com", NULL, &p, &e), -1);
    assert_non_null(strstr(e.msg, "nowhere.example.com"));
    /* other sandboxes are never opened: not by egress, not by a name that resolves there */
    assert_int_equal(build("all", "10.0.0.0/8", &p, &e), -1);
    assert_int_equal(e.code, NSBOX_E_INVALID);
    assert_non_null(strstr(e.msg, "pool"));
    assert_int_equal(build("allow=inpool.example.com", NULL, &p, &e), -1);
    assert_non_null(strstr(e.msg, "pool"));
    assert_int_equal(build("allow=10.171.0.6", NULL, &p, &e), -1);
}

/* Loopback and the other sandbox-local ranges open nothing: from inside the sandbox's network
 * namespace they are the sandbox itself. Refused, with the way to reach a service on the host. */
static void test_plan_refuses_sandbox_local_destinations(void **state)
{
    (void)state;
    struct nsbox_netplan p;
    struct nsbox_err e = {0};
    static const struct {
        const char *net, *egress, *msg;
    } bad[] = {
        {"allow=localhost:8080", NULL, "allowed host 'localhost': resolves to 127.0.0.1, loopback"},
        {"allow=127.0.0.1:11434", NULL, "allowed host '127.0.0.1': loopback (127.0.0.0/8)"},
        {"allow=127.1.2.3", NULL, "loopback"},
        {"allow=0.0.0.0:80", NULL, "'this network' (0.0.0.0/8)"},
        {"allow=sinkholed.example.com", NULL, "resolves to 0.0.0.0, 'this network'"},
        {"allow=224.0.0.251", NULL, "multicast"},
        {"allow=255.255.255.255", NULL, "reserved (240.0.0.0/4, broadcast included)"},
        {"none", "127.0.0.1", "egress '127.0.0.1/32': loopback"},
        {"all", "127.0.0.0/8", "egress '127.0.0.0/8': loopback"},
        {"none", "239.0.0.0/8", "multicast"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        e.code = 0;
        e.msg[0] = '\0';
        assert_int_equal(build(bad[i].net, bad[i].egress, &p, &e), -1);
        assert_int_equal(e.code, NSBOX_E_INVALID);
        if (!strstr(e.msg, bad[i].msg) || !strstr(e.msg, "the host's other addresses"))
            fail_msg("%s / %s: %s", bad[i].net, bad[i].egress ? bad[i].egress : "-", e.msg);
    }
    /* What stays open: ranges that merely contain a local one, link-local named explicitly
     * (cloud services), and ordinary addresses. */
    static const struct {
        const char *net, *egress;
    } good[] = {
        {"none", "96.0.0.0/3"}, {"all", "112.0.0.0/4"}, {"allow=169.254.169.254:80", NULL},
        {"none", "169.254.0.0/16"}, {"allow=198.51.100.99:8080", NULL},
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        if (build(good[i].net, good[i].egress, &p, &e) != 0)
            fail_msg("%s / %s: %s", good[i].net, good[i].egress ? good[i].egress : "-", e.msg);
        nsbox_netplan_free(&p);
    }
}

static void assert_describes(const struct nsbox_netplan *p, const char *want)
{
    cJSON *o = nsbox_netplan_describe(p);
    assert_non_null(o);
    char *text = cJSON_PrintUnformatted(o);
    assert_string_equal(text, want);
    free(text);
    cJSON_Delete(o);
}

static void test_plan_described_for_inspect(void **state)
{
    (void)state;
    struct nsbox_netplan p;
    struct nsbox_err e = {0};
    assert_int_equal(build("allow=api.example.com:8443,203.0.113.7:80", "192.0.2.0/24", &p, &e),
                     0);
    assert_int_equal(nsbox_netplan_set_slot(&p, 3, &e), 0);
    assert_describes(&p, "{\"mode\":\"allow\",\"address\":\"10.171.0.14\","
                         "\"gateway\":\"10.171.0.13\",\"host_interface\":\"nsb0123456789ab\","
                         "\"allowed\":[\"198.51.100.10:8443\",\"198.51.100.11:8443\","
                         "\"203.0.113.7:80\"],\"pinned\":{\"api.example.com\":"
                         "[\"198.51.100.10\",\"198.51.100.11\"]},\"egress\":[\"192.0.2.0/24\"]}");
    nsbox_netplan_free(&p);
    assert_int_equal(build("all", NULL, &p, &e), 0);
    assert_int_equal(nsbox_netplan_set_slot(&p, 0, &e), 0);
    assert_describes(&p, "{\"mode\":\"all\",\"address\":\"10.171.0.2\",\"gateway\":"
                         "\"10.171.0.1\",\"host_interface\":\"nsb0123456789ab\",\"dns\":"
                         "[\"192.0.2.53\"],\"egress\":[]}");
    nsbox_netplan_free(&p);
    assert_int_equal(build("none", NULL, &p, &e), 0);
    assert_describes(&p, "{\"mode\":\"none\",\"address\":null,\"egress\":[]}");
    nsbox_netplan_free(&p);
}

static void test_plan_all_needs_a_reachable_resolver(void **state)
{
    (void)state;
    struct nsbox_spec *s = spec_with("all", NULL);
    struct nsbox_netpool pool = default_pool();
    struct nsbox_resolv stub;
    nsbox_netplan_resolv_parse("nameserver 127.0.0.53\n", &stub);
    struct nsbox_netplan p;
    struct nsbox_err e = {0};
    assert_int_equal(nsbox_netplan_build(s, "0123456789ab", &pool, &stub, "/etc/resolv.conf",
                                         NULL, NULL, &p, &e),
                     -1);
    assert_int_equal(e.code, NSBOX_E_UNSUPPORTED);
    assert_non_null(strstr(e.msg, "127.0.0.53"));
    assert_non_null(strstr(e.msg, "fix:"));
    assert_int_equal(nsbox_netplan_build(s, "bad id!", &pool, &stub, "", NULL, NULL, &p, &e), -1);
    free_spec(s);
}

static void test_plan_egress_minimised(void **state)
{
    (void)state;
    struct nsbox_netplan p;
    struct nsbox_err e = {0};
    assert_int_equal(build("none", "192.0.2.7,192.0.2.0/24,198.51.100.0/24,198.51.100.0/25,"
                                   "203.0.113.9",
                           &p, &e),
                     0);
    assert_int_equal(p.n_cidr, 3); /* ranges inside others dropped: nft refuses overlaps */
    assert_string_equal(ip(p.cidr[0].addr), "192.0.2.0");
    assert_int_equal(p.cidr[0].prefix, 24);
    assert_string_equal(ip(p.cidr[1].addr), "198.51.100.0");
    assert_int_equal(p.cidr[1].prefix, 24);
    assert_string_equal(ip(p.cidr[2].addr), "203.0.113.9");
    assert_int_equal(p.cidr[2].prefix, 32);
    nsbox_netplan_free(&p);
}

/* ---- nftables text --------------------------------------------------------------------------- */

static void test_table_text(void **state)
{
    (void)state;
    char *t = nsbox_netplan_table_text(false);
    assert_non_null(t);
    assert_true(!strncmp(t, "create table inet nsbox\n", 24)); /* made once; EEXIST otherwise */
    assert_non_null(strstr(t, "add set inet nsbox sb_cidr { type ifname . ipv4_addr; flags "
                              "interval; }\n"));
    assert_non_null(strstr(t, "type filter hook forward priority filter; policy accept;"));
    assert_non_null(strstr(t, "type nat hook postrouting priority srcnat;"));
    assert_non_null(strstr(t, "postrouting iifname \"nsb*\" oifname != \"nsb*\" masquerade\n"));
    assert_non_null(strstr(t, "input iifname \"nsb*\" jump to_host\n"));
    assert_non_null(strstr(t, "from_sandbox ip daddr 169.254.0.0/16 reject"));
    assert_non_null(strstr(t, "from_sandbox oifname \"nsb*\" reject"));
    assert_null(strstr(t, "ip_forward")); /* no guard */
    /* the sandbox-to-sandbox and metadata rejects come before the "all" accept; the explicit
     * openings (dns, egress, allowed host:port) before the metadata reject */
    const char *other = strstr(t, "from_sandbox oifname \"nsb*\" reject");
    const char *cidr = strstr(t, "from_sandbox iifname . ip daddr @sb_cidr accept");
    const char *meta = strstr(t, "from_sandbox ip daddr 169.254.0.0/16");
    const char *all = strstr(t, "from_sandbox iifname @sb_all accept");
    const char *spoof = strstr(t, "from_sandbox iifname . ip saddr != @sb_src drop");
    assert_true(spoof && other && cidr && meta && all);
    assert_true(spoof < other && other < cidr && cidr < meta && meta < all);
    /* the host's own addresses get the same guards before any opening: no IPv6, no source
     * address other than the sandbox's own */
    const char *h_v6 = strstr(t, "to_host meta nfproto ipv6 reject");
    const char *h_spoof = strstr(t, "to_host iifname . ip saddr != @sb_src drop");
    const char *h_dns = strstr(t, "to_host meta l4proto { tcp, udp } th dport 53");
    assert_true(h_v6 && h_spoof && h_dns);
    assert_true(h_v6 < h_spoof && h_spoof < h_dns);
    assert_non_null(strstr(t, "from_sandbox meta nfproto ipv6 reject"));
    /* every chain ends in a visible reject */
    assert_non_null(strstr(t, "from_sandbox meta l4proto tcp reject with tcp reset\n"
                              "add rule inet nsbox from_sandbox reject with icmpx "
                              "admin-prohibited\n"));
    assert_non_null(strstr(t, "to_host meta l4proto tcp reject with tcp reset\n"
                              "add rule inet nsbox to_host reject with icmpx admin-prohibited\n"));
    free(t);
    t = nsbox_netplan_table_text(true);
    assert_non_null(strstr(t, "forward iifname != \"nsb*\" oifname != \"nsb*\" drop comment"));
    free(t);
}

/* ---- gc -------------------------------------------------------------------------------------- */

static const char listing[] =
    "{\"nftables\": [{\"metainfo\": {\"version\": \"1.0.6\"}},"
    " {\"table\": {\"family\": \"inet\", \"name\": \"nsbox\", \"handle\": 1}},"
    " {\"set\": {\"family\": \"inet\", \"name\": \"sb_slot\", \"table\": \"nsbox\", \"type\": "
    "\"ipv4_addr\", \"elem\": [{\"elem\": {\"val\": \"10.171.0.0\", \"comment\": "
    "\"0123456789ab\"}}, {\"elem\": {\"val\": \"10.171.0.4\", \"comment\": \"aaaaaaaaaaaa\"}}]}},"
    " {\"set\": {\"family\": \"inet\", \"name\": \"sb_src\", \"table\": \"nsbox\", \"elem\": "
    "[{\"concat\": [\"nsb0123456789ab\", \"10.171.0.2\"]}, {\"concat\": [\"nsbaaaaaaaaaaaa\", "
    "\"10.171.0.6\"]}]}},"
    " {\"set\": {\"family\": \"inet\", \"name\": \"sb_all\", \"table\": \"nsbox\", \"elem\": "
    "[\"nsbaaaaaaaaaaaa\", \"nsb0123456789ab\"]}},"
    " {\"set\": {\"family\": \"inet\", \"name\": \"sb_dns\", \"table\": \"nsbox\"}},"
    " {\"set\": {\"family\": \"inet\", \"name\": \"sb_cidr\", \"table\": \"nsbox\", \"elem\": "
    "[{\"concat\": [\"nsb0123456789ab\", {\"prefix\": {\"addr\": \"198.51.100.16\", \"len\": "
    "28}}]}]}},"
    " {\"set\": {\"family\": \"inet\", \"name\": \"other\", \"table\": \"nsbox\", \"elem\": "
    "[\"nsb0123456789ab\"]}},"
    " {\"set\": {\"family\": \"inet\", \"name\": \"sb_all\", \"table\": \"someone-else\", "
    "\"elem\": [\"nsb0123456789ab\"]}},"
    " {\"chain\": {\"family\": \"inet\", \"table\": \"nsbox\", \"name\": \"forward\"}}]}";

static void test_gc_json_removes_exactly_one_sandbox(void **state)
{
    (void)state;
    bool oom;
    char *j = nsbox_netplan_gc_json(listing, "0123456789ab", &oom);
    assert_false(oom);
    assert_non_null(j);
    assert_string_equal(
        j, "{\"nftables\":["
           "{\"delete\":{\"element\":{\"family\":\"inet\",\"table\":\"nsbox\",\"name\":\"sb_slot\","
           "\"elem\":[\"10.171.0.0\"]}}},"
           "{\"delete\":{\"element\":{\"family\":\"inet\",\"table\":\"nsbox\",\"name\":\"sb_src\","
           "\"elem\":[{\"concat\":[\"nsb0123456789ab\",\"10.171.0.2\"]}]}}},"
           "{\"delete\":{\"element\":{\"family\":\"inet\",\"table\":\"nsbox\",\"name\":\"sb_all\","
           "\"elem\":[\"nsb0123456789ab\"]}}},"
           "{\"delete\":{\"element\":{\"family\":\"inet\",\"table\":\"nsbox\",\"name\":\"sb_cidr\","
           "\"elem\":[{\"concat\":[\"nsb0123456789ab\",{\"prefix\":{\"addr\":\"198.51.100.16\","
           "\"len\":28}}]}]}}}]}");
    free(j);
    assert_null(nsbox_netplan_gc_json(listing, "bbbbbbbbbbbb", &oom));
    assert_false(oom);
    assert_null(nsbox_netplan_gc_json("not json", "0123456789ab", &oom));
    assert_null(nsbox_netplan_gc_json(listing, "../../x", &oom));
}

static void test_free_slot_skips_taken(void **state)
{
    (void)state;
    struct nsbox_netpool p = default_pool();
    assert_int_equal(nsbox_netplan_free_slot(listing, &p, 0), 2); /* 0 and 1 are taken */
    assert_int_equal(nsbox_netplan_free_slot(listing, &p, 1), 2);
    assert_int_equal(nsbox_netplan_free_slot(listing, &p, 7), 7);
    assert_int_equal(nsbox_netplan_free_slot(listing, &p, 16384 + 5), 5);
    struct nsbox_netpool small;
    assert_int_equal(nsbox_netplan_pool_parse("10.171.0.0/29", &small, NULL), 0); /* 2 slots */
    assert_int_equal(nsbox_netplan_free_slot(listing, &small, 0), -1);
    assert_int_equal(nsbox_netplan_free_slot(NULL, &small, 1), 1);
}

struct owners {
    char seen[4][16];
    int n, stop_after;
};

static bool note_owner(const char *id, void *ctx)
{
    struct owners *o = ctx;
    snprintf(o->seen[o->n++], sizeof o->seen[0], "%s", id);
    return o->n < o->stop_after;
}

static void test_slot_owners_are_the_comments_of_the_pools_slots(void **state)
{
    (void)state;
    struct nsbox_netpool p = default_pool();
    struct owners o = {.stop_after = 4};
    nsbox_netplan_slot_owners(listing, &p, note_owner, &o);
    assert_int_equal(o.n, 2);
    assert_string_equal(o.seen[0], "0123456789ab");
    assert_string_equal(o.seen[1], "aaaaaaaaaaaa");
    /* fn says when to stop */
    struct owners one = {.stop_after = 1};
    nsbox_netplan_slot_owners(listing, &p, note_owner, &one);
    assert_int_equal(one.n, 1);
    /* slots outside the pool are not its own; a comment that is no id is skipped */
    struct nsbox_netpool other;
    assert_int_equal(nsbox_netplan_pool_parse("10.172.0.0/16", &other, NULL), 0);
    struct owners none = {.stop_after = 4};
    nsbox_netplan_slot_owners(listing, &other, note_owner, &none);
    assert_int_equal(none.n, 0);
    const char *odd = "{\"nftables\": [{\"set\": {\"family\": \"inet\", \"name\": \"sb_slot\", "
                      "\"table\": \"nsbox\", \"elem\": [{\"elem\": {\"val\": \"10.171.0.0\", "
                      "\"comment\": \"../../etc\"}}, \"10.171.0.8\"]}}]}";
    nsbox_netplan_slot_owners(odd, &p, note_owner, &none);
    nsbox_netplan_slot_owners("not json", &p, note_owner, &none);
    nsbox_netplan_slot_owners(NULL, &p, note_owner, &none);
    assert_int_equal(none.n, 0);
}

/* ---- /etc files ------------------------------------------------------------------------------ */

static void test_etc_files(void **state)
{
    (void)state;
    struct nsbox_netplan p;
    struct nsbox_err e = {0};
    bool oom;
    assert_int_equal(build("all", NULL, &p, &e), 0);
    char *r = nsbox_netplan_resolv_conf(&p);
    assert_string_equal(r, "# nsbox: network all; the host's resolvers from /etc/resolv.conf\n"
                           "nameserver 192.0.2.53\n"
                           "search lab.test\n");
    free(r);
    char *h = nsbox_netplan_hosts(&p, "nsbox-0123456789ab", &oom);
    assert_false(oom);
    assert_string_equal(h, "127.0.0.1\tlocalhost\n"
                           "::1\tlocalhost ip6-localhost ip6-loopback\n"
                           "ff02::1\tip6-allnodes\n"
                           "ff02::2\tip6-allrouters\n"
                           "127.0.1.1\tnsbox-0123456789ab\n");
    free(h);
    /* network none: no plan, the same file */
    h = nsbox_netplan_hosts(NULL, "nsbox-0123456789ab", &oom);
    assert_non_null(strstr(h, "127.0.0.1\tlocalhost\n"));
    assert_non_null(strstr(h, "\n127.0.1.1\tnsbox-0123456789ab\n"));
    free(h);
    /* a name that could add lines or fields is left out, whatever it is */
    const char *bad[] = {"a\n1.2.3.4 evil", "a b", "-a", "", "a\tb",
                         "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" /* 64 */};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        h = nsbox_netplan_hosts(NULL, bad[i], &oom);
        assert_null(strstr(h, "127.0.1.1"));
        free(h);
    }
    nsbox_netplan_free(&p);

    assert_int_equal(build("allow=api.example.com", NULL, &p, &e), 0);
    r = nsbox_netplan_resolv_conf(&p);
    /* the one server named is the sandbox's init, which refuses every name (dnsstub.h) */
    const char *ns = strstr(r, "\nnameserver ");
    assert_non_null(ns);
    assert_int_equal(strncmp(ns, "\nnameserver 127.0.0.1\n", 22), 0);
    assert_null(strstr(ns + 22, "nameserver"));
    assert_non_null(strstr(r, "DNS is blocked"));
    free(r);
    h = nsbox_netplan_hosts(&p, "nsbox-0123456789ab", &oom);
    assert_non_null(strstr(h, "127.0.0.1\tlocalhost\n"));
    assert_non_null(strstr(h, "\n127.0.1.1\tnsbox-0123456789ab\n"));
    assert_non_null(strstr(h, "198.51.100.10\tapi.example.com\n198.51.100.11\tapi.example.com\n"));
    free(h);
    nsbox_netplan_free(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pool_slots_are_consecutive_30s),
        cmocka_unit_test(test_pool_rejects_bad_ranges),
        cmocka_unit_test(test_pool_overlap),
        cmocka_unit_test(test_config),
        cmocka_unit_test(test_resolv_skips_loopback_and_ipv6),
        cmocka_unit_test(test_plan_none_has_no_link),
        cmocka_unit_test(test_plan_allow_resolves_dedups_and_pins),
        cmocka_unit_test(test_plan_refusals),
        cmocka_unit_test(test_plan_refuses_sandbox_local_destinations),
        cmocka_unit_test(test_plan_described_for_inspect),
        cmocka_unit_test(test_plan_all_needs_a_reachable_resolver),
        cmocka_unit_test(test_plan_egress_minimised),
        cmocka_unit_test(test_table_text),
        cmocka_unit_test(test_gc_json_removes_exactly_one_sandbox),
        cmocka_unit_test(test_free_slot_skips_taken),
        cmocka_unit_test(test_slot_owners_are_the_comments_of_the_pools_slots),
        cmocka_unit_test(test_etc_files),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
