/* nsbox-oci: runc's command line over an OCI bundle, running nsbox sandboxes (docs/oci.md).
 * Errors go to stderr and to the log (ocilog.c), as runc writes them. */
#include "ocirt.h"
#include "cleanup.h"
#include "cmdline.h"
#include "config.h"
#include "spec.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef NSBOX_VERSION
#define NSBOX_VERSION "0.0.0"
#endif

/* Each command, its synopsis and what it does: `nsbox-oci --help` lists them all,
 * `nsbox-oci CMD --help` its own. */
static const struct {
    const char *name;
    int (*fn)(const struct nsbox_ocirt *, int, char **, struct nsbox_err *);
    const char *synopsis, *what;
} commands[] = {
    {"spec", nsbox_ocispecgen_spec, "spec [--bundle DIR] [--rootless]",
     "write a default config.json (a shell on a terminal; refuses to overwrite one)"},
    {"create", nsbox_ocicreate_create,
     "create [--bundle DIR] [--pid-file FILE] [--console-socket S] [--preserve-fds N] ID",
     "set up, the process waits for start"},
    {"start", nsbox_ocicmds_start, "start ID", "run the process"},
    {"run", nsbox_ocirun_run,
     "run [--bundle DIR] [--pid-file FILE] [--console-socket S] [--detach|-d] [--keep]\n"
     "      [--preserve-fds N] ID",
     "create and start; in the foreground: wait, pass on signals, exit with the\n"
     "      container's status (128+N for signal N) and delete it (unless --keep)"},
    {"state", nsbox_ocicmds_state, "state ID", "the container's state as JSON"},
    {"list", nsbox_ocilist_list, "list [--format table|json] [--quiet|-q]",
     "the containers under --root"},
    {"kill", nsbox_ocicmds_kill, "kill [--all] ID [SIGNAL]", "signal it (default TERM)"},
    {"delete", nsbox_ocicmds_delete, "delete [--force] ID", "remove a stopped container"},
    {"pause", nsbox_ocicmds_pause, "pause ID", "freeze all its processes"},
    {"resume", nsbox_ocicmds_resume, "resume ID", "thaw them"},
    {"exec", nsbox_ociexec_exec,
     "exec [--detach] [--pid-file F] [--console-socket S] [--tty] [--cwd DIR]\n"
     "      [--env K=V] [--user UID[:GID]] [--additional-gids G[,G...]]\n"
     "      [--preserve-fds N] [--cap CAP] [--no-new-privs] (--process F | ID CMD...)",
     "run in a running one, as any of its users, within its capabilities"},
    {"ps", nsbox_ocips_ps, "ps [--format json|table] ID", "its processes (host pids)"},
    {"update", nsbox_ociupdate_update, "update --resources FILE|- ID",
     "new memory, cpu, pids limits"},
    {"features", nsbox_ocicmds_features, "features", "what is supported, as JSON"},
};

static void usage(void)
{
    printf("usage: nsbox-oci [--root DIR] [--log FILE] [--log-format text|json]\n"
           "                 [--idmap-volumes engine|none] COMMAND ...\n"
           "       --root: the containers' state (default " NSBOX_OCI_DEFAULT_ROOT "); it and\n"
           "       every directory above it must be writable by root alone\n"
           "       --systemd-cgroup: linux.cgroupsPath is systemd's slice:prefix:name\n"
           "       --idmap-volumes engine|none: engine: a bind of one of Docker's named\n"
           "       volumes (<data-root>/volumes/NAME/_data, beside the container's root) is\n"
           "       idmapped, writable by the container's root as host root, as under runc;\n"
           "       none (the default): bound as it is. Set it where the runtime is registered\n"
           "       (daemon.json: \"runtimeArgs\": [\"--idmap-volumes=engine\"])\n"
           "       (and runc's --debug: accepted)\n"
           "       nsbox-oci --version\n"
           "       nsbox-oci COMMAND --help\n\n");
    for (size_t k = 0; k < sizeof commands / sizeof commands[0]; k++)
        printf("  %s\n      %s\n", commands[k].synopsis, commands[k].what);
    printf("\n  --preserve-fds N (create, run, exec): the caller's descriptors 3 to 3+N-1 (N\n"
           "  up to 250) are the process's too, at the same numbers; create started by socket\n"
           "  activation (LISTEN_FDS, LISTEN_PID its pid) passes those first, as runc\n\n"
           "An nsbox sandbox for each container: see docs/oci.md.\n");
}

/* Global flags before the command; "--flag value" and "--flag=value". Returns the command's
 * index, or -1 with a message in e. */
