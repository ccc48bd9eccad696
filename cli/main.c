/* nsbox command line. The only place that prints errors and chooses exit codes
 * (docs/architecture.md): the command's own, 124 timed out, 125 nsbox failed, 126, 127, 128+N. */
#define _GNU_SOURCE
#include "cleanup.h"
#include "cmdline.h"
#include "ociref.h"
#include "image.h"
#include "info.h"
#include "nsbox.h"
#include "spec.h"
#include "gc.h"
#include "state.h"
#include "supervisor.h"
#include "launch.h"
#include "paths.h"
#include "relay.h"
#include "cgroup.h"
#include "pool.h"
#include "proto.h"
#include "client.h"
#include "sessions.h"
#include "help.h"
#include "util.h"
#include "warmpool.h"
#include "workspace.h"
#include "net.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define EXIT_NSBOX 125
#define EXIT_USAGE 125 /* a usage error is nsbox failing, as docker run does */

static int fail(const struct nsbox_err *e)
{
    fprintf(stderr, "nsbox: %s\n", e->msg);
    /* The region rule's text is the hosted SDK's, to the letter, and speaks Python. */
    if (strstr(e->msg, "Pass network=Network.all() or a supported region."))
        fprintf(stderr, "(on the command line: --network all, or --region nl-north-1)\n");
    return EXIT_NSBOX;
}

static int usage_error(const char *fmt, const char *arg)
{
    fprintf(stderr, "nsbox: ");
    fprintf(stderr, fmt, arg);
    fputc('\n', stderr);
    nsbox_help_hint(stderr);
    return EXIT_USAGE;
}

/* Read a whole file given on the command line, bounded; the caller's error names it. A regular
 * file, or "-" (standard input) and other streams such as a pipe, read to their end but never
 * past max bytes. "-" reads fd 0 itself: /dev/stdin is absent on minimal systems, and cannot be
 * opened at all when fd 0 is a socket. */
static char *read_file_arg(const char *path, size_t max, size_t *len, struct nsbox_err *e)
{
    bool std_in = !strcmp(path, "-");
    cleanup_close int own = std_in ? -1 : open(path, O_RDONLY | O_CLOEXEC);
    int fd = std_in ? 0 : own;
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0) {
        nsbox_err_sys(e, "cannot open");
        return NULL;
    }
    bool regular = S_ISREG(st.st_mode);
    if (S_ISDIR(st.st_mode) || (regular && (size_t)st.st_size > max)) {
        nsbox_err_set(e, NSBOX_E_INVALID, EFBIG, "not a file of at most %zu bytes", max);
        return NULL;
    }
    /* a regular file's size says how much to read; a stream is read to its end, one byte past
     * max at most, to tell an oversized one */
    size_t want = regular ? (size_t)st.st_size : max + 1;
    char *buf = malloc(want + 1);
    if (!buf) {
        nsbox_err_sys(e, "malloc");
        return NULL;
    }
    size_t got = 0;
    while (got < want) {
        ssize_t n = read(fd, buf + got, want - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            nsbox_err_sys(e, "cannot read");
            free(buf);
            return NULL;
        }
        if (n == 0)
            break;
        got += (size_t)n;
    }
    if (got > max) {
        nsbox_err_set(e, NSBOX_E_INVALID, EFBIG, "more than %zu bytes", max);
        free(buf);
        return NULL;
    }
    buf[got] = '\0';
    *len = got;
    return buf;
}

/* As root, a workspace directory owned by root (uid or gid 0) is bound plainly, never
 * idmapped (docs/workspace.md): the sandbox's appuser writes there only what others may.
 * Said once on stderr, since a run's or a setup script's first write would fail there. */
