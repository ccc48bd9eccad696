/* The agent: in a persistent sandbox, pid 1 (nsbox init, already inside every namespace and the
 * cgroup, without capabilities, with no_new_privs and seccomp) starts the commands the supervisor
 * asks for. Forking from inside means no namespace joining and no cgroup migration per exec.
 *
 * Messages travel over a SOCK_SEQPACKET socketpair: a fixed header, a payload of NUL-separated
 * strings, and for SPAWN three descriptors (stdin, stdout, stderr) and any it passes on
 * (NSBOX_AGENT_F_EXTRA). init has two peers: the
 * supervisor, and in a pooled sandbox the one client of its run socket (below), whose requests
 * it checks as untrusted; the supervisor treats what init says as untrusted (bounded, checked).
 * agent.c has the messages and the supervisor's end, agent_init.c init's end. */
#ifndef NSBOX_AGENT_H
#define NSBOX_AGENT_H

#include "nsbox.h"
#include "spawnuser.h"

#include <stdint.h>
#include <sys/types.h>

#define NSBOX_AGENT_PAYLOAD_MAX (192u * 1024u)
/* an event's message (struct nsbox_agent_event): a reason, or a run's names */
#define NSBOX_AGENT_MSG_MAX 1024

enum nsbox_agent_type {
    NSBOX_AGENT_SPAWN = 1,       /* supervisor or run client -> init: payload [user (F_USER),]
                                  * cwd, argv..., env...; 3 fds */
    NSBOX_AGENT_KILL = 2,        /* -> init: signal `status` to process group `pid` (on the run
                                  * socket: to the run's command, whatever `pid` says) */
    NSBOX_AGENT_LISTEN = 3,      /* supervisor -> init: fds: the run socket (listening), and the
                                  * memory cgroup's file with the OOM count (optional) */
    NSBOX_AGENT_RETIRE = 4,      /* supervisor -> init: take no run any more; answer RETIRED */
    NSBOX_AGENT_SPAWNED = 101,   /* init -> supervisor: seq started as pid */
    NSBOX_AGENT_EXITED = 102,    /* init -> supervisor: pid of seq ended; status = exit code */
    NSBOX_AGENT_FAILED = 103,    /* init -> supervisor: seq could not start; status 125/126/127 */
    NSBOX_AGENT_WORKSPACE = 104, /* init -> supervisor, first message: 1 fd, O_PATH /workspace */
    NSBOX_AGENT_CLAIMED = 105,   /* init -> supervisor: a run took the sandbox (pid: its command) */
    NSBOX_AGENT_RETIRED = 106,   /* init -> supervisor: status 0: no run will come; 1: one came */
};

/* The run socket of a pooled sandbox (pool.md): nsbox run talks to init itself, without the
 * supervisor on the way (one process fewer to wake, twice). The supervisor makes the socket
 * (in its own 0700 directory, so SO_PEERCRED names the supervisor's user) and hands init the
 * listening end with LISTEN. On it, one connection sends one SPAWN (cwd, argv, the whole
 * environment; three fds); init answers:
 *   FAILED, status 0: refused (malformed): nothing ran, the sandbox still waits for a run;
 *   SPAWNED (pid): the claim. The sandbox is this run's; init stops listening and tells the
 *     supervisor (CLAIMED). Then EXITED: status = exit code, argc = the sandbox's OOM kills,
 *     the payload the names asked of its stub resolver, one a line (dnsstub.h; untrusted);
 *   FAILED, status 125/126/127: claimed, but the command could not start.
 * The client may send KILL (status = signal) for its command's tree. A connection that closes
 * before the status kills the whole sandbox. Every command's end is F_LAST's: the rest of the
 * sandbox is killed before the status goes out. The end of a run reaches the supervisor as
 * EXITED or FAILED with seq NSBOX_AGENT_SEQ_RUN. */
#define NSBOX_AGENT_SEQ_RUN 0xffffffffu

struct nsbox_agent_hdr {
    uint32_t type;
    uint32_t seq;
    int32_t pid;
    int32_t status;
    uint32_t argc;
    uint32_t envc;
    uint32_t len; /* payload bytes */
    uint32_t flags; /* SPAWN: NSBOX_AGENT_F_* */
};

/* exec -t: init makes a pseudo-terminal in the sandbox's own devpts, runs the command on its
 * slave (as controlling terminal; size from the header's status: rows << 16 | cols) and
 * returns the master with SPAWNED. No descriptors come with such a SPAWN. */
#define NSBOX_AGENT_F_TTY 1u
/* The sandbox's last command (nsbox run through the pool): when it ends, init kills every other
 * process of the sandbox before it reports EXITED (or FAILED), so that nothing of the sandbox
 * runs on once the run's status is out. */
