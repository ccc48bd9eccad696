/* config.json of an OCI bundle (policy/ocispec.c): what is read, the errors naming the key,
 * the bounds, and nsbox's floor (privileged containers, joined namespaces). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "ocispec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/resource.h>

/* The config the tests parse: one for the group (it is large), whose previous content parsed()
 * frees first, so that a test that failed half-way leaks nothing either. */
static struct nsbox_ocispec *cfg;

static int group_setup(void **state)
{
    (void)state;
    cfg = calloc(1, sizeof *cfg);
    return cfg ? 0 : -1;
}

static int group_teardown(void **state)
{
    (void)state;
    nsbox_ocispec_free(cfg);
    free(cfg);
    return 0;
}

/* json parsed into the group's config; the test fails with the parser's message if it is not. */
static struct nsbox_ocispec *parsed(const char *json)
{
    struct nsbox_err e = {0};
    nsbox_ocispec_free(cfg);
    if (nsbox_ocispec_parse(json, strlen(json), cfg, &e) < 0)
        fail_msg("%s", e.msg);
    return cfg;
}

static const char *const full =
    "{\"ociVersion\":\"1.0.2\",\"process\":{\"terminal\":true,\"user\":{\"uid\":0,\"gid\":7},"
    "\"args\":[\"sh\",\"-c\",\"echo hi\"],\"env\":[\"PATH=/bin\",\"A=b=c\"],\"cwd\":\"/tmp\","
    "\"noNewPrivileges\":true,\"capabilities\":{\"bounding\":[\"CAP_CHOWN\"]}},"
    "\"root\":{\"path\":\"rootfs\",\"readonly\":true},\"hostname\":\"box\","
    "\"mounts\":[{\"destination\":\"/proc\",\"type\":\"proc\",\"source\":\"proc\"},"
    "{\"destination\":\"/dev\",\"type\":\"tmpfs\",\"source\":\"tmpfs\",\"options\":[\"nosuid\","
    "\"mode=755\"]}],\"linux\":{\"namespaces\":[{\"type\":\"pid\"},{\"type\":\"mount\"},"
    "{\"type\":\"network\"}],\"resources\":{\"memory\":{\"limit\":268435456},\"cpu\":"
    "{\"quota\":50000,\"period\":100000,\"shares\":512},\"pids\":{\"limit\":100},\"devices\":"
    "[{\"allow\":false,\"access\":\"rwm\"}]},\"maskedPaths\":[\"/proc/kcore\"],"
    "\"seccomp\":{\"defaultAction\":\"SCMP_ACT_ERRNO\"}},\"unknown\":{\"x\":1},"
    "\"annotations\":{\"org.example/a\":\"1\",\"b\":\"two words\"}}";

static void test_full(void **state)
{
    (void)state;
    struct nsbox_ocispec *c = parsed(full);
    struct nsbox_err e = {0};
    assert_string_equal(c->oci_version, "1.0.2");
    assert_int_equal(c->n_args, 3);
    assert_string_equal(c->args[2], "echo hi");
    assert_null(c->args[3]);
    assert_int_equal(c->n_env, 2);
    assert_string_equal(c->env[1], "A=b=c");
    assert_string_equal(c->cwd, "/tmp");
    assert_int_equal(c->uid, 0);
    assert_int_equal(c->gid, 7);
    assert_true(c->terminal);
    assert_true(c->no_new_privileges);
    assert_false(c->cap_sys_admin);
    assert_string_equal(c->root_path, "rootfs");
    assert_true(c->root_readonly);
    assert_string_equal(c->hostname, "box");
    assert_int_equal(c->n_mounts, 2);
    assert_string_equal(c->mounts[1].destination, "/dev");
    assert_string_equal(c->mounts[1].type, "tmpfs");
    assert_string_equal(c->mounts[1].options, "nosuid,mode=755");
    assert_int_equal(c->n_namespaces, 3);
    assert_int_equal(c->namespaces[2].type, NSBOX_OCI_NS_NETWORK);
    assert_false(c->has_uid_mappings);
    assert_true(c->memory_limit == 268435456);
    assert_true(c->cpu_quota == 50000);
    assert_true(c->cpu_period == 100000);
    assert_true(c->cpu_shares == 512);
    assert_true(c->pids_limit == 100);
    assert_false(c->all_devices);
    assert_true(c->has_seccomp);
    assert_int_equal(c->n_masked, 1);
    assert_string_equal(c->masked[0], "/proc/kcore");
    assert_string_equal(c->annotations, "{\"org.example/a\":\"1\",\"b\":\"two words\"}");
    assert_int_equal(nsbox_ocispec_check_floor(c, &e), 0);
}