static void note_root_workspace(const char *dir)
{
    struct stat sb;
    if (!dir[0] || geteuid() != 0 || stat(dir, &sb) < 0 || !S_ISDIR(sb.st_mode) ||
        (sb.st_uid != 0 && sb.st_gid != 0) || (sb.st_mode & S_IWOTH) ||
        nsbox_workspace_forbidden(dir)) /* refused later, with the reason */
        return;
    /* chown -R is advice for a project directory, never for the system's own */
    static const char *const system[] = {"/bin", "/boot", "/etc", "/lib", "/lib32", "/lib64",
                                         "/opt", "/root", "/run", "/sbin", "/srv", "/usr", "/var"};
    bool sys = strchr(dir + 1, '/') == NULL; /* any directory right under / */
    for (size_t i = 0; i < NSBOX_ARRAY_LEN(system); i++)
        sys = sys || nsbox_path_within(dir, system[i]);
    char advice[PATH_MAX + 64];
    snprintf(advice, sizeof advice,
             sys ? "it is a system directory: give a copy of what the sandbox needs"
                 : "chown -R USER: %s hands it to USER and USER's group",
             dir);
    fprintf(stderr,
            "nsbox: note: --workspace %s belongs to root (its %s is 0), which is never mapped into "
            "a sandbox: the sandbox can write there only what others may (%s; docs/workspace.md)\n",
            dir, sb.st_uid == 0 ? "owner" : "group", advice);
}

/* The sandbox OPTIONS of run and create (and pool fill), each with what it sets. */
enum opt_kind {
    OPT_SPEC,      /* a spec field: key */
    OPT_SPEC_FILE, /* --spec: applied before every other option */
    OPT_SCRIPT,    /* --setup-script: a file's content into setup_script */
    OPT_TIMEOUT,   /* run only */
    OPT_CWD,       /* run only */
};

struct opt_def {
    const char *flag, *key;
    enum opt_kind kind;
};

static const struct opt_def sandbox_opts[] = {
    {"--instance-type", "instance_type", OPT_SPEC},
    {"--idle-timeout", "idle_timeout_seconds", OPT_SPEC},
    {"--ttl", "ttl_seconds", OPT_SPEC},
    {"--region", "region", OPT_SPEC},
    {"--network", "network", OPT_SPEC},
    {"--egress", "egress", OPT_SPEC},
    {"--image", "image", OPT_SPEC},
    {"--setup-timeout", "setup_script_timeout_seconds", OPT_SPEC},
    {"--workspace", "workspace", OPT_SPEC},
    {"-e", "env", OPT_SPEC},
    {"--env", "env", OPT_SPEC},
    {"--spec", NULL, OPT_SPEC_FILE},
    {"--setup-script", "setup_script", OPT_SCRIPT},
    {"--timeout", NULL, OPT_TIMEOUT},
    {"--cwd", NULL, OPT_CWD},
};

static const struct opt_def *find_opt(const char *name)
{
    for (size_t k = 0; k < NSBOX_ARRAY_LEN(sandbox_opts); k++)
        if (!strcmp(name, sandbox_opts[k].flag))
            return &sandbox_opts[k];
    return NULL;
}

/* Parse sandbox OPTIONS (shared by run and create). Returns 0 with *next at the first
 * non-option (after a "--"), 1 when help was printed, -1 with e filled, -2 after a usage error
 * was printed. run_opts: NULL where --timeout/--cwd are not accepted. */
static int parse_options(int argc, char **argv, struct nsbox_spec *spec,
                         struct nsbox_run_opts *run_opts, int *next, struct nsbox_err *e)
{
    int i;
    /* --spec is applied first wherever it stands: a JSON key replaces that option's whole
     * value, so flags must come after it to add to or override it. */
    for (i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--") || a[0] != '-')
            break;
        const char *val = NULL;
        if (!strncmp(a, "--spec=", 7))
            val = a + 7;
        else if (!strcmp(a, "--spec") && i + 1 < argc)
            val = argv[i + 1];
        if (!strchr(a, '='))
            i++; /* every option takes a value: skip it */
        if (!val)
            continue;
        size_t len;
        cleanup_free char *json = read_file_arg(val, NSBOX_SPEC_JSON_MAX, &len, e);
        if (!json || nsbox_spec_from_json(spec, json, len, e) < 0)
            return nsbox_err_wrap(e, "--spec %s", val);
    }

