/* The sandbox OPTIONS of run, create and pool fill (see options.h). */
#define _GNU_SOURCE
#include "options.h"
#include "ociref.h"
#include "dockeropt.h"
#include "cleanup.h"
#include "cli.h"
#include "help.h"
#include "httphead.h"
#include "say.h"
#include "state.h"
#include "util.h"
#include "workspace.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

/* The sandbox OPTIONS of run and create (and pool fill), each with what it sets. */
enum opt_kind {
    OPT_SPEC,      /* a spec field: key */
    OPT_SPEC_FILE, /* --spec: applied before every other option */
    OPT_SCRIPT,    /* --setup-script: a file's content into setup_script */
    OPT_TIMEOUT,   /* run only */
    OPT_CWD,       /* run only */
    OPT_NETLOG,    /* run only */
    OPT_SPEC_OFF,  /* a flag without a value: sets the spec's boolean key to false */
    OPT_BINDING,   /* --header-binding HOST:HEADER=env:VAR|file:PATH */
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
    {"--pull", "pull", OPT_SPEC},
    {"--setup-timeout", "setup_script_timeout_seconds", OPT_SPEC},
    {"--workspace", "workspace", OPT_SPEC},
    {"-e", "env", OPT_SPEC},
    {"--env", "env", OPT_SPEC},
    {"--no-background-processes", "supports_background_processes", OPT_SPEC_OFF},
    {"--header-binding", NULL, OPT_BINDING},
    {"--spec", NULL, OPT_SPEC_FILE},
    {"--setup-script", "setup_script", OPT_SCRIPT},
    {"--timeout", NULL, OPT_TIMEOUT},
    {"--cwd", NULL, OPT_CWD},
    {"--network-log", NULL, OPT_NETLOG},
};

static const struct opt_def *find_opt(const char *name)
{
    for (size_t k = 0; k < NSBOX_ARRAY_LEN(sandbox_opts); k++)
        if (!strcmp(name, sandbox_opts[k].flag))
            return &sandbox_opts[k];
    return NULL;
}

/* --spec is applied first wherever it stands: a JSON key replaces that option's whole value, so
 * flags must come after it to add to or override it. */
static int apply_spec_files(int argc, char **argv, struct nsbox_spec *spec, struct nsbox_err *e)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--") || a[0] != '-')
            break;
        const char *val = NULL;
        if (!strncmp(a, "--spec=", 7))
            val = a + 7;
        else if (!strcmp(a, "--spec") && i + 1 < argc)
            val = argv[i + 1];
        const struct opt_def *o = find_opt(a);
        if (!strchr(a, '=') && !(o && o->kind == OPT_SPEC_OFF))
            i++; /* every other option takes a value: skip it */
        if (!val)
            continue;
        size_t len;
        cleanup_free char *json = read_file_arg(val, NSBOX_SPEC_JSON_MAX, &len, e);
        if (!json || nsbox_spec_from_json(spec, json, len, e) < 0)
            return nsbox_err_wrap(e, "--spec %s", val);
    }
    return 0;
}

/* A usage error of an option: said, -2. */
static int option_usage(const char *fmt, const char *arg)
{
    nsbox_say_usage(fmt, arg);
    return -2;
}

/* The option name (its "=value" cut off) refused, with why, before its value is looked at:
 * -2 after saying so, else 0. */
static int refuse_option(const char *name, const struct opt_def *opt,
                         const struct nsbox_run_opts *run_opts)
{
    if (run_opts && (!strcmp(name, "-i") || !strcmp(name, "-t") || !strcmp(name, "-it") ||
                     !strcmp(name, "-ti")))
        return option_usage("run has no terminal or stdin flags (%s): " NSBOX_DOCKEROPT_SHELL,
                            name);
    if (!opt) {
        /* the suggestion is among the options this command takes */
        const char *names[NSBOX_ARRAY_LEN(sandbox_opts)];
        for (size_t k = 0; k < NSBOX_ARRAY_LEN(sandbox_opts); k++) {
            enum opt_kind kind = sandbox_opts[k].kind;
            bool run_only = kind == OPT_TIMEOUT || kind == OPT_CWD || kind == OPT_NETLOG;
            names[k] = run_only && !run_opts ? NULL : sandbox_opts[k].flag;
        }
        nsbox_say_unknown("unknown option", NSBOX_SHOW(name), names, NSBOX_ARRAY_LEN(names), NULL);
        return -2;
    }
    if (opt->kind == OPT_NETLOG && !run_opts)
        return option_usage("%s is an option of run: a persistent sandbox keeps its network log "
                            "in its state directory (nsbox logs --network ID)",
                            name);
    if ((opt->kind == OPT_TIMEOUT || opt->kind == OPT_CWD) && !run_opts)
        return option_usage(opt->kind == OPT_TIMEOUT
                                ? "%s is an option of run and exec, not of this command (a "
                                  "sandbox's lifetime: --ttl S)"
                                : "%s is an option of run and exec, not of this command",
                            name);
    return 0;
}

