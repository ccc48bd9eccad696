/* Seccomp: folding one profile into another (policy/seccomp_fold.c) and the writable root's
 * program (os/seccomp_prog.c). The kernel is the oracle: each base profile and the root's
 * refusals are loaded as two stacked filters in one forked child, the folded profile alone in
 * another, and the same calls (side-effect-free arguments) must get the same answers. */

#include "seccomp_fixture.h"

#include "cleanup.h"

#include <sys/xattr.h>

#define NOFILE "/nonexistent-nsbox-fold-test"
#define SETXATTRAT 463 /* setxattrat, numbered alike on every architecture */

/* ---- profile level ----------------------------------------------------------------------- */

static void parse_root(struct nsbox_seccomp_profile *p)
{
    parse_ok(nsbox_seccomp_root_json(), p);
}

/* The verdict p gives name: its rules' (the first one's) or the default, and how many rules. */
static size_t rules_for(const struct nsbox_seccomp_profile *p, const char *name,
                        const struct nsbox_scmp_rule **first)
{
    size_t n = 0;
    *first = NULL;
    for (size_t i = 0; i < p->n_rules; i++)
        if (!strcmp(p->rules[i].name, name) && n++ == 0)
            *first = &p->rules[i];
    return n;
}

static void assert_refused(const struct nsbox_seccomp_profile *p, const char *name, int err)
{
    const struct nsbox_scmp_rule *r;
    if (rules_for(p, name, &r) != 1)
        fail_msg("%s: not exactly one rule", name);
    assert_int_equal(r->action, NSBOX_SCMP_ERRNO);
    assert_int_equal(r->errno_ret, err);
    assert_int_equal(r->n_args, 0);
}

static const char *const xattr_writes[] = {"setxattr", "lsetxattr", "fsetxattr", "setxattrat"};

/* nsbox's profile with the root's refusals: its rules as they were, the four writes added
 * (setxattrat too, from nsbox's table of calls past this libseccomp). */
static void test_fold_default(void **state)
{
    struct nsbox_seccomp_profile dflt, p;
    struct nsbox_err e = {0};
    parse_ok(nsbox_seccomp_default_json(), &dflt);
    parse_ok(nsbox_seccomp_default_json(), &p);
    assert_int_equal(nsbox_seccomp_fold_root(&p, &e), 0);
    assert_int_equal(p.default_action, dflt.default_action);
    assert_int_equal(p.badarch_action, dflt.badarch_action);
    assert_int_equal(p.n_rules, dflt.n_rules + 4);
    for (size_t i = 0; i < dflt.n_rules; i++) {
        assert_string_equal(p.rules[i].name, dflt.rules[i].name);
        assert_memory_equal(&p.rules[i], &dflt.rules[i], sizeof p.rules[i]);
    }
    for (size_t i = 0; i < 4; i++)
        assert_refused(&p, xattr_writes[i], EOPNOTSUPP);
    assert_int_equal(nsbox_seccomp_names_resolve("setxattrat"), SETXATTRAT);
    struct sock_fprog prog;
    assert_int_equal(nsbox_seccomp_compile(&p, &prog, &e), 0);
    nsbox_seccomp_compile_free(&prog);
    nsbox_seccomp_profile_free(&p);
    nsbox_seccomp_profile_free(&dflt);
}

/* Bases of other shapes: the stricter answer wins, and of two errnos the root's. */
static const char *const allow_base =
    "{\"defaultAction\": \"SCMP_ACT_ALLOW\", \"syscalls\": ["
    " {\"names\": [\"setxattr\"], \"action\": \"SCMP_ACT_ERRNO\", \"errnoRet\": 1},"
    " {\"names\": [\"lsetxattr\"], \"action\": \"SCMP_ACT_LOG\"},"
    " {\"names\": [\"fsetxattr\"], \"action\": \"SCMP_ACT_KILL_PROCESS\"},"
    " {\"names\": [\"getxattr\"], \"action\": \"SCMP_ACT_ERRNO\", \"errnoRet\": 34,"
    "  \"args\": [{\"index\": 3, \"value\": 0, \"op\": \"SCMP_CMP_EQ\"}]},"
    " {\"names\": [\"removexattr\"], \"action\": \"SCMP_ACT_ERRNO\", \"errnoRet\": 13}]}";

/* What a probe child calls besides the probed call (a sanitizer's runtime too), for the
 * allow-lists below. */
#define CHILD_CALLS                                                                                \
    "\"write\", \"exit_group\", \"seccomp\", \"prctl\", \"rt_sigreturn\", \"rt_sigaction\", "      \
    "\"rt_sigprocmask\", \"sigaltstack\", \"mmap\", \"munmap\", \"mprotect\", \"madvise\", "       \
    "\"getpid\", \"gettid\", \"sched_yield\", \"futex\""

