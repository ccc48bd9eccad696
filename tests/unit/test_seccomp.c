/* Seccomp profiles: parsing (every error names its field), compiling, the on-disk cache, and the
 * default filter's behaviour, checked by really loading it in forked children (no root needed:
 * no_new_privs is enough) and probing with side-effect-free arguments. Where it can, a probe
 * also runs unfiltered to show that the kernel alone would have answered differently, i.e.
 * that the filter is what denied it. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "seccomp_profile.h"
#include <seccomp.h>

#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef AF_VSOCK
#define AF_VSOCK 40
#endif
#ifndef AF_ALG
#define AF_ALG 38
#endif
#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif
#ifndef UFFD_USER_MODE_ONLY
#define UFFD_USER_MODE_ONLY 1
#endif

static struct sock_fprog default_prog;

static int group_setup(void **state)
{
    struct nsbox_err e = {0};
    if (nsbox_seccomp_default_prog(NULL, &default_prog, &e) < 0) {
        fprintf(stderr, "default program: %s\n", e.msg);
        return -1;
    }
    return 0;
}

static int group_teardown(void **state)
{
    nsbox_seccomp_prog_free(&default_prog);
    return 0;
}

/* ---- parsing ----------------------------------------------------------------------------- */

static void parse_ok(const char *json, struct nsbox_seccomp_profile *p)
{
    struct nsbox_err e = {0};
    if (nsbox_seccomp_profile_parse(json, strlen(json), p, &e) < 0)
        fail_msg("unexpected parse error: %s\n  for: %s", e.msg, json);
}

static void parse_fails(const char *json, size_t len, const char *want)
{
    struct nsbox_err e = {0};
    struct nsbox_seccomp_profile p;
    int rc = nsbox_seccomp_profile_parse(json, len, &p, &e);
    if (rc == 0) {
        nsbox_seccomp_profile_free(&p);
        fail_msg("parsed, but wanted an error containing \"%s\"\n  for: %.200s", want, json);
    }
    assert_int_equal(rc, -1);
    assert_int_equal(e.code, NSBOX_E_INVALID);
    if (!strstr(e.msg, want))
        fail_msg("error \"%s\"\n  does not contain \"%s\"\n  for: %.200s", e.msg, want, json);
    /* A failed parse leaves nothing to free. */
    assert_null(p.rules);
    assert_int_equal(p.n_rules, 0);
}

static const struct nsbox_scmp_rule *find_rule(const struct nsbox_seccomp_profile *p,
                                               const char *name, size_t nth)
{
    for (size_t i = 0; i < p->n_rules; i++)
        if (!strcmp(p->rules[i].name, name) && nth-- == 0) return &p->rules[i];
    return NULL;
}

static void test_minimal_profile(void **state)
{
    struct nsbox_seccomp_profile p;
    parse_ok("{\"defaultAction\":\"SCMP_ACT_ALLOW\"}", &p);
    assert_int_equal(p.default_action, NSBOX_SCMP_ALLOW);
    assert_int_equal(p.badarch_action, NSBOX_SCMP_KILL_PROCESS); /* safe default */
    assert_int_equal(p.n_rules, 0);
    struct sock_fprog prog;
    struct nsbox_err e = {0};
    assert_int_equal(nsbox_seccomp_compile(&p, &prog, &e), 0);
    assert_true(prog.len > 0);
    nsbox_seccomp_prog_free(&prog);
    nsbox_seccomp_profile_free(&p);
}

static void test_docker_style_profile(void **state)
{
    const char *json =
        "{\"defaultAction\":\"SCMP_ACT_ALLOW\", \"badArchAction\":\"SCMP_ACT_KILL_PROCESS\","
        " \"comment\": \"example\","
        " \"syscalls\":[{\"names\":[\"mount\",\"umount2\"],\"action\":\"SCMP_ACT_ERRNO\","
        "   \"errnoRet\":1, \"comment\":\"x\","
        "   \"args\":[{\"index\":0,\"value\":4294967295,\"valueTwo\":0,"
        "              \"op\":\"SCMP_CMP_MASKED_EQ\"}]},"
        "  {\"names\":[\"ioctl\"],\"action\":\"SCMP_ACT_ERRNO\","
        "   \"args\":[{\"index\":1,\"value\":\"0xffffffff\",\"valueTwo\":\"0x5412\","
        "              \"op\":\"SCMP_CMP_MASKED_EQ\"},"
        "             {\"index\":2,\"value\":\"18446744073709551615\",\"op\":\"SCMP_CMP_NE\"}]},"
        "  {\"names\":[\"getppid\"],\"action\":\"SCMP_ACT_KILL\"},"
        "  {\"names\":[\"sync\"],\"action\":\"SCMP_ACT_LOG\"},"
        "  {\"names\":[\"syncfs\"],\"action\":\"SCMP_ACT_TRAP\"},"
        "  {\"names\":[\"acct\"],\"action\":\"SCMP_ACT_KILL_PROCESS\"}]}";
    struct nsbox_seccomp_profile p;
    parse_ok(json, &p);
    assert_int_equal(p.n_rules, 7); /* names expanded */
    const struct nsbox_scmp_rule *r = find_rule(&p, "umount2", 0);
    assert_non_null(r);
    assert_int_equal(r->action, NSBOX_SCMP_ERRNO);
    assert_int_equal(r->errno_ret, 1);
    assert_int_equal(r->src_index, 0);
    assert_int_equal(r->n_args, 1);
    assert_int_equal(r->args[0].op, NSBOX_OP_MASKED_EQ);
    assert_true(r->args[0].value == 0xffffffffu);
    r = find_rule(&p, "ioctl", 0);
    assert_non_null(r);
    assert_int_equal(r->errno_ret, EPERM); /* SCMP_ACT_ERRNO without errnoRet */
    assert_int_equal(r->n_args, 2);
    assert_true(r->args[0].value2 == 0x5412);
    assert_true(r->args[1].value == UINT64_MAX); /* exact: strings are not doubles */
    assert_int_equal(find_rule(&p, "getppid", 0)->action, NSBOX_SCMP_KILL_THREAD);
    assert_int_equal(find_rule(&p, "sync", 0)->action, NSBOX_SCMP_LOG);
    assert_int_equal(find_rule(&p, "syncfs", 0)->action, NSBOX_SCMP_TRAP);
    assert_int_equal(find_rule(&p, "acct", 0)->action, NSBOX_SCMP_KILL_PROCESS);
    struct sock_fprog prog;
    struct nsbox_err e = {0};
    assert_int_equal(nsbox_seccomp_compile(&p, &prog, &e), 0);
    nsbox_seccomp_prog_free(&prog);
    nsbox_seccomp_profile_free(&p);
}

static void test_allow_list_profile(void **state)
{
    struct nsbox_seccomp_profile p;
    parse_ok("{\"defaultAction\":\"SCMP_ACT_ERRNO\",\"defaultErrnoRet\":38,"
             " \"syscalls\":[{\"names\":[\"read\",\"write\",\"exit_group\"],"
             "                \"action\":\"SCMP_ACT_ALLOW\"},"
             "               {\"names\":[\"openat\"],\"action\":\"SCMP_ACT_ERRNO\"}]}",
             &p);
    assert_int_equal(p.default_action, NSBOX_SCMP_ERRNO);
    assert_int_equal(p.default_errno, ENOSYS);
    /* ERRNO(EPERM) differs from the default ERRNO(ENOSYS): a real rule. */
    assert_int_equal(find_rule(&p, "openat", 0)->errno_ret, EPERM);
    struct sock_fprog prog;
    struct nsbox_err e = {0};
    assert_int_equal(nsbox_seccomp_compile(&p, &prog, &e), 0);
    nsbox_seccomp_prog_free(&prog);
    nsbox_seccomp_profile_free(&p);
}

#define ALLOW_HEAD "{\"defaultAction\":\"SCMP_ACT_ALLOW\","
#define RULE1(body) ALLOW_HEAD "\"syscalls\":[" body "]}"
#define ARG1(argobj)                                                                               \
    RULE1("{\"names\":[\"mount\"],\"action\":\"SCMP_ACT_ERRNO\",\"args\":[" argobj "]}")