static void test_defaults(void **state)
{
    (void)state;
    const char *min = "{\"ociVersion\":\"1.1.0\",\"process\":{\"args\":[\"true\"]},"
                      "\"root\":{\"path\":\"/abs/root\"}}";
    struct nsbox_ocispec *c = parsed(min);
    assert_string_equal(c->cwd, "/");
    assert_int_equal(c->n_env, 0);
    assert_false(c->root_readonly);
    assert_true(c->memory_limit == -1 && c->pids_limit == -1 && c->cpu_quota == -1);
    assert_int_equal(c->n_mounts, 0);
    assert_false(c->has_seccomp);
    assert_string_equal(c->annotations, "{}");
}

/* The message names the key, so that a user finds the line of config.json to fix. */
static void fails_naming(const char *json, const char *want)
{
    struct nsbox_err e = {0};
    nsbox_ocispec_free(cfg);
    if (nsbox_ocispec_parse(json, strlen(json), cfg, &e) == 0)
        fail_msg("accepted: %s", json);
    if (!strstr(e.msg, want))
        fail_msg("'%s' does not say '%s' for %s", e.msg, want, json);
    assert_null(cfg->args);
}

#define P "\"process\":{\"args\":[\"true\"]}"
#define R "\"root\":{\"path\":\"rootfs\"}"
static void test_errors(void **state)
{
    (void)state;
    fails_naming("", "not valid JSON");
    fails_naming("[]", "not a JSON object");
    fails_naming("{\"process\":{\"args\":[\"true\"]}}", "'ociVersion': missing");
    fails_naming("{\"ociVersion\":\"2.0\"," P "," R "}", "'ociVersion'");
    fails_naming("{\"ociVersion\":\"1.0\"," R "}", "'process': missing");
    fails_naming("{\"ociVersion\":\"1.0\",\"process\":{\"args\":[]}," R "}", "'process.args'");
    fails_naming("{\"ociVersion\":\"1.0\",\"process\":{\"args\":[1]}," R "}", "'process.args'");
    fails_naming("{\"ociVersion\":\"1.0\",\"process\":{\"args\":[\"\"]}," R "}",
                 "'process.args'");
    fails_naming("{\"ociVersion\":\"1.0\",\"process\":{\"args\":[\"x\"],\"env\":[\"NOEQ\"]},"
                 R "}", "'process.env'");
    fails_naming("{\"ociVersion\":\"1.0\",\"process\":{\"args\":[\"x\"],\"cwd\":\"rel\"}," R "}",
                 "'process.cwd'");
    fails_naming("{\"ociVersion\":\"1.0\",\"process\":{\"args\":[\"x\"],\"user\":{\"uid\":-1}},"
                 R "}", "'process.user.uid'");
    fails_naming("{\"ociVersion\":\"1.0\",\"process\":{\"args\":[\"x\"],\"terminal\":1}," R "}",
                 "'process.terminal'");
    fails_naming("{\"ociVersion\":\"1.0\"," P "}", "'root': missing");
    fails_naming("{\"ociVersion\":\"1.0\"," P ",\"root\":{}}", "'root.path': missing");
    fails_naming("{\"ociVersion\":\"1.0\"," P "," R ",\"mounts\":[{\"type\":\"proc\"}]}",
                 "'mounts.destination'");
    fails_naming("{\"ociVersion\":\"1.0\"," P "," R ",\"mounts\":[{\"destination\":\"x\"}]}",
                 "'mounts.destination'");
    fails_naming("{\"ociVersion\":\"1.0\"," P "," R ",\"linux\":{\"namespaces\":[{\"type\":"
                 "\"bogus\"}]}}", "'linux.namespaces.type'");
    fails_naming("{\"ociVersion\":\"1.0\"," P "," R ",\"linux\":{\"namespaces\":[{\"type\":"
                 "\"pid\"},{\"type\":\"pid\"}]}}", "given twice");
    fails_naming("{\"ociVersion\":\"1.0\"," P "," R ",\"linux\":{\"resources\":{\"memory\":"
                 "{\"limit\":1.5}}}}", "'linux.resources.memory.limit'");
    fails_naming("{\"ociVersion\":\"1.0\"," P "," R ",\"linux\":{\"resources\":{\"pids\":"
                 "{\"limit\":\"x\"}}}}", "'linux.resources.pids.limit'");
    fails_naming("{\"ociVersion\":\"1.0\"," P "," R ",\"linux\":[]}", "'linux': must be");
    fails_naming("{\"ociVersion\":\"1.0\"," P "," R ",\"linux\":{\"maskedPaths\":[\"rel\"]}}",
                 "'linux.maskedPaths': 'rel' is not an absolute path");
    fails_naming("{\"ociVersion\":\"1.0\"," P "," R ",\"annotations\":[]}", "'annotations'");
    fails_naming("{\"ociVersion\":\"1.0\"," P "," R ",\"annotations\":{\"a\":1}}",
                 "'annotations'");
}

