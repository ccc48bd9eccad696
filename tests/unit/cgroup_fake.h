/* The fake cgroup "kernel" of the cgroup tests (test_cgroup.c: v1; test_cgroup_v2.c: v2): a
 * cgroup tree in a temp dir behind the nsbox_cg_sys seam (test_cgroup.c tells its rules). */
#ifndef NSBOX_TESTS_CGROUP_FAKE_H
#define NSBOX_TESTS_CGROUP_FAKE_H
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
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#define CGROUP2_MAGIC 0x63677270ul
#define CGROUP1_MAGIC 0x27e0ebul
#define TMPFS_MAGIC 0x01021994ul

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
/* the fake's lists hold up to FAKE_PROCS pids, and it records as many kills: more than the
 * 16,384 of one procs message of nsbox-oci's monitor (PIDS_MAX, oci/ocimon.c), so that a kill
 * --all cut at that bound shows in a test */
#define FAKE_PROCS 20000
static pid_t g_killed[FAKE_PROCS];
static size_t g_nkilled;
static bool g_kill_frozen[FAKE_PROCS];  /* whether the cgroup was frozen at each kill() */
static pid_t g_fork_parent;     /* killing this pid while not frozen "forks" g_fork_child */
static pid_t g_fork_child;
static pid_t g_stuck_pid;     /* in uninterruptible sleep: a kill() leaves it where it is */
static bool g_kill_listed;    /* a killed process stays listed (exiting, not yet gone): a list
                               * of thousands is not written again at each kill */
static bool g_freeze_stuck;   /* the v1 freezer never gets from FREEZING to FROZEN */
static char g_vanish[PATH_MAX]; /* removed at the first pidfd_open: a list gone between reads */
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
    static char buf[FAKE_PROCS * 8];
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
        if (nsbox_cg_list_has(enabled, "cpu")) {
            mkfile_in(path, "cpu.max", "max 100000\n");
            mkfile_in(path, "cpu.weight", "100\n");
        }
        if (nsbox_cg_list_has(enabled, "cpuset")) {
            mkfile_in(path, "cpuset.cpus", "");
            mkfile_in(path, "cpuset.mems", "");
        }
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
    if (in_hier(path, "cpu") || in_hier(path, "cpu,cpuacct"))
        mkfile_in(path, "cpu.shares", "1024\n");
    if (in_hier(path, "cpuset")) { /* a new cpuset has none until it is given some */
        mkfile_in(path, "cpuset.cpus", "");
        mkfile_in(path, "cpuset.mems", "");
    }
    if (in_hier(path, "devices")) {
        mkfile_in(path, "devices.allow", "");
        mkfile_in(path, "devices.deny", "");
    }
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
        static char buf[FAKE_PROCS * 8];
        snprintf(buf, sizeof buf, "%s%s\n", cur ? cur : "", val);
        wfile(path, buf);
        return 0;
    }
    if (strcmp(base, "cgroup.kill") == 0) {
        clear_procs_tree(dir); /* everybody in the subtree dies, at once */
        return 0;
    }
    if (g_freeze_stuck && strcmp(base, "freezer.state") == 0 && strcmp(val, "FROZEN") == 0) {
        wfile(path, "FREEZING");
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
            static char out[FAKE_PROCS * 8];
            out[0] = '\0';
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

/* RLIMIT_NOFILE's soft limit a test set (0: none). The fake kernel's own files (the walks of
 * its tree) are not the caller's, as the kernel's are not: it lifts the limit meanwhile. */
static rlim_t g_nofile;
static void fake_nofile(bool lift)
{
    if (!g_nofile)
        return;
    struct rlimit r;
    assert_int_equal(getrlimit(RLIMIT_NOFILE, &r), 0);
    r.rlim_cur = lift ? r.rlim_max : g_nofile;
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &r), 0);
}

static int fake_kill(pid_t pid, int sig)
{
    assert_int_equal(sig, SIGKILL);
    fake_nofile(true);
    bool frozen = any_frozen_under(g_root);
    if (g_nkilled < FAKE_PROCS) {
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
    if (pid != g_stuck_pid && !g_kill_listed)
        drop_pid_under(g_root, pid, child);
    fake_nofile(false);
    return 0;
}

/* A pidfd of the fake is a descriptor of /dev/null (closed as a real one is) that remembers its
 * pid. g_reused_pid is a listed process that ends and whose pid a host process takes just before
 * the pidfd is opened: it leaves every cgroup.procs, and the pidfd holds the host's process. */
#define FAKE_PIDFDS 1024
static pid_t g_pidfd_pid[FAKE_PIDFDS];
static pid_t g_reused_pid;
static pid_t g_host_signalled; /* a signal that reached the host process of g_reused_pid */
static int g_pidfd_errno;      /* every pidfd_open fails with it (ENOSYS: before Linux 5.3) */
static pid_t g_send_fail_pid;  /* pidfd_send_signal to it fails with g_send_fail_errno... */
static int g_send_fail_errno;
static int g_send_fail_times; /* ...this many times (-1: always) */
static int fake_pidfd_open(pid_t pid)
{
    if (g_vanish[0]) {
        unlink(g_vanish);
        g_vanish[0] = '\0';
    }
    if (g_pidfd_errno) {
        errno = g_pidfd_errno;
        return -1;
    }
    int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1; /* EMFILE under a test's RLIMIT_NOFILE, as the kernel's would */
    assert_true(fd < FAKE_PIDFDS);
    if (pid == g_reused_pid) {
        drop_pid_under(g_root, pid, 0);
        g_pidfd_pid[fd] = -pid;
    } else {
        g_pidfd_pid[fd] = pid;
    }
    return fd;
}

static int fake_pidfd_send_signal(int fd, int sig)
{
    assert_true(fd >= 0 && fd < FAKE_PIDFDS && g_pidfd_pid[fd] != 0);
    if (g_send_fail_pid && g_pidfd_pid[fd] == g_send_fail_pid && g_send_fail_times != 0) {
        if (g_send_fail_times > 0)
            g_send_fail_times--;
        errno = g_send_fail_errno;
        return -1;
    }
    if (g_pidfd_pid[fd] < 0) {
        g_host_signalled = -g_pidfd_pid[fd];
        return 0;
    }
    return fake_kill(g_pidfd_pid[fd], sig);
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
    .pidfd_open = fake_pidfd_open,
    .pidfd_send_signal = fake_pidfd_send_signal,
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
    g_stuck_pid = 0;
    g_kill_listed = false;
    g_freeze_stuck = false;
    g_vanish[0] = '\0';
    g_reused_pid = g_host_signalled = 0;
    g_pidfd_errno = 0;
    g_nofile = 0;
    g_send_fail_pid = 0;
    g_send_fail_errno = g_send_fail_times = 0;
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

static const struct nsbox_limits k_lim = {.cpus = 2, .memory_bytes = 1ull << 30, .pids = 100};

/* A unified tree: the caller lives in /user.slice/u.scope, which may enable ctl for children. */
__attribute__((unused)) static void make_v2(const char *ctl, const char *own_procs)
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

#endif
