/* Fresh ext4 workspaces (see workspace.h, policy/wsplan.h, docs/workspace.md).
 *
 * Per sandbox: make an empty sparse backing file of the limit's size in the sandbox's private
 * cache directory, attach it to a free loop device with autoclear, write a cached empty
 * filesystem of that size (sparse: a few hundred KiB even for 20 GiB) onto the device, mount it
 * with the new mount API without attaching it anywhere, give its root to the sandbox's uid
 * (ext4_make says why the copy goes through the device). The sandbox's child moves that mount to
 * /workspace inside its own mount namespace, so the host's mount table never shows it and
 * nothing is left to unmount: when the namespace and the last descriptor go, the filesystem is
 * unmounted and the loop device frees itself. The backing file goes with the sandbox's cache
 * directory. */
#define _GNU_SOURCE
#include "workspace.h"
#include "cleanup.h"
#include "config.h"
#include "idmap.h"
#include "paths.h"
#include "proc.h"
#include "pool.h"
#include "spec.h"
#include "state.h"
#include "userns.h"
#include "util.h"

#include <dirent.h>
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
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <sched.h>
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

/* fsopen rather than /proc/filesystems: it loads the ext4 module when it is not loaded yet
 * (typical where the root filesystem is XFS or btrfs). It needs CAP_SYS_ADMIN, as the mount
 * does: without it (EPERM) nothing is said of the kernel. */
static bool kernel_has_ext4(char *why, size_t n)
{
    int fs = (int)syscall(SYS_fsopen, "ext4", FSOPEN_CLOEXEC);
    if (fs < 0) {
        if (errno == EPERM)
            snprintf(why, n, "mounting one needs CAP_SYS_ADMIN, which this root lacks (a "
                             "container started without --privileged)");
        else
            snprintf(why, n, "the kernel has no ext4 (modprobe ext4)");
        return false;
    }
    close(fs);
    return true;
}

/* /dev/loop-control answers, and the device it names exists here (a container's /dev may have
 * the one and not the other). */
static bool loop_devices_work(char *why, size_t n)
{
    int fd = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
    if (fd < 0) {
        snprintf(why, n, "/dev/loop-control: %s (load the loop module: modprobe loop; in a "
                         "container, run it with --privileged)", strerror(errno));
        return false;
    }
    int nr = ioctl(fd, LOOP_CTL_GET_FREE);
    int err = errno;
    close(fd);
    if (nr < 0) {
        snprintf(why, n, "/dev/loop-control does not answer LOOP_CTL_GET_FREE: %s",
                 strerror(err));
        return false;
    }
    char dev[64];
    snprintf(dev, sizeof dev, "/dev/loop%d", nr);
    struct stat sb;
    if (stat(dev, &sb) < 0 || !S_ISBLK(sb.st_mode)) {
        snprintf(why, n, "%s is missing although the kernel has it (a /dev without the kernel's "
                         "device nodes: mount devtmpfs on /dev)", dev);
        return false;
    }
    return true;
}

bool nsbox_workspace_ext4_usable(char *why, size_t n)
{
    if (geteuid() != 0) {
        snprintf(why, n, "loop devices need root");
        return false;
    }
    if (!loop_devices_work(why, n))
        return false;
    if (!kernel_has_ext4(why, n))
        return false;
    if (!find_mkfs()) {
        snprintf(why, n, "mkfs.ext4 not found (apt-get install e2fsprogs)");
        return false;
    }
    snprintf(why, n, "ext4 on a loop device");
    return true;
}

