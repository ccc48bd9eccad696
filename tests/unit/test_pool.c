/* Warm pool decisions (policy/pool.c): the config section, which specs may share a pooled
 * sandbox (the key), the spec a pooled sandbox is made with, entry names. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "cfgtext.h"
#include "pool.h"

#include <string.h>

static int parse(const char *json, struct nsbox_pool_config *c, struct nsbox_err *e)
{
    nsbox_pool_config_init(c);
    memset(e, 0, sizeof *e);
    cleanup_cjson cJSON *root = cfgtext(json);
    return nsbox_pool_config_from_json(root, c, e);
}

static void test_config(void **state)
{
    (void)state;
    struct nsbox_pool_config c;
    struct nsbox_err e;
    /* "auto" unless the config says otherwise: two sandboxes, once runs repeat, for 60 s */
    const char *autos[] = {"{}", "{\"instance_types\": {}}", "{\"pool\": {}}",
                           "{\"pool\": {\"size\": \"auto\"}}"};
    for (size_t i = 0; i < sizeof autos / sizeof autos[0]; i++) {
        assert_int_equal(parse(autos[i], &c, &e), 0);
        assert_int_equal(c.size, NSBOX_POOL_AUTO_SIZE);
        assert_true(c.on_repeat);
        assert_int_equal(c.ttl_seconds, NSBOX_POOL_AUTO_TTL);
    }
    assert_int_equal(NSBOX_POOL_AUTO_SIZE, 2);
    assert_int_equal(NSBOX_POOL_AUTO_TTL, 60);
    assert_int_equal(parse("{\"pool\": {\"ttl_seconds\": 5, \"size\": \"auto\"}}", &c, &e), 0);
    assert_true(c.on_repeat);
    assert_int_equal(c.ttl_seconds, 5);
    /* 0: off */
    assert_int_equal(parse("{\"pool\": {\"size\": 0}}", &c, &e), 0);
    assert_int_equal(c.size, 0);
    assert_false(c.on_repeat);
    /* a number: that many from the first cold run on, 300 s unless given */
    assert_int_equal(parse("{\"pool\": {\"size\": 2, \"ttl_seconds\": 60}}", &c, &e), 0);
    assert_int_equal(c.size, 2);
    assert_false(c.on_repeat);
    assert_int_equal(c.ttl_seconds, 60);
    assert_int_equal(parse("{\"pool\": {\"size\": 16}}", &c, &e), 0);
    assert_int_equal(c.size, 16);
    assert_false(c.on_repeat);
    assert_int_equal(c.ttl_seconds, NSBOX_POOL_DEFAULT_TTL);
    /* the order of the keys does not matter */
    assert_int_equal(parse("{\"pool\": {\"ttl_seconds\": 7, \"size\": 3}}", &c, &e), 0);
    assert_int_equal(c.size, 3);
    assert_int_equal(c.ttl_seconds, 7);

    /* every mistake names its key and leaves the defaults */
    const struct {
        const char *json, *needle;
    } bad[] = {
        {"{\"pool\": 3}", "key 'pool': must be an object"},
        {"{\"pool\": {\"size\": 17}}", "'pool.size'"},
        {"{\"pool\": {\"size\": -1}}", "'pool.size'"},
        {"{\"pool\": {\"size\": 1.5}}", "'pool.size'"},
        {"{\"pool\": {\"size\": \"2\"}}", "'pool.size': must be \"auto\" or an integer"},
        {"{\"pool\": {\"size\": \"AUTO\"}}", "'pool.size'"},
        {"{\"pool\": {\"size\": null}}", "'pool.size'"},
        {"{\"pool\": {\"size\": true}}", "'pool.size'"},
        {"{\"pool\": {\"ttl_seconds\": 0}}", "'pool.ttl_seconds'"},
        {"{\"pool\": {\"ttl_seconds\": 86401}}", "'pool.ttl_seconds'"},
        {"{\"pool\": {\"sise\": 1}}", "'pool.sise': unknown (known: size, ttl_seconds)"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(parse(bad[i].json, &c, &e), -1);
        assert_int_equal(e.code, NSBOX_E_INVALID);
        if (!strstr(e.msg, bad[i].needle))
            fail_msg("%s: got '%s', wanted '%s'", bad[i].json, e.msg, bad[i].needle);
        assert_int_equal(c.size, NSBOX_POOL_AUTO_SIZE); /* the defaults, untouched */
        assert_true(c.on_repeat);
    }
}

