/* Finding an OCI image of the store by reference, and what a sandbox made from one needs:
 * its Env and its python3. Below image.c (which resolves references with it) and above nothing
 * of the store's, so that resolving a name never includes the importer. */
#include "oci_lookup.h"
#include "cleanup.h"
#include "ocimanifest.h"
#include "paths.h"
#include "pathsearch.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* as nsbox_image_name_valid (image.h), which this file must not include */
static bool store_name_valid(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 63 || !((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= '0' && s[0] <= '9')))
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '.' ||
              s[i] == '_' || s[i] == '-'))
            return false;
    return true;
}

static int exec_in_root(int root_fd, const char *path)
{
    struct open_how how = {.flags = O_PATH | O_CLOEXEC,
                           .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS};
    cleanup_close int fd = nsbox_openat2(root_fd, path, &how);
    struct stat st;
    return fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 0111) ? 0 : -1;
}

/* The canonical form of ref with '/' as '+' (a character no reference has). */
int nsbox_oci_lookup_ref_file(const char *ref, char *canon, char *file, struct nsbox_err *e)
{
    struct nsbox_ociref r;
    /* `--image mine` looks for the stored image "mine", never for docker.io/library/mine: a
     * reference written as a bare word could be made but never used by that name */
    if (store_name_valid(ref))
        return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL,
                             "'%s' is a bare word, which names a stored image (`nsbox image "
                             "ls`), never an OCI reference such as docker.io/library/%s: write "
                             "%s:latest (or another tag, or a name with a '/')",
                             ref, ref, ref);
    if (nsbox_ociref_parse(ref, &r, e) < 0)
        return -1;
    nsbox_ociref_format(&r, canon, NSBOX_OCIREF_MAX + 1);
    strcpy(file, canon);
    for (char *p = file; *p; p++)
        if (*p == '/')
            *p = '+';
    return 0;
}

int nsbox_oci_lookup_name(const char *ref, char *name, size_t n, struct nsbox_err *e)
{
    if (nsbox_oci_lookup_has_prefix(ref) && store_name_valid(ref)) {
        snprintf(name, n, "%s", ref);
        return 0;
    }
    char canon[NSBOX_OCIREF_MAX + 1], file[NSBOX_OCIREF_MAX + 1];
    char path[PATH_MAX + NSBOX_OCIREF_MAX + 16];
    if (nsbox_oci_lookup_ref_file(ref, canon, file, e) < 0)
        return -1;
    struct nsbox_err ignored; /* said as what it means here: the image cannot be found */
    if (nsbox_paths_images(path, sizeof path, &ignored, "/.refs/%s", file) < 0)
        return nsbox_err_set(e, NSBOX_E_NOTFOUND, ENOENT, "no image store");
    ssize_t len = readlink(path, name, n - 1);
    if (len <= 0)
        return nsbox_err_set(e, NSBOX_E_NOTFOUND, ENOENT,
                             "image %s is not in the store: `nsbox image pull %s` or "
                             "`nsbox image import`",
                             canon, canon);
    name[len] = '\0';
    if (!store_name_valid(name))
        return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL, "reference %s is corrupt", canon);
    return 0;
}

bool nsbox_oci_lookup_is_ref(const char *image)
{
    if (!image || image[0] == '/' || store_name_valid(image))
        return false;
    return nsbox_ociref_is_reference(image);
}

static char *read_config(const char *name, size_t *len)
{
    char path[PATH_MAX + 80];
    struct nsbox_err ignored; /* no store: no config, as for an image without one */
    if (nsbox_paths_images(path, sizeof path, &ignored, "/%s/config.json", name) < 0)
        return NULL;
    cleanup_close int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    char *buf = malloc(NSBOX_OCI_JSON_MAX + 2);
    if (!buf)
        return NULL;
    *len = nsbox_read_bounded(fd, buf, NSBOX_OCI_JSON_MAX + 2);
    return buf;
}

int nsbox_oci_lookup_env(const char *image, char ***out, struct nsbox_err *e)
{
    char name[64];
    /* an image not found has no environment here; starting the sandbox says it is missing */
    struct nsbox_err ignored;
    *out = NULL;
    if (!image || image[0] == '/')
        return 0;
    if (nsbox_oci_lookup_is_ref(image)) {
        if (nsbox_oci_lookup_name(image, name, sizeof name, &ignored) < 0)
            return 0;
    } else if (nsbox_oci_lookup_has_prefix(image)) {
        snprintf(name, sizeof name, "%s", image);
    } else {
        return 0;
    }
    size_t len = 0;
    cleanup_free char *text = read_config(name, &len);
    if (!text)
        return 0;
    cleanup_free struct nsbox_oci_config *c = malloc(sizeof *c);
    if (!c)
        return nsbox_err_sys(e, "malloc");
    /* a config the import checked, which a later check may refuse (an older nsbox stored it):
     * a sandbox without the image's Env (its PATH) would start as if the image had none */
    struct nsbox_err why;
    if (nsbox_ocimanifest_config(text, len, c, &why) < 0)
        return nsbox_err_set(e, NSBOX_E_INVALID, 0,
                             "image %s: its stored %s: remove it (nsbox image rm) and "
                             "pull or import it again",
                             image, why.msg);
    if (!c->n_env) {
        nsbox_ocimanifest_config_free(c);
        return 0;
    }
    size_t bytes = (c->n_env + 1) * sizeof(char *);
    for (size_t i = 0; i < c->n_env; i++)
        bytes += strlen(c->env[i]) + 1;
    char **env = malloc(bytes);
    if (env) {
        char *p = (char *)(env + c->n_env + 1);
        for (size_t i = 0; i < c->n_env; i++) {
            env[i] = p;
            p = stpcpy(p, c->env[i]) + 1;
        }
        env[c->n_env] = NULL;
    }
    nsbox_ocimanifest_config_free(c);
    if (!env)
        return nsbox_err_sys(e, "malloc");
    *out = env;
    return 0;
}

int nsbox_oci_lookup_check(int rootfs_fd, const char *dir, struct nsbox_err *e)
{
    const char *name = strrchr(dir, '/') ? strrchr(dir, '/') + 1 : dir;
    cleanup_free char **env = NULL;
    if (nsbox_oci_lookup_env(name, &env, e) < 0)
        return -1;
    const char *path = nsbox_pathsearch_env(env);
    if (!path)
        path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
    /* the places the sandbox's exec tries (policy/pathsearch.c), each resolved in the image's
     * root; a place too long to be a path is none */
    struct nsbox_pathsearch s;
    char buf[PATH_MAX];
    const char *place;
    int r;
    nsbox_pathsearch_init(&s, "python3", path, "/");
    while ((r = nsbox_pathsearch_next(&s, buf, sizeof buf, &place)) != 0)
        if (r > 0 && exec_in_root(rootfs_fd, place[0] == '/' ? place + 1 : place) == 0)
            return 0;
    return nsbox_err_set(e, NSBOX_E_INVALID, ENOENT,
                         "image %s has no python3 on its PATH (%s): an image must provide "
                         "/bin/sh and python3 (install python3 in it, or start from one that "
                         "has it, such as python:3.12-slim)",
                         name, path);
}
