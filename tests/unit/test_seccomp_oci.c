/* An OCI bundle's linux.seccomp (nsbox_seccomp_profile_parse_oci): the keys engines write that
 * nsbox's own profiles do not have (architectures, flags, listenerPath), what it refuses and
 * why, what it skips as runc does; what a profile answers a call with given arguments; and
 * create's check that a profile lets init run after loading it (sandbox/contain_calls.c). */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "launch.h"
#include "seccomp_profile.h"

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>

static void oci_ok(const char *json, struct nsbox_seccomp_profile *p)
{
    struct nsbox_err e = {0};
    if (nsbox_seccomp_profile_parse_oci(json, strlen(json), p, &e) < 0)
        fail_msg("unexpected parse error: %s\n  for: %s", e.msg, json);
}

static void oci_fails(const char *json, const char *want)
{
    struct nsbox_err e = {0};
    struct nsbox_seccomp_profile p;
    if (nsbox_seccomp_profile_parse_oci(json, strlen(json), &p, &e) == 0) {
        nsbox_seccomp_profile_free(&p);
        fail_msg("parsed, but wanted an error containing \"%s\"\n  for: %s", want, json);
    }
    assert_int_equal(e.code, NSBOX_E_INVALID);
    if (!strstr(e.msg, want))
        fail_msg("error \"%s\"\n  does not contain \"%s\"", e.msg, want);
    assert_null(p.rules);
}

static bool has_rule(const struct nsbox_seccomp_profile *p, const char *name)
{
    for (size_t i = 0; i < p->n_rules; i++)
        if (!strcmp(p->rules[i].name, name))
            return true;
    return false;
}

/* Docker's shape: errno by default, the three x86 ABIs, flags, an empty listener, arguments
 * compared; a name no libseccomp knows and a rule the default already answers. */
static const char docker_shape[] =
    "{\"defaultAction\":\"SCMP_ACT_ERRNO\",\"defaultErrnoRet\":1,"
    "\"architectures\":[\"SCMP_ARCH_X86_64\",\"SCMP_ARCH_X86\",\"SCMP_ARCH_X32\"],"
    "\"flags\":[\"SECCOMP_FILTER_FLAG_LOG\",\"SECCOMP_FILTER_FLAG_SPEC_ALLOW\","
    "\"SECCOMP_FILTER_FLAG_TSYNC\"],\"listenerPath\":\"\",\"listenerMetadata\":\"\","
    "\"syscalls\":["
    "{\"names\":[\"read\",\"no_such_call_yet\",\"futex_waitv\"],\"action\":\"SCMP_ACT_ALLOW\"},"
    "{\"names\":[\"mkdir\"],\"action\":\"SCMP_ACT_ERRNO\",\"errnoRet\":1},"
    "{\"names\":[\"clone\"],\"action\":\"SCMP_ACT_ALLOW\",\"args\":[{\"index\":0,"
    "\"value\":2114060288,\"valueTwo\":0,\"op\":\"SCMP_CMP_MASKED_EQ\"}]},"
    "{\"names\":[\"prctl\"],\"action\":\"SCMP_ACT_ALLOW\",\"args\":[{\"index\":0,"
    "\"value\":36,\"op\":\"SCMP_CMP_LE\"}]},"
    "{\"names\":[\"clone3\"],\"action\":\"SCMP_ACT_ERRNO\",\"errnoRet\":38}]}";

static void test_docker_shape(void **state)
{
    (void)state;
    struct nsbox_seccomp_profile p;
    oci_ok(docker_shape, &p);
    assert_int_equal(p.default_action, NSBOX_SCMP_ERRNO);
    assert_int_equal(p.default_errno, EPERM);
    assert_int_equal(p.load_flags, 2u | 4u); /* LOG | SPEC_ALLOW; TSYNC dropped */
    assert_int_equal(p.n_skipped, 1);        /* no_such_call_yet; futex_waitv is nsbox's table's */
    assert_true(has_rule(&p, "futex_waitv"));
    assert_false(has_rule(&p, "mkdir")); /* the default answers it: dropped, as runc does */
    assert_true(has_rule(&p, "clone3"));
    struct sock_fprog prog;
    struct nsbox_err e = {0};
    assert_int_equal(nsbox_seccomp_compile(&p, &prog, &e), 0);
    nsbox_seccomp_compile_free(&prog);
    nsbox_seccomp_profile_free(&p);

    /* nsbox's own profiles still take none of it */
    struct nsbox_seccomp_profile q;
    assert_int_equal(nsbox_seccomp_profile_parse(docker_shape, strlen(docker_shape), &q, &e), -1);
    assert_non_null(strstr(e.msg, "architectures: not supported"));
}

