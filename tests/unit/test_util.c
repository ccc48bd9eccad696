/* Command-line numbers shared by run, exec, wait, kill and logs (os/util.h). */
#include "paths.h"
#include "text.h"
#include "util.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <pthread.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void test_seconds(void **state)
{
    (void)state;
    uint64_t ms = 7;
    assert_int_equal(nsbox_parse_seconds("1.5", 10, &ms), 0);
    assert_int_equal(ms, 1500);
    assert_int_equal(nsbox_parse_seconds("0", 10, &ms), 0);
    assert_int_equal(ms, 0);
    /* below a millisecond rounds up: a timeout, not none (it was 0: no timeout) */
    assert_int_equal(nsbox_parse_seconds("0.0004", 10, &ms), 0);
    assert_int_equal(ms, 1);
    assert_int_equal(nsbox_parse_seconds("0.0000", 10, &ms), 0);
    assert_int_equal(ms, 0);
    assert_int_equal(nsbox_parse_seconds("2.25", 10, &ms), 0);
    assert_int_equal(ms, 2250);
    assert_int_equal(nsbox_parse_seconds("0.1234", 10, &ms), 0);
    assert_int_equal(ms, 124);
    assert_int_equal(nsbox_parse_seconds("10", 10, &ms), 0);
    assert_int_equal(ms, 10000);
    assert_int_equal(nsbox_parse_seconds("10.000", 10, &ms), 0);
    assert_int_equal(ms, 10000);
    assert_int_equal(nsbox_parse_seconds("31536000", 31536000, &ms), 0);
    assert_int_equal(ms, 31536000000ull);
    static const char *const bad[] = {"", "nan", "NaN", "inf", "-1", "-0.5", "1x", " ", "10.001",
                                      "1e400", "0x2", "2e0", " 2", "+2", "2 ", "1.", ".5",
                                      "10.0001", "99999999999999999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ms = 7;
        assert_int_equal(nsbox_parse_seconds(bad[i], 10, &ms), -1);
        assert_int_equal(ms, 7); /* untouched */
    }
}

static void test_pid(void **state)
{
    (void)state;
    assert_int_equal(nsbox_parse_pid("2"), 2);
    assert_int_equal(nsbox_parse_pid("4194304"), 4194304);
    static const char *const bad[] = {"", "1", "0", "-5", "12x", "x12", "4194305",
                                      "99999999999999999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(nsbox_parse_pid(bad[i]), -1);
}

static void test_paths(void **state)
{
    (void)state;
    assert_true(nsbox_path_within("/proc", "/proc"));
    assert_true(nsbox_path_within("/proc/1/root", "/proc"));
    assert_false(nsbox_path_within("/procx", "/proc"));
    assert_false(nsbox_path_within("/pro", "/proc"));
    assert_false(nsbox_path_within("/", "/proc"));
    struct stat st;
    assert_int_equal(stat("/", &st), 0);
    assert_true(nsbox_is_host_root(&st));
    assert_int_equal(stat("/tmp", &st), 0);
    assert_false(nsbox_is_host_root(&st));
}

/* Every path in the image store is made by one function: below the data directory's images,
 * and refused whole, never cut, when it does not fit. */
static void test_image_store_paths(void **state)
{
    (void)state;
    char data[] = "/tmp/nsbox-test-util-XXXXXX", out[PATH_MAX];
    assert_non_null(mkdtemp(data));
    setenv("NSBOX_DATA_DIR", data, 1);
    struct nsbox_err e = {0};
    char want[PATH_MAX];
    assert_int_equal(nsbox_paths_images(out, sizeof out, &e, "%s", ""), 0);
    snprintf(want, sizeof want, "%s/images", data);
    assert_string_equal(out, want);
    assert_int_equal(nsbox_paths_images(out, sizeof out, &e, "/%s/rootfs", "debian"), 0);
    snprintf(want, sizeof want, "%s/images/debian/rootfs", data);
    assert_string_equal(out, want);
    char small[sizeof data + 8]; /* room for "<data>/images" but not for a name after it */
    assert_int_equal(nsbox_paths_images(small, sizeof small, &e, "/%s", "debian"), -1);
    assert_int_equal(e.sys_errno, ENAMETOOLONG);
    assert_string_equal(e.msg, "data directory path too long");
    char name[PATH_MAX];
    memset(name, 'n', sizeof name - 1);
    name[sizeof name - 1] = '\0';
    assert_int_equal(nsbox_paths_images(out, sizeof out, &e, "/%s", name), -1);
    assert_int_equal(e.sys_errno, ENAMETOOLONG);
    unsetenv("NSBOX_DATA_DIR");
    assert_int_equal(rmdir(data), 0); /* nothing made in it */
}

/* echoed user text (include/nsbox.h): bounded, no control characters (no forged lines or
 * escapes) */
static void test_shown(void **state)
{
    (void)state;
    assert_string_equal(NSBOX_SHOW("abc"), "abc");
    assert_string_equal(NSBOX_SHOW("a\033[31mred\nFAKE\x7f"), "a?[31mred?FAKE?");
    /* C1 raw and as UTF-8 (CSI), and an overlong ESC: '?' each, printable UTF-8 kept */
    assert_string_equal(NSBOX_SHOW("\x9b" "2J\xc2\x9b" "2J\xc0\x9b\xc3\xa9\xe2\x86\x92"),
                        "?2J?2J??\xc3\xa9\xe2\x86\x92");
    char long_[5001];
    memset(long_, 'x', sizeof long_ - 1);
    long_[sizeof long_ - 1] = '\0';
    struct nsbox_shown out = nsbox_show(long_);
    assert_int_equal(strlen(out.s), 67);
    assert_string_equal(out.s + 64, "...");
    long_[64] = '\0'; /* exactly 64: whole, no dots */
    assert_string_equal(NSBOX_SHOW(long_), long_);
    assert_string_equal(NSBOX_SHOW(NULL), "(null)");
}

/* The directories on the way are made at least passable: a first nsbox_paths_mkdir_p of
 * /run/nsbox/uids made /run/nsbox 0700, and other users could not tell that an id there was a
 * sandbox of root's. */
static void test_mkdir_p_modes(void **state)
{
    (void)state;
    char base[] = "/tmp/nsbox-test-mkdir-XXXXXX", path[256];
    assert_non_null(mkdtemp(base));
    mode_t old = umask(022);
    struct nsbox_err e = {0};
    snprintf(path, sizeof path, "%s/run/nsbox/uids", base);
    assert_int_equal(nsbox_paths_mkdir_p(path, 0700, &e), 0);
    struct stat st;
    const struct {
        const char *rel;
        mode_t mode;
    } want[] = {{"run", 0711}, {"run/nsbox", 0711}, {"run/nsbox/uids", 0700}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", base, want[i].rel);
        assert_int_equal(stat(path, &st), 0);
        if ((st.st_mode & 07777) != want[i].mode)
            fail_msg("%s: %o, not %o", want[i].rel, st.st_mode & 07777, want[i].mode);
    }
    snprintf(path, sizeof path, "%s/img/a", base); /* a wider mode stays as wide on the way */
    assert_int_equal(nsbox_paths_mkdir_p(path, 0755, &e), 0);
    snprintf(path, sizeof path, "%s/img", base);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0755);
    umask(old);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", base);
    assert_int_equal(system(cmd), 0);
}

