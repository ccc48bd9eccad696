/* Seccomp profiles: parsing (every error names its field), compiling, the on-disk cache, and the
 * default filter's behaviour, checked by really loading it in forked children (no root needed:
 * no_new_privs is enough) and probing with side-effect-free arguments. Where it can, a probe
 * also runs unfiltered to show that the kernel alone would have answered differently, i.e.
 * that the filter is what denied it. The probes are in test_seccomp_probes.c. */

#include "seccomp_fixture.h"

/* ---- parsing ----------------------------------------------------------------------------- */


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
    nsbox_seccomp_compile_free(&prog);
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
    nsbox_seccomp_compile_free(&prog);
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
    nsbox_seccomp_compile_free(&prog);
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
    {"", "empty input"},
    {"{\"defaultAction\":", "invalid JSON: the text ends before its object does"},
    {"{\"defaultAction\":1]", "invalid JSON near byte"},
    {"[]", "must be a JSON object"},
    {"{}", "defaultAction: missing"},
    {"{\"defaultAction\":\"SCMP_ACT_ALLOW\"} x", "unexpected text after the JSON value"},
    {"{\"defaultAction\":1}", "defaultAction: must be a string"},
    {"{\"defaultAction\":\"SCMP_ACT_NOPE\"}", "defaultAction: unknown action 'SCMP_ACT_NOPE'"},
    {ALLOW_HEAD "\"bogus\":1}", "unknown key 'bogus'"},
    /* a key's controls as '?' (ESC, CSI as UTF-8, in JSON's escapes), its UTF-8 kept */
    {ALLOW_HEAD "\"b\\u001b[2J\\u009b1m\u00e9\":1}", "unknown key 'b?[2J?1m\u00e9'"},
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
    nsbox_seccomp_compile_free(&prog);
    nsbox_seccomp_profile_free(&p);

    /* Names past this libseccomp are the late calls' own numbers, not skipped: a rule on
     * setxattrat (unknown to Debian 12's libseccomp 2.5.4) is kept and compiled. */
    assert_int_equal(nsbox_seccomp_names_resolve("setxattrat"), 463);
    assert_int_equal(nsbox_seccomp_names_resolve("fchmodat2"), 452);
    assert_int_equal(nsbox_seccomp_names_resolve("open_tree_attr"), 467);
    assert_int_equal(nsbox_seccomp_names_resolve("read"), 0);
    assert_int_equal(nsbox_seccomp_names_resolve("no_such_call_v2"), __NR_SCMP_ERROR);
    parse_ok(RULE1("{\"names\":[\"setxattrat\",\"open_tree_attr\"],"
                   "\"action\":\"SCMP_ACT_ERRNO\",\"optional\":true}"),
             &p);
    assert_int_equal(p.n_rules, 2);
    assert_int_equal(p.n_skipped, 0);
    assert_int_equal(nsbox_seccomp_compile(&p, &prog, &e), 0);
    nsbox_seccomp_compile_free(&prog);
    nsbox_seccomp_profile_free(&p);

    /* "optional": false is the default behaviour. */
    const char *j = RULE1("{\"names\":[\"no_such_call_v2\"],\"action\":\"SCMP_ACT_ERRNO\","
                          "\"optional\":false}");
    parse_fails(j, strlen(j), "unknown syscall 'no_such_call_v2'");

    /* Pseudo-syscalls (real elsewhere, not on this architecture) are known, not errors. */
    parse_ok(RULE1("{\"names\":[\"vm86\",\"umount\"],\"action\":\"SCMP_ACT_ERRNO\"}"), &p);
    assert_int_equal(p.n_rules, 2);
    assert_int_equal(nsbox_seccomp_compile(&p, &prog, &e), 0);
    nsbox_seccomp_compile_free(&prog);
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
    nsbox_seccomp_compile_free(&prog);
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
    assert_int_equal(nsbox_seccomp_prog_default(NULL, &prog, &e), 0);
    print_message("default program: %u BPF instructions\n", prog.len);
    assert_true(prog.len > 20 && prog.len <= BPF_MAXINSNS);
    /* Starts with the architecture check (seccomp_data.arch at offset 4). */
    assert_int_equal(prog.filter[0].code, BPF_LD | BPF_W | BPF_ABS);
    assert_int_equal(prog.filter[0].k, 4);
    nsbox_seccomp_compile_free(&prog);
}

