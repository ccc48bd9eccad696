/* cgroup: the pure helpers (parsing, formatting) and the v1/v2 logic of cgroup.c run against a
 * fake cgroup tree in a temp dir. The fake "kernel" (mkdir creates the interface files, writes
 * obey the rules that matter: subtree_control's no-internal-process rule, memsw >= memory,
 * rmdir of a populated cgroup is EBUSY) is behind the nsbox_cg_sys seam. No root needed; the
 * real kernel is exercised by test_cgroup_live. Here: the pure helpers and v1; v2 is in
 * test_cgroup_v2.c, the fake kernel in cgroup_fake.h. */

#include "cgroup_fake.h"

/* ---- pure helpers -------------------------------------------------------------------------- */

static void test_parse_self_v1(void **state)
{
    (void)state;
    /* What this very machine (hybrid, Debian 12 style) prints. */
    const char *text = "9:name=systemd:/\n8:pids:/\n4:memory:/process_api/c1173\n"
                       "3:cpu,cpuacct:/a/b\n0::/\n";
    struct nsbox_cg_self s;
    assert_int_equal(nsbox_cg_parse_self(text, &s), 0);
    assert_int_equal(s.n, 4);
    assert_true(s.has_v2);
    assert_string_equal(s.v2_path, "/");
    const struct nsbox_cg_self_entry *m = nsbox_cg_self_find(&s, "memory");
    assert_non_null(m);
    assert_int_equal(m->hier, 4);
    assert_string_equal(m->path, "/process_api/c1173");
    const struct nsbox_cg_self_entry *c = nsbox_cg_self_find(&s, "cpu");
    const struct nsbox_cg_self_entry *ca = nsbox_cg_self_find(&s, "cpuacct");
    assert_ptr_equal(c, ca);
    assert_string_equal(c->controllers, "cpu,cpuacct");
    assert_string_equal(c->path, "/a/b");
    /* "systemd" is not a controller: the named hierarchy must not match it. */
    assert_null(nsbox_cg_self_find(&s, "systemd"));
    assert_non_null(nsbox_cg_self_find(&s, "name=systemd"));
    assert_null(nsbox_cg_self_find(&s, "freezer"));
}

static void test_parse_self_v2(void **state)
{
    (void)state;
    struct nsbox_cg_self s;
    assert_int_equal(
        nsbox_cg_parse_self("0::/user.slice/user-1000.slice/user@1000.service/app.slice/x.scope\n",
                            &s),
        0);
    assert_true(s.has_v2);
    assert_int_equal(s.n, 0);
    assert_string_equal(s.v2_path, "/user.slice/user-1000.slice/user@1000.service/app.slice/"
                                   "x.scope");
    /* No trailing newline, a colon inside the path. */
    assert_int_equal(nsbox_cg_parse_self("0::/a:b", &s), 0);
    assert_string_equal(s.v2_path, "/a:b");
}

static void test_parse_self_mixed_and_bad(void **state)
{
    (void)state;
    struct nsbox_cg_self s;
    assert_int_equal(nsbox_cg_parse_self("12:freezer:/x\n0::/init.scope\n1:memory:/y\n", &s), 0);
    assert_int_equal(s.n, 2);
    assert_string_equal(s.v2_path, "/init.scope");
    assert_string_equal(nsbox_cg_self_find(&s, "freezer")->path, "/x");
    assert_int_equal(nsbox_cg_parse_self("", &s), 0);
    assert_false(s.has_v2);

    const char *bad[] = {"garbage\n", "4:memory\n", "4:memory:relative\n", "x:memory:/\n",
                         ":memory:/\n", "3::/\n" /* v1 id without controllers */};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        errno = 0;
        assert_int_equal(nsbox_cg_parse_self(bad[i], &s), -1);
        assert_int_equal(errno, EINVAL);
    }
    char many[2048] = "";
    for (int i = 1; i <= NSBOX_CG_SELF_MAX + 1; i++) {
        char line[64];
        snprintf(line, sizeof line, "%d:c%d:/\n", i, i);
        strcat(many, line);
    }
    assert_int_equal(nsbox_cg_parse_self(many, &s), -1);
    assert_int_equal(errno, E2BIG);
}

static void test_list_and_missing(void **state)
{
    (void)state;
    const char *ctl = "cpuset cpu io memory hugetlb pids rdma misc\n";
    assert_true(nsbox_cg_list_has(ctl, "cpu"));
    assert_true(nsbox_cg_list_has(ctl, "memory"));
    assert_true(nsbox_cg_list_has(ctl, "misc"));
    assert_false(nsbox_cg_list_has(ctl, "cp"));
    assert_false(nsbox_cg_list_has(ctl, "freezer"));
    assert_false(nsbox_cg_list_has(ctl, ""));
    assert_true(nsbox_cg_list_has("cpu,cpuacct", "cpuacct"));

    const char *need[] = {"memory", "cpu", "pids"};
    char out[64];
    assert_int_equal(nsbox_cg_missing(ctl, need, 3, out, sizeof out), 0);
    assert_string_equal(out, "");
    assert_int_equal(nsbox_cg_missing("cpu io\n", need, 3, out, sizeof out), 2);
    assert_string_equal(out, "memory,pids");
    assert_int_equal(nsbox_cg_missing("", need, 3, out, sizeof out), 3);
    assert_string_equal(out, "memory,cpu,pids");
}

