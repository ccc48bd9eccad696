/* Seccomp: the arguments the kernel reads as 32 bits (policy/seccomp_width.c). A refusing rule's
 * equality on one compares the low 32 bits, so that the same value with the upper bits set is
 * refused too; the kernel is the oracle (a filter loaded in a forked child). And every refusing
 * rule of nsbox's shipped profiles compares such an argument in a way the upper bits cannot
 * get past. */

#include "seccomp_fixture.h"

#define PROFILE(rule) "{\"defaultAction\":\"SCMP_ACT_ALLOW\",\"syscalls\":[" rule "]}"

static const struct nsbox_scmp_rule *only_rule(const struct nsbox_seccomp_profile *p)
{
    assert_int_equal(p->n_rules, 1);
    return &p->rules[0];
}

static void test_refusing_equality_narrowed(void **state)
{
    const char *text = PROFILE("{\"names\":[\"setrlimit\"],\"action\":\"SCMP_ACT_ERRNO\","
                               "\"args\":[{\"index\":0,\"value\":4,\"op\":\"SCMP_CMP_EQ\"}]}");
    struct nsbox_seccomp_profile p;
    parse_ok(text, &p);
    const struct nsbox_scmp_rule *r = only_rule(&p);
    assert_int_equal(r->args[0].op, NSBOX_OP_MASKED_EQ);
    assert_int_equal(r->args[0].value, 0xffffffffu);
    assert_int_equal(r->args[0].value2, 4);
    uint64_t args[NSBOX_SECCOMP_MAX_ARGS] = {0x100000004ull};
    int err = 0;
    assert_int_equal(nsbox_seccomp_profile_answer(&p, "setrlimit", args, &err), NSBOX_SCMP_ERRNO);
    assert_int_equal(err, EPERM);
    args[0] = 5;
    assert_int_equal(nsbox_seccomp_profile_answer(&p, "setrlimit", args, &err), NSBOX_SCMP_ALLOW);
    nsbox_seccomp_profile_free(&p);

    /* A bundle's profile is taken as runc takes it. */
    struct nsbox_err e = {0};
    assert_int_equal(nsbox_seccomp_profile_parse_oci(text, strlen(text), &p, &e), 0);
    assert_int_equal(only_rule(&p)->args[0].op, NSBOX_OP_EQ);
    nsbox_seccomp_profile_free(&p);
}

/* The one rule of the profile json: the operator argument j became, and its value2. */
static enum nsbox_scmp_op op_of(const char *json, size_t j, uint64_t *value2)
{
    struct nsbox_seccomp_profile p;
    parse_ok(json, &p);
    enum nsbox_scmp_op op = only_rule(&p)->args[j].op;
    if (value2)
        *value2 = only_rule(&p)->args[j].value2;
    nsbox_seccomp_profile_free(&p);
    return op;
}

static void test_what_stays_wide(void **state)
{
    /* An allowing rule: the upper-bit variant falls to the refusing default. */
    assert_int_equal(op_of("{\"defaultAction\":\"SCMP_ACT_ERRNO\",\"syscalls\":[{\"names\":"
                           "[\"socket\"],\"action\":\"SCMP_ACT_ALLOW\",\"args\":[{\"index\":0,"
                           "\"value\":2,\"op\":\"SCMP_CMP_EQ\"}]}]}",
                           0, NULL),
                     NSBOX_OP_EQ);
    /* A 64-bit argument: unshare's flags are an unsigned long. */
    assert_int_equal(op_of(PROFILE("{\"names\":[\"unshare\"],\"action\":\"SCMP_ACT_ERRNO\","
                                   "\"args\":[{\"index\":0,\"value\":4,\"op\":\"SCMP_CMP_EQ\"}]}"),
                           0, NULL),
                     NSBOX_OP_EQ);
    /* prctl's second argument is an unsigned long; its option (argument 0) an int. */
    const char *prctl = PROFILE("{\"names\":[\"prctl\"],\"action\":\"SCMP_ACT_KILL_PROCESS\","
                                "\"args\":[{\"index\":0,\"value\":36,\"op\":\"SCMP_CMP_EQ\"},"
                                "{\"index\":1,\"value\":0,\"op\":\"SCMP_CMP_EQ\"}]}");
    assert_int_equal(op_of(prctl, 0, NULL), NSBOX_OP_MASKED_EQ);
    assert_int_equal(op_of(prctl, 1, NULL), NSBOX_OP_EQ);
    /* A value 32 bits cannot hold matches no value the kernel reads: left as written. */
    assert_int_equal(op_of(PROFILE("{\"names\":[\"ioctl\"],\"action\":\"SCMP_ACT_ERRNO\","
                                   "\"args\":[{\"index\":1,\"value\":\"0x100005412\","
                                   "\"op\":\"SCMP_CMP_EQ\"}]}"),
                           0, NULL),
                     NSBOX_OP_EQ);
    /* An int's negative value, sign-extended: its low 32 bits. */
    uint64_t v2 = 0;
    assert_int_equal(op_of(PROFILE("{\"names\":[\"kill\"],\"action\":\"SCMP_ACT_ERRNO\","
                                   "\"args\":[{\"index\":1,\"value\":\"0xffffffffffffffff\","
                                   "\"op\":\"SCMP_CMP_EQ\"}]}"),
                           0, &v2),
                     NSBOX_OP_MASKED_EQ);
    assert_int_equal(v2, 0xffffffffu);
}

