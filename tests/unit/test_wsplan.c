/* Workspace decisions (policy/wsplan.c): which kind, how many inodes, tmpfs options, mkfs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "cfgtext.h"
#include "wsplan.h"

#include <string.h>

static void test_choose(void **state)
{
    (void)state;
    /* the caller's directory always wins: it is what they asked for */
    for (int fs = NSBOX_WS_FS_AUTO; fs <= NSBOX_WS_FS_TMPFS; fs++) {
        assert_int_equal(nsbox_wsplan_choose(true, fs, true), NSBOX_WS_DIR);
        assert_int_equal(nsbox_wsplan_choose(true, fs, false), NSBOX_WS_DIR);
    }
    /* otherwise a bounded filesystem, never an unbounded host directory */
    assert_int_equal(nsbox_wsplan_choose(false, NSBOX_WS_FS_AUTO, true), NSBOX_WS_EXT4);
    assert_int_equal(nsbox_wsplan_choose(false, NSBOX_WS_FS_AUTO, false), NSBOX_WS_TMPFS);
    assert_int_equal(nsbox_wsplan_choose(false, NSBOX_WS_FS_TMPFS, true), NSBOX_WS_TMPFS);
    assert_int_equal(nsbox_wsplan_choose(false, NSBOX_WS_FS_EXT4, true), NSBOX_WS_EXT4);
    /* ext4 asked for and impossible: refused, not quietly a tmpfs */
    assert_int_equal(nsbox_wsplan_choose(false, NSBOX_WS_FS_EXT4, false), -1);
    assert_string_equal(nsbox_wsplan_kind_name(NSBOX_WS_DIR), "directory");
    assert_string_equal(nsbox_wsplan_kind_name(NSBOX_WS_EXT4), "ext4");
    assert_string_equal(nsbox_wsplan_kind_name(NSBOX_WS_TMPFS), "tmpfs");
    assert_string_equal(nsbox_wsplan_kind_name((enum nsbox_ws_kind)9), "unknown");
}

static void test_inodes(void **state)
{
    (void)state;
    assert_int_equal(nsbox_wsplan_inodes(2ull << 30), 131072);  /* small */
    assert_int_equal(nsbox_wsplan_inodes(10ull << 30), 655360); /* medium */
    assert_int_equal(nsbox_wsplan_inodes(1ull << 20), NSBOX_WS_INODES_MIN);
    assert_int_equal(nsbox_wsplan_inodes(0), NSBOX_WS_INODES_MIN);
    /* 1 PiB, the spec's maximum, stays within ext4's 32-bit inode numbers */
    assert_true(nsbox_wsplan_inodes(1ull << 50) <= UINT32_MAX / 2);
}

static void test_tmpfs_options(void **state)
{
    (void)state;
    char buf[128];
    struct nsbox_err e = {0};
    assert_int_equal(nsbox_wsplan_tmpfs_options(64ull << 20, buf, sizeof buf, &e), 0);
    assert_string_equal(buf, "mode=0755,size=67108864,nr_inodes=4096");
    /* size=0 would mean "no limit" to tmpfs: refused */
    assert_int_equal(nsbox_wsplan_tmpfs_options(0, buf, sizeof buf, &e), -1);
    assert_int_equal(e.code, NSBOX_E_INVALID);
    char tiny[8];
    assert_int_equal(nsbox_wsplan_tmpfs_options(1ull << 20, tiny, sizeof tiny, &e), -1);
}

static void test_template_name(void **state)
{
    (void)state;
    char buf[64];
    struct nsbox_err e = {0};
    assert_int_equal(nsbox_wsplan_template_name(10ull << 30, buf, sizeof buf, &e), 0);
    assert_string_equal(buf, "workspace-v2-10737418240.ext4");
    char tiny[10];
    assert_int_equal(nsbox_wsplan_template_name(10ull << 30, tiny, sizeof tiny, &e), -1);
}

