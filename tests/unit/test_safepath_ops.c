/* Safe path resolution inside a root (rootfs/safepath.c), as test_safepath.c (which describes
 * the tree, safepath_fixture.h): crossing mounts, errors, mkdir_p, open_parent, mount targets,
 * the auto backend and the race, each once per backend. */

#include "safepath_fixture.h"

static uint64_t mnt_id_of(const char *path)
{
    struct statx stx;
    if (statx(AT_FDCWD, path, AT_SYMLINK_NOFOLLOW, STATX_MNT_ID, &stx) != 0 ||
        !(stx.stx_mask & STATX_MNT_ID))
        return 0;
    return stx.stx_mnt_id;
}

static void t_no_xdev(void **state)
{
    struct fx *f = fx_of(state);
    /* Needs two mounts to cross: the host's / and /proc. */
    uint64_t root_id = mnt_id_of("/"), proc_id = mnt_id_of("/proc");
    if (!root_id || !proc_id || root_id == proc_id || mnt_id_of("/etc") != root_id) skip();
    int slash = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
    assert_true(slash >= 0);
    struct nsbox_err e = {0};
    int fd = nsbox_sp_open(slash, "proc/self/status", O_RDONLY, 0, NSBOX_SP_NO_XDEV, &e);
    assert_int_equal(fd, -1);
    assert_int_equal(e.sys_errno, EXDEV);
    assert_non_null(strstr(e.msg, "mount point"));
    fd = nsbox_sp_open(slash, "proc", O_PATH, 0, NSBOX_SP_NO_XDEV, &e);
    assert_int_equal(fd, -1);
    assert_int_equal(e.sys_errno, EXDEV);
    fd = nsbox_sp_open(slash, "etc", O_PATH, 0, NSBOX_SP_NO_XDEV, &e);
    assert_true(fd >= 0);
    close(fd);
    fd = nsbox_sp_open(slash, "proc/self/status", O_RDONLY, 0, 0, &e);
    assert_true(fd >= 0);
    close(fd);
    close(slash);
    /* Inside the fixture nothing crosses. */
    expect_file(f, "jump/../x", O_RDONLY, NSBOX_SP_NO_XDEV, &f->d1_x);
}

static void t_errors(void **state)
{
    struct fx *f = fx_of(state);
    struct nsbox_err e = {0};
    /* A hostile name cannot put a line break or an escape sequence in the message. */
    assert_int_equal(nsbox_sp_open(f->rootfd, "no\nsuch\x1b[2J", O_RDONLY, 0, 0, &e), -1);
    assert_int_equal(e.code, NSBOX_E_NOTFOUND);
    assert_int_equal(e.sys_errno, ENOENT);
    assert_null(strchr(e.msg, '\n'));
    assert_null(strchr(e.msg, '\x1b'));
    assert_non_null(strstr(e.msg, "no?such?[2J"));
    /* ... nor a C1 control as UTF-8 (U+009B is CSI), while other UTF-8 stays */
    assert_int_equal(nsbox_sp_open(f->rootfd, "a\xc2\x9b" "2J\xc2\x9d" "0;x\xc3\xa9", O_RDONLY, 0, 0,
                                   &e),
                     -1);
    assert_null(strstr(e.msg, "\xc2\x9b"));
    assert_null(strstr(e.msg, "\xc2\x9d"));
    assert_non_null(strstr(e.msg, "a?2J?0;x\xc3\xa9"));

    assert_int_equal(nsbox_sp_open(f->rootfd, "", O_RDONLY, 0, 0, &e), -1);
    assert_int_equal(e.code, NSBOX_E_INVALID);
    assert_int_equal(nsbox_sp_open(f->rootfd, NULL, O_RDONLY, 0, 0, &e), -1);
    assert_int_equal(e.code, NSBOX_E_INVALID);
    assert_int_equal(nsbox_sp_open(-1, "x", O_RDONLY, 0, 0, &e), -1);
    assert_int_equal(e.code, NSBOX_E_INVALID);
    assert_int_equal(nsbox_sp_open(f->rootfd, "x", O_RDONLY, 0, 0x100, &e), -1);
    assert_int_equal(e.code, NSBOX_E_INVALID);
    static char longp[PATH_MAX + 8];
    memset(longp, 'a', sizeof longp - 1);
    assert_int_equal(nsbox_sp_open(f->rootfd, longp, O_RDONLY, 0, 0, &e), -1);
    assert_int_equal(e.sys_errno, ENAMETOOLONG);

    /* A root that is not a directory. */
    int file = openat(f->rootfd, "x", O_PATH | O_CLOEXEC);
    assert_true(file >= 0);
    assert_int_equal(nsbox_sp_open(file, "y", O_RDONLY, 0, 0, &e), -1);
    assert_int_equal(e.sys_errno, ENOTDIR);
    close(file);
}

