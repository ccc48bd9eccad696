/* Root filesystem assembly: plan (pure) and executor (child side). See mounts.h. */
#define _GNU_SOURCE
#include "mounts.h"
#include "cleanup.h"
#include "safepath.h"
#include "setid.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/mount.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

/* Kernel interfaces that leak host information or allow host-wide actions. */
const char *const nsbox_proc_masked_files[] = {"kcore", "keys", "timer_list", "sched_debug",
                                               "latency_stats", "timer_stats", "kallsyms",
                                               NULL};
const char *const nsbox_proc_masked_dirs[] = {"acpi", "scsi", NULL};
const char *const nsbox_proc_readonly[] = {"sys", "sysrq-trigger", "irq", "bus", "fs", NULL};
const char *const nsbox_dev_nodes[] = {"null", "zero", "full", "random", "urandom", "tty", NULL};

/* Image entries that nsbox provides itself; an image's own versions are never exposed. */
static const char *const provided_by_nsbox[] = {"proc", "dev", "sys", "tmp", "workspace", "run",
                                                 "lost+found", NULL};

static bool in_list(const char *const *list, const char *s)
{
    for (; *list; list++)
        if (!strcmp(*list, s))
            return true;
    return false;
}

static struct nsbox_mount_op *push(struct nsbox_mount_plan *p, enum nsbox_mop op,
                                   const char *target, struct nsbox_err *e)
{
    if (p->n >= NSBOX_MOUNT_OPS_MAX) {
        nsbox_err_set(e, NSBOX_E_INVALID, E2BIG, "rootfs: too many mount operations");
        return NULL;
    }
    struct nsbox_mount_op *o = &p->ops[p->n++];
    o->op = op;
    o->src = "";
    o->src_in_image = false;
    o->src_is_fd = false;
    /* in place, every target is in the image: a directory but for files and device nodes */
    o->target_in_image = p->root_in_place;
    o->target_dir = p->root_in_place && op != NSBOX_MOP_FILE && op != NSBOX_MOP_BIND_DEV;
    o->recursive = false;
    o->optional = false;
    o->flags = 0;
    o->attr = 0;
    o->data[0] = '\0';
    o->fstype[0] = '\0';
    o->mode = 0;
    if ((size_t)snprintf(o->target, sizeof o->target, "%s", target) >= sizeof o->target) {
        nsbox_err_set(e, NSBOX_E_INVALID, ENAMETOOLONG, "rootfs: path too long: %s", target);
        return NULL;
    }
    return o;
}

#define PUSH(op, target)                                                                          \
    ({                                                                                            \
        struct nsbox_mount_op *_o = push(plan, (op), (target), e);                                \
        if (!_o)                                                                                  \
            return -1;                                                                            \
        _o;                                                                                       \
    })

static int set_src(struct nsbox_mount_plan *plan, struct nsbox_mount_op *o, const char *src,
                   struct nsbox_err *e)
{
    size_t n = strlen(src) + 1;
    if (n > PATH_MAX)
        return nsbox_err_set(e, NSBOX_E_INVALID, ENAMETOOLONG, "rootfs: path too long: %s", src);
    if (n > sizeof plan->strs - plan->strs_used)
        return nsbox_err_set(e, NSBOX_E_INVALID, E2BIG, "rootfs: too many mount sources");
    char *s = plan->strs + plan->strs_used;
    memcpy(s, src, n);
    plan->strs_used += n;
    o->src = s;
    return 0;
}

static bool valid_entry_name(const char *n)
{
    return n[0] && strcmp(n, ".") && strcmp(n, "..") && !strchr(n, '/');
}

static int plan_image(const struct nsbox_rootfs_cfg *cfg, struct nsbox_mount_plan *plan,
                      struct nsbox_err *e)
{
    const struct nsbox_image *img = cfg->img;
    for (size_t i = 0; i < cfg->n_entries; i++) {
        const struct nsbox_root_entry *en = &cfg->entries[i];
        if (!valid_entry_name(en->name))
            return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL, "rootfs: bad image entry '%s'",
                                 en->name);
        if (in_list(provided_by_nsbox, en->name))
            continue;
        if (img->kind == NSBOX_IMAGE_HOST && !strcmp(en->name, "etc"))
            continue;
        if (en->is_symlink) {
            struct nsbox_mount_op *o = PUSH(NSBOX_MOP_SYMLINK, en->name);
            if (set_src(plan, o, en->link, e) < 0)
                return -1;
            continue;
        }
        if (en->is_file)
            PUSH(NSBOX_MOP_FILE, en->name);
        else
            PUSH(NSBOX_MOP_MKDIR, en->name)->mode = 0755;
        struct nsbox_mount_op *o = PUSH(NSBOX_MOP_BIND, en->name);
        if (set_src(plan, o, en->name, e) < 0)
            return -1;
        o->src_in_image = true;
        o->recursive = !en->is_file;
        o->attr = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
    }
    if (img->kind == NSBOX_IMAGE_HOST) {
        PUSH(NSBOX_MOP_MKDIR, "etc")->mode = 0755;
        struct nsbox_mount_op *o = PUSH(NSBOX_MOP_BIND, "etc");
        if (set_src(plan, o, img->etc, e) < 0)
            return -1;
        o->attr = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
    }
    return 0;
}

