/* A helper program (mkfs, skopeo, newuidmap) run to its end, with what it said on stderr kept
 * for the error message of its caller. */
#ifndef NSBOX_PROC_H
#define NSBOX_PROC_H

#include "nsbox.h"

#include <stdbool.h>
#include <stddef.h>

#define NSBOX_PROC_STDOUT_NULL (-1)    /* the program's stdout goes to /dev/null */
#define NSBOX_PROC_STDOUT_CAPTURED (-2) /* ...or with its stderr, into the captured text */

struct nsbox_proc {
    char *const *argv; /* argv[0]: a path, or with path_lookup a name looked up in PATH */
    char *const *envp; /* NULL: the caller's environment */
    bool path_lookup;
    int stdout_fd;          /* a descriptor of ours, or NSBOX_PROC_STDOUT_* */
    int keep_fd;            /* handed to the program as its descriptor 3, or -1 */
    const char *stdin_text; /* the program's stdin; NULL: /dev/null */
    int timeout_s;          /* killed (SIGKILL) after this many seconds; 0: never */
    const char *path;       /* the program to execute, when it is not argv[0] (a hook's) */
};

/* Runs the program with stdin from /dev/null (or stdin_text), no other descriptor of ours (the
 * caller may have threads that opened some without O_CLOEXEC), and a parent-death SIGKILL; waits
 * for it. 0 with *status (a wait status) and err holding its stderr (at most n - 1 bytes, trailing
 * blanks cut; "cannot execute PROG: REASON" and exit 127 when the exec failed); -1 with e when it
 * could not be started at all. A program killed for its timeout has *status "killed by SIGKILL" and
 * err saying so. */
int nsbox_proc_run(const struct nsbox_proc *p, int *status, char *err, size_t n,
                   struct nsbox_err *e);
/* "exit code N" or "killed by signal N" for a wait status that is not a success. */
void nsbox_proc_status_text(int status, char *buf, size_t n);

#endif