    for (i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--"))
            break;
        if (a[0] != '-') /* first non-option: the command */
            break;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            nsbox_help_print(nsbox_help_cmd, stdout);
            return 1;
        }
        /* --flag=value and --flag value */
        char name[64];
        const char *val = NULL;
        const char *eq = strchr(a, '=');
        if (a[1] == '-' && eq && (size_t)(eq - a) < sizeof name) {
            memcpy(name, a, (size_t)(eq - a));
            name[eq - a] = '\0';
            val = eq + 1;
        } else {
            snprintf(name, sizeof name, "%s", a);
        }
        const struct opt_def *opt = find_opt(name);
        if (run_opts && (!strcmp(name, "-i") || !strcmp(name, "-t") || !strcmp(name, "-it") ||
                         !strcmp(name, "-ti"))) {
            usage_error("run has no terminal or stdin flags (%s): its stdin is passed through "
                        "already; for an interactive shell: id=$(nsbox create); nsbox exec -it "
                        "$id -- bash",
                        name);
            return -2;
        }
        if (!opt) {
            usage_error("unknown option %s", name);
            return -2;
        }
        if ((opt->kind == OPT_TIMEOUT || opt->kind == OPT_CWD) && !run_opts) {
            usage_error(opt->kind == OPT_TIMEOUT
                            ? "%s is an option of run and exec, not of this command (a "
                              "sandbox's lifetime: --ttl S)"
                            : "%s is an option of run and exec, not of this command",
                        name);
            return -2;
        }
        if (!val) {
            if (i + 1 >= argc) {
                usage_error("option %s needs a value", a);
                return -2;
            }
            val = argv[++i];
        }
        switch (opt->kind) {
        case OPT_SPEC: {
            char abs[PATH_MAX];
            /* The spec takes absolute paths only; a relative one on the command line means
             * relative to where nsbox was started. An image given by path has a '/' in it (a
             * bare word is a stored image's name). */
            bool rel_dir = val[0] && val[0] != '/' &&
                           (!strcmp(opt->key, "workspace") ||
                            (!strcmp(opt->key, "image") && strchr(val, '/') &&
                             !nsbox_ociref_is_reference(val)));
            if (rel_dir) {
                if (!realpath(val, abs))
                    return nsbox_err_sys(e, "%s %s", name, val);
                val = abs;
            }
            if (nsbox_spec_set(spec, opt->key, val, e) < 0)
                return -1;
            break;
        }
        case OPT_SPEC_FILE: /* applied above */
            break;
        case OPT_SCRIPT: {
            size_t len;
            cleanup_free char *script = read_file_arg(val, NSBOX_SCRIPT_MAX, &len, e);
            if (script && strlen(script) != len)
                return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL,
                                     "--setup-script %s: contains a NUL byte", val);
            if (!script)
                return nsbox_err_wrap(e, "--setup-script %s", val);
            if (nsbox_spec_set(spec, opt->key, script, e) < 0)
                return -1;
            break;
        }
        case OPT_TIMEOUT:
            if (nsbox_parse_seconds(val, NSBOX_TIMEOUT_MAX_S, &run_opts->timeout_ms) < 0) {
                usage_error(NSBOX_TIMEOUT_USAGE, val);
                return -2;
            }
            break;
        case OPT_CWD: {
            /* relative to /workspace, as for exec and the Python client */
            static char abs[PATH_MAX + 16];
            if (val[0] != '/')
                snprintf(abs, sizeof abs, "/workspace/%s", val);
            run_opts->cwd = val[0] == '/' ? val : abs;
            break;
        }
        }
    }
    if (i < argc && !strcmp(argv[i], "--"))
        i++;
    *next = i;
    note_root_workspace(spec->workspace);
    return 0;
}

