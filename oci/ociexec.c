/* nsbox-oci exec: another process in a running container (docs/oci.md).
 *
 * The container's init forks it (ocimon.c relays the request to init's agent), so it is inside
 * every namespace and the cgroup and as hardened as init. Here is the caller's side: the
 * process (--process FILE, or the bundle's process with the command and flags given), the
 * request with our stdin, stdout and stderr, and the relay that stands for the process:
 * signals it gets go to the process, and it exits with the process's status. The caller (a
 * subreaper: containerd's shim, conmon) waits for the pid in --pid-file, so with --detach that
 * relay is our child, which the caller inherits when we exit. */
#include "ocirt.h"
#include "agent.h"
#include "cleanup.h"
#include "ociproc.h"
#include "ocispec.h"
#include "signals.h"
#include "tty.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <linux/capability.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#define EXEC_ENV_MAX 64
_Static_assert(NSBOX_OCISPEC_GROUPS_MAX <= NSBOX_SPAWNUSER_GROUPS_MAX,
               "a process's groups fit a request");

struct exec_args {
    const char *process, *pid_file, *console_socket, *cwd, *user, *id;
    bool detach, tty, no_new_privs;
    unsigned preserve_fds; /* --preserve-fds: 3, 4, ... passed on (ocifds.c) */
    const char *env[EXEC_ENV_MAX];
    size_t n_env;
    const char *gids[NSBOX_OCISPEC_GROUPS_MAX]; /* --additional-gids, each "N[,N...]" */
    size_t n_gids;
    uint64_t caps; /* --cap, as a mask of 1 << CAP_* */
    char **cmd; /* after the id, without --process */
    int n_cmd;
};

/* What the relay tells exec once the process runs, or why it does not. */
struct relay_report {
    int code; /* 0: running; else exec's exit code */
    struct nsbox_err err;
};

/* --cap NAME (runc's: CAP_NET_ADMIN, say) into *caps; the floor's refused as at create. */
static int add_cap(const char *name, uint64_t *caps, struct nsbox_err *e)
{
    int n = nsbox_ocispec_cap_number(name);
    if (n < 0)
        return nsbox_err_invalid(e,
                                 "exec --cap '%s': unknown capability (give its name as "
                                 "process.capabilities does: CAP_NET_BIND_SERVICE, say)",
                                 NSBOX_SHOW(name));
    if (n == CAP_SYS_ADMIN || n == CAP_SYS_MODULE)
        return nsbox_err_set(e, NSBOX_E_POLICY, EPERM,
                             "exec --cap %s: privileged processes are not supported: "
                             "nsbox-oci never grants %s (docs/oci.md, the floor)",
                             name, name);
    *caps |= UINT64_C(1) << n;
    return 0;
}