#define BINDING_USAGE                                                                              \
    "--header-binding %s: expected HOST[:PORT]:HEADER=env:VAR or HOST[:PORT]:HEADER=file:PATH "    \
    "(the value is read from nsbox's own environment or a file, never from the command line, "     \
    "where every user of this machine could read it)"

/* The secret is read here, from nsbox's environment or a file: argv is readable by everyone in
 * /proc. One trailing newline of a file is not part of the value (editors and `echo` add it). */
static int apply_binding(const char *val, struct nsbox_spec *spec, struct nsbox_err *e)
{
    const char *eq = strchr(val, '=');
    const char *colon = eq ? memrchr(val, ':', (size_t)(eq - val)) : NULL;
    /* what is said back stops before '=': what follows may be a secret given by mistake */
    char shown[NSBOX_HOSTNAME_MAX + NSBOX_HTTPHEAD_NAME_MAX + 16];
    snprintf(shown, sizeof shown, "%.*s%s", (int)(eq ? eq - val : (ptrdiff_t)strlen(val)), val,
             eq ? "=..." : "");
    if (!colon || colon == val || colon + 1 == eq)
        return option_usage(BINDING_USAGE, shown);
    cleanup_free char *host = strndup(val, (size_t)(colon - val));
    cleanup_free char *header = strndup(colon + 1, (size_t)(eq - colon - 1));
    if (!host || !header)
        return nsbox_err_sys(e, "--header-binding");
    const char *src = eq + 1;
    char *value = NULL;
    size_t len = 0;
    if (!strncmp(src, "env:", 4)) {
        const char *v = getenv(src + 4);
        if (!v || !*v)
            return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL,
                                 "--header-binding %s: the variable %s is not set in nsbox's "
                                 "environment (or is empty)",
                                 shown, NSBOX_SHOW(src + 4));
        if (!(value = strdup(v)))
            return nsbox_err_sys(e, "--header-binding");
        len = strlen(value);
        /* out of this process's environment, bytes included: the supervisor and the egress
         * helper it forks would otherwise carry it (and show it in /proc/PID/environ) */
        explicit_bzero((char *)v, len);
        unsetenv(src + 4);
    } else if (!strncmp(src, "file:", 5)) {
        value = read_file_arg(src + 5, NSBOX_HTTPHEAD_VALUE_MAX + 2, &len, e);
        /* the file's path said on its own: after the host and header it would be cut off */
        if (!value)
            return nsbox_err_wrap(e, "--header-binding %s, %s", shown, NSBOX_SHOW(src));
        if (len && value[len - 1] == '\n')
            value[--len] = '\0';
        if (len && value[len - 1] == '\r')
            value[--len] = '\0';
    } else {
        return option_usage(BINDING_USAGE, shown);
    }
    int r = strlen(value) != len ? nsbox_err_set(e, NSBOX_E_INVALID, EINVAL, "contains a NUL byte")
                                 : nsbox_spec_bind_add(spec, host, header, value, e);
    explicit_bzero(value, len);
    free(value);
    return r < 0 ? nsbox_err_wrap(e, "--header-binding %s", NSBOX_SHOW(val)) : 0;
}

