/* cgroup: the v2 logic of cgroup.c against the fake cgroup tree of cgroup_fake.h (test_cgroup.c
 * tells its rules, and tests the pure helpers and v1). No root needed. */

#include "cgroup_fake.h"

static void own_v2(char *out, const char *leaf)
{
    snprintf(out, PATH_MAX, "%s/user.slice/u.scope%s%s", g_root, leaf ? "/" : "", leaf ? leaf : "");
}

/* ---- v2 on the fake tree ------------------------------------------------------------------- */

static void test_v2_detect_ok_and_cached(void **state)
{
    (void)state;
    make_v2("cpu io memory pids\n", "");
    struct nsbox_cgroup_support sup;
    nsbox_cgroup_detect(&sup);
    assert_int_equal(sup.version, 2);
    assert_true(sup.memory && sup.cpu && sup.pids && sup.freezer && sup.swap && sup.writable);
    char own[PATH_MAX];
    own_v2(own, NULL);
    assert_string_equal(sup.parent, own);
    assert_string_equal(sup.why, "");
    /* Once per process: the second call touches nothing. */
    int calls = g_magic_calls;
    nsbox_cgroup_detect(&sup);
    assert_int_equal(g_magic_calls, calls);
    assert_int_equal(sup.version, 2);
}

static void test_v2_detect_missing_controllers(void **state)
{
    (void)state;
    make_v2("cpu io\n", "");
    struct nsbox_cgroup_support sup;
    nsbox_cgroup_detect(&sup);
    assert_int_equal(sup.version, 0);
    assert_false(sup.memory || sup.cpu || sup.pids);
    assert_non_null(strstr(sup.why, "memory,pids"));
    assert_non_null(strstr(sup.why, "/user.slice/u.scope"));
    assert_non_null(strstr(sup.why, "Delegate=yes"));

    struct nsbox_cgroup cg;
    struct nsbox_err e = {0};
    assert_int_equal(nsbox_cgroup_create("a", &k_lim, &cg, &e), -1);
    assert_int_equal(e.code, NSBOX_E_UNSUPPORTED);
    assert_non_null(strstr(e.msg, "memory,pids"));
    assert_int_equal(cg.version, 0);
}

static void test_v2_detect_internal_process(void **state)
{
    (void)state;
    make_v2("cpu memory pids\n", "4242\n");
    struct nsbox_cgroup_support sup;
    nsbox_cgroup_detect(&sup);
    assert_int_equal(sup.version, 2);
    assert_false(sup.memory);
    assert_non_null(strstr(sup.why, "no-internal-process"));
    assert_non_null(strstr(sup.why, "NSBOX_CGROUP_PARENT"));
    struct nsbox_cgroup cg;
    struct nsbox_err e = {0};
    assert_int_equal(nsbox_cgroup_create("a", &k_lim, &cg, &e), -1);
    assert_int_equal(e.code, NSBOX_E_UNSUPPORTED);
    char own[PATH_MAX];
    own_v2(own, "nsbox-a");
    assert_false(exists(own));
}

/* Root whose own cgroup has these controllers and processes: detection picks /nsbox at the
 * top (its path in top), with memory, cpu and pids. */
static void detect_root_at_the_top(const char *own_controllers, const char *own_procs,
                                   struct nsbox_cgroup_support *sup, char top[PATH_MAX])
{
    g_euid = 0;
    make_v2(own_controllers, own_procs);
    mkfile_in(g_root, "cgroup.subtree_control", "");
    nsbox_cgroup_detect(sup);
    assert_int_equal(sup->version, 2);
    assert_true(sup->memory && sup->cpu && sup->pids);
    pj(top, g_root, "nsbox");
    assert_string_equal(sup->parent, top);
}

/* Root in a cgroup that holds processes (a login session's scope, a service): its sandboxes
 * go below /nsbox at the top, whose controllers the root enables; nothing else moves. */
