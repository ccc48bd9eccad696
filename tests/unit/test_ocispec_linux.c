/* config.json's linux object, the parts of policy/ocispec_linux.c and policy/sysctl.c: the
 * cgroupsPath key, device rules, cpuset, linux.devices and its floor, linux.sysctl and its
 * floor (only the container's own namespaces' keys), linux.seccomp read by the seccomp parser. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "ocispec.h"
#include "sysctl.h"

#include <stdio.h>
#include <string.h>

static struct nsbox_ocispec c;

static int parse_linux(const char *linux_json, struct nsbox_err *e)
{
    char doc[4096];
    snprintf(doc, sizeof doc,
             "{\"ociVersion\":\"1.0.2\",\"process\":{\"args\":[\"true\"],\"cwd\":\"/\"},"
             "\"root\":{\"path\":\"rootfs\"},\"linux\":%s}",
             linux_json);
    return nsbox_ocispec_parse(doc, strlen(doc), &c, e);
}

static void expect_parse_error(const char *linux_json, const char *want)
{
    struct nsbox_err e = {0};
    assert_int_equal(parse_linux(linux_json, &e), -1);
    if (!strstr(e.msg, want))
        fail_msg("'%s' lacks '%s'", e.msg, want);
}

static void test_resources(void **state)
{
    (void)state;
    struct nsbox_err e = {0};
    const char *lx = "{\"cgroupsPath\":\"/docker/abc\",\"resources\":{\"cpu\":{\"quota\":50000,"
                     "\"period\":100000,\"shares\":512,\"cpus\":\"0-1\",\"mems\":\"0\"},"
                     "\"devices\":[{\"allow\":false,\"access\":\"rwm\"},{\"allow\":true,"
                     "\"type\":\"c\",\"major\":10,\"minor\":229,\"access\":\"rw\"}]}}";
    if (parse_linux(lx, &e) < 0)
        fail_msg("%s", e.msg);
    assert_string_equal(c.cgroups_path, "/docker/abc");
    assert_int_equal(c.cpu_quota, 50000);
    assert_int_equal(c.cpu_period, 100000);
    assert_int_equal(c.cpu_shares, 512);
    assert_string_equal(c.cpus, "0-1");
    assert_string_equal(c.mems, "0");
    assert_int_equal(c.n_devrules, 2);
    assert_false(c.devrules[0].allow);
    assert_int_equal(c.devrules[0].type, 'a');
    assert_int_equal(c.devrules[0].major, -1);
    assert_int_equal(c.devrules[1].type, 'c');
    assert_int_equal(c.devrules[1].minor, 229);
    assert_string_equal(c.devrules[1].access, "rw");
    assert_false(c.all_devices);
    assert_int_equal(nsbox_ocispec_check_floor(&c, &e), 0);
    nsbox_ocispec_free(&c);
    /* --privileged's rule */
    if (parse_linux("{\"resources\":{\"devices\":[{\"allow\":true,\"access\":\"rwm\"}]}}", &e) < 0)
        fail_msg("%s", e.msg);
    assert_true(c.all_devices);
    assert_int_equal(nsbox_ocispec_check_floor(&c, &e), -1);
    nsbox_ocispec_free(&c);
    /* the path is kept as written: create parses it once, in the form --systemd-cgroup says
     * (test_ocicgroup.c has its refusals) */
    if (parse_linux("{\"cgroupsPath\":\"/a/../../b\"}", &e) < 0)
        fail_msg("%s", e.msg);
    assert_string_equal(c.cgroups_path, "/a/../../b");
    nsbox_ocispec_free(&c);
    expect_parse_error("{\"resources\":{\"cpu\":{\"cpus\":\"0;rm\"}}}", "cpu.cpus");
    expect_parse_error("{\"resources\":{\"devices\":[{\"type\":\"x\"}]}}", "devices.type");
    expect_parse_error("{\"resources\":{\"devices\":[{\"access\":\"rwx\"}]}}", "devices.access");
}