/* Profiles that must be refused, and what the error must say. */
static const struct {
    const char *json, *want;
} bad_profiles[] = {
    {"", "invalid JSON"},
    {"{\"defaultAction\":", "invalid JSON"},
    {"[]", "must be a JSON object"},
    {"{}", "defaultAction: missing"},
    {"{\"defaultAction\":\"SCMP_ACT_ALLOW\"} x", "unexpected data after the JSON object"},
    {"{\"defaultAction\":1}", "defaultAction: must be a string"},
    {"{\"defaultAction\":\"SCMP_ACT_NOPE\"}", "defaultAction: unknown action 'SCMP_ACT_NOPE'"},
    {ALLOW_HEAD "\"bogus\":1}", "unknown key 'bogus'"},
    {ALLOW_HEAD "\"comment\":1}", "comment: must be a string"},
    {ALLOW_HEAD "\"defaultAction\":\"SCMP_ACT_ALLOW\"}", "defaultAction: given twice"},
    {ALLOW_HEAD "\"architectures\":[\"SCMP_ARCH_X86\"]}", "architectures: not supported"},
    {ALLOW_HEAD "\"defaultErrnoRet\":1}", "defaultErrnoRet: only valid"},
    {"{\"defaultAction\":\"SCMP_ACT_ERRNO\",\"defaultErrnoRet\":5000}",
     "defaultErrnoRet: must be an integer from 0 to 4095"},
    {ALLOW_HEAD "\"badArchAction\":\"SCMP_ACT_ALLOW\"}", "badArchAction: must be"},
    {ALLOW_HEAD "\"badArchAction\":\"SCMP_ACT_LOG\"}", "badArchAction: must be"},
    {ALLOW_HEAD "\"badArchAction\":7}", "badArchAction: must be a string"},
    {ALLOW_HEAD "\"syscalls\":{}}", "syscalls: must be an array"},
    {RULE1("1"), "syscalls[0]: must be an object"},
    {RULE1("{\"action\":\"SCMP_ACT_ERRNO\"}"), "syscalls[0].names: missing"},
    {RULE1("{\"names\":[\"mount\"]}"), "syscalls[0].action: missing"},
    {RULE1("{\"names\":[],\"action\":\"SCMP_ACT_ERRNO\"}"),
     "syscalls[0].names: must be a non-empty array"},
    {RULE1("{\"names\":\"mount\",\"action\":\"SCMP_ACT_ERRNO\"}"),
     "syscalls[0].names: must be a non-empty array"},
    {RULE1("{\"names\":[1],\"action\":\"SCMP_ACT_ERRNO\"}"),
     "syscalls[0].names[0]: must be a string"},
    {RULE1("{\"names\":[\"Mount!\"],\"action\":\"SCMP_ACT_ERRNO\"}"),
     "syscalls[0].names[0]: 'Mount!' is not a syscall name"},
    {RULE1("{\"names\":[\"\"],\"action\":\"SCMP_ACT_ERRNO\"}"),
     "syscalls[0].names[0]: '' is not a syscall name"},
    {RULE1("{\"names\":[\"mount\",\"nosuchcall\"],\"action\":\"SCMP_ACT_ERRNO\"}"),
     "syscalls[0].names[1]: unknown syscall 'nosuchcall'"},
    {RULE1("{\"names\":[\"mount\"],\"action\":\"SCMP_ACT_LOG\",\"errnoRet\":1}"),
     "syscalls[0].errnoRet: only valid with SCMP_ACT_ERRNO"},
    {RULE1("{\"names\":[\"mount\"],\"action\":\"SCMP_ACT_ERRNO\",\"errnoRet\":-1}"),
     "syscalls[0].errnoRet: must be an integer from 0 to 4095"},
    {RULE1("{\"names\":[\"mount\"],\"action\":\"SCMP_ACT_ERRNO\",\"errnoRet\":1.5}"),
     "syscalls[0].errnoRet: must be an integer from 0 to 4095"},
    {RULE1("{\"names\":[\"mount\"],\"action\":\"SCMP_ACT_ERRNO\",\"errnoRet\":\"1\"}"),
     "syscalls[0].errnoRet: must be an integer from 0 to 4095"},
    {RULE1("{\"names\":[\"mount\"],\"action\":\"SCMP_ACT_ALLOW\"}"),
     "syscalls[0].action: same as defaultAction"},
    {RULE1("{\"names\":[\"mount\"],\"action\":\"SCMP_ACT_TRACE\"}"),
     "syscalls[0].action: SCMP_ACT_TRACE is not supported"},
    {RULE1("{\"names\":[\"mount\"],\"action\":\"SCMP_ACT_ERRNO\",\"optional\":\"yes\"}"),
     "syscalls[0].optional: must be true or false"},
    {RULE1("{\"names\":[\"mount\"],\"action\":\"SCMP_ACT_ERRNO\",\"comment\":5}"),
     "syscalls[0].comment: must be a string"},
    {RULE1("{\"names\":[\"mount\"],\"action\":\"SCMP_ACT_ERRNO\",\"includes\":{}}"),
     "syscalls[0]: unknown key 'includes'"},
    {RULE1("{\"names\":[\"mount\"],\"action\":\"SCMP_ACT_ERRNO\","
           "\"action\":\"SCMP_ACT_ERRNO\"}"),
     "syscalls[0].action: given twice"},
    {RULE1("{\"names\":[\"mount\"],\"action\":\"SCMP_ACT_ERRNO\",\"args\":{}}"),
     "syscalls[0].args: must be an array"},
    {ARG1("1"), "syscalls[0].args[0]: must be an object"},
    {ARG1("{\"index\":0,\"value\":0,\"op\":\"SCMP_CMP_EQ\"},"
          "{\"index\":1,\"value\":0,\"op\":\"SCMP_CMP_EQ\"},"
          "{\"index\":2,\"value\":0,\"op\":\"SCMP_CMP_EQ\"},"
          "{\"index\":3,\"value\":0,\"op\":\"SCMP_CMP_EQ\"},"
          "{\"index\":4,\"value\":0,\"op\":\"SCMP_CMP_EQ\"},"
          "{\"index\":5,\"value\":0,\"op\":\"SCMP_CMP_EQ\"},"
          "{\"index\":0,\"value\":0,\"op\":\"SCMP_CMP_EQ\"}"),
     "syscalls[0].args: more than 6 comparisons"},
    {ARG1("{\"value\":1,\"op\":\"SCMP_CMP_EQ\"}"), "syscalls[0].args[0].index: missing"},
    {ARG1("{\"index\":0,\"op\":\"SCMP_CMP_EQ\"}"), "syscalls[0].args[0].value: missing"},
    {ARG1("{\"index\":0,\"value\":1}"), "syscalls[0].args[0].op: missing"},
    {ARG1("{\"index\":6,\"value\":1,\"op\":\"SCMP_CMP_EQ\"}"),
     "syscalls[0].args[0].index: must be an integer from 0 to 5"},
    {ARG1("{\"index\":\"0\",\"value\":1,\"op\":\"SCMP_CMP_EQ\"}"),
     "syscalls[0].args[0].index: must be an integer from 0 to 5"},
    {ARG1("{\"index\":0,\"value\":1,\"op\":\"SCMP_CMP_FOO\"}"),
     "syscalls[0].args[0].op: unknown operator 'SCMP_CMP_FOO'"},
    {ARG1("{\"index\":0,\"value\":1,\"op\":3}"), "syscalls[0].args[0].op: must be a string"},
    {ARG1("{\"index\":0,\"value\":-1,\"op\":\"SCMP_CMP_EQ\"}"),
     "syscalls[0].args[0].value: must be an integer from 0 to 2^53-1"},
    {ARG1("{\"index\":0,\"value\":1.25,\"op\":\"SCMP_CMP_EQ\"}"),
     "syscalls[0].args[0].value: must be an integer from 0 to 2^53-1"},
    {ARG1("{\"index\":0,\"value\":1e300,\"op\":\"SCMP_CMP_EQ\"}"),
     "syscalls[0].args[0].value: must be an integer from 0 to 2^53-1"},
    /* 2^53 + 1 is rounded by the JSON parser: refused rather than silently changed. */
    {ARG1("{\"index\":0,\"value\":9007199254740993,\"op\":\"SCMP_CMP_EQ\"}"),
     "syscalls[0].args[0].value: must be an integer from 0 to 2^53-1"},
    {ARG1("{\"index\":0,\"value\":\"0xzz\",\"op\":\"SCMP_CMP_EQ\"}"),
     "syscalls[0].args[0].value: '0xzz' is not an unsigned 64-bit integer"},
    {ARG1("{\"index\":0,\"value\":\"0x10000000000000000\",\"op\":\"SCMP_CMP_EQ\"}"),
     "syscalls[0].args[0].value: '0x10000000000000000' is not an unsigned 64-bit"},
    {ARG1("{\"index\":0,\"value\":\"18446744073709551616\",\"op\":\"SCMP_CMP_EQ\"}"),
     "is not an unsigned 64-bit integer"},
    {ARG1("{\"index\":0,\"value\":\"\",\"op\":\"SCMP_CMP_EQ\"}"),
     "syscalls[0].args[0].value: '' is not"},
    {ARG1("{\"index\":0,\"value\":\" 1\",\"op\":\"SCMP_CMP_EQ\"}"),
     "syscalls[0].args[0].value: ' 1' is not"},
    {ARG1("{\"index\":0,\"value\":\"-1\",\"op\":\"SCMP_CMP_EQ\"}"),
     "syscalls[0].args[0].value: '-1' is not"},
    {ARG1("{\"index\":0,\"value\":true,\"op\":\"SCMP_CMP_EQ\"}"),
     "syscalls[0].args[0].value: must be an integer (number or string)"},
    {ARG1("{\"index\":0,\"value\":1,\"valueTwo\":1,\"op\":\"SCMP_CMP_EQ\"}"),
     "syscalls[0].args[0].valueTwo: only SCMP_CMP_MASKED_EQ uses valueTwo"},
    {ARG1("{\"index\":0,\"value\":1,\"valueTwo\":\"x\",\"op\":\"SCMP_CMP_MASKED_EQ\"}"),
     "syscalls[0].args[0].valueTwo: 'x' is not"},
    {ARG1("{\"index\":0,\"value\":\"0x5412\",\"valueTwo\":\"0xffffffff\","
          "\"op\":\"SCMP_CMP_MASKED_EQ\"}"),
     "syscalls[0].args[0].valueTwo: 0xffffffff has bits outside the mask 0x5412"},
    {ARG1("{\"index\":0,\"value\":1,\"op\":\"SCMP_CMP_EQ\"},"
          "{\"index\":0,\"value\":2,\"op\":\"SCMP_CMP_EQ\"}"),
     "syscalls[0].args[1].index: argument 0 is already compared"},
    {ARG1("{\"index\":0,\"valeu\":1,\"op\":\"SCMP_CMP_EQ\"}"),
     "syscalls[0].args[0]: unknown key 'valeu'"},
    {ARG1("{\"index\":0,\"value\":1,\"op\":\"SCMP_CMP_EQ\",\"comment\":[]}"),
     "syscalls[0].args[0].comment: must be a string"},
    /* libseccomp would keep one of the two actions silently. */
    {RULE1("{\"names\":[\"mount\"],\"action\":\"SCMP_ACT_ERRNO\"},"
           "{\"names\":[\"chroot\",\"mount\"],\"action\":\"SCMP_ACT_ERRNO\",\"errnoRet\":38}"),
     "syscalls[1].names[1]: 'mount' already has a different action in syscalls[0]"},
    {RULE1("{\"names\":[\"ioctl\"],\"action\":\"SCMP_ACT_ERRNO\",\"args\":[{\"index\":1,"
           "\"value\":21522,\"op\":\"SCMP_CMP_EQ\"}]},"
           "{\"names\":[\"ioctl\"],\"action\":\"SCMP_ACT_KILL_PROCESS\"}"),
     "syscalls[1].names[0]: 'ioctl' already has a different action in syscalls[0]"},
};

