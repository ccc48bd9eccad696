/* The command line's help: `nsbox --help` (every command on a line or two) and `nsbox CMD
 * --help` / `nsbox help CMD` (one command, each of its options). One table, so that a usage
 * error can point at the help of the command that was mistyped. */
#include "help.h"

#include <string.h>

const char *nsbox_help_cmd;

/* run, create and pool fill describe a sandbox with the same options (cli/options.c,
 * nsbox_options_parse; docs/spec.md has the JSON form). */
#define SANDBOX_OPTIONS                                                                           \
    "sandbox options (--spec first, then the others in order, later ones winning; docs/spec.md):\n" \
    "  --instance-type small|medium|large  CPUs, memory, pids and workspace disk (nsbox info)\n"  \
    "  --network none|all|allow=H[,H]      none (default): loopback only; allow: those hosts\n"   \
    "  --egress CIDR[,CIDR]                also allow these IPv4 ranges (in any mode)\n"         \
    "  --header-binding HOST[:PORT]:HEADER=env:VAR|file:PATH\n"                                   \
    "                                      add HEADER with that value to every HTTPS request to\n" \
    "                                      HOST (port 443 unless given, as in allow=); the value\n"\
    "                                      never enters the sandbox (repeatable; network all,\n"  \
    "                                      or allow with HOST; docs/network.md)\n"               \
    "  --region R                          nl-north-1 (default); elsewhere, as in the hosted\n"   \
    "                                      sandbox, only --network all\n"                          \
    "  --image host|debian|NAME|REF|/DIR   the root filesystem; REF: python:3.12 (docs/images.md)\n"                \
    "  --pull missing|always|never         when an image REF is pulled ($NSBOX_PULL, else missing)\n" \
    "  --workspace DIR                     bind DIR as /workspace: kept, no disk limit\n"         \
    "  -e, --env K=V                       an environment variable (repeatable)\n"                \
    "  --no-background-processes           refuse exec -d (supports_background_processes=false)\n" \
    "  --spec FILE.json|-                  the options as JSON, applied first\n"

#define EXIT_CODES                                                                                \
    "exit code: the command's own; 124 timed out; 125 nsbox failed; 126 not executable;\n"        \
    "127 not found; 128+N killed by signal N\n"

static const char overview[] =
    "usage: nsbox COMMAND [ARGS]     (nsbox COMMAND --help: its options)\n"
    "\n"
    "  run [OPTIONS] -- CMD [ARG...]   one-shot sandbox: create, run, delete\n"
    "  create [OPTIONS] [--json]       start a persistent sandbox, print its id\n"
    "  exec [-i] [-t] [-d] [--timeout S] [--cwd DIR] [-e K=V] ID -- CMD [ARG...]\n"
    "                                  (--cwd: relative to /workspace)\n"
    "  cp [-p] SRC DST                 ID:path on either side (a path in /workspace; into a\n"
    "                                  directory keeps the name; -p makes missing directories)\n"
    "  ls [-a] [--json|-q] | inspect ID | rm ID... | ps ID | kill ID PID [SIG] | logs ID PID\n"
    "  logs --network [-f] ID          the sandbox's connections through its egress helper\n"
    "                                  (a bound host's: each request, no header, no query)\n"
    "  wait [--timeout S] ID PID       until a background process ends; its exit code\n"
    "  info [--json]                   what this machine supports and how to fix what is missing\n"
    "  image build host|debian | pull REF | import FILE|DIR|- | ls | inspect | tag | rm | prune\n"
    "  gc [-v]                         remove what crashed sandboxes left behind\n"
    "  pool fill [--size N] [OPTIONS] | drain | ls [--json]\n"
    "                                  sandboxes made ahead for nsbox run (docs/pool.md)\n"
    "  version                         (also --version, -v)\n"
    "\n"
    "run and create OPTIONS (--spec first, then the others in order, later ones winning):\n"
    "  --instance-type small|medium|large   --region R    --spec FILE.json|-   -e K=V\n"
    "  --network none|all|allow=H[,H]    --egress CIDR[,CIDR]\n"
    "  --header-binding HOST[:PORT]:HEADER=env:VAR|file:PATH (a secret header for HOST)\n"
    "  --image host|debian|NAME|REF|/DIR   --pull missing|always|never\n"
    "  --workspace DIR (yours, kept, no disk limit)   --no-background-processes\n"
    "run only:     --timeout S   --cwd DIR (relative: to /workspace)   --network-log FILE\n"
    "create only:  --idle-timeout S   --setup-script FILE   --setup-timeout S   (and --ttl S,\n"
    "              which bounds a run as --timeout does)\n"
    "              --owner-pid PID (deleted when that process ends: --owner-pid $$ in a CI job)\n"
    "              --json\n"
    "\n" EXIT_CODES;

