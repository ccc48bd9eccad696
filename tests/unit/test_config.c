/* The config file's loader (os/config.c): read and parsed once per process, read again only
 * when the file at its path is another (replaced, edited, removed, created), a missing file
 * as no config, and the messages of a file that is no JSON object. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "config.h"
#include "cfgsection.h"
#include "pool.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct dir {
    char path[64], file[96];
};

static int setup(void **state)
{
    struct dir *d = calloc(1, sizeof *d);
    snprintf(d->path, sizeof d->path, "/tmp/nsbox-test-config-XXXXXX");
    if (!mkdtemp(d->path))
        return -1;
    snprintf(d->file, sizeof d->file, "%s/config.json", d->path);
    setenv("NSBOX_CONFIG", d->file, 1);
    *state = d;
    return 0;
}

static int teardown(void **state)
{
    struct dir *d = *state;
    char aside[128];
    snprintf(aside, sizeof aside, "%s.new", d->file);
    unlink(d->file);
    unlink(aside);
    rmdir(d->path);
    unsetenv("NSBOX_CONFIG");
    free(d);
    return 0;
}

static void write_at(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
}

/* text into the file as an editor that writes aside and renames it in does */
static void replace(const struct dir *d, const char *text)
{
    char aside[128];
    snprintf(aside, sizeof aside, "%s.new", d->file);
    write_at(aside, text);
    assert_int_equal(rename(aside, d->file), 0);
}

static const struct nsbox_config *get(struct nsbox_err *e)
{
    const struct nsbox_config *c = NULL;
    assert_int_equal(nsbox_config_get(NULL, &c, e), 0);
    assert_non_null(c);
    return c;
}

static int pool_section(const cJSON *root, void *out, struct nsbox_err *e)
{
    return nsbox_pool_config_from_json(root, out, e);
}

static unsigned pool_size(void)
{
    struct nsbox_pool_config p;
    struct nsbox_err e = {0};
    nsbox_pool_config_init(&p);
    if (nsbox_config_section(pool_section, &p, NULL, &e) < 0)
        fail_msg("%s", e.msg);
    return p.size;
}

static void test_read_and_parsed_once(void **state)
{
    struct dir *d = *state;
    struct nsbox_err e = {0};
    replace(d, "{\"pool\": {\"size\": 3}, \"instance_types\": {}}");
    const struct nsbox_config *c = get(&e);
    unsigned long reads = c->reads;
    const cJSON *root = c->root;
    assert_non_null(root);
    assert_string_equal(c->path, d->file);
    assert_int_equal(c->len, strlen("{\"pool\": {\"size\": 3}, \"instance_types\": {}}"));
    /* the instance types, a section, the types again, the section again: one object */
    assert_int_equal(nsbox_config_load_types(NULL, &e), 0);
    assert_int_equal(pool_size(), 3);
    assert_int_equal(nsbox_config_load_types(NULL, &e), 0);
    assert_int_equal(pool_size(), 3);
    const struct nsbox_config *again = get(&e);
    assert_ptr_equal(again, c);
    assert_ptr_equal(again->root, root);
    assert_int_equal(again->reads, reads);
}

static void test_read_again_when_the_file_changed(void **state)
{
    struct dir *d = *state;
    struct nsbox_err e = {0};
    replace(d, "{\"pool\": {\"size\": 1}}");
    assert_int_equal(pool_size(), 1);
    unsigned long reads = get(&e)->reads;
    /* replaced by a rename */
    replace(d, "{\"pool\": {\"size\": 2}}");
    assert_int_equal(pool_size(), 2);
    assert_int_equal(get(&e)->reads, reads + 1);
    /* edited in place, to another size */
    write_at(d->file, "{\"pool\": {\"size\": 12}}");
    assert_int_equal(pool_size(), 12);
    assert_int_equal(get(&e)->reads, reads + 2);
    /* edited in place to the same size: its times tell */
    write_at(d->file, "{\"pool\": {\"size\": 13}}");
    struct timespec later[2] = {{0, UTIME_OMIT}, {1, 0}};
    assert_int_equal(utimensat(AT_FDCWD, d->file, later, 0), 0);
    assert_int_equal(pool_size(), 13);
    assert_int_equal(get(&e)->reads, reads + 3);
    /* removed: the defaults, and the sections see no object */
    assert_int_equal(unlink(d->file), 0);
    unsetenv("NSBOX_CONFIG"); /* $NSBOX_CONFIG must exist: an explicit path need not */
    const struct nsbox_config *c = NULL;
    assert_int_equal(nsbox_config_get(d->file, &c, &e), 0);
    assert_null(c->root);
    assert_null(c->text);
    assert_false(c->id.present);
    unsigned long gone = c->reads;
    assert_int_equal(nsbox_config_get(d->file, &c, &e), 0);
    assert_int_equal(c->reads, gone); /* still none: not tried again */
    /* created */
    write_at(d->file, "{\"pool\": {\"size\": 4}}");
    assert_int_equal(nsbox_config_get(d->file, &c, &e), 0);
    assert_non_null(c->root);
    assert_int_equal(c->reads, gone + 1);
    setenv("NSBOX_CONFIG", d->file, 1);
    assert_int_equal(pool_size(), 4);
}

