/* cgroup: the pure helpers (parsing, formatting) and the v1/v2 logic of cgroup.c run against a
 * fake cgroup tree in a temp dir. The fake "kernel" (mkdir creates the interface files, writes
 * obey the rules that matter: subtree_control's no-internal-process rule, memsw >= memory,
 * rmdir of a populated cgroup is EBUSY) is behind the nsbox_cg_sys seam. No root needed; the
 * real kernel is exercised by test_cgroup_live. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "cgroup.h"
#include "cgroup_util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CGROUP2_MAGIC 0x63677270ul
#define CGROUP1_MAGIC 0x27e0ebul
#define TMPFS_MAGIC 0x01021994ul

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
        "41 24 0:32 /x\\040y /mnt/with\\040space rw - tmpfs t rw\n";
    char root[PATH_MAX];
    /* The later mount on the same point hides the earlier one. */
    assert_int_equal(nsbox_cg_mountinfo_root(mi, "/sys/fs/cgroup", root, sizeof root), 0);
    assert_string_equal(root, "/docker/abc");
    assert_int_equal(nsbox_cg_mountinfo_root(mi, "/mnt/with space", root, sizeof root), 0);
    assert_string_equal(root, "/x y");
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

/* ---- the fake kernel ----------------------------------------------------------------------- */

static char g_tmp[PATH_MAX];  /* temp dir */
static char g_root[PATH_MAX]; /* fake /sys/fs/cgroup */
static char g_self[PATH_MAX]; /* fake /proc/self/cgroup */
static char g_mi[PATH_MAX];   /* fake /proc/self/mountinfo */
static int g_version;         /* 2: unified layout; 1: hybrid (v1 + empty unified) */
static bool g_has_kill = true, g_has_swap = true;
static char g_fail_file[64];
static int g_fail_errno;
static char g_log[8192]; /* "file=value;" for every write, in order */
static pid_t g_killed[64];
static size_t g_nkilled;
static bool g_kill_frozen[64];  /* whether the cgroup was frozen at each kill() */
static pid_t g_fork_parent;     /* killing this pid while not frozen "forks" g_fork_child */
static pid_t g_fork_child;
static int g_magic_calls;

static void wfile(const char *path, const char *content)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(content, f);
    fclose(f);
}

