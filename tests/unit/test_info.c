/* nsbox info: the parsers fed with real /proc texts, the report's JSON shape and text layout,
 * and the namespace diagnosis under seccomp filters that make unshare fail the way a locked
 * down machine does (set in a forked child with no_new_privs, so no root is needed and nothing
 * outlives the test). */
#include "info.h"
#include "text.h"
#include "cleanup.h"

#include <cjson/cJSON.h>
#include <endian.h>
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <limits.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

/* ---- parsers ------------------------------------------------------------------------------- */

static const char proc_filesystems[] = "nodev\tsysfs\n"
                                       "nodev\ttmpfs\n"
                                       "nodev\tproc\n"
                                       "\text4\n"
                                       "nodev\toverlayfs_not_really\n"
                                       "nodev\toverlay\n"
                                       "\tvfat";

static void test_filesystems(void **state)
{
    assert_true(nsbox_info_filesystems_has(proc_filesystems, "overlay"));
    assert_true(nsbox_info_filesystems_has(proc_filesystems, "ext4"));
    assert_true(nsbox_info_filesystems_has(proc_filesystems, "vfat")); /* no final newline */
    assert_false(nsbox_info_filesystems_has(proc_filesystems, "nodev"));
    assert_false(nsbox_info_filesystems_has(proc_filesystems, "over"));
    assert_false(nsbox_info_filesystems_has(proc_filesystems, "btrfs"));
    assert_false(nsbox_info_filesystems_has("nodev\tsysfs\nnodev\ttmpfs\n", "overlay"));
    assert_false(nsbox_info_filesystems_has("", "overlay"));
    assert_false(nsbox_info_filesystems_has(NULL, "overlay"));
    assert_false(nsbox_info_filesystems_has(proc_filesystems, ""));
}

static void test_actions_avail(void **state)
{
    const char *modern = "kill_process kill_thread trap errno user_notif trace log allow\n";
    assert_true(nsbox_info_words_has(modern, "kill_process"));
    assert_true(nsbox_info_words_has(modern, "errno"));
    assert_true(nsbox_info_words_has(modern, "allow"));
    assert_false(nsbox_info_words_has(modern, "kill")); /* a prefix is not a word */
    /* Linux 4.14 before kill_process existed */
    const char *old = "kill trap errno trace log allow\n";
    assert_false(nsbox_info_words_has(old, "kill_process"));
    assert_true(nsbox_info_words_has(old, "kill"));
    assert_false(nsbox_info_words_has("", "errno"));
}

static void test_modules(void **state)
{
    const char *mods = "nft_chain_nat 16384 0 - Live 0x0000000000000000\n"
                       "nf_tables 319488 1 nft_chain_nat, Live 0x0000000000000000\n"
                       "nfnetlink 20480 1 nf_tables, Live 0x0000000000000000\n";
    assert_true(nsbox_info_modules_has(mods, "nf_tables"));
    assert_true(nsbox_info_modules_has(mods, "nfnetlink"));
    /* "nf_tables," in the used-by column of nfnetlink must not count */
    assert_false(nsbox_info_modules_has("nfnetlink 20480 1 nf_tables, Live 0x0\n", "nf_tables"));
    assert_false(nsbox_info_modules_has(mods, "overlay"));
    assert_false(nsbox_info_modules_has("", "nf_tables"));

    const char *builtin = "kernel/fs/overlayfs/overlay.ko\n"
                          "kernel/net/netfilter/nf_tables.ko\n"
                          "kernel/net/netfilter/nf-conntrack.ko\n";
    assert_true(nsbox_info_builtin_has(builtin, "nf_tables"));
    assert_true(nsbox_info_builtin_has(builtin, "overlay"));
    assert_true(nsbox_info_builtin_has(builtin, "nf_conntrack")); /* '-' and '_' are the same */
    assert_false(nsbox_info_builtin_has(builtin, "tables"));
    assert_false(nsbox_info_builtin_has("kernel/net/netfilter/nf_tables_inet.ko\n", "nf_tables"));
}

