/* nsbox_cgroup_create_at (sandbox/cgroup_place.c): a cgroup where nsbox-oci's bundle names it,
 * with its limits exactly, on the fake cgroup trees of cgroup_fake.h: v2 (absolute and
 * relative paths, the controllers enabled on the way, a taken cgroup refused, a busy parent)
 * and v1 (every hierarchy, cpuset inherited, device rules in order, freezer last). */

#include "cgroup_fake.h"

/* make_v2's tree, whose root enables nothing yet and whose caller may enable cpuset too */
static void make_v2_tree(void)
{
    make_v2("cpuset cpu io memory pids\n", "");
    mkfile_in(g_root, "cgroup.subtree_control", "");
}

static const struct nsbox_cgroup_place k_place = {
    .path = "/docker/abc",
    .memory_bytes = 1u << 30,
    .pids = 100,
    .cpu_quota_us = 50000,
    .cpu_period_us = 250000,
    .cpu_shares = 2048,
    .cpu_weight = 79,
    .cpus = "0",
    .mems = "0",
};

static void test_v2_absolute(void **state)
{
    (void)state;
    make_v2_tree();
    struct nsbox_cgroup cg;
    struct nsbox_err e = {0};
    if (nsbox_cgroup_create_at(&k_place, &cg, &e) < 0)
        fail_msg("%s", e.msg);
    char want[PATH_MAX], p[PATH_MAX];
    snprintf(want, sizeof want, "%s/docker/abc", g_root);
    assert_int_equal(cg.version, 2);
    assert_string_equal(cg.path, want);
    assert_true(cg.dirfd >= 0);
    /* each level enables the controllers for the next, then the limits exactly as given */
    assert_string_equal(g_log, "cgroup.subtree_control=+memory +cpu +pids +cpuset;"
                               "cgroup.subtree_control=+memory +cpu +pids +cpuset;"
                               "memory.max=1073741824;memory.swap.max=0;cpu.max=50000 250000;"
                               "cpu.weight=79;pids.max=100;cpuset.cpus=0;cpuset.mems=0;");
    pj(p, want, "cpu.max");
    assert_string_equal(rfile(p), "50000 250000");
    assert_int_equal(nsbox_cgroup_attach(&cg, 4321, &e), 0);
    assert_int_equal(nsbox_cgroup_destroy(&cg, &e), 0);
    assert_false(exists(want));
    snprintf(want, sizeof want, "%s/docker", g_root);
    assert_true(exists(want)); /* the parents stay, as runc leaves them */
}

static void test_v2_relative_and_no_cpu_limit(void **state)
{
    (void)state;
    make_v2_tree();
    struct nsbox_cgroup_place pl = {.path = "/sub/box", .relative = true};
    struct nsbox_cgroup cg;
    struct nsbox_err e = {0};
    if (nsbox_cgroup_create_at(&pl, &cg, &e) < 0)
        fail_msg("%s", e.msg);
    char want[PATH_MAX];
    snprintf(want, sizeof want, "%s/user.slice/u.scope/sub/box", g_root);
    assert_string_equal(cg.path, want);
    /* nothing asked: no limit written but swap off; cpuset not enabled */
    assert_null(strstr(g_log, "cpuset"));
    assert_null(strstr(g_log, "cpu.max"));
    assert_null(strstr(g_log, "memory.max"));
    assert_non_null(strstr(g_log, "memory.swap.max=0;"));
    assert_int_equal(nsbox_cgroup_destroy(&cg, &e), 0);
}

/* A cgroup in use is never taken: its removal would kill what is in it. */
static void test_v2_taken_cgroup_refused(void **state)
{
    (void)state;
    make_v2_tree();
    struct nsbox_cgroup cg;
    struct nsbox_err e = {0};
    char p[PATH_MAX];
    /* a cgroup holding a process */
    mkfile_in(g_root, "cgroup.subtree_control", "memory cpu pids cpuset");
    snprintf(p, sizeof p, "%s/docker", g_root);
    assert_int_equal(fake_mkdir(p, 0755), 0);
    mkfile_in(p, "cgroup.subtree_control", "memory cpu pids cpuset");
    snprintf(p, sizeof p, "%s/docker/abc", g_root);
    assert_int_equal(fake_mkdir(p, 0755), 0);
    mkfile_in(p, "cgroup.procs", "777\n");
    assert_int_equal(nsbox_cgroup_create_at(&k_place, &cg, &e), -1);
    assert_int_equal(e.code, NSBOX_E_POLICY);
    assert_non_null(strstr(e.msg, "holds processes or other cgroups"));
    assert_int_equal(g_nkilled, 0);
    assert_true(exists(p));
    /* a cgroup with children (a slice), even with no process of its own */
    mkfile_in(p, "cgroup.procs", "");
    char child[PATH_MAX];
    pj(child, p, "inner");
    assert_int_equal(mkdir(child, 0755), 0);
    assert_int_equal(nsbox_cgroup_create_at(&k_place, &cg, &e), -1);
    assert_int_equal(e.code, NSBOX_E_POLICY);
    assert_true(exists(child));
    /* an empty leaf is taken */
    assert_int_equal(rmdir(child), 0);
    if (nsbox_cgroup_create_at(&k_place, &cg, &e) < 0)
        fail_msg("%s", e.msg);
    assert_int_equal(nsbox_cgroup_destroy(&cg, &e), 0);
}

