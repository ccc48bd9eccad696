/* The overlay of an image's layers made for a user who is not root (rootfs/oci_overlay.c): a
 * helper child in a user and mount namespace of its own mounts it and hands it back. Run as an
 * unprivileged user (root's test drops to nobody in a child), from a process alone and from one
 * with another thread running, as `nsbox run`'s is (its relays). Under ThreadSanitizer (the
 * NSBOX_TSAN build) a forked child of a process alone is not alone (the sanitizer starts its
 * thread there), so a helper made by fork and then unshare(CLONE_NEWUSER) fails (EINVAL): this
 * test fails in that build unless the helper is cloned into its namespaces. The decision that a
 * failed overlay of an engine's layers was the kernel refusing metacopy is tested here too. */
#define _GNU_SOURCE
#include "oci_overlay.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#define SKIPPED 77

static char dir[64];

static void put_file(const char *rel, const char *text)
{
    char p[128];
    snprintf(p, sizeof p, "%s/%s", dir, rel);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fputs(text, f);
    assert_int_equal(fclose(f), 0);
    assert_int_equal(chmod(p, 0644), 0);
}

static int setup(void **state)
{
    snprintf(dir, sizeof dir, "/tmp/nsbox-test-overlay-XXXXXX");
    if (!mkdtemp(dir) || chmod(dir, 0755) < 0)
        return -1;
    static const char *const dirs[] = {"top", "low"};
    for (size_t i = 0; i < 2; i++) {
        char p[128];
        snprintf(p, sizeof p, "%s/%s", dir, dirs[i]);
        if (mkdir(p, 0755) < 0)
            return -1;
    }
    put_file("top/a", "from the top\n");
    put_file("low/a", "hidden\n");
    put_file("low/b", "from below\n");
    return 0;
}

static int teardown(void **state)
{
    static const char *const files[] = {"top/a", "low/a", "low/b", "top", "low", ""};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char p[128];
        snprintf(p, sizeof p, "%s/%s", dir, files[i]);
        remove(p);
    }
    return 0;
}

/* Is the kernel at least major.minor? */
static bool kernel_at_least(int major, int minor)
{
    struct utsname u;
    int ma = 0, mi = 0;
    return uname(&u) == 0 && sscanf(u.release, "%d.%d", &ma, &mi) == 2 &&
           (ma > major || (ma == major && mi >= minor));
}

/* Can this user make a user namespace here at all (not the code under test's way)? */
static int userns_refused(void)
{
    pid_t pid = nsbox_clone_bare(CLONE_NEWUSER | SIGCHLD);
    if (pid == 0)
        _exit(0);
    if (pid < 0)
        return errno;
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    return 0;
}

static int blocker[2];

static void *blocked(void *arg)
{
    char c;
    while (read(blocker[0], &c, 1) < 0 && errno == EINTR) {
    }
    return NULL;
}

static int read_at(int fd, const char *rel, char *buf, size_t n)
{
    int f = openat(fd, rel, O_RDONLY | O_CLOEXEC);
    ssize_t got = f < 0 ? -1 : read(f, buf, n - 1);
    if (f >= 0)
        close(f);
    if (got < 0)
        return -1;
    buf[got] = '\0';
    return 0;
}

/* The overlay, read back: 0 when it is right, else the step that failed (its message said). */
static int overlay_read_back(void)
{
    const char *rel[] = {"top", "low"};
    struct nsbox_err e = {0};
    int m = -1;
    if (nsbox_oci_overlay_lowers(dir, -1, rel, 2, &m, &e) < 0) {
        fprintf(stderr, "%s\n", e.msg);
        return 4;
    }
    char a[64], b[64];
    int r = read_at(m, "a", a, sizeof a) < 0 || read_at(m, "b", b, sizeof b) < 0 ? 5
            : strcmp(a, "from the top\n") || strcmp(b, "from below\n")           ? 6
                                                                                 : 0;
    close(m);
    return r;
}