static void test_sysctl(void **state)
{
    long v = -7;
    assert_int_equal(nsbox_text_parse_long("96365\n", &v), 0);
    assert_int_equal(v, 96365);
    assert_int_equal(nsbox_text_parse_long("0\n", &v), 0);
    assert_int_equal(v, 0);
    assert_int_equal(nsbox_text_parse_long("  1  \n", &v), 0);
    assert_int_equal(v, 1);
    assert_int_equal(nsbox_text_parse_long("-1\n", &v), 0);
    assert_int_equal(v, -1);
    v = 42;
    assert_int_equal(nsbox_text_parse_long("", &v), -1);
    assert_int_equal(nsbox_text_parse_long("\n", &v), -1);
    assert_int_equal(nsbox_text_parse_long("1 2\n", &v), -1);
    assert_int_equal(nsbox_text_parse_long("yes\n", &v), -1);
    assert_int_equal(nsbox_text_parse_long("99999999999999999999999\n", &v), -1);
    assert_int_equal(nsbox_text_parse_long(NULL, &v), -1);
    assert_int_equal(v, 42); /* untouched on failure */
}

static void test_kernel_version(void **state)
{
    assert_true(nsbox_info_kernel_at_least("6.18.44-fc-v669", 5, 12));
    assert_true(nsbox_info_kernel_at_least("5.12.0", 5, 12));
    assert_true(nsbox_info_kernel_at_least("5.15.0-91-generic", 5, 12));
    assert_false(nsbox_info_kernel_at_least("5.11.22", 5, 12));
    assert_false(nsbox_info_kernel_at_least("4.19.0-25-amd64", 5, 12));
    assert_true(nsbox_info_kernel_at_least("6", 5, 12));
    assert_true(nsbox_info_kernel_at_least("5.10", 5, 6));
    assert_false(nsbox_info_kernel_at_least("", 5, 12));
    assert_false(nsbox_info_kernel_at_least("linux", 5, 12));
    assert_false(nsbox_info_kernel_at_least(NULL, 5, 12));
}

static void test_uid_map(void **state)
{
    assert_true(nsbox_info_uid_map_is_initial("         0          0 4294967295\n"));
    /* root of a rootless container */
    assert_false(nsbox_info_uid_map_is_initial("         0       1000          1\n"));
    assert_false(nsbox_info_uid_map_is_initial("         0     100000      65536\n"));
    assert_false(nsbox_info_uid_map_is_initial("0 0 4294967295\n1 1 1\n"));
    assert_false(nsbox_info_uid_map_is_initial(""));
}

static void test_format_bytes(void **state)
{
    char b[32];
    nsbox_info_format_bytes(4ull << 30, b, sizeof b);
    assert_string_equal(b, "4 GiB");
    nsbox_info_format_bytes(512ull << 20, b, sizeof b);
    assert_string_equal(b, "512 MiB");
    nsbox_info_format_bytes(1536ull << 20, b, sizeof b);
    assert_string_equal(b, "1536 MiB");
    nsbox_info_format_bytes(1000, b, sizeof b);
    assert_string_equal(b, "1000 bytes");
    nsbox_info_format_bytes(0, b, sizeof b);
    assert_string_equal(b, "0 bytes");
}

/* ---- rendering ----------------------------------------------------------------------------- */

static void sample(struct nsbox_check c[3], struct nsbox_instance_type t[2])
{
    memset(c, 0, 3 * sizeof *c);
    c[0] = (struct nsbox_check){.name = "user_namespaces", .ok = true, .required = true};
    snprintf(c[0].detail, sizeof c[0].detail, "max_user_namespaces=96365; works");
    c[1] = (struct nsbox_check){.name = "nftables", .ok = false, .required = false};
    snprintf(c[1].detail, sizeof c[1].detail, "nf_tables module not loaded \"quoted\"");
    snprintf(c[1].fix, sizeof c[1].fix, "sudo modprobe nf_tables");
    c[2] = (struct nsbox_check){.name = "cgroups", .ok = true, .required = true};
    snprintf(c[2].detail, sizeof c[2].detail, "v2");
    memset(t, 0, 2 * sizeof *t);
    snprintf(t[0].name, sizeof t[0].name, "small");
    t[0].limits = (struct nsbox_limits){1, 1ull << 30, 256, 2ull << 30};
    snprintf(t[1].name, sizeof t[1].name, "large");
    t[1].limits = (struct nsbox_limits){4, 8ull << 30, 4096, 20ull << 30};
}