#define NSBOX_AGENT_F_LAST 2u
/* Descriptors beyond stdio that the command gets at 3, 4, ... (nsbox-oci's --preserve-fds):
 * their count is in bits 8-15 of a SPAWN's flags, and they come last among its descriptors
 * (after stdin, stdout and stderr; alone with F_TTY). One message carries at most 253
 * (SCM_MAX_FD), three of them stdio. */
#define NSBOX_AGENT_EXTRA_MAX 250u
#define NSBOX_AGENT_F_EXTRA(n) ((uint32_t)(n) << 8)
#define NSBOX_AGENT_EXTRA_OF(flags) (((flags) >> 8) & 0xffu)
/* nsbox-oci's exec as a user: the payload's first string is a user (policy/spawnuser.h) that
 * the command's child becomes before it enters cwd (groups, gid, uid, in that order, each only
 * when it differs from init's; then the umask), with its own capability sets when the string
 * has them (agent_user.h), and no_new_privs when it asks for it. The kernel decides: a change
 * takes CAP_SETGID and CAP_SETUID, which nsbox-oci's init keeps in its permitted set for this
 * (launch.h, cap_keep), and no set can exceed init's. Never on the run socket, whose requests
 * get their flags from init. */
#define NSBOX_AGENT_F_USER 4u

struct nsbox_agent_event {
    uint32_t type, seq;
    int pid, status;
    int fd; /* SPAWNED of a F_TTY spawn: the pseudo-terminal's master; else -1 */
    unsigned oom_kills; /* EXITED on the run socket */
    char msg[NSBOX_AGENT_MSG_MAX]; /* a reason (FAILED), or a run's names (EXITED on the run
                                    * socket: those its stub was asked, a line each) */
};

/* Supervisor side. extra[0..n_extra-1] (at most NSBOX_AGENT_EXTRA_MAX): the command's
 * descriptors 3, 4, ... (flags get their count). user: NULL for init's own ids (nsbox never
 * asks for another). */
int nsbox_agent_spawn(int sock, uint32_t seq, char *const argv[], char *const env[],
                      const char *cwd, const int fds[3], const int *extra, size_t n_extra,
                      unsigned flags, uint32_t winsize, const struct nsbox_spawnuser *user,
                      struct nsbox_err *e);
int nsbox_agent_kill(int sock, int pid, int sig, struct nsbox_err *e);
/* A pooled sandbox: give init its run socket (listening) and the OOM counter file (or -1). */
int nsbox_agent_listen(int sock, int listen_fd, int oom_fd, struct nsbox_err *e);
/* Ask init to take no run any more. Events that come before its answer (CLAIMED, the end of a
 * run) go to on_event. Returns 1 when a run had already taken the sandbox, 0 when none will,
 * -1 when init is gone (the sandbox may go), -2 when it did not answer within 5 s (it may be
 * starting a run: the caller must not delete it now). */
int nsbox_agent_retire(int sock, void (*on_event)(const struct nsbox_agent_event *ev, void *arg),
                       void *arg);
/* Returns 1 with an event, 0 on EOF (init is gone), -1 on error. Also the client's side of
 * the run socket. */
int nsbox_agent_recv(int sock, struct nsbox_agent_event *ev, struct nsbox_err *e);

/* The first message init sends: its /workspace, the root of the supervisor's file operations
 * whatever the workspace is (a host directory, or a filesystem that exists only inside the
 * sandbox's mount namespace). *fd gets an O_PATH descriptor of a directory. */
int nsbox_agent_recv_workspace(int sock, int *fd, struct nsbox_err *e);

/* Both ends: one message, sent with its descriptors. 0, or -1 and errno. */
int nsbox_agent_send_msg(int sock, const struct nsbox_agent_hdr *h, const char *payload,
                         const int *fds, size_t nfds);
/* A SPAWN's descriptors beyond stdio (NSBOX_AGENT_F_EXTRA), for the command's 3, 4, ... */
struct nsbox_agent_extra {
    int fd[NSBOX_AGENT_EXTRA_MAX];
    size_t n;
};
/* One whole message of at most max payload bytes: its length, 0 at EOF, -1 and errno (EBADMSG
 * malformed or cut; EMFILE: whole, but its descriptors did not fit in our table, h is good).
 * fds[] (3; NULL: closed) gets the received descriptors or -1, and with x (not NULL) a SPAWN's
 * extra ones (the last NSBOX_AGENT_EXTRA_OF(flags) that came). */
ssize_t nsbox_agent_recv_msg(int sock, struct nsbox_agent_hdr *h, char *payload, size_t max,
                             int *fds, struct nsbox_agent_extra *x);

#endif