/* Docker's shape: errno by default, an allow-list that has some of the writes */
static const char *const errno_base =
    "{\"defaultAction\": \"SCMP_ACT_ERRNO\", \"defaultErrnoRet\": 13, \"syscalls\": ["
    " {\"names\": [\"setxattr\", \"lsetxattr\", \"getxattr\", " CHILD_CALLS "],"
    "  \"action\": \"SCMP_ACT_ALLOW\"}]}";

/* an allow-list that kills the rest */
static const char *const kill_base =
    "{\"defaultAction\": \"SCMP_ACT_KILL_PROCESS\", \"syscalls\": ["
    " {\"names\": [\"setxattr\", \"getxattr\", " CHILD_CALLS "],"
    "  \"action\": \"SCMP_ACT_ALLOW\"}]}";

/* the call's arguments decide, and both outcomes stacked with the root's are its errno */
static const char *const cond_base =
    "{\"defaultAction\": \"SCMP_ACT_ALLOW\", \"syscalls\": ["
    " {\"names\": [\"setxattr\"], \"action\": \"SCMP_ACT_ERRNO\", \"errnoRet\": 17,"
    "  \"args\": [{\"index\": 4, \"value\": 1, \"op\": \"SCMP_CMP_EQ\"}]},"
    " {\"names\": [\"getxattr\"], \"action\": \"SCMP_ACT_KILL_PROCESS\","
    "  \"args\": [{\"index\": 3, \"value\": 7, \"op\": \"SCMP_CMP_EQ\"}]}]}";

static void fold_json(const char *base, struct nsbox_seccomp_profile *p)
{
    struct nsbox_seccomp_profile root;
    struct nsbox_err e = {0};
    parse_ok(base, p);
    parse_root(&root);
    if (nsbox_seccomp_fold(p, &root, &e) < 0)
        fail_msg("fold: %s", e.msg);
    nsbox_seccomp_profile_free(&root);
}

static void test_fold_shapes(void **state)
{
    struct nsbox_seccomp_profile p;
    const struct nsbox_scmp_rule *r;

    fold_json(allow_base, &p);
    assert_refused(&p, "setxattr", EOPNOTSUPP);  /* two errnos: the root's */
    assert_refused(&p, "lsetxattr", EOPNOTSUPP); /* log is weaker */
    assert_int_equal(rules_for(&p, "fsetxattr", &r), 1);
    assert_int_equal(r->action, NSBOX_SCMP_KILL_PROCESS); /* kill is stronger */
    assert_refused(&p, "setxattrat", EOPNOTSUPP);
    assert_int_equal(rules_for(&p, "getxattr", &r), 1); /* not the root's: as it was */
    assert_int_equal(r->n_args, 1);
    assert_int_equal(r->errno_ret, ERANGE);
    assert_refused(&p, "removexattr", EACCES);
    nsbox_seccomp_profile_free(&p);

    fold_json(errno_base, &p);
    assert_int_equal(p.default_action, NSBOX_SCMP_ERRNO);
    assert_int_equal(p.default_errno, EACCES);
    assert_refused(&p, "setxattr", EOPNOTSUPP);  /* allowed by the list */
    assert_refused(&p, "fsetxattr", EOPNOTSUPP); /* the default's errno, the root's wins */
    assert_refused(&p, "setxattrat", EOPNOTSUPP);
    assert_int_equal(rules_for(&p, "getxattr", &r), 1);
    assert_int_equal(r->action, NSBOX_SCMP_ALLOW);
    nsbox_seccomp_profile_free(&p);

    fold_json(kill_base, &p);
    assert_int_equal(p.default_action, NSBOX_SCMP_KILL_PROCESS);
    assert_refused(&p, "setxattr", EOPNOTSUPP);
    assert_int_equal(rules_for(&p, "lsetxattr", &r), 0); /* the default, kill, is stronger */
    assert_int_equal(rules_for(&p, "setxattrat", &r), 0);
    nsbox_seccomp_profile_free(&p);

    fold_json(cond_base, &p);
    assert_refused(&p, "setxattr", EOPNOTSUPP); /* both outcomes the same: no comparison */
    assert_int_equal(rules_for(&p, "getxattr", &r), 1);
    assert_int_equal(r->n_args, 1);
    assert_int_equal(r->action, NSBOX_SCMP_KILL_PROCESS);
    nsbox_seccomp_profile_free(&p);
}

