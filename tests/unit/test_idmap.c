/* User namespace id maps (policy/idmap.c): who appuser is on the host, and the text written to
 * /proc/PID/{uid,gid}_map, the subordinate ids of /etc/subuid. Pure; no root needed. */
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

/* ---- privileged: a reserved range of 65536 host ids per slot ----------------------------- */

static void test_privileged_slot_maps_a_range(void **state)
{
    (void)state;
    struct nsbox_idmaps m;
    struct nsbox_err e = {0};
    assert_int_equal(nsbox_idmap_compute(true, 0, 0, 0, NULL, &m, &e), 0);
    assert_int_equal(m.n, 1);
    assert_true(m.range);
    expect_map(&m.uid[0], 0, NSBOX_UID_BASE, 65536);
    expect_map(&m.gid[0], 0, NSBOX_UID_BASE, 65536);
    assert_int_equal(m.app_uid, NSBOX_UID_BASE + 1000);
    assert_int_equal(m.app_gid, NSBOX_UID_BASE + 1000);
    assert_int_equal(nsbox_idmap_compute(true, 0, 0, 7, NULL, &m, &e), 0);
    expect_map(&m.uid[0], 0, NSBOX_UID_BASE + 7 * 65536, 65536);
    expect_map(&m.gid[0], 0, NSBOX_UID_BASE + 7 * 65536, 65536);
    assert_int_equal(m.app_uid, 2000000000u + 7 * 65536 + 1000);
    assert_int_equal(nsbox_idmap_slot_base(7), NSBOX_UID_BASE + 7 * 65536);
}

/* The caller's own ids (root's 0, or anything else) never leak into a privileged map, and a
 * privileged map ignores subordinate ids: the sandbox must never share a host uid with its
 * caller or with host root. */
static void test_privileged_ignores_caller_ids(void **state)
{
    (void)state;
    struct nsbox_idmaps m;
    struct nsbox_err e = {0};
    struct nsbox_subids sub = {100000, 100000};
    assert_int_equal(nsbox_idmap_compute(true, 4242, 4343, 3, &sub, &m, &e), 0);
    assert_int_equal(m.n, 1);
    expect_map(&m.uid[0], 0, NSBOX_UID_BASE + 3 * 65536, 65536);
    expect_map(&m.gid[0], 0, NSBOX_UID_BASE + 3 * 65536, 65536);
}

/* Every slot: 65536 ids, inside the reserved range, never host root nor (uid_t)-1, below 2^31,
 * and the ranges of two slots never overlap (each starts where the one before ended). */
static void test_privileged_every_slot_distinct_never_root(void **state)
{
    (void)state;
    uint64_t next = NSBOX_UID_BASE;
    for (uint32_t slot = 0; slot < NSBOX_UID_SLOTS; slot++) {
        struct nsbox_idmaps m;
        struct nsbox_err e = {0};
        assert_int_equal(nsbox_idmap_compute(true, 0, 0, slot, NULL, &m, &e), 0);
        assert_int_equal(m.uid[0].count, 65536);
        assert_int_equal(m.uid[0].inside, 0);
        assert_int_equal(m.uid[0].outside, next);
        assert_int_not_equal(m.uid[0].outside, 0);
        uint64_t last = (uint64_t)m.uid[0].outside + m.uid[0].count - 1;
        assert_true(last < (uint64_t)UINT32_MAX);
        assert_true(last < 2147483648u);
        assert_true(last < 0x7FFE0000u); /* systemd's foreign range */
        char buf[64];
        assert_true(nsbox_idmap_format(&m.uid[0], buf, sizeof buf, &e) > 0);
        next = last + 1;
    }
    assert_int_equal(next, (uint64_t)NSBOX_UID_BASE + (uint64_t)NSBOX_UID_SLOTS * 65536);
}

/* The owner of a root sandbox's user namespace: an id of its own range (never host root, never
 * another slot's, never an egress helper's, which is a process of the host's namespace), and
 * not the slot's root id, whose holder would lose the set-up's capabilities on becoming
 * appuser. */
