/* cgattach: what one cgroup v1 attach costs, without nsbox around it.
 *
 * Each iteration: mkdir a cgroup below our own cgroup in each chosen v1 hierarchy, fork a child
 * that waits on a pipe, move the child in, let it exit, rmdir. Timed separately: the mkdirs,
 * the first attach write, the remaining attach writes, the rmdirs. Three ways to attach:
 *
 *   procs  the parent writes the child's pid to cgroup.procs (crun; nsbox on v1 before it let
 *          the child move itself). This write-locks the global cgroup_threadgroup_rwsem; unless
 *          the rwsem is already in its slow mode (favordynmods, or another writer within about
 *          one grace period) the writer waits for an RCU grace period.
 *   tasks  the parent writes the child's pid to tasks: with a pid other than 0 the kernel takes
 *          the same global lock, so this should cost the same.
 *   self   the child writes "0" into tasks files the parent opened before the fork: a thread
 *          moving itself needs no threadgroup lock at all (Linux 5.5+, "cgroup: Optimize single
 *          thread migration"), hence no grace period. nsbox's pid 1 does this.
 *
 * Between iterations we sleep --gap-ms (default 20; run.sh passes 40) so that the rwsem's
 * rcu_sync state goes back to idle, as it does between two separate sandbox starts; --gap-ms 0
 * shows the back-to-back case in which only the first attach of a burst waits.
 *
 * Output: one JSON object per mode on stdout (per-iteration samples in microseconds).
 * Everything it creates is named nsboxbench-TAG-N and removed before it exits, also on SIGINT or
 * SIGTERM. Needs root (or a writable own cgroup in each hierarchy). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_H 8

struct hier {
    char ctrl[32];
    char base[512]; /* /sys/fs/cgroup/<ctrl><own path> */
    char dir[600];  /* the cgroup of the current iteration, "" when none */
};

static struct hier H[MAX_H];
static int nh;
static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
    (void)sig;
    stop = 1;
}

static long long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Our own cgroup in hierarchy ctrl, from /proc/self/cgroup ("N:a,b:/path"). */
static int own_path(const char *ctrl, char *out, size_t n)
{
    FILE *f = fopen("/proc/self/cgroup", "re");
    if (!f)
        return -1;
    char line[1024];
    int found = -1;
    while (fgets(line, sizeof line, f)) {
        char *c1 = strchr(line, ':');
        char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2)
            continue;
        *c2 = '\0';
        line[strcspn(line, "\n")] = '\0';
        char *path = c2 + 1;
        path[strcspn(path, "\n")] = '\0';
        char *list = c1 + 1, *save = NULL;
        for (char *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save))
            if (!strcmp(t, ctrl)) {
                snprintf(out, n, "%s", strcmp(path, "/") ? path : "");
                found = 0;
            }
    }
    fclose(f);
    return found;
}

static int write_str(const char *path, const char *s)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t w = write(fd, s, strlen(s));
    int err = errno;
    close(fd);
    errno = err;
    return w == (ssize_t)strlen(s) ? 0 : -1;
}

static void remove_all(void)
{
    for (int i = 0; i < nh; i++)
        if (H[i].dir[0]) {
            for (int k = 0; k < 200 && rmdir(H[i].dir) < 0 && errno == EBUSY; k++)
                usleep(1000);
            H[i].dir[0] = '\0';
        }
}

static void emit(const char *mode, int gap_ms, const char *names[], long long *v[], int nv, int n)
{
    printf("{\"mode\":\"%s\",\"gap_ms\":%d,\"hierarchies\":[", mode, gap_ms);
    for (int i = 0; i < nh; i++)
        printf("%s\"%s\"", i ? "," : "", H[i].ctrl);
    printf("]");
    for (int k = 0; k < nv; k++) {
        printf(",\"%s\":[", names[k]);
        for (int i = 0; i < n; i++)
            printf("%s%.1f", i ? "," : "", v[k][i] / 1000.0);
        printf("]");
    }
    printf("}\n");
    fflush(stdout);
}

