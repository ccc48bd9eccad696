/* Where a command name is looked for (pathsearch.c): the places execvp tries, in its order, for
 * init's exec of an agent's command (sandbox/agent_exec.c), which tries each, nsbox-oci's
 * check at create that process.args[0] is somewhere (sandbox/contain.c), and the check that an
 * OCI image has python3 on its PATH (rootfs/oci_lookup.c), which stat each. */
#ifndef NSBOX_PATHSEARCH_H
#define NSBOX_PATHSEARCH_H

#include <stddef.h>

/* The search path of an environment without PATH: glibc's execvp's (its confstr(_CS_PATH)), so
 * that an agent's command is found where the workload's execvp (sandbox/contain.c) and a
 * program of the container calling execvp find it. */
#define NSBOX_PATHSEARCH_DEFAULT "/bin:/usr/bin"

struct nsbox_pathsearch {
    const char *name; /* the command: a name looked up in path, or a path (with a '/') */
    const char *cwd;  /* the directory the command runs in ("." once there) */
    const char *next; /* what is left of the search path; NULL once every place was given */
};

/* A search for name along path (PATH's value; NULL: unset, NSBOX_PATHSEARCH_DEFAULT). An empty
 * entry of path is cwd, as in execvp and POSIX (a zero-length prefix is the working directory;
 * Go's exec.LookPath, which runc uses, reads it as "." too). A name with a '/' is the one place,
 * relative to cwd; an empty name has none (execvp: ENOENT). Nothing is copied: the strings
 * must outlive the search. Allocates nothing (init's exec runs on a small shared stack). */
void nsbox_pathsearch_init(struct nsbox_pathsearch *s, const char *name, const char *path,
                           const char *cwd);
/* The next place: 1 with *out set (buf, or name itself), 0 once there is none left, -1 for a
 * place whose path does not fit in buf (size bytes), which execvp skips, to report
 * ENAMETOOLONG only if no other place had the command at all. */
int nsbox_pathsearch_next(struct nsbox_pathsearch *s, char *buf, size_t size, const char **out);
/* PATH's value in env (NAME=value strings, NULL-terminated), or NULL. */
const char *nsbox_pathsearch_env(char *const *env);

#endif