static const char *arg_after(char *const argv[], const char *flag)
{
    for (size_t i = 0; argv[i]; i++)
        if (!strcmp(argv[i], flag))
            return argv[i + 1];
    return NULL;
}

static void test_mkfs_argv(void **state)
{
    (void)state;
    struct nsbox_ws_mkfs m;
    struct nsbox_err e = {0};
    assert_int_equal(nsbox_wsplan_mkfs_argv("/sbin/mkfs.ext4", "/x/t.img", 2ull << 30, &m, &e), 0);
    size_t n = 0;
    while (m.argv[n])
        n++;
    assert_true(n < NSBOX_WS_MKFS_ARGV_MAX);
    assert_string_equal(m.argv[0], "/sbin/mkfs.ext4");
    assert_string_equal(m.argv[n - 1], "/x/t.img"); /* the size comes from the file */
    assert_string_equal(arg_after(m.argv, "-t"), "ext4");
    assert_string_equal(arg_after(m.argv, "-m"), "0");      /* nothing reserved for root */
    assert_string_equal(arg_after(m.argv, "-N"), "131072"); /* the inode limit */
    const char *feat = arg_after(m.argv, "-O");
    assert_non_null(strstr(feat, "^has_journal"));
    assert_non_null(strstr(feat, "^resize_inode"));
    assert_non_null(strstr(feat, "sparse_super2"));
    assert_non_null(strstr(arg_after(m.argv, "-E"), "num_backup_sb=0"));
    assert_non_null(strstr(arg_after(m.argv, "-E"), "lazy_itable_init=1"));
    assert_non_null(arg_after(m.argv, "-F")); /* regular file target */
    assert_int_equal(nsbox_wsplan_mkfs_argv("mkfs", "/t", 0, &m, &e), -1);
}

static int parse(const char *text, struct nsbox_ws_config *c, struct nsbox_err *e)
{
    cleanup_cjson cJSON *root = cfgtext(text);
    return nsbox_wsplan_config_from_json(root, c, e);
}

