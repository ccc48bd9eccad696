/* linux.cgroupsPath (policy/ocicgroup.c): the path form, relative and absolute, normalized;
 * the systemd form expanded as systemd names the unit's cgroup; hostile paths refused with
 * the reason; the device rules and the shares-to-weight conversion. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "ocicgroup.h"

#include <string.h>

static void expect_path(const char *raw, bool systemd, const char *want, bool relative)
{
    struct nsbox_ocicgroup_path p;
    struct nsbox_err e = {0};
    if (nsbox_ocicgroup_parse(raw, systemd, &p, &e) < 0)
        fail_msg("%s: %s", raw, e.msg);
    assert_string_equal(p.path, want);
    assert_int_equal(p.relative, relative);
}

static void expect_refused(const char *raw, bool systemd, const char *why)
{
    struct nsbox_ocicgroup_path p;
    struct nsbox_err e = {0};
    if (nsbox_ocicgroup_parse(raw, systemd, &p, &e) != -1)
        fail_msg("%s: accepted as %s", raw, p.path);
    assert_int_equal(e.code, NSBOX_E_INVALID);
    assert_non_null(strstr(e.msg, "linux.cgroupsPath"));
    if (!strstr(e.msg, why))
        fail_msg("%s: '%s' lacks '%s'", raw, e.msg, why);
}

static void test_path_form(void **state)
{
    (void)state;
    expect_path(NULL, false, "", false);
    expect_path("", true, "", false);
    expect_path("/docker/abc", false, "/docker/abc", false);
    expect_path("//kubepods///burstable/pod1/", false, "/kubepods/burstable/pod1", false);
    expect_path("testdir/cgrouptest/container", false, "/testdir/cgrouptest/container", true);
    /* without --systemd-cgroup a systemd-looking value is a (relative) path, as runc has it */
    expect_path("system.slice:docker:abc", false, "/system.slice:docker:abc", true);
}

static void test_systemd_form(void **state)
{
    (void)state;
    expect_path("system.slice:docker:abc", true, "/system.slice/docker-abc.scope", false);
    expect_path(":cri-containerd:abc", true, "/system.slice/cri-containerd-abc.scope", false);
    expect_path("kubepods-burstable-pod1.slice:cri-containerd:abc", true,
                "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1.slice/"
                "cri-containerd-abc.scope",
                false);
    expect_path("-.slice:p:n", true, "/p-n.scope", false);
    expect_path("machine.slice:x:inner.slice", true, "/machine.slice/inner.slice", false);
}

static void test_hostile(void **state)
{
    (void)state;
    expect_refused("/../../etc", false, "'..'");
    expect_refused("a/./b", false, "'..'");
    expect_refused("/a/..", false, "'..'");
    expect_refused("/", false, "root");
    expect_refused("///", false, "root");
    expect_refused("/a\nb", false, "control character");
    char big[700];
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    big[0] = '/';
    expect_refused(big, false, "longer than 511");
    char deep[200] = "";
    for (int i = 0; i < 17; i++)
        strcat(deep, "/d");
    expect_refused(deep, false, "deeper than 16");
    char comp[300] = "/";
    memset(comp + 1, 'c', 260);
    expect_refused(comp, false, "255 bytes");
    expect_refused("/docker/abc", true, "slice:prefix:name");
    expect_refused("a:b:c:d", true, "slice:prefix:name");
    expect_refused("system:docker:abc", true, "slice name");
    expect_refused("a/b.slice:docker:abc", true, "slice name");
    expect_refused("a--b.slice:docker:abc", true, "empty dash-separated");
    expect_refused("-a.slice:docker:abc", true, "empty dash-separated");
    expect_refused("system.slice:docker:", true, "empty name");
    expect_refused("system.slice:docker:../x", true, "'/'");
    expect_refused("system.slice:do/cker:x", true, "'/'");
}

static void test_device_rule_and_weight(void **state)
{
    (void)state;
    char r[48];
    assert_int_equal(nsbox_ocicgroup_device_rule('c', 10, 229, "rwm", r, sizeof r), 0);
    assert_string_equal(r, "c 10:229 rwm");
    assert_int_equal(nsbox_ocicgroup_device_rule('b', 8, -1, "r", r, sizeof r), 0);
    assert_string_equal(r, "b 8:* r");
    assert_int_equal(nsbox_ocicgroup_device_rule('a', 1, 2, "", r, sizeof r), 0);
    assert_string_equal(r, "a *:* rwm");
    assert_int_equal(nsbox_ocicgroup_device_rule('x', 1, 2, "r", r, sizeof r), -1);
    assert_int_equal(nsbox_ocicgroup_device_rule('c', 1, 2, "r", r, 4), -1);
    assert_int_equal(nsbox_ocicgroup_shares_to_weight(0), 0);
    assert_int_equal(nsbox_ocicgroup_shares_to_weight(2), 1);
    assert_int_equal(nsbox_ocicgroup_shares_to_weight(1024), 39);
    assert_int_equal(nsbox_ocicgroup_shares_to_weight(262144), 10000);
    assert_int_equal(nsbox_ocicgroup_shares_to_weight(1u << 30), 10000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_path_form),
        cmocka_unit_test(test_systemd_form),
        cmocka_unit_test(test_hostile),
        cmocka_unit_test(test_device_rule_and_weight),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
