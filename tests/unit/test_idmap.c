/* User namespace id maps (policy/idmap.c): who appuser is on the host, and the text written to
 * /proc/PID/{uid,gid}_map. Pure; no root needed. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "idmap.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static void expect_map(const struct nsbox_idmap *m, uint32_t inside, uint32_t outside,
                       uint32_t count)
{
    assert_int_equal(m->inside, inside);
    assert_int_equal(m->outside, outside);
    assert_int_equal(m->count, count);
}

/* ---- privileged: one reserved host uid per slot -------------------------------------------- */

static void test_privileged_slot_maps_into_reserved_range(void **state)
{
    (void)state;
    struct nsbox_idmap u, g;
    struct nsbox_err e = {0};
    assert_int_equal(nsbox_idmap_compute(true, 0, 0, 0, &u, &g, &e), 0);
    expect_map(&u, NSBOX_SANDBOX_UID, NSBOX_UID_BASE, 1);
    expect_map(&g, NSBOX_SANDBOX_GID, NSBOX_UID_BASE, 1);
    assert_int_equal(nsbox_idmap_compute(true, 0, 0, 7, &u, &g, &e), 0);
    expect_map(&u, 1000, NSBOX_UID_BASE + 7, 1);
    expect_map(&g, 1000, NSBOX_UID_BASE + 7, 1);
}

/* The caller's own ids (root's 0, or anything else) never leak into a privileged map: the
 * sandbox must never share a host uid with its caller or with host root. */
static void test_privileged_ignores_caller_ids(void **state)
{
    (void)state;
    struct nsbox_idmap u, g;
    struct nsbox_err e = {0};
    assert_int_equal(nsbox_idmap_compute(true, 4242, 4343, 3, &u, &g, &e), 0);
    expect_map(&u, 1000, NSBOX_UID_BASE + 3, 1);
    expect_map(&g, 1000, NSBOX_UID_BASE + 3, 1);
}

/* Every slot: exactly one id, inside the reserved range, never host root, and two slots never
 * share a host uid. */
static void test_privileged_every_slot_distinct_never_root(void **state)
{
    (void)state;
    uint32_t prev = 0;
    for (uint32_t slot = 0; slot < NSBOX_UID_SLOTS; slot++) {
        struct nsbox_idmap u, g;
        struct nsbox_err e = {0};
        assert_int_equal(nsbox_idmap_compute(true, 0, 0, slot, &u, &g, &e), 0);
        assert_int_not_equal(u.outside, 0);
        assert_int_not_equal(g.outside, 0);
        assert_int_equal(u.count, 1);
        assert_int_equal(g.count, 1);
        assert_true(u.outside >= NSBOX_UID_BASE);
        assert_true(u.outside < NSBOX_UID_BASE + NSBOX_UID_SLOTS);
        assert_true(u.outside != (uint32_t)-1);
        if (slot > 0) assert_true(u.outside > prev);
        prev = u.outside;
    }
}

static void test_privileged_slot_out_of_range(void **state)
{
    (void)state;
    uint32_t bad[] = {NSBOX_UID_SLOTS, NSBOX_UID_SLOTS + 1, UINT32_MAX};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct nsbox_idmap u = {0}, g = {0};
        struct nsbox_err e = {0};
        assert_int_equal(nsbox_idmap_compute(true, 0, 0, bad[i], &u, &g, &e), -1);
        assert_int_equal(e.code, NSBOX_E_INVALID);
        assert_int_equal(e.sys_errno, ERANGE);
        assert_non_null(strstr(e.msg, "slot"));
    }
    /* The last valid slot is accepted (off-by-one on the bound). */
    struct nsbox_idmap u, g;
    struct nsbox_err e = {0};
    assert_int_equal(nsbox_idmap_compute(true, 0, 0, NSBOX_UID_SLOTS - 1, &u, &g, &e), 0);
    assert_int_equal(u.outside, NSBOX_UID_BASE + NSBOX_UID_SLOTS - 1);
}