static void spec(struct nsbox_spec *s)
{
    struct nsbox_err e;
    nsbox_spec_init(s);
    assert_int_equal(nsbox_spec_validate(s, &e), 0);
}

static void key_of(const struct nsbox_spec *s, const char *extra, char out[NSBOX_POOL_KEY_LEN + 1])
{
    assert_int_equal(nsbox_pool_key(s, extra, extra ? strlen(extra) : 0, out), 0);
    assert_int_equal(strlen(out), NSBOX_POOL_KEY_LEN);
}

static void test_key(void **state)
{
    (void)state;
    struct nsbox_spec a, b;
    struct nsbox_err e;
    char ka[NSBOX_POOL_KEY_LEN + 1], kb[NSBOX_POOL_KEY_LEN + 1];
    spec(&a);
    key_of(&a, "bin", ka);

    /* what only concerns the one command does not matter: env, ttl (a timeout for run), idle */
    spec(&b);
    assert_int_equal(nsbox_spec_set(&b, "env", "K=V", &e), 0);
    assert_int_equal(nsbox_spec_set(&b, "ttl_seconds", "77", &e), 0);
    assert_int_equal(nsbox_spec_set(&b, "idle_timeout_seconds", "5", &e), 0);
    assert_int_equal(nsbox_spec_set(&b, "pull", "never", &e), 0); /* how, not what */
    key_of(&b, "bin", kb);
    assert_string_equal(ka, kb);
    nsbox_spec_free(&b);

    /* what shapes the sandbox does */
    const char *differ[][2] = {
        {"instance_type", "small"}, {"network", "all"},   {"network", "allow=example.com"},
        {"image", "/srv/rootfs"},  {"region", "us"},      {"egress", "10.0.0.0/8"},
    };
    for (size_t i = 0; i < sizeof differ / sizeof differ[0]; i++) {
        spec(&b);
        if (nsbox_spec_set(&b, differ[i][0], differ[i][1], &e) < 0)
            fail_msg("%s=%s: %s", differ[i][0], differ[i][1], e.msg);
        nsbox_spec_validate(&b, &e);
        key_of(&b, "bin", kb);
        if (!strcmp(ka, kb))
            fail_msg("%s=%s gives the default's key", differ[i][0], differ[i][1]);
        nsbox_spec_free(&b);
    }
    /* another binary or config text: another key */
    key_of(&a, "bin2", kb);
    assert_string_not_equal(ka, kb);
    key_of(&a, NULL, kb);
    assert_string_not_equal(ka, kb);
    /* and the same inputs always give the same key (other processes compute it too) */
    key_of(&a, "bin", kb);
    assert_string_equal(ka, kb);
    nsbox_spec_free(&a);
}

static void test_member_spec(void **state)
{
    (void)state;
    struct nsbox_spec s, m;
    struct nsbox_err e;
    spec(&s);
    assert_int_equal(nsbox_spec_set(&s, "env", "SECRET=1", &e), 0);
    assert_int_equal(nsbox_spec_set(&s, "idle_timeout_seconds", "5", &e), 0);
    assert_true(nsbox_pool_spec_poolable(&s));
    assert_int_equal(nsbox_pool_member_spec(&s, 42, &m, &e), 0);
    /* a pooled sandbox carries no run's environment, never sleeps, lives the pool's ttl */
    assert_int_equal(m.n_env, 0);
    assert_null(m.env[0]);
    assert_int_equal(m.idle_timeout_seconds, 0);
    assert_int_equal(m.ttl_seconds, 42);
    assert_string_equal(m.instance_type, s.instance_type);
    nsbox_spec_free(&m); /* owns nothing of s */
    nsbox_spec_free(&s);

    /* the caller's own directory is mounted for one run: never pooled */
    spec(&s);
    assert_int_equal(nsbox_spec_set(&s, "workspace", "/srv/mine", &e), 0);
    assert_false(nsbox_pool_spec_poolable(&s));
    assert_int_equal(nsbox_pool_member_spec(&s, 42, &m, &e), -1);
    assert_int_equal(e.code, NSBOX_E_INVALID);
    nsbox_spec_free(&s);

    /* an always-pull must reach the registry, which a pooled sandbox would skip */
    spec(&s);
    assert_int_equal(nsbox_spec_set(&s, "pull", "missing", &e), 0);
    assert_true(nsbox_pool_spec_poolable(&s));
    assert_int_equal(nsbox_spec_set(&s, "pull", "always", &e), 0);
    assert_false(nsbox_pool_spec_poolable(&s));
    nsbox_spec_free(&s);
}

