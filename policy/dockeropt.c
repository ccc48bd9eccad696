/* Docker's options and what nsbox has for each (see dockeropt.h). */
#include "dockeropt.h"
#include "cleanup.h"

#include <stddef.h>
#include <string.h>

struct dockeropt {
    const char *engine;    /* whose option it is: "docker", or "podman" for Podman's own */
    const char *names[10]; /* up to the first NULL */
    const char *hint;
};

static const struct dockeropt dockeropt_table[] = {
    {"docker",
     {"-w", "--workdir", NULL},
     "where the command starts is --cwd DIR here (run and exec; relative to /workspace)"},
    {"docker",
     {"--rm", NULL},
     "run always deletes its sandbox when the command ends (a sandbox of nsbox create lives "
     "until nsbox rm, its --ttl or its --owner-pid's end)"},
    {"docker",
     {"-v", "--volume", "--mount", NULL},
     "one host directory can be bound, as /workspace: --workspace DIR (run and create); files "
     "go in and out of a persistent sandbox with nsbox cp"},
    {"docker",
     {"-m", "--memory", "--memory-swap", "--cpus", "-c", "--cpu-shares", "--pids-limit",
      "--shm-size", NULL},
     "limits come with the instance type: --instance-type small|medium|large (nsbox info prints "
     "each one's CPUs, memory, pids and disk; the config file may add types)"},
    {"docker",
     {"--storage-opt", "--disk", "--disk-size", NULL},
     "the workspace's disk comes with the instance type too: --instance-type small|medium|large "
     "(nsbox info prints each one's disk), or a directory of the host as /workspace: "
     "--workspace DIR"},
    {"docker",
     {"-u", "--user", NULL},
     "commands always run as appuser (uid 1000), never as root: there is no user to choose"},
    {"docker",
     {"--name", NULL},
     "a sandbox is named by the id nsbox create prints: id=$(nsbox create)"},
    {"docker",
     {"-d", "--detach", NULL},
     "a command in the background is nsbox exec -d ID -- CMD, in a sandbox of nsbox create "
     "(then nsbox ps, logs, wait and kill)"},
    {"docker", {"--interactive", "--tty", NULL}, NSBOX_DOCKEROPT_SHELL},
    {"docker",
     {"-p", "--publish", "-P", "--publish-all", "--expose", NULL},
     "nsbox publishes no port on the host: reach a server in the sandbox from inside it (nsbox "
     "exec ID -- curl -s http://127.0.0.1:PORT/)"},
    {"docker", {"--net", NULL}, "the network policy is --network none|all|allow=HOST[,HOST]"},
    {"docker",
     {"--env-file", NULL},
     "variables go one by one with -e NAME=VALUE, or as the \"env\" object of a --spec file"},
    {"docker",
     {"--privileged", "--cap-add", "--security-opt", "--device", NULL},
     "a sandbox never gets privileges, capabilities or host devices (docs/security.md)"},
    {"docker",
     {"--read-only", NULL},
     "the root is always read-only; /workspace, /tmp and /dev/shm are the writable places"},
    {"docker",
     {"--init", NULL},
     "nsbox's own init is always pid 1 of a sandbox, and reaps orphans"},
    {"docker",
     {"--entrypoint", NULL},
     "an image's Entrypoint and Cmd are not run: give the whole command after --, as in "
     "nsbox run --image REF -- python3 /app/main.py"},
    {"docker",
     {"--platform", NULL},
     "a pull takes the image of this machine's architecture from a manifest list; an image "
     "of another architecture cannot run here"},
    {"docker",
     {"--tmpfs", NULL},
     "/tmp (half the instance type's memory) and /dev/shm (a quarter) are always tmpfs; "
     "the rest of the root is read-only"},
    {"docker",
     {"--hostname", "--add-host", "--dns", "--dns-search", "--dns-option", NULL},
     "each sandbox has its own hostname, nsbox-ID, and an /etc/hosts and resolv.conf of "
     "nsbox's; names outside reach it by the network policy: --network all|allow=HOST[,HOST] "
     "(docs/network.md)"},
    {"docker",
     {"--cap-drop", NULL},
     "a sandbox's commands have no capabilities to drop: appuser, no_new_privs, a seccomp "
     "filter (docs/security.md)"},
    {"docker",
     {"--ulimit", NULL},
     "the instance type's limits bound a sandbox; a command lowers its own rlimits inside: "
     "-- sh -c 'ulimit -n 1024 && exec CMD'"},
    {"docker", {"--gpus", NULL}, "a sandbox gets no host devices, GPUs included"},
    {"podman",
     {"--tls-verify", NULL},
     "run and create pull with TLS verified; for a registry in plain HTTP, pull its image first "
     "with nsbox image pull --tls-verify=false REF, or name the registry insecure once in "
     "registries.conf (docs/images.md, \"Pulling\")"},
};

/* The table's entry of option's name (the part before '=' of "--name=value"), or NULL. */
static const struct dockeropt *dockeropt_find(const char *option)
{
    const char *eq = option[0] == '-' && option[1] == '-' ? strchr(option, '=') : NULL;
    size_t len = eq ? (size_t)(eq - option) : strlen(option);
    for (size_t k = 0; k < sizeof dockeropt_table / sizeof *dockeropt_table; k++)
        for (size_t j = 0;
             j < NSBOX_ARRAY_LEN(dockeropt_table[k].names) && dockeropt_table[k].names[j]; j++) {
            const char *n = dockeropt_table[k].names[j];
            if (strlen(n) == len && !strncmp(n, option, len))
                return &dockeropt_table[k];
        }
    return NULL;
}

const char *nsbox_dockeropt_hint(const char *option)
{
    const struct dockeropt *d = dockeropt_find(option);
    return d ? d->hint : NULL;
}

const char *nsbox_dockeropt_engine(const char *option)
{
    const struct dockeropt *d = dockeropt_find(option);
    return d ? d->engine : "docker";
}
