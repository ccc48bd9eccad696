/* The word a user probably meant (policy/suggest.c): typos of options and commands get the
 * closest name, anything else none. */
#include "suggest.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

static const char *const opts[] = {
    "--instance-type", "--idle-timeout", "--ttl", "--region", "--network", "--network-log",
    "--image",         "--timeout",      NULL,    "--cwd",    "--egress",  "-e"};
#define N_OPTS (sizeof opts / sizeof *opts)

static const char *const cmds[] = {"run",  "create", "exec", "cp",   "ls",     "inspect",
                                   "rm",   "ps",     "kill", "logs", "gc",     "image",
                                   "info", "pool",   "wait", "help", "version"};
#define N_CMDS (sizeof cmds / sizeof *cmds)

static void assert_suggests(const char *word, const char *const *c, size_t n, const char *want)
{
    const char *got = nsbox_suggest(word, c, n);
    if (!want)
        assert_null(got);
    else
        assert_string_equal(got ? got : "(none)", want);
}

static void test_typos_of_options(void **state)
{
    (void)state;
    assert_suggests("--instance-typ", opts, N_OPTS, "--instance-type");  /* a letter short */
    assert_suggests("--instnace-type", opts, N_OPTS, "--instance-type"); /* two swapped */
    assert_suggests("--instance_type", opts, N_OPTS, "--instance-type"); /* the spec's key */
    assert_suggests("--netwrok", opts, N_OPTS, "--network");
    assert_suggests("--network-logs", opts, N_OPTS, "--network-log");
    assert_suggests("--imgae", opts, N_OPTS, "--image");
    assert_suggests("--tll", opts, N_OPTS, "--ttl");
    assert_suggests("-instance-type", opts, N_OPTS, "--instance-type"); /* one dash */
    assert_suggests("--idle_timeout", opts, N_OPTS, "--idle-timeout");
}

static void test_typos_of_commands(void **state)
{
    (void)state;
    assert_suggests("crate", cmds, N_CMDS, "create");
    assert_suggests("exce", cmds, N_CMDS, "exec");
    assert_suggests("inspcet", cmds, N_CMDS, "inspect");
    assert_suggests("versoin", cmds, N_CMDS, "version");
    assert_suggests("imgae", cmds, N_CMDS, "image");
}

static void test_nothing_close(void **state)
{
    (void)state;
    assert_suggests("--no-such-flag", opts, N_OPTS, NULL);
    assert_suggests("--memory", opts, N_OPTS, NULL);
    assert_suggests("frobnicate", cmds, N_CMDS, NULL);
    assert_suggests("build", cmds, N_CMDS, NULL);
    assert_suggests("", cmds, N_CMDS, NULL);
    /* the word itself is no suggestion; nor is anything from an empty list */
    assert_suggests("run", cmds, N_CMDS, NULL);
    assert_suggests("run", cmds, 0, NULL);
    /* over 64 characters: never a typo of a name */
    char longw[200];
    memset(longw, 'a', sizeof longw - 1);
    longw[sizeof longw - 1] = '\0';
    const char *const one[] = {longw + 100};
    assert_suggests(longw, one, 1, NULL);
    assert_suggests("aaaa", one, 1, NULL);
}

static void test_tie_goes_to_the_first(void **state)
{
    (void)state;
    const char *const c[] = {"ab", "ac"};
    assert_suggests("aa", c, 2, "ab");
    const char *const r[] = {"ac", "ab"};
    assert_suggests("aa", r, 2, "ac");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_typos_of_options),
        cmocka_unit_test(test_typos_of_commands),
        cmocka_unit_test(test_nothing_close),
        cmocka_unit_test(test_tie_goes_to_the_first),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