static void t_mkdir_p(void **state)
{
    struct fx *f = fx_of(state);
    struct nsbox_err e = {0};
    int fd = -1;
    assert_int_equal(nsbox_sp_mkdir_p(f->rootfd, "/mk/a/b", 0750, &fd, &e), 0);
    struct stat want, st;
    stat_at(f->rootfd, "mk/a/b", &want);
    assert_true(S_ISDIR(want.st_mode));
    assert_fd_is(fd, &want);
    /* usable as a dirfd */
    assert_int_equal(mkdirat(fd, "c", 0700), 0);
    close(fd);
    /* idempotent, and `..` is clamped at the root */
    assert_int_equal(nsbox_sp_mkdir_p(f->rootfd, "../../mk/a/b/c", 0750, &fd, &e), 0);
    stat_at(f->rootfd, "mk/a/b/c", &want);
    assert_fd_is(fd, &want);
    close(fd);
    assert_int_equal(nsbox_sp_mkdir_p(f->rootfd, "mk/a/../z", 0755, NULL, &e), 0);
    stat_at(f->rootfd, "mk/z", &st);
    assert_true(S_ISDIR(st.st_mode));
    assert_int_equal(nsbox_sp_mkdir_p(f->rootfd, "/", 0755, &fd, &e), 0);
    assert_fd_is(fd, &f->root_dir);
    close(fd);

    /* Through a symlinked component: refused even when the link stays inside the root. */
    assert_int_equal(nsbox_sp_mkdir_p(f->rootfd, "jump/new", 0755, &fd, &e), -1);
    assert_int_equal(fd, -1);
    assert_int_equal(e.sys_errno, ENOTDIR);
    assert_non_null(strstr(e.msg, "'jump' is a symlink"));
    assert_int_equal(faccessat(f->rootfd, "d1/d2/new", F_OK, AT_SYMLINK_NOFOLLOW), -1);
    assert_int_equal(nsbox_sp_mkdir_p(f->rootfd, "abs_outdir/new", 0755, NULL, &e), -1);
    assert_int_equal(e.sys_errno, ENOTDIR);
    assert_int_equal(faccessat(f->basefd, "outside/new", F_OK, AT_SYMLINK_NOFOLLOW), -1);
    assert_int_equal(nsbox_sp_mkdir_p(f->rootfd, "outlink/sub/x", 0755, NULL, &e), -1);
    assert_int_equal(faccessat(f->basefd, "outside/sub/x", F_OK, AT_SYMLINK_NOFOLLOW), -1);
    /* The last component a symlink, even a dangling one. */
    assert_int_equal(nsbox_sp_mkdir_p(f->rootfd, "etclink", 0755, NULL, &e), -1);
    assert_int_equal(e.sys_errno, ENOTDIR);
    assert_int_equal(nsbox_sp_mkdir_p(f->rootfd, "dangling", 0755, NULL, &e), -1);
    assert_int_equal(e.sys_errno, ENOTDIR);
    /* A file in the way. */
    assert_int_equal(nsbox_sp_mkdir_p(f->rootfd, "etc/passwd/x", 0755, NULL, &e), -1);
    assert_int_equal(e.sys_errno, ENOTDIR);
    assert_non_null(strstr(e.msg, "'etc/passwd' exists and is not a directory"));
}