static void test_refusals(void **state)
{
    (void)state;
    oci_fails("{\"defaultAction\":\"SCMP_ACT_ALLOW\",\"syscalls\":[{\"names\":[\"getpid\"],"
              "\"action\":\"SCMP_ACT_NOTIFY\"}]}",
              "syscalls[0].action: SCMP_ACT_NOTIFY is not supported");
    oci_fails("{\"defaultAction\":\"SCMP_ACT_TRACE\"}",
              "defaultAction: SCMP_ACT_TRACE is not supported");
    oci_fails("{\"defaultAction\":\"SCMP_ACT_ALLOW\",\"syscalls\":[{\"names\":[\"getpid\"],"
              "\"action\":\"SCMP_ACT_NOPE\"}]}",
              "syscalls[0].action: unknown action 'SCMP_ACT_NOPE'");
    oci_fails("{\"defaultAction\":\"SCMP_ACT_ALLOW\",\"listenerPath\":\"/run/a.sock\"}",
              "listenerPath: not supported: nsbox-oci runs no seccomp agent");
    oci_fails("{\"defaultAction\":\"SCMP_ACT_ALLOW\",\"listenerPath\":1}", "listenerPath");
    oci_fails("{\"defaultAction\":\"SCMP_ACT_ALLOW\",\"listenerMetadata\":[]}",
              "listenerMetadata: must be a string");
    oci_fails("{\"defaultAction\":\"SCMP_ACT_ALLOW\",\"flags\":[\"SECCOMP_FILTER_FLAG_LOG\","
              "\"SECCOMP_FILTER_FLAG_NEW_LISTENER\"]}",
              "flags[1]: 'SECCOMP_FILTER_FLAG_NEW_LISTENER' is not supported");
    oci_fails("{\"defaultAction\":\"SCMP_ACT_ALLOW\",\"flags\":\"SECCOMP_FILTER_FLAG_LOG\"}",
              "flags: must be an array");
    oci_fails("{\"defaultAction\":\"SCMP_ACT_ALLOW\",\"architectures\":[\"x86_64\"]}",
              "architectures[0]: 'x86_64' is not an architecture");
    oci_fails("{\"defaultAction\":\"SCMP_ACT_ALLOW\",\"architectures\":[7]}",
              "architectures[0]: '(not a string)'");
    /* both arrays of names are read alike: the key and the index name the culprit */
    oci_fails("{\"defaultAction\":\"SCMP_ACT_ALLOW\",\"architectures\":\"SCMP_ARCH_X86_64\"}",
              "architectures: must be an array of names, each an architecture such as");
    oci_fails("{\"defaultAction\":\"SCMP_ACT_ALLOW\",\"architectures\":[\"SCMP_ARCH_X86_64\","
              "\"SCMP_ARCH_\"]}",
              "architectures[1]: 'SCMP_ARCH_' is not an architecture such as SCMP_ARCH_X86_64");
    oci_fails("{\"defaultAction\":\"SCMP_ACT_ALLOW\",\"flags\":[\"SECCOMP_FILTER_FLAG_TSYNC\","
              "\"SECCOMP_FILTER_FLAG_LOGS\"]}",
              "flags[1]: 'SECCOMP_FILTER_FLAG_LOGS' is not supported (nsbox-oci takes");
    oci_fails("{\"defaultAction\":\"SCMP_ACT_ALLOW\",\"flags\":[2]}",
              "flags[0]: '(not a string)' is not supported");
    oci_fails("{\"defaultAction\":\"SCMP_ACT_ALLOW\",\"archMap\":[]}", "archMap: not supported");
    oci_fails("{\"defaultAction\":\"SCMP_ACT_ALLOW\",\"defaultErrno\":1}",
              "unknown key 'defaultErrno'");
    oci_fails("{\"defaultAction\":\"SCMP_ACT_ALLOW\",\"syscalls\":[{\"names\":[\"read\"],"
              "\"action\":\"SCMP_ACT_ERRNO\",\"args\":[{\"index\":0,\"value\":1,"
              "\"op\":\"SCMP_CMP_SOMETIMES\"}]}]}",
              "syscalls[0].args[0].op: unknown operator 'SCMP_CMP_SOMETIMES'");
    /* a condition stricter than its call's unconditional rule: one filter cannot give both */
    oci_fails("{\"defaultAction\":\"SCMP_ACT_ERRNO\",\"syscalls\":["
              "{\"names\":[\"socket\"],\"action\":\"SCMP_ACT_ALLOW\"},"
              "{\"names\":[\"socket\"],\"action\":\"SCMP_ACT_KILL\",\"args\":[{\"index\":0,"
              "\"value\":16,\"op\":\"SCMP_CMP_EQ\"}]}]}",
              "syscalls[1].names[0]: 'socket' has an unconditional rule (syscalls[0]) and a "
              "stricter one by its arguments");
    oci_fails("{\"defaultAction\":\"SCMP_ACT_ERRNO\",\"syscalls\":["
              "{\"names\":[\"socket\"],\"action\":\"SCMP_ACT_KILL\",\"args\":[{\"index\":0,"
              "\"value\":16,\"op\":\"SCMP_CMP_EQ\"}]},"
              "{\"names\":[\"socket\"],\"action\":\"SCMP_ACT_ALLOW\"}]}",
              "'socket' has an unconditional rule (syscalls[1]) and a stricter one");
}

