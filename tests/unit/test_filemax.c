/* Raising the host's file table (sandbox/filemax.c) on a file of the test's own, never the
 * host's: the raise and its note, said once; the config file's "keep"; a table that cannot be
 * written, said once a boot (a mark in the runtime directory, here the test's). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "filemax.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char notes[4096];
static int n_notes;

static void collect(void *ctx, const char *line)
{
    (void)ctx;
    n_notes++;
    snprintf(notes + strlen(notes), sizeof notes - strlen(notes), "%s\n", line);
}

static char dir[] = "/tmp/nsbox-filemax-test-XXXXXX";
static char table[64], config[64];

static int setup(void **state)
{
    (void)state;
    if (!mkdtemp(dir))
        return -1;
    snprintf(table, sizeof table, "%s/file-max", dir);
    snprintf(config, sizeof config, "%s/config.json", dir);
    /* the runtime directory, where the mark of a said failure goes */
    setenv("NSBOX_STATE_DIR", dir, 1);
    setenv("NSBOX_CONFIG", config, 1);
    nsbox_filemax_set_note(collect, NULL);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char path[128];
    snprintf(path, sizeof path, "%s/file-max-not-raised", dir);
    unlink(path);
    unlink(table);
    unlink(config);
    return rmdir(dir);
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    assert_int_equal(fclose(f), 0);
}

static const char *read_table(void)
{
    static char buf[64];
    FILE *f = fopen(table, "r");
    assert_non_null(f);
    assert_non_null(fgets(buf, sizeof buf, f));
    fclose(f);
    return buf;
}

static void reset_notes(void)
{
    notes[0] = '\0';
    n_notes = 0;
}

static void test_raised_once_with_a_note(void **state)
{
    (void)state;
    write_text(config, "{}");
    write_text(table, "1000\n"); /* fewer files than any machine's memory could hold */
    reset_notes();
    nsbox_filemax_raise_at(table);
    assert_string_equal(read_table(), "9223372036854775807\n");
    assert_int_equal(n_notes, 1);
    assert_non_null(strstr(notes, "note: raised fs.file-max from 1000 to 9223372036854775807: "));
    assert_non_null(strstr(notes, "\"host\": {\"file_max\": \"keep\"}")); /* how to leave it */
    nsbox_filemax_raise_at(table); /* large now: nothing to raise, nothing said */
    assert_int_equal(n_notes, 1);
}

static void test_the_config_file_keeps_it(void **state)
{
    (void)state;
    write_text(config, "{\"host\": {\"file_max\": \"keep\"}}");
    write_text(table, "1000\n");
    reset_notes();
    nsbox_filemax_raise_at(table);
    assert_string_equal(read_table(), "1000\n");
    assert_int_equal(n_notes, 0);
    write_text(config, "{\"host\": {\"file_max\": \"raise\"}}");
    nsbox_filemax_raise_at(table);
    assert_string_equal(read_table(), "9223372036854775807\n");
}

static void test_a_table_not_writable_is_said_once(void **state)
{
    (void)state;
    write_text(config, "{}");
    reset_notes();
    /* a read-only sysctl of one number below any memory's count (256): even root may not
     * write it, as a read-only /proc/sys refuses fs.file-max */
    const char *ro = "/proc/sys/kernel/random/poolsize";
    /* a caller with nobody to tell (a pool's refill) leaves the once-a-boot note to the next */
    nsbox_filemax_set_note(NULL, NULL);
    nsbox_filemax_raise_at(ro);
    nsbox_filemax_set_note(collect, NULL);
    assert_int_equal(n_notes, 0);
    nsbox_filemax_raise_at(ro);
    assert_int_equal(n_notes, 1);
    assert_non_null(strstr(notes, "note: fs.file-max is 256, fewer open files than this host's "
                                  "memory could hold, and nsbox could not raise it "
                                  "(/proc/sys/kernel/random/poolsize: "));
    assert_non_null(strstr(notes, "sysctl -w fs.file-max=9223372036854775807"));
    nsbox_filemax_raise_at(ro); /* once a boot, not for every sandbox */
    assert_int_equal(n_notes, 1);
}

/* The mark of a said failure is looked for first: a later sandbox neither reads the table nor
 * opens it, which a writable table of 1,000 files, left as it is, shows. */
static void test_a_said_failure_skips_the_work(void **state)
{
    (void)state;
    char mark[128];
    snprintf(mark, sizeof mark, "%s/file-max-not-raised", dir);
    write_text(mark, "");
    write_text(config, "{}");
    write_text(table, "1000\n");
    reset_notes();
    nsbox_filemax_raise_at(table);
    assert_string_equal(read_table(), "1000\n");
    assert_int_equal(n_notes, 0);
    nsbox_filemax_set_note(NULL, NULL); /* a silent caller skips alike */
    nsbox_filemax_raise_at(table);
    nsbox_filemax_set_note(collect, NULL);
    assert_string_equal(read_table(), "1000\n");
    assert_int_equal(unlink(mark), 0);
    nsbox_filemax_raise_at(table); /* the next boot's first sandbox raises it */
    assert_string_equal(read_table(), "9223372036854775807\n");
    assert_int_equal(n_notes, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_raised_once_with_a_note),
        cmocka_unit_test(test_the_config_file_keeps_it),
        cmocka_unit_test(test_a_table_not_writable_is_said_once),
        cmocka_unit_test(test_a_said_failure_skips_the_work),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
