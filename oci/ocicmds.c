/* nsbox-oci start, state, kill, delete: over the state directory that create wrote. */
#include "ocirt.h"
#include "cleanup.h"
#include "cleanup_cjson.h"
#include "gc.h"
#include "jsontext.h"
#include "ocispec.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static int one_id(int argc, char **argv, int first, const char *cmd, struct nsbox_err *e)
{
    if (argc - first < 1)
        return nsbox_err_invalid(e, "%s: give a container id", cmd);
    return 0;
}

int nsbox_ocicmds_start(const struct nsbox_ocirt *g, int argc, char **argv, struct nsbox_err *e)
{
    if (one_id(argc, argv, 1, "start", e) < 0)
        return 1;
    struct nsbox_ocistate s;
    if (nsbox_ocistate_read(g, argv[1], &s, e) < 0)
        return 1;
    enum nsbox_ocistate_status st = nsbox_ocistate_status(g, &s);
    if (st != NSBOX_OCI_CREATED) {
        nsbox_err_set(e, NSBOX_E_INVALID, EINVAL, "cannot start a container that is %s%s",
                      nsbox_ocistate_status_name(st),
                      st == NSBOX_OCI_STOPPED ? ": container not running" : "");
        return 1;
    }
    char dir[PATH_MAX], fifo[PATH_MAX + 16];
    if (nsbox_ocistate_dir(g, s.id, dir, sizeof dir, e) < 0)
        return 1;
    snprintf(fifo, sizeof fifo, "%s/exec.fifo", dir);
    /* The monitor holds the read end: no reader (ENXIO) means it is gone. */
    int fd = open(fifo, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENXIO)
            nsbox_err_set(e, NSBOX_E_INVALID, ENXIO, "container %s: container not running",
                          s.id);
        else
            nsbox_err_sys(e, "open %s", fifo);
        return 1;
    }
    ssize_t w = write(fd, "s", 1);
    int err = errno;
    if (w != 1) {
        close(fd);
        errno = err;
        nsbox_err_sys(e, "start %s", s.id);
        return 1;
    }
    unlink(fifo); /* from now on: running */
    /* Returns once the monitor has let go of the read end, which it does when the program has
     * been exec'd: a fifo's writer sees POLLERR when it has no reader left. */
    struct pollfd pf = {fd, 0, 0};
    while (poll(&pf, 1, 10000) < 0 && errno == EINTR) {
    }
    close(fd);
    /* A failed poststart hook is a warning: the container runs on (runtime-spec). */
    struct nsbox_err he = {0};
    if (nsbox_ocihooks_run(g, &s, NSBOX_OCI_HOOK_POSTSTART, NSBOX_OCI_RUNNING, &he) < 0)
        nsbox_ocilog_say(NULL, NSBOX_OCILOG_STDERR, "warning", "%s", he.msg);
    return 0;
}

int nsbox_ocicmds_state(const struct nsbox_ocirt *g, int argc, char **argv, struct nsbox_err *e)
{
    if (one_id(argc, argv, 1, "state", e) < 0)
        return 1;
    struct nsbox_ocistate s;
    if (nsbox_ocistate_read(g, argv[1], &s, e) < 0)
        return 1;
    cleanup_free char *text = nsbox_ocistate_json(g, &s, nsbox_ocistate_status(g, &s), true, e);
    if (!text)
        return 1;
    printf("%s\n", text);
    return 0;
}

static const struct {
    const char *name;
    int sig;
} signames[] = {
    {"HUP", SIGHUP},   {"INT", SIGINT},   {"QUIT", SIGQUIT}, {"ILL", SIGILL},
    {"TRAP", SIGTRAP}, {"ABRT", SIGABRT}, {"BUS", SIGBUS},   {"FPE", SIGFPE},
    {"KILL", SIGKILL}, {"USR1", SIGUSR1}, {"SEGV", SIGSEGV}, {"USR2", SIGUSR2},
    {"PIPE", SIGPIPE}, {"ALRM", SIGALRM}, {"TERM", SIGTERM}, {"CHLD", SIGCHLD},
    {"CONT", SIGCONT}, {"STOP", SIGSTOP}, {"TSTP", SIGTSTP}, {"TTIN", SIGTTIN},
    {"TTOU", SIGTTOU}, {"URG", SIGURG},   {"XCPU", SIGXCPU}, {"XFSZ", SIGXFSZ},
    {"VTALRM", SIGVTALRM}, {"PROF", SIGPROF}, {"WINCH", SIGWINCH}, {"IO", SIGIO},
    {"PWR", SIGPWR},   {"SYS", SIGSYS},
};