static void test_a_missing_file_is_no_config(void **state)
{
    struct dir *d = *state;
    struct nsbox_err e = {0};
    char missing[128];
    snprintf(missing, sizeof missing, "%s/none.json", d->path);
    const struct nsbox_config *c = NULL;
    assert_int_equal(nsbox_config_get(missing, &c, &e), 0);
    assert_null(c->root);
    assert_string_equal(c->path, missing);
    /* but a missing $NSBOX_CONFIG is a typo to report, at every call, read once */
    setenv("NSBOX_CONFIG", missing, 1);
    assert_int_equal(nsbox_config_get(NULL, &c, &e), -1);
    assert_int_equal(e.code, NSBOX_E_NOTFOUND);
    assert_non_null(strstr(e.msg, missing));
    struct nsbox_err e2 = {0};
    assert_int_equal(nsbox_config_get(NULL, &c, &e2), -1);
    assert_string_equal(e2.msg, e.msg);
    assert_int_equal(e2.code, NSBOX_E_NOTFOUND);
    /* and once it is there, it is read */
    write_at(missing, "{}");
    assert_int_equal(nsbox_config_get(NULL, &c, &e), 0);
    assert_non_null(c->root);
    unlink(missing);
}

static void test_a_broken_file_says_so_until_it_is_fixed(void **state)
{
    struct dir *d = *state;
    struct nsbox_err e = {0};
    replace(d, "{\"pool\": ");
    const struct nsbox_config *c;
    assert_int_equal(nsbox_config_get(NULL, &c, &e), -1);
    char want[256];
    snprintf(want, sizeof want,
             "config %s: invalid JSON: the text ends before its object does, after 9 bytes: is "
             "it whole?", d->file);
    assert_string_equal(e.msg, want);
    assert_int_equal(e.code, NSBOX_E_INVALID);
    /* every section says the same, and the file is not read for each */
    struct nsbox_pool_config p;
    nsbox_pool_config_init(&p);
    struct nsbox_err es = {0};
    assert_int_equal(nsbox_config_section(pool_section, &p, NULL, &es), -1);
    assert_string_equal(es.msg, want);
    struct nsbox_err et = {0};
    assert_int_equal(nsbox_config_load_types(NULL, &et), -1);
    assert_string_equal(et.msg, want);
    /* a section's own mistake names the file first, as every section's does */
    replace(d, "{\"pool\": {\"size\": 100}}");
    assert_int_equal(nsbox_config_section(pool_section, &p, NULL, &es), -1);
    snprintf(want, sizeof want,
             "%s: config: key 'pool.size': must be \"auto\" or an integer from 0 (no pool) to 16",
             d->file);
    assert_string_equal(es.msg, want);
    replace(d, "{\"pool\": {\"size\": 5}}");
    assert_int_equal(pool_size(), 5);
}

/* The file's text as the spec's is read (policy/spec.h, nsbox_spec_json_parse_object): one
 * mistake reads the same whichever module meets it first. */
