/* Workspace decisions (policy/wsplan.c): which kind, how many inodes, tmpfs options, mkfs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "wsplan.h"

#include <string.h>

static void test_choose(void **state)
{
    (void)state;
    /* the caller's directory always wins: it is what they asked for */
    for (int fs = NSBOX_WS_FS_AUTO; fs <= NSBOX_WS_FS_TMPFS; fs++) {
        assert_int_equal(nsbox_ws_choose(true, fs, true), NSBOX_WS_DIR);
        assert_int_equal(nsbox_ws_choose(true, fs, false), NSBOX_WS_DIR);
    }
    /* otherwise a bounded filesystem, never an unbounded host directory */
    assert_int_equal(nsbox_ws_choose(false, NSBOX_WS_FS_AUTO, true), NSBOX_WS_EXT4);
    assert_int_equal(nsbox_ws_choose(false, NSBOX_WS_FS_AUTO, false), NSBOX_WS_TMPFS);
    assert_int_equal(nsbox_ws_choose(false, NSBOX_WS_FS_TMPFS, true), NSBOX_WS_TMPFS);
    assert_int_equal(nsbox_ws_choose(false, NSBOX_WS_FS_EXT4, true), NSBOX_WS_EXT4);
    /* ext4 asked for and impossible: refused, not quietly a tmpfs */
    assert_int_equal(nsbox_ws_choose(false, NSBOX_WS_FS_EXT4, false), -1);
    assert_string_equal(nsbox_ws_kind_name(NSBOX_WS_DIR), "directory");
    assert_string_equal(nsbox_ws_kind_name(NSBOX_WS_EXT4), "ext4");
    assert_string_equal(nsbox_ws_kind_name(NSBOX_WS_TMPFS), "tmpfs");
    assert_string_equal(nsbox_ws_kind_name((enum nsbox_ws_kind)9), "unknown");
}

static void test_inodes(void **state)
{
    (void)state;
    assert_int_equal(nsbox_ws_inodes(2ull << 30), 131072);  /* small */
    assert_int_equal(nsbox_ws_inodes(10ull << 30), 655360); /* medium */
    assert_int_equal(nsbox_ws_inodes(1ull << 20), NSBOX_WS_INODES_MIN);
    assert_int_equal(nsbox_ws_inodes(0), NSBOX_WS_INODES_MIN);
    /* 1 PiB, the spec's maximum, stays within ext4's 32-bit inode numbers */
    assert_true(nsbox_ws_inodes(1ull << 50) <= UINT32_MAX / 2);
}

static void test_tmpfs_options(void **state)
{
    (void)state;
    char buf[128];
    struct nsbox_err e = {0};
    assert_int_equal(nsbox_ws_tmpfs_options(64ull << 20, buf, sizeof buf, &e), 0);
    assert_string_equal(buf, "mode=0755,size=67108864,nr_inodes=4096");
    /* size=0 would mean "no limit" to tmpfs: refused */
    assert_int_equal(nsbox_ws_tmpfs_options(0, buf, sizeof buf, &e), -1);
    assert_int_equal(e.code, NSBOX_E_INVALID);
    char tiny[8];
    assert_int_equal(nsbox_ws_tmpfs_options(1ull << 20, tiny, sizeof tiny, &e), -1);
}

static void test_template_name(void **state)
{
    (void)state;
    char buf[64];
    struct nsbox_err e = {0};
    assert_int_equal(nsbox_ws_template_name(10ull << 30, buf, sizeof buf, &e), 0);
    assert_string_equal(buf, "workspace-v2-10737418240.ext4");
    char tiny[10];
    assert_int_equal(nsbox_ws_template_name(10ull << 30, tiny, sizeof tiny, &e), -1);
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
    assert_int_equal(nsbox_ws_mkfs_argv("/sbin/mkfs.ext4", "/x/t.img", 2ull << 30, &m, &e), 0);
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
    assert_int_equal(nsbox_ws_mkfs_argv("mkfs", "/t", 0, &m, &e), -1);
}

static void test_config(void **state)
{
    (void)state;
    struct nsbox_ws_config c;
    struct nsbox_err e = {0};
    nsbox_ws_config_init(&c);
    assert_false(c.overcommit); /* safe by default */
#define PARSE(s) nsbox_ws_config_from_json(s, strlen(s), &c, &e)
    assert_int_equal(PARSE("{}"), 0);
    assert_false(c.overcommit);
    assert_int_equal(PARSE("{\"instance_types\": {}, \"network\": {\"pool\": 1}}"), 0);
    assert_int_equal(PARSE("{\"workspace\": {\"overcommit\": true}}"), 0);
    assert_true(c.overcommit);
    assert_int_equal(PARSE("{\"workspace\": {\"overcommit\": false}}"), 0);
    assert_false(c.overcommit);
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
    c.overcommit = true;
    assert_int_equal(PARSE("{\"workspace\": {\"overcommit\": \"yes\"}}"), -1);
    assert_non_null(strstr(e.msg, "workspace.overcommit"));
    assert_true(c.overcommit);
    assert_int_equal(PARSE("{\"workspace\": {\"quota\": 1}}"), -1);
    assert_non_null(strstr(e.msg, "workspace.quota"));
    assert_int_equal(PARSE("{\"workspace\": true}"), -1);
    assert_int_equal(PARSE("[1]"), -1);
    assert_int_equal(PARSE("{"), -1);
    assert_int_equal(PARSE(""), -1);
#undef PARSE
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
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
