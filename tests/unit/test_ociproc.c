/* exec's process.json and update's resources (policy/ociproc.c): what is read, the errors
 * naming the document and key, the floor, what an update leaves as it is. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "ociproc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct nsbox_ocispec c;

static void test_process(void **state)
{
    (void)state;
    const char *p = "{\"terminal\":true,\"user\":{\"uid\":0,\"gid\":3},\"args\":[\"sh\",\"-c\","
                    "\"tty\"],\"env\":[\"PATH=/bin\",\"A=b\"],\"cwd\":\"/tmp\","
                    "\"capabilities\":{\"bounding\":[\"CAP_CHOWN\"]}}";
    struct nsbox_err e = {0};
    if (nsbox_ociproc_parse_process(p, strlen(p), &c, &e) < 0)
        fail_msg("%s", e.msg);
    assert_int_equal(c.n_args, 3);
    assert_string_equal(c.args[2], "tty");
    assert_null(c.args[3]);
    assert_int_equal(c.n_env, 2);
    assert_string_equal(c.env[1], "A=b");
    assert_string_equal(c.cwd, "/tmp");
    assert_true(c.terminal);
    assert_int_equal(c.gid, 3);
    assert_int_equal(nsbox_ocispec_check_floor(&c, &e), 0);
    nsbox_ocispec_free(&c);
}

static void expect_error(const char *p, const char *want)
{
    struct nsbox_err e = {0};
    assert_int_equal(nsbox_ociproc_parse_process(p, strlen(p), &c, &e), -1);
    if (!strstr(e.msg, want))
        fail_msg("'%s' lacks '%s'", e.msg, want);
    assert_null(c.args);
}

static void test_process_errors(void **state)
{
    (void)state;
    expect_error("[]", "process.json: not a JSON object");
    expect_error("{\"args\":[]}", "process.json: key 'args'");
    expect_error("{\"args\":[\"x\"],\"cwd\":\"rel\"}", "process.json: key 'cwd'");
    expect_error("{\"args\":[\"x\"],\"env\":[\"NOEQ\"]}", "process.json: key 'env'");
    /* cJSON would cut the argument at the NUL and run "/bin/sh" */
    expect_error("{\"args\":[\"/bin/sh\\u0000x\"]}",
                 "process.json: contains a NUL character (\\u0000) in a string");
    expect_error("{\"args\":[\"x\"],\"cwd\":\"/a\\u0g00\"}", "process.json: invalid \\u escape");
    const char *adm = "{\"args\":[\"x\"],\"capabilities\":{\"ambient\":[\"CAP_SYS_ADMIN\"]}}";
    struct nsbox_err e = {0};
    assert_int_equal(nsbox_ociproc_parse_process(adm, strlen(adm), &c, &e), 0);
    assert_int_equal(nsbox_ocispec_check_floor(&c, &e), -1);
    assert_int_equal(e.code, NSBOX_E_POLICY);
    nsbox_ocispec_free(&c);
}

