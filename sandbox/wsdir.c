/* A host directory given as a sandbox's workspace (--workspace DIR, bound at /workspace):
 * opened once and checked through that descriptor, since a local user who owns a directory on
 * the path could swap a name for a symlink between a check by path and a bind by path; and the
 * ones that may never be, because their bind would show the sandbox the host. */
#include "wsdir.h"
#include "cleanup.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/vfs.h>
#include <unistd.h>

static struct nsbox_note note;

void nsbox_wsdir_set_note(nsbox_note_fn *fn, void *ctx)
{
    note = (struct nsbox_note){fn, ctx};
}

/* As root, a workspace directory owned by root (uid or gid 0) is bound plainly, never
 * idmapped (docs/workspace.md): the sandbox's appuser writes there only what others may.
 * arg: as given, for the advice; path: the kernel's, for whether it is the system's own. */
static void note_root_owned(const char *arg, const char *path, const struct stat *sb)
{
    if (geteuid() != 0 || (sb->st_uid != 0 && sb->st_gid != 0) || (sb->st_mode & S_IWOTH))
        return;
    /* chown -R is advice for a project directory, never for the system's own */
    static const char *const system[] = {"/bin", "/boot", "/etc", "/lib", "/lib32", "/lib64",
                                         "/opt", "/root", "/run", "/sbin", "/srv", "/usr", "/var"};
    bool sys = strchr(path + 1, '/') == NULL; /* any directory right under / */
    for (size_t i = 0; i < NSBOX_ARRAY_LEN(system); i++)
        sys = sys || nsbox_path_within(path, system[i]);
    char advice[PATH_MAX + 64];
    snprintf(advice, sizeof advice,
             sys ? "it is a system directory: give a copy of what the sandbox needs"
                 : "chown -R USER: %1$s hands it to USER and USER's group; where root is the "
                   "only user, as in a CI container, chown -R 1000:1000 %1$s",
             arg);
    nsbox_note_say(&note,
                   "note: --workspace %s belongs to root (its %s is 0), which is never mapped "
                   "into a sandbox: the sandbox can write there only what others may (%s; "
                   "docs/workspace.md)",
                   arg, sb->st_uid == 0 ? "owner" : "group", advice);
}

const char *nsbox_wsdir_forbidden(int fd, const char *path)
{
    struct stat ws, other;
    struct statfs fs;
    if (fstat(fd, &ws) < 0)
        return "a directory that cannot be looked at";
    if (nsbox_is_host_root(&ws))
        return "the host's root directory";
    /* the kernel's and the devices' file systems: a bind of /proc showed the sandbox the host's
     * processes. By type, and by being on the host's own /proc, /sys or /dev. */
    static const unsigned long pseudo[] = {
        PROC_SUPER_MAGIC,    SYSFS_MAGIC,        CGROUP_SUPER_MAGIC,
        CGROUP2_SUPER_MAGIC, DEVPTS_SUPER_MAGIC, DEBUGFS_MAGIC,
        TRACEFS_MAGIC,       SECURITYFS_MAGIC,   BPF_FS_MAGIC};
    if (fstatfs(fd, &fs) == 0)
        for (size_t i = 0; i < NSBOX_ARRAY_LEN(pseudo); i++)
            if ((unsigned long)fs.f_type == pseudo[i])
                return "a kernel file system (proc, sys, cgroup, ...)";
    static const char *const hosts[] = {"/proc", "/sys", "/dev"};
    for (size_t i = 0; i < NSBOX_ARRAY_LEN(hosts); i++)
        if ((stat(hosts[i], &other) == 0 && ws.st_dev == other.st_dev) ||
            nsbox_path_within(path, hosts[i])) /* a tmpfs in them */
            return "in the host's /proc, /sys or /dev";
    return NULL;
}

/* The kernel's path of the directory open on fd: what /proc/self/fd shows, the names of the
 * directories it is in (never a symlink's). */
static int fd_path(int fd, char *path, size_t n)
{
    char self[64];
    snprintf(self, sizeof self, "/proc/self/fd/%d", fd);
    ssize_t len = readlink(self, path, n);
    if (len < 0)
        return -1;
    if ((size_t)len >= n || path[0] != '/') /* too long, or unreachable from our root */
        return errno = ENAMETOOLONG, -1;
    path[len] = '\0';
    return 0;
}

int nsbox_wsdir_open(const char *arg, char *path, size_t n, struct stat *sb, struct nsbox_err *e)
{
    if (!arg || !arg[0])
        return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL, "workspace: no directory given");
    struct open_how how = {.flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
                           .resolve = RESOLVE_NO_MAGICLINKS};
    cleanup_close int fd = nsbox_openat2(AT_FDCWD, arg, &how);
    if (fd < 0 && errno == ENOTDIR)
        return nsbox_err_set(e, NSBOX_E_INVALID, ENOTDIR, "workspace %s is not a directory", arg);
    if (fd < 0 && errno == ELOOP)
        return nsbox_err_set(e, NSBOX_E_INVALID, ELOOP,
                             "workspace %s: too many symbolic links, or one of /proc's links to "
                             "a process's files (/proc/PID/root, /proc/self/fd/N), which may lead "
                             "into another mount namespace: give the directory's own path",
                             arg);
    if (fd < 0 || fstat(fd, sb) < 0)
        return nsbox_err_sys(e, "workspace %s", arg);
    if (fd_path(fd, path, n) < 0)
        return nsbox_err_sys(e, "workspace %s: the path of the directory it names", arg);
    const char *why = nsbox_wsdir_forbidden(fd, path);
    if (why)
        return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL,
                             "workspace %s is %s: refusing to hand it to a sandbox (give a "
                             "directory of your files)",
                             arg, why);
    note_root_owned(arg, path, sb);
    int ret = fd;
    fd = -1;
    return ret;
}