/* This iteration's cgroup in every hierarchy. -1 (with everything removed) on failure. */
static int make_dirs(const char *tag, int it)
{
    for (int i = 0; i < nh; i++) {
        snprintf(H[i].dir, sizeof H[i].dir, "%s/nsboxbench-%s-%d", H[i].base, tag, it);
        if (mkdir(H[i].dir, 0755) < 0) {
            fprintf(stderr, "cgattach: mkdir %s: %s\n", H[i].dir, strerror(errno));
            H[i].dir[0] = '\0';
            remove_all();
            return -1;
        }
    }
    return 0;
}

/* self: the tasks files the child writes to, opened before the fork; else all -1. */
static int open_tasks(int fds[MAX_H], int self)
{
    for (int i = 0; i < nh; i++) {
        fds[i] = -1;
        if (self) {
            char p[700];
            snprintf(p, sizeof p, "%s/tasks", H[i].dir);
            fds[i] = open(p, O_WRONLY | O_CLOEXEC);
            if (fds[i] < 0) {
                fprintf(stderr, "cgattach: open %s: %s\n", p, strerror(errno));
                remove_all();
                return -1;
            }
        }
    }
    return 0;
}

/* The forked child: with self, moves itself and times it; reports on res, waits for EOF on go. */
__attribute__((noreturn)) static void child_main(const int fds[MAX_H], int self, int go[2],
                                                 int res[2])
{
    close(go[1]);
    close(res[0]);
    long long t[2] = {0, 0};
    if (self) {
        /* Like nsbox's pid 1 would: move ourselves, one hierarchy after the other. */
        long long a = now_ns();
        if (write(fds[0], "0", 1) != 1)
            _exit(2);
        long long b = now_ns();
        for (int i = 1; i < nh; i++)
            if (write(fds[i], "0", 1) != 1)
                _exit(2);
        t[0] = b - a;
        t[1] = now_ns() - b;
    }
    if (write(res[1], t, sizeof t) != sizeof t)
        _exit(3);
    char c;
    while (read(go[0], &c, 1) < 0 && errno == EINTR)
        ;
    _exit(0);
}

/* The parent writes pid to file in every hierarchy: tw[0] before, tw[1] after the first, tw[2]
 * after the last. 1 when a write failed. */
static int attach_from_parent(const char *file, pid_t pid, long long tw[3])
{
    char val[32];
    snprintf(val, sizeof val, "%d", (int)pid);
    int failed = 0;
    tw[0] = now_ns();
    for (int i = 0; i < nh; i++) {
        char p[700];
        snprintf(p, sizeof p, "%s/%s", H[i].dir, file);
        if (write_str(p, val) < 0) {
            fprintf(stderr, "cgattach: write %s: %s\n", p, strerror(errno));
            failed = 1;
            break;
        }
        if (i == 0)
            tw[1] = now_ns();
    }
    tw[2] = now_ns();
    return failed;
}

/* rmdir this iteration's cgroups. 1 when one would not go. */
static int remove_dirs(void)
{
    int failed = 0;
    for (int i = 0; i < nh; i++) {
        /* The exited child can linger in the cgroup for a moment: EBUSY, retry. */
        int k = 0;
        while (rmdir(H[i].dir) < 0) {
            if (errno != EBUSY || ++k > 2000) {
                fprintf(stderr, "cgattach: rmdir %s: %s\n", H[i].dir, strerror(errno));
                failed = 1;
                break;
            }
            usleep(50);
        }
        H[i].dir[0] = '\0';
    }
    return failed;
}

