/* The host's file table against the memory that could fill it, and the config file's say in
 * raising it (policy/filetable.c). Pure. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "cfgtext.h"
#include "filetable.h"

#include <string.h>

#define GiB (1024ull * 1024 * 1024)

static void test_the_kernels_default_table_is_fillable(void **state)
{
    (void)state;
    /* the kernel's boot default: a tenth of the memory in KiB (2,466,239 on 24 GiB) */
    assert_true(nsbox_filetable_fillable(2466239, 24 * GiB));
    assert_true(nsbox_filetable_fillable(8192, 512ull * 1024 * 1024)); /* NR_FILE, its floor */
    /* a medium sandbox (4 GiB) alone holds 4,190,000 descriptors at 232 bytes each */
    assert_true(nsbox_filetable_fillable(4 * GiB / 232, 24 * GiB));
}

static void test_a_table_memory_cannot_fill_is_kept(void **state)
{
    (void)state;
    assert_false(nsbox_filetable_fillable(INT64_MAX, 24 * GiB)); /* systemd's, and ours */
    assert_false(nsbox_filetable_fillable(24 * GiB / NSBOX_FILETABLE_FILE_BYTES, 24 * GiB));
    assert_true(nsbox_filetable_fillable(24 * GiB / NSBOX_FILETABLE_FILE_BYTES - 1, 24 * GiB));
    assert_false(nsbox_filetable_fillable(0, 0)); /* memory unknown: nothing to raise for */
    assert_false(nsbox_filetable_fillable(NSBOX_FILETABLE_RAISED, UINT64_MAX));
}

static void test_the_kernel_takes_a_long(void **state)
{
    (void)state;
    /* fs.file-max is a long sysctl: a larger value is refused with EINVAL */
    assert_true((uint64_t)NSBOX_FILETABLE_RAISED == (uint64_t)LONG_MAX);
}

static bool parse_keep(const char *json, bool keep, struct nsbox_err *e)
{
    cleanup_cjson cJSON *root = cfgtext(json);
    assert_int_equal(nsbox_filetable_config_from_json(root, &keep, e), 0);
    return keep;
}

static void config_fails(const char *json, const char *want)
{
    struct nsbox_err e = {0};
    bool keep = false;
    cleanup_cjson cJSON *root = cfgtext(json);
    assert_int_equal(nsbox_filetable_config_from_json(root, &keep, &e), -1);
    if (!strstr(e.msg, want))
        fail_msg("error \"%s\" does not contain \"%s\"", e.msg, want);
    assert_false(keep);
}

static void test_the_config_may_keep_the_table(void **state)
{
    (void)state;
    struct nsbox_err e = {0};
    assert_false(parse_keep("{}", false, &e));                          /* the default */
    assert_false(parse_keep("{\"pool\": {\"size\": 0}}", false, &e)); /* other sections */
    assert_true(parse_keep("{\"host\": {\"file_max\": \"keep\"}}", false, &e));
    assert_false(parse_keep("{\"host\": {\"file_max\": \"raise\"}}", true, &e));
    assert_false(parse_keep("{\"host\": {}}", false, &e));
    config_fails("{\"host\": {\"file_max\": \"kept\"}}",
                 "key 'host.file_max': must be \"raise\"");
    config_fails("{\"host\": {\"file_max\": false}}", "key 'host.file_max': must be");
    config_fails("{\"host\": {\"filemax\": \"keep\"}}",
                 "key 'host.filemax': unknown (known: file_max)");
    config_fails("{\"host\": \"keep\"}", "key 'host': must be an object");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_the_kernels_default_table_is_fillable),
        cmocka_unit_test(test_a_table_memory_cannot_fill_is_kept),
        cmocka_unit_test(test_the_kernel_takes_a_long),
        cmocka_unit_test(test_the_config_may_keep_the_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
