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
#include <linux/capability.h>
#include <linux/mount.h>
#include <linux/openat2.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static int ovl_failed(struct nsbox_oci_overlay_fail *f, enum nsbox_oci_overlay_step step, int fs)
{
    f->step = step;
    f->err = errno;
    ssize_t n = fs >= 0 ? read(fs, f->log, sizeof f->log - 1) : -1;
    f->log[n > 0 ? n : 0] = '\0';
    f->log[strcspn(f->log, "\n")] = '\0';
    return -1;
}

static int ovl_error(const struct nsbox_oci_overlay_fail *f, const char *whose, struct nsbox_err *e)
{
    static const char *const what[] = {[NSBOX_OCI_OVERLAY_FSOPEN] = "overlayfs is not available",
                                       [NSBOX_OCI_OVERLAY_USERXATTR] = "userxattr",
                                       [NSBOX_OCI_OVERLAY_LOWERDIR] = "lowerdir",
                                       [NSBOX_OCI_OVERLAY_CREATE] = "create",
                                       [NSBOX_OCI_OVERLAY_MOUNT] = "mount",
                                       [NSBOX_OCI_OVERLAY_MAPS] = "the user namespace's maps",
                                       [NSBOX_OCI_OVERLAY_UPPERDIR] = "upperdir",
                                       [NSBOX_OCI_OVERLAY_WORKDIR] = "workdir",
                                       [NSBOX_OCI_OVERLAY_OPTION] = "an option",
                                       [NSBOX_OCI_OVERLAY_METACOPY] = "metacopy"};
    bool known = f->step > 0 && f->step <= NSBOX_OCI_OVERLAY_METACOPY;
    errno = f->err;
    return nsbox_err_sys(e, "overlay of %s layers: %s%s%.*s", whose,
                         known ? what[f->step] : "its helper", f->log[0] ? ": " : "",
                         (int)sizeof f->log, f->log);
}

/* What an overlay is made of. An image's (nsbox's own): lowers only, read-only, their opaque
 * directories marked with user.overlay.* (userxattr). An engine's made again (ovl_root.c):
 * writable, trusted.overlay.* as the engine's layers have them, with its own options. */
struct ovl_layers {
    const int *fds;           /* O_PATH directory descriptors, top first; or */
    const char *const *paths; /* their paths (the helper child's case) */
    size_t n;
    int upper, work;          /* O_PATH directories of one mount; -1: read-only, userxattr */
    const char *redirect_dir; /* NULL: the kernel's default */
    bool metacopy;
};

/* A layer option by descriptor, or, on kernels before layers by descriptor, by its /proc
 * path; with paths, by path. */
static long set_layer(int fs, const char *key, int fd, const char *path)
{
    if (path)
        return syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, key, path, 0);
    long r = syscall(SYS_fsconfig, fs, FSCONFIG_SET_FD, key, NULL, fd);
    if (r < 0) {
        char p[64];
        snprintf(p, sizeof p, "/proc/self/fd/%d", fd);
        r = syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, key, p, 0);
    }
    return r;
}

/* The options of a writable overlay over an engine's layers: no index (the engine's own
 * overlay holds the upper directory, which index=on would refuse, EBUSY), the engine's
 * metacopy and redirect_dir. Without metacopy the kernel refuses to open a file that the
 * engine copied up metadata-only (EPERM), and with it follows only what the engine wrote:
 * the container cannot write trusted.overlay.* attributes (its root's seccomp refusals, and
 * the kernel's, which keeps trusted.* to the host's CAP_SYS_ADMIN). */
static int rw_options(int fs, const struct ovl_layers *l, struct nsbox_oci_overlay_fail *f)
{
    if (set_layer(fs, "upperdir", l->upper, NULL) < 0)
        return ovl_failed(f, NSBOX_OCI_OVERLAY_UPPERDIR, fs);
    if (set_layer(fs, "workdir", l->work, NULL) < 0)
        return ovl_failed(f, NSBOX_OCI_OVERLAY_WORKDIR, fs);
    if (syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, "index", "off", 0) < 0)
        return ovl_failed(f, NSBOX_OCI_OVERLAY_OPTION, fs);
    if (syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, "metacopy", l->metacopy ? "on" : "off", 0) <
        0)
        return ovl_failed(f, NSBOX_OCI_OVERLAY_METACOPY, fs);
    if (l->redirect_dir &&
        syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, "redirect_dir", l->redirect_dir, 0) < 0)
        return ovl_failed(f, NSBOX_OCI_OVERLAY_OPTION, fs);
    return 0;
}