static void test_parse_keyed(void **state)
{
    (void)state;
    uint64_t v = 99;
    const char *events = "low 0\nhigh 4\nmax 17\noom 2\noom_kill 1\noom_group_kill 0\n";
    assert_int_equal(nsbox_cg_parse_keyed(events, "oom_kill", &v), 0);
    assert_int_equal(v, 1);
    assert_int_equal(nsbox_cg_parse_keyed(events, "oom", &v), 0);
    assert_int_equal(v, 2);
    assert_int_equal(nsbox_cg_parse_keyed(events, "max", &v), 0);
    assert_int_equal(v, 17);
    assert_int_equal(nsbox_cg_parse_keyed(events, "oom_k", &v), -1);

    /* v1 memory.oom_control: oom_kill_disable comes first and must not match "oom_kill". */
    const char *oomc = "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n";
    assert_int_equal(nsbox_cg_parse_keyed(oomc, "oom_kill", &v), 0);
    assert_int_equal(v, 3);
    /* Before Linux 4.13 there is no oom_kill line. */
    assert_int_equal(nsbox_cg_parse_keyed("oom_kill_disable 0\nunder_oom 0\n", "oom_kill", &v),
                     -1);

    const char *cpustat = "usage_usec 123456789\nuser_usec 100\nsystem_usec 23\n"
                          "nr_periods 0\nnr_throttled 0\nthrottled_usec 0\n";
    assert_int_equal(nsbox_cg_parse_keyed(cpustat, "usage_usec", &v), 0);
    assert_int_equal(v, 123456789);
    assert_int_equal(nsbox_cg_parse_keyed("populated 1\nfrozen 1\n", "frozen", &v), 0);
    assert_int_equal(v, 1);
    assert_int_equal(nsbox_cg_parse_keyed("frozen x\n", "frozen", &v), -1);
    assert_int_equal(nsbox_cg_parse_keyed("", "frozen", &v), -1);
}

static void test_parse_numbers(void **state)
{
    (void)state;
    uint64_t v;
    assert_int_equal(nsbox_cg_parse_u64("42\n", &v), 0);
    assert_int_equal(v, 42);
    assert_int_equal(nsbox_cg_parse_u64("18446744073709551615", &v), 0);
    assert_true(v == UINT64_MAX);
    assert_int_equal(nsbox_cg_parse_u64("18446744073709551616", &v), -1);
    assert_int_equal(nsbox_cg_parse_u64("12 13", &v), -1);
    assert_int_equal(nsbox_cg_parse_u64("", &v), -1);
    assert_int_equal(nsbox_cg_parse_u64("-1", &v), -1);

    assert_int_equal(nsbox_cg_parse_limit("max\n", &v), 0);
    assert_true(v == UINT64_MAX);
    assert_int_equal(nsbox_cg_parse_limit("9223372036854771712\n", &v), 0); /* v1 unlimited */
    assert_true(v == UINT64_MAX);
    assert_int_equal(nsbox_cg_parse_limit("-1\n", &v), 0);
    assert_true(v == UINT64_MAX);
    assert_int_equal(nsbox_cg_parse_limit("1073741824\n", &v), 0);
    assert_int_equal(v, 1073741824);
    assert_int_equal(nsbox_cg_parse_limit("maxi", &v), -1);
    assert_int_equal(nsbox_cg_parse_limit("10 k", &v), -1);
}

static void test_next_pid(void **state)
{
    (void)state;
    const char *cur = "12\n345\n";
    pid_t pid;
    assert_true(nsbox_cg_next_pid(&cur, &pid));
    assert_int_equal(pid, 12);
    assert_true(nsbox_cg_next_pid(&cur, &pid));
    assert_int_equal(pid, 345);
    assert_false(nsbox_cg_next_pid(&cur, &pid));
    /* 0 and 1 would mean "my process group" and init to kill(): never returned. */
    cur = "0\n1\n99999999999999999999\nx7\n4194304\n";
    assert_true(nsbox_cg_next_pid(&cur, &pid));
    assert_int_equal(pid, 7);
    assert_true(nsbox_cg_next_pid(&cur, &pid));
    assert_int_equal(pid, 4194304);
    assert_false(nsbox_cg_next_pid(&cur, &pid));
    cur = "";
    assert_false(nsbox_cg_next_pid(&cur, &pid));
}

static void test_format_limits(void **state)
{
    (void)state;
    char b[64];
    assert_int_equal(nsbox_cg_fmt_cpu_max(2, b, sizeof b), 0);
    assert_string_equal(b, "200000 100000");
    assert_int_equal(nsbox_cg_fmt_cpu_max(1, b, sizeof b), 0);
    assert_string_equal(b, "100000 100000");
    assert_int_equal(nsbox_cg_fmt_cpu_max(0, b, sizeof b), 0);
    assert_string_equal(b, "max 100000");
    /* cpus * period does not overflow 32 bits. */
    assert_int_equal(nsbox_cg_fmt_cpu_max(UINT32_MAX, b, sizeof b), 0);
    assert_string_equal(b, "429496729500000 100000");
    assert_int_equal(nsbox_cg_fmt_cfs_quota(4, b, sizeof b), 0);
    assert_string_equal(b, "400000");
    assert_int_equal(nsbox_cg_fmt_cfs_quota(0, b, sizeof b), 0);
    assert_string_equal(b, "-1");
    assert_int_equal(nsbox_cg_fmt_limit(0, 2, b, sizeof b), 0);
    assert_string_equal(b, "max");
    assert_int_equal(nsbox_cg_fmt_limit(0, 1, b, sizeof b), 0);
    assert_string_equal(b, "-1");
    assert_int_equal(nsbox_cg_fmt_limit(4ull << 30, 2, b, sizeof b), 0);
    assert_string_equal(b, "4294967296");
    assert_int_equal(nsbox_cg_fmt_limit(1024, 1, b, sizeof b), 0);
    assert_string_equal(b, "1024");
    char tiny[5];
    assert_int_equal(nsbox_cg_fmt_cpu_max(2, tiny, sizeof tiny), -1);
    assert_int_equal(errno, ENOSPC);
}