static void test_v2_root_in_a_busy_cgroup_uses_the_top(void **state)
{
    (void)state;
    struct nsbox_cgroup_support sup;
    char top[PATH_MAX];
    detect_root_at_the_top("cpu memory pids\n", "4242\n", &sup, top);
    assert_true(sup.freezer);
    assert_string_equal(sup.why, "");
    assert_false(exists(top)); /* detection makes nothing */

    struct nsbox_cgroup cg;
    struct nsbox_err e = {0};
    assert_int_equal(nsbox_cgroup_create("a", &k_lim, &cg, &e), 0);
    char p[PATH_MAX];
    pj(p, top, "nsbox-a");
    assert_string_equal(cg.path, p);
    assert_true(exists(p));
    pj(p, top, "nsbox-a/memory.max");
    assert_int_equal(file_u64(p), 1ull << 30);
    pj(p, g_root, "cgroup.subtree_control");
    assert_string_equal(rfile(p), "memory cpu pids");
    own_v2(p, "cgroup.procs");
    assert_string_equal(rfile(p), "4242\n"); /* the caller's cgroup is left as it was */
    own_v2(p, "cgroup.subtree_control");
    assert_string_equal(rfile(p), "");
    assert_int_equal(nsbox_cgroup_destroy(&cg, &e), 0);

    /* a second create finds /nsbox there and ready */
    nsbox_cgroup_set_sys(&g_fake);
    assert_int_equal(nsbox_cgroup_create("b", &k_lim, &cg, &e), 0);
    pj(p, top, "nsbox-b");
    assert_true(exists(p));
    assert_int_equal(nsbox_cgroup_destroy(&cg, &e), 0);

    /* NSBOX_CGROUP_PARENT still wins */
    char cfg[PATH_MAX];
    pj(cfg, g_root, "deleg");
    assert_int_equal(mkdir(cfg, 0755), 0);
    mkfile_in(cfg, "cgroup.controllers", "cpu memory pids\n");
    mkfile_in(cfg, "cgroup.subtree_control", "");
    setenv("NSBOX_CGROUP_PARENT", "/deleg", 1);
    nsbox_cgroup_set_sys(&g_fake);
    nsbox_cgroup_detect(&sup);
    assert_string_equal(sup.parent, cfg);
    unsetenv("NSBOX_CGROUP_PARENT");

    /* and a user other than root gets the rule and its fix */
    g_euid = 1000;
    nsbox_cgroup_set_sys(&g_fake);
    nsbox_cgroup_detect(&sup);
    assert_non_null(strstr(sup.why, "no-internal-process"));
}

/* Root in a cgroup whose parent did not enable the controllers for it (a fresh machine with
 * nothing enabled below the top): the same top-level parent, the controllers enabled by the
 * top. A user other than root is told the controllers are not delegated. */
static void test_v2_root_without_controllers_uses_the_top(void **state)
{
    (void)state;
    struct nsbox_cgroup_support sup;
    char top[PATH_MAX];
    detect_root_at_the_top("cpu io\n", "", &sup, top);
    struct nsbox_cgroup cg;
    struct nsbox_err e = {0};
    assert_int_equal(nsbox_cgroup_create("a", &k_lim, &cg, &e), 0);
    char p[PATH_MAX];
    pj(p, top, "nsbox-a/pids.max");
    assert_int_equal(file_u64(p), 100);
    close(cg.dirfd); /* its supervisor died: the cgroup is left behind */

    /* root's gc from a cgroup of its own that can hold sandboxes still looks below the top */
    own_v2(p, "cgroup.controllers");
    wfile(p, "cpu memory pids\n");
    nsbox_cgroup_set_sys(&g_fake);
    nsbox_cgroup_detect(&sup);
    own_v2(p, NULL);
    assert_string_equal(sup.parent, p);
    assert_int_equal(nsbox_cgroup_remove_by_id("a", &e), 0);
    pj(p, top, "nsbox-a");
    assert_false(exists(p));

    g_euid = 1000;
    own_v2(p, "cgroup.controllers");
    wfile(p, "cpu io\n");
    nsbox_cgroup_set_sys(&g_fake);
    nsbox_cgroup_detect(&sup);
    assert_int_equal(sup.version, 0);
    assert_non_null(strstr(sup.why, "Delegate=yes"));
}