static int cmd_run(int argc, char **argv)
{
    struct nsbox_spec spec;
    nsbox_spec_init(&spec);
    struct nsbox_err e = {0};
    struct nsbox_run_opts o = {.stdin_fd = 0, .stdout_fd = 1, .stderr_fd = 2};
    int rc = EXIT_NSBOX, i;
    int pr = parse_options(argc, argv, &spec, &o, &i, &e);
    if (pr != 0) {
        nsbox_spec_free(&spec);
        return pr == 1 ? 0 : pr == -2 ? EXIT_USAGE : fail(&e);
    }
    if (i >= argc) {
        nsbox_spec_free(&spec);
        return usage_error("%s", "run needs a command: nsbox run [OPTIONS] -- CMD [ARG...]");
    }
    if (nsbox_spec_validate(&spec, &e) < 0 || nsbox_run_check(&spec, &e) < 0)
        goto out_err;
    /* ttl_seconds is a hard limit on the sandbox's life; for a one-shot sandbox it bounds the
     * command like --timeout does, whichever comes first. */
    uint64_t ttl_ms = spec.ttl_seconds * 1000;
    if (ttl_ms && (!o.timeout_ms || ttl_ms < o.timeout_ms))
        o.timeout_ms = ttl_ms;

    int status, oom_kills = 0;
    bool timed_out = false;
    o.oom_kills = &oom_kills;
    o.timed_out = &timed_out;
    /* A file, a terminal, a socket or a named FIFO of ours is relayed through a pipe, not
     * shared with the command; a pipe is opened anew; /dev/null is given as it is (relay.h).
     * The sandbox and all in it end with the command. */
    int stdio[3] = {o.stdin_fd, o.stdout_fd, o.stderr_fd};
    struct nsbox_relay relay;
    if (nsbox_relay_start(&relay, stdio, false) < 0) {
        nsbox_err_sys(&e, "cannot relay the command's input and output");
        goto out_err;
    }
    o.stdin_fd = stdio[0], o.stdout_fd = stdio[1], o.stderr_fd = stdio[2];
    /* A sandbox made ahead for these settings, when the pool is on (docs/pool.md). */
    int pr2 = nsbox_pool_run(&spec, argv + i, &o, &status, &oom_kills, &e);
    if (pr2 < 0) {
        nsbox_relay_finish(&relay);
        goto out_err;
    }
    bool made = true; /* the cold run made its sandbox (a failed command counts, too) */
    int r2 = pr2 == 1 ? 0 : nsbox_run(&spec, argv + i, &o, &status, &e);
    /* The command has ended: what it wrote is copied before anything of ours is said. */
    nsbox_relay_finish(&relay);
    if (pr2 == 1) {
        rc = status;
    } else if (r2 < 0) {
        if (e.code == NSBOX_E_EXEC) {
            fprintf(stderr, "nsbox: %s\n", e.msg);
            rc = status;
        } else {
            made = false;
            rc = fail(&e);
        }
    } else {
        rc = status;
    }
    /* A run that could not make its sandbox (a missing image, no cgroup delegation) is no
     * sign of runs to come, and a fill would fail the same way. */
    if (pr2 == NSBOX_POOL_EMPTY && made)
        nsbox_pool_after_cold_run(&spec);
    /* said, so that it is not taken for a command that exits 124 itself (as an OOM kill is) */
    if (timed_out)
        fprintf(stderr, "nsbox: timed out: the command ran past %s of %llu.%03llu s, and its "
                        "processes were killed (exit code 124)\n",
                o.timeout_ms == ttl_ms ? "the spec's ttl_seconds" : "--timeout",
                (unsigned long long)(o.timeout_ms / 1000),
                (unsigned long long)(o.timeout_ms % 1000));
    if (oom_kills > 0)
        fprintf(stderr, "nsbox: out of memory: the instance type's limit (%s, %llu MiB) killed %d "
                        "process%s%s\n",
                spec.instance_type, (unsigned long long)(spec.limits.memory_bytes >> 20), oom_kills,
                oom_kills == 1 ? "" : "es",
                /* a user's workspace is a tmpfs, whose files are memory (docs/workspace.md) */
                geteuid() != 0 && !spec.workspace[0] ? " (the workspace's files count toward it: "
                                                      "without root it is a tmpfs)"
                                                    : "");
    nsbox_spec_free(&spec);
    return rc;
out_err:
    nsbox_spec_free(&spec);
    return fail(&e);
}

/* A command's own flags, taken out of argv before the shared option parser sees the rest: one
 * without a value sets *set; one with a number takes the next argument, from min to max. */
struct own_flag {
    const char *name;
    bool *set;
    long *value, min, max;
    const char *what; /* "--name needs <what>, not '...'" */
};

/* Returns 0, or EXIT_USAGE after saying why. */
static int strip_own_flags(int *argc, char **argv, const struct own_flag *f, size_t n)
{
    int k = 1;
    for (int j = 1; j < *argc; j++) {
        size_t i = 0;
        while (i < n && (strcmp(argv[j], f[i].name) != 0 || (f[i].value && j + 1 >= *argc)))
            i++;
        if (i == n) {
            argv[k++] = argv[j];
        } else if (f[i].set) {
            *f[i].set = true;
        } else {
            char *end;
            long v = strtol(argv[++j], &end, 10);
            if (*end || end == argv[j] || v < f[i].min || v > f[i].max) {
                char msg[512];
                snprintf(msg, sizeof msg, "%s needs %s, not '%s'", f[i].name, f[i].what,
                         NSBOX_SHOW(argv[j]));
                return usage_error("%s", msg);
            }
            *f[i].value = v;
        }
    }
    *argc = k;
    return 0;
}