/* ---- unprivileged: the caller's own ids ---------------------------------------------------- */

static void test_unprivileged_maps_to_caller(void **state)
{
    (void)state;
    struct nsbox_idmap u, g;
    struct nsbox_err e = {0};
    /* slot is irrelevant (and may be anything) without privilege */
    assert_int_equal(nsbox_idmap_compute(false, 1234, 567, 99999999, &u, &g, &e), 0);
    expect_map(&u, NSBOX_SANDBOX_UID, 1234, 1);
    expect_map(&g, NSBOX_SANDBOX_GID, 567, 1);
}

static void test_unprivileged_rejects_root_and_unmapped(void **state)
{
    (void)state;
    struct {
        uint32_t uid, gid;
    } bad[] = {{0, 1000}, {(uint32_t)-1, 1000}, {1000, (uint32_t)-1}, {0, 0}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct nsbox_idmap u = {0}, g = {0};
        struct nsbox_err e = {0};
        assert_int_equal(nsbox_idmap_compute(false, bad[i].uid, bad[i].gid, 0, &u, &g, &e), -1);
        assert_int_equal(e.code, NSBOX_E_INVALID);
        assert_int_equal(e.sys_errno, EINVAL);
        assert_true(e.msg[0] != '\0');
    }
}

/* ---- format -------------------------------------------------------------------------------- */

static void test_format_text(void **state)
{
    (void)state;
    struct nsbox_idmap m = {1000, NSBOX_UID_BASE + 5, 1};
    char buf[64];
    struct nsbox_err e = {0};
    int r = nsbox_idmap_format(&m, buf, sizeof buf, &e);
    assert_string_equal(buf, "1000 2000000005 1\n");
    assert_int_equal(r, (int)strlen("1000 2000000005 1\n"));

    struct nsbox_idmap m2 = {0, 100000, 65536};
    r = nsbox_idmap_format(&m2, buf, sizeof buf, &e);
    assert_string_equal(buf, "0 100000 65536\n");
    assert_int_equal(r, (int)strlen(buf));
}

/* The kernel rejects ranges touching 4294967295 ((uid_t)-1) and count 0. */
static void test_format_range_checks(void **state)
{
    (void)state;
    char buf[64];
    struct nsbox_idmap bad[] = {
        {1000, 2000, 0},                     /* empty range */
        {1000, UINT32_MAX, 1},               /* outside is (uid_t)-1 */
        {UINT32_MAX, 1000, 1},               /* inside is (uid_t)-1 */
        {1000, UINT32_MAX - 10, 11},         /* outside range reaches (uid_t)-1 */
        {UINT32_MAX - 10, 1000, 11},         /* inside range reaches (uid_t)-1 */
        {1000, UINT32_MAX - 10, UINT32_MAX}, /* would wrap in 32 bits */
        {UINT32_MAX - 10, 1000, UINT32_MAX},
        {0, 2, UINT32_MAX}, /* only the outside range wraps */
        {2, 0, UINT32_MAX}, /* only the inside range wraps */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct nsbox_err e = {0};
        strcpy(buf, "untouched");
        assert_int_equal(nsbox_idmap_format(&bad[i], buf, sizeof buf, &e), -1);
        assert_int_equal(e.code, NSBOX_E_INVALID);
        assert_int_equal(e.sys_errno, ERANGE);
    }
    /* The largest valid ranges end just below (uid_t)-1. */
    struct nsbox_err e = {0};
    struct nsbox_idmap ok1 = {1000, UINT32_MAX - 1, 1};
    assert_true(nsbox_idmap_format(&ok1, buf, sizeof buf, &e) > 0);
    assert_string_equal(buf, "1000 4294967294 1\n");
    struct nsbox_idmap ok2 = {UINT32_MAX - 10, 1000, 10};
    assert_true(nsbox_idmap_format(&ok2, buf, sizeof buf, &e) > 0);
    assert_string_equal(buf, "4294967285 1000 10\n");
}