static int parse_args(int argc, char **argv, struct exec_args *a, struct nsbox_err *e)
{
    static const struct option opts[] = {
        {"process", required_argument, NULL, 'p'},
        {"detach", no_argument, NULL, 'd'},
        {"pid-file", required_argument, NULL, 'P'},
        {"console-socket", required_argument, NULL, 'c'},
        {"tty", no_argument, NULL, 't'},
        {"cwd", required_argument, NULL, 'w'},
        {"env", required_argument, NULL, 'e'},
        {"user", required_argument, NULL, 'u'},
        {"cap", required_argument, NULL, 'C'},
        {"additional-gids", required_argument, NULL, 'g'},
        {"no-new-privs", no_argument, NULL, 'n'},
        {"apparmor", required_argument, NULL, 'a'},
        {"process-label", required_argument, NULL, 'l'},
        {"preserve-fds", required_argument, NULL, 'f'},
        {"ignore-paused", no_argument, NULL, 'i'},
        {"cgroup", required_argument, NULL, 'G'},
        {NULL, 0, NULL, 0},
    };
    int o;
    optind = 1;
    while ((o = getopt_long(argc, argv, "+p:dte:u:g:", opts, NULL)) != -1) {
        if (o == 'p')
            a->process = optarg;
        else if (o == 'd')
            a->detach = true;
        else if (o == 'P')
            a->pid_file = optarg;
        else if (o == 'c')
            a->console_socket = optarg;
        else if (o == 't')
            a->tty = true;
        else if (o == 'w')
            a->cwd = optarg;
        else if (o == 'u')
            a->user = optarg;
        else if (o == 'n')
            a->no_new_privs = true;
        else if (o == 'f' && nsbox_ocifds_parse("exec", optarg, &a->preserve_fds, e) < 0)
            return -1;
        else if (o == 'g' && a->n_gids == NSBOX_OCISPEC_GROUPS_MAX)
            return nsbox_err_invalid(e, "exec: more than %d --additional-gids",
                                     NSBOX_OCISPEC_GROUPS_MAX);
        else if (o == 'g')
            a->gids[a->n_gids++] = optarg;
        else if (o == 'e' && a->n_env == EXEC_ENV_MAX)
            return nsbox_err_invalid(e, "exec: more than %d --env", EXEC_ENV_MAX);
        else if (o == 'e')
            a->env[a->n_env++] = optarg;
        else if (o == 'C' && add_cap(optarg, &a->caps, e) < 0)
            return -1;
        else if (o == '?')
            return nsbox_err_invalid(e, "exec: unknown option");
    }
    if (optind >= argc)
        return nsbox_err_invalid(e, "exec: give a container id");
    a->id = argv[optind];
    a->cmd = argv + optind + 1;
    a->n_cmd = argc - optind - 1;
    if (!a->process && a->n_cmd == 0)
        return nsbox_err_invalid(e, "exec: give --process FILE or a command after the id");
    return 0;
}

static int read_json(const char *path, const char *what, char **text, struct nsbox_err *e)
{
    int r = nsbox_read_small(path, text, e);
    if (r == 1)
        return nsbox_err_set(e, NSBOX_E_NOTFOUND, ENOENT, "%s %s does not exist", what, path);
    return r < 0 ? nsbox_err_wrap(e, "%s", what) : 0;
}

/* "uid[:gid]" of --user. */
static int parse_user(const char *text, struct nsbox_ocispec *c, struct nsbox_err *e)
{
    char *end;
    unsigned long uid = strtoul(text, &end, 10), gid = c->gid;
    if (end != text && *end == ':')
        gid = strtoul(end + 1, &end, 10);
    if (end == text || *end || text[0] == '-' || uid > 0xfffffffeUL || gid > 0xfffffffeUL)
        return nsbox_err_invalid(e, "exec --user '%s': give uid[:gid] in numbers",
                                 NSBOX_SHOW(text));
    c->uid = (uint32_t)uid, c->gid = (uint32_t)gid;
    return 0;
}

/* --additional-gids, each a gid or a comma-separated list: the process's groups, all of them. */
static int parse_gids(const struct exec_args *a, struct nsbox_ocispec *c, struct nsbox_err *e)
{
    c->n_groups = 0;
    for (size_t i = 0; i < a->n_gids; i++)
        if (nsbox_spawnuser_add_gids(a->gids[i], c->groups, &c->n_groups, NSBOX_OCISPEC_GROUPS_MAX,
                                     e) < 0)
            return nsbox_err_wrap(e, "exec");
    return 0;
}

/* --user and --additional-gids over the process. Another user than the process's gets only
 * the groups given, never the ones the config gives its own user (root's, say). */
static int apply_user(const struct exec_args *a, struct nsbox_ocispec *c, struct nsbox_err *e)
{
    uint32_t uid = c->uid, gid = c->gid;
    if (a->user && parse_user(a->user, c, e) < 0)
        return -1;
    if (a->n_gids || c->uid != uid || c->gid != gid)
        return parse_gids(a, c, e);
    return 0;
}

