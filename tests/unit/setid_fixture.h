/* What the seal's two test files share (test_setid.c: the walk of a root; test_setid_layers.c:
 * the layers' list and the seal from it): a temporary tree, files made in it, and the fake
 * `struct nsbox_sys` calls that record which paths a seal bound. */
#ifndef NSBOX_TESTS_SETID_FIXTURE_H
#define NSBOX_TESTS_SETID_FIXTURE_H
#define _GNU_SOURCE

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/mount.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

static char dir[PATH_MAX];
static char sealed_paths[16][PATH_MAX];
static size_t n_sealed;

/* the bind is the name itself, opened (dfd's own directory for ""): its target is what the
 * record reads back */
static inline int fake_open_tree(int dfd, const char *path, unsigned flags)
{
    (void)flags;
    if (!*path)
        return fcntl(dfd, F_DUPFD_CLOEXEC, 0);
    return openat(dfd, path, O_PATH | O_NOFOLLOW | O_CLOEXEC);
}

static inline int fake_setattr(int fd, int recursive, uint64_t set, uint64_t clr)
{
    (void)fd, (void)recursive, (void)clr;
    return set == MOUNT_ATTR_RDONLY ? 0 : (errno = EINVAL, -1);
}

static inline int fake_move_mount_to_fd(int fd, int target_fd)
{
    (void)fd;
    char link[64];
    snprintf(link, sizeof link, "/proc/self/fd/%d", target_fd);
    ssize_t n = readlink(link, sealed_paths[n_sealed], PATH_MAX - 1);
    if (n < 0 || n_sealed == 15)
        return -1;
    sealed_paths[n_sealed++][n] = '\0';
    return 0;
}

static inline void path_of(char *p, const char *name)
{
    snprintf(p, PATH_MAX, "%s/%s", dir, name);
}

/* A regular file name of the tree with mode (a set-id one needs no root when it is one's own). */
static inline void make(const char *name, mode_t mode)
{
    char p[PATH_MAX];
    path_of(p, name);
    int fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(chmod(p, mode), 0);
}

static inline bool was_sealed(const char *name)
{
    char p[PATH_MAX];
    path_of(p, name);
    for (size_t i = 0; i < n_sealed; i++)
        if (!strcmp(sealed_paths[i], p))
            return true;
    return false;
}

/* The tree removed, its directories a test shut made listable first. */
static inline int rm_tree(void)
{
    char cmd[2 * PATH_MAX + 32];
    snprintf(cmd, sizeof cmd, "chmod -R u+rwx '%s'; rm -rf '%s'", dir, dir);
    return system(cmd);
}

#endif
