/* The user of an exec'd process as the agent's SPAWN carries it (policy/spawnuser.c): what
 * parses, what is refused (the string comes from a peer of init's socket), and the round trip
 * of what the sender formats. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "spawnuser.h"

#include <string.h>

static void test_parse(void **state)
{
    (void)state;
    struct nsbox_spawnuser u;
    struct nsbox_err e = {0};
    assert_int_equal(nsbox_spawnuser_parse("1000 1001 23 20 30", &u, &e), 0);
    assert_int_equal(u.uid, 1000);
    assert_int_equal(u.gid, 1001);
    assert_int_equal(u.umask, 027); /* decimal on the wire */
    assert_int_equal(u.n_groups, 2);
    assert_int_equal(u.groups[0], 20);
    assert_int_equal(u.groups[1], 30);
    assert_int_equal(nsbox_spawnuser_parse("0 0 -1", &u, &e), 0);
    assert_int_equal(u.umask, -1);
    assert_int_equal(u.n_groups, 0);
    assert_int_equal(nsbox_spawnuser_parse("4294967294 4294967294 511", &u, &e), 0);
    assert_int_equal(u.uid, 4294967294u);
}

static void test_refused(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "",                /* nothing */
        "1000 1000",       /* no umask */
        "1000 1000 -1 ",   /* a trailing space */
        "1000  1000 -1",   /* two spaces */
        " 1000 1000 -1",   /* a leading one */
        "-1 0 -1",         /* uid -1: "unchanged" to the kernel */
        "0 -1 -1",         /* gid -1 */
        "0 0 -2",          /* a negative umask other than -1 */
        "0 0 512",         /* umask above 0777 */
        "4294967295 0 -1", /* (uid_t)-1 */
        "99999999999 0 -1",
        "0 0 -1 -1", /* a group -1 */
        "0 0 -1 x",
        "0 0 -1 4294967295",
        "1e3 0 -1",
        "+1 0 -1",
        "0x10 0 -1",
        "0 0 -",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        struct nsbox_spawnuser u;
        struct nsbox_err e = {0};
        if (nsbox_spawnuser_parse(bad[i], &u, &e) == 0)
            fail_msg("'%s' parsed", bad[i]);
        assert_true(e.msg[0] != '\0');
    }
}

static void test_groups_bounded(void **state)
{
    (void)state;
    char text[NSBOX_SPAWNUSER_TEXT_MAX + 64] = "1 1 -1";
    for (int i = 0; i < NSBOX_SPAWNUSER_GROUPS_MAX; i++)
        strcat(text, " 7");
    struct nsbox_spawnuser u;
    struct nsbox_err e = {0};
    assert_int_equal(nsbox_spawnuser_parse(text, &u, &e), 0);
    assert_int_equal(u.n_groups, NSBOX_SPAWNUSER_GROUPS_MAX);
    strcat(text, " 7"); /* one more */
    assert_int_equal(nsbox_spawnuser_parse(text, &u, &e), -1);
    assert_non_null(strstr(e.msg, "more than 32 groups"));
}

static void test_round_trip(void **state)
{
    (void)state;
    struct nsbox_spawnuser u = {.uid = 4294967294u,
                                .gid = 4294967294u,
                                .umask = 0777,
                                .n_groups = NSBOX_SPAWNUSER_GROUPS_MAX};
    for (size_t i = 0; i < u.n_groups; i++)
        u.groups[i] = 4294967294u - (uint32_t)i;
    char text[NSBOX_SPAWNUSER_TEXT_MAX];
    assert_int_equal(nsbox_spawnuser_format(&u, text, sizeof text), 0); /* the longest fits */
    struct nsbox_spawnuser back;
    struct nsbox_err e = {0};
    assert_int_equal(nsbox_spawnuser_parse(text, &back, &e), 0);
    assert_memory_equal(&u, &back, sizeof u);
    u.umask = 01000; /* out of range: not formatted */
    assert_int_equal(nsbox_spawnuser_format(&u, text, sizeof text), -1);
    u.umask = -1;
    assert_int_equal(nsbox_spawnuser_format(&u, text, 8), -1); /* does not fit */
}