static void test_ids_and_paths(void **state)
{
    (void)state;
    assert_true(nsbox_cg_valid_id("abc"));
    assert_true(nsbox_cg_valid_id("a1b2-c3.d_4"));
    assert_true(nsbox_cg_valid_id("0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"));
    const char *bad[] = {"",   "../x", "a/b", ".x", "-x", "a b", "x\n", "..",
                         "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdefX"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_false(nsbox_cg_valid_id(bad[i]));
    assert_false(nsbox_cg_valid_id(NULL));
    assert_true(nsbox_cg_is_sandbox_name("nsbox-0123456789ab"));
    assert_false(nsbox_cg_is_sandbox_name("nsbox.freezer-hold"));
    assert_false(nsbox_cg_is_sandbox_name("nsbox-"));
    assert_false(nsbox_cg_is_sandbox_name("other-0123456789ab"));

    char p[PATH_MAX];
    assert_int_equal(nsbox_cg_join(p, sizeof p, "/sys/fs/cgroup", "/", "nsbox-x"), 0);
    assert_string_equal(p, "/sys/fs/cgroup/nsbox-x");
    assert_int_equal(nsbox_cg_join(p, sizeof p, "/sys/fs/cgroup/", "/a/b", NULL), 0);
    assert_string_equal(p, "/sys/fs/cgroup/a/b");
    assert_int_equal(nsbox_cg_join(p, sizeof p, "/r", NULL, "f"), 0);
    assert_string_equal(p, "/r/f");
    assert_int_equal(nsbox_cg_join(p, 8, "/sys/fs/cgroup", NULL, "f"), -1);
    assert_int_equal(errno, ENAMETOOLONG);

    assert_int_equal(nsbox_cg_normalize_parent("/nsbox", NULL, p, sizeof p), 0);
    assert_string_equal(p, "/nsbox");
    assert_int_equal(nsbox_cg_normalize_parent("/a//b/", NULL, p, sizeof p), 0);
    assert_string_equal(p, "/a/b");
    assert_int_equal(nsbox_cg_normalize_parent("/", NULL, p, sizeof p), 0);
    assert_string_equal(p, "/");
    assert_int_equal(nsbox_cg_normalize_parent("/sys/fs/cgroup/u/x", "/sys/fs/cgroup", p, sizeof p),
                     0);
    assert_string_equal(p, "/u/x");
    assert_int_equal(nsbox_cg_normalize_parent("/sys/fs/cgroup", "/sys/fs/cgroup", p, sizeof p), 0);
    assert_string_equal(p, "/");
    assert_int_equal(nsbox_cg_normalize_parent("/sys/fs/cgroupx", "/sys/fs/cgroup", p, sizeof p),
                     0);
    assert_string_equal(p, "/sys/fs/cgroupx");
    assert_int_equal(nsbox_cg_normalize_parent("nsbox", NULL, p, sizeof p), -1);
    assert_int_equal(nsbox_cg_normalize_parent("/a/../../etc", NULL, p, sizeof p), -1);
    assert_int_equal(nsbox_cg_normalize_parent("/a/./b", NULL, p, sizeof p), -1);
    assert_int_equal(nsbox_cg_normalize_parent("", NULL, p, sizeof p), -1);
}

static void test_mountinfo_root(void **state)
{
    (void)state;
    const char *mi =
        "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n"
        "35 24 0:30 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 "
        "rw,nsdelegate\n"
        "40 24 0:31 /docker/abc /sys/fs/cgroup ro,nosuid - cgroup2 cgroup rw\n"
        "41 24 0:32 /x\\040y /mnt/with\\040space rw - tmpfs t rw\n"
        "42 24 0:33 /a\\011b /sys/fs/cgroup/tab rw - cgroup2 cgroup rw\n";
    char root[PATH_MAX];
    /* The later mount on the same point hides the earlier one. */
    assert_int_equal(nsbox_cg_mountinfo_root(mi, "/sys/fs/cgroup", root, sizeof root), 0);
    assert_string_equal(root, "/docker/abc");
    assert_int_equal(nsbox_cg_mountinfo_root(mi, "/mnt/with space", root, sizeof root), 0);
    assert_string_equal(root, "/x y");
    /* a cgroup's name may hold a control character: kept, as /proc/self/cgroup shows it */
    assert_int_equal(nsbox_cg_mountinfo_root(mi, "/sys/fs/cgroup/tab", root, sizeof root), 0);
    assert_string_equal(root, "/a\tb");
    assert_int_equal(nsbox_cg_mountinfo_root(mi, "/nope", root, sizeof root), -1);
    assert_int_equal(errno, ENOENT);

    char rel[PATH_MAX];
    assert_int_equal(nsbox_cg_strip_root("/docker/abc/sub", "/docker/abc", rel, sizeof rel), 0);
    assert_string_equal(rel, "/sub");
    assert_int_equal(nsbox_cg_strip_root("/docker/abc", "/docker/abc", rel, sizeof rel), 0);
    assert_string_equal(rel, "/");
    assert_int_equal(nsbox_cg_strip_root("/x", "/", rel, sizeof rel), 0);
    assert_string_equal(rel, "/x");
    assert_int_equal(nsbox_cg_strip_root("/docker/abcd", "/docker/abc", rel, sizeof rel), -1);
}

/* ---- v1 on the fake tree ------------------------------------------------------------------- */

/* This machine's layout: hybrid, memory below a per-process cgroup, the rest at the root. */
static void make_v1(bool comount_cpu, bool with_pids)
{
    g_version = 1;
    char self[512];
    snprintf(self, sizeof self, "9:name=systemd:/\n%s6:freezer:/\n4:memory:/process_api/abc\n%s"
                                "0::/\n",
             with_pids ? "8:pids:/\n" : "", comount_cpu ? "3:cpu,cpuacct:/\n" : "1:cpu:/\n2:cpuacct:/\n");
    wfile(g_self, self);
    const char *dirs[] = {"memory", "pids", "freezer", "unified", "systemd"};
    char p[PATH_MAX];
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
        if (!with_pids && strcmp(dirs[i], "pids") == 0)
            continue;
        pj(p, g_root, dirs[i]);
        assert_int_equal(mkdir(p, 0755), 0);
    }
    if (comount_cpu) {
        pj(p, g_root, "cpu,cpuacct");
        assert_int_equal(mkdir(p, 0755), 0);
        pj(p, g_root, "cpu");
        assert_int_equal(symlink("cpu,cpuacct", p), 0);
        pj(p, g_root, "cpuacct");
        assert_int_equal(symlink("cpu,cpuacct", p), 0);
    } else {
        pj(p, g_root, "cpu");
        assert_int_equal(mkdir(p, 0755), 0);
        pj(p, g_root, "cpuacct");
        assert_int_equal(mkdir(p, 0755), 0);
    }
    pj(p, g_root, "unified");
    mkfile_in(p, "cgroup.controllers", ""); /* hybrid: v2 mounted, no controllers */
    snprintf(p, sizeof p, "%s/memory/process_api", g_root);
    assert_int_equal(mkdir(p, 0755), 0);
    snprintf(p, sizeof p, "%s/memory/process_api/abc", g_root);
    assert_int_equal(mkdir(p, 0755), 0);
    mkfile_in(p, "memory.memsw.limit_in_bytes", "9223372036854771712\n");
    nsbox_cgroup_set_sys(&g_fake);
}

