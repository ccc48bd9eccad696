/* Assembling the sandbox's root: a pure plan (a list of mount operations, unit tested without
 * root) and an executor that applies it through the syscall seam, child side, inside the new
 * mount namespace, followed by pivot_root.
 *
 * The root is a fresh tmpfs skeleton that nsbox populates itself: image content is bind-mounted
 * into it read-only entry by entry, and every mount target (/proc, /dev, /tmp, /workspace, the
 * device nodes) is a file or directory that nsbox just created on its own tmpfs. No mount target
 * ever lies inside an image, so a hostile image cannot redirect a mount with a symlink
 * (CVE-2021-30465, CVE-2025-31133 family); image entries are opened with AT_SYMLINK_NOFOLLOW and
 * a symlink at an image's top level is recreated as a symlink, resolved later inside the root.
 * The one exception is nsbox-oci's writable root (root_in_place below): the bundle's root is the
 * root, so its targets lie in it, and each is resolved with no symlink and no `..`
 * (nsbox_sp_mount_target) and acted on through its descriptor. */
#ifndef NSBOX_MOUNTS_H
#define NSBOX_MOUNTS_H

#include "idmap.h"
#include "image.h"
#include "nsbox.h"
#include "propagation.h"
#include "sys.h"
#include "wsplan.h"

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#define NSBOX_MOUNT_OPS_MAX 128 /* a plan's: the image, nsbox's own places, a config's mounts */
/* ...and the sandbox's /sys beyond them (nsbox_mount_plan_add_sys; or nsbox-oci's cgroup
 * mount, wherever it is among the config's), which so takes no room an image had: its tmpfs,
 * two directories and the read-only seal, a directory and a bind per cgroup hierarchy, and a
 * link per controller of a co-mounted one (each of the v1 controllers Linux has at most once) */
#define NSBOX_MOUNT_SYS_VIEWS_MAX 8 /* cgroup hierarchies shown (sandbox/cgroup.h's v1 most) */
#define NSBOX_MOUNT_SYS_LINKS_MAX 16
#define NSBOX_MOUNT_SYS_OPS (5 + 2 * NSBOX_MOUNT_SYS_VIEWS_MAX + NSBOX_MOUNT_SYS_LINKS_MAX)
#define NSBOX_MOUNT_PLAN_OPS (NSBOX_MOUNT_OPS_MAX + NSBOX_MOUNT_SYS_OPS)
#define NSBOX_MOUNT_STRS_MAX (16 * PATH_MAX) /* a plan's sources together (about 1 KiB here) */
#define NSBOX_ROOT_ENTRIES_MAX 48
/* Pseudo-terminals a sandbox's devpts hands out at once (its max=). The kernel counts every
 * devpts instance's against one pool of the host's (kernel.pty.max less kernel.pty.reserve,
 * 3072 by default): unbounded, one sandbox took all of them, and every other sandbox's and
 * container's /dev/ptmx failed. docs/decisions.md "A sandbox's pseudo-terminals are bounded". */
#define NSBOX_PTYS_MAX 128

enum nsbox_mop {
    NSBOX_MOP_MKDIR,     /* target */
    NSBOX_MOP_SYMLINK,   /* target -> src (link text) */
    NSBOX_MOP_FILE,      /* empty file target (a mount point) */
    NSBOX_MOP_WRITE,     /* target with content data */
    NSBOX_MOP_TMPFS,     /* tmpfs on target, mount flags, options data */
    NSBOX_MOP_BIND,      /* src (host path, or entry of the image root) on target, attr */
    NSBOX_MOP_BIND_DEV,  /* a host device node src on the file target (plain bind) */
    NSBOX_MOP_PROC,      /* fresh procfs on target */
    NSBOX_MOP_DEVPTS,    /* new devpts instance on target */
    NSBOX_MOP_MASK_FILE, /* /dev/null over target (optional: may not exist) */
    NSBOX_MOP_MASK_DIR,  /* read-only empty tmpfs over target (optional) */
    NSBOX_MOP_READONLY,  /* bind target onto itself read-only (optional: may not exist) */
    NSBOX_MOP_SETATTR,   /* set attr on the mount at target, in place */
    NSBOX_MOP_FS,        /* a new filesystem of type fstype (mqueue, sysfs) from src, flags, data */
    NSBOX_MOP_MASK,      /* MASK_DIR over a directory, else MASK_FILE (optional: may not exist) */
    NSBOX_MOP_BIND_TEXT, /* a file of text src on the root's tmpfs, bound on target (as BIND, attr),
                            its name then removed: the bind is its only path */
};

