/* OCI references, layer entry names and image metadata (policy/ociref.c, ocimanifest.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "ocimanifest.h"
#include "ociref.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void canon_is(const char *in, const char *want)
{
    struct nsbox_ociref r;
    struct nsbox_err e = {0};
    char out[NSBOX_OCIREF_MAX + 1];
    if (nsbox_ociref_parse(in, &r, &e) < 0)
        fail_msg("%s: %s", in, e.msg);
    assert_true(nsbox_ociref_format(&r, out, sizeof out) > 0);
    assert_string_equal(out, want);
}

static void test_normalise(void **state)
{
    (void)state;
    canon_is("python:3.12", "docker.io/library/python:3.12");
    canon_is("python", "docker.io/library/python:latest");
    canon_is("team/py", "docker.io/team/py:latest");
    canon_is("index.docker.io/library/debian:12", "docker.io/library/debian:12");
    canon_is("127.0.0.1:5000/team/py:1", "127.0.0.1:5000/team/py:1");
    canon_is("localhost/x", "localhost/x:latest");
    canon_is("ghcr.io/a/b/c@sha256:" "0123456789abcdef0123456789abcdef"
             "0123456789abcdef0123456789abcdef",
             "ghcr.io/a/b/c@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef");
    const char *bad[] = {"", "Python:3", "a//b", "a/b:", "a:-x", "a@sha256:12", "a@md5:00",
                         "/abs", "a/b/", "x:5000:1/y"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct nsbox_ociref r;
        struct nsbox_err e = {0};
        if (nsbox_ociref_parse(bad[i], &r, &e) == 0)
            fail_msg("'%s' was accepted", bad[i]);
    }
    assert_true(nsbox_ociref_is_reference("python:3.12"));
    assert_true(nsbox_ociref_is_reference("team/py"));
    assert_false(nsbox_ociref_is_reference("debian")); /* a stored name */
    assert_false(nsbox_ociref_is_reference("./img"));
    assert_false(nsbox_ociref_is_reference("imgs/py/"));
    assert_false(nsbox_ociref_is_reference("/srv/rootfs"));
}

static int entry(const char *name, char *out, enum nsbox_oci_entry_kind *k)
{
    return nsbox_ocimanifest_entry_path(name, out, 4096, k);
}

static void test_entry_names(void **state)
{
    (void)state;
    char out[4096];
    enum nsbox_oci_entry_kind k;
    assert_int_equal(entry("./usr//bin/./x/", out, &k), 0);
    assert_string_equal(out, "usr/bin/x");
    assert_int_equal(k, NSBOX_OCI_ENTRY_PLAIN);
    assert_int_equal(entry("./", out, &k), 1);
    assert_int_equal(entry("etc/.wh.passwd", out, &k), 0);
    assert_int_equal(k, NSBOX_OCI_ENTRY_WHITEOUT);
    assert_string_equal(out, "etc/passwd");
    assert_int_equal(entry("opq/.wh..wh..opq", out, &k), 0);
    assert_int_equal(k, NSBOX_OCI_ENTRY_OPAQUE);
    assert_string_equal(out, "opq");
    assert_int_equal(entry(".wh..wh..opq", out, &k), 0);
    assert_string_equal(out, "");
    assert_int_equal(entry(".wh..wh.plnk/1", out, &k), 0); /* inside aufs metadata: a plain name */
    assert_int_equal(entry("x/.wh..wh.plnk", out, &k), 1);
    const char *bad[] = {"/etc/passwd", "../x", "a/../../x", "a/..", ".wh..", ".wh.", "x/.wh...",
                         NULL};
    for (size_t i = 0; bad[i]; i++)
        if (entry(bad[i], out, &k) != -1)
            fail_msg("'%s' was accepted", bad[i]);
    char deep[4096] = "";
    for (int i = 0; i < NSBOX_OCI_DEPTH_MAX + 1; i++)
        strcat(deep, "a/");
    assert_int_equal(entry(deep, out, &k), -1);
}

#define D1 "sha256:1111111111111111111111111111111111111111111111111111111111111111"
#define D2 "sha256:2222222222222222222222222222222222222222222222222222222222222222"