/* /tmp and /dev/shm: tmpfs, whose pages are charged to the sandbox's memory. Without a size
 * they could grow to half the host's memory, so that filling one ended in an OOM kill of the
 * sandbox's processes; sized, the writer gets ENOSPC first. /tmp is half the memory limit,
 * /dev/shm a quarter (Docker gives it 64 MiB): together they leave a quarter to processes.
 * Both at half left nothing: full, they held the whole limit, no process owned it, every
 * command was OOM-killed as it started, and then init, the last one left, with the sandbox. */
static void tmp_options(uint64_t bytes, char *data, size_t n)
{
    if (bytes)
        snprintf(data, n, "mode=1777,size=%llu", (unsigned long long)bytes);
    else
        snprintf(data, n, "mode=1777");
}

/* nsbox's device nodes (binds of the host's) and /dev's symlinks, in a /dev just mounted. */
static int plan_dev_nodes(struct nsbox_mount_plan *plan, struct nsbox_err *e)
{
    struct nsbox_mount_op *o;
    char path[64];
    for (const char *const *n = nsbox_dev_nodes; *n; n++) {
        snprintf(path, sizeof path, "dev/%s", *n);
        PUSH(NSBOX_MOP_FILE, path)->mode = 0666;
        o = PUSH(NSBOX_MOP_BIND_DEV, path);
        snprintf(path, sizeof path, "/dev/%s", *n);
        if (set_src(plan, o, path, e) < 0)
            return -1;
    }
    static const char *const links[][2] = {{"dev/ptmx", "pts/ptmx"},
                                           {"dev/fd", "/proc/self/fd"},
                                           {"dev/stdin", "/proc/self/fd/0"},
                                           {"dev/stdout", "/proc/self/fd/1"},
                                           {"dev/stderr", "/proc/self/fd/2"}};
    for (size_t i = 0; i < NSBOX_ARRAY_LEN(links); i++)
        PUSH(NSBOX_MOP_SYMLINK, links[i][0])->src = links[i][1]; /* static */
    return 0;
}

static int plan_dev(const struct nsbox_rootfs_cfg *cfg, struct nsbox_mount_plan *plan,
                    struct nsbox_err *e)
{
    PUSH(NSBOX_MOP_MKDIR, "dev")->mode = 0755;
    /* /dev holds device nodes, so it cannot be nodev; noexec keeps it from being a place to run
     * code from. */
    struct nsbox_mount_op *o = PUSH(NSBOX_MOP_TMPFS, "dev");
    o->flags = MS_NOSUID | MS_NOEXEC;
    snprintf(o->data, sizeof o->data, "mode=0755,size=64k,nr_inodes=64");
    if (plan_dev_nodes(plan, e) < 0)
        return -1;
    PUSH(NSBOX_MOP_MKDIR, "dev/pts")->mode = 0755;
    o = PUSH(NSBOX_MOP_DEVPTS, "dev/pts");
    o->flags = MS_NOSUID | MS_NOEXEC;
    /* A new instance: the sandbox never sees the host's terminals. No gid=5: the tty group is
     * not mapped in the sandbox's user namespace. */
    snprintf(o->data, sizeof o->data, "newinstance,ptmxmode=0666,mode=0620");
    PUSH(NSBOX_MOP_MKDIR, "dev/shm")->mode = 01777;
    o = PUSH(NSBOX_MOP_TMPFS, "dev/shm");
    o->flags = MS_NOSUID | MS_NODEV;
    tmp_options(cfg->tmp_bytes / 2, o->data, sizeof o->data);
    return 0;
}

