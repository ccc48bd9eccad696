/* Unit tests for the spec module (policy/spec.c, policy/spec_api.c): defaults, JSON and CLI
 * input, host/CIDR/env/size parsing, the region rule, instance type overrides. Configuration
 * files, rendering, pulls and the public API are in test_spec_config.c. */

#include "spec_fixture.h"

/* ---- defaults and happy paths ---------------------------------------------------------------- */

static void test_defaults(void **state)
{
    struct nsbox_spec *s = *state;
    assert_string_equal(s->instance_type, "medium");
    assert_int_equal(s->idle_timeout_seconds, 0);
    assert_int_equal(s->ttl_seconds, 86400);
    assert_string_equal(s->region, "nl-north-1");
    assert_int_equal(s->net, NSBOX_NET_NONE);
    assert_int_equal(s->n_hosts, 0);
    assert_int_equal(s->n_egress, 0);
    assert_string_equal(s->image, "host");
    assert_null(s->setup_script);
    assert_int_equal(s->setup_script_timeout_seconds, 600);
    assert_string_equal(s->workspace, "");
    assert_int_equal(s->n_env, 0);
}

static void test_json_every_key(void **state)
{
    struct nsbox_spec *s = *state;
    struct nsbox_err e;
    int r = load(s,
                 "{\"instance_type\": \"large\", \"idle_timeout_seconds\": 30,"
                 " \"ttl_seconds\": 3600, \"region\": \"nl-north-1\","
                 " \"network\": {\"allow\": [\"PyPI.org\", \"example.com:8443\", \"[::1]:8080\"]},"
                 " \"egress\": [\"10.0.0.0/8\", \"192.0.2.7\", \"fd00::/8\"],"
                 " \"image\": \"debian\", \"setup_script\": \"pip install x\\n\","
                 " \"setup_script_timeout_seconds\": 120, \"workspace\": \"/srv/ws\","
                 " \"env\": {\"A\": \"1\", \"_B2\": \"x=y\"}}",
                 &e);
    assert_int_equal(r, 0);
    assert_string_equal(s->instance_type, "large");
    assert_int_equal(s->idle_timeout_seconds, 30);
    assert_int_equal(s->ttl_seconds, 3600);
    assert_int_equal(s->net, NSBOX_NET_ALLOW);
    assert_int_equal(s->n_hosts, 3);
    assert_string_equal(s->hosts[0].name, "pypi.org");
    assert_int_equal(s->hosts[0].port, 443);
    assert_string_equal(s->hosts[1].name, "example.com");
    assert_int_equal(s->hosts[1].port, 8443);
    assert_string_equal(s->hosts[2].name, "::1");
    assert_int_equal(s->hosts[2].port, 8080);
    assert_int_equal(s->n_egress, 3);
    assert_int_equal(s->egress[0].family, AF_INET);
    assert_int_equal(s->egress[0].prefix, 8);
    assert_int_equal(s->egress[1].prefix, 32);
    assert_int_equal(s->egress[2].family, AF_INET6);
    assert_int_equal(s->egress[2].prefix, 8);
    assert_string_equal(s->image, "debian");
    assert_string_equal(s->setup_script, "pip install x\n");
    assert_int_equal(s->setup_script_timeout_seconds, 120);
    assert_string_equal(s->workspace, "/srv/ws");
    assert_int_equal(s->n_env, 2);
    assert_string_equal(s->env[0], "A=1");
    assert_string_equal(s->env[1], "_B2=x=y");

    /* A second load overlays: absent keys stay, present ones replace their whole value. */
    assert_int_equal(load(s, "{\"network\": \"all\", \"setup_script\": null, \"egress\": null,"
                             " \"workspace\": \"\", \"image\": \"/opt/rootfs\"}", &e), 0);
    assert_int_equal(s->net, NSBOX_NET_ALL);
    assert_int_equal(s->n_hosts, 0);
    assert_int_equal(s->n_egress, 0);
    assert_null(s->setup_script);
    assert_string_equal(s->workspace, "");
    assert_string_equal(s->image, "/opt/rootfs");
    assert_string_equal(s->instance_type, "large");
    assert_int_equal(s->ttl_seconds, 3600);
    assert_int_equal(load(s, "{\"network\": \"none\"}", &e), 0);
    assert_int_equal(s->net, NSBOX_NET_NONE);
}

/* ---- JSON errors ----------------------------------------------------------------------------- */