static void test_index_pick(void **state)
{
    (void)state;
    const char *list = "{\"schemaVersion\":2,\"mediaType\":"
                       "\"application/vnd.docker.distribution.manifest.list.v2+json\","
                       "\"manifests\":[{\"digest\":\"" D1 "\",\"size\":1,\"platform\":"
                       "{\"os\":\"linux\",\"architecture\":\"arm64\"}},{\"digest\":\"" D2
                       "\",\"size\":2,\"platform\":{\"os\":\"linux\",\"architecture\":"
                       "\"amd64\"}}]}";
    struct nsbox_oci_desc d;
    struct nsbox_err e = {0};
    enum nsbox_ocimanifest_kind kind;
    assert_int_equal(nsbox_ocimanifest_kind(list, strlen(list), &kind, &e), 0);
    assert_int_equal(kind, NSBOX_OCI_DOC_INDEX);
    assert_int_equal(nsbox_ocimanifest_pick(list, strlen(list), NULL, "linux", "amd64", &d, &e), 0);
    assert_string_equal(d.digest, D2);
    assert_int_equal(nsbox_ocimanifest_pick(list, strlen(list), NULL, "linux", "s390x", &d, &e),
                     -1);
    assert_non_null(strstr(e.msg, "no image for this platform"));
    /* a multi-arch list: a name given for the store does not stop the platform's pick */
    assert_int_equal(nsbox_ocimanifest_pick(list, strlen(list), "t/x:1", "linux", "amd64", &d,
                                            &e),
                     0);
    assert_string_equal(d.digest, D2);
    /* a layout of two tags (skopeo copy ... oci:DIR:TAG twice): --name chooses */
    const char *tags = "{\"schemaVersion\":2,\"manifests\":[{\"digest\":\"" D1 "\",\"size\":1,"
                       "\"annotations\":{\"org.opencontainers.image.ref.name\":\"1\"}},"
                       "{\"digest\":\"" D2 "\",\"size\":2,\"annotations\":"
                       "{\"org.opencontainers.image.ref.name\":\"docker.io/team/py:2\"}}]}";
    assert_int_equal(nsbox_ocimanifest_pick(tags, strlen(tags), NULL, "linux", "amd64", &d, &e),
                     -1);
    assert_non_null(strstr(e.msg, "choose one with --name REF, whose reference or tag is one "
                                  "of their ref names (1, docker.io/team/py:2)"));
    assert_int_equal(nsbox_ocimanifest_pick(tags, strlen(tags), "team/py:1", "linux", "amd64", &d,
                                            &e),
                     0);
    assert_string_equal(d.digest, D1);
    assert_int_equal(nsbox_ocimanifest_pick(tags, strlen(tags), "team/py:2", "linux", "amd64", &d,
                                            &e),
                     0);
    assert_string_equal(d.digest, D2);
    assert_int_equal(nsbox_ocimanifest_pick(tags, strlen(tags), "team/py:3", "linux", "amd64", &d,
                                            &e),
                     -1);
    assert_non_null(strstr(e.msg, "no image named 'team/py:3'"));
}

