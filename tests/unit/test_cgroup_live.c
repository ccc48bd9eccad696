/* cgroup against the real kernel: creates cgroups below this process's own cgroups with small
 * limits, puts forked children in them and checks that the limits are written AND enforced
 * (pids, memory, cpu), that freezing stops a process, that destroy kills everything and leaves
 * no directory behind. Also measures what create/attach/destroy cost.
 *
 * Needs root (or a delegated cgroup) and a usable hierarchy; otherwise every test is skipped
 * with the reason. Every cgroup and process a test makes is removed in its teardown, even
 * when an assertion fails half way. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "cgroup.h"
#include "cgroup_impl.h"
#include "cgroup_util.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_KIDS 8

static struct nsbox_cgroup g_cg;
static pid_t g_kids[MAX_KIDS];
static size_t g_nkids;
static struct nsbox_cgroup_support g_sup;
static char g_skip_why[600];

static uint64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static char *read_text(const char *dir, const char *name)
{
    static char buf[4096];
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "r");
    if (!f)
        return NULL;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    while (n > 0 && buf[n - 1] == '\n')
        n--;
    buf[n] = '\0';
    return buf;
}

static const char *v1_dir(const struct nsbox_cgroup *cg, const char *controller)
{
    for (size_t i = 0; i < cg->n_v1; i++)
        if (nsbox_cg_list_has(cg->v1[i].controller, controller))
            return cg->v1[i].path;
    return NULL;
}

/* The v1 freezer's hold beside the sandbox's freezer cgroup (docs/cgroups.md), into out. */
static void hold_of(const struct nsbox_cgroup *cg, char *out, size_t n)
{
    const char *fz = v1_dir(cg, "freezer");
    assert_non_null(fz);
    const char *slash = strrchr(fz, '/');
    assert_non_null(slash);
    snprintf(out, n, "%.*s/nsbox.freezer-hold", (int)(slash - fz), fz);
}

/* Whether another sandbox's cgroup ("nsbox-<id>") is in the hold's directory. */
static bool sandbox_beside(const char *hold)
{
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%.*s", (int)(strrchr(hold, '/') - hold), hold);
    DIR *d = opendir(dir);
    assert_non_null(d);
    struct dirent *de;
    bool found = false;
    while (!found && (de = readdir(d)))
        found = de->d_type == DT_DIR && nsbox_cg_is_sandbox_name(de->d_name);
    closedir(d);
    if (found)
        print_message("a sandbox cgroup is beside %s: its removal is not checked here\n", hold);
    return found;
}

static void track(pid_t pid)
{
    for (size_t i = 0; i < g_nkids; i++)
        if (g_kids[i] <= 0) {
            g_kids[i] = pid;
            return;
        }
    g_kids[g_nkids++] = pid;
}

/* Reap a tracked child; its wait status. */
static int reap(pid_t pid)
{
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    for (size_t i = 0; i < g_nkids; i++)
        if (g_kids[i] == pid)
            g_kids[i] = -1;
    return st;
}

/* In a fresh child: die with the test process, so that a crash or a failed assertion in the
 * parent can never leave a process behind. */
static void child_init(pid_t parent)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
        _exit(103);
}

static pid_t fork_tracked(void)
{
    size_t free_slots = MAX_KIDS - g_nkids;
    for (size_t i = 0; i < g_nkids; i++)
        free_slots += g_kids[i] <= 0;
    assert_true(free_slots > 0); /* before fork: a failed check must not leak a child */
    pid_t parent = getpid();
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        child_init(parent);
        return 0;
    }
    track(pid);
    return pid;
}

/* A child that waits until go[1] is written (or closed), then runs fn. */
static pid_t spawn(const int *go, void (*fn)(void *), void *arg)
{
    pid_t pid = fork_tracked();
    if (pid == 0) {
        char c;
        if (go) {
            close(go[1]); /* else the child holds its own pipe open and never sees EOF */
            if (read(go[0], &c, 1) != 1)
                _exit(100);
        }
        fn(arg);
        _exit(0);
    }
    return pid;
}

static void do_sleep(void *arg)
{
    (void)arg;
    for (;;)
        pause();
}

static bool g_live_ok;

/* NSBOX_REQUIRE_LIVE_CGROUPS=1 (the cgroup v2 test VM, tests/CMakeLists.txt): a machine that
 * must be able to run these, so that not being able to is a failure, not a skip. */
static int not_live(void)
{
    const char *req = getenv("NSBOX_REQUIRE_LIVE_CGROUPS");
    if (req && strcmp(req, "1") == 0) {
        fprintf(stderr, "required, but cannot run: %s\n", g_skip_why);
        return -1;
    }
    return 0;
}