static void test_json_shape(void **state)
{
    struct nsbox_check c[3];
    struct nsbox_instance_type t[2];
    sample(c, t);
    char buf[8192];
    int len = nsbox_info_render_json(c, 3, t, 2, NULL, buf, sizeof buf);
    assert_true(len > 0);
    assert_int_equal((size_t)len, strlen(buf));
    assert_int_equal(buf[len - 1], '\n');

    cJSON *root = cJSON_Parse(buf);
    assert_non_null(root);
    assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(root, "ok"))); /* optional miss */
    cJSON *checks = cJSON_GetObjectItemCaseSensitive(root, "checks");
    assert_true(cJSON_IsArray(checks));
    assert_int_equal(cJSON_GetArraySize(checks), 3);
    for (int i = 0; i < 3; i++) {
        cJSON *o = cJSON_GetArrayItem(checks, i);
        assert_int_equal(cJSON_GetArraySize(o), 5);
        cJSON *name = cJSON_GetObjectItemCaseSensitive(o, "name");
        assert_true(cJSON_IsString(name));
        assert_string_equal(name->valuestring, c[i].name);
        assert_true(cJSON_IsBool(cJSON_GetObjectItemCaseSensitive(o, "ok")));
        assert_int_equal(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "ok")), c[i].ok);
        assert_true(cJSON_IsBool(cJSON_GetObjectItemCaseSensitive(o, "required")));
        assert_string_equal(cJSON_GetObjectItemCaseSensitive(o, "detail")->valuestring,
                            c[i].detail);
        assert_string_equal(cJSON_GetObjectItemCaseSensitive(o, "fix")->valuestring, c[i].fix);
    }
    cJSON *types = cJSON_GetObjectItemCaseSensitive(root, "instance_types");
    assert_true(cJSON_IsArray(types));
    assert_int_equal(cJSON_GetArraySize(types), 2);
    cJSON *large = cJSON_GetArrayItem(types, 1);
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(large, "name")->valuestring, "large");
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(large, "cpus")->valuedouble, 4);
    assert_true(cJSON_GetObjectItemCaseSensitive(large, "memory")->valuedouble ==
                (double)(8ull << 30));
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(large, "pids")->valuedouble, 4096);
    assert_true(cJSON_GetObjectItemCaseSensitive(large, "disk")->valuedouble ==
                (double)(20ull << 30));
    cJSON_Delete(root);

    /* A required check failing makes the whole report not ok. */
    c[2].ok = false;
    len = nsbox_info_render_json(c, 3, t, 2, NULL, buf, sizeof buf);
    assert_true(len > 0);
    root = cJSON_Parse(buf);
    assert_non_null(root);
    assert_true(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(root, "ok")));
    cJSON_Delete(root);

    /* An empty type table is still an array. */
    len = nsbox_info_render_json(c, 3, NULL, 0, NULL, buf, sizeof buf);
    assert_true(len > 0);
    root = cJSON_Parse(buf);
    assert_true(cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(root, "instance_types")));
    cJSON_Delete(root);
}

static void test_render_too_small(void **state)
{
    struct nsbox_check c[3];
    struct nsbox_instance_type t[2];
    sample(c, t);
    char buf[64];
    errno = 0;
    assert_int_equal(nsbox_info_render_json(c, 3, t, 2, NULL, buf, sizeof buf), -1);
    assert_int_equal(errno, ENOSPC);
    errno = 0;
    assert_int_equal(nsbox_info_render_text(c, 3, t, 2, NULL, buf, sizeof buf), -1);
    assert_int_equal(errno, ENOSPC);
    assert_true(strlen(buf) < sizeof buf); /* still a string */
}

static void test_text_layout(void **state)
{
    struct nsbox_check c[3];
    struct nsbox_instance_type t[2];
    sample(c, t);
    char buf[8192];
    int len = nsbox_info_render_text(c, 3, t, 2, NULL, buf, sizeof buf);
    assert_true(len > 0);
    assert_int_equal((size_t)len, strlen(buf));
    assert_non_null(strstr(buf, "OK       user_namespaces   max_user_namespaces=96365; works\n"));
    assert_non_null(strstr(buf, "MISSING  nftables          (optional) nf_tables module not"));
    /* the fix is on its own indented line right under the check */
    assert_non_null(strstr(buf, "\"quoted\"\n                           fix: sudo modprobe "
                                "nf_tables\n"));
    assert_non_null(strstr(buf, "  small            1      1 GiB      256      2 GiB\n"));
    assert_non_null(strstr(buf, "  large            4      8 GiB     4096     20 GiB\n"));
    /* the summary is the last line */
    const char *last = strrchr(buf, '\n');
    assert_true(last == buf + len - 1);
    const char *prev = buf + len - 2;
    while (prev > buf && *prev != '\n')
        prev--;
    assert_non_null(strstr(prev, "summary: OK"));
    assert_non_null(strstr(prev, "optional features missing: nftables"));

    c[2].ok = false;
    snprintf(c[2].fix, sizeof c[2].fix, "run as root");
    len = nsbox_info_render_text(c, 3, t, 2, NULL, buf, sizeof buf);
    assert_true(len > 0);
    assert_non_null(strstr(buf, "summary: MISSING 1 required: cgroups;"));
    assert_null(strstr(buf, "(optional) v2")); /* required checks are not marked optional */
}

