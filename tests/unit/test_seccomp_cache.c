/* The seccomp cache's key (what a compiled program depends on, the late-call table among it)
 * and an OCI bundle's programs in the cache: one file per profile text, reused, never another
 * text's. */
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

static int teardown(void **state)
{
    (void)state;
    char names[8][64], path[128];
    int n = cache_files(names, 8);
    for (int i = 0; i < n; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        unlink(path);
    }
    return rmdir(dir);
}

static int setup(void **state)
{
    (void)state;
    return mkdtemp(dir) ? 0 : -1;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_key_covers_late_calls),
        cmocka_unit_test(test_bundle_cached),
        cmocka_unit_test(test_bundle_collision),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