static void t_open_parent(void **state)
{
    struct fx *f = fx_of(state);
    struct nsbox_err e = {0};
    char leaf[NAME_MAX + 1];
    int fd = nsbox_sp_open_parent(f->rootfd, "d1/d2/leaf", 0, leaf, sizeof leaf, &e);
    assert_fd_is(fd, &f->d1_d2);
    assert_string_equal(leaf, "leaf");
    close(fd);
    fd = nsbox_sp_open_parent(f->rootfd, "/x", 0, leaf, sizeof leaf, &e);
    assert_fd_is(fd, &f->root_dir);
    assert_string_equal(leaf, "x");
    close(fd);
    fd = nsbox_sp_open_parent(f->rootfd, "x//", 0, leaf, sizeof leaf, &e);
    assert_fd_is(fd, &f->root_dir);
    assert_string_equal(leaf, "x");
    close(fd);
    /* The parent is resolved in the root like any path. */
    fd = nsbox_sp_open_parent(f->rootfd, "../jump/f", 0, leaf, sizeof leaf, &e);
    assert_fd_is(fd, &f->d1_d2);
    close(fd);
    fd = nsbox_sp_open_parent(f->rootfd, "abs_outdir/secret", 0, leaf, sizeof leaf, &e);
    assert_int_equal(fd, -1);
    assert_int_equal(e.code, NSBOX_E_NOTFOUND);
    fd = nsbox_sp_open_parent(f->rootfd, "jump/f", NSBOX_SP_NOFOLLOW_ANY, leaf, sizeof leaf, &e);
    assert_int_equal(fd, -1);
    assert_int_equal(e.sys_errno, ELOOP);

    /* No final name. */
    const char *bad[] = {"/", ".", "..", "a/..", "a/.", "///"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(nsbox_sp_open_parent(f->rootfd, bad[i], 0, leaf, sizeof leaf, &e), -1);
        assert_int_equal(e.code, NSBOX_E_INVALID);
    }
    char tiny[3];
    assert_int_equal(nsbox_sp_open_parent(f->rootfd, "d1/abc", 0, tiny, sizeof tiny, &e), -1);
    assert_int_equal(e.sys_errno, ENAMETOOLONG);

    /* What it is for: removing a leaf that is a symlink removes the link, not its target. */
    assert_int_equal(symlinkat("etc/passwd", f->rootfd, "d1/victim"), 0);
    fd = nsbox_sp_open_parent(f->rootfd, "d1/victim", 0, leaf, sizeof leaf, &e);
    assert_true(fd >= 0);
    assert_int_equal(unlinkat(fd, leaf, 0), 0);
    close(fd);
    struct stat st;
    stat_at(f->rootfd, "etc/passwd", &st);
    assert_true(same_inode(&st, &f->root_passwd));
}

static void t_mount_target(void **state)
{
    struct fx *f = fx_of(state);
    struct nsbox_err e = {0};
    struct stat st, want;

    int fd = nsbox_sp_mount_target(f->rootfd, "/mnt/dev/pts", true, &e);
    if (fd < 0) fail_msg("%s", e.msg);
    assert_true(fcntl(fd, F_GETFL) & O_PATH);
    stat_at(f->rootfd, "mnt/dev/pts", &want);
    assert_true(S_ISDIR(want.st_mode));
    assert_fd_is(fd, &want);
    close(fd);
    fd = nsbox_sp_mount_target(f->rootfd, "mnt/etc/resolv.conf", false, &e);
    assert_true(fd >= 0);
    stat_at(f->rootfd, "mnt/etc/resolv.conf", &want);
    assert_true(S_ISREG(want.st_mode));
    assert_int_equal(want.st_size, 0);
    assert_fd_is(fd, &want);
    close(fd);
    /* Existing targets are opened as they are. */
    fd = nsbox_sp_mount_target(f->rootfd, "etc/passwd", false, &e);
    assert_fd_is(fd, &f->root_passwd);
    close(fd);
    fd = nsbox_sp_mount_target(f->rootfd, "./etc/./", true, &e);
    assert_fd_is(fd, &f->root_etc);
    close(fd);

    /* The case from the CVEs: the image made its /dev a symlink. */
    assert_int_equal(symlinkat("/tmp", f->rootfd, "mnt/dev2"), 0);
    assert_int_equal(renameat(f->rootfd, "mnt/dev2", f->rootfd, "dev"), 0);
    fd = nsbox_sp_mount_target(f->rootfd, "/dev", true, &e);
    assert_int_equal(fd, -1);
    nsbox_err_wrap(&e, "image");
    assert_string_equal(e.msg, "image: /dev is a symlink; refusing to mount over it");
    assert_int_equal(e.sys_errno, ELOOP);
    assert_int_equal(e.code, NSBOX_E_INVALID);
    /* ... as a parent: /dev/null inside it */
    fd = nsbox_sp_mount_target(f->rootfd, "dev/null", false, &e);
    assert_int_equal(fd, -1);
    assert_string_equal(e.msg, "/dev is a symlink; refusing to mount /dev/null through it");
    /* even when it stays inside the root, and for file targets */
    assert_int_equal(nsbox_sp_mount_target(f->rootfd, "jump/x", true, &e), -1);
    assert_int_equal(faccessat(f->rootfd, "d1/d2/x", F_OK, AT_SYMLINK_NOFOLLOW), -1);
    assert_int_equal(nsbox_sp_mount_target(f->rootfd, "abs", false, &e), -1);
    assert_string_equal(e.msg, "/abs is a symlink; refusing to mount over it");
    assert_int_equal(nsbox_sp_mount_target(f->rootfd, "dangling", false, &e), -1);
    assert_int_equal(e.sys_errno, ELOOP);
    assert_int_equal(nsbox_sp_mount_target(f->rootfd, "abs_outdir/new", true, &e), -1);
    assert_int_equal(faccessat(f->basefd, "outside/new", F_OK, AT_SYMLINK_NOFOLLOW), -1);

    /* Wrong types, `..`, the root itself. */
    assert_int_equal(nsbox_sp_mount_target(f->rootfd, "etc/passwd", true, &e), -1);
    assert_int_equal(e.sys_errno, ENOTDIR);
    assert_int_equal(nsbox_sp_mount_target(f->rootfd, "etc/passwd/x", true, &e), -1);
    assert_int_equal(e.sys_errno, ENOTDIR);
    assert_int_equal(nsbox_sp_mount_target(f->rootfd, "etc", false, &e), -1);
    assert_int_equal(e.sys_errno, EISDIR);
    assert_int_equal(nsbox_sp_mount_target(f->rootfd, "mnt/../etc", true, &e), -1);
    assert_int_equal(e.code, NSBOX_E_INVALID);
    assert_int_equal(nsbox_sp_mount_target(f->rootfd, "etc/..", true, &e), -1);
    assert_int_equal(e.code, NSBOX_E_INVALID);
    assert_int_equal(nsbox_sp_mount_target(f->rootfd, "/", true, &e), -1);
    assert_int_equal(e.code, NSBOX_E_INVALID);
    assert_int_equal(nsbox_sp_mount_target(f->rootfd, "/./", true, &e), -1);
    stat_at(f->basefd, "outside", &st);
    assert_true(S_ISDIR(st.st_mode));
}

