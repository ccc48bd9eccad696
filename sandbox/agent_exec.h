/* How init's child for an agent's command executes it (agent.c). It runs on a small stack in
 * init's memory (CLONE_VM): nothing here allocates. */
#ifndef NSBOX_AGENT_EXEC_H
#define NSBOX_AGENT_EXEC_H

/* execvp with the command's own PATH (not init's environ), in the places policy/pathsearch.h
 * gives (execvp's), as the shell searches: the first entry where it can be executed; EACCES
 * only if no entry had it at all. A file without a #! line (ENOEXEC) runs with /bin/sh, as
 * execvp does. Returns the errno to report. */
int nsbox_agent_exec_search(char **argv, char **env);

#endif