static void test_v2_busy_parent(void **state)
{
    (void)state;
    make_v2_tree();
    char own[PATH_MAX];
    snprintf(own, sizeof own, "%s/user.slice/u.scope", g_root);
    mkfile_in(own, "cgroup.procs", "55\n");
    struct nsbox_cgroup_place pl = {.path = "/box", .relative = true};
    struct nsbox_cgroup cg;
    struct nsbox_err e = {0};
    assert_int_equal(nsbox_cgroup_create_at(&pl, &cg, &e), -1);
    assert_non_null(strstr(e.msg, "no-internal-process"));
    assert_int_equal(cg.version, 0);
}

static void test_not_normalized(void **state)
{
    (void)state;
    make_v2_tree();
    struct nsbox_cgroup_place pl = {.path = "/a/../../etc"};
    struct nsbox_cgroup cg;
    struct nsbox_err e = {0};
    assert_int_equal(nsbox_cgroup_create_at(&pl, &cg, &e), -1);
    assert_int_equal(e.code, NSBOX_E_INVALID);
    assert_string_equal(g_log, "");
}

static void make_v1_tree(void)
{
    g_version = 1;
    wfile(g_self, "9:name=systemd:/\n6:freezer:/\n4:memory:/\n8:pids:/\n3:cpu,cpuacct:/\n"
                  "5:cpuset:/\n7:devices:/\n0::/\n");
    const char *dirs[] = {"memory",      "pids",   "freezer", "unified",
                          "cpu,cpuacct", "cpuset", "devices"};
    char p[PATH_MAX];
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
        pj(p, g_root, dirs[i]);
        assert_int_equal(mkdir(p, 0755), 0);
    }
    pj(p, g_root, "cpu");
    assert_int_equal(symlink("cpu,cpuacct", p), 0);
    pj(p, g_root, "cpuacct");
    assert_int_equal(symlink("cpu,cpuacct", p), 0);
    pj(p, g_root, "unified");
    mkfile_in(p, "cgroup.controllers", "");
    pj(p, g_root, "cpuset");
    mkfile_in(p, "cpuset.cpus", "0-1\n");
    mkfile_in(p, "cpuset.mems", "0\n");
    nsbox_cgroup_set_sys(&g_fake);
}

static void test_v1_every_hierarchy(void **state)
{
    (void)state;
    g_euid = 0;
    make_v1_tree();
    static const struct nsbox_cgroup_devrule dev[] = {
        {false, "a *:* rwm"}, {true, "c 10:229 rwm"}, {true, "b 8:0 r"}};
    struct nsbox_cgroup_place pl = k_place;
    pl.path = "/cgrouptest/x";
    pl.mems = "";
    pl.dev = dev;
    pl.n_dev = 3;
    struct nsbox_cgroup cg;
    struct nsbox_err e = {0};
    if (nsbox_cgroup_create_at(&pl, &cg, &e) < 0)
        fail_msg("%s", e.msg);
    assert_int_equal(cg.version, 1);
    assert_int_equal(cg.n_v1, 6);
    assert_string_equal(cg.v1[cg.n_v1 - 1].controller, "freezer"); /* removed last */
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/cpu/cgrouptest/x/cpu.shares", g_root);
    assert_string_equal(rfile(p), "2048");
    snprintf(p, sizeof p, "%s/cpu/cgrouptest/x/cpu.cfs_quota_us", g_root);
    assert_string_equal(rfile(p), "50000");
    snprintf(p, sizeof p, "%s/cpu/cgrouptest/x/cpu.cfs_period_us", g_root);
    assert_string_equal(rfile(p), "250000");
    snprintf(p, sizeof p, "%s/pids/cgrouptest/x/pids.max", g_root);
    assert_string_equal(rfile(p), "100");
    snprintf(p, sizeof p, "%s/memory/cgrouptest/x/memory.memsw.limit_in_bytes", g_root);
    assert_string_equal(rfile(p), "1073741824");
    /* cpuset: the parent's mems inherited by each new level, the config's cpus on the last */
    snprintf(p, sizeof p, "%s/cpuset/cgrouptest/cpuset.cpus", g_root);
    assert_string_equal(rfile(p), "0-1");
    snprintf(p, sizeof p, "%s/cpuset/cgrouptest/x/cpuset.cpus", g_root);
    assert_string_equal(rfile(p), "0");
    snprintf(p, sizeof p, "%s/cpuset/cgrouptest/x/cpuset.mems", g_root);
    assert_string_equal(rfile(p), "0");
    /* the device rules, in the config's order */
    assert_non_null(strstr(g_log, "devices.deny=a *:* rwm;devices.allow=c 10:229 rwm;"
                                  "devices.allow=b 8:0 r;"));
    assert_int_equal(nsbox_cgroup_destroy(&cg, &e), 0);
    snprintf(p, sizeof p, "%s/devices/cgrouptest/x", g_root);
    assert_false(exists(p));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_v2_absolute, setup_tree, teardown_tree),
        cmocka_unit_test_setup_teardown(test_v2_relative_and_no_cpu_limit, setup_tree,
                                        teardown_tree),
        cmocka_unit_test_setup_teardown(test_v2_taken_cgroup_refused, setup_tree, teardown_tree),
        cmocka_unit_test_setup_teardown(test_v2_busy_parent, setup_tree, teardown_tree),
        cmocka_unit_test_setup_teardown(test_not_normalized, setup_tree, teardown_tree),
        cmocka_unit_test_setup_teardown(test_v1_every_hierarchy, setup_tree, teardown_tree),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
