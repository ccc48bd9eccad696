/* The host's file table against the memory that could fill it (policy/filetable.c). Pure. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "filetable.h"

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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_the_kernels_default_table_is_fillable),
        cmocka_unit_test(test_a_table_memory_cannot_fill_is_kept),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
