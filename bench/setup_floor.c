/* The kernel's floor for a whole sandbox on this machine: clone_floor.c's clone into six
 * namespaces, plus the kernel work that an nsbox sandbox's create + rm needs, done directly with
 * syscalls in the fewest processes (the looping process and the sandbox's init), with no exec,
 * no supervisor, no state directory, no JSON: what no implementation of nsbox's contract on this
 * kernel can beat. Two processes loop for SECONDS; prints the total creates+deletes per second.
 *
 *     cc -O2 -o setup_floor bench/setup_floor*.c && sudo ./setup_floor [SECONDS] [OPTIONS]
 *
 * One iteration, mirroring sandbox/sandbox.c, contain.c, rootfs/mounts.c, cgroup*.c and
 * workspace.c (a persistent sandbox, instance type medium, network none, the host image):
 *   parent  [cgroup] mkdir one cgroup per v1 hierarchy (memory, cpu, pids, cpuacct, freezer)
 *                    and write memory, memsw, cfs period/quota and pids limits
 *           [ext4]   sparse 10 GiB backing file, loop device (LOOP_CONFIGURE, autoclear), the
 *                    cached empty filesystem copied onto it, fsmount (detached), chown its root
 *           clone3 into user, pid, mount, net, uts, ipc namespaces (+ pidfd); id maps
 *           (setgroups deny, uid_map, gid_map), sync bytes 'g' and 'n'
 *   child   pdeath signal, [cgroup] join by writing "0" to each hierarchy's tasks file
 *           [rootfs] / private, detached clones of the bind sources (/usr recursive, /etc of
 *                    the image, a hosts file, 6 device nodes) with their attributes, tmpfs root,
 *                    become uid 1000, skeleton (symlinks, mkdirs), the binds, /workspace, /tmp,
 *                    /run, /dev (tmpfs, nodes, links, devpts, shm, read-only), /proc with
 *                    [masks] 7 masked files, 2 masked dirs, 5 read-only subtrees; pivot_root,
 *                    detach the old root, / read-only
 *           hostname; [net] lo up (ioctl); [cgroup] unshare(CLONE_NEWCGROUP)
 *           [harden] rlimits, not dumpable, securebits, drop bounding set and capabilities,
 *                    no_new_privs, a seccomp filter of the size of nsbox's default (~300 insns)
 *           then ready (closes its report pipe) and waits
 *   parent  sees ready; rm: SIGKILL, waitpid, [cgroup] rmdir the cgroups, [ext4] unlink the
 *           backing file (the mount and the loop device go with the namespace)
 *
 * Options (each removes one piece, so that rows with and without it can be compared):
 *   --no-cgroup  --no-rootfs  --no-masks  --no-net  --no-harden  --no-seccomp (harden without
 *   the filter)
 *   --ws=ext4|tmpfs|none   the workspace (default ext4: what nsbox makes as root)
 *   -v       also print, to stderr, the iterations, the machine's busy share and the CPU ms per
 *            iteration (whole machine, from /proc/stat, as bench/profile_create.py computes it)
 *   --show   run one sandbox, have it print its mounts and ids to stderr, and stop
 *
 * Needs root (loop devices, cgroups). Everything it makes lives in a mktemp directory under
 * /var/tmp, in bench-owned cgroups below this process's own ones (where nsbox puts its own),
 * and in the sandboxes' private mount namespaces; all of it is removed at exit (SIGINT/SIGTERM
 * included). The rate is the sum over the two processes of iterations / their own elapsed
 * time. */
#define _GNU_SOURCE
#include "setup_floor.h"

struct floor_opt opt = {3.0, true, true, true, true, true, true, false, false, WS_EXT4};

char tmpdir[64];
char image_root[64] = "/";
char image_etc[256];
const char *image_links[8][2];
size_t n_image_links;
bool image_has_usr;
static char template_path[128];

static const char *const v1_names[] = {"memory", "cpu", "pids", "cpuacct", "freezer"};
char cg_parent[5][512];
char cg_ctl[5][64];
size_t n_cg;

static volatile sig_atomic_t stop;

/* ---- small helpers ----------------------------------------------------------------------- */

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int floor_write_file(const char *path, const char *val)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    size_t len = strlen(val);
    ssize_t w = write(fd, val, len);
    int err = errno;
    close(fd);
    errno = err;
    return w == (ssize_t)len ? 0 : -1;
}

int floor_write_at(const char *dir, const char *name, const char *val)
{
    char path[768];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return floor_write_file(path, val);
}

static void on_signal(int sig)
{
    (void)sig;
    stop = 1;
}

/* ---- set-up and clean-up of the bench's own things ------------------------------------------ */

/* The host image as nsbox uses it: /usr, the merged-/usr links, a generated /etc. Without nsbox's
 * image store, a small /etc of our own in the temporary directory. */