static void test_format_buffer_too_small(void **state)
{
    (void)state;
    struct nsbox_idmap m = {1000, NSBOX_UID_BASE, 1};
    const char *want = "1000 2000000000 1\n";
    size_t len = strlen(want);
    char buf[64];
    struct nsbox_err e = {0};
    /* Exactly enough room (text + NUL) works ... */
    assert_int_equal(nsbox_idmap_format(&m, buf, len + 1, &e), (int)len);
    assert_string_equal(buf, want);
    /* ... one byte less is an error, never a silently cut map (the kernel would parse a
     * truncated "1000 2000000000 1" without its newline as valid, or a shorter number). */
    for (size_t n = 0; n <= len; n++) {
        struct nsbox_err e2 = {0};
        memset(buf, 'X', sizeof buf);
        assert_int_equal(nsbox_idmap_format(&m, buf, n, &e2), -1);
        assert_int_equal(e2.code, NSBOX_E_INVALID);
        assert_int_equal(e2.sys_errno, ENOSPC);
        /* nothing is written past n */
        for (size_t k = n; k < sizeof buf; k++)
            assert_int_equal(buf[k], 'X');
    }
}

/* The slot search's window holds twice the existing lock files plus 64, never more slots than
 * there are: so at least half of it is free (every live sandbox has its file). */
static void test_slot_window(void **state)
{
    (void)state;
    assert_int_equal(nsbox_slot_window(0, NSBOX_UID_SLOTS), 64);
    assert_int_equal(nsbox_slot_window(300, NSBOX_UID_SLOTS), 664);
    assert_int_equal(nsbox_slot_window(40000, NSBOX_UID_SLOTS), NSBOX_UID_SLOTS);
    assert_int_equal(nsbox_slot_window(UINT32_MAX, NSBOX_UID_SLOTS), NSBOX_UID_SLOTS);
    assert_int_equal(nsbox_slot_window(10, 20), 20);
}

/* Whatever the start, the probe order visits every slot exactly once: a free slot anywhere is
 * found, and "all slots are in use" is said only when none is free. */
static void test_slot_probe_visits_every_slot_once(void **state)
{
    (void)state;
    const uint32_t slots = 300;
    static unsigned char seen[300];
    const uint32_t windows[] = {1, 64, 177, 300};
    for (size_t w = 0; w < sizeof windows / sizeof windows[0]; w++) {
        for (uint32_t start = 0; start < windows[w]; start += 7) {
            memset(seen, 0, sizeof seen);
            for (uint32_t i = 0; i < slots; i++) {
                uint32_t s = nsbox_slot_probe(start, i, windows[w]);
                assert_true(s < slots);
                seen[s]++;
                /* the window first: the search stays among the low slots while it can */
                if (i < windows[w])
                    assert_true(s < windows[w]);
            }
            for (uint32_t s = 0; s < slots; s++)
                assert_int_equal(seen[s], 1);
            assert_int_equal(nsbox_slot_probe(start, 0, windows[w]), start);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_privileged_slot_maps_into_reserved_range),
        cmocka_unit_test(test_privileged_ignores_caller_ids),
        cmocka_unit_test(test_privileged_every_slot_distinct_never_root),
        cmocka_unit_test(test_privileged_slot_out_of_range),
        cmocka_unit_test(test_unprivileged_maps_to_caller),
        cmocka_unit_test(test_unprivileged_rejects_root_and_unmapped),
        cmocka_unit_test(test_format_text),
        cmocka_unit_test(test_format_range_checks),
        cmocka_unit_test(test_format_buffer_too_small),
        cmocka_unit_test(test_slot_window),
        cmocka_unit_test(test_slot_probe_visits_every_slot_once),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
