/* config.json of an OCI bundle (policy/ocispec.c): what is read, the errors naming the key,
 * the bounds, and nsbox's floor (privileged containers, joined namespaces). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "ocispec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const full =
    "{\"ociVersion\":\"1.0.2\",\"process\":{\"terminal\":true,\"user\":{\"uid\":0,\"gid\":7},"
    "\"args\":[\"sh\",\"-c\",\"echo hi\"],\"env\":[\"PATH=/bin\",\"A=b=c\"],\"cwd\":\"/tmp\","
    "\"noNewPrivileges\":true,\"capabilities\":{\"bounding\":[\"CAP_CHOWN\"]}},"
    "\"root\":{\"path\":\"rootfs\",\"readonly\":true},\"hostname\":\"box\","
    "\"mounts\":[{\"destination\":\"/proc\",\"type\":\"proc\",\"source\":\"proc\"},"
    "{\"destination\":\"/dev\",\"type\":\"tmpfs\",\"source\":\"tmpfs\",\"options\":[\"nosuid\","
    "\"mode=755\"]}],\"linux\":{\"namespaces\":[{\"type\":\"pid\"},{\"type\":\"mount\"},"
    "{\"type\":\"network\"}],\"resources\":{\"memory\":{\"limit\":268435456},\"cpu\":"
    "{\"quota\":50000,\"period\":100000,\"shares\":512},\"pids\":{\"limit\":100},\"devices\":"
    "[{\"allow\":false,\"access\":\"rwm\"}]},\"maskedPaths\":[\"/proc/kcore\"],"
    "\"seccomp\":{\"defaultAction\":\"SCMP_ACT_ERRNO\"}},\"unknown\":{\"x\":1},"
    "\"annotations\":{\"org.example/a\":\"1\",\"b\":\"two words\"}}";

static void test_full(void **state)
{
    (void)state;
    struct nsbox_ocispec *c = malloc(sizeof *c);
    struct nsbox_err e = {0};
    if (nsbox_ocispec_parse(full, strlen(full), c, &e) < 0)
        fail_msg("%s", e.msg);
    assert_string_equal(c->oci_version, "1.0.2");
    assert_int_equal(c->n_args, 3);
    assert_string_equal(c->args[2], "echo hi");
    assert_null(c->args[3]);
    assert_int_equal(c->n_env, 2);
    assert_string_equal(c->env[1], "A=b=c");
    assert_string_equal(c->cwd, "/tmp");
    assert_int_equal(c->uid, 0);
    assert_int_equal(c->gid, 7);
    assert_true(c->terminal);
    assert_true(c->no_new_privileges);
    assert_false(c->cap_sys_admin);
    assert_string_equal(c->root_path, "rootfs");
    assert_true(c->root_readonly);
    assert_string_equal(c->hostname, "box");
    assert_int_equal(c->n_mounts, 2);
    assert_string_equal(c->mounts[1].destination, "/dev");
    assert_string_equal(c->mounts[1].type, "tmpfs");
    assert_string_equal(c->mounts[1].options, "nosuid,mode=755");
    assert_int_equal(c->n_namespaces, 3);
    assert_int_equal(c->namespaces[2].type, NSBOX_OCI_NS_NETWORK);
    assert_false(c->has_uid_mappings);
    assert_true(c->memory_limit == 268435456);
    assert_true(c->cpu_quota == 50000);
    assert_true(c->cpu_period == 100000);
    assert_true(c->cpu_shares == 512);
    assert_true(c->pids_limit == 100);
    assert_false(c->all_devices);
    assert_true(c->has_seccomp);
    assert_string_equal(c->annotations, "{\"org.example/a\":\"1\",\"b\":\"two words\"}");
    assert_int_equal(nsbox_ocispec_check_floor(c, &e), 0);
    nsbox_ocispec_free(c);
    free(c);
}

static void test_defaults(void **state)
{
    (void)state;
    const char *min = "{\"ociVersion\":\"1.1.0\",\"process\":{\"args\":[\"true\"]},"
                      "\"root\":{\"path\":\"/abs/root\"}}";
    struct nsbox_ocispec *c = malloc(sizeof *c);
    struct nsbox_err e = {0};
    assert_int_equal(nsbox_ocispec_parse(min, strlen(min), c, &e), 0);
    assert_string_equal(c->cwd, "/");
    assert_int_equal(c->n_env, 0);
    assert_false(c->root_readonly);
    assert_true(c->memory_limit == -1 && c->pids_limit == -1 && c->cpu_quota == -1);
    assert_int_equal(c->n_mounts, 0);
    assert_false(c->has_seccomp);
    assert_string_equal(c->annotations, "{}");
    nsbox_ocispec_free(c);
    free(c);
}

/* The message names the key, so that a user finds the line of config.json to fix. */
static void fails_naming(const char *json, const char *want)
{
    struct nsbox_ocispec *c = malloc(sizeof *c);
    struct nsbox_err e = {0};
    if (nsbox_ocispec_parse(json, strlen(json), c, &e) == 0)
        fail_msg("accepted: %s", json);
    if (!strstr(e.msg, want))
        fail_msg("'%s' does not say '%s' for %s", e.msg, want, json);
    assert_null(c->args);
    free(c);
}

