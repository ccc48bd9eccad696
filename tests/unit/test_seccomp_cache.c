/* The seccomp cache's key (what a compiled program depends on, the late-call table among it)
 * and an OCI bundle's programs in the cache: one file per profile text, reused, never another
 * text's; and the files under a key no longer made pruned, and nothing else. */
#include "seccomp_prog.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static const char profile_a[] = "{\"defaultAction\":\"SCMP_ACT_ALLOW\",\"syscalls\":[{\"names\":"
                                "[\"mkdir\",\"mkdirat\"],\"action\":\"SCMP_ACT_ERRNO\"}]}";
static const char profile_b[] = "{\"defaultAction\":\"SCMP_ACT_ALLOW\",\"syscalls\":[{\"names\":"
                                "[\"chmod\"],\"action\":\"SCMP_ACT_ERRNO\"}]}";

/* The late-call table of this build with one call more: a later build's. */
static void test_key_covers_late_calls(void **state)
{
    (void)state;
    size_t n;
    const struct nsbox_seccomp_late_call *t = nsbox_seccomp_names_late(&n);
    assert_true(n > 0);
    struct nsbox_seccomp_late_call *more = calloc(n + 1, sizeof *more);
    assert_non_null(more);
    memcpy(more, t, n * sizeof *t);
    more[n] = (struct nsbox_seccomp_late_call){"a_call_of_a_later_kernel", t[n - 1].nr + 1};

    uint64_t same = nsbox_seccomp_names_digest_of(more, n); /* a copy of the table */
    uint64_t grown = nsbox_seccomp_names_digest_of(more, n + 1);
    assert_int_equal(same, nsbox_seccomp_names_digest());
    assert_int_not_equal(grown, same);

    size_t len = strlen(profile_a);
    uint64_t k = nsbox_seccomp_prog_cache_key("oci", nsbox_seccomp_names_digest(), profile_a, len);
    assert_int_equal(nsbox_seccomp_prog_cache_key("oci", same, profile_a, len), k);
    assert_int_not_equal(nsbox_seccomp_prog_cache_key("oci", grown, profile_a, len), k);
    /* and the rest of what the program depends on */
    assert_int_not_equal(nsbox_seccomp_prog_cache_key("nsbox", same, profile_a, len), k);
    assert_int_not_equal(nsbox_seccomp_prog_cache_key("oci", same, profile_b, strlen(profile_b)),
                         k);
    free(more);
}

static char dir[] = "/tmp/nsbox-seccomp-cache-XXXXXX";

/* The names of the cache files in dir, sorted; how many. */
static int cache_files(char names[][64], int max)
{
    struct dirent **ents;
    int n = scandir(dir, &ents, NULL, alphasort), k = 0;
    assert_true(n >= 0);
    for (int i = 0; i < n; i++) {
        if (ents[i]->d_name[0] != '.') {
            assert_true(k < max);
            snprintf(names[k++], 64, "%s", ents[i]->d_name);
        }
        free(ents[i]);
    }
    free(ents);
    return k;
}

static void bundle_prog(const char *text, struct sock_fprog *prog)
{
    struct nsbox_err e = {0};
    struct nsbox_seccomp_profile p;
    assert_int_equal(nsbox_seccomp_profile_parse_oci(text, strlen(text), &p, &e), 0);
    if (nsbox_seccomp_prog_bundle(dir, text, strlen(text), &p, prog, &e) < 0)
        fail_msg("%s", e.msg);
    nsbox_seccomp_profile_free(&p);
}

static ino_t inode(const char *name)
{
    char path[128];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    assert_int_equal(stat(path, &st), 0);
    return st.st_ino;
}

static bool same_prog(const struct sock_fprog *a, const struct sock_fprog *b)
{
    return a->len == b->len && !memcmp(a->filter, b->filter, a->len * sizeof *a->filter);
}

/* The second create of a bundle with the same profile reads the file the first one wrote (a
 * compile would have replaced it: another inode); another profile gets a file of its own. */
