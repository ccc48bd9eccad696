/* rootfs/setid_layers.c and nsbox_setid_seal_listed (rootfs/setid.c): the candidates a walk of
 * layer directories gives, the seal of a merged root from them, and the walk of the whole root
 * nsbox_mounts_enter (rootfs/mounts.c) falls back to where they give up, against a fake `struct
 * nsbox_sys` that records the targets. The merged root is a plain directory standing for the
 * overlay's view: the seal only looks paths up in it. What needs root (cloning a layer's mount)
 * is checked as root, and its refusal without. */
#include "setid_fixture.h"

#include "mounts.h"
#include "setid_layers.h"

#include <sys/xattr.h>

static int fake_pivot_root(const char *new_root, const char *put_old)
{
    (void)new_root, (void)put_old;
    return 0;
}

static int fake_umount2(const char *target, int flags)
{
    (void)target, (void)flags;
    return 0;
}

static const struct nsbox_sys fake = {
    .open_tree = fake_open_tree,
    .mount_setattr_fd = fake_setattr,
    .move_mount_to_fd = fake_move_mount_to_fd,
    .pivot_root = fake_pivot_root,
    .umount2 = fake_umount2,
};

static void make_dir(const char *name, mode_t mode)
{
    char p[PATH_MAX];
    path_of(p, name);
    assert_int_equal(mkdir(p, 0755), 0);
    assert_int_equal(chmod(p, mode), 0);
}

static void setup_dir(void)
{
    snprintf(dir, sizeof dir, "/tmp/nsbox-test-setid-layers-XXXXXX");
    assert_non_null(mkdtemp(dir));
    n_sealed = 0;
}

static int open_dir(const char *name)
{
    char p[PATH_MAX];
    path_of(p, name);
    int fd = open(p, O_PATH | O_DIRECTORY | O_CLOEXEC);
    assert_true(fd >= 0);
    return fd;
}

static struct nsbox_setid_list *list_of(const struct nsbox_setid_cand *c, size_t n)
{
    struct nsbox_setid_list *l = calloc(1, sizeof *l);
    assert_non_null(l);
    l->c = calloc(n, sizeof *l->c);
    assert_non_null(l->c);
    for (size_t i = 0; i < n; i++)
        l->c[i] = (struct nsbox_setid_cand){c[i].kind, strdup(c[i].path)};
    l->n = l->cap = n;
    return l;
}

/* The seal from a list: programs sealed where the merged root has them, a path that is not
 * there (removed, behind a symlink) passed over, a plain file left, a directory the walk cannot
 * list sealed whole with what is below it passed over (as a user: root lists it all the same,
 * and seals its program). */
static void test_seal_listed(void **state)
{
    (void)state;
    setup_dir();
    make("suid", 04755);
    make("plain", 0755);
    make_dir("d", 0755);
    make_dir("d/e", 0755);
    make("d/e/deep", 04711);
    make_dir("dark", 0755);
    make("dark/suid", 04755);
    char p[PATH_MAX];
    path_of(p, "dark");
    assert_int_equal(chmod(p, 0311), 0);
    path_of(p, "x");
    assert_int_equal(symlink(".", p), 0);
    const struct nsbox_setid_cand c[] = {
        {NSBOX_SETIDCAND_FILE, "d/e/deep"},  {NSBOX_SETIDCAND_DIR, "dark"},
        {NSBOX_SETIDCAND_FILE, "dark/suid"}, {NSBOX_SETIDCAND_FILE, "gone"},
        {NSBOX_SETIDCAND_FILE, "plain"},     {NSBOX_SETIDCAND_FILE, "suid"},
        {NSBOX_SETIDCAND_FILE, "x/suid"},    {NSBOX_SETIDCAND_DIR, "x"},
    };
    struct nsbox_setid_list *l = list_of(c, sizeof c / sizeof c[0]);
    int rootfd = open_dir(".");
    size_t sealed = 0;
    struct nsbox_err e = {0};
    int r = nsbox_setid_seal_listed(&fake, rootfd, l, &sealed, &e);
    if (r < 0)
        fail_msg("%s", e.msg);
    assert_int_equal(r, 0);
    assert_true(was_sealed("suid") && was_sealed("d/e/deep"));
    assert_false(was_sealed("plain") || was_sealed("x") || was_sealed("gone"));
    if (geteuid() == 0)
        assert_true(was_sealed("dark/suid") && !was_sealed("dark"));
    else
        assert_true(was_sealed("dark") && !was_sealed("dark/suid"));
    assert_int_equal(sealed, 3);
    assert_int_equal(n_sealed, 3);
    char cwd[PATH_MAX];
    assert_non_null(getcwd(cwd, sizeof cwd));
    assert_string_equal(cwd, dir);
    assert_int_equal(chdir("/"), 0);
    close(rootfd);
    nsbox_setid_list_free(l);
    assert_int_equal(rm_tree(), 0);
}

