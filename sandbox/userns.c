#define _GNU_SOURCE
#include "userns.h"
#include "oci_overlay.h"
#include "ovl_root.h"
#include "cleanup.h"
#include "proc.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/mount.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* The first range of the file that fits (nsbox_idmap_subid_find), one line at a time. */
static bool find_in_file(const char *path, const char *name, uint32_t id, uint32_t *start)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return false;
    char *line = NULL;
    size_t cap = 0;
    bool found = false;
    while (!found && getline(&line, &cap, f) > 0)
        found = nsbox_idmap_subid_find(line, name, id, start);
    free(line);
    fclose(f);
    return found;
}

static bool setuid_root(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_uid == 0 &&
           (sb.st_mode & S_ISUID) && (sb.st_mode & S_IXOTH);
}

int nsbox_userns_subids(struct nsbox_subids *sub, char *why, size_t n)
{
    uid_t uid = getuid();
    gid_t gid = getgid();
    if (!setuid_root(NSBOX_NEWUIDMAP) || !setuid_root(NSBOX_NEWGIDMAP)) {
        snprintf(why, n, "%s and %s are not both installed set-user-ID root (package uidmap)",
                 NSBOX_NEWUIDMAP, NSBOX_NEWGIDMAP);
        return 0;
    }
    /* newuidmap looks the caller up by name as well as by number */
    char buf[4096];
    struct passwd pw, *res = NULL;
    const char *name = getpwuid_r(uid, &pw, buf, sizeof buf, &res) == 0 && res ? pw.pw_name : "";
    if (!find_in_file("/etc/subuid", name, uid, &sub->uid_start)) {
        snprintf(why, n, "/etc/subuid grants uid %u%s%s%s no range of %u ids", (unsigned)uid,
                 *name ? " (" : "", name, *name ? ")" : "", NSBOX_ID_COUNT);
        return 0;
    }
    /* newgidmap takes the user's name (or uid) in /etc/subgid, not the group's */
    if (!find_in_file("/etc/subgid", name, uid, &sub->gid_start) ||
        (sub->gid_start <= gid && gid - sub->gid_start < NSBOX_ID_COUNT)) {
        snprintf(why, n, "/etc/subgid grants uid %u%s%s%s no range of %u ids", (unsigned)uid,
                 *name ? " (" : "", name, *name ? ")" : "", NSBOX_ID_COUNT);
        return 0;
    }
    return 1;
}

static int write_proc_file(pid_t pid, const char *name, const char *text, struct nsbox_err *e)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/%s", (int)pid, name);
    cleanup_close int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return nsbox_err_sys(e, "open %s", path);
    size_t len = strlen(text);
    if (write(fd, text, len) != (ssize_t)len)
        return nsbox_err_sys(e, "write %s", path);
    return 0;
}

/* Run helper PID inside outside count ...; its error output becomes the error's text. */
static int run_helper(const char *helper, pid_t pid, const struct nsbox_idmap *m, unsigned lines,
                      struct nsbox_err *e)
{
    char nums[1 + 3 * NSBOX_IDMAP_LINES][16];
    char *argv[2 + 1 + 3 * NSBOX_IDMAP_LINES + 1];
    unsigned k = 0, a = 0;
    argv[a++] = (char *)helper;
    snprintf(nums[k], sizeof nums[k], "%d", (int)pid);
    argv[a++] = nums[k++];
    for (unsigned i = 0; i < lines; i++) {
        uint32_t v[3] = {m[i].inside, m[i].outside, m[i].count};
        for (int j = 0; j < 3; j++) {
            snprintf(nums[k], sizeof nums[k], "%u", v[j]);
            argv[a++] = nums[k++];
        }
    }
    argv[a] = NULL;
    char *const envp[] = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C", NULL};
    const struct nsbox_proc p = {
        .argv = argv, .envp = envp, .stdout_fd = NSBOX_PROC_STDOUT_CAPTURED, .keep_fd = -1};
    char out[512];
    int status;
    if (nsbox_proc_run(&p, &status, out, sizeof out, e) < 0)
        return nsbox_err_wrap(e, "cannot run %s", helper);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return nsbox_err_set(e, NSBOX_E_SYS, EPERM, "%s failed (status %d): %s", helper,
                             nsbox_exit_code(status), out[0] ? out : "no message");
    return 0;
}