static int group_setup(void **state)
{
    (void)state;
    if (geteuid() != 0) {
        snprintf(g_skip_why, sizeof g_skip_why,
                 "not root: cgroup creation needs root or a delegated cgroup");
        return not_live();
    }
    nsbox_cgroup_detect(&g_sup);
    if (!(g_sup.memory && g_sup.cpu && g_sup.pids)) {
        snprintf(g_skip_why, sizeof g_skip_why, "no writable cgroup hierarchy: %s", g_sup.why);
        return not_live();
    }
    /* Detection can be right and creation still refused (read-only cgroupfs in a container). */
    struct nsbox_limits lim = {.cpus = 1, .memory_bytes = 64u << 20, .pids = 16};
    struct nsbox_cgroup cg;
    struct nsbox_err e = {0};
    char id[32];
    snprintf(id, sizeof id, "probe-%d", (int)getpid());
    if (nsbox_cgroup_create(id, &lim, &cg, &e) < 0) {
        snprintf(g_skip_why, sizeof g_skip_why, "cannot create a cgroup: %s", e.msg);
        return not_live();
    }
    if (nsbox_cgroup_destroy(&cg, &e) < 0) {
        fprintf(stderr, "probe cgroup could not be removed: %s\n", e.msg);
        return -1;
    }
    g_live_ok = true;
    print_message("cgroup v%d, parent %s, freezer %s, swap limit %s\n", g_sup.version,
                  g_sup.parent, g_sup.freezer ? "yes" : "no", g_sup.swap ? "yes" : "no");
    return 0;
}

static int setup(void **state)
{
    (void)state;
    nsbox_cgroup_init(&g_cg);
    g_nkids = 0;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    struct nsbox_err e = {0};
    int r = 0;
    if (nsbox_cgroup_destroy(&g_cg, &e) < 0) {
        fprintf(stderr, "teardown: %s\n", e.msg);
        r = -1;
    }
    for (size_t i = 0; i < g_nkids; i++)
        if (g_kids[i] > 0) {
            kill(g_kids[i], SIGKILL);
            waitpid(g_kids[i], NULL, 0);
        }
    g_nkids = 0;
    return r;
}

#define REQUIRE_LIVE()                                                                             \
    do {                                                                                           \
        if (!g_live_ok) {                                                                          \
            print_message("skipped: %s\n", g_skip_why);                                            \
            skip();                                                                                \
        }                                                                                          \
    } while (0)

static void make_id(char *id, size_t n, const char *what)
{
    snprintf(id, n, "t%d-%s", (int)getpid(), what);
}

/* Every directory of the handle exists (or none does). */
static void assert_dirs(const struct nsbox_cgroup *cg, bool present)
{
    if (cg->version == 2) {
        assert_int_equal(access(cg->path, F_OK) == 0, present);
        return;
    }
    assert_true(cg->n_v1 > 0);
    for (size_t i = 0; i < cg->n_v1; i++)
        assert_int_equal(access(cg->v1[i].path, F_OK) == 0, present);
}

/* ---- tests --------------------------------------------------------------------------------- */

/* The limit files say what was asked (1 cpu, 64 MiB, 16 pids). */
static void assert_limit_files(void)
{
    if (g_cg.version == 2) {
        assert_string_equal(read_text(g_cg.path, "memory.max"), "67108864");
        assert_string_equal(read_text(g_cg.path, "cpu.max"), "100000 100000");
        assert_string_equal(read_text(g_cg.path, "pids.max"), "16");
        char *swap = read_text(g_cg.path, "memory.swap.max");
        if (swap)
            assert_string_equal(swap, "0");
    } else {
        const char *m = v1_dir(&g_cg, "memory"), *c = v1_dir(&g_cg, "cpu"),
                   *p = v1_dir(&g_cg, "pids");
        assert_non_null(m);
        assert_non_null(c);
        assert_non_null(p);
        assert_non_null(v1_dir(&g_cg, "freezer"));
        assert_string_equal(read_text(m, "memory.limit_in_bytes"), "67108864");
        char *memsw = read_text(m, "memory.memsw.limit_in_bytes");
        if (memsw)
            assert_string_equal(memsw, "67108864");
        assert_string_equal(read_text(c, "cpu.cfs_period_us"), "100000");
        assert_string_equal(read_text(c, "cpu.cfs_quota_us"), "100000");
        assert_string_equal(read_text(p, "pids.max"), "16");
    }
}

