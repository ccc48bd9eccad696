/* nsbox-oci, the runc-compatible front end (docs/oci.md): what its files share. A front end
 * beside cli/: it prints (only to the --log file and the standard streams), and calls the
 * sandbox layer below it. */
#ifndef NSBOX_OCIRT_H
#define NSBOX_OCIRT_H

#include "nsbox.h"

#include <limits.h>
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
    char created[40];       /* RFC 3339, UTC */
    pid_t pid;              /* the monitor: the pid-file process, parent of init */
    uint64_t pid_start;     /* its start time (/proc/PID/stat field 22), against pid reuse */
    pid_t init_pid;         /* the sandbox's init (pid 1 inside); signals go there */
    uint64_t init_start;
    char sandbox[64];       /* nsbox's own id of the sandbox */
};

/* ---- ocistate.c ---- */
/* [A-Za-z0-9][A-Za-z0-9_.+-]*, at most NSBOX_OCI_ID_MAX: a single path component. */
bool nsbox_ocistate_id_valid(const char *id);
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
enum nsbox_ocistate_status nsbox_ocistate_status(const struct nsbox_ocirt *g,
                                                 const struct nsbox_ocistate *s);
const char *nsbox_ocistate_status_name(enum nsbox_ocistate_status st);
/* The state as runtime-spec's runtime.md has it (what `state` prints and hooks read on their
 * stdin), with the status st; malloc'd. */
char *nsbox_ocistate_json(const struct nsbox_ocirt *g, const struct nsbox_ocistate *s,
                          enum nsbox_ocistate_status st, bool pretty, struct nsbox_err *e);
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

#endif