static void test_v1_detect_hybrid(void **state)
{
    (void)state;
    make_v1(false, true);
    struct nsbox_cgroup_support sup;
    nsbox_cgroup_detect(&sup);
    assert_int_equal(sup.version, 1);
    assert_true(sup.memory && sup.cpu && sup.pids && sup.freezer && sup.swap && sup.writable);
    char want[PATH_MAX];
    snprintf(want, sizeof want, "%s/memory/process_api/abc", g_root);
    assert_string_equal(sup.parent, want);
    assert_string_equal(sup.why, "");
}

static void test_v1_missing_pids(void **state)
{
    (void)state;
    make_v1(false, false);
    struct nsbox_cgroup_support sup;
    nsbox_cgroup_detect(&sup);
    assert_int_equal(sup.version, 0);
    assert_non_null(strstr(sup.why, "pids"));
    assert_null(strstr(sup.why, "memory"));
}

static void test_v1_create_attach_freeze_destroy(void **state)
{
    (void)state;
    make_v1(false, true);
    struct nsbox_cgroup cg;
    struct nsbox_err e = {0};
    assert_int_equal(nsbox_cgroup_create("v1box", &k_lim, &cg, &e), 0);
    assert_int_equal(cg.version, 1);
    assert_int_equal(cg.dirfd, -1);
    assert_int_equal(cg.n_v1, 5);
    const char *order[] = {"memory", "cpu", "pids", "cpuacct", "freezer"};
    for (size_t i = 0; i < 5; i++) {
        assert_string_equal(cg.v1[i].controller, order[i]);
        assert_true(exists(cg.v1[i].path));
    }
    char want[PATH_MAX];
    snprintf(want, sizeof want, "%s/memory/process_api/abc/nsbox-v1box", g_root);
    assert_string_equal(cg.v1[0].path, want);
    snprintf(want, sizeof want, "%s/pids/nsbox-v1box", g_root);
    assert_string_equal(cg.v1[2].path, want);
    /* memory before memsw (the fake kernel refuses memsw < memory), period before quota. */
    assert_string_equal(g_log, "memory.limit_in_bytes=1073741824;"
                               "memory.memsw.limit_in_bytes=1073741824;"
                               "cpu.cfs_period_us=100000;cpu.cfs_quota_us=200000;pids.max=100;");

    g_log[0] = '\0';
    assert_int_equal(nsbox_cgroup_attach(&cg, 55, &e), 0);
    assert_string_equal(g_log, "cgroup.procs=55;cgroup.procs=55;cgroup.procs=55;cgroup.procs=55;"
                               "cgroup.procs=55;");

    struct nsbox_cgroup_stats st;
    mkfile_in(cg.v1[0].path, "memory.usage_in_bytes", "4096\n");
    mkfile_in(cg.v1[0].path, "memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 4\n");
    mkfile_in(cg.v1[3].path, "cpuacct.usage", "5000000\n");
    mkfile_in(cg.v1[2].path, "pids.current", "1\n");
    assert_int_equal(nsbox_cgroup_stats(&cg, &st, &e), 0);
    assert_int_equal(st.memory_current, 4096);
    assert_int_equal(st.memory_limit, 1ull << 30);
    assert_int_equal(st.oom_kills, 4);
    assert_int_equal(st.pids_current, 1);
    assert_int_equal(st.pids_limit, 100);
    assert_int_equal(st.cpu_usage_usec, 5000);
    assert_false(st.frozen);
    assert_int_equal(nsbox_cgroup_freeze(&cg, true, &e), 0);
    assert_int_equal(nsbox_cgroup_stats(&cg, &st, &e), 0);
    assert_true(st.frozen);
    assert_int_equal(nsbox_cgroup_freeze(&cg, false, &e), 0);

    struct nsbox_cgroup copy = cg;
    /* 55 is a fork bomb that forks whenever it is hit unfrozen: the unfrozen first round
     * (reading each hierarchy's list in turn) kills a few generations, the next round freezes
     * first and ends it. */
    g_fork_parent = 55;
    g_fork_child = 56;
    assert_int_equal(nsbox_cgroup_destroy(&cg, &e), 0);
    assert_true(g_nkilled >= 2);
    assert_int_equal(g_killed[0], 55);
    assert_false(g_kill_frozen[0]);
    assert_true(g_kill_frozen[g_nkilled - 1]);
    assert_int_equal(g_killed[g_nkilled - 1], g_fork_parent); /* the last generation */
    for (size_t i = 0; i < 5; i++)
        assert_false(exists(copy.v1[i].path));
    assert_int_equal(cg.version, 0);
    assert_int_equal(nsbox_cgroup_destroy(&cg, &e), 0);
}

static void test_v1_comounted_and_rollback(void **state)
{
    (void)state;
    make_v1(true, true);
    struct nsbox_cgroup cg;
    struct nsbox_err e = {0};
    assert_int_equal(nsbox_cgroup_create("co", &k_lim, &cg, &e), 0);
    assert_int_equal(cg.n_v1, 4); /* cpu,cpuacct once */
    assert_string_equal(cg.v1[1].controller, "cpu,cpuacct");
    assert_int_equal(nsbox_cgroup_destroy(&cg, &e), 0);

    /* A quota above the parent's: EINVAL names the file, and nothing is left. */
    snprintf(g_fail_file, sizeof g_fail_file, "cpu.cfs_quota_us");
    g_fail_errno = EINVAL;
    assert_int_equal(nsbox_cgroup_create("co", &k_lim, &cg, &e), -1);
    assert_non_null(strstr(e.msg, "cpu.cfs_quota_us"));
    assert_non_null(strstr(e.msg, "parent"));
    assert_int_equal(cg.version, 0);
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/memory/process_api/abc/nsbox-co", g_root);
    assert_false(exists(p));
    snprintf(p, sizeof p, "%s/cpu,cpuacct/nsbox-co", g_root);
    assert_false(exists(p));
}