#define P "\"process\":{\"args\":[\"true\"]}"
#define R "\"root\":{\"path\":\"rootfs\"}"
static void test_errors(void **state)
{
    (void)state;
    fails_naming("", "not valid JSON");
    fails_naming("[]", "not a JSON object");
    fails_naming("{\"process\":{\"args\":[\"true\"]}}", "'ociVersion': missing");
    fails_naming("{\"ociVersion\":\"2.0\"," P "," R "}", "'ociVersion'");
    fails_naming("{\"ociVersion\":\"1.0\"," R "}", "'process': missing");
    fails_naming("{\"ociVersion\":\"1.0\",\"process\":{\"args\":[]}," R "}", "'process.args'");
    fails_naming("{\"ociVersion\":\"1.0\",\"process\":{\"args\":[1]}," R "}", "'process.args'");
    fails_naming("{\"ociVersion\":\"1.0\",\"process\":{\"args\":[\"\"]}," R "}",
                 "'process.args'");
    fails_naming("{\"ociVersion\":\"1.0\",\"process\":{\"args\":[\"x\"],\"env\":[\"NOEQ\"]},"
                 R "}", "'process.env'");
    fails_naming("{\"ociVersion\":\"1.0\",\"process\":{\"args\":[\"x\"],\"cwd\":\"rel\"}," R "}",
                 "'process.cwd'");
    fails_naming("{\"ociVersion\":\"1.0\",\"process\":{\"args\":[\"x\"],\"user\":{\"uid\":-1}},"
                 R "}", "'process.user.uid'");
    fails_naming("{\"ociVersion\":\"1.0\",\"process\":{\"args\":[\"x\"],\"terminal\":1}," R "}",
                 "'process.terminal'");
    fails_naming("{\"ociVersion\":\"1.0\"," P "}", "'root': missing");
    fails_naming("{\"ociVersion\":\"1.0\"," P ",\"root\":{}}", "'root.path': missing");
    fails_naming("{\"ociVersion\":\"1.0\"," P "," R ",\"mounts\":[{\"type\":\"proc\"}]}",
                 "'mounts.destination'");
    fails_naming("{\"ociVersion\":\"1.0\"," P "," R ",\"mounts\":[{\"destination\":\"x\"}]}",
                 "'mounts.destination'");
    fails_naming("{\"ociVersion\":\"1.0\"," P "," R ",\"linux\":{\"namespaces\":[{\"type\":"
                 "\"bogus\"}]}}", "'linux.namespaces.type'");
    fails_naming("{\"ociVersion\":\"1.0\"," P "," R ",\"linux\":{\"namespaces\":[{\"type\":"
                 "\"pid\"},{\"type\":\"pid\"}]}}", "given twice");
    fails_naming("{\"ociVersion\":\"1.0\"," P "," R ",\"linux\":{\"resources\":{\"memory\":"
                 "{\"limit\":1.5}}}}", "'linux.resources.memory.limit'");
    fails_naming("{\"ociVersion\":\"1.0\"," P "," R ",\"linux\":{\"resources\":{\"pids\":"
                 "{\"limit\":\"x\"}}}}", "'linux.resources.pids.limit'");
    fails_naming("{\"ociVersion\":\"1.0\"," P "," R ",\"linux\":[]}", "'linux': must be");
    fails_naming("{\"ociVersion\":\"1.0\"," P "," R ",\"annotations\":[]}", "'annotations'");
    fails_naming("{\"ociVersion\":\"1.0\"," P "," R ",\"annotations\":{\"a\":1}}",
                 "'annotations'");
}

static void test_bounds(void **state)
{
    (void)state;
    /* more mounts than the struct holds */
    size_t cap = 200 * 40 + 200;
    char *j = malloc(cap);
    size_t n = (size_t)snprintf(j, cap, "{\"ociVersion\":\"1.0\"," P "," R ",\"mounts\":[");
    for (int i = 0; i <= NSBOX_OCISPEC_MOUNTS_MAX; i++)
        n += (size_t)snprintf(j + n, cap - n, "%s{\"destination\":\"/m%d\"}", i ? "," : "", i);
    snprintf(j + n, cap - n, "]}");
    fails_naming(j, "more than 64 entries");
    /* a path longer than the buffer */
    char longpath[NSBOX_OCISPEC_PATH_MAX + 10];
    memset(longpath, 'a', sizeof longpath - 1);
    longpath[0] = '/';
    longpath[sizeof longpath - 1] = '\0';
    snprintf(j, cap, "{\"ociVersion\":\"1.0\"," P ",\"root\":{\"path\":\"%s\"}}", longpath);
    fails_naming(j, "'root.path': longer than");
    free(j);
}

static void floor_refuses(const char *json, const char *want)
{
    struct nsbox_ocispec *c = malloc(sizeof *c);
    struct nsbox_err e = {0};
    if (nsbox_ocispec_parse(json, strlen(json), c, &e) < 0)
        fail_msg("%s", e.msg);
    assert_int_equal(nsbox_ocispec_check_floor(c, &e), -1);
    assert_int_equal(e.code, NSBOX_E_POLICY);
    if (!strstr(e.msg, want))
        fail_msg("'%s' does not say '%s'", e.msg, want);
    nsbox_ocispec_free(c);
    free(c);
}

static void test_floor(void **state)
{
    (void)state;
    floor_refuses("{\"ociVersion\":\"1.0\",\"process\":{\"args\":[\"x\"],\"capabilities\":"
                  "{\"bounding\":[\"CAP_CHOWN\",\"CAP_SYS_ADMIN\"]}}," R "}",
                  "privileged containers are not supported");
    floor_refuses("{\"ociVersion\":\"1.0\"," P "," R ",\"linux\":{\"resources\":{\"devices\":"
                  "[{\"allow\":true,\"access\":\"rwm\"}]}}}", "every device");
    floor_refuses("{\"ociVersion\":\"1.0\"," P "," R ",\"linux\":{\"namespaces\":[{\"type\":"
                  "\"network\",\"path\":\"/proc/1/ns/net\"}]}}", "existing network namespace");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_full),
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_bounds),
        cmocka_unit_test(test_floor),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