static void test_limits_attach_freeze_stats_destroy(void **state)
{
    (void)state;
    REQUIRE_LIVE();
    char id[48];
    make_id(id, sizeof id, "main");
    struct nsbox_limits lim = {.cpus = 1, .memory_bytes = 64u << 20, .pids = 16};
    struct nsbox_err e = {0};
    assert_int_equal(nsbox_cgroup_create(id, &lim, &g_cg, &e), 0);
    assert_dirs(&g_cg, true);

    assert_limit_files();

    /* A child that counts in shared memory, so we can see whether it runs. */
    volatile uint64_t *counter =
        mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    assert_true(counter != MAP_FAILED);
    pid_t pid = fork_tracked();
    if (pid == 0) {
        for (;;) {
            (*counter)++;
            usleep(500);
        }
    }
    assert_int_equal(nsbox_cgroup_attach(&g_cg, pid, &e), 0);

    /* The kernel agrees that the child is in the sandbox's cgroup. */
    char proc[64];
    snprintf(proc, sizeof proc, "/proc/%d", (int)pid);
    char *self = read_text(proc, "cgroup");
    assert_non_null(self);
    char want[80];
    snprintf(want, sizeof want, "/nsbox-%s\n", id);
    char with_nl[4100];
    snprintf(with_nl, sizeof with_nl, "%s\n", self);
    assert_non_null(strstr(with_nl, want));

    struct nsbox_cgroup_stats st;
    assert_int_equal(nsbox_cgroup_stats(&g_cg, &st, &e), 0);
    assert_int_equal(st.pids_current, 1);
    assert_int_equal(st.pids_limit, 16);
    assert_int_equal(st.memory_limit, 64u << 20);
    assert_false(st.frozen);

    /* Frozen: the counter stops. Thawed: it moves again. */
    usleep(20000);
    assert_int_equal(nsbox_cgroup_freeze(&g_cg, true, &e), 0);
    assert_int_equal(nsbox_cgroup_stats(&g_cg, &st, &e), 0);
    assert_true(st.frozen);
    char hold[PATH_MAX] = "";
    if (g_cg.version == 1) {
        assert_string_equal(read_text(v1_dir(&g_cg, "freezer"), "freezer.state"), "FROZEN");
        /* the hold that keeps the kernel's freezer key on: frozen, empty */
        hold_of(&g_cg, hold, sizeof hold);
        assert_string_equal(read_text(hold, "freezer.state"), "FROZEN");
        assert_string_equal(read_text(hold, "cgroup.procs"), "");
    } else
        assert_string_equal(read_text(g_cg.path, "cgroup.freeze"), "1");
    uint64_t before = *counter;
    usleep(100000);
    assert_true(*counter == before);
    assert_int_equal(nsbox_cgroup_freeze(&g_cg, false, &e), 0);
    assert_int_equal(nsbox_cgroup_stats(&g_cg, &st, &e), 0);
    assert_false(st.frozen);
    usleep(50000);
    assert_true(*counter > before);

    /* Destroy kills what is inside and removes every directory. */
    struct nsbox_cgroup copy = g_cg;
    assert_int_equal(nsbox_cgroup_destroy(&g_cg, &e), 0);
    assert_int_equal(g_cg.version, 0);
    assert_dirs(&copy, false);
    if (hold[0] && !sandbox_beside(hold))
        assert_int_equal(access(hold, F_OK), -1); /* gone with the last sandbox */
    int ws = reap(pid);
    assert_true(WIFSIGNALED(ws));
    assert_int_equal(WTERMSIG(ws), SIGKILL);
    assert_int_equal(nsbox_cgroup_destroy(&g_cg, &e), 0); /* idempotent */
    munmap((void *)counter, 4096);
}

struct forker {
    int result_fd;
};

static void do_fork_many(void *arg)
{
    struct forker *f = arg;
    int ok = 0, eagain = 0;
    pid_t self = getpid();
    for (int i = 0; i < 10; i++) {
        pid_t p = fork();
        if (p == 0) {
            child_init(self);
            for (;;)
                pause();
        }
        if (p > 0)
            ok++;
        else if (errno == EAGAIN)
            eagain++;
    }
    char msg[32];
    int n = snprintf(msg, sizeof msg, "%d %d", ok, eagain);
    if (write(f->result_fd, msg, (size_t)n) != n)
        _exit(101);
    for (;;)
        pause();
}