/* A path that cannot be looked up for another reason than its absence: 1, the caller's cue to
 * walk the whole root, with nothing sealed. Its directory's path too long to look up, for every
 * user; a directory nobody may search (no directory candidate for it), for a user but root
 * (root searches it all the same). */
static void test_seal_listed_gives_up(void **state)
{
    (void)state;
    setup_dir();
    char far[PATH_MAX + 8];
    memset(far, 'a', sizeof far - 6);
    snprintf(far + sizeof far - 6, 6, "/suid");
    struct nsbox_setid_cand c[] = {{NSBOX_SETIDCAND_FILE, far}};
    struct nsbox_setid_list *l = list_of(c, 1);
    int rootfd = open_dir(".");
    size_t sealed = 0;
    struct nsbox_err e = {0};
    assert_int_equal(nsbox_setid_seal_listed(&fake, rootfd, l, &sealed, &e), 1);
    nsbox_setid_list_free(l);
    if (geteuid() != 0) {
        make_dir("shut", 0755);
        make("shut/suid", 04755);
        char p[PATH_MAX];
        path_of(p, "shut");
        assert_int_equal(chmod(p, 0), 0);
        c[0].path = "shut/suid";
        l = list_of(c, 1);
        assert_int_equal(nsbox_setid_seal_listed(&fake, rootfd, l, &sealed, &e), 1);
        nsbox_setid_list_free(l);
    }
    assert_int_equal(n_sealed, 0);
    assert_int_equal(chdir("/"), 0);
    close(rootfd);
    assert_int_equal(rm_tree(), 0);
}

/* The root entered with a list the seal cannot finish (a candidate whose directory's path is
 * too long to look up): the root is walked whole instead, and its program sealed. Were the list
 * that gave up taken as the whole answer, the program would stay writable. */
static void test_enter_walks_the_root_where_the_list_gives_up(void **state)
{
    (void)state;
    setup_dir();
    make("suid", 04755);
    make("plain", 0755);
    char far[PATH_MAX + 8];
    memset(far, 'a', sizeof far - 6);
    snprintf(far + sizeof far - 6, 6, "/suid");
    const struct nsbox_setid_cand c[] = {{NSBOX_SETIDCAND_FILE, far}};
    struct nsbox_mount_plan *plan = calloc(1, sizeof *plan);
    assert_non_null(plan);
    plan->root_in_place = true;
    plan->seal_list = list_of(c, 1);
    int rootfd = open_dir(".");
    struct nsbox_err e = {0};
    int r = nsbox_mounts_enter(&fake, plan, rootfd, NULL, &e);
    if (r < 0)
        fail_msg("%s", e.msg);
    assert_int_equal(r, 0);
    assert_true(was_sealed("suid"));
    assert_false(was_sealed("plain"));
    assert_int_equal(n_sealed, 1);
    close(rootfd);
    nsbox_setid_list_free((struct nsbox_setid_list *)plan->seal_list);
    free(plan);
    assert_int_equal(rm_tree(), 0);
}

