/* rootfs/setid.c: which files of a writable root are bound read-only onto themselves, against a
 * fake `struct nsbox_sys` that records the targets (no root needed: a file of one's own may be
 * made set-id; a file capability only where the test may set one). */
#include "setid_fixture.h"

#include "setid.h"

#include <sys/xattr.h>

static int fake_close(int fd)
{
    return close(fd);
}

static const struct nsbox_sys fake = {
    .open_tree = fake_open_tree,
    .mount_setattr_fd = fake_setattr,
    .move_mount_to_fd = fake_move_mount_to_fd,
    .close = fake_close,
};

/* Set-user-ID, set-group-ID with group execute, a file capability; not set-group-ID alone
 * (mandatory locking), not a plain program, not a symlink to a set-id one; every name of a
 * set-id file; deep directories; the working directory given back. */
static void test_seal(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/nsbox-test-setid-XXXXXX");
    assert_non_null(mkdtemp(dir));
    char p[PATH_MAX], q[PATH_MAX];
    snprintf(p, sizeof p, "%s/d", dir);
    assert_int_equal(mkdir(p, 0755), 0);
    snprintf(p, sizeof p, "%s/d/e", dir);
    assert_int_equal(mkdir(p, 0755), 0);
    make("suid", 04755);
    make("sgid", 02755);
    make("sgid-no-exec", 02644);
    make("plain", 0755);
    make("d/e/deep", 04711);
    make("capped", 0755);
    /* a directory the walk cannot list (as the idmap's stranger's are to it): sealed whole;
     * where the test can read it anyway (as root), its set-id program alone */
    snprintf(p, sizeof p, "%s/dark", dir);
    assert_int_equal(mkdir(p, 0755), 0);
    make("dark/suid", 04755);
    assert_int_equal(chmod(p, 0311), 0);
    snprintf(p, sizeof p, "%s/suid", dir);
    snprintf(q, sizeof q, "%s/d/hard", dir);
    assert_int_equal(link(p, q), 0);
    snprintf(q, sizeof q, "%s/link", dir);
    assert_int_equal(symlink("suid", q), 0);
    /* CAP_NET_RAW, effective (VFS_CAP_REVISION_2) */
    const uint32_t cap[5] = {0x02000001, 1u << 13, 0, 0, 0};
    snprintf(p, sizeof p, "%s/capped", dir);
    bool fcap = setxattr(p, "security.capability", cap, sizeof cap, 0) == 0;
    int rootfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    assert_true(rootfd >= 0);
    assert_int_equal(fchdir(rootfd), 0);
    size_t sealed = 0;
    struct nsbox_err e = {0};
    if (nsbox_setid_seal(&fake, rootfd, &sealed, &e) < 0)
        fail_msg("%s", e.msg);
    assert_int_equal(sealed, n_sealed);
    assert_true(was_sealed("suid") && was_sealed("sgid") && was_sealed("d/e/deep"));
    assert_true(was_sealed("d/hard"));
    assert_false(was_sealed("sgid-no-exec") || was_sealed("plain") || was_sealed("link"));
    assert_int_equal(was_sealed("capped"), fcap);
    assert_true(geteuid() == 0 ? was_sealed("dark/suid") : was_sealed("dark"));
    assert_int_equal(n_sealed, 5 + (fcap ? 1 : 0));
    char cwd[PATH_MAX];
    assert_non_null(getcwd(cwd, sizeof cwd));
    assert_string_equal(cwd, dir);
    assert_int_equal(chdir("/"), 0);
    close(rootfd);
    snprintf(p, sizeof p, "%s/dark", dir);
    assert_int_equal(chmod(p, 0755), 0);
    assert_int_equal(rm_tree(), 0);
}

/* The tree's root opened, nothing recorded yet. */
static int tree_root(void)
{
    n_sealed = 0;
    int fd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    assert_true(fd >= 0);
    return fd;
}

/* Another process renaming in the tree between the seal's bind of a set-id program and its
 * target: the set-id program moves away and a plain file takes its name, as a second container
 * writing the same volume could time it. */
static bool swap_next;

static int swapping_open_tree(int dfd, const char *path, unsigned flags)
{
    int fd = fake_open_tree(dfd, path, flags);
    if (swap_next && !strcmp(path, "suid")) {
        swap_next = false;
        assert_int_equal(renameat(dfd, "suid", dfd, "moved"), 0);
        assert_int_equal(renameat(dfd, "plain", dfd, "suid"), 0);
    }
    return fd;
}