static char *rfile(const char *path)
{
    static char buf[4096];
    buf[0] = '\0';
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static bool exists(const char *path)
{
    return access(path, F_OK) == 0;
}

static void pj(char *out, const char *a, const char *b)
{
    snprintf(out, PATH_MAX, "%s/%s", a, b);
}

static void mkfile_in(const char *dir, const char *name, const char *content)
{
    char p[PATH_MAX];
    pj(p, dir, name);
    wfile(p, content);
}

static int fake_magic(const char *path, unsigned long *magic)
{
    g_magic_calls++;
    size_t rl = strlen(g_root);
    if (strcmp(path, g_root) == 0) {
        *magic = g_version == 2 ? CGROUP2_MAGIC : TMPFS_MAGIC;
        return 0;
    }
    if (strncmp(path, g_root, rl) == 0 && path[rl] == '/' && g_version == 1) {
        *magic = strcmp(path + rl + 1, "unified") == 0 ? CGROUP2_MAGIC : CGROUP1_MAGIC;
        if (!exists(path)) {
            errno = ENOENT;
            return -1;
        }
        return 0;
    }
    *magic = TMPFS_MAGIC;
    return 0;
}

static bool in_hier(const char *path, const char *h)
{
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/%s/", g_root, h);
    return strncmp(path, p, strlen(p)) == 0;
}

static int fake_mkdir(const char *path, mode_t mode)
{
    if (mkdir(path, mode) < 0)
        return -1;
    mkfile_in(path, "cgroup.procs", "");
    if (g_version == 2) {
        /* A child gets the interface files of the controllers its parent enables. */
        char parent[PATH_MAX], sub[PATH_MAX];
        snprintf(parent, sizeof parent, "%s", path);
        *strrchr(parent, '/') = '\0';
        pj(sub, parent, "cgroup.subtree_control");
        char *en = rfile(sub);
        char enabled[256];
        snprintf(enabled, sizeof enabled, "%s", en ? en : "");
        mkfile_in(path, "cgroup.controllers", enabled);
        mkfile_in(path, "cgroup.subtree_control", "");
        mkfile_in(path, "cgroup.events", "populated 0\nfrozen 0\n");
        mkfile_in(path, "cgroup.freeze", "0\n");
        mkfile_in(path, "cpu.stat", "usage_usec 0\nuser_usec 0\nsystem_usec 0\n");
        if (g_has_kill)
            mkfile_in(path, "cgroup.kill", "");
        if (nsbox_cg_list_has(enabled, "memory")) {
            mkfile_in(path, "memory.max", "max\n");
            mkfile_in(path, "memory.current", "0\n");
            mkfile_in(path, "memory.peak", "0\n");
            mkfile_in(path, "memory.events", "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\n");
            if (g_has_swap)
                mkfile_in(path, "memory.swap.max", "max\n");
        }
        if (nsbox_cg_list_has(enabled, "cpu"))
            mkfile_in(path, "cpu.max", "max 100000\n");
        if (nsbox_cg_list_has(enabled, "pids")) {
            mkfile_in(path, "pids.max", "max\n");
            mkfile_in(path, "pids.current", "0\n");
        }
        return 0;
    }
    mkfile_in(path, "tasks", "");
    if (in_hier(path, "memory")) {
        mkfile_in(path, "memory.limit_in_bytes", "9223372036854771712\n");
        if (g_has_swap)
            mkfile_in(path, "memory.memsw.limit_in_bytes", "9223372036854771712\n");
        mkfile_in(path, "memory.usage_in_bytes", "0\n");
        mkfile_in(path, "memory.max_usage_in_bytes", "0\n");
        mkfile_in(path, "memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 0\n");
    }
    if (in_hier(path, "cpu") || in_hier(path, "cpu,cpuacct")) {
        mkfile_in(path, "cpu.cfs_period_us", "100000\n");
        mkfile_in(path, "cpu.cfs_quota_us", "-1\n");
    }
    if (in_hier(path, "cpuacct") || in_hier(path, "cpu,cpuacct"))
        mkfile_in(path, "cpuacct.usage", "0\n");
    if (in_hier(path, "pids")) {
        mkfile_in(path, "pids.max", "max\n");
        mkfile_in(path, "pids.current", "0\n");
    }
    if (in_hier(path, "freezer"))
        mkfile_in(path, "freezer.state", "THAWED\n");
    return 0;
}

/* The kernel refuses to remove a populated cgroup or one with children; otherwise the
 * interface files go with the directory. */
static int fake_rmdir(const char *path)
{
    char p[PATH_MAX];
    pj(p, path, "cgroup.procs");
    char *procs = rfile(p);
    if (!procs) {
        if (!exists(path)) {
            errno = ENOENT;
            return -1;
        }
    } else if (procs[0]) {
        errno = EBUSY;
        return -1;
    }
    DIR *d = opendir(path);
    if (!d)
        return -1;
    struct dirent *de;
    while ((de = readdir(d)))
        if (de->d_type == DT_DIR && strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) {
            closedir(d);
            errno = EBUSY;
            return -1;
        }
    rewinddir(d);
    while ((de = readdir(d)))
        if (de->d_type == DT_REG)
            unlinkat(dirfd(d), de->d_name, 0);
    closedir(d);
    return rmdir(path);
}

static void resolve(int dirfd, const char *name, char *out)
{
    if (dirfd == AT_FDCWD) {
        snprintf(out, PATH_MAX, "%s", name);
        return;
    }
    char link[64], dir[PATH_MAX];
    snprintf(link, sizeof link, "/proc/self/fd/%d", dirfd);
    ssize_t n = readlink(link, dir, sizeof dir - 1);
    assert_true(n > 0);
    dir[n] = '\0';
    pj(out, dir, name);
}

static uint64_t file_u64(const char *path)
{
    char *s = rfile(path);
    if (!s || strncmp(s, "max", 3) == 0 || strncmp(s, "-1", 2) == 0 || s[0] == '9')
        return UINT64_MAX;
    return strtoull(s, NULL, 10);
}

static void clear_procs_tree(const char *dir)
{
    char p[PATH_MAX];
    pj(p, dir, "cgroup.procs");
    wfile(p, "");
    DIR *d = opendir(dir);
    assert_non_null(d);
    struct dirent *de;
    while ((de = readdir(d)))
        if (de->d_type == DT_DIR && strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) {
            pj(p, dir, de->d_name);
            clear_procs_tree(p);
        }
    closedir(d);
}

static int fake_write(int dirfd, const char *name, const char *data, size_t len)
{
    char path[PATH_MAX], dir[PATH_MAX], val[256];
    resolve(dirfd, name, path);
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    *slash = '\0';
    const char *base = slash + 1;
    snprintf(val, sizeof val, "%.*s", (int)len, data);
    if (!exists(path)) {
        errno = ENOENT;
        return -1;
    }
    size_t used = strlen(g_log);
    snprintf(g_log + used, sizeof g_log - used, "%s=%s;", base, val);
    if (g_fail_file[0] && strcmp(base, g_fail_file) == 0) {
        errno = g_fail_errno;
        return -1;
    }
    char p[PATH_MAX];
    if (strcmp(base, "cgroup.subtree_control") == 0) {
        pj(p, dir, "cgroup.procs");
        char *procs = rfile(p);
        if (strcmp(dir, g_root) != 0 && procs && procs[0]) {
            errno = EBUSY; /* the no-internal-process rule */
            return -1;
        }
        pj(p, dir, "cgroup.controllers");
        char avail[256];
        snprintf(avail, sizeof avail, "%s", rfile(p));
        char cur[256];
        snprintf(cur, sizeof cur, "%s", rfile(path));
        char *save = NULL;
        for (char *tok = strtok_r(val, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
            if (tok[0] != '+' || !nsbox_cg_list_has(avail, tok + 1)) {
                errno = ENOENT;
                return -1;
            }
            size_t cl = strlen(cur);
            snprintf(cur + cl, sizeof cur - cl, "%s%s", cl ? " " : "", tok + 1);
        }
        wfile(path, cur);
        return 0;
    }
    if (strcmp(base, "cgroup.procs") == 0) {
        char *cur = rfile(path);
        char buf[1024];
        snprintf(buf, sizeof buf, "%s%s\n", cur ? cur : "", val);
        wfile(path, buf);
        return 0;
    }
    if (strcmp(base, "cgroup.kill") == 0) {
        clear_procs_tree(dir); /* everybody in the subtree dies, at once */
        return 0;
    }
    if (strcmp(base, "cgroup.freeze") == 0) {
        wfile(path, val);
        pj(p, dir, "cgroup.events");
        wfile(p, val[0] == '1' ? "populated 1\nfrozen 1\n" : "populated 1\nfrozen 0\n");
        return 0;
    }
    if (strcmp(base, "memory.memsw.limit_in_bytes") == 0) {
        pj(p, dir, "memory.limit_in_bytes");
        if (strtoull(val, NULL, 10) < file_u64(p)) {
            errno = EINVAL; /* memsw must stay >= memory */
            return -1;
        }
    }
    if (strcmp(base, "memory.limit_in_bytes") == 0) {
        pj(p, dir, "memory.memsw.limit_in_bytes");
        if (exists(p) && strtoull(val, NULL, 10) > file_u64(p)) {
            errno = EINVAL;
            return -1;
        }
    }
    wfile(path, val);
    return 0;
}

/* Find the fake cgroups that list pid and drop it from there, as its death would. With
 * fork_child, the dying process first forked that child into the same cgroups: the race a
 * kill loop without freezing can lose. */
static void drop_pid_under(const char *dir, pid_t pid, pid_t fork_child)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        char p[PATH_MAX];
        pj(p, dir, de->d_name);
        if (de->d_type == DT_DIR) {
            drop_pid_under(p, pid, fork_child);
        } else if (strcmp(de->d_name, "cgroup.procs") == 0) {
            char *cur = rfile(p);
            char out[1024] = "";
            const char *c = cur;
            pid_t x;
            bool had = false;
            while (c && nsbox_cg_next_pid(&c, &x)) {
                size_t l = strlen(out);
                if (x == pid)
                    had = true;
                else
                    snprintf(out + l, sizeof out - l, "%d\n", (int)x);
            }
            if (had && fork_child > 0) {
                size_t l = strlen(out);
                snprintf(out + l, sizeof out - l, "%d\n", (int)fork_child);
            }
            wfile(p, out);
        }
    }
    closedir(d);
}