static void test_v2_parent_env(void **state)
{
    (void)state;
    make_v2("cpu memory pids\n", "4242\n");
    char cfg[PATH_MAX];
    pj(cfg, g_root, "nsbox");
    assert_int_equal(mkdir(cfg, 0755), 0);
    mkfile_in(cfg, "cgroup.controllers", "cpu memory pids\n");
    mkfile_in(cfg, "cgroup.subtree_control", "");
    mkfile_in(cfg, "cgroup.procs", "");

    struct nsbox_cgroup_support sup;
    /* Relative to the hierarchy, and the same thing spelled as a full path. */
    const char *values[2] = {"/nsbox", cfg};
    for (int i = 0; i < 2; i++) {
        setenv("NSBOX_CGROUP_PARENT", values[i], 1);
        nsbox_cgroup_set_sys(&g_fake);
        nsbox_cgroup_detect(&sup);
        assert_int_equal(sup.version, 2);
        assert_true(sup.memory && sup.cpu && sup.pids);
        assert_string_equal(sup.parent, cfg);
    }
    struct nsbox_cgroup cg;
    struct nsbox_err e = {0};
    assert_int_equal(nsbox_cgroup_create("p1", &k_lim, &cg, &e), 0);
    char want[PATH_MAX];
    pj(want, cfg, "nsbox-p1");
    assert_string_equal(cg.path, want);
    assert_int_equal(nsbox_cgroup_destroy(&cg, &e), 0);
    assert_false(exists(want));

    setenv("NSBOX_CGROUP_PARENT", "/does-not-exist", 1);
    nsbox_cgroup_set_sys(&g_fake);
    nsbox_cgroup_detect(&sup);
    assert_false(sup.memory);
    assert_non_null(strstr(sup.why, "NSBOX_CGROUP_PARENT=/does-not-exist"));

    setenv("NSBOX_CGROUP_PARENT", "/../etc", 1);
    nsbox_cgroup_set_sys(&g_fake);
    nsbox_cgroup_detect(&sup);
    assert_false(sup.memory);
    assert_non_null(strstr(sup.why, "NSBOX_CGROUP_PARENT"));
}

static void test_v2_mountinfo_fallback(void **state)
{
    (void)state;
    /* A container that bind-mounted its own cgroup at /sys/fs/cgroup without a cgroup
     * namespace: /proc/self/cgroup names /docker/abc, the mount shows it as the root. */
    g_version = 2;
    wfile(g_self, "0::/docker/abc\n");
    char mi[PATH_MAX * 2];
    snprintf(mi, sizeof mi, "40 24 0:31 /docker/abc %s rw - cgroup2 cgroup rw\n", g_root);
    wfile(g_mi, mi);
    mkfile_in(g_root, "cgroup.controllers", "cpu memory pids\n");
    mkfile_in(g_root, "cgroup.subtree_control", "");
    mkfile_in(g_root, "cgroup.procs", "1\n");
    nsbox_cgroup_set_sys(&g_fake);
    struct nsbox_cgroup_support sup;
    nsbox_cgroup_detect(&sup);
    assert_int_equal(sup.version, 2);
    assert_string_equal(sup.parent, g_root);
    /* Its root is the hierarchy's root for us: the no-internal-process rule does not apply. */
    assert_true(sup.memory);
}

