/* policy/grow.c: the growing array's sizes, its bound, and that a refusal changes nothing. */
#include "grow.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

static void test_doubles_from_first(void **state)
{
    (void)state;
    int *v = NULL;
    size_t cap = 0;
    size_t seen[5], k = 0;
    for (size_t n = 0; n < 100; n++) {
        size_t before = cap;
        assert_int_equal(nsbox_grow(&v, &cap, n, sizeof *v, 4, 0), 0);
        assert_true(cap > n);
        if (cap != before && k < 5)
            seen[k++] = cap;
        v[n] = (int)n;
    }
    assert_int_equal(k, 5);
    assert_int_equal(seen[0], 4);
    assert_int_equal(seen[1], 8);
    assert_int_equal(seen[4], 64);
    for (int n = 0; n < 100; n++)
        assert_int_equal(v[n], n); /* what was there is kept through each realloc */
    free(v);
}

static void test_bound_is_kept(void **state)
{
    (void)state;
    long *v = NULL;
    size_t cap = 0;
    for (size_t n = 0; n < 10; n++)
        assert_int_equal(nsbox_grow(&v, &cap, n, sizeof *v, 8, 10), 0);
    assert_int_equal(cap, 10); /* 8, then 16 cut to the bound */
    long *before = v;
    errno = 0;
    assert_int_equal(nsbox_grow(&v, &cap, 10, sizeof *v, 8, 10), -1);
    assert_int_equal(errno, ENOMEM);
    assert_ptr_equal(v, before);
    assert_int_equal(cap, 10);
    free(v);
}

static void test_overflow_refused(void **state)
{
    (void)state;
    char *v = NULL;
    size_t cap = SIZE_MAX / 2 + 1; /* doubling would wrap */
    assert_int_equal(nsbox_grow(&v, &cap, cap, 2, 8, 0), -1);
    assert_int_equal(errno, ENOMEM);
    assert_null(v);
    assert_int_equal(cap, SIZE_MAX / 2 + 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_doubles_from_first),
        cmocka_unit_test(test_bound_is_kept),
        cmocka_unit_test(test_overflow_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
