/* The wire protocol's request parser: validation messages name the field, limits hold, and the
 * buffer is never read past its length (a message on the wire has no NUL after it). */
#include "proto.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static int parse(const char *json, struct nsbox_request *rq, struct nsbox_err *e)
{
    memset(e, 0, sizeof *e);
    return nsbox_proto_parse(json, strlen(json), rq, e);
}

static void test_exec_request(void **state)
{
    struct nsbox_request rq;
    struct nsbox_err e;
    assert_int_equal(parse("{\"v\":1,\"op\":\"exec\",\"argv\":[\"ls\",\"-l\"],\"env\":{\"A\":\"1\"},"
                           "\"cwd\":\"/tmp\",\"timeout_ms\":2500,\"tag\":\"x\"}",
                           &rq, &e),
                     0);
    assert_int_equal(rq.op, NSBOX_OP_EXEC);
    assert_int_equal(rq.argc, 2);
    assert_string_equal(rq.argv[0], "ls");
    assert_null(rq.argv[2]);
    assert_int_equal(rq.nenv, 1);
    assert_string_equal(rq.env[0], "A=1");
    assert_string_equal(rq.cwd, "/tmp");
    assert_int_equal(rq.timeout_ms, 2500);
    assert_string_equal(rq.tag, "x");
    nsbox_proto_request_free(&rq);
}

/* run (the warm pool) is not a request of the control socket: a pooled sandbox's run goes to
 * its init over the run socket (agent.h), so a supervisor never starts one itself */
static void test_run_is_not_a_control_op(void **state)
{
    (void)state;
    struct nsbox_request rq;
    struct nsbox_err e;
    assert_int_equal(parse("{\"v\":1,\"op\":\"run\",\"argv\":[\"true\"]}", &rq, &e), -1);
    assert_int_equal(e.code, NSBOX_E_INVALID);
    assert_non_null(strstr(e.msg, "unknown op 'run'"));
    nsbox_proto_request_free(&rq);
}

/* logs: the follow offsets are optional (UINT64_MAX: the whole kept log), exact integers up to
 * 2^53-1, and read for logs only */
static void test_logs_offsets(void **state)
{
    (void)state;
    struct nsbox_request rq;
    struct nsbox_err e;
    assert_int_equal(parse("{\"v\":1,\"op\":\"logs\",\"pid\":7}", &rq, &e), 0);
    assert_true(rq.stdout_from == UINT64_MAX && rq.stderr_from == UINT64_MAX);
    nsbox_proto_request_free(&rq);
    assert_int_equal(parse("{\"v\":1,\"op\":\"logs\",\"pid\":7,\"stdout_from\":0,"
                           "\"stderr_from\":9007199254740991}",
                           &rq, &e),
                     0);
    assert_true(rq.stdout_from == 0 && rq.stderr_from == 9007199254740991ull);
    nsbox_proto_request_free(&rq);
    const char *bad[] = {"-1", "1.5", "\"3\"", "9007199254740992", "1e300"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char buf[128];
        snprintf(buf, sizeof buf, "{\"v\":1,\"op\":\"logs\",\"pid\":7,\"stdout_from\":%s}", bad[i]);
        assert_int_equal(parse(buf, &rq, &e), -1);
        assert_int_equal(e.code, NSBOX_E_INVALID);
        assert_non_null(strstr(e.msg, "'stdout_from'"));
        nsbox_proto_request_free(&rq);
    }
    assert_int_equal(parse("{\"v\":1,\"op\":\"wait\",\"pid\":7,\"stdout_from\":3}", &rq, &e), 0);
    assert_true(rq.stdout_from == UINT64_MAX);
    nsbox_proto_request_free(&rq);
}

/* the client's encoder writes an offset's every digit: cJSON's own number printing keeps 15
 * significant digits when they read back within its tolerance, one short past 10^15 */
static void test_logs_offsets_encoded_exactly(void **state)
{
    (void)state;
    struct nsbox_request rq, again;
    struct nsbox_err e;
    assert_int_equal(parse("{\"v\":1,\"op\":\"logs\",\"pid\":1,\"stdout_from\":6666666666666661,"
                           "\"stderr_from\":9007199254740991}",
                           &rq, &e),
                     0);
    cJSON *o = nsbox_proto_encode(&rq);
    assert_non_null(o);
    char *text = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    assert_non_null(text);
    assert_int_equal(nsbox_proto_parse(text, strlen(text), &again, &e), 0);
    assert_true(again.stdout_from == 6666666666666661ull);
    assert_true(again.stderr_from == 9007199254740991ull);
    free(text);
    nsbox_proto_request_free(&again);
    nsbox_proto_request_free(&rq);
}

