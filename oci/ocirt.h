/* nsbox-oci, the runc-compatible front end (docs/oci.md): what its files share. A front end
 * beside cli/: it prints (only to the --log file and the standard streams), and calls the
 * sandbox layer below it. */
#ifndef NSBOX_OCIRT_H
#define NSBOX_OCIRT_H

#include "cgroup.h"
#include "nsbox.h"
#include "ocicgroup.h"
#include "ocispec.h"

#include <limits.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define NSBOX_OCI_DEFAULT_ROOT "/run/nsbox-oci"
#define NSBOX_OCI_ID_MAX 128

struct nsbox_ocirt {
    char root[PATH_MAX]; /* --root: one directory per container */
    const char *log;     /* --log FILE, or NULL: errors go to stderr */
    bool log_json;       /* --log-format json */
    bool debug;
    bool systemd_cgroup; /* --systemd-cgroup: cgroupsPath is systemd's slice:prefix:name */
    /* --idmap-volumes=engine: the engine's named volumes idmapped (ocivolumes.c); set where the
     * runtime is registered (Docker's runtimeArgs), never by a container's config */
    bool idmap_engine_volumes;
};

enum nsbox_ocistate_status {
    NSBOX_OCI_CREATED,
    NSBOX_OCI_RUNNING,
    NSBOX_OCI_PAUSED,
    NSBOX_OCI_STOPPED,
};

/* <root>/<id>/state.json: written once by create, read by every other command. */
struct nsbox_ocistate {
    char id[NSBOX_OCI_ID_MAX + 1];
    char bundle[PATH_MAX];
    char rootfs[PATH_MAX];  /* the root's path, resolved ("" from a version that kept none) */
    char created[40];       /* RFC 3339, UTC */
    pid_t pid;              /* the sandbox's init (pid 1 inside): the pid-file process */
    uint64_t pid_start;     /* its start time (/proc/PID/stat field 22), against pid reuse */
    pid_t monitor;          /* the monitor: init's launcher, owner of its cgroup and state */
    uint64_t monitor_start;
    char sandbox[64];       /* nsbox's own id of the sandbox */
};

/* ---- ocilog.c ---- */
/* Where a message of nsbox-oci's goes. */
enum nsbox_ocilog_to {
    /* stderr alone: a warning of a command whose stderr is its caller's (a hook's or gc's
     * error, a state directory skipped) */
    NSBOX_OCILOG_STDERR,
    /* stderr and --log: a command's error, as runc reports it */
    NSBOX_OCILOG_BOTH,
    /* --log, and stderr only without one: create's stderr is the container's (an engine's
     * logs, `docker logs`), and engines give --log */
    NSBOX_OCILOG_LOG_ELSE_STDERR,
};
/* The formatted message at level ("error", "warning") where `to` says: on stderr as
 * "nsbox-oci: MSG" ("nsbox-oci: warning: MSG" at level "warning"), in --log as a line of its
 * level. MSG is one line with no control character (policy/shown.h's rule: C1 and invalid UTF-8
 * included; a newline too is '?'): a message may name what a container wrote (an entry of its
 * writable root, which the seal's walk refuses), and an engine passes stderr on to its user's
 * terminal (`docker start`). g: NULL for stderr alone. */