/* head, n items (item_fmt with the item's number), tail: refused naming want. Each list fills
 * a fixed array of the struct: one entry more must be refused, never written past its end. */
static void fails_with_many(const char *head, const char *item_fmt, int n, const char *tail,
                            const char *want)
{
    size_t cap = strlen(head) + (size_t)n * (strlen(item_fmt) + 16) + strlen(tail) + 1;
    char *j = malloc(cap);
    assert_non_null(j);
    size_t k = (size_t)snprintf(j, cap, "%s", head);
    for (int i = 0; i < n; i++) {
        k += (size_t)snprintf(j + k, cap - k, "%s", i ? "," : "");
        k += (size_t)snprintf(j + k, cap - k, item_fmt, i);
    }
    snprintf(j + k, cap - k, "%s", tail);
    fails_naming(j, want);
    free(j);
}

static void test_list_bounds(void **state)
{
    (void)state;
    fails_with_many("{\"ociVersion\":\"1.0\"," R ",\"process\":{\"args\":[\"x\"],\"user\":"
                    "{\"uid\":0,\"gid\":0,\"additionalGids\":[",
                    "%d", NSBOX_OCISPEC_GROUPS_MAX + 1, "]}}}", "more than 32 entries");
    static const char *const rl[] = {"CPU",     "FSIZE", "DATA",  "STACK",      "CORE",     "RSS",
                                     "NPROC",   "NOFILE", "MEMLOCK", "AS",       "LOCKS",
                                     "SIGPENDING", "MSGQUEUE", "NICE", "RTPRIO", "RTTIME"};
    assert_int_equal(sizeof rl / sizeof rl[0], NSBOX_OCISPEC_RLIMITS_MAX);
    char head[2048];
    size_t k = (size_t)snprintf(head, sizeof head, "{\"ociVersion\":\"1.0\"," R
                                ",\"process\":{\"args\":[\"x\"],\"rlimits\":[");
    for (size_t i = 0; i < sizeof rl / sizeof rl[0]; i++)
        k += (size_t)snprintf(head + k, sizeof head - k,
                              "{\"type\":\"RLIMIT_%s\",\"soft\":1,\"hard\":1},", rl[i]);
    fails_with_many(head, "{\"type\":\"RLIMIT_CPU\",\"soft\":%d,\"hard\":1}", 1, "]}}",
                    "'process.rlimits': too many entries");
    fails_with_many("{\"ociVersion\":\"1.0\"," P "," R ",\"hooks\":{\"prestart\":[",
                    "{\"path\":\"/bin/h%d\"}", NSBOX_OCISPEC_HOOKS_MAX + 1, "]}}",
                    "more than 32 hooks");
    fails_with_many("{\"ociVersion\":\"1.0\"," P "," R ",\"linux\":{\"sysctl\":{",
                    "\"net.ipv4.k%d\":\"1\"", NSBOX_OCISPEC_SYSCTL_MAX + 1, "}}}",
                    "'linux.sysctl': more than 64 entries");
    fails_with_many("{\"ociVersion\":\"1.0\"," P "," R ",\"linux\":{\"resources\":"
                    "{\"devices\":[",
                    "{\"allow\":false,\"type\":\"c\",\"major\":1,\"minor\":%d,"
                    "\"access\":\"rwm\"}",
                    NSBOX_OCISPEC_DEVRULES_MAX + 1, "]}}}", "more than 64 entries");
}