/* The overlay of l. With paths it makes only system calls (the helper child's case). */
static int mount_layers(const struct ovl_layers *l, int *mount_fd, struct nsbox_oci_overlay_fail *f)
{
    *mount_fd = -1;
    bool rw = l->upper >= 0;
    cleanup_close int fs = (int)syscall(SYS_fsopen, "overlay", FSOPEN_CLOEXEC);
    if (fs < 0)
        return ovl_failed(f, NSBOX_OCI_OVERLAY_FSOPEN, -1);
    /* user.overlay.* xattrs: the one form that an overlay mounted in a user namespace reads
     * too (docs/decisions.md) */
    if (!rw && syscall(SYS_fsconfig, fs, FSCONFIG_SET_FLAG, "userxattr", NULL, 0) < 0)
        return ovl_failed(f, NSBOX_OCI_OVERLAY_USERXATTR, fs);
    for (size_t i = 0; i < l->n; i++)
        if (set_layer(fs, "lowerdir+", l->fds ? l->fds[i] : -1, l->paths ? l->paths[i] : NULL) < 0)
            return ovl_failed(f, NSBOX_OCI_OVERLAY_LOWERDIR, fs);
    if (rw && rw_options(fs, l, f) < 0)
        return -1;
    if (syscall(SYS_fsconfig, fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
        return ovl_failed(f, NSBOX_OCI_OVERLAY_CREATE, fs);
    int m = (int)syscall(SYS_fsmount, fs, FSMOUNT_CLOEXEC,
                         (rw ? 0 : MOUNT_ATTR_RDONLY) | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
    if (m < 0)
        return ovl_failed(f, NSBOX_OCI_OVERLAY_MOUNT, fs);
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
    struct nsbox_oci_overlay_fail f = {0};
    int m = -1;
    if (write_text("/proc/self/uid_map", maps[0]) < 0 ||
        write_text("/proc/self/setgroups", "deny") < 0 ||
        write_text("/proc/self/gid_map", maps[1]) < 0)
        ovl_failed(&f, NSBOX_OCI_OVERLAY_MAPS, -1);
    else
        mount_layers(&(struct ovl_layers){.paths = paths, .n = n, .upper = -1, .work = -1}, &m, &f);
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
    struct nsbox_oci_overlay_fail cf = {0};
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
        return ovl_error(&cf, "the image's", e);
    }
    errno = r < 0 ? err : EPIPE;
    return nsbox_err_sys(e, "overlay of the image's layers: its helper");
}

/* A detached clone of the directory path (below dfd; "" for dfd itself) seen through an
 * idmapped mount of userns_fd, with attr set on it too: 1 when there are none here. */
static int idmapped_clone(int dfd, const char *path, int userns_fd, uint64_t attr, int *fd,
                          struct nsbox_err *e)
{
    *fd = (int)syscall(SYS_open_tree, dfd, path,
                       OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC |
                           (*path ? AT_SYMLINK_NOFOLLOW : AT_EMPTY_PATH));
    if (*fd < 0)
        return nsbox_err_sys(e, "%s", *path ? path : "a layer");
    struct mount_attr ma = {.attr_set = MOUNT_ATTR_IDMAP | attr, .userns_fd = (uint64_t)userns_fd};
    if (syscall(SYS_mount_setattr, *fd, "", AT_EMPTY_PATH, &ma, sizeof ma) == 0)
        return 0;
    int err = errno;
    nsbox_closep(fd);
    *fd = -1;
    errno = err;
    int r = err == EINVAL || err == EOPNOTSUPP || err == ENOSYS || err == EPERM ? 1 : -1;
    nsbox_err_sys(e, "%s: idmapped mount", *path ? path : "a layer");
    return r;
}

#define LAYER_ATTR (MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV)

/* Each layer (rel[i] below images, a descriptor of the host's root-only path) cloned with an
 * idmap of userns_fd, or opened as it is (-1). One clone a layer, not one of the store: the
 * store's directories above the layers are closed to all but root (image.c, CLOSED_MODE), and
 * root has no override of their modes through an idmap that does not map their owner. */
static int open_lowers(const char *images, int userns_fd, const char *const *rel, size_t n,
                       int *fds, size_t *opened, struct nsbox_err *e)
{
    cleanup_close int base = open(images, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (base < 0)
        return nsbox_err_sys(e, "image store %s", images);
    for (*opened = 0; *opened < n; (*opened)++) {
        if (userns_fd >= 0) {
            int r = idmapped_clone(base, rel[*opened], userns_fd, LAYER_ATTR, &fds[*opened], e);
            if (r != 0)
                return r;
            continue;
        }
        fds[*opened] = openat(base, rel[*opened], O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fds[*opened] < 0)
            return nsbox_err_sys(e, "layer %s", rel[*opened]);
    }
    return 0;
}

int nsbox_oci_overlay_lowers(const char *images, int idmap_userns_fd, const char *const *rel,
                             size_t n, int *mount_fd, struct nsbox_err *e)
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
    int fds[NSBOX_OCI_LAYERS_MAX + 1] = {0};
    size_t opened = 0;
    int r = open_lowers(images, idmap_userns_fd, rel, n, fds, &opened, e);
    struct nsbox_oci_overlay_fail f = {0};
    struct ovl_layers l = {.fds = fds, .n = n, .upper = -1, .work = -1};
    if (r == 0 && mount_layers(&l, mount_fd, &f) < 0)
        r = ovl_error(&f, "the image's", e);
    for (size_t i = 0; i < opened; i++)
        close(fds[i]);
    return r;
}

/* The calling thread's file system ids become id, as the overlay's creator: the overlay makes
 * its own files (its work directory, whiteouts, copies up) with its creator's credentials,
 * which must have an id in the upper layer's idmap. The capabilities a change of the fsuid
 * from 0 drops are raised again. 0, or -1 with errno; saved for creator_restore. */
struct creator {
    uid_t uid;
    gid_t gid;
    struct __user_cap_header_struct hdr;
    struct __user_cap_data_struct caps[2];
};

static int creator_become(uint32_t id, struct creator *c)
{
    c->hdr = (struct __user_cap_header_struct){.version = _LINUX_CAPABILITY_VERSION_3};
    if (syscall(SYS_capget, &c->hdr, c->caps) < 0)
        return -1;
    c->uid = (uid_t)syscall(SYS_setfsuid, -1);
    c->gid = (gid_t)syscall(SYS_setfsgid, -1);
    syscall(SYS_setfsuid, id);
    syscall(SYS_setfsgid, id);
    if ((uint32_t)syscall(SYS_setfsuid, -1) != id || syscall(SYS_capset, &c->hdr, c->caps) < 0) {
        int err = errno ? errno : EPERM;
        syscall(SYS_setfsuid, c->uid);
        syscall(SYS_setfsgid, c->gid);
        errno = err;
        return -1;
    }
    return 0;
}

static void creator_restore(struct creator *c)
{
    syscall(SYS_setfsuid, c->uid);
    syscall(SYS_setfsgid, c->gid);
    syscall(SYS_capset, &c->hdr, c->caps);
}

bool nsbox_oci_overlay_metacopy_refused(const struct nsbox_oci_overlay_fail *f)
{
    return f->step == NSBOX_OCI_OVERLAY_METACOPY ||
           (f->step == NSBOX_OCI_OVERLAY_CREATE && f->err == EINVAL &&
            strstr(f->log, "metacopy") != NULL);
}

int nsbox_oci_overlay_rw(const struct nsbox_oci_overlay_rw *rw, int userns_fd, int *mount_fd,
                         struct nsbox_oci_overlay_fail *fail, struct nsbox_err *e)
{
    *mount_fd = -1;
    *fail = (struct nsbox_oci_overlay_fail){0};
    if (rw->n_lower < 1 || rw->n_lower > NSBOX_OCI_OVERLAY_RW_MAX)
        return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL, "an overlay of %zu lower layers",
                             rw->n_lower);
    cleanup_free int *fds = malloc(rw->n_lower * sizeof *fds);
    if (!fds)
        return nsbox_err_set(e, NSBOX_E_NOMEM, ENOMEM, "out of memory");
    size_t made = 0;
    int r = 0;
    cleanup_close int base = -1, upper = -1, work = -1;
    for (; r == 0 && made < rw->n_lower; made++)
        r = idmapped_clone(rw->lower[made], "", userns_fd, LAYER_ATTR, &fds[made], e);
    if (r != 0)
        made--;
    /* upper and work on one mount, as the kernel wants them: their common directory's clone */
    if (r == 0)
        r = idmapped_clone(rw->upper_base, "", userns_fd, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
                           &base, e);
    if (r == 0 && ((upper = nsbox_open_dir(base, rw->upper_rel, RESOLVE_NO_XDEV)) < 0 ||
                   (work = nsbox_open_dir(base, rw->work_rel, RESOLVE_NO_XDEV)) < 0))
        r = nsbox_err_sys(e, "%s %s", upper < 0 ? "upperdir" : "workdir",
                          upper < 0 ? rw->upper_rel : rw->work_rel);
    struct creator c;
    if (r == 0 && creator_become(rw->creator_id, &c) < 0)
        r = nsbox_err_sys(e, "the overlay's creator, host id %u", rw->creator_id);
    else if (r == 0) {
        struct ovl_layers l = {.fds = fds,
                               .n = rw->n_lower,
                               .upper = upper,
                               .work = work,
                               .redirect_dir = rw->redirect_dir,
                               .metacopy = rw->metacopy};
        r = mount_layers(&l, mount_fd, fail);
        creator_restore(&c);
        if (r < 0)
            r = ovl_error(fail, "the engine's", e);
    }
    struct statfs sf;
    if (r == 0 && (fstatfs(*mount_fd, &sf) < 0 || (sf.f_flags & ST_RDONLY))) {
        nsbox_closep(mount_fd);
        *mount_fd = -1;
        /* overlayfs goes read-only when it cannot make its work directory (its log says) */
        r = nsbox_err_set(e, NSBOX_E_UNSUPPORTED, EROFS,
                          "the kernel made the overlay read-only: its work directory could not "
                          "be made (the kernel's log says why)");
    }
    for (size_t i = 0; i < made; i++)
        close(fds[i]);
    return r;
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
    return nsbox_oci_overlay_lowers(images, idmap_userns_fd, rv, n + 1, mount_fd, e);
}
