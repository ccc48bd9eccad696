/* The fixture of the safe path resolution tests (test_safepath.c, test_safepath_ops.c): the
 * mkdtemp tree test_safepath.c describes, made fresh per group and backend. */
#ifndef NSBOX_TESTS_SAFEPATH_FIXTURE_H
#define NSBOX_TESTS_SAFEPATH_FIXTURE_H
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "safepath.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct fx {
    int fds_before; /* open fds when the group started: every error path must close its own */
    enum nsbox_sp_backend backend;
    bool skip; /* openat2 backend on a kernel without it */
    char base[PATH_MAX];
    int basefd;
    int rootfd; /* O_PATH|O_DIRECTORY of <base>/root */
    struct stat root_passwd, root_x, d1_x, d1_d2, root_etc, root_dir, out_secret, out_file;
};

/* ---- fixture ------------------------------------------------------------------------------- */

static void put_file(int dirfd, const char *path, const char *content)
{
    int fd = openat(dirfd, path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, content, strlen(content)), (ssize_t)strlen(content));
    close(fd);
}

static void put_dir(int dirfd, const char *path)
{
    assert_int_equal(mkdirat(dirfd, path, 0755), 0);
}

static void put_link(int dirfd, const char *target, const char *path)
{
    assert_int_equal(symlinkat(target, dirfd, path), 0);
}

static void stat_at(int dirfd, const char *path, struct stat *st)
{
    assert_int_equal(fstatat(dirfd, path, st, AT_SYMLINK_NOFOLLOW), 0);
}

static bool same_inode(const struct stat *a, const struct stat *b)
{
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}

static void assert_fd_is(int fd, const struct stat *want)
{
    struct stat st;
    assert_true(fd >= 0);
    assert_int_equal(fstat(fd, &st), 0);
    assert_true(same_inode(&st, want));
}

static int build_tree(struct fx *f)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(f->base, sizeof f->base, "%s/nsbox-safepath-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    assert_non_null(mkdtemp(f->base));
    f->basefd = open(f->base, O_PATH | O_DIRECTORY | O_CLOEXEC);
    assert_true(f->basefd >= 0);
    int b = f->basefd;

    put_dir(b, "outside");
    put_file(b, "outside/secret", "host-secret\n");
    put_file(b, "outside/file", "outside\n");
    put_dir(b, "outside/sub");

    put_dir(b, "root");
    put_dir(b, "root/etc");
    put_file(b, "root/etc/passwd", "root-passwd\n");
    put_file(b, "root/x", "root-x\n");
    put_dir(b, "root/d1");
    put_dir(b, "root/d1/d2");
    put_file(b, "root/d1/x", "d1-x\n");
    put_dir(b, "root/dir");
    put_dir(b, "root/dir/sub");
    put_file(b, "root/dir/file", "inside\n");

    char p[PATH_MAX + 32];
    put_link(b, "/etc/passwd", "root/abs");
    put_link(b, "/etc", "root/etclink");
    put_link(b, "d1/d2", "root/jump");
    put_link(b, "../../../../../../etc/passwd", "root/rel_escape");
    put_link(b, "../outside/secret", "root/esc_out");
    snprintf(p, sizeof p, "%s/outside/secret", f->base);
    put_link(b, p, "root/abs_out");
    snprintf(p, sizeof p, "%s/outside", f->base);
    put_link(b, p, "root/abs_outdir");
    put_link(b, "loop2", "root/loop1");
    put_link(b, "loop1", "root/loop2");
    put_link(b, "self", "root/self");
    put_link(b, "/proc/self/root", "root/proc_link");
    put_link(b, "/created_via_link", "root/dangling");
    put_link(b, "../outside", "root/outlink");
    /* c0 -> c1 -> ... -> c40 -> etc/passwd: opening c1 follows 40 links, c0 follows 41. */
    for (int i = 0; i <= 40; i++) {
        char name[32], target[32];
        snprintf(name, sizeof name, "root/c%d", i);
        if (i == 40)
            snprintf(target, sizeof target, "etc/passwd");
        else
            snprintf(target, sizeof target, "c%d", i + 1);
        put_link(b, target, name);
    }

    f->rootfd = openat(b, "root", O_PATH | O_DIRECTORY | O_CLOEXEC);
    assert_true(f->rootfd >= 0);
    stat_at(b, "root/etc/passwd", &f->root_passwd);
    stat_at(b, "root/x", &f->root_x);
    stat_at(b, "root/d1/x", &f->d1_x);
    stat_at(b, "root/d1/d2", &f->d1_d2);
    stat_at(b, "root/etc", &f->root_etc);
    stat_at(b, "root", &f->root_dir);
    stat_at(b, "outside/secret", &f->out_secret);
    stat_at(b, "outside/file", &f->out_file);
    return 0;
}

static int rm_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void)st;
    (void)ftw;
    /* Keep going past a failure: removing the rest is better than leaving it all. */
    if ((type == FTW_DP ? rmdir(path) : unlink(path)) != 0)
        fprintf(stderr, "safepath: cannot remove %s: %s\n", path, strerror(errno));
    return 0;
}

static int count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (!d) return -1;
    int n = 0;
    while (readdir(d))
        n++;
    closedir(d);
    return n;
}

static int group_setup(void **state, enum nsbox_sp_backend backend)
{
    struct fx *f = calloc(1, sizeof *f);
    assert_non_null(f);
    f->fds_before = count_fds();
    f->backend = backend;
    f->skip = backend == NSBOX_SP_BACKEND_OPENAT2 && !nsbox_sp_have_openat2();
    nsbox_sp_set_backend(backend);
    build_tree(f);
    *state = f;
    return 0;
}

static int setup_openat2(void **state)
{
    return group_setup(state, NSBOX_SP_BACKEND_OPENAT2);
}

static int setup_walk(void **state)
{
    return group_setup(state, NSBOX_SP_BACKEND_WALK);
}

static int group_teardown(void **state)
{
    struct fx *f = *state;
    nsbox_sp_set_backend(NSBOX_SP_BACKEND_AUTO);
    close(f->rootfd);
    close(f->basefd);
    int leaked = f->fds_before >= 0 ? count_fds() - f->fds_before : 0;
    if (leaked != 0)
        fprintf(stderr, "safepath: %d file descriptor(s) leaked by the %s group\n", leaked,
                f->backend == NSBOX_SP_BACKEND_WALK ? "walker" : "openat2");
    /* FTW_PHYS: never follow the fixture's own escaping links while deleting. */
    nftw(f->base, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    free(f);
    return leaked == 0 ? 0 : -1; /* a failing teardown fails the group */
}

static struct fx *fx_of(void **state)
{
    struct fx *f = *state;
    if (f->skip) skip();
    /* cmocka runs groups one after the other; set it again in case a test changed it. */
    nsbox_sp_set_backend(f->backend);
    return f;
}

/* Open path in the fixture's root; on failure return -errno (checked against e). */
static int sp(struct fx *f, const char *path, int flags, unsigned how)
{
    struct nsbox_err e = {0};
    int fd = nsbox_sp_open(f->rootfd, path, flags, 0, how, &e);
    if (fd >= 0) return fd;
    assert_int_equal(fd, -1);
    assert_true(e.sys_errno > 0);
    assert_true(e.msg[0] != '\0');
    return -e.sys_errno;
}

static void expect_file(struct fx *f, const char *path, int flags, unsigned how,
                        const struct stat *want)
{
    int fd = sp(f, path, flags, how);
    if (fd < 0) fail_msg("open '%s': %s", path, strerror(-fd));
    assert_fd_is(fd, want);
    close(fd);
}

#endif