static void test_bad_profiles(void **state)
{
    for (size_t i = 0; i < sizeof bad_profiles / sizeof bad_profiles[0]; i++)
        parse_fails(bad_profiles[i].json, strlen(bad_profiles[i].json), bad_profiles[i].want);

    /* Errors say where they come from. */
    struct nsbox_err e = {0};
    struct nsbox_seccomp_profile p;
    const char *j = RULE1("{\"names\":[\"nosuchcall\"],\"action\":\"SCMP_ACT_ERRNO\"}");
    assert_int_equal(nsbox_seccomp_profile_parse(j, strlen(j), &p, &e), -1);
    assert_string_equal(e.msg, "seccomp profile: syscalls[0].names[0]: unknown syscall "
                               "'nosuchcall' (mark the rule \"optional\": true to skip names "
                               "this libseccomp does not know)");
    /* Only the given length is read: the text after it is not part of the profile. */
    const char *cut = "{\"defaultAction\":\"SCMP_ACT_ALLOW\"}garbage";
    assert_int_equal(nsbox_seccomp_profile_parse(cut, strlen(cut) - 7, &p, &e), 0);
    nsbox_seccomp_profile_free(&p);
    parse_fails(NULL, 0, "no text");
}

static void test_limits(void **state)
{
    /* Size: refused before parsing. */
    size_t big = NSBOX_SECCOMP_JSON_MAX + 1;
    char *buf = malloc(big);
    assert_non_null(buf);
    memset(buf, ' ', big);
    memcpy(buf, "{\"defaultAction\":\"SCMP_ACT_ALLOW\"}", 34);
    parse_fails(buf, big, "more than the limit");
    /* Exactly at the limit is fine (trailing whitespace). */
    struct nsbox_seccomp_profile p;
    struct nsbox_err e = {0};
    assert_int_equal(nsbox_seccomp_profile_parse(buf, big - 1, &p, &e), 0);
    nsbox_seccomp_profile_free(&p);
    free(buf);

    /* Rule count: counted after expanding names. */
    size_t cap = 64 + (NSBOX_SECCOMP_MAX_RULES + 1) * 16;
    char *json = malloc(cap);
    assert_non_null(json);
    for (int n = NSBOX_SECCOMP_MAX_RULES; n <= NSBOX_SECCOMP_MAX_RULES + 1; n++) {
        size_t off = (size_t)snprintf(json, cap, ALLOW_HEAD "\"syscalls\":[{\"names\":[");
        for (int i = 0; i < n; i++)
            off += (size_t)snprintf(json + off, cap - off, "%s\"getpid\"", i ? "," : "");
        snprintf(json + off, cap - off, "],\"action\":\"SCMP_ACT_LOG\"}]}");
        if (n == NSBOX_SECCOMP_MAX_RULES) {
            parse_ok(json, &p);
            assert_int_equal(p.n_rules, NSBOX_SECCOMP_MAX_RULES);
            nsbox_seccomp_profile_free(&p);
        } else {
            parse_fails(json, strlen(json), "more than 1024 rules");
        }
    }
    free(json);

    /* Deep nesting is bounded by cJSON (CJSON_NESTING_LIMIT), not by our stack. */
    size_t depth = 100000;
    char *deep = malloc(depth * 2);
    assert_non_null(deep);
    memset(deep, '[', depth);
    memset(deep + depth, ']', depth);
    parse_fails(deep, depth * 2, "invalid JSON");
    free(deep);
}

