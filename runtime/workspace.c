/* Fresh ext4 workspaces (see workspace.h, policy/wsplan.h, docs/workspace.md).
 *
 * Per sandbox: copy a cached empty filesystem of the right size (sparse: a few hundred KiB even
 * for 20 GiB) into the sandbox's private cache directory, attach it to a free loop device with
 * autoclear, mount it with the new mount API without attaching it anywhere, give its root to the
 * sandbox's uid. The sandbox's child moves that mount to /workspace inside its own mount
 * namespace, so the host's mount table never shows it and nothing is left to unmount: when the
 * namespace and the last descriptor go, the filesystem is unmounted and the loop device frees
 * itself. The backing file goes with the sandbox's cache directory. */
#define _GNU_SOURCE
#include "workspace.h"
#include "cleanup.h"
#include "paths.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/loop.h>
#include <linux/mount.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *const mkfs_paths[] = {"/usr/sbin/mkfs.ext4", "/sbin/mkfs.ext4",
                                         "/usr/sbin/mke2fs", "/sbin/mke2fs", NULL};

static const char *find_mkfs(void)
{
    for (const char *const *p = mkfs_paths; *p; p++)
        if (access(*p, X_OK) == 0)
            return *p;
    return NULL;
}

static bool kernel_has_ext4(void)
{
    FILE *f = fopen("/proc/filesystems", "re");
    if (!f)
        return false;
    char line[128];
    bool found = false;
    while (!found && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        const char *name = strrchr(line, '\t');
        found = strcmp(name ? name + 1 : line, "ext4") == 0;
    }
    fclose(f);
    return found;
}

bool nsbox_ws_ext4_usable(char *why, size_t n)
{
    if (geteuid() != 0) {
        snprintf(why, n, "loop devices need root");
        return false;
    }
    int fd = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
    if (fd < 0) {
        snprintf(why, n, "/dev/loop-control: %s (load the loop module: modprobe loop; in a "
                         "container, run it with --privileged)", strerror(errno));
        return false;
    }
    close(fd);
    if (!kernel_has_ext4()) {
        snprintf(why, n, "the kernel has no ext4 (modprobe ext4)");
        return false;
    }
    if (!find_mkfs()) {
        snprintf(why, n, "mkfs.ext4 not found (apt-get install e2fsprogs)");
        return false;
    }
    snprintf(why, n, "ext4 on a loop device");
    return true;
}

/* ---- loop device and mount ------------------------------------------------------------------ */

static int loop_attach(int backing_fd, const char *tag, char *dev, size_t n, struct nsbox_err *e)
{
    cleanup_close int ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
    if (ctl < 0)
        return nsbox_err_sys(e, "workspace: cannot open /dev/loop-control");
    /* Another process may take the device we were told is free: then try the next one. */
    for (int tries = 0; tries < 64; tries++) {
        int nr = ioctl(ctl, LOOP_CTL_GET_FREE);
        if (nr < 0)
            return nsbox_err_sys(e, "workspace: no free loop device");
        snprintf(dev, n, "/dev/loop%d", nr);
        int fd = open(dev, O_RDWR | O_CLOEXEC);
        if (fd < 0)
            return nsbox_err_sys(e, "workspace: cannot open %s (a /dev without the kernel's "
                                    "device nodes? mount devtmpfs on /dev)", dev);
        struct loop_config c;
        memset(&c, 0, sizeof c);
        c.fd = (uint32_t)backing_fd;
        c.info.lo_flags = LO_FLAGS_AUTOCLEAR;
        snprintf((char *)c.info.lo_file_name, sizeof c.info.lo_file_name, "%s", tag);
        if (ioctl(fd, LOOP_CONFIGURE, &c) == 0)
            return fd;
        int err = errno;
        close(fd);
        if (err != EBUSY) {
            errno = err;
            return nsbox_err_sys(e, "workspace: cannot attach a loop device (LOOP_CONFIGURE "
                                    "needs Linux 5.8)");
        }
    }
    return nsbox_err_set(e, NSBOX_E_SYS, EBUSY,
                         "workspace: every free loop device was taken by another process first");
}

static int fs_flag(int fs, const char *key)
{
    return (int)syscall(SYS_fsconfig, fs, FSCONFIG_SET_FLAG, key, NULL, 0);
}

