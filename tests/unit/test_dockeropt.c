/* Docker's options (policy/dockeropt.c): each habit gets nsbox's way to the same end, and
 * nothing else (nsbox's own options, typos of them, other words) gets a Docker sentence. */
#include "dockeropt.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

static void assert_hint_names(const char *option, const char *want)
{
    const char *got = nsbox_dockeropt_hint(option);
    assert_non_null(got);
    if (!strstr(got, want))
        fail_msg("%s: '%s' does not name %s", option, got, want);
}

static void test_each_habit_names_nsbox_way(void **state)
{
    (void)state;
    assert_hint_names("-w", "--cwd DIR");
    assert_hint_names("--workdir", "--cwd DIR");
    assert_hint_names("--workdir=/src", "--cwd DIR"); /* the part before '=' counts */
    assert_hint_names("--rm", "deletes its sandbox");
    assert_hint_names("-v", "--workspace DIR");
    assert_hint_names("--volume=/a:/b", "--workspace DIR");
    assert_hint_names("--mount", "--workspace DIR");
    for (const char *const *m =
             (const char *const[]){"-m", "--memory", "--memory-swap", "--cpus", "-c",
                                   "--cpu-shares", "--pids-limit", "--shm-size", NULL};
         *m; m++)
        assert_hint_names(*m, "--instance-type small|medium|large");
    assert_hint_names("--storage-opt=size=10G", "--instance-type small|medium|large");
    assert_hint_names("--disk", "nsbox info prints each one's disk");
    assert_hint_names("--disk-size=20G", "--workspace DIR");
    /* Podman's: run and create pull with TLS verified, the way around it named */
    assert_hint_names("--tls-verify=false", "nsbox image pull --tls-verify=false REF");
    assert_hint_names("--tls-verify", "registries.conf");
    assert_string_equal(nsbox_dockeropt_engine("--tls-verify=false"), "podman");
    assert_string_equal(nsbox_dockeropt_engine("--rm"), "docker");
    assert_hint_names("-u", "appuser (uid 1000)");
    assert_hint_names("--user=root", "appuser (uid 1000)");
    assert_hint_names("--name", "id=$(nsbox create)");
    assert_hint_names("-d", "nsbox exec -d ID");
    assert_hint_names("--detach", "nsbox exec -d ID");
    assert_hint_names("--tty", "nsbox exec -it");
    assert_hint_names("-p", "publishes no port");
    assert_hint_names("--publish=8080:80", "publishes no port");
    assert_hint_names("--net=host", "--network none|all|allow");
    assert_hint_names("--env-file", "-e NAME=VALUE");
    assert_hint_names("--privileged", "never gets privileges");
    assert_hint_names("--cap-add", "never gets privileges");
    assert_hint_names("--read-only", "always read-only");
    assert_hint_names("--init", "pid 1");
    assert_hint_names("--entrypoint=sh", "after --");
    assert_hint_names("--platform", "architecture");
    assert_hint_names("--tmpfs", "/tmp");
    for (const char *const *m = (const char *const[]){"--hostname", "--add-host", "--dns",
                                                       "--dns-search", "--dns-option", NULL};
         *m; m++)
        assert_hint_names(*m, "--network all|allow");
    assert_hint_names("--cap-drop=ALL", "no capabilities");
    assert_hint_names("--ulimit", "ulimit -n");
    assert_hint_names("--gpus", "no host devices");
}

static void test_nothing_else_gets_one(void **state)
{
    (void)state;
    const char *const none[] = {"--cwd",       "--network", "--instance-type",
                                "--workspace", "-e",        "--env",
                                "--timeout",   "--ttl",     "--netwrok",
                                "-x",          "--no-such", "-w2",
                                "--work",      "--rmx",     "-",
                                "--",          "",          "w",
                                "rm",          "-v=x" /* '=' cuts only a long option */};
    for (size_t k = 0; k < sizeof none / sizeof *none; k++)
        if (nsbox_dockeropt_hint(none[k]))
            fail_msg("'%s' got a Docker hint", none[k]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_each_habit_names_nsbox_way),
        cmocka_unit_test(test_nothing_else_gets_one),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