/* The sandbox owns /dev's tmpfs (it made it); read-only keeps it from adding entries. Not
 * recursive: pts and shm stay writable. */
static int plan_dev_seal(struct nsbox_mount_plan *plan, struct nsbox_err *e)
{
    PUSH(NSBOX_MOP_SETATTR, "dev")->attr =
        MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC;
    return 0;
}

/* What of /proc is hidden or read-only (the floor, also over a config's /proc). */
static int plan_proc_masks(struct nsbox_mount_plan *plan, struct nsbox_err *e)
{
    char path[64];
    for (const char *const *n = nsbox_proc_masked_files; *n; n++) {
        snprintf(path, sizeof path, "proc/%s", *n);
        PUSH(NSBOX_MOP_MASK_FILE, path);
    }
    for (const char *const *n = nsbox_proc_masked_dirs; *n; n++) {
        snprintf(path, sizeof path, "proc/%s", *n);
        PUSH(NSBOX_MOP_MASK_DIR, path);
    }
    for (const char *const *n = nsbox_proc_readonly; *n; n++) {
        snprintf(path, sizeof path, "proc/%s", *n);
        struct nsbox_mount_op *o = PUSH(NSBOX_MOP_READONLY, path);
        o->recursive = true;
        o->attr = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC;
    }
    return 0;
}

static int plan_proc(struct nsbox_mount_plan *plan, struct nsbox_err *e)
{
    PUSH(NSBOX_MOP_MKDIR, "proc")->mode = 0555;
    PUSH(NSBOX_MOP_PROC, "proc")->flags = MS_NOSUID | MS_NODEV | MS_NOEXEC;
    return plan_proc_masks(plan, e);
}

/* Is rel (a destination without its leading '/') inside what plan_image binds from the image?
 * Then only a bind may go there, onto a target resolved inside the image with no symlinks. */
static bool in_image(const struct nsbox_rootfs_cfg *cfg, const char *rel)
{
    if (cfg->root_in_place)
        return true;
    size_t len = strcspn(rel, "/");
    char top[NAME_MAX + 1];
    snprintf(top, sizeof top, "%.*s", (int)(len < NAME_MAX ? len : NAME_MAX), rel);
    if (in_list(provided_by_nsbox, top))
        return false;
    if (cfg->img->kind == NSBOX_IMAGE_HOST && !strcmp(top, "etc"))
        return true;
    for (size_t i = 0; i < cfg->n_entries; i++)
        if (!strcmp(cfg->entries[i].name, top))
            return true;
    return false;
}

/* The directories leading to rel (and rel itself, unless is_file: then an empty file), on
 * nsbox's own tmpfs or on a filesystem a config mount just made: never inside the image. */
static int plan_mount_point(struct nsbox_mount_plan *plan, const char *rel, bool is_file,
                            struct nsbox_err *e)
{
    char path[NAME_MAX + 32];
    for (const char *p = rel;; p++) {
        if (*p != '/' && *p)
            continue;
        snprintf(path, sizeof path, "%.*s", (int)(p - rel), rel);
        if (*p || !is_file)
            PUSH(NSBOX_MOP_MKDIR, path)->mode = 0755;
        else
            PUSH(NSBOX_MOP_FILE, path)->mode = 0644;
        if (!*p)
            return 0;
    }
}

static int check_destination(const char *rel, const struct nsbox_rootfs_mount *m,
                             struct nsbox_err *e)
{
    if (!rel[0])
        return nsbox_err_set(e, NSBOX_E_UNSUPPORTED, EINVAL,
                             "mounts: a mount on / is not supported: the root is root.path");
    for (const char *p = rel; *p;) {
        size_t len = strcspn(p, "/");
        if (len == 0 || (len == 1 && p[0] == '.') || (len == 2 && !strncmp(p, "..", 2)))
            return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL,
                                 "mounts: destination %s: not a clean absolute path (no //, . "
                                 "or .. components)",
                                 m->destination);
        p += len + (p[len] == '/');
    }
    if (strlen(rel) >= NAME_MAX + 32)
        return nsbox_err_set(e, NSBOX_E_INVALID, ENAMETOOLONG, "mounts: destination %s: too long",
                             m->destination);
    return 0;
}

static uint64_t bind_attr(unsigned long flags)
{
    return ((flags & MS_RDONLY) ? MOUNT_ATTR_RDONLY : 0) |
           ((flags & MS_NOSUID) ? MOUNT_ATTR_NOSUID : 0) |
           ((flags & MS_NODEV) ? MOUNT_ATTR_NODEV : 0) |
           ((flags & MS_NOEXEC) ? MOUNT_ATTR_NOEXEC : 0);
}