static void test_resources(void **state)
{
    (void)state;
    struct nsbox_ociproc_resources r;
    struct nsbox_err e = {0};
    const char *t = "{\"memory\":{\"limit\":1048576},\"cpu\":{\"quota\":50000,\"period\":"
                    "100000},\"pids\":{\"limit\":-1}}";
    if (nsbox_ociproc_parse_resources(t, strlen(t), &r, &e) < 0)
        fail_msg("%s", e.msg);
    assert_true(r.has_memory && r.has_cpu && r.has_pids);
    assert_int_equal(r.memory_bytes, 1048576);
    assert_int_equal(r.cpu_quota_us, 50000);
    assert_int_equal(r.cpu_period_us, 100000);
    assert_int_equal(r.pids, 0); /* -1: no limit */
    assert_false(r.other);
    /* what it does not name stays; what nsbox cannot change is noticed */
    t = "{\"memory\":{\"limit\":-1},\"cpu\":{\"shares\":512},\"blockIO\":{\"weight\":10}}";
    assert_int_equal(nsbox_ociproc_parse_resources(t, strlen(t), &r, &e), 0);
    assert_true(r.has_memory);
    assert_int_equal(r.memory_bytes, 0);
    assert_false(r.has_cpu);
    assert_false(r.has_pids);
    assert_true(r.other);
    /* Docker's `docker update --pids-limit 50`: every limit, those not given as 0, which
     * leave them (runc's update); the period alone keeps the quota */
    t = "{\"cpu\":{\"shares\":0,\"quota\":0,\"period\":0,\"cpus\":\"\",\"mems\":\"\"},"
        "\"memory\":{\"limit\":0,\"reservation\":0,\"kernel\":0},\"pids\":{\"limit\":50}}";
    if (nsbox_ociproc_parse_resources(t, strlen(t), &r, &e) < 0)
        fail_msg("%s", e.msg);
    assert_false(r.has_memory || r.has_swap || r.has_cpu || r.other);
    assert_true(r.has_pids);
    assert_int_equal(r.pids, 50);
    t = "{\"cpu\":{\"quota\":0,\"period\":50000},\"pids\":{\"limit\":0}}";
    assert_int_equal(nsbox_ociproc_parse_resources(t, strlen(t), &r, &e), 0);
    assert_true(r.has_cpu);
    assert_false(r.has_quota || r.has_pids);
    assert_int_equal(r.cpu_period_us, 50000);
    t = "{\"cpu\":{\"quota\":-1}}";
    assert_int_equal(nsbox_ociproc_parse_resources(t, strlen(t), &r, &e), 0);
    assert_true(r.has_cpu && r.has_quota);
    assert_int_equal(r.cpu_quota_us, 0); /* -1: no quota */
    t = "{\"pids\":{\"limit\":\"x\"}}";
    assert_int_equal(nsbox_ociproc_parse_resources(t, strlen(t), &r, &e), -1);
    assert_non_null(strstr(e.msg, "resources: key 'pids.limit'"));
    t = "{\"pids\":{\"limit\":1},\"unified\":{\"pids.max\\u0000x\":\"2\"}}";
    assert_int_equal(nsbox_ociproc_parse_resources(t, strlen(t), &r, &e), -1);
    assert_non_null(strstr(e.msg, "resources: contains a NUL character (\\u0000) in a string"));
    t = "{\"devices\":[{\"allow\":true,\"access\":\"rwm\"}]}";
    assert_int_equal(nsbox_ociproc_parse_resources(t, strlen(t), &r, &e), -1);
    assert_int_equal(e.code, NSBOX_E_POLICY);
}

/* memory.swap (memory plus swap, runc's --memory-swap): applied; 0 leaves it, as runc's
 * update; -1, unlimited swap, is refused by the floor, as at create. */
static void test_resources_swap(void **state)
{
    (void)state;
    struct nsbox_ociproc_resources r;
    struct nsbox_err e = {0};
    const char *t = "{\"memory\":{\"limit\":1048576,\"swap\":3145728}}";
    if (nsbox_ociproc_parse_resources(t, strlen(t), &r, &e) < 0)
        fail_msg("%s", e.msg);
    assert_true(r.has_memory && r.has_swap);
    assert_int_equal(r.swap_bytes, 3145728);
    assert_false(r.other);
    t = "{\"memory\":{\"swap\":0}}";
    assert_int_equal(nsbox_ociproc_parse_resources(t, strlen(t), &r, &e), 0);
    assert_false(r.has_swap || r.has_memory);
    t = "{\"memory\":{\"limit\":1048576}}";
    assert_int_equal(nsbox_ociproc_parse_resources(t, strlen(t), &r, &e), 0);
    assert_false(r.has_swap);
    t = "{\"memory\":{\"limit\":1048576,\"swap\":-1}}";
    assert_int_equal(nsbox_ociproc_parse_resources(t, strlen(t), &r, &e), -1);
    assert_int_equal(e.code, NSBOX_E_POLICY);
    assert_non_null(strstr(e.msg, "resources: key 'memory.swap'"));
    assert_non_null(strstr(e.msg, "unlimited swap"));
}

