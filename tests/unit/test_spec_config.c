/* Unit tests for the spec module (policy/spec.c, policy/spec_api.c), as test_spec.c: the
 * configuration file (read by os/config.c), rendering back to JSON, pulls and the public API. */

#include "spec_fixture.h"

#include "config.h"

static char *write_tmp(const char *text)
{
    char *path = strdup("/tmp/nsbox-test-spec-XXXXXX");
    assert_non_null(path);
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    size_t n = strlen(text);
    assert_int_equal(write(fd, text, n), (ssize_t)n);
    close(fd);
    return path;
}

static void test_config_override(void **state)
{
    struct nsbox_spec *s = *state;
    struct nsbox_err e;
    char *path = write_tmp("{\"pool\": {\"size\": 0},"
                           " \"instance_types\": {\"medium\": {\"memory\": \"8GiB\"},"
                           " \"xl\": {\"cpus\": 16, \"memory\": 34359738368, \"pids\": 8192,"
                           " \"disk\": \"100G\"}}}");
    assert_int_equal(nsbox_config_load_types(path, &e), 0);
    const struct nsbox_instance_type *t = nsbox_spec_types_find("medium");
    assert_non_null(t);
    assert_int_equal(t->limits.memory_bytes, 8ull << 30);
    assert_int_equal(t->limits.cpus, 2); /* fields not given keep the default */
    t = nsbox_spec_types_find("xl");
    assert_non_null(t);
    assert_int_equal(t->limits.cpus, 16);
    assert_int_equal(t->limits.memory_bytes, 32ull << 30);
    assert_int_equal(t->limits.pids, 8192);
    assert_int_equal(t->limits.disk_bytes, 100ull << 30);
    size_t n;
    nsbox_spec_types(&n);
    assert_int_equal(n, 4);

    assert_int_equal(nsbox_spec_set(s, "instance_type", "xl", &e), 0);
    assert_int_equal(nsbox_spec_validate(s, &e), 0);
    assert_int_equal(s->limits.cpus, 16);
    unlink(path);
    free(path);

    /* Malformed: the error names the key and the table stays as it was. */
    static const struct {
        const char *json, *msg;
    } bad[] = {
        {"{\"instance_types\": {\"medium\": {\"memory\": \"8XB\"}}}",
         "instance_types.medium.memory: size '8XB': unknown unit"},
        {"{\"instance_types\": {\"medium\": {\"cpus\": 0}}}",
         "instance_types.medium.cpus: must be an integer between 1 and 1024"},
        /* the sandbox's init counts: with 1, every run failed without naming the limit */
        {"{\"instance_types\": {\"medium\": {\"pids\": 1}}}",
         "instance_types.medium.pids: must be an integer between 2 and 4194304 (the "
         "sandbox's init counts"},
        {"{\"instance_types\": {\"medium\": {\"cpu\": 2}}}",
         "instance_types.medium.cpu: unknown key"},
        {"{\"instance_types\": {\"new\": {\"cpus\": 2}}}",
         "instance_types.new: a new type needs cpus, memory, pids and disk"},
        {"{\"instance_types\": {\"Big\": {}}}", "'Big' is not a valid name"},
        {"{\"instance_types\": []}", "instance_types: must be an object"},
        {"{\"instance_types\": {\"small\": {\"memory\": 1024}}}",
         "instance_types.small.memory: must be between 1MiB and 1PiB"},
        {"{\"instance_types\": ", "invalid JSON"},
        /* a misspelled section silently left its settings at their defaults */
        {"{\"pol\": {\"size\": 0}}", "unknown key 'pol' (the sections are host, instance_types"},
        {"[]", "must be a JSON object"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        path = write_tmp(bad[i].json);
        nsbox_err_clear(&e);
        assert_int_equal(nsbox_config_load_types(path, &e), -1);
        assert_int_equal(e.code, NSBOX_E_INVALID);
        if (!strstr(e.msg, bad[i].msg) || strncmp(e.msg, "config /tmp/", 12) != 0)
            fail_msg("message '%s', wanted 'config <path>: ...%s'", e.msg, bad[i].msg);
        assert_non_null(nsbox_spec_types_find("xl"));
        unlink(path);
        free(path);
    }

    /* A missing file means the defaults. */
    assert_int_equal(nsbox_config_load_types("/nonexistent/nsbox.json", &e), 0);
    assert_null(nsbox_spec_types_find("xl"));
    assert_int_equal(nsbox_spec_types_find("medium")->limits.memory_bytes, 4ull << 30);

    /* ... except a missing $NSBOX_CONFIG, which is a typo worth reporting. */
    setenv("NSBOX_CONFIG", "/nonexistent/nsbox.json", 1);
    nsbox_err_clear(&e);
    assert_int_equal(nsbox_config_load_types(NULL, &e), -1);
    assert_int_equal(e.code, NSBOX_E_NOTFOUND);
    path = write_tmp("{\"instance_types\": {\"tiny\": {\"cpus\": 1, \"memory\": \"256MiB\","
                     " \"pids\": 64, \"disk\": \"1GiB\"}}}");
    setenv("NSBOX_CONFIG", path, 1);
    assert_int_equal(nsbox_config_load_types(NULL, &e), 0);
    assert_non_null(nsbox_spec_types_find("tiny"));
    unsetenv("NSBOX_CONFIG");
    unlink(path);
    free(path);

    /* Straight from the file's object, too. */
    cJSON *empty = cJSON_Parse("{}");
    assert_int_equal(nsbox_spec_types_parse(empty, &e), 0);
    cJSON_Delete(empty);
    assert_null(nsbox_spec_types_find("tiny"));
}

/* ---- rendering ------------------------------------------------------------------------------- */

static void test_to_json_round_trip(void **state)
{
    struct nsbox_spec *s = *state;
    struct nsbox_err e;
    assert_int_equal(load(s, "{\"instance_type\": \"small\", \"idle_timeout_seconds\": 10,"
                             " \"ttl_seconds\": 100, \"network\": {\"allow\": [\"a.com\","
                             " \"b.com:8443\", \"[2001:db8::1]:444\", \"::1\", \"1.2.3.4:80\"]},"
                             " \"egress\": [\"10.0.0.0/8\", \"fd00::/8\", \"192.0.2.1\"],"
                             " \"image\": \"debian\", \"setup_script\": \"echo \\\"hi\\\"\\n\","
                             " \"setup_script_timeout_seconds\": 5, \"workspace\": \"/w\","
                             " \"env\": {\"A\": \"1\", \"B\": \"\\u00e9\\t\"}}", &e), 0);
    assert_int_equal(nsbox_spec_validate(s, &e), 0);

    char *json = nsbox_spec_to_json(s);
    assert_non_null(json);
    cJSON *doc = cJSON_Parse(json);
    assert_non_null(doc);
    cJSON *lim = cJSON_GetObjectItemCaseSensitive(doc, "limits");
    assert_non_null(lim);
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(lim, "cpus")->valuedouble, 1);
    assert_true(cJSON_GetObjectItemCaseSensitive(lim, "memory_bytes")->valuedouble ==
                (double)(1ull << 30));
    assert_true(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(doc, "setup_script")) == 0);
    cJSON_Delete(doc);

    struct nsbox_spec *t = nsbox_spec_new();
    assert_non_null(t);
    if (nsbox_spec_from_json(t, json, strlen(json), &e) != 0)
        fail_msg("own output rejected: %s\n%s", e.msg, json);
    assert_int_equal(nsbox_spec_validate(t, &e), 0);
    assert_true(nsbox_spec_equal(s, t));
    free(json);

    /* The defaults round-trip too (null setup_script, "none" network, empty lists). */
    nsbox_spec_destroy(t);
    t = nsbox_spec_new();
    json = nsbox_spec_to_json(t);
    assert_non_null(json);
    assert_non_null(strstr(json, "\"setup_script\":\tnull"));
    assert_int_equal(load(s, json, &e), 0);
    assert_true(nsbox_spec_equal(s, t) == false); /* s has resolved limits, t has none yet */
    assert_int_equal(nsbox_spec_validate(t, &e), 0);
    assert_true(nsbox_spec_equal(s, t));
    free(json);
    nsbox_spec_destroy(t);

    /* "limits" is checked against the instance type, never taken as a setting. */
    assert_fails_with(load(s, "{\"instance_type\": \"small\", \"limits\": {\"cpus\": 1,"
                              " \"memory_bytes\": 1073741824, \"pids\": 256,"
                              " \"disk_bytes\": 4294967296}}", &e),
                      &e, NSBOX_E_INVALID, "spec: key 'limits': do not match instance_type");
    assert_fails_with(load(s, "{\"limits\": {\"cpu\": 1}}", &e), &e, NSBOX_E_INVALID,
                      "spec: key 'limits': unknown key 'cpu'");
}