static void test_pids_limit_enforced_and_destroy_kills_all(void **state)
{
    (void)state;
    REQUIRE_LIVE();
    char id[48];
    make_id(id, sizeof id, "pids");
    struct nsbox_limits lim = {.cpus = 1, .memory_bytes = 64u << 20, .pids = 4};
    struct nsbox_err e = {0};
    assert_int_equal(nsbox_cgroup_create(id, &lim, &g_cg, &e), 0);
    int go[2], res[2];
    assert_int_equal(pipe(go), 0);
    assert_int_equal(pipe(res), 0);
    struct forker f = {.result_fd = res[1]};
    pid_t pid = spawn(go, do_fork_many, &f);
    assert_int_equal(nsbox_cgroup_attach(&g_cg, pid, &e), 0);
    assert_int_equal(write(go[1], "g", 1), 1);
    char msg[32] = "";
    ssize_t n = read(res[0], msg, sizeof msg - 1);
    assert_true(n > 0);
    msg[n] = '\0';
    int ok = -1, eagain = -1;
    assert_int_equal(sscanf(msg, "%d %d", &ok, &eagain), 2);
    /* pids.max 4 counts the forker itself: 3 children fit, the other 7 forks fail. */
    assert_int_equal(ok, 3);
    assert_int_equal(eagain, 7);
    struct nsbox_cgroup_stats st;
    assert_int_equal(nsbox_cgroup_stats(&g_cg, &st, &e), 0);
    assert_int_equal(st.pids_current, 4);

    /* The grandchildren are not ours to wait for; destroy must still get every one. */
    struct nsbox_cgroup copy = g_cg;
    assert_int_equal(nsbox_cgroup_destroy(&g_cg, &e), 0);
    assert_dirs(&copy, false);
    int ws = reap(pid);
    assert_true(WIFSIGNALED(ws) && WTERMSIG(ws) == SIGKILL);
    close(go[0]);
    close(go[1]);
    close(res[0]);
    close(res[1]);
}

static void do_eat_memory(void *arg)
{
    (void)arg;
    size_t total = 256u << 20;
    char *p = malloc(total);
    if (!p)
        _exit(102);
    for (size_t i = 0; i < total; i += 4096)
        p[i] = 1;
    _exit(0); /* reached only if the limit did not hold */
}

static void test_memory_limit_enforced(void **state)
{
    (void)state;
    REQUIRE_LIVE();
    char id[48];
    make_id(id, sizeof id, "mem");
    struct nsbox_limits lim = {.cpus = 1, .memory_bytes = 32u << 20, .pids = 16};
    struct nsbox_err e = {0};
    assert_int_equal(nsbox_cgroup_create(id, &lim, &g_cg, &e), 0);
    int go[2];
    assert_int_equal(pipe(go), 0);
    pid_t pid = spawn(go, do_eat_memory, NULL);
    assert_int_equal(nsbox_cgroup_attach(&g_cg, pid, &e), 0);
    assert_int_equal(write(go[1], "g", 1), 1);
    int ws = reap(pid);
    /* The OOM killer ends it: touching 256 MiB cannot succeed under 32 MiB without swap. */
    assert_true(WIFSIGNALED(ws));
    assert_int_equal(WTERMSIG(ws), SIGKILL);
    struct nsbox_cgroup_stats st;
    assert_int_equal(nsbox_cgroup_stats(&g_cg, &st, &e), 0);
    assert_true(st.oom_kills >= 1);
    assert_true(st.memory_peak <= (32u << 20));
    assert_true(st.memory_peak > (16u << 20));
    print_message("oom_kills %" PRIu64 ", memory peak %" PRIu64 " KiB\n", st.oom_kills,
                  st.memory_peak / 1024);
    assert_int_equal(nsbox_cgroup_destroy(&g_cg, &e), 0);
    close(go[0]);
    close(go[1]);
}

static void do_spin(void *arg)
{
    uint64_t until = now_us() + *(uint64_t *)arg;
    volatile uint64_t x = 0;
    while (now_us() < until)
        x++;
}

static void test_cpu_limit_enforced(void **state)
{
    (void)state;
    REQUIRE_LIVE();
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    char id[48];
    make_id(id, sizeof id, "cpu");
    struct nsbox_limits lim = {.cpus = 1, .memory_bytes = 64u << 20, .pids = 16};
    struct nsbox_err e = {0};
    assert_int_equal(nsbox_cgroup_create(id, &lim, &g_cg, &e), 0);
    if (g_cg.version == 1 && !v1_dir(&g_cg, "cpuacct")) {
        print_message("skipped: no v1 cpuacct hierarchy to measure usage with\n");
        skip();
    }
    /* Two spinners for 1 s of wall time: unthrottled they would burn up to 2 s of CPU on a
     * machine with 2+ CPUs; with cpus=1 the quota caps them at about 1 s. */
    int go[2];
    assert_int_equal(pipe(go), 0);
    uint64_t spin_us = 1000000;
    pid_t a = spawn(go, do_spin, &spin_us), b = spawn(go, do_spin, &spin_us);
    assert_int_equal(nsbox_cgroup_attach(&g_cg, a, &e), 0);
    assert_int_equal(nsbox_cgroup_attach(&g_cg, b, &e), 0);
    uint64_t t0 = now_us();
    assert_int_equal(write(go[1], "gg", 2), 2);
    reap(a);
    reap(b);
    uint64_t wall = now_us() - t0;
    struct nsbox_cgroup_stats st;
    assert_int_equal(nsbox_cgroup_stats(&g_cg, &st, &e), 0);
    print_message("%ld CPUs online; 2 spinners, cpus=1: %" PRIu64 " ms CPU in %" PRIu64
                  " ms wall\n",
                  ncpu, st.cpu_usage_usec / 1000, wall / 1000);
    assert_true(st.cpu_usage_usec > 0);
    /* The quota is enforced per 100 ms period: the spinners may use a whole quota in each
     * period their run touches, the partial first and last ones included (wall/period + 2).
     * Unthrottled they would use about twice the wall time, well above that. */
    assert_true(st.cpu_usage_usec <= (wall / NSBOX_CG_CPU_PERIOD_US + 2) * NSBOX_CG_CPU_PERIOD_US);
    assert_int_equal(nsbox_cgroup_destroy(&g_cg, &e), 0);
    close(go[0]);
    close(go[1]);
}

