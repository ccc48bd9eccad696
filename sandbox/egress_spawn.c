/* Starting the egress helper (sandbox/egress_spawn.h). */
#define _GNU_SOURCE
#include "egress_spawn.h"
#include "egress.h"
#include "egress_log.h"
#include "egress_tls.h"
#include "egress_wire.h"
#include "seccomp_profile.h"
#include "util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_PORTS NSBOX_MAX_HOSTS

int nsbox_egress_spawn_path(char *out, size_t n, struct nsbox_err *e)
{
    char self[PATH_MAX];
    ssize_t k = readlink("/proc/self/exe", self, sizeof self - 1);
    if (k <= 0)
        return nsbox_err_sys(e, "egress helper: cannot read /proc/self/exe to find %s",
                             NSBOX_EGRESS_SPAWN_BIN);
    self[k] = '\0';
    char *slash = strrchr(self, '/');
    if (slash)
        *slash = '\0';
    if (snprintf(out, n, "%s/%s", slash ? self : ".", NSBOX_EGRESS_SPAWN_BIN) >= (int)n)
        return nsbox_err_set(e, NSBOX_E_SYS, ENAMETOOLONG, "egress helper: path too long");
    return 0;
}

int nsbox_egress_spawn_open(char *path, size_t n, struct nsbox_err *e)
{
    if (nsbox_egress_spawn_path(path, n, e) < 0)
        return -1;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || faccessat(fd, "", X_OK, AT_EMPTY_PATH | AT_EACCESS) < 0) {
        int err = errno;
        if (fd >= 0)
            close(fd);
        errno = err;
        return nsbox_err_sys(e,
                             "egress helper: cannot run %s; fix: install %s beside nsbox, "
                             "executable (the build makes both, `cmake --install` puts them "
                             "in one directory)",
                             path, NSBOX_EGRESS_SPAWN_BIN);
    }
    return fd;
}

/* The sandbox's side of a connection crosses one veth: no loss, an RTT of microseconds, nothing
 * for a congestion control to control. A pacing one that the host may have as its default
 * (bbr) spaced the helper's sends out there and halved a spliced download's throughput; reno
 * never paces and any process may choose it (TCP_CONG_NON_RESTRICTED). It is set on the
 * listener, which each accepted connection inherits before its control starts: set on an
 * established bbr connection, it would leave bbr's pacing switched on. The upstream keeps the
 * host's choice: that path is the real one. */
static void listener_unpaced(int fd)
{
    static const char reno[] = "reno";
    setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, reno, sizeof reno - 1);
}