static void test_seal_refuses_a_name_swapped_under_it(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/nsbox-test-setid-XXXXXX");
    assert_non_null(mkdtemp(dir));
    make("suid", 04755);
    make("plain", 0755);
    swap_next = true;
    struct nsbox_sys sys = fake;
    sys.open_tree = swapping_open_tree;
    int rootfd = tree_root();
    size_t sealed = 0;
    struct nsbox_err e = {0};
    int r = nsbox_setid_seal(&sys, rootfd, &sealed, &e);
    /* the set-id program's bind was never put on the plain file, which has its name now,
     * leaving the program itself (at "moved") writable: create fails, saying why */
    assert_false(was_sealed("suid"));
    assert_int_equal(r, -1);
    assert_non_null(strstr(e.msg, "changed while it was sealed"));
    assert_int_equal(chdir("/"), 0);
    close(rootfd);
    assert_int_equal(rm_tree(), 0);
}

static bool recorded(const char *path)
{
    for (size_t i = 0; i < n_sealed; i++)
        if (!strcmp(sealed_paths[i], path))
            return true;
    return false;
}

/* A volume other containers write: the programs sealed, every directory above them held in
 * place once (a directory shared by two programs' paths too, and one with two programs in
 * it), none other, and then the clone of the sealed tree put over the root. */
static void test_seal_shared_holds_the_directories_above(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/nsbox-test-setid-XXXXXX");
    assert_non_null(mkdtemp(dir));
    const char *dirs[] = {"d", "d/e", "d/f", "free", "d/e/g"};
    char p[PATH_MAX];
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
        path_of(p, dirs[i]);
        assert_int_equal(mkdir(p, 0755), 0);
    }
    make("suid", 04755);
    make("d/e/deep", 04755);
    make("d/e/deep2", 04755);
    make("d/e/g/deeper", 04755);
    make("d/f/sgid", 02755);
    make("free/plain", 0755);
    int rootfd = tree_root();
    size_t sealed = 0;
    struct nsbox_err e = {0};
    if (nsbox_setid_seal_shared(&fake, rootfd, &sealed, &e) < 0)
        fail_msg("%s", e.msg);
    assert_int_equal(sealed, 5);
    assert_true(was_sealed("suid") && was_sealed("d/e/deep") && was_sealed("d/e/deep2") &&
                was_sealed("d/e/g/deeper") && was_sealed("d/f/sgid"));
    assert_true(was_sealed("d") && was_sealed("d/e") && was_sealed("d/f") && was_sealed("d/e/g"));
    assert_false(was_sealed("free") || was_sealed("free/plain"));
    assert_int_equal(n_sealed, 5 + 4 + 1);                /* each held once */
    assert_string_equal(sealed_paths[n_sealed - 1], dir); /* the clone over the root, last */
    assert_int_equal(chdir("/"), 0);
    close(rootfd);
    assert_int_equal(rm_tree(), 0);
}

/* A directory renamed between the walk and its holding (by a container whose own walk did
 * not find the program, which only the host could have put there since): create fails. */
static int renaming_open_tree(int dfd, const char *path, unsigned flags)
{
    if (flags & AT_RECURSIVE) {
        char a[PATH_MAX], b[PATH_MAX];
        path_of(a, "d");
        path_of(b, "moved");
        assert_int_equal(rename(a, b), 0);
    }
    return fake_open_tree(dfd, path, flags);
}

static void test_seal_shared_refuses_a_directory_moved_before_it_is_held(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/nsbox-test-setid-XXXXXX");
    assert_non_null(mkdtemp(dir));
    char p[PATH_MAX];
    path_of(p, "d");
    assert_int_equal(mkdir(p, 0755), 0);
    make("d/suid", 04755);
    struct nsbox_sys sys = fake;
    sys.open_tree = renaming_open_tree;
    int rootfd = tree_root();
    size_t sealed = 0;
    struct nsbox_err e = {0};
    assert_int_equal(nsbox_setid_seal_shared(&sys, rootfd, &sealed, &e), -1);
    assert_non_null(strstr(e.msg, "/d changed while it was sealed"));
    assert_false(recorded(dir)); /* nothing put over the root */
    assert_int_equal(chdir("/"), 0);
    close(rootfd);
    assert_int_equal(rm_tree(), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_seal),
        cmocka_unit_test(test_seal_refuses_a_name_swapped_under_it),
        cmocka_unit_test(test_seal_shared_holds_the_directories_above),
        cmocka_unit_test(test_seal_shared_refuses_a_directory_moved_before_it_is_held),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
