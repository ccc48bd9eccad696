/* A host directory given as a sandbox's workspace (--workspace DIR, bound at /workspace): the
 * ones that may never be, because their bind would show the sandbox the host. */
#include "wsdir.h"
#include "cleanup.h"
#include "util.h"

#include <linux/magic.h>
#include <stddef.h>
#include <sys/stat.h>
#include <sys/vfs.h>

const char *nsbox_wsdir_forbidden(const char *dir)
{
    struct stat ws, other;
    struct statfs fs;
    if (stat(dir, &ws) < 0)
        return NULL; /* the caller says what is wrong with it */
    if (nsbox_is_host_root(&ws))
        return "the host's root directory";
    /* the kernel's and the devices' file systems: a bind of /proc showed the sandbox the host's
     * processes. By type, and by being on the host's own /proc, /sys or /dev. */
    static const unsigned long pseudo[] = {
        PROC_SUPER_MAGIC,    SYSFS_MAGIC,        CGROUP_SUPER_MAGIC,
        CGROUP2_SUPER_MAGIC, DEVPTS_SUPER_MAGIC, DEBUGFS_MAGIC,
        TRACEFS_MAGIC,       SECURITYFS_MAGIC,   BPF_FS_MAGIC};
    if (statfs(dir, &fs) == 0)
        for (size_t i = 0; i < NSBOX_ARRAY_LEN(pseudo); i++)
            if ((unsigned long)fs.f_type == pseudo[i])
                return "a kernel file system (proc, sys, cgroup, ...)";
    static const char *const hosts[] = {"/proc", "/sys", "/dev"};
    for (size_t i = 0; i < NSBOX_ARRAY_LEN(hosts); i++)
        if ((stat(hosts[i], &other) == 0 && ws.st_dev == other.st_dev) ||
            nsbox_path_within(dir, hosts[i])) /* a tmpfs in them */
            return "in the host's /proc, /sys or /dev";
    return NULL;
}