/* One config mount: its mount point, then the mount itself. */
static int plan_config_mount(const struct nsbox_rootfs_cfg *cfg, const struct nsbox_rootfs_mount *m,
                             struct nsbox_mount_plan *plan, struct nsbox_err *e)
{
    const char *rel = m->destination + strspn(m->destination, "/");
    if (check_destination(rel, m, e) < 0)
        return -1;
    bool bind = !strcmp(m->type, "bind");
    bool image = in_image(cfg, rel);
    if (image && !bind && !cfg->root_in_place)
        return nsbox_err_set(e, NSBOX_E_UNSUPPORTED, EINVAL,
                             "mounts: a %s mount at %s lies inside the image, where nsbox-oci "
                             "only binds: choose a destination outside the image's directories",
                             m->type, m->destination);
    static const struct {
        const char *type;
        enum nsbox_mop op;
    } kinds[] = {{"proc", NSBOX_MOP_PROC}, {"tmpfs", NSBOX_MOP_TMPFS}, {"devpts", NSBOX_MOP_DEVPTS},
                 {"mqueue", NSBOX_MOP_FS}, {"sysfs", NSBOX_MOP_FS},    {"bind", NSBOX_MOP_BIND},
                 {"cgroup", NSBOX_MOP_FS}};
    size_t k = 0;
    while (k < NSBOX_ARRAY_LEN(kinds) && strcmp(kinds[k].type, m->type))
        k++;
    if (k == NSBOX_ARRAY_LEN(kinds))
        return nsbox_err_set(e, NSBOX_E_UNSUPPORTED, EINVAL,
                             "mounts: type '%s' (at %s) is not supported by nsbox-oci: it mounts "
                             "proc, tmpfs, devpts, mqueue, sysfs, cgroup and binds",
                             m->type, m->destination);
    if (!image && plan_mount_point(plan, rel, bind && m->source_is_file, e) < 0)
        return -1;
    struct nsbox_mount_op *o = PUSH(kinds[k].op, rel);
    if ((!bind || m->source[0]) && set_src(plan, o, m->source[0] ? m->source : m->type, e) < 0)
        return -1;
    o->flags = m->flags & ~(unsigned long)MS_BIND;
    snprintf(o->fstype, sizeof o->fstype, "%s", m->type);
    if (!strcmp(m->type, "cgroup")) {
        /* The sandbox's own cgroup namespace, seen through the unified hierarchy where the
         * kernel lets a user namespace mount it; a v1-only host leaves the directory empty. */
        snprintf(o->fstype, sizeof o->fstype, "cgroup2");
        o->optional = true;
        o->flags |= MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC;
    }
    if (strlen(m->data) >= sizeof o->data)
        return nsbox_err_set(e, NSBOX_E_INVALID, E2BIG, "mounts: the options of %s are too long",
                             m->destination);
    snprintf(o->data, sizeof o->data, "%s", m->data);
    o->propagation = m->propagation;
    if (bind) {
        o->late = true;
        if (m->source[0] != '/')
            return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL,
                                 "mounts: the bind at %s needs an absolute source", m->destination);
        o->attr = bind_attr(m->flags);
        o->recursive = m->recursive;
        o->target_in_image = image;
        o->target_dir = image && !m->source_is_file;
    }
    return 0;
}

/* The config's masked and read-only paths, after every mount. A read-only path inside a
 * read-only image is left out (it is read-only already); a masked one is not, since a mask
 * hides what is read: it is resolved in the new root as an in-place root's are (apply_in_root:
 * symlinks followed inside it only). */
static int plan_config_masks(const struct nsbox_rootfs_cfg *cfg, struct nsbox_mount_plan *plan,
                             struct nsbox_err *e)
{
    for (size_t k = 0; k < cfg->n_masked + cfg->n_readonly; k++) {
        bool mask = k < cfg->n_masked;
        const char *path = mask ? cfg->masked[k] : cfg->readonly[k - cfg->n_masked];
        const char *rel = path + strspn(path, "/");
        struct nsbox_rootfs_mount m = {.destination = path};
        if (check_destination(rel, &m, e) < 0)
            return -1;
        bool image = in_image(cfg, rel) && !cfg->root_in_place;
        if (image && !mask)
            continue;
        struct nsbox_mount_op *o = PUSH(mask ? NSBOX_MOP_MASK : NSBOX_MOP_READONLY, rel);
        /* the kernel would follow an image's symlink there out to the host's files, before
         * pivot_root */
        o->target_in_image |= image;
        o->optional = true;
        if (!mask) {
            o->recursive = true;
            o->attr = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC;
        }
    }
    return 0;
}