/* pull: three words, absent from the output until said (NSBOX_PULL decides then), kept by a
 * round trip, part of equality. */
static void test_pull(void **state)
{
    struct nsbox_spec *s = *state;
    struct nsbox_err e;
    assert_int_equal(s->pull, NSBOX_PULL_DEFAULT);
    char *json = nsbox_spec_to_json(s);
    assert_null(strstr(json, "\"pull\""));
    free(json);
    assert_int_equal(load(s, "{\"image\": \"python:3.12\", \"pull\": \"never\"}", &e), 0);
    assert_int_equal(s->pull, NSBOX_PULL_NEVER);
    assert_int_equal(nsbox_spec_set(s, "pull", "always", &e), 0);
    assert_int_equal(s->pull, NSBOX_PULL_ALWAYS);
    assert_int_equal(nsbox_spec_set(s, "pull", "missing", &e), 0);
    assert_int_equal(s->pull, NSBOX_PULL_MISSING);
    assert_fails_with(nsbox_spec_set(s, "pull", "sometimes", &e), &e, NSBOX_E_INVALID,
                      "spec: option 'pull': 'sometimes' is not a pull policy");
    assert_fails_with(load(s, "{\"pull\": true}", &e), &e, NSBOX_E_INVALID,
                      "spec: key 'pull': must be a string");
    assert_int_equal(nsbox_spec_set(s, "pull", "always", &e), 0);
    assert_int_equal(nsbox_spec_validate(s, &e), 0);
    json = nsbox_spec_to_json(s);
    assert_non_null(strstr(json, "\"pull\":\t\"always\""));
    struct nsbox_spec *t = nsbox_spec_new();
    assert_int_equal(nsbox_spec_from_json(t, json, strlen(json), &e), 0);
    assert_int_equal(nsbox_spec_validate(t, &e), 0);
    assert_true(nsbox_spec_equal(s, t));
    t->pull = NSBOX_PULL_NEVER;
    assert_false(nsbox_spec_equal(s, t));
    t->pull = (enum nsbox_pull)7; /* filled by hand */
    assert_fails_with(nsbox_spec_validate(t, &e), &e, NSBOX_E_INVALID, "spec: key 'pull'");
    free(json);
    nsbox_spec_destroy(t);
}

