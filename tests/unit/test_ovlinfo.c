/* An overlay's line of mountinfo (policy/ovlinfo.c): the lines Docker's overlay2, containerd's
 * overlayfs snapshotter and the kernel's lowerdir+ form give, the kernel's octal escapes, the
 * line of one mount found in a table, what keeps nsbox-oci from making the overlay again
 * (relative paths, index=on, userxattr, data layers, no upper directory), the common
 * directory of upperdir and workdir, and a layer's path split where it is opened. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "ovlinfo.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DOCKER                                                                                     \
    "1234 28 0:123 / /var/lib/docker/overlay2/abc/merged rw,relatime shared:7 - overlay overlay "  \
    "rw,lowerdir=/var/lib/docker/overlay2/l/AAA:/var/lib/docker/overlay2/l/BBB,upperdir=/var/lib/" \
    "docker/overlay2/abc/diff,workdir=/var/lib/docker/overlay2/abc/work,uuid=on"

static char buf[8192];

static struct nsbox_ovlinfo *parsed(const char *line)
{
    static struct nsbox_ovlinfo o;
    struct nsbox_err e = {0};
    snprintf(buf, sizeof buf, "%s", line);
    if (nsbox_ovlinfo_parse(buf, &o, &e) < 0)
        fail_msg("%s: %s", line, e.msg);
    return &o;
}

/* o's upper and work directories' base and their paths below it are these. */
static void assert_base(const struct nsbox_ovlinfo *o, const char *base, const char *upper_rel,
                        const char *work_rel)
{
    char got[PATH_MAX];
    const char *ur, *wr;
    struct nsbox_err e = {0};
    if (nsbox_ovlinfo_upper_base(o, got, sizeof got, &ur, &wr, &e) < 0)
        fail_msg("%s", e.msg);
    assert_string_equal(got, base);
    assert_string_equal(ur, upper_rel);
    if (work_rel)
        assert_string_equal(wr, work_rel);
}

static const char *refused(const char *line)
{
    static struct nsbox_err e;
    struct nsbox_ovlinfo o;
    memset(&e, 0, sizeof e);
    snprintf(buf, sizeof buf, "%s", line);
    char base[PATH_MAX];
    const char *ur, *wr;
    if (nsbox_ovlinfo_parse(buf, &o, &e) == 0 && nsbox_ovlinfo_check(&o, &e) == 0 &&
        nsbox_ovlinfo_upper_base(&o, base, sizeof base, &ur, &wr, &e) == 0)
        fail_msg("accepted: %s", line);
    return e.msg;
}

static void test_docker(void **state)
{
    (void)state;
    struct nsbox_ovlinfo *o = parsed(DOCKER);
    assert_int_equal(o->mount_id, 1234);
    assert_string_equal(o->root, "/");
    assert_string_equal(o->mount_point, "/var/lib/docker/overlay2/abc/merged");
    assert_int_equal(o->n_lower, 2);
    assert_string_equal(o->lower[0], "/var/lib/docker/overlay2/l/AAA");
    assert_string_equal(o->lower[1], "/var/lib/docker/overlay2/l/BBB");
    assert_string_equal(o->upper, "/var/lib/docker/overlay2/abc/diff");
    assert_string_equal(o->work, "/var/lib/docker/overlay2/abc/work");
    assert_null(o->redirect_dir);
    assert_false(o->read_only || o->index || o->metacopy || o->userxattr || o->n_data);
    /* the module's defaults decide */
    assert_false(o->index_shown || o->nfs_export_shown || o->metacopy_shown);
    struct nsbox_err e = {0};
    assert_int_equal(nsbox_ovlinfo_check(o, &e), 0);
    assert_base(o, "/var/lib/docker/overlay2/abc", "diff", "work");
}