/* The command line's form: the bundle's process with the command and the flags given. */
static int apply_flags(const struct exec_args *a, struct nsbox_ocispec *c, struct nsbox_err *e)
{
    for (size_t i = 0; i < c->n_args; i++)
        free(c->args[i]);
    free(c->args);
    c->n_args = 0;
    if (!(c->args = calloc((size_t)a->n_cmd + 1, sizeof *c->args)))
        return nsbox_err_sys(e, "calloc");
    for (int i = 0; i < a->n_cmd; i++)
        if (!(c->args[c->n_args++] = strdup(a->cmd[i])))
            return nsbox_err_sys(e, "strdup");
    c->terminal = a->tty;
    c->no_new_privileges = c->no_new_privileges || a->no_new_privs;
    /* --cap as runc's: bounding, effective and permitted, and ambient where the process has
     * inheritable capabilities (ambient ones need them) */
    if (a->caps) {
        c->has_caps = true;
        c->caps[NSBOX_OCI_CAPS_BOUNDING] |= a->caps;
        c->caps[NSBOX_OCI_CAPS_EFFECTIVE] |= a->caps;
        c->caps[NSBOX_OCI_CAPS_PERMITTED] |= a->caps;
        if (c->caps[NSBOX_OCI_CAPS_INHERITABLE])
            c->caps[NSBOX_OCI_CAPS_AMBIENT] |= a->caps;
    }
    if (a->cwd && (a->cwd[0] != '/' || strlen(a->cwd) >= sizeof c->cwd))
        return nsbox_err_invalid(e, "exec --cwd '%s': give an absolute path", NSBOX_SHOW(a->cwd));
    if (a->cwd)
        snprintf(c->cwd, sizeof c->cwd, "%s", a->cwd);
    for (size_t i = 0; i < a->n_env; i++) {
        const char *eq = strchr(a->env[i], '=');
        if (!eq || eq == a->env[i])
            return nsbox_err_invalid(e, "exec --env '%s': give KEY=value", NSBOX_SHOW(a->env[i]));
        size_t k = 0; /* a key given again replaces the config's */
        while (k < c->n_env && strncmp(c->env[k], a->env[i], (size_t)(eq - a->env[i]) + 1))
            k++;
        if (k == NSBOX_OCISPEC_ENV_MAX)
            return nsbox_err_invalid(e, "exec: more than %d variables", NSBOX_OCISPEC_ENV_MAX);
        char *v = strdup(a->env[i]);
        if (!v)
            return nsbox_err_sys(e, "strdup");
        if (k < c->n_env)
            free(c->env[k]);
        else
            c->n_env++;
        c->env[k] = v;
    }
    return 0;
}

/* The exec'd process, checked against the floor and the container's capabilities: init forks
 * it, with the process's own sets (the container's when it names none), never above the
 * container's. The container's are those of the config create kept: the bundle's config.json
 * may have changed since, by anyone who can write the bundle. */
static int load_process(const struct nsbox_ocirt *g, const struct exec_args *a,
                        const struct nsbox_ocistate *s, struct nsbox_ocispec *c,
                        struct nsbox_err *e)
{
    static struct nsbox_ocispec cfg; /* large: the mounts */
    cleanup_free char *ptext = NULL;
    if (nsbox_ocistate_read_config(g, s, &cfg, e) < 0)
        return -1;
    uint64_t have[NSBOX_OCI_CAPSET_KINDS];
    memcpy(have, cfg.caps, sizeof have);
    if (a->process) {
        nsbox_ocispec_free(&cfg);
        if (read_json(a->process, "--process", &ptext, e) < 0 ||
            nsbox_ociproc_parse_process(ptext, strlen(ptext), c, e) < 0)
            return -1;
        c->terminal = c->terminal || a->tty;
        c->no_new_privileges = c->no_new_privileges || a->no_new_privs;
    } else {
        *c = cfg; /* takes its strings */
        nsbox_ocispec_init(&cfg);
        if (apply_flags(a, c, e) < 0)
            return -1;
    }
    if (apply_user(a, c, e) < 0 || nsbox_ocispec_check_floor(c, e) < 0)
        return -1;
    /* the container's sets need not travel: init's agent gives them to a request that names
     * none (runc's rule), and an init older than the sets' travel takes such a request */
    c->has_caps = c->has_caps && memcmp(c->caps, have, sizeof have) != 0;
    return c->has_caps ? nsbox_ociproc_check_caps(c->caps, have, e) : 0;
}