static void test_v1_parent_env(void **state)
{
    (void)state;
    make_v1(false, true);
    const char *h[] = {"memory", "cpu", "cpuacct", "pids", "freezer"};
    char p[PATH_MAX];
    for (size_t i = 0; i < 5; i++) {
        snprintf(p, sizeof p, "%s/%s/deleg", g_root, h[i]);
        assert_int_equal(mkdir(p, 0755), 0);
    }
    /* Hybrid: the configured parent exists in the v1 hierarchies, not in the empty v2 one,
     * and that must not make v2 look like the answer. */
    setenv("NSBOX_CGROUP_PARENT", "/deleg", 1);
    nsbox_cgroup_set_sys(&g_fake);
    struct nsbox_cgroup_support sup;
    nsbox_cgroup_detect(&sup);
    assert_int_equal(sup.version, 1);
    assert_true(sup.memory && sup.cpu && sup.pids && sup.freezer);
    snprintf(p, sizeof p, "%s/memory/deleg", g_root);
    assert_string_equal(sup.parent, p);
    struct nsbox_cgroup cg;
    struct nsbox_err e = {0};
    assert_int_equal(nsbox_cgroup_create("d1", &k_lim, &cg, &e), 0);
    snprintf(p, sizeof p, "%s/pids/deleg/nsbox-d1", g_root);
    assert_string_equal(cg.v1[2].path, p);
    assert_int_equal(nsbox_cgroup_destroy(&cg, &e), 0);
    assert_false(exists(p));

    /* Missing in one hierarchy: named, with the fix. */
    snprintf(p, sizeof p, "%s/freezer/deleg", g_root);
    assert_int_equal(rmdir(p), 0);
    nsbox_cgroup_set_sys(&g_fake);
    nsbox_cgroup_detect(&sup);
    assert_false(sup.memory);
    assert_non_null(strstr(sup.why, "NSBOX_CGROUP_PARENT=/deleg"));
    assert_non_null(strstr(sup.why, p));
}

static void test_v1_remove_by_id(void **state)
{
    (void)state;
    make_v1(false, true);
    struct nsbox_cgroup cg;
    struct nsbox_err e = {0};
    assert_int_equal(nsbox_cgroup_create("gc1", &k_lim, &cg, &e), 0);
    assert_int_equal(nsbox_cgroup_attach(&cg, 77, &e), 0);
    assert_int_equal(nsbox_cgroup_remove_by_id("gc1", &e), 0);
    for (size_t i = 0; i < cg.n_v1; i++)
        assert_false(exists(cg.v1[i].path));
    assert_int_equal(g_killed[0], 77);
}

/* A listed process that ends, and whose pid a host process takes, before destroy's kill round
 * holds that pid: the host process is not signalled (kill(2) of each listed pid reached it),
 * the one still listed is. */
static void test_v1_destroy_skips_a_reused_pid(void **state)
{
    (void)state;
    make_v1(false, true);
    struct nsbox_cgroup cg;
    struct nsbox_err e = {0};
    assert_int_equal(nsbox_cgroup_create("r1", &k_lim, &cg, &e), 0);
    assert_int_equal(nsbox_cgroup_attach(&cg, 77, &e), 0);
    assert_int_equal(nsbox_cgroup_attach(&cg, 78, &e), 0);
    struct nsbox_cgroup copy = cg;
    g_reused_pid = 77;
    assert_int_equal(nsbox_cgroup_destroy(&cg, &e), 0);
    assert_int_equal(g_host_signalled, 0);
    assert_int_equal(g_nkilled, 1);
    assert_int_equal(g_killed[0], 78);
    for (size_t i = 0; i < copy.n_v1; i++)
        assert_false(exists(copy.v1[i].path));
}

/* A sandbox with the given pids, the copy of its cgroup for the checks after destroy. */
static void make_box(const char *id, const pid_t *pids, size_t n, struct nsbox_cgroup *cg,
                     struct nsbox_cgroup *copy)
{
    struct nsbox_err e = {0};
    assert_int_equal(nsbox_cgroup_create(id, &k_lim, cg, &e), 0);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(nsbox_cgroup_attach(cg, pids[i], &e), 0);
    *copy = *cg;
}

static bool was_killed(pid_t pid, bool *frozen)
{
    for (size_t i = 0; i < g_nkilled; i++)
        if (g_killed[i] == pid) {
            if (frozen)
                *frozen = g_kill_frozen[i];
            return true;
        }
    return false;
}

static void assert_removed(const struct nsbox_cgroup *copy)
{
    for (size_t i = 0; i < copy->n_v1; i++)
        assert_false(exists(copy->v1[i].path));
}

/* A kernel without pidfd_open (before Linux 5.3), or a seccomp filter that refuses it: kill(2)
 * stands in, only in a frozen round, where a listed pid cannot have been given to another. */
static void test_v1_destroy_without_pidfds(void **state)
{
    (void)state;
    static const pid_t pids[] = {77, 78, 79};
    struct nsbox_cgroup cg, copy;
    struct nsbox_err e = {0};
    make_v1(false, true);
    make_box("np", pids, 3, &cg, &copy);
    g_pidfd_errno = ENOSYS;
    assert_int_equal(nsbox_cgroup_destroy(&cg, &e), 0);
    assert_int_equal(g_nkilled, 3);
    for (size_t i = 0; i < g_nkilled; i++)
        assert_true(g_kill_frozen[i]);
    assert_removed(&copy);

    /* kill --all, frozen first: the same; unfrozen, an error that says why */
    make_box("np2", pids, 2, &cg, &copy);
    g_nkilled = 0;
    g_pidfd_errno = EPERM;
    assert_int_equal(nsbox_cgroup_signal_all(&cg, 0, SIGKILL, &e), -1);
    assert_int_equal(g_nkilled, 0);
    assert_non_null(strstr(e.msg, "cannot signal pid 77: pidfd_open"));
    assert_int_equal(e.sys_errno, EPERM);
    assert_int_equal(nsbox_cgroup_freeze(&cg, true, &e), 0);
    assert_int_equal(nsbox_cgroup_signal_all(&cg, 0, SIGKILL, &e), 0);
    assert_int_equal(g_nkilled, 2);
    assert_true(g_kill_frozen[0] && g_kill_frozen[1]);
    assert_int_equal(nsbox_cgroup_freeze(&cg, false, &e), 0);
    assert_int_equal(nsbox_cgroup_destroy(&cg, &e), 0);
}

