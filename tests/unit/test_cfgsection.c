/* One section of the config file (policy/cfgsection.c): finding it in the whole text, and the
 * shape of the messages every section's parser gives. Pure. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "cfgsection.h"
#include "cleanup_cjson.h"
#include "spec.h"

#include <errno.h>
#include <string.h>

static int find(const char *text, const char *name, const char *like, const cJSON **section,
                struct nsbox_err *e)
{
    cleanup_cjson cJSON *root = NULL;
    int r = nsbox_cfgsection_find(text, strlen(text), name, like, &root, section, e);
    *section = NULL; /* it lives in root, gone here */
    return r;
}

static void test_a_section_is_found_in_the_whole_text(void **state)
{
    (void)state;
    struct nsbox_err e = {0};
    cleanup_cjson cJSON *root = NULL;
    const cJSON *s = NULL;
    const char *text = "{\"pool\": {\"size\": 1}, \"host\": {\"file_max\": \"keep\"}}";
    assert_int_equal(nsbox_cfgsection_find(text, strlen(text), "host", NULL, &root, &s, &e), 0);
    assert_non_null(s);
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(s, "file_max")->valuestring, "keep");
}

static void test_a_missing_section_leaves_the_defaults(void **state)
{
    (void)state;
    struct nsbox_err e = {0};
    const cJSON *s = (const cJSON *)&e; /* set to NULL by the call */
    cleanup_cjson cJSON *root = NULL;
    assert_int_equal(nsbox_cfgsection_find("{}", 2, "pool", NULL, &root, &s, &e), 0);
    assert_null(s);
    cJSON_Delete(root); /* each call gives a new text of its own */
    root = NULL;
    assert_int_equal(nsbox_cfgsection_find("{\"host\": {}}", 12, "pool", NULL, &root, &s, &e),
                     0);
    assert_null(s);
}

