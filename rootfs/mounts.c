/* Root filesystem I/O: the image's top level scanned for the plan (mount_plan.c), and the plan
 * carried out in the child. See mounts.h. */
#define _GNU_SOURCE
#include "mounts.h"
#include "cleanup.h"
#include "safepath.h"
#include "setid.h"
#include "util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/mount.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

static int scan_one(int rootfd, const char *name, struct nsbox_root_entry *en, bool *present)
{
    struct stat st;
    *present = false;
    if (fstatat(rootfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return errno == ENOENT ? 0 : -1;
    if (!S_ISDIR(st.st_mode) && !S_ISLNK(st.st_mode) && !S_ISREG(st.st_mode))
        return 0; /* fifos, sockets, devices at the top level are not exposed */
    snprintf(en->name, sizeof en->name, "%s", name);
    en->is_symlink = S_ISLNK(st.st_mode);
    en->is_file = S_ISREG(st.st_mode);
    if (en->is_symlink) {
        ssize_t n = readlinkat(rootfd, name, en->link, sizeof en->link - 1);
        if (n < 0)
            return -1;
        en->link[n] = '\0';
    }
    *present = true;
    return 0;
}

int nsbox_mounts_scan_image(struct nsbox_rootfs_cfg *cfg, struct nsbox_err *e)
{
    const struct nsbox_image *img = cfg->img;
    cleanup_close int rootfd = img->mount_fd >= 0
                                   ? fcntl(img->mount_fd, F_DUPFD_CLOEXEC, 0)
                                   : open(img->root, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (rootfd < 0)
        return nsbox_err_sys(e, "image %s: cannot open %s", img->name, img->root);
    cfg->n_entries = 0;
    if (img->kind == NSBOX_IMAGE_HOST) {
        /* Only the host's software, never its data: /usr and the merged-/usr links (or
         * directories on a host without merged /usr). */
        static const char *const host_entries[] = {"usr", "bin", "sbin", "lib", "lib32",
                                                   "lib64", "libx32", NULL};
        for (const char *const *n = host_entries; *n; n++) {
            bool present;
            if (scan_one(rootfd, *n, &cfg->entries[cfg->n_entries], &present) < 0)
                return nsbox_err_sys(e, "image host: cannot inspect /%s", *n);
            if (present)
                cfg->n_entries++;
        }
        return 0;
    }
    int dfd = openat(rootfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return nsbox_err_sys(e, "image %s: cannot read %s", img->name, img->root);
    DIR *d = fdopendir(dfd);
    if (!d) {
        close(dfd);
        return nsbox_err_sys(e, "image %s: cannot read %s", img->name, img->root);
    }
    struct dirent *de;
    int ret = 0;
    while ((de = readdir(d))) {
        if (!nsbox_mount_plan_shows(de->d_name))
            continue;
        if (cfg->n_entries >= NSBOX_ROOT_ENTRIES_MAX) {
            ret = nsbox_err_set(e, NSBOX_E_INVALID, E2BIG,
                                "image %s: more than %d entries at the top level", img->name,
                                NSBOX_ROOT_ENTRIES_MAX);
            break;
        }
        bool present;
        if (scan_one(rootfd, de->d_name, &cfg->entries[cfg->n_entries], &present) < 0) {
            ret = nsbox_err_sys(e, "image %s: cannot inspect /%s", img->name, de->d_name);
            break;
        }
        if (present)
            cfg->n_entries++;
    }
    closedir(d);
    return ret;
}

/* ---- child side executor --------------------------------------------------------------------- */

/* A clone's propagation (policy/propagation.h): a bind's source is a slave of the host's mount
 * here, and keeps receiving the host's mounts only when the config asks for it. */
static int set_propagation(const struct nsbox_sys *sys, int fd, const struct nsbox_mount_op *o)
{
    unsigned long steps[2];
    size_t n = nsbox_propagation_steps(&o->propagation, true, o->recursive, steps);
    for (size_t i = 0; i < n; i++)
        if (sys->mount_propagation_fd(fd, (steps[i] & MS_REC) != 0, steps[i] & ~MS_REC) < 0)
            return -1;
    return 0;
}

/* Detached copy of a bind source (at dfd/src; dfd alone when src is "") with its attributes and
 * propagation set on the copy, so the mount never appears with weaker flags even for an
 * instant, and flags the kernel locked on the source (nosuid, nodev from a more privileged
 * namespace) are kept rather than cleared. */
static int clone_source_at(const struct nsbox_sys *sys, const struct nsbox_mount_op *o, int dfd,
                           const char *src, struct nsbox_err *e)
{
    unsigned flags = (o->recursive ? AT_RECURSIVE : 0) | (src[0] ? 0 : AT_EMPTY_PATH) |
                     (o->src_in_image ? AT_SYMLINK_NOFOLLOW : 0);
    int fd = sys->open_tree(dfd, src, flags);
    if (fd < 0)
        return nsbox_err_sys(e, "rootfs: cannot bind %s", o->src);
    if (o->attr && sys->mount_setattr_fd(fd, o->recursive, o->attr, 0) < 0) {
        nsbox_err_sys(e, "rootfs: cannot set attributes of %s", o->src);
        sys->close(fd);
        return -1;
    }
    if (set_propagation(sys, fd, o) < 0) {
        nsbox_err_sys(e, "rootfs: cannot set the propagation of %s", o->src);
        sys->close(fd);
        return -1;
    }
    return fd;
}

/* A host directory the launcher opened once and checked (a --workspace DIR, sandbox/wsdir.h),
 * bound here by path: the launcher's descriptor names its own mount namespace's mount, which
 * the kernel does not clone into this one. src is the kernel's name for that directory, so no
 * symlink is followed on the way, and what is found must be the inode checked: a name another
 * user swapped since for a link, or for another directory, fails here instead of being bound. */
static int open_pinned(const struct nsbox_mount_op *o, struct nsbox_err *e)
{
    int fd = nsbox_open_dir(-1, o->src, 0);
    struct stat sb;
    if (fd >= 0 && fstat(fd, &sb) == 0 && sb.st_dev == o->pin_dev && sb.st_ino == o->pin_ino)
        return fd;
    int err = fd < 0 ? errno : ESTALE;
    if (fd >= 0)
        close(fd);
    return nsbox_err_set(e, NSBOX_E_INVALID, err,
                         "workspace %s changed while the sandbox was made (%s): not bound; "
                         "give a directory whose path no other user can change",
                         o->src,
                         err == ESTALE  ? "it is another directory now"
                         : err == ELOOP ? "a symbolic link is on its path now"
                                        : strerror(err));
}

static int clone_source(const struct nsbox_sys *sys, const struct nsbox_mount_op *o,
                        int image_rootfd, struct nsbox_err *e)
{
    if (o->src_pin) {
        cleanup_close int fd = open_pinned(o, e);
        return fd < 0 ? -1 : clone_source_at(sys, o, fd, "", e);
    }
    if (!o->late)
        return clone_source_at(sys, o, o->src_in_image ? image_rootfd : AT_FDCWD, o->src, e);
    /* the path only: cloned when attached (attach) */
    int fd = openat(o->src_in_image ? image_rootfd : AT_FDCWD, o->src,
                    O_PATH | O_CLOEXEC | (o->src_in_image ? O_NOFOLLOW : 0));
    return fd < 0 ? nsbox_err_sys(e, "rootfs: cannot bind %s", o->src) : fd;
}

int nsbox_mounts_prepare(const struct nsbox_sys *sys, const struct nsbox_mount_plan *plan,
                         const char *staging, const char *image_root, int image_fd, int ws_fd,
                         int *fds, int *rootfd, struct nsbox_err *e)
{
    for (size_t i = 0; i < plan->n; i++)
        fds[i] = -1;
    /* Nothing done from here on may propagate back to the host's mount namespace: a slave
     * receives and never sends (the kernel makes a less privileged namespace's copies slaves
     * already; this does not depend on it). What is not asked to receive is made private. */
    if (sys->mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) < 0)
        return nsbox_err_sys(e, "rootfs: make / a slave");
    /* The image's idmapped copy over its own directory, in this namespace only: the entries
     * below are cloned from it, and keep its idmap. */
    if (image_fd >= 0 && !plan->root_in_place) {
        /* made private first: a clone the launcher took in the host's namespace is a peer of
         * the host's mount, and what is bound from it would be too */
        int r = sys->mount_propagation_fd(image_fd, 1, MS_PRIVATE);
        if (r == 0)
            r = sys->move_mount_to(image_fd, image_root);
        sys->close(image_fd);
        if (r < 0)
            return nsbox_err_sys(e, "rootfs: idmapped image on %s", image_root);
    }
    /* The sources first: the root's mount point may hold some of them (the state directory:
     * a network's resolv.conf and hosts), which the tmpfs below hides from here on. */
    cleanup_close int image_rootfd = open(image_root, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (image_rootfd < 0)
        return nsbox_err_sys(e, "rootfs: open image root %s", image_root);
    for (size_t i = 0; i < plan->n; i++) {
        const struct nsbox_mount_op *o = &plan->ops[i];
        if (o->op != NSBOX_MOP_BIND && o->op != NSBOX_MOP_BIND_DEV)
            continue;
        if (o->src_fd >= 0) { /* the launcher's idmapped volume: this plan's from here */
            fds[i] = o->src_fd;
            if (sys->mount_propagation_fd(fds[i], 1, MS_PRIVATE) < 0) /* as the image's above */
                return nsbox_err_sys(e, "rootfs: make %s private", o->src);
            continue;
        }
        if (o->src_is_fd) {
            if (ws_fd < 0)
                return nsbox_err_set(e, NSBOX_E_INVALID, EBADF, "rootfs: %s is missing", o->src);
            fds[i] = ws_fd;
            ws_fd = -1;
            if (sys->mount_propagation_fd(fds[i], 1, MS_PRIVATE) < 0) /* as the image's above */
                return nsbox_err_sys(e, "rootfs: make %s private", o->src);
            continue;
        }
        fds[i] = clone_source(sys, o, image_rootfd, e);
        if (fds[i] < 0)
            return -1;
    }
    if (ws_fd >= 0) /* no workspace in the plan (an in-place root) */
        sys->close(ws_fd);
    if (plan->root_in_place) {
        /* the image's idmapped bind is the root itself; private before it is attached, as
         * pivot_root wants it: a clone of a shared mount (an engine's overlay root) is the
         * host's peer until then */
        int r =
            image_fd < 0 ? (errno = EBADF, -1) : sys->mount_propagation_fd(image_fd, 1, MS_PRIVATE);
        if (r == 0)
            r = sys->move_mount_to(image_fd, staging);
        if (image_fd >= 0)
            sys->close(image_fd);
        if (r < 0)
            return nsbox_err_sys(e, "rootfs: the image's root on %s", staging);
    } else {
        /* Owned by appuser: phase 2 creates the skeleton as appuser (a mapped id). The root
         * is made read-only once populated. */
        if (sys->mount("tmpfs", staging, "tmpfs", MS_NOSUID | MS_NODEV,
                       "mode=0755,size=1m,uid=1000,gid=1000") < 0)
            return nsbox_err_sys(e, "rootfs: tmpfs root on %s", staging);
    }
    *rootfd = open(staging, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (*rootfd < 0)
        return nsbox_err_sys(e, "rootfs: open %s", staging);
    return 0;
}

static int attach(const struct nsbox_sys *sys, int *fd, const struct nsbox_mount_op *o,
                  struct nsbox_err *e)
{
    const char *src = o->op == NSBOX_MOP_BIND_TEXT ? "nsbox's file" : o->src; /* for messages */
    if (o->late) { /* the path phase 1 opened, cloned now */
        int clone = clone_source_at(sys, o, *fd, "", e);
        sys->close(*fd);
        *fd = clone;
        if (clone < 0)
            return -1;
    }
    if (o->target_in_image) {
        /* The target is the image's file: a symlink there (to the host's files, or anywhere)
         * is refused instead of followed (CVE-2021-30465 family). */
        cleanup_close int here = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
        struct nsbox_err te;
        cleanup_close int tfd =
            here < 0 ? -1
                     : nsbox_sp_mount_target(here, o->target, o->target_dir, o->optional ? &te : e);
        if (tfd < 0 && here >= 0 && o->optional) { /* the image's own file stays */
            sys->close(*fd);
            *fd = -1;
            return 0;
        }
        int r = tfd < 0 ? -1 : sys->move_mount_to_fd(*fd, tfd);
        if (tfd >= 0 && r < 0)
            nsbox_err_sys(e, "rootfs: cannot mount %s on /%s", src, o->target);
        else if (tfd < 0)
            nsbox_err_wrap(e, "image");
        sys->close(*fd);
        *fd = -1;
        return r;
    }
    int r = sys->move_mount_to(*fd, o->target);
    if (r < 0)
        nsbox_err_sys(e, "rootfs: cannot mount %s on /%s", src, o->target);
    sys->close(*fd);
    *fd = -1;
    return r;
}

/* BIND_TEXT: the file is made on the root's tmpfs under a name of its own, cloned with its
 * attributes (as clone_source does for a host file) and bound; then the name goes, so that the
 * read-only bind is the file's only path. A file on the host for it was an inode of the host's
 * filesystem made and removed at every create (docs/decisions.md, "A sandbox's /etc/hosts is
 * made inside it"). */
#define TEXT_FILE_NAME ".nsbox-text"
static int bind_text(const struct nsbox_sys *sys, const struct nsbox_mount_op *o,
                     struct nsbox_err *e)
{
    if (sys->write_file(TEXT_FILE_NAME, o->src, strlen(o->src), 0444) < 0)
        return nsbox_err_sys(e, "rootfs: write the text of /%s", o->target);
    int fd = sys->open_tree(AT_FDCWD, TEXT_FILE_NAME, 0);
    int r = fd < 0 ? nsbox_err_sys(e, "rootfs: bind the text of /%s", o->target) : 0;
    if (r == 0 && o->attr && sys->mount_setattr_fd(fd, 0, o->attr, 0) < 0) {
        r = nsbox_err_sys(e, "rootfs: cannot set attributes of /%s", o->target);
        sys->close(fd);
    }
    if (r == 0)
        r = attach(sys, &fd, o, e);
    if (unlink(TEXT_FILE_NAME) < 0 && errno != ENOENT && r == 0)
        r = nsbox_err_sys(e, "rootfs: remove the name of /%s's text", o->target);
    return r;
}

/* The propagation a config asks for on a filesystem it mounts (a new one: no host mount is its
 * master), at dst (as apply_op's). */
static bool fs_propagation_asked(const struct nsbox_mount_op *o)
{
    bool fs = o->op == NSBOX_MOP_TMPFS || o->op == NSBOX_MOP_PROC ||
              o->op == NSBOX_MOP_DEVPTS || o->op == NSBOX_MOP_FS;
    return fs && o->propagation.kind != NSBOX_PROP_NONE;
}

int nsbox_mounts_propagate(const struct nsbox_sys *sys, const char *path,
                           const struct nsbox_propagation *p, bool host, bool tree)
{
    unsigned long steps[2];
    size_t n = p->kind == NSBOX_PROP_NONE ? 0 : nsbox_propagation_steps(p, host, tree, steps);
    for (size_t i = 0; i < n; i++)
        if (sys->mount(NULL, path, NULL, steps[i], NULL) < 0)
            return -1;
    return 0;
}

static int fs_propagation(const struct nsbox_sys *sys, const struct nsbox_mount_op *o,
                          const char *dst, struct nsbox_err *e)
{
    if (!fs_propagation_asked(o))
        return 0;
    if (nsbox_mounts_propagate(sys, dst, &o->propagation, false, false) < 0 && !o->optional)
        return nsbox_err_sys(e, "rootfs: set the propagation of /%s", o->target);
    return 0;
}

/* dst is the target relative to the working directory, the new root, or the /proc/self/fd path
 * of its descriptor (apply_in_root); null, dev/null's. Messages name o->target. */
static int apply_op(const struct nsbox_sys *sys, const struct nsbox_mount_op *o, const char *dst,
                    const char *null, int *fd, struct nsbox_err *e)
{
    switch (o->op) {
    case NSBOX_MOP_MKDIR:
        if (sys->mkdir(dst, o->mode) < 0 && errno != EEXIST)
            return nsbox_err_sys(e, "rootfs: mkdir /%s", o->target);
        return 0;
    case NSBOX_MOP_SYMLINK:
        if (sys->symlink(o->src, dst) < 0)
            return nsbox_err_sys(e, "rootfs: symlink /%s", o->target);
        return 0;
    case NSBOX_MOP_FILE:
        if (sys->create_file(dst, o->mode) < 0)
            return nsbox_err_sys(e, "rootfs: create /%s", o->target);
        return 0;
    case NSBOX_MOP_WRITE:
        if (sys->write_file(dst, o->data, strlen(o->data), o->mode ? o->mode : 0644) < 0)
            return nsbox_err_sys(e, "rootfs: write /%s", o->target);
        return 0;
    case NSBOX_MOP_TMPFS:
        if (sys->mount(o->src[0] ? o->src : "tmpfs", dst, "tmpfs", o->flags, o->data) < 0)
            return nsbox_err_sys(e, "rootfs: tmpfs on /%s", o->target);
        return 0;
    case NSBOX_MOP_BIND:
    case NSBOX_MOP_BIND_DEV:
        return attach(sys, fd, o, e);
    case NSBOX_MOP_BIND_TEXT:
        return bind_text(sys, o, e);
    case NSBOX_MOP_PROC:
        if (sys->mount(o->src[0] ? o->src : "proc", dst, "proc", o->flags, NULL) < 0)
            return nsbox_err_sys(e, "rootfs: mount proc (a pid namespace and an unmasked /proc "
                                    "on the host are needed)");
        return 0;
    case NSBOX_MOP_DEVPTS:
        if (sys->mount(o->src[0] ? o->src : "devpts", dst, "devpts", o->flags, o->data) < 0)
            return nsbox_err_sys(e, "rootfs: mount devpts");
        return 0;
    case NSBOX_MOP_FS:
        if (sys->mount(o->src, dst, o->fstype, o->flags, o->data[0] ? o->data : NULL) < 0 &&
            !o->optional)
            return nsbox_err_sys(e, "rootfs: mount %s on /%s", o->fstype, o->target);
        return 0;
    case NSBOX_MOP_MASK_FILE:
        /* dev/null here is the sandbox's own bind of the host's /dev/null, mounted above. */
        if (sys->mount(null, dst, NULL, MS_BIND, NULL) < 0 && errno != ENOENT)
            return nsbox_err_sys(e, "rootfs: mask /%s", o->target);
        return 0;
    case NSBOX_MOP_MASK:
        /* a directory takes an empty read-only tmpfs; anything else (ENOTDIR) /dev/null */
        if (sys->mount("tmpfs", dst, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
                       "size=0,nr_inodes=1") == 0 ||
            errno == ENOENT)
            return 0;
        if (errno == ENOTDIR &&
            (sys->mount(null, dst, NULL, MS_BIND, NULL) == 0 || errno == ENOENT))
            return 0;
        return nsbox_err_sys(e, "rootfs: mask /%s", o->target);
    case NSBOX_MOP_MASK_DIR:
        if (sys->mount("tmpfs", dst, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
                       "size=0,nr_inodes=1") < 0 &&
            errno != ENOENT)
            return nsbox_err_sys(e, "rootfs: mask /%s", o->target);
        return 0;
    case NSBOX_MOP_READONLY: {
        int rfd = sys->open_tree(AT_FDCWD, dst, o->recursive ? AT_RECURSIVE : 0);
        if (rfd < 0)
            return errno == ENOENT ? 0 : nsbox_err_sys(e, "rootfs: read-only /%s", o->target);
        int r = sys->mount_setattr_fd(rfd, o->recursive, o->attr, 0);
        if (r == 0)
            r = sys->move_mount_to(rfd, dst);
        if (r < 0)
            nsbox_err_sys(e, "rootfs: read-only /%s", o->target);
        sys->close(rfd);
        return r;
    }
    case NSBOX_MOP_SETATTR:
        if (sys->mount_setattr_path(dst, o->recursive, o->attr, 0) < 0)
            return nsbox_err_sys(e, "rootfs: set attributes of /%s", o->target);
        return 0;
    }
    return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL, "rootfs: unknown operation %d", (int)o->op);
}

/* An in-place root's operation (mounts.h, root_in_place): its target is resolved in the root
 * with no `..` and no symlink (safepath; masks aside, below), a missing mount point made there
 * on the way, and the operation acts on the descriptor through /proc/self/fd, where the kernel
 * follows no path again. A mask and a read-only path hide or protect what the container reads at
 * their path: their symlinks are followed, inside the root (never out of it, nor through /proc's
 * magic links), as the container will resolve them (a merged /usr's /bin/su is /usr/bin/su). A
 * mask, a read-only path and new attributes need their target to exist: an optional one that does
 * not, or cannot be resolved so, is left alone. */
static int apply_in_root(const struct nsbox_sys *sys, const struct nsbox_mount_op *o,
                         struct nsbox_err *e)
{
    bool existing = o->op == NSBOX_MOP_MASK || o->op == NSBOX_MOP_MASK_FILE ||
                    o->op == NSBOX_MOP_MASK_DIR || o->op == NSBOX_MOP_READONLY ||
                    o->op == NSBOX_MOP_SETATTR;
    struct nsbox_err oe, *te = o->optional ? &oe : e;
    char leaf[NAME_MAX + 1], dst[NAME_MAX + 64], null[64];
    cleanup_close int here = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (here < 0)
        return nsbox_err_sys(e, "rootfs: open the root");
    cleanup_close int tfd = -1, nfd = -1;
    if (o->op == NSBOX_MOP_SYMLINK)
        tfd = nsbox_sp_open_parent(here, o->target, NSBOX_SP_NOFOLLOW_ANY, leaf, sizeof leaf, e);
    else if (o->op == NSBOX_MOP_SETATTR)
        tfd = nsbox_sp_open(here, o->target, O_PATH, 0, NSBOX_SP_NOFOLLOW_ANY, te);
    else if (existing) /* symlinks followed, inside the root: what the container's path is */
        tfd = nsbox_sp_open(here, o->target, O_PATH, 0, 0, te);
    else
        tfd = nsbox_sp_mount_target(here, o->target, o->target_dir, te);
    /* as apply_op, a mask or read-only path that does not exist is no error */
    if (tfd < 0 && existing && o->op != NSBOX_MOP_SETATTR && te->sys_errno == ENOENT)
        return 0;
    if (tfd < 0)
        return o->optional ? 0 : nsbox_err_wrap(e, "root");
    if (o->op == NSBOX_MOP_MKDIR || o->op == NSBOX_MOP_FILE)
        return 0; /* the resolution made it */
    if (o->op == NSBOX_MOP_SYMLINK)
        snprintf(dst, sizeof dst, "/proc/self/fd/%d/%s", tfd, leaf);
    else
        snprintf(dst, sizeof dst, "/proc/self/fd/%d", tfd);
    /* a mask's /dev/null: the sandbox's own node, but resolved as any target is */
    if (o->op == NSBOX_MOP_MASK || o->op == NSBOX_MOP_MASK_FILE) {
        nfd = nsbox_sp_open(here, "dev/null", O_PATH, 0, NSBOX_SP_NOFOLLOW_ANY, e);
        if (nfd < 0)
            return nsbox_err_wrap(e, "rootfs: mask /%s", o->target);
    }
    snprintf(null, sizeof null, "/proc/self/fd/%d", nfd);
    if (o->op != NSBOX_MOP_READONLY) {
        if (apply_op(sys, o, dst, null, NULL, e) < 0)
            return -1;
        if (!fs_propagation_asked(o))
            return 0;
        /* tfd is the mount point's directory, now under the new filesystem: its propagation
         * is set on the mount found by resolving the target again */
        cleanup_close int mfd = nsbox_sp_open(here, o->target, O_PATH, 0, NSBOX_SP_NOFOLLOW_ANY, e);
        if (mfd < 0)
            return nsbox_err_wrap(e, "rootfs: /%s after its mount", o->target);
        snprintf(dst, sizeof dst, "/proc/self/fd/%d", mfd);
        return fs_propagation(sys, o, dst, e);
    }
    /* move_mount follows no symlink at its target, not even /proc's: onto the descriptor */
    int rfd = sys->open_tree(tfd, "", AT_EMPTY_PATH | (o->recursive ? AT_RECURSIVE : 0));
    int r = rfd < 0 ? -1 : sys->mount_setattr_fd(rfd, o->recursive, o->attr, 0);
    if (r == 0)
        r = sys->move_mount_to_fd(rfd, tfd);
    if (r < 0)
        nsbox_err_sys(e, "rootfs: read-only /%s", o->target);
    if (rfd >= 0)
        sys->close(rfd);
    return r;
}

/* A writable idmapped volume, attached at o->target: its set-id and file-capability programs
 * sealed as a writable root's are (setid.h), before any process of the container runs, and
 * the directories above them held in place, as other containers may write the volume at once
 * (nsbox_setid_seal_shared). */
static int seal_volume(const struct nsbox_sys *sys, int rootfd, const struct nsbox_mount_op *o,
                       struct nsbox_err *e)
{
    cleanup_close int vfd =
        nsbox_sp_open(rootfd, o->target, O_PATH | O_DIRECTORY, 0, NSBOX_SP_NOFOLLOW_ANY, e);
    size_t sealed;
    if (vfd < 0 || nsbox_setid_seal_shared(sys, vfd, &sealed, e) < 0)
        return nsbox_err_wrap(e, "mounts: the idmapped volume /%s", o->target);
    if (fchdir(rootfd) < 0) /* the walk leaves the volume as the working directory */
        return nsbox_err_sys(e, "rootfs: enter the new root");
    return 0;
}

/* The writable root's programs sealed: from its layers' list where there is one it can trust
 * (setid.h), else by the walk of the whole root. */
static int seal_root(const struct nsbox_sys *sys, const struct nsbox_mount_plan *plan, int rootfd,
                     struct nsbox_err *e)
{
    size_t sealed;
    int r = plan->seal_list ? nsbox_setid_seal_listed(sys, rootfd, plan->seal_list, &sealed, e)
                            : 1;
    return r <= 0 ? r : nsbox_setid_seal(sys, rootfd, &sealed, e);
}

int nsbox_mounts_enter(const struct nsbox_sys *sys, const struct nsbox_mount_plan *plan, int rootfd,
                       int *fds, struct nsbox_err *e)
{
    if (fchdir(rootfd) < 0)
        return nsbox_err_sys(e, "rootfs: enter the new root");
    if (plan->root_in_place && seal_root(sys, plan, rootfd, e) < 0)
        return -1;
    for (size_t i = 0; i < plan->n; i++) {
        const struct nsbox_mount_op *o = &plan->ops[i];
        /* binds resolve a target in the image themselves (attach) */
        bool in_root = o->target_in_image && o->op != NSBOX_MOP_BIND &&
                       o->op != NSBOX_MOP_BIND_DEV && o->op != NSBOX_MOP_BIND_TEXT;
        int r = in_root ? apply_in_root(sys, o, e)
                        : apply_op(sys, o, o->target, "dev/null", &fds[i], e);
        if (r == 0 && !in_root)
            r = fs_propagation(sys, o, o->target, e);
        if (r == 0 && o->seal)
            r = seal_volume(sys, rootfd, o, e);
        if (r < 0)
            return -1;
    }
    /* pivot_root(".", ".") stacks the old root on top of the new one; detaching it leaves the
     * new root alone, without needing a put_old directory inside the sandbox. */
    if (sys->pivot_root(".", ".") < 0)
        return nsbox_err_sys(e, "rootfs: pivot_root");
    if (sys->umount2(".", MNT_DETACH) < 0)
        return nsbox_err_sys(e, "rootfs: detach old root");
    if (chdir("/") < 0)
        return nsbox_err_sys(e, "rootfs: chdir /");
    if (plan->root_in_place)
        return 0; /* writable: its idmapped bind keeps nosuid and nodev */
    if (sys->mount(NULL, "/", NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV,
                   NULL) < 0)
        return nsbox_err_sys(e, "rootfs: make / read-only");
    return 0;
}