static void test_json_unknown_key(void **state)
{
    struct nsbox_spec *s = *state;
    struct nsbox_err e;
    assert_fails_with(load(s, "{\"ttl_seconds\": 5, \"foo\": 1}", &e), &e, NSBOX_E_INVALID, "");
    /* nothing close: every key a spec takes (limits is output only) */
    assert_string_equal(e.msg, "spec: unknown key 'foo' (a spec's keys: instance_type, "
                               "idle_timeout_seconds, ttl_seconds, region, network, egress, "
                               "image, pull, setup_script, setup_script_timeout_seconds, "
                               "workspace, env, supports_background_processes, "
                               "header_bindings; docs/spec.md)");
    assert_int_equal(s->ttl_seconds, 86400);
    /* a key's first word is that key, the first in the table of several */
    assert_fails_with(load(s, "{\"ttl\": 30}", &e), &e, NSBOX_E_INVALID, "");
    assert_string_equal(e.msg, "spec: unknown key 'ttl' (did you mean 'ttl_seconds'?)");
    static const char *const first_word[][2] = {
        {"{\"instance\": \"small\"}", "(did you mean 'instance_type'?)"},
        {"{\"setup\": \"true\"}", "(did you mean 'setup_script'?)"},
        {"{\"timeout\": 30}", "spec: unknown key 'timeout' (a spec's keys: instance_type, "},
    };
    for (size_t i = 0; i < sizeof first_word / sizeof first_word[0]; i++)
        assert_fails_with(load(s, first_word[i][0], &e), &e, NSBOX_E_INVALID, first_word[i][1]);
    /* Keys are case-sensitive, as in the Python client. */
    assert_fails_with(load(s, "{\"TTL_seconds\": 5}", &e), &e, NSBOX_E_INVALID,
                      "unknown key 'TTL_seconds'");
    /* A hostile key cannot put a new line into the message. */
    assert_fails_with(load(s, "{\"a\\nb\": 1}", &e), &e, NSBOX_E_INVALID, "unknown key 'a?b'");
    /* A typo gets the key meant; a size, where sizes come from */
    assert_fails_with(load(s, "{\"instance-type\": \"small\"}", &e), &e, NSBOX_E_INVALID, "");
    assert_string_equal(e.msg,
                        "spec: unknown key 'instance-type' (did you mean 'instance_type'?)");
    assert_fails_with(load(s, "{\"TTL_seconds\": 5}", &e), &e, NSBOX_E_INVALID,
                      "(did you mean 'ttl_seconds'?)");
    assert_fails_with(load(s, "{\"memory\": \"2GiB\"}", &e), &e, NSBOX_E_INVALID, "");
    assert_string_equal(e.msg, "spec: unknown key 'memory': CPUs, memory, pids and disk come from "
                               "instance_type; other sizes are an instance type of their own in "
                               "the config file (docs/spec.md)");
    assert_int_equal(s->ttl_seconds, 86400);
}

static void test_json_wrong_types(void **state)
{
    static const struct {
        const char *json, *msg;
    } cases[] = {
        {"{\"instance_type\": 2}", "spec: key 'instance_type': must be a string"},
        {"{\"idle_timeout_seconds\": \"5\"}", "spec: key 'idle_timeout_seconds': must be an integer"},
        {"{\"ttl_seconds\": true}", "spec: key 'ttl_seconds': must be an integer between 1 and"},
        {"{\"ttl_seconds\": null}", "spec: key 'ttl_seconds': must be an integer"},
        {"{\"setup_script_timeout_seconds\": []}", "key 'setup_script_timeout_seconds': must be an"},
        {"{\"region\": null}", "spec: key 'region': must be a string"},
        {"{\"image\": {}}", "spec: key 'image': must be a string"},
        {"{\"setup_script\": 1}", "spec: key 'setup_script': must be a string or null"},
        {"{\"workspace\": false}", "spec: key 'workspace': must be a string or null"},
        {"{\"network\": 1}", "spec: key 'network': must be \"none\", \"all\" or {\"allow\""},
        {"{\"network\": \"some\"}", "spec: key 'network': must be \"none\", \"all\" or"},
        {"{\"network\": {\"allow\": \"a.com\"}}", "key 'network': 'allow' must be an array"},
        {"{\"network\": {\"allow\": [1]}}", "key 'network': 'allow' must be an array of host"},
        {"{\"network\": {\"mode\": \"allow\", \"hosts\": [\"a.com\"]}}",
         "key 'network': unknown key 'mode'"},
        {"{\"network\": {}}", "key 'network': 'allow' must be an array"},
        {"{\"network\": {\"allow\": []}}", "key 'network': 'allow' needs at least one host"},
        {"{\"egress\": \"10.0.0.0/8\"}", "spec: key 'egress': must be an array of CIDR strings"},
        {"{\"egress\": [8]}", "spec: key 'egress': must be an array of CIDR strings"},
        {"{\"env\": [\"A=1\"]}", "spec: key 'env': must be an object of strings"},
        {"{\"env\": {\"A\": 1}}", "spec: key 'env': value of 'A' must be a string"},
        {"{\"limits\": 3}", "spec: key 'limits': must be an object"},
    };
    struct nsbox_spec *s = *state;
    struct nsbox_err e;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        assert_fails_with(load(s, cases[i].json, &e), &e, NSBOX_E_INVALID, cases[i].msg);
}

static void test_json_ranges(void **state)
{
    struct nsbox_spec *s = *state;
    struct nsbox_err e;
    assert_fails_with(load(s, "{\"ttl_seconds\": 0}", &e), &e, NSBOX_E_INVALID, "");
    assert_string_equal(e.msg, "spec: key 'ttl_seconds': must be an integer between 1 and 31536000");
    assert_fails_with(load(s, "{\"ttl_seconds\": 31536001}", &e), &e, NSBOX_E_INVALID, "31536000");
    assert_fails_with(load(s, "{\"ttl_seconds\": 1.5}", &e), &e, NSBOX_E_INVALID, "integer");
    assert_fails_with(load(s, "{\"ttl_seconds\": 1e300}", &e), &e, NSBOX_E_INVALID, "integer");
    assert_fails_with(load(s, "{\"idle_timeout_seconds\": -1}", &e), &e, NSBOX_E_INVALID,
                      "between 0 and 31536000");
    assert_fails_with(load(s, "{\"setup_script_timeout_seconds\": 0}", &e), &e, NSBOX_E_INVALID,
                      "between 1 and 86400");
    assert_fails_with(load(s, "{\"setup_script_timeout_seconds\": 86401}", &e), &e,
                      NSBOX_E_INVALID, "between 1 and 86400");
    assert_int_equal(s->ttl_seconds, 86400);

    assert_int_equal(load(s, "{\"ttl_seconds\": 31536000, \"idle_timeout_seconds\": 0,"
                             " \"setup_script_timeout_seconds\": 86400}", &e), 0);
    assert_int_equal(s->ttl_seconds, 31536000);
    assert_int_equal(s->setup_script_timeout_seconds, 86400);
    assert_int_equal(load(s, "{\"ttl_seconds\": 2.0}", &e), 0); /* integral value */
    assert_int_equal(s->ttl_seconds, 2);
    /* Repeated keys: the last one wins, as with repeated CLI flags. */
    assert_int_equal(load(s, "{\"ttl_seconds\": 5, \"ttl_seconds\": 7}", &e), 0);
    assert_int_equal(s->ttl_seconds, 7);
}