static void test_bundle_cached(void **state)
{
    (void)state;
    char names[4][64];
    struct sock_fprog a1, a2, b;
    bundle_prog(profile_a, &a1);
    assert_int_equal(cache_files(names, 4), 1);
    char name_a[64];
    snprintf(name_a, sizeof name_a, "%s", names[0]);
    char want[64];
    snprintf(want, sizeof want, "seccomp-%016" PRIx64 ".bpf",
             nsbox_seccomp_prog_cache_key("oci", nsbox_seccomp_names_digest(), profile_a,
                                          strlen(profile_a)));
    assert_string_equal(name_a, want);
    ino_t first = inode(name_a);

    bundle_prog(profile_a, &a2);
    assert_true(same_prog(&a1, &a2));
    assert_int_equal(cache_files(names, 4), 1);
    assert_int_equal(inode(name_a), first);

    bundle_prog(profile_b, &b);
    assert_false(same_prog(&a1, &b));
    assert_int_equal(cache_files(names, 4), 2);
    assert_int_equal(inode(name_a), first);
    nsbox_seccomp_compile_free(&a1);
    nsbox_seccomp_compile_free(&a2);
    nsbox_seccomp_compile_free(&b);
}

/* A file under a profile's name that holds another text (what a key collision makes: a
 * bundle's author could aim for the name of another profile's file) is not that profile's
 * program: it is compiled, and the file rewritten. Only the text's last byte differs here. */
static void test_bundle_collision(void **state)
{
    (void)state;
    char name[64], path[128];
    snprintf(name, sizeof name, "seccomp-%016" PRIx64 ".bpf",
             nsbox_seccomp_prog_cache_key("oci", nsbox_seccomp_names_digest(), profile_b,
                                          strlen(profile_b)));
    snprintf(path, sizeof path, "%s/%s", dir, name);
    struct sock_fprog b, again;
    bundle_prog(profile_b, &b); /* written by test_bundle_cached */
    int fd = open(path, O_RDWR);
    assert_true(fd >= 0);
    struct stat st;
    assert_int_equal(fstat(fd, &st), 0);
    assert_int_equal(pwrite(fd, "]", 1, st.st_size - 1), 1);
    close(fd);
    ino_t forged = inode(name);

    bundle_prog(profile_b, &again);
    assert_true(same_prog(&again, &b));
    assert_int_not_equal(inode(name), forged);
    char last = 0;
    fd = open(path, O_RDONLY);
    assert_true(fd >= 0);
    assert_int_equal(pread(fd, &last, 1, st.st_size - 1), 1);
    close(fd);
    assert_int_equal(last, '}');
    nsbox_seccomp_compile_free(&b);
    nsbox_seccomp_compile_free(&again);
}

/* dir/name as a path (one of four buffers, so that a call can take two). */
static const char *at(const char *name)
{
    static char paths[4][160];
    static unsigned next;
    char *p = paths[next++ % 4];
    snprintf(p, sizeof paths[0], "%s/%s", dir, name);
    return p;
}

static void copy_file(const char *from, const char *to)
{
    char buf[1 << 16];
    int in = open(at(from), O_RDONLY), out = open(at(to), O_WRONLY | O_CREAT | O_EXCL, 0644);
    assert_true(in >= 0 && out >= 0);
    ssize_t n;
    while ((n = read(in, buf, sizeof buf)) > 0)
        assert_int_equal(write(out, buf, (size_t)n), n);
    assert_int_equal(n, 0);
    close(in);
    close(out);
}

static void make_file(const char *name, const char *text, time_t age)
{
    int fd = open(at(name), O_WRONLY | O_CREAT | O_EXCL, 0644);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    struct timespec t[2] = {{time(NULL) - age, 0}, {time(NULL) - age, 0}};
    assert_int_equal(futimens(fd, t), 0);
    close(fd);
}

static bool present(const char *name)
{
    struct stat st;
    return lstat(at(name), &st) == 0;
}