struct nsbox_mount_op {
    enum nsbox_mop op;
    char target[NAME_MAX + 32]; /* relative to the new root, no leading '/' */
    const char *src;       /* in the plan's strs (or a literal): never a PATH_MAX buffer per op,
                              whose pages every sandbox creation would touch */
    bool src_in_image;     /* src is an entry name inside the image root (opened NOFOLLOW) */
    bool src_is_fd;        /* BIND of a detached mount the launcher made (src: its name) */
    bool target_in_image;  /* target lies inside an image bind (or the in-place root): resolved
                              with no symlinks, and made there when it is a missing mount point */
    bool target_dir;       /* target_in_image: a directory (the bind of one), else a file */
    bool recursive;
    bool optional;         /* target_in_image that cannot be mounted on safely: skipped */
    int src_fd;            /* BIND: a detached mount the launcher made (an idmapped volume), the
                              plan's from phase 1 on; -1 none */
    bool src_pin;          /* BIND: src is a host directory the launcher checked (a
                              --workspace DIR), bound only if src, opened with no symlink, is
                              that inode: pin_dev and pin_ino, copied so that the plan needs
                              nothing of the launcher's to live as long as it */
    dev_t pin_dev;
    ino_t pin_ino;
    bool seal;             /* BIND of src_fd, writable: its set-id and file-capability programs
                              are bound read-only once it is attached (setid.h) */
    bool late;             /* BIND: cloned when attached, in the plan's order, from the path
                              phase 1 opened (a config's mount: mountinfo lists mounts in the
                              order they were made, and a config's mounts must read in its order) */
    struct nsbox_propagation propagation; /* BIND, and a config's new filesystems */
    unsigned long flags;   /* mount(2) flags for TMPFS/PROC/DEVPTS */
    uint64_t attr;         /* MOUNT_ATTR_* set on BIND/READONLY */
    char data[128];        /* mount options */
    char fstype[16];       /* FS: the filesystem type */
    unsigned mode;
};

/* A mount a bundle's config asks for (nsbox-oci), in the order it gives. */
struct nsbox_rootfs_mount {
    const char *destination; /* absolute, inside the root */
    const char *type;        /* proc, tmpfs, devpts, mqueue, sysfs, bind */
    const char *source;      /* bind: a host path; else the name mountinfo shows */
    unsigned long flags;     /* MS_RDONLY, MS_NOSUID, ... */
    bool recursive;          /* rbind */
    bool source_is_file;     /* bind: of a file (the target is made as a file) */
    const char *data;        /* the filesystem's options */
    struct nsbox_propagation propagation; /* shared, slave, ... (policy/propagation.h) */
};

/* A config bind's idmap (config.json's "idmap", "ridmap", uidMappings, gidMappings): the
 * launcher makes the idmapped tree (nsbox_userns_volume_tree) and passes it in cfg->mount_fds. */
struct nsbox_rootfs_idmap {
    bool idmap, recursive; /* recursive: "ridmap", its submounts idmapped too */
    unsigned n_uid, n_gid; /* 0: the container's own mapping (on-disk N is its id N) */
    const struct nsbox_idmap *uid, *gid; /* inside: the id on disk; outside: the container's */
    /* An engine's named volume (nsbox-oci --idmap-volumes=engine), not asked for by the
     * config: cloned from source_fd, its directory as opened and checked, not by its path; where
     * the kernel or its filesystem refuses the idmap, it stays a plain bind. */
    bool engine_volume;
    int source_fd;
};

/* One of a sandbox's own cgroup directories on the host, shown read-only inside. */
struct nsbox_cgroup_view {
    const char *name; /* v1: its hierarchy's directory ("memory", "cpu,cpuacct"); NULL: v2 */
    const char *path; /* the sandbox's cgroup directory there, on the host */
};