static const struct {
    const char *cmd;
    const char *text;
} helps[] = {
    {"run", "usage: nsbox run [OPTIONS] -- CMD [ARG...]\n"
            "  a one-shot sandbox: made, CMD run in /workspace as appuser, deleted at its end\n"
            "  (runs that repeat take ready-made sandboxes from the warm pool: docs/pool.md)\n"
            "\n"
            "  --timeout S                         kill CMD's whole process tree after S seconds\n"
            "  --cwd DIR                           where CMD starts (relative: to /workspace)\n"
            "  --network-log FILE                  with allow=NAMES or --header-binding: the\n"
            "                                      connections through the egress helper (a\n"
            "                                      bound host's requests), JSON lines, into FILE\n"
            "  --ttl S                             as --timeout (the sandbox's hard limit)\n" SANDBOX_OPTIONS
            "\n" EXIT_CODES},
    {"create", "usage: nsbox create [OPTIONS] [--json]\n"
               "  start a persistent sandbox and print its id; a supervisor process owns it until\n"
               "  nsbox rm, its --ttl or its --owner-pid deletes it; a create that is\n"
               "  interrupted before it has printed the id leaves no sandbox\n"
               "\n"
               "  --ttl S                             deleted S seconds after its creation\n"
               "  --idle-timeout S                    sleeps (frozen) after S seconds without a\n"
               "                                      request, background processes too (0: never)\n"
               "  --owner-pid PID                     deleted when that process ends (CI: $$)\n"
               "  --setup-script FILE|-               run once before the first command; its\n"
               "                                      failure deletes the sandbox\n"
               "  --setup-timeout S                   the setup script's time limit\n"
               "  --json                              print {\"id\": ...}, or {\"error\": ...} on failure\n" SANDBOX_OPTIONS},
    {"exec", "usage: nsbox exec [OPTIONS] ID -- CMD [ARG...]\n"
             "  run CMD in the sandbox ID, as nsbox run does; its exit code is ours\n"
             "\n"
             "  -i                                  pass our stdin to CMD (else it reads nothing)\n"
             "  -t                                  a terminal (with -i: an interactive shell)\n"
             "  -d                                  in the background: print its pid and return\n"
             "                                      (then nsbox ps, logs, wait, kill)\n"
             "  --timeout S                         kill CMD's whole process tree after S seconds\n"
             "                                      (exit 124; with -d: counted from its start)\n"
             "  --cwd DIR                           where CMD starts (relative: to /workspace)\n"
             "  -e, --env K=V                       an environment variable (repeatable)\n"
             "a first Ctrl-C is passed to CMD; a second kills its tree\n"
             "\n" EXIT_CODES},
    {"cp", "usage: nsbox cp [-p] SRC DST\n"
           "  copy a file between the host and a sandbox; exactly one side is ID:PATH, a path in\n"
           "  its /workspace (ID:data.csv and ID:/workspace/data.csv are the same; another\n"
           "  absolute path, ID:/tmp/x, is refused: cp reaches only the workspace)\n"
           "  into a directory (DST ending in / or existing) keeps the name; ID: alone is\n"
           "  the workspace itself\n"
           "\n"
           "  -p                                  make DST's missing directories\n"},
    {"ls", "usage: nsbox ls [-a] [--json | -q]\n"
           "  the persistent sandboxes of this user: id, state, instance type, created, expires\n"
           "  -q, --quiet    the ids alone, one a line (nsbox rm $(nsbox ls -q))\n"
           "  -a, --all      the warm pool's waiting sandboxes too (state pooled)\n"},
    {"inspect", "usage: nsbox inspect ID\n"
                "  a sandbox's spec, state, limits, usage, disk and processes, as JSON\n"},
    {"rm", "usage: nsbox rm ID...\n"
           "  delete sandboxes and all they hold; an id already deleted is not an error\n"},
    {"ps", "usage: nsbox ps ID\n"
           "  the sandbox's processes started by exec -d: pid, status, command\n"},
    {"kill", "usage: nsbox kill ID PID [SIG]\n"
             "  signal a background process (default TERM; a number or a name: KILL, SIGINT)\n"},
    {"logs", "usage: nsbox logs [-f] ID PID\n"
             "       nsbox logs --network [-f] ID\n"
             "  a background process's output: its stdout on ours, its stderr on ours\n"
             "  (the last 64 KiB of each)\n"
             "\n"
             "  -f, --follow    then what it writes, as it writes it, until it has ended\n"
             "                  and all its output is shown, or until our reader goes\n"
             "                  (| grep -m1 ready); exit 0 (nsbox wait gives its exit code)\n"
             "  --network       the sandbox's network log instead: one JSON object a line\n"
             "                  per connection its egress helper decided on (allow= with\n"
             "                  host names; docs/network.md \"The network log\"); with -f,\n"
             "                  until the sandbox ends\n"},
    {"wait", "usage: nsbox wait [--timeout S] ID PID\n"
             "  until a background process ends; its exit code is ours\n"
             "\n"
             "  --timeout S                         give up after S seconds: exit 124, and the\n"
             "                                      process runs on\n"},
    {"info", "usage: nsbox info [--json]\n"
             "  what this machine supports, what is missing and how to fix it\n"
             "  exit 0: every required check passed; 1: a required check failed; 2: usage error\n"},
    {"image", "usage: nsbox image build host|debian [--quiet]   build or rebuild a stored image\n"
              "       nsbox image ls [--json]                   list stored images\n"
              "       nsbox image rm [-f] NAME|REF...           remove stored images (-f: missing "
              "is ok)\n"
              "       nsbox image pull [-q] [--json] [--tls-verify=false] REF  pull an OCI/docker "
              "image (skopeo)\n"
              "       nsbox image import [-q] [--json] [--name REF] FILE|DIR|-  a docker save or "
              "OCI archive, or an OCI layout\n"
              "         (progress on a terminal only; --json: the result as JSON)\n"
              "       nsbox image inspect REF                   its config and manifest (JSON)\n"
              "       nsbox image tag SOURCE REF                another name for an image\n"
              "       nsbox image prune                         remove images no name refers "
              "to, and layers no image uses\n"},
    {"gc", "usage: nsbox gc [-v]\n"
           "  remove what killed or crashed sandboxes left behind: processes, mounts, cgroups,\n"
           "  state; and the cached seccomp programs of other nsbox or libseccomp versions;\n"
           "  other commands do the cheap part of this on their own\n"
           "\n"
           "  -v                                  say how much was removed\n"},
    {"pool", "usage: nsbox pool fill [--size N] [OPTIONS]   make N sandboxes ahead (1-16) for runs\n"
             "                                              with these OPTIONS (as run's)\n"
             "       nsbox pool drain                       delete every pooled sandbox\n"
             "       nsbox pool ls [--json]                 the pools and their sandboxes\n"
             "  runs that repeat fill a pool on their own; it is gone 60 s after its last run\n"
             "  (docs/pool.md)\n"},
    {"version", "usage: nsbox version\n"},
};

int nsbox_help_print(const char *cmd, FILE *f)
{
    if (!cmd) {
        if (f)
            fputs(overview, f);
        return 0;
    }
    for (size_t i = 0; i < sizeof helps / sizeof helps[0]; i++)
        if (!strcmp(helps[i].cmd, cmd)) {
            if (f)
                fputs(helps[i].text, f);
            return 0;
        }
    return -1;
}

void nsbox_help_hint(FILE *f)
{
    if (nsbox_help_cmd && nsbox_help_print(nsbox_help_cmd, NULL) == 0)
        fprintf(f, "(see nsbox %s --help)\n", nsbox_help_cmd);
    else
        fputs("(see nsbox --help)\n", f);
}
