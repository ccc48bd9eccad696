/* setup_floor's one iteration, the looping process's side: the sandbox's cgroups and ext4
 * workspace, the clone, the id maps, and the rm. */
#define _GNU_SOURCE
#include "setup_floor.h"


/* name is one item of the comma-separated list */
static bool has_ctl(const char *list, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = list; (p = strstr(p, name)); p += n)
        if ((p == list || p[-1] == ',') && (p[n] == ',' || p[n] == '\0'))
            return true;
    return false;
}

static int cg_create(struct launch *L, const char *name)
{
    char mem[32], period[16], quota[16], pids[16];
    snprintf(mem, sizeof mem, "%llu", (unsigned long long)MEM_BYTES);
    snprintf(period, sizeof period, "%u", CPU_PERIOD_US);
    snprintf(quota, sizeof quota, "%u", CPUS * CPU_PERIOD_US);
    snprintf(pids, sizeof pids, "%u", PIDS);
    for (size_t i = 0; i < n_cg; i++) {
        snprintf(L->cg[i], sizeof L->cg[i], "%s/%s", cg_parent[i], name);
        if (mkdir(L->cg[i], 0755) < 0) {
            fprintf(stderr, "mkdir %s: %s\n", L->cg[i], strerror(errno));
            L->cg[i][0] = '\0';
            return -1;
        }
        const char *c = cg_ctl[i];
        if (has_ctl(c, "memory") &&
            (floor_write_at(L->cg[i], "memory.limit_in_bytes", mem) < 0 ||
             (floor_write_at(L->cg[i], "memory.memsw.limit_in_bytes", mem) < 0 && errno != ENOENT)))
            return fprintf(stderr, "%s: memory limit: %s\n", L->cg[i], strerror(errno)), -1;
        /* period first: the quota is checked against it */
        if (has_ctl(c, "cpu") && (floor_write_at(L->cg[i], "cpu.cfs_period_us", period) < 0 ||
                                  floor_write_at(L->cg[i], "cpu.cfs_quota_us", quota) < 0))
            return fprintf(stderr, "%s: cpu limit: %s\n", L->cg[i], strerror(errno)), -1;
        if (has_ctl(c, "pids") && floor_write_at(L->cg[i], "pids.max", pids) < 0)
            return fprintf(stderr, "%s: pids limit: %s\n", L->cg[i], strerror(errno)), -1;
    }
    return 0;
}

/* rmdir each, retrying while a dying task still holds one (as nsbox's destroy does). */
static int cg_destroy(struct launch *L)
{
    int ret = 0;
    for (size_t i = 0; i < n_cg; i++) {
        if (!L->cg[i][0])
            continue;
        unsigned us = 50;
        int tries = 0;
        while (rmdir(L->cg[i]) < 0 && errno != ENOENT) {
            if (errno != EBUSY || ++tries > 200) {
                fprintf(stderr, "rmdir %s: %s\n", L->cg[i], strerror(errno));
                ret = -1;
                break;
            }
            struct timespec ts = {0, (long)us * 1000};
            nanosleep(&ts, NULL);
            us = us >= 5000 ? 10000 : us * 2;
        }
        L->cg[i][0] = '\0';
    }
    return ret;
}

static int fs_flag(int fs, const char *key)
{
    return (int)syscall(SYS_fsconfig, fs, FSCONFIG_SET_FLAG, key, NULL, 0);
}

/* A loop device for backing_fd, autoclear: it detaches itself when its last user goes. */
int floor_sandbox_loop_attach(int backing_fd, char *dev, size_t n)
{
    int ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
    if (ctl < 0)
        return -1;
    for (int tries = 0; tries < 64; tries++) {
        int nr = ioctl(ctl, LOOP_CTL_GET_FREE);
        if (nr < 0)
            break;
        snprintf(dev, n, "/dev/loop%d", nr);
        int fd = open(dev, O_RDWR | O_CLOEXEC);
        if (fd < 0)
            break;
        struct loop_config c;
        memset(&c, 0, sizeof c);
        c.fd = (uint32_t)backing_fd;
        c.info.lo_flags = LO_FLAGS_AUTOCLEAR;
        snprintf((char *)c.info.lo_file_name, sizeof c.info.lo_file_name, "setup-floor");
        if (ioctl(fd, LOOP_CONFIGURE, &c) == 0) {
            close(ctl);
            return fd;
        }
        int err = errno;
        close(fd);
        if (err != EBUSY) {
            errno = err;
            break;
        }
    }
    int err = errno;
    close(ctl);
    errno = err;
    return -1;
}

/* A detached mount of the ext4 filesystem on dev (nsbox's options). */
int floor_sandbox_mount_dev(const char *dev)
{
    int fs = (int)syscall(SYS_fsopen, "ext4", FSOPEN_CLOEXEC);
    if (fs < 0)
        return -1;
    int mfd = -1;
    if (syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, "source", dev, 0) == 0 &&
        fs_flag(fs, "noinit_itable") == 0 && fs_flag(fs, "nobarrier") == 0 &&
        syscall(SYS_fsconfig, fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) == 0)
        mfd = (int)syscall(SYS_fsmount, fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
    int err = errno;
    close(fs);
    errno = err;
    return mfd;
}

/* The data extents of in onto out (a fresh loop device reads as zeros elsewhere): workspace.c's
 * copy_sparse restated, as the other pieces here restate theirs, so that setup_floor compiles
 * with cc alone, without nsbox's libraries, wherever the bench runs. */
static int copy_sparse(int in, int out)
{
    static char buf[65536];
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
            if (r <= 0 || pwrite(out, buf, (size_t)r, off) != r)
                return -1;
            off += r;
        }
        pos = hole;
    }
}