struct nsbox_root_entry {
    char name[NAME_MAX + 1];
    bool is_symlink;
    bool is_file;        /* a regular file: bound on an empty file nsbox makes */
    char link[PATH_MAX]; /* link text when is_symlink */
};

struct nsbox_rootfs_cfg {
    const struct nsbox_image *img;
    enum nsbox_ws_kind ws_kind;
    const char *workspace;  /* DIR: host directory bound at /workspace */
    bool ws_premounted;     /* DIR: the launcher bound it already (idmapped): a mount fd */
    const struct stat *ws_sb; /* DIR bound by path: the directory the launcher checked */
    uint64_t ws_bytes;      /* TMPFS: its size (limits.disk_bytes) */
    uint64_t tmp_bytes;     /* size of /tmp, and twice /dev/shm's; 0: the kernel's default */
    size_t n_entries;       /* top-level entries of the image root to expose */
    struct nsbox_root_entry entries[NSBOX_ROOT_ENTRIES_MAX];
    const char *resolv_conf; /* host file bound over /etc/resolv.conf, or NULL */
    const char *hosts;       /* host file bound over /etc/hosts, or NULL */
    const char *hosts_text;  /* or the text of /etc/hosts, made inside (NSBOX_MOP_BIND_TEXT) */
    const char *ca_bundle;   /* host file bound over the system trust bundle, or NULL */
    bool hosts_optional;     /* only where the image's /etc/hosts can be mounted over safely
                                (not allow: the image's own file will do elsewhere) */
    /* nsbox-oci: the config's mounts, in its order, instead of nsbox's own /proc and /dev
     * (nsbox's device nodes go into the config's /dev, nsbox's /proc masks over its /proc) */
    const struct nsbox_rootfs_mount *mounts;
    size_t n_mounts;
    /* the idmapped binds' detached trees, by index of mounts (-1 for the others); NULL none */
    const int *mount_fds;
    /* the sandbox's own cgroup directories, which a config's cgroup mount shows read-only in
     * its place among the mounts: v2's one directory bound on it; else v1's hierarchies each
     * at <destination>/<name> of a tmpfs of its own (with none, the tmpfs is empty), made
     * read-only once the later config mounts below it have made their mount points there */
    const struct nsbox_cgroup_view *cgroup_views;
    size_t n_cgroup_views;
    /* ...and its maskedPaths and readonlyPaths (absolute), on the filesystems nsbox or the
     * config mounts, and in the image: a read-only path inside a read-only image is left as
     * it is (read-only), a masked one is masked there; their symlinks are followed inside the
     * new root only (apply_in_root) */
    const char *const *masked;
    size_t n_masked;
    const char *const *readonly;
    size_t n_readonly;
    /* nsbox-oci's writable root (root.readonly false): the image root itself, seen through an
     * idmapped bind (image_fd of nsbox_mounts_prepare), is the new root instead of nsbox's
     * tmpfs: nothing is bound from it entry by entry, nsbox's /workspace, /tmp, /run and
     * /etc/hosts are left out (the root is the bundle's, as under runc), and every operation's
     * target is resolved in it with no symlink (target_in_image), so that a bundle cannot move
     * a mount, but for masked and read-only paths (above); those inside it are done too. */
    bool root_in_place;
};

struct nsbox_setid_list;
struct nsbox_mount_plan {
    bool root_in_place; /* the cfg's: the image root is the new root (above) */
    /* with root_in_place on an engine's overlay: its layers' set-id candidates, which the seal
     * checks instead of walking the merged root (setid_layers.h); NULL: the walk. Set by the
     * caller after nsbox_mount_plan_build, owned by it. */
    const struct nsbox_setid_list *seal_list;
    size_t n;
    size_t cap; /* ops it may hold: NSBOX_MOUNT_OPS_MAX, raised by the ops of /sys's views (or
                   a config's cgroup mount's), up to NSBOX_MOUNT_PLAN_OPS */
    struct nsbox_mount_op ops[NSBOX_MOUNT_PLAN_OPS];
    size_t strs_used;
    char strs[NSBOX_MOUNT_STRS_MAX]; /* the ops' sources, one after another */
};