static void test_unknown_and_optional(void **state)
{
    struct nsbox_seccomp_profile p;
    /* Known names stay, unknown ones are skipped and counted. */
    parse_ok(RULE1("{\"names\":[\"no_such_call_v2\",\"mount\",\"open_tree_attr_future\"],"
                   "\"action\":\"SCMP_ACT_ERRNO\",\"optional\":true}"),
             &p);
    assert_int_equal(p.n_rules, 1);
    assert_int_equal(p.n_skipped, 2);
    assert_string_equal(p.rules[0].name, "mount");
    assert_true(p.rules[0].optional);
    struct sock_fprog prog;
    struct nsbox_err e = {0};
    assert_int_equal(nsbox_seccomp_compile(&p, &prog, &e), 0);
    nsbox_seccomp_prog_free(&prog);
    nsbox_seccomp_profile_free(&p);

    /* "optional": false is the default behaviour. */
    const char *j = RULE1("{\"names\":[\"no_such_call_v2\"],\"action\":\"SCMP_ACT_ERRNO\","
                          "\"optional\":false}");
    parse_fails(j, strlen(j), "unknown syscall 'no_such_call_v2'");

    /* Pseudo-syscalls (real elsewhere, not on this architecture) are known, not errors. */
    parse_ok(RULE1("{\"names\":[\"vm86\",\"umount\"],\"action\":\"SCMP_ACT_ERRNO\"}"), &p);
    assert_int_equal(p.n_rules, 2);
    assert_int_equal(nsbox_seccomp_compile(&p, &prog, &e), 0);
    nsbox_seccomp_prog_free(&prog);
    nsbox_seccomp_profile_free(&p);

    /* A hand-built profile with an unknown name fails at compile time, naming it. */
    struct nsbox_scmp_rule r = {
        .name = "nosuchcall", .action = NSBOX_SCMP_ERRNO, .errno_ret = 1, .src_index = 4};
    struct nsbox_seccomp_profile hand = {.default_action = NSBOX_SCMP_ALLOW,
                                         .badarch_action = NSBOX_SCMP_KILL_PROCESS,
                                         .n_rules = 1,
                                         .rules = &r};
    assert_int_equal(nsbox_seccomp_compile(&hand, &prog, &e), -1);
    assert_non_null(strstr(e.msg, "syscalls[4]: unknown syscall 'nosuchcall'"));
    r.optional = true;
    assert_int_equal(nsbox_seccomp_compile(&hand, &prog, &e), 0);
    nsbox_seccomp_prog_free(&prog);
    /* ...and a bad-arch action that would let i386/x32 through is refused there too. */
    hand.badarch_action = NSBOX_SCMP_ALLOW;
    assert_int_equal(nsbox_seccomp_compile(&hand, &prog, &e), -1);
    assert_non_null(strstr(e.msg, "badArchAction"));
    assert_null(prog.filter);
}

/* The brief's list: every one of these must be denied with EPERM, unconditionally. */
static const char *const must_deny[] = {
    "mount",
    "umount2",
    "pivot_root",
    "move_mount",
    "open_tree",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "mount_setattr",
    "unshare",
    "setns",
    "chroot",
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "keyctl",
    "add_key",
    "request_key",
    "kexec_load",
    "kexec_file_load",
    "init_module",
    "finit_module",
    "delete_module",
    "open_by_handle_at",
    "name_to_handle_at",
    "reboot",
    "swapon",
    "swapoff",
    "acct",
    "settimeofday",
    "clock_settime",
    "clock_adjtime",
    "adjtimex",
    "syslog",
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "lookup_dcookie",
    "vhangup",
    "quotactl",
    "nfsservctl",
    "uselib",
    "ustat",
    "sysfs",
    "_sysctl",
    "get_kernel_syms",
    "query_module",
    "create_module",
    "iopl",
    "ioperm",
    "vm86",
    "vm86old",
    "pciconfig_read",
    "pciconfig_write",
    "pciconfig_iobase",
    "fanotify_init",
};
static const char *const must_allow[] = {"kcmp",       "mbind",  "set_mempolicy", "migrate_pages",
                                         "move_pages", "read",   "execve",        "clone",
                                         "ioctl",      "socket", "personality",   "seccomp"};

static void test_default_profile(void **state)
{
    const char *text = nsbox_seccomp_default_json();
    struct nsbox_seccomp_profile p;
    parse_ok(text, &p);
    assert_int_equal(p.default_action, NSBOX_SCMP_ALLOW);
    assert_int_equal(p.badarch_action, NSBOX_SCMP_KILL_PROCESS);
    assert_int_equal(p.n_skipped, 0);
    print_message("default profile: %zu bytes of JSON, %zu rules\n", strlen(text), p.n_rules);
    assert_true(p.n_rules > 100 && p.n_rules < 300);

    for (size_t i = 0; i < sizeof must_deny / sizeof must_deny[0]; i++) {
        const struct nsbox_scmp_rule *r = find_rule(&p, must_deny[i], 0);
        if (!r) fail_msg("default profile does not deny %s", must_deny[i]);
        assert_int_equal(r->action, NSBOX_SCMP_ERRNO);
        assert_int_equal(r->errno_ret, EPERM);
        assert_int_equal(r->n_args, 0);
    }
    for (size_t i = 0; i < sizeof must_allow / sizeof must_allow[0]; i++) {
        const struct nsbox_scmp_rule *r = find_rule(&p, must_allow[i], 0);
        /* Either no rule, or only conditional ones. */
        if (r && r->n_args == 0) fail_msg("default profile denies %s outright", must_allow[i]);
    }
    const struct nsbox_scmp_rule *r = find_rule(&p, "clone3", 0);
    assert_non_null(r);
    assert_int_equal(r->errno_ret, ENOSYS);
    /* One rule per namespace flag (an OR of single-bit masked compares). */
    size_t n_clone = 0;
    uint64_t clone_bits = 0;
    for (size_t i = 0; (r = find_rule(&p, "clone", i)); i++, n_clone++) {
        assert_int_equal(r->n_args, 1);
        assert_int_equal(r->args[0].op, NSBOX_OP_MASKED_EQ);
        assert_true(r->args[0].value == r->args[0].value2);
        clone_bits |= r->args[0].value;
    }
    assert_int_equal(n_clone, 8);
    assert_true(clone_bits == (0x7E020000u | CLONE_NEWTIME));
    /* ioctl: TIOCSTI and TIOCLINUX, low 32 bits. */
    for (size_t i = 0; i < 2; i++) {
        r = find_rule(&p, "ioctl", i);
        assert_non_null(r);
        assert_int_equal(r->args[0].index, 1);
        assert_true(r->args[0].value == 0xffffffffu);
        assert_true(r->args[0].value2 == (i ? 0x541C : 0x5412));
    }
    assert_null(find_rule(&p, "ioctl", 2));
    nsbox_seccomp_profile_free(&p);

    struct sock_fprog prog;
    struct nsbox_err e = {0};
    assert_int_equal(nsbox_seccomp_default_prog(NULL, &prog, &e), 0);
    print_message("default program: %u BPF instructions\n", prog.len);
    assert_true(prog.len > 20 && prog.len <= BPF_MAXINSNS);
    /* Starts with the architecture check (seccomp_data.arch at offset 4). */
    assert_int_equal(prog.filter[0].code, BPF_LD | BPF_W | BPF_ABS);
    assert_int_equal(prog.filter[0].k, 4);
    nsbox_seccomp_prog_free(&prog);
}

/* ---- the on-disk cache ------------------------------------------------------------------- */

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static bool same_prog(const struct sock_fprog *a, const struct sock_fprog *b)
{
    return a->len == b->len && !memcmp(a->filter, b->filter, a->len * sizeof *a->filter);
}

/* The one cache file in dir (there is exactly one per profile/libseccomp/arch). */
static void cache_file(const char *dir, char *path, size_t n)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "ls %s", dir);
    FILE *f = popen(cmd, "r");
    assert_non_null(f);
    char name[256];
    int found = 0;
    while (fgets(name, sizeof name, f)) {
        name[strcspn(name, "\n")] = '\0';
        if (!strncmp(name, "seccomp-", 8) && strstr(name, ".bpf")) {
            snprintf(path, n, "%s/%s", dir, name);
            found++;
        } else {
            fail_msg("unexpected file left in the cache dir: %s", name);
        }
    }
    pclose(f);
    assert_int_equal(found, 1);
}

/* test_cache's directory, file, and the program compiled without a cache to compare with. */
struct cache_fx {
    char dir[40], sub[56], file[512];
    struct sock_fprog fresh;
};

/* Compile from scratch, timed; keeps the last program in fresh. Microseconds per compile. */
static double cache_compile(struct cache_fx *c, int rounds)
{
    struct nsbox_err e = {0};
    struct sock_fprog *fresh = &c->fresh;
    double t0 = now_us();
    for (int i = 0; i < rounds; i++) {
        nsbox_seccomp_default_forget();
        assert_int_equal(nsbox_seccomp_default_prog(NULL, fresh, &e), 0);
        if (i < rounds - 1) nsbox_seccomp_prog_free(fresh);
    }
    return (now_us() - t0) / rounds;
}