static void test_text_that_is_no_object_is_refused(void **state)
{
    (void)state;
    static const struct {
        const char *text, *msg;
    } bad[] = {
        {"", "config: empty input (expected a JSON object)"},
        /* cJSON places a text's end at its last byte, which is right: the text is said to end */
        {"{", "config: invalid JSON: the text ends before its object does, after 1 byte: is it "
              "whole?"},
        {"{ \"a\": [1,\n", "config: invalid JSON: the text ends before its object does, after 11 "
                          "bytes: is it whole?"},
        {"{\"a", "config: invalid JSON: the text ends before its object does, after 3 bytes: is "
                 "it whole?"},
        {"[\"a\\", "config: invalid JSON: the text ends before its value does, after 4 bytes: is "
                  "it whole?"},
        /* a wrong last byte is that byte's error, not the end's */
        {"{]", "config: invalid JSON near byte 1"},
        {"{\"a\":1x", "config: invalid JSON near byte 6"},
        {"{\"a\":tru", "config: invalid JSON near byte 5"},
        /* ended in brackets with the failure at the last byte, as "[1,2" is: only the parse
         * of the text with one more byte tells the two apart */
        {"[1 2", "config: invalid JSON near byte 3"},
        {"{\"a\":1 2", "config: invalid JSON near byte 7"},
        {"[1]", "config: must be a JSON object"},
        {"3", "config: must be a JSON object"},
        {"\"pool\"", "config: must be a JSON object"},
        {"null", "config: must be a JSON object"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        struct nsbox_err e = {0};
        const cJSON *s;
        assert_int_equal(find(bad[i].text, "pool", NULL, &s, &e), -1);
        assert_string_equal(e.msg, bad[i].msg);
        assert_int_equal(e.code, NSBOX_E_INVALID);
        assert_int_equal(e.sys_errno, EINVAL);
    }
}

static void test_text_after_the_object_is_refused(void **state)
{
    (void)state;
    struct nsbox_err e = {0};
    const cJSON *s;
    assert_int_equal(find("{} x", "pool", NULL, &s, &e), -1);
    assert_string_equal(e.msg, "config: unexpected text after the JSON value at byte 3");
    assert_int_equal(find("{\"pool\": {}} {\"pool\": {\"size\": 1}}", "pool", NULL, &s, &e), -1);
    assert_string_equal(e.msg, "config: unexpected text after the JSON value at byte 13");
    assert_int_equal(find("{\"pool\": {}} \n\t\r ", "pool", NULL, &s, &e), 0);
}

static void test_a_nul_byte_is_refused(void **state)
{
    (void)state;
    struct nsbox_err e = {0};
    cleanup_cjson cJSON *root = NULL;
    const cJSON *s;
    /* cJSON would stop at the NUL and take "{}" alone, leaving the rest unread */
    assert_int_equal(nsbox_cfgsection_find("{}\0{\"pool\": 1}", 14, "pool", NULL, &root, &s, &e),
                     -1);
    assert_string_equal(e.msg, "config: contains a NUL byte");
}

/* The instance types' reader reads the file before any section's (run and create): a mistake
 * in the file reads the same whichever reader finds it. */
static void test_the_types_reader_says_the_same(void **state)
{
    (void)state;
    const char *texts[] = {"{} x", "{", "[1]", ""};
    for (size_t i = 0; i < sizeof texts / sizeof *texts; i++) {
        struct nsbox_err es = {0}, et = {0};
        const cJSON *s;
        assert_int_equal(find(texts[i], "pool", NULL, &s, &es), -1);
        assert_int_equal(nsbox_spec_types_load_json(texts[i], strlen(texts[i]), &et), -1);
        assert_string_equal(es.msg, et.msg);
    }
    nsbox_spec_types_reset();
}

static void test_a_section_that_is_no_object_is_refused(void **state)
{
    (void)state;
    struct nsbox_err e = {0};
    const cJSON *s;
    assert_int_equal(find("{\"network\": []}", "network", NULL, &s, &e), -1);
    assert_string_equal(e.msg, "config: key 'network': must be an object");
    assert_int_equal(find("{\"pool\": 3}", "pool", "{\"size\": 1}", &s, &e), -1);
    assert_string_equal(e.msg, "config: key 'pool': must be an object like {\"size\": 1}");
    assert_int_equal(find("{\"pool\": null}", "pool", NULL, &s, &e), -1);
    assert_int_equal(e.code, NSBOX_E_INVALID);
}

static void test_a_bad_value_names_its_section_and_key(void **state)
{
    (void)state;
    struct nsbox_err e = {0};
    assert_int_equal(nsbox_cfgsection_bad(&e, "pool", "size", "must be %s from %d", "one", 0), -1);
    assert_string_equal(e.msg, "config: key 'pool.size': must be one from 0");
    assert_int_equal(e.code, NSBOX_E_INVALID);
}

static void test_an_unknown_key_lists_the_known_ones(void **state)
{
    (void)state;
    struct nsbox_err e = {0};
    assert_int_equal(nsbox_cfgsection_unknown(&e, "host", "filemax", "file_max"), -1);
    assert_string_equal(e.msg, "config: key 'host.filemax': unknown (known: file_max)");
    char key[200];
    memset(key, 'k', sizeof key - 1);
    key[sizeof key - 1] = '\0';
    nsbox_cfgsection_unknown(&e, "pool", key, "size");
    /* a key of the user's is cut, so that it cannot crowd out what is known */
    assert_non_null(strstr(e.msg, "': unknown (known: size)"));
    assert_int_equal(strlen(e.msg), strlen("config: key 'pool.': unknown (known: size)") + 64);
}

static void test_the_sections_are_known_by_name(void **state)
{
    (void)state;
    const char *known[] = {"host", "instance_types", "network", "pool", "workspace"};
    for (size_t i = 0; i < sizeof known / sizeof *known; i++) {
        assert_true(nsbox_cfgsection_known(known[i]));
        assert_non_null(strstr(NSBOX_CFGSECTION_NAMES, known[i]));
    }
    assert_false(nsbox_cfgsection_known("pol"));
    assert_false(nsbox_cfgsection_known("Pool"));
    assert_false(nsbox_cfgsection_known(""));
    assert_false(nsbox_cfgsection_known(NULL));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_section_is_found_in_the_whole_text),
        cmocka_unit_test(test_a_missing_section_leaves_the_defaults),
        cmocka_unit_test(test_text_that_is_no_object_is_refused),
        cmocka_unit_test(test_text_after_the_object_is_refused),
        cmocka_unit_test(test_a_nul_byte_is_refused),
        cmocka_unit_test(test_the_types_reader_says_the_same),
        cmocka_unit_test(test_a_section_that_is_no_object_is_refused),
        cmocka_unit_test(test_a_bad_value_names_its_section_and_key),
        cmocka_unit_test(test_an_unknown_key_lists_the_known_ones),
        cmocka_unit_test(test_the_sections_are_known_by_name),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