static bool listed(const struct nsbox_setid_list *l, enum nsbox_setidcand kind, const char *path)
{
    for (size_t i = 0; i < l->n; i++)
        if (l->c[i].kind == kind && !strcmp(l->c[i].path, path))
            return true;
    return false;
}

/* Two layers: each one's programs and its directories of uncertain listing, once, sorted with a
 * directory before what is below it; a redirect attribute anywhere: no list. Cloning a layer's
 * mount needs root: without it, no list either. */
static void test_layers_list(void **state)
{
    (void)state;
    setup_dir();
    make_dir("a", 0755);
    make_dir("b", 0755);
    make("a/suid", 04755);
    make("a/plain", 0755);
    make("a/sgid-noexec", 02644);
    make_dir("a/usr", 0755);
    make("a/usr/sgid", 02755);
    make_dir("a/usr!", 0755);
    make("a/usr!/suid", 04755);
    make_dir("b/usr", 0700);
    make("b/usr/suid", 04755);
    make("b/suid", 04755);
    int fds[2] = {open_dir("a"), open_dir("b")};
    struct nsbox_setid_list *l = NULL;
    struct nsbox_err why = {0};
    int r = nsbox_setid_layers_list(fds, 2, &l, &why);
    if (geteuid() != 0) {
        assert_int_equal(r, 1);
        assert_null(l);
        assert_non_null(strstr(why.msg, "clone"));
    } else {
        assert_int_equal(r, 0);
        assert_int_equal(l->n, 5);
        const char *order[] = {"suid", "usr", "usr/sgid", "usr/suid", "usr!/suid"};
        for (size_t i = 0; i < 5; i++)
            assert_string_equal(l->c[i].path, order[i]);
        assert_true(listed(l, NSBOX_SETIDCAND_DIR, "usr"));
        assert_true(listed(l, NSBOX_SETIDCAND_FILE, "suid"));
        nsbox_setid_list_free(l);
        char p[PATH_MAX];
        path_of(p, "b/usr");
        assert_int_equal(setxattr(p, "trusted.overlay.redirect", "/x", 2, 0), 0);
        assert_int_equal(nsbox_setid_layers_list(fds, 2, &l, &why), 1);
        assert_null(l);
        assert_non_null(strstr(why.msg, "redirect"));
    }
    close(fds[0]);
    close(fds[1]);
    assert_int_equal(rm_tree(), 0);
}

/* Layers with no set-id program at all (most images' upper directory): an empty list, no
 * candidate to sort (qsort given no array is undefined: the UBSan build ends there). */
static void test_layers_list_of_none(void **state)
{
    (void)state;
    setup_dir();
    make_dir("a", 0755);
    make("a/plain", 0755);
    int fd = open_dir("a");
    struct nsbox_setid_list *l = NULL;
    struct nsbox_err why = {0};
    int r = nsbox_setid_layers_list(&fd, 1, &l, &why);
    if (geteuid() != 0) {
        assert_int_equal(r, 1);
    } else {
        assert_int_equal(r, 0);
        assert_non_null(l);
        assert_int_equal(l->n, 0);
        nsbox_setid_list_free(l);
    }
    close(fd);
    assert_int_equal(rm_tree(), 0);
}

/* A directory with a POSIX access ACL, owned in the idmap and open to all by its mode, is a
 * directory candidate (the ACL may refuse the container's root what the mode grants); a file
 * capability is found among more attribute names than one read of them takes; a metacopy
 * attribute on a file (its data in another layer) makes no list. Root's: a layer's
 * mount is cloned, trusted.* is root's to write. */
