/* config.json's idmapped mounts (policy/ocispec_idmap.c): the options "idmap" and "ridmap",
 * a mount's uidMappings and gidMappings resolved to the container's ids through
 * linux.uidMappings, and the floor: a mapping outside the container's ids, on either side, is
 * refused naming the key and why. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "ocispec.h"

#include <stdio.h>
#include <string.h>

static struct nsbox_ocispec c;

/* A config whose second mount is mount (a JSON object's members) and whose linux object has
 * the members lx. */
static int parse(const char *mount, const char *lx, struct nsbox_err *e)
{
    char doc[4096];
    snprintf(doc, sizeof doc,
             "{\"ociVersion\":\"1.1.0\",\"process\":{\"args\":[\"true\"],\"cwd\":\"/\"},"
             "\"root\":{\"path\":\"rootfs\"},\"mounts\":[{\"destination\":\"/proc\","
             "\"type\":\"proc\",\"source\":\"proc\"},{\"destination\":\"/data\",%s}],"
             "\"linux\":{%s}}",
             mount, lx);
    return nsbox_ocispec_parse(doc, strlen(doc), &c, e);
}

static void refused(const char *mount, const char *lx, const char *want, enum nsbox_errcode code)
{
    struct nsbox_err e = {0};
    assert_int_equal(parse(mount, lx, &e), -1);
    assert_int_equal(e.code, code);
    if (!strstr(e.msg, want))
        fail_msg("'%s' lacks '%s'", e.msg, want);
}

#define BIND "\"type\":\"bind\",\"source\":\"/srv/vol\","
#define MAPS(key, c, h, s)                                                                         \
    "\"" key "\":[{\"containerID\":" #c ",\"hostID\":" #h ",\"size\":" #s "}]"

static void test_options(void **state)
{
    (void)state;
    struct nsbox_err e = {0};
    /* no option: nothing changes */
    if (parse(BIND "\"options\":[\"rbind\"]", "", &e) < 0)
        fail_msg("%s", e.msg);
    assert_false(c.mounts[1].idmap);
    nsbox_ocispec_free(&c);
    /* idmap: the container's own mapping, not recursive; never in the filesystem's data */
    if (parse(BIND "\"options\":[\"rbind\",\"idmap\"]", "", &e) < 0)
        fail_msg("%s", e.msg);
    assert_true(c.mounts[1].idmap);
    assert_false(c.mounts[1].idmap_recursive);
    assert_int_equal(c.mounts[1].n_uid_map, 0);
    struct nsbox_ocispec_mount_opts o;
    nsbox_ocispec_mount_opts(&c.mounts[1], &o);
    assert_true(o.bind && o.recursive);
    assert_string_equal(o.data, "");
    nsbox_ocispec_free(&c);
    if (parse(BIND "\"options\":[\"rbind\",\"ridmap\"]", "", &e) < 0)
        fail_msg("%s", e.msg);
    assert_true(c.mounts[1].idmap && c.mounts[1].idmap_recursive);
    nsbox_ocispec_free(&c);
    /* features lists both */
    bool idmap = false, ridmap = false;
    for (size_t i = 0; nsbox_ocispec_mount_option(i); i++) {
        idmap |= !strcmp(nsbox_ocispec_mount_option(i), "idmap");
        ridmap |= !strcmp(nsbox_ocispec_mount_option(i), "ridmap");
    }
    assert_true(idmap && ridmap);
    /* only a bind is idmapped */
    refused("\"type\":\"tmpfs\",\"source\":\"tmpfs\",\"options\":[\"idmap\"]", "",
            "makes of a bind only", NSBOX_E_INVALID);
}