static void test_userns_owner_is_the_slots_last_id(void **state)
{
    (void)state;
    for (uint32_t slot = 0; slot < NSBOX_UID_SLOTS; slot++) {
        struct nsbox_idmaps m;
        struct nsbox_err e = {0};
        assert_int_equal(nsbox_idmap_compute(true, 0, 0, slot, NULL, &m, &e), 0);
        uint32_t owner = nsbox_idmap_userns_owner(slot);
        assert_int_equal(owner, m.uid[0].outside + m.uid[0].count - 1);
        assert_int_not_equal(owner, m.uid[0].outside);
        assert_int_not_equal(owner, m.app_uid);
        assert_true(owner < NSBOX_EGRESS_ID_BASE);
    }
}

static void test_privileged_slot_out_of_range(void **state)
{
    (void)state;
    uint32_t bad[] = {NSBOX_UID_SLOTS, NSBOX_UID_SLOTS + 1, 65535, UINT32_MAX};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct nsbox_idmaps m;
        struct nsbox_err e = {0};
        assert_int_equal(nsbox_idmap_compute(true, 0, 0, bad[i], NULL, &m, &e), -1);
        assert_int_equal(e.code, NSBOX_E_INVALID);
        assert_int_equal(e.sys_errno, ERANGE);
        assert_non_null(strstr(e.msg, "slot"));
    }
    /* The last valid slot is accepted (off-by-one on the bound). */
    struct nsbox_idmaps m;
    struct nsbox_err e = {0};
    assert_int_equal(nsbox_idmap_compute(true, 0, 0, NSBOX_UID_SLOTS - 1, NULL, &m, &e), 0);
    assert_int_equal(m.uid[0].outside, 2147259392u);
    assert_int_equal(m.uid[0].outside + 65535u, 2147324927u);
}

/* ---- unprivileged: the caller's own ids, and its subordinate ids ---------------------------- */

static void test_unprivileged_maps_to_caller(void **state)
{
    (void)state;
    struct nsbox_idmaps m;
    struct nsbox_err e = {0};
    /* slot is irrelevant (and may be anything) without privilege */
    assert_int_equal(nsbox_idmap_compute(false, 1234, 567, 99999999, NULL, &m, &e), 0);
    assert_int_equal(m.n, 1);
    assert_false(m.range);
    expect_map(&m.uid[0], NSBOX_SANDBOX_UID, 1234, 1);
    expect_map(&m.gid[0], NSBOX_SANDBOX_GID, 567, 1);
    assert_int_equal(m.app_uid, 1234);
    assert_int_equal(m.app_gid, 567);
}

/* With subordinate ids: 0-999 and 1001-65535 are start + N, appuser the caller, so that the
 * workspace's files stay the caller's. The three lines cover 0-65535 once each. */
static void test_unprivileged_with_subids(void **state)
{
    (void)state;
    struct nsbox_idmaps m;
    struct nsbox_err e = {0};
    struct nsbox_subids sub = {100000, 200000};
    assert_int_equal(nsbox_idmap_compute(false, 1001, 1002, 0, &sub, &m, &e), 0);
    assert_int_equal(m.n, 3);
    assert_true(m.range);
    expect_map(&m.uid[0], 0, 100000, 1000);
    expect_map(&m.uid[1], 1000, 1001, 1);
    expect_map(&m.uid[2], 1001, 101001, 64535);
    expect_map(&m.gid[0], 0, 200000, 1000);
    expect_map(&m.gid[1], 1000, 1002, 1);
    expect_map(&m.gid[2], 1001, 201001, 64535);
    uint32_t total = 0;
    for (unsigned i = 0; i < m.n; i++)
        total += m.uid[i].count;
    assert_int_equal(total, 65536);
    char buf[256];
    assert_int_equal(nsbox_idmap_format_lines(m.uid, m.n, buf, sizeof buf, &e),
                     (int)strlen("0 100000 1000\n1000 1001 1\n1001 101001 64535\n"));
    assert_string_equal(buf, "0 100000 1000\n1000 1001 1\n1001 101001 64535\n");
    /* too small a buffer for the last line is an error */
    assert_int_equal(nsbox_idmap_format_lines(m.uid, m.n, buf, 30, &e), -1);
    /* a range holding host root or reaching (uid_t)-1 is refused */
    struct nsbox_subids bad[] = {{0, 200000}, {100000, 0}, {UINT32_MAX - 65535, 200000}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(nsbox_idmap_compute(false, 1001, 1002, 0, &bad[i], &m, &e), -1);
}

static void test_unprivileged_rejects_root_and_unmapped(void **state)
{
    (void)state;
    struct {
        uint32_t uid, gid;
    } bad[] = {{0, 1000}, {(uint32_t)-1, 1000}, {1000, (uint32_t)-1}, {0, 0}};
    struct nsbox_subids sub = {100000, 100000};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        for (int with_sub = 0; with_sub < 2; with_sub++) {
            struct nsbox_idmaps m;
            struct nsbox_err e = {0};
            assert_int_equal(nsbox_idmap_compute(false, bad[i].uid, bad[i].gid, 0,
                                                 with_sub ? &sub : NULL, &m, &e),
                             -1);
            assert_int_equal(e.code, NSBOX_E_INVALID);
            assert_int_equal(e.sys_errno, EINVAL);
            assert_true(e.msg[0] != '\0');
        }
    }
}

