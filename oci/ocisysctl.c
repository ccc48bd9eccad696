/* linux.sysctl, applied in the container's own namespaces before its process starts. The keys
 * were checked at create (policy/sysctl.h: only those of the network, ipc and uts namespaces,
 * which every container has its own of). A child of the monitor enters init's network, ipc and
 * uts namespaces (as host root it may) and writes each key under /proc/sys, which shows the
 * writer's namespaces: the container's own values, never the host's. The kernel lets only the
 * namespace's root write the ipc namespace's keys (the host's root reads them as "other"), so a
 * key refused to root is written again as the container's root (its host id, from init's
 * uid_map); the uts keys are root's. */
#include "ocirt.h"
#include "ocispec.h"
#include "sysctl.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* In the child: enter the three namespaces of init. */
static int enter(pid_t init, struct nsbox_err *e)
{
    static const struct {
        const char *name;
        int type;
    } ns[] = {{"net", CLONE_NEWNET}, {"ipc", CLONE_NEWIPC}, {"uts", CLONE_NEWUTS}};
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
        char path[64];
        snprintf(path, sizeof path, "/proc/%d/ns/%s", (int)init, ns[i].name);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            return nsbox_err_sys(e, "linux.sysctl: open %s", path);
        int r = setns(fd, ns[i].type);
        close(fd);
        if (r < 0)
            return nsbox_err_sys(e, "linux.sysctl: enter the container's %s namespace", ns[i].name);
    }
    return 0;
}

/* The host id that id 0 of init's user namespace maps to (map: "uid_map", "gid_map"). */
static long ns_root(pid_t init, const char *map)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/%s", (int)init, map);
    FILE *f = fopen(path, "re");
    if (!f)
        return -1;
    long inside, host, count, found = -1;
    while (found < 0 && fscanf(f, "%ld %ld %ld", &inside, &host, &count) == 3)
        if (inside == 0 && count > 0)
            found = host;
    fclose(f);
    return found;
}

/* One write of value to path: -1 and errno. */
static int put(const char *path, const char *value)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return -1;
    size_t len = strlen(value);
    ssize_t w = write(fd, value, len);
    int err = errno;
    close(fd);
    errno = w < 0 ? err : EIO;
    return w == (ssize_t)len ? 0 : -1;
}

/* Write as root, or else (the kernel checks at open and at the write) as the container's root
 * (uid, gid), then root again. */
static int put_as(const char *path, const char *value, long uid, long gid)
{
    if (put(path, value) == 0)
        return 0;
    if ((errno != EACCES && errno != EPERM) || uid < 0 || gid < 0)
        return -1;
    if (setresgid((gid_t)-1, (gid_t)gid, (gid_t)-1) < 0 ||
        setresuid((uid_t)-1, (uid_t)uid, (uid_t)-1) < 0)
        return -1;
    int r = put(path, value), err = errno;
    if (setresuid((uid_t)-1, 0, (uid_t)-1) < 0 || setresgid((gid_t)-1, 0, (gid_t)-1) < 0)
        _exit(1); /* cannot be root again: nothing more is written */
    errno = err;
    return r;
}

static int write_all(pid_t init, const struct nsbox_ocispec *c, struct nsbox_err *e)
{
    long uid = ns_root(init, "uid_map"), gid = ns_root(init, "gid_map");
    for (size_t i = 0; i < c->n_sysctl; i++) {
        char rel[NSBOX_SYSCTL_KEY_MAX], path[NSBOX_SYSCTL_KEY_MAX + 16];
        if (nsbox_sysctl_path(c->sysctl[i].key, rel, sizeof rel) < 0)
            return nsbox_err_invalid(e, "linux.sysctl: %s: too long", c->sysctl[i].key);
        snprintf(path, sizeof path, "/proc/sys/%s", rel);
        if (put_as(path, c->sysctl[i].value, uid, gid) == 0)
            continue;
        if (errno == ENOENT)
            return nsbox_err_set(e, NSBOX_E_INVALID, ENOENT,
                                 "linux.sysctl: %s does not exist in the container's "
                                 "namespaces (a key the kernel does not have, or not per "
                                 "namespace): drop it",
                                 c->sysctl[i].key);
        return nsbox_err_sys(e, "linux.sysctl: write '%s' to %s", c->sysctl[i].value,
                             c->sysctl[i].key);
    }
    return 0;
}

int nsbox_ocisysctl_apply(pid_t init, const struct nsbox_ocispec *c, struct nsbox_err *e)
{
    if (!c->n_sysctl)
        return 0;
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0)
        return nsbox_err_sys(e, "pipe");
    pid_t pid = fork();
    if (pid < 0) {
        close(p[0]);
        close(p[1]);
        return nsbox_err_sys(e, "fork");
    }
    if (pid == 0) {
        struct nsbox_err ce = {0};
        close(p[0]);
        int r = enter(init, &ce) < 0 ? -1 : write_all(init, c, &ce);
        ssize_t w = write(p[1], &ce, sizeof ce);
        (void)w;
        _exit(r < 0 ? 1 : 0);
    }
    close(p[1]);
    struct nsbox_err ce = {0};
    ssize_t n;
    do
        n = read(p[0], &ce, sizeof ce);
    while (n < 0 && errno == EINTR);
    close(p[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
        return 0;
    if (n == (ssize_t)sizeof ce && ce.msg[0]) {
        *e = ce;
        return -1;
    }
    return nsbox_err_set(e, NSBOX_E_SYS, EPIPE, "linux.sysctl: the writer ended");
}