/* The first use of the cache directory writes the file, with these modes and size. */
static void cache_first_use(struct cache_fx *c)
{
    struct nsbox_err e = {0};
    struct sock_fprog prog;
    const char *sub = c->sub;
    const struct sock_fprog *fresh = &c->fresh;
    /* First use of the cache dir writes the file. */
    nsbox_seccomp_default_forget();
    assert_int_equal(nsbox_seccomp_default_prog(sub, &prog, &e), 0);
    assert_true(same_prog(&prog, fresh));
    nsbox_seccomp_prog_free(&prog);
    cache_file(sub, c->file, sizeof c->file);
    const char *file = c->file;
    struct stat st;
    assert_int_equal(stat(file, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0644);
    assert_int_equal((size_t)st.st_size, 32 + fresh->len * sizeof(struct sock_filter));
    assert_int_equal(stat(sub, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0700);
}

/* Loading from the cache must be the cheap path by a wide margin. */
static void cache_load(struct cache_fx *c, int rounds, double compile_us)
{
    struct nsbox_err e = {0};
    struct sock_fprog prog;
    const char *sub = c->sub;
    const struct sock_fprog *fresh = &c->fresh;
    double t0;
    /* Load from the cache: time it. */
    t0 = now_us();
    for (int i = 0; i < rounds; i++) {
        nsbox_seccomp_default_forget();
        assert_int_equal(nsbox_seccomp_default_prog(sub, &prog, &e), 0);
        assert_true(same_prog(&prog, fresh));
        nsbox_seccomp_prog_free(&prog);
    }
    double cached_us = (now_us() - t0) / rounds;
    /* In-process copy (what every later call in the same process costs). */
    t0 = now_us();
    for (int i = 0; i < rounds; i++) {
        assert_int_equal(nsbox_seccomp_default_prog(sub, &prog, &e), 0);
        nsbox_seccomp_prog_free(&prog);
    }
    double memory_us = (now_us() - t0) / rounds;
    print_message("default program: compile %.0f us, from disk cache %.1f us, in-process "
                  "%.2f us (%u instructions)\n",
                  compile_us, cached_us, memory_us, fresh->len);
    /* Reading back must be the cheap path by a wide margin (it is ~100x here). */
    assert_true(cached_us * 5 < compile_us);
}

/* A changed byte is found and the file rewritten. */
static void cache_corrupt(struct cache_fx *c)
{
    struct nsbox_err e = {0};
    struct sock_fprog prog;
    const char *sub = c->sub, *file = c->file;
    const struct sock_fprog *fresh = &c->fresh;
    /* Corruption is detected and the file rewritten: flip one instruction byte. */
    int fd = open(file, O_RDWR);
    assert_true(fd >= 0);
    unsigned char byte;
    assert_int_equal(pread(fd, &byte, 1, 40), 1);
    byte ^= 0xff;
    assert_int_equal(pwrite(fd, &byte, 1, 40), 1);
    close(fd);
    nsbox_seccomp_default_forget();
    assert_int_equal(nsbox_seccomp_default_prog(sub, &prog, &e), 0);
    assert_true(same_prog(&prog, fresh));
    nsbox_seccomp_prog_free(&prog);
    fd = open(file, O_RDONLY);
    assert_int_equal(pread(fd, &byte, 1, 40), 1);
    close(fd);
    assert_int_equal(byte, ((unsigned char *)fresh->filter)[8]);
}

/* Bad files and places: ignored and rewritten, or left alone. */
static void cache_bad_files(struct cache_fx *c)
{
    struct nsbox_err e = {0};
    struct sock_fprog prog;
    struct stat st;
    const char *sub = c->sub, *file = c->file;
    const struct sock_fprog *fresh = &c->fresh;
    /* Truncated, empty, and an unsafe mode (group/other-writable): all ignored and rewritten. */
    for (int kind = 0; kind < 3; kind++) {
        if (kind == 0)
            assert_int_equal(truncate(file, 32 + 8 * 3), 0);
        else if (kind == 1)
            assert_int_equal(truncate(file, 0), 0);
        else
            assert_int_equal(chmod(file, 0666), 0);
        nsbox_seccomp_default_forget();
        assert_int_equal(nsbox_seccomp_default_prog(sub, &prog, &e), 0);
        assert_true(same_prog(&prog, fresh));
        nsbox_seccomp_prog_free(&prog);
        assert_int_equal(stat(file, &st), 0);
        assert_int_equal(st.st_mode & 07777, 0644);
        assert_int_equal((size_t)st.st_size, 32 + fresh->len * sizeof(struct sock_filter));
    }

    /* A symlink planted under the cache name is not followed (and gets replaced). */
    assert_int_equal(unlink(file), 0);
    assert_int_equal(symlink("/etc/passwd", file), 0);
    nsbox_seccomp_default_forget();
    assert_int_equal(nsbox_seccomp_default_prog(sub, &prog, &e), 0);
    assert_true(same_prog(&prog, fresh));
    nsbox_seccomp_prog_free(&prog);
    assert_int_equal(lstat(file, &st), 0);
    assert_true(S_ISREG(st.st_mode));

    /* A directory others can write is not trusted: nothing is read from or written to it. */
    assert_int_equal(unlink(file), 0);
    assert_int_equal(chmod(sub, 0777), 0);
    nsbox_seccomp_default_forget();
    assert_int_equal(nsbox_seccomp_default_prog(sub, &prog, &e), 0);
    assert_true(same_prog(&prog, fresh));
    nsbox_seccomp_prog_free(&prog);
}

static void test_cache(void **state)
{
    static struct cache_fx fx = {.dir = "/tmp/nsbox-seccomp-test-XXXXXX"};
    struct cache_fx *c = &fx;
    char *dir = c->dir, *sub = c->sub;
    assert_non_null(mkdtemp(dir));
    snprintf(sub, sizeof c->sub, "%s/cache", dir); /* created on first use */
    const int rounds = 20;
    double compile_us = cache_compile(c, rounds);
    cache_first_use(c);
    cache_load(c, rounds, compile_us);
    cache_corrupt(c);
    cache_bad_files(c);
    assert_int_equal(rmdir(sub), 0); /* still empty */
    assert_int_equal(rmdir(dir), 0);
    nsbox_seccomp_prog_free(&c->fresh);
}

/* ---- behaviour: the default filter, loaded for real -------------------------------------- */

struct probe_result {
    long ret;
    int err;
    int sig; /* killed by this signal, 0 if it exited */
    uint64_t extra;
    pid_t pid; /* the probe child's pid */
};

typedef long (*probe_fn)(const void *arg, uint64_t *extra);

/* Fork; in the child optionally run `pre` (e.g. enter a user namespace), then load `prog` (after
 * no_new_privs, as nsbox does) and run `fn`. The child reports through a pipe. */
static struct probe_result run_probe(const struct sock_fprog *prog, probe_fn pre, probe_fn fn,
                                     const void *arg)
{
    int fds[2];
    assert_int_equal(pipe2(fds, O_CLOEXEC), 0);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        struct {
            long ret;
            int err;
            uint64_t extra;
        } out = {-1, 0, 0};
        close(fds[0]);
        /* cmocka's handlers must not turn a SIGSYS (or a crash) in the child into a test
         * failure reported from the child: let the signal kill it, for the parent to see. */
        static const int sigs[] = {SIGSYS, SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
        for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
            signal(sigs[i], SIG_DFL);
        /* No controlling terminal: a probe that the filter failed to stop (vhangup, TIOCSTI)
         * can then not touch the terminal the tests run in. */
        setsid();
        if (pre && pre(arg, &out.extra) < 0) _exit(3);
        if (prog) {
            struct nsbox_err e;
            if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || nsbox_seccomp_load(prog, &e) < 0)
                _exit(2);
        }
        errno = 0;
        out.ret = fn(arg, &out.extra);
        out.err = errno;
        if (write(fds[1], &out, sizeof out) != (ssize_t)sizeof out) _exit(4);
        _exit(0);
    }
    close(fds[1]);
    struct {
        long ret;
        int err;
        uint64_t extra;
    } in;
    ssize_t n = read(fds[0], &in, sizeof in);
    close(fds[0]);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    struct probe_result r = {.ret = -1, .err = 0, .sig = 0, .pid = pid};
    if (WIFSIGNALED(status)) {
        r.sig = WTERMSIG(status);
        return r;
    }
    if (WEXITSTATUS(status) != 0 || n != (ssize_t)sizeof in)
        fail_msg("probe child failed to run (exit %d)", WEXITSTATUS(status));
    r.ret = in.ret;
    r.err = in.err;
    r.extra = in.extra;
    return r;
}

#define SELF_PID (-4242) /* placeholder argument: the probe child's own pid */

struct sys_probe {
    const char *what;
    long nr;
    long a[6];
    int want_errno; /* 0: must not be denied (its result must equal the unfiltered one) */
    bool proves;    /* unfiltered, the kernel's answer differs on any machine */
};

static long probe_syscall(const void *arg, uint64_t *extra)
{
    const struct sys_probe *p = arg;
    long a[6];
    for (int i = 0; i < 6; i++)
        a[i] = p->a[i] == SELF_PID ? (long)getpid() : p->a[i];
    return syscall(p->nr, a[0], a[1], a[2], a[3], a[4], a[5]);
}

static int devnull_fd = -1;

static void check_probe(const struct sys_probe *p)
{
    struct probe_result f = run_probe(&default_prog, NULL, probe_syscall, p);
    struct probe_result u = run_probe(NULL, NULL, probe_syscall, p);
    print_message("  %-42s filtered: %ld/%s   unfiltered: %ld/%s\n", p->what, f.ret,
                  f.ret == -1 ? strerror(f.err) : "ok", u.ret,
                  u.ret == -1 ? strerror(u.err) : "ok");
    if (f.sig) fail_msg("%s: killed by signal %d", p->what, f.sig);
    if (p->want_errno) {
        if (f.ret != -1 || f.err != p->want_errno)
            fail_msg("%s: want errno %d (%s), got ret %ld errno %d (%s)", p->what, p->want_errno,
                     strerror(p->want_errno), f.ret, f.err, strerror(f.err));
        if (p->proves && u.ret == -1 && u.err == p->want_errno)
            fail_msg("%s: the kernel alone already answers %s, so this probe proves nothing",
                     p->what, strerror(u.err));
    } else {
        /* Allowed: same outcome as without the filter. */
        if ((f.ret == -1) != (u.ret == -1) || (f.ret == -1 && f.err != u.err))
            fail_msg("%s: filtered ret %ld errno %d, unfiltered ret %ld errno %d", p->what, f.ret,
                     f.err, u.ret, u.err);
    }
}

/* test_denied_syscalls's probes: mounts, namespaces and clone3. */
static void denied_mounts_namespaces(void)
{
    const struct sys_probe probes[] = {
        {"mount(NULL, NULL, NULL, 0, NULL)", SYS_mount, {0}, EPERM, true},
        /* Invalid flags: even run unfiltered as root this must not unmount anything. */
        {"umount2(\"/\", 0xffffffff)", SYS_umount2, {(long)"/", 0xffffffffL}, EPERM, true},
        {"unshare(0)", SYS_unshare, {0}, EPERM, true},
        {"unshare(CLONE_NEWUSER)", SYS_unshare, {CLONE_NEWUSER}, EPERM, false},
        {"setns(-1, 0)", SYS_setns, {-1, 0}, EPERM, true},
        {"chroot(\"/\")", SYS_chroot, {(long)"/"}, EPERM, false},
        {"clone3(NULL, 0)", SYS_clone3, {0, 0}, ENOSYS, true},
    };
    for (size_t i = 0; i < sizeof probes / sizeof probes[0]; i++)
        check_probe(&probes[i]);
}

/* test_denied_syscalls's probes: ioctl: TIOCSTI and TIOCLINUX only, whatever the high bits. */
static void denied_ioctls(void)
{
    long nul = devnull_fd;
    const struct sys_probe probes[] = {
        {"ioctl(devnull, TIOCSTI, NULL)", SYS_ioctl, {nul, 0x5412, 0}, EPERM, true},
        {"ioctl(devnull, 0x100005412, NULL)", SYS_ioctl, {nul, 0x100005412L, 0}, EPERM, true},
        {"ioctl(devnull, 0xffffffff00005412, NULL)",
         SYS_ioctl,
         {nul, (long)0xffffffff00005412ull, 0},
         EPERM,
         true},
        {"ioctl(devnull, TIOCLINUX, NULL)", SYS_ioctl, {nul, 0x541C, 0}, EPERM, true},
        {"ioctl(devnull, 0x10000541C, NULL)", SYS_ioctl, {nul, 0x10000541CL, 0}, EPERM, true},
        {"ioctl(devnull, TIOCGWINSZ) still reaches the driver",
         SYS_ioctl,
         {nul, 0x5413, 0},
         0,
         false},
        {"ioctl(devnull, 0x5412 | 0x10000) still reaches it",
         SYS_ioctl,
         {nul, 0x15412, 0},
         0,
         false},
    };
    for (size_t i = 0; i < sizeof probes / sizeof probes[0]; i++)
        check_probe(&probes[i]);
}

/* test_denied_syscalls's probes: socket families. */
static void denied_sockets(void)
{
    const struct sys_probe probes[] = {
        {"socket(AF_VSOCK, SOCK_STREAM, 0)",
         SYS_socket,
         {AF_VSOCK, SOCK_STREAM, 0},
         EAFNOSUPPORT,
         false},
        {"socket(AF_ALG, SOCK_SEQPACKET, 0)",
         SYS_socket,
         {AF_ALG, SOCK_SEQPACKET, 0},
         EAFNOSUPPORT,
         false},
        {"socket(AF_PACKET, SOCK_RAW, 0)",
         SYS_socket,
         {AF_PACKET, SOCK_RAW, 0},
         EAFNOSUPPORT,
         false},
        {"socket(AF_KEY, SOCK_RAW, 2)", SYS_socket, {AF_KEY, SOCK_RAW, 2}, EAFNOSUPPORT, false},
        {"socket(AF_PACKET | 1<<32, SOCK_RAW, 0)",
         SYS_socket,
         {AF_PACKET | (1L << 32), SOCK_RAW, 0},
         EAFNOSUPPORT,
         false},
        {"socket(AF_INET | 1<<32, SOCK_STREAM, 0)",
         SYS_socket,
         {AF_INET | (1L << 32), SOCK_STREAM, 0},
         EAFNOSUPPORT,
         false},
        {"socketpair(AF_VSOCK, SOCK_STREAM, 0, sv)",
         SYS_socketpair,
         {AF_VSOCK, SOCK_STREAM, 0, 0},
         EAFNOSUPPORT,
         false},
        {"socket(AF_UNIX, SOCK_STREAM, 0)", SYS_socket, {AF_UNIX, SOCK_STREAM, 0}, 0, false},
        {"socket(AF_INET, SOCK_STREAM, 0)", SYS_socket, {AF_INET, SOCK_STREAM, 0}, 0, false},
        {"socket(AF_INET6, SOCK_DGRAM, 0)", SYS_socket, {AF_INET6, SOCK_DGRAM, 0}, 0, false},
        {"socket(AF_NETLINK, SOCK_RAW, NETLINK_ROUTE)",
         SYS_socket,
         {AF_NETLINK, SOCK_RAW, 0},
         0,
         false},
    };
    for (size_t i = 0; i < sizeof probes / sizeof probes[0]; i++)
        check_probe(&probes[i]);
}

/* test_denied_syscalls's probes: the rest: bpf, perf, keys, ptrace, personality... */
static void denied_others(void)
{
    const struct sys_probe probes[] = {
        {"bpf(BPF_MAP_CREATE, NULL, 0)", SYS_bpf, {0, 0, 0}, EPERM, false},
        {"perf_event_open(NULL, 0, -1, -1, 0)",
         SYS_perf_event_open,
         {0, 0, -1, -1, 0},
         EPERM,
         true},
        {"keyctl(KEYCTL_GET_KEYRING_ID, SESSION, 0)", SYS_keyctl, {0, -3, 0}, EPERM, false},
        {"userfaultfd(UFFD_USER_MODE_ONLY)", SYS_userfaultfd, {UFFD_USER_MODE_ONLY}, EPERM, false},
        {"io_uring_setup(1, NULL)", SYS_io_uring_setup, {1, 0}, EPERM, false},
        {"ptrace(PTRACE_TRACEME)", SYS_ptrace, {0, 0, 0, 0}, EPERM, true},
        {"process_vm_readv(self, NULL, 0, NULL, 0, 0)",
         SYS_process_vm_readv,
         {SELF_PID, 0, 0, 0, 0, 0},
         EPERM,
         true},
        {"process_vm_writev(self, NULL, 0, NULL, 0, 0)",
         SYS_process_vm_writev,
         {SELF_PID, 0, 0, 0, 0, 0},
         EPERM,
         true},
        {"personality(PER_LINUX32)", SYS_personality, {PER_LINUX32}, EPERM, true},
        {"personality(READ_IMPLIES_EXEC)", SYS_personality, {READ_IMPLIES_EXEC}, EPERM, true},
        {"personality(1<<32): PER_LINUX after truncation",
         SYS_personality,
         {1L << 32},
         EPERM,
         true},
        {"personality(0xffffffff) query", SYS_personality, {0xffffffffL}, 0, false},
        {"personality(ADDR_NO_RANDOMIZE)", SYS_personality, {ADDR_NO_RANDOMIZE}, 0, false},
        {"personality(PER_LINUX)", SYS_personality, {0}, 0, false},
        {"kcmp(self, self, KCMP_VM, 0, 0)", SYS_kcmp, {SELF_PID, SELF_PID, 1, 0, 0}, 0, false},
        {"getppid()", SYS_getppid, {0}, 0, false},
    };
    for (size_t i = 0; i < sizeof probes / sizeof probes[0]; i++)
        check_probe(&probes[i]);
}

static void test_denied_syscalls(void **state)
{
    devnull_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
    assert_true(devnull_fd >= 0);
    denied_mounts_namespaces();
    denied_ioctls();
    denied_sockets();
    denied_others();
    /* getpid() still works and is really ours. */
    struct sys_probe gp = {"getpid()", SYS_getpid, {0}, 0, false};
    struct probe_result r = run_probe(&default_prog, NULL, probe_syscall, &gp);
    assert_int_equal(r.sig, 0);
    assert_int_equal(r.ret, r.pid);
    close(devnull_fd);
}

/* Every unconditional deny of the default profile, called with all arguments -1 (invalid for
 * every one of them, so the unfiltered kernel would fail with EINVAL/EFAULT/EBADF and do
 * nothing): under the filter each must fail with exactly the profile's errno. */
static long probe_all_denies(const void *arg, uint64_t *extra)
{
    const struct nsbox_seccomp_profile *p = arg;
    for (size_t i = 0; i < p->n_rules; i++) {
        const struct nsbox_scmp_rule *r = &p->rules[i];
        if (r->n_args != 0 || r->action != NSBOX_SCMP_ERRNO) continue;
        int nr = seccomp_syscall_resolve_name(r->name);
        if (nr < 0) /* pseudo-syscall: does not exist on this architecture */
            continue;
        errno = 0;
        long ret = syscall(nr, -1L, -1L, -1L, -1L, -1L, -1L);
        if (ret != -1 || errno != r->errno_ret) {
            *extra = i;
            return -2;
        }
        (*extra)++;
    }
    return 0;
}

static void test_all_unconditional_denies(void **state)
{
    struct nsbox_seccomp_profile p;
    parse_ok(nsbox_seccomp_default_json(), &p);
    struct probe_result r = run_probe(&default_prog, NULL, probe_all_denies, &p);
    assert_int_equal(r.sig, 0);
    if (r.ret != 0)
        fail_msg("%s was not denied with errno %d (got errno %d)", p.rules[r.extra].name,
                 p.rules[r.extra].errno_ret, r.err);
    size_t want = 0;
    for (size_t i = 0; i < p.n_rules; i++)
        if (p.rules[i].n_args == 0 && p.rules[i].action == NSBOX_SCMP_ERRNO &&
            seccomp_syscall_resolve_name(p.rules[i].name) >= 0)
            want++;
    print_message("  %llu unconditionally denied syscalls checked\n", (unsigned long long)r.extra);
    assert_int_equal(r.extra, want);
    assert_true(want > 50);
    nsbox_seccomp_profile_free(&p);
}

/* personality: exactly {0, ADDR_NO_RANDOMIZE, 0xffffffff} pass, checked against the kernel over
 * every single bit, every pair of bits, their complements, high-bit variants and random values. */
static bool personality_allowed(uint64_t v)
{
    return v == 0 || v == ADDR_NO_RANDOMIZE || v == 0xffffffffu;
}

static int check_personality(uint64_t v)
{
    errno = 0;
    long r = syscall(SYS_personality, (unsigned long)v);
    bool passed = !(r == -1 && errno == EPERM);
    if (passed && v != 0xffffffffu) syscall(SYS_personality, 0UL); /* back to PER_LINUX */
    return passed == personality_allowed(v) ? 0 : -1;
}

static long probe_personality_sweep(const void *arg, uint64_t *extra)
{
    long checked = 0;
    uint64_t vals[4];
    for (int i = -1; i < 32; i++) {
        for (int j = -1; j < 32; j++) {
            uint64_t v = (i >= 0 ? 1ull << i : 0) | (j >= 0 ? 1ull << j : 0);
            vals[0] = v;
            vals[1] = ~v & 0xffffffffu;
            vals[2] = v | (1ull << 32);
            vals[3] = v | 0xffffffff00000000ull;
            for (int k = 0; k < 4; k++, checked++)
                if (check_personality(vals[k]) < 0) {
                    *extra = vals[k];
                    return -1;
                }
        }
    }
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (int n = 0; n < 20000; n++, checked++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        uint64_t v = n & 1 ? x & 0xffffffffu : x; /* mostly 32-bit values */
        if (check_personality(v) < 0) {
            *extra = v;
            return -1;
        }
    }
    static const uint64_t edge[] = {
        0,       ADDR_NO_RANDOMIZE, 0xffffffffu,    0xfffffffeu,    0x7fffffffu,
        0x40001, 0x3ffff,           0x60000,        0xc0000,        0x20000,
        0x8,     0x20008,           0x100040000ull, 0x1ffffffffull, UINT64_MAX};
    for (size_t i = 0; i < sizeof edge / sizeof edge[0]; i++, checked++)
        if (check_personality(edge[i]) < 0) {
            *extra = edge[i];
            return -1;
        }
    *extra = (uint64_t)checked;
    return 0;
}

static void test_personality_values(void **state)
{
    struct probe_result r = run_probe(&default_prog, NULL, probe_personality_sweep, NULL);
    assert_int_equal(r.sig, 0);
    if (r.ret != 0)
        fail_msg("personality(0x%llx): filter decision is wrong", (unsigned long long)r.extra);
    print_message("  personality: %llu values checked\n", (unsigned long long)r.extra);
}

/* clone with a namespace flag. Inside a fresh user namespace (where nsbox's sandbox processes
 * also live, but with capabilities here) the unfiltered kernel grants each flag, so a denial
 * proves the rule for that flag. */
static long enter_userns(const void *arg, uint64_t *extra)
{
    return unshare(CLONE_NEWUSER);
}

static long probe_clone(const void *arg, uint64_t *extra)
{
    unsigned long flags = *(const unsigned long *)arg;
    long r = syscall(SYS_clone, flags | SIGCHLD, 0L, 0L, 0L, 0L);
    if (r == 0) _exit(0);
    if (r > 0) {
        waitpid((pid_t)r, NULL, 0);
        errno = 0;
    }
    return r;
}

static void *thread_main(void *arg)
{
    return (void *)42;
}

static long probe_thread_and_spawn(const void *arg, uint64_t *extra)
{
    pthread_t t;
    void *ret = NULL;
    int rc = pthread_create(&t, NULL, thread_main, NULL);
    if (rc != 0) {
        errno = rc;
        return 1;
    }
    if ((rc = pthread_join(t, &ret)) != 0 || ret != (void *)42) {
        errno = rc;
        return 2;
    }
    pid_t pid;
    char *argv[] = {"true", NULL};
    char *envp[] = {NULL};
    const char *bin = access("/bin/true", X_OK) == 0 ? "/bin/true" : "/usr/bin/true";
    if ((rc = posix_spawn(&pid, bin, NULL, NULL, argv, envp)) != 0) {
        errno = rc;
        return 3;
    }
    int status;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return 4;
    errno = 0;
    return 0;
}

static void test_clone_namespace_flags(void **state)
{
    static const struct {
        const char *name;
        unsigned long flag;
    } flags[] = {
        {"CLONE_NEWNS", CLONE_NEWNS},     {"CLONE_NEWCGROUP", CLONE_NEWCGROUP},
        {"CLONE_NEWUTS", CLONE_NEWUTS},   {"CLONE_NEWIPC", CLONE_NEWIPC},
        {"CLONE_NEWUSER", CLONE_NEWUSER}, {"CLONE_NEWPID", CLONE_NEWPID},
        {"CLONE_NEWNET", CLONE_NEWNET},   {"CLONE_NEWTIME (0x80)", CLONE_NEWTIME},
    };
    /* Can this machine make user namespaces (so that the control runs mean something)? */
    unsigned long none = 0;
    struct probe_result ctl = run_probe(NULL, enter_userns, probe_clone, &none);
    bool userns = ctl.sig == 0 && ctl.ret > 0;
    if (!userns) print_message("  (no unprivileged user namespaces here: controls skipped)\n");

    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++) {
        unsigned long f = flags[i].flag;
        /* A nested user namespace needs the creator's uid mapped in its parent, which the
         * fresh (unmapped) one does not give: that flag is probed from the top level. */
        probe_fn pre = userns && f != CLONE_NEWUSER ? enter_userns : NULL;
        struct probe_result r = run_probe(&default_prog, pre, probe_clone, &f);
        struct probe_result u = run_probe(NULL, pre, probe_clone, &f);
        print_message("  clone(%-22s filtered: %ld/%s   unfiltered: %s\n", flags[i].name, r.ret,
                      r.ret == -1 ? strerror(r.err) : "ok",
                      u.ret > 0 ? "created" : strerror(u.err));
        assert_int_equal(r.sig, 0);
        assert_int_equal(r.ret, -1);
        assert_int_equal(r.err, EPERM);
        if (userns && f != CLONE_NEWTIME && u.ret <= 0)
            fail_msg("control: clone(%s) failed unfiltered in a user namespace: %s", flags[i].name,
                     strerror(u.err));
    }
    /* Plain clone (what fork() and pthread_create() use) still works. */
    struct probe_result r = run_probe(&default_prog, NULL, probe_clone, &none);
    assert_int_equal(r.sig, 0);
    assert_true(r.ret > 0);
    /* glibc's pthread_create and posix_spawn try clone3 first and must fall back to clone on
     * ENOSYS (glibc >= 2.34), with flags the filter lets through. */
    r = run_probe(&default_prog, NULL, probe_thread_and_spawn, NULL);
    assert_int_equal(r.sig, 0);
    if (r.ret != 0)
        fail_msg("pthread_create/posix_spawn under the filter: step %ld failed: %s", r.ret,
                 strerror(r.err));
}