static void do_fork_bomb(void *arg)
{
    (void)arg;
    for (;;) {
        pid_t parent = getpid();
        pid_t p = fork();
        if (p == 0)
            child_init(parent); /* and keep forking */
        else if (p < 0)
            usleep(100);
    }
}

static void test_destroy_fork_bomb(void **state)
{
    (void)state;
    REQUIRE_LIVE();
    char id[48];
    make_id(id, sizeof id, "bomb");
    struct nsbox_limits lim = {.cpus = 1, .memory_bytes = 256u << 20, .pids = 64};
    struct nsbox_err e = {0};
    assert_int_equal(nsbox_cgroup_create(id, &lim, &g_cg, &e), 0);
    int go[2];
    assert_int_equal(pipe(go), 0);
    pid_t pid = spawn(go, do_fork_bomb, NULL);
    assert_int_equal(nsbox_cgroup_attach(&g_cg, pid, &e), 0);
    assert_int_equal(write(go[1], "g", 1), 1);
    usleep(100000);
    struct nsbox_cgroup_stats st;
    assert_int_equal(nsbox_cgroup_stats(&g_cg, &st, &e), 0);
    assert_true(st.pids_current > 1);
    assert_true(st.pids_current <= 64);
    struct nsbox_cgroup copy = g_cg;
    uint64_t t0 = now_us();
    assert_int_equal(nsbox_cgroup_destroy(&g_cg, &e), 0);
    print_message("fork bomb at %" PRIu64 " pids destroyed in %" PRIu64 " us\n",
                  st.pids_current, now_us() - t0);
    assert_dirs(&copy, false);
    reap(pid);
    close(go[0]);
    close(go[1]);
}

static void test_remove_by_id_after_crash(void **state)
{
    (void)state;
    REQUIRE_LIVE();
    char id[48];
    make_id(id, sizeof id, "gc");
    struct nsbox_limits lim = {.cpus = 1, .memory_bytes = 64u << 20, .pids = 16};
    struct nsbox_err e = {0};
    assert_int_equal(nsbox_cgroup_create(id, &lim, &g_cg, &e), 0);
    pid_t pid = spawn(NULL, do_sleep, NULL);
    assert_int_equal(nsbox_cgroup_attach(&g_cg, pid, &e), 0);
    /* The supervisor "crashed": only the id is known now. */
    struct nsbox_cgroup lost = g_cg;
    if (g_cg.dirfd >= 0)
        close(g_cg.dirfd);
    nsbox_cgroup_init(&g_cg);
    assert_int_equal(nsbox_cgroup_remove_by_id(id, &e), 0);
    assert_dirs(&lost, false);
    int ws = reap(pid);
    assert_true(WIFSIGNALED(ws) && WTERMSIG(ws) == SIGKILL);
    assert_int_equal(nsbox_cgroup_remove_by_id(id, &e), 0);
}

static void test_failed_create_leaves_nothing(void **state)
{
    (void)state;
    REQUIRE_LIVE();
    char id[48];
    make_id(id, sizeof id, "bad");
    /* More CPU time per period than the kernel accepts (about 2^44 us): the cpu write fails
     * after the other directories were made. */
    struct nsbox_limits lim = {.cpus = UINT32_MAX, .memory_bytes = 64u << 20, .pids = 16};
    struct nsbox_err e = {0};
    assert_int_equal(nsbox_cgroup_create(id, &lim, &g_cg, &e), -1);
    print_message("expected error: %s\n", e.msg);
    assert_non_null(strstr(e.msg, "cpu"));
    assert_int_equal(g_cg.version, 0);
    /* Look in every hierarchy below our own cgroups: no nsbox-<id> anywhere. */
    char text[8192];
    FILE *f = fopen("/proc/self/cgroup", "r");
    assert_non_null(f);
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    struct nsbox_cg_self self;
    assert_int_equal(nsbox_cg_parse_self(text, &self), 0);
    char p[PATH_MAX];
    if (g_sup.version == 2) {
        snprintf(p, sizeof p, "%s/nsbox-%s", g_sup.parent, id);
        assert_int_equal(access(p, F_OK), -1);
    } else {
        const char *names[] = {"memory", "cpu", "cpuacct", "pids", "freezer"};
        for (size_t i = 0; i < 5; i++) {
            const struct nsbox_cg_self_entry *en = nsbox_cg_self_find(&self, names[i]);
            if (!en)
                continue;
            snprintf(p, sizeof p, "/sys/fs/cgroup/%s%s/nsbox-%s", names[i],
                     strcmp(en->path, "/") ? en->path : "", id);
            assert_int_equal(access(p, F_OK), -1);
        }
    }
}