/* Mount the filesystem on backing_fd; returns a detached mount fd. */
static int mount_backing(int backing_fd, const char *tag, struct nsbox_err *e)
{
    char dev[64];
    cleanup_close int lfd = loop_attach(backing_fd, tag, dev, sizeof dev, e);
    if (lfd < 0)
        return -1;
    cleanup_close int fs = (int)syscall(SYS_fsopen, "ext4", FSOPEN_CLOEXEC);
    if (fs < 0)
        return nsbox_err_sys(e, "workspace: fsopen(ext4)");
    /* noinit_itable: the inode tables mkfs left uninitialised stay so; otherwise a kernel
     * thread would zero them, writing ~1.5% of the limit to the host's disk for nothing.
     * nobarrier: an fsync inside need not reach the host's disk, since the filesystem does not
     * outlive the sandbox anyway. */
    if (syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, "source", dev, 0) < 0 ||
        fs_flag(fs, "noinit_itable") < 0 || fs_flag(fs, "nobarrier") < 0 ||
        syscall(SYS_fsconfig, fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
        return nsbox_err_sys(e, "workspace: cannot mount the ext4 filesystem on %s", dev);
    int mfd = (int)syscall(SYS_fsmount, fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
    if (mfd < 0)
        return nsbox_err_sys(e, "workspace: fsmount");
    return mfd;
}

/* ---- the template ----------------------------------------------------------------------------- */

/* Run mkfs; its stderr (the first few hundred bytes) goes into the error. */
static int run_mkfs(char *const argv[], struct nsbox_err *e)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0)
        return nsbox_err_sys(e, "pipe");
    pid_t pid = fork();
    if (pid < 0) {
        close(p[0]);
        close(p[1]);
        return nsbox_err_sys(e, "fork");
    }
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        int null = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (null < 0 || dup2(null, 0) < 0 || dup2(null, 1) < 0 || dup2(p[1], 2) < 0)
            _exit(126);
        char *const envp[] = {(char *)"PATH=/usr/sbin:/usr/bin:/sbin:/bin", (char *)"LC_ALL=C",
                              NULL};
        execve(argv[0], argv, envp);
        dprintf(2, "cannot execute %s: %s", argv[0], strerror(errno));
        _exit(127);
    }
    close(p[1]);
    char msg[384];
    size_t have = 0;
    for (;;) {
        ssize_t r = read(p[0], msg + have, sizeof msg - 1 - have);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        have += (size_t)r;
        if (have == sizeof msg - 1) { /* keep draining, drop the rest */
            char sink[512];
            while (read(p[0], sink, sizeof sink) > 0) {
            }
            break;
        }
    }
    close(p[0]);
    msg[have] = '\0';
    while (have && (msg[have - 1] == '\n' || msg[have - 1] == ' '))
        msg[--have] = '\0';
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            return nsbox_err_sys(e, "waitpid");
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        return nsbox_err_set(e, NSBOX_E_SYS, EIO, "workspace: %s failed (status %d): %s",
                             argv[0], WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st),
                             have ? msg : "no message");
    return 0;
}

/* A usable template: ours, not writable by others, the exact size. */
static int open_template(const char *path, uint64_t bytes)
{
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return -1;
    struct stat sb;
    if (fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode) || sb.st_uid != geteuid() ||
        (sb.st_mode & 022) || (uint64_t)sb.st_size != bytes) {
        close(fd);
        errno = EINVAL;
        return -1;
    }
    return fd;
}

