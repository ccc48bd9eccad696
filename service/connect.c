/* Connecting to a sandbox's supervisor, and why a connection was refused or lost (see
 * connect.h, docs/protocol.md). */
#define _GNU_SOURCE
#include "connect.h"
#include "paths.h"
#include "gc.h"
#include "state.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static int runtime_path(char *out, size_t n, const char *a, const char *b, struct nsbox_err *e)
{
    char rt[PATH_MAX];
    if (nsbox_paths_runtime_dir(rt, sizeof rt, e) < 0)
        return -1;
    if ((size_t)snprintf(out, n, "%s/%s%s%s", rt, a, b ? "/" : "", b ? b : "") >= n)
        return nsbox_err_set(e, NSBOX_E_INVALID, ENAMETOOLONG, "path too long");
    return 0;
}

/* A supervisor stopped or stuck while its listener's queue filled makes connect wait for a
 * place: at most this long, then the request fails (as a reply that does not come does). */
#define CONNECT_WAIT_S 30

static int socket_addr(const char *id, const char *name, struct sockaddr_un *sa,
                       struct nsbox_err *e)
{
    char path[PATH_MAX];
    if (runtime_path(path, sizeof path, id, name, e) < 0)
        return -1;
    *sa = (struct sockaddr_un){.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof sa->sun_path)
        return nsbox_err_set(e, NSBOX_E_INVALID, ENAMETOOLONG, "socket path too long: %s", path);
    strcpy(sa->sun_path, path);
    return 0;
}

/* One connect that does not wait: the socket (blocking) or -1 with errno (EAGAIN: the
 * listener's queue is full; ECONNREFUSED: nobody listens). */
static int connect_now(const struct sockaddr_un *sa, int type)
{
    int fd = socket(AF_UNIX, type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -1;
    int fl;
    if (connect(fd, (const struct sockaddr *)sa, sizeof *sa) < 0 ||
        (fl = fcntl(fd, F_GETFL)) < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0) {
        int err = errno;
        close(fd);
        errno = err;
        return -1;
    }
    return fd;
}

/* Connects to the socket `name` of sandbox id; -1 (e) when it cannot. Whoever listens must be
 * us (or root): the descriptors and environment of an exec or a run go to it, and a socket in a
 * directory others could write would be theirs. errno keeps connect's error (NSBOX_E_SYS). */
static int connect_own(const char *id, const char *name, int type, struct nsbox_err *e)
{
    struct sockaddr_un sa;
    if (socket_addr(id, name, &sa, e) < 0)
        return -1;
    int fd = connect_now(&sa, type);
    for (int ms = 0; fd < 0 && errno == EAGAIN && ms < CONNECT_WAIT_S * 1000; ms += 10) {
        usleep(10000);
        fd = connect_now(&sa, type);
    }
    if (fd < 0 && errno == EAGAIN)
        return nsbox_err_set(e, NSBOX_E_TIMEOUT, ETIMEDOUT,
                             "sandbox %s: its supervisor took no connection within %d s (stuck; "
                             "the process 'nsbox %s' on the host: kill it, then nsbox gc)",
                             id, CONNECT_WAIT_S, id);
    if (fd < 0)
        return nsbox_err_sys(e, "cannot reach sandbox %s", id);
    struct ucred cr;
    socklen_t cl = sizeof cr;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) < 0 ||
        (cr.uid != geteuid() && cr.uid != 0)) {
        close(fd);
        return nsbox_err_set(e, NSBOX_E_POLICY, EPERM,
                             "refusing sandbox %s: its socket %s is served by uid %u, not by you",
                             id, sa.sun_path, (unsigned)cr.uid);
    }
    return fd;
}