/* What one filter cannot say is refused, naming the rule, and the base is left as it was. */
static void test_fold_refused(void **state)
{
    struct nsbox_seccomp_profile base, extra;
    struct nsbox_err e = {0};
    parse_ok("{\"defaultAction\": \"SCMP_ACT_ALLOW\", \"syscalls\": ["
             " {\"names\": [\"getpid\"], \"action\": \"SCMP_ACT_ERRNO\"},"
             " {\"names\": [\"fsetxattr\"], \"action\": \"SCMP_ACT_KILL_PROCESS\","
             "  \"args\": [{\"index\": 0, \"value\": 1000, \"op\": \"SCMP_CMP_EQ\"}]}]}",
             &base);
    parse_root(&extra);
    assert_int_equal(nsbox_seccomp_fold(&base, &extra, &e), -1);
    assert_non_null(strstr(e.msg, "syscalls[1] ('fsetxattr'): its arguments decide between two "
                                  "actions"));
    assert_int_equal(base.n_rules, 2);
    assert_string_equal(base.rules[1].name, "fsetxattr");
    assert_int_equal(base.rules[1].action, NSBOX_SCMP_KILL_PROCESS);
    nsbox_seccomp_profile_free(&extra);

    parse_ok("{\"defaultAction\": \"SCMP_ACT_ALLOW\", \"syscalls\": ["
             " {\"names\": [\"setxattr\"], \"action\": \"SCMP_ACT_ERRNO\","
             "  \"args\": [{\"index\": 4, \"value\": 1, \"op\": \"SCMP_CMP_EQ\"}]}]}",
             &extra);
    assert_int_equal(nsbox_seccomp_fold(&base, &extra, &e), -1);
    assert_non_null(strstr(e.msg, "syscalls[0] ('setxattr') of the profile folded in compares "
                                  "arguments; only unconditional rules fold"));
    assert_int_equal(base.n_rules, 2);
    nsbox_seccomp_profile_free(&extra);
    nsbox_seccomp_profile_free(&base);
}

/* ---- the kernel as the oracle ------------------------------------------------------------ */

struct call {
    const char *what;
    long nr, a[6];
};

struct answer {
    long ret;
    int err, sig;
};

static const struct {
    uint64_t value;
    uint32_t size, flags;
} at_args = {(uintptr_t) "x", 1, 0};

static struct call calls[] = {
    {"setxattr", SYS_setxattr, {(long)NOFILE, (long)"user.x", (long)"x", 1, 0}},
    {"setxattr XATTR_CREATE", SYS_setxattr, {(long)NOFILE, (long)"user.x", (long)"x", 1, 1}},
    {"lsetxattr", SYS_lsetxattr, {(long)NOFILE, (long)"user.x", (long)"x", 1, 0}},
    {"fsetxattr", SYS_fsetxattr, {-1, (long)"user.x", (long)"x", 1, 0}},
    {"fsetxattr fd 1000", SYS_fsetxattr, {1000, (long)"user.x", (long)"x", 1, 0}},
    {"setxattrat", SETXATTRAT, {AT_FDCWD, (long)NOFILE, 0, (long)"user.x", (long)&at_args, 16}},
    {"getxattr", SYS_getxattr, {(long)NOFILE, (long)"user.x", 0, 1}},
    {"getxattr size 0", SYS_getxattr, {(long)NOFILE, (long)"user.x", 0, 0}},
    {"getxattr size 7", SYS_getxattr, {(long)NOFILE, (long)"user.x", 0, 7}},
    {"removexattr", SYS_removexattr, {(long)NOFILE, (long)"user.x"}},
};

/* Fork; the child loads progs in order (stacked, after no_new_privs) and makes the call. */
static struct answer ask(const struct sock_fprog *const *progs, size_t n, const struct call *c)
{
    int fds[2];
    pid_t pid = probe_fork(fds);
    if (pid == 0) {
        struct answer a = {-1, 0, 0};
        struct nsbox_err e;
        signal(SIGSYS, SIG_DFL); /* a kill or trap ends the child, for the parent to see */
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
            _exit(2);
        for (size_t i = 0; i < n; i++)
            if (nsbox_seccomp_prog_load(progs[i], &e) < 0)
                _exit(3);
        errno = 0;
        a.ret = syscall(c->nr, c->a[0], c->a[1], c->a[2], c->a[3], c->a[4], c->a[5]);
        a.err = errno;
        if (write(fds[1], &a, sizeof a) != (ssize_t)sizeof a)
            _exit(4);
        _exit(0);
    }
    close(fds[1]);
    struct answer a = {-1, 0, 0};
    ssize_t got = read(fds[0], &a, sizeof a);
    close(fds[0]);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (WIFSIGNALED(status)) {
        a.sig = WTERMSIG(status);
        return a;
    }
    if (WEXITSTATUS(status) != 0 || got != (ssize_t)sizeof a)
        fail_msg("%s: the probe child exited %d", c->what, WEXITSTATUS(status));
    return a;
}