static void test_types_above_the_host_are_noted(void **state)
{
    struct nsbox_check c[3];
    struct nsbox_instance_type t[2];
    sample(c, t);
    char buf[8192];
    /* a small CI runner: large asks more of both */
    struct nsbox_info_host small_host = {2, 7ull << 30};
    int len = nsbox_info_render_text(c, 3, t, 2, &small_host, buf, sizeof buf);
    assert_true(len > 0);
    assert_non_null(strstr(buf, "  large            4      8 GiB     4096     20 GiB\n"
                                "  note: large's 4 CPUs are more than the 2 this machine gives "
                                "nsbox: a sandbox of it gets at most 2\n"
                                "  note: large's 8 GiB of memory are more than this machine's 7 "
                                "GiB: its limit is never reached, the machine runs out first and "
                                "its OOM killer chooses what to end\n\nsummary:"));
    assert_null(strstr(buf, "note: small"));
    /* the machine's memory is no round number: cut to a tenth, never shown as large's */
    struct nsbox_info_host near_host = {4, (8ull << 30) - (1ull << 20)};
    assert_true(nsbox_info_render_text(c, 3, t, 2, &near_host, buf, sizeof buf) > 0);
    assert_non_null(strstr(buf, "more than this machine's 7.9 GiB: its limit"));
    assert_null(strstr(buf, "CPUs are more"));
    /* a machine that holds them all: no note; nor without the machine's numbers */
    struct nsbox_info_host big_host = {4, 8ull << 30};
    assert_true(nsbox_info_render_text(c, 3, t, 2, &big_host, buf, sizeof buf) > 0);
    assert_null(strstr(buf, "note:"));
    assert_true(nsbox_info_render_text(c, 3, t, 2, NULL, buf, sizeof buf) > 0);
    assert_null(strstr(buf, "note:"));

    len = nsbox_info_render_json(c, 3, t, 2, &small_host, buf, sizeof buf);
    assert_true(len > 0);
    cJSON *root = cJSON_Parse(buf);
    assert_non_null(root);
    cJSON *h = cJSON_GetObjectItemCaseSensitive(root, "host");
    assert_true(cJSON_IsObject(h));
    assert_int_equal(cJSON_GetArraySize(h), 2);
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(h, "cpus")->valuedouble, 2);
    assert_true(cJSON_GetObjectItemCaseSensitive(h, "memory")->valuedouble ==
                (double)(7ull << 30));
    cJSON_Delete(root);
    len = nsbox_info_render_json(c, 3, t, 2, NULL, buf, sizeof buf);
    root = cJSON_Parse(buf);
    assert_null(cJSON_GetObjectItemCaseSensitive(root, "host"));
    cJSON_Delete(root);
}

static void test_all_required_ok(void **state)
{
    struct nsbox_check c[3];
    struct nsbox_instance_type t[2];
    sample(c, t);
    assert_true(nsbox_info_all_required_ok(c, 3));
    c[0].ok = false;
    assert_false(nsbox_info_all_required_ok(c, 3));
    assert_true(nsbox_info_all_required_ok(c, 0));
}