/* Without pidfds, round 0 (unfrozen) fails every pid at pidfd_open; a later, frozen round
 * signals them all with kill(2). One in uninterruptible sleep outlives them: the timeout names
 * that, the last round's outcome, not round 0's ENOSYS. */
static void test_v1_destroy_timeout_names_last_round(void **state)
{
    (void)state;
    static const pid_t pids[] = {81, 82, 83};
    struct nsbox_cgroup cg, copy;
    struct nsbox_err e = {0};
    make_v1(false, true);
    make_box("lr", pids, 3, &cg, &copy);
    g_pidfd_errno = ENOSYS;
    g_stuck_pid = 82;
    assert_int_equal(nsbox_cgroup_destroy(&cg, &e), -1);
    assert_int_equal(e.code, NSBOX_E_TIMEOUT);
    assert_non_null(strstr(e.msg, "stuck in uninterruptible sleep?"));
    assert_null(strstr(e.msg, "pidfd_open"));
    bool frozen = false;
    assert_true(was_killed(81, &frozen) && frozen);
    assert_true(was_killed(82, &frozen) && frozen);
}

/* A freezer asked to freeze that never gets there (a task in uninterruptible sleep keeps v1 at
 * FREEZING): kill(2) cannot stand in, and the error says so rather than pidfd_open's ENOSYS. */
static void test_v1_destroy_freeze_stuck(void **state)
{
    (void)state;
    static const pid_t pids[] = {84, 85};
    struct nsbox_cgroup cg, copy;
    struct nsbox_err e = {0};
    make_v1(false, true);
    make_box("fs", pids, 2, &cg, &copy);
    g_pidfd_errno = ENOSYS;
    g_freeze_stuck = true;
    assert_int_equal(nsbox_cgroup_destroy(&cg, &e), -1);
    assert_int_equal(e.code, NSBOX_E_TIMEOUT);
    assert_non_null(strstr(e.msg, "cannot signal pid 84: the cgroup did not freeze"));
    assert_int_equal(g_nkilled, 0);
}

/* The list gone between its two reads (a child cgroup removed once empty): everyone is gone,
 * which is no failure. */
static void test_v1_signal_list_gone(void **state)
{
    (void)state;
    static const pid_t pids[] = {86, 87};
    struct nsbox_cgroup cg, copy;
    struct nsbox_err e = {0};
    make_v1(false, true);
    make_box("lg", pids, 2, &cg, &copy);
    pj(g_vanish, cg.v1[0].path, "cgroup.procs");
    assert_int_equal(nsbox_cgroup_signal_all(&cg, 0, SIGKILL, &e), 0);
    assert_int_equal(g_nkilled, 0);
}

/* The lowest descriptor free now: RLIMIT_NOFILE at it + k leaves k to open. */
static int lowest_free_fd(void)
{
    int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    close(fd);
    return fd;
}

/* A supervisor with few descriptors left (RLIMIT_NOFILE not raised): the pidfds that fit are
 * signalled, the rest in smaller batches; none at all, kill(2) in a frozen round. */
static void test_v1_destroy_short_of_descriptors(void **state)
{
    (void)state;
    static const pid_t pids[] = {71, 72, 73, 74, 75, 76, 77, 78};
    struct rlimit old;
    assert_int_equal(getrlimit(RLIMIT_NOFILE, &old), 0);
    make_v1(false, true);
    /* one descriptor: the list's first read, then a pidfd given back for the second read */
    for (rlim_t k = 1; k <= 3; k++) {
        struct nsbox_cgroup cg, copy;
        struct nsbox_err e = {0};
        make_box(k == 1 ? "fd1" : k == 2 ? "fd2" : "fd3", pids, 8, &cg, &copy);
        g_nkilled = 0;
        g_nofile = (rlim_t)lowest_free_fd() + k;
        struct rlimit lim = {.rlim_cur = g_nofile, .rlim_max = old.rlim_max};
        assert_int_equal(setrlimit(RLIMIT_NOFILE, &lim), 0);
        int r = nsbox_cgroup_destroy(&cg, &e);
        g_nofile = 0;
        assert_int_equal(setrlimit(RLIMIT_NOFILE, &old), 0);
        assert_int_equal(r, 0);
        assert_int_equal(g_nkilled, 8);
        for (size_t i = 0; i < 8; i++) {
            bool frozen = false;
            assert_true(was_killed(pids[i], &frozen));
            /* with 1, a pidfd and the list's second read do not both fit: kill(2), frozen; with
             * 2 and more they do: pidfds, the first (unfrozen) round */
            assert_int_equal(frozen, k < 2);
        }
        assert_removed(&copy);
    }
}

/* One process that cannot be signalled does not spare the others; the failure is the error,
 * and destroy's when that process outlives the kill rounds. */
static void test_v1_signal_error_spares_none(void **state)
{
    (void)state;
    static const pid_t pids[] = {55, 66, 77};
    struct nsbox_cgroup cg, copy;
    struct nsbox_err e = {0};
    make_v1(false, true);
    make_box("se", pids, 3, &cg, &copy);
    g_send_fail_pid = 66;
    g_send_fail_errno = EPERM;
    g_send_fail_times = -1;
    assert_int_equal(nsbox_cgroup_signal_all(&cg, 0, SIGKILL, &e), -1);
    assert_non_null(strstr(e.msg, "cannot signal pid 66"));
    assert_int_equal(e.sys_errno, EPERM);
    assert_true(was_killed(55, NULL) && was_killed(77, NULL));
    assert_false(was_killed(66, NULL));

    e = (struct nsbox_err){0};
    assert_int_equal(nsbox_cgroup_destroy(&cg, &e), -1);
    assert_int_equal(e.code, NSBOX_E_TIMEOUT);
    assert_non_null(strstr(e.msg, "still has processes"));
    assert_non_null(strstr(e.msg, "cannot signal pid 66: pidfd_send_signal"));
    assert_null(strstr(e.msg, "uninterruptible"));

    /* Once: the memory hierarchy's list fails it, the next hierarchy's list, in the same
     * (unfrozen) round, signals it. */
    g_send_fail_times = 1;
    g_nkilled = 0;
    assert_int_equal(nsbox_cgroup_destroy(&cg, &e), 0);
    bool frozen = true;
    assert_true(was_killed(66, &frozen));
    assert_false(frozen);
    assert_removed(&copy);
}