static void test_text_that_is_no_object_is_refused(void **state)
{
    struct dir *d = *state;
    static const struct {
        const char *text, *msg;
    } bad[] = {
        {"", "empty file (write {} for the defaults)"},
        /* cJSON places a text's end at its last byte, which is right: the text is said to end */
        {"{", "invalid JSON: the text ends before its object does, after 1 byte: is it whole?"},
        {"{ \"a\": [1,\n", "invalid JSON: the text ends before its object does, after 11 bytes: "
                          "is it whole?"},
        {"{\"a", "invalid JSON: the text ends before its object does, after 3 bytes: is it "
                 "whole?"},
        {"[\"a\\", "invalid JSON: the text ends before its value does, after 4 bytes: is it "
                  "whole?"},
        /* a wrong last byte is that byte's error, not the end's */
        {"{]", "invalid JSON near byte 1"},
        {"{\"a\":1x", "invalid JSON near byte 6"},
        {"{\"a\":tru", "invalid JSON near byte 5"},
        /* ended in brackets with the failure at the last byte, as "[1,2" is: only the parse
         * of the text with one more byte tells the two apart */
        {"[1 2", "invalid JSON near byte 3"},
        {"{\"a\":1 2", "invalid JSON near byte 7"},
        {"[1]", "must be a JSON object"},
        {"3", "must be a JSON object"},
        {"\"pool\"", "must be a JSON object"},
        {"null", "must be a JSON object"},
        {"{} x", "unexpected text after the JSON value at byte 3"},
        {"{\"pool\": {}} {\"pool\": {\"size\": 1}}", "unexpected text after the JSON value at "
                                                   "byte 13"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        replace(d, bad[i].text);
        struct nsbox_err e = {0};
        const struct nsbox_config *c;
        char want[256];
        snprintf(want, sizeof want, "config %s: %s", d->file, bad[i].msg);
        assert_int_equal(nsbox_config_get(NULL, &c, &e), -1);
        assert_string_equal(e.msg, want);
        assert_int_equal(e.code, NSBOX_E_INVALID);
    }
    /* cJSON would stop at the NUL and take "{}" alone, leaving the rest unread */
    char aside[128];
    snprintf(aside, sizeof aside, "%s.new", d->file);
    int fd = open(aside, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    assert_int_equal(write(fd, "{}\0{\"pool\": 1}", 14), 14);
    close(fd);
    assert_int_equal(rename(aside, d->file), 0);
    struct nsbox_err e = {0};
    const struct nsbox_config *c;
    assert_int_equal(nsbox_config_get(NULL, &c, &e), -1);
    assert_non_null(strstr(e.msg, ": contains a NUL byte"));
    replace(d, "{\"pool\": {}} \n\t\r ");
    get(&e);
}

/* What a process made of the file knows which read it came from: the instance types (a spec's
 * limits), and a forked child's inherited config, counted without a look at the file, which
 * would read an edited one again. */
static void test_the_read_a_value_came_from(void **state)
{
    struct dir *d = *state;
    struct nsbox_err e = {0};
    replace(d, "{\"instance_types\": {\"tiny\": {\"cpus\": 1, \"memory\": \"64MiB\", "
               "\"pids\": 10, \"disk\": \"64MiB\"}}}");
    assert_int_equal(nsbox_config_load_types(NULL, &e), 0);
    unsigned long types = get(&e)->reads;
    assert_int_equal(nsbox_config_types_read(), types);
    assert_int_equal(nsbox_config_reads(), types);
    /* edited: the reads count it once the file is looked at, not before */
    replace(d, "{\"pool\": {\"size\": 2}}");
    assert_int_equal(nsbox_config_reads(), types);
    assert_int_equal(pool_size(), 2);
    assert_int_equal(nsbox_config_reads(), types + 1);
    /* the types still come from the read before, until loaded again */
    assert_int_equal(nsbox_config_types_read(), types);
    assert_int_equal(nsbox_config_load_types(NULL, &e), 0);
    assert_int_equal(nsbox_config_types_read(), types + 1);
    /* a section the types' parser refuses leaves the table, and its read, as they were */
    replace(d, "{\"instance_types\": {\"Bad\": {}}}");
    assert_int_equal(nsbox_config_load_types(NULL, &e), -1);
    assert_int_equal(nsbox_config_reads(), types + 2);
    assert_int_equal(nsbox_config_types_read(), types + 1);
}

/* What was made of a read holds while the text is the same: a touch, a chmod, the same bytes
 * written in place or renamed in are read again but are no edit; another text is, and so is
 * a file gone, even once the text comes back. */
static void test_the_same_text_read_again_is_no_change(void **state)
{
    struct dir *d = *state;
    struct nsbox_err e = {0};
    const struct nsbox_config *c;
    const char *text = "{\"pool\": {\"size\": 2}}";
    replace(d, text);
    unsigned long start = get(&e)->reads;
    assert_int_equal(nsbox_config_same_text_since(start, &c, &e), 1);
    struct timespec later[2] = {{0, UTIME_OMIT}, {1, 0}};
    assert_int_equal(utimensat(AT_FDCWD, d->file, later, 0), 0);
    assert_int_equal(nsbox_config_same_text_since(start, &c, &e), 1);
    assert_int_equal(chmod(d->file, 0644), 0);
    write_at(d->file, text);
    assert_int_equal(nsbox_config_same_text_since(start, &c, &e), 1);
    replace(d, text);
    assert_int_equal(nsbox_config_same_text_since(start, &c, &e), 1);
    /* read again (the chmod too, unless its ctime is the touch's tick), and found the same */
    assert_true(c->reads >= start + 3);
    assert_int_equal(c->text_since, start);
    /* a read after an edit is its own start; one before it is not */
    replace(d, "{\"pool\": {\"size\": 3}}");
    assert_int_equal(nsbox_config_same_text_since(start, &c, &e), 0);
    unsigned long edited = c->reads;
    assert_int_equal(nsbox_config_same_text_since(edited, &c, &e), 1);
    /* the text of the start back: the read between tells it changed */
    replace(d, text);
    assert_int_equal(nsbox_config_same_text_since(start, &c, &e), 0);
    assert_int_equal(nsbox_config_same_text_since(edited, &c, &e), 0);
    /* a file that does not parse is its error; the same text after it a change since */
    unsigned long fixed = c->reads;
    write_at(d->file, "{\"pool\"");
    assert_int_equal(nsbox_config_same_text_since(fixed, &c, &e), -1);
    replace(d, text);
    assert_int_equal(nsbox_config_same_text_since(fixed, &c, &e), 0);
    /* no read is never the same */
    assert_int_equal(nsbox_config_same_text_since(0, &c, &e), 0);
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_read_and_parsed_once),
        T(test_read_again_when_the_file_changed),
        T(test_a_missing_file_is_no_config),
        T(test_a_broken_file_says_so_until_it_is_fixed),
        T(test_text_that_is_no_object_is_refused),
        T(test_the_read_a_value_came_from),
        T(test_the_same_text_read_again_is_no_change),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
