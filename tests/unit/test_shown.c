/* Text a sandbox or an image controls, as nsbox shows it (policy/shown.c): controls (C0, DEL,
 * C1 raw and as UTF-8) and invalid UTF-8 become '?', printable UTF-8 is kept whole, the bounds
 * cut between characters and say so with "...". */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "shown.h"

#include <stdlib.h>
#include <string.h>

static const char *shown(const char *s, unsigned keep)
{
    static char out[256];
    size_t n = nsbox_shown_copy(out, sizeof out, s, strlen(s), SIZE_MAX, keep);
    assert_int_equal(n, strlen(out));
    return out;
}

static void test_controls(void **state)
{
    (void)state;
    assert_string_equal(shown("plain text", 0), "plain text");
    assert_string_equal(shown("a\033[31mred", 0), "a?[31mred"); /* ESC */
    assert_string_equal(shown("a\x7f" "b", 0), "a?b");          /* DEL */
    assert_string_equal(shown("\r\b\a\x01\x1f", 0), "?????");   /* C0 */
    assert_string_equal(shown("a\x9b" "2Jb", 0), "a?2Jb");      /* raw 8-bit CSI */
    assert_string_equal(shown("\x80\x85\x9d\x9f", 0), "????");  /* raw C1 */
    /* U+0080, U+0085 (NEL), U+009B (CSI), U+009D (OSC), U+009F as UTF-8 */
    assert_string_equal(shown("\xc2\x80\xc2\x85\xc2\x9b" "2J\xc2\x9d" "0;t\xc2\x9f", 0),
                        "???2J?0;t?");
}

static void test_valid_utf8_kept(void **state)
{
    (void)state;
    /* U+00A0 (the first after C1), é, the quotes and arrow of nsbox's messages, a CJK
     * character, an emoji (4 bytes), U+10FFFF */
    const char *good = "\xc2\xa0\xc3\xa9 \xe2\x80\x98q\xe2\x80\x99 \xe2\x86\x92 \xe4\xb8\xad "
                       "\xf0\x9f\x98\x80 \xf4\x8f\xbf\xbf";
    assert_string_equal(shown(good, 0), good);
}