static int cmd_create(int argc, char **argv)
{
    struct nsbox_spec spec;
    nsbox_spec_init(&spec);
    struct nsbox_err e = {0};
    bool json = false;
    long owner_pid = 0;
    const struct own_flag own[] = {
        {"--json", &json, NULL, 0, 0, NULL},
        {"--owner-pid", NULL, &owner_pid, 1, 4194304, "a process id"},
    };
    if (strip_own_flags(&argc, argv, own, NSBOX_ARRAY_LEN(own)) != 0) {
        nsbox_spec_free(&spec);
        return EXIT_USAGE;
    }
    int i;
    int pr = parse_options(argc, argv, &spec, NULL, &i, &e);
    if (pr != 0) {
        nsbox_spec_free(&spec);
        return pr == 1 ? 0 : pr == -2 ? EXIT_USAGE : fail(&e);
    }
    if (i < argc) {
        nsbox_spec_free(&spec);
        return usage_error("create takes no command (unexpected '%s'); use nsbox exec",
                           NSBOX_SHOW(argv[i]));
    }
    /* The id is the only handle on the sandbox: with nowhere to print it, nobody could use or
     * remove the sandbox. (A closed descriptor 1 would also be taken by the first file nsbox
     * opens, and the id written there.) */
    if (fcntl(STDOUT_FILENO, F_GETFD) < 0) {
        nsbox_spec_free(&spec);
        nsbox_err_set(&e, NSBOX_E_INVALID, EBADF,
                      "create: stdout is closed, so the new sandbox's id could not be given; "
                      "nothing was created");
        return fail(&e);
    }
    /* What goes around the id on stdout: the supervisor writes it there itself, and that
     * write is the moment the sandbox is given (nsbox_session_create). */
    /* With --json, {"id":"ID","runtime_dir":"..."} as cJSON prints it (ids need no escaping). */
    char *after = NULL;
    if (json) {
        char rt[PATH_MAX];
        if (nsbox_path_runtime_dir(rt, sizeof rt, &e) < 0)
            rt[0] = '\0';
        cJSON *s = cJSON_CreateString(rt);
        char *quoted = s ? cJSON_PrintUnformatted(s) : NULL;
        cJSON_Delete(s);
        if (!quoted || asprintf(&after, "\",\"runtime_dir\":%s}\n", quoted) < 0) {
            free(quoted);
            nsbox_spec_free(&spec);
            nsbox_err_set(&e, NSBOX_E_SYS, ENOMEM, "create: out of memory");
            return fail(&e);
        }
        free(quoted);
    }
    char id[NSBOX_ID_LEN + 1];
    int signo = 0;
    const struct nsbox_id_out out = {STDOUT_FILENO, json ? "{\"id\":\"" : "",
                                     json ? after : "\n", &signo};
    struct nsbox_err ge;
    nsbox_gc_implicit(&ge); /* at most once a second: it visits every sandbox */
    int r = nsbox_spec_validate(&spec, &e) < 0 ||
                    nsbox_session_create(&spec, (int)owner_pid, NULL, id, &out, &e) < 0
                ? -1
                : 0;
    nsbox_spec_free(&spec);
    free(after);
    if (r == 0)
        return 0;
    if (json) {
        /* Machine-readable too: clients map the code to their typed errors. */
        cJSON *o = cJSON_CreateObject(), *er = cJSON_AddObjectToObject(o, "error");
        cJSON_AddStringToObject(er, "code", nsbox_errcode_wire(e.code));
        cJSON_AddStringToObject(er, "message", e.msg);
        char *t = cJSON_PrintUnformatted(o);
        printf("%s\n", t ? t : "{}");
        free(t);
        cJSON_Delete(o);
    }
    int code = fail(&e);
    if (signo) {
        /* Ended by the signal, as the caller expects of an interrupted command (a shell's
         * loop stops on it), now that nothing of the sandbox is left. */
        fflush(stdout);
        signal(signo, SIG_DFL);
        raise(signo);
    }
    return code;
}