static void test_containerd_and_escapes(void **state)
{
    (void)state;
    /* a space in a path is \040, a comma \054, '=' \075 (the filesystem's options) */
    struct nsbox_ovlinfo *o = parsed(
        "88 60 0:50 / /run/containerd/io.containerd.runtime.v2.task/default/t\\0401/rootfs "
        "rw,relatime - overlay overlay rw,lowerdir=/s/snapshots/2/fs:/s/snap\\054shots/1\\075/fs,"
        "upperdir=/s/snapshots/3/fs,workdir=/s/snapshots/3/work,redirect_dir=on,metacopy=on,"
        "index=off");
    assert_string_equal(o->mount_point,
                        "/run/containerd/io.containerd.runtime.v2.task/default/t 1/rootfs");
    assert_int_equal(o->n_lower, 2);
    assert_string_equal(o->lower[1], "/s/snap,shots/1=/fs");
    assert_string_equal(o->redirect_dir, "on");
    assert_true(o->index_shown && !o->index); /* index=off, shown: not the default here */
    assert_true(o->metacopy && o->metacopy_shown);
    struct nsbox_err e = {0};
    assert_int_equal(nsbox_ovlinfo_check(o, &e), 0); /* metacopy is made again, as the engine's */
}

static void test_lowerdir_plus(void **state)
{
    (void)state;
    struct nsbox_ovlinfo *o = parsed("5 1 0:9 / /m rw - overlay none "
                                     "rw,lowerdir+=/a,lowerdir+=/b:c,upperdir=/u/up,workdir=/u/wk");
    assert_int_equal(o->n_lower, 2);
    assert_string_equal(o->lower[1], "/b:c"); /* one path each: no ':' list */
    assert_false(o->metacopy_shown);
    struct nsbox_err e = {0};
    assert_int_equal(nsbox_ovlinfo_check(o, &e), 0);
    o = parsed("5 1 0:9 / /m rw - overlay none rw,lowerdir+=/a,datadir+=/d,upperdir=/u,workdir=/w");
    assert_int_equal(o->n_data, 1);
    assert_int_equal(nsbox_ovlinfo_check(o, &e), -1);
    assert_non_null(strstr(e.msg, "data-only"));
    /* metacopy=off shown: a host whose module turns it on by default, an engine that did not */
    o = parsed(
        "5 1 0:9 / /m rw - overlay none rw,lowerdir+=/a,upperdir=/u,workdir=/w,metacopy=off");
    assert_true(o->metacopy_shown && !o->metacopy);
}

static void test_refused(void **state)
{
    (void)state;
    static const struct {
        const char *opts, *why;
    } cases[] = {
        {"rw,lowerdir=l/AAA:l/BBB,upperdir=abc/diff,workdir=abc/work",
         "lowerdir l/AAA is relative"},
        {"rw,lowerdir=/l/A,upperdir=abc/diff,workdir=/abc/work", "upperdir abc/diff is relative"},
        {"rw,lowerdir=/a,upperdir=/u/d,workdir=/u/w,index=on", "index=on"},
        {"rw,lowerdir=/a,upperdir=/u/d,workdir=/u/w,nfs_export=on", "index=on"},
        {"rw,lowerdir=/a,upperdir=/u/d,workdir=/u/w,userxattr", "userxattr"},
        {"rw,lowerdir=/a::/data,upperdir=/u/d,workdir=/u/w", "data-only"},
        {"ro,lowerdir=/a,upperdir=/u/d,workdir=/u/w", "read-only"},
        {"rw,lowerdir=/a:/b", "no upper directory"},
        {"rw,upperdir=/u/d,workdir=/u/w", "no lower layer"},
        {"rw,lowerdir=/a/../etc,upperdir=/u/d,workdir=/u/w", "\"..\" component"},
        {"rw,lowerdir=/a\\134:b,upperdir=/u/d,workdir=/u/w", "backslash"},
        {"rw,lowerdir=/a,upperdir=/u/d\\012x,workdir=/u/w", "control character"},
        {"rw,lowerdir=/a,upperdir=/u/d,workdir=/u/d/w", "one inside the other"},
        {"rw,lowerdir=/a,upperdir=/u/d,workdir=/u/d", "one inside the other"},
        {"rw,lowerdir=/a:,upperdir=/u/d,workdir=/u/w", "empty lowerdir"},
        {"rw,lowerdir=:/a,upperdir=/u/d,workdir=/u/w", "empty lowerdir"},
        {"rw,lowerdir=,upperdir=/u/d,workdir=/u/w", "without a path"},
        {"rw,lowerdir+=//,upperdir=/u/d,workdir=/u/w", "is the root directory"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char line[512];
        snprintf(line, sizeof line, "7 1 0:9 / /m rw - overlay overlay %s", cases[i].opts);
        const char *msg = refused(line);
        if (!strstr(msg, cases[i].why))
            fail_msg("%s: \"%s\", not \"%s\"", cases[i].opts, msg, cases[i].why);
    }
}

static void test_not_mountinfo(void **state)
{
    (void)state;
    static const char *const lines[] = {
        "",
        "1 2 3 4 5",
        "x 1 0:1 / /m rw - overlay overlay rw,lowerdir=/a",
        "1 1 0:1 / /m rw shared:1",
        "1 1 0:1 / /m rw - ext4 /dev/vda rw",
        "1 1 0:1 / /m\\000x rw - overlay overlay rw",
    };
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++) {
        struct nsbox_ovlinfo o;
        struct nsbox_err e = {0};
        snprintf(buf, sizeof buf, "%s", lines[i]);
        if (nsbox_ovlinfo_parse(buf, &o, &e) == 0)
            fail_msg("accepted: %s", lines[i]);
        assert_true(e.msg[0] != '\0');
    }
}

