/* An engine's overlay root made again over idmapped layers: see ovl_root.h. */
#define _GNU_SOURCE
#include "ovl_root.h"
#include "cleanup.h"
#include "oci_overlay.h"
#include "ovlinfo.h"
#include "setid_layers.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

/* The engine's workdir's subdirectory that is this overlay's own workdir. */
#define OWN_WORK "nsbox"
/* The mount table is read whole; a host with this much of it is not one to guess on. */
#define MOUNTINFO_MAX (64u << 20)

bool nsbox_ovl_root_is_overlay(const char *root)
{
    struct statfs sf;
    return statfs(root, &sf) == 0 && sf.f_type == OVERLAYFS_SUPER_MAGIC;
}

/* A directory of the engine's: path with no symlink on the way, or, with beneath >= 0, path
 * below beneath, whose symlinks (with links) may not lead out of it. */
static int open_dir(int beneath, const char *path, bool links, struct nsbox_err *e)
{
    int fd = nsbox_open_dir(beneath, path, links ? NSBOX_OPEN_DIR_LINKS : 0);
    if (fd < 0)
        return nsbox_err_sys(e, "%s%s", path,
                             errno == ELOOP   ? " (a symlink on the way)"
                             : errno == EXDEV ? " (a symlink out of the directory above it)"
                                              : "");
    return fd;
}

/* Is the overlay module's parameter name "Y"? */
static bool module_default_on(const char *name)
{
    char path[96], buf[8];
    snprintf(path, sizeof path, "/sys/module/overlay/parameters/%s", name);
    cleanup_close int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof buf);
    return n > 0 && buf[0] == 'Y';
}

/* The line of the mount whose root directory is root (the bundle's root must be the
 * overlay's own root, as the engines mount it), parsed into o; its text in *table. */
static int find_mount(const char *root, char **table, struct nsbox_ovlinfo *o, struct nsbox_err *e)
{
    struct statx sx;
    if (statx(AT_FDCWD, root, AT_NO_AUTOMOUNT, STATX_MNT_ID, &sx) < 0)
        return nsbox_err_sys(e, "statx %s", root);
    if (!(sx.stx_mask & STATX_MNT_ID))
        return nsbox_err_set(e, NSBOX_E_UNSUPPORTED, ENOSYS,
                             "statx gives no mount id (Linux 5.8 or later is needed)");
    if ((sx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) &&
        !(sx.stx_attributes & STATX_ATTR_MOUNT_ROOT))
        return nsbox_err_set(e, NSBOX_E_UNSUPPORTED, EINVAL,
                             "it is a directory inside an overlay, not the overlay's root");
    *table = nsbox_read_text_at(AT_FDCWD, "/proc/self/mountinfo", MOUNTINFO_MAX);
    if (!*table)
        return nsbox_err_sys(e, "/proc/self/mountinfo");
    char *line = nsbox_ovlinfo_find(*table, sx.stx_mnt_id);
    if (!line)
        return nsbox_err_set(e, NSBOX_E_NOTFOUND, ENOENT, "mount %llu is not in the mount table",
                             (unsigned long long)sx.stx_mnt_id);
    if (nsbox_ovlinfo_parse(line, o, e) < 0)
        return -1;
    /* not shown: the module's default, which a host may have turned on */
    if (!o->index_shown)
        o->index = module_default_on("index");
    if (!o->nfs_export_shown)
        o->nfs_export = module_default_on("nfs_export");
    if (!o->metacopy_shown)
        o->metacopy = module_default_on("metacopy");
    nsbox_ovlinfo_relative_from(o);
    if (nsbox_ovlinfo_check(o, e) < 0)
        return -1;
    if (strcmp(o->root, "/"))
        return nsbox_err_set(e, NSBOX_E_UNSUPPORTED, EINVAL,
                             "it is a bind of %s inside an overlay, not the overlay's root",
                             o->root);
    return 0;
}

/* The lower layers, opened (fds[i], -1 until opened); a relative one below from. */
static int open_lowers(const struct nsbox_ovlinfo *o, int from, int *fds, struct nsbox_err *e)
{
    for (size_t i = 0; i < o->n_lower; i++) {
        char dir[PATH_MAX];
        const char *rest = o->lower[i];
        cleanup_close int dfd = -1;
        if (rest[0] == '/' && nsbox_ovlinfo_split_layer(o->lower[i], dir, sizeof dir, &rest, e) < 0)
            return -1;
        if (o->lower[i][0] == '/' && (dfd = open_dir(-1, dir, false, e)) < 0)
            return nsbox_err_wrap(e, "lowerdir %s", o->lower[i]);
        if ((fds[i] = open_dir(dfd >= 0 ? dfd : from, rest, true, e)) < 0)
            return nsbox_err_wrap(e, "lowerdir %s", o->lower[i]);
    }
    return 0;
}

/* The upper directory opened (upper) must be the overlay's: its root directory has the upper's
 * inode number. The mount table gives the paths as the engine wrote them when it mounted, which
 * may lead elsewhere when the container is made (a directory renamed or mounted over since,
 * relative paths read from the wrong directory): the container's writes would then land in a
 * host directory that is not the engine's upper one. */
static int verify_upper(const struct nsbox_ovlinfo *o, const char *root, int upper,
                        struct nsbox_err *e)
{
    struct stat want, got;
    if (stat(root, &want) < 0 || fstat(upper, &got) < 0 || want.st_ino != got.st_ino) {
        if (o->from)
            return nsbox_err_set(e, NSBOX_E_UNSUPPORTED, EINVAL,
                                 "its relative paths, read from %s (where Docker and Podman "
                                 "mount from), do not lead to its upper directory",
                                 o->from);
        return nsbox_err_set(e, NSBOX_E_UNSUPPORTED, EINVAL,
                             "its upperdir %s is not the overlay's upper directory (the path "
                             "leads elsewhere than when it was mounted, or the overlay's layers "
                             "are on several filesystems without xino)",
                             o->upper);
    }
    return 0;
}

