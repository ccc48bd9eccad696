/* nsbox command line: which command runs (one table), and what every command shares before it
 * runs. The commands are in cli/CMD.c (cli.h); cli/ is the only layer that prints errors and
 * chooses exit codes (docs/architecture.md): the command's own, 124 timed out, 125 nsbox failed,
 * 126, 127, 128+N. */
#define _GNU_SOURCE
#include "cleanup.h"
#include "config.h"
#include "cli.h"
#include "cfgcheck.h"
#include "cmdline.h"
#include "help.h"
#include "filemax.h"
#include "net.h"
#include "nsbox.h"
#include "say.h"
#include "spec.h"
#include "util.h"
#include "warmpool.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmd_version(int argc, char **argv)
{
    printf("nsbox %s\n", NSBOX_VERSION);
    return 0;
}

/* nsbox help [CMD] */
static int cmd_help(int argc, char **argv)
{
    if (argc > 1 && nsbox_help_print(argv[1], stdout) < 0)
        return nsbox_say_usage("no command '%s'", NSBOX_SHOW(argv[1]));
    if (argc <= 1)
        nsbox_help_print(NULL, stdout);
    return 0;
}

/* Every command, by the name it is given (its help: nsbox_help_print(name), help.c). */
static const struct command {
    const char *name;
    int (*handler)(int argc, char **argv);
    /* It makes a sandbox, and so reads the instance types first: NULL never, "" always, else
     * with this sub-command. */
    const char *makes;
} commands[] = {
    {"run", nsbox_cli_run, ""},
    {"info", nsbox_cli_info, NULL},
    {"image", nsbox_cli_image, NULL},
    {"gc", nsbox_cli_gc, NULL},
    {"pool", nsbox_cli_pool, "fill"},
    {"create", nsbox_cli_create, ""},
    {"exec", nsbox_cli_exec, NULL},
    {"ls", nsbox_cli_ls, NULL},
    {"inspect", nsbox_cli_inspect, NULL},
    {"rm", nsbox_cli_rm, NULL},
    {"ps", nsbox_cli_ps, NULL},
    {"kill", nsbox_cli_kill, NULL},
    {"logs", nsbox_cli_logs, NULL},
    {"wait", nsbox_cli_wait, NULL},
    {"cp", nsbox_cli_cp, NULL},
    {"version", cmd_version, NULL},
    {"--version", cmd_version, NULL},
    {"-v", cmd_version, NULL}, /* docker's and podman's -v */
    /* before any CMD --help: "nsbox help --help" asks for the help of a command "--help" */
    {"help", cmd_help, NULL},
    {"--help", cmd_help, NULL},
    {"-h", cmd_help, NULL},
};

static const struct command *find_command(const char *name)
{
    for (size_t i = 0; i < NSBOX_ARRAY_LEN(commands); i++)
        if (!strcmp(commands[i].name, name))
            return &commands[i];
    return NULL;
}

/* Supervisors and the pool's fillers work from "/": a relative $NSBOX_CONFIG would name
 * another file there. */
static void config_path_absolute(void)
{
    const char *cfg = getenv("NSBOX_CONFIG");
    if (cfg && cfg[0] && cfg[0] != '/') {
        char *abs = realpath(cfg, NULL);
        if (abs)
            setenv("NSBOX_CONFIG", abs, 1);
        free(abs);
    }
}

int main(int argc, char **argv)
{
    nsbox_cmdline_region(argv[0], argv[argc - 1] + strlen(argv[argc - 1]) + 1);
    if (argc < 2) {
        nsbox_help_print(NULL, stderr);
        return EXIT_USAGE;
    }
    const char *cmd = argv[1];
    /* A peer that went away (a closed pipe or socket) is an error to report, not a reason to
     * die silently and leave a sandbox behind. Commands in sandboxes get default dispositions. */
    signal(SIGPIPE, SIG_IGN);
    /* An ignored SIGCHLD survives exec: from a caller that ignores it, nsbox (and the supervisor
     * and init it forks) would never be told that a child ended, and would wait for ever. */
    signal(SIGCHLD, SIG_DFL);
    nsbox_warmpool_install();
    config_path_absolute();
    /* Instance types may be overridden by $NSBOX_CONFIG or /etc/nsbox/config.json; a broken
     * file is an error for every command that makes a sandbox, rather than silently different
     * limits. The others (rm, ls, gc, pool drain, ...) do not read it: a mistake in it must not
     * stop the clean-up. info says what is wrong with it. */
    struct nsbox_err e = {0};
    const struct command *c = find_command(cmd);
    bool makes = c && c->makes && (!c->makes[0] || (argc > 2 && !strcmp(argv[2], c->makes)));
    /* every section, whatever the sandbox uses: a typo in the network section went unnoticed
     * until a sandbox with --network all (docs/spec.md promises that misspelled keys fail) */
    if (makes && nsbox_cfgcheck_all(&e) < 0)
        return nsbox_say_fail(&e);
    if (c && c->handler == cmd_help)
        return cmd_help(argc - 1, argv + 1);
    nsbox_help_cmd = cmd;
    /* nsbox CMD --help, -h among its leading options (not after "--" or the first operand, where
     * it is the sandbox command's own: nsbox run -- grep -h) */
    for (int k = 2; k < argc && argv[k][0] == '-' && strcmp(argv[k], "--") != 0; k++)
        if ((!strcmp(argv[k], "--help") || !strcmp(argv[k], "-h")) &&
            nsbox_help_print(cmd, stdout) == 0)
            return 0;
    /* docker's options before the command (-H, --context, -D, ...) are not its run
     * options: -c there is a context, not CPU shares */
    if (!c && cmd[0] == '-')
        return nsbox_say_usage("unknown option %s before the command: nsbox has no global "
                               "options, each command takes its own after its name",
                               NSBOX_SHOW(cmd));
    if (!c) {
        const char *names[NSBOX_ARRAY_LEN(commands)];
        for (size_t k = 0; k < NSBOX_ARRAY_LEN(commands); k++)
            names[k] = commands[k].name[0] == '-' ? NULL : commands[k].name;
        return nsbox_say_unknown("unknown command", NSBOX_SHOW(cmd), names, NSBOX_ARRAY_LEN(names),
                                 NULL);
    }
    return c->handler(argc - 1, argv + 1);
}