static void test_json_strings(void **state)
{
    struct nsbox_spec *s = *state;
    struct nsbox_err e;
    assert_fails_with(load(s, "{\"image\": \"Debian\"}", &e), &e, NSBOX_E_INVALID,
                      "key 'image': 'Debian' is neither");
    assert_fails_with(load(s, "{\"image\": \"../etc\"}", &e), &e, NSBOX_E_INVALID, "key 'image'");
    assert_fails_with(load(s, "{\"image\": \"a//b\"}", &e), &e, NSBOX_E_INVALID, "key 'image'");
    /* OCI references (a/b is docker.io/a/b:latest) */
    assert_int_equal(load(s, "{\"image\": \"a/b\"}", &e), 0);
    assert_int_equal(load(s, "{\"image\": \"127.0.0.1:5000/team/py:1\"}", &e), 0);
    assert_string_equal(s->image, "127.0.0.1:5000/team/py:1");
    assert_fails_with(load(s, "{\"image\": \"\"}", &e), &e, NSBOX_E_INVALID, "key 'image'");
    /* Store names become directory names next to a 64-byte buffer: 63 characters at most. */
    char name_json[128];
    int off = snprintf(name_json, sizeof name_json, "{\"image\": \"");
    memset(name_json + off, 'a', 64);
    strcpy(name_json + off + 64, "\"}");
    assert_fails_with(load(s, name_json, &e), &e, NSBOX_E_INVALID, "key 'image'");
    memcpy(name_json + off + 60, ".-_\"}", 6); /* 63 characters, the last ones punctuation */
    assert_int_equal(load(s, name_json, &e), 0);
    assert_int_equal(strlen(s->image), 63);
    assert_fails_with(load(s, "{\"workspace\": \"ws\"}", &e), &e, NSBOX_E_INVALID,
                      "key 'workspace': 'ws' must be an absolute path");
    assert_fails_with(load(s, "{\"region\": \"US-East\"}", &e), &e, NSBOX_E_INVALID,
                      "key 'region'");
    assert_fails_with(load(s, "{\"region\": \"\"}", &e), &e, NSBOX_E_INVALID, "key 'region'");
    assert_fails_with(load(s, "{\"instance_type\": \"x/y\"}", &e), &e, NSBOX_E_INVALID,
                      "key 'instance_type'");

    /* Over-long path: PATH_MAX bytes including the '/'. */
    size_t n = PATH_MAX + 32;
    char *json = malloc(n);
    assert_non_null(json);
    off = snprintf(json, n, "{\"workspace\": \"/");
    memset(json + off, 'a', PATH_MAX - 1);
    strcpy(json + off + PATH_MAX - 1, "\"}");
    assert_fails_with(load(s, json, &e), &e, NSBOX_E_INVALID, "longer than 4095");
    json[off + PATH_MAX - 2] = '"';
    json[off + PATH_MAX - 1] = '}';
    json[off + PATH_MAX] = '\0';
    assert_int_equal(load(s, json, &e), 0); /* 4095 bytes fits */
    assert_int_equal(strlen(s->workspace), PATH_MAX - 1);
    free(json);

    /* setup_script is bounded. */
    char *big = malloc(NSBOX_SCRIPT_MAX + 64);
    assert_non_null(big);
    off = snprintf(big, 64, "{\"setup_script\": \"");
    memset(big + off, 'x', NSBOX_SCRIPT_MAX + 1);
    strcpy(big + off + NSBOX_SCRIPT_MAX + 1, "\"}");
    assert_fails_with(load(s, big, &e), &e, NSBOX_E_INVALID, "key 'setup_script': longer than");
    free(big);
}