/* nsbox-oci: the config's mounts in its order. nsbox's device nodes go into the config's /dev
 * once it is mounted (or nsbox's /dev is made first when the config has none), and nsbox's
 * /proc masks go last, over the config's /proc (or over nsbox's when the config has none). */
static int plan_config_mounts(const struct nsbox_rootfs_cfg *cfg, struct nsbox_mount_plan *plan,
                              struct nsbox_err *e)
{
    bool has_dev = false, has_proc = false;
    for (size_t i = 0; i < cfg->n_mounts; i++) {
        const char *rel = cfg->mounts[i].destination + strspn(cfg->mounts[i].destination, "/");
        has_dev |= !strcmp(rel, "dev") && !strcmp(cfg->mounts[i].type, "tmpfs");
        has_proc |= !strcmp(rel, "proc") && !strcmp(cfg->mounts[i].type, "proc");
    }
    if (!has_dev && plan_dev(cfg, plan, e) < 0)
        return -1;
    /* nsbox's /dev is sealed after the config's mounts, which may go below it */
    for (size_t i = 0; i < cfg->n_mounts; i++) {
        const struct nsbox_rootfs_mount *m = &cfg->mounts[i];
        if (plan_config_mount(cfg, m, plan, e) < 0)
            return -1;
        if (!strcmp(m->destination + strspn(m->destination, "/"), "dev") &&
            !strcmp(m->type, "tmpfs") && plan_dev_nodes(plan, e) < 0)
            return -1;
    }
    if (!has_dev && plan_dev_seal(plan, e) < 0)
        return -1;
    if ((has_proc ? plan_proc_masks(plan, e) : plan_proc(plan, e)) < 0)
        return -1;
    return plan_config_masks(cfg, plan, e);
}

/* Whether one of the config's mounts (nsbox-oci) has the destination rel (no leading '/'). */
static bool config_mounts_on(const struct nsbox_rootfs_cfg *cfg, const char *rel)
{
    for (size_t i = 0; i < cfg->n_mounts; i++)
        if (!strcmp(cfg->mounts[i].destination + strspn(cfg->mounts[i].destination, "/"), rel))
            return true;
    return false;
}

/* nsbox's own writable places on its read-only root: /workspace, /tmp and /run. */
static int plan_scratch(const struct nsbox_rootfs_cfg *cfg, struct nsbox_mount_plan *plan,
                        struct nsbox_err *e)
{
    PUSH(NSBOX_MOP_MKDIR, "workspace")->mode = 0755;
    struct nsbox_mount_op *o;
    switch (cfg->ws_kind) {
    case NSBOX_WS_DIR:
        o = PUSH(NSBOX_MOP_BIND, "workspace");
        if (set_src(plan, o, cfg->workspace, e) < 0)
            return -1;
        o->src_is_fd = cfg->ws_premounted; /* then src only names it in messages */
        o->attr = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
        /* With what is mounted below it, as the caller sees the directory (docker binds so
         * too). Not only a choice: in the sandbox's user namespace those mounts are locked to
         * their parent, and the kernel refuses a bind that would leave them out (EINVAL). */
        o->recursive = true;
        break;
    case NSBOX_WS_EXT4:
        o = PUSH(NSBOX_MOP_BIND, "workspace");
        o->src = "the workspace filesystem";
        o->src_is_fd = true;
        o->attr = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
        break;
    case NSBOX_WS_TMPFS:
        o = PUSH(NSBOX_MOP_TMPFS, "workspace");
        o->flags = MS_NOSUID | MS_NODEV;
        if (nsbox_ws_tmpfs_options(cfg->ws_bytes, o->data, sizeof o->data, e) < 0)
            return -1;
        break;
    default:
        return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL, "rootfs: unknown workspace kind %d",
                             (int)cfg->ws_kind);
    }
    PUSH(NSBOX_MOP_MKDIR, "tmp")->mode = 01777;
    o = PUSH(NSBOX_MOP_TMPFS, "tmp");
    o->flags = MS_NOSUID | MS_NODEV;
    tmp_options(cfg->tmp_bytes, o->data, sizeof o->data);
    PUSH(NSBOX_MOP_MKDIR, "run")->mode = 0755;
    o = PUSH(NSBOX_MOP_TMPFS, "run");
    o->flags = MS_NOSUID | MS_NODEV | MS_NOEXEC;
    snprintf(o->data, sizeof o->data, "mode=0755,size=1m");
    return 0;
}