static void test_manifest_and_config(void **state)
{
    (void)state;
    struct nsbox_oci_manifest *m = malloc(sizeof *m);
    struct nsbox_oci_config *c = malloc(sizeof *c);
    struct nsbox_err e = {0};
    const char *man = "{\"schemaVersion\":2,\"config\":{\"digest\":\"" D1 "\",\"size\":3},"
                      "\"layers\":[{\"mediaType\":\"application/vnd.oci.image.layer.v1.tar+zstd\","
                      "\"digest\":\"" D2 "\",\"size\":9}]}";
    assert_int_equal(nsbox_ocimanifest_parse(man, strlen(man), m, &e), 0);
    assert_int_equal(m->n_layers, 1);
    assert_int_equal(m->layers[0].size, 9);
    const char *bad = "{\"schemaVersion\":2,\"config\":{\"digest\":\"" D1 "\",\"size\":3},"
                      "\"layers\":[{\"mediaType\":\"application/x-zip\",\"digest\":\"" D2
                      "\",\"size\":9}]}";
    assert_int_equal(nsbox_ocimanifest_parse(bad, strlen(bad), m, &e), -1);
    const char *cfg = "{\"os\":\"linux\",\"architecture\":\"amd64\",\"config\":{\"Env\":"
                      "[\"PATH=/x\",\"A=b=c\"]},\"rootfs\":{\"diff_ids\":[\"" D1 "\"]}}";
    assert_int_equal(nsbox_ocimanifest_config(cfg, strlen(cfg), c, &e), 0);
    assert_int_equal(c->n_env, 2);
    assert_string_equal(c->env[1], "A=b=c");
    assert_string_equal(c->diff_ids[0], D1);
    nsbox_ocimanifest_config_free(c);
    const char *badenv = "{\"config\":{\"Env\":[\"=x\"]},\"rootfs\":{\"diff_ids\":[]}}";
    assert_int_equal(nsbox_ocimanifest_config(badenv, strlen(badenv), c, &e), -1);
    /* cJSON cuts a string at "\u0000" and reads on: an Env value, a digest or a media type
     * acted on would not be the image's; a \u escape without four hex digits decodes the same */
    const char *nulenv = "{\"config\":{\"Env\":[\"PATH=/x\\u0000:/evil\"]},\"rootfs\":"
                         "{\"diff_ids\":[\"" D1 "\"]}}";
    assert_int_equal(nsbox_ocimanifest_config(nulenv, strlen(nulenv), c, &e), -1);
    assert_non_null(strstr(e.msg, "image config: contains a NUL character (\\u0000) in a string"));
    const char *nulman = "{\"schemaVersion\":2,\"config\":{\"digest\":\"" D1 "\",\"size\":3},"
                         "\"layers\":[{\"mediaType\":\"application/vnd.oci.image.layer.v1.tar"
                         "+zstd\\u0000x\",\"digest\":\"" D2 "\",\"size\":9}]}";
    assert_int_equal(nsbox_ocimanifest_parse(nulman, strlen(nulman), m, &e), -1);
    assert_non_null(strstr(e.msg, "image manifest: contains a NUL character"));
    const char *nulidx = "{\"schemaVersion\":2,\"manifests\":[{\"digest\":\"" D1 "\",\"size\":1,"
                         "\"annotations\":{\"org.opencontainers.image.ref.name\":\"1\\u00\"}}]}";
    struct nsbox_oci_desc d;
    assert_int_equal(nsbox_ocimanifest_pick(nulidx, strlen(nulidx), "t/x:1", "linux", "amd64", &d,
                                            &e),
                     -1);
    assert_non_null(strstr(e.msg, "image index: invalid \\u escape"));
    const char *nulsave = "[{\"Config\":\"a.json\\u0000\",\"RepoTags\":[],\"Layers\":[]}]";
    struct nsbox_docker_save *ds = malloc(sizeof *ds);
    assert_int_equal(nsbox_ocimanifest_docker_save(nulsave, strlen(nulsave), NULL, ds, &e), -1);
    assert_non_null(strstr(e.msg, "manifest.json: contains a NUL character"));
    free(ds);
    free(m);
    free(c);
}

static void test_docker_save_pick(void **state)
{
    (void)state;
    struct nsbox_docker_save *d = malloc(sizeof *d);
    struct nsbox_err e = {0};
    /* `docker save a b`: --name chooses, compared as references; alone, the first */
    const char *two = "[{\"Config\":\"a.json\",\"RepoTags\":[\"busybox:latest\"],"
                      "\"Layers\":[\"1/layer.tar\"]},"
                      "{\"Config\":\"b.json\",\"RepoTags\":[\"team/py:1\"],"
                      "\"Layers\":[\"1/layer.tar\",\"2/layer.tar\"]}]";
    assert_int_equal(nsbox_ocimanifest_docker_save(two, strlen(two), NULL, d, &e), -1);
    assert_non_null(strstr(e.msg, "choose one with --name"));
    assert_int_equal(nsbox_ocimanifest_docker_save(two, strlen(two), "docker.io/team/py:1", d, &e),
                     0);
    assert_string_equal(d->config, "b.json");
    assert_int_equal(d->n_layers, 2);
    assert_int_equal(nsbox_ocimanifest_docker_save(two, strlen(two), "busybox", d, &e), 0);
    assert_string_equal(d->config, "a.json");
    assert_int_equal(nsbox_ocimanifest_docker_save(two, strlen(two), "team/py:2", d, &e), -1);
    assert_non_null(strstr(e.msg, "(busybox:latest, team/py:1)"));
    /* one image: the name is only what it is stored as */
    const char *one = "[{\"Config\":\"a.json\",\"RepoTags\":[\"busybox:latest\"],"
                      "\"Layers\":[\"1/layer.tar\"]}]";
    assert_int_equal(nsbox_ocimanifest_docker_save(one, strlen(one), "mine:1", d, &e), 0);
    assert_string_equal(d->config, "a.json");
    free(d);
}