/* One option's value into spec or run_opts: 0, -1 with e filled, -2 after a usage error. */
static int apply_option(const struct opt_def *opt, const char *name, const char *val,
                        struct nsbox_spec *spec, struct nsbox_run_opts *run_opts,
                        struct nsbox_err *e)
{
    switch (opt->kind) {
    case OPT_SPEC: {
        if (!strcmp(opt->key, "env") && !strchr(val, '=')) {
            nsbox_say_env_usage(name, val);
            return -2;
        }
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
        return nsbox_spec_set(spec, opt->key, val, e) < 0 ? -1 : 0;
    }
    case OPT_SPEC_FILE: /* applied first, by apply_spec_files */
        return 0;
    case OPT_SPEC_OFF:
        return nsbox_spec_set(spec, opt->key, "false", e) < 0 ? -1 : 0;
    case OPT_BINDING:
        return apply_binding(val, spec, e);
    case OPT_SCRIPT: {
        size_t len;
        cleanup_free char *script = read_file_arg(val, NSBOX_SCRIPT_MAX, &len, e);
        if (script && strlen(script) != len)
            return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL,
                                 "--setup-script %s: contains a NUL byte", val);
        if (!script)
            return nsbox_err_wrap(e, "--setup-script %s", val);
        return nsbox_spec_set(spec, opt->key, script, e) < 0 ? -1 : 0;
    }
    case OPT_TIMEOUT:
        if (nsbox_parse_seconds(val, NSBOX_TIMEOUT_MAX_S, &run_opts->timeout_ms) < 0)
            return option_usage(NSBOX_TIMEOUT_USAGE, val);
        return 0;
    case OPT_NETLOG:
        run_opts->network_log = val;
        return 0;
    case OPT_CWD: {
        /* relative to /workspace, as for exec and the Python client */
        static char abs[PATH_MAX + 16];
        if (val[0] != '/')
            snprintf(abs, sizeof abs, "/workspace/%s", val);
        run_opts->cwd = val[0] == '/' ? val : abs;
        return 0;
    }
    }
    return 0;
}

const char *nsbox_options_split(const char *a, char *name, size_t n)
{
    const char *eq = a[0] == '-' && a[1] == '-' ? strchr(a, '=') : NULL;
    if (eq && (size_t)(eq - a) < n) {
        memcpy(name, a, (size_t)(eq - a));
        name[eq - a] = '\0';
        return eq + 1;
    }
    snprintf(name, n, "%s", a);
    return NULL;
}

int nsbox_options_parse(int argc, char **argv, struct nsbox_spec *spec,
                        struct nsbox_run_opts *run_opts, int *next, struct nsbox_err *e)
{
    if (apply_spec_files(argc, argv, spec, e) < 0)
        return -1;
    int i;
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
        const char *val = nsbox_options_split(a, name, sizeof name);
        const struct opt_def *opt = find_opt(name);
        if (refuse_option(name, opt, run_opts) < 0)
            return -2;
        if (opt->kind == OPT_SPEC_OFF) {
            if (val)
                return option_usage("option %s takes no value", a);
            val = "";
        } else if (!val) {
            if (i + 1 >= argc)
                return option_usage("option %s needs a value", a);
            val = argv[++i];
        }
        int r = apply_option(opt, name, val, spec, run_opts, e);
        if (r < 0)
            return r;
    }
    if (i < argc && !strcmp(argv[i], "--"))
        i++;
    *next = i;
    return 0;
}

int nsbox_options_parse_no_command(int argc, char **argv, struct nsbox_spec *spec, const char *cmd,
                                   const char *hint)
{
    struct nsbox_err e = {0};
    int i;
    int pr = nsbox_options_parse(argc, argv, spec, NULL, &i, &e);
    if (pr == 0 && i >= argc)
        return -1;
    nsbox_spec_free(spec);
    if (pr != 0)
        return pr == 1 ? 0 : pr == -2 ? EXIT_USAGE : nsbox_say_fail(&e);
    char msg[512];
    snprintf(msg, sizeof msg, "%s takes no command (unexpected '%s')%s", cmd, NSBOX_SHOW(argv[i]),
             hint);
    return nsbox_say_usage("%s", msg);
}

int nsbox_options_strip_own(int *argc, char **argv, const struct nsbox_own_flag *f, size_t n)
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
                return nsbox_say_usage("%s", msg);
            }
            *f[i].value = v;
        }
    }
    *argc = k;
    return 0;
}