int nsbox_connect_ctl(const char *id, struct nsbox_err *e)
{
    if (!nsbox_state_valid_id(id))
        return nsbox_err_set(e, NSBOX_E_NOTFOUND, ENOENT,
                             "no sandbox '%s' (ids are 12 hexadecimal digits; see nsbox ls)",
                             NSBOX_SHOW(id));
    int fd = connect_own(id, "ctl", SOCK_STREAM, e);
    if (fd >= 0 || e->code != NSBOX_E_SYS) /* reached, not ours, or a bad path */
        return fd;
    int err = errno;
    if (nsbox_state_tombstone_err(id, err, e) < 0)
        return -1;
    if (err == ECONNREFUSED) {
        /* Its socket is there with nobody listening: the supervisor died without removing
         * the sandbox. gc removes what it left (and records why); only this one's. */
        struct nsbox_err ge;
        nsbox_gc_id(id, &ge);
        return nsbox_err_set(e, NSBOX_E_DELETED, err, "sandbox %s was %s", id,
                             NSBOX_TOMB_SUPERVISOR_GONE);
    }
    if (err == ENOENT)
        return nsbox_state_not_found(id, err, e);
    return -1;
}

/* Whether nobody listens on sandbox id's control socket any more (ECONNREFUSED): its
 * supervisor, which keeps its listener until it exits, is dead, whoever holds its lock now (a
 * gc removing it). A live one with a full queue (EAGAIN) is alive. */
static bool listener_gone(const char *id)
{
    struct sockaddr_un sa;
    struct nsbox_err ignored; /* a socket that cannot be named cannot be said gone */
    if (socket_addr(id, "ctl", &sa, &ignored) < 0)
        return false;
    int fd = connect_now(&sa, SOCK_STREAM);
    if (fd >= 0)
        close(fd);
    return fd < 0 && errno == ECONNREFUSED;
}

int nsbox_connect_lost(const char *id, int err, struct nsbox_err *e)
{
    if (nsbox_state_tombstone_err(id, err, e) < 0)
        return -1;
    char rt[PATH_MAX];
    struct nsbox_err ge;
    if (nsbox_paths_runtime_dir(rt, sizeof rt, &ge) < 0)
        return nsbox_err_set(e, NSBOX_E_DELETED, err,
                             "sandbox %s: its supervisor closed the connection (deleted?)", id);
    /* A supervisor that dies closes its connections and lets go of its lock in the same
     * moment of its exit; one that deletes the sandbox records why first. So a lock still held
     * a second later is a supervisor that lives and hung up on this request, unless nobody
     * listens on its socket (a gc that found it dead holds the lock while it removes it; asked
     * at the first and the last look only, not to knock 200 times on a live one). */
    const int looks = 200;
    for (int i = 0; i < looks; i++) {
        int fd = nsbox_state_dead_lock(rt, id);
        int lerr = errno;
        if (fd >= 0) {
            close(fd); /* gc takes it again */
            nsbox_gc_id(id, &ge);
            if (nsbox_state_tombstone_err(id, err, e) < 0)
                return -1;
            return nsbox_err_set(e, NSBOX_E_DELETED, err, "sandbox %s was %s", id,
                                 NSBOX_TOMB_SUPERVISOR_GONE);
        }
        if (!nsbox_state_maybe_alive(lerr) || nsbox_state_tombstone_err(id, err, e) < 0)
            break; /* removed meanwhile (its record, if it has one, is read below) */
        if ((i == 0 || i == looks - 1) && listener_gone(id))
            return nsbox_err_set(e, NSBOX_E_DELETED, err, "sandbox %s was %s", id,
                                 NSBOX_TOMB_SUPERVISOR_GONE);
        usleep(5000);
    }
    if (nsbox_state_tombstone_err(id, err, e) < 0)
        return -1;
    if (nsbox_state_dir_gone(rt, id))
        return nsbox_err_set(e, NSBOX_E_DELETED, err,
                             "sandbox %s was deleted while this request was under way", id);
    return nsbox_err_set(e, NSBOX_E_SYS, err,
                         "sandbox %s: its supervisor closed the connection without an answer "
                         "(the sandbox is still there)",
                         id);
}

int nsbox_connect_run(const char *id, struct nsbox_err *e)
{
    if (!nsbox_state_valid_id(id))
        return nsbox_err_set(e, NSBOX_E_NOTFOUND, ENOENT, "no sandbox '%s'", NSBOX_SHOW(id));
    return connect_own(id, "run", SOCK_SEQPACKET, e);
}