static void test_v2_create_attach_stats_freeze_destroy(void **state)
{
    (void)state;
    make_v2("cpu io memory pids\n", "");
    struct nsbox_cgroup cg;
    struct nsbox_err e = {0};
    assert_int_equal(nsbox_cgroup_create("box1", &k_lim, &cg, &e), 0);
    assert_int_equal(cg.version, 2);
    char path[PATH_MAX], p[PATH_MAX];
    own_v2(path, "nsbox-box1");
    assert_string_equal(cg.path, path);
    assert_string_equal(g_log, "cgroup.subtree_control=+memory +cpu +pids;memory.max=1073741824;"
                               "memory.swap.max=0;cpu.max=200000 100000;pids.max=100;");
    pj(p, path, "memory.max");
    assert_string_equal(rfile(p), "1073741824");
    pj(p, path, "cpu.max");
    assert_string_equal(rfile(p), "200000 100000");
    pj(p, path, "pids.max");
    assert_string_equal(rfile(p), "100");
    pj(p, path, "memory.swap.max");
    assert_string_equal(rfile(p), "0");

    /* The dirfd is the cgroup directory (what clone3 needs), and it is close-on-exec. */
    struct stat a, b;
    assert_true(cg.dirfd >= 0);
    assert_int_equal(fstat(cg.dirfd, &a), 0);
    assert_int_equal(stat(path, &b), 0);
    assert_true(a.st_ino == b.st_ino && a.st_dev == b.st_dev);
    assert_true(fcntl(cg.dirfd, F_GETFD) & FD_CLOEXEC);

    assert_int_equal(nsbox_cgroup_attach(&cg, 1234, &e), 0);
    pj(p, path, "cgroup.procs");
    assert_string_equal(rfile(p), "1234\n");

    mkfile_in(path, "memory.current", "12345\n");
    mkfile_in(path, "memory.peak", "23456\n");
    mkfile_in(path, "memory.events", "low 0\nhigh 0\nmax 3\noom 2\noom_kill 2\n");
    mkfile_in(path, "pids.current", "3\n");
    mkfile_in(path, "cpu.stat", "usage_usec 777\nuser_usec 700\nsystem_usec 77\n");
    struct nsbox_cgroup_stats st;
    assert_int_equal(nsbox_cgroup_stats(&cg, &st, &e), 0);
    assert_int_equal(st.memory_current, 12345);
    assert_int_equal(st.memory_peak, 23456);
    assert_int_equal(st.memory_limit, 1ull << 30);
    assert_int_equal(st.oom_kills, 2);
    assert_int_equal(st.pids_current, 3);
    assert_int_equal(st.pids_limit, 100);
    assert_int_equal(st.cpu_usage_usec, 777);
    assert_false(st.frozen);

    assert_int_equal(nsbox_cgroup_freeze(&cg, true, &e), 0);
    pj(p, path, "cgroup.freeze");
    assert_string_equal(rfile(p), "1");
    assert_int_equal(nsbox_cgroup_stats(&cg, &st, &e), 0);
    assert_true(st.frozen);
    assert_int_equal(nsbox_cgroup_freeze(&cg, false, &e), 0);
    assert_string_equal(rfile(p), "0");

    g_log[0] = '\0';
    assert_int_equal(nsbox_cgroup_destroy(&cg, &e), 0);
    /* Populated: killed through cgroup.kill, no pid-by-pid kill() at all. */
    assert_non_null(strstr(g_log, "cgroup.kill=1;"));
    assert_int_equal(g_nkilled, 0);
    assert_false(exists(path));
    assert_int_equal(cg.version, 0);
    assert_int_equal(cg.dirfd, -1);
    assert_int_equal(nsbox_cgroup_destroy(&cg, &e), 0); /* idempotent */

    /* Second sandbox: the parent already enables the controllers, so no subtree write. */
    g_log[0] = '\0';
    assert_int_equal(nsbox_cgroup_create("box2", &k_lim, &cg, &e), 0);
    assert_null(strstr(g_log, "subtree_control"));
    g_log[0] = '\0';
    assert_int_equal(nsbox_cgroup_destroy(&cg, &e), 0);
    assert_string_equal(g_log, ""); /* empty: one rmdir, no writes */
}

static void test_v2_unlimited_and_no_swap(void **state)
{
    (void)state;
    g_has_swap = false;
    make_v2("cpu memory pids\n", "");
    struct nsbox_cgroup_support sup;
    nsbox_cgroup_detect(&sup);
    assert_false(sup.swap);
    struct nsbox_limits none = {0};
    struct nsbox_cgroup cg;
    struct nsbox_err e = {0};
    assert_int_equal(nsbox_cgroup_create("free", &none, &cg, &e), 0);
    /* Defaults are already "max"; memory.swap.max is absent, which is fine. */
    assert_string_equal(g_log, "cgroup.subtree_control=+memory +cpu +pids;");
    struct nsbox_cgroup_stats st;
    assert_int_equal(nsbox_cgroup_stats(&cg, &st, &e), 0);
    assert_true(st.memory_limit == UINT64_MAX && st.pids_limit == UINT64_MAX);
    assert_int_equal(nsbox_cgroup_destroy(&cg, &e), 0);
}

static void test_v2_destroy_without_cgroup_kill(void **state)
{
    (void)state;
    g_has_kill = false; /* Linux < 5.14 */
    make_v2("cpu memory pids\n", "");
    struct nsbox_cgroup cg;
    struct nsbox_err e = {0};
    assert_int_equal(nsbox_cgroup_create("old", &k_lim, &cg, &e), 0);
    assert_int_equal(nsbox_cgroup_attach(&cg, 11, &e), 0);
    assert_int_equal(nsbox_cgroup_attach(&cg, 12, &e), 0);
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s", cg.path);
    /* 11 forks 99 just as it is killed: the first round (not frozen) misses 99, the next one
     * freezes the cgroup before reading the list again. */
    g_fork_parent = 11;
    g_fork_child = 99;
    assert_int_equal(nsbox_cgroup_destroy(&cg, &e), 0);
    assert_int_equal(g_nkilled, 3);
    assert_int_equal(g_killed[0], 11);
    assert_int_equal(g_killed[1], 12);
    assert_false(g_kill_frozen[0]);
    assert_int_equal(g_killed[2], 99);
    assert_true(g_kill_frozen[2]);
    assert_false(exists(path));
}