/* The engine's upper directory's base opened (a relative one below from, checked), and this
 * overlay's own workdir made in the engine's: *work_rel its path below the base. */
static int open_upper(const struct nsbox_ovlinfo *o, int from, const char *root, int *base_fd,
                      int *upper_fd, const char **upper_rel, char *work_rel, size_t n,
                      struct nsbox_err *e)
{
    char base[PATH_MAX];
    const char *wr;
    if (nsbox_ovlinfo_upper_base(o, base, sizeof base, upper_rel, &wr, e) < 0)
        return -1;
    if ((size_t)snprintf(work_rel, n, "%s/%s", wr, OWN_WORK) >= n)
        return nsbox_err_invalid(e, "workdir %s: too long", o->work);
    if ((*base_fd = open_dir(base[0] == '/' ? -1 : from, base, false, e)) < 0)
        return nsbox_err_wrap(e, "upperdir's directory");
    /* both opened here, as the overlay will: no symlink on the way */
    cleanup_close int upper = nsbox_open_dir(*base_fd, *upper_rel, RESOLVE_NO_XDEV);
    if (upper < 0)
        return nsbox_err_sys(e, "upperdir %s%s", o->upper, errno == ELOOP ? " (a symlink)" : "");
    if (verify_upper(o, root, upper, e) < 0)
        return -1;
    cleanup_close int work = nsbox_open_dir(*base_fd, wr, RESOLVE_NO_XDEV);
    if (work < 0)
        return nsbox_err_sys(e, "workdir %s%s", o->work, errno == ELOOP ? " (a symlink)" : "");
    /* as the engine's workdir is: host root's, for the kernel's eyes only */
    if (mkdirat(work, OWN_WORK, 0700) < 0 && errno != EEXIST)
        return nsbox_err_sys(e, "workdir %s/%s", o->work, OWN_WORK);
    *upper_fd = upper;
    upper = -1;
    return 0;
}

/* The set-id candidates of the layers the overlay is made of, lower ones and upper (fds[n - 1]):
 * the engine's own directories, just verified. NULL where there is no list to trust (the seal
 * walks the merged root). */
static struct nsbox_setid_list *seal_list(const int *fds, size_t n)
{
    struct nsbox_setid_list *l;
    struct nsbox_err why;
    return nsbox_setid_layers_list(fds, n, &l, &why) == 0 ? l : NULL;
}

/* The kernel refused the engine's metacopy=on (one that does not take it over idmapped
 * layers): without metacopy the engine's metadata-only copies up would read
 * EPERM, so the root stays the engine's, read-only, and the warning says how to do without. */
static void metacopy_refused(struct nsbox_err *e)
{
    nsbox_err_wrap(e, "the engine mounts it with metacopy=on, which nsbox-oci keeps (the engine's "
                      "metadata-only copies up read EPERM without it) and the kernel refused: "
                      "for a writable root, mount without metacopy (podman --storage-opt "
                      "overlay.mountopt=nodev, or mountopt = \"nodev\" in storage.conf)");
}

int nsbox_ovl_root_make(const char *root, int userns_fd, uint32_t slot_base, int *mount_fd,
                        struct nsbox_setid_list **list, struct nsbox_err *e)
{
    *mount_fd = -1;
    *list = NULL;
    cleanup_free char *table = NULL;
    cleanup_free struct nsbox_ovlinfo *o = malloc(sizeof *o);
    cleanup_free int *fds = NULL;
    cleanup_close int base = -1, from = -1;
    char work_rel[PATH_MAX];
    const char *upper_rel;
    int r = -1;
    if (!o)
        nsbox_err_set(e, NSBOX_E_NOMEM, ENOMEM, "out of memory");
    else if (find_mount(root, &table, o, e) == 0 && !(fds = malloc((o->n_lower + 1) * sizeof *fds)))
        nsbox_err_set(e, NSBOX_E_NOMEM, ENOMEM, "out of memory");
    for (size_t i = 0; fds && i <= o->n_lower; i++)
        fds[i] = -1;
    if (fds && o->from && (from = open_dir(-1, o->from, false, e)) < 0) {
        free(fds); /* no layer is opened */
        fds = NULL;
    }
    if (fds && open_lowers(o, from, fds, e) == 0 &&
        open_upper(o, from, root, &base, &fds[o->n_lower], &upper_rel, work_rel, sizeof work_rel,
                   e) == 0) {
        struct nsbox_oci_overlay_rw rw = {.lower = fds,
                                          .n_lower = o->n_lower,
                                          .upper_base = base,
                                          .upper_rel = upper_rel,
                                          .work_rel = work_rel,
                                          .redirect_dir = o->redirect_dir,
                                          .metacopy = o->metacopy,
                                          .creator_id = slot_base};
        struct nsbox_oci_overlay_fail fail;
        r = nsbox_oci_overlay_rw(&rw, userns_fd, mount_fd, &fail, e);
        if (r == 0)
            *list = seal_list(fds, o->n_lower + 1);
        else if (o->metacopy && nsbox_oci_overlay_metacopy_refused(&fail))
            metacopy_refused(e);
    }
    for (size_t i = 0; fds && i <= o->n_lower; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    /* whatever the cause, the root stays as it was (read-only), with e saying why */
    return r == 0 ? 0 : 1;
}