static void assert_refused(int fd, int err)
{
    if (fd >= 0)
        close(fd);
    assert_int_equal(fd, -1);
    assert_int_equal(errno, err);
}

/* nsbox_open_dir, as the engine's layers, volumes and a root's set-id candidates are opened:
 * no symlink on the way (ELOOP), never out of the directory given (EXDEV), a magic link never,
 * not even where symlinks below the directory are allowed. */
static void test_open_dir(void **state)
{
    (void)state;
    char base[] = "/tmp/nsbox-test-opendir-XXXXXX", p[256];
    assert_non_null(mkdtemp(base));
    snprintf(p, sizeof p, "%s/a/b", base);
    struct nsbox_err e = {0};
    assert_int_equal(nsbox_paths_mkdir_p(p, 0700, &e), 0);
    const char *links[][2] = {{"link", "a"}, {"out", "/"}, {"up", ".."}, {"file", NULL}};
    for (size_t i = 0; i < sizeof links / sizeof links[0]; i++) {
        snprintf(p, sizeof p, "%s/%s", base, links[i][0]);
        int fd = links[i][1] ? symlink(links[i][1], p) : open(p, O_CREAT | O_WRONLY, 0600);
        assert_true(fd >= 0);
        if (!links[i][1])
            close(fd);
    }
    snprintf(p, sizeof p, "%s/a/b", base);
    int fd = nsbox_open_dir(-1, p, 0);
    assert_true(fd >= 0);
    struct stat want, got;
    assert_int_equal(fstat(fd, &want), 0);
    close(fd);
    snprintf(p, sizeof p, "%s/link/b", base);
    assert_refused(nsbox_open_dir(-1, p, 0), ELOOP);
    assert_refused(nsbox_open_dir(-1, p, NSBOX_OPEN_DIR_LINKS), ELOOP); /* only below a dir */
    int dir = nsbox_open_dir(-1, base, 0);
    assert_true(dir >= 0);
    fd = nsbox_open_dir(dir, "a/b", 0);
    assert_true(fd >= 0);
    close(fd);
    assert_refused(nsbox_open_dir(dir, "..", 0), EXDEV);
    assert_refused(nsbox_open_dir(dir, "link/b", 0), ELOOP);
    assert_refused(nsbox_open_dir(dir, "file", 0), ENOTDIR);
    fd = nsbox_open_dir(dir, "link/b", NSBOX_OPEN_DIR_LINKS);
    assert_true(fd >= 0);
    assert_int_equal(fstat(fd, &got), 0);
    assert_true(got.st_ino == want.st_ino && got.st_dev == want.st_dev);
    close(fd);
    assert_refused(nsbox_open_dir(dir, "out", NSBOX_OPEN_DIR_LINKS), EXDEV);
    assert_refused(nsbox_open_dir(dir, "up", NSBOX_OPEN_DIR_LINKS), EXDEV);
    close(dir);
    /* a magic link (/proc/PID/cwd leads wherever the process is) */
    int proc = nsbox_open_dir(-1, "/proc", 0);
    assert_true(proc >= 0);
    snprintf(p, sizeof p, "%d/cwd", (int)getpid());
    assert_refused(nsbox_open_dir(proc, p, NSBOX_OPEN_DIR_LINKS), ELOOP);
    close(proc);
    /* a mount crossed, where the caller asks for none */
    int root = nsbox_open_dir(-1, "/", 0);
    assert_true(root >= 0);
    fd = nsbox_open_dir(root, "proc", 0);
    assert_true(fd >= 0);
    close(fd);
    assert_refused(nsbox_open_dir(root, "proc", RESOLVE_NO_XDEV), EXDEV);
    close(root);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", base);
    assert_int_equal(system(cmd), 0);
}