/* ---- kill --all's signals (nsbox_cgsig_listed) -------------------------------------------- */

/* Whether pid holds SIGTERM pending (its processes block it: what was sent is read, not
 * raced). */
static bool term_pending(pid_t pid)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    unsigned long long mask = 0;
    bool found = false;
    while (f && !found && fgets(line, sizeof line, f))
        found = sscanf(line, "ShdPnd: %llx", &mask) == 1;
    if (f)
        fclose(f);
    return found && (mask & (1ull << (SIGTERM - 1)));
}

static pid_t fork_waiting(void)
{
    pid_t pid = fork();
    if (pid == 0)
        for (;;)
            pause();
    return pid;
}

/* As pid 1 of a pid namespace of its own (with its own /proc), whose next pid it chooses: a
 * and d in the cgroup, listed; a ends, and its pid goes to b, outside it; then the listing is
 * signalled. 0: d got the signal, b did not; 20: b got it; 1x: set-up failed. */
static int pid_reuse_case(void)
{
    struct nsbox_err e;
    sigset_t term;
    sigemptyset(&term);
    sigaddset(&term, SIGTERM);
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
        mount("proc", "/proc", "proc", 0, NULL) < 0 || sigprocmask(SIG_BLOCK, &term, NULL) < 0)
        return 10;
    pid_t a = fork_waiting(), d = fork_waiting(), pids[8];
    if (a < 0 || d < 0 || nsbox_cgroup_attach(&g_cg, a, &e) < 0 ||
        nsbox_cgroup_attach(&g_cg, d, &e) < 0 || nsbox_cgroup_pids(&g_cg, pids, 8, &e) != 2)
        return 11;
    kill(a, SIGKILL);
    waitpid(a, NULL, 0);
    FILE *f = fopen("/proc/sys/kernel/ns_last_pid", "w");
    if (!f || fprintf(f, "%d", (int)a - 1) < 0 || fclose(f) != 0)
        return 12;
    pid_t b = fork_waiting();
    if (b != a)
        return 13;
    /* the listing kill --all signals, read before the pid was reused (cgroup_signal.c) */
    char procs[PATH_MAX];
    snprintf(procs, sizeof procs, "%s/cgroup.procs",
             g_cg.version == 2 ? g_cg.path : g_cg.v1[0].path);
    const struct nsbox_cgsig how = {.sig = SIGTERM};
    if (nsbox_cgsig_listed(procs, pids, 2, &how, &e) < 0)
        return 14;
    return term_pending(b) ? 20 : term_pending(d) ? 0 : 21;
}

/* g_cg, small, for the test's id what. */
static void make_small_cg(const char *what)
{
    char id[48];
    make_id(id, sizeof id, what);
    struct nsbox_limits lim = {.cpus = 1, .memory_bytes = 64u << 20, .pids = 16};
    struct nsbox_err e = {0};
    assert_int_equal(nsbox_cgroup_create(id, &lim, &g_cg, &e), 0);
}

/* fn run as pid 1 of a pid and mount namespace of its own, whose processes die with it: its
 * exit code (a skip where no such namespace can be made). */
static int in_pid_ns(int (*fn)(void))
{
    pid_t helper = fork_tracked();
    if (helper == 0) {
        if (unshare(CLONE_NEWPID | CLONE_NEWNS) < 0)
            _exit(10);
        pid_t init = fork();
        if (init == 0)
            _exit(fn());
        int ws;
        _exit(init > 0 && waitpid(init, &ws, 0) == init && WIFEXITED(ws) ? WEXITSTATUS(ws) : 16);
    }
    int code = WEXITSTATUS(reap(helper));
    if (code == 10) {
        print_message("skipped: cannot make a pid and mount namespace here\n");
        skip();
    }
    return code;
}

/* A pid listed in the cgroup whose process has ended and whose number another process outside
 * it has been given: kill --all's signal must not reach that process (it reached it when each
 * listed pid was sent kill(2)). */