/* memory beyond the limit, as written; what is left out stays unset */
static void test_memory(void **state)
{
    (void)state;
    struct nsbox_err e = {0};
    if (parse_linux("{\"resources\":{\"memory\":{\"limit\":50593792,\"reservation\":1000,"
                    "\"swap\":60000000,\"kernelTCP\":-1,\"swappiness\":10,"
                    "\"disableOOMKiller\":true}}}",
                    &e) < 0)
        fail_msg("%s", e.msg);
    assert_int_equal(c.memory.limit, 50593792);
    assert_int_equal(c.memory.reservation, 1000);
    assert_int_equal(c.memory.swap, 60000000);
    assert_int_equal(c.memory.kernel_tcp, -1);
    assert_true(c.memory.kernel == NSBOX_OCICGROUP_UNSET);
    assert_int_equal(c.memory.swappiness, 10);
    assert_true(c.memory.disable_oom_killer);
    nsbox_ocispec_free(&c);
    if (parse_linux("{}", &e) < 0)
        fail_msg("%s", e.msg);
    assert_true(c.memory.swap == NSBOX_OCICGROUP_UNSET);
    assert_int_equal(c.memory.swappiness, -1);
    assert_false(c.memory.disable_oom_killer);
    nsbox_ocispec_free(&c);
    expect_parse_error("{\"resources\":{\"memory\":{\"swappiness\":101}}}", "memory.swappiness");
    expect_parse_error("{\"resources\":{\"memory\":{\"disableOOMKiller\":1}}}",
                       "memory.disableOOMKiller");
}

/* linux.rootfsPropagation: one of the eight, or refused naming the key */
static void test_rootfs_propagation(void **state)
{
    (void)state;
    struct nsbox_err e = {0};
    if (parse_linux("{\"rootfsPropagation\":\"rshared\"}", &e) < 0)
        fail_msg("%s", e.msg);
    assert_int_equal(c.root_propagation.kind, NSBOX_PROP_SHARED);
    assert_true(c.root_propagation.recursive);
    nsbox_ocispec_free(&c);
    expect_parse_error("{\"rootfsPropagation\":\"sharedx\"}", "linux.rootfsPropagation");
}

static void test_devices(void **state)
{
    (void)state;
    struct nsbox_err e = {0};
    if (parse_linux("{\"devices\":[{\"path\":\"/dev/fuse\",\"type\":\"c\",\"major\":10,"
                    "\"minor\":229}]}",
                    &e) < 0)
        fail_msg("%s", e.msg);
    assert_int_equal(c.n_devices, 1);
    assert_int_equal(nsbox_ocispec_check_devices(&c, &e), 0);
    assert_string_equal(nsbox_ocispec_device_host_path(10, 229), "/dev/fuse");
    assert_null(nsbox_ocispec_device_host_path(1, 1));
    nsbox_ocispec_free(&c);
    const char *refused[][2] = {
        {"{\"path\":\"/dev/sda\",\"type\":\"b\",\"major\":8,\"minor\":0}", "block device"},
        {"{\"path\":\"/dev/mem\",\"type\":\"c\",\"major\":1,\"minor\":1}", "not a device"},
        {"{\"path\":\"/dev/p\",\"type\":\"p\"}", "fifo"},
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        char lx[512];
        snprintf(lx, sizeof lx, "{\"devices\":[%s]}", refused[i][0]);
        if (parse_linux(lx, &e) < 0)
            fail_msg("%s", e.msg);
        assert_int_equal(nsbox_ocispec_check_devices(&c, &e), -1);
        assert_non_null(strstr(e.msg, refused[i][1]));
        nsbox_ocispec_free(&c);
    }
    expect_parse_error("{\"devices\":[{\"path\":\"/etc/x\",\"type\":\"c\",\"major\":1,"
                       "\"minor\":3}]}",
                       "below /dev");
    expect_parse_error("{\"devices\":[{\"path\":\"/dev/../etc/x\",\"type\":\"c\",\"major\":1,"
                       "\"minor\":3}]}",
                       "below /dev");
    expect_parse_error("{\"devices\":[{\"path\":\"/dev/x/..\",\"type\":\"c\",\"major\":1,"
                       "\"minor\":3}]}",
                       "below /dev");
    expect_parse_error("{\"devices\":[{\"path\":\"/dev/x\",\"type\":\"c\"}]}", "major and minor");
    /* every host device, as engines list them for --privileged: refused as privileged */
    char many[4096];
    size_t len = (size_t)snprintf(many, sizeof many, "{\"devices\":[");
    for (int i = 0; i < 33; i++)
        len += (size_t)snprintf(many + len, sizeof many - len,
                                "%s{\"path\":\"/dev/tty%d\",\"type\":\"c\",\"major\":4,"
                                "\"minor\":%d}",
                                i ? "," : "", i, i);
    snprintf(many + len, sizeof many - len, "]}");
    expect_parse_error(many, "privileged containers are not supported: ");
    expect_parse_error(many, "drop --privileged");
}