/* prctl(PR_GET_DUMPABLE) in a child under prog, the option's upper 32 bits set: the kernel
 * reads it as PR_GET_DUMPABLE. */
static void prctl_highbit(const struct sock_fprog *prog, long *ret, int *err)
{
    int fds[2];
    pid_t pid = probe_fork(fds);
    if (pid == 0) {
        struct nsbox_err e;
        struct {
            long ret;
            int err;
        } out = {-1, 0};
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || nsbox_seccomp_prog_load(prog, &e) < 0)
            _exit(2);
        errno = 0;
        out.ret = syscall(SYS_prctl, (1L << 32) | PR_GET_DUMPABLE, 0L, 0L, 0L, 0L);
        out.err = errno;
        _exit(write(fds[1], &out, sizeof out) == (ssize_t)sizeof out ? 0 : 3);
    }
    close(fds[1]);
    struct {
        long ret;
        int err;
    } in = {-1, 0};
    assert_int_equal(read(fds[0], &in, sizeof in), (ssize_t)sizeof in);
    close(fds[0]);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    *ret = in.ret;
    *err = in.err;
}

static void test_kernel_refuses_upper_bits(void **state)
{
    const char *text = PROFILE("{\"names\":[\"prctl\"],\"action\":\"SCMP_ACT_ERRNO\","
                               "\"errnoRet\":13,\"args\":[{\"index\":0,\"value\":3,"
                               "\"op\":\"SCMP_CMP_EQ\"}]}");
    struct nsbox_seccomp_profile p;
    struct nsbox_err e = {0};
    struct sock_fprog prog;
    long ret;
    int err;
    /* The control: compiled as a bundle's (wide), the call gets past the rule. */
    assert_int_equal(nsbox_seccomp_profile_parse_oci(text, strlen(text), &p, &e), 0);
    assert_int_equal(nsbox_seccomp_compile(&p, &prog, &e), 0);
    prctl_highbit(&prog, &ret, &err);
    assert_true(ret >= 0);
    nsbox_seccomp_compile_free(&prog);
    nsbox_seccomp_profile_free(&p);
    /* nsbox's own: refused. */
    parse_ok(text, &p);
    assert_int_equal(nsbox_seccomp_compile(&p, &prog, &e), 0);
    prctl_highbit(&prog, &ret, &err);
    assert_int_equal(ret, -1);
    assert_int_equal(err, EACCES);
    nsbox_seccomp_compile_free(&prog);
    nsbox_seccomp_profile_free(&p);
}

/* Every refusing rule of a shipped profile that compares a 32-bit argument does it so that the
 * upper bits cannot get a call past it: on the low 32 bits (a mask within them), or above a
 * bound (any upper bit makes the value larger still). */
static void audit(const char *what, const char *text)
{
    struct nsbox_seccomp_profile p;
    parse_ok(text, &p);
    for (size_t i = 0; i < p.n_rules; i++) {
        const struct nsbox_scmp_rule *r = &p.rules[i];
        if (r->action == NSBOX_SCMP_ALLOW || r->action == NSBOX_SCMP_LOG)
            continue;
        for (size_t j = 0; j < r->n_args; j++) {
            const struct nsbox_scmp_arg *a = &r->args[j];
            if (!nsbox_seccomp_width_is_32(r->name, a->index))
                continue;
            bool low = a->op == NSBOX_OP_MASKED_EQ && a->value <= UINT32_MAX;
            bool above = a->op == NSBOX_OP_GT || a->op == NSBOX_OP_GE;
            if (!low && !above)
                fail_msg("%s: syscalls[%u] (%s) compares argument %u on all 64 bits", what,
                         r->src_index, r->name, a->index);
        }
    }
    nsbox_seccomp_profile_free(&p);
}

static void test_shipped_profiles(void **state)
{
    audit("seccomp-default.json", nsbox_seccomp_default_json());
    audit("seccomp-root.json", nsbox_seccomp_root_json());
    audit("seccomp-egress.json", nsbox_seccomp_egress_json());
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_refusing_equality_narrowed),
        cmocka_unit_test(test_what_stays_wide),
        cmocka_unit_test(test_kernel_refuses_upper_bits),
        cmocka_unit_test(test_shipped_profiles),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