/* A classic-BPF seccomp filter: openat2 fails with EPERM, everything else is allowed. (Plain
 * BPF rather than libseccomp: policy/seccomp.h shadows <seccomp.h> on the include path.) */
static int block_openat2(void)
{
#if defined(__x86_64__)
    const unsigned arch = AUDIT_ARCH_X86_64;
#elif defined(__aarch64__)
    const unsigned arch = AUDIT_ARCH_AARCH64;
#else
    return -1;
#endif
    struct sock_filter prog[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, arch, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_openat2, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog fprog = {.len = sizeof prog / sizeof prog[0], .filter = prog};
    return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &fprog, 0, 0);
}

/* Where a seccomp filter refuses openat2 with EPERM (container runtimes' default profiles
 * did, before they knew it), AUTO must notice and use the walker, not fail every open. The
 * filter can only be added, never removed, so this runs in a child. */
static void t_auto_when_openat2_blocked(void **state)
{
    struct fx *f = fx_of(state);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || block_openat2() != 0) _exit(3);
        nsbox_sp_set_backend(NSBOX_SP_BACKEND_AUTO);
        if (nsbox_sp_have_openat2()) _exit(4);
        struct nsbox_err e = {0};
        int fd = nsbox_sp_open(f->rootfd, "../../etc/passwd", O_RDONLY, 0, 0, &e);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) != 0 || !same_inode(&st, &f->root_passwd)) _exit(5);
        fd = nsbox_sp_open(f->rootfd, "esc_out", O_RDONLY, 0, 0, &e);
        _exit(fd < 0 && e.sys_errno == ENOENT ? 0 : 6);
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    if (WEXITSTATUS(status) == 3) skip(); /* no seccomp here */
    assert_int_equal(WEXITSTATUS(status), 0);
}

/* ---- the race ------------------------------------------------------------------------------ */

struct swapper {
    int dirfd;
    const char *a, *b;
    atomic_bool *stop;
    atomic_long swaps;
};