/* runc's own socket activation: the descriptors are nsbox-oci's only when LISTEN_PID is its
 * own pid (systemd's rule); a LISTEN_FDS that is not a count in range is refused, saying why. */
static void test_listen_fds(void **state)
{
    (void)state;
    struct nsbox_err e = {0};
    unsigned n = 99;
    assert_int_equal(nsbox_ociproc_listen_fds("42", "2", 42, 250, &n, &e), 0);
    assert_int_equal(n, 2);
    /* meant for another process, or for none: not ours, whatever LISTEN_FDS says */
    const char *other[][2] = {{"41", "2"},   {NULL, "2"},  {"42", NULL}, {"", "2"},
                              {"042x", "2"}, {"-42", "2"}, {"x", "bad"}};
    for (size_t i = 0; i < sizeof other / sizeof other[0]; i++) {
        n = 99;
        assert_int_equal(nsbox_ociproc_listen_fds(other[i][0], other[i][1], 42, 250, &n, &e), 0);
        assert_int_equal(n, 0);
    }
    assert_int_equal(nsbox_ociproc_listen_fds("42", "0", 42, 250, &n, &e), 0);
    assert_int_equal(n, 0);
    const char *bad[] = {"", "x", "-1", " 1", "1 ", "251", "99999999999999999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(nsbox_ociproc_listen_fds("42", bad[i], 42, 250, &n, &e), -1);
        assert_int_equal(n, 0);
        assert_non_null(strstr(e.msg, "LISTEN_FDS"));
        assert_non_null(strstr(e.msg, "0 to 250"));
    }
    assert_int_equal(nsbox_ociproc_listen_fds("42", "3", 42, 2, &n, &e), -1);
}

/* The process is told as runc tells it: LISTEN_FDS=n, LISTEN_PID=1, in place of the config's. */
static void test_listen_env(void **state)
{
    (void)state;
    const char *p = "{\"args\":[\"x\"],\"env\":[\"PATH=/bin\",\"LISTEN_PID=7\",\"LISTEN_PIDX=a\"]}";
    struct nsbox_err e = {0};
    assert_int_equal(nsbox_ociproc_parse_process(p, strlen(p), &c, &e), 0);
    assert_int_equal(nsbox_ociproc_listen_env(&c, 3, &e), 0);
    assert_int_equal(c.n_env, 4);
    assert_string_equal(c.env[0], "PATH=/bin");
    assert_string_equal(c.env[1], "LISTEN_PID=1");
    assert_string_equal(c.env[2], "LISTEN_PIDX=a");
    assert_string_equal(c.env[3], "LISTEN_FDS=3");
    assert_null(c.env[4]);
    nsbox_ocispec_free(&c);
}

/* An environment already full (NSBOX_OCISPEC_ENV_MAX entries) has no room for LISTEN_FDS:
 * refused, the array's end left as it was. */
static void test_listen_env_full(void **state)
{
    (void)state;
    char *p = malloc(64 + NSBOX_OCISPEC_ENV_MAX * 12);
    assert_non_null(p);
    size_t k = (size_t)sprintf(p, "{\"args\":[\"x\"],\"env\":[");
    for (int i = 0; i < NSBOX_OCISPEC_ENV_MAX; i++)
        k += (size_t)sprintf(p + k, "%s\"A%d=1\"", i ? "," : "", i);
    sprintf(p + k, "]}");
    struct nsbox_err e = {0};
    assert_int_equal(nsbox_ociproc_parse_process(p, strlen(p), &c, &e), 0);
    free(p);
    assert_int_equal(c.n_env, NSBOX_OCISPEC_ENV_MAX);
    assert_int_equal(nsbox_ociproc_listen_env(&c, 3, &e), -1);
    assert_non_null(strstr(e.msg, "no room for LISTEN_FDS"));
    assert_int_equal(c.n_env, NSBOX_OCISPEC_ENV_MAX);
    assert_null(c.env[NSBOX_OCISPEC_ENV_MAX]);
    nsbox_ocispec_free(&c);
}

#define BIT(n) (UINT64_C(1) << (n))