/* "9", "KILL", "SIGKILL" (any case); -1 when it is none. */
static int parse_signal(const char *text)
{
    char *end;
    long n = strtol(text, &end, 10);
    if (*text && !*end)
        return n > 0 && n < 65 ? (int)n : -1;
    if (!strncasecmp(text, "SIG", 3))
        text += 3;
    for (size_t i = 0; i < NSBOX_ARRAY_LEN(signames); i++)
        if (!strcasecmp(text, signames[i].name))
            return signames[i].sig;
    return -1;
}

/* A frozen task dies of SIGKILL only once thawed (cgroup v1): a paused container that is
 * killed is resumed, so that it ends, as runc's kill and delete --force do. */
static void thaw_if_killed(const struct nsbox_ocirt *g, const struct nsbox_ocistate *s, int sig)
{
    struct nsbox_err e2;
    if (sig == SIGKILL && nsbox_ocistate_status(g, s) == NSBOX_OCI_PAUSED)
        nsbox_ocictl_call(g, s, "resume", &e2);
}

/* kill --all: the monitor signals every process of the container's cgroup (ocimon.c). */
static int kill_all(const struct nsbox_ocirt *g, const struct nsbox_ocistate *s, int sig,
                    struct nsbox_err *e)
{
    struct nsbox_ocictl_msg m = {.op = "killall", .status = sig}, r;
    if (nsbox_ocistate_status(g, s) == NSBOX_OCI_PAUSED)
        m.flags = NSBOX_OCICTL_F_PAUSED;
    char answer[NSBOX_ERR_MSG_MAX];
    if (nsbox_ocictl_ask(g, s, &m, NULL, &r, answer, sizeof answer, e) < 0) {
        nsbox_err_wrap(e, "kill --all %s", s->id);
        return 1;
    }
    return 0;
}

int nsbox_ocicmds_kill(const struct nsbox_ocirt *g, int argc, char **argv, struct nsbox_err *e)
{
    int first = 1;
    bool all = false;
    for (; first < argc && argv[first][0] == '-' && argv[first][1]; first++)
        all = all || !strcmp(argv[first], "--all") || !strcmp(argv[first], "-a");
    if (one_id(argc, argv, first, "kill", e) < 0)
        return 1;
    int sig = SIGTERM;
    if (argc - first >= 2 && (sig = parse_signal(argv[first + 1])) < 0) {
        nsbox_err_invalid(e, "kill: unknown signal '%s'", NSBOX_SHOW(argv[first + 1]));
        return 1;
    }
    struct nsbox_ocistate s;
    if (nsbox_ocistate_read(g, argv[first], &s, e) < 0)
        return 1;
    if (nsbox_ocistate_status(g, &s) == NSBOX_OCI_STOPPED) {
        nsbox_err_set(e, NSBOX_E_INVALID, ESRCH, "container %s: container not running", s.id);
        return 1;
    }
    if (all && sig != SIGKILL)
        return kill_all(g, &s, sig, e);
    /* To init, pid 1 inside: it passes the signal on to the workload (SIGKILL ends it, and with
     * it every process of the container: --all with KILL is this too). */
    if (kill(s.pid, sig) < 0) {
        nsbox_err_sys(e, "kill %s", s.id);
        return 1;
    }
    thaw_if_killed(g, &s, sig);
    return 0;
}

/* Until the monitor has removed the sandbox and exited: it does once init has ended. */
static void wait_gone(const struct nsbox_ocistate *s)
{
    int fd = (int)syscall(SYS_pidfd_open, s->monitor, 0);
    if (fd >= 0) {
        if (nsbox_ocistate_alive(s->monitor, s->monitor_start)) {
            struct pollfd pf = {fd, POLLIN, 0};
            poll(&pf, 1, 10000);
        }
        close(fd);
        return;
    }
    for (int i = 0; i < 1000 && nsbox_ocistate_alive(s->monitor, s->monitor_start); i++)
        usleep(10000);
}