int nsbox_userns_write_maps(pid_t pid, const struct nsbox_idmaps *m, bool helper,
                            bool allow_setgroups, bool *fell_back, struct nsbox_err *e)
{
    char ubuf[256], gbuf[256];
    *fell_back = false;
    /* setgroups is denied first: required for an unprivileged writer, and it stops the sandbox
     * from dropping supplementary groups to get around "deny by group" permissions
     * (CVE-2014-8989). newgidmap leaves a "deny" in place. Allowed only for a root writer whose
     * init sets the groups itself and drops CAP_SETGID before any workload exists. */
    if ((!allow_setgroups || helper) && write_proc_file(pid, "setgroups", "deny", e) < 0)
        return nsbox_err_wrap(e, "user namespace id map");
    if (helper) {
        struct nsbox_err he;
        if (run_helper(NSBOX_NEWUIDMAP, pid, m->uid, m->n, &he) == 0) {
            if (run_helper(NSBOX_NEWGIDMAP, pid, m->gid, m->n, e) < 0)
                return nsbox_err_wrap(e, "user namespace id map");
            return 0;
        }
        /* nothing written yet: the single id, as without subordinate ids */
        *fell_back = true;
        struct nsbox_idmap u = {NSBOX_SANDBOX_UID, m->app_uid, 1};
        struct nsbox_idmap g = {NSBOX_SANDBOX_GID, m->app_gid, 1};
        if (nsbox_idmap_format(&u, ubuf, sizeof ubuf, e) < 0 ||
            nsbox_idmap_format(&g, gbuf, sizeof gbuf, e) < 0)
            return -1;
    } else if (nsbox_idmap_format_lines(m->uid, m->n, ubuf, sizeof ubuf, e) < 0 ||
               nsbox_idmap_format_lines(m->gid, m->n, gbuf, sizeof gbuf, e) < 0) {
        return -1;
    }
    if (write_proc_file(pid, "uid_map", ubuf, e) < 0 ||
        write_proc_file(pid, "gid_map", gbuf, e) < 0)
        return nsbox_err_wrap(e, "user namespace id map");
    return 0;
}

/* The kernel names a new user namespace's owner after the creator's effective uid, and
 * charges the namespace's per-user counts to it in the parent namespace. The saved uid is the
 * owner's too, so that the child may move itself into its cgroup v1 "tasks" (the writer's
 * effective uid must be the task's real or saved one); the real uid stays 0, so that the
 * kernel keeps root's exemption from RLIMIT_NPROC for the new namespace (docs/decisions.md).
 * The raw calls change this thread alone (glibc's wrappers change every thread): the others go
 * on as root meanwhile. */
enum nsbox_userns_owner_step nsbox_userns_owner_begin(uint32_t owner,
                                                      struct nsbox_userns_owner *o)
{
    o->changed = false;
    o->dumpable = prctl(PR_GET_DUMPABLE, 0, 0, 0, 0);
    if (syscall(SYS_setresuid, (uid_t)0, (uid_t)owner, (uid_t)owner) < 0)
        return NSBOX_USERNS_OWNER_UID;
    o->changed = true;
    syscall(SYS_setfsuid, (uid_t)0);
    if (syscall(SYS_setfsuid, (uid_t)-1) != 0) {
        nsbox_userns_owner_end(o);
        errno = EPERM;
        return NSBOX_USERNS_OWNER_FSUID;
    }
    return NSBOX_USERNS_OWNER_OK;
}

int nsbox_userns_owner_fail(uint32_t owner, enum nsbox_userns_owner_step step, int err,
                            struct nsbox_err *e)
{
    if (step == NSBOX_USERNS_OWNER_FSUID)
        return nsbox_err_set(e, NSBOX_E_SYS, err,
                             "cannot keep file system uid 0 while uid %u makes the sandbox",
                             (unsigned)owner);
    errno = err;
    return nsbox_err_sys(e, "cannot take uid %u to make the sandbox's user namespace",
                         (unsigned)owner);
}

int nsbox_userns_owner_end(struct nsbox_userns_owner *o)
{
    if (!o->changed)
        return 0;
    o->changed = false;
    /* the real uid is 0: this cannot be refused */
    int r = (int)syscall(SYS_setresuid, (uid_t)0, (uid_t)0, (uid_t)0);
    if (o->dumpable >= 0)
        prctl(PR_SET_DUMPABLE, o->dumpable, 0, 0, 0);
    return r;
}

/* ---- idmapped mounts ------------------------------------------------------------------------ */

/* A user namespace with the given maps (n lines each), as an fd (for MOUNT_ATTR_IDMAP). A
 * short-lived child is cloned into it, and we write its maps. Cloned into it rather than
 * forked and left to unshare: unshare(CLONE_NEWUSER) fails with EINVAL in a process with more
 * than one thread, and a forked child is not always alone (ThreadSanitizer's runtime starts a
 * thread of its own in it), where clone makes the namespace for a process of any kind. */