/* ---- foreign ABIs ------------------------------------------------------------------------ */

#if defined(__x86_64__)
static long probe_int80_getpid(const void *arg, uint64_t *extra)
{
    long ret;
    /* i386 getpid is 20; int $0x80 enters the kernel's compat (i386) path, whose syscalls
     * carry AUDIT_ARCH_I386 and i386 numbers (20 is not getpid on x86_64: it is writev). */
    __asm__ volatile("int $0x80" : "=a"(ret) : "a"(20L) : "memory", "r8", "r9", "r10", "r11");
    return ret;
}

static long probe_x32(const void *arg, uint64_t *extra)
{
    /* The syscall instruction with the x32 bit: AUDIT_ARCH_X86_64 like native calls, so only
     * the number tells them apart. */
    return syscall(*(const long *)arg | 0x40000000L, 0L, 0L, 0L, 0L, 0L, 0L);
}

static void test_foreign_abis(void **state)
{
    struct probe_result u = run_probe(NULL, NULL, probe_int80_getpid, NULL);
    bool ia32 = u.sig == 0 && u.ret == u.pid;
    print_message("  int $0x80 getpid unfiltered: %s\n",
                  ia32 ? "works (IA32 emulation on): the filter must stop it"
                       : "unavailable on this kernel");
    struct probe_result f = run_probe(&default_prog, NULL, probe_int80_getpid, NULL);
    print_message("  int $0x80 getpid filtered: %s %d\n", f.sig ? "killed by signal" : "returned",
                  f.sig ? f.sig : (int)f.ret);
    if (ia32)
        assert_int_equal(f.sig, SIGSYS);
    else
        assert_true(f.sig != 0 || f.ret != f.pid);

    /* x32: getpid (39) and mount (165). seccomp sees the number before the kernel decides
     * whether it has an x32 ABI at all, so the filter's verdict is the same on every kernel. */
    static const long nrs[] = {39, 165};
    for (size_t i = 0; i < 2; i++) {
        u = run_probe(NULL, NULL, probe_x32, &nrs[i]);
        f = run_probe(&default_prog, NULL, probe_x32, &nrs[i]);
        print_message("  x32 syscall %ld: unfiltered %ld/%s, filtered %s %d\n", nrs[i], u.ret,
                      u.ret == -1 ? strerror(u.err) : "ok", f.sig ? "killed by signal" : "ret",
                      f.sig ? f.sig : (int)f.ret);
        assert_int_equal(f.sig, SIGSYS);
    }
}
#else
static void test_foreign_abis(void **state)
{
    skip();
}
#endif