/* The request: the user, cwd, argv, env as NUL-terminated strings; our stdin, stdout and
 * stderr (without a terminal), then the descriptors passed on. */
static int send_request(int fd, const struct nsbox_ocispec *c, unsigned preserve_fds,
                        struct nsbox_err *e)
{
    struct nsbox_spawnuser u = {.uid = c->uid,
                                .gid = c->gid,
                                .umask = c->umask,
                                .n_groups = c->n_groups,
                                .no_new_privs = c->no_new_privileges,
                                .set_caps = c->has_caps};
    memcpy(u.groups, c->groups, c->n_groups * sizeof *c->groups);
    u.caps[NSBOX_SPAWNUSER_BOUNDING] = c->caps[NSBOX_OCI_CAPS_BOUNDING];
    u.caps[NSBOX_SPAWNUSER_EFFECTIVE] = c->caps[NSBOX_OCI_CAPS_EFFECTIVE];
    u.caps[NSBOX_SPAWNUSER_PERMITTED] = c->caps[NSBOX_OCI_CAPS_PERMITTED];
    u.caps[NSBOX_SPAWNUSER_INHERITABLE] = c->caps[NSBOX_OCI_CAPS_INHERITABLE];
    u.caps[NSBOX_SPAWNUSER_AMBIENT] = c->caps[NSBOX_OCI_CAPS_AMBIENT];
    char utext[NSBOX_SPAWNUSER_TEXT_MAX];
    if (nsbox_spawnuser_format(&u, utext, sizeof utext) < 0)
        return nsbox_err_invalid(e, "exec: the process's user is out of range");
    size_t need = strlen(utext) + 1 + strlen(c->cwd) + 1;
    for (size_t i = 0; i < c->n_args; i++)
        need += strlen(c->args[i]) + 1;
    for (size_t i = 0; i < c->n_env; i++)
        need += strlen(c->env[i]) + 1;
    if (need > NSBOX_AGENT_PAYLOAD_MAX)
        return nsbox_err_invalid(e, "exec: the command line and environment exceed %u KiB",
                                 NSBOX_AGENT_PAYLOAD_MAX / 1024);
    cleanup_free char *buf = malloc(need);
    if (!buf)
        return nsbox_err_sys(e, "malloc");
    size_t off = 0;
    struct nsbox_ocictl_msg m = {.op = "exec",
                                 .argc = (uint32_t)c->n_args,
                                 .envc = (uint32_t)c->n_env,
                                 .len = (uint32_t)need,
                                 .flags = NSBOX_OCICTL_F_USER |
                                          (c->terminal ? NSBOX_OCICTL_F_TTY : 0) |
                                          NSBOX_OCICTL_F_EXTRA(preserve_fds)};
    memcpy(buf, utext, strlen(utext) + 1);
    off = strlen(utext) + 1;
    memcpy(buf + off, c->cwd, strlen(c->cwd) + 1);
    off += strlen(c->cwd) + 1;
    for (size_t i = 0; i < c->n_args; off += strlen(c->args[i]) + 1, i++)
        memcpy(buf + off, c->args[i], strlen(c->args[i]) + 1);
    for (size_t i = 0; i < c->n_env; off += strlen(c->env[i]) + 1, i++)
        memcpy(buf + off, c->env[i], strlen(c->env[i]) + 1);
    /* 0, 1, 2 and those passed on; with a terminal (the process's stdio) the latter alone */
    int fds[3 + NSBOX_AGENT_EXTRA_MAX];
    int first = c->terminal ? 3 : 0;
    size_t n = (size_t)(3 - first) + preserve_fds;
    for (size_t i = 0; i < n; i++)
        fds[i] = first + (int)i;
    return nsbox_ocictl_send(fd, &m, buf, fds, n, e);
}

/* Until the process runs: 0, or exec's exit code with e (125 for nsbox's own failures, 126 and
 * 127 for a command that cannot run). The console's master goes to the socket, or without one
 * into *master_out, for relay() to copy. */