static void test_layers_list_reads_attributes(void **state)
{
    (void)state;
    if (geteuid() != 0)
        skip(); /* cloning a layer's mount needs root: test_layers_list checks the refusal */
    setup_dir();
    make_dir("a", 0755);
    make_dir("a/acl", 0755);
    make("a/suid", 04755);
    make("a/data", 0644);
    /* user::rwx, user:1000:r-x, group::r-x, mask::r-x, other::r-x (acl_ea.h's layout) */
    static const uint32_t acl[] = {2,           0x00070001, 0xffffffffu, 0x00050002,
                                   1000,        0x00050004, 0xffffffffu, 0x00050010,
                                   0xffffffffu, 0x00050020, 0xffffffffu};
    char p[PATH_MAX];
    path_of(p, "a/acl");
    if (setxattr(p, "system.posix_acl_access", acl, sizeof acl, 0) < 0)
        fail_msg("setxattr %s: %s (a filesystem without ACLs for /tmp?)", p, strerror(errno));
    int fd = open_dir("a");
    struct nsbox_setid_list *l = NULL;
    struct nsbox_err why = {0};
    if (nsbox_setid_layers_list(&fd, 1, &l, &why) != 0)
        fail_msg("%s", why.msg);
    assert_int_equal(l->n, 2);
    assert_true(listed(l, NSBOX_SETIDCAND_DIR, "acl") && listed(l, NSBOX_SETIDCAND_FILE, "suid"));
    nsbox_setid_list_free(l);
    /* a file capability behind more attribute names than the walk's buffer holds (ERANGE):
     * each asked for by name */
    make("a/capped", 0755);
    path_of(p, "a/capped");
    for (int i = 0; i < 40; i++) {
        char name[64];
        snprintf(name, sizeof name, "user.padding-%02d-of-a-long-attribute-name", i);
        assert_int_equal(setxattr(p, name, "x", 1, 0), 0);
    }
    static const uint32_t cap[] = {0x02000001, 1u << 13, 0, 0, 0}; /* CAP_NET_RAW, effective */
    assert_int_equal(setxattr(p, "security.capability", cap, sizeof cap, 0), 0);
    assert_true(listxattr(p, NULL, 0) > 1024);
    assert_int_equal(nsbox_setid_layers_list(&fd, 1, &l, &why), 0);
    assert_int_equal(l->n, 3);
    assert_true(listed(l, NSBOX_SETIDCAND_FILE, "capped"));
    nsbox_setid_list_free(l);
    path_of(p, "a/data");
    assert_int_equal(setxattr(p, "trusted.overlay.metacopy", "", 0, 0), 0);
    assert_int_equal(nsbox_setid_layers_list(&fd, 1, &l, &why), 1);
    assert_null(l);
    assert_non_null(strstr(why.msg, "data: a metacopy attribute"));
    close(fd);
    assert_int_equal(rm_tree(), 0);
}

/* A layer deeper than the walk goes: no list, never one without what lies below the limit. */
static void test_layers_list_too_deep(void **state)
{
    (void)state;
    if (geteuid() != 0)
        skip(); /* cloning a layer's mount needs root: test_layers_list checks the refusal */
    setup_dir();
    make_dir("a", 0755);
    int fd = open_dir("a");
    int d = openat(fd, ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
    for (int i = 0; i <= NSBOX_SETID_DEPTH_MAX; i++) {
        assert_int_equal(mkdirat(d, "d", 0755), 0);
        int next = openat(d, "d", O_PATH | O_DIRECTORY | O_CLOEXEC);
        assert_true(next >= 0);
        close(d);
        d = next;
    }
    int f = openat(d, "suid", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    assert_true(f >= 0 && fchmod(f, 04755) == 0);
    close(f);
    close(d);
    struct nsbox_setid_list *l = NULL;
    struct nsbox_err why = {0};
    assert_int_equal(nsbox_setid_layers_list(&fd, 1, &l, &why), 1);
    assert_null(l);
    assert_non_null(strstr(why.msg, "too deep"));
    close(fd);
    assert_int_equal(rm_tree(), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_seal_listed),
        cmocka_unit_test(test_seal_listed_gives_up),
        cmocka_unit_test(test_enter_walks_the_root_where_the_list_gives_up),
        cmocka_unit_test(test_layers_list),
        cmocka_unit_test(test_layers_list_of_none),
        cmocka_unit_test(test_layers_list_reads_attributes),
        cmocka_unit_test(test_layers_list_too_deep),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
