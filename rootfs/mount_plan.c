/* Root filesystem plan: what to mount where, from the image and the config, as a list of
 * operations the executor (mounts.c) carries out in the child. Pure. See mounts.h. */
#define _GNU_SOURCE
#include "mounts.h"
#include "cleanup.h"

#include <errno.h>
#include <linux/mount.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>

/* Kernel interfaces that leak host information or allow host-wide actions. */
const char *const nsbox_proc_masked_files[] = {
    "kcore", "keys", "timer_list", "sched_debug", "latency_stats", "timer_stats", "kallsyms", NULL};
const char *const nsbox_proc_masked_dirs[] = {"acpi", "scsi", NULL};
const char *const nsbox_proc_readonly[] = {"sys", "sysrq-trigger", "irq", "bus", "fs", NULL};
const char *const nsbox_dev_nodes[] = {"null", "zero", "full", "random", "urandom", "tty", NULL};

/* What nsbox's read-only views and seals set: nothing written, run, set-id or a device. */
static const uint64_t read_only =
    MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC;

/* Image entries that nsbox provides itself; an image's own versions are never exposed. */
static const char *const provided_by_nsbox[] = {"proc",      "dev", "sys",        "tmp",
                                                "workspace", "run", "lost+found", NULL};

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
    if (p->n >= p->cap) {
        nsbox_err_set(e, NSBOX_E_INVALID, E2BIG, "rootfs: too many mount operations");
        return NULL;
    }
    struct nsbox_mount_op *o = &p->ops[p->n++];
    o->op = op;
    o->src = "";
    o->src_in_image = false;
    o->src_is_fd = false;
    o->src_fd = -1;
    o->src_pin = false;
    o->pin_dev = 0;
    o->pin_ino = 0;
    o->seal = false;
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