static int parse_globals(struct nsbox_ocirt *g, int argc, char **argv, struct nsbox_err *e)
{
    int i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        char *a = argv[i], *val = NULL, name[32];
        char *eq = strchr(a, '=');
        size_t len = eq ? (size_t)(eq - a) : strlen(a);
        snprintf(name, sizeof name, "%.*s", (int)len, a);
        bool takes = !strcmp(name, "--root") || !strcmp(name, "--log") ||
                     !strcmp(name, "--log-format") || !strcmp(name, "--criu") ||
                     !strcmp(name, "--rootless") || !strcmp(name, "--idmap-volumes");
        if (takes) {
            val = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
            if (!val)
                return nsbox_err_invalid(e, "%s needs a value", name);
        }
        if (!strcmp(name, "--root"))
            snprintf(g->root, sizeof g->root, "%s", val);
        else if (!strcmp(name, "--log"))
            g->log = val;
        else if (!strcmp(name, "--log-format"))
            g->log_json = !strcmp(val, "json");
        else if (!strcmp(name, "--debug"))
            g->debug = true;
        else if (!strcmp(name, "--systemd-cgroup"))
            g->systemd_cgroup = true;
        else if (!strcmp(name, "--idmap-volumes") && strcmp(val, "engine") && strcmp(val, "none"))
            return nsbox_err_invalid(e,
                                     "--idmap-volumes %s: give engine (the engine's named "
                                     "volumes idmapped, writable by the container's root as "
                                     "under runc) or none (the default)",
                                     NSBOX_SHOW(val));
        else if (!strcmp(name, "--idmap-volumes"))
            g->idmap_engine_volumes = !strcmp(val, "engine");
        else if (!strcmp(name, "--version") || !strcmp(name, "-v"))
            return -2;
        else if (!strcmp(name, "--help") || !strcmp(name, "-h"))
            return -3;
        else if (!takes)
            return nsbox_err_invalid(e, "unknown global option %s", NSBOX_SHOW(name));
    }
    return i;
}

int main(int argc, char **argv)
{
    static struct nsbox_ocirt g;
    struct nsbox_err e = {0};
    /* the container's init wipes it: /proc/1/cmdline is readable inside, and would show the
     * host's paths (root, bundle, log) */
    nsbox_cmdline_region(argv[0], argv[argc - 1] + strlen(argv[argc - 1]) + 1);
    snprintf(g.root, sizeof g.root, "%s", NSBOX_OCI_DEFAULT_ROOT);
    int i = parse_globals(&g, argc, argv, &e);
    if (i == -2 || (i > 0 && i < argc && !strcmp(argv[i], "--version"))) {
        /* the first line is runc's, which callers parse */
        printf("runc version 1.1.0\ncommit: nsbox-oci %s\nspec: 1.0.2\n", NSBOX_VERSION);
        return 0;
    }
    if (i == -3 || (i > 0 && i >= argc)) {
        usage();
        return i == -3 ? 0 : 1;
    }
    if (i < 0) {
        nsbox_ocilog_say(&g, NSBOX_OCILOG_BOTH, "error", "%s", e.msg);
        return 1;
    }
    for (size_t k = 0; k < sizeof commands / sizeof commands[0]; k++) {
        if (strcmp(argv[i], commands[k].name))
            continue;
        if (i + 1 < argc && (!strcmp(argv[i + 1], "--help") || !strcmp(argv[i + 1], "-h"))) {
            printf("usage: nsbox-oci %s\n      %s\n", commands[k].synopsis, commands[k].what);
            return 0;
        }
        if ((!strcmp(argv[i], "create") || !strcmp(argv[i], "run")) &&
            nsbox_config_load_types(NULL, &e) < 0) {
            nsbox_ocilog_say(&g, NSBOX_OCILOG_BOTH, "error", "%s", e.msg);
            return 1;
        }
        /* every command but these acts on the state under --root */
        if (strcmp(argv[i], "spec") && strcmp(argv[i], "features") &&
            nsbox_ocistate_check_root(&g, &e) < 0) {
            nsbox_ocilog_say(&g, NSBOX_OCILOG_BOTH, "error", "%s", e.msg);
            return 1;
        }
        int r = commands[k].fn(&g, argc - i, argv + i, &e);
        if (r != 0 && e.msg[0])
            nsbox_ocilog_say(&g, NSBOX_OCILOG_BOTH, "error", "%s", e.msg);
        return r;
    }
    /* runc's commands that nsbox-oci has not: named as such, not as a typo */
    static const char *const not_done[] = {"events", "checkpoint", "restore"};
    for (size_t k = 0; k < sizeof not_done / sizeof not_done[0]; k++)
        if (!strcmp(argv[i], not_done[k])) {
            nsbox_err_set(&e, NSBOX_E_UNSUPPORTED, ENOTSUP,
                          "'%s' is a runc command that nsbox-oci does not have (see "
                          "nsbox-oci --help)",
                          argv[i]);
            nsbox_ocilog_say(&g, NSBOX_OCILOG_BOTH, "error", "%s", e.msg);
            return 1;
        }
    nsbox_err_invalid(&e, "unknown command '%s' (see nsbox-oci --help)", NSBOX_SHOW(argv[i]));
    nsbox_ocilog_say(&g, NSBOX_OCILOG_BOTH, "error", "%s", e.msg);
    return 1;
}
