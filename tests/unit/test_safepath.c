/* Safe path resolution inside a root (rootfs/safepath.c).
 *
 * Every resolution test runs twice, once per backend (openat2 and the fallback walker), on a
 * fresh mkdtemp tree:
 *
 *   <base>/outside/secret, outside/file, outside/sub/     files a sandbox must never reach
 *   <base>/root/                                          the root handed to nsbox_sp_*
 *     etc/passwd  x  d1/x  d1/d2/  dir/file  dir/sub/     regular content, each file distinct
 *     abs -> /etc/passwd              etclink -> /etc      jump -> d1/d2
 *     rel_escape -> ../../../../../../etc/passwd          esc_out -> ../outside/secret
 *     abs_out -> <base>/outside/secret                     abs_outdir -> <base>/outside
 *     loop1 <-> loop2, self -> self   c0 -> c1 -> ... -> c40 -> etc/passwd
 *     proc_link -> /proc/self/root    dangling -> /created_via_link
 *     outlink -> ../outside           (swapped with dir/ by the race test)
 *
 * Files are told apart by inode (st_dev, st_ino), not by name or content, so a test cannot pass
 * by reading a look-alike. No root needed. The tests of no_xdev, errors, mkdir_p, open_parent,
 * mount targets, the auto backend and the race are in test_safepath_ops.c (on both backends too),
 * the fixture in safepath_fixture.h. */

#include "safepath_fixture.h"

static void expect_errno(struct fx *f, const char *path, int flags, unsigned how, int err)
{
    int fd = sp(f, path, flags, how);
    if (fd >= 0) {
        close(fd);
        fail_msg("open '%s' succeeded; expected %s", path, strerror(err));
    }
    if (-fd != err) fail_msg("open '%s': got %s, expected %s", path, strerror(-fd), strerror(err));
}

/* ---- pure functions ------------------------------------------------------------------------ */

static void t_normalize(void **state)
{
    (void)state;
    static const struct {
        const char *in, *out;
    } cases[] = {
        {"a/./b//c/../d", "a/b/d"},
        {"/../../x", "x"},
        {"", "."},
        {"/", "."},
        {".", "."},
        {"..", "."},
        {"../..", "."},
        {"///", "."},
        {"a", "a"},
        {"a/", "a"},
        {"a/..", "."},
        {"a/../..", "."},
        {"a/b/../../../c", "c"},
        {"./a/./", "a"},
        {"..a/b..", "..a/b.."},
        {"...", "..."},
        {".hidden/.x", ".hidden/.x"},
        {"/workspace/out/../data.csv", "workspace/data.csv"},
        {"a//b///c", "a/b/c"},
    };
    char out[PATH_MAX];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct nsbox_err e = {0};
        int n = nsbox_sp_normalize(cases[i].in, out, sizeof out, &e);
        if (n < 0) fail_msg("normalize '%s': %s", cases[i].in, e.msg);
        if (strcmp(out, cases[i].out) != 0)
            fail_msg("normalize '%s' = '%s', want '%s'", cases[i].in, out, cases[i].out);
        assert_int_equal(n, (int)strlen(cases[i].out));
    }

    /* The output buffer only has to hold the result. */
    struct nsbox_err e = {0};
    char small[4];
    assert_int_equal(nsbox_sp_normalize("aaaaaaaa/../b", small, sizeof small, &e), 1);
    assert_string_equal(small, "b");
    assert_int_equal(nsbox_sp_normalize("abcd", small, sizeof small, &e), -1);
    assert_int_equal(e.sys_errno, ENAMETOOLONG);
    assert_int_equal(nsbox_sp_normalize("", small, 1, &e), -1);

    /* An invalid component is refused, not silently normalized away. */
    char longc[NAME_MAX + 8];
    memset(longc, 'a', NAME_MAX + 1);
    longc[NAME_MAX + 1] = '\0';
    char path[NAME_MAX + 16];
    snprintf(path, sizeof path, "%s/..", longc);
    assert_int_equal(nsbox_sp_normalize(path, out, sizeof out, &e), -1);
    assert_int_equal(e.code, NSBOX_E_INVALID);
}