#define PUSH(op, target)                                                                           \
    ({                                                                                             \
        struct nsbox_mount_op *_o = push(plan, (op), (target), e);                                 \
        if (!_o)                                                                                   \
            return -1;                                                                             \
        _o;                                                                                        \
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

bool nsbox_mount_plan_shows(const char *name)
{
    return valid_entry_name(name) && !in_list(provided_by_nsbox, name);
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
     * not mapped in the sandbox's user namespace. max: the host's pool is shared (mounts.h). */
    snprintf(o->data, sizeof o->data, "newinstance,ptmxmode=0666,mode=0620,max=%d", NSBOX_PTYS_MAX);
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

/* What of a proc mount at `at` (relative to the new root) is hidden or read-only: the floor,
 * over nsbox's /proc, a config's, and any other proc a config mounts (a second procfs is as
 * revealing as the first). */
static int plan_proc_masks(struct nsbox_mount_plan *plan, const char *at, struct nsbox_err *e)
{
    char path[sizeof plan->ops[0].target + 32];
    for (const char *const *n = nsbox_proc_masked_files; *n; n++) {
        snprintf(path, sizeof path, "%s/%s", at, *n);
        PUSH(NSBOX_MOP_MASK_FILE, path);
    }
    for (const char *const *n = nsbox_proc_masked_dirs; *n; n++) {
        snprintf(path, sizeof path, "%s/%s", at, *n);
        PUSH(NSBOX_MOP_MASK_DIR, path);
    }
    for (const char *const *n = nsbox_proc_readonly; *n; n++) {
        snprintf(path, sizeof path, "%s/%s", at, *n);
        struct nsbox_mount_op *o = PUSH(NSBOX_MOP_READONLY, path);
        o->recursive = true;
        o->attr = read_only;
    }
    return 0;
}

static int plan_proc(struct nsbox_mount_plan *plan, struct nsbox_err *e)
{
    PUSH(NSBOX_MOP_MKDIR, "proc")->mode = 0555;
    PUSH(NSBOX_MOP_PROC, "proc")->flags = MS_NOSUID | MS_NODEV | MS_NOEXEC;
    return plan_proc_masks(plan, "proc", e);
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

/* The links a co-mounted v1 hierarchy's directory gets, one per controller ("cpu" and
 * "cpuacct" to "cpu,cpuacct"), as the host has them: a reader that looks for one controller's
 * directory by its name finds it. base: the directory that holds the hierarchies. */
static int plan_sys_links(struct nsbox_mount_plan *plan, const char *base, const char *name,
                          struct nsbox_err *e)
{
    if (!strchr(name, ','))
        return 0;
    char target[PATH_MAX];
    for (const char *p = name; *p;) {
        size_t len = strcspn(p, ",");
        if (len && len < 64) {
            snprintf(target, sizeof target, "%s/%.*s", base, (int)len, p);
            if (set_src(plan, PUSH(NSBOX_MOP_SYMLINK, target), name, e) < 0)
                return -1;
        }
        p += len + (p[len] == ',');
    }
    return 0;
}

/* Room for n cgroup views, and /sys's or the cgroup mount's other ops: beyond the build's,
 * which an image's entries and a config's mounts may fill. The ops pushed until
 * plan_cgroup_room_end take none of the room the others have left (*left), so that a config
 * fits as well with its cgroup mount first as last. */
static int plan_cgroup_room(struct nsbox_mount_plan *plan, size_t n, size_t *left,
                            struct nsbox_err *e)
{
    if (n > NSBOX_MOUNT_SYS_VIEWS_MAX)
        return nsbox_err_set(e, NSBOX_E_INVALID, E2BIG, "rootfs: %zu cgroup hierarchies to show",
                             n);
    *left = plan->cap > plan->n ? plan->cap - plan->n : 0;
    plan->cap = NSBOX_MOUNT_PLAN_OPS;
    return 0;
}

static void plan_cgroup_room_end(struct nsbox_mount_plan *plan, size_t left)
{
    plan->cap = plan->n + left < NSBOX_MOUNT_PLAN_OPS ? plan->n + left : NSBOX_MOUNT_PLAN_OPS;
}

/* A tmpfs at rel for the few directories and links nsbox makes there, nosuid, nodev and
 * noexec; the caller seals it read-only once they are in. */
static int plan_small_tmpfs(struct nsbox_mount_plan *plan, const char *rel, struct nsbox_err *e)
{
    struct nsbox_mount_op *o = PUSH(NSBOX_MOP_TMPFS, rel);
    o->flags = MS_NOSUID | MS_NODEV | MS_NOEXEC;
    snprintf(o->data, sizeof o->data, "mode=0555,size=4k,nr_inodes=64");
    return 0;
}

/* The sandbox's cgroup directories bound read-only at base (a directory the plan made, or for
 * v2's one directory, a mount point): v2's at base itself, each v1 hierarchy's at
 * base/<name>, made first. */
static int plan_cgroup_views(struct nsbox_mount_plan *plan, const char *base,
                             const struct nsbox_cgroup_view *views, size_t n, struct nsbox_err *e)
{
    char target[PATH_MAX];
    for (size_t i = 0; i < n; i++) {
        const char *name = views[i].name;
        if (name && (!valid_entry_name(name) ||
                     (size_t)snprintf(target, sizeof target, "%s/%s", base, name) >= sizeof target))
            return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL, "rootfs: bad cgroup hierarchy '%s'",
                                 name);
        if (!name && n != 1)
            return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL,
                                 "rootfs: cgroup v2's directory goes alone at /sys/fs/cgroup");
        if (name)
            PUSH(NSBOX_MOP_MKDIR, target)->mode = 0555;
        struct nsbox_mount_op *o = PUSH(NSBOX_MOP_BIND, name ? target : base);
        if (set_src(plan, o, views[i].path, e) < 0)
            return -1;
        o->attr = read_only;
        if (name && plan_sys_links(plan, base, name, e) < 0)
            return -1;
    }
    return 0;
}

/* Whether a config's cgroup mount is v2's one directory, bound on its mount point; else v1's
 * hierarchies (or none) are in a tmpfs of its own there. */
static bool cgroup_on_mount_point(const struct nsbox_rootfs_cfg *cfg)
{
    return cfg->n_cgroup_views == 1 && !cfg->cgroup_views[0].name;
}

/* nsbox-oci: the config's cgroup mount at rel, in its place among the config's mounts: the
 * sandbox's own cgroup directories bound read-only, v2's on rel itself, v1's each at
 * rel/<name> of a tmpfs of its own, sealed read-only by plan_config_cgroup_seals. */
static int plan_config_cgroup(const struct nsbox_rootfs_cfg *cfg, const char *rel,
                              struct nsbox_mount_plan *plan, struct nsbox_err *e)
{
    size_t left = 0;
    if (plan_cgroup_room(plan, cfg->n_cgroup_views, &left, e) < 0)
        return -1;
    if (!cgroup_on_mount_point(cfg) && plan_small_tmpfs(plan, rel, e) < 0)
        return -1;
    if (plan_cgroup_views(plan, rel, cfg->cgroup_views, cfg->n_cgroup_views, e) < 0)
        return -1;
    plan_cgroup_room_end(plan, left);
    return 0;
}

/* Whether path (no leading '/') is at or below dir. */
static bool at_or_below(const char *path, const char *dir)
{
    size_t n = strlen(dir);
    return !strncmp(path, dir, n) && (path[n] == '/' || !path[n]);
}

/* The seals of the config's v1 cgroup tmpfs that go before config mount `before` (n_mounts:
 * after the last): each one's before the first later mount at or above it, which the seal
 * would otherwise reach by its path; until then a later mount below it may make its mount
 * point there (Podman's --systemd binds /sys/fs/cgroup/systemd). */
static int plan_config_cgroup_seals(const struct nsbox_rootfs_cfg *cfg, size_t before,
                                    struct nsbox_mount_plan *plan, struct nsbox_err *e)
{
    if (cgroup_on_mount_point(cfg))
        return 0;
    for (size_t i = 0; i < before; i++) {
        const char *rel = cfg->mounts[i].destination + strspn(cfg->mounts[i].destination, "/");
        if (strcmp(cfg->mounts[i].type, "cgroup"))
            continue;
        size_t j = i + 1;
        for (; j < cfg->n_mounts; j++) {
            const char *d = cfg->mounts[j].destination;
            if (at_or_below(rel, d + strspn(d, "/")))
                break;
        }
        if (j != before)
            continue;
        size_t left = 0;
        if (plan_cgroup_room(plan, 0, &left, e) < 0)
            return -1;
        PUSH(NSBOX_MOP_SETATTR, rel)->attr = read_only;
        plan_cgroup_room_end(plan, left);
    }
    return 0;
}

/* One config mount: its mount point, then the mount itself. */
static int plan_config_mount(const struct nsbox_rootfs_cfg *cfg, const struct nsbox_rootfs_mount *m,
                             int fd, struct nsbox_mount_plan *plan, struct nsbox_err *e)
{
    const char *rel = m->destination + strspn(m->destination, "/");
    if (check_destination(rel, m, e) < 0)
        return -1;
    bool bind = !strcmp(m->type, "bind");
    bool image = in_image(cfg, rel);
    if (fd >= 0 && !bind)
        return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL,
                             "mounts: %s: an idmapped tree for a %s mount", m->destination,
                             m->type);
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
    /* cgroup: the sandbox's own cgroup directories, as nsbox's own /sys shows them, not a
     * cgroup2 mount made inside: that is refused to a user namespace on a v1 or hybrid host, so
     * a mount of it would be empty */
    if (!strcmp(m->type, "cgroup"))
        return plan_config_cgroup(cfg, rel, plan, e);
    struct nsbox_mount_op *o = PUSH(kinds[k].op, rel);
    if ((!bind || m->source[0]) && set_src(plan, o, m->source[0] ? m->source : m->type, e) < 0)
        return -1;
    o->flags = m->flags & ~(unsigned long)MS_BIND;
    snprintf(o->fstype, sizeof o->fstype, "%s", m->type);
    if (strlen(m->data) >= sizeof o->data)
        return nsbox_err_set(e, NSBOX_E_INVALID, E2BIG, "mounts: the options of %s are too long",
                             m->destination);
    snprintf(o->data, sizeof o->data, "%s", m->data);
    o->propagation = m->propagation;
    if (bind) {
        o->late = fd < 0;
        o->src_fd = fd;
        /* writable: the host's set-id programs there would be the container root's to rewrite
         * (setid.h), as a writable root's */
        o->seal = fd >= 0 && !(m->flags & MS_RDONLY);
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
            o->attr = read_only;
        }
    }
    return 0;
}