/* nsbox pool fill [--size N] [OPTIONS] | drain | ls [--json] */
static int cmd_pool(int argc, char **argv)
{
    struct nsbox_err e = {0};
    const char *sub = argc > 1 ? argv[1] : "";
    if (!strcmp(sub, "drain") && argc == 2) {
        int n = nsbox_pool_drain(&e);
        if (n < 0)
            return fail(&e);
        printf("deleted %d pooled sandbox%s\n", n, n == 1 ? "" : "es");
        return 0;
    }
    if (!strcmp(sub, "ls") && (argc == 2 || (argc == 3 && !strcmp(argv[2], "--json"))))
        return nsbox_pool_list(argc == 3, &e) < 0 ? fail(&e) : 0;
    if (strcmp(sub, "fill") != 0)
        return usage_error("%s", "usage: nsbox pool fill [--size N] [OPTIONS] | drain | "
                                 "ls [--json]");
    long size = 0, since_ns = 0;
    bool refill = false; /* internal: a used pooled sandbox's replacement */
    const struct own_flag own[] = {
        {"--refill", &refill, NULL, 0, 0, NULL},
        /* internal: started by a run at this time (ns), which a later drain stops */
        {"--after-run", NULL, &since_ns, 1, LONG_MAX, "a time in nanoseconds"},
        {"--size", NULL, &size, 1, NSBOX_POOL_MAX_SIZE, "a number from 1 to 16"},
    };
    argc--, argv++; /* argv[0] is "fill" now */
    for (int k = 1; k < argc && strcmp(argv[k], "--") != 0; k++) {
        static const char *const no[] = {"--ttl", "--idle-timeout", "-e", "--env"};
        for (size_t j = 0; j < NSBOX_ARRAY_LEN(no); j++) {
            size_t n = strlen(no[j]);
            if (!strncmp(argv[k], no[j], n) && (!argv[k][n] || argv[k][n] == '='))
                return usage_error("pool fill: %s does not apply to pooled sandboxes (they live "
                                   "the pool's ttl_seconds and never sleep; a run brings its own "
                                   "-e; docs/pool.md)",
                                   no[j]);
        }
    }
    if (strip_own_flags(&argc, argv, own, NSBOX_ARRAY_LEN(own)) != 0)
        return EXIT_USAGE;
    struct nsbox_spec spec;
    nsbox_spec_init(&spec);
    int i;
    int pr = parse_options(argc, argv, &spec, NULL, &i, &e);
    if (pr != 0) {
        nsbox_spec_free(&spec);
        return pr == 1 ? 0 : pr == -2 ? EXIT_USAGE : fail(&e);
    }
    if (i < argc) {
        nsbox_spec_free(&spec);
        return usage_error("pool fill takes no command (unexpected '%s')",
                           NSBOX_SHOW(argv[i]));
    }
    unsigned ready = 0;
    if (nsbox_spec_validate(&spec, &e) < 0 || nsbox_pool_fill(&spec, (unsigned)size, refill, since_ns, &ready, &e) < 0) {
        nsbox_spec_free(&spec);
        return fail(&e);
    }
    nsbox_spec_free(&spec);
    printf("%u pooled sandbox%s ready\n", ready, ready == 1 ? "" : "es");
    return 0;
}