int nsbox_mount_plan_build(const struct nsbox_rootfs_cfg *cfg, struct nsbox_mount_plan *plan,
                           struct nsbox_err *e)
{
    plan->n = 0;
    plan->strs_used = 0;
    plan->root_in_place = cfg->root_in_place;
    if (!cfg->img ||
        (cfg->ws_kind == NSBOX_WS_DIR && (!cfg->workspace || cfg->workspace[0] != '/')))
        return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL, "rootfs: image and workspace required");
    if (!cfg->root_in_place && plan_image(cfg, plan, e) < 0)
        return -1;
    /* Per-sandbox network files over the image's own (network all/allow). */
    const struct {
        const char *target, *src;
        bool optional;
    } etc_files[] = {{"etc/resolv.conf", cfg->resolv_conf, false},
                     {"etc/hosts", cfg->hosts, cfg->hosts_optional},
                     {"etc/ssl/certs/ca-certificates.crt", cfg->ca_bundle, false}};
    for (size_t i = 0; i < NSBOX_ARRAY_LEN(etc_files); i++) {
        if (!etc_files[i].src)
            continue;
        struct nsbox_mount_op *f = PUSH(NSBOX_MOP_BIND, etc_files[i].target);
        if (set_src(plan, f, etc_files[i].src, e) < 0)
            return -1;
        f->target_in_image = true;
        f->target_dir = false;
        f->optional = etc_files[i].optional;
        f->attr = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC;
    }
    /* A config mount on /etc/hosts (Podman binds its own) goes over nsbox's file, and a mount
     * cannot go on a file whose name is gone: then the config's alone. */
    if (cfg->hosts_text && !cfg->root_in_place && !config_mounts_on(cfg, "etc/hosts")) {
        struct nsbox_mount_op *f = PUSH(NSBOX_MOP_BIND_TEXT, "etc/hosts");
        if (set_src(plan, f, cfg->hosts_text, e) < 0)
            return -1;
        f->target_in_image = true;
        f->optional = cfg->hosts_optional;
        f->attr = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC;
    }
    if (!cfg->root_in_place && plan_scratch(cfg, plan, e) < 0)
        return -1;
    if (cfg->mounts)
        return plan_config_mounts(cfg, plan, e);
    if (plan_dev(cfg, plan, e) < 0 || plan_dev_seal(plan, e) < 0 || plan_proc(plan, e) < 0)
        return -1;
    return 0;
}

/* ---- I/O side -------------------------------------------------------------------------------- */

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

int nsbox_rootfs_scan_image(struct nsbox_rootfs_cfg *cfg, struct nsbox_err *e)
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
        if (!valid_entry_name(de->d_name) || in_list(provided_by_nsbox, de->d_name))
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

static int clone_source(const struct nsbox_sys *sys, const struct nsbox_mount_op *o,
                        int image_rootfd, struct nsbox_err *e)
{
    if (!o->late)
        return clone_source_at(sys, o, o->src_in_image ? image_rootfd : AT_FDCWD, o->src, e);
    /* the path only: cloned when attached (attach) */
    int fd = openat(o->src_in_image ? image_rootfd : AT_FDCWD, o->src,
                    O_PATH | O_CLOEXEC | (o->src_in_image ? O_NOFOLLOW : 0));
    return fd < 0 ? nsbox_err_sys(e, "rootfs: cannot bind %s", o->src) : fd;
}

int nsbox_rootfs_prepare(const struct nsbox_sys *sys, const struct nsbox_mount_plan *plan,
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

int nsbox_rootfs_propagate(const struct nsbox_sys *sys, const char *path,
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
    if (nsbox_rootfs_propagate(sys, dst, &o->propagation, false, false) < 0 && !o->optional)
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

int nsbox_rootfs_enter(const struct nsbox_sys *sys, const struct nsbox_mount_plan *plan,
                       int rootfd, int *fds, struct nsbox_err *e)
{
    if (fchdir(rootfd) < 0)
        return nsbox_err_sys(e, "rootfs: enter the new root");
    size_t sealed;
    if (plan->root_in_place && nsbox_setid_seal(sys, rootfd, &sealed, e) < 0)
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