static int run_mode(const char *mode, int iters, int gap_ms, const char *tag)
{
    long long *mk = calloc(iters, sizeof *mk), *first = calloc(iters, sizeof *first),
              *rest = calloc(iters, sizeof *rest), *rm = calloc(iters, sizeof *rm);
    if (!mk || !first || !rest || !rm)
        return -1;
    int done = 0;
    for (int it = 0; it < iters && !stop; it++) {
        long long t0 = now_ns();
        if (make_dirs(tag, it) < 0)
            return -1;
        long long t1 = now_ns();

        int fds[MAX_H];
        int self = !strcmp(mode, "self");
        if (open_tasks(fds, self) < 0)
            return -1;
        int go[2], res[2];
        if (pipe2(go, O_CLOEXEC) < 0 || pipe2(res, O_CLOEXEC) < 0)
            return -1;
        pid_t pid = fork();
        if (pid < 0)
            return -1;
        if (pid == 0)
            child_main(fds, self, go, res);
        close(go[0]);
        close(res[1]);
        for (int i = 0; i < nh; i++)
            if (fds[i] >= 0)
                close(fds[i]);
        const char *file = !strcmp(mode, "tasks") ? "tasks" : "cgroup.procs";
        long long tw[3] = {0, 0, 0};
        int failed = 0;
        if (!self)
            failed = attach_from_parent(file, pid, tw);
        long long ct[2] = {0, 0};
        if (read(res[0], ct, sizeof ct) != sizeof ct)
            failed = 1;
        close(res[0]);
        close(go[1]); /* EOF: the child exits */
        int st;
        waitpid(pid, &st, 0);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
            failed = 1;
        long long t2 = now_ns();
        if (remove_dirs())
            failed = 1;
        long long t3 = now_ns();
        if (failed) {
            remove_all();
            return -1;
        }
        mk[it] = t1 - t0;
        first[it] = self ? ct[0] : tw[1] - tw[0];
        rest[it] = self ? ct[1] : tw[2] - tw[1];
        rm[it] = t3 - t2;
        done++;
        if (gap_ms)
            usleep((useconds_t)gap_ms * 1000);
    }
    const char *names[] = {"mkdir_us", "attach_first_us", "attach_rest_us", "rmdir_us"};
    long long *v[] = {mk, first, rest, rm};
    emit(mode, gap_ms, names, v, 4, done);
    free(mk);
    free(first);
    free(rest);
    free(rm);
    return stop ? -1 : 0;
}

static void usage(void)
{
    fprintf(stderr, "usage: cgattach --tag TAG [--iters N] [--gap-ms MS] [--modes procs,tasks,self]"
                    " [--controllers pids[,memory,...]]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    const char *tag = NULL, *modes = "procs,tasks,self", *ctrls = "pids";
    int iters = 100, gap = 20;
    for (int i = 1; i < argc; i++) {
        if (i + 1 >= argc)
            usage();
        if (!strcmp(argv[i], "--tag"))
            tag = argv[++i];
        else if (!strcmp(argv[i], "--iters"))
            iters = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--gap-ms"))
            gap = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--modes"))
            modes = argv[++i];
        else if (!strcmp(argv[i], "--controllers"))
            ctrls = argv[++i];
        else
            usage();
    }
    if (!tag || iters <= 0 || gap < 0)
        usage();
    for (const char *c = tag; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9')))
            usage();

    char *cl = strdup(ctrls), *save = NULL;
    for (char *t = strtok_r(cl, ",", &save); t && nh < MAX_H; t = strtok_r(NULL, ",", &save)) {
        char own[400];
        if (own_path(t, own, sizeof own) < 0) {
            fprintf(stderr, "cgattach: no v1 hierarchy with controller %s in /proc/self/cgroup\n",
                    t);
            return 1;
        }
        snprintf(H[nh].ctrl, sizeof H[nh].ctrl, "%s", t);
        snprintf(H[nh].base, sizeof H[nh].base, "/sys/fs/cgroup/%s%s", t, own);
        nh++;
    }
    free(cl);

    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);

    int rc = 0;
    char *ml = strdup(modes);
    save = NULL;
    for (char *m = strtok_r(ml, ",", &save); m && !stop; m = strtok_r(NULL, ",", &save)) {
        if (strcmp(m, "procs") && strcmp(m, "tasks") && strcmp(m, "self"))
            usage();
        if (run_mode(m, iters, gap, tag) < 0) {
            rc = 1;
            break;
        }
    }
    free(ml);
    remove_all();
    return rc;
}