static void test_json_document(void **state)
{
    struct nsbox_spec *s = *state;
    struct nsbox_err e;
    assert_fails_with(load(s, "", &e), &e, NSBOX_E_INVALID, "spec: empty input");
    assert_fails_with(load(s, "[]", &e), &e, NSBOX_E_INVALID, "spec: must be a JSON object");
    assert_fails_with(load(s, "\"x\"", &e), &e, NSBOX_E_INVALID, "must be a JSON object");
    assert_fails_with(load(s, "{\"ttl_seconds\": ", &e), &e, NSBOX_E_INVALID,
                      "spec: invalid JSON: the text ends before its object does, after 16 bytes");
    assert_fails_with(load(s, "{\"ttl_seconds\": x}", &e), &e, NSBOX_E_INVALID,
                      "spec: invalid JSON near byte 16");
    assert_fails_with(load(s, "{} {}", &e), &e, NSBOX_E_INVALID, "unexpected text after");
    assert_int_equal(load(s, " {}\n", &e), 0);

    /* A NUL would silently cut the path short: "/ok\0/../x" must not become "/ok". */
    assert_fails_with(load(s, "{\"workspace\": \"/ok\\u0000/x\"}", &e), &e, NSBOX_E_INVALID,
                      "NUL");
    /* cJSON decodes a \u escape with non-hex digits as 0: the same truncation. */
    assert_fails_with(load(s, "{\"workspace\": \"/ok\\uzzzz/x\"}", &e), &e, NSBOX_E_INVALID,
                      "invalid \\u escape");
    assert_fails_with(load(s, "{\"workspace\": \"/ok\\u00\"}", &e), &e, NSBOX_E_INVALID,
                      "invalid \\u escape");
    /* one cut inside its escape is a text that ended, as any other cut */
    assert_fails_with(load(s, "{\"workspace\": \"/ok\\u00", &e), &e, NSBOX_E_INVALID,
                      "the text ends before its object does");
    assert_fails_with(load(s, "{\"workspace\": \"/ok\\u0\"}", &e), &e, NSBOX_E_INVALID,
                      "invalid JSON");
    assert_int_equal(load(s, "{\"env\": {\"U\": \"\\u00e9\\uD83D\\uDE00\"}}", &e), 0);
    assert_string_equal(nsbox_spec_getenv(s, "U"), "\xc3\xa9\xf0\x9f\x98\x80");
    static const char raw[] = "{\"workspace\": \"/ok\0/x\"}";
    nsbox_err_clear(&e);
    assert_fails_with(nsbox_spec_from_json(s, raw, sizeof raw - 1, &e), &e, NSBOX_E_INVALID,
                      "NUL");
    assert_string_equal(s->workspace, "");
    /* An escaped backslash followed by "u0000" is ordinary text. */
    assert_int_equal(load(s, "{\"env\": {\"A\": \"\\\\u0000\"}}", &e), 0);
    assert_string_equal(nsbox_spec_getenv(s, "A"), "\\u0000");

    /* Size bound: checked before parsing. */
    size_t n = NSBOX_SPEC_JSON_MAX + 1;
    char *huge = malloc(n);
    assert_non_null(huge);
    memset(huge, ' ', n);
    huge[0] = '{';
    huge[n - 1] = '}';
    nsbox_err_clear(&e);
    assert_fails_with(nsbox_spec_from_json(s, huge, n, &e), &e, NSBOX_E_INVALID, "larger than");
    assert_int_equal(nsbox_spec_from_json(s, huge + 1, n - 1 - 1, &e), -1); /* no '{' */
    huge[1] = '{';
    assert_int_equal(nsbox_spec_from_json(s, huge + 1, n - 1, &e), 0); /* exactly the bound */
    free(huge);
}

static void test_failed_load_leaves_spec_unchanged(void **state)
{
    struct nsbox_spec *s = *state;
    struct nsbox_spec before;
    struct nsbox_err e;
    assert_int_equal(load(s, "{\"env\": {\"A\": \"1\", \"B\": \"2\"}, \"setup_script\": \"true\","
                             " \"network\": {\"allow\": [\"a.com\"]}, \"egress\": [\"10.0.0.0/8\"],"
                             " \"ttl_seconds\": 60}", &e), 0);
    assert_int_equal(nsbox_spec_copy(&before, s, &e), 0);

    /* Valid keys first, then a bad one: nothing of the first part may stick. */
    static const char *const bad[] = {
        "{\"ttl_seconds\": 99, \"env\": {\"C\": \"3\"}, \"setup_script\": \"x\", \"bogus\": 1}",
        "{\"network\": {\"allow\": [\"b.com\", \"https://c.com\"]}}",
        "{\"egress\": [\"192.0.2.0/24\", \"10.1.0.0/8\"]}",
        "{\"env\": {\"C\": \"3\", \"1X\": \"4\"}}",
        "{\"network\": \"all\", \"workspace\": \"relative\"}",
        "{\"setup_script\": null, \"ttl_seconds\": 0}",
        "{\"instance_type\": \"small\", \"limits\": {\"cpus\": 64}}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(load(s, bad[i], &e), -1);
        if (!nsbox_spec_equal(&before, s))
            fail_msg("spec changed by failed load of %s", bad[i]);
    }
    assert_string_equal(nsbox_spec_getenv(s, "A"), "1");
    assert_null(nsbox_spec_getenv(s, "C"));
    assert_string_equal(s->setup_script, "true");
    assert_int_equal(s->ttl_seconds, 60);

    /* The same for set. */
    assert_int_equal(nsbox_spec_set(s, "egress", "192.0.2.0/24,10.1.0.0/8", &e), -1);
    assert_int_equal(nsbox_spec_set(s, "network", "allow=b.com,*.c.com", &e), -1);
    assert_true(nsbox_spec_equal(&before, s));
    nsbox_spec_free(&before);
}

/* ---- hosts ----------------------------------------------------------------------------------- */

static void test_host_good(void **state)
{
    static const struct {
        const char *in, *name;
        unsigned port;
    } good[] = {
        {"example.com", "example.com", 443},
        {"Example.COM:8443", "example.com", 8443},
        {"example.com.", "example.com", 443},
        {"localhost", "localhost", 443},
        {"a-b.c0.io", "a-b.c0.io", 443},
        {"xn--bcher-kva.example", "xn--bcher-kva.example", 443},
        {"1.2.3.4:80", "1.2.3.4", 80},
        {"1.2.3.4", "1.2.3.4", 443},
        {"[::1]:443", "::1", 443},
        {"[2001:DB8::1]:8080", "2001:db8::1", 8080},
        {"[::1]", "::1", 443},
        {"::1", "::1", 443},
        {"2001:db8:0:0:0:0:0:1", "2001:db8::1", 443},
        {"x:65535", "x", 65535},
        {"x:1", "x", 1},
    };
    (void)state;
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        struct nsbox_host h;
        struct nsbox_err e = {0};
        if (nsbox_spec_net_parse_host(good[i].in, &h, &e) != 0)
            fail_msg("'%s' rejected: %s", good[i].in, e.msg);
        assert_string_equal(h.name, good[i].name);
        assert_int_equal(h.port, good[i].port);
    }
    /* 63-byte labels and a 253-byte name are the limits. */
    char name[300];
    memset(name, 'a', 63);
    strcpy(name + 63, ".com");
    struct nsbox_host h;
    struct nsbox_err e;
    assert_int_equal(nsbox_spec_net_parse_host(name, &h, &e), 0);
    for (int i = 0; i < 4; i++) { /* 4 labels of 61 + '.', then "a.com": 253 */
        memset(name + i * 62, 'a', 61);
        name[i * 62 + 61] = '.';
    }
    strcpy(name + 248, "a.com");
    assert_int_equal(strlen(name), 253);
    assert_int_equal(nsbox_spec_net_parse_host(name, &h, &e), 0);
    strcpy(name + 248, "ab.com");
    assert_fails_with(nsbox_spec_net_parse_host(name, &h, &e), &e, NSBOX_E_INVALID,
                      "longer than 253");
}