static bool any_frozen_under(const char *dir)
{
    bool frozen = false;
    DIR *d = opendir(dir);
    if (!d)
        return false;
    struct dirent *de;
    while ((de = readdir(d)) && !frozen) {
        /* the freezer's hold is frozen for good, and holds no process */
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0 ||
            strcmp(de->d_name, "nsbox.freezer-hold") == 0)
            continue;
        char p[PATH_MAX];
        pj(p, dir, de->d_name);
        if (de->d_type == DT_DIR) {
            frozen = any_frozen_under(p);
        } else if (strcmp(de->d_name, "cgroup.freeze") == 0) {
            char *s = rfile(p);
            frozen = s && s[0] == '1';
        } else if (strcmp(de->d_name, "freezer.state") == 0) {
            char *s = rfile(p);
            frozen = s && strncmp(s, "FROZEN", 6) == 0;
        }
    }
    closedir(d);
    return frozen;
}

static int fake_kill(pid_t pid, int sig)
{
    assert_int_equal(sig, SIGKILL);
    bool frozen = any_frozen_under(g_root);
    if (g_nkilled < 64) {
        g_kill_frozen[g_nkilled] = frozen;
        g_killed[g_nkilled++] = pid;
    }
    pid_t child = 0;
    if (pid == g_fork_parent && !frozen) {
        /* A fork bomb: every process forks once more whenever it is hit while it can run. */
        child = g_fork_child;
        g_fork_parent = child;
        g_fork_child = child + 1;
    }
    drop_pid_under(g_root, pid, child);
    return 0;
}

