/* A field of the mount table unescaped (policy/mntescape.c), for both of its readers: the
 * overlay's (ovlinfo.c, control characters refused, in place) and the cgroup code's
 * (cgroup_util.c, control characters kept, into a buffer of its own). */
#include "mntescape.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <string.h>

/* s (its strlen) decoded into a buffer of n bytes; NULL, with errno, when refused. */
static const char *decoded(const char *s, size_t n, bool refuse_control)
{
    static char out[256];
    assert_true(n <= sizeof out);
    memset(out, 'X', sizeof out);
    return nsbox_mntescape_decode(s, strlen(s), out, n, refuse_control) == 0 ? out : NULL;
}

static void test_escapes(void **state)
{
    (void)state;
    assert_string_equal(decoded("/plain/path", 64, true), "/plain/path");
    assert_string_equal(decoded("", 1, true), "");
    assert_string_equal(decoded("/with\\040space", 64, true), "/with space");
    assert_string_equal(decoded("back\\134slash", 64, true), "back\\slash");
    assert_string_equal(decoded("a\\054b\\075c", 64, true), "a,b=c");
    assert_string_equal(decoded("/end\\040", 64, true), "/end ");
    assert_string_equal(decoded("\\377", 64, true), "\377");
    /* not an escape: left as it is */
    assert_string_equal(decoded("\\400", 64, true), "\\400");
    assert_string_equal(decoded("\\08", 64, true), "\\08");
    assert_string_equal(decoded("/cut\\04", 64, true), "/cut\\04");
    assert_string_equal(decoded("/cut\\", 64, true), "/cut\\");
}

static void test_control_characters(void **state)
{
    (void)state;
    const char *const refused[] = {"/tab\\011", "/nl\\012",  "/nul\\000x",
                                   "/del\\177", "/raw\ttab", "/raw\x7f"};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        errno = 0;
        assert_null(decoded(refused[i], 64, true));
        assert_int_equal(errno, EINVAL);
    }
    /* the cgroup reader keeps them */
    assert_string_equal(decoded("/a\\011b", 64, false), "/a\tb");
    assert_string_equal(decoded("/a\\012b\x7f", 64, false), "/a\nb\x7f");
    assert_string_equal(decoded("/raw\ttab", 64, false), "/raw\ttab");
}

static void test_room(void **state)
{
    (void)state;
    /* "/x y" and its NUL: 5 bytes, from 7 escaped ones */
    assert_string_equal(decoded("/x\\040y", 5, false), "/x y");
    errno = 0;
    assert_null(decoded("/x\\040y", 4, false));
    assert_int_equal(errno, ENAMETOOLONG);
    errno = 0;
    assert_null(decoded("", 0, false));
    assert_int_equal(errno, ENAMETOOLONG);
    /* only len bytes are read: the field ends where its separator is */
    char out[16];
    assert_int_equal(nsbox_mntescape_decode("/a\\040b /next", 7, out, sizeof out, true), 0);
    assert_string_equal(out, "/a b");
    /* an escape cut by len is no escape */
    assert_int_equal(nsbox_mntescape_decode("/a\\040", 5, out, sizeof out, true), 0);
    assert_string_equal(out, "/a\\04");
}

static void test_in_place(void **state)
{
    (void)state;
    char field[] = "/run/t\\0401/root\\134fs";
    size_t len = strlen(field);
    assert_int_equal(nsbox_mntescape_decode(field, len, field, len + 1, true), 0);
    assert_string_equal(field, "/run/t 1/root\\fs");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_escapes),
        cmocka_unit_test(test_control_characters),
        cmocka_unit_test(test_room),
        cmocka_unit_test(test_in_place),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