/* ---- /etc/subuid ----------------------------------------------------------------------------- */

static void test_subid_find(void **state)
{
    (void)state;
    uint32_t start = 0;
    const char *text = "# comment\n"
                       "alice:100000:65536\n"
                       "bob:165536:1000\n"       /* too few */
                       "bob:300000:65536\n"
                       "1003:400000:70000\n"     /* by number */
                       "carol:0:65536\n"         /* host root */
                       "carol:4294901760:65536\n" /* reaches (uid_t)-1 */
                       "dave:500000:65536x\n"    /* not a number */
                       "eve:600000\n"            /* no count */
                       "frank:700000:65536";    /* no newline at the end */
    assert_true(nsbox_idmap_subid_find(text, "alice", 1001, &start));
    assert_int_equal(start, 100000);
    assert_true(nsbox_idmap_subid_find(text, "bob", 1002, &start));
    assert_int_equal(start, 300000);
    assert_true(nsbox_idmap_subid_find(text, "nobody-by-name", 1003, &start));
    assert_int_equal(start, 400000);
    assert_true(nsbox_idmap_subid_find(text, "frank", 1009, &start));
    assert_int_equal(start, 700000);
    start = 42;
    assert_false(nsbox_idmap_subid_find(text, "carol", 1004, &start));
    assert_false(nsbox_idmap_subid_find(text, "dave", 1005, &start));
    assert_false(nsbox_idmap_subid_find(text, "eve", 1006, &start));
    assert_false(nsbox_idmap_subid_find(text, "ali", 1007, &start)); /* a prefix is not a name */
    assert_false(nsbox_idmap_subid_find(text, "", 1008, &start));
    assert_false(nsbox_idmap_subid_find("", "alice", 1001, &start));
    assert_int_equal(start, 42);
    /* a range that holds the caller's own id would overlap appuser's line */
    assert_false(nsbox_idmap_subid_find("alice:1000:65536\n", "alice", 5000, &start));
    assert_true(nsbox_idmap_subid_find("alice:1000:65536\n", "alice", 999, &start));
}

/* ---- the idmapped --workspace DIR mount ------------------------------------------------------ */

/* Any owner's range that shares an id with the one asked about, whatever the line's owner;
 * malformed lines and empty ranges share nothing; no overflow at the top of the id space. */
static void test_subid_overlaps(void **state)
{
    (void)state;
    const char *text = "alice:100000:65536\n"
                       "1002:2000065536:10\n"
                       "bad line\n"
                       "carol:x:5\n"
                       "dave:3000000000:0\n"
                       "eve:4294967290:5";
    assert_true(nsbox_idmap_subid_overlaps(text, 165535, 1));
    assert_false(nsbox_idmap_subid_overlaps(text, 165536, 1));
    assert_false(nsbox_idmap_subid_overlaps(text, 34464, 65536)); /* ends at 99999 */
    assert_true(nsbox_idmap_subid_overlaps(text, 34465, 65536));
    assert_true(nsbox_idmap_subid_overlaps(text, 2000000000, 65536 + 1)); /* reaches 1002's */
    assert_false(nsbox_idmap_subid_overlaps(text, 2000000000, 65536));
    assert_false(nsbox_idmap_subid_overlaps(text, 3000000000u, 65536)); /* dave's is empty */
    assert_true(nsbox_idmap_subid_overlaps(text, 4294967294u, 1));
    assert_false(nsbox_idmap_subid_overlaps("", 0, 4294967295u));
    assert_false(nsbox_idmap_subid_overlaps(NULL, 0, 4294967295u));
}