static int make_template(const char *path, uint64_t bytes, struct nsbox_err *e)
{
    const char *mkfs = find_mkfs();
    if (!mkfs)
        return nsbox_err_set(e, NSBOX_E_UNSUPPORTED, ENOENT,
                             "workspace: mkfs.ext4 not found (apt-get install e2fsprogs)");
    char tmp[PATH_MAX];
    if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp-%d", path, (int)getpid()) >= sizeof tmp)
        return nsbox_err_set(e, NSBOX_E_INVALID, ENAMETOOLONG, "path too long: %s", path);
    unlink(tmp); /* a leftover of a process that had our pid */
    {
        cleanup_close int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0)
            return nsbox_err_sys(e, "workspace: cannot create %s", tmp);
        if (ftruncate(fd, (off_t)bytes) < 0) {
            nsbox_err_sys(e, "workspace: cannot size %s", tmp);
            unlink(tmp);
            return -1;
        }
    }
    struct nsbox_ws_mkfs m;
    if (nsbox_ws_mkfs_argv(mkfs, tmp, bytes, &m, e) < 0 || run_mkfs(m.argv, e) < 0) {
        unlink(tmp);
        return -1;
    }
    /* mkfs always makes lost+found; a workspace starts empty. Mount the template once to
     * remove it (the mount is gone when the descriptor is closed). */
    {
        cleanup_close int fd = open(tmp, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
        cleanup_close int mfd = fd < 0 ? -1 : mount_backing(fd, "nsbox-template", e);
        if (fd < 0)
            nsbox_err_sys(e, "workspace: cannot open %s", tmp);
        if (mfd < 0 || unlinkat(mfd, "lost+found", AT_REMOVEDIR) < 0) {
            if (mfd >= 0)
                nsbox_err_sys(e, "workspace: cannot empty the new filesystem");
            unlink(tmp);
            return -1;
        }
    }
    if (rename(tmp, path) < 0) {
        nsbox_err_sys(e, "workspace: cannot store %s", path);
        unlink(tmp);
        return -1;
    }
    return 0;
}

static int template_fd(uint64_t bytes, struct nsbox_err *e)
{
    char data[PATH_MAX - 64], dir[PATH_MAX - 64], name[64], path[PATH_MAX];
    if (nsbox_path_data_dir(data, sizeof data, e) < 0 ||
        nsbox_ws_template_name(bytes, name, sizeof name, e) < 0)
        return -1;
    snprintf(dir, sizeof dir, "%s/cache", data);
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int fd = open_template(path, bytes);
    if (fd >= 0)
        return fd;
    if (nsbox_mkdir_p(dir, 0700, e) < 0 || make_template(path, bytes, e) < 0)
        return -1;
    fd = open_template(path, bytes);
    if (fd < 0)
        return nsbox_err_sys(e, "workspace: cannot open %s", path);
    return fd;
}

/* Copy only the parts of in that hold data; out is as long as in. */
static int copy_sparse(int in, int out, uint64_t size)
{
    if (ftruncate(out, (off_t)size) < 0)
        return -1;
    off_t pos = 0;
    for (;;) {
        off_t data = lseek(in, pos, SEEK_DATA);
        if (data < 0)
            return errno == ENXIO ? 0 : -1;
        off_t hole = lseek(in, data, SEEK_HOLE);
        if (hole < 0)
            return -1;
        off_t off_in = data, off_out = data;
        while (off_in < hole) {
            ssize_t r = copy_file_range(in, &off_in, out, &off_out, (size_t)(hole - off_in), 0);
            if (r < 0 && errno == EINTR)
                continue;
            if (r <= 0)
                return r == 0 ? (errno = EIO, -1) : -1;
        }
        pos = hole;
    }
}

/* The host must hold what the sandbox may write: the backing file is sparse, so a sandbox that
 * fills its workspace takes up to disk_bytes of the host's disk. */
static int check_free_space(const char *image, uint64_t bytes, struct nsbox_err *e)
{
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", image);
    char *slash = strrchr(dir, '/');
    if (slash && slash != dir)
        *slash = '\0';
    struct statvfs sv;
    if (statvfs(dir, &sv) < 0)
        return nsbox_err_sys(e, "workspace: statvfs %s", dir);
    uint64_t avail = (uint64_t)sv.f_bavail * sv.f_frsize;
    if (avail < bytes)
        return nsbox_err_set(e, NSBOX_E_POLICY, ENOSPC,
                             "workspace: the disk limit is %" PRIu64 " MiB but only %" PRIu64
                             " MiB are free on the filesystem of %s; free some space, or use an "
                             "instance_type with a smaller disk",
                             bytes >> 20, avail >> 20, dir);
    return 0;
}