static void test_sysctl(void **state)
{
    (void)state;
    struct nsbox_err e = {0};
    const char *ok[] = {"net.ipv4.ip_forward", "net/ipv4/conf/eth0.1/forwarding",
                        "kernel.shmmax",       "kernel.sem",
                        "fs.mqueue.msg_max",   "kernel.hostname",
                        "kernel.domainname",   "kernel/msgmnb"};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
        if (nsbox_sysctl_check(ok[i], &e) < 0)
            fail_msg("%s: %s", ok[i], e.msg);
    const char *host[] = {"kernel.panic", "vm.swappiness",    "kernel.shmmaxx",
                          "fs.file-max",  "kernel.hostnamex", "user.max_user_namespaces"};
    for (size_t i = 0; i < sizeof host / sizeof host[0]; i++) {
        assert_int_equal(nsbox_sysctl_check(host[i], &e), -1);
        assert_int_equal(e.code, NSBOX_E_POLICY);
        assert_non_null(strstr(e.msg, "would change the whole host"));
    }
    const char *bad[] = {"",         "net..ipv4", "net/../kernel/panic", "net.ipv4.", ".net",
                         "net ipv4", "net/./x",   "net.ipv4.\n"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(nsbox_sysctl_check(bad[i], &e), -1);
        assert_int_equal(e.code, NSBOX_E_INVALID);
    }
    char p[128];
    assert_int_equal(nsbox_sysctl_path("net.ipv4.ip_forward", p, sizeof p), 0);
    assert_string_equal(p, "net/ipv4/ip_forward");
    assert_int_equal(nsbox_sysctl_path("net/ipv4/conf/eth0.1/forwarding", p, sizeof p), 0);
    assert_string_equal(p, "net/ipv4/conf/eth0.1/forwarding");
    assert_int_equal(nsbox_sysctl_path("net.ipv4.ip_forward", p, 5), -1);

    if (parse_linux("{\"sysctl\":{\"net.ipv4.ip_forward\":\"1\",\"vm.swappiness\":\"10\"}}", &e) <
        0)
        fail_msg("%s", e.msg);
    assert_int_equal(c.n_sysctl, 2);
    assert_string_equal(c.sysctl[0].value, "1");
    assert_int_equal(nsbox_ocispec_check_sysctl(&c, &e), -1);
    assert_non_null(strstr(e.msg, "vm.swappiness"));
    nsbox_ocispec_free(&c);
    expect_parse_error("{\"sysctl\":{\"net/../x\":\"1\"}}", "not a sysctl name");
    expect_parse_error("{\"sysctl\":{\"net.a\":1}}", "object of strings");
    expect_parse_error("{\"sysctl\":{\"net.a\":\"1\\n2\"}}", "newline");
}

static void test_seccomp(void **state)
{
    (void)state;
    struct nsbox_err e = {0};
    assert_int_equal(
        parse_linux("{\"seccomp\":{\"defaultAction\":\"SCMP_ACT_ERRNO\","
                    "\"architectures\":[\"SCMP_ARCH_X86_64\"],"
                    "\"flags\":[\"SECCOMP_FILTER_FLAG_LOG\"],\"syscalls\":["
                    "{\"names\":[\"read\",\"write\"],\"action\":\"SCMP_ACT_ALLOW\"}]}}",
                    &e),
        0);
    assert_true(c.has_seccomp);
    assert_int_equal(c.seccomp.default_action, NSBOX_SCMP_ERRNO);
    assert_int_equal(c.seccomp.n_rules, 2);
    assert_int_equal(c.seccomp.load_flags, 2u);
    nsbox_ocispec_free(&c);
    assert_null(c.seccomp.rules);
    /* null: none, as absent */
    assert_int_equal(parse_linux("{\"seccomp\":null}", &e), 0);
    assert_false(c.has_seccomp);
    nsbox_ocispec_free(&c);
    expect_parse_error("{\"seccomp\":[]}", "config.json: key 'linux.seccomp': must be an object");
    expect_parse_error("{\"seccomp\":{\"defaultAction\":\"SCMP_ACT_ALLOW\",\"syscalls\":["
                       "{\"names\":[\"getpid\"],\"action\":\"SCMP_ACT_NOTIFY\"}]}}",
                       "config.json: key 'linux.seccomp': syscalls[0].action: SCMP_ACT_NOTIFY");
    expect_parse_error("{\"seccomp\":{\"syscalls\":[]}}",
                       "config.json: key 'linux.seccomp': defaultAction: missing");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resources),
        cmocka_unit_test(test_memory),
        cmocka_unit_test(test_rootfs_propagation),
        cmocka_unit_test(test_devices),
        cmocka_unit_test(test_sysctl),
        cmocka_unit_test(test_seccomp),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
