/* The thin seam in front of privileged kernel calls (youki's `Syscall` trait, minijail's split):
 * the mount executor and the containment steps call through this table, so unit tests can
 * record what would be done without root. nsbox_sys_real is the only production table. */
#ifndef NSBOX_SYS_H
#define NSBOX_SYS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct nsbox_sys {
    int (*mount)(const char *src, const char *target, const char *fstype, unsigned long flags,
                 const void *data);
    int (*umount2)(const char *target, int flags);
    int (*pivot_root)(const char *new_root, const char *put_old);
    /* open_tree(dfd, path, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | flags) */
    int (*open_tree)(int dfd, const char *path, unsigned flags);
    /* mount_setattr(fd, "", AT_EMPTY_PATH | (recursive ? AT_RECURSIVE : 0), set, clr) */
    int (*mount_setattr_fd)(int fd, int recursive, uint64_t attr_set, uint64_t attr_clr);
    /* mount_setattr(fd, "", AT_EMPTY_PATH | (recursive ? AT_RECURSIVE : 0)) of the propagation
     * (MS_PRIVATE, MS_SLAVE, MS_SHARED, MS_UNBINDABLE) */
    int (*mount_propagation_fd)(int fd, int recursive, uint64_t propagation);
    /* mount_setattr(AT_FDCWD, path, recursive ? AT_RECURSIVE : 0, set, clr): in place */
    int (*mount_setattr_path)(const char *path, int recursive, uint64_t attr_set,
                              uint64_t attr_clr);
    /* move_mount(fd, "", AT_FDCWD, target, MOVE_MOUNT_F_EMPTY_PATH) */
    int (*move_mount_to)(int fd, const char *target);
    /* move_mount(fd, "", target_fd, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) */
    int (*move_mount_to_fd)(int fd, int target_fd);
    int (*mkdir)(const char *path, mode_t mode);
    int (*symlink)(const char *linktext, const char *path);
    int (*create_file)(const char *path, mode_t mode); /* empty regular file (a mount target) */
    int (*write_file)(const char *path, const char *data, size_t len, mode_t mode);
    int (*close)(int fd);
};

extern const struct nsbox_sys nsbox_sys_real;

#endif