static void test_file_table(void **state)
{
    (void)state;
    const uint64_t mem = 24ull << 30;
    struct nsbox_check c;
    /* the kernel's default for 24 GiB: fillable, with the sysctl that fixes it */
    memset(&c, 0, sizeof c);
    nsbox_info_file_table(2466239, mem, NSBOX_INFO_RAISER_RAISES, &c);
    assert_false(c.ok);
    assert_non_null(strstr(c.detail, "fs.file-max 2466239 is fewer files than the memory could "
                                     "hold (201326592)"));
    assert_non_null(strstr(c.detail, "nsbox raises it when it makes a sandbox"));
    assert_string_equal(c.fix, "sysctl -w fs.file-max=9223372036854775807, and the same in a "
                               "file of /etc/sysctl.d (what systemd sets at boot)");
    /* not root: nsbox will not raise it */
    memset(&c, 0, sizeof c);
    nsbox_info_file_table(2466239, mem, NSBOX_INFO_RAISER_NOT_ROOT, &c);
    assert_false(c.ok);
    assert_null(strstr(c.detail, "nsbox raises it"));
    /* root in a container without userns-remap: /proc/sys is read-only, nothing is raised */
    memset(&c, 0, sizeof c);
    nsbox_info_file_table(2466239, mem, NSBOX_INFO_RAISER_READ_ONLY, &c);
    assert_false(c.ok);
    assert_null(strstr(c.detail, "nsbox raises it"));
    assert_non_null(strstr(c.detail, "nsbox cannot raise it here: /proc/sys/fs/file-max is not "
                                     "writable"));
    /* the administrator's "keep" */
    memset(&c, 0, sizeof c);
    nsbox_info_file_table(2466239, mem, NSBOX_INFO_RAISER_KEPT, &c);
    assert_null(strstr(c.detail, "nsbox raises it"));
    assert_non_null(strstr(c.detail, "\"file_max\": \"keep\"} leaves it as it is"));
    /* systemd's: each sandbox's memory bounds its files */
    memset(&c, 0, sizeof c);
    nsbox_info_file_table(LONG_MAX, mem, NSBOX_INFO_RAISER_NOT_ROOT, &c);
    assert_true(c.ok);
    assert_string_equal(c.fix, "");
    assert_non_null(strstr(c.detail, "fs.file-max 9223372036854775807: more open files"));
}

/* ---- the real checks on this machine ------------------------------------------------------- */

static void test_checks_well_formed(void **state)
{
    struct nsbox_check all[NSBOX_CHECK_COUNT];
    nsbox_info_check_run_all(all);
    for (int i = 0; i < NSBOX_CHECK_COUNT; i++) {
        assert_non_null(all[i].name);
        assert_string_equal(all[i].name, nsbox_info_check_name((enum nsbox_check_id)i));
        assert_true(all[i].detail[0] != '\0');
        /* a fix exactly when something is missing */
        if (all[i].ok)
            assert_string_equal(all[i].fix, "");
        else
            assert_true(all[i].fix[0] != '\0');
        /* nsbox_info_check_run gives the same key and verdict for one check alone */
        struct nsbox_check one;
        nsbox_info_check_run((enum nsbox_check_id)i, &one);
        assert_string_equal(one.name, all[i].name);
        assert_int_equal(one.required, all[i].required);
    }
    assert_null(nsbox_info_check_name(NSBOX_CHECK_COUNT));
    assert_true(all[NSBOX_CHECK_PRIVILEGES].ok);
}

/* ---- diagnosis under seccomp filters ------------------------------------------------------- */

struct diag_result {
    int ret, code, sys_errno;
    char msg[NSBOX_ERR_MSG_MAX];
};

enum filter_kind { FILTER_NONE, FILTER_USERNS_EPERM, FILTER_USERNS_KILL, FILTER_NETNS_ENOSPC };

/* Make unshare() with flag in its argument return ret (SECCOMP_RET_ERRNO | err, or a kill).
 * A raw program rather than libseccomp: policy/seccomp.h shadows <seccomp.h> on the include
 * path. The architecture is not checked because this filter only takes calls away; it is not a
 * security boundary. */
static int deny_unshare(unsigned long flag, unsigned ret)
{
    /* the low 32 bits of args[0], where every CLONE_NEW* flag lives */
    const unsigned arg0_lo =
        offsetof(struct seccomp_data, args[0]) + (__BYTE_ORDER == __BIG_ENDIAN ? 4 : 0);
    struct sock_filter insns[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_unshare, 0, 3),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, arg0_lo),
        BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, (unsigned)flag, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, ret),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {.len = NSBOX_ARRAY_LEN(insns), .filter = insns};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) return -1;
    return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0);
}

/* In a forked child: install the filter (no_new_privs lets an unprivileged process do it), run
 * the diagnosis, which forks its own probe that inherits the filter, and send back the error. */
static void run_diagnosis(enum filter_kind kind, int err, struct diag_result *out)
{
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        struct diag_result r = {0};
        int rc = 0;
        if (kind == FILTER_USERNS_EPERM)
            rc = deny_unshare(CLONE_NEWUSER, SECCOMP_RET_ERRNO | EPERM);
        else if (kind == FILTER_USERNS_KILL)
            rc = deny_unshare(CLONE_NEWUSER, SECCOMP_RET_KILL_PROCESS);
        else if (kind == FILTER_NETNS_ENOSPC)
            rc = deny_unshare(CLONE_NEWNET, SECCOMP_RET_ERRNO | ENOSPC);
        if (rc < 0) _exit(3);
        struct nsbox_err e = {0};
        r.ret = nsbox_diagnose_namespace_failure(err, &e);
        r.code = e.code;
        r.sys_errno = e.sys_errno;
        memcpy(r.msg, e.msg, sizeof r.msg);
        if (write(fds[1], &r, sizeof r) != (ssize_t)sizeof r) _exit(5);
        _exit(0);
    }
    close(fds[1]);
    size_t got = 0;
    while (got < sizeof *out) {
        ssize_t n = read(fds[0], (char *)out + got, sizeof *out - got);
        if (n <= 0) break;
        got += (size_t)n;
    }
    close(fds[0]);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    assert_int_equal(got, sizeof *out);
}