static int wait_spawned(int fd, const char *console, int *master_out, struct nsbox_err *e)
{
    struct nsbox_ocictl_msg r;
    char text[NSBOX_ERR_MSG_MAX];
    int fds[3];
    int got = nsbox_ocictl_recv(fd, &r, text, sizeof text - 1, fds, e);
    if (got <= 0) {
        if (got == 0)
            nsbox_err_set(e, NSBOX_E_SYS, EPIPE, "container not running: it ended");
        return 125;
    }
    text[r.len] = '\0';
    int master = fds[0];
    nsbox_closep(&fds[1]);
    nsbox_closep(&fds[2]);
    if (!strcmp(r.op, "spawned")) {
        int rc = 0;
        if (master >= 0 && !console) { /* ours to relay */
            *master_out = master;
            return 0;
        }
        if (master >= 0 && nsbox_ociconsole_send(console, master, e) < 0)
            rc = 125; /* our end closes: the monitor kills the process */
        nsbox_closep(&master);
        return rc;
    }
    nsbox_closep(&master);
    if (!strcmp(r.op, "failed")) {
        nsbox_err_set(e, NSBOX_E_EXEC, ENOEXEC, "exec failed: %s", text);
        return r.status > 0 ? r.status : 125;
    }
    nsbox_err_set(e, r.status > 0 ? r.status : NSBOX_E_SYS, EINVAL, "%s", text);
    return 125;
}

__attribute__((noreturn)) static void relay_end(int master, int code)
{
    nsbox_ocitty_restore(master);
    _exit(code);
}

/* The process runs: pass our signals on (a window's size to the terminal), copy the terminal
 * (master >= 0), and end with the process's status. A lost monitor means the container ended,
 * which killed it. */
__attribute__((noreturn)) static void relay(int fd, int master)
{
    sigset_t set;
    sigemptyset(&set);
    for (size_t i = 0; i < NSBOX_ARRAY_LEN(nsbox_signals_relayed); i++)
        sigaddset(&set, nsbox_signals_relayed[i]);
    sigaddset(&set, SIGALRM);
    sigaddset(&set, SIGPIPE);
    sigprocmask(SIG_BLOCK, &set, NULL);
    int sfd = signalfd(-1, &set, SFD_CLOEXEC);
    struct nsbox_ocitty t;
    nsbox_ocitty_begin(&t, master);
    for (;;) {
        struct pollfd pf[4] = {{fd, POLLIN, 0}, {sfd, POLLIN, 0}};
        nsbox_ocitty_pollfds(&t, pf + 2);
        if (poll(pf, 4, -1) < 0)
            continue;
        nsbox_ocitty_events(&t, pf + 2);
        struct signalfd_siginfo si;
        struct nsbox_err e;
        if ((pf[1].revents & POLLIN) && read(sfd, &si, sizeof si) == (ssize_t)sizeof si) {
            struct nsbox_ocictl_msg k = {.op = "kill", .status = (int32_t)si.ssi_signo};
            if (si.ssi_signo == SIGWINCH && master >= 0)
                nsbox_tty_resize(master);
            else
                nsbox_ocictl_send(fd, &k, NULL, NULL, 0, &e);
        }
        if (pf[0].revents & (POLLIN | POLLHUP | POLLERR)) {
            struct nsbox_ocictl_msg r;
            int fds[3];
            int got = nsbox_ocictl_recv(fd, &r, NULL, 0, fds, &e);
            for (int i = 0; i < 3; i++)
                nsbox_closep(&fds[i]);
            if (got > 0 && !strcmp(r.op, "exited"))
                relay_end(master, r.status >= 0 && r.status < 256 ? r.status : 125);
            if (got == 0 || (got < 0 && e.sys_errno != EBADMSG))
                relay_end(master, 128 + SIGKILL);
        }
    }
}

/* --detach: the relay is our child; it reports on p once the process runs (or cannot), then
 * gives the caller's streams back (they are the process's) and relays. */
