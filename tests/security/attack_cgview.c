/* The sandbox's view of its own cgroup at /sys/fs/cgroup (docs/cgroups.md, "What a sandbox
 * sees"): readable, but nothing in it can be written, made, remounted or covered, and nothing
 * of the host's /sys or of another cgroup (a parent, a sibling sandbox's) is reachable from it.
 * Open for writing only: a successful open is already the failure; nothing is ever written. */
#define _GNU_SOURCE
#include "attack.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/mount.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define VIEW "/sys/fs/cgroup"

static const int deny_write[] = {EROFS, EACCES, EPERM, 0};

/* The view's cgroup directories: /sys/fs/cgroup itself on v2, each hierarchy's below it on v1
 * (links to a co-mounted one left out: they name the same directory). */
static size_t view_dirs(char dirs[][128], size_t max)
{
    size_t n = 0;
    struct stat st;
    if (stat(VIEW "/cgroup.procs", &st) == 0) {
        snprintf(dirs[n++], 128, "%s", VIEW);
        return n;
    }
    DIR *d = opendir(VIEW);
    struct dirent *de;
    while (d && (de = readdir(d)) && n < max)
        if (de->d_name[0] != '.' && de->d_type == DT_DIR)
            snprintf(dirs[n++], 128, VIEW "/%.100s", de->d_name);
    if (d)
        closedir(d);
    return n;
}

/* Every file of every view directory opened for writing: memory.max / memory.limit_in_bytes,
 * cpu.max, pids.max, cgroup.procs, tasks, cgroup.subtree_control, release_agent,
 * notify_on_release... */
