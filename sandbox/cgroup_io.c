/* The cgroup files' seam (struct nsbox_cg_sys: the real kernel, or a test's fake tree) and the
 * small file helpers every cgroup*.c file uses. */
#include "cgroup_impl.h"
#include "cgroup_util.h"
#include "cleanup.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* ---- the seam ------------------------------------------------------------------------------ */

static int real_fs_magic(const char *path, unsigned long *magic)
{
    struct statfs st;
    if (statfs(path, &st) < 0)
        return -1;
    *magic = (unsigned long)st.f_type;
    return 0;
}

static int real_mkdir(const char *path, mode_t mode)
{
    return mkdir(path, mode);
}

static int real_rmdir(const char *path)
{
    return rmdir(path);
}

static int real_write_file(int dirfd, const char *name, const char *data, size_t len)
{
    /* No O_TRUNC/O_CREAT: cgroup files exist or the feature is absent, and ENOENT is how
     * callers learn the latter (memory.swap.max, memsw, cgroup.kill). */
    cleanup_close int fd = openat(dirfd, name, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t w;
    do
        w = write(fd, data, len);
    while (w < 0 && errno == EINTR);
    if (w < 0)
        return -1;
    if ((size_t)w != len) {
        errno = EIO;
        return -1;
    }
    return 0;
}

static int real_pidfd_open(pid_t pid)
{
    return (int)syscall(SYS_pidfd_open, pid, 0);
}

static int real_pidfd_send_signal(int pidfd, int sig)
{
    return (int)syscall(SYS_pidfd_send_signal, pidfd, sig, NULL, 0);
}

static const struct nsbox_cg_sys real_sys = {
    .root = "/sys/fs/cgroup",
    .proc_self_cgroup = "/proc/self/cgroup",
    .proc_self_mountinfo = "/proc/self/mountinfo",
    .fs_magic = real_fs_magic,
    .mkdir = real_mkdir,
    .rmdir = real_rmdir,
    .write_file = real_write_file,
    .pidfd_open = real_pidfd_open,
    .pidfd_send_signal = real_pidfd_send_signal,
    .kill = kill,
    .geteuid = geteuid,
};


const struct nsbox_cg_sys *nsbox_cgio_sys = &real_sys;

void nsbox_cgio_set_sys(const struct nsbox_cg_sys *s)
{
    nsbox_cgio_sys = s ? s : &real_sys;
}

/* ---- small file helpers -------------------------------------------------------------------- */

ssize_t nsbox_cgio_read_small(int dirfd, const char *dir, const char *name, char *buf, size_t n)
{
    char path[PATH_MAX];
    if (dirfd < 0) {
        if (dir) {
            if (nsbox_cg_join(path, sizeof path, dir, NULL, name) < 0)
                return -1;
            name = path;
        }
        dirfd = AT_FDCWD;
    }
    cleanup_close int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    size_t used = 0;
    while (used + 1 < n) {
        ssize_t r = read(fd, buf + used, n - 1 - used);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -1;
        if (r == 0)
            break;
        used += (size_t)r;
    }
    buf[used] = '\0';
    return (ssize_t)used;
}

/* Whole file of unknown size (cgroup.procs, mountinfo), malloc'd; NULL/errno. */
char *nsbox_cgio_read_alloc(const char *path)
{
    return nsbox_read_text_at(AT_FDCWD, path, 16u << 20);
}

int nsbox_cgio_write_at(int dirfd, const char *dir, const char *name, const char *val)
{
    char path[PATH_MAX];
    if (dirfd < 0) {
        if (nsbox_cg_join(path, sizeof path, dir, NULL, name) < 0)
            return -1;
        return nsbox_cgio_sys->write_file(AT_FDCWD, path, val, strlen(val));
    }
    return nsbox_cgio_sys->write_file(dirfd, name, val, strlen(val));
}
void nsbox_cgio_backoff(unsigned *us)
{
    struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)*us * 1000};
    nanosleep(&ts, NULL);
    *us = *us >= 5000 ? 10000 : *us * 2;
}