static void compile_ok(const struct nsbox_seccomp_profile *p, struct sock_fprog *prog)
{
    struct nsbox_err e = {0};
    if (nsbox_seccomp_compile(p, prog, &e) < 0)
        fail_msg("compile: %s", e.msg);
}

/* Every call answered alike by base + root stacked and by the fold; returns how many of the
 * xattr writes the fold refused with EOPNOTSUPP (or killed), so that a test cannot pass on a
 * filter that refused nothing. */
static size_t same_as_stacked(const char *base_json)
{
    struct nsbox_seccomp_profile base, root, folded;
    struct sock_fprog b, r, f;
    parse_ok(base_json, &base);
    parse_root(&root);
    fold_json(base_json, &folded);
    compile_ok(&base, &b);
    compile_ok(&root, &r);
    compile_ok(&folded, &f);
    const struct sock_fprog *stacked[] = {&b, &r}, *one[] = {&f};
    size_t refused = 0;
    for (size_t i = 0; i < NSBOX_ARRAY_LEN(calls); i++) {
        struct answer s = ask(stacked, 2, &calls[i]), o = ask(one, 1, &calls[i]);
        if (s.ret != o.ret || s.err != o.err || s.sig != o.sig)
            fail_msg("%s: stacked %ld errno %d signal %d, folded %ld errno %d signal %d",
                     calls[i].what, s.ret, s.err, s.sig, o.ret, o.err, o.sig);
        if (strstr(calls[i].what, "setxattr") && (o.err == EOPNOTSUPP || o.sig))
            refused++;
    }
    nsbox_seccomp_compile_free(&b);
    nsbox_seccomp_compile_free(&r);
    nsbox_seccomp_compile_free(&f);
    nsbox_seccomp_profile_free(&base);
    nsbox_seccomp_profile_free(&root);
    nsbox_seccomp_profile_free(&folded);
    return refused;
}

static void test_fold_answers_as_stacked(void **state)
{
    const size_t writes = 6; /* the calls above that write an attribute */
    assert_int_equal(same_as_stacked(nsbox_seccomp_default_json()), writes);
    assert_int_equal(same_as_stacked(allow_base), writes);
    assert_int_equal(same_as_stacked(errno_base), writes);
    assert_int_equal(same_as_stacked(kill_base), writes);
    assert_int_equal(same_as_stacked(cond_base), writes);
}

/* ---- the writable root's program --------------------------------------------------------- */

static void test_root_prog(void **state)
{
    struct nsbox_err e = {0};
    struct sock_fprog root, again;
    char dir[] = "/tmp/nsbox-seccomp-fold-XXXXXX", sub[64], cmd[128];
    assert_non_null(mkdtemp(dir));
    snprintf(sub, sizeof sub, "%s/cache", dir);
    nsbox_seccomp_prog_forget();
    assert_int_equal(nsbox_seccomp_prog_root(sub, &root, &e), 0);
    assert_false(root.len == default_prog.len &&
                 !memcmp(root.filter, default_prog.filter, root.len * sizeof *root.filter));
    const struct sock_fprog *one[] = {&root}, *dflt[] = {&default_prog};
    struct answer a = ask(one, 1, &calls[5]); /* setxattrat */
    assert_int_equal(a.err, EOPNOTSUPP);
    a = ask(dflt, 1, &calls[5]);
    assert_int_not_equal(a.err, EOPNOTSUPP);
    a = ask(one, 1, &calls[6]); /* getxattr: not a write */
    assert_int_equal(a.err, ENOENT);

    /* a cache file of its own, read back by the next process (forget: as one) */
    assert_int_equal(nsbox_seccomp_prog_default(sub, &again, &e), 0);
    nsbox_seccomp_compile_free(&again);
    snprintf(cmd, sizeof cmd, "ls %s | grep -c '^seccomp-.*\\.bpf$'", sub);
    FILE *f = popen(cmd, "r");
    int n = 0;
    assert_int_equal(fscanf(f, "%d", &n), 1);
    pclose(f);
    assert_int_equal(n, 2);
    nsbox_seccomp_prog_forget();
    assert_int_equal(nsbox_seccomp_prog_root(sub, &again, &e), 0);
    assert_int_equal(again.len, root.len);
    assert_memory_equal(again.filter, root.filter, root.len * sizeof *root.filter);
    nsbox_seccomp_compile_free(&again);
    nsbox_seccomp_compile_free(&root);
    snprintf(cmd, sizeof cmd, "rm -r %s", dir);
    assert_int_equal(system(cmd), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fold_default), cmocka_unit_test(test_fold_shapes),
        cmocka_unit_test(test_fold_refused), cmocka_unit_test(test_fold_answers_as_stacked),
        cmocka_unit_test(test_root_prog),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