static void test_config(void **state)
{
    (void)state;
    struct nsbox_ws_config c;
    struct nsbox_err e = {0};
    nsbox_wsplan_config_init(&c);
    /* thin provisioning by default: each workspace limited, none reserved */
    assert_false(c.reserve);
    assert_int_equal(c.min_free_bytes, 1ull << 30);
    assert_int_equal(c.min_free_percent, 5);
#define PARSE(s) parse(s, &c, &e)
    assert_int_equal(PARSE("{}"), 0);
    assert_false(c.reserve);
    assert_int_equal(PARSE("{\"instance_types\": {}, \"network\": {\"pool\": 1}}"), 0);
    assert_int_equal(PARSE("{\"workspace\": {\"reserve\": true}}"), 0);
    assert_true(c.reserve);
    assert_int_equal(PARSE("{\"workspace\": {\"reserve\": false}}"), 0);
    assert_false(c.reserve);
    /* the older name, inverted, still read; both given must agree */
    assert_int_equal(PARSE("{\"workspace\": {\"overcommit\": false}}"), 0);
    assert_true(c.reserve);
    assert_int_equal(PARSE("{\"workspace\": {\"overcommit\": true}}"), 0);
    assert_false(c.reserve);
    assert_int_equal(PARSE("{\"workspace\": {\"overcommit\": true, \"reserve\": false}}"), 0);
    assert_int_equal(PARSE("{\"workspace\": {\"overcommit\": true, \"reserve\": true}}"), -1);
    assert_non_null(strstr(e.msg, "workspace.overcommit"));
    assert_false(c.reserve);
    /* the floor: a size string or bytes, and a percentage */
    assert_int_equal(PARSE("{\"workspace\": {\"min_free\": \"64MiB\", \"min_free_percent\": 0}}"),
                     0);
    assert_int_equal(c.min_free_bytes, 64ull << 20);
    assert_int_equal(c.min_free_percent, 0);
    assert_int_equal(PARSE("{\"workspace\": {\"min_free\": 4096, \"min_free_percent\": 10}}"), 0);
    assert_int_equal(c.min_free_bytes, 4096);
    assert_int_equal(c.min_free_percent, 10);
    assert_int_equal(PARSE("{\"workspace\": {\"min_free\": \"lots\"}}"), -1);
    assert_non_null(strstr(e.msg, "workspace.min_free"));
    assert_int_equal(PARSE("{\"workspace\": {\"min_free\": -1}}"), -1);
    assert_int_equal(PARSE("{\"workspace\": {\"min_free\": 1.5}}"), -1);
    assert_int_equal(PARSE("{\"workspace\": {\"min_free_percent\": 91}}"), -1);
    assert_non_null(strstr(e.msg, "workspace.min_free_percent"));
    assert_int_equal(PARSE("{\"workspace\": {\"min_free_percent\": 2.5}}"), -1);
    assert_int_equal(PARSE("{\"workspace\": {\"min_free_percent\": \"5\"}}"), -1);
    assert_int_equal(c.min_free_bytes, 4096); /* unchanged by the errors */
    assert_int_equal(c.min_free_percent, 10);
    assert_int_equal(c.fs, NSBOX_WS_FS_AUTO);
    assert_int_equal(PARSE("{\"workspace\": {\"fs\": \"tmpfs\"}}"), 0);
    assert_int_equal(c.fs, NSBOX_WS_FS_TMPFS);
    assert_int_equal(PARSE("{\"workspace\": {\"fs\": \"ext4\"}}"), 0);
    assert_int_equal(c.fs, NSBOX_WS_FS_EXT4);
    assert_int_equal(PARSE("{\"workspace\": {\"fs\": \"auto\"}}"), 0);
    assert_int_equal(c.fs, NSBOX_WS_FS_AUTO);
    assert_int_equal(PARSE("{\"workspace\": {\"fs\": \"xfs\"}}"), -1);
    assert_non_null(strstr(e.msg, "workspace.fs"));
    assert_int_equal(PARSE("{\"workspace\": {\"fs\": 1}}"), -1);
    assert_int_equal(c.fs, NSBOX_WS_FS_AUTO);
    /* errors leave the config as it was, and say which key */
    c.reserve = true;
    assert_int_equal(PARSE("{\"workspace\": {\"reserve\": \"yes\"}}"), -1);
    assert_non_null(strstr(e.msg, "workspace.reserve"));
    assert_true(c.reserve);
    assert_int_equal(PARSE("{\"workspace\": {\"overcommit\": \"yes\"}}"), -1);
    assert_non_null(strstr(e.msg, "workspace.overcommit"));
    assert_true(c.reserve);
    assert_int_equal(PARSE("{\"workspace\": {\"quota\": 1}}"), -1);
    assert_non_null(strstr(e.msg, "workspace.quota"));
    assert_int_equal(PARSE("{\"workspace\": true}"), -1);
#undef PARSE
}

static void test_min_free(void **state)
{
    (void)state;
    struct nsbox_ws_config c;
    nsbox_wsplan_config_init(&c);
    const uint64_t GiB = 1ull << 30;
    /* the larger of 1 GiB and 5 % of the filesystem */
    assert_int_equal(nsbox_wsplan_min_free(&c, 0), GiB);
    assert_int_equal(nsbox_wsplan_min_free(&c, 3 * GiB), GiB);
    assert_int_equal(nsbox_wsplan_min_free(&c, 20 * GiB), GiB); /* 5 % is exactly 1 GiB */
    assert_int_equal(nsbox_wsplan_min_free(&c, 100 * GiB), 5 * GiB);
    assert_int_equal(nsbox_wsplan_min_free(&c, 2000 * GiB), 100 * GiB);
    /* no overflow at the largest sizes, and rounded down, never above 5 % */
    assert_int_equal(nsbox_wsplan_min_free(&c, UINT64_MAX), UINT64_MAX / 100 * 5 + 15 * 5 / 100);
    assert_int_equal(nsbox_wsplan_min_free(&c, 100 * GiB + 99), 5 * GiB + 4);
    c.min_free_bytes = 64ull << 20;
    c.min_free_percent = 0;
    assert_int_equal(nsbox_wsplan_min_free(&c, 100 * GiB), 64ull << 20);
    c.min_free_bytes = 0;
    assert_int_equal(nsbox_wsplan_min_free(&c, 100 * GiB), 0);
}