/* The per-sandbox part of nsbox's ext4_make + give_root: a detached mount, or -1. */
static int ws_ext4_make(const char *backing, int tpl, uid_t owner)
{
    int fd = open(backing, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return perror(backing), -1;
    int mfd = -1, lfd = -1;
    char dev[32] = "?";
    if (ftruncate(fd, (off_t)DISK_BYTES) < 0) {
        perror("ftruncate");
        goto out;
    }
    lfd = floor_sandbox_loop_attach(fd, dev, sizeof dev);
    if (lfd < 0) {
        perror("loop device");
        goto out;
    }
    if (copy_sparse(tpl, lfd) < 0 ||
        sync_file_range(lfd, 0, 0, SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE |
                                       SYNC_FILE_RANGE_WAIT_AFTER) < 0) {
        perror("copy the template");
        goto out;
    }
    mfd = floor_sandbox_mount_dev(dev);
    if (mfd < 0) {
        fprintf(stderr, "mount ext4 on %s: %s\n", dev, strerror(errno));
        goto out;
    }
    if (fchownat(mfd, "", owner, owner, AT_EMPTY_PATH) < 0) {
        perror("chown the workspace");
        close(mfd);
        mfd = -1;
    }
out:
    if (lfd >= 0)
        close(lfd); /* the mount holds the device now */
    close(fd);
    return mfd;
}

static int write_proc(pid_t pid, const char *name, const char *val)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/%s", (int)pid, name);
    return floor_write_file(path, val);
}

/* One create + rm. 0, or -1 with a message on stderr (everything made is undone). */
int floor_sandbox_one(int worker, long iter, int tpl)
{
    struct launch L;
    memset(&L, 0, sizeof L);
    L.worker = worker;
    L.ws_fd = -1;
    snprintf(L.staging, sizeof L.staging, "%s/stage%d", tmpdir, worker);
    snprintf(L.hosts, sizeof L.hosts, "%s/hosts%d", tmpdir, worker);
    char name[64], backing[160] = "";
    snprintf(name, sizeof name, "sb-%d-%ld", worker, iter);
    uid_t owner = UID_BASE + UID_SLOTS - 1 - (uid_t)worker; /* a slot nsbox reaches last */
    int ret = -1, pidfd = -1;
    pid_t pid = -1;
    int sp[2] = {-1, -1}, rp[2] = {-1, -1};

    if (opt.cgroup && cg_create(&L, name) < 0)
        goto out;
    if (opt.rootfs && opt.ws == WS_EXT4) {
        snprintf(backing, sizeof backing, "%s/%s.ext4", tmpdir, name);
        L.ws_fd = ws_ext4_make(backing, tpl, owner);
        if (L.ws_fd < 0)
            goto out;
    }
    if (pipe2(sp, O_CLOEXEC) < 0 || pipe2(rp, O_CLOEXEC) < 0) {
        perror("pipe");
        goto out;
    }
    L.sync_rd = sp[0], L.sync_wr = sp[1], L.report_rd = rp[0], L.report_wr = rp[1];
    struct clone_args a;
    memset(&a, 0, sizeof a);
    a.flags = CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC |
              CLONE_NEWNET | CLONE_PIDFD;
    a.pidfd = (uintptr_t)&pidfd;
    a.exit_signal = SIGCHLD;
    pid = (pid_t)syscall(SYS_clone3, &a, sizeof a);
    if (pid < 0) {
        perror("clone3");
        goto out;
    }
    if (pid == 0)
        floor_child_main(&L);
    if (L.ws_fd >= 0)
        close(L.ws_fd); /* the child has its copy */
    L.ws_fd = -1;
    close(sp[0]), sp[0] = -1;
    close(rp[1]), rp[1] = -1;
    char map[64];
    snprintf(map, sizeof map, "%u %u 1\n", SANDBOX_UID, owner);
    if (write_proc(pid, "setgroups", "deny") < 0 || write_proc(pid, "uid_map", map) < 0 ||
        write_proc(pid, "gid_map", map) < 0) {
        perror("id maps");
        goto out;
    }
    if (write(sp[1], "g", 1) != 1 || write(sp[1], "n", 1) != 1) {
        perror("sync");
        goto out;
    }
    char msg[512];
    ssize_t n;
    do
        n = read(rp[0], msg, sizeof msg - 1);
    while (n < 0 && errno == EINTR);
    if (n != 0) {
        fprintf(stderr, "sandbox set-up failed: %.*s\n", n > 0 ? (int)n : 0, msg);
        goto out;
    }
    if (opt.show) {
        snprintf(msg, sizeof msg, "/proc/%d/cgroup", (int)pid);
        FILE *f = fopen(msg, "r");
        fprintf(stderr, "--- host's view of the sandbox's cgroups:\n");
        while (f && fgets(msg, sizeof msg, f))
            fputs(msg, stderr);
        if (f)
            fclose(f);
    }
    ret = 0;
out:
    /* rm: kill init (the pid namespace goes with it), reap, remove the cgroups and the file */
    if (pid > 0) {
        kill(pid, SIGKILL);
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
            ;
    }
    if (opt.cgroup && cg_destroy(&L) < 0)
        ret = -1;
    if (backing[0] && unlink(backing) < 0 && errno != ENOENT)
        ret = -1;
    if (L.ws_fd >= 0)
        close(L.ws_fd);
    for (int i = 0; i < 2; i++) {
        if (sp[i] >= 0)
            close(sp[i]);
        if (rp[i] >= 0)
            close(rp[i]);
    }
    if (pidfd >= 0)
        close(pidfd);
    return ret;
}