int nsbox_userns_fd(const struct nsbox_idmap *um, unsigned nu, const struct nsbox_idmap *gm,
                    unsigned ng, struct nsbox_err *e)
{
    const char *files[] = {"uid_map", "gid_map"};
    char maps[2][256];
    int lens[2];
    if ((lens[0] = nsbox_idmap_format_lines(um, nu, maps[0], sizeof maps[0], e)) < 0 ||
        (lens[1] = nsbox_idmap_format_lines(gm, ng, maps[1], sizeof maps[1], e)) < 0)
        return -1;
    int go[2];
    if (pipe2(go, O_CLOEXEC) < 0)
        return nsbox_err_sys(e, "pipe");
    pid_t pid = nsbox_clone_bare(CLONE_NEWUSER | SIGCHLD);
    if (pid == 0) {
        /* stay until the parent has what it needs (its end of the pipe closes) */
        char c;
        close(go[1]);
        while (read(go[0], &c, 1) < 0 && errno == EINTR) {
        }
        _exit(0);
    }
    int err = errno;
    close(go[0]);
    int nsfd = -1;
    bool ok = pid > 0;
    char path[64];
    for (int i = 0; i < 2 && ok; i++) {
        snprintf(path, sizeof path, "/proc/%d/%s", (int)pid, files[i]);
        int fd = open(path, O_WRONLY | O_CLOEXEC);
        ok = fd >= 0 && write(fd, maps[i], (size_t)lens[i]) == lens[i];
        if (fd >= 0)
            close(fd);
    }
    if (ok) {
        snprintf(path, sizeof path, "/proc/%d/ns/user", (int)pid);
        nsfd = open(path, O_RDONLY | O_CLOEXEC);
    }
    if (pid > 0)
        err = errno;
    close(go[1]);
    while (pid > 0 && waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
    }
    if (nsfd < 0) {
        errno = err;
        return nsbox_err_sys(e, "cannot make a user namespace for an idmapped mount");
    }
    return nsfd;
}

/* An image made of layers: their overlay, each layer seen through an idmapped mount of the
 * store (an overlay cannot be idmapped itself). */
static int layered_tree(const struct nsbox_image *img, uint32_t slot_base, int *mount_fd,
                        struct nsbox_err *e)
{
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", img->root);
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = '\0'; /* <store>/<name>/rootfs: the image's directory */
    struct nsbox_idmap line = nsbox_idmap_image_line(slot_base);
    cleanup_close int nsfd = nsbox_userns_fd(&line, 1, &line, 1, e);
    if (nsfd < 0)
        return nsbox_err_wrap(e, "image %s", img->name);
    return nsbox_oci_overlay_image(dir, nsfd, mount_fd, e);
}

/* The maps of an idmapped mount: um (nu lines) and gm (ng); one line each for the common case. */
struct tree_maps {
    const struct nsbox_idmap *um, *gm;
    unsigned nu, ng;
};

/* A detached copy of the tree at root (or, dirfd >= 0, at that descriptor's directory, root
 * naming it in messages), idmapped by maps (on-disk id inside is the sandbox's host id
 * outside) with attr set on it from the start. tree: its submounts cloned too;
 * idmap_tree: they are idmapped (and given attr) as well. 1 (and e says why) when the
 * filesystem or kernel has no idmapped mounts. */
static int idmapped_tree(int dirfd, const char *root, const struct tree_maps *maps, uint64_t attr,
                         bool tree, bool idmap_tree, int *mount_fd, struct nsbox_err *e)
{
    cleanup_close int fd = (int)syscall(
        SYS_open_tree, dirfd >= 0 ? dirfd : AT_FDCWD, dirfd >= 0 ? "" : root,
        (dirfd >= 0 ? AT_EMPTY_PATH : 0) | (tree ? AT_RECURSIVE : 0) | OPEN_TREE_CLONE |
            OPEN_TREE_CLOEXEC);
    if (fd < 0)
        return nsbox_err_sys(e, "%s", root);
    cleanup_close int nsfd = nsbox_userns_fd(maps->um, maps->nu, maps->gm, maps->ng, e);
    if (nsfd < 0)
        return nsbox_err_wrap(e, "%s", root);
    struct mount_attr ma = {.attr_set = MOUNT_ATTR_IDMAP | attr, .userns_fd = (uint64_t)nsfd};
    if (syscall(SYS_mount_setattr, fd, "", AT_EMPTY_PATH | (idmap_tree ? AT_RECURSIVE : 0), &ma,
                sizeof ma) < 0) {
        int r = errno == EINVAL || errno == EOPNOTSUPP || errno == ENOSYS || errno == EPERM;
        nsbox_err_sys(e, "%s: idmapped mount", root);
        return r ? 1 : -1;
    }
    /* an idmap on the top alone: the submounts the clone took keep their ids, but never
     * set-id programs or devices */
    struct mount_attr sub = {.attr_set = attr};
    if (tree && !idmap_tree &&
        syscall(SYS_mount_setattr, fd, "", AT_EMPTY_PATH | AT_RECURSIVE, &sub, sizeof sub) < 0)
        return nsbox_err_sys(e, "%s: the attributes of its submounts", root);
    *mount_fd = fd;
    fd = -1;
    return 0;
}