static int find_image(void)
{
    static const char *const host_entries[] = {"usr", "bin", "sbin", "lib", "lib32", "lib64",
                                               "libx32"};
    static char links[8][256];
    for (size_t i = 0; i < N_OF(host_entries); i++) {
        char p[64];
        struct stat st;
        snprintf(p, sizeof p, "/%s", host_entries[i]);
        if (lstat(p, &st) < 0)
            continue;
        if (S_ISDIR(st.st_mode) && !strcmp(host_entries[i], "usr"))
            image_has_usr = true;
        else if (S_ISLNK(st.st_mode)) {
            ssize_t n = readlink(p, links[n_image_links], sizeof links[0] - 1);
            if (n < 0)
                continue;
            links[n_image_links][n] = '\0';
            image_links[n_image_links][0] = host_entries[i];
            image_links[n_image_links][1] = links[n_image_links];
            n_image_links++;
        }
    }
    struct stat st;
    if (stat("/var/lib/nsbox/images/host/etc", &st) == 0 && S_ISDIR(st.st_mode)) {
        snprintf(image_etc, sizeof image_etc, "/var/lib/nsbox/images/host/etc");
        return 0;
    }
    snprintf(image_etc, sizeof image_etc, "%s/etc", tmpdir);
    char p[300];
    snprintf(p, sizeof p, "%s/passwd", image_etc);
    if (mkdir(image_etc, 0755) < 0)
        return perror(image_etc), -1;
    FILE *f = fopen(p, "w");
    if (!f)
        return perror(p), -1;
    fputs("root:x:0:0::/root:/bin/sh\nappuser:x:1000:1000::/workspace:/bin/sh\n", f);
    fclose(f);
    snprintf(p, sizeof p, "%s/hosts", image_etc);
    f = fopen(p, "w");
    if (!f)
        return perror(p), -1;
    fputs("127.0.0.1 localhost\n", f);
    fclose(f);
    return 0;
}

/* The cached empty filesystem nsbox copies into every workspace (workspace.c make_template):
 * mkfs.ext4 with nsbox's options, then lost+found removed. */