static void test_mount_lines(void **state)
{
    (void)state;
    struct nsbox_idmap l[NSBOX_IDMAP_LINES];
    uint32_t base = nsbox_idmap_slot_base(5);
    assert_int_equal(nsbox_idmap_mount_lines(1234, base, l), 3);
    expect_map(&l[0], 1234, base + 1000, 1);
    expect_map(&l[1], base, base, 1000);
    expect_map(&l[2], base + 1001, base + 1001, 64535);
    /* an owner inside the range would overlap the other lines: appuser alone */
    assert_int_equal(nsbox_idmap_mount_lines(base + 7, base, l), 1);
    expect_map(&l[0], base + 7, base + 1000, 1);
    assert_int_equal(nsbox_idmap_mount_lines(base + 65536, base, l), 3);
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
    assert_int_equal(nsbox_idmap_slot_window(0, NSBOX_UID_SLOTS), 64);
    assert_int_equal(nsbox_idmap_slot_window(300, NSBOX_UID_SLOTS), 664);
    assert_int_equal(nsbox_idmap_slot_window(40000, NSBOX_UID_SLOTS), NSBOX_UID_SLOTS);
    assert_int_equal(nsbox_idmap_slot_window(UINT32_MAX, NSBOX_UID_SLOTS), NSBOX_UID_SLOTS);
    assert_int_equal(nsbox_idmap_slot_window(10, 20), 20);
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
                uint32_t s = nsbox_idmap_slot_probe(start, i, windows[w]);
                assert_true(s < slots);
                seen[s]++;
                /* the window first: the search stays among the low slots while it can */
                if (i < windows[w])
                    assert_true(s < windows[w]);
            }
            for (uint32_t s = 0; s < slots; s++)
                assert_int_equal(seen[s], 1);
            assert_int_equal(nsbox_idmap_slot_probe(start, 0, windows[w]), start);
        }
    }
}

/* Image owners live just below the sandboxes' ranges, never in one, and the mount line shows
 * them as a sandbox's own ids. */
static void test_image_ids(void **state)
{
    (void)state;
    assert_int_equal(nsbox_idmap_image_owner(0), NSBOX_IMAGE_ID_BASE);
    assert_int_equal(nsbox_idmap_image_owner(1000), NSBOX_IMAGE_ID_BASE + 1000);
    assert_int_equal(nsbox_idmap_image_owner(65535), NSBOX_IMAGE_ID_BASE + 65535);
    assert_int_equal(nsbox_idmap_image_owner(65536), NSBOX_IMAGE_ID_BASE + 65534);
    assert_int_equal(nsbox_idmap_image_owner(UINT64_MAX), NSBOX_IMAGE_ID_BASE + 65534);
    assert_true(NSBOX_IMAGE_ID_BASE + NSBOX_ID_COUNT == nsbox_idmap_slot_base(0));
    assert_true(NSBOX_IMAGE_ID_BASE > 0x6FFFFFFFu); /* above systemd's container ranges */
    struct nsbox_idmap l = nsbox_idmap_image_line(nsbox_idmap_slot_base(7));
    assert_int_equal(l.inside, NSBOX_IMAGE_ID_BASE); /* on disk */
    assert_int_equal(l.outside, nsbox_idmap_slot_base(7));
    assert_int_equal(l.count, NSBOX_ID_COUNT);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_privileged_slot_maps_a_range),
        cmocka_unit_test(test_privileged_ignores_caller_ids),
        cmocka_unit_test(test_privileged_every_slot_distinct_never_root),
        cmocka_unit_test(test_userns_owner_is_the_slots_last_id),
        cmocka_unit_test(test_privileged_slot_out_of_range),
        cmocka_unit_test(test_unprivileged_maps_to_caller),
        cmocka_unit_test(test_unprivileged_with_subids),
        cmocka_unit_test(test_unprivileged_rejects_root_and_unmapped),
        cmocka_unit_test(test_subid_find),
        cmocka_unit_test(test_subid_overlaps),
        cmocka_unit_test(test_mount_lines),
        cmocka_unit_test(test_format_text),
        cmocka_unit_test(test_format_range_checks),
        cmocka_unit_test(test_format_buffer_too_small),
        cmocka_unit_test(test_slot_window),
        cmocka_unit_test(test_slot_probe_visits_every_slot_once),
        cmocka_unit_test(test_image_ids),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
