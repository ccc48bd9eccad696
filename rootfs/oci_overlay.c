/* The overlay of an image's layers: see oci_overlay.h. */
#define _GNU_SOURCE
#include "oci_overlay.h"
#include "cleanup.h"
#include "oci_layers.h"
#include "ocimanifest.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/mount.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* What failed in making the overlay. The helper child of mount_in_userns makes only system
 * calls (it is a bare clone), so it sends this back and the parent says it. */
enum ovl_step { OVL_FSOPEN = 1, OVL_USERXATTR, OVL_LOWERDIR, OVL_CREATE, OVL_MOUNT, OVL_MAPS };
struct ovl_fail {
    int step; /* 0: none */
    int err;
    char log[256]; /* the kernel's own words (the fs context's log), or "" */
};

static int ovl_failed(struct ovl_fail *f, enum ovl_step step, int fs)
{
    f->step = step;
    f->err = errno;
    ssize_t n = fs >= 0 ? read(fs, f->log, sizeof f->log - 1) : -1;
    f->log[n > 0 ? n : 0] = '\0';
    f->log[strcspn(f->log, "\n")] = '\0';
    return -1;
}

static int ovl_error(const struct ovl_fail *f, struct nsbox_err *e)
{
    static const char *const what[] = {[OVL_FSOPEN] = "overlayfs is not available",
                                       [OVL_USERXATTR] = "userxattr",
                                       [OVL_LOWERDIR] = "lowerdir",
                                       [OVL_CREATE] = "create",
                                       [OVL_MOUNT] = "mount",
                                       [OVL_MAPS] = "the user namespace's maps"};
    bool known = f->step > 0 && f->step <= OVL_MAPS;
    errno = f->err;
    return nsbox_err_sys(e, "overlay of the image's layers: %s%s%.*s",
                         known ? what[f->step] : "its helper", f->log[0] ? ": " : "",
                         (int)sizeof f->log, f->log);
}

/* The overlay of lowers (O_PATH directory fds, or, when paths, their paths), top first. With
 * paths it makes only system calls (the helper child's case). */