static void test_entry_names(void **state)
{
    (void)state;
    char key[NSBOX_POOL_KEY_LEN + 1], id[NSBOX_POOL_ID_LEN + 1];
    assert_true(nsbox_pool_entry_parse("0123456789abcdef-0123456789ab", key, id));
    assert_string_equal(key, "0123456789abcdef");
    assert_string_equal(id, "0123456789ab");
    const char *bad[] = {
        "0123456789abcdef.lock",          /* the filler's lock */
        "0123456789abcdef-0123456789a",   /* short id */
        "0123456789abcdef-0123456789abc", /* long id */
        "0123456789ABCDEF-0123456789ab",  /* not our hex */
        "0123456789abcdef_0123456789ab",
        "../../etc/passwd-0123456789ab",
        ".claim-0123456789abcdef-0123456789ab", /* taken by a run: not listed */
        "",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (nsbox_pool_entry_parse(bad[i], key, id))
            fail_msg("accepted '%s'", bad[i]);

    /* a claimed entry (for gc: removed with its sandbox) */
    assert_true(nsbox_pool_claim_parse(".claim-0123456789abcdef-0123456789ab", key, id));
    assert_string_equal(id, "0123456789ab");
    assert_false(nsbox_pool_claim_parse("0123456789abcdef-0123456789ab", key, id));
    assert_false(nsbox_pool_claim_parse(".claim-0123456789abcdef.lock", key, id));
    assert_false(nsbox_pool_claim_parse(".claim-", key, id));

    /* a key's own files: lock, the auto mode's last-run mark, a failed fill */
    assert_true(nsbox_pool_key_file("0123456789abcdef.seen", NSBOX_POOL_SEEN, key));
    assert_string_equal(key, "0123456789abcdef");
    assert_true(nsbox_pool_key_file("fedcba9876543210.failed", NSBOX_POOL_FAILED, key));
    assert_string_equal(key, "fedcba9876543210");
    assert_true(nsbox_pool_key_file("0123456789abcdef.lock", NSBOX_POOL_LOCK, key));
    const struct {
        const char *name, *suffix;
    } not_ours[] = {
        {"0123456789abcdef.seen", NSBOX_POOL_FAILED},
        {"0123456789abcdef.seen.tmp", NSBOX_POOL_SEEN},
        {"0123456789abcde.seen", NSBOX_POOL_SEEN},
        {"0123456789ABCDEF.seen", NSBOX_POOL_SEEN},
        {"0123456789abcdef-0123456789ab", NSBOX_POOL_SEEN},
        {"../0123456789abc.seen", NSBOX_POOL_SEEN},
        {".seen", NSBOX_POOL_SEEN},
        {"", NSBOX_POOL_LOCK},
    };
    for (size_t i = 0; i < sizeof not_ours / sizeof not_ours[0]; i++)
        if (nsbox_pool_key_file(not_ours[i].name, not_ours[i].suffix, key))
            fail_msg("accepted '%s' as a '%s' file", not_ours[i].name, not_ours[i].suffix);
}

static void test_format_age(void **state)
{
    (void)state;
    const struct {
        int64_t s;
        const char *want;
    } cases[] = {
        {-5, "just now"},       {0, "just now"},          {1, "1 s ago"},
        {119, "119 s ago"},     {120, "2 min ago"},       {7199, "119 min ago"},
        {7200, "2 h ago"},      {2 * 86400 - 1, "47 h ago"}, {2 * 86400, "2 days ago"},
        {INT64_MAX, "106751991167300 days ago"},
    };
    char out[48];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        nsbox_pool_format_age(out, sizeof out, cases[i].s);
        assert_string_equal(out, cases[i].want);
    }
    nsbox_pool_format_age(out, 4, 3600 * 5); /* truncated, still a string */
    assert_string_equal(out, "5 h");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config),
        cmocka_unit_test(test_key),
        cmocka_unit_test(test_member_spec),
        cmocka_unit_test(test_entry_names),
        cmocka_unit_test(test_format_age),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