static void test_mappings(void **state)
{
    (void)state;
    struct nsbox_err e = {0};
    /* without linux.uidMappings, a hostID is the container's id */
    if (parse(BIND MAPS("uidMappings", 0, 1000, 1) "," MAPS("gidMappings", 5, 100, 10), "", &e) < 0)
        fail_msg("%s", e.msg);
    const struct nsbox_ocispec_mount *m = &c.mounts[1];
    assert_true(m->idmap);
    assert_int_equal(m->n_uid_map, 1);
    assert_int_equal(m->uid_map[0].inside, 0);
    assert_int_equal(m->uid_map[0].outside, 1000);
    assert_int_equal(m->uid_map[0].count, 1);
    assert_int_equal(m->gid_map[0].inside, 5);
    assert_int_equal(m->gid_map[0].outside, 100);
    nsbox_ocispec_free(&c);
    /* with them (an engine's user namespace, containerd's), through them: host 100000 + N is
     * the container's N */
    if (parse(BIND MAPS("uidMappings", 0, 100000, 65536) "," MAPS("gidMappings", 0, 100010, 5),
              MAPS("uidMappings", 0, 100000, 65536) "," MAPS("gidMappings", 0, 100000, 65536),
              &e) < 0)
        fail_msg("%s", e.msg);
    assert_int_equal(c.mounts[1].uid_map[0].outside, 0);
    assert_int_equal(c.mounts[1].uid_map[0].count, 65536);
    assert_int_equal(c.mounts[1].gid_map[0].outside, 10);
    nsbox_ocispec_free(&c);
}

static void test_floor(void **state)
{
    (void)state;
    /* onto host ids outside the container's */
    refused(BIND MAPS("uidMappings", 0, 100000, 65536) "," MAPS("gidMappings", 0, 0, 1), "",
            "key 'mounts.uidMappings': the mount at /data maps onto host ids 100000-165535, "
            "which are not the container's own",
            NSBOX_E_POLICY);
    refused(BIND MAPS("uidMappings", 0, 0, 1) "," MAPS("gidMappings", 0, 65000, 1000), "",
            "key 'mounts.gidMappings'", NSBOX_E_POLICY);
    /* partly outside linux.uidMappings' range */
    refused(BIND MAPS("uidMappings", 0, 99999, 2) "," MAPS("gidMappings", 0, 100000, 1),
            MAPS("uidMappings", 0, 100000, 65536) "," MAPS("gidMappings", 0, 100000, 65536),
            "host ids 99999-100000", NSBOX_E_POLICY);
    /* host root through a config without a user namespace is its root: allowed; but on-disk
     * ids past 65535 (other containers' files) are not */
    refused(BIND MAPS("uidMappings", 70000, 0, 1) "," MAPS("gidMappings", 0, 0, 1), "",
            "maps on-disk ids 70000-70000, past 65535", NSBOX_E_POLICY);
    /* both, or neither */
    refused(BIND MAPS("uidMappings", 0, 0, 1), "", "key 'mounts.gidMappings'", NSBOX_E_INVALID);
    /* their shape */
    refused(BIND "\"uidMappings\":{}", "", "key 'mounts.uidMappings': must be an array",
            NSBOX_E_INVALID);
    refused(BIND "\"uidMappings\":[{\"containerID\":0,\"size\":1}],"
                 "\"gidMappings\":[{\"containerID\":0,\"hostID\":0,\"size\":1}]",
            "", "needs containerID, hostID and size", NSBOX_E_INVALID);
    refused(BIND "\"uidMappings\":[{\"containerID\":0,\"hostID\":0,\"size\":0}],"
                 "\"gidMappings\":[{\"containerID\":0,\"hostID\":0,\"size\":1}]",
            "", "mounts.uidMappings", NSBOX_E_INVALID);
    refused(BIND "\"uidMappings\":[{\"containerID\":0,\"hostID\":0,\"size\":1},"
                 "{\"containerID\":1,\"hostID\":1,\"size\":1},{\"containerID\":2,\"hostID\":2,"
                 "\"size\":1},{\"containerID\":3,\"hostID\":3,\"size\":1}],"
                 "\"gidMappings\":[{\"containerID\":0,\"hostID\":0,\"size\":1}]",
            "", "more than 3 entries", NSBOX_E_INVALID);
    /* a bad linux.uidMappings is named when a mount needs it */
    refused(BIND MAPS("uidMappings", 0, 0, 1) "," MAPS("gidMappings", 0, 0, 1), "\"uidMappings\":7",
            "key 'linux.uidMappings'", NSBOX_E_INVALID);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_options),
        cmocka_unit_test(test_mappings),
        cmocka_unit_test(test_floor),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