static void t_validate(void **state)
{
    (void)state;
    struct nsbox_err e = {0};
    assert_int_equal(nsbox_sp_validate("a/b", 3, &e), 0);
    assert_int_equal(nsbox_sp_validate("../../etc/passwd", 16, &e), 0);

    assert_int_equal(nsbox_sp_validate("", 0, &e), -1);
    assert_int_equal(e.code, NSBOX_E_INVALID);
    assert_int_equal(nsbox_sp_validate(NULL, 0, &e), -1);

    /* A NUL inside the length: the kernel would see "a", we were asked about more. */
    assert_int_equal(nsbox_sp_validate("a\0/../../etc", 12, &e), -1);
    assert_int_equal(e.code, NSBOX_E_INVALID);
    assert_int_equal(e.sys_errno, EINVAL);
    assert_non_null(strstr(e.msg, "offset 1"));
    /* ... but a NUL just past len is the terminator, not part of the path. */
    assert_int_equal(nsbox_sp_validate("ab", 2, &e), 0);

    static char p[PATH_MAX + 2];
    /* Longest allowed: PATH_MAX - 1 bytes, components short enough. */
    for (size_t i = 0; i < sizeof p; i++)
        p[i] = (i % 100 == 99) ? '/' : 'a';
    assert_int_equal(nsbox_sp_validate(p, PATH_MAX - 1, &e), 0);
    assert_int_equal(nsbox_sp_validate(p, PATH_MAX, &e), -1);
    assert_int_equal(e.sys_errno, ENAMETOOLONG);

    /* Components: NAME_MAX bytes fine, NAME_MAX + 1 not, wherever it is. */
    char c[NAME_MAX + 8];
    memset(c, 'b', sizeof c);
    assert_int_equal(nsbox_sp_validate(c, NAME_MAX, &e), 0);
    assert_int_equal(nsbox_sp_validate(c, NAME_MAX + 1, &e), -1);
    assert_int_equal(e.sys_errno, ENAMETOOLONG);
    char q[NAME_MAX + 32];
    memcpy(q, "x/", 2);
    memset(q + 2, 'b', NAME_MAX + 1);
    memcpy(q + 2 + NAME_MAX + 1, "/y", 2);
    assert_int_equal(nsbox_sp_validate(q, NAME_MAX + 5, &e), -1);
    assert_non_null(strstr(e.msg, "offset 2"));
    q[2 + NAME_MAX] = '/';
    assert_int_equal(nsbox_sp_validate(q, NAME_MAX + 5, &e), 0);
}

static void t_backend(void **state)
{
    (void)state;
    enum nsbox_sp_backend old = nsbox_sp_set_backend(NSBOX_SP_BACKEND_WALK);
    assert_int_equal(nsbox_sp_set_backend(old), NSBOX_SP_BACKEND_WALK);
    print_message("      openat2 %s on this kernel\n",
                  nsbox_sp_have_openat2() ? "available" : "NOT available (walker only)");
    /* AUTO works whatever the kernel has. */
    nsbox_sp_set_backend(NSBOX_SP_BACKEND_AUTO);
    struct nsbox_err e = {0};
    int root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
    assert_true(root >= 0);
    int fd = nsbox_sp_open(root, "/", O_PATH | O_DIRECTORY, 0, 0, &e);
    assert_true(fd >= 0);
    close(fd);
    close(root);
}

/* ---- resolution, run on both backends ------------------------------------------------------ */

static void t_dotdot_climb(void **state)
{
    struct fx *f = fx_of(state);
    expect_file(f, "../../etc/passwd", O_RDONLY, 0, &f->root_passwd);
    expect_file(f, "/../../../../etc/passwd", O_RDONLY, 0, &f->root_passwd);
    expect_file(f, "d1/../../../etc/passwd", O_RDONLY, 0, &f->root_passwd);
    expect_file(f, "d1/d2/../../../../x", O_RDONLY, 0, &f->root_x);
    expect_file(f, "..", O_PATH, 0, &f->root_dir);
    expect_file(f, ".", O_RDONLY | O_DIRECTORY, 0, &f->root_dir);
    expect_file(f, "/", O_PATH, 0, &f->root_dir);

    /* The content, too: the root's file, not the host's /etc/passwd. */
    int fd = sp(f, "../../etc/passwd", O_RDONLY, 0);
    char buf[64] = {0};
    assert_true(read(fd, buf, sizeof buf - 1) > 0);
    assert_string_equal(buf, "root-passwd\n");
    close(fd);
}

