/* The set-id seal alone (rootfs/setid.h) on an overlay mounted as an engine mounts one: the walk
 * of the merged root against the walk of its layer directories (rootfs/setid_layers.h) plus
 * the seal of their candidates in the merged view, in the same run. As root:
 *
 *     cc -O2 -Iinclude -Ipolicy -Ios -Irootfs bench/seal_walk.c build/libnsbox_rootfs.a \
 *        build/libnsbox_os.a build/libnsbox_policy.a -o seal_walk
 *     ./seal_walk ROUNDS WORKDIR LOWER[:LOWER...]
 *
 * Every measure is a child in a mount namespace of its own (the seal's binds go with it) that
 * mounts the overlay (upper and work directories in WORKDIR) and times one way; the two ways
 * alternate in order. Prints the medians in ms, the candidates and programs sealed, and the
 * median of the per-round ratios. */
#define _GNU_SOURCE
#include "setid.h"
#include "setid_layers.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

struct result {
    double ms, list_ms;
    size_t sealed, candidates;
};

static void close_all(const int *fds, size_t n)
{
    for (size_t i = 0; i < n; i++)
        close(fds[i]);
}

/* The layers' directories opened into fds, the upper one last: their count, or -1 (none left
 * open). */
static int open_layers(const char *lowers, const char *upper, int *fds, size_t max)
{
    size_t n = 0;
    char buf[16384];
    snprintf(buf, sizeof buf, "%s", lowers);
    for (char *s = strtok(buf, ":"); s && n < max - 1; s = strtok(NULL, ":"), n++)
        if ((fds[n] = open(s, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
            return fprintf(stderr, "%s: %s\n", s, strerror(errno)), close_all(fds, n), -1;
    if ((fds[n] = open(upper, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
        return fprintf(stderr, "%s: %s\n", upper, strerror(errno)), close_all(fds, n), -1;
    return (int)n + 1;
}

/* One way in this (child) process: by the layers' list or by the merged walk. */
static int measure(bool by_list, const char *merged, const char *lowers, const char *upper,
                   struct result *res)
{
    int fds[64];
    int n = open_layers(lowers, upper, fds, sizeof fds / sizeof fds[0]);
    if (n < 0)
        return -1;
    int root = open(merged, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (root < 0 || fchdir(root) < 0) {
        fprintf(stderr, "%s: %s\n", merged, strerror(errno));
        if (root >= 0)
            close(root);
        close_all(fds, (size_t)n);
        return -1;
    }
    struct nsbox_err e = {0};
    double t0 = now_ms();
    struct nsbox_setid_list *l = NULL;
    int r;
    if (by_list && nsbox_setid_layers_list(fds, (size_t)n, &l, &e) != 0) {
        fprintf(stderr, "no list: %s\n", e.msg);
        r = -1;
    } else {
        if (by_list) {
            res->list_ms = now_ms() - t0;
            res->candidates = l->n;
            r = nsbox_setid_seal_listed(&nsbox_sys_real, root, l, &res->sealed, &e);
        } else
            r = nsbox_setid_seal(&nsbox_sys_real, root, &res->sealed, &e);
        res->ms = now_ms() - t0;
        if (r != 0)
            fprintf(stderr, "seal: %d %s\n", r, e.msg);
    }
    nsbox_setid_list_free(l);
    close(root);
    close_all(fds, (size_t)n);
    return r == 0 ? 0 : -1;
}

static int one(bool by_list, const char *opts, const char *merged, const char *lowers,
               const char *upper, struct result *res)
{
    int p[2];
    if (pipe(p) < 0)
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        close(p[0]);
        struct result r = {-1, -1, 0, 0};
        if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
            mount("overlay", merged, "overlay", 0, opts) < 0 ||
            measure(by_list, merged, lowers, upper, &r) < 0)
            r.ms = -1;
        _exit(write(p[1], &r, sizeof r) == sizeof r ? 0 : 1);
    }
    close(p[1]);
    ssize_t got = pid < 0 ? -1 : read(p[0], res, sizeof *res);
    close(p[0]);
    if (pid > 0)
        waitpid(pid, NULL, 0);
    return got == sizeof *res && res->ms >= 0 ? 0 : -1;
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
    if (rounds < 1)
        return fprintf(stderr, "ROUNDS: a number of rounds, 1 or more\n"), 2;
    char upper[4096], work[4096], merged[4096], opts[16384];
    snprintf(upper, sizeof upper, "%s/upper", argv[2]);
    snprintf(work, sizeof work, "%s/work", argv[2]);
    snprintf(merged, sizeof merged, "%s/merged", argv[2]);
    snprintf(opts, sizeof opts, "lowerdir=%s,upperdir=%s,workdir=%s", argv[3], upper, work);
    mkdir(upper, 0755), mkdir(work, 0755), mkdir(merged, 0755);
    double *walk = calloc(rounds, sizeof *walk), *list = calloc(rounds, sizeof *list),
           *layers = calloc(rounds, sizeof *layers), *ratio = calloc(rounds, sizeof *ratio);
    if (!walk || !list || !layers || !ratio)
        return fprintf(stderr, "out of memory\n"), 1;
    struct result w, l;
    for (int i = 0; i < rounds; i++) {
        int r = i % 2 ? one(true, opts, merged, argv[3], upper, &l) |
                            one(false, opts, merged, argv[3], upper, &w)
                      : one(false, opts, merged, argv[3], upper, &w) |
                            one(true, opts, merged, argv[3], upper, &l);
        if (r < 0)
            return fprintf(stderr, "round %d failed\n", i), 1;
        walk[i] = w.ms, list[i] = l.ms, layers[i] = l.list_ms, ratio[i] = l.ms / w.ms;
    }
    qsort(walk, rounds, sizeof *walk, cmp);
    qsort(list, rounds, sizeof *list, cmp);
    qsort(layers, rounds, sizeof *layers, cmp);
    qsort(ratio, rounds, sizeof *ratio, cmp);
    printf("seal, median of %d: merged walk %.1f ms (%zu sealed); layers' list %.1f ms of which "
           "the layers' walk %.1f ms (%zu candidates, %zu sealed); list / walk %.3f\n",
           rounds, walk[rounds / 2], w.sealed, list[rounds / 2], layers[rounds / 2], l.candidates,
           l.sealed, ratio[rounds / 2]);
    return 0;
}