static int make_template(void)
{
    snprintf(template_path, sizeof template_path, "%s/template.ext4", tmpdir);
    int fd = open(template_path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0 || ftruncate(fd, (off_t)DISK_BYTES) < 0)
        return perror(template_path), -1;
    close(fd);
    char inodes[32];
    snprintf(inodes, sizeof inodes, "%llu", (unsigned long long)(DISK_BYTES / BYTES_PER_INODE));
    pid_t p = fork();
    if (p < 0)
        return perror("fork"), -1;
    if (p == 0) {
        const char *mkfs = access("/usr/sbin/mkfs.ext4", X_OK) == 0 ? "/usr/sbin/mkfs.ext4"
                                                                    : "/sbin/mkfs.ext4";
        execl(mkfs, mkfs, "-q", "-F", "-t", "ext4", "-m", "0", "-N", inodes, "-G", "1024", "-O",
              "^has_journal,^resize_inode,sparse_super2", "-E",
              "lazy_itable_init=1,nodiscard,num_backup_sb=0", "-e", "remount-ro", "-L",
              "workspace", template_path, (char *)NULL);
        _exit(127);
    }
    int st;
    if (waitpid(p, &st, 0) != p || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
        return fprintf(stderr, "mkfs.ext4 failed\n"), -1;
    fd = open(template_path, O_RDWR | O_CLOEXEC);
    if (fd < 0)
        return perror(template_path), -1;
    char dev[32];
    int lfd = floor_sandbox_loop_attach(fd, dev, sizeof dev);
    int mfd = lfd < 0 ? -1 : floor_sandbox_mount_dev(dev);
    int r = mfd >= 0 && unlinkat(mfd, "lost+found", AT_REMOVEDIR) == 0 ? 0 : -1;
    if (r < 0)
        perror("template: loop, mount or lost+found");
    if (mfd >= 0)
        close(mfd);
    if (lfd >= 0)
        close(lfd);
    fsync(fd);
    close(fd);
    return r;
}

/* The bench's own cgroup in every v1 hierarchy nsbox uses, below this process's cgroup there
 * (where nsbox puts its sandboxes' cgroups). */
static int cg_setup(void)
{
    char self[4096];
    int fd = open("/proc/self/cgroup", O_RDONLY | O_CLOEXEC);
    ssize_t n = fd < 0 ? -1 : read(fd, self, sizeof self - 1);
    if (fd >= 0)
        close(fd);
    if (n <= 0)
        return perror("/proc/self/cgroup"), -1;
    self[n] = '\0';
    unsigned hier_of[5] = {0};
    for (size_t c = 0; c < N_OF(v1_names); c++) {
        char mount_at[128];
        struct statfs sf;
        snprintf(mount_at, sizeof mount_at, "/sys/fs/cgroup/%s", v1_names[c]);
        if (statfs(mount_at, &sf) < 0 || sf.f_type != CGROUP_SUPER_MAGIC) {
            fprintf(stderr, "no cgroup v1 %s hierarchy at %s\n", v1_names[c], mount_at);
            return -1;
        }
        /* "ID:ctl,ctl:/path" lines */
        unsigned id = 0;
        char path[512] = "", ctls[64] = "";
        for (char *line = self; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
            unsigned hid;
            char cl[64], pa[512];
            if (sscanf(line, "%u:%63[^:]:%511[^\n]", &hid, cl, pa) != 3)
                continue;
            char list[66];
            snprintf(list, sizeof list, ",%s,", cl);
            char want[32];
            snprintf(want, sizeof want, ",%s,", v1_names[c]);
            if (strstr(list, want)) {
                id = hid;
                snprintf(path, sizeof path, "%s", pa);
                snprintf(ctls, sizeof ctls, "%s", cl);
                break;
            }
        }
        if (!path[0]) {
            fprintf(stderr, "this process has no %s cgroup\n", v1_names[c]);
            return -1;
        }
        bool seen = false;
        for (size_t i = 0; i < n_cg; i++)
            seen |= hier_of[i] == id;
        if (seen)
            continue;
        hier_of[n_cg] = id;
        snprintf(cg_ctl[n_cg], sizeof cg_ctl[0], "%s", ctls);
        snprintf(cg_parent[n_cg], sizeof cg_parent[0], "%s%s/nsbox-floor.%d", mount_at,
                 strcmp(path, "/") ? path : "", (int)getpid());
        if (mkdir(cg_parent[n_cg], 0755) < 0)
            return perror(cg_parent[n_cg]), -1;
        n_cg++;
    }
    return 0;
}

static void cg_teardown(void)
{
    for (size_t i = 0; i < n_cg; i++) {
        /* a sandbox's cgroups left by a worker that was stopped mid-iteration first */
        for (int tries = 0; rmdir(cg_parent[i]) < 0 && errno == EBUSY && tries < 100; tries++) {
            DIR *d = opendir(cg_parent[i]);
            struct dirent *de;
            while (d && (de = readdir(d)))
                if (de->d_type == DT_DIR && de->d_name[0] != '.') {
                    char p[2900];
                    snprintf(p, sizeof p, "%s/%s", cg_parent[i], de->d_name);
                    rmdir(p);
                }
            if (d)
                closedir(d);
            usleep(10000);
        }
        if (access(cg_parent[i], F_OK) == 0)
            fprintf(stderr, "warning: could not remove %s\n", cg_parent[i]);
    }
    n_cg = 0;
}

static void rm_tmpdir(void)
{
    if (!tmpdir[0])
        return;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf -- '%s'", tmpdir);
    if (system(cmd) != 0)
        fprintf(stderr, "warning: could not remove %s\n", tmpdir);
    tmpdir[0] = '\0';
}

static void usage(void)
{
    fprintf(stderr, "usage: setup_floor [SECONDS] [--no-cgroup] [--no-rootfs] [--no-masks] "
                    "[--no-net] [--no-harden] [--no-seccomp] [--ws=ext4|tmpfs|none] [-v] "
                    "[--show]\n");
    exit(2);
}

static int busy_ticks(unsigned long long *busy, unsigned long long *total)
{
    FILE *f = fopen("/proc/stat", "r");
    if (!f)
        return -1;
    unsigned long long v[10] = {0};
    int n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1],
                   &v[2], &v[3], &v[4], &v[5], &v[6], &v[7], &v[8], &v[9]);
    fclose(f);
    if (n < 4)
        return -1;
    *total = 0;
    for (int i = 0; i < n; i++)
        *total += v[i];
    *busy = *total - v[3] - v[4];
    return 0;
}

static void parse_args(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--no-cgroup"))
            opt.cgroup = false;
        else if (!strcmp(a, "--no-rootfs"))
            opt.rootfs = false;
        else if (!strcmp(a, "--no-masks"))
            opt.masks = false;
        else if (!strcmp(a, "--no-net"))
            opt.net = false;
        else if (!strcmp(a, "--no-harden"))
            opt.harden = false;
        else if (!strcmp(a, "--no-seccomp"))
            opt.seccomp = false;
        else if (!strcmp(a, "--ws=ext4"))
            opt.ws = WS_EXT4;
        else if (!strcmp(a, "--ws=tmpfs"))
            opt.ws = WS_TMPFS;
        else if (!strcmp(a, "--ws=none"))
            opt.ws = WS_NONE;
        else if (!strcmp(a, "-v"))
            opt.verbose = true;
        else if (!strcmp(a, "--show"))
            opt.show = true;
        else if (i == 1 && a[0] != '-')
            opt.seconds = atof(a);
        else
            usage();
    }
    if (opt.seconds <= 0)
        opt.seconds = 3.0;
}