static void test_bounds(void **state)
{
    (void)state;
    /* more mounts than the struct holds */
    size_t cap = 200 * 40 + 200;
    char *j = malloc(cap);
    size_t n = (size_t)snprintf(j, cap, "{\"ociVersion\":\"1.0\"," P "," R ",\"mounts\":[");
    for (int i = 0; i <= NSBOX_OCISPEC_MOUNTS_MAX; i++)
        n += (size_t)snprintf(j + n, cap - n, "%s{\"destination\":\"/m%d\"}", i ? "," : "", i);
    snprintf(j + n, cap - n, "]}");
    fails_naming(j, "more than 64 entries");
    /* a path longer than the buffer */
    char longpath[NSBOX_OCISPEC_PATH_MAX + 10];
    memset(longpath, 'a', sizeof longpath - 1);
    longpath[0] = '/';
    longpath[sizeof longpath - 1] = '\0';
    snprintf(j, cap, "{\"ociVersion\":\"1.0\"," P ",\"root\":{\"path\":\"%s\"}}", longpath);
    fails_naming(j, "'root.path': longer than");
    free(j);
}

static void floor_refuses(const char *json, const char *want)
{
    struct nsbox_ocispec *c = parsed(json);
    struct nsbox_err e = {0};
    assert_int_equal(nsbox_ocispec_check_floor(c, &e), -1);
    assert_int_equal(e.code, NSBOX_E_POLICY);
    if (!strstr(e.msg, want))
        fail_msg("'%s' does not say '%s'", e.msg, want);
}

static void test_floor(void **state)
{
    (void)state;
    floor_refuses("{\"ociVersion\":\"1.0\",\"process\":{\"args\":[\"x\"],\"capabilities\":"
                  "{\"bounding\":[\"CAP_CHOWN\",\"CAP_SYS_ADMIN\"]}}," R "}",
                  "privileged containers are not supported");
    floor_refuses("{\"ociVersion\":\"1.0\",\"process\":{\"args\":[\"x\"],\"capabilities\":"
                  "{\"bounding\":[\"CAP_CHOWN\",\"CAP_SYS_ADMIN\"]}}," R "}",
                  "drop --privileged (docker exec's too) and --cap-add SYS_ADMIN");
    floor_refuses("{\"ociVersion\":\"1.0\"," P "," R ",\"linux\":{\"resources\":{\"devices\":"
                  "[{\"allow\":true,\"access\":\"rwm\"}]}}}",
                  "every device of the host; drop --privileged");
    floor_refuses("{\"ociVersion\":\"1.0\"," P "," R ",\"linux\":{\"namespaces\":[{\"type\":"
                  "\"pid\",\"path\":\"/proc/9/ns/pid\"}]}}",
                  "existing pid namespace");
    floor_refuses("{\"ociVersion\":\"1.0\"," P "," R ",\"linux\":{\"namespaces\":[{\"type\":"
                  "\"pid\",\"path\":\"/proc/9/ns/pid\"}]}}",
                  "--pid=container:NAME: drop it");
    floor_refuses("{\"ociVersion\":\"1.0\"," P "," R ",\"linux\":{\"namespaces\":[{\"type\":"
                  "\"mount\",\"path\":\"/proc/9/ns/mnt\"}]}}",
                  "its own root");
    /* a pod's shared namespaces pass the floor (create refuses the host's, by inode) */
    struct nsbox_err e = {0};
    const char *j = "{\"ociVersion\":\"1.0\"," P "," R ",\"linux\":{\"namespaces\":[{\"type\":"
                    "\"network\",\"path\":\"/proc/9/ns/net\"},{\"type\":\"ipc\",\"path\":"
                    "\"/proc/9/ns/ipc\"},{\"type\":\"uts\",\"path\":\"/proc/9/ns/uts\"},"
                    "{\"type\":\"user\",\"path\":\"/proc/9/ns/user\"}]}}";
    struct nsbox_ocispec *c = parsed(j);
    assert_int_equal(nsbox_ocispec_check_floor(c, &e), 0);
    assert_true(c->namespaces[0].has_path);
    assert_string_equal(c->namespaces[1].path, "/proc/9/ns/ipc");
    fails_naming("{\"ociVersion\":\"1.0\"," P "," R ",\"linux\":{\"namespaces\":[{\"type\":"
                 "\"network\",\"path\":\"ns/net\"}]}}",
                 "'linux.namespaces.path'");
}