static void t_dotdot_is_physical(void **state)
{
    /* `..` after a symlink goes to the parent of the link's target (d1), as the kernel does;
     * a lexical cleanup would have given the root's x. */
    struct fx *f = fx_of(state);
    expect_file(f, "jump/../x", O_RDONLY, 0, &f->d1_x);
    expect_file(f, "jump/../../x", O_RDONLY, 0, &f->root_x);
    expect_file(f, "jump/../../../../x", O_RDONLY, 0, &f->root_x);
    expect_file(f, "jump", O_PATH | O_DIRECTORY, 0, &f->d1_d2);
}

static void t_absolute_symlinks(void **state)
{
    struct fx *f = fx_of(state);
    expect_file(f, "abs", O_RDONLY, 0, &f->root_passwd);
    expect_file(f, "etclink/passwd", O_RDONLY, 0, &f->root_passwd);
    expect_file(f, "/etclink/../etclink/passwd", O_RDONLY, 0, &f->root_passwd);
    expect_file(f, "etclink", O_PATH, 0, &f->root_etc);
    /* The link points at <base>/outside/secret on the host; inside the root there is none. */
    expect_errno(f, "abs_out", O_RDONLY, 0, ENOENT);
    expect_errno(f, "abs_outdir/secret", O_RDONLY, 0, ENOENT);
}

static void t_relative_escape(void **state)
{
    struct fx *f = fx_of(state);
    /* Control: these links really do lead outside for a plain openat. */
    int naive = openat(f->rootfd, "esc_out", O_RDONLY | O_CLOEXEC);
    assert_fd_is(naive, &f->out_secret);
    close(naive);
    naive = openat(f->rootfd, "abs_outdir/secret", O_RDONLY | O_CLOEXEC);
    assert_fd_is(naive, &f->out_secret);
    close(naive);

    expect_file(f, "rel_escape", O_RDONLY, 0, &f->root_passwd);
    expect_errno(f, "esc_out", O_RDONLY, 0, ENOENT);
    expect_errno(f, "outlink/secret", O_RDONLY, 0, ENOENT);
    expect_errno(f, "d1/../esc_out", O_RDONLY, 0, ENOENT);

    struct nsbox_err e = {0};
    assert_int_equal(nsbox_sp_open(f->rootfd, "esc_out", O_RDONLY, 0, 0, &e), -1);
    assert_int_equal(e.code, NSBOX_E_NOTFOUND);
    assert_non_null(strstr(e.msg, "esc_out"));
}

static void t_symlink_loops(void **state)
{
    struct fx *f = fx_of(state);
    expect_errno(f, "loop1", O_RDONLY, 0, ELOOP);
    expect_errno(f, "self", O_RDONLY, 0, ELOOP);
    expect_errno(f, "self/x", O_RDONLY, 0, ELOOP);
    /* The limit is the kernel's own: compare with a plain open of the same chain, which stays
     * inside the root by construction (all links relative, no `..`). */
    int ref1 = openat(f->rootfd, "c1", O_RDONLY | O_CLOEXEC);
    int ref0 = openat(f->rootfd, "c0", O_RDONLY | O_CLOEXEC);
    int ref0_errno = errno;
    assert_true(ref1 >= 0);
    assert_int_equal(ref0, -1);
    assert_int_equal(ref0_errno, ELOOP);
    close(ref1);
    expect_file(f, "c1", O_RDONLY, 0, &f->root_passwd);
    expect_errno(f, "c0", O_RDONLY, 0, ELOOP);
}