static void test_host_bad(void **state)
{
    static const struct {
        const char *in, *msg;
    } bad[] = {
        {"", "empty host"},
        {"https://x", "has a scheme"},
        {"http://x:80/", "has a scheme"},
        {"x/y", "has a path"},
        {"x?q", "has a path"},
        {"10.0.0.0/8", "an address range; allow lists hosts one by one, and ranges go in egress "
                       "(--egress 10.0.0.0/8"},
        {"fd00::/8", "an address range"},
        {"10.0.0.0/x", "has a path"},
        {"example.com/8", "has a path"},
        {"*.x", "wildcards are not supported"},
        {"x.*", "wildcards are not supported"},
        {"user@x", "user info"},
        {"a..b", "empty label"},
        {".a", "empty label"},
        {"a.b..", "empty label"},
        {"-a.com", "starts or ends with '-'"},
        {"a-.com", "starts or ends with '-'"},
        {"a_b.com", "invalid character '_'"},
        {"a b", "contains a space; hosts are separated by commas (allow=a.example,b.example)"},
        {"a\tb", "whitespace"},
        {"x:0", "port 0 is out of range 1..65535"},
        {"x:65536", "port 65536 is out of range"},
        {"x:99999999999999999999999", "out of range"},
        {"x:", "empty port"},
        {"x:https", "port 'https' is not a number"},
        {"x:-1", "is not a number"},
        {":443", "empty host name"},
        {"1.2.3.256", "not a valid IPv4 address"},
        {"127.1", "not a valid IPv4 address"},
        {"0x7f.1", "not a valid IPv4 address or host name"},
        {"1::2::3", "not a valid IPv6 address"},
        {"::1:443x", "not a valid IPv6 address"},
        {"[::1", "missing ']'"},
        {"[1.2.3.4]:80", "brackets must hold an IPv6 address"},
        {"[::1]x", "unexpected text after ']'"},
        {"[::1]:0", "out of range"},
        {"b\xc3\xbc" "cher.example", "punycode"},
    };
    (void)state;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct nsbox_host h;
        struct nsbox_err e = {0};
        int r = nsbox_spec_net_parse_host(bad[i].in, &h, &e);
        if (r != -1 || e.code != NSBOX_E_INVALID || !strstr(e.msg, bad[i].msg))
            fail_msg("'%s': r=%d msg '%s', wanted '%s'", bad[i].in, r, e.msg, bad[i].msg);
    }
    char label[80];
    memset(label, 'a', 64);
    strcpy(label + 64, ".com");
    struct nsbox_host h;
    struct nsbox_err e;
    assert_fails_with(nsbox_spec_net_parse_host(label, &h, &e), &e, NSBOX_E_INVALID,
                      "longer than 63");
}

static void test_host_format(void **state)
{
    static const char *const in[] = {"example.com", "example.com:8443", "[::1]:8443", "::1",
                                     "1.2.3.4:80"};
    static const char *const out[] = {"example.com", "example.com:8443", "[::1]:8443", "::1",
                                      "1.2.3.4:80"};
    (void)state;
    for (size_t i = 0; i < sizeof in / sizeof in[0]; i++) {
        struct nsbox_host h;
        struct nsbox_err e;
        char buf[300];
        assert_int_equal(nsbox_spec_net_parse_host(in[i], &h, &e), 0);
        assert_true(nsbox_spec_net_host_format(&h, buf, sizeof buf) > 0);
        assert_string_equal(buf, out[i]);
        assert_int_equal(nsbox_spec_net_host_format(&h, buf, 3), -1);
    }
}

/* ---- CIDRs ----------------------------------------------------------------------------------- */

static void test_cidr(void **state)
{
    static const struct {
        const char *in, *out;
        int family;
        unsigned prefix;
    } good[] = {
        {"10.0.0.0/8", "10.0.0.0/8", AF_INET, 8},
        {"192.0.2.7", "192.0.2.7/32", AF_INET, 32},
        {"0.0.0.0/0", "0.0.0.0/0", AF_INET, 0},
        {"10.128.0.0/9", "10.128.0.0/9", AF_INET, 9},
        {"fd00::/8", "fd00::/8", AF_INET6, 8},
        {"::1", "::1/128", AF_INET6, 128},
        {"2001:DB8::/32", "2001:db8::/32", AF_INET6, 32},
        {"::/0", "::/0", AF_INET6, 0},
    };
    static const struct {
        const char *in, *msg;
    } bad[] = {
        {"10.1.0.0/8", "has host bits set (the network is 10.0.0.0/8"},
        {"10.0.0.1/31", "has host bits set (the network is 10.0.0.0/31"},
        {"fd00::1/8", "has host bits set (the network is fd00::/8"},
        {"10.0.0.0/33", "prefix length must be a number between 0 and 32"},
        {"fd00::/129", "between 0 and 128"},
        {"10.0.0.0/", "prefix length"},
        {"10.0.0.0/-1", "prefix length"},
        {"10.0.0.0/8/8", "prefix length"},
        {"1.2.3", "not an IPv4 or IPv6 address"},
        {"example.com", "not an IPv4 or IPv6 address"},
        {"[::1]", "not an IPv4 or IPv6 address"},
        {"", "empty"},
    };
    (void)state;
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        struct nsbox_cidr c;
        struct nsbox_err e = {0};
        char buf[64];
        if (nsbox_spec_net_parse_cidr(good[i].in, &c, &e) != 0)
            fail_msg("'%s' rejected: %s", good[i].in, e.msg);
        assert_int_equal(c.family, good[i].family);
        assert_int_equal(c.prefix, good[i].prefix);
        assert_true(nsbox_spec_net_cidr_format(&c, buf, sizeof buf) > 0);
        assert_string_equal(buf, good[i].out);
    }
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct nsbox_cidr c;
        struct nsbox_err e = {0};
        int r = nsbox_spec_net_parse_cidr(bad[i].in, &c, &e);
        if (r != -1 || e.code != NSBOX_E_INVALID || !strstr(e.msg, bad[i].msg))
            fail_msg("'%s': r=%d msg '%s', wanted '%s'", bad[i].in, r, e.msg, bad[i].msg);
    }
}