/* process.user, rlimits and capabilities as the container's process gets them. */
static void test_process(void **state)
{
    (void)state;
    const char *j =
        "{\"ociVersion\":\"1.0.2\",\"process\":{\"args\":[\"x\"],\"user\":{\"uid\":1234,"
        "\"gid\":100,\"additionalGids\":[5,6],\"umask\":18},\"oomScoreAdj\":-500,\"rlimits\":[{"
        "\"type\":"
        "\"RLIMIT_NOFILE\",\"soft\":512,\"hard\":1024},{\"type\":\"RLIMIT_CORE\",\"soft\":0,"
        "\"hard\":0}],\"capabilities\":{\"bounding\":[\"CAP_CHOWN\",\"CAP_KILL\"],\"effective\":"
        "[\"CAP_KILL\"],\"ambient\":[\"CAP_NET_RAW\"]}}," R "}";
    struct nsbox_ocispec *c = parsed(j);
    struct nsbox_err e = {0};
    assert_int_equal(c->uid, 1234);
    assert_int_equal(c->gid, 100);
    assert_int_equal(c->n_groups, 2);
    assert_int_equal(c->groups[1], 6);
    assert_int_equal(c->umask, 022);
    assert_true(c->has_oom_score_adj);
    assert_int_equal(c->oom_score_adj, -500);
    assert_int_equal(c->n_rlimits, 2);
    assert_int_equal(c->rlimits[0].resource, RLIMIT_NOFILE);
    assert_true(c->rlimits[0].soft == 512 && c->rlimits[0].hard == 1024);
    assert_int_equal(c->rlimits[1].resource, RLIMIT_CORE);
    assert_true(c->caps[NSBOX_OCI_CAPS_BOUNDING] == ((1u << 0) | (1u << 5)));
    assert_true(c->caps[NSBOX_OCI_CAPS_EFFECTIVE] == (1u << 5));
    assert_true(c->caps[NSBOX_OCI_CAPS_AMBIENT] == (1u << 13));
    assert_true(c->caps[NSBOX_OCI_CAPS_PERMITTED] == 0);
    assert_false(c->cap_sys_admin);
    assert_int_equal(nsbox_ocispec_check_floor(c, &e), 0);
    assert_null(c->env[0]);
    assert_int_equal(nsbox_ocispec_cap_number("CAP_CHECKPOINT_RESTORE"), 40);
    assert_int_equal(nsbox_ocispec_cap_number("CAP_NOPE"), -1);
}

/* Limits past int64: RLIM_INFINITY as configs write it, and one between 2^63 and 2^64. */
static void test_rlimits_past_int64(void **state)
{
    (void)state;
    const char *j = "{\"ociVersion\":\"1.0.2\",\"process\":{\"args\":[\"x\"],\"rlimits\":[{"
                    "\"type\":\"RLIMIT_CPU\",\"soft\":10000000000000000000,"
                    "\"hard\":18446744073709551615}]}," R "}";
    struct nsbox_ocispec *c = parsed(j);
    assert_int_equal(c->n_rlimits, 1);
    assert_true(c->rlimits[0].soft == 10000000000000000000ull);
    assert_true(c->rlimits[0].hard == UINT64_MAX && (rlim_t)c->rlimits[0].hard == RLIM_INFINITY);
    /* a signed member past int64's range is an error, not a conversion */
    fails_naming("{\"ociVersion\":\"1.0\"," P "," R ",\"linux\":{\"resources\":{\"cpu\":"
                 "{\"quota\":1e300}}}}",
                 "'linux.resources.cpu.quota'");
}