static uid_t g_euid; /* who the fake says we are */
static uid_t fake_geteuid(void)
{
    return g_euid;
}

static struct nsbox_cg_sys g_fake = {
    .geteuid = fake_geteuid,
    .fs_magic = fake_magic,
    .mkdir = fake_mkdir,
    .rmdir = fake_rmdir,
    .write_file = fake_write,
    .kill = fake_kill,
};

static int rm_cb(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(p);
}

static void reset_globals(void)
{
    g_has_kill = g_has_swap = true;
    g_euid = 1000; /* a delegated user; tests of root's own rules say so */
    g_fail_file[0] = '\0';
    g_fail_errno = 0;
    g_log[0] = '\0';
    g_nkilled = 0;
    g_fork_parent = g_fork_child = 0;
    g_magic_calls = 0;
}

static int setup_tree(void **state)
{
    (void)state;
    reset_globals();
    unsetenv("NSBOX_CGROUP_PARENT");
    snprintf(g_tmp, sizeof g_tmp, "/tmp/nsbox-test-cgroup-XXXXXX");
    assert_non_null(mkdtemp(g_tmp));
    pj(g_root, g_tmp, "cg");
    pj(g_self, g_tmp, "self_cgroup");
    pj(g_mi, g_tmp, "mountinfo");
    assert_int_equal(mkdir(g_root, 0755), 0);
    wfile(g_mi, "");
    g_fake.root = g_root;
    g_fake.proc_self_cgroup = g_self;
    g_fake.proc_self_mountinfo = g_mi;
    nsbox_cgroup_set_sys(&g_fake);
    return 0;
}

static int teardown_tree(void **state)
{
    (void)state;
    nsbox_cgroup_set_sys(NULL);
    unsetenv("NSBOX_CGROUP_PARENT");
    nftw(g_tmp, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
    return 0;
}

/* A unified tree: the caller lives in /user.slice/u.scope, which may enable ctl for children. */
static void make_v2(const char *ctl, const char *own_procs)
{
    g_version = 2;
    wfile(g_self, "0::/user.slice/u.scope\n");
    char p[PATH_MAX], own[PATH_MAX];
    pj(p, g_root, "user.slice");
    assert_int_equal(mkdir(p, 0755), 0);
    pj(own, p, "u.scope");
    assert_int_equal(mkdir(own, 0755), 0);
    mkfile_in(g_root, "cgroup.controllers", "cpuset cpu io memory hugetlb pids\n");
    mkfile_in(own, "cgroup.controllers", ctl);
    mkfile_in(own, "cgroup.subtree_control", "");
    mkfile_in(own, "cgroup.procs", own_procs);
    mkfile_in(own, "cgroup.freeze", "0\n");
    if (g_has_swap)
        mkfile_in(own, "memory.swap.max", "max\n");
    nsbox_cgroup_set_sys(&g_fake);
}

static void own_v2(char *out, const char *leaf)
{
    snprintf(out, PATH_MAX, "%s/user.slice/u.scope%s%s", g_root, leaf ? "/" : "", leaf ? leaf : "");
}

static const struct nsbox_limits k_lim = {.cpus = 2, .memory_bytes = 1ull << 30, .pids = 100};

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
        cmocka_unit_test_setup_teardown(test_v1_detect_hybrid, setup_tree, teardown_tree),
        cmocka_unit_test_setup_teardown(test_v1_missing_pids, setup_tree, teardown_tree),
        cmocka_unit_test_setup_teardown(test_v1_create_attach_freeze_destroy, setup_tree,
                                        teardown_tree),
        cmocka_unit_test_setup_teardown(test_v1_comounted_and_rollback, setup_tree, teardown_tree),
        cmocka_unit_test_setup_teardown(test_v1_parent_env, setup_tree, teardown_tree),
        cmocka_unit_test_setup_teardown(test_v1_remove_by_id, setup_tree, teardown_tree),
        cmocka_unit_test_setup_teardown(test_v1_freezer_hold, setup_tree, teardown_tree),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