static void test_signal_skips_a_listed_pid_given_to_another_process(void **state)
{
    (void)state;
    REQUIRE_LIVE();
    make_small_cg("reuse");
    assert_int_equal(in_pid_ns(pid_reuse_case), 0);
}

/* destroy's kill round, on the real kernel: a listed process (g_reuse_a) ends, and a process
 * outside the cgroup is given its pid, just before the round opens that pid's pidfd (the seam's
 * pidfd_open, wrapped). */
static pid_t g_reuse_a, g_reuse_b;
static const struct nsbox_cg_sys *g_real_sys;
static int reuse_pidfd_open(pid_t pid)
{
    if (pid == g_reuse_a && g_reuse_b == 0) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        FILE *f = fopen("/proc/sys/kernel/ns_last_pid", "w");
        if (f && fprintf(f, "%d", (int)pid - 1) >= 0 && fclose(f) == 0)
            g_reuse_b = fork_waiting();
        else if (f)
            fclose(f);
    }
    return g_real_sys->pidfd_open(pid);
}

/* As pid 1 of its own pid namespace: a and d in the cgroup, destroyed with a's pid given to b
 * on the way. 0: d killed, b alive; 20: b killed; 30: the round never opened a's pidfd (v2's
 * cgroup.kill killed them: nothing to show); 1x: set-up failed. */
static int destroy_reuse_case(void)
{
    struct nsbox_err e;
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
        mount("proc", "/proc", "proc", 0, NULL) < 0)
        return 10;
    pid_t a = fork_waiting(), d = fork_waiting();
    if (a < 0 || d < 0 || nsbox_cgroup_attach(&g_cg, a, &e) < 0 ||
        nsbox_cgroup_attach(&g_cg, d, &e) < 0)
        return 11;
    g_real_sys = nsbox_cgio_sys;
    struct nsbox_cg_sys wrap = *g_real_sys;
    wrap.pidfd_open = reuse_pidfd_open;
    g_reuse_a = a;
    nsbox_cgio_set_sys(&wrap);
    int r = nsbox_cgroup_destroy(&g_cg, &e);
    nsbox_cgio_set_sys(NULL);
    if (r < 0)
        return 14;
    if (g_reuse_b == 0)
        return 30;
    if (g_reuse_b != a)
        return 13;
    int ws;
    if (waitpid(d, &ws, 0) != d || !WIFSIGNALED(ws))
        return 15;
    return waitpid(g_reuse_b, &ws, WNOHANG) == 0 ? 0 : 20;
}

/* The same for a sandbox's removal on cgroup v1 (and v2 without cgroup.kill), whose first kill
 * round reads the pids while the sandbox runs: the host's process never gets its SIGKILL. */
static void test_destroy_skips_a_listed_pid_given_to_another_process(void **state)
{
    (void)state;
    REQUIRE_LIVE();
    make_small_cg("dreuse");
    char kill_file[PATH_MAX];
    snprintf(kill_file, sizeof kill_file, "%s/cgroup.kill", g_cg.path);
    bool has_kill = g_cg.version == 2 && access(kill_file, F_OK) == 0;
    int code = in_pid_ns(destroy_reuse_case);
    if (code == 30 && has_kill) {
        print_message("skipped: cgroup.kill removes the cgroup here, no pid is signalled\n");
        skip();
    }
    assert_int_equal(code, 0);
}

static void do_exit_now(void *arg)
{
    (void)arg;
}

/* A process that forks until it and its children are n, says so on ready, and waits. */
struct herd {
    int ready, n;
};
static void do_fork_herd(void *arg)
{
    const struct herd *m = arg;
    pid_t self = getpid();
    for (int i = 1; i < m->n; i++)
        if (fork() == 0) {
            child_init(self);
            do_sleep(NULL);
        }
    if (write(m->ready, "r", 1) != 1)
        _exit(101);
    do_sleep(NULL);
}