/* Paths of /proc that are hidden (masked) or made read-only, as in the OCI runtime defaults. */
extern const char *const nsbox_proc_masked_files[];
extern const char *const nsbox_proc_masked_dirs[];
extern const char *const nsbox_proc_readonly[];
extern const char *const nsbox_dev_nodes[];

/* Pure (rootfs/mount_plan.c): the list of operations for cfg. */
int nsbox_mount_plan_build(const struct nsbox_rootfs_cfg *cfg, struct nsbox_mount_plan *plan,
                           struct nsbox_err *e);
/* Pure: /sys as a read-only tmpfs holding only fs/cgroup, and there the sandbox's own cgroup
 * directories bound read-only (nosuid, nodev, noexec): v2's at /sys/fs/cgroup itself, each of
 * v1's at /sys/fs/cgroup/<name> (a co-mounted hierarchy's controllers as links to it), as
 * Docker lays them out. n 0 (no cgroup): /sys holds nothing. Appended to a plan that is built
 * (nsbox_mount_plan_build), once the cgroup exists; not for nsbox-oci, whose config's cgroup
 * mount shows them (cfg->cgroup_views). */
int nsbox_mount_plan_add_sys(struct nsbox_mount_plan *plan, const struct nsbox_cgroup_view *views,
                             size_t n, struct nsbox_err *e);
/* Whether an image's top-level entry of this name is shown in the sandbox: not ".", "..", a
 * name with a slash, nor one nsbox provides itself (/proc, /dev, /tmp, /workspace...). */
bool nsbox_mount_plan_shows(const char *name);

/* I/O, parent or child side before the clone: fill cfg->entries from the image. */
int nsbox_mounts_scan_image(struct nsbox_rootfs_cfg *cfg, struct nsbox_err *e);

/* Child side, in two phases around the switch to appuser.
 *
 * Phase 1 (still the caller's host uid, so host paths are reachable as their owner): make every
 * mount a slave of the host's (nothing here can propagate to the host; a bind that asks for
 * slave propagation keeps receiving the host's mounts), take a detached clone of every bind
 * source, with its attributes and propagation already set (a late bind's source is opened as
 * a path instead, and cloned so when it is attached),
 * then mount the new root's tmpfs on staging (a host directory: the sandbox's state directory,
 * hidden by it in this mount namespace only; sources below it are cloned before). fds[] gets
 * one entry per plan op (-1 where unused); *rootfd an fd of the new root. Sources are looked up
 * here, in the child's own mount namespace: open_tree refuses to clone a mount that belongs to
 * another one, so descriptors opened by the parent cannot be used. The exception is ws_fd, a
 * detached mount (fsmount) of the EXT4 workspace: it belongs to no namespace and is moved, not
 * cloned; the op with src_is_fd takes it over. image_fd (or -1), a detached idmapped copy of the
 * image root (an OCI image's owners, sandbox/userns.h), is moved over image_root once the namespace
 * is private, so that every image entry is cloned from it; with plan->root_in_place it is moved
 * onto staging instead of the tmpfs, and is the new root itself.
 *
 * Phase 2 (as appuser, the sandbox's user, so that files created on the new tmpfs have an
 * owner): populate the tree relative to rootfd, attach the clones, pivot_root into it, detach
 * the old root and make the root read-only (an in-place root keeps the attributes of its
 * idmapped bind). No host path is looked up in this phase. */
int nsbox_mounts_prepare(const struct nsbox_sys *sys, const struct nsbox_mount_plan *plan,
                         const char *staging, const char *image_root, int image_fd, int ws_fd,
                         int *fds, int *rootfd, struct nsbox_err *e);
int nsbox_mounts_enter(const struct nsbox_sys *sys, const struct nsbox_mount_plan *plan, int rootfd,
                       int *fds, struct nsbox_err *e);

/* Give the mount at path the propagation p asks for (nothing for NSBOX_PROP_NONE), in the steps
 * of nsbox_propagation_steps (host, tree as there): a config's new filesystem, and the new root
 * for linux.rootfsPropagation. -1 with errno from the failing mount(2). */
int nsbox_mounts_propagate(const struct nsbox_sys *sys, const char *path,
                           const struct nsbox_propagation *p, bool host, bool tree);

#endif