int nsbox_ocicmds_delete(const struct nsbox_ocirt *g, int argc, char **argv,
                         struct nsbox_err *e)
{
    bool force = false;
    int first = 1;
    for (; first < argc && argv[first][0] == '-'; first++)
        if (!strcmp(argv[first], "--force") || !strcmp(argv[first], "-f"))
            force = true;
    if (one_id(argc, argv, first, "delete", e) < 0)
        return 1;
    struct nsbox_ocistate s;
    if (nsbox_ocistate_read(g, argv[first], &s, e) < 0)
        return force && e->code == NSBOX_E_NOTFOUND ? 0 : 1;
    enum nsbox_ocistate_status st = nsbox_ocistate_status(g, &s);
    if (st != NSBOX_OCI_STOPPED) {
        if (!force) {
            nsbox_err_set(e, NSBOX_E_INVALID, EBUSY,
                          "cannot delete container %s that is not stopped: %s", s.id,
                          nsbox_ocistate_status_name(st));
            return 1;
        }
        if (nsbox_ocistate_alive(s.pid, s.pid_start))
            kill(s.pid, SIGKILL);
        thaw_if_killed(g, &s, SIGKILL);
    }
    /* Init is the caller's to reap and may be gone before the monitor has removed the
     * sandbox; a monitor that died without doing so (SIGKILL) leaves it to nsbox's gc. */
    wait_gone(&s);
    struct nsbox_err ge;
    if (s.sandbox[0] && nsbox_gc_id(s.sandbox, &ge) < 0)
        nsbox_ocilog_say(NULL, NSBOX_OCILOG_STDERR, "warning", "%s", ge.msg);
    /* A failed poststop hook is a warning: the container is deleted all the same. */
    struct nsbox_err he = {0};
    if (nsbox_ocihooks_run(g, &s, NSBOX_OCI_HOOK_POSTSTOP, NSBOX_OCI_STOPPED, &he) < 0)
        nsbox_ocilog_say(NULL, NSBOX_OCILOG_STDERR, "warning", "%s", he.msg);
    /* the cgroup at the config's cgroupsPath, when a killed monitor could not remove it */
    char dir[PATH_MAX];
    if (nsbox_ocistate_dir(g, s.id, dir, sizeof dir, &he) == 0 &&
        nsbox_ociplace_remove(dir, &he) < 0)
        nsbox_ocilog_say(NULL, NSBOX_OCILOG_STDERR, "warning", "%s", he.msg);
    return nsbox_ocistate_remove(g, s.id, e) < 0 ? 1 : 0;
}

/* pause and resume: the monitor freezes or thaws the sandbox's cgroup (every process in it). */
static int pause_resume(const struct nsbox_ocirt *g, int argc, char **argv, bool pause,
                        struct nsbox_err *e)
{
    const char *cmd = pause ? "pause" : "resume";
    if (one_id(argc, argv, 1, cmd, e) < 0)
        return 1;
    struct nsbox_ocistate s;
    if (nsbox_ocistate_read(g, argv[1], &s, e) < 0)
        return 1;
    enum nsbox_ocistate_status st = nsbox_ocistate_status(g, &s);
    if (st != (pause ? NSBOX_OCI_RUNNING : NSBOX_OCI_PAUSED)) {
        nsbox_err_set(e, NSBOX_E_INVALID, EINVAL, "cannot %s container %s that is %s%s", cmd,
                      s.id, nsbox_ocistate_status_name(st),
                      st == NSBOX_OCI_PAUSED ? "" : ": container not running");
        if (!pause && st == NSBOX_OCI_RUNNING)
            snprintf(e->msg, sizeof e->msg, "container %s is not paused", s.id);
        return 1;
    }
    if (nsbox_ocictl_call(g, &s, cmd, e) < 0) {
        nsbox_err_wrap(e, "%s %s", cmd, s.id);
        return 1;
    }
    return 0;
}

int nsbox_ocicmds_pause(const struct nsbox_ocirt *g, int argc, char **argv, struct nsbox_err *e)
{
    return pause_resume(g, argc, argv, true, e);
}

int nsbox_ocicmds_resume(const struct nsbox_ocirt *g, int argc, char **argv,
                         struct nsbox_err *e)
{
    return pause_resume(g, argc, argv, false, e);
}

static cJSON *str_array(const char *const *v, size_t n)
{
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; a && i < n; i++) {
        cJSON *s = cJSON_CreateString(v[i]);
        if (!s || !cJSON_AddItemToArray(a, s)) {
            cJSON_Delete(s);
            cJSON_Delete(a);
            return NULL;
        }
    }
    return a;
}

/* What a config may name, from the parser's own tables: the mount options, the capabilities
 * but CAP_SYS_ADMIN and CAP_SYS_MODULE (refused as a privileged container). */
static cJSON *known_names(bool caps)
{
    const char *v[64];
    size_t n = 0;
    for (int i = 0; n < NSBOX_ARRAY_LEN(v); i++) {
        const char *name = caps ? nsbox_ocispec_cap_name(i) : nsbox_ocispec_mount_option((size_t)i);
        if (!name)
            break;
        if (!caps || (strcmp(name, "CAP_SYS_ADMIN") && strcmp(name, "CAP_SYS_MODULE")))
            v[n++] = name;
    }
    return str_array(v, n);
}

