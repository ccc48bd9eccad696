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

/* ---- linux.resources.memory beyond the limit ---- */

static struct nsbox_ocicgroup_memory mem(void)
{
    struct nsbox_ocicgroup_memory m;
    nsbox_ocicgroup_memory_init(&m);
    return m;
}

/* runtime-tools' linux_cgroups_memory config: every key set */
static struct nsbox_ocicgroup_memory all_keys(void)
{
    struct nsbox_ocicgroup_memory m = mem();
    m.limit = m.reservation = m.swap = m.kernel = m.kernel_tcp = 50593792;
    m.swappiness = 10;
    m.disable_oom_killer = true;
    return m;
}

static size_t plan(const struct nsbox_ocicgroup_memory *m, int version, bool swap,
                   struct nsbox_ocicgroup_write *w, char *note, size_t note_n)
{
    size_t n = 99;
    struct nsbox_err e = {0};
    if (nsbox_ocicgroup_memory_plan(m, version, swap, w, &n, note, note_n, &e) < 0)
        fail_msg("%s", e.msg);
    assert_true(n <= NSBOX_OCICGROUP_MEM_WRITES);
    return n;
}

static void expect_write(const struct nsbox_ocicgroup_write *w, const char *file, const char *value)
{
    assert_string_equal(w->file, file);
    assert_string_equal(w->value, value);
}

static void test_memory_v1(void **state)
{
    (void)state;
    struct nsbox_ocicgroup_write w[NSBOX_OCICGROUP_MEM_WRITES];
    char note[512];
    struct nsbox_ocicgroup_memory m = all_keys();
    assert_int_equal(plan(&m, 1, true, w, note, sizeof note), 5);
    expect_write(&w[0], "memory.soft_limit_in_bytes", "50593792");
    expect_write(&w[1], "memory.memsw.limit_in_bytes", "50593792");
    expect_write(&w[2], "memory.swappiness", "10");
    expect_write(&w[3], "memory.oom_control", "1");
    expect_write(&w[4], "memory.kmem.tcp.limit_in_bytes", "50593792");
    /* kernel memory: deprecated, ignored by the kernel, left out with a word */
    assert_non_null(strstr(note, "kernel:"));
    assert_null(strstr(note, "kernelTCP"));
    /* nothing asked, nothing written, nothing said */
    m = mem();
    m.limit = 1 << 20;
    assert_int_equal(plan(&m, 1, true, w, note, sizeof note), 0);
    assert_string_equal(note, "");
    /* swap: more than the limit; a kernel without swap accounting leaves it out, saying so */
    m.swap = 3 << 20;
    assert_int_equal(plan(&m, 1, true, w, note, sizeof note), 1);
    expect_write(&w[0], "memory.memsw.limit_in_bytes", "3145728");
    assert_int_equal(plan(&m, 1, false, w, note, sizeof note), 0);
    assert_non_null(strstr(note, "swap"));
}

static void test_memory_v2(void **state)
{
    (void)state;
    struct nsbox_ocicgroup_write w[NSBOX_OCICGROUP_MEM_WRITES];
    char note[512];
    struct nsbox_ocicgroup_memory m = mem();
    m.limit = 1 << 20;
    m.reservation = 1 << 19;
    m.swap = 3 << 20;
    m.kernel_tcp = 4096;
    assert_int_equal(plan(&m, 2, true, w, note, sizeof note), 2);
    expect_write(&w[0], "memory.low", "524288");
    expect_write(&w[1], "memory.swap.max", "2097152"); /* swap less the limit */
    assert_non_null(strstr(note, "kernelTCP"));
    /* what v2 does not have is refused, naming the key and the option */
    struct nsbox_err e = {0};
    size_t n;
    m = all_keys();
    m.disable_oom_killer = false;
    assert_int_equal(nsbox_ocicgroup_memory_plan(&m, 2, true, w, &n, note, sizeof note, &e), -1);
    assert_int_equal(e.code, NSBOX_E_UNSUPPORTED);
    assert_non_null(strstr(e.msg, "memory.swappiness'"));
    m = mem();
    m.disable_oom_killer = true;
    assert_int_equal(nsbox_ocicgroup_memory_plan(&m, 2, true, w, &n, note, sizeof note, &e), -1);
    assert_non_null(strstr(e.msg, "disableOOMKiller"));
}

/* swap stays bounded: never unlimited, never without or below the limit */
static void test_memory_swap_refused(void **state)
{
    (void)state;
    struct nsbox_ocicgroup_write w[NSBOX_OCICGROUP_MEM_WRITES];
    char note[512];
    size_t n;
    struct nsbox_err e = {0};
    struct nsbox_ocicgroup_memory m = mem();
    m.limit = 1 << 20;
    m.swap = -1;
    for (int v = 1; v <= 2; v++) {
        assert_int_equal(nsbox_ocicgroup_memory_plan(&m, v, true, w, &n, note, sizeof note, &e),
                         -1);
        assert_int_equal(e.code, NSBOX_E_POLICY);
        assert_non_null(strstr(e.msg, "unlimited swap"));
    }
    m.swap = 1 << 19;
    assert_int_equal(nsbox_ocicgroup_memory_plan(&m, 1, true, w, &n, note, sizeof note, &e), -1);
    assert_non_null(strstr(e.msg, "below memory.limit"));
    m.limit = -1;
    assert_int_equal(nsbox_ocicgroup_memory_plan(&m, 2, true, w, &n, note, sizeof note, &e), -1);
    assert_non_null(strstr(e.msg, "needs memory.limit"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_path_form),
        cmocka_unit_test(test_systemd_form),
        cmocka_unit_test(test_hostile),
        cmocka_unit_test(test_device_rule_and_weight),
        cmocka_unit_test(test_memory_v1),
        cmocka_unit_test(test_memory_v2),
        cmocka_unit_test(test_memory_swap_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