/* ---- env ------------------------------------------------------------------------------------- */

static void test_env(void **state)
{
    struct nsbox_spec *s = *state;
    struct nsbox_err e;
    /* A repeated name in one object: the later value replaces the earlier, in place. */
    assert_int_equal(load(s, "{\"env\": {\"A\": \"1\", \"B\": \"2\", \"A\": \"3\"}}", &e), 0);
    assert_int_equal(s->n_env, 2);
    assert_string_equal(s->env[0], "A=3");
    assert_string_equal(s->env[1], "B=2");
    /* -e K=V on top of it. */
    assert_int_equal(nsbox_spec_set(s, "env", "B=x=y", &e), 0);
    assert_int_equal(nsbox_spec_set(s, "env", "C=", &e), 0);
    assert_int_equal(s->n_env, 3);
    assert_string_equal(nsbox_spec_getenv(s, "B"), "x=y");
    assert_string_equal(nsbox_spec_getenv(s, "C"), "");
    assert_null(nsbox_spec_getenv(s, "AB"));
    /* A JSON env replaces the whole set. */
    assert_int_equal(load(s, "{\"env\": {\"Z\": \"9\"}}", &e), 0);
    assert_int_equal(s->n_env, 1);
    assert_null(nsbox_spec_getenv(s, "A"));

    static const char *const bad_kv[] = {"1A=x", "A-B=x", "=x", "A", "A B=x", ""};
    for (size_t i = 0; i < sizeof bad_kv / sizeof bad_kv[0]; i++) {
        nsbox_err_clear(&e);
        assert_int_equal(nsbox_spec_parse_env(bad_kv[i], &e), -1);
        assert_int_equal(e.code, NSBOX_E_INVALID);
        assert_int_equal(nsbox_spec_set(s, "env", bad_kv[i], &e), -1);
        assert_non_null(strstr(e.msg, "spec: option 'env': env '"));
    }
    assert_int_equal(nsbox_spec_parse_env("_a1=", &e), 0);
    assert_fails_with(load(s, "{\"env\": {\"9\": \"x\"}}", &e), &e, NSBOX_E_INVALID,
                      "key 'env': '9' is not a valid name");
    assert_fails_with(load(s, "{\"env\": {\"\": \"x\"}}", &e), &e, NSBOX_E_INVALID,
                      "is not a valid name");
    assert_int_equal(s->n_env, 1);

    /* Count bound; replacing an existing name still works at the bound. */
    char kv[32];
    for (int i = 1; i < NSBOX_MAX_ENV; i++) {
        snprintf(kv, sizeof kv, "V%d=%d", i, i);
        assert_int_equal(nsbox_spec_set(s, "env", kv, &e), 0);
    }
    assert_int_equal(s->n_env, NSBOX_MAX_ENV);
    assert_fails_with(nsbox_spec_set(s, "env", "ONE_MORE=1", &e), &e, NSBOX_E_INVALID,
                      "too many variables");
    assert_int_equal(nsbox_spec_set(s, "env", "V1=again", &e), 0);
    assert_string_equal(nsbox_spec_getenv(s, "V1"), "again");

    /* Length bound of one K=V. */
    char *long_kv = malloc(NSBOX_ENV_MAX + 1);
    assert_non_null(long_kv);
    memset(long_kv, 'x', NSBOX_ENV_MAX);
    memcpy(long_kv, "L=", 2);
    long_kv[NSBOX_ENV_MAX] = '\0';
    assert_fails_with(nsbox_spec_parse_env(long_kv, &e), &e, NSBOX_E_INVALID, "longer than");
    long_kv[NSBOX_ENV_MAX - 1] = '\0';
    assert_int_equal(nsbox_spec_parse_env(long_kv, &e), 0);
    free(long_kv);
}

/* ---- CLI forms ------------------------------------------------------------------------------- */

