/* The ISA-L release nsbox may call (policy/isalver.c): only the build's, by the loaded file's
 * real name. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "isalver.h"

static void test_the_builds_release_matches(void **state)
{
    (void)state;
    assert_true(nsbox_isalver_matches("libisal.so.2.0.30", 2, 30));
    assert_true(nsbox_isalver_matches("/usr/lib/x86_64-linux-gnu/libisal.so.2.0.30", 2, 30));
    assert_true(nsbox_isalver_matches("/opt/isal/libisal.so.2.0.31", 2, 31));
}

static void test_other_releases_and_names_do_not(void **state)
{
    (void)state;
    const char *bad[] = {"libisal.so.2.0.29",
                         "libisal.so.2.0.31",
                         "libisal.so.2.0.300",
                         "libisal.so.2.0.3",
                         "libisal.so.2.0.030",
                         "libisal.so.2",
                         "libisal.so.2.30",
                         "libisal.so.3.0.30",
                         "libisal.so.2.1.30",
                         "libisal.so.2.0.30.bak",
                         "libisal.so.2.0.30/",
                         "/usr/lib/libisal.so.2.0.30/x",
                         "xlibisal.so.2.0.30",
                         "libz.so.1.2.13",
                         "",
                         "/",
                         "garbage"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (nsbox_isalver_matches(bad[i], 2, 30))
            fail_msg("'%s' matched 2.30", bad[i]);
    assert_false(nsbox_isalver_matches(NULL, 2, 30));
    assert_false(nsbox_isalver_matches("libisal.so.2.0.30", -1, 30));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_the_builds_release_matches),
        cmocka_unit_test(test_other_releases_and_names_do_not),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
