/* What nsbox says (cli/say.c): an error's message and a lower layer's note go out by
 * policy/shown.h's rule, the last line of defence for text of a sandbox's or an image's that a lower layer put in it unfiltered,
 * while nsbox's own text (UTF-8 quotes and arrows, the lines of a message of several) stays. */
#include "say.h"
#include "cli.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

/* What nsbox_say_fail writes to stderr for msg (rc not NULL), or nsbox_say_note (rc NULL). */
static const char *said(const char *msg, int *rc)
{
    static char out[2048];
    struct nsbox_err e = {.code = NSBOX_E_INVALID};
    snprintf(e.msg, sizeof e.msg, "%s", msg);
    int fd = memfd_create("stderr", 0), saved = dup(2);
    assert_true(fd >= 0 && saved >= 0);
    fflush(stderr);
    assert_int_equal(dup2(fd, 2), 2);
    if (rc)
        *rc = nsbox_say_fail(&e);
    else
        nsbox_say_note(stderr, msg);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    ssize_t n = pread(fd, out, sizeof out - 1, 0);
    close(fd);
    assert_true(n >= 0);
    out[n] = '\0';
    return out;
}

static void test_fail_shows_controls_as_question_marks(void **state)
{
    (void)state;
    int rc;
    /* ESC's CSI, OSC ended by BEL, 8-bit CSI raw and as UTF-8, a carriage return, DEL, a byte
     * that is no UTF-8 */
    assert_string_equal(said("layer: 'a\x1b[2J\x1b]0;t\x07\x9b" "2J\xc2\x9b" "31m\r\x7f\xff'", &rc),
                        "nsbox: layer: 'a?[2J?]0;t?" "?2J?31m?" "?" "?'\n");
    assert_int_equal(rc, EXIT_NSBOX);
}

static void test_fail_keeps_nsbox_own_text(void **state)
{
    (void)state;
    int rc;
    const char *own = "create: the set-up script failed \xe2\x80\x98x\xe2\x80\x99 \xe2\x86\x92 "
                      "exit 3:\n  oops\n  \tindented \xc3\xa9";
    char want[512];
    snprintf(want, sizeof want, "nsbox: %s\n", own);
    assert_string_equal(said(own, &rc), want);
    assert_string_equal(said(own, NULL), want);
}

static void test_note_shows_controls_as_question_marks(void **state)
{
    (void)state;
    assert_string_equal(said("gc: 'a\x1b[2J\x9b" "2J\xc2\x9b" "31m'", NULL),
                        "nsbox: gc: 'a?[2J?2J?31m'\n");
}

static void test_a_line_that_could_pass_for_nsbox_own_is_indented(void **state)
{
    (void)state;
    int rc;
    assert_string_equal(said("cp: 'a\nnsbox: all is well\n\n'", &rc),
                        "nsbox: cp: 'a\n  nsbox: all is well\n  \n  '\n");
    assert_string_equal(said("x\n y\n\tz", NULL), "nsbox: x\n y\n\tz\n");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fail_shows_controls_as_question_marks),
        cmocka_unit_test(test_fail_keeps_nsbox_own_text),
        cmocka_unit_test(test_note_shows_controls_as_question_marks),
        cmocka_unit_test(test_a_line_that_could_pass_for_nsbox_own_is_indented),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