static void test_invalid_utf8(void **state)
{
    (void)state;
    static const struct {
        const char *in, *out;
    } cases[] = {
        /* overlong forms: '/' in two bytes, ESC in two, '/' in three and four, NUL in two */
        {"\xc0\xaf", "??"},
        {"\xc0\x9b", "??"},
        {"\xe0\x80\xaf", "???"},
        {"\xf0\x80\x80\xaf", "????"},
        {"\xc0\x80", "??"},
        /* surrogates, beyond U+10FFFF, bytes never in UTF-8 */
        {"\xed\xa0\x80", "???"},
        {"\xf4\x90\x80\x80", "????"},
        {"\xfe\xff\xf8", "???"},
        /* truncated sequences: at the end, and followed by text (which is kept) */
        {"a\xc3", "a?"},
        {"a\xe2\x86", "a??"},
        {"a\xf0\x9f\x98", "a???"},
        {"\xe2\x86z\xc3\xa9", "??z\xc3\xa9"},
        /* a lead byte followed by a C1 byte: neither is taken for a character */
        {"\xe2\x9b", "??"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        if (strcmp(shown(cases[i].in, 0), cases[i].out) != 0)
            fail_msg("case %zu: '%s', not '%s'", i, shown(cases[i].in, 0), cases[i].out);
}

static void test_kept_controls(void **state)
{
    (void)state;
    assert_string_equal(shown("a\tb\nc", 0), "a?b?c");
    assert_string_equal(shown("a\tb\nc", NSBOX_SHOWN_TAB), "a\tb?c");
    assert_string_equal(shown("a\tb\nc\r", NSBOX_SHOWN_TAB | NSBOX_SHOWN_NEWLINE), "a\tb\nc?");
}

static void test_char(void **state)
{
    (void)state;
    bool as_is;
    assert_int_equal(nsbox_shown_char("\xe2\x86\x92x", 4, 0, &as_is), 3);
    assert_true(as_is);
    assert_int_equal(nsbox_shown_char("\xc2\x9b", 2, 0, &as_is), 2); /* one '?' for both */
    assert_false(as_is);
    assert_int_equal(nsbox_shown_char("\xe2\x86\x92", 2, 0, &as_is), 1); /* len cuts it */
    assert_false(as_is);
    assert_int_equal(nsbox_shown_utf8("\xf0\x9f\x98\x80", 4), 4);
    assert_int_equal(nsbox_shown_utf8("\xf0\x9f\x98\x80", 3), 0);
    assert_int_equal(nsbox_shown_utf8("\x9b", 1), 0);
}

static void test_bounds(void **state)
{
    (void)state;
    char out[16];
    /* max: at most 4 bytes of s, then "..." */
    assert_int_equal(nsbox_shown_copy(out, sizeof out, "abcdefgh", 8, 4, 0), 7);
    assert_string_equal(out, "abcd...");
    /* exactly max: whole, no dots */
    nsbox_shown_copy(out, sizeof out, "abcd", 4, 4, 0);
    assert_string_equal(out, "abcd");
    /* a character that would pass max is left out whole, not cut into invalid bytes */
    nsbox_shown_copy(out, sizeof out, "ab\xe2\x86\x92", 5, 3, 0);
    assert_string_equal(out, "ab...");
    /* the room in out: the text and "..." always fit, with the NUL */
    assert_int_equal(nsbox_shown_copy(out, 8, "abcdefghij", 10, SIZE_MAX, 0), 7);
    assert_string_equal(out, "abcd...");
    assert_int_equal(nsbox_shown_copy(out, 8, "abcdefg", 7, SIZE_MAX, 0), 7); /* just fits */
    assert_string_equal(out, "abcdefg");
    nsbox_shown_copy(out, 8, "abc\xf0\x9f\x98\x80xyz", 10, SIZE_MAX, 0);
    assert_string_equal(out, "abc...");
    /* only len bytes are read: an embedded NUL ends nothing, it is a C0 control */
    nsbox_shown_copy(out, sizeof out, "a\0b", 3, SIZE_MAX, 0);
    assert_string_equal(out, "a?b");
    /* no room at all, and room for the NUL alone */
    assert_int_equal(nsbox_shown_copy(out, 0, "abc", 3, SIZE_MAX, 0), 0);
    assert_int_equal(nsbox_shown_copy(out, 1, "abc", 3, SIZE_MAX, 0), 0);
    assert_string_equal(out, "");
    assert_int_equal(nsbox_shown_copy(out, sizeof out, "", 0, SIZE_MAX, 0), 0);
    assert_string_equal(out, "");
}

static void test_lines(void **state)
{
    (void)state;
    const char *out = "a\tb\n\033[2K\rnsbox: x\x7f\n \xc2\x9b" "31m \xc2\xa0\xc3\xa9\n\tz";
    char *t = nsbox_shown_lines(out, strlen(out), "  ", true);
    assert_non_null(t);
    /* tab kept, ESC CR DEL and U+009B shown as '?', every line after the first indented, its
     * own indentation kept below, other UTF-8 (U+00A0, U+00E9) kept */
    assert_string_equal(t, "a\tb\n  ?[2K?nsbox: x?\n   ?31m \xc2\xa0\xc3\xa9\n  \tz");
    free(t);
    /* nsbox's own layout: only a line that starts with neither a space nor a tab is indented,
     * an empty one and an end after a newline too */
    t = nsbox_shown_lines(out, strlen(out), "  ", false);
    assert_string_equal(t, "a\tb\n  ?[2K?nsbox: x?\n ?31m \xc2\xa0\xc3\xa9\n\tz");
    free(t);
    t = nsbox_shown_lines("a\n\nb\n", 5, "> ", false);
    assert_string_equal(t, "a\n> \n> b\n> ");
    free(t);
    t = nsbox_shown_lines("", 0, "  ", true);
    assert_string_equal(t, "");
    free(t);
    /* a lone lead byte at the end: not UTF-8, so '?' (nothing read past len); a raw 0x9b, CSI
     * of 8-bit terminals, too; an embedded NUL is a control */
    t = nsbox_shown_lines("a\x9b" "2Jb\xc2" "X", 6, "", true);
    assert_string_equal(t, "a?2Jb?");
    free(t);
    t = nsbox_shown_lines("a\0b", 3, "", true);
    assert_string_equal(t, "a?b");
    free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_controls),     cmocka_unit_test(test_valid_utf8_kept),
        cmocka_unit_test(test_invalid_utf8), cmocka_unit_test(test_kept_controls),
        cmocka_unit_test(test_char),         cmocka_unit_test(test_bounds),
        cmocka_unit_test(test_lines),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
