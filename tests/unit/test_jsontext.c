/* JSON text in runc's key form (policy/jsontext.c): `"key": value`, so that the sed edits of
 * runc's tutorials match, and the text still reads back as the same document. */
#include "jsontext.h"
#include "cleanup_cjson.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

static const char doc[] =
    "{\"process\":{\"terminal\":true,\"args\":[\"sh\"],\"env\":[\"A=x:\\ty\"]},"
    "\"annotations\":{\"k:\\t\":\"v\\t:\"},\"root\":{\"path\":\"rootfs\"}}";

static void test_keys_are_followed_by_a_space(void **state)
{
    (void)state;
    cleanup_cjson cJSON *j = cJSON_Parse(doc);
    assert_non_null(j);
    char *text = nsbox_jsontext_print(j);
    assert_non_null(text);
    assert_non_null(strstr(text, "\"terminal\": true,"));
    assert_non_null(strstr(text, "\"args\": [\"sh\"]"));
    assert_non_null(strstr(text, "\"path\": \"rootfs\""));
    /* indented, one key a line, no tab left after any ':' */
    assert_non_null(strstr(text, "\n\t\t\"terminal\""));
    assert_null(strstr(text, ":\t"));
    /* the escapes inside strings are untouched: the text reads back as the same document */
    assert_non_null(strstr(text, "\"A=x:\\ty\""));
    cleanup_cjson cJSON *back = cJSON_Parse(text);
    assert_true(cJSON_Compare(j, back, 1));
    free(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_keys_are_followed_by_a_space),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