/* Binds one listener per distinct port of the names, on the gateway. */
static int listen_all(const struct nsbox_netplan *p, int *fds, uint16_t *ports, size_t *n,
                      struct nsbox_err *e)
{
    *n = 0;
    for (size_t i = 0; i < p->n_names; i++) {
        bool seen = false;
        for (size_t j = 0; j < *n; j++)
            seen |= ports[j] == p->names[i].port;
        if (seen || *n == MAX_PORTS)
            continue;
        int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (s >= 0)
            listener_unpaced(s);
        struct sockaddr_in sa = {
            .sin_family = AF_INET, .sin_addr = p->slot.host, .sin_port = htons(p->names[i].port)};
        int one = 1;
        if (s < 0 || setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
            bind(s, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(s, 128) < 0) {
            if (errno == EADDRINUSE)
                nsbox_err_set(e, NSBOX_E_UNSUPPORTED, errno,
                              "egress helper: cannot listen on the gateway's port %u: a "
                              "service of this host listens on that port on all its addresses; "
                              "fix: have it listen on its own addresses only, or set "
                              "{\"network\": {\"allow_names\": \"address\"}} in the config "
                              "(names by address; docs/network.md)",
                              p->names[i].port);
            else
                nsbox_err_sys(e, "egress helper: cannot listen on the gateway's port %u",
                              p->names[i].port);
            if (s >= 0)
                close(s);
            return -1;
        }
        fds[*n] = s;
        ports[(*n)++] = p->names[i].port;
    }
    return 0;
}

/* The seccomp filter, compiled here: the helper links no libseccomp and only loads it. */
static int put_filter(struct nsbox_egress_wire *w, struct nsbox_err *e)
{
    struct nsbox_seccomp_profile prof;
    struct sock_fprog prog = {0};
    const char *json = nsbox_seccomp_egress_json();
    if (nsbox_seccomp_profile_parse(json, strlen(json), &prof, e) < 0)
        return nsbox_err_wrap(e, "egress helper's seccomp filter");
    int r = nsbox_seccomp_compile(&prof, &prog, e);
    nsbox_seccomp_profile_free(&prof);
    if (r < 0)
        return nsbox_err_wrap(e, "egress helper's seccomp filter");
    nsbox_egress_wire_put_bytes(w, prog.filter, prog.len * sizeof *prog.filter);
    nsbox_seccomp_compile_free(&prog);
    return 0;
}

/* The message, in the order egress.c reads it; fds gets the descriptors to go with it. */
static int compose(struct nsbox_egress_wire *w, const struct nsbox_netplan *p,
                   const struct nsbox_egress_tls *tls, const int *listeners, const uint16_t *ports,
                   size_t n, const struct nsbox_egress_log *log, int *fds, size_t *n_fds,
                   struct nsbox_err *e)
{
    int ca_fd = nsbox_egress_tls_ca_fd(tls);
    nsbox_egress_wire_put_u32(w, NSBOX_EGRESS_WIRE_MAGIC);
    nsbox_egress_wire_put_u32(w, (uint32_t)getpid());
    nsbox_egress_wire_put_u32(w, (uint32_t)n);
    for (size_t i = 0; i < n; i++)
        nsbox_egress_wire_put_u32(w, ports[i]);
    nsbox_egress_wire_put_u32(w, log->fd >= 0);
    memcpy(fds, listeners, n * sizeof *fds);
    size_t at = n;
    if (log->fd >= 0) {
        fds[at++] = log->fd;
        fds[at++] = log->older_fd;
    }
    nsbox_egress_wire_put_u32(w, ca_fd >= 0);
    if (ca_fd >= 0)
        fds[at++] = ca_fd; /* the last one: egress.c finds it there */
    if (put_filter(w, e) < 0)
        return -1;
    nsbox_egress_wire_put_u32(w, p->pool.base);
    nsbox_egress_wire_put_u32(w, p->pool.prefix);
    nsbox_egress_wire_put_u32(w, (uint32_t)p->n_names);
    for (size_t i = 0; i < p->n_names; i++) {
        nsbox_egress_wire_put_str(w, p->names[i].name);
        nsbox_egress_wire_put_u32(w, p->names[i].port);
    }
    nsbox_egress_wire_put_u32(w, tls != NULL);
    if (tls && nsbox_egress_tls_send(tls, w, e) < 0)
        return -1;
    if (w->over)
        return nsbox_err_set(e, NSBOX_E_SYS, EMSGSIZE,
                             "egress helper: its configuration is too "
                             "large");
    *n_fds = at;
    return 0;
}

/* The child of the fork, until the exec: async-signal-safe calls only (the parent may have
 * threads). The helper's ids first (the death signal is reset by a change of ids), the death
 * signal, then descriptors 0-2 /dev/null and 3 the socket, nothing else. */
static void child_exec(int sock, int exe, int devnull, const uint32_t *id, pid_t parent,
                       const char *label)
{
    static const char fail[] = "cannot start";
    struct nsbox_egress_status st = {0};
    if (id && (syscall(SYS_setgroups, 0, NULL) < 0 || nsbox_set_ids(*id, *id) < 0))
        goto out;
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
        _exit(1);
    int s = fcntl(sock, F_DUPFD_CLOEXEC, 10), x = fcntl(exe, F_DUPFD_CLOEXEC, 10),
        nul = fcntl(devnull, F_DUPFD_CLOEXEC, 10);
    if (s < 0 || x < 0 || nul < 0 || dup2(nul, 0) < 0 || dup2(nul, 1) < 0 || dup2(nul, 2) < 0 ||
        dup2(s, NSBOX_EGRESS_SOCK_FD) < 0)
        goto out;
    sock = NSBOX_EGRESS_SOCK_FD;
    syscall(SYS_close_range, NSBOX_EGRESS_SOCK_FD + 1, (unsigned)x - 1, 0);
    syscall(SYS_close_range, (unsigned)x + 1, ~0u, 0);
    char *const argv[] = {(char *)NSBOX_EGRESS_SPAWN_BIN, (char *)label, NULL};
    char *const envp[] = {NULL};
    fexecve(x, argv, envp);
out:
    st.err = errno;
    memcpy(st.what, fail, sizeof fail);
    if (write(sock, &st, sizeof st) < 0) {
    }
    _exit(127);
}

/* Forks, execs the helper, sends its configuration and waits for its word that it is jailed. */
static int run_helper(int exe, const char *path, struct nsbox_egress_wire *w, const int *fds,
                      size_t n_fds, const uint32_t *helper_id, const char *label, pid_t *pid,
                      struct nsbox_err *e)
{
    int sv[2];
    int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (devnull < 0 || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
        if (devnull >= 0)
            close(devnull);
        return nsbox_err_sys(e, "egress helper: socketpair");
    }
    pid_t parent = getpid();
    pid_t child = fork();
    if (child == 0)
        child_exec(sv[1], exe, devnull, helper_id, parent, label);
    int err = errno;
    close(sv[1]);
    close(devnull);
    if (child < 0) {
        close(sv[0]);
        errno = err;
        return nsbox_err_sys(e, "egress helper: fork");
    }
    struct nsbox_egress_status st = {.err = EIO};
    int sent = nsbox_egress_wire_send(sv[0], w, fds, n_fds);
    int got = nsbox_egress_wire_recv_status(sv[0], &st);
    close(sv[0]);
    if (got == 0 && st.err == 0 && sent == 0) {
        *pid = child;
        return 0;
    }
    nsbox_egress_spawn_stop(child);
    errno = got < 0 ? EIO : st.err ? st.err : EIO;
    if (got < 0)
        return nsbox_err_sys(e, "egress helper %s ended before it was jailed", path);
    if (errno == EACCES && !strcmp(st.what, "cannot start"))
        return nsbox_err_sys(e,
                             "egress helper %s: %s (it runs as its own uid; fix: make the "
                             "file executable by every user, mode 0755)",
                             path, st.what);
    return nsbox_err_sys(e, "egress helper %s: %s", path, st.what);
}

int nsbox_egress_spawn(int exe, const char *path, const struct nsbox_netplan *p,
                       const struct nsbox_egress_tls *tls, const char *log_dir,
                       const uint32_t *helper_id, pid_t *pid, struct nsbox_err *e)
{
    int listeners[MAX_PORTS], fds[NSBOX_EGRESS_WIRE_FDS];
    uint16_t ports[MAX_PORTS];
    size_t n = 0, n_fds = 0;
    struct nsbox_egress_log log = {.fd = -1, .older_fd = -1};
    struct nsbox_egress_wire w = {0};
    int r = -1;
    *pid = -1;
    if (listen_all(p, listeners, ports, &n, e) < 0)
        goto out;
    if (log_dir && nsbox_egress_log_open(&log, log_dir) < 0) {
        nsbox_err_sys(e, "egress helper: cannot open its log in %s", log_dir);
        goto out;
    }
    if (nsbox_egress_wire_init(&w) < 0) {
        nsbox_err_sys(e, "egress helper: mmap");
        goto out;
    }
    if (compose(&w, p, tls, listeners, ports, n, &log, fds, &n_fds, e) < 0)
        goto out;
    r = run_helper(exe, path, &w, fds, n_fds, helper_id, p->id, pid, e);
out:
    nsbox_egress_wire_free(&w);
    for (size_t i = 0; i < n; i++)
        close(listeners[i]);
    nsbox_egress_log_close(&log);
    return r;
}

void nsbox_egress_spawn_stop(pid_t pid)
{
    if (pid <= 0)
        return;
    kill(pid, SIGKILL);
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
    }
}