/* Whether this machine lets us make namespaces at all; the "plain error" case needs it. */
static bool namespaces_work(void)
{
    struct nsbox_check u, n;
    nsbox_info_check_run(NSBOX_CHECK_USERNS, &u);
    nsbox_info_check_run(NSBOX_CHECK_NAMESPACES, &n);
    return u.ok && n.ok;
}

static void test_diagnose_userns_blocked(void **state)
{
    struct diag_result r;
    run_diagnosis(FILTER_USERNS_EPERM, EPERM, &r);
    assert_int_equal(r.ret, -1);
    assert_int_equal(r.code, NSBOX_E_UNSUPPORTED);
    assert_int_equal(r.sys_errno, EPERM);
    assert_true(strncmp(r.msg, "user namespaces are not available: ", 35) == 0);
    assert_non_null(strstr(r.msg, "unshare(CLONE_NEWUSER) failed: EPERM"));
    assert_non_null(strstr(r.msg, "; fix: "));
}

/* Docker-style profiles that kill instead of failing: the probe dies, and that is the answer. */
static void test_diagnose_userns_killed(void **state)
{
    struct diag_result r;
    run_diagnosis(FILTER_USERNS_KILL, EPERM, &r);
    assert_int_equal(r.code, NSBOX_E_UNSUPPORTED);
    assert_true(strncmp(r.msg, "user namespaces are not available: ", 35) == 0);
    assert_non_null(strstr(r.msg, "killed by signal"));
    assert_non_null(strstr(r.msg, "; fix: "));
}

static void test_diagnose_netns_limit(void **state)
{
    if (!namespaces_work()) {
        skip(); /* the user namespace must work for the net namespace to be reached */
        return;
    }
    struct diag_result r;
    run_diagnosis(FILTER_NETNS_ENOSPC, ENOSPC, &r);
    assert_int_equal(r.code, NSBOX_E_UNSUPPORTED);
    assert_int_equal(r.sys_errno, ENOSPC);
    assert_true(strncmp(r.msg, "namespaces are not available: ", 30) == 0);
    assert_non_null(strstr(r.msg, "net (ENOSPC)"));
    assert_null(strstr(r.msg, "pid (")); /* only the culprit is named */
    assert_non_null(strstr(r.msg, "fix: "));
    assert_non_null(strstr(r.msg, "sysctl -w user.max_net_namespaces="));
}

static void test_diagnose_plain_error(void **state)
{
    if (!namespaces_work()) {
        skip();
        return;
    }
    struct diag_result r;
    run_diagnosis(FILTER_NONE, EAGAIN, &r);
    assert_int_equal(r.ret, -1);
    assert_int_equal(r.code, NSBOX_E_SYS);
    assert_int_equal(r.sys_errno, EAGAIN);
    assert_non_null(strstr(r.msg, strerror(EAGAIN)));
    assert_null(strstr(r.msg, "fix:"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_filesystems),
        cmocka_unit_test(test_actions_avail),
        cmocka_unit_test(test_modules),
        cmocka_unit_test(test_sysctl),
        cmocka_unit_test(test_kernel_version),
        cmocka_unit_test(test_uid_map),
        cmocka_unit_test(test_format_bytes),
        cmocka_unit_test(test_json_shape),
        cmocka_unit_test(test_render_too_small),
        cmocka_unit_test(test_types_above_the_host_are_noted),
        cmocka_unit_test(test_text_layout),
        cmocka_unit_test(test_all_required_ok),
        cmocka_unit_test(test_file_table),
        cmocka_unit_test(test_checks_well_formed),
        cmocka_unit_test(test_diagnose_userns_blocked),
        cmocka_unit_test(test_diagnose_userns_killed),
        cmocka_unit_test(test_diagnose_netns_limit),
        cmocka_unit_test(test_diagnose_plain_error),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