static int cmd_gc(int argc, char **argv)
{
    bool verbose = argc > 1 && !strcmp(argv[1], "-v");
    if (argc > (verbose ? 2 : 1)) /* a typo of -v was taken for no option */
        return usage_error("gc: unexpected argument '%s' (nsbox gc [-v])",
                           NSBOX_SHOW(argv[verbose ? 2 : 1]));
    struct nsbox_err e = {0};
    int n = nsbox_gc(verbose, &e);
    if (n < 0)
        return fail(&e);
    /* Only here, not in the implicit gc of other commands: it walks every hierarchy. */
    unsigned orphans = nsbox_cgroup_sweep_orphans(NSBOX_GC_ORPHAN_AGE);
    if (verbose) {
        printf("removed %d leftover sandbox%s\n", n, n == 1 ? "" : "es");
        printf("removed %u empty sandbox cgroup%s older than %d minutes\n", orphans,
               orphans == 1 ? "" : "s", NSBOX_GC_ORPHAN_AGE / 60);
    }
    return 0;
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
    nsbox_pool_install();
    /* Supervisors and the pool's fillers work from "/": a relative $NSBOX_CONFIG would name
     * another file there. */
    const char *cfg = getenv("NSBOX_CONFIG");
    if (cfg && cfg[0] && cfg[0] != '/') {
        char *abs = realpath(cfg, NULL);
        if (abs)
            setenv("NSBOX_CONFIG", abs, 1);
        free(abs);
    }
    /* Instance types may be overridden by $NSBOX_CONFIG or /etc/nsbox/config.json; a broken
     * file is an error for every command that makes a sandbox, rather than silently different
     * limits. The others (rm, ls, gc, pool drain, ...) do not read it: a mistake in it must not
     * stop the clean-up. info says what is wrong with it. */
    struct nsbox_err e = {0};
    bool makes = !strcmp(cmd, "run") || !strcmp(cmd, "create") ||
                 (!strcmp(cmd, "pool") && argc > 2 && !strcmp(argv[2], "fill"));
    /* the network section too, whatever the network: a typo there went unnoticed until a
     * sandbox with --network all (docs/spec.md promises that misspelled keys fail) */
    if (makes && (nsbox_instance_types_load(NULL, &e) < 0 || nsbox_net_config_check(&e) < 0))
        return fail(&e);
    if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help") || !strcmp(cmd, "help")) {
        /* nsbox help [CMD] */
        if (argc > 2 && nsbox_help_print(argv[2], stdout) < 0)
            return usage_error("no command '%s'", NSBOX_SHOW(argv[2]));
        if (argc <= 2)
            nsbox_help_print(NULL, stdout);
        return 0;
    }
    nsbox_help_cmd = cmd;
    /* nsbox CMD --help, -h among its leading options (not after "--" or the first operand, where
     * it is the sandbox command's own: nsbox run -- grep -h) */
    for (int k = 2; k < argc && argv[k][0] == '-' && strcmp(argv[k], "--") != 0; k++)
        if ((!strcmp(argv[k], "--help") || !strcmp(argv[k], "-h")) &&
            nsbox_help_print(cmd, stdout) == 0)
            return 0;
    if (!strcmp(cmd, "version") || !strcmp(cmd, "--version")) {
        printf("nsbox %s\n", NSBOX_VERSION);
        return 0;
    }
    if (!strcmp(cmd, "run"))
        return cmd_run(argc - 1, argv + 1);
    if (!strcmp(cmd, "info"))
        return nsbox_cli_info(argc - 1, argv + 1);
    if (!strcmp(cmd, "image"))
        return nsbox_cli_image(argc - 1, argv + 1);
    if (!strcmp(cmd, "gc"))
        return cmd_gc(argc - 1, argv + 1);
    if (!strcmp(cmd, "pool"))
        return cmd_pool(argc - 1, argv + 1);
    if (!strcmp(cmd, "create"))
        return cmd_create(argc - 1, argv + 1);
    if (!strcmp(cmd, "exec"))
        return nsbox_cli_exec(argc - 1, argv + 1);
    if (!strcmp(cmd, "ls"))
        return nsbox_cli_ls(argc - 1, argv + 1);
    if (!strcmp(cmd, "inspect"))
        return nsbox_cli_inspect(argc - 1, argv + 1);
    if (!strcmp(cmd, "rm"))
        return nsbox_cli_rm(argc - 1, argv + 1);
    if (!strcmp(cmd, "ps"))
        return nsbox_cli_ps(argc - 1, argv + 1);
    if (!strcmp(cmd, "kill"))
        return nsbox_cli_kill(argc - 1, argv + 1);
    if (!strcmp(cmd, "logs"))
        return nsbox_cli_logs(argc - 1, argv + 1);
    if (!strcmp(cmd, "wait"))
        return nsbox_cli_wait(argc - 1, argv + 1);
    if (!strcmp(cmd, "cp"))
        return nsbox_cli_cp(argc - 1, argv + 1);
    return usage_error("unknown command '%s'", NSBOX_SHOW(cmd));
}