/* Everything but the owner: the part that may run in a thread. */
static int ext4_make(const char *image, uint64_t disk_bytes, const char *tag, struct nsbox_err *e)
{
    if (check_free_space(image, disk_bytes, e) < 0)
        return -1;
    cleanup_close int tpl = template_fd(disk_bytes, e);
    if (tpl < 0)
        return -1;
    cleanup_close int fd = open(image, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return nsbox_err_sys(e, "workspace: cannot create %s", image);
    if (copy_sparse(tpl, fd, disk_bytes) < 0)
        return nsbox_err_sys(e, "workspace: cannot copy the empty filesystem to %s", image);
    return mount_backing(fd, tag, e);
}

static int give_root(int mfd, uint32_t uid, uint32_t gid, struct nsbox_err *e)
{
    if (fchownat(mfd, "", uid, gid, AT_EMPTY_PATH) < 0)
        return nsbox_err_sys(e, "workspace: cannot give the workspace to uid %u", uid);
    return 0;
}

int nsbox_ws_ext4_create(const char *image, uint64_t disk_bytes, uint32_t uid, uint32_t gid,
                         const char *tag, int *mount_fd, struct nsbox_err *e)
{
    *mount_fd = -1;
    int mfd = ext4_make(image, disk_bytes, tag, e);
    if (mfd < 0)
        return -1;
    if (give_root(mfd, uid, gid, e) < 0) {
        close(mfd);
        return -1;
    }
    *mount_fd = mfd;
    return 0;
}

#define WS_STACK (256u * 1024u) /* the deepest path (template, mkfs) needs about 30 KiB */

static void *job_main(void *arg)
{
    struct nsbox_ws_job *j = arg;
    j->mount_fd = ext4_make(j->image, j->disk_bytes, j->tag, &j->err);
    j->ret = j->mount_fd < 0 ? -1 : 0;
    return NULL;
}

int nsbox_ws_ext4_start(struct nsbox_ws_job *j, const char *image, uint64_t disk_bytes,
                        const char *tag, struct nsbox_err *e)
{
    memset(j, 0, sizeof *j);
    j->image = image;
    j->tag = tag;
    j->disk_bytes = disk_bytes;
    j->mount_fd = -1;
    /* Our own stack, unmapped after the join: glibc would keep its default 8 MiB stack cached
     * with the pages the thread touched, which a supervisor would carry for its whole life. */
    j->stack = mmap(NULL, WS_STACK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK,
                    -1, 0);
    if (j->stack == MAP_FAILED) {
        j->stack = NULL;
        return nsbox_err_sys(e, "workspace: cannot map a thread stack");
    }
    pthread_attr_t attr;
    int r = pthread_attr_init(&attr);
    if (r == 0) {
        r = pthread_attr_setstack(&attr, j->stack, WS_STACK);
        if (r == 0)
            r = pthread_create(&j->thread, &attr, job_main, j);
        pthread_attr_destroy(&attr);
    }
    if (r != 0) {
        munmap(j->stack, WS_STACK);
        j->stack = NULL;
        errno = r;
        return nsbox_err_sys(e, "workspace: cannot start a thread");
    }
    j->started = true;
    return 0;
}

int nsbox_ws_ext4_finish(struct nsbox_ws_job *j, bool chown, uint32_t uid, uint32_t gid,
                         int *mount_fd, struct nsbox_err *e)
{
    *mount_fd = -1;
    if (!j->started)
        return 0;
    pthread_join(j->thread, NULL);
    j->started = false;
    munmap(j->stack, WS_STACK);
    j->stack = NULL;
    if (j->ret < 0) {
        *e = j->err;
        return -1;
    }
    if (chown && give_root(j->mount_fd, uid, gid, e) < 0) {
        nsbox_closep(&j->mount_fd);
        return -1;
    }
    *mount_fd = j->mount_fd;
    j->mount_fd = -1;
    return 0;
}

int nsbox_ws_usage(int fd, struct nsbox_ws_usage *u)
{
    struct statvfs sv;
    if (fstatvfs(fd, &sv) < 0)
        return -1;
    u->bytes_total = (uint64_t)sv.f_blocks * sv.f_frsize;
    u->bytes_used = (uint64_t)(sv.f_blocks - sv.f_bfree) * sv.f_frsize;
    u->inodes_total = sv.f_files;
    u->inodes_used = sv.f_files - sv.f_ffree;
    return 0;
}
