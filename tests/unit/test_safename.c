/* A name that is one path component (policy/safename.c): what passes, what never does, and that
 * only the len bytes given are read (a component cut from a longer path). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "safename.h"

#include <string.h>

static bool valid(const char *s)
{
    return nsbox_safename_valid(s, strlen(s));
}

static void test_names(void **state)
{
    (void)state;
    const char *good[] = {"a", "Z", "0", "a1b2-c3.d_4", "my.volume", "x..y", "9-", "A_"};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
        assert_true(valid(good[i]));
    const char *bad[] = {"",    ".",   "..", ".x",    "-x",  "_x",  "a/b", "../x", "a b",
                         "x\n", "x\t", "é",  "a\x7f", "a:b", "a+b", "a@b", "/a",   "a/"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (valid(bad[i]))
            fail_msg("'%s' passed", bad[i]);
}

static void test_only_len_bytes_are_read(void **state)
{
    (void)state;
    const char *path = "volumes/my-vol/_data";
    assert_true(nsbox_safename_valid(path + 8, 6));  /* "my-vol" */
    assert_false(nsbox_safename_valid(path + 8, 7)); /* "my-vol/" */
    assert_false(nsbox_safename_valid(path, 0));
    assert_false(nsbox_safename_valid(NULL, 0));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_only_len_bytes_are_read),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