static void test_load_errors(void **state)
{
    struct nsbox_err e = {0};
    struct sock_fprog empty = {0, NULL};
    assert_int_equal(nsbox_seccomp_load(&empty, &e), -1);
    assert_int_equal(e.code, NSBOX_E_INVALID);
    assert_int_equal(nsbox_seccomp_load(NULL, &e), -1);
}

static long probe_load_without_nnp(const void *arg, uint64_t *extra)
{
    struct nsbox_err e = {0};
    if (nsbox_seccomp_load(arg, &e) == 0) return 0;
    errno = e.sys_errno;
    return strstr(e.msg, "no_new_privs") ? -1 : -2;
}

/* Root (CAP_SYS_ADMIN) may load a filter without no_new_privs: become nobody first, which
 * drops every capability, as nsbox's sandbox user has none. */
static long drop_root(const void *arg, uint64_t *extra)
{
    if (geteuid() != 0) return 0;
    if (setresgid(65534, 65534, 65534) < 0 || setresuid(65534, 65534, 65534) < 0) return -1;
    return 0;
}

static void test_load_needs_nnp(void **state)
{
    struct probe_result r = run_probe(NULL, drop_root, probe_load_without_nnp, &default_prog);
    assert_int_equal(r.sig, 0);
    assert_int_equal(r.ret, -1);
    assert_int_equal(r.err, EACCES);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_minimal_profile),
        cmocka_unit_test(test_docker_style_profile),
        cmocka_unit_test(test_allow_list_profile),
        cmocka_unit_test(test_bad_profiles),
        cmocka_unit_test(test_limits),
        cmocka_unit_test(test_unknown_and_optional),
        cmocka_unit_test(test_default_profile),
        cmocka_unit_test(test_cache),
        cmocka_unit_test(test_denied_syscalls),
        cmocka_unit_test(test_all_unconditional_denies),
        cmocka_unit_test(test_personality_values),
        cmocka_unit_test(test_clone_namespace_flags),
        cmocka_unit_test(test_foreign_abis),
        cmocka_unit_test(test_load_errors),
        cmocka_unit_test(test_load_needs_nnp),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
