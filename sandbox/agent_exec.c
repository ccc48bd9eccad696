/* The search an agent's command is executed by (agent_exec.h). */
#include "agent_exec.h"
#include "pathsearch.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

int nsbox_agent_exec_search(char **argv, char **env)
{
    char path[PATH_MAX];
    const char *file;
    int err = ENOENT, r;
    bool eacces = false;
    struct nsbox_pathsearch s;
    /* init's child has entered the command's cwd: "." */
    nsbox_pathsearch_init(&s, argv[0], nsbox_pathsearch_env(env), ".");
    while ((r = nsbox_pathsearch_next(&s, path, sizeof path, &file)) != 0) {
        if (r < 0) {
            if (err == ENOENT)
                err = ENAMETOOLONG; /* as execvp says it: not "not found" */
            continue;
        }
        execve(file, argv, env);
        err = errno;
        if (err == ENOEXEC) {
            size_t argc = 0;
            while (argv[argc])
                argc++;
            /* on this 256 KiB stack: 32 KiB at most. 4096 is the most an exec request has
             * (NSBOX_PROTO_MAX_ARGS); a pooled run with more, which no real script takes,
             * gets 126 where a cold run would run it with sh */
            if (argc <= 4096) {
                char *sh[argc + 2];
                sh[0] = "/bin/sh";
                sh[1] = (char *)file;
                memcpy(sh + 2, argv + 1, argc * sizeof *sh); /* with the NULL */
                execve("/bin/sh", sh, env);
            }
            return errno;
        }
        if (err == EACCES)
            eacces = true;
        else if (err != ENOENT && err != ENOTDIR && err != ESTALE)
            return err;
    }
    return eacces ? EACCES : err;
}