/* wait takes a pid and nothing of kill's: a signal field is not read */
static void test_wait_takes_a_pid(void **state)
{
    (void)state;
    struct nsbox_request rq;
    struct nsbox_err e;
    assert_int_equal(parse("{\"v\":1,\"op\":\"wait\",\"pid\":42,\"signal\":99,\"tag\":\"w\"}",
                           &rq, &e),
                     0);
    assert_int_equal(rq.op, NSBOX_OP_WAIT);
    assert_int_equal(rq.pid, 42);
    assert_int_equal(rq.sig, 0);
    assert_string_equal(nsbox_proto_op_name(rq.op), "wait");
    nsbox_proto_request_free(&rq);
}

/* every error code has its wire name, and the name reads back as the code (no_memory is said
 * as system on the wire, by design) */
static void test_error_codes_on_the_wire(void **state)
{
    (void)state;
    static const struct {
        int code;
        const char *wire;
    } cases[] = {
        {NSBOX_E_INVALID, "invalid"},   {NSBOX_E_SYS, "system"},       {NSBOX_E_UNSUPPORTED, "unsupported"},
        {NSBOX_E_POLICY, "policy"},     {NSBOX_E_NOTFOUND, "not_found"}, {NSBOX_E_TIMEOUT, "timeout"},
        {NSBOX_E_DELETED, "deleted"},   {NSBOX_E_EXEC, "exec"},        {NSBOX_E_NOSPACE, "no_space"},
        {NSBOX_E_BUSY, "busy"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        assert_string_equal(nsbox_proto_errcode_wire(cases[i].code), cases[i].wire);
        assert_int_equal(nsbox_proto_errcode_from_wire(cases[i].wire), cases[i].code);
    }
    assert_string_equal(nsbox_proto_errcode_wire(NSBOX_E_NOMEM), "system");
    assert_string_equal(nsbox_proto_errcode_wire(999), "system");
}

static void test_delete_says_by_whom(void **state)
{
    (void)state;
    struct nsbox_request rq;
    struct nsbox_err e;
    static const struct {
        const char *json;
        bool session;
    } cases[] = {
        {"{\"v\":1,\"op\":\"delete\"}", false},
        {"{\"v\":1,\"op\":\"delete\",\"by\":\"rm\"}", false},
        {"{\"v\":1,\"op\":\"delete\",\"by\":\"session\"}", true},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        assert_int_equal(parse(cases[i].json, &rq, &e), 0);
        assert_int_equal(rq.op, NSBOX_OP_DELETE);
        assert_int_equal(rq.by_session, cases[i].session);
        nsbox_proto_request_free(&rq);
    }
}

static void test_cmd_becomes_sh_c(void **state)
{
    struct nsbox_request rq;
    struct nsbox_err e;
    assert_int_equal(parse("{\"v\":1,\"op\":\"start\",\"cmd\":\"echo hi\"}", &rq, &e), 0);
    assert_int_equal(rq.argc, 3);
    assert_string_equal(rq.argv[0], "/bin/sh");
    assert_string_equal(rq.argv[1], "-c");
    assert_string_equal(rq.argv[2], "echo hi");
    assert_string_equal(rq.cwd, "/workspace");
    nsbox_proto_request_free(&rq);
}

static void test_errors_name_the_field(void **state)
{
    static const struct {
        const char *json, *needle;
    } cases[] = {
        {"nope", "not valid JSON"},
        {"[]", "JSON object"},
        {"{\"v\":1}", "'op' is required"},
        {"{\"v\":3,\"op\":\"ping\"}", "version"},
        {"{\"v\":1,\"op\":\"launch\"}", "unknown op 'launch'"},
        {"{\"v\":1,\"op\":\"exec\"}", "'argv' and 'cmd'"},
        {"{\"v\":1,\"op\":\"exec\",\"argv\":[\"a\"],\"cmd\":\"b\"}", "'argv' and 'cmd'"},
        {"{\"v\":1,\"op\":\"exec\",\"argv\":[1]}", "'argv[0]'"},
        {"{\"v\":1,\"op\":\"exec\",\"argv\":[\"\"]}", "'argv[0]' is empty"},
        {"{\"v\":1,\"op\":\"exec\",\"argv\":[\"a\"],\"env\":{\"1X\":\"v\"}}", "'env'"},
        {"{\"v\":1,\"op\":\"exec\",\"argv\":[\"a\"],\"env\":{\"A-B\\n\":\"v\"}}",
         "invalid name 'A-B?'"},
        {"{\"v\":1,\"op\":\"delete\",\"by\":\"ttl\"}", "'by' must be \"rm\" or \"session\""},
        {"{\"v\":1,\"op\":\"exec\",\"argv\":[\"a\"],\"cwd\":\"rel\"}", "'cwd'"},
        {"{\"v\":1,\"op\":\"exec\",\"argv\":[\"a\"],\"timeout_ms\":-1}", "'timeout_ms'"},
        {"{\"v\":1,\"op\":\"kill\"}", "'pid' is required"},
        {"{\"v\":1,\"op\":\"wait\"}", "'pid' is required"},
        {"{\"v\":1,\"op\":\"wait\",\"pid\":0}", "'pid' must be an integer between 1 and 4194304"},
        {"{\"v\":1,\"op\":\"kill\",\"pid\":4194305}", "'pid' must be an integer between 1 and 4194304"},
        {"{\"v\":1,\"op\":\"wait\",\"pid\":\"3\"}", "'pid'"},
        {"{\"v\":1,\"op\":\"kill\",\"pid\":3,\"signal\":99}", "'signal'"},
        {"{\"v\":1,\"op\":\"read\"}", "'path' is required"},
        {"{\"v\":1,\"op\":\"write\",\"path\":\"f\",\"mode\":2541}",
         "'mode' 04755 has bits beyond 0777: setuid, setgid and sticky"},
        {"{\"v\":1,\"op\":\"exec\",\"argv\":[\"a\\u0000b\"]}", "NUL"},
        /* cJSON decodes a \u escape without four hex digits to 0 as well */
        {"{\"v\":1,\"op\":\"read\",\"path\":\"a\\uzz00/../b\"}", "invalid \\u escape"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct nsbox_request rq;
        struct nsbox_err e;
        assert_int_equal(parse(cases[i].json, &rq, &e), -1);
        assert_int_equal(e.code, NSBOX_E_INVALID);
        if (!strstr(e.msg, cases[i].needle))
            fail_msg("case %zu: '%s' does not mention '%s'", i, e.msg, cases[i].needle);
        nsbox_proto_request_free(&rq);
    }
}

/* An argument holding the six characters \u0000 is text: the backslash is escaped. */
static void test_escaped_backslash_before_u0000_is_text(void **state)
{
    struct nsbox_request rq;
    struct nsbox_err e;
    assert_int_equal(parse("{\"v\":1,\"op\":\"exec\",\"argv\":[\"python3\",\"-c\","
                           "\"print(\\\"\\\\u0000\\\")\"]}",
                           &rq, &e),
                     0);
    assert_int_equal(rq.argc, 3);
    assert_string_equal(rq.argv[2], "print(\"\\u0000\")");
    nsbox_proto_request_free(&rq);
}

static void test_buffer_not_read_past_length(void **state)
{
    /* Exactly the bytes of the message, no NUL after them: any read past the end is caught by
     * ASan in the sanitizer build (strstr, say, would read on to a NUL). */
    const char msg[] = "{\"v\":1,\"op\":\"ping\"}";
    char *buf = malloc(sizeof msg - 1);
    memcpy(buf, msg, sizeof msg - 1);
    struct nsbox_request rq;
    struct nsbox_err e = {0};
    assert_int_equal(nsbox_proto_parse(buf, sizeof msg - 1, &rq, &e), 0);
    assert_int_equal(rq.op, NSBOX_OP_PING);
    nsbox_proto_request_free(&rq);
    free(buf);
}

static void test_limits(void **state)
{
    struct nsbox_request rq;
    struct nsbox_err e = {0};
    assert_int_equal(nsbox_proto_parse("{}", NSBOX_PROTO_MAX + 1, &rq, &e), -1);
    nsbox_proto_request_free(&rq);
    /* NSBOX_PROTO_MAX_ARGS + 1 arguments */
    size_t n = NSBOX_PROTO_MAX_ARGS + 1;
    char *json = malloc(64 + n * 4);
    strcpy(json, "{\"v\":1,\"op\":\"exec\",\"argv\":[");
    for (size_t i = 0; i < n; i++)
        strcat(json, i ? ",\"a\"" : "\"a\"");
    strcat(json, "]}");
    assert_int_equal(parse(json, &rq, &e), -1);
    assert_non_null(strstr(e.msg, "'argv' needs"));
    nsbox_proto_request_free(&rq);
    free(json);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exec_request),
        cmocka_unit_test(test_run_is_not_a_control_op),
        cmocka_unit_test(test_cmd_becomes_sh_c),
        cmocka_unit_test(test_wait_takes_a_pid),
        cmocka_unit_test(test_delete_says_by_whom),
        cmocka_unit_test(test_error_codes_on_the_wire),
        cmocka_unit_test(test_errors_name_the_field),
        cmocka_unit_test(test_escaped_backslash_before_u0000_is_text),
        cmocka_unit_test(test_buffer_not_read_past_length),
        cmocka_unit_test(test_limits),
        cmocka_unit_test(test_logs_offsets),
        cmocka_unit_test(test_logs_offsets_encoded_exactly),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
