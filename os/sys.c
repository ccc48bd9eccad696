/* Production implementation of the syscall seam. */
#define _GNU_SOURCE
#include "sys.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/mount.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <unistd.h>

static int real_mount(const char *src, const char *target, const char *fstype, unsigned long flags,
                      const void *data)
{
    return mount(src, target, fstype, flags, data);
}

static int real_pivot_root(const char *new_root, const char *put_old)
{
    return (int)syscall(SYS_pivot_root, new_root, put_old);
}

static int real_open_tree(int dfd, const char *path, unsigned flags)
{
    return (int)syscall(SYS_open_tree, dfd, path, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | flags);
}

static int real_mount_setattr_fd(int fd, int recursive, uint64_t set, uint64_t clr)
{
    struct mount_attr attr = {.attr_set = set, .attr_clr = clr};
    return (int)syscall(SYS_mount_setattr, fd, "", AT_EMPTY_PATH | (recursive ? AT_RECURSIVE : 0),
                        &attr, sizeof attr);
}

static int real_mount_propagation_fd(int fd, int recursive, uint64_t propagation)
{
    struct mount_attr attr = {.propagation = propagation};
    return (int)syscall(SYS_mount_setattr, fd, "", AT_EMPTY_PATH | (recursive ? AT_RECURSIVE : 0),
                        &attr, sizeof attr);
}

static int real_mount_setattr_path(const char *path, int recursive, uint64_t set, uint64_t clr)
{
    struct mount_attr attr = {.attr_set = set, .attr_clr = clr};
    return (int)syscall(SYS_mount_setattr, AT_FDCWD, path, recursive ? AT_RECURSIVE : 0, &attr,
                        sizeof attr);
}

static int real_move_mount_to(int fd, const char *target)
{
    /* Relative targets resolve against the working directory: the new root during set-up. */
    return (int)syscall(SYS_move_mount, fd, "", AT_FDCWD, target, MOVE_MOUNT_F_EMPTY_PATH);
}

static int real_move_mount_to_fd(int fd, int target_fd)
{
    return (int)syscall(SYS_move_mount, fd, "", target_fd, "",
                        MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH);
}

static int real_mkdir(const char *path, mode_t mode)
{
    return mkdir(path, mode);
}

static int real_symlink(const char *linktext, const char *path)
{
    return symlink(linktext, path);
}

static int real_create_file(const char *path, mode_t mode)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
    if (fd < 0)
        return -1;
    close(fd);
    return 0;
}

static int real_write_file(const char *path, const char *data, size_t len, mode_t mode)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
    if (fd < 0)
        return -1;
    while (len > 0) {
        ssize_t w = write(fd, data, len);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            int saved = errno;
            close(fd);
            errno = saved;
            return -1;
        }
        data += w;
        len -= (size_t)w;
    }
    return close(fd);
}

static int real_close(int fd)
{
    return close(fd);
}

const struct nsbox_sys nsbox_sys_real = {
    .mount = real_mount,
    .umount2 = umount2,
    .pivot_root = real_pivot_root,
    .open_tree = real_open_tree,
    .mount_setattr_fd = real_mount_setattr_fd,
    .mount_propagation_fd = real_mount_propagation_fd,
    .mount_setattr_path = real_mount_setattr_path,
    .move_mount_to = real_move_mount_to,
    .move_mount_to_fd = real_move_mount_to_fd,
    .mkdir = real_mkdir,
    .symlink = real_symlink,
    .create_file = real_create_file,
    .write_file = real_write_file,
    .close = real_close,
};