static void test_v2_create_rollback(void **state)
{
    (void)state;
    make_v2("cpu memory pids\n", "");
    snprintf(g_fail_file, sizeof g_fail_file, "pids.max");
    g_fail_errno = EINVAL;
    struct nsbox_cgroup cg;
    struct nsbox_err e = {0};
    assert_int_equal(nsbox_cgroup_create("rb", &k_lim, &cg, &e), -1);
    assert_non_null(strstr(e.msg, "pids.max"));
    assert_non_null(strstr(e.msg, "nsbox-rb"));
    assert_int_equal(cg.version, 0);
    assert_int_equal(cg.dirfd, -1);
    char path[PATH_MAX];
    own_v2(path, "nsbox-rb");
    assert_false(exists(path));

    /* Permission problems are "unsupported" with the delegation fix. */
    snprintf(g_fail_file, sizeof g_fail_file, "memory.max");
    g_fail_errno = EACCES;
    assert_int_equal(nsbox_cgroup_create("rb", &k_lim, &cg, &e), -1);
    assert_int_equal(e.code, NSBOX_E_UNSUPPORTED);
    assert_non_null(strstr(e.msg, "Delegate=yes"));
    assert_false(exists(path));
}

static void test_v2_create_existing_and_bad_id(void **state)
{
    (void)state;
    make_v2("cpu memory pids\n", "");
    char path[PATH_MAX];
    own_v2(path, "nsbox-dup");
    assert_int_equal(mkdir(path, 0755), 0);
    struct nsbox_cgroup cg;
    struct nsbox_err e = {0};
    assert_int_equal(nsbox_cgroup_create("dup", &k_lim, &cg, &e), -1);
    assert_non_null(strstr(e.msg, "already exists"));
    assert_true(exists(path)); /* not ours: left alone */
    assert_int_equal(cg.version, 0);

    assert_int_equal(nsbox_cgroup_create("../../x", &k_lim, &cg, &e), -1);
    assert_int_equal(e.code, NSBOX_E_INVALID);
    assert_int_equal(nsbox_cgroup_remove_by_id("a/b", &e), -1);
    assert_int_equal(e.code, NSBOX_E_INVALID);
}

static void test_v2_subtree_ebusy_at_create(void **state)
{
    (void)state;
    make_v2("cpu memory pids\n", "");
    struct nsbox_cgroup_support sup;
    nsbox_cgroup_detect(&sup); /* looked fine... */
    assert_true(sup.memory);
    char p[PATH_MAX];
    own_v2(p, "cgroup.procs");
    wfile(p, "777\n"); /* ...then a process moved in */
    struct nsbox_cgroup cg;
    struct nsbox_err e = {0};
    assert_int_equal(nsbox_cgroup_create("late", &k_lim, &cg, &e), -1);
    assert_int_equal(e.code, NSBOX_E_UNSUPPORTED);
    assert_int_equal(e.sys_errno, EBUSY);
    assert_non_null(strstr(e.msg, "no-internal-process"));
    own_v2(p, "nsbox-late");
    assert_false(exists(p));
}

static void test_v2_remove_by_id(void **state)
{
    (void)state;
    make_v2("cpu memory pids\n", "");
    struct nsbox_cgroup cg;
    struct nsbox_err e = {0};
    assert_int_equal(nsbox_cgroup_create("crash", &k_lim, &cg, &e), 0);
    assert_int_equal(nsbox_cgroup_attach(&cg, 4321, &e), 0);
    close(cg.dirfd); /* the supervisor died: the handle is gone */
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s", cg.path);
    assert_true(exists(path));
    assert_int_equal(nsbox_cgroup_remove_by_id("crash", &e), 0);
    assert_false(exists(path));
    assert_int_equal(nsbox_cgroup_remove_by_id("crash", &e), 0); /* idempotent */
    assert_int_equal(nsbox_cgroup_remove_by_id("never-existed", &e), 0);
}