static void test_find(void **state)
{
    (void)state;
    char table[] = "21 1 8:1 / / rw - ext4 /dev/vda rw\n"
                   "212 21 0:40 / /a rw - tmpfs tmpfs rw\n"
                   "2120 21 0:41 / /b rw - overlay overlay rw,lowerdir=/x\n";
    char *line = nsbox_ovlinfo_find(table, 2120);
    assert_non_null(line);
    assert_string_equal(line, "2120 21 0:41 / /b rw - overlay overlay rw,lowerdir=/x");
    char t2[] = "21 1 8:1 / / rw - ext4 /dev/vda rw\n212 21 0:40 / /a rw - tmpfs tmpfs rw";
    assert_non_null(nsbox_ovlinfo_find(t2, 212));
    assert_null(nsbox_ovlinfo_find(t2, 2));
    char t3[] = "";
    assert_null(nsbox_ovlinfo_find(t3, 0));
}

static void test_split_layer(void **state)
{
    (void)state;
    static const struct {
        const char *path, *dir, *rest;
    } cases[] = {
        {"/var/lib/docker/overlay2/l/AAA", "/var/lib/docker/overlay2", "l/AAA"},
        {"/s/snapshots/1/fs", "/s/snapshots", "1/fs"},
        {"/a/b", "/", "a/b"},
        {"/a", "/", "a"},
        {"//x//y//z/", "//x", "y//z/"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char dir[PATH_MAX];
        const char *rest;
        struct nsbox_err e = {0};
        assert_int_equal(nsbox_ovlinfo_split_layer(cases[i].path, dir, sizeof dir, &rest, &e), 0);
        assert_string_equal(dir, cases[i].dir);
        assert_string_equal(rest, cases[i].rest);
    }
    char dir[PATH_MAX];
    const char *rest;
    struct nsbox_err e = {0};
    assert_int_equal(nsbox_ovlinfo_split_layer("/", dir, sizeof dir, &rest, &e), -1);
    assert_int_equal(nsbox_ovlinfo_split_layer("a/b", dir, sizeof dir, &rest, &e), -1);
}

static void test_upper_base(void **state)
{
    (void)state;
    assert_base(
        parsed("5 1 0:9 / /m rw - overlay none rw,lowerdir=/a,upperdir=/x/up,workdir=/y/wk"), "/",
        "x/up", "y/wk");
    assert_base(
        parsed("5 1 0:9 / /m rw - overlay none rw,lowerdir=/a,upperdir=/s//n/up,workdir=/s/n//wk"),
        "/s//n", "up", "wk");
}

static void test_relative_from(void **state)
{
    (void)state;
    /* Docker's form for options longer than a page, mounted from its storage directory */
    struct nsbox_ovlinfo *o = parsed("9 1 0:9 / /var/lib/docker/overlay2/abc/merged rw - overlay "
                                     "overlay rw,lowerdir=l/AAA:l/BBB,upperdir=abc/diff,"
                                     "workdir=abc/work");
    nsbox_ovlinfo_relative_from(o);
    assert_non_null(o->from);
    assert_string_equal(o->from, "/var/lib/docker/overlay2");
    struct nsbox_err e = {0};
    assert_int_equal(nsbox_ovlinfo_check(o, &e), 0);
    assert_base(o, "abc", "diff", "work");
    o = parsed("9 1 0:9 / /abc/merged rw - overlay overlay rw,lowerdir=l/A,upperdir=abc/diff,"
               "workdir=abc/work");
    nsbox_ovlinfo_relative_from(o);
    assert_string_equal(o->from, "/");
    /* not that shape: nothing is guessed */
    static const char *const others[] = {
        "9 1 0:9 / /s/xyz/merged rw - overlay o rw,lowerdir=l/A,upperdir=abc/diff,workdir=abc/w",
        "9 1 0:9 / /s/abc/merged rw - overlay o rw,lowerdir=l/A,upperdir=abc/diff,workdir=ab/w",
        "9 1 0:9 / /s/abc/merged rw - overlay o rw,lowerdir=l/A,upperdir=/abc/diff,workdir=abc/w",
        "9 1 0:9 / /merged rw - overlay o rw,lowerdir=l/A,upperdir=abc/diff,workdir=abc/w",
        "9 1 0:9 / /s/abc/merged rw - overlay o rw,lowerdir=l/A",
    };
    for (size_t i = 0; i < sizeof others / sizeof others[0]; i++) {
        o = parsed(others[i]);
        nsbox_ovlinfo_relative_from(o);
        if (o->from)
            fail_msg("%s: from %s", others[i], o->from);
    }
    /* from or not, no ".." */
    o = parsed("9 1 0:9 / /s/abc/merged rw - overlay o rw,lowerdir=../l/A,upperdir=abc/diff,"
               "workdir=abc/work");
    nsbox_ovlinfo_relative_from(o);
    assert_int_equal(nsbox_ovlinfo_check(o, &e), -1);
    assert_non_null(strstr(e.msg, "\"..\""));
    /* two relative directories with no common one: their base is "." */
    assert_base(parsed("9 1 0:9 / /s/abc/merged rw - overlay o rw,lowerdir=l/A,upperdir=abc,"
                       "workdir=abc2"),
                ".", "abc", "abc2");
}

static void test_too_many_layers(void **state)
{
    (void)state;
    size_t cap = 64 + 4 * (NSBOX_OVLINFO_LAYERS_MAX + 1);
    char *line = malloc(cap);
    assert_non_null(line);
    size_t n = (size_t)snprintf(line, cap, "5 1 0:9 / /m rw - overlay none rw,lowerdir=");
    for (int i = 0; i <= NSBOX_OVLINFO_LAYERS_MAX; i++)
        n += (size_t)snprintf(line + n, cap - n, "%s/l", i ? ":" : "");
    struct nsbox_ovlinfo o;
    struct nsbox_err e = {0};
    assert_int_equal(nsbox_ovlinfo_parse(line, &o, &e), -1);
    assert_non_null(strstr(e.msg, "more than 500"));
    free(line);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_docker),          cmocka_unit_test(test_containerd_and_escapes),
        cmocka_unit_test(test_lowerdir_plus),   cmocka_unit_test(test_refused),
        cmocka_unit_test(test_not_mountinfo),   cmocka_unit_test(test_find),
        cmocka_unit_test(test_split_layer),     cmocka_unit_test(test_upper_base),
        cmocka_unit_test(test_too_many_layers), cmocka_unit_test(test_relative_from),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
