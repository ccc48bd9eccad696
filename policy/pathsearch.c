/* Where a command name is looked for, as execvp looks (pathsearch.h). */
#include "pathsearch.h"

#include <stdbool.h>
#include <string.h>

void nsbox_pathsearch_init(struct nsbox_pathsearch *s, const char *name, const char *path,
                           const char *cwd)
{
    s->name = name;
    s->cwd = cwd;
    /* a path is one place: the search path's "entry" is then cwd's (empty) */
    s->next = !*name ? NULL : strchr(name, '/') ? "" : path ? path : NSBOX_PATHSEARCH_DEFAULT;
}

/* dir (n bytes; none: the command's cwd) joined with the name into buf; an absolute name is
 * itself. */
static int join(const struct nsbox_pathsearch *s, const char *dir, size_t n, char *buf, size_t size,
                const char **out)
{
    if (!n && s->name[0] == '/') {
        *out = s->name;
        return 1;
    }
    if (!n) {
        dir = s->cwd;
        n = strlen(dir);
    }
    size_t name_len = strlen(s->name);
    bool slash = n && dir[n - 1] == '/'; /* "/" and "/" + name: not "//name" */
    if (n + !slash + name_len + 1 > size)
        return -1;
    memcpy(buf, dir, n);
    if (!slash)
        buf[n++] = '/';
    memcpy(buf + n, s->name, name_len + 1);
    *out = buf;
    return 1;
}

int nsbox_pathsearch_next(struct nsbox_pathsearch *s, char *buf, size_t size, const char **out)
{
    if (!s->next)
        return 0;
    const char *dir = s->next;
    size_t n = strcspn(dir, ":");
    s->next = dir[n] ? dir + n + 1 : NULL;
    return join(s, dir, n, buf, size, out);
}

const char *nsbox_pathsearch_env(char *const *env)
{
    for (size_t i = 0; env && env[i]; i++)
        if (!strncmp(env[i], "PATH=", 5))
            return env[i] + 5;
    return NULL;
}