static void test_v2_destroy_child_cgroups(void **state)
{
    (void)state;
    make_v2("cpu memory pids\n", "");
    struct nsbox_cgroup cg;
    struct nsbox_err e = {0};
    assert_int_equal(nsbox_cgroup_create("nest", &k_lim, &cg, &e), 0);
    char sub[PATH_MAX];
    pj(sub, cg.path, "inner");
    assert_int_equal(fake_mkdir(sub, 0755), 0);
    mkfile_in(sub, "cgroup.procs", "99\n");
    assert_int_equal(nsbox_cgroup_destroy(&cg, &e), 0);
    assert_false(exists(sub));
}

/* nsbox-oci update on v2: cpu.max keeps its period when none is given, its quota when only a
 * period is; 0 is "max". */
static void test_v2_update(void **state)
{
    (void)state;
    make_v2("cpu memory pids\n", "");
    struct nsbox_cgroup cg;
    struct nsbox_err e = {0};
    assert_int_equal(nsbox_cgroup_create("up2", &k_lim, &cg, &e), 0);
    g_log[0] = '\0';
    struct nsbox_cgroup_update u = {.has_memory = true, .memory_bytes = 0, .has_cpu = true,
                                    .cpu_quota_us = 50000, .has_pids = true, .pids = 7};
    assert_int_equal(nsbox_cgroup_update(&cg, &u, &e), 0);
    assert_string_equal(g_log, "memory.max=max;cpu.max=50000 100000;pids.max=7;");
    /* a period alone (runc's quota of 0): the quota stays */
    g_log[0] = '\0';
    u = (struct nsbox_cgroup_update){.has_cpu = true, .keep_quota = true, .cpu_period_us = 200000};
    assert_int_equal(nsbox_cgroup_update(&cg, &u, &e), 0);
    assert_string_equal(g_log, "cpu.max=50000 200000;");
    g_log[0] = '\0';
    u = (struct nsbox_cgroup_update){.has_cpu = true, .cpu_period_us = 250000};
    assert_int_equal(nsbox_cgroup_update(&cg, &u, &e), 0);
    assert_string_equal(g_log, "cpu.max=max 250000;");
    assert_int_equal(nsbox_cgroup_destroy(&cg, &e), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_v2_detect_ok_and_cached, setup_tree, teardown_tree),
        cmocka_unit_test_setup_teardown(test_v2_detect_missing_controllers, setup_tree,
                                        teardown_tree),
        cmocka_unit_test_setup_teardown(test_v2_detect_internal_process, setup_tree,
                                        teardown_tree),
        cmocka_unit_test_setup_teardown(test_v2_root_in_a_busy_cgroup_uses_the_top, setup_tree,
                                        teardown_tree),
        cmocka_unit_test_setup_teardown(test_v2_root_without_controllers_uses_the_top,
                                        setup_tree, teardown_tree),
        cmocka_unit_test_setup_teardown(test_v2_parent_env, setup_tree, teardown_tree),
        cmocka_unit_test_setup_teardown(test_v2_mountinfo_fallback, setup_tree, teardown_tree),
        cmocka_unit_test_setup_teardown(test_v2_create_attach_stats_freeze_destroy, setup_tree,
                                        teardown_tree),
        cmocka_unit_test_setup_teardown(test_v2_unlimited_and_no_swap, setup_tree, teardown_tree),
        cmocka_unit_test_setup_teardown(test_v2_destroy_without_cgroup_kill, setup_tree,
                                        teardown_tree),
        cmocka_unit_test_setup_teardown(test_v2_create_rollback, setup_tree, teardown_tree),
        cmocka_unit_test_setup_teardown(test_v2_create_existing_and_bad_id, setup_tree,
                                        teardown_tree),
        cmocka_unit_test_setup_teardown(test_v2_subtree_ebusy_at_create, setup_tree,
                                        teardown_tree),
        cmocka_unit_test_setup_teardown(test_v2_remove_by_id, setup_tree, teardown_tree),
        cmocka_unit_test_setup_teardown(test_v2_destroy_child_cgroups, setup_tree, teardown_tree),
        cmocka_unit_test_setup_teardown(test_v2_update, setup_tree, teardown_tree),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