void nsbox_ocilog_say(const struct nsbox_ocirt *g, enum nsbox_ocilog_to to, const char *level,
                      const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* ---- ocistate.c ---- */
/* [A-Za-z0-9][A-Za-z0-9_.+-]*, at most NSBOX_OCI_ID_MAX: a single path component. */
bool nsbox_ocistate_id_valid(const char *id);
/* Is --root, and every directory above it, writable by root (or the caller) alone? nsbox-oci
 * acts as root on what it reads there (pids it signals, hooks it runs), so a directory another
 * user could write, rename in or replace is refused, naming it. What does not exist yet is
 * no error (create makes it root's); symlinks that cannot be resolved (past PATH_MAX) are. */
int nsbox_ocistate_check_root(const struct nsbox_ocirt *g, struct nsbox_err *e);
/* <root>/<id> into out. */
int nsbox_ocistate_dir(const struct nsbox_ocirt *g, const char *id, char *out, size_t n,
                       struct nsbox_err *e);
int nsbox_ocistate_write(const struct nsbox_ocirt *g, const struct nsbox_ocistate *s,
                         struct nsbox_err *e);
/* NSBOX_E_NOTFOUND "container ID does not exist" when there is no state. */
int nsbox_ocistate_read(const struct nsbox_ocirt *g, const char *id, struct nsbox_ocistate *s,
                        struct nsbox_err *e);
/* Start time of pid from /proc (clock ticks since boot); 0 when it is gone. */
uint64_t nsbox_ocistate_start_time(pid_t pid);
/* Does pid still name the process that had start time `start`? */
bool nsbox_ocistate_alive(pid_t pid, uint64_t start);
/* The same, for a container that is not stopped: "container not running" otherwise. */
int nsbox_ocistate_read_live(const struct nsbox_ocirt *g, const char *id, struct nsbox_ocistate *s,
                             struct nsbox_err *e);
enum nsbox_ocistate_status nsbox_ocistate_status(const struct nsbox_ocirt *g,
                                                 const struct nsbox_ocistate *s);
const char *nsbox_ocistate_status_name(enum nsbox_ocistate_status st);
/* The state as runtime-spec's runtime.md has it (what `state` prints and hooks read on their
 * stdin), with the status st; malloc'd. */
char *nsbox_ocistate_json(const struct nsbox_ocirt *g, const struct nsbox_ocistate *s,
                          enum nsbox_ocistate_status st, bool pretty, struct nsbox_err *e);
/* The user owning the container's state directory, as runc's state and list name it (its
 * name, or "#UID" when the system has none; "" when the directory is gone). */
void nsbox_ocistate_owner(const struct nsbox_ocirt *g, const char *id, char *out, size_t n);
/* The pid file a caller reads: decimal, no newline, written whole (renamed into place). */
int nsbox_ocistate_write_pid_file(const char *path, pid_t pid, struct nsbox_err *e);
/* text into <dir>/<name>, a new file of the owner's alone (create's copies of the bundle). */
int nsbox_ocistate_save(const char *dir, const char *name, const char *text, struct nsbox_err *e);
/* The bundle's config.json as create read it (NSBOX_OCI_CONFIG_FILE), parsed into c: what the
 * container was made with, whatever the bundle's says now. */
#define NSBOX_OCI_CONFIG_FILE "config.json"
int nsbox_ocistate_read_config(const struct nsbox_ocirt *g, const struct nsbox_ocistate *s,
                               struct nsbox_ocispec *c, struct nsbox_err *e);
/* Remove <root>/<id> and what is in it (files only: the directory is flat). */
int nsbox_ocistate_remove(const struct nsbox_ocirt *g, const char *id, struct nsbox_err *e);

/* ---- ocictl.c: the monitor's control socket, <root>/<id>/ctl.sock ----
 * The monitor owns the sandbox's cgroup; the commands that act on it (pause, resume) ask it
 * over this socket: a SOCK_SEQPACKET request (the operation's name), a struct nsbox_err reply
 * (code 0: done). The state directory is 0700: only its owner reaches the socket. */
#define NSBOX_OCI_CTL_SOCK "ctl.sock"
#define NSBOX_OCI_ANNOTATIONS_FILE "annotations.json" /* the bundle's, written by create */
#define NSBOX_OCI_PAUSED_FILE "paused" /* present while the monitor holds the cgroup frozen */
/* Listening socket in dir (the monitor). */
int nsbox_ocictl_listen(const char *dir, struct nsbox_err *e);
/* Send op ("pause", "resume") to the monitor of container s; its answer in e. */
int nsbox_ocictl_call(const struct nsbox_ocirt *g, const struct nsbox_ocistate *s,
                      const char *op, struct nsbox_err *e);
/* The requests that carry more (exec, procs, update; ocimon.c serves them): a header, then
 * len bytes of payload, and descriptors (exec's stdio and those it passes on). The same shape
 * answers them. */
struct nsbox_ocictl_msg {
    char op[16]; /* NUL-terminated: a request's name, or an answer's ("spawned", "error") */
    int32_t pid, status;
    uint32_t flags, winsize, argc, envc, len;
};
#define NSBOX_OCICTL_F_TTY 1u    /* exec: on a pseudo-terminal of the container's own devpts */
#define NSBOX_OCICTL_F_PAUSED 2u /* killall: the container is paused; it stays frozen */
/* exec: how many descriptors come after stdin, stdout and stderr (none of them with a tty),
 * for the process's 3, 4, ... (--preserve-fds), in bits 8-15 */
#define NSBOX_OCICTL_F_EXTRA(n) ((uint32_t)(n) << 8)
#define NSBOX_OCICTL_EXTRA_OF(flags) (((flags) >> 8) & 0xffu)
/* exec: the payload's first string is the process's user (policy/spawnuser.h), which init's
 * child becomes */
#define NSBOX_OCICTL_F_USER 4u
/* Connected to the monitor of s, or -1 with "container not running". */
int nsbox_ocictl_connect(const struct nsbox_ocirt *g, const struct nsbox_ocistate *s,
                         struct nsbox_err *e);
int nsbox_ocictl_send(int fd, const struct nsbox_ocictl_msg *m, const void *payload, const int *fds,
                      size_t nfds, struct nsbox_err *e);
/* One whole message (payload up to max bytes) and its descriptors (fds[3], -1 when absent):
 * 1, or 0 at EOF, or -1. */
int nsbox_ocictl_recv(int fd, struct nsbox_ocictl_msg *m, void *payload, size_t max, int fds[3],
                      struct nsbox_err *e);
/* The same with up to cap descriptors into fds[], *got of them. */
int nsbox_ocictl_recv_fds(int fd, struct nsbox_ocictl_msg *m, void *payload, size_t max, int *fds,
                          size_t cap, size_t *got, struct nsbox_err *e);
/* One request (no descriptors) and its one answer into r, its payload into buf (max bytes,
 * NUL-terminated). 0, or -1: "container not running" when the monitor is gone, the monitor's
 * message when it answers "error". */
int nsbox_ocictl_ask(const struct nsbox_ocirt *g, const struct nsbox_ocistate *s,
                     const struct nsbox_ocictl_msg *req, const void *payload,
                     struct nsbox_ocictl_msg *r, char *buf, size_t max, struct nsbox_err *e);

/* ---- ocifds.c: --preserve-fds N, the caller's descriptors 3 to 3+N-1 passed on ----
 * Into *n, once each of them is open; cmd ("create", "exec") names the command in the error. */
int nsbox_ocifds_parse(const char *cmd, const char *arg, unsigned *n, struct nsbox_err *e);
/* create's socket activation, as runc's: with LISTEN_PID nsbox-oci's own pid, the LISTEN_FDS
 * descriptors from 3 up (into *listen, 0 without) go to the container's process before the
 * preserve --preserve-fds ones, which follow them; each of the two ranges must be open. */
int nsbox_ocifds_listen(unsigned preserve, unsigned *listen, struct nsbox_err *e);
/* Ours closed once they are the process's (a caller's pipe then ends when the process ends). */
void nsbox_ocifds_close(unsigned n);

/* ---- ocimon.c: what the monitor serves besides pause and resume ----
 * exec: the monitor holds init's agent socket (sandbox/agent.h); init, which forked the
 * container's process, forks the exec'd ones too, so that every process of the container is
 * inside all its namespaces and cgroup and as hardened as init. One control connection per
 * exec: the request ("exec": the user, cwd, argv, env; stdin, stdout, stderr unless a tty),
 * then the answers "spawned" (pid inside; with a tty its master), "failed" (status 125/126/127,
 * why) or "exited" (status); the caller may send "kill" (status: the signal); a connection closed
 * before the end kills the exec'd process. procs (the cgroup's pids), update (new limits),
 * killall (status: the signal for every process of the cgroup). */
#define NSBOX_OCIMON_EXECS 64
#define NSBOX_OCIMON_FDS (NSBOX_OCIMON_EXECS + 1)
struct nsbox_launch;
struct nsbox_cgroup;
struct nsbox_ocimon {
    int agent;   /* our end of init's agent socket; -1 once init is gone */
    int console; /* the container's console (pty master) from init's 'r', until passed on */
    const struct nsbox_cgroup *cg;
    pid_t init_pid; /* once started */
    uint32_t seq;
    struct {
        int conn; /* -1: a free slot */
        uint32_t seq;
        int pid; /* inside the container; 0 before "spawned" */
    } execs[NSBOX_OCIMON_EXECS];
};
void nsbox_ocimon_init(struct nsbox_ocimon *m);
/* Before the sandbox starts: the agent socket into L (and the console, when the config asks
 * for a terminal). */
int nsbox_ocimon_prepare(struct nsbox_ocimon *m, struct nsbox_launch *L, bool console,
                         const struct nsbox_cgroup *cg, struct nsbox_err *e);
/* What init wrote on the start socket ('r' when set up), keeping the console's master that
 * comes with it: the byte, or -1 at EOF or error. */
int nsbox_ocimon_ready(struct nsbox_ocimon *m, int start_sock);
/* The descriptors to poll (at most NSBOX_OCIMON_FDS), then what came on them. */
size_t nsbox_ocimon_pollfds(const struct nsbox_ocimon *m, struct pollfd *pf);
void nsbox_ocimon_events(struct nsbox_ocimon *m, const struct pollfd *pf, size_t n);
/* Once init has been reaped: the answers it sent before it ended go out (each exec'd
 * process's status), and every exec's connection closes. */
void nsbox_ocimon_finish(struct nsbox_ocimon *m);
/* A control request whose name (peeked) is one of ours: served (fd is taken), true. */
bool nsbox_ocimon_ctl(struct nsbox_ocimon *m, int fd, const char *op);

/* ---- ociplace.c: the container's cgroup as the bundle places and limits it ---- */
/* What create decides once (its cgroupsPath parsed in the form --systemd-cgroup says) and
 * the monitor applies: the placement with its limits exactly as written, over spec s's memory
 * and pids when the config has none (the floor); and the memory controller's files beyond
 * the limit (reservation, swap, swappiness, disableOOMKiller, kernelTCP), for a placed cgroup
 * and nsbox's own alike. */
struct nsbox_ociplace {
    bool placed; /* the config has a cgroupsPath: place is where and how */
    struct nsbox_ocicgroup_path path;
    struct nsbox_cgroup_place place;
    struct nsbox_cgroup_devrule rules[NSBOX_OCISPEC_DEVRULES_MAX + 16];
    size_t n_memory;
    struct nsbox_ocicgroup_write memory[NSBOX_OCICGROUP_MEM_WRITES];
    char ignored[512]; /* the memory keys left unapplied and why ("" none): a warning */
};
/* -1 with the reason for a hostile or malformed path, or memory keys this cgroup version
 * cannot give (policy/ocicgroup.h). */
int nsbox_ociplace_build(const struct nsbox_ocirt *g, const struct nsbox_ocispec *c,
                         const struct nsbox_spec *s, struct nsbox_ociplace *out,
                         struct nsbox_err *e);
/* The memory files of p into the sandbox's cgroup cg, once it is made (before init runs). */
int nsbox_ociplace_apply_memory(const struct nsbox_ociplace *p, const struct nsbox_cgroup *cg,
                                struct nsbox_err *e);
/* <state dir>/cgroups: the directories of a placed cgroup, one a line (the monitor writes it
 * once the cgroup is made; delete removes what the monitor could not, with rmdir only: the
 * kernel refuses a cgroup that still holds processes). */
#define NSBOX_OCI_CGROUPS_FILE "cgroups"
struct nsbox_cgroup;
int nsbox_ociplace_save(const char *dir, const struct nsbox_cgroup *cg, struct nsbox_err *e);
/* rmdir each directory of <dir>/cgroups (none: 0); the first that stays is the error. */
int nsbox_ociplace_remove(const char *dir, struct nsbox_err *e);

/* ---- ocidevices.c: linux.devices ---- */
/* The binds of the host nodes for c's devices (at most NSBOX_OCISPEC_DEVICES_MAX) into out,
 * how many in *n; -1 with the reason for a device the floor refuses or the host lacks. */
struct nsbox_rootfs_mount;
int nsbox_ocidevices_mounts(const struct nsbox_ocispec *c, struct nsbox_rootfs_mount *out,
                            size_t *n, struct nsbox_err *e);

/* ---- ocivolumes.c: --idmap-volumes=engine ---- */
/* Mark the binds among mounts (n, idmaps by index) whose source is a named volume of the engine
 * whose container root is root (resolved): idmapped as the writable root is, cloned from a
 * descriptor of the directory checked (struct nsbox_rootfs_idmap's engine_volume, source_fd).
 * A bind that asks for an idmap itself, a file, anything not recognised is left as it is.
 * How many were marked. */
struct nsbox_rootfs_idmap;
size_t nsbox_ocivolumes_mark(const char *root, const struct nsbox_rootfs_mount *mounts, size_t n,
                             struct nsbox_rootfs_idmap *idmaps);
/* Their descriptors closed, once the sandbox has its trees. */
void nsbox_ocivolumes_close(struct nsbox_rootfs_idmap *idmaps, size_t n);

/* ---- ocisysctl.c: linux.sysctl ---- */
/* Write c's sysctls (checked at create) in the network, ipc and uts namespaces of init, which
 * waits at its start barrier; the first failure is the error, naming the key. */
int nsbox_ocisysctl_apply(pid_t init, const struct nsbox_ocispec *c, struct nsbox_err *e);

/* ---- ocins.c: the namespaces a config joins (linux.namespaces[].path) ----
 * Opened and checked (the type named, never the host's; the user namespace decided: the pod's,
 * or a new one) into L->joins, in the order the launch enters them (sandbox/launch.h).
 * *host_net: the joined network namespace belongs to the host's user namespace, as a CNI
 * plugin's does. */
struct nsbox_launch;
int nsbox_ocins_open(const struct nsbox_ocispec *c, struct nsbox_launch *L, bool *host_net,
                     struct nsbox_err *e);
void nsbox_ocins_close(struct nsbox_launch *L);

/* ---- ociconsole.c ---- */
/* runc's console socket: connect to the unix socket at path and send one message, a non-empty
 * payload and exactly one descriptor (SCM_RIGHTS), the pty's master. */
int nsbox_ociconsole_send(const char *path, int master, struct nsbox_err *e);

/* runc run's own console socket, for a config with a terminal and no --console-socket: a
 * listening socket in a new private directory (its path into path, n bytes), whose one
 * connection brings the master (nsbox_ociconsole_receive, within a few seconds, as create
 * has sent it before returning); remove: the socket and its directory gone. */
int nsbox_ociconsole_listen(char *path, size_t n, struct nsbox_err *e);
int nsbox_ociconsole_receive(int lsock, struct nsbox_err *e);
void nsbox_ociconsole_remove(const char *path);

/* ---- ocitty.c: the caller's terminal lent to a container's pty (exec -t, run) ---- */
/* What master still has copied to stdout, and ours as it was before nsbox_ocitty_begin. A
 * window's change is given to master by os/tty.h's nsbox_tty_resize. */
void nsbox_ocitty_restore(int master);
/* A relay's loop: the copying both ways while either way is open (nothing when master < 0),
 * as two pollfds of its poll. */
struct nsbox_ocitty {
    int master;
    bool in_open, out_open;
};
/* Ours raw and its size given to master, when there is a master to copy. */
void nsbox_ocitty_begin(struct nsbox_ocitty *t, int master);
void nsbox_ocitty_pollfds(const struct nsbox_ocitty *t, struct pollfd pf[2]);
void nsbox_ocitty_events(struct nsbox_ocitty *t, const struct pollfd pf[2]);

/* ---- ocihooks.c: the bundle's hooks, run on the host with the state on their stdin ----
 * create keeps the config's "hooks" object in the state directory, for start (poststart) and
 * delete (poststop), which do not read the bundle again. */
#define NSBOX_OCI_HOOKS_FILE "hooks.json"
int nsbox_ocihooks_save(const char *dir, const char *json, struct nsbox_err *e);
/* Run the hooks of kind `kind` (enum nsbox_ocispec_hook_kind) in order, each with the state
 * (status st) on its stdin and its timeout; the first that fails (exit status not 0, killed,
 * timed out) stops the rest and is the error, with what it said on stderr. */
int nsbox_ocihooks_run(const struct nsbox_ocirt *g, const struct nsbox_ocistate *s, int kind,
                       enum nsbox_ocistate_status st, struct nsbox_err *e);

/* ---- ocicreate.c: create, and run's first half ---- */
struct nsbox_ocicreate_args {
    char bundle[PATH_MAX];
    const char *pid_file;
    const char *console_socket;
    const char *id;
    unsigned preserve_fds; /* 3, 4, ... inherited by init: socket activation's, then
                            * --preserve-fds's (ocifds.c) */
    bool run;              /* set by the caller: run's options too, errors say "run" */
    bool detach, keep;     /* run's --detach, --keep */
    const char *tty_socket; /* run: its own console socket, used if the config asks for a
                             * terminal (lent_tty then set) and no --console-socket was given */
    bool lent_tty;
};
/* create's options (and run's, with a->run) into a; the bundle resolved. */
int nsbox_ocicreate_parse(int argc, char **argv, struct nsbox_ocicreate_args *a,
                          struct nsbox_err *e);
/* The container a says, created: its state written, init waiting at the start barrier. */
int nsbox_ocicreate_make(const struct nsbox_ocirt *g, struct nsbox_ocicreate_args *a,
                         struct nsbox_err *e);

/* ---- the commands: return the process's exit code; errors are filled into e ---- */
int nsbox_ocicreate_create(const struct nsbox_ocirt *g, int argc, char **argv,
                           struct nsbox_err *e);
int nsbox_ocicmds_start(const struct nsbox_ocirt *g, int argc, char **argv, struct nsbox_err *e);
int nsbox_ocicmds_state(const struct nsbox_ocirt *g, int argc, char **argv, struct nsbox_err *e);
int nsbox_ocicmds_kill(const struct nsbox_ocirt *g, int argc, char **argv, struct nsbox_err *e);
int nsbox_ocicmds_pause(const struct nsbox_ocirt *g, int argc, char **argv, struct nsbox_err *e);
int nsbox_ocicmds_resume(const struct nsbox_ocirt *g, int argc, char **argv,
                         struct nsbox_err *e);
int nsbox_ocicmds_features(const struct nsbox_ocirt *g, int argc, char **argv,
                           struct nsbox_err *e);
int nsbox_ocicmds_delete(const struct nsbox_ocirt *g, int argc, char **argv,
                         struct nsbox_err *e);
int nsbox_ociexec_exec(const struct nsbox_ocirt *g, int argc, char **argv, struct nsbox_err *e);
int nsbox_ocips_ps(const struct nsbox_ocirt *g, int argc, char **argv, struct nsbox_err *e);
int nsbox_ociupdate_update(const struct nsbox_ocirt *g, int argc, char **argv, struct nsbox_err *e);
int nsbox_ocispecgen_spec(const struct nsbox_ocirt *g, int argc, char **argv, struct nsbox_err *e);
int nsbox_ocirun_run(const struct nsbox_ocirt *g, int argc, char **argv, struct nsbox_err *e);
int nsbox_ocilist_list(const struct nsbox_ocirt *g, int argc, char **argv, struct nsbox_err *e);
/* The host pids of container s's processes (its cgroup's; its monitor reads them): how many
 * (at most max), or -1; *total: how many it has, more than that when the list was cut. */
int nsbox_ocips_pids(const struct nsbox_ocirt *g, const struct nsbox_ocistate *s, pid_t *pids,
                     size_t max, size_t *total, struct nsbox_err *e);

#endif