/* head, n copies of item joined by commas, tail: a document of n layers (malloc'd). */
static char *repeat(const char *head, const char *item, int n, const char *tail)
{
    size_t len = strlen(head) + (size_t)n * (strlen(item) + 1) + strlen(tail) + 1;
    char *s = malloc(len), *p = s;
    assert_non_null(s);
    p += sprintf(p, "%s", head);
    for (int i = 0; i < n; i++)
        p += sprintf(p, "%s%s", i ? "," : "", item);
    sprintf(p, "%s", tail);
    return s;
}

/* Each list of layers fills a fixed array of NSBOX_OCI_LAYERS_MAX: one more is refused, never
 * written past its end. */
static void test_layer_count_bound(void **state)
{
    (void)state;
    struct nsbox_oci_manifest *m = malloc(sizeof *m);
    struct nsbox_oci_config *c = malloc(sizeof *c);
    struct nsbox_docker_save *d = malloc(sizeof *d);
    struct nsbox_err e = {0};
    for (int n = NSBOX_OCI_LAYERS_MAX; n <= NSBOX_OCI_LAYERS_MAX + 1; n++) {
        int want = n > NSBOX_OCI_LAYERS_MAX ? -1 : 0;
        char *t = repeat("{\"schemaVersion\":2,\"config\":{\"digest\":\"" D1 "\",\"size\":3},"
                         "\"layers\":[",
                         "{\"mediaType\":\"application/vnd.oci.image.layer.v1.tar+gzip\","
                         "\"digest\":\"" D2 "\",\"size\":9}",
                         n, "]}");
        assert_int_equal(nsbox_ocimanifest_parse(t, strlen(t), m, &e), want);
        if (want == 0)
            assert_int_equal(m->n_layers, n);
        else
            assert_non_null(strstr(e.msg, "at most 128"));
        free(t);
        t = repeat("{\"os\":\"linux\",\"rootfs\":{\"diff_ids\":[", "\"" D1 "\"", n, "]}}");
        assert_int_equal(nsbox_ocimanifest_config(t, strlen(t), c, &e), want);
        if (want == 0)
            nsbox_ocimanifest_config_free(c);
        else
            assert_non_null(strstr(e.msg, "at most 128"));
        free(t);
        t = repeat("[{\"Config\":\"a.json\",\"RepoTags\":[\"x:1\"],\"Layers\":[",
                   "\"1/layer.tar\"", n, "]}]");
        assert_int_equal(nsbox_ocimanifest_docker_save(t, strlen(t), NULL, d, &e), want);
        if (want < 0)
            assert_non_null(strstr(e.msg, "at most 128"));
        free(t);
    }
    free(m);
    free(c);
    free(d);
}

/* An image config's Env fills a fixed array of NSBOX_OCI_ENV_MAX. */
static void test_env_bound(void **state)
{
    (void)state;
    struct nsbox_oci_config *c = malloc(sizeof *c);
    struct nsbox_err e = {0};
    for (int n = NSBOX_OCI_ENV_MAX; n <= NSBOX_OCI_ENV_MAX + 1; n++) {
        char *t = repeat("{\"config\":{\"Env\":[", "\"A=1\"", n,
                         "]},\"rootfs\":{\"diff_ids\":[]}}");
        int r = nsbox_ocimanifest_config(t, strlen(t), c, &e);
        free(t);
        if (n > NSBOX_OCI_ENV_MAX) {
            assert_int_equal(r, -1);
            assert_non_null(strstr(e.msg, "Env must be an array of at most 1024 strings"));
        } else {
            assert_int_equal(r, 0);
            nsbox_ocimanifest_config_free(c);
        }
    }
    free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_normalise),
        cmocka_unit_test(test_entry_names),
        cmocka_unit_test(test_index_pick),
        cmocka_unit_test(test_manifest_and_config),
        cmocka_unit_test(test_docker_save_pick),
        cmocka_unit_test(test_layer_count_bound),
        cmocka_unit_test(test_env_bound),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