/* The child's part: exit status 0 (the overlay is right both times), SKIPPED, or the step
 * that failed. */
static int overlay_as_a_user(void)
{
    if (getuid() == 0 && (setgroups(0, NULL) < 0 || setresgid(65534, 65534, 65534) < 0 ||
                          setresuid(65534, 65534, 65534) < 0))
        return 2;
    /* as a user's own process is (a change of ids made this one undumpable, which gives its
     * /proc files, uid_map among them, to root) */
    if (prctl(PR_SET_DUMPABLE, 1) < 0)
        return 2;
    int refused = userns_refused();
    if (refused) {
        fprintf(stderr, "skipped: this user cannot make a user namespace here: %s\n",
                strerror(refused));
        return SKIPPED;
    }
    int r = overlay_read_back(); /* alone: under ThreadSanitizer a fork is not */
    if (r)
        return r;
    pthread_t t;
    if (pipe2(blocker, O_CLOEXEC) < 0 || pthread_create(&t, NULL, blocked, NULL) != 0)
        return 3;
    r = overlay_read_back(); /* beside a thread, as `nsbox run`'s relays are */
    close(blocker[1]);
    pthread_join(t, NULL);
    return r;
}

static void test_overlay_as_a_user_alone_and_beside_a_thread(void **state)
{
    if (!kernel_at_least(5, 11)) {
        fprintf(stderr, "skipped: overlays in a user namespace need Linux 5.11\n");
        skip();
    }
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0)
        _exit(overlay_as_a_user());
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    if (WEXITSTATUS(status) == SKIPPED)
        skip();
    assert_int_equal(WEXITSTATUS(status), 0);
}

static struct nsbox_oci_overlay_fail failed(int step, int err, const char *log)
{
    struct nsbox_oci_overlay_fail f = {.step = step, .err = err};
    snprintf(f.log, sizeof f.log, "%s", log);
    return f;
}

/* The advice to mount without metacopy follows the kernel's refusal of metacopy, not any
 * failure of an overlay made with it (a workdir that could not be opened, a lower layer the
 * kernel could not resolve, an idmapped mount the filesystem has not). */
static void test_metacopy_refused_only_when_the_kernel_refused_it(void **state)
{
    (void)state;
    struct nsbox_oci_overlay_fail f[] = {
        failed(NSBOX_OCI_OVERLAY_METACOPY, EINVAL, ""),
        failed(NSBOX_OCI_OVERLAY_CREATE, EINVAL, "overlay: conflicting options: metacopy=on"),
    };
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        assert_true(nsbox_oci_overlay_metacopy_refused(&f[i]));
    struct nsbox_oci_overlay_fail other[] = {
        failed(0, 0, ""), /* not the kernel's refusal of the mount: an idmapped clone, say */
        failed(NSBOX_OCI_OVERLAY_CREATE, EINVAL, ""),
        failed(NSBOX_OCI_OVERLAY_CREATE, EINVAL, "overlay: failed to resolve 'x': -2"),
        failed(NSBOX_OCI_OVERLAY_CREATE, ENOMEM, "metacopy"),
        failed(NSBOX_OCI_OVERLAY_WORKDIR, EINVAL, ""),
        failed(NSBOX_OCI_OVERLAY_UPPERDIR, EXDEV, ""),
        failed(NSBOX_OCI_OVERLAY_LOWERDIR, ENOENT, ""),
        failed(NSBOX_OCI_OVERLAY_OPTION, EINVAL, "overlay: Bad value for 'redirect_dir'"),
        failed(NSBOX_OCI_OVERLAY_MOUNT, EPERM, ""),
    };
    for (size_t i = 0; i < sizeof other / sizeof other[0]; i++)
        assert_false(nsbox_oci_overlay_metacopy_refused(&other[i]));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_metacopy_refused_only_when_the_kernel_refused_it),
        cmocka_unit_test_setup_teardown(test_overlay_as_a_user_alone_and_beside_a_thread, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