static void test_set_options(void **state)
{
    struct nsbox_spec *s = *state;
    struct nsbox_err e;
    assert_int_equal(nsbox_spec_set(s, "instance_type", "small", &e), 0);
    assert_int_equal(nsbox_spec_set(s, "idle_timeout_seconds", "300", &e), 0);
    assert_int_equal(nsbox_spec_set(s, "ttl_seconds", "7200", &e), 0);
    assert_int_equal(nsbox_spec_set(s, "region", "nl-north-1", &e), 0);
    assert_int_equal(nsbox_spec_set(s, "image", "/srv/root", &e), 0);
    assert_int_equal(nsbox_spec_set(s, "setup_script", "echo hi\n", &e), 0);
    assert_int_equal(nsbox_spec_set(s, "setup_script_timeout_seconds", "30", &e), 0);
    assert_int_equal(nsbox_spec_set(s, "workspace", "/tmp/ws", &e), 0);
    assert_string_equal(s->instance_type, "small");
    assert_int_equal(s->idle_timeout_seconds, 300);
    assert_int_equal(s->ttl_seconds, 7200);
    assert_string_equal(s->image, "/srv/root");
    assert_string_equal(s->setup_script, "echo hi\n");
    assert_int_equal(s->setup_script_timeout_seconds, 30);
    assert_string_equal(s->workspace, "/tmp/ws");
    assert_int_equal(nsbox_spec_set(s, "setup_script", "", &e), 0);
    assert_null(s->setup_script);

    assert_int_equal(nsbox_spec_set(s, "network", "allow=h1.example, H2.example:8443", &e), 0);
    assert_int_equal(s->net, NSBOX_NET_ALLOW);
    assert_int_equal(s->n_hosts, 2);
    assert_string_equal(s->hosts[1].name, "h2.example");
    assert_int_equal(s->hosts[1].port, 8443);
    assert_int_equal(nsbox_spec_set(s, "network", "allow=a.example,a.example:443", &e), 0);
    assert_int_equal(s->n_hosts, 1); /* duplicates collapse */
    assert_int_equal(nsbox_spec_set(s, "network", "all", &e), 0);
    assert_int_equal(s->net, NSBOX_NET_ALL);
    assert_int_equal(s->n_hosts, 0);
    assert_fails_with(nsbox_spec_set(s, "network", "allow=", &e), &e, NSBOX_E_INVALID,
                      "spec: option 'network': empty item");
    assert_fails_with(nsbox_spec_set(s, "network", "allow=a,,b", &e), &e, NSBOX_E_INVALID,
                      "empty item");
    assert_fails_with(nsbox_spec_set(s, "network", "allow", &e), &e, NSBOX_E_INVALID,
                      "must be none, all or allow=HOST");
    /* docker's modes get the nearest of nsbox's, not only the syntax */
    assert_fails_with(nsbox_spec_set(s, "network", "host", &e), &e, NSBOX_E_INVALID,
                      "spec: option 'network': 'host' is docker's or podman's mode; here all");
    assert_fails_with(nsbox_spec_set(s, "network", "bridge", &e), &e, NSBOX_E_INVALID,
                      "masquerade: the internet, never the host itself), none (loopback only)");
    assert_fails_with(nsbox_spec_set(s, "network", "allow=https://a.com", &e), &e,
                      NSBOX_E_INVALID, "spec: option 'network': host 'https://a.com': has a scheme");
    assert_int_equal(s->net, NSBOX_NET_ALL);

    /* egress appends across flags and collapses duplicates. */
    assert_int_equal(nsbox_spec_set(s, "egress", "10.0.0.0/8,fd00::/8", &e), 0);
    assert_int_equal(nsbox_spec_set(s, "egress", "192.0.2.0/24, 10.0.0.0/8", &e), 0);
    assert_int_equal(s->n_egress, 3);
    assert_fails_with(nsbox_spec_set(s, "egress", "10.0.0.1/8", &e), &e, NSBOX_E_INVALID,
                      "spec: option 'egress': cidr '10.0.0.1/8': has host bits set");

    static const char *const bad_ints[] = {"", "abc", "-1", "+5", " 5", "5 ", "0x10", "1.0",
                                           "31536001", "99999999999999999999999"};
    for (size_t i = 0; i < sizeof bad_ints / sizeof bad_ints[0]; i++)
        assert_fails_with(nsbox_spec_set(s, "ttl_seconds", bad_ints[i], &e), &e, NSBOX_E_INVALID,
                          "spec: option 'ttl_seconds': must be an integer between 1 and 31536000");
    assert_int_equal(s->ttl_seconds, 7200);
    assert_fails_with(nsbox_spec_set(s, "ttl", "5", &e), &e, NSBOX_E_INVALID,
                      "spec: unknown option 'ttl' (did you mean 'ttl_seconds'?)");
    assert_fails_with(nsbox_spec_set(s, "regoin", "nl-north-1", &e), &e, NSBOX_E_INVALID,
                      "spec: unknown option 'regoin' (did you mean 'region'?)");
    assert_fails_with(nsbox_spec_set(s, "limits", "x", &e), &e, NSBOX_E_INVALID, "output only");
    assert_fails_with(nsbox_spec_set(s, "region", NULL, &e), &e, NSBOX_E_INVALID, "missing value");
    assert_fails_with(nsbox_spec_set(s, "workspace", "rel/dir", &e), &e, NSBOX_E_INVALID,
                      "absolute path");
}

/* ---- validation ------------------------------------------------------------------------------ */

static void test_region_rule(void **state)
{
    struct nsbox_spec *s = *state;
    struct nsbox_err e;
    assert_int_equal(nsbox_spec_set(s, "region", "us-east-1", &e), 0);

    nsbox_err_clear(&e);
    assert_int_equal(nsbox_spec_validate(s, &e), -1); /* network none (the default) */
    assert_int_equal(e.code, NSBOX_E_POLICY);
    assert_string_equal(e.msg, REGION_MSG("us-east-1"));

    assert_int_equal(nsbox_spec_set(s, "network", "allow=pypi.org", &e), 0);
    nsbox_err_clear(&e);
    assert_int_equal(nsbox_spec_validate(s, &e), -1);
    assert_int_equal(e.code, NSBOX_E_POLICY);
    assert_string_equal(e.msg, REGION_MSG("us-east-1"));
    assert_int_equal(s->limits.cpus, 0); /* nothing resolved on failure */

    assert_int_equal(nsbox_spec_set(s, "network", "all", &e), 0);
    assert_int_equal(nsbox_spec_set(s, "egress", "10.0.0.0/8", &e), 0); /* harmless with all */
    assert_int_equal(nsbox_spec_validate(s, &e), 0);

    /* Any well-formed region works with all(). */
    assert_int_equal(nsbox_spec_set(s, "region", "eu-west-3", &e), 0);
    assert_int_equal(nsbox_spec_validate(s, &e), 0);

    /* nl-north-1 enforces every policy. */
    assert_int_equal(load(s, "{\"region\": \"nl-north-1\", \"network\": \"none\"}", &e), 0);
    assert_int_equal(nsbox_spec_validate(s, &e), 0);
    assert_int_equal(load(s, "{\"network\": {\"allow\": [\"a.com\"]}}", &e), 0);
    assert_int_equal(nsbox_spec_validate(s, &e), 0);

    /* From JSON as the Python client sends it. */
    assert_int_equal(load(s, "{\"region\": \"us-east-1\"}", &e), 0);
    nsbox_err_clear(&e);
    assert_int_equal(nsbox_spec_validate(s, &e), -1);
    assert_string_equal(e.msg, REGION_MSG("us-east-1"));
}

