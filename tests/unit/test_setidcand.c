/* A layer entry's part in the overlay root's set-id seal (policy/setidcand.c): which regular
 * files are programs the seal must look at, which directories the container's root may be
 * unable to list, and the order that keeps what is below a directory just after it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "setidcand.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static void test_files(void **state)
{
    (void)state;
    assert_int_equal(nsbox_setidcand_of(S_IFREG | 04755, 0, 0, false, false), NSBOX_SETIDCAND_FILE);
    assert_int_equal(nsbox_setidcand_of(S_IFREG | 04000, 1000, 1000, false, false),
                     NSBOX_SETIDCAND_FILE);
    assert_int_equal(nsbox_setidcand_of(S_IFREG | 02755, 0, 0, false, false), NSBOX_SETIDCAND_FILE);
    /* set-group-ID without group execute: mandatory locking, no program */
    assert_int_equal(nsbox_setidcand_of(S_IFREG | 02745, 0, 0, false, false), NSBOX_SETIDCAND_NONE);
    assert_int_equal(nsbox_setidcand_of(S_IFREG | 0755, 0, 0, false, false), NSBOX_SETIDCAND_NONE);
    /* a capability, even on a file nobody may run yet (chmod +x keeps it) */
    assert_int_equal(nsbox_setidcand_of(S_IFREG | 0644, 0, 0, true, false), NSBOX_SETIDCAND_FILE);
    /* an owner the idmap does not map changes nothing for a file: the merged view says */
    assert_int_equal(nsbox_setidcand_of(S_IFREG | 0755, 70000, 70000, false, true),
                     NSBOX_SETIDCAND_NONE);
    /* symlinks, devices (whiteouts), pipes: never */
    assert_int_equal(nsbox_setidcand_of(S_IFLNK | 04777, 0, 0, true, false), NSBOX_SETIDCAND_NONE);
    assert_int_equal(nsbox_setidcand_of(S_IFCHR | 04600, 0, 0, true, false), NSBOX_SETIDCAND_NONE);
    assert_int_equal(nsbox_setidcand_of(S_IFIFO | 04600, 0, 0, false, false), NSBOX_SETIDCAND_NONE);
}

static void test_directories(void **state)
{
    (void)state;
    assert_int_equal(nsbox_setidcand_of(S_IFDIR | 0755, 0, 0, false, false), NSBOX_SETIDCAND_NONE);
    assert_int_equal(nsbox_setidcand_of(S_IFDIR | 01777, 65535, 65535, false, false),
                     NSBOX_SETIDCAND_NONE);
    /* no capability of the container's root overrides the modes of an unmapped owner */
    assert_int_equal(nsbox_setidcand_of(S_IFDIR | 0755, 65536, 0, false, false),
                     NSBOX_SETIDCAND_DIR);
    assert_int_equal(nsbox_setidcand_of(S_IFDIR | 0755, 0, 70000, false, false),
                     NSBOX_SETIDCAND_DIR);
    /* a mode that does not let everyone list and search it */
    assert_int_equal(nsbox_setidcand_of(S_IFDIR | 0711, 0, 0, false, false), NSBOX_SETIDCAND_DIR);
    assert_int_equal(nsbox_setidcand_of(S_IFDIR | 0700, 1000, 1000, false, false),
                     NSBOX_SETIDCAND_DIR);
    assert_int_equal(nsbox_setidcand_of(S_IFDIR | 0754, 0, 0, false, false), NSBOX_SETIDCAND_DIR);
    /* an ACL may refuse one user what the mode's other bits grant */
    assert_int_equal(nsbox_setidcand_of(S_IFDIR | 0755, 0, 0, false, true), NSBOX_SETIDCAND_DIR);
}

static int by_cmp(const void *a, const void *b)
{
    return nsbox_setidcand_cmp(*(const char *const *)a, *(const char *const *)b);
}

static void test_order_keeps_a_directory_with_what_is_below(void **state)
{
    (void)state;
    const char *paths[] = {"a!", "a/b", "b", "a", "a-c/x", "a/b/c", "a/!", "a.b", ""};
    const char *want[] = {"", "a", "a/!", "a/b", "a/b/c", "a!", "a-c/x", "a.b", "b"};
    qsort(paths, 9, sizeof *paths, by_cmp);
    for (int i = 0; i < 9; i++)
        assert_string_equal(paths[i], want[i]);
    assert_true(nsbox_setidcand_cmp("a", "a") == 0);
    assert_true(nsbox_setidcand_cmp("a/b", "a!") < 0);
    assert_true(nsbox_setidcand_cmp("\xff", "a") > 0);
    /* in strcmp's order a sibling would come between a directory and what is below it */
    assert_true(strcmp("a/b", "a!") > 0);
}

static void test_below(void **state)
{
    (void)state;
    assert_true(nsbox_setidcand_below("a", "a"));
    assert_true(nsbox_setidcand_below("a", "a/b"));
    assert_true(nsbox_setidcand_below("a/b", "a/b/c/d"));
    assert_false(nsbox_setidcand_below("a", "ab"));
    assert_false(nsbox_setidcand_below("a/b", "a"));
    assert_false(nsbox_setidcand_below("a/b", "a/bc"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_files),
        cmocka_unit_test(test_directories),
        cmocka_unit_test(test_order_keeps_a_directory_with_what_is_below),
        cmocka_unit_test(test_below),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