static void probe_write_every_file(char dirs[][128], size_t n)
{
    size_t files = 0, opened = 0;
    char first[300] = "", seen[200] = "";
    for (size_t i = 0; i < n; i++) {
        DIR *d = opendir(dirs[i]);
        struct dirent *de;
        while (d && (de = readdir(d))) {
            if (de->d_type != DT_REG)
                continue;
            char p[400];
            snprintf(p, sizeof p, "%s/%s", dirs[i], de->d_name);
            int fd = open(p, O_WRONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
            struct outcome o = now(fd);
            if (fd >= 0)
                close(fd);
            files++;
            if (!failed_with(&o, deny_write) && !opened++)
                snprintf(first, sizeof first, "%s opened for writing", p);
            if (!strcmp(de->d_name, "cgroup.procs") || !strcmp(de->d_name, "memory.max") ||
                !strcmp(de->d_name, "memory.limit_in_bytes") ||
                !strcmp(de->d_name, "release_agent") ||
                !strcmp(de->d_name, "cgroup.subtree_control"))
                snprintf(seen + strlen(seen), sizeof seen - strlen(seen), " %s", de->d_name);
        }
        if (d)
            closedir(d);
    }
    emit("cgroup_view_no_file_writable", files > 0 && opened == 0,
         "%zu files in %zu directories, %zu open for writing%s%s; among them:%s", files, n, opened,
         opened ? ": " : "", first, seen[0] ? seen : " (none of the usual)");
}

static void probe_create(char dirs[][128], size_t n)
{
    struct outcome o = {.ret = -1, .err = ENOENT};
    char p[200];
    snprintf(p, sizeof p, "%s/nsbox-probe-child", n ? dirs[0] : VIEW);
    o = now(mkdir(p, 0755));
    if (o.ret == 0)
        rmdir(p);
    emit("cgroup_view_mkdir_child", n > 0 && failed_with(&o, deny_write), "mkdir %s: %s", p,
         o.ret == 0 ? "made" : ename(o.err));
    int fd = open("/sys/nsbox-probe", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    o = now(fd);
    if (fd >= 0) {
        close(fd);
        unlink("/sys/nsbox-probe");
    }
    report("create_in_sys", o, deny_write);
}

/* The view stays as it is: it cannot be made writable again, taken away or covered. */
static void probe_remount(char dirs[][128], size_t n)
{
    const char *at = n ? dirs[0] : VIEW;
    struct outcome o = now(mount(NULL, at, NULL, MS_REMOUNT | MS_BIND | MS_NOSUID, NULL));
    emit("cgroup_view_remount_rw", failed_with(&o, EPERM_ENOSYS), "remount %s rw: %s", at,
         o.ret == 0 ? "done" : ename(o.err));
    struct mount_attr a = {.attr_clr = MOUNT_ATTR_RDONLY};
    o = now(syscall(SYS_mount_setattr, AT_FDCWD, at, 0, &a, sizeof a));
    emit("cgroup_view_setattr_rw", failed_with(&o, EPERM_ENOSYS), "mount_setattr %s -rdonly: %s",
         at, o.ret == 0 ? "done" : ename(o.err));
    o = now(umount2(at, MNT_DETACH));
    emit("cgroup_view_umount", failed_with(&o, EPERM_ENOSYS), "umount %s: %s", at,
         o.ret == 0 ? "done" : ename(o.err));
    o = now(mount("tmpfs", VIEW, "tmpfs", 0, NULL));
    emit("cgroup_view_mount_over", failed_with(&o, EPERM_ENOSYS), "tmpfs over " VIEW ": %s",
         o.ret == 0 ? "done" : ename(o.err));
}

/* /sys holds fs/cgroup and nothing else; the view holds no directory below a cgroup's: a
 * fresh sandbox's cgroup has no children, so one would be a parent's, or the host's whole
 * hierarchy, with the other sandboxes' cgroups in it. */
static void probe_nothing_else(char dirs[][128], size_t n)
{
    char extra[300] = "";
    const char *const only[][2] = {{"/sys", "fs"}, {"/sys/fs", "cgroup"}};
    for (size_t k = 0; k < 2; k++) {
        DIR *d = opendir(only[k][0]);
        struct dirent *de;
        while (d && (de = readdir(d)))
            if (de->d_name[0] != '.' && strcmp(de->d_name, only[k][1]))
                snprintf(extra + strlen(extra), sizeof extra - strlen(extra), " %s/%s", only[k][0],
                         de->d_name);
        if (!d)
            snprintf(extra + strlen(extra), sizeof extra - strlen(extra), " (%s: %s)", only[k][0],
                     ename(errno));
        if (d)
            closedir(d);
    }
    emit("sys_only_fs_cgroup", !extra[0], "/sys holds fs/cgroup and:%s",
         extra[0] ? extra : " nothing else");
    static const char *const host[] = {
        "/sys/kernel", "/sys/class", "/sys/devices", "/sys/kernel/uevent_helper",
        "/sys/power",  "/sys/block", "/sys/module",  "/sys/firmware"};
    char seen[300] = "";
    struct stat st;
    for (size_t i = 0; i < sizeof host / sizeof *host; i++)
        if (stat(host[i], &st) == 0 || errno != ENOENT)
            snprintf(seen + strlen(seen), sizeof seen - strlen(seen), " %s", host[i]);
    emit("host_sys_unreachable", !seen[0],
         "reachable of /sys/kernel, class, devices, "
         "uevent_helper, power, block, module, firmware:%s",
         seen[0] ? seen : " none");
    size_t sub = 0;
    char first[300] = "";
    for (size_t i = 0; i < n; i++) {
        DIR *d = opendir(dirs[i]);
        struct dirent *de;
        while (d && (de = readdir(d)))
            if (de->d_name[0] != '.' && de->d_type == DT_DIR && !sub++)
                snprintf(first, sizeof first, "%s/%s", dirs[i], de->d_name);
        if (d)
            closedir(d);
    }
    emit("cgroup_view_own_cgroup_only", n > 0 && sub == 0,
         "%zu cgroup directories in " VIEW ", %zu cgroups below them%s%s", n, sub,
         sub ? ", first " : "", first);
}

/* Every mount at or below /sys: read-only, nosuid, nodev, noexec, its root "/" (the cgroup
 * namespace's: what a JVM's or Rust's detection looks for). */
static void probe_mountinfo(void)
{
    char *mi = read_file("/proc/self/mountinfo", NULL);
    size_t mounts = 0;
    char bad[300] = "";
    for (char *l = mi; l && *l;) {
        char *nl = strchr(l, '\n');
        if (nl)
            *nl = '\0';
        char root[256], point[256], opts[256];
        if (sscanf(l, "%*d %*d %*s %255s %255s %255s", root, point, opts) == 3 &&
            (!strcmp(point, "/sys") || !strncmp(point, "/sys/", 5))) {
            mounts++;
            bool ok = !strncmp(opts, "ro,", 3) && strstr(opts, "nosuid") && strstr(opts, "nodev") &&
                      strstr(opts, "noexec") && (!strcmp(point, "/sys") || !strcmp(root, "/"));
            if (!ok && !bad[0])
                snprintf(bad, sizeof bad, "%s root %s (%s)", point, root, opts);
        }
        l = nl ? nl + 1 : NULL;
    }
    if (bad[0])
        emit("cgroup_view_mounts_readonly", false, "not read-only or not rooted at /: %s", bad);
    else
        emit("cgroup_view_mounts_readonly", mounts >= 2,
             "%zu mounts at or below /sys, all ro, nosuid, nodev, noexec, rooted at /", mounts);
}

void attack_cgview(void)
{
    char dirs[16][128];
    size_t n = view_dirs(dirs, 16);
    probe_write_every_file(dirs, n);
    probe_create(dirs, n);
    probe_remount(dirs, n);
    probe_nothing_else(dirs, n);
    probe_mountinfo();
}