static void test_hooks(void **state)
{
    (void)state;
    const char *j = "{\"ociVersion\":\"1.0.2\"," P "," R ",\"hooks\":{\"prestart\":[{\"path\":"
                    "\"/usr/bin/netns-setup\",\"args\":[\"setup\",\"-x\"],\"env\":[\"A=1\"],"
                    "\"timeout\":5},{\"path\":\"/bin/true\"}],\"poststop\":[{\"path\":"
                    "\"/bin/cleanup\"}]}}";
    struct nsbox_ocispec *c = parsed(j);
    struct nsbox_err e = {0};
    assert_int_equal(c->hooks.n, 3);
    assert_int_equal(c->hooks.h[0].kind, NSBOX_OCI_HOOK_PRESTART);
    assert_string_equal(c->hooks.h[0].path, "/usr/bin/netns-setup");
    assert_string_equal(c->hooks.h[0].args[0], "setup");
    assert_string_equal(c->hooks.h[0].args[1], "-x");
    assert_null(c->hooks.h[0].args[2]);
    assert_string_equal(c->hooks.h[0].env[0], "A=1");
    assert_int_equal(c->hooks.h[0].timeout, 5);
    /* without args, argv is the path alone; without env, an empty environment */
    assert_string_equal(c->hooks.h[1].args[0], "/bin/true");
    assert_null(c->hooks.h[1].args[1]);
    assert_null(c->hooks.h[1].env[0]);
    assert_int_equal(c->hooks.h[1].timeout, 0);
    assert_int_equal(c->hooks.h[2].kind, NSBOX_OCI_HOOK_POSTSTOP);
    assert_string_equal(nsbox_ocispec_hook_name(c->hooks.h[2].kind), "poststop");
    /* the kept text reads back to the same hooks (start and delete use it) */
    struct nsbox_ocispec_hooks *h = malloc(sizeof *h);
    assert_int_equal(nsbox_ocispec_hooks_parse(c->hooks_json, h, &e), 0);
    assert_int_equal(h->n, 3);
    assert_string_equal(h->h[2].path, "/bin/cleanup");
    nsbox_ocispec_hooks_free(h);
    assert_int_equal(nsbox_ocispec_hooks_parse("{}", h, &e), 0);
    assert_int_equal(h->n, 0);
    assert_int_equal(nsbox_ocispec_hooks_parse("{\"poststart\":[{\"path\":\"rel\"}]}", h, &e), -1);
    assert_non_null(strstr(e.msg, "'hooks.path'"));
    free(h);
}

/* cJSON cuts a string at "\u0000" (or a \u escape without four hex digits) and reads on: the
 * process would run "/bin/sh" where the bundle said "/bin/sh\u0000-evil", a mount would go
 * to another place. Refused before parsing, in config.json and in the hooks create keeps. */
static void test_nul_in_a_string_is_refused(void **state)
{
    (void)state;
    fails_naming("{\"ociVersion\":\"1.0\",\"process\":{\"args\":[\"/bin/sh\\u0000-evil\"]}," R
                 "}",
                 "config.json: contains a NUL character (\\u0000) in a string");
    fails_naming("{\"ociVersion\":\"1.0\"," P ",\"root\":{\"path\":\"rootfs\\u00zz\"}}",
                 "config.json: invalid \\u escape");
    /* an escaped backslash before u0000 is text, kept whole */
    struct nsbox_ocispec *c =
        parsed("{\"ociVersion\":\"1.0\",\"process\":{\"args\":[\"echo\",\"\\\\u0000\"]}," R "}");
    assert_string_equal(c->args[1], "\\u0000");
    struct nsbox_ocispec_hooks *h = malloc(sizeof *h);
    struct nsbox_err e = {0};
    assert_int_equal(
        nsbox_ocispec_hooks_parse("{\"poststart\":[{\"path\":\"/bin/x\\u0000/y\"}]}", h, &e), -1);
    assert_non_null(strstr(e.msg, "hooks: contains a NUL character"));
    assert_int_equal(h->n, 0);
    free(h);
}