/* ---- the on-disk cache ------------------------------------------------------------------- */

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

/* Compiled without a cache: the program the cache's must equal. */
static void cache_compile(struct cache_fx *c)
{
    struct nsbox_err e = {0};
    nsbox_seccomp_prog_forget();
    assert_int_equal(nsbox_seccomp_prog_default(NULL, &c->fresh, &e), 0);
}

/* The first use of the cache directory writes the file, with these modes and size. */
static void cache_first_use(struct cache_fx *c)
{
    struct nsbox_err e = {0};
    struct sock_fprog prog;
    const char *sub = c->sub;
    const struct sock_fprog *fresh = &c->fresh;
    /* First use of the cache dir writes the file. */
    nsbox_seccomp_prog_forget();
    assert_int_equal(nsbox_seccomp_prog_default(sub, &prog, &e), 0);
    assert_true(same_prog(&prog, fresh));
    nsbox_seccomp_compile_free(&prog);
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
/* Later uses read the file as it is: the same program, the file neither rewritten nor
 * replaced (how much cheaper that is than compiling is bench/'s to say, not a test's). */
static void cache_load(struct cache_fx *c, int rounds)
{
    struct nsbox_err e = {0};
    struct sock_fprog prog;
    struct stat before, after;
    assert_int_equal(stat(c->file, &before), 0);
    for (int i = 0; i < rounds; i++) {
        nsbox_seccomp_prog_forget();
        assert_int_equal(nsbox_seccomp_prog_default(c->sub, &prog, &e), 0);
        assert_true(same_prog(&prog, &c->fresh));
        nsbox_seccomp_compile_free(&prog);
    }
    assert_int_equal(stat(c->file, &after), 0);
    assert_int_equal(before.st_ino, after.st_ino);
    assert_int_equal(before.st_mtim.tv_sec, after.st_mtim.tv_sec);
    assert_int_equal(before.st_mtim.tv_nsec, after.st_mtim.tv_nsec);
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
    nsbox_seccomp_prog_forget();
    assert_int_equal(nsbox_seccomp_prog_default(sub, &prog, &e), 0);
    assert_true(same_prog(&prog, fresh));
    nsbox_seccomp_compile_free(&prog);
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
        nsbox_seccomp_prog_forget();
        assert_int_equal(nsbox_seccomp_prog_default(sub, &prog, &e), 0);
        assert_true(same_prog(&prog, fresh));
        nsbox_seccomp_compile_free(&prog);
        assert_int_equal(stat(file, &st), 0);
        assert_int_equal(st.st_mode & 07777, 0644);
        assert_int_equal((size_t)st.st_size, 32 + fresh->len * sizeof(struct sock_filter));
    }

    /* A symlink planted under the cache name is not followed (and gets replaced). */
    assert_int_equal(unlink(file), 0);
    assert_int_equal(symlink("/etc/passwd", file), 0);
    nsbox_seccomp_prog_forget();
    assert_int_equal(nsbox_seccomp_prog_default(sub, &prog, &e), 0);
    assert_true(same_prog(&prog, fresh));
    nsbox_seccomp_compile_free(&prog);
    assert_int_equal(lstat(file, &st), 0);
    assert_true(S_ISREG(st.st_mode));

    /* A directory others can write is not trusted: nothing is read from or written to it. */
    assert_int_equal(unlink(file), 0);
    assert_int_equal(chmod(sub, 0777), 0);
    nsbox_seccomp_prog_forget();
    assert_int_equal(nsbox_seccomp_prog_default(sub, &prog, &e), 0);
    assert_true(same_prog(&prog, fresh));
    nsbox_seccomp_compile_free(&prog);
}

static void test_cache(void **state)
{
    static struct cache_fx fx = {.dir = "/tmp/nsbox-seccomp-test-XXXXXX"};
    struct cache_fx *c = &fx;
    char *dir = c->dir, *sub = c->sub;
    assert_non_null(mkdtemp(dir));
    snprintf(sub, sizeof c->sub, "%s/cache", dir); /* created on first use */
    cache_compile(c);
    cache_first_use(c);
    cache_load(c, 5);
    cache_corrupt(c);
    cache_bad_files(c);
    assert_int_equal(rmdir(sub), 0); /* still empty */
    assert_int_equal(rmdir(dir), 0);
    nsbox_seccomp_compile_free(&c->fresh);
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
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