/* supports_background_processes: the hosted option, true by default and always rendered; a
 * JSON boolean (not 0/1 or a string), "true"/"false" as text; kept by a round trip, part of
 * equality. */
static void test_background_processes(void **state)
{
    struct nsbox_spec *s = *state;
    struct nsbox_err e;
    assert_true(s->supports_background_processes);
    char *json = nsbox_spec_to_json(s);
    assert_non_null(strstr(json, "\"supports_background_processes\":\ttrue"));
    free(json);
    assert_int_equal(load(s, "{\"supports_background_processes\": false}", &e), 0);
    assert_false(s->supports_background_processes);
    assert_int_equal(load(s, "{\"supports_background_processes\": true}", &e), 0);
    assert_true(s->supports_background_processes);
    assert_fails_with(load(s, "{\"supports_background_processes\": 0}", &e), &e,
                      NSBOX_E_INVALID,
                      "spec: key 'supports_background_processes': must be true or false");
    assert_fails_with(load(s, "{\"supports_background_processes\": \"false\"}", &e), &e,
                      NSBOX_E_INVALID,
                      "spec: key 'supports_background_processes': must be true or false");
    assert_fails_with(load(s, "{\"supports_background_processes\": null}", &e), &e,
                      NSBOX_E_INVALID,
                      "spec: key 'supports_background_processes': must be true or false");
    assert_true(s->supports_background_processes); /* failed loads changed nothing */
    assert_fails_with(nsbox_spec_set(s, "supports_background_processes", "no", &e), &e,
                      NSBOX_E_INVALID,
                      "spec: option 'supports_background_processes': 'no' is not true or false");
    assert_int_equal(nsbox_spec_set(s, "supports_background_processes", "false", &e), 0);
    assert_false(s->supports_background_processes);
    assert_int_equal(nsbox_spec_validate(s, &e), 0);
    json = nsbox_spec_to_json(s);
    assert_non_null(strstr(json, "\"supports_background_processes\":\tfalse"));
    struct nsbox_spec *t = nsbox_spec_new();
    assert_int_equal(nsbox_spec_from_json(t, json, strlen(json), &e), 0);
    assert_int_equal(nsbox_spec_validate(t, &e), 0);
    assert_true(nsbox_spec_equal(s, t));
    t->supports_background_processes = true;
    assert_false(nsbox_spec_equal(s, t));
    free(json);
    nsbox_spec_destroy(t);
}