static void test_timing(void **state)
{
    (void)state;
    REQUIRE_LIVE();
    struct nsbox_limits lim = {.cpus = 2, .memory_bytes = 1u << 30, .pids = 256};
    struct nsbox_err e = {0};
    char id[48];

    /* Discovery, cold (what the first sandbox of a process pays once). */
    nsbox_cgroup_set_sys(NULL);
    struct nsbox_cgroup_support sup;
    uint64_t t0 = now_us();
    nsbox_cgroup_detect(&sup);
    uint64_t detect_us = now_us() - t0;

    /* (a) create + destroy of an empty cgroup. */
    const int na = 200;
    uint64_t a_create = 0, a_destroy = 0;
    for (int i = 0; i < na; i++) {
        make_id(id, sizeof id, "tima");
        t0 = now_us();
        assert_int_equal(nsbox_cgroup_create(id, &lim, &g_cg, &e), 0);
        uint64_t t1 = now_us();
        assert_int_equal(nsbox_cgroup_destroy(&g_cg, &e), 0);
        a_create += t1 - t0;
        a_destroy += now_us() - t1;
    }

    /* (b) the `nsbox run` path: create, attach, the command exits and is reaped, destroy.
     * Only the cgroup calls are timed. */
    const int nb = 100;
    uint64_t b_total = 0, b_attach = 0;
    for (int i = 0; i < nb; i++) {
        make_id(id, sizeof id, "timb");
        int go[2];
        assert_int_equal(pipe(go), 0);
        pid_t pid = spawn(go, do_exit_now, NULL);
        t0 = now_us();
        assert_int_equal(nsbox_cgroup_create(id, &lim, &g_cg, &e), 0);
        uint64_t t1 = now_us();
        assert_int_equal(nsbox_cgroup_attach(&g_cg, pid, &e), 0);
        uint64_t t2 = now_us();
        b_attach += t2 - t1;
        b_total += t2 - t0;
        assert_int_equal(write(go[1], "g", 1), 1);
        reap(pid);
        t0 = now_us();
        assert_int_equal(nsbox_cgroup_destroy(&g_cg, &e), 0);
        b_total += now_us() - t0;
        close(go[0]);
        close(go[1]);
    }

    /* (c) destroy that has to kill a live process (ttl expiry, `nsbox rm`). */
    const int nc = 50;
    uint64_t c_destroy = 0;
    for (int i = 0; i < nc; i++) {
        make_id(id, sizeof id, "timc");
        pid_t pid = spawn(NULL, do_sleep, NULL);
        assert_int_equal(nsbox_cgroup_create(id, &lim, &g_cg, &e), 0);
        assert_int_equal(nsbox_cgroup_attach(&g_cg, pid, &e), 0);
        t0 = now_us();
        assert_int_equal(nsbox_cgroup_destroy(&g_cg, &e), 0);
        c_destroy += now_us() - t0;
        reap(pid);
    }

    /* (d) destroy that has to kill 200 processes that are no pid namespace's init (a sandbox's
     * removal when its init ended first, or v2 without cgroup.kill): each is signalled. */
    const int nd = 10;
    uint64_t d_destroy = 0;
    for (int i = 0; i < nd; i++) {
        make_id(id, sizeof id, "timd");
        int go[2], ready[2];
        assert_int_equal(pipe(go), 0);
        assert_int_equal(pipe(ready), 0);
        struct herd m = {.ready = ready[1], .n = 200};
        pid_t pid = spawn(go, do_fork_herd, &m);
        assert_int_equal(nsbox_cgroup_create(id, &lim, &g_cg, &e), 0);
        assert_int_equal(nsbox_cgroup_attach(&g_cg, pid, &e), 0);
        assert_int_equal(write(go[1], "g", 1), 1);
        char c;
        assert_int_equal(read(ready[0], &c, 1), 1);
        t0 = now_us();
        assert_int_equal(nsbox_cgroup_destroy(&g_cg, &e), 0);
        d_destroy += now_us() - t0;
        reap(pid);
        close(go[0]);
        close(go[1]);
        close(ready[0]);
        close(ready[1]);
    }
    print_message("cgroup v%d timings: detect (cold, once per process) %" PRIu64 " us\n",
                  sup.version, detect_us);
    print_message("  create %" PRIu64 " us + destroy(empty) %" PRIu64 " us (mean of %d)\n",
                  a_create / na, a_destroy / na, na);
    print_message("  create+attach+destroy after exit %" PRIu64 " us, of which attach %" PRIu64
                  " us (mean of %d)\n",
                  b_total / nb, b_attach / nb, nb);
    print_message("  destroy killing a live process %" PRIu64 " us (mean of %d)\n",
                  c_destroy / nc, nc);
    print_message("  destroy killing 200 processes %" PRIu64 " us (mean of %d)\n",
                  d_destroy / nd, nd);
    /* Printed only: speed is the benchmarks' business (bench/), not a timed assertion's, and
     * the cgroup-v2 test VM emulates its CPU. */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_limits_attach_freeze_stats_destroy, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pids_limit_enforced_and_destroy_kills_all, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_memory_limit_enforced, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cpu_limit_enforced, setup, teardown),
        cmocka_unit_test_setup_teardown(test_destroy_fork_bomb, setup, teardown),
        cmocka_unit_test_setup_teardown(test_remove_by_id_after_crash, setup, teardown),
        cmocka_unit_test_setup_teardown(test_failed_create_leaves_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_signal_skips_a_listed_pid_given_to_another_process,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_destroy_skips_a_listed_pid_given_to_another_process,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_timing, setup, teardown),
    };
    return cmocka_run_group_tests(tests, group_setup, NULL);
}
