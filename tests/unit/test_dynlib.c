/* Libraries loaded on first use (os/dynlib.h): a table resolved once, the first reason a library
 * could not be had kept, and the package to install named. Real libraries: libm is always there,
 * a soname no package has never is. */
#include "dynlib.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <string.h>

static void test_a_table_is_resolved_once(void **state)
{
    (void)state;
    static struct nsbox_dynlib m = NSBOX_DYNLIB_INIT("libm.so.6", "libc6", RTLD_LAZY);
    double (*c)(double) = NULL, (*s)(double) = NULL;
    const struct nsbox_dynlib_sym syms[] = {{(void **)&c, "cos"}, {(void **)&s, "sin"}};
    struct nsbox_err e = {0};
    assert_int_equal(nsbox_dynlib_load(&m, syms, 2, "maths", &e), 0);
    assert_non_null(c);
    assert_non_null(s);
    assert_true(c(0.0) == 1.0);
    /* a second call finds the table resolved and touches no slot */
    c = NULL;
    assert_int_equal(nsbox_dynlib_load(&m, syms, 2, "maths", &e), 0);
    assert_null(c);
    assert_ptr_equal(nsbox_dynlib_sym(&m, "sin"), (void *)s);
    assert_string_equal(nsbox_dynlib_why(&m), "");
}

static void test_a_missing_library_names_its_package(void **state)
{
    (void)state;
    static struct nsbox_dynlib l =
        NSBOX_DYNLIB_INIT("libnsbox-no-such.so.9", "nsbox-no-such9", RTLD_NOW);
    void *f = NULL;
    const struct nsbox_dynlib_sym syms[] = {{&f, "anything"}};
    struct nsbox_err e = {0};
    assert_int_equal(nsbox_dynlib_load(&l, syms, 1, "the frobnicator needs libnsbox", &e), -1);
    assert_int_equal(e.code, NSBOX_E_UNSUPPORTED);
    assert_int_equal(e.sys_errno, ENOENT);
    assert_non_null(strstr(e.msg, "the frobnicator needs libnsbox (libnsbox-no-such.so.9: "));
    assert_non_null(strstr(e.msg, "; fix: apt-get install nsbox-no-such9"));
    assert_null(f);
    /* the answer is kept: no second dlopen, the same words */
    char first[sizeof e.msg];
    strcpy(first, e.msg);
    struct nsbox_err again = {0};
    assert_int_equal(nsbox_dynlib_load(&l, syms, 1, "the frobnicator needs libnsbox", &again), -1);
    assert_string_equal(again.msg, first);
    assert_null(nsbox_dynlib_sym(&l, "anything"));
    assert_int_equal(nsbox_dynlib_load(&l, syms, 1, "x", NULL), -1); /* no error wanted */
}

static void test_a_missing_symbol_is_the_reason_kept(void **state)
{
    (void)state;
    static struct nsbox_dynlib m = NSBOX_DYNLIB_INIT("libm.so.6", "libc6", RTLD_NOW);
    void *a = NULL, *b = NULL, *c = NULL;
    const struct nsbox_dynlib_sym syms[] = {
        {&a, "cos"}, {&b, "nsbox_no_such_function"}, {&c, "sin"}};
    struct nsbox_err e = {0};
    assert_int_equal(nsbox_dynlib_load(&m, syms, 3, "maths", &e), -1);
    assert_string_equal(
        e.msg, "maths (libm.so.6 lacks nsbox_no_such_function); fix: apt-get install libc6");
    /* a later failure does not overwrite the first reason */
    assert_null(nsbox_dynlib_sym(&m, "nsbox_another_missing_one"));
    assert_string_equal(nsbox_dynlib_why(&m), "libm.so.6 lacks nsbox_no_such_function");
    /* what the library has is still found one by one */
    assert_non_null(nsbox_dynlib_sym(&m, "tan"));
}

static struct nsbox_dynlib shared = NSBOX_DYNLIB_INIT("libm.so.6", "libc6", RTLD_LAZY);
static double (*shared_cos)(double);

static void *load_in_thread(void *arg)
{
    (void)arg;
    const struct nsbox_dynlib_sym syms[] = {{(void **)&shared_cos, "cos"}};
    for (int i = 0; i < 1000; i++)
        if (nsbox_dynlib_load(&shared, syms, 1, "maths", NULL) < 0 || !shared_cos)
            return (void *)1;
    return NULL;
}

static void test_threads_load_together(void **state)
{
    (void)state;
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        assert_int_equal(pthread_create(&t[i], NULL, load_in_thread, NULL), 0);
    for (int i = 0; i < 4; i++) {
        void *r = (void *)1;
        assert_int_equal(pthread_join(t[i], &r), 0);
        assert_null(r);
    }
    assert_true(shared_cos(0.0) == 1.0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_table_is_resolved_once),
        cmocka_unit_test(test_a_missing_library_names_its_package),
        cmocka_unit_test(test_a_missing_symbol_is_the_reason_kept),
        cmocka_unit_test(test_threads_load_together),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