static int mount_lowers(const int *fds, const char *const *paths, size_t n, int *mount_fd,
                        struct ovl_fail *f)
{
    *mount_fd = -1;
    cleanup_close int fs = (int)syscall(SYS_fsopen, "overlay", FSOPEN_CLOEXEC);
    if (fs < 0)
        return ovl_failed(f, OVL_FSOPEN, -1);
    /* user.overlay.* xattrs: the one form that an overlay mounted in a user namespace reads
     * too (docs/decisions.md) */
    if (syscall(SYS_fsconfig, fs, FSCONFIG_SET_FLAG, "userxattr", NULL, 0) < 0)
        return ovl_failed(f, OVL_USERXATTR, fs);
    for (size_t i = 0; i < n; i++) {
        char p[64];
        long r = -1;
        if (paths)
            r = syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, "lowerdir+", paths[i], 0);
        else if ((r = syscall(SYS_fsconfig, fs, FSCONFIG_SET_FD, "lowerdir+", NULL, fds[i])) < 0) {
            /* kernels before layers by descriptor: the same directory by its /proc path */
            snprintf(p, sizeof p, "/proc/self/fd/%d", fds[i]);
            r = syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, "lowerdir+", p, 0);
        }
        if (r < 0)
            return ovl_failed(f, OVL_LOWERDIR, fs);
    }
    if (syscall(SYS_fsconfig, fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
        return ovl_failed(f, OVL_CREATE, fs);
    int m = (int)syscall(SYS_fsmount, fs, FSMOUNT_CLOEXEC,
                         MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
    if (m < 0)
        return ovl_failed(f, OVL_MOUNT, fs);
    *mount_fd = m;
    return 0;
}

static int write_text(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    ssize_t n = fd < 0 ? -1 : write(fd, text, strlen(text));
    int err = errno;
    if (fd >= 0)
        close(fd);
    errno = err;
    return n == (ssize_t)strlen(text) ? 0 : -1;
}

/* The child's side, in its own user namespace (its uid as root there, once maps[0] and maps[1]
 * are written) and mount namespace, in which the user may mount an overlay; the layers are
 * looked up by path from inside it (a layer opened outside belongs to another mount namespace,
 * which overlayfs refuses). System calls only: see mount_in_userns. */
static void child_mount(int sock, const char *const *paths, size_t n, char maps[2][32])
{
    struct ovl_fail f = {0};
    int m = -1;
    if (write_text("/proc/self/uid_map", maps[0]) < 0 ||
        write_text("/proc/self/setgroups", "deny") < 0 ||
        write_text("/proc/self/gid_map", maps[1]) < 0)
        ovl_failed(&f, OVL_MAPS, -1);
    else
        mount_lowers(NULL, paths, n, &m, &f);
    char buf[CMSG_SPACE(sizeof(int))] = {0};
    struct iovec io = {.iov_base = &f, .iov_len = sizeof f};
    struct msghdr msg = {.msg_iov = &io, .msg_iovlen = 1};
    if (m >= 0)
        nsbox_cmsg_put_fds(&msg, buf, &m, 1);
    ssize_t r = sendmsg(sock, &msg, MSG_NOSIGNAL);
    _exit(r < 0 ? 1 : 0);
}

/* The helper is a bare clone made in its new namespaces (nsbox_clone_bare), not fork and then
 * unshare: unshare(CLONE_NEWUSER) refuses a process that is not alone (EINVAL), and a forked
 * child of a threaded process is not always (ThreadSanitizer starts a thread in it); a clone
 * that fails says the kernel's real reason. It copies the address space without the C
 * library's fork handlers, so it makes only system calls. */
static int mount_in_userns(const char *const *paths, size_t n, int *mount_fd, struct nsbox_err *e)
{
    *mount_fd = -1;
    char maps[2][32];
    snprintf(maps[0], sizeof maps[0], "0 %u 1", (unsigned)geteuid());
    snprintf(maps[1], sizeof maps[1], "0 %u 1", (unsigned)getegid());
    int sp[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0)
        return nsbox_err_sys(e, "overlay of the image's layers: socketpair");
    pid_t pid = nsbox_clone_bare(CLONE_NEWUSER | CLONE_NEWNS | SIGCHLD);
    if (pid == 0) {
        close(sp[0]);
        child_mount(sp[1], paths, n, maps);
    }
    int err = errno;
    close(sp[1]);
    if (pid < 0) {
        close(sp[0]);
        errno = err;
        return nsbox_err_sys(e, "overlay of the image's layers: a user and mount namespace");
    }
    struct ovl_fail cf = {0};
    char buf[CMSG_SPACE(sizeof(int))];
    struct iovec io = {.iov_base = &cf, .iov_len = sizeof cf};
    struct msghdr msg = {
        .msg_iov = &io, .msg_iovlen = 1, .msg_control = buf, .msg_controllen = sizeof buf};
    ssize_t r;
    while ((r = recvmsg(sp[0], &msg, MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR) {
    }
    err = errno;
    close(sp[0]);
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
    }
    struct cmsghdr *c = r > 0 ? CMSG_FIRSTHDR(&msg) : NULL;
    if (c && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
        c->cmsg_len == CMSG_LEN(sizeof(int))) {
        memcpy(mount_fd, CMSG_DATA(c), sizeof(int));
        return 0;
    }
    if (r == (ssize_t)sizeof cf && cf.step) {
        cf.log[sizeof cf.log - 1] = '\0';
        return ovl_error(&cf, e);
    }
    errno = r < 0 ? err : EPIPE;
    return nsbox_err_sys(e, "overlay of the image's layers: its helper");
}

int nsbox_oci_overlay_lowers(const char *images, int base_fd, const char *const *rel, size_t n,
                             int *mount_fd, struct nsbox_err *e)
{
    *mount_fd = -1;
    if (n < 2 || n > NSBOX_OCI_LAYERS_MAX + 1)
        return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL, "an overlay of %zu layers", n);
    if (geteuid() != 0) {
        cleanup_free char(*paths)[PATH_MAX] = malloc(n * sizeof *paths);
        cleanup_free const char **pv = malloc(n * sizeof *pv);
        if (!paths || !pv)
            return nsbox_err_set(e, NSBOX_E_NOMEM, ENOMEM, "out of memory");
        for (size_t i = 0; i < n; i++) {
            snprintf(paths[i], PATH_MAX, "%s/%s", images, rel[i]);
            pv[i] = paths[i];
        }
        return mount_in_userns(pv, n, mount_fd, e);
    }
    cleanup_close int own = base_fd >= 0 ? -1 : open(images, O_PATH | O_DIRECTORY | O_CLOEXEC);
    int base = base_fd >= 0 ? base_fd : own;
    if (base < 0)
        return nsbox_err_sys(e, "image store %s", images);
    int fds[NSBOX_OCI_LAYERS_MAX + 1] = {0};
    size_t opened = 0;
    int r = 0;
    for (; opened < n; opened++) {
        fds[opened] = openat(base, rel[opened], O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fds[opened] < 0) {
            r = nsbox_err_sys(e, "layer %s", rel[opened]);
            break;
        }
    }
    struct ovl_fail f = {0};
    if (r == 0 && mount_lowers(fds, NULL, n, mount_fd, &f) < 0)
        r = ovl_error(&f, e);
    for (size_t i = 0; i < opened; i++)
        close(fds[i]);
    return r;
}

/* The store, seen through an idmapped mount (a detached clone): 1 when there are none here. */
static int idmapped_store(const char *images, int userns_fd, int *fd, struct nsbox_err *e)
{
    *fd = (int)syscall(SYS_open_tree, AT_FDCWD, images, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
    if (*fd < 0)
        return nsbox_err_sys(e, "image store %s", images);
    struct mount_attr attr = {.attr_set = MOUNT_ATTR_IDMAP | MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID |
                                          MOUNT_ATTR_NODEV,
                              .userns_fd = (uint64_t)userns_fd};
    if (syscall(SYS_mount_setattr, *fd, "", AT_EMPTY_PATH, &attr, sizeof attr) == 0)
        return 0;
    int err = errno;
    nsbox_closep(fd);
    *fd = -1;
    errno = err;
    if (err == EINVAL || err == EOPNOTSUPP || err == ENOSYS || err == EPERM)
        return 1;
    return nsbox_err_sys(e, "image store %s: idmapped mount", images);
}

int nsbox_oci_overlay_image(const char *image_dir, int idmap_userns_fd, int *mount_fd,
                            struct nsbox_err *e)
{
    *mount_fd = -1;
    char images[PATH_MAX];
    const char *slash = strrchr(image_dir, '/');
    if (!slash || slash == image_dir || (size_t)(slash - image_dir) >= sizeof images)
        return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL, "image %s: not in a store", image_dir);
    snprintf(images, sizeof images, "%.*s", (int)(slash - image_dir), image_dir);
    const char *name = slash + 1;
    cleanup_close int dfd = open(image_dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    cleanup_free char(*ids)[NSBOX_OCI_CHAIN_HEX + 1] = malloc(NSBOX_OCI_LAYERS_MAX * sizeof *ids);
    cleanup_free char(*rel)[NSBOX_OCI_CHAIN_HEX + 80] =
        malloc((NSBOX_OCI_LAYERS_MAX + 1) * sizeof *rel);
    const char *rv[NSBOX_OCI_LAYERS_MAX + 1];
    size_t n = 0;
    if (!ids || !rel)
        return nsbox_err_set(e, NSBOX_E_NOMEM, ENOMEM, "out of memory");
    if (dfd < 0 || nsbox_oci_layers_read(dfd, ids, &n) < 0)
        return nsbox_err_sys(e, "image %s: its list of layers", name);
    snprintf(rel[0], sizeof rel[0], "%s/top", name);
    rv[0] = rel[0];
    for (size_t i = 0; i < n; i++) {
        const char *id = ids[n - 1 - i];
        snprintf(rel[i + 1], sizeof rel[i + 1], ".layers/%s/diff", id);
        rv[i + 1] = rel[i + 1];
        struct stat st;
        char p[PATH_MAX + 128];
        snprintf(p, sizeof p, "%s/%s", images, rel[i + 1]);
        if (stat(p, &st) < 0)
            return nsbox_err_set(e, NSBOX_E_NOTFOUND, errno,
                                 "image %s: its layer %.19s is missing from the layer store "
                                 "(%s): `nsbox image rm %s` and import or pull it again",
                                 name, id, strerror(errno), name);
    }
    cleanup_close int base = -1;
    if (idmap_userns_fd >= 0) {
        int r = idmapped_store(images, idmap_userns_fd, &base, e);
        if (r != 0)
            return r;
    }
    return nsbox_oci_overlay_lowers(images, base, rv, n + 1, mount_fd, e);
}