static void t_magic_links(void **state)
{
    struct fx *f = fx_of(state);
    /* A link whose text is /proc/self/root is re-rooted like any other: the root has no
     * /proc, so nothing is found (and certainly not the host's /). */
    expect_errno(f, "proc_link", O_PATH, 0, ENOENT);
    expect_errno(f, "proc_link/etc/passwd", O_RDONLY, 0, ENOENT);

    /* The real thing: a root that contains magic links. */
    struct stat st;
    if (stat("/proc/self/status", &st) != 0) skip();
    int pfd = open("/proc/self", O_PATH | O_DIRECTORY | O_CLOEXEC);
    assert_true(pfd >= 0);
    struct nsbox_err e = {0};
    char fdpath[32];
    snprintf(fdpath, sizeof fdpath, "fd/%d", f->rootfd);
    const char *magic[] = {"root", "root/etc/passwd", "cwd", "exe", fdpath, "root/"};
    for (size_t i = 0; i < sizeof magic / sizeof magic[0]; i++) {
        int fd = nsbox_sp_open(pfd, magic[i], O_PATH, 0, 0, &e);
        if (fd >= 0) fail_msg("magic link '%s' was followed", magic[i]);
        assert_int_equal(e.sys_errno, ELOOP);
    }
    /* Plain procfs files are fine, and O_PATH|O_NOFOLLOW gives the link itself, as open(2). */
    int fd = nsbox_sp_open(pfd, "status", O_RDONLY, 0, 0, &e);
    assert_true(fd >= 0);
    close(fd);
    fd = nsbox_sp_open(pfd, "root", O_PATH | O_NOFOLLOW, 0, 0, &e);
    assert_true(fd >= 0);
    assert_int_equal(fstat(fd, &st), 0);
    assert_true(S_ISLNK(st.st_mode));
    close(fd);
    close(pfd);
}

static void t_nofollow_any(void **state)
{
    struct fx *f = fx_of(state);
    unsigned h = NSBOX_SP_NOFOLLOW_ANY;
    expect_file(f, "etc/passwd", O_RDONLY, h, &f->root_passwd);
    expect_file(f, "d1/../etc/passwd", O_RDONLY, h, &f->root_passwd);
    expect_errno(f, "abs", O_RDONLY, h, ELOOP);
    expect_errno(f, "etclink/passwd", O_RDONLY, h, ELOOP);
    expect_errno(f, "jump/../x", O_RDONLY, h, ELOOP);
    expect_errno(f, "abs", O_PATH, h, ELOOP);
    /* As open(2): O_PATH|O_NOFOLLOW names the trailing link itself, which follows nothing. */
    int fd = sp(f, "abs", O_PATH | O_NOFOLLOW, h);
    struct stat st;
    assert_true(fd >= 0);
    assert_int_equal(fstat(fd, &st), 0);
    assert_true(S_ISLNK(st.st_mode));
    close(fd);
}

static void t_trailing_nofollow(void **state)
{
    struct fx *f = fx_of(state);
    /* O_NOFOLLOW is about the last component only; the errno must be the kernel's own, so
     * compare with a plain openat, which does not follow the link either. */
    const struct {
        const char *path;
        int flags;
    } cases[] = {
        {"abs", O_RDONLY | O_NOFOLLOW},
        {"etclink", O_RDONLY | O_DIRECTORY | O_NOFOLLOW},
        {"etclink", O_PATH | O_DIRECTORY | O_NOFOLLOW},
        {"abs", O_WRONLY | O_CREAT | O_EXCL},
        {"dangling", O_WRONLY | O_CREAT | O_EXCL},
        {"abs", O_WRONLY | O_CREAT | O_NOFOLLOW},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int ref = openat(f->rootfd, cases[i].path, cases[i].flags | O_CLOEXEC, 0644);
        int ref_errno = errno;
        if (ref >= 0) fail_msg("case %zu: plain open succeeded", i);
        expect_errno(f, cases[i].path, cases[i].flags, 0, ref_errno);
    }
    expect_file(f, "etclink/passwd", O_RDONLY | O_NOFOLLOW, 0, &f->root_passwd);
    /* A trailing '/' makes the kernel follow even with O_NOFOLLOW. */
    expect_file(f, "etclink/", O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0, &f->root_etc);
    expect_errno(f, "etc/passwd/", O_RDONLY, 0, ENOTDIR);
    expect_errno(f, "abs/", O_RDONLY, 0, ENOTDIR);
    expect_errno(f, "etc/passwd/..", O_RDONLY, 0, ENOTDIR);
    expect_errno(f, "x/.", O_PATH, 0, ENOTDIR);
    expect_file(f, "etc/", O_RDONLY | O_DIRECTORY, 0, &f->root_etc);
    expect_file(f, "etc/.", O_PATH, 0, &f->root_etc);
    expect_errno(f, "etc/", O_RDONLY | O_CREAT, 0, EISDIR);
    expect_errno(f, "etclink", O_WRONLY | O_CREAT, 0, EISDIR);
}