static void expect_caps_refused(const uint64_t *want, const uint64_t *have, const char *why)
{
    struct nsbox_err e = {0};
    assert_int_equal(nsbox_ociproc_check_caps(want, have, &e), -1);
    if (!strstr(e.msg, why))
        fail_msg("'%s' lacks '%s'", e.msg, why);
}

/* An exec'd process's own sets: none above the container's, by the kernel's rules. */
static void test_check_caps(void **state)
{
    (void)state;
    enum {
        B = NSBOX_OCI_CAPS_BOUNDING,
        E = NSBOX_OCI_CAPS_EFFECTIVE,
        I = NSBOX_OCI_CAPS_INHERITABLE,
        P = NSBOX_OCI_CAPS_PERMITTED,
        A = NSBOX_OCI_CAPS_AMBIENT
    };
    const uint64_t chown = BIT(0), kill = BIT(5), setpcap = BIT(8), nbs = BIT(10),
                   net_admin = BIT(12);
    const uint64_t docker = chown | kill | setpcap | nbs;
    uint64_t have[NSBOX_OCI_CAPSET_KINDS] = {[B] = docker, [E] = docker, [P] = docker};
    struct nsbox_err e = {0};
    uint64_t same[NSBOX_OCI_CAPSET_KINDS] = {[B] = docker, [E] = docker, [P] = docker};
    assert_int_equal(nsbox_ociproc_check_caps(same, have, &e), 0);
    /* fewer, and nbs ambient for a user: inheritable from the container's permitted set */
    uint64_t fewer[NSBOX_OCI_CAPSET_KINDS] = {
        [B] = nbs, [E] = nbs, [P] = nbs, [I] = nbs, [A] = nbs};
    assert_int_equal(nsbox_ociproc_check_caps(fewer, have, &e), 0);
    uint64_t w[NSBOX_OCI_CAPSET_KINDS] = {[B] = docker | net_admin};
    expect_caps_refused(w, have, "bounding: CAP_NET_ADMIN is not in the container's bounding");
    uint64_t w2[NSBOX_OCI_CAPSET_KINDS] = {[B] = docker, [P] = net_admin};
    expect_caps_refused(w2, have, "permitted: CAP_NET_ADMIN is not in the container's permitted");
    uint64_t w3[NSBOX_OCI_CAPSET_KINDS] = {[B] = docker, [E] = BIT(60)};
    expect_caps_refused(w3, have, "effective: capability 60 is not in the container's");
    uint64_t w4[NSBOX_OCI_CAPSET_KINDS] = {[B] = docker, [P] = chown, [E] = kill};
    expect_caps_refused(w4, have, "effective: CAP_KILL is not in the process's permitted");
    uint64_t w5[NSBOX_OCI_CAPSET_KINDS] = {[B] = docker, [A] = net_admin};
    expect_caps_refused(w5, have, "ambient: CAP_NET_ADMIN is not in the container's permitted");
    /* inheritable: the container's, or permitted within the process's bounding set */
    uint64_t w6[NSBOX_OCI_CAPSET_KINDS] = {[B] = chown | setpcap, [I] = nbs};
    expect_caps_refused(w6, have, "inheritable: CAP_NET_BIND_SERVICE is neither");
    have[I] = nbs;
    assert_int_equal(nsbox_ociproc_check_caps(w6, have, &e), 0);
    /* a smaller bounding set, also where the container lacks CAP_SETPCAP (init keeps it) */
    uint64_t nopcap[NSBOX_OCI_CAPSET_KINDS] = {[B] = chown | kill};
    uint64_t w7[NSBOX_OCI_CAPSET_KINDS] = {[B] = chown};
    assert_int_equal(nsbox_ociproc_check_caps(w7, nopcap, &e), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_process),    cmocka_unit_test(test_process_errors),
        cmocka_unit_test(test_resources),  cmocka_unit_test(test_resources_swap),
        cmocka_unit_test(test_listen_fds), cmocka_unit_test(test_listen_env),
        cmocka_unit_test(test_listen_env_full), cmocka_unit_test(test_check_caps),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