/* Podman's profile allows setns in its long list and refuses it in a later rule (for a
 * container without CAP_SYS_ADMIN); its socket rules have two actions by their arguments.
 * libseccomp would keep the first unconditional rule (setns allowed); nsbox-oci keeps the
 * stricter. */
static void test_several_actions(void **state)
{
    (void)state;
    struct nsbox_seccomp_profile p;
    oci_ok("{\"defaultAction\":\"SCMP_ACT_ERRNO\",\"defaultErrnoRet\":38,\"syscalls\":["
           "{\"names\":[\"read\",\"setns\"],\"action\":\"SCMP_ACT_ALLOW\"},"
           "{\"names\":[\"setns\",\"bpf\"],\"action\":\"SCMP_ACT_ERRNO\",\"errnoRet\":1},"
           "{\"names\":[\"setns\"],\"action\":\"SCMP_ACT_ALLOW\"},"
           "{\"names\":[\"socket\"],\"action\":\"SCMP_ACT_ERRNO\",\"errnoRet\":22,"
           "\"args\":[{\"index\":0,\"value\":16,\"op\":\"SCMP_CMP_EQ\"},"
           "{\"index\":2,\"value\":9,\"op\":\"SCMP_CMP_EQ\"}]},"
           "{\"names\":[\"socket\"],\"action\":\"SCMP_ACT_ALLOW\","
           "\"args\":[{\"index\":0,\"value\":16,\"op\":\"SCMP_CMP_NE\"}]},"
           "{\"names\":[\"socket\"],\"action\":\"SCMP_ACT_ALLOW\","
           "\"args\":[{\"index\":2,\"value\":9,\"op\":\"SCMP_CMP_NE\"}]},"
           "{\"names\":[\"clone\"],\"action\":\"SCMP_ACT_ALLOW\","
           "\"args\":[{\"index\":0,\"value\":1,\"op\":\"SCMP_CMP_EQ\"}]},"
           "{\"names\":[\"clone\"],\"action\":\"SCMP_ACT_ALLOW\"}]}",
           &p);
    uint64_t a[NSBOX_SECCOMP_MAX_ARGS] = {0};
    int err = -1;
    assert_int_equal(nsbox_seccomp_profile_answer(&p, "setns", a, &err), NSBOX_SCMP_ERRNO);
    assert_int_equal(err, 1);
    assert_int_equal(nsbox_seccomp_profile_answer(&p, "read", a, &err), NSBOX_SCMP_ALLOW);
    /* the unconditional clone rule replaced the conditional one */
    size_t n_clone = 0;
    for (size_t i = 0; i < p.n_rules; i++)
        n_clone += !strcmp(p.rules[i].name, "clone");
    assert_int_equal(n_clone, 1);
    a[0] = 2; /* AF_INET: allowed */
    assert_int_equal(nsbox_seccomp_profile_answer(&p, "socket", a, &err), NSBOX_SCMP_ALLOW);
    a[0] = 16, a[2] = 9; /* NETLINK_AUDIT: refused */
    assert_int_equal(nsbox_seccomp_profile_answer(&p, "socket", a, &err), NSBOX_SCMP_ERRNO);
    assert_int_equal(err, 22);
    struct sock_fprog prog;
    struct nsbox_err e = {0};
    assert_int_equal(nsbox_seccomp_compile(&p, &prog, &e), 0); /* libseccomp takes them all */
    nsbox_seccomp_compile_free(&prog);
    nsbox_seccomp_profile_free(&p);
}

