/* Docker's named volumes told by their paths (policy/enginevol.c): the container roots of its
 * overlay2 and vfs drivers give the data root, and only <R>/volumes/<name>/_data of that data
 * root is a volume; anything else (another directory, another data root, a path with "..",
 * "//" or a name Docker does not make) is not. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "enginevol.h"

#include <string.h>

static void root_is(const char *root, const char *data_root, const char *rel)
{
    struct nsbox_enginevol_root r;
    assert_true(nsbox_enginevol_root(root, &r));
    assert_string_equal(r.data_root, data_root);
    assert_string_equal(r.root_rel, rel);
}

static void test_roots(void **state)
{
    (void)state;
    root_is("/var/lib/docker/overlay2/0123abcd/merged", "/var/lib/docker",
            "overlay2/0123abcd/merged");
    root_is("/var/lib/docker/vfs/dir/0123abcd", "/var/lib/docker", "vfs/dir/0123abcd");
    root_is("/srv/d/vfs/dir/0123abcd-init", "/srv/d", "vfs/dir/0123abcd-init");
    root_is("/d/overlay2/x/merged", "/d", "overlay2/x/merged");
}

static void test_not_roots(void **state)
{
    (void)state;
    static const char *const not_roots[] = {
        "",
        "/",
        "relative/vfs/dir/abc",
        "vfs/dir/abc",
        "/vfs/dir/abc",          /* <R> would be "/" */
        "/overlay2/abc/merged",  /* the same */
        "/d/vfs/dir/abc/",       /* a trailing '/' */
        "/d//vfs/dir/abc",       /* an empty component */
        "/d/../vfs/dir/abc",     /* ".." */
        "/d/./vfs/dir/abc",      /* "." */
        "/d/vfs/dir/..",         /* not an id */
        "/d/vfs/dir/.hidden",    /* nor this */
        "/d/vfs/dir/a\nb",       /* a control character */
        "/d/vfs/dir",            /* no id */
        "/d/overlay2/abc/diff",  /* a layer, not the container's overlay */
        "/d/overlay2/abc",       /* no merged */
        "/d/overlay/abc/merged", /* Podman's driver: it has :idmap */
        "/d/vfs/abc",            /* no dir */
        "/d/xvfs/dir/abc",       /* a longer component */
        "/run/containerd/io.containerd.runtime.v2.task/default/c1/rootfs",
        "/tmp/bundle/rootfs",
    };
    for (size_t i = 0; i < sizeof not_roots / sizeof not_roots[0]; i++) {
        struct nsbox_enginevol_root r;
        if (nsbox_enginevol_root(not_roots[i], &r))
            fail_msg("'%s' taken for an engine's root", not_roots[i]);
    }
}

static void test_volumes(void **state)
{
    (void)state;
    struct nsbox_enginevol_root r;
    assert_true(nsbox_enginevol_root("/var/lib/docker/vfs/dir/abc", &r));
    char rel[256];
    assert_true(nsbox_enginevol_volume(&r, "/var/lib/docker/volumes/data/_data", rel, sizeof rel));
    assert_string_equal(rel, "volumes/data/_data");
    assert_true(
        nsbox_enginevol_volume(&r, "/var/lib/docker/volumes/a.b_c-9/_data", rel, sizeof rel));
    assert_string_equal(rel, "volumes/a.b_c-9/_data");
    /* too small a buffer: not taken, rather than cut */
    assert_false(nsbox_enginevol_volume(&r, "/var/lib/docker/volumes/data/_data", rel, 8));
}

static void test_not_volumes(void **state)
{
    (void)state;
    struct nsbox_enginevol_root r;
    assert_true(nsbox_enginevol_root("/var/lib/docker/overlay2/abc/merged", &r));
    static const char *const not_volumes[] = {
        "/var/lib/docker/volumes/data",           /* the volume's own directory, not _data */
        "/var/lib/docker/volumes/data/_data/sub", /* below it */
        "/var/lib/docker/volumes/data/_data/",    /* a trailing '/' */
        "/var/lib/docker/volumes/../etc/_data",   /* ".." */
        "/var/lib/docker/volumes/./_data",        /* "." */
        "/var/lib/docker/volumes//_data",         /* no name */
        "/var/lib/docker/volumes/.x/_data",       /* a name Docker does not make */
        "/var/lib/docker/volumes/a b/_data",      /* the same */
        "/var/lib/docker2/volumes/data/_data",    /* another data root, longer */
        "/var/lib/volumes/data/_data",            /* another data root, shorter */
        "/var/lib/docker/vfs/dir/abc",            /* the root itself */
        "/home/user/data",
        "var/lib/docker/volumes/data/_data",
        "",
    };
    char rel[256];
    for (size_t i = 0; i < sizeof not_volumes / sizeof not_volumes[0]; i++)
        if (nsbox_enginevol_volume(&r, not_volumes[i], rel, sizeof rel))
            fail_msg("'%s' taken for a volume of %s", not_volumes[i], r.data_root);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roots),
        cmocka_unit_test(test_not_roots),
        cmocka_unit_test(test_volumes),
        cmocka_unit_test(test_not_volumes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