static void test_process_errors(void **state)
{
    (void)state;
#define PX(x) "{\"ociVersion\":\"1.0\",\"process\":{\"args\":[\"x\"]," x "}," R "}"
    fails_naming(PX("\"user\":{\"additionalGids\":[\"wheel\"]}"), "'process.user.additionalGids'");
    fails_naming(PX("\"user\":{\"umask\":512}"), "'process.user.umask'");
    fails_naming(PX("\"oomScoreAdj\":1001"), "'process.oomScoreAdj'");
    fails_naming(PX("\"rlimits\":[{\"type\":\"RLIMIT_BOGUS\",\"soft\":1,\"hard\":1}]"),
                 "unknown limit 'RLIMIT_BOGUS'");
    fails_naming(PX("\"rlimits\":[{\"type\":\"RLIMIT_NOFILE\",\"soft\":9,\"hard\":1}]"),
                 "soft limit above the hard one");
    fails_naming(PX("\"rlimits\":[{\"type\":\"RLIMIT_NOFILE\",\"soft\":1}]"),
                 "needs 'soft' and 'hard'");
    fails_naming(PX("\"rlimits\":[{\"type\":\"RLIMIT_NOFILE\",\"soft\":null,\"hard\":1}]"),
                 "needs 'soft' and 'hard'");
    fails_naming(PX("\"rlimits\":[{\"type\":\"RLIMIT_NOFILE\",\"soft\":1,\"hard\":1e20}]"),
                 "'process.rlimits.hard': must be an integer between 0 and 18446744073709551615");
    fails_naming(PX("\"rlimits\":[{\"type\":\"RLIMIT_NOFILE\",\"soft\":1.5,\"hard\":2}]"),
                 "'process.rlimits.soft'");
    fails_naming(PX("\"rlimits\":[{\"type\":\"RLIMIT_CPU\",\"soft\":1,\"hard\":1},"
                    "{\"type\":\"RLIMIT_CPU\",\"soft\":1,\"hard\":1}]"),
                 "given twice");
    fails_naming(PX("\"capabilities\":{\"effective\":[\"CAP_FLY\"]}"),
                 "unknown capability 'CAP_FLY'");
    fails_naming("{\"ociVersion\":\"1.0\"," P "," R ",\"hooks\":{\"prestart\":{}}}",
                 "'hooks.prestart': must be an array");
    fails_naming("{\"ociVersion\":\"1.0\"," P "," R ",\"hooks\":{\"prestart\":[{\"path\":"
                 "\"/x\",\"timeout\":0}]}}",
                 "'hooks.timeout'");
    fails_naming("{\"ociVersion\":\"1.0\"," P "," R ",\"hooks\":{\"poststop\":[{\"args\":"
                 "[\"x\"]}]}}",
                 "'hooks.path': missing");
#undef PX
}

