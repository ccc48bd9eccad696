/* The places a command name is looked for (policy/pathsearch.c): the same for init's exec of
 * an agent's command and nsbox-oci's check at create, in execvp's order and with its meanings
 * (an unset PATH, an empty entry, a name with a '/', a place too long). */
#include "pathsearch.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

/* Every place of the search, joined with '|'; a place too long for buf is "(long)". */
static const char *places(const char *name, const char *path, const char *cwd, size_t size)
{
    static char all[1024];
    char buf[64];
    const char *out;
    struct nsbox_pathsearch s;
    int r, n = 0;
    all[0] = '\0';
    assert_true(size <= sizeof buf);
    nsbox_pathsearch_init(&s, name, path, cwd);
    while ((r = nsbox_pathsearch_next(&s, buf, size, &out)) != 0) {
        n +=
            snprintf(all + n, sizeof all - (size_t)n, "%s%s", n ? "|" : "", r < 0 ? "(long)" : out);
        assert_true((size_t)n < sizeof all);
    }
    assert_int_equal(nsbox_pathsearch_next(&s, buf, size, &out), 0); /* and stays done */
    return all;
}

static void test_path_entries(void **state)
{
    (void)state;
    assert_string_equal(places("ls", "/usr/local/bin:/bin", "/w", 64), "/usr/local/bin/ls|/bin/ls");
    /* unset: glibc execvp's default; set but empty: one empty entry, the working directory */
    assert_string_equal(places("ls", NULL, "/w", 64), "/bin/ls|/usr/bin/ls");
    assert_string_equal(places("ls", "", "/w", 64), "/w/ls");
    /* an empty entry anywhere is the command's cwd, whichever caller asks */
    assert_string_equal(places("tool", ":/bin::/x:", "/work", 64),
                        "/work/tool|/bin/tool|/work/tool|/x/tool|/work/tool");
    assert_string_equal(places("tool", "/bin:", ".", 64), "/bin/tool|./tool");
    assert_string_equal(places("tool", ":", "/", 64), "/tool|/tool");
    assert_string_equal(places("tool", "/opt/", "/", 64), "/opt/tool");
}

static void test_names_with_a_slash(void **state)
{
    (void)state;
    /* one place, PATH not read */
    assert_string_equal(places("/bin/sh", "/usr/bin", "/w", 64), "/bin/sh");
    assert_string_equal(places("./run.sh", "/usr/bin", "/w", 64), "/w/./run.sh");
    assert_string_equal(places("bin/tool", NULL, ".", 64), "./bin/tool");
    /* an empty name is nowhere (execvp: ENOENT) */
    assert_string_equal(places("", "/bin", "/w", 64), "");
}

static void test_too_long(void **state)
{
    (void)state;
    /* a place that does not fit is given as such, and the search goes on past it */
    assert_string_equal(places("tool", "/a-long-directory:/b", "/w", 12), "(long)|/b/tool");
    /* exactly fitting, with its terminating NUL: "/b/tool" is 8 bytes */
    assert_string_equal(places("tool", "/b", "/w", 8), "/b/tool");
    assert_string_equal(places("tool", "/b", "/w", 7), "(long)");
    /* an absolute name is not copied: it fits whatever buf is */
    assert_string_equal(places("/a/long/name", NULL, "/w", 4), "/a/long/name");
}

static void test_env(void **state)
{
    (void)state;
    char *env[] = {"PATHX=/no", "HOME=/w", "PATH=/bin:/sbin", "PATH=/second", NULL};
    assert_string_equal(nsbox_pathsearch_env(env), "/bin:/sbin");
    char *none[] = {"HOME=/w", NULL};
    assert_null(nsbox_pathsearch_env(none));
    assert_null(nsbox_pathsearch_env(NULL));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_path_entries),
        cmocka_unit_test(test_names_with_a_slash),
        cmocka_unit_test(test_too_long),
        cmocka_unit_test(test_env),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