static int pid_cmp(const void *a, const void *b)
{
    pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;
    return (x > y) - (x < y);
}

/* kill --all signals the whole list, however long: 300 pids past the 16,384 that one procs
 * message of nsbox-oci's monitor holds (oci/ocimon.c), so that a kill bounded by that list
 * leaves some unsignalled here; in batches of 256 pidfds, each process once, init (skip) not. The list is written at once, and the signalled stay listed (g_kill_listed): a
 * list of thousands written again at each attach and kill would cost the fake minutes. */
static void test_v1_kill_all_every_process(void **state)
{
    (void)state;
    enum { N = 16384 + 300, FIRST = 20000 };
    static pid_t killed[N];
    static char list[N * 8];
    size_t o = 0;
    for (size_t i = 0; i < N; i++)
        o += (size_t)snprintf(list + o, sizeof list - o, "%d\n", (int)(FIRST + i));
    struct nsbox_cgroup cg, copy;
    struct nsbox_err e = {0};
    make_v1(false, true);
    make_box("ka", NULL, 0, &cg, &copy);
    char procs[PATH_MAX];
    for (size_t h = 0; h < cg.n_v1; h++) {
        pj(procs, cg.v1[h].path, "cgroup.procs");
        wfile(procs, list);
    }
    pid_t first[4];
    assert_int_equal(nsbox_cgroup_pids(&cg, first, 4, &e), N);
    assert_int_equal(nsbox_cgroup_freeze(&cg, true, &e), 0);
    g_kill_listed = true;
    g_nkilled = 0;
    assert_int_equal(nsbox_cgroup_signal_all(&cg, FIRST, SIGKILL, &e), 0);
    assert_int_equal(g_nkilled, N - 1);
    memcpy(killed, g_killed, (N - 1) * sizeof *killed);
    qsort(killed, N - 1, sizeof *killed, pid_cmp);
    for (size_t i = 1; i < N; i++)
        assert_int_equal(killed[i - 1], FIRST + (pid_t)i);
    assert_int_equal(nsbox_cgroup_freeze(&cg, false, &e), 0);
    for (size_t h = 0; h < cg.n_v1; h++) { /* and then they are gone */
        pj(procs, cg.v1[h].path, "cgroup.procs");
        wfile(procs, "");
    }
    assert_int_equal(nsbox_cgroup_destroy(&cg, &e), 0);
}

/* A process forked while kill --all signals (the freeze failed, so its parent still ran): the
 * list is read again, and the child, which the first reading did not list, has its signal. */
static void test_v1_kill_all_reads_the_list_again(void **state)
{
    (void)state;
    static const pid_t pids[] = {200, 201, 202};
    struct nsbox_cgroup cg, copy;
    struct nsbox_err e = {0};
    make_v1(false, true);
    make_box("kr", pids, 3, &cg, &copy);
    g_fork_parent = 201; /* not frozen: its kill forks 300 (which forks 301 when hit...) */
    g_fork_child = 300;
    g_nkilled = 0;
    assert_int_equal(nsbox_cgroup_signal_all(&cg, 0, SIGKILL, &e), 0);
    assert_true(g_nkilled >= 4);
    /* the first reading's three, then the child, in the next */
    pid_t round1[3];
    memcpy(round1, g_killed, sizeof round1);
    qsort(round1, 3, sizeof *round1, pid_cmp);
    assert_memory_equal(round1, pids, sizeof round1);
    assert_int_equal(g_killed[3], 300);
    assert_false(g_kill_frozen[3]);
    g_fork_parent = 0;
    assert_int_equal(nsbox_cgroup_destroy(&cg, &e), 0);
    assert_removed(&copy);
}

/* The v1 freezer's hold (docs/cgroups.md): an empty cgroup, frozen when a sandbox first
 * freezes, kept while a sandbox is beside it, removed with the last one, and by gc's sweep
 * when a killed supervisor left it. */
static void assert_hold(const char *hold, bool present)
{
    assert_int_equal(exists(hold), present);
    if (!present)
        return;
    char st[PATH_MAX];
    pj(st, hold, "freezer.state");
    const char *s = rfile(st);
    assert_non_null(s);
    assert_string_equal(s, "FROZEN");
}

static void test_v1_freezer_hold(void **state)
{
    (void)state;
    make_v1(false, true);
    struct nsbox_cgroup a, b;
    struct nsbox_err e = {0};
    char hold[PATH_MAX];
    snprintf(hold, sizeof hold, "%s/freezer/nsbox.freezer-hold", g_root);
    assert_int_equal(nsbox_cgroup_create("ha", &k_lim, &a, &e), 0);
    assert_int_equal(nsbox_cgroup_create("hb", &k_lim, &b, &e), 0);
    /* each with its init, as live sandboxes: gc's sweep below must not take them for orphans
     * once the clock has passed the second they were made in */
    assert_int_equal(nsbox_cgroup_attach(&a, 77, &e), 0);
    assert_int_equal(nsbox_cgroup_attach(&b, 78, &e), 0);
    assert_hold(hold, false); /* nothing has slept yet */
    assert_int_equal(nsbox_cgroup_freeze(&a, true, &e), 0);
    assert_hold(hold, true);
    assert_int_equal(nsbox_cgroup_freeze(&a, false, &e), 0);
    assert_hold(hold, true); /* a thaw leaves it frozen */
    assert_int_equal(nsbox_cgroup_sweep_orphans(0), 0);
    assert_hold(hold, true); /* gc keeps it beside sandboxes */
    assert_int_equal(nsbox_cgroup_destroy(&a, &e), 0);
    assert_hold(hold, true); /* hb is still there */
    assert_int_equal(nsbox_cgroup_destroy(&b, &e), 0);
    assert_hold(hold, false); /* gone with the last one */

    /* Left by a supervisor killed before its teardown, with no sandbox beside it. */
    assert_int_equal(mkdir(hold, 0755), 0);
    mkfile_in(hold, "freezer.state", "FROZEN");
    mkfile_in(hold, "cgroup.procs", "");
    assert_int_equal(nsbox_cgroup_sweep_orphans(0), 0);
    assert_hold(hold, false);
}


/* nsbox-oci update: new limits for a running sandbox, memsw kept equal to memory in the order
 * the kernel accepts (a raise writes memsw first), a removed limit as v1 spells it; and the
 * cgroup's pids, from its first hierarchy. */