static void test_public_api(void **state)
{
    struct nsbox_err e;
    (void)state;
    struct nsbox_spec *s = nsbox_spec_new();
    assert_non_null(s);
    assert_string_equal(s->instance_type, "medium");
    static const char json[] = "{\"region\": \"us-east-1\", \"network\": \"none\"}";
    assert_int_equal(nsbox_spec_load_json(s, json, sizeof json - 1, &e), 0);
    nsbox_err_clear(&e);
    assert_int_equal(nsbox_spec_check(s, &e), -1);
    assert_int_equal(e.code, NSBOX_E_POLICY);
    assert_string_equal(e.msg, REGION_MSG("us-east-1"));
    assert_int_equal(nsbox_spec_set_option(s, "network", "all", &e), 0);
    assert_int_equal(nsbox_spec_check(s, &e), 0);
    assert_fails_with(nsbox_spec_set_option(s, "nope", "1", &e), &e, NSBOX_E_INVALID,
                      "unknown option 'nope'");
    nsbox_spec_destroy(s);
    nsbox_spec_destroy(NULL);
    assert_fails_with(nsbox_spec_check(NULL, &e), &e, NSBOX_E_INVALID, "NULL spec");
}

/* ---- header bindings ------------------------------------------------------------------------ */

#define SECRET "ghp_Secret0123456789"

static void test_bindings(void **state)
{
    struct nsbox_spec *s = *state;
    struct nsbox_err e;
    assert_int_equal(load(s,
                          "{\"network\": {\"allow\": [\"api.github.com\", \"x.test:8443\"]},"
                          " \"header_bindings\": [{\"host\": \"API.GitHub.com\", \"header\":"
                          " \"Authorization\", \"value\": \"Bearer " SECRET "\"},"
                          " {\"host\": \"x.test:8443\", \"header\": \"X-Key\", \"value\":"
                          " \"" SECRET "\"}]}",
                          &e),
                     0);
    assert_int_equal(s->n_bindings, 2);
    assert_string_equal(s->bindings[0].host.name, "api.github.com");
    assert_int_equal(s->bindings[1].host.port, 8443);
    assert_string_equal(s->bindings[0].value, "Bearer " SECRET);
    assert_int_equal(nsbox_spec_validate(s, &e), 0);
    /* the rendering shows hosts and headers, never the value */
    char *json = nsbox_spec_to_json(s);
    assert_non_null(json);
    assert_null(strstr(json, SECRET));
    assert_non_null(strstr(json, "\"Authorization\""));
    assert_non_null(strstr(json, "\"x.test:8443\""));
    /* and it does not load back as a binding without its value */
    struct nsbox_spec again;
    nsbox_spec_init(&again);
    assert_fails_with(load(&again, json, &e), &e, NSBOX_E_INVALID, "no value");
    nsbox_spec_free(&again);
    free(json);
    /* copies are deep and equal */
    struct nsbox_spec c;
    assert_int_equal(nsbox_spec_copy(&c, s, &e), 0);
    assert_true(c.bindings[0].value != s->bindings[0].value);
    assert_true(nsbox_spec_equal(&c, s));
    nsbox_spec_free(&c);
    /* the text form appends */
    assert_int_equal(nsbox_spec_set(s, "header_bindings", "x.test:8443:X-Other=" SECRET, &e), 0);
    assert_int_equal(s->n_bindings, 3);
    assert_string_equal(s->bindings[2].header, "X-Other");
}