/* The process's own capability sets after the groups: five masks in lowercase hex. */
static void test_caps(void **state)
{
    (void)state;
    struct nsbox_spawnuser u;
    struct nsbox_err e = {0};
    assert_int_equal(nsbox_spawnuser_parse("1000 1000 -1 20 caps 400 0 400 400 400", &u, &e), 0);
    assert_int_equal(u.n_groups, 1);
    assert_true(u.set_caps);
    assert_int_equal(u.caps[NSBOX_SPAWNUSER_BOUNDING], 0x400);
    assert_int_equal(u.caps[NSBOX_SPAWNUSER_EFFECTIVE], 0);
    assert_int_equal(u.caps[NSBOX_SPAWNUSER_AMBIENT], 0x400);
    assert_int_equal(nsbox_spawnuser_parse("0 0 -1 caps ffffffffffffffff 1 2 3 4", &u, &e), 0);
    assert_int_equal(u.n_groups, 0);
    assert_true(u.caps[NSBOX_SPAWNUSER_BOUNDING] == ~UINT64_C(0));
    assert_int_equal(nsbox_spawnuser_parse("0 0 -1", &u, &e), 0);
    assert_false(u.set_caps);
    static const char *const bad[] = {
        "0 0 -1 caps",                           /* no sets */
        "0 0 -1 caps ",                          /* none after the word */
        "0 0 -1 caps 1 2 3 4",                   /* four */
        "0 0 -1 caps 1 2 3 4 5 6",               /* six */
        "0 0 -1 caps 1 2 3 4 5 ",                /* a trailing space */
        "0 0 -1 caps 1  2 3 4 5",                /* two spaces */
        "0 0 -1 caps 1 2 3 4 F",                 /* upper case */
        "0 0 -1 caps 1 2 3 4 0x5",               /* a prefix */
        "0 0 -1 caps 1 2 3 4 10000000000000000", /* 17 digits */
        "0 0 -1 caps 1 2 3 4 -5",
        "0 0 -1 caps 1 2 3 4 5 20", /* a group after them */
        "0 0 -1 capsx 1 2 3 4 5",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        e.msg[0] = '\0';
        if (nsbox_spawnuser_parse(bad[i], &u, &e) == 0)
            fail_msg("'%s' parsed", bad[i]);
        assert_true(e.msg[0] != '\0');
    }
    /* the longest string with sets fits, and comes back the same */
    struct nsbox_spawnuser big, back;
    memset(&big, 0, sizeof big);
    big.uid = big.gid = 4294967294u;
    big.umask = 0777;
    big.n_groups = NSBOX_SPAWNUSER_GROUPS_MAX;
    for (size_t i = 0; i < big.n_groups; i++)
        big.groups[i] = 4294967294u;
    big.set_caps = big.no_new_privs = true;
    for (size_t i = 0; i < NSBOX_SPAWNUSER_CAPSETS; i++)
        big.caps[i] = ~UINT64_C(0) - i;
    char text[NSBOX_SPAWNUSER_TEXT_MAX];
    assert_int_equal(nsbox_spawnuser_format(&big, text, sizeof text), 0);
    assert_int_equal(nsbox_spawnuser_parse(text, &back, &e), 0);
    assert_memory_equal(&big, &back, sizeof big);
}

/* The process's own no_new_privs: "nnp" after the groups, before the sets. */
static void test_no_new_privs(void **state)
{
    (void)state;
    struct nsbox_spawnuser u;
    struct nsbox_err e = {0};
    assert_int_equal(nsbox_spawnuser_parse("0 0 -1 nnp", &u, &e), 0);
    assert_true(u.no_new_privs);
    assert_false(u.set_caps);
    assert_int_equal(nsbox_spawnuser_parse("1000 1000 -1 20 nnp caps 1 2 3 4 5", &u, &e), 0);
    assert_true(u.no_new_privs);
    assert_int_equal(u.n_groups, 1);
    assert_true(u.set_caps);
    assert_int_equal(u.caps[NSBOX_SPAWNUSER_AMBIENT], 5);
    assert_int_equal(nsbox_spawnuser_parse("0 0 -1 20 caps 1 2 3 4 5", &u, &e), 0);
    assert_false(u.no_new_privs);
    char text[NSBOX_SPAWNUSER_TEXT_MAX];
    struct nsbox_spawnuser back, v = {.umask = -1, .no_new_privs = true};
    assert_int_equal(nsbox_spawnuser_format(&v, text, sizeof text), 0);
    assert_string_equal(text, "0 0 -1 nnp");
    assert_int_equal(nsbox_spawnuser_parse(text, &back, &e), 0);
    assert_memory_equal(&v, &back, sizeof v);
    static const char *const bad[] = {
        "0 0 -1 nnp ",                /* a trailing space */
        "0 0 -1 nnpx",                /* another word */
        "0 0 -1 nnp nnp",             /* twice */
        "0 0 -1 nnp 20",              /* a group after it */
        "0 0 -1 caps 1 2 3 4 5 nnp",  /* after the sets */
        "0 0 -1 nnp  caps 1 2 3 4 5", /* two spaces */
        "0 0 -1 nnp caps 1 2 3 4",    /* four sets */
        "0 0 nnp",                    /* in place of the umask */
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        e.msg[0] = '\0';
        if (nsbox_spawnuser_parse(bad[i], &u, &e) == 0)
            fail_msg("'%s' parsed", bad[i]);
        assert_true(e.msg[0] != '\0');
    }
}

static void test_add_gids(void **state)
{
    (void)state;
    uint32_t g[4];
    size_t n = 0;
    struct nsbox_err e = {0};
    assert_int_equal(nsbox_spawnuser_add_gids("20,30", g, &n, 4, &e), 0);
    assert_int_equal(nsbox_spawnuser_add_gids("4294967294", g, &n, 4, &e), 0);
    assert_int_equal(n, 3);
    assert_int_equal(g[0], 20);
    assert_int_equal(g[1], 30);
    assert_int_equal(g[2], 4294967294u);
    static const char *const bad[] = {"",           ",",     "20,", ",20",  "20,,30", "-1",
                                      "4294967295", "20 30", "x",   "0x10", "+5"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        size_t m = 0;
        if (nsbox_spawnuser_add_gids(bad[i], g, &m, 4, &e) == 0)
            fail_msg("'%s' parsed", bad[i]);
        assert_non_null(strstr(e.msg, "separated by commas"));
    }
    n = 3;
    assert_int_equal(nsbox_spawnuser_add_gids("1,2", g, &n, 4, &e), -1); /* room for one */
    assert_non_null(strstr(e.msg, "more than 4 groups"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse),          cmocka_unit_test(test_refused),
        cmocka_unit_test(test_groups_bounded), cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_add_gids),       cmocka_unit_test(test_caps),
        cmocka_unit_test(test_no_new_privs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
