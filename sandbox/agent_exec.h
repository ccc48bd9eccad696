/* The child init starts for an agent's command (agent_init.c), up to its exec: signals reset,
 * streams and descriptors placed, the user become, cwd entered, the command searched for and
 * executed. It runs on a small stack in init's memory (CLONE_VM | CLONE_VFORK, as posix_spawn
 * does: no page tables copied, no copy-on-write faults, and init resumes exactly when the
 * command is running or has failed to start, which the child says in its struct), or, for
 * nsbox-oci, forked (agent_init.c, spawn_clone), saying why it failed on a status pipe. So it must
 * not allocate, and it changes nothing of init's that init relies on (not environ; errno and
 * safepath's openat2 probe are harmless). All signals are blocked around the clone, so no
 * handler can run in the child with init's memory. */
#ifndef NSBOX_AGENT_EXEC_H
#define NSBOX_AGENT_EXEC_H

#include "spawnuser.h"

#include <stdbool.h>
#include <stddef.h>

struct nsbox_agent_exec_child {
    char *cwd;
    char **argv, **env;
    const int *fds;   /* stdin, stdout, stderr */
    const int *extra; /* at 3, 4, ...: n_extra of them */
    size_t n_extra;
    bool tty; /* fds are a terminal's (NSBOX_AGENT_F_TTY): made the controlling one */
    const struct nsbox_spawnuser *user; /* NULL: init's ids */
    int fail_kind; /* 0: exec'd; 'C': cannot enter cwd; 'F': cannot place extra; 'E': exec;
                    * 'U': cannot become the user; 'K': cannot set its capabilities;
                    * 'N': cannot set no_new_privs */
    int fail_errno;
    int status_fd; /* forked: why it failed goes here (struct nsbox_agent_exec_report); or -1 */
};

/* What a forked child says on its status pipe when it could not exec: its exit status and
 * why. Its exec closes the pipe without a word. */
struct nsbox_agent_exec_report {
    int status;
    char msg[600];
};

/* Once, in init before it serves: the signals whose disposition is not the default (an
 * ignored SIGPIPE, say). A command gets every signal at its default, and resetting only these
 * saves a sigaction call per signal on every spawn. */
void nsbox_agent_exec_find_signals(void);
/* The child's main (arg: a struct nsbox_agent_exec_child): execs, or exits 125/126/127 with
 * fail_kind and fail_errno set (and its report on status_fd). */
__attribute__((noreturn)) int nsbox_agent_exec_child_main(void *arg);
/* Why a child that failed before exec (c->fail_kind set) did, into msg. */
void nsbox_agent_exec_fail_msg(const struct nsbox_agent_exec_child *c, char *msg, size_t n);
/* Its exit status then: 125 for nsbox's part, 127 not found, 126 not executable. */
int nsbox_agent_exec_fail_status(int kind, int err);

/* execvp with the command's own PATH (not init's environ), in the places policy/pathsearch.h
 * gives (execvp's), as the shell searches: the first entry where it can be executed; EACCES
 * only if no entry had it at all. A file without a #! line (ENOEXEC) runs with /bin/sh, as
 * execvp does. Returns the errno to report. */
int nsbox_agent_exec_search(char **argv, char **env);

#endif