/* One of the seccomp parser's tables, by its accessor. */
static cJSON *seccomp_names(const char *(*at)(size_t))
{
    const char *v[16];
    size_t n = 0;
    while (n < NSBOX_ARRAY_LEN(v) && (v[n] = at(n)))
        n++;
    return str_array(v, n);
}

/* linux.seccomp: a bundle's profile is loaded over nsbox's (docs/seccomp.md). Only the native
 * architecture: nsbox's own filter kills every other ABI's calls, whatever a profile says. */
static bool seccomp_features(cJSON *linux_)
{
    const char *arch[1] = {nsbox_seccomp_arch_name()};
    cJSON *sc = cJSON_AddObjectToObject(linux_, "seccomp");
    return sc && cJSON_AddBoolToObject(sc, "enabled", true) &&
           cJSON_AddItemToObject(sc, "actions", seccomp_names(nsbox_seccomp_oci_action)) &&
           cJSON_AddItemToObject(sc, "operators", seccomp_names(nsbox_seccomp_oci_op)) &&
           cJSON_AddItemToObject(sc, "archs", str_array(arch, arch[0] ? 1 : 0)) &&
           cJSON_AddItemToObject(sc, "knownFlags", seccomp_names(nsbox_seccomp_oci_flag)) &&
           cJSON_AddItemToObject(sc, "supportedFlags", seccomp_names(nsbox_seccomp_oci_flag));
}

/* linux.mountExtensions: a bind's idmap (docs/oci.md, "Idmapped volumes"), which containerd
 * looks for before it asks for one. */
static bool mount_features(cJSON *linux_)
{
    cJSON *ext = cJSON_AddObjectToObject(linux_, "mountExtensions");
    cJSON *idmap = ext ? cJSON_AddObjectToObject(ext, "idmap") : NULL;
    return idmap && cJSON_AddBoolToObject(idmap, "enabled", true);
}

/* What runc's `features` reports, limited to what nsbox-oci really does with a config. */
int nsbox_ocicmds_features(const struct nsbox_ocirt *g, int argc, char **argv,
                           struct nsbox_err *e)
{
    (void)g, (void)argc, (void)argv;
    static const char *const hooks[] = {"prestart", "createRuntime", "poststart", "poststop"};
    static const char *const namespaces[] = {"cgroup", "ipc",  "mount", "network",
                                             "pid",    "user", "uts"};
    cleanup_cjson cJSON *j = cJSON_CreateObject();
    cJSON *linux_ = NULL, *cg = NULL, *ann = NULL;
    if (!j || !cJSON_AddStringToObject(j, "ociVersionMin", "1.0.0") ||
        !cJSON_AddStringToObject(j, "ociVersionMax", "1.1.0") ||
        !cJSON_AddItemToObject(j, "hooks", str_array(hooks, NSBOX_ARRAY_LEN(hooks))) ||
        !cJSON_AddItemToObject(j, "mountOptions", known_names(false)) ||
        !(linux_ = cJSON_AddObjectToObject(j, "linux")) ||
        !cJSON_AddItemToObject(linux_, "namespaces",
                               str_array(namespaces, NSBOX_ARRAY_LEN(namespaces))) ||
        !cJSON_AddItemToObject(linux_, "capabilities", known_names(true)) ||
        !(cg = cJSON_AddObjectToObject(linux_, "cgroup")) ||
        !cJSON_AddBoolToObject(cg, "v1", true) || !cJSON_AddBoolToObject(cg, "v2", true) ||
        !cJSON_AddBoolToObject(cg, "systemd", true) ||
        !cJSON_AddBoolToObject(cg, "systemdUser", false) || !seccomp_features(linux_) ||
        !mount_features(linux_) || !(ann = cJSON_AddObjectToObject(j, "annotations")) ||
        !cJSON_AddStringToObject(ann, "org.nsbox.floor",
                                 "an unprivileged user namespace (the config's ids and "
                                 "capabilities inside it, never CAP_SYS_ADMIN), nsbox's "
                                 "seccomp profile (a bundle's stacked over it), no host "
                                 "namespaces; network, ipc, uts and a pod's user namespace "
                                 "joined by path: docs/oci.md")) {
        nsbox_err_set(e, NSBOX_E_NOMEM, ENOMEM, "out of memory");
        return 1;
    }
    cleanup_free char *text = nsbox_jsontext_print(j);
    if (!text) {
        nsbox_err_set(e, NSBOX_E_NOMEM, ENOMEM, "out of memory");
        return 1;
    }
    printf("%s\n", text);
    return 0;
}