/* A rule comparing one argument twice (runtime-tools' linux_seccomp writes one): libseccomp
 * takes one comparison per argument, so it becomes one rule per comparison, as runc makes it,
 * which OR; nsbox's own profiles still refuse it. */
static void test_split_rule(void **state)
{
    (void)state;
    static const char json[] =
        "{\"defaultAction\":\"SCMP_ACT_ALLOW\",\"syscalls\":[{\"names\":[\"getcwd\"],"
        "\"action\":\"SCMP_ACT_ERRNO\",\"args\":[{\"index\":0,\"value\":1,"
        "\"op\":\"SCMP_CMP_EQ\"},{\"index\":1,\"value\":2,\"op\":\"SCMP_CMP_EQ\"},"
        "{\"index\":0,\"value\":3,\"op\":\"SCMP_CMP_EQ\"}]}]}";
    struct nsbox_seccomp_profile p;
    oci_ok(json, &p);
    assert_int_equal(p.n_rules, 3);
    for (size_t i = 0; i < p.n_rules; i++)
        assert_int_equal(p.rules[i].n_args, 1);
    uint64_t a[NSBOX_SECCOMP_MAX_ARGS] = {0};
    int err;
    a[0] = 3; /* one comparison holds: the rules OR */
    assert_int_equal(nsbox_seccomp_profile_answer(&p, "getcwd", a, &err), NSBOX_SCMP_ERRNO);
    a[0] = 4;
    assert_int_equal(nsbox_seccomp_profile_answer(&p, "getcwd", a, &err), NSBOX_SCMP_ALLOW);
    struct sock_fprog prog;
    struct nsbox_err e = {0};
    assert_int_equal(nsbox_seccomp_compile(&p, &prog, &e), 0);
    nsbox_seccomp_compile_free(&prog);
    nsbox_seccomp_profile_free(&p);
    assert_int_equal(nsbox_seccomp_profile_parse(json, strlen(json), &p, &e), -1);
    assert_non_null(strstr(e.msg, "argument 0 is already compared in this rule"));
}

static void test_answer(void **state)
{
    (void)state;
    struct nsbox_seccomp_profile p;
    oci_ok(docker_shape, &p);
    uint64_t a[NSBOX_SECCOMP_MAX_ARGS] = {0};
    int err = -1;
    assert_int_equal(nsbox_seccomp_profile_answer(&p, "read", a, &err), NSBOX_SCMP_ALLOW);
    assert_int_equal(err, 0);
    assert_int_equal(nsbox_seccomp_profile_answer(&p, "mkdir", a, &err), NSBOX_SCMP_ERRNO);
    assert_int_equal(err, EPERM);
    assert_int_equal(nsbox_seccomp_profile_answer(&p, "clone3", a, &err), NSBOX_SCMP_ERRNO);
    assert_int_equal(err, ENOSYS);
    a[0] = CLONE_CHILD_SETTID | CLONE_CHILD_CLEARTID | SIGCHLD; /* fork */
    assert_int_equal(nsbox_seccomp_profile_answer(&p, "clone", a, &err), NSBOX_SCMP_ALLOW);
    a[0] |= CLONE_NEWUSER;
    assert_int_equal(nsbox_seccomp_profile_answer(&p, "clone", a, &err), NSBOX_SCMP_ERRNO);
    a[0] = PR_SET_CHILD_SUBREAPER; /* 36: LE 36 */
    assert_int_equal(nsbox_seccomp_profile_answer(&p, "prctl", a, &err), NSBOX_SCMP_ALLOW);
    a[0] = PR_CAP_AMBIENT; /* 47 */
    assert_int_equal(nsbox_seccomp_profile_answer(&p, "prctl", a, &err), NSBOX_SCMP_ERRNO);
    nsbox_seccomp_profile_free(&p);
}

static void check_fails(const char *json, const char *want)
{
    struct nsbox_seccomp_profile p;
    oci_ok(json, &p);
    struct nsbox_err e = {0};
    int rc = nsbox_contain_calls_check(&p, &e);
    nsbox_seccomp_profile_free(&p);
    assert_int_equal(rc, -1);
    if (!strstr(e.msg, want))
        fail_msg("error \"%s\"\n  does not contain \"%s\"", e.msg, want);
}

