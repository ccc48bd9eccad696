/* The set-id seal's walk alone (rootfs/setid.c), timed on an overlay of the given lower
 * directories as an engine mounts one, and on the lowest directory alone, for the merged
 * view's cost against a plain directory's in the same run. As root:
 *
 *     cc -O2 -Iinclude -Ipolicy -Ios -Irootfs bench/seal_walk.c build/libnsbox_rootfs.a \
 *        build/libnsbox_os.a build/libnsbox_policy.a -o seal_walk
 *     ./seal_walk ROUNDS WORKDIR LOWER[:LOWER...]
 *
 * Every round is a child in a mount namespace of its own (the seal's binds go with it): it
 * mounts the overlay (upper and work directories in WORKDIR, emptied first), then times
 * nsbox_setid_seal on the overlay and on the plain directory, in alternating order. Prints
 * the median of each in ms and their ratio. */
#define _GNU_SOURCE
#include "setid.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <fcntl.h>

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static double timed(const char *dir, size_t *sealed)
{
    int fd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0 || fchdir(fd) < 0)
        return -1;
    struct nsbox_err e = {0};
    double t0 = now_ms();
    int r = nsbox_setid_seal(&nsbox_sys_real, fd, sealed, &e);
    double t = now_ms() - t0;
    close(fd);
    if (r < 0)
        fprintf(stderr, "seal %s: %s\n", dir, e.msg);
    return r < 0 ? -1 : t;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    if (argc != 4)
        return fprintf(stderr, "usage: %s ROUNDS WORKDIR LOWER[:LOWER...]\n", argv[0]), 2;
    int rounds = atoi(argv[1]);
    char upper[4096], work[4096], merged[4096], opts[16384], plain[4096];
    snprintf(upper, sizeof upper, "%s/upper", argv[2]);
    snprintf(work, sizeof work, "%s/work", argv[2]);
    snprintf(merged, sizeof merged, "%s/merged", argv[2]);
    snprintf(opts, sizeof opts, "lowerdir=%s,upperdir=%s,workdir=%s", argv[3], upper, work);
    snprintf(plain, sizeof plain, "%s", argv[3]);
    char *colon = strchr(plain, ':');
    if (colon)
        *colon = 0;
    double *ov = calloc(rounds, sizeof *ov), *pl = calloc(rounds, sizeof *pl);
    size_t n_ov = 0, n_pl = 0;
    for (int i = 0; i < rounds; i++) {
        int p[2];
        if (pipe(p) < 0)
            return 1;
        pid_t pid = fork();
        if (pid == 0) {
            double t[2] = {-1, -1};
            mkdir(upper, 0755), mkdir(work, 0755), mkdir(merged, 0755);
            if (unshare(CLONE_NEWNS) == 0 &&
                mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0 &&
                mount("overlay", merged, "overlay", 0, opts) == 0) {
                if (i % 2) {
                    t[1] = timed(plain, &n_pl);
                    t[0] = timed(merged, &n_ov);
                } else {
                    t[0] = timed(merged, &n_ov);
                    t[1] = timed(plain, &n_pl);
                }
            } else
                perror("mount");
            if (i == 0)
                fprintf(stderr, "sealed: overlay %zu, plain %zu\n", n_ov, n_pl);
            if (write(p[1], t, sizeof t) != sizeof t)
                _exit(1);
            _exit(0);
        }
        close(p[1]);
        double t[2];
        ssize_t n = read(p[0], t, sizeof t);
        close(p[0]);
        waitpid(pid, NULL, 0);
        if (n != sizeof t || t[0] < 0 || t[1] < 0)
            return 1;
        ov[i] = t[0];
        pl[i] = t[1];
    }
    qsort(ov, rounds, sizeof *ov, cmp);
    qsort(pl, rounds, sizeof *pl, cmp);
    printf("seal walk, median of %d: overlay %.1f ms, plain %.1f ms, overlay/plain %.2f\n", rounds,
           ov[rounds / 2], pl[rounds / 2], ov[rounds / 2] / pl[rounds / 2]);
    return 0;
}