static void t_create(void **state)
{
    struct fx *f = fx_of(state);
    struct nsbox_err e = {0};
    /* A dangling absolute link is followed for O_CREAT (no O_EXCL), and the file is created
     * inside the root. */
    int fd = nsbox_sp_open(f->rootfd, "dangling", O_WRONLY | O_CREAT, 0600, 0, &e);
    if (fd < 0) fail_msg("%s", e.msg);
    struct stat st, made;
    assert_int_equal(fstat(fd, &st), 0);
    close(fd);
    stat_at(f->rootfd, "created_via_link", &made);
    assert_true(same_inode(&st, &made));
    assert_int_equal(made.st_mode & 0077, 0); /* created with the mode asked for */
    assert_int_equal(unlinkat(f->rootfd, "created_via_link", 0), 0);

    fd = nsbox_sp_open(f->rootfd, "jump/new", O_WRONLY | O_CREAT | O_EXCL, 0644, 0, &e);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(unlinkat(f->rootfd, "d1/d2/new", 0), 0);
    expect_errno(f, "nodir/new", O_WRONLY | O_CREAT, 0, ENOENT);
    /* Nothing was created outside by the escaping links. */
    expect_errno(f, "abs_outdir/new", O_WRONLY | O_CREAT, 0, ENOENT);
    assert_int_equal(faccessat(f->basefd, "outside/new", F_OK, AT_SYMLINK_NOFOLLOW), -1);

    /* O_TMPFILE takes a mode, too. */
    fd = nsbox_sp_open(f->rootfd, "jump", O_TMPFILE | O_RDWR, 0600, 0, &e);
    if (fd >= 0)
        close(fd);
    else
        assert_int_equal(e.sys_errno, EOPNOTSUPP);
}

static void t_beneath(void **state)
{
    struct fx *f = fx_of(state);
    unsigned h = NSBOX_SP_BENEATH;
    expect_file(f, "etc/passwd", O_RDONLY, h, &f->root_passwd);
    expect_file(f, "d1/../x", O_RDONLY, h, &f->root_x);
    expect_file(f, "jump/../x", O_RDONLY, h, &f->d1_x);
    expect_errno(f, "../x", O_RDONLY, h, EXDEV);
    expect_errno(f, "d1/../../x", O_RDONLY, h, EXDEV);
    expect_errno(f, "/etc/passwd", O_RDONLY, h, EXDEV);
    expect_errno(f, "abs", O_RDONLY, h, EXDEV);
    expect_errno(f, "rel_escape", O_RDONLY, h, EXDEV);
}

int main(void)
{
    const struct CMUnitTest pure[] = {
        cmocka_unit_test(t_normalize),
        cmocka_unit_test(t_validate),
        cmocka_unit_test(t_backend),
    };
#define RESOLUTION_TESTS                                                                           \
    cmocka_unit_test(t_dotdot_climb), cmocka_unit_test(t_dotdot_is_physical),                      \
        cmocka_unit_test(t_absolute_symlinks), cmocka_unit_test(t_relative_escape),                \
        cmocka_unit_test(t_symlink_loops), cmocka_unit_test(t_magic_links),                        \
        cmocka_unit_test(t_nofollow_any), cmocka_unit_test(t_trailing_nofollow),                   \
        cmocka_unit_test(t_create), cmocka_unit_test(t_beneath)
    const struct CMUnitTest openat2_tests[] = {RESOLUTION_TESTS};
    const struct CMUnitTest walk_tests[] = {RESOLUTION_TESTS};
    int fails = cmocka_run_group_tests_name("safepath pure", pure, NULL, NULL);
    fails += cmocka_run_group_tests_name("safepath openat2", openat2_tests, setup_openat2,
                                         group_teardown);
    fails += cmocka_run_group_tests_name("safepath walker", walk_tests, setup_walk, group_teardown);
    return fails;
}