/* What nsbox cannot give, said at create with the way out. */
static void test_unsupported(void **state)
{
    (void)state;
    const char *const cases[][2] = {
        {"{\"ociVersion\":\"1.0\",\"process\":{\"args\":[\"x\"],\"user\":{\"uid\":70000}}," R "}",
         "outside the container's user namespace, which has ids 0-65535"},
        {"{\"ociVersion\":\"1.0\",\"process\":{\"args\":[\"x\"],\"user\":{\"uid\":0,"
         "\"additionalGids\":[65536]}}," R "}",
         "id 65536 is outside"},
        {"{\"ociVersion\":\"1.0\"," P "," R ",\"hooks\":{\"startContainer\":[{\"path\":"
         "\"/x\"}]}}",
         "hooks.startContainer: hooks that run inside the container are not supported"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct nsbox_ocispec *c = parsed(cases[i][0]);
        struct nsbox_err e = {0};
        assert_int_equal(nsbox_ocispec_check_floor(c, &e), -1);
        assert_int_equal(e.code, NSBOX_E_UNSUPPORTED);
        if (!strstr(e.msg, cases[i][1]))
            fail_msg("'%s' does not say '%s'", e.msg, cases[i][1]);
    }
}

/* Mount options: flags for mount(2), the rest for the filesystem, binds recognised. */
static void test_mount_opts(void **state)
{
    (void)state;
    struct nsbox_ocispec_mount m = {.destination = "/dev/shm", .type = "tmpfs"};
    struct nsbox_ocispec_mount_opts o;
    snprintf(m.options, sizeof m.options, "nosuid,noexec,nodev,mode=1777,size=65536k,rprivate");
    nsbox_ocispec_mount_opts(&m, &o);
    assert_int_equal(o.flags, MS_NOSUID | MS_NOEXEC | MS_NODEV);
    assert_string_equal(o.data, "mode=1777,size=65536k");
    assert_false(o.bind);
    snprintf(m.type, sizeof m.type, "none");
    snprintf(m.options, sizeof m.options, "rbind,ro,rw,ro,strictatime");
    nsbox_ocispec_mount_opts(&m, &o);
    assert_true(o.bind && o.recursive);
    assert_int_equal(o.flags, MS_RDONLY | MS_STRICTATIME); /* the last of ro/rw wins */
    assert_string_equal(o.data, "");
    snprintf(m.type, sizeof m.type, "bind");
    m.options[0] = '\0';
    nsbox_ocispec_mount_opts(&m, &o);
    assert_true(o.bind && !o.recursive);
}

/* The config's namespaces with `drop` left out; -1 leaves none out. */
static int check_namespaces_without(int drop, struct nsbox_err *e)
{
    static const char *const types[] = {"pid", "ipc", "uts", "network", "mount"};
    char j[512];
    int n = snprintf(j, sizeof j, "{\"ociVersion\":\"1.0\"," P "," R ",\"linux\":{"
                                  "\"namespaces\":[");
    const char *sep = "";
    for (int i = 0; i < 5; i++) {
        if (i == drop)
            continue;
        n += snprintf(j + n, sizeof j - (size_t)n, "%s{\"type\":\"%s\"}", sep, types[i]);
        sep = ",";
    }
    snprintf(j + n, sizeof j - (size_t)n, "]}}");
    return nsbox_ocispec_check_namespaces(parsed(j), e);
}

/* A namespace type left out asks for the host's (docker run --pid=host): refused, naming the
 * namespace and the option to drop; user and cgroup left out are allowed (nsbox adds its own:
 * plain docker run on a cgroup v1 host has no cgroup entry). */
static void test_host_namespaces(void **state)
{
    (void)state;
    static const char *const want[][2] = {
        {"host's pid namespace", "drop --pid=host"},
        {"host's ipc namespace", "drop --ipc=host"},
        {"host's uts namespace", "drop --uts=host"},
        {"host's network namespace", "drop --network=host"},
        {"host's mount namespace", "add a mount entry"},
    };
    struct nsbox_err e = {0};
    assert_int_equal(check_namespaces_without(-1, &e), 0);
    for (int i = 0; i < 5; i++) {
        assert_int_equal(check_namespaces_without(i, &e), -1);
        assert_int_equal(e.code, NSBOX_E_POLICY);
        for (int k = 0; k < 2; k++)
            if (!strstr(e.msg, want[i][k]))
                fail_msg("'%s' does not say '%s'", e.msg, want[i][k]);
        if (!strstr(e.msg, "never shares a host namespace"))
            fail_msg("'%s' does not say why", e.msg);
    }
    const char *none = "{\"ociVersion\":\"1.0\"," P "," R "}";
    assert_int_equal(nsbox_ocispec_check_namespaces(parsed(none), &e), -1);
    assert_non_null(strstr(e.msg, "host's pid namespace"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_full),
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_bounds),
        cmocka_unit_test(test_list_bounds),
        cmocka_unit_test(test_floor),
        cmocka_unit_test(test_process),
        cmocka_unit_test(test_hooks),
        cmocka_unit_test(test_process_errors),
        cmocka_unit_test(test_unsupported),
        cmocka_unit_test(test_mount_opts),
        cmocka_unit_test(test_host_namespaces),
        cmocka_unit_test(test_rlimits_past_int64),
        cmocka_unit_test(test_nul_in_a_string_is_refused),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