static mode_t mode_of(int fd)
{
    struct stat st;
    assert_int_equal(fstat(fd, &st), 0);
    return st.st_mode & 07777;
}

/* stdin's pipe readable by others, stdout's and stderr's writable, nothing else: a command
 * that reopened its stdin for writing put data in the caller's pipe. */
static void test_share_pipes_one_way(void **state)
{
    (void)state;
    int in[2], out[2], err[2];
    assert_int_equal(pipe(in), 0);
    assert_int_equal(pipe(out), 0);
    assert_int_equal(pipe(err), 0);
    assert_int_equal(fchmod(in[0], 0600), 0);
    assert_int_equal(fchmod(out[1], 0600), 0);
    assert_int_equal(fchmod(err[1], 0666), 0);
    /* stdout's pipe locked by another holder (its other end): waited for briefly, then
     * changed all the same */
    assert_int_equal(flock(out[0], LOCK_EX | LOCK_NB), 0);
    nsbox_share_pipes((int[]){in[0], out[1], err[1]});
    assert_int_equal(mode_of(in[0]), 0644);
    assert_int_equal(mode_of(out[1]), 0622);
    assert_int_equal(mode_of(err[1]), 0666); /* bits are only added */
    /* the pipe between two nsbox (one's stdout, the other's stdin) gets both */
    nsbox_share_pipes((int[]){out[0], -1, -1});
    assert_int_equal(mode_of(out[0]), 0666);
    /* a file is not a pipe: untouched */
    char path[] = "/tmp/nsbox-test-share-XXXXXX";
    int f = mkstemp(path);
    assert_true(f >= 0);
    unlink(path);
    assert_int_equal(fchmod(f, 0600), 0);
    nsbox_share_pipes((int[]){f, f, f});
    assert_int_equal(mode_of(f), 0600);
    int all[] = {in[0], in[1], out[0], out[1], err[0], err[1], f};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        close(all[i]);
}

/* In a child: the highest descriptors the hard RLIMIT_NOFILE allows (raised to 70002 where
 * CAP_SYS_RESOURCE allows: above 65536, where the supervisor's soft limit, raised to its hard
 * one, may put them), opened before the soft limit was lowered below them, are closed where
 * close_range is missing; the kept one and those below first stay. Exit 0 if so, else which
 * check failed. */
static int close_slow_in_child(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
        return 10;
    struct rlimit want = {70002, 70002};
    if (setrlimit(RLIMIT_NOFILE, &want) == 0)
        rl = want;
    rl.rlim_cur = rl.rlim_max;
    if (rl.rlim_max < 2048 || rl.rlim_max > INT_MAX || setrlimit(RLIMIT_NOFILE, &rl) < 0)
        return 11;
    int top = (int)rl.rlim_max - 1, p[2];
    if (pipe(p) < 0 || dup2(p[0], top) < 0 || dup2(p[0], top - 1) < 0 || dup2(p[0], top - 2) < 0 ||
        dup2(p[0], 40) < 0 || dup2(p[0], 3) < 0)
        return 12;
    rl.rlim_cur = 1024;
    if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
        return 13;
    nsbox_close_fds_slow(4, (int[]){top - 2}, 1);
    if (fcntl(top, F_GETFD) != -1 || errno != EBADF)
        return 1;
    if (fcntl(top - 1, F_GETFD) != -1 || fcntl(40, F_GETFD) != -1)
        return 2;
    if (fcntl(top - 2, F_GETFD) < 0 || fcntl(3, F_GETFD) < 0 || fcntl(2, F_GETFD) < 0)
        return 3;
    return 0;
}