static void test_validate_instance_type(void **state)
{
    struct nsbox_spec *s = *state;
    struct nsbox_err e;
    assert_int_equal(nsbox_spec_validate(s, &e), 0);
    assert_int_equal(s->limits.cpus, 2);
    assert_int_equal(s->limits.memory_bytes, 4ull << 30);
    assert_int_equal(s->limits.pids, 1024);
    assert_int_equal(s->limits.disk_bytes, 10ull << 30);

    assert_int_equal(nsbox_spec_set(s, "instance_type", "small", &e), 0);
    assert_int_equal(s->limits.cpus, 0); /* stale limits are dropped at once */
    assert_int_equal(nsbox_spec_validate(s, &e), 0);
    assert_int_equal(s->limits.cpus, 1);
    assert_int_equal(s->limits.memory_bytes, 1ull << 30);
    assert_int_equal(s->limits.pids, 256);
    assert_int_equal(s->limits.disk_bytes, 2ull << 30);

    assert_int_equal(nsbox_spec_set(s, "instance_type", "large", &e), 0);
    assert_int_equal(nsbox_spec_validate(s, &e), 0);
    assert_int_equal(s->limits.cpus, 4);
    assert_int_equal(s->limits.memory_bytes, 8ull << 30);
    assert_int_equal(s->limits.pids, 4096);
    assert_int_equal(s->limits.disk_bytes, 20ull << 30);

    assert_int_equal(nsbox_spec_set(s, "instance_type", "xlarge", &e), 0);
    nsbox_err_clear(&e);
    assert_int_equal(nsbox_spec_validate(s, &e), -1);
    assert_int_equal(e.code, NSBOX_E_INVALID);
    assert_string_equal(e.msg, "spec: key 'instance_type': unknown type 'xlarge' (valid: small, "
                               "medium, large)");
}

static void test_validate_hand_built(void **state)
{
    struct nsbox_spec *s = *state;
    struct nsbox_err e;
    s->net = NSBOX_NET_ALLOW;
    s->n_hosts = 0;
    assert_fails_with(nsbox_spec_validate(s, &e), &e, NSBOX_E_INVALID,
                      "allow needs at least one host");
    s->net = NSBOX_NET_NONE;
    s->ttl_seconds = 0;
    assert_fails_with(nsbox_spec_validate(s, &e), &e, NSBOX_E_INVALID, "key 'ttl_seconds'");
    s->ttl_seconds = 10;
    memset(s->region, 'a', sizeof s->region);
    assert_fails_with(nsbox_spec_validate(s, &e), &e, NSBOX_E_INVALID, "unterminated");
    strcpy(s->region, "Bad Region");
    assert_fails_with(nsbox_spec_validate(s, &e), &e, NSBOX_E_INVALID, "key 'region'");
    strcpy(s->region, "nl-north-1");
    s->net = (enum nsbox_net_mode)7;
    assert_fails_with(nsbox_spec_validate(s, &e), &e, NSBOX_E_INVALID, "unknown mode");
    s->net = NSBOX_NET_NONE;
    assert_int_equal(nsbox_spec_validate(s, &e), 0);
}

/* ---- sizes and the config file --------------------------------------------------------------- */

static void test_parse_size(void **state)
{
    static const struct {
        const char *in;
        uint64_t out;
    } good[] = {
        {"0", 0},
        {"1048576", 1048576},
        {"512MiB", 512ull << 20},
        {"4GiB", 4ull << 30},
        {"1G", 1ull << 30},
        {"1g", 1ull << 30},
        {"2GB", 2ull << 30},
        {"3k", 3ull << 10},
        {"1TiB", 1ull << 40},
        {"100B", 100},
        {"16777215T", 16777215ull << 40},
    };
    static const char *const bad[] = {"", "GiB", "1.5GiB", "-1G", " 1G", "1 G", "1GiBs", "1X",
                                      "1PiB", "16777216T", "99999999999999999999"};
    (void)state;
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        uint64_t v = 7;
        struct nsbox_err e = {0};
        if (nsbox_spec_parse_size(good[i].in, &v, &e) != 0)
            fail_msg("'%s' rejected: %s", good[i].in, e.msg);
        assert_int_equal(v, good[i].out);
    }
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        uint64_t v;
        struct nsbox_err e = {0};
        if (nsbox_spec_parse_size(bad[i], &v, &e) != -1 || e.code != NSBOX_E_INVALID)
            fail_msg("'%s' accepted", bad[i]);
    }
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_defaults),
        T(test_json_every_key),
        T(test_json_unknown_key),
        T(test_json_wrong_types),
        T(test_json_ranges),
        T(test_json_strings),
        T(test_json_document),
        T(test_failed_load_leaves_spec_unchanged),
        T(test_host_good),
        T(test_host_bad),
        T(test_host_format),
        T(test_cidr),
        T(test_env),
        T(test_set_options),
        T(test_region_rule),
        T(test_validate_instance_type),
        T(test_validate_hand_built),
        T(test_parse_size),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