static void test_bindings_refused(void **state)
{
    struct nsbox_spec *s = *state;
    struct nsbox_err e;
    static const struct {
        const char *binding, *why;
    } bad[] = {
        {"{\"host\": \"a.test\", \"header\": \"Host\", \"value\": \"" SECRET "\"}",
         "cannot be bound"},
        {"{\"host\": \"a.test\", \"header\": \"Content-Length\", \"value\": \"" SECRET "\"}",
         "cannot be bound"},
        {"{\"host\": \"a.test\", \"header\": \"X Y\", \"value\": \"" SECRET "\"}", "token"},
        {"{\"host\": \"a.test\", \"header\": \"X-K\", \"value\": \"abc\\r\\nX-Evil: 1xx\"}",
         "not visible ASCII"},
        {"{\"host\": \"a.test\", \"header\": \"X-K\", \"value\": \"short\"}", "shorter than 8"},
        {"{\"host\": \"192.0.2.1\", \"header\": \"X-K\", \"value\": \"" SECRET "\"}", "IP address"},
        {"{\"host\": \"https://a.test\", \"header\": \"X-K\", \"value\": \"" SECRET "\"}",
         "scheme"},
        {"{\"host\": \"a.test\", \"header\": \"X-K\"}", "no value"},
        {"{\"host\": \"a.test\", \"value\": \"" SECRET "\"}", "needs"},
        {"{\"host\": \"a.test\", \"header\": \"X-K\", \"value\": 5}", "must be a string"},
        {"{\"host\": \"a.test\", \"header\": \"X-K\", \"value\": \"" SECRET "\", \"x\": \"\"}",
         "unknown key"},
    };
    char json[512];
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        snprintf(json, sizeof json, "{\"network\": \"all\", \"header_bindings\": [%s]}",
                 bad[i].binding);
        int r = load(s, json, &e);
        if (r != -1 || !strstr(e.msg, bad[i].why) || strstr(e.msg, SECRET))
            fail_msg("%s: %s", bad[i].binding, r ? e.msg : "accepted");
    }
    assert_int_equal(s->n_bindings, 0);
    const char *two = "{\"host\": \"a.test\", \"header\": \"X-K\", \"value\": \"" SECRET "\"}";
    snprintf(json, sizeof json, "{\"network\": \"all\", \"header_bindings\": [%s, %s]}", two, two);
    assert_fails_with(load(s, json, &e), &e, NSBOX_E_INVALID, "bound twice");
    /* validation: a bound host the network cannot reach */
    snprintf(json, sizeof json,
             "{\"network\": {\"allow\": [\"b.test\"]}, \"header_bindings\": [%s]}", two);
    assert_int_equal(load(s, json, &e), 0);
    assert_fails_with(nsbox_spec_validate(s, &e), &e, NSBOX_E_INVALID,
                      "not in the network's allow");
    /* the name is allowed, on another port than the binding's (443 when it names none) */
    snprintf(json, sizeof json,
             "{\"network\": {\"allow\": [\"a.test:8443\"]}, \"header_bindings\": [%s]}", two);
    assert_int_equal(load(s, json, &e), 0);
    assert_fails_with(nsbox_spec_validate(s, &e), &e, NSBOX_E_INVALID,
                      "host 'a.test' is bound on port 443, but the network's allow list has "
                      "'a.test:8443'");
    assert_non_null(strstr(e.msg, "fix: bind 'a.test:8443'"));
    assert_int_equal(load(s, "{\"network\": \"none\"}", &e), 0);
    assert_fails_with(nsbox_spec_validate(s, &e), &e, NSBOX_E_INVALID, "the network is none");
    assert_int_equal(load(s, "{\"network\": \"all\"}", &e), 0);
    assert_int_equal(nsbox_spec_validate(s, &e), 0);
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_config_override),      T(test_to_json_round_trip), T(test_pull),
        T(test_background_processes), T(test_public_api),         T(test_bindings),
        T(test_bindings_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
