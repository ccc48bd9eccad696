/* One section of the config file (policy/cfgsection.c): finding it in the file's object, the
 * shape of the messages every section's parser gives, the names of the sections. Pure. */
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

/* The section name of text's object, as a module's parser finds it in the file's object. */
static int find(const char *text, const char *name, const char *like, const cJSON **section,
                struct nsbox_err *e)
{
    cleanup_cjson cJSON *root = cJSON_Parse(text);
    assert_non_null(root);
    int r = nsbox_cfgsection_find(root, name, like, section, e);
    *section = NULL; /* it lives in root, gone here */
    return r;
}

static void test_a_section_is_found_in_the_whole_object(void **state)
{
    (void)state;
    struct nsbox_err e = {0};
    cleanup_cjson cJSON *root =
        cJSON_Parse("{\"pool\": {\"size\": 1}, \"host\": {\"file_max\": \"keep\"}}");
    const cJSON *s = NULL;
    assert_int_equal(nsbox_cfgsection_find(root, "host", NULL, &s, &e), 0);
    assert_non_null(s);
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(s, "file_max")->valuestring, "keep");
}

static void test_a_missing_section_leaves_the_defaults(void **state)
{
    (void)state;
    struct nsbox_err e = {0};
    const cJSON *s = (const cJSON *)&e; /* set to NULL by the call */
    assert_int_equal(find("{}", "pool", NULL, &s, &e), 0);
    assert_null(s);
    s = (const cJSON *)&e;
    assert_int_equal(find("{\"host\": {}}", "pool", NULL, &s, &e), 0);
    assert_null(s);
    /* no file: no object at all */
    s = (const cJSON *)&e;
    assert_int_equal(nsbox_cfgsection_find(NULL, "pool", NULL, &s, &e), 0);
    assert_null(s);
}

/* The file's keys against the one list of the sections (the instance types' reader checks
 * them: it reads the file first). */
static void test_a_key_that_is_no_section_is_refused(void **state)
{
    (void)state;
    struct nsbox_err e = {0};
    cleanup_cjson cJSON *ok = cJSON_Parse("{\"pool\": {}, \"host\": {}, \"network\": {}, "
                                          "\"workspace\": {}, \"instance_types\": {}}");
    assert_int_equal(nsbox_cfgsection_check_keys(ok, &e), 0);
    cleanup_cjson cJSON *typo = cJSON_Parse("{\"pool\": {}, \"pol\": {\"size\": 0}}");
    assert_int_equal(nsbox_cfgsection_check_keys(typo, &e), -1);
    assert_string_equal(e.msg, "unknown key 'pol' (the sections are host, instance_types, "
                               "network, pool and workspace)");
    assert_int_equal(e.code, NSBOX_E_INVALID);
    assert_int_equal(nsbox_spec_types_parse(typo, &e), -1);
    assert_string_equal(e.msg, "unknown key 'pol' (the sections are host, instance_types, "
                               "network, pool and workspace)");
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
    char names[128];
    nsbox_cfgsection_names(names, sizeof names);
    assert_string_equal(names, "host, instance_types, network, pool and workspace");
    for (size_t i = 0; i < sizeof known / sizeof *known; i++) {
        assert_true(nsbox_cfgsection_known(known[i]));
        assert_non_null(strstr(names, known[i]));
    }
    /* cut where the buffer ends, never past it */
    char small[8];
    nsbox_cfgsection_names(small, sizeof small);
    assert_string_equal(small, "host, i");
    assert_false(nsbox_cfgsection_known("pol"));
    assert_false(nsbox_cfgsection_known("Pool"));
    assert_false(nsbox_cfgsection_known(""));
    assert_false(nsbox_cfgsection_known(NULL));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_section_is_found_in_the_whole_object),
        cmocka_unit_test(test_a_missing_section_leaves_the_defaults),
        cmocka_unit_test(test_a_key_that_is_no_section_is_refused),
        cmocka_unit_test(test_a_section_that_is_no_object_is_refused),
        cmocka_unit_test(test_a_bad_value_names_its_section_and_key),
        cmocka_unit_test(test_an_unknown_key_lists_the_known_ones),
        cmocka_unit_test(test_the_sections_are_known_by_name),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