static void test_v1_update_and_pids(void **state)
{
    (void)state;
    make_v1(true, true);
    struct nsbox_cgroup cg;
    struct nsbox_err e = {0};
    assert_int_equal(nsbox_cgroup_create("up", &k_lim, &cg, &e), 0);
    g_log[0] = '\0';
    struct nsbox_cgroup_update u = {.has_memory = true, .memory_bytes = 2ull << 30};
    assert_int_equal(nsbox_cgroup_update(&cg, &u, &e), 0);
    assert_string_equal(g_log, "memory.limit_in_bytes=2147483648;"
                               "memory.memsw.limit_in_bytes=2147483648;"
                               "memory.limit_in_bytes=2147483648;");
    g_log[0] = '\0';
    u = (struct nsbox_cgroup_update){.has_memory = true, .memory_bytes = 1ull << 29,
                                     .has_cpu = true, .cpu_quota_us = 50000,
                                     .cpu_period_us = 200000, .has_pids = true, .pids = 0};
    assert_int_equal(nsbox_cgroup_update(&cg, &u, &e), 0);
    assert_string_equal(g_log, "memory.limit_in_bytes=536870912;"
                               "memory.memsw.limit_in_bytes=536870912;"
                               "cpu.cfs_period_us=200000;cpu.cfs_quota_us=50000;pids.max=max;");
    g_log[0] = '\0';
    u = (struct nsbox_cgroup_update){.has_cpu = true, .has_memory = true};
    assert_int_equal(nsbox_cgroup_update(&cg, &u, &e), 0); /* no limits: -1, period kept */
    assert_string_equal(g_log, "memory.limit_in_bytes=-1;memory.memsw.limit_in_bytes=-1;"
                               "memory.limit_in_bytes=-1;cpu.cfs_quota_us=-1;");
    snprintf(g_fail_file, sizeof g_fail_file, "pids.max");
    g_fail_errno = EINVAL;
    u = (struct nsbox_cgroup_update){.has_pids = true, .pids = 5};
    assert_int_equal(nsbox_cgroup_update(&cg, &u, &e), -1);
    assert_non_null(strstr(e.msg, "pids.max"));
    g_fail_file[0] = '\0';

    assert_int_equal(nsbox_cgroup_attach(&cg, 55, &e), 0);
    assert_int_equal(nsbox_cgroup_attach(&cg, 66, &e), 0);
    pid_t pids[4];
    assert_int_equal(nsbox_cgroup_pids(&cg, pids, 4, &e), 2);
    assert_int_equal(pids[0], 55);
    assert_int_equal(pids[1], 66);
    assert_int_equal(nsbox_cgroup_pids(&cg, pids, 1, &e), 2);
    /* a list longer than max: its first max, in the file's order, the rest neither copied nor
     * sorted, and how many it has, which says the list was cut */
    assert_int_equal(nsbox_cgroup_attach(&cg, 44, &e), 0);
    assert_int_equal(nsbox_cgroup_attach(&cg, 33, &e), 0);
    pids[3] = -1;
    assert_int_equal(nsbox_cgroup_pids(&cg, pids, 3, &e), 4);
    assert_int_equal(pids[0], 55);
    assert_int_equal(pids[1], 66);
    assert_int_equal(pids[2], 44);
    assert_int_equal(pids[3], -1);
    assert_int_equal(nsbox_cgroup_destroy(&cg, &e), 0);
    struct nsbox_cgroup none;
    nsbox_cgroup_init(&none);
    assert_int_equal(nsbox_cgroup_update(&none, &u, &e), -1);
    assert_int_equal(nsbox_cgroup_pids(&none, pids, 4, &e), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_self_v1),
        cmocka_unit_test(test_parse_self_v2),
        cmocka_unit_test(test_parse_self_mixed_and_bad),
        cmocka_unit_test(test_list_and_missing),
        cmocka_unit_test(test_parse_keyed),
        cmocka_unit_test(test_parse_numbers),
        cmocka_unit_test(test_next_pid),
        cmocka_unit_test(test_format_limits),
        cmocka_unit_test(test_ids_and_paths),
        cmocka_unit_test(test_mountinfo_root),
        cmocka_unit_test_setup_teardown(test_v1_detect_hybrid, setup_tree, teardown_tree),
        cmocka_unit_test_setup_teardown(test_v1_missing_pids, setup_tree, teardown_tree),
        cmocka_unit_test_setup_teardown(test_v1_create_attach_freeze_destroy, setup_tree,
                                        teardown_tree),
        cmocka_unit_test_setup_teardown(test_v1_comounted_and_rollback, setup_tree, teardown_tree),
        cmocka_unit_test_setup_teardown(test_v1_parent_env, setup_tree, teardown_tree),
        cmocka_unit_test_setup_teardown(test_v1_remove_by_id, setup_tree, teardown_tree),
        cmocka_unit_test_setup_teardown(test_v1_destroy_skips_a_reused_pid, setup_tree,
                                        teardown_tree),
        cmocka_unit_test_setup_teardown(test_v1_destroy_without_pidfds, setup_tree, teardown_tree),
        cmocka_unit_test_setup_teardown(test_v1_destroy_short_of_descriptors, setup_tree,
                                        teardown_tree),
        cmocka_unit_test_setup_teardown(test_v1_signal_error_spares_none, setup_tree,
                                        teardown_tree),
        cmocka_unit_test_setup_teardown(test_v1_destroy_timeout_names_last_round, setup_tree,
                                        teardown_tree),
        cmocka_unit_test_setup_teardown(test_v1_destroy_freeze_stuck, setup_tree, teardown_tree),
        cmocka_unit_test_setup_teardown(test_v1_kill_all_every_process, setup_tree, teardown_tree),
        cmocka_unit_test_setup_teardown(test_v1_kill_all_reads_the_list_again, setup_tree,
                                        teardown_tree),
        cmocka_unit_test_setup_teardown(test_v1_signal_list_gone, setup_tree, teardown_tree),
        cmocka_unit_test_setup_teardown(test_v1_freezer_hold, setup_tree, teardown_tree),
        cmocka_unit_test_setup_teardown(test_v1_update_and_pids, setup_tree, teardown_tree),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
