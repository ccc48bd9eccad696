/* Mount propagation (policy/propagation.c): the options read, two different ones refused, a
 * read-only bind that would receive the host's mounts refused, and the steps that give each
 * propagation: a bind of a host path is never left a peer of anything of the host's (shared
 * is a slave first, covering every mount of the bind), and one that asks for nothing is
 * private. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "ocispec.h"
#include "propagation.h"

#include <stdio.h>
#include <string.h>
#include <sys/mount.h>

static struct nsbox_propagation parsed(const char *options)
{
    struct nsbox_propagation p;
    struct nsbox_err e = {0};
    if (nsbox_propagation_parse(options, "/mnt/x", &p, &e) < 0)
        fail_msg("%s: %s", options, e.msg);
    return p;
}

static void test_options(void **state)
{
    (void)state;
    static const struct {
        const char *opts;
        enum nsbox_propagation_kind kind;
        bool recursive;
    } cases[] = {
        {"", NSBOX_PROP_NONE, false},
        {"bind,ro,nosuid", NSBOX_PROP_NONE, false},
        {"rbind,rslave", NSBOX_PROP_SLAVE, true},
        {"nosuid,strictatime,mode=755,size=1k,bind,shared", NSBOX_PROP_SHARED, false},
        {"private", NSBOX_PROP_PRIVATE, false},
        {"runbindable", NSBOX_PROP_UNBINDABLE, true},
        {"rshared,rshared", NSBOX_PROP_SHARED, true}, /* the same twice is one */
        {"xshared,sharedx", NSBOX_PROP_NONE, false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct nsbox_propagation p = parsed(cases[i].opts);
        assert_int_equal(p.kind, cases[i].kind);
        assert_int_equal(p.recursive, cases[i].recursive);
    }
    struct nsbox_propagation p = parsed("rslave");
    assert_string_equal(nsbox_propagation_name(&p), "rslave");
    struct nsbox_err e = {0};
    assert_int_equal(nsbox_propagation_parse("bind,shared,private", "/mnt/x", &p, &e), -1);
    assert_int_equal(e.code, NSBOX_E_INVALID);
    assert_non_null(strstr(e.msg, "/mnt/x asks for two propagations, shared and private"));
    assert_int_equal(nsbox_propagation_parse("slave,rslave", "/m", &p, &e), -1);
}

/* A read-only bind that would receive the host's later mounts (writable) is refused. */
static void test_readonly_bind(void **state)
{
    (void)state;
    struct nsbox_err e = {0};
    static const char *const receive[] = {"slave", "rslave", "shared", "rshared"};
    static const char *const keep[] = {"", "private", "rprivate", "unbindable", "runbindable"};
    for (size_t i = 0; i < sizeof receive / sizeof receive[0]; i++) {
        struct nsbox_propagation p = parsed(receive[i]);
        assert_int_equal(nsbox_propagation_check_bind(&p, true, "/data", &e), -1);
        assert_int_equal(e.code, NSBOX_E_POLICY);
        assert_non_null(strstr(e.msg, "read-only bind at /data"));
        assert_int_equal(nsbox_propagation_check_bind(&p, false, "/data", &e), 0);
    }
    for (size_t i = 0; i < sizeof keep / sizeof keep[0]; i++) {
        struct nsbox_propagation p = parsed(keep[i]);
        assert_int_equal(nsbox_propagation_check_bind(&p, true, "/data", &e), 0);
    }
    /* and through config.json: the mount is named */
    static struct nsbox_ocispec c;
    const char *doc = "{\"ociVersion\":\"1.0.2\",\"process\":{\"args\":[\"true\"],\"cwd\":\"/\"},"
                      "\"root\":{\"path\":\"rootfs\"},\"mounts\":[{\"destination\":\"/vol\","
                      "\"source\":\"/srv\",\"options\":[\"rbind\",\"ro\",\"rslave\"]}]}";
    assert_int_equal(nsbox_ocispec_parse(doc, strlen(doc), &c, &e), -1);
    assert_non_null(strstr(e.msg, "read-only bind at /vol asks for rslave"));
}

/* Does any step make a mount shared before a step made that mount (and, for a tree, every
 * mount of it) a slave? */
static bool shared_before_slave(const unsigned long *steps, size_t n, bool tree)
{
    bool slave_top = false, slave_all = false;
    for (size_t i = 0; i < n; i++) {
        unsigned long t = steps[i] & ~(unsigned long)MS_REC;
        bool rec = steps[i] & MS_REC;
        if (t == MS_SLAVE || t == MS_PRIVATE || t == MS_UNBINDABLE) {
            slave_top = true;
            slave_all |= rec || !tree;
        }
        if (t == MS_SHARED && (!slave_top || (rec && !slave_all)))
            return true;
    }
    return false;
}

static void test_steps_never_join_the_host(void **state)
{
    (void)state;
    static const char *const all[] = {"",       "private", "rprivate",   "slave",      "rslave",
                                      "shared", "rshared", "unbindable", "runbindable"};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        for (int tree = 0; tree < 2; tree++) {
            struct nsbox_propagation p = parsed(all[i]);
            unsigned long steps[2];
            size_t n = nsbox_propagation_steps(&p, true, tree, steps);
            assert_true(n <= 2);
            if (shared_before_slave(steps, n, tree))
                fail_msg("%s (tree %d): shared before a slave", all[i], tree);
            /* the first step covers the whole bind, unless it only narrows (unbindable) */
            if (n && p.kind != NSBOX_PROP_UNBINDABLE)
                assert_int_equal(!!(steps[0] & MS_REC), tree);
        }
    /* what each gives a bind of a host tree */
    unsigned long s[2];
    struct nsbox_propagation p = parsed("");
    assert_int_equal(nsbox_propagation_steps(&p, true, true, s), 1);
    assert_int_equal(s[0], MS_PRIVATE | MS_REC);
    p = parsed("rslave");
    assert_int_equal(nsbox_propagation_steps(&p, true, false, s), 1);
    assert_int_equal(s[0], MS_SLAVE);
    p = parsed("shared");
    assert_int_equal(nsbox_propagation_steps(&p, true, true, s), 2);
    assert_int_equal(s[0], MS_SLAVE | MS_REC);
    assert_int_equal(s[1], MS_SHARED);
    p = parsed("rshared");
    assert_int_equal(nsbox_propagation_steps(&p, true, true, s), 2);
    assert_int_equal(s[1], MS_SHARED | MS_REC);
    /* a filesystem the config mounts has no master: its option as written, nothing when none */
    p = parsed("");
    assert_int_equal(nsbox_propagation_steps(&p, false, false, s), 0);
    p = parsed("private");
    assert_int_equal(nsbox_propagation_steps(&p, false, false, s), 1);
    assert_int_equal(s[0], MS_PRIVATE);
}

static void test_root(void **state)
{
    (void)state;
    struct nsbox_propagation p;
    struct nsbox_err e = {0};
    assert_int_equal(nsbox_propagation_parse_root("", &p, &e), 0);
    assert_int_equal(p.kind, NSBOX_PROP_NONE);
    assert_int_equal(nsbox_propagation_parse_root("unbindable", &p, &e), 0);
    assert_int_equal(p.kind, NSBOX_PROP_UNBINDABLE);
    assert_int_equal(nsbox_propagation_parse_root("bind", &p, &e), -1);
    assert_non_null(strstr(e.msg, "linux.rootfsPropagation"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_options),
        cmocka_unit_test(test_readonly_bind),
        cmocka_unit_test(test_steps_never_join_the_host),
        cmocka_unit_test(test_root),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