static void remove_all(const char *path)
{
    DIR *d = opendir(path);
    struct dirent *de;
    char sub[256];
    while (d && (de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        snprintf(sub, sizeof sub, "%s/%s", path, de->d_name);
        if (de->d_type == DT_DIR)
            remove_all(sub);
        else
            unlink(sub);
    }
    if (d)
        closedir(d);
    rmdir(path);
}

/* The files of another build (another nsbox's default program, a bundle's program under an
 * older key, a writer's temporary file an hour old) go; this build's default programs, a
 * bundle's program under its key, a temporary file being written and anything not named as
 * the cache names its files stay, and so do a symlink and a directory named as a cache file
 * and the file the link points to. */
static void test_prune(void **state)
{
    (void)state;
    struct nsbox_err e = {0};
    struct sock_fprog dflt, root;
    char before[8][64], after[8][64], builtin[2][64], bundle[64];
    assert_int_equal(cache_files(before, 8), 2); /* profile_a's and profile_b's */
    nsbox_seccomp_prog_forget();
    if (nsbox_seccomp_prog_default(dir, &dflt, &e) < 0 ||
        nsbox_seccomp_prog_root(dir, &root, &e) < 0)
        fail_msg("%s", e.msg);
    assert_int_equal(cache_files(after, 8), 4);
    for (int i = 0, k = 0; i < 4; i++)
        if (strcmp(after[i], before[0]) && strcmp(after[i], before[1]))
            snprintf(builtin[k++], 64, "%s", after[i]);
    ino_t builtin_ino[2] = {inode(builtin[0]), inode(builtin[1])};
    snprintf(bundle, sizeof bundle, "seccomp-%016" PRIx64 ".bpf",
             nsbox_seccomp_prog_cache_key("oci", nsbox_seccomp_names_digest(), profile_a,
                                          strlen(profile_a)));

    copy_file(builtin[0], "seccomp-00000000000000a0.bpf"); /* another nsbox's default */
    copy_file(bundle, "seccomp-00000000000000a1.bpf");     /* a bundle's, under an older key */
    make_file(".seccomp-00000000000000a2.bpf.41.0.tmp", "x", 2 * 60 * 60); /* a crash's */
    make_file(".seccomp-00000000000000a3.bpf.42.0.tmp", "x", 0);           /* being written */
    make_file("seccomp-a4.bpf", "not a name the cache gives", 0);
    make_file("seccomp-00000000000000A5.bpf", "nor this", 0);
    make_file("notes", "nor this", 0);
    assert_int_equal(mkdir(at("seccomp-00000000000000a6.bpf"), 0700), 0);
    make_file("target", "a file a link points to", 2 * 60 * 60);
    assert_int_equal(symlink("target", at("seccomp-00000000000000a7.bpf")), 0);

    assert_int_equal(nsbox_seccomp_prog_prune(dir), 3);
    assert_false(present("seccomp-00000000000000a0.bpf"));
    assert_false(present("seccomp-00000000000000a1.bpf"));
    assert_false(present(".seccomp-00000000000000a2.bpf.41.0.tmp"));
    const char *stay[] = {".seccomp-00000000000000a3.bpf.42.0.tmp",
                          "seccomp-a4.bpf",
                          "seccomp-00000000000000A5.bpf",
                          "notes",
                          "seccomp-00000000000000a6.bpf",
                          "target",
                          "seccomp-00000000000000a7.bpf",
                          before[0],
                          before[1]};
    for (size_t i = 0; i < sizeof stay / sizeof stay[0]; i++)
        if (!present(stay[i]))
            fail_msg("%s was removed", stay[i]);
    assert_int_equal(nsbox_seccomp_prog_prune(dir), 0); /* nothing more to do */

    /* this build's programs are still read from their files: a compile would replace them */
    struct sock_fprog d2, r2;
    nsbox_seccomp_prog_forget();
    if (nsbox_seccomp_prog_default(dir, &d2, &e) < 0 || nsbox_seccomp_prog_root(dir, &r2, &e) < 0)
        fail_msg("%s", e.msg);
    assert_true(same_prog(&d2, &dflt) && same_prog(&r2, &root));
    assert_int_equal(inode(builtin[0]), builtin_ino[0]);
    assert_int_equal(inode(builtin[1]), builtin_ino[1]);
    nsbox_seccomp_compile_free(&dflt);
    nsbox_seccomp_compile_free(&root);
    nsbox_seccomp_compile_free(&d2);
    nsbox_seccomp_compile_free(&r2);
}

/* A cache directory reached through a symlink is not pruned: the link could lead anywhere. */
static void test_prune_no_link(void **state)
{
    (void)state;
    char link[128];
    snprintf(link, sizeof link, "%s.link", dir);
    assert_int_equal(symlink(dir, link), 0);
    copy_file("notes", "seccomp-00000000000000b0.bpf");
    assert_int_equal(nsbox_seccomp_prog_prune(link), 0);
    assert_true(present("seccomp-00000000000000b0.bpf"));
    unlink(link);
    assert_int_equal(nsbox_seccomp_prog_prune(dir), 1);
}

static int teardown(void **state)
{
    (void)state;
    remove_all(dir);
    return 0;
}

static int setup(void **state)
{
    (void)state;
    return mkdtemp(dir) ? 0 : -1;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_key_covers_late_calls), cmocka_unit_test(test_bundle_cached),
        cmocka_unit_test(test_bundle_collision),      cmocka_unit_test(test_prune),
        cmocka_unit_test(test_prune_no_link),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