int nsbox_userns_image_tree(const struct nsbox_image *img, uint32_t slot_base, int *mount_fd,
                            struct nsbox_err *e)
{
    *mount_fd = -1;
    if (img->mount_fd >= 0)
        return layered_tree(img, slot_base, mount_fd, e);
    /* read-only and without set-id or devices from the start: the entries bound from it keep
     * these, and add their own */
    struct nsbox_err fe;
    struct nsbox_idmap line = nsbox_idmap_image_line(slot_base);
    const struct tree_maps maps = {&line, &line, 1, 1};
    int r =
        idmapped_tree(-1, img->root, &maps, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
                      true, true, mount_fd, &fe);
    if (r < 0)
        *e = fe;
    return r < 0 ? nsbox_err_wrap(e, "image") : r;
}

int nsbox_userns_root_tree(const char *root, uint32_t slot_base, int *mount_fd,
                           struct nsbox_setid_list **seal_list, struct nsbox_err *e)
{
    *mount_fd = -1;
    *seal_list = NULL;
    struct nsbox_idmap line = {0, slot_base, NSBOX_ID_COUNT};
    /* an engine's overlay: the kernel idmaps its layers, not the overlay itself (EINVAL) */
    const struct tree_maps maps = {&line, &line, 1, 1};
    if (!nsbox_ovl_root_is_overlay(root))
        return idmapped_tree(-1, root, &maps, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, true, true,
                             mount_fd, e);
    struct nsbox_err oe = {0};
    cleanup_close int nsfd = nsbox_userns_fd(&line, 1, &line, 1, &oe);
    if (nsfd >= 0 && nsbox_ovl_root_make(root, nsfd, slot_base, mount_fd, seal_list, &oe) == 0)
        return 0;
    nsbox_err_set(e, NSBOX_E_UNSUPPORTED, oe.sys_errno,
                  "%s is an overlay, which the kernel does not idmap, and nsbox-oci cannot make "
                  "it again over idmapped layers: %s",
                  root, oe.msg);
    return 1;
}

int nsbox_userns_volume_tree(const struct nsbox_rootfs_mount *m,
                             const struct nsbox_rootfs_idmap *im, uint32_t slot_base, int *mount_fd,
                             struct nsbox_err *e)
{
    *mount_fd = -1;
    /* no mappings: the container's own, as the writable root's (on-disk N is its id N) */
    struct nsbox_idmap um[NSBOX_IDMAP_LINES] = {{0, slot_base, NSBOX_ID_COUNT}};
    struct nsbox_idmap gm[NSBOX_IDMAP_LINES] = {{0, slot_base, NSBOX_ID_COUNT}};
    struct tree_maps maps = {um, gm, 1, 1};
    if (im->n_uid && im->n_gid && im->n_uid <= NSBOX_IDMAP_LINES &&
        im->n_gid <= NSBOX_IDMAP_LINES) {
        maps.nu = im->n_uid;
        maps.ng = im->n_gid;
        for (unsigned i = 0; i < maps.nu; i++)
            um[i] = (struct nsbox_idmap){im->uid[i].inside, slot_base + im->uid[i].outside,
                                         im->uid[i].count};
        for (unsigned i = 0; i < maps.ng; i++)
            gm[i] = (struct nsbox_idmap){im->gid[i].inside, slot_base + im->gid[i].outside,
                                         im->gid[i].count};
    }
    uint64_t attr = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
    attr |= (m->flags & MS_RDONLY) ? MOUNT_ATTR_RDONLY : 0;
    attr |= (m->flags & MS_NOEXEC) ? MOUNT_ATTR_NOEXEC : 0;
    struct nsbox_err te;
    int r = idmapped_tree(im->engine_volume ? im->source_fd : -1, m->source, &maps, attr,
                          m->recursive, im->recursive, mount_fd, &te);
    if (r == 0)
        return 0;
    *e = te;
    if (r > 0 && im->engine_volume) { /* not asked for by the config: the caller says it */
        e->code = NSBOX_E_UNSUPPORTED;
        return 1;
    }
    if (r > 0)
        nsbox_err_set(e, NSBOX_E_UNSUPPORTED, te.sys_errno,
                      "mounts: %s asks for an idmapped mount, which the kernel refuses for %s "
                      "(%s): leave idmap and uidMappings out (the container's root then cannot "
                      "write files of host root there), or use a filesystem with idmapped "
                      "mounts (Linux 5.12 or later)",
                      m->destination, m->source, te.msg);
    else
        nsbox_err_wrap(e, "mounts: the idmapped mount of %s", m->destination);
    return -1;
}