static void *swap_loop(void *arg)
{
    struct swapper *s = arg;
    while (!atomic_load(s->stop)) {
        if (renameat2(s->dirfd, s->a, s->dirfd, s->b, RENAME_EXCHANGE) == 0)
            atomic_fetch_add(&s->swaps, 1);
    }
    return NULL;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void t_race_swap(void **state)
{
    struct fx *f = fx_of(state);
    /* Two attackers. root/dir (a real directory) and root/outlink (-> ../outside) trade places
     * atomically, so at any instant "dir" is the directory or a link out of the root; and inside
     * the directory (held by fd, wherever its name is) file and leaflink (-> ../../outside/file)
     * trade places, so the last component is the file or a link out of the root. */
    int dirfd = openat(f->rootfd, "dir", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    assert_true(dirfd >= 0);
    if (faccessat(dirfd, "leaflink", F_OK, AT_SYMLINK_NOFOLLOW) != 0)
        assert_int_equal(symlinkat("../../outside/file", dirfd, "leaflink"), 0);
    atomic_bool stop = false;
    struct swapper s = {.dirfd = f->rootfd, .a = "dir", .b = "outlink", .stop = &stop};
    struct swapper s2 = {.dirfd = dirfd, .a = "file", .b = "leaflink", .stop = &stop};
    pthread_t th, th2;
    assert_int_equal(pthread_create(&th, NULL, swap_loop, &s), 0);
    assert_int_equal(pthread_create(&th2, NULL, swap_loop, &s2), 0);

    /* Control first: a plain openat does get out, so the race below is a real one. */
    long naive_escapes = 0;
    for (int i = 0; i < 20000 && naive_escapes == 0; i++) {
        int fd = openat(f->rootfd, "dir/file", O_RDONLY | O_CLOEXEC);
        struct stat st;
        if (fd >= 0 && fstat(fd, &st) == 0 && same_inode(&st, &f->out_file)) naive_escapes++;
        if (fd >= 0) close(fd);
    }

    const char *paths[] = {"dir/file", "dir/sub/../file", "/dir/./file", "d1/../dir/file"};
    long opened = 0, enoent = 0, eagain = 0;
    /* A few thousand opens over at least 300 ms: a few thousand alone take a few ms, within
     * one scheduler time slice, where the swappers' state can stay frozen. Keep going (up to
     * 3 s) until some opens succeeded too, so successes are checked, not only refusals. */
    double t0 = now_s();
    for (long i = 0;; i++) {
        double t = now_s() - t0;
        if (i >= 4000 && ((t >= 0.3 && opened >= 50) || t >= 3.0)) break;
        const char *p = paths[i % 4];
        struct nsbox_err e = {0};
        int fd = nsbox_sp_open(f->rootfd, p, O_RDONLY, 0, 0, &e);
        if (fd < 0) {
            /* While "dir" is the link, the in-root answer is root/outside: missing. */
            if (e.sys_errno == ENOENT)
                enoent++;
            else if (e.sys_errno == EAGAIN)
                eagain++;
            else
                fail_msg("%s: unexpected error %s", p, e.msg);
            continue;
        }
        struct stat st;
        assert_int_equal(fstat(fd, &st), 0);
        close(fd);
        if (same_inode(&st, &f->out_file) || same_inode(&st, &f->out_secret))
            fail_msg("'%s' resolved to the file outside the root (iteration %ld)", p, i);
        opened++;
    }
    atomic_store(&stop, true);
    pthread_join(th, NULL);
    pthread_join(th2, NULL);
    close(dirfd);
    print_message("      race (%s): %ld + %ld swaps; %ld opened inside, %ld ENOENT, %ld EAGAIN; "
                  "plain openat escaped: %s\n",
                  f->backend == NSBOX_SP_BACKEND_WALK ? "walker" : "openat2", atomic_load(&s.swaps),
                  atomic_load(&s2.swaps), opened, enoent, eagain, naive_escapes ? "yes" : "no");
    assert_true(atomic_load(&s.swaps) > 0 && atomic_load(&s2.swaps) > 0);
    assert_true(opened > 0); /* the test did exercise successful opens, not only failures */
    /* With two CPUs the swaps run truly in parallel and the plain openat control must have
     * got out at least once; if it did not, the fixture no longer tests a real race. */
    if (sysconf(_SC_NPROCESSORS_ONLN) > 1) assert_true(naive_escapes > 0);
}

int main(void)
{
#define RESOLUTION_TESTS                                                                           \
    cmocka_unit_test(t_no_xdev), cmocka_unit_test(t_errors), cmocka_unit_test(t_mkdir_p),          \
        cmocka_unit_test(t_open_parent), cmocka_unit_test(t_mount_target),                         \
        cmocka_unit_test(t_auto_when_openat2_blocked), cmocka_unit_test(t_race_swap)
    const struct CMUnitTest openat2_tests[] = {RESOLUTION_TESTS};
    const struct CMUnitTest walk_tests[] = {RESOLUTION_TESTS};
    int fails = cmocka_run_group_tests_name("safepath openat2", openat2_tests, setup_openat2,
                                            group_teardown);
    fails += cmocka_run_group_tests_name("safepath walker", walk_tests, setup_walk, group_teardown);
    return fails;
}