static void format_size(uint64_t b, char *out, size_t n)
{
    if (b >= (1ull << 30) && b % (1ull << 30) == 0)
        snprintf(out, n, "%" PRIu64 " GiB", b >> 30);
    else if (b >= (10ull << 30))
        snprintf(out, n, "%.1f GiB", (double)b / (double)(1ull << 30));
    else
        snprintf(out, n, "%" PRIu64 " MiB", b >> 20);
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

/* Mount the ext4 filesystem on the loop device dev; returns a detached mount fd. */
static int mount_dev(const char *dev, struct nsbox_err *e)
{
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

/* Run mkfs; its stderr (the first few hundred bytes) goes into the error. Forked from the
 * workspace thread while the main thread works on: nsbox_proc_run keeps the descriptors it
 * opened without O_CLOEXEC away from mkfs. */
static int run_mkfs(char *const argv[], int keep_fd, struct nsbox_err *e)
{
    char *const envp[] = {(char *)"PATH=/usr/sbin:/usr/bin:/sbin:/bin", (char *)"LC_ALL=C", NULL};
    const struct nsbox_proc p = {
        .argv = argv, .envp = envp, .stdout_fd = NSBOX_PROC_STDOUT_NULL, .keep_fd = keep_fd};
    char msg[384];
    int st;
    if (nsbox_proc_run(&p, &st, msg, sizeof msg, e) < 0)
        return nsbox_err_wrap(e, "workspace");
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        return nsbox_err_set(e, NSBOX_E_SYS, EIO, "workspace: %s failed (status %d): %s",
                             argv[0], nsbox_exit_code(st), msg[0] ? msg : "no message");
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

/* mkfs into an unnamed file in dir (O_TMPFILE: nothing is left if we are killed), remove
 * lost+found, make it durable, and link it in as name. Returns 0 also when a concurrent
 * sandbox linked its own first. */
static int make_template(int dirfd, const char *dir, const char *name, uint64_t bytes,
                         struct nsbox_err *e)
{
    const char *mkfs = find_mkfs();
    if (!mkfs)
        return nsbox_err_set(e, NSBOX_E_UNSUPPORTED, ENOENT,
                             "workspace: mkfs.ext4 not found (apt-get install e2fsprogs)");
    cleanup_close int fd = openat(dirfd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0)
        return nsbox_err_sys(e, "workspace: cannot create a file in %s", dir);
    if (ftruncate(fd, (off_t)bytes) < 0)
        return nsbox_err_sys(e, "workspace: cannot size a new filesystem in %s", dir);
    struct nsbox_ws_mkfs m;
    if (nsbox_wsplan_mkfs_argv(mkfs, "/proc/self/fd/3", bytes, &m, e) < 0 ||
        run_mkfs(m.argv, fd, e) < 0)
        return -1;
    /* mkfs always makes lost+found; a workspace starts empty. Mount it once to remove it
     * (the mount is gone when the descriptor is closed). */
    {
        char dev[64];
        cleanup_close int lfd = loop_attach(fd, "nsbox-template", dev, sizeof dev, e);
        if (lfd < 0)
            return -1;
        cleanup_close int mfd = mount_dev(dev, e);
        if (mfd < 0)
            return -1;
        if (unlinkat(mfd, "lost+found", AT_REMOVEDIR) < 0)
            return nsbox_err_sys(e, "workspace: cannot empty the new filesystem");
    }
    /* Durable before it has a name: after a crash, a template of the right size without its
     * data would break every workspace made from it. */
    if (fsync(fd) < 0)
        return nsbox_err_sys(e, "workspace: fsync of a new filesystem in %s", dir);
    char self[64];
    snprintf(self, sizeof self, "/proc/self/fd/%d", fd);
    if (linkat(AT_FDCWD, self, dirfd, name, AT_SYMLINK_FOLLOW) < 0 && errno != EEXIST)
        return nsbox_err_sys(e, "workspace: cannot store %s/%s", dir, name);
    fsync(dirfd);
    return 0;
}

/* The template for a limit, made on first use. It lives in the cache directory, beside the
 * backing files. */
static int template_fd(const char *cache_root, uint64_t bytes, bool remake, char *path,
                       size_t pathn, struct nsbox_err *e)
{
    char name[64], dir[PATH_MAX];
    if (nsbox_wsplan_template_name(bytes, name, sizeof name, e) < 0)
        return -1;
    if ((size_t)snprintf(dir, sizeof dir, "%s/%s", cache_root, NSBOX_WS_SHARED_DIR) >= sizeof dir ||
        (size_t)snprintf(path, pathn, "%s/%s", dir, name) >= pathn)
        return nsbox_err_set(e, NSBOX_E_INVALID, ENAMETOOLONG, "path too long: %s", cache_root);
    if (mkdir(dir, 0700) < 0 && errno != EEXIST)
        return nsbox_err_sys(e, "workspace: cannot create %s", dir);
    cleanup_close int dirfd = open(dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dirfd < 0)
        return nsbox_err_sys(e, "workspace: cannot open %s", dir);
    if (remake)
        unlinkat(dirfd, name, 0);
    int fd = open_template(path, bytes);
    if (fd >= 0)
        return fd;
    /* Not trustworthy (someone else's, writable by others, the wrong size): replaced, never
     * used. Missing: made (never unlink then: a concurrent sandbox may just have linked it). */
    if (errno != ENOENT)
        unlinkat(dirfd, name, 0);
    if (make_template(dirfd, dir, name, bytes, e) < 0)
        return -1;
    fd = open_template(path, bytes);
    if (fd < 0)
        return nsbox_err_sys(e, "workspace: cannot open %s", path);
    return fd;
}

/* Copy only the parts of in that hold data onto out (a fresh loop device: as long as in, zeros
 * where in has holes). */
static int copy_sparse(int in, int out)
{
    char buf[65536];
    off_t pos = 0;
    for (;;) {
        off_t data = lseek(in, pos, SEEK_DATA);
        if (data < 0)
            return errno == ENXIO ? 0 : -1;
        off_t hole = lseek(in, data, SEEK_HOLE);
        if (hole < 0)
            return -1;
        for (off_t off = data; off < hole;) {
            size_t want = (size_t)(hole - off) < sizeof buf ? (size_t)(hole - off) : sizeof buf;
            ssize_t r = pread(in, buf, want, off);
            if (r < 0 && errno == EINTR)
                continue;
            if (r <= 0)
                return r == 0 ? (errno = EIO, -1) : -1;
            if (nsbox_pwrite_all(out, buf, (size_t)r, off) < 0)
                return -1;
            off += r;
        }
        pos = hole;
    }
}

/* A live workspace's promise: its backing file's size minus what it already holds. rel: the
 * file's path in the cache directory (state.h nsbox_state_cache_entry). False when there is no
 * backing file there. */
static bool promise_at(int cache_fd, const char *rel, uint64_t *promise)
{
    struct stat sb;
    *promise = 0;
    if (fstatat(cache_fd, rel, &sb, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(sb.st_mode))
        return false;
    uint64_t held = (uint64_t)sb.st_blocks * 512;
    *promise = (uint64_t)sb.st_size > held ? (uint64_t)sb.st_size - held : 0;
    return true;
}

static uint64_t promise_of(int cache_fd, const char *id)
{
    char rel[NAME_MAX + 32];
    uint64_t p;
    nsbox_state_ws_name(id, rel);
    if (!promise_at(cache_fd, rel, &p)) { /* an older nsbox's sandbox (<id>/workspace.ext4) */
        snprintf(rel, sizeof rel, "%s/workspace.ext4", id);
        promise_at(cache_fd, rel, &p);
    }
    return p;
}

/* Whether the sandbox of the cache entry rel (below dfd) may still write to its workspace: by
 * its state directory's lock here; one with no state directory here may be another runtime
 * directory's sharing this cache directory, alive while its file's lock is held (state.h). A
 * dead one of ours promises nothing more, even while its loop device is still letting go. */
static bool sandbox_alive(const char *rt, const char *id, int dfd, const char *rel)
{
    int fd = nsbox_state_dead_lock(rt, id);
    if (fd >= 0) {
        close(fd);
        return false;
    }
    if (errno == ENOENT)
        return nsbox_state_ws_file_in_use(dfd, rel);
    return nsbox_state_maybe_alive(errno); /* unknown: counted */
}

/* The directory cache_fd, to read (its own descriptor), or NULL. */
static DIR *opendir_at(int cache_fd)
{
    int dfd = openat(cache_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = dfd < 0 ? NULL : fdopendir(dfd);
    if (!d && dfd >= 0)
        close(dfd);
    return d;
}

/* What the ext4 workspaces in the cache directory may still write: each backing file's size
 * minus what it already holds (that part is already gone from the host's free space). A
 * sandbox that died without its cleanup (gc will do it) promises nothing more: alive_only
 * leaves it out, for a lock per sandbox; without alive_only, the sum is an upper bound for one
 * fstatat each. */
static uint64_t promised(int cache_fd, bool alive_only, unsigned *count)
{
    uint64_t sum = 0;
    *count = 0;
    char rt[PATH_MAX];
    struct nsbox_err ignored; /* without it no sandbox can be told dead: all count (below) */
    if (nsbox_paths_runtime_dir(rt, sizeof rt, &ignored) < 0)
        rt[0] = '\0';
    DIR *d = opendir_at(cache_fd);
    if (!d)
        return 0;
    struct dirent *de;
    char rel[NAME_MAX + 32], id[NSBOX_ID_LEN + 1];
    while ((de = readdir(d))) {
        if (!nsbox_state_cache_entry(de->d_name, id, rel) ||
            (alive_only && rt[0] && !sandbox_alive(rt, id, dirfd(d), rel)))
            continue;
        uint64_t p;
        if (promise_at(dirfd(d), rel, &p)) {
            sum += p;
            (*count)++;
        }
    }
    closedir(d);
    return sum;
}

/* The backing files of sandboxes that died without their cleanup (SIGKILL): what they wrote
 * holds the host's space until a gc. Only the files go, so that this is safe in the thread
 * that makes a workspace (gc is not: cgroup discovery, nftables); gc removes the rest.
 * Returns how many went. */
static unsigned reclaim_dead(int cache_fd, uint64_t *held)
{
    *held = 0;
    char rt[PATH_MAX];
    struct nsbox_err ignored; /* without it no sandbox can be told dead: none is reclaimed */
    if (nsbox_paths_runtime_dir(rt, sizeof rt, &ignored) < 0)
        return 0;
    DIR *d = opendir_at(cache_fd);
    if (!d)
        return 0;
    unsigned n = 0;
    struct dirent *de;
    char rel[NAME_MAX + 32], id[NSBOX_ID_LEN + 1];
    struct stat sb;
    while ((de = readdir(d))) {
        if (!nsbox_state_cache_entry(de->d_name, id, rel))
            continue;
        /* Dead: its state directory is there and nobody holds its lock. Not one without a
         * state directory: a runtime directory that shares this cache directory may hold it
         * (XDG_RUNTIME_DIR set in one shell and not in another); gc decides about those. The
         * lock is held while the file goes, so that nothing takes the directory meanwhile. */
        cleanup_close int lk = nsbox_state_dead_lock(rt, id);
        if (lk >= 0 && fstatat(dirfd(d), rel, &sb, AT_SYMLINK_NOFOLLOW) == 0 &&
            S_ISREG(sb.st_mode) && unlinkat(dirfd(d), rel, 0) == 0) {
            *held += (uint64_t)sb.st_blocks * 512;
            n++;
        }
    }
    closedir(d);
    return n;
}

/* The warm pool's eviction, handed down by it (workspace.h). */
static nsbox_workspace_evict_fn evict_one;

void nsbox_workspace_set_evict(nsbox_workspace_evict_fn fn)
{
    evict_one = fn;
}

/* Sandboxes waiting in the pool (docs/pool.md) are spare: they give way to a sandbox that is
 * wanted now. Deletes waiting ones until their promises cover deficit, and waits (5 s at most)
 * until their backing files are gone. A sandbox a run has just claimed refuses the delete and
 * is left alone. Returns how many went. */
static unsigned evict_pooled(int cache_fd, uint64_t deficit)
{
    if (!evict_one)
        return 0;
    char rt[PATH_MAX], pool[PATH_MAX + 8];
    struct nsbox_err e;
    if (nsbox_paths_runtime_dir(rt, sizeof rt, &e) < 0)
        return 0;
    snprintf(pool, sizeof pool, "%s/pool", rt);
    DIR *d = opendir(pool);
    if (!d)
        return 0;
    char gone[NSBOX_POOL_MAX_SIZE * 4][NSBOX_ID_LEN + 1];
    unsigned n = 0;
    uint64_t freed = 0;
    struct dirent *de;
    while (freed < deficit && n < NSBOX_ARRAY_LEN(gone) && (de = readdir(d))) {
        char key[NSBOX_POOL_KEY_LEN + 1], id[NSBOX_ID_LEN + 1];
        if (!nsbox_pool_entry_parse(de->d_name, key, id))
            continue;
        uint64_t p = promise_of(cache_fd, id);
        if (!p)
            continue;
        if (evict_one(id) == 0) {
            memcpy(gone[n++], id, sizeof gone[0]);
            freed += p;
        }
    }
    closedir(d);
    for (unsigned i = 0; i < n; i++)
        for (int t = 0; t < 500 && promise_of(cache_fd, gone[i]); t++)
            usleep(10000);
    return n;
}

/* Whether a workspace of bytes is refused on the cache directory's filesystem (policy/wsplan.h
 * nsbox_wsplan_admit): 0 it is admitted, 1 it is not (sp, missing and others then say why), -1 its
 * free space cannot be read. alive_only: promised(), which only reserve counts. */
static int short_of(int cache_fd, uint64_t bytes, const struct nsbox_ws_config *cfg,
                    bool alive_only, struct nsbox_ws_space *sp, uint64_t *missing,
                    unsigned *others)
{
    struct statvfs sv;
    if (fstatvfs(cache_fd, &sv) < 0)
        return -1;
    sp->fs_bytes = (uint64_t)sv.f_blocks * sv.f_frsize;
    sp->avail = (uint64_t)sv.f_bavail * sv.f_frsize;
    sp->promised = cfg->reserve ? promised(cache_fd, alive_only, others) : 0;
    return !nsbox_wsplan_admit(cfg, sp, bytes, missing);
}

/* After reclaim_dead: a dead sandbox's file is freed once its loop device lets go, which its
 * namespace's end does a moment after its processes'. Waits (2 s at most) until bytes fit or
 * the freed space has arrived (avail is what was free before, held what the files held; 1 MiB
 * of it may stay taken by the filesystem's own bookkeeping), so that what is still missing
 * after it is measured, not guessed. */
static void wait_for_space(int cache_fd, const struct nsbox_ws_space *was, uint64_t held,
                           const struct nsbox_ws_config *cfg, uint64_t bytes)
{
    uint64_t slack = held < (1u << 20) ? held : (1u << 20);
    struct statvfs sv;
    for (int t = 0; t < 100; t++) {
        if (fstatvfs(cache_fd, &sv) < 0)
            return;
        struct nsbox_ws_space now = *was;
        now.avail = (uint64_t)sv.f_bavail * sv.f_frsize;
        if (nsbox_wsplan_admit(cfg, &now, bytes, NULL) || now.avail + slack >= was->avail + held)
            return;
        usleep(20000);
    }
}

/* Backing files are sparse: a sandbox that fills its workspace takes up to its limit of the
 * host's disk. Thin (the default), a creation only needs the host's free space above the floor
 * (nsbox_wsplan_min_free); with reserve, the free space minus what the other workspaces may still
 * take must hold the whole limit. The caller holds the space lock until its own backing file
 * exists, so two creations cannot both count the same free space. */
static int check_free_space(int cache_fd, const char *cache_root, uint64_t bytes,
                            const struct nsbox_ws_config *cfg, bool evict, struct nsbox_err *e)
{
    struct nsbox_ws_space sp = {0};
    uint64_t held = 0, missing = 0;
    unsigned others = 0;
    /* First counting dead sandboxes' promises too, without a lock per sandbox: what passes
     * so passes the exact count. Then exactly (a lock each). Then after what killed sandboxes
     * wrote is freed (the rest of their leftovers waits for a gc: create's runs at most once a
     * second, a one-shot run's never). Then after waiting pooled sandboxes, as many as cover
     * what is still missing, give way. */
#define SHORT(alive_only) short_of(cache_fd, bytes, cfg, alive_only, &sp, &missing, &others)
    int r = SHORT(false);
    if (r == 1 && cfg->reserve)
        r = SHORT(true);
    if (r == 1 && reclaim_dead(cache_fd, &held)) {
        wait_for_space(cache_fd, &sp, held, cfg, bytes);
        r = SHORT(true);
    }
    if (r == 1 && evict && cfg->reserve && evict_pooled(cache_fd, missing))
        r = SHORT(true);
#undef SHORT
    if (r < 0)
        return nsbox_err_sys(e, "workspace: statvfs %s", cache_root);
    if (r == 0)
        return 0;
    char want[32], free_[32], prom[32];
    format_size(bytes, want, sizeof want);
    format_size(sp.avail, free_, sizeof free_);
    format_size(sp.promised, prom, sizeof prom);
    if (!cfg->reserve) {
        char floor_[32], min_[32], fs_[32];
        format_size(nsbox_wsplan_min_free(cfg, sp.fs_bytes), floor_, sizeof floor_);
        format_size(cfg->min_free_bytes, min_, sizeof min_);
        format_size(sp.fs_bytes, fs_, sizeof fs_);
        return nsbox_err_set(e, NSBOX_E_POLICY, ENOSPC,
                             "workspace: only %s are free on the filesystem of %s, below the %s "
                             "nsbox keeps free there (the larger of %s and %u%% of its %s) so "
                             "that the host and the running sandboxes do not run out; free "
                             "some space there or remove sandboxes (nsbox ls, nsbox rm ID), or "
                             "lower the floor (\"workspace\": {\"min_free\": \"512MiB\", "
                             "\"min_free_percent\": 0} in the nsbox config; see "
                             "docs/workspace.md)",
                             free_, cache_root, floor_, min_, cfg->min_free_percent, fs_);
    }
    if (others == 0)
        return nsbox_err_set(e, NSBOX_E_POLICY, ENOSPC,
                             "workspace: the disk limit is %s but only %s are free on the "
                             "filesystem of %s; free some space, or use an instance_type with a "
                             "smaller disk",
                             want, free_, cache_root);
    return nsbox_err_set(e, NSBOX_E_POLICY, ENOSPC,
                         "workspace: the disk limit is %s, and of the %s free on the filesystem "
                         "of %s, %s may still be written by the workspaces of %u other "
                         "sandbox%s (persistent ones: nsbox ls, nsbox rm ID; a one-shot run "
                         "frees its share when it ends); "
                         "remove sandboxes, free some space, use an instance_type with a smaller "
                         "disk, or drop the reservation (\"workspace\": {\"reserve\": false} in "
                         "the nsbox config, the default: thin provisioning; see docs/workspace.md "
                         "for its risk)",
                         want, free_, cache_root, prom, others, others == 1 ? "" : "es");
}

/* <cache>/<id>.ext4 -> <cache> */
static int cache_root_of(const char *image, char *out, size_t n)
{
    if ((size_t)snprintf(out, n, "%s", image) >= n)
        return -1;
    char *slash = strrchr(out, '/');
    if (!slash || slash == out)
        return -1;
    *slash = '\0';
    return 0;
}

/* Everything but the owner: the part that may run in a thread. */
static int ext4_make(const char *image, uint64_t disk_bytes, const struct nsbox_ws_config *cfg,
                     bool evict, const char *tag, struct nsbox_err *e)
{
    char cache_root[PATH_MAX], tpl_path[PATH_MAX];
    if (cache_root_of(image, cache_root, sizeof cache_root) < 0)
        return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL, "workspace: bad path %s", image);
    cleanup_close int cache_fd = open(cache_root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (cache_fd < 0)
        return nsbox_err_sys(e, "workspace: cannot open %s", cache_root);
    cleanup_close int fd = -1;
    {
        /* the space lock: from the check until our backing file has its size */
        if (mkdirat(cache_fd, NSBOX_WS_SHARED_DIR, 0700) < 0 && errno != EEXIST)
            return nsbox_err_sys(e, "workspace: cannot create %s/%s", cache_root,
                                 NSBOX_WS_SHARED_DIR);
        cleanup_close int lock = openat(cache_fd, NSBOX_WS_SHARED_DIR "/space.lock",
                                        O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (lock < 0 || flock(lock, LOCK_EX) < 0)
            return nsbox_err_sys(e, "workspace: cannot lock %s/%s/space.lock", cache_root,
                                 NSBOX_WS_SHARED_DIR);
        if (check_free_space(cache_fd, cache_root, disk_bytes, cfg, evict, e) < 0)
            return -1;
        /* In use from its first moment (the loop device keeps this open file, and with it
         * the lock, for the workspace's life): a gc of another runtime directory sharing this
         * cache directory leaves it alone. A gc that took it before the lock: once more. */
        for (int t = 0;; t++) {
            fd = open(image, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
            if (fd < 0)
                return nsbox_err_sys(e, "workspace: cannot create %s", image);
            if (nsbox_state_ws_file_hold(fd) == 0)
                break;
            if (errno != ESTALE || t == 2)
                return nsbox_err_sys(e, "workspace: cannot lock %s", image);
            nsbox_closep(&fd);
        }
        if (ftruncate(fd, (off_t)disk_bytes) < 0)
            return nsbox_err_sys(e, "workspace: cannot size %s", image);
    }
    /* A template that does not mount (damaged: a crash, a full disk) is made again, once. */
    for (int attempt = 0;; attempt++) {
        cleanup_close int tpl =
            template_fd(cache_root, disk_bytes, attempt > 0, tpl_path, sizeof tpl_path, e);
        if (tpl < 0)
            return -1;
        char dev[64];
        cleanup_close int lfd = loop_attach(fd, tag, dev, sizeof dev, e);
        if (lfd < 0)
            return -1;
        /* The template is written onto the device, not into the file before attaching it:
         * recent kernels fsync the backing file in LOOP_CONFIGURE, which would send the copy
         * to the host's disk, with a cache flush, at every creation. Then through to the file
         * (its page cache: sync_file_range sends no flush, so the loop device does not fsync
         * it), before the mount: a write that fails (a full host disk: an I/O error from the
         * loop device) is an error of its own, not a mount failure taken for a damaged
         * template, and no page of the copy is left in the device's cache to reach the file
         * after a retry has emptied it. */
        if (copy_sparse(tpl, lfd) < 0 ||
            sync_file_range(lfd, 0, 0, SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE |
                                           SYNC_FILE_RANGE_WAIT_AFTER) < 0)
            return nsbox_err_sys(e, "workspace: cannot copy %s to %s", tpl_path, dev);
        int mfd = mount_dev(dev, e);
        if (mfd >= 0 || attempt > 0) {
            if (mfd < 0)
                nsbox_err_wrap(e, "made from %s, even after making it again", tpl_path);
            return mfd;
        }
        nsbox_closep(&lfd); /* the device goes (autoclear) before its file is emptied */
        if (ftruncate(fd, 0) < 0 || ftruncate(fd, (off_t)disk_bytes) < 0)
            return nsbox_err_sys(e, "workspace: cannot empty %s", image);
    }
}

static int give_root(int mfd, uint32_t uid, uint32_t gid, struct nsbox_err *e)
{
    if (fchownat(mfd, "", uid, gid, AT_EMPTY_PATH) < 0)
        return nsbox_err_sys(e, "workspace: cannot give the workspace to uid %u", uid);
    return 0;
}

/* A copy of the template keeps the times mkfs gave its root, days old in a long-lived cache:
 * a fresh workspace is dated now, as a fresh tmpfs one is. */
static int date_root(int mfd, struct nsbox_err *e)
{
    cleanup_close int d = openat(mfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (d < 0 || futimens(d, NULL) < 0)
        return nsbox_err_sys(e, "workspace: cannot date the workspace");
    return 0;
}

#define WS_STACK (256u * 1024u) /* the deepest path: copy_sparse's 64 KiB buffer, or mkfs */

static void *job_main(void *arg)
{
    struct nsbox_ws_job *j = arg;
    j->mount_fd = ext4_make(j->image, j->disk_bytes, &j->cfg, j->evict, j->tag, &j->err);
    /* dated here, off the start path: the launcher joins the job just before the clone */
    if (j->mount_fd >= 0 && date_root(j->mount_fd, &j->err) < 0)
        nsbox_closep(&j->mount_fd);
    return NULL;
}

static int ws_section(const cJSON *root, void *cfg, struct nsbox_err *e)
{
    return nsbox_wsplan_config_from_json(root, cfg, e);
}

int nsbox_workspace_load_config(struct nsbox_ws_config *cfg, struct nsbox_err *e)
{
    nsbox_wsplan_config_init(cfg);
    return nsbox_config_section(ws_section, cfg, NULL, e);
}

int nsbox_workspace_ext4_start(struct nsbox_ws_job *j, const char *image, uint64_t disk_bytes,
                               const struct nsbox_ws_config *cfg, bool evict, const char *tag,
                               struct nsbox_err *e)
{
    memset(j, 0, sizeof *j);
    j->cfg = *cfg;
    j->evict = evict;
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

int nsbox_workspace_ext4_finish(struct nsbox_ws_job *j, bool chown, uint32_t uid, uint32_t gid,
                                int *mount_fd, struct nsbox_err *e)
{
    if (!j->started)
        return 0; /* *mount_fd untouched: the workspace may be another kind's */
    *mount_fd = -1;
    pthread_join(j->thread, NULL);
    j->started = false;
    munmap(j->stack, WS_STACK);
    j->stack = NULL;
    if (j->mount_fd < 0) {
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

int nsbox_workspace_usage(int fd, struct nsbox_workspace_usage *u)
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

int nsbox_workspace_host_usage(const char *image, struct nsbox_workspace_host_usage *h)
{
    struct stat sb;
    struct statvfs sv;
    if (stat(image, &sb) < 0 || statvfs(image, &sv) < 0)
        return -1;
    h->backing_bytes = (uint64_t)sb.st_blocks * 512;
    h->fs_bytes = (uint64_t)sv.f_blocks * sv.f_frsize;
    h->fs_free_bytes = (uint64_t)sv.f_bavail * sv.f_frsize;
    return 0;
}

/* ---- --workspace DIR as root: an idmapped bind ------------------------------------------------ */

int nsbox_workspace_dir_idmapped(int dfd, const char *dir, uint32_t base, int *mount_fd,
                                 struct nsbox_err *e)
{
    *mount_fd = -1;
    struct stat sb;
    if (fstat(dfd, &sb) < 0)
        return nsbox_err_sys(e, "workspace %s", dir);
    /* Never map root into a sandbox: its files would be root's on the host, and a set-id
     * program already there could be rewritten through a shared mapping, which keeps the
     * set-id bits (seccomp stops only new ones). Such a directory is bound plainly. */
    if (sb.st_uid == 0 || sb.st_gid == 0)
        return 1;
    cleanup_close int fd = (int)syscall(SYS_open_tree, dfd, "",
                                        AT_EMPTY_PATH | OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
    if (fd < 0)
        return nsbox_err_sys(e, "workspace %s", dir);
    /* The directory's owner is appuser inside, and what appuser creates belongs to that owner
     * on disk: the host's files keep their owner. The sandbox's other ids are themselves. */
    struct nsbox_idmap um[NSBOX_IDMAP_LINES], gm[NSBOX_IDMAP_LINES];
    unsigned nu = nsbox_idmap_mount_lines(sb.st_uid, base, um);
    unsigned ng = nsbox_idmap_mount_lines(sb.st_gid, base, gm);
    if (nu != ng) /* one of them inside the range: appuser alone */
        nu = ng = 1;
    cleanup_close int nsfd = nsbox_userns_fd(um, nu, gm, ng, e);
    if (nsfd < 0)
        return nsbox_err_wrap(e, "workspace");
    struct mount_attr attr = {
        .attr_set = MOUNT_ATTR_IDMAP | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
        .userns_fd = (uint64_t)nsfd,
    };
    if (syscall(SYS_mount_setattr, fd, "", AT_EMPTY_PATH, &attr, sizeof attr) < 0) {
        if (errno == EINVAL || errno == EOPNOTSUPP || errno == ENOSYS || errno == EPERM)
            return 1; /* this filesystem (or kernel) has no idmapped mounts: plain bind */
        return nsbox_err_sys(e, "workspace %s: idmapped mount", dir);
    }
    *mount_fd = fd;
    fd = -1;
    return 0;
}