/* in_child run in a child, which must exit 0 (else its code names the check that failed) */
static void assert_child_passes(int (*in_child)(void))
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0)
        _exit(in_child());
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
}

static void test_close_fds_without_close_range(void **state)
{
    (void)state;
    assert_child_passes(close_slow_in_child);
}

/* In a child under a filter that refuses close_range, as a bundle's profile may, and answers
 * getdents64 with success and no entries: /proc/self/fd seems to list nothing, and the
 * descriptors are closed all the same. Exit 0 if so, else which check failed. */
static int close_faked_listing_in_child(void)
{
    int p[2];
    if (pipe(p) < 0 || dup2(p[0], 50) < 0 || dup2(p[0], 51) < 0)
        return 10;
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
    if (!ctx || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
        seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(close_range), 0) < 0 ||
        seccomp_rule_add(ctx, SCMP_ACT_ERRNO(0), SCMP_SYS(getdents64), 0) < 0 ||
        seccomp_load(ctx) < 0)
        return 11;
    seccomp_release(ctx);
    nsbox_close_fds_keep_from(4, (int[]){51}, 1);
    if (fcntl(50, F_GETFD) != -1 || errno != EBADF)
        return 1;
    if (fcntl(p[1], F_GETFD) != -1)
        return 2;
    if (fcntl(51, F_GETFD) < 0 || fcntl(2, F_GETFD) < 0)
        return 3;
    return 0;
}

static void test_close_fds_with_a_faked_listing(void **state)
{
    (void)state;
    assert_child_passes(close_faked_listing_in_child);
}

static void *parked(void *arg)
{
    (void)arg;
    for (;;)
        pause(); /* a cancellation point */
    return NULL;
}

/* The sandbox's init is a raw clone of `nsbox run`, whose relay threads may have been created
 * just before: on one CPU, a thread just created has not run yet when its creator clones. With
 * glibc's setresuid the clone waited forever for that thread (it does not exist there); the
 * ids are changed in the clone, and for the calling thread only. */
static void test_set_ids_in_a_clone_of_a_threaded_process(void **state)
{
    (void)state;
    uid_t uid = getuid() ? getuid() : 65534;
    gid_t gid = getuid() ? getgid() : 65534;
    cpu_set_t old, one;
    assert_int_equal(sched_getaffinity(0, sizeof old, &old), 0);
    int cpu = sched_getcpu();
    CPU_ZERO(&one);
    CPU_SET(cpu < 0 ? 0 : cpu, &one);
    assert_int_equal(sched_setaffinity(0, sizeof one, &one), 0);
    for (int round = 0; round < 5; round++) {
        pthread_t t;
        assert_int_equal(pthread_create(&t, NULL, parked, NULL), 0);
        pid_t pid = (pid_t)syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0);
        if (pid == 0) {
            uid_t r, e, s;
            gid_t gr, ge, gs;
            bool ok = nsbox_set_ids(uid, gid) == 0 && getresuid(&r, &e, &s) == 0 &&
                      getresgid(&gr, &ge, &gs) == 0 && r == uid && e == uid && s == uid &&
                      gr == gid && ge == gid && gs == gid;
            _exit(ok ? 0 : 1);
        }
        assert_true(pid > 0);
        int status = -1;
        for (int i = 0; i < 500 && waitpid(pid, &status, WNOHANG) == 0; i++) {
            struct timespec ms10 = {0, 10 * 1000 * 1000};
            nanosleep(&ms10, NULL);
        }
        if (status == -1) {
            kill(pid, SIGKILL);
            waitpid(pid, NULL, 0);
        }
        pthread_cancel(t);
        pthread_join(t, NULL);
        if (status == -1)
            fail_msg("round %d: the clone's id change did not return within 5 s", round);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);
    }
    assert_int_equal(sched_setaffinity(0, sizeof old, &old), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_seconds),
        cmocka_unit_test(test_pid),
        cmocka_unit_test(test_paths),
        cmocka_unit_test(test_image_store_paths),
        cmocka_unit_test(test_open_dir),
        cmocka_unit_test(test_mkdir_p_modes),
        cmocka_unit_test(test_shown),
        cmocka_unit_test(test_share_pipes_one_way),
        cmocka_unit_test(test_close_fds_without_close_range),
        cmocka_unit_test(test_close_fds_with_a_faked_listing),
        cmocka_unit_test(test_set_ids_in_a_clone_of_a_threaded_process),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