/* nsbox-oci: the config's mounts in its order. nsbox's device nodes go into the config's /dev
 * once it is mounted (or nsbox's /dev is made first when the config has none), and nsbox's
 * /proc masks go last, over every proc the config mounts (and nsbox's when none is at /proc). */
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
        if (plan_config_cgroup_seals(cfg, i, plan, e) < 0 ||
            plan_config_mount(cfg, m, cfg->mount_fds ? cfg->mount_fds[i] : -1, plan, e) < 0)
            return -1;
        if (!strcmp(m->destination + strspn(m->destination, "/"), "dev") &&
            !strcmp(m->type, "tmpfs") && plan_dev_nodes(plan, e) < 0)
            return -1;
    }
    if (plan_config_cgroup_seals(cfg, cfg->n_mounts, plan, e) < 0 ||
        (!has_dev && plan_dev_seal(plan, e) < 0))
        return -1;
    if (!has_proc && plan_proc(plan, e) < 0)
        return -1;
    for (size_t i = 0; i < cfg->n_mounts; i++)
        if (!strcmp(cfg->mounts[i].type, "proc") &&
            plan_proc_masks(
                plan, cfg->mounts[i].destination + strspn(cfg->mounts[i].destination, "/"), e) < 0)
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
        o->src_pin = !cfg->ws_premounted && cfg->ws_sb;
        if (o->src_pin) {
            o->pin_dev = cfg->ws_sb->st_dev;
            o->pin_ino = cfg->ws_sb->st_ino;
        }
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
        if (nsbox_wsplan_tmpfs_options(cfg->ws_bytes, o->data, sizeof o->data, e) < 0)
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