static void test_admit(void **state)
{
    (void)state;
    const uint64_t GiB = 1ull << 30;
    struct nsbox_ws_config c;
    nsbox_wsplan_config_init(&c);
    uint64_t missing = 7;
    /* The host: 79 GiB free of 100, seven medium (10 GiB) workspaces live and empty.
     * Thin: the 8th and the 12th start; so does one larger than all the free space. */
    struct nsbox_ws_space s = {.fs_bytes = 100 * GiB, .avail = 79 * GiB, .promised = 70 * GiB};
    assert_true(nsbox_wsplan_admit(&c, &s, 10 * GiB, &missing));
    assert_int_equal(missing, 0);
    s.promised = 110 * GiB;
    assert_true(nsbox_wsplan_admit(&c, &s, 10 * GiB, NULL));
    assert_true(nsbox_wsplan_admit(&c, &s, 500 * GiB, NULL));
    /* a CI runner: 14 GiB free of 80 (floor 4 GiB): many medium ones */
    struct nsbox_ws_space ci = {.fs_bytes = 80 * GiB, .avail = 14 * GiB, .promised = 40 * GiB};
    assert_true(nsbox_wsplan_admit(&c, &ci, 10 * GiB, NULL));
    /* refused only under the floor, with what is missing */
    s.avail = 5 * GiB; /* the floor of 100 GiB is 5 GiB: still in */
    assert_true(nsbox_wsplan_admit(&c, &s, 10 * GiB, NULL));
    s.avail = 5 * GiB - 1;
    assert_false(nsbox_wsplan_admit(&c, &s, 10 * GiB, &missing));
    assert_int_equal(missing, 1);
    s.avail = 0;
    assert_false(nsbox_wsplan_admit(&c, &s, 1, &missing));
    assert_int_equal(missing, 5 * GiB);
    /* a small filesystem: the 1 GiB part of the floor binds */
    struct nsbox_ws_space small = {.fs_bytes = 3 * GiB, .avail = GiB - 4096};
    assert_false(nsbox_wsplan_admit(&c, &small, 2 * GiB, &missing));
    assert_int_equal(missing, 4096);

    /* reserve: the strict promise, as before thin provisioning was the default */
    c.reserve = true;
    s = (struct nsbox_ws_space){.fs_bytes = 100 * GiB, .avail = 79 * GiB, .promised = 70 * GiB};
    assert_false(nsbox_wsplan_admit(&c, &s, 10 * GiB, &missing)); /* the 8th medium */
    assert_int_equal(missing, GiB);
    s.promised = 69 * GiB;
    assert_true(nsbox_wsplan_admit(&c, &s, 10 * GiB, &missing)); /* exactly fits */
    assert_int_equal(missing, 0);
    /* no floor in reserve: all the free space may be promised */
    s = (struct nsbox_ws_space){.fs_bytes = 100 * GiB, .avail = 2 * GiB, .promised = 0};
    assert_true(nsbox_wsplan_admit(&c, &s, 2 * GiB, NULL));
    assert_false(nsbox_wsplan_admit(&c, &s, 2 * GiB + 1, &missing));
    assert_int_equal(missing, 1);
    /* sums that would wrap are never admitted */
    s.promised = UINT64_MAX;
    s.avail = UINT64_MAX - 1;
    assert_false(nsbox_wsplan_admit(&c, &s, 2, NULL));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_choose),
        cmocka_unit_test(test_inodes),
        cmocka_unit_test(test_tmpfs_options),
        cmocka_unit_test(test_template_name),
        cmocka_unit_test(test_mkfs_argv),
        cmocka_unit_test(test_config),
        cmocka_unit_test(test_min_free),
        cmocka_unit_test(test_admit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
