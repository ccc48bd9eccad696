/* `nsbox-oci spec`'s default config (policy/ocidefault.c): what it writes is read back by
 * config.json's own parser and passes nsbox's whole floor, so that nsbox-oci runs it as it is;
 * it is runc's default (a shell on a terminal, unprivileged capabilities) where the floor
 * allows. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "cleanup.h"
#include "cleanup_cjson.h"
#include "ocidefault.h"
#include "ocispec.h"

#include <linux/capability.h>
#include <stdlib.h>
#include <string.h>

static struct nsbox_ocispec c;

/* The text spec writes, parsed and checked as create checks a config. */
static void parse_checked(bool rootless)
{
    cleanup_cjson cJSON *j = nsbox_ocidefault_config(rootless);
    assert_non_null(j);
    cleanup_free char *text = cJSON_Print(j);
    assert_non_null(text);
    struct nsbox_err e = {0};
    if (nsbox_ocispec_parse(text, strlen(text), &c, &e) < 0 ||
        nsbox_ocispec_check_floor(&c, &e) < 0 || nsbox_ocispec_check_namespaces(&c, &e) < 0 ||
        nsbox_ocispec_check_devices(&c, &e) < 0 || nsbox_ocispec_check_sysctl(&c, &e) < 0)
        fail_msg("%s", e.msg);
}

static bool has_ns(enum nsbox_ocispec_ns t)
{
    for (size_t i = 0; i < c.n_namespaces; i++)
        if (c.namespaces[i].type == t && !c.namespaces[i].has_path)
            return true;
    return false;
}

static void test_default_passes_the_floor(void **state)
{
    (void)state;
    parse_checked(false);
    assert_int_equal(c.n_args, 1);
    assert_string_equal(c.args[0], "sh");
    assert_true(c.terminal);
    assert_string_equal(c.cwd, "/");
    assert_string_equal(c.root_path, "rootfs");
    assert_true(c.root_readonly);
    assert_true(c.no_new_privileges);
    assert_false(c.cap_sys_admin);
    uint64_t want = (UINT64_C(1) << CAP_AUDIT_WRITE) | (UINT64_C(1) << CAP_KILL) |
                    (UINT64_C(1) << CAP_NET_BIND_SERVICE);
    assert_true(c.has_caps);
    assert_int_equal(c.caps[NSBOX_OCI_CAPS_BOUNDING], want);
    assert_int_equal(c.caps[NSBOX_OCI_CAPS_EFFECTIVE], want);
    assert_int_equal(c.caps[NSBOX_OCI_CAPS_PERMITTED], want);
    assert_true(has_ns(NSBOX_OCI_NS_PID) && has_ns(NSBOX_OCI_NS_NETWORK) &&
                has_ns(NSBOX_OCI_NS_IPC) && has_ns(NSBOX_OCI_NS_UTS) &&
                has_ns(NSBOX_OCI_NS_MOUNT) && has_ns(NSBOX_OCI_NS_CGROUP));
    assert_false(has_ns(NSBOX_OCI_NS_USER));
    assert_false(c.has_uid_mappings);
    /* no host path bound in: every mount is a new filesystem */
    assert_true(c.n_mounts > 0);
    for (size_t i = 0; i < c.n_mounts; i++)
        assert_string_not_equal(c.mounts[i].type, "bind");
    assert_true(c.n_masked > 0 && c.n_readonly > 0);
    nsbox_ocispec_free(&c);
}

static void test_rootless_adds_the_user_namespace(void **state)
{
    (void)state;
    parse_checked(true);
    assert_true(has_ns(NSBOX_OCI_NS_USER));
    assert_true(has_ns(NSBOX_OCI_NS_NETWORK)); /* nsbox never shares the host's */
    assert_false(c.has_uid_mappings);
    nsbox_ocispec_free(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_default_passes_the_floor),
        cmocka_unit_test(test_rootless_adds_the_user_namespace),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