static int exec_detached(int fd, const struct exec_args *a, struct nsbox_err *e)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0)
        return nsbox_err_sys(e, "pipe"), 125;
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        return nsbox_err_sys(e, "fork"), 125;
    if (pid == 0) {
        close(p[0]);
        setsid(); /* not in the caller's job control */
        struct relay_report rep = {0};
        int none = -1;
        rep.code = wait_spawned(fd, a->console_socket, &none, &rep.err);
        ssize_t w = write(p[1], &rep, sizeof rep);
        (void)w;
        if (rep.code)
            _exit(rep.code);
        int null = open("/dev/null", O_RDWR | O_CLOEXEC);
        for (int i = 0; i < 3 && null >= 0; i++)
            dup2(null, i);
        close(p[1]);
        relay(fd, -1);
    }
    close(p[1]);
    close(fd);
    struct relay_report rep;
    ssize_t n;
    do
        n = read(p[0], &rep, sizeof rep);
    while (n < 0 && errno == EINTR);
    close(p[0]);
    if (n != (ssize_t)sizeof rep) {
        waitpid(pid, NULL, 0);
        return nsbox_err_set(e, NSBOX_E_SYS, EPIPE, "exec: the relay ended"), 125;
    }
    if (rep.code) {
        *e = rep.err;
        waitpid(pid, NULL, 0);
        return rep.code;
    }
    if (a->pid_file && nsbox_ocistate_write_pid_file(a->pid_file, pid, e) < 0) {
        kill(pid, SIGKILL); /* its connection closes: the monitor kills the process */
        return 125;
    }
    return 0;
}

static int check_running(const struct nsbox_ocirt *g, const struct nsbox_ocistate *s,
                         struct nsbox_err *e)
{
    enum nsbox_ocistate_status st = nsbox_ocistate_status(g, s);
    if (st == NSBOX_OCI_RUNNING)
        return 0;
    if (st == NSBOX_OCI_PAUSED)
        return nsbox_err_invalid(e, "cannot exec in paused container %s: resume it first", s->id);
    if (st == NSBOX_OCI_CREATED)
        return nsbox_err_invalid(e,
                                 "cannot exec in container %s before its start: start it "
                                 "first, or make it with nsbox-oci run -d (nsbox-oci forks "
                                 "exec'd processes from the container's init, which serves "
                                 "them only once the workload has started)",
                                 s->id);
    return nsbox_err_set(e, NSBOX_E_INVALID, ESRCH, "container %s: container not running", s->id);
}

int nsbox_ociexec_exec(const struct nsbox_ocirt *g, int argc, char **argv, struct nsbox_err *e)
{
    struct exec_args a = {0};
    static struct nsbox_ocispec c; /* large: the mounts */
    struct nsbox_ocistate s;
    if (parse_args(argc, argv, &a, e) < 0 || nsbox_ocistate_read(g, a.id, &s, e) < 0 ||
        check_running(g, &s, e) < 0 || load_process(g, &a, &s, &c, e) < 0)
        return 1;
    if (c.terminal && !a.console_socket && a.detach) {
        nsbox_err_invalid(e, "exec --detach with a terminal needs --console-socket: nobody "
                             "would be there to use the terminal");
        return 1;
    }
    if (a.console_socket && !c.terminal) {
        nsbox_err_invalid(e, "exec --console-socket without a terminal (--tty, or "
                             "\"terminal\": true in the process): nothing to send");
        return 1;
    }
    int fd = nsbox_ocictl_connect(g, &s, e);
    if (fd < 0)
        return 1;
    int r = send_request(fd, &c, a.preserve_fds, e);
    nsbox_ocispec_free(&c);
    nsbox_ocifds_close(a.preserve_fds); /* the process's now */
    if (r < 0) {
        close(fd);
        return 1;
    }
    if (a.detach)
        return exec_detached(fd, &a, e);
    if (a.pid_file && nsbox_ocistate_write_pid_file(a.pid_file, getpid(), e) < 0) {
        close(fd);
        return 125;
    }
    int master = -1;
    int code = wait_spawned(fd, a.console_socket, &master, e);
    if (code) {
        close(fd);
        return code;
    }
    relay(fd, master);
}
