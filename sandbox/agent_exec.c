/* The search an agent's command is executed by (agent_exec.h). */
#include "agent_exec.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

static const char *env_get(char **env, const char *key)
{
    size_t n = strlen(key);
    for (size_t i = 0; env[i]; i++)
        if (!strncmp(env[i], key, n) && env[i][n] == '=')
            return env[i] + n + 1;
    return NULL;
}

int nsbox_agent_exec_search(char **argv, char **env)
{
    const char *name = argv[0];
    char path[PATH_MAX];
    int err = ENOENT;
    bool eacces = false;
    const char *dirs = strchr(name, '/') ? "" : env_get(env, "PATH");
    if (!dirs)
        dirs = "/usr/local/bin:/usr/bin:/bin";
    for (const char *p = dirs;;) {
        const char *colon = strchr(p, ':');
        size_t dl = colon ? (size_t)(colon - p) : strlen(p);
        const char *file = name;
        if (!strchr(name, '/')) {
            if (dl + 1 + strlen(name) + 1 > sizeof path) {
                if (err == ENOENT)
                    err = ENAMETOOLONG; /* as execvp says it: not "not found" */
                goto next;
            }
            memcpy(path, dl ? p : ".", dl ? dl : 1);
            size_t o = dl ? dl : 1;
            path[o++] = '/';
            strcpy(path + o, name);
            file = path;
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
    next:
        if (!colon || strchr(name, '/')) /* the last entry, or a path: one try */
            break;
        p = colon + 1;
    }
    return eacces ? EACCES : err;
}
