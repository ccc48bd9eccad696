/* Resource limits of sandbox processes (policy/rlimits.c). Pure; no root needed. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "rlimits.h"

#include <stdlib.h>
#include <string.h>

struct got {
    size_t n;
    struct nsbox_rlimit r[NSBOX_RLIMITS_MAX + 4]; /* slack + canary for an overrun */
};

static struct got compute_for(uint64_t pids, bool privileged,
                              const struct nsbox_rlimits_caller *caller)
{
    struct nsbox_spec *s = calloc(1, sizeof *s);
    assert_non_null(s);
    s->limits.pids = pids;
    struct got g;
    memset(&g, 0xA5, sizeof g);
    g.n = nsbox_rlimits_for(s, privileged, caller, g.r);
    free(s);
    assert_true(g.n <= NSBOX_RLIMITS_MAX);
    /* nothing written past what was returned... at least not past the declared maximum */
    const unsigned char *tail = (const unsigned char *)&g.r[NSBOX_RLIMITS_MAX];
    for (size_t i = 0; i < 4 * sizeof g.r[0]; i++)
        assert_int_equal(tail[i], 0xA5);
    /* each resource at most once: a second entry would silently override the first */
    for (size_t i = 0; i < g.n; i++)
        for (size_t j = i + 1; j < g.n; j++)
            assert_int_not_equal(g.r[i].resource, g.r[j].resource);
    return g;
}

static struct got compute(uint64_t pids, bool privileged)
{
    return compute_for(pids, privileged, NULL);
}

static const struct rlimit *find(const struct got *g, int resource)
{
    for (size_t i = 0; i < g->n; i++)
        if (g->r[i].resource == resource) return &g->r[i].lim;
    return NULL;
}

static void check_common(const struct got *g)
{
    const struct rlimit *core = find(g, RLIMIT_CORE);
    assert_non_null(core);
    /* 1 byte: no file dump (it needs a page) and no pipe to the host's helper (the kernel's
     * special case of 1; at 0 it runs the helper); hard, so the sandbox cannot raise it */
    assert_int_equal(core->rlim_cur, 1);
    assert_int_equal(core->rlim_max, 1);

    const struct rlimit *nofile = find(g, RLIMIT_NOFILE);
    assert_non_null(nofile);
    assert_true(nofile->rlim_max != RLIM_INFINITY);
    assert_true(nofile->rlim_max >= 1024);  /* usable for language servers, test runners */
    assert_true(nofile->rlim_max <= 65536); /* bounded */
    assert_true(nofile->rlim_cur <= nofile->rlim_max);
    assert_true(nofile->rlim_cur >= 1024);
}

static void test_unprivileged_has_no_nproc(void **state)
{
    (void)state;
    /* Unprivileged, RLIMIT_NPROC would count every process of the caller's own host uid. */
    struct got g = compute(256, false);
    check_common(&g);
    assert_null(find(&g, RLIMIT_NPROC));
    assert_int_equal(g.n, 2);
}

static void test_privileged_nproc_equals_pids(void **state)
{
    (void)state;
    uint64_t vals[] = {1, 64, 256, 4096, 100000};
    for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++) {
        struct got g = compute(vals[i], true);
        check_common(&g);
        const struct rlimit *np = find(&g, RLIMIT_NPROC);
        assert_non_null(np);
        assert_int_equal(np->rlim_cur, vals[i]);
        assert_int_equal(np->rlim_max, vals[i]);
        assert_int_equal(g.n, 3);
    }
}

static void test_privileged_without_pids_limit(void **state)
{
    (void)state;
    /* pids 0 means "no limit": no RLIMIT_NPROC of 0 (which would forbid every fork). */
    struct got g = compute(0, true);
    check_common(&g);
    assert_null(find(&g, RLIMIT_NPROC));
}

static void test_unprivileged_takes_half_the_callers_per_user_counts(void **state)
{
    (void)state;
    /* the kernel counts these per user: the caller's other processes keep the other half */
    struct nsbox_rlimits_caller caller = {96367, 819200};
    struct got g = compute_for(256, false, &caller);
    check_common(&g);
    const struct rlimit *sig = find(&g, RLIMIT_SIGPENDING), *mq = find(&g, RLIMIT_MSGQUEUE);
    assert_non_null(sig);
    assert_non_null(mq);
    assert_int_equal(sig->rlim_cur, 48183);
    assert_int_equal(sig->rlim_max, 48183); /* hard: the sandbox cannot take more back */
    assert_int_equal(mq->rlim_cur, 409600);
    assert_int_equal(mq->rlim_max, 409600);
    assert_null(find(&g, RLIMIT_NPROC));
}

static void test_shares_only_of_what_is_known_and_bounded(void **state)
{
    (void)state;
    /* root's sandbox has a host uid, and so counts, of its own */
    struct nsbox_rlimits_caller caller = {96367, 819200};
    struct got g = compute_for(256, true, &caller);
    assert_null(find(&g, RLIMIT_SIGPENDING));
    assert_null(find(&g, RLIMIT_MSGQUEUE));
    /* unknown (0) or unlimited: nothing to take half of */
    struct nsbox_rlimits_caller none = {0, RLIM_INFINITY};
    g = compute_for(256, false, &none);
    assert_null(find(&g, RLIMIT_SIGPENDING));
    assert_null(find(&g, RLIMIT_MSGQUEUE));
    assert_int_equal(g.n, 2);
}

static void test_user_share(void **state)
{
    (void)state;
    assert_int_equal(nsbox_rlimits_user_share(128), 64);        /* max_user_instances */
    assert_int_equal(nsbox_rlimits_user_share(192540), 96270);  /* max_user_watches here */
    assert_int_equal(nsbox_rlimits_user_share(3), 1);
    assert_int_equal(nsbox_rlimits_user_share(1), 1); /* never 0: that would forbid it all */
    assert_int_equal(nsbox_rlimits_user_share(0), 0);
}

static void test_core_floor(void **state)
{
    (void)state;
    /* docker run --ulimit core=0: no dump either way, but at 0 a piped core_pattern's helper
     * runs for each crash */
    struct nsbox_rlimit r = {RLIMIT_CORE, {0, 0}};
    nsbox_rlimits_core_floor(&r);
    assert_int_equal(r.lim.rlim_cur, 1);
    assert_int_equal(r.lim.rlim_max, 1);
    r = (struct nsbox_rlimit){RLIMIT_CORE, {0, 4096}};
    nsbox_rlimits_core_floor(&r);
    assert_int_equal(r.lim.rlim_cur, 1);
    assert_int_equal(r.lim.rlim_max, 4096);
    r = (struct nsbox_rlimit){RLIMIT_CORE, {4096, RLIM_INFINITY}};
    nsbox_rlimits_core_floor(&r);
    assert_int_equal(r.lim.rlim_cur, 4096);
    assert_true(r.lim.rlim_max == RLIM_INFINITY);
    r = (struct nsbox_rlimit){RLIMIT_NOFILE, {0, 0}}; /* another resource: as given */
    nsbox_rlimits_core_floor(&r);
    assert_int_equal(r.lim.rlim_cur, 0);
    assert_int_equal(r.lim.rlim_max, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unprivileged_has_no_nproc),
        cmocka_unit_test(test_privileged_nproc_equals_pids),
        cmocka_unit_test(test_privileged_without_pids_limit),
        cmocka_unit_test(test_unprivileged_takes_half_the_callers_per_user_counts),
        cmocka_unit_test(test_shares_only_of_what_is_known_and_bounded),
        cmocka_unit_test(test_user_share),
        cmocka_unit_test(test_core_floor),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