static void test_init_calls_check(void **state)
{
    (void)state;
    struct nsbox_seccomp_profile p;
    struct nsbox_err e = {0};
    oci_ok("{\"defaultAction\":\"SCMP_ACT_ALLOW\",\"syscalls\":[{\"names\":[\"mkdir\"],"
           "\"action\":\"SCMP_ACT_ERRNO\"},{\"names\":[\"wait4\"],\"action\":\"SCMP_ACT_LOG\"}]}",
           &p);
    assert_int_equal(nsbox_contain_calls_check(&p, &e), 0);
    nsbox_seccomp_profile_free(&p);
    check_fails("{\"defaultAction\":\"SCMP_ACT_ALLOW\",\"syscalls\":[{\"names\":[\"wait4\"],"
                "\"action\":\"SCMP_ACT_KILL_PROCESS\"}]}",
                "the profile answers wait4 with SCMP_ACT_KILL_PROCESS");
    check_fails("{\"defaultAction\":\"SCMP_ACT_ALLOW\",\"syscalls\":[{\"names\":[\"recvmsg\"],"
                "\"action\":\"SCMP_ACT_ERRNO\",\"errnoRet\":13}]}",
                "recvmsg with SCMP_ACT_ERRNO (EACCES)");
    /* by its arguments: Docker's prctl rule as written above allows up to 36 only */
    check_fails(docker_shape, "the profile answers capset with SCMP_ACT_ERRNO (EPERM)");
    check_fails("{\"defaultAction\":\"SCMP_ACT_ALLOW\",\"syscalls\":[{\"names\":[\"prctl\"],"
                "\"action\":\"SCMP_ACT_ERRNO\",\"args\":[{\"index\":0,\"value\":47,"
                "\"op\":\"SCMP_CMP_EQ\"}]}]}",
                "the profile answers prctl with SCMP_ACT_ERRNO");
    /* success without the call, for the calls that drop privilege: whatever the arguments
     * (these are not init's, which the rest of the check tries) */
    check_fails("{\"defaultAction\":\"SCMP_ACT_ALLOW\",\"syscalls\":[{\"names\":[\"prctl\"],"
                "\"action\":\"SCMP_ACT_ERRNO\",\"errnoRet\":0,\"args\":[{\"index\":0,"
                "\"value\":24,\"op\":\"SCMP_CMP_EQ\"},{\"index\":1,\"value\":21,"
                "\"op\":\"SCMP_CMP_EQ\"}]}]}",
                "the profile answers prctl with SCMP_ACT_ERRNO and errno 0, success without");
    check_fails("{\"defaultAction\":\"SCMP_ACT_ALLOW\",\"syscalls\":[{\"names\":[\"capset\"],"
                "\"action\":\"SCMP_ACT_ERRNO\",\"errnoRet\":0,\"args\":[{\"index\":0,"
                "\"value\":1,\"op\":\"SCMP_CMP_EQ\"}]}]}",
                "the profile answers capset with SCMP_ACT_ERRNO and errno 0");
    check_fails("{\"defaultAction\":\"SCMP_ACT_ERRNO\",\"defaultErrnoRet\":0,\"syscalls\":[]}",
                "capset with SCMP_ACT_ERRNO and errno 0 (its default action)");
    /* another errno fails the call, and so what makes it: allowed here */
    oci_ok("{\"defaultAction\":\"SCMP_ACT_ALLOW\",\"syscalls\":[{\"names\":[\"setresuid\"],"
           "\"action\":\"SCMP_ACT_ERRNO\",\"errnoRet\":1}]}",
           &p);
    assert_int_equal(nsbox_contain_calls_check(&p, &e), 0);
    nsbox_seccomp_profile_free(&p);
    /* a clone rule that refuses only namespaces lets init fork */
    oci_ok("{\"defaultAction\":\"SCMP_ACT_ALLOW\",\"syscalls\":[{\"names\":[\"clone\"],"
           "\"action\":\"SCMP_ACT_ERRNO\",\"args\":[{\"index\":0,\"value\":268435456,"
           "\"valueTwo\":268435456,\"op\":\"SCMP_CMP_MASKED_EQ\"}]}]}",
           &p);
    assert_int_equal(nsbox_contain_calls_check(&p, &e), 0);
    nsbox_seccomp_profile_free(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_docker_shape),    cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_several_actions), cmocka_unit_test(test_split_rule),
        cmocka_unit_test(test_answer),          cmocka_unit_test(test_init_calls_check),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