/* The staging root and the hosts file of each worker, in tmpdir. */
static int make_worker_dirs(void)
{
    for (int w = 0; w < 2; w++) {
        char p[128];
        snprintf(p, sizeof p, "%s/stage%d", tmpdir, w);
        if (mkdir(p, 0755) < 0)
            return -1;
        snprintf(p, sizeof p, "%s/hosts%d", tmpdir, w);
        FILE *f = fopen(p, "w");
        if (!f)
            return -1;
        fprintf(f, "127.0.0.1 localhost\n::1 localhost\n127.0.1.1 floor-%d\n", w);
        fclose(f);
    }
    return 0;
}

/* A worker: sandboxes until the time is up; its rate and count go to wr. */
__attribute__((noreturn)) static void worker_main(int c, int tpl, int wr)
{
    long n = 0;
    double start = now_s(), end = start + opt.seconds;
    int ok = 1;
    while (!stop && now_s() < end) {
        if (floor_sandbox_one(c, n, tpl) < 0) {
            ok = 0;
            break;
        }
        n++;
    }
    double rate[2] = {ok ? (double)n / (now_s() - start) : -1.0, (double)n};
    _exit(write(wr, rate, sizeof rate) == (ssize_t)sizeof rate && ok ? 0 : 1);
}

/* Two workers at once; prints the sum of their rates. 0, or 1 when one failed. workers[] holds
 * the ones still to be reaped when it returns early. */
static int run_workers(int tpl, pid_t workers[2])
{
    int counts[2];
    if (pipe(counts) < 0)
        return 1;
    unsigned long long b0, t0, b1, t1;
    busy_ticks(&b0, &t0);
    double w0 = now_s();
    for (int c = 0; c < 2; c++) {
        workers[c] = fork();
        if (workers[c] < 0) {
            perror("fork");
            break;
        }
        if (workers[c] > 0)
            continue;
        close(counts[0]);
        worker_main(c, tpl, counts[1]);
    }
    close(counts[1]);
    double total = 0, iters = 0, r[2];
    int got = 0, failed = 0, status;
    for (int c = 0; c < 2; c++)
        if (read(counts[0], r, sizeof r) == (ssize_t)sizeof r && r[0] >= 0) {
            total += r[0];
            iters += r[1];
            got++;
        }
    for (int c = 0; c < 2; c++)
        if (workers[c] > 0) {
            while (waitpid(workers[c], &status, 0) < 0 && errno == EINTR)
                ;
            failed |= !WIFEXITED(status) || WEXITSTATUS(status) != 0;
            workers[c] = -1;
        }
    double wall = now_s() - w0;
    busy_ticks(&b1, &t1);
    if (failed || got != 2 || stop)
        return 1;
    printf("%.0f\n", total);
    if (opt.verbose) {
        double busy = t1 > t0 ? (double)(b1 - b0) / (double)(t1 - t0) : 0;
        long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
        fprintf(stderr, "%.0f iterations in %.2f s, machine busy %.0f%%, %.2f ms CPU per "
                        "iteration\n",
                iters, wall, busy * 100, busy * (double)ncpu * wall / iters * 1000);
    }
    return 0;
}

int main(int argc, char **argv)
{
    parse_args(argc, argv);
    if (geteuid() != 0) {
        fprintf(stderr, "setup_floor: needs root (loop devices, cgroups)\n");
        return 1;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);

    snprintf(tmpdir, sizeof tmpdir, "/var/tmp/setup_floor.XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        tmpdir[0] = '\0';
        return 1;
    }
    int rc = 1, tpl = -1;
    pid_t workers[2] = {-1, -1};
    if (find_image() < 0)
        goto out;
    if (make_worker_dirs() < 0)
        goto out;
    if (opt.rootfs && opt.ws == WS_EXT4) {
        if (make_template() < 0)
            goto out;
        tpl = open(template_path, O_RDONLY | O_CLOEXEC);
        if (tpl < 0)
            goto out;
    }
    if (opt.cgroup && cg_setup() < 0)
        goto out;

    if (opt.show) {
        rc = floor_sandbox_one(0, 0, tpl) < 0 ? 1 : 0;
        goto out;
    }
    rc = run_workers(tpl, workers);
out:
    for (int c = 0; c < 2; c++)
        if (workers[c] > 0) {
            kill(workers[c], SIGTERM);
            waitpid(workers[c], NULL, 0);
        }
    if (tpl >= 0)
        close(tpl);
    cg_teardown();
    rm_tmpdir();
    return rc;
}