int nsbox_mount_plan_add_sys(struct nsbox_mount_plan *plan, const struct nsbox_cgroup_view *views,
                             size_t n, struct nsbox_err *e)
{
    size_t left = 0;
    if (plan_cgroup_room(plan, n, &left, e) < 0)
        return -1;
    PUSH(NSBOX_MOP_MKDIR, "sys")->mode = 0555;
    if (plan_small_tmpfs(plan, "sys", e) < 0)
        return -1;
    if (n) {
        PUSH(NSBOX_MOP_MKDIR, "sys/fs")->mode = 0555;
        PUSH(NSBOX_MOP_MKDIR, "sys/fs/cgroup")->mode = 0555;
    }
    if (plan_cgroup_views(plan, "sys/fs/cgroup", views, n, e) < 0)
        return -1;
    /* nothing can be added to /sys nor changed in it: its tmpfs, then made read-only */
    PUSH(NSBOX_MOP_SETATTR, "sys")->attr = read_only;
    plan_cgroup_room_end(plan, left);
    return 0;
}

int nsbox_mount_plan_build(const struct nsbox_rootfs_cfg *cfg, struct nsbox_mount_plan *plan,
                           struct nsbox_err *e)
{
    plan->n = 0;
    plan->cap = NSBOX_MOUNT_OPS_MAX;
    plan->strs_used = 0;
    plan->root_in_place = cfg->root_in_place;
    plan->seal_list = NULL;
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
        f->attr = read_only;
    }
    /* A config mount on /etc/hosts (Podman binds its own) goes over nsbox's file, and a mount
     * cannot go on a file whose name is gone: then the config's alone. */
    if (cfg->hosts_text && !cfg->root_in_place && !config_mounts_on(cfg, "etc/hosts")) {
        struct nsbox_mount_op *f = PUSH(NSBOX_MOP_BIND_TEXT, "etc/hosts");
        if (set_src(plan, f, cfg->hosts_text, e) < 0)
            return -1;
        f->target_in_image = true;
        f->optional = cfg->hosts_optional;
        f->attr = read_only;
    }
    if (!cfg->root_in_place && plan_scratch(cfg, plan, e) < 0)
        return -1;
    if (cfg->mounts)
        return plan_config_mounts(cfg, plan, e);
    if (plan_dev(cfg, plan, e) < 0 || plan_dev_seal(plan, e) < 0 || plan_proc(plan, e) < 0)
        return -1;
    return 0;
}
