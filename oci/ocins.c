/* The namespaces a config joins (linux.namespaces[].path): a pod's, shared by its containers.
 *
 * Each is opened and checked against the floor: the type the config names, never the host's
 * (compared by device and inode with pid 1's and the runtime's own). The user namespace is
 * decided here (docs/decisions.md, "A pod's containers share its user namespace"): the joined
 * namespaces that belong to another user namespace than the host's (another nsbox-oci
 * container's) make the container join that one too, so that it has the same ids and its
 * capabilities cover them; there may be only one such. A user namespace is joined only when it
 * is a child of the host's and maps no host id 0 (never host root). Namespaces of the host's
 * user namespace (a CNI plugin's network namespace) are entered first, with the host's
 * privileges, and the container gets its own user namespace as without joins. */
#include "ocirt.h"
#include "cleanup.h"
#include "idmap.h"
#include "launch.h"
#include "ocispec.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <linux/nsfs.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

static const struct {
    enum nsbox_ocispec_ns type;
    int nstype;
    const char *proc; /* its name in /proc/PID/ns */
} kinds[] = {
    {NSBOX_OCI_NS_NETWORK, CLONE_NEWNET, "net"},
    {NSBOX_OCI_NS_IPC, CLONE_NEWIPC, "ipc"},
    {NSBOX_OCI_NS_UTS, CLONE_NEWUTS, "uts"},
    {NSBOX_OCI_NS_USER, CLONE_NEWUSER, "user"},
};

/* The host's namespace of that kind: pid 1's, or the runtime's own. */
static bool is_host(int fd, const char *proc)
{
    char p1[64], self[64];
    struct stat ns, host;
    snprintf(p1, sizeof p1, "/proc/1/ns/%s", proc);
    snprintf(self, sizeof self, "/proc/self/ns/%s", proc);
    return fstat(fd, &ns) == 0 &&
           ((stat(p1, &host) == 0 && nsbox_same_inode(&ns, &host)) ||
            (stat(self, &host) == 0 && nsbox_same_inode(&ns, &host)));
}

/* A user namespace's maps as a child in it reads them, relative to the host's user namespace
 * (its parent): whether a line covers host id 0, whether each was written, the host id of its
 * id 0 when both are the same one line "0 BASE 65536" (a slot's range, as nsbox-oci maps a
 * container's ids; else 0), and each one's lines as "in out count, ..." for messages. */
struct userns_maps {
    bool root;
    bool empty[2]; /* uid, gid */
    uint32_t base;
    char text[2][96];
};

/* One map's text: its lines read into m (root, empty, text) for map i; its one-range base. */
static uint32_t read_map(const char *map, size_t i, struct userns_maps *m)
{
    unsigned long in, out, count, base = 0;
    int used;
    size_t lines = 0, len = 0;
    m->empty[i] = true;
    m->text[i][0] = '\0';
    while (sscanf(map, "%lu %lu %lu%n", &in, &out, &count, &used) == 3) {
        m->root |= out == 0 && count > 0;
        m->empty[i] = false;
        base = lines++ == 0 && in == 0 && count == NSBOX_ID_COUNT && out != 0 &&
                       out <= UINT32_MAX - count
                   ? out
                   : 0;
        if (len < sizeof m->text[i]) {
            int n = snprintf(m->text[i] + len, sizeof m->text[i] - len, "%s%lu %lu %lu",
                             len ? ", " : "", in, out, count);
            len += n > 0 ? (size_t)n : 0;
        }
        map += used;
    }
    return (uint32_t)base;
}

/* A child enters the user namespace and reads its maps into *m: 0, or -1 when unreadable. */
static int userns_maps(int userfd, struct userns_maps *m)
{
    memset(m, 0, sizeof *m);
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0)
        return -1;
    pid_t pid = fork();
    if (pid < 0) {
        close(p[0]);
        close(p[1]);
        return -1;
    }
    if (pid == 0) {
        close(p[0]);
        if (setns(userfd, CLONE_NEWUSER) < 0)
            _exit(2);
        uint32_t bases[2];
        static const char *const maps[] = {"/proc/self/uid_map", "/proc/self/gid_map"};
        for (size_t i = 0; i < 2; i++) {
            char *text = NULL;
            struct nsbox_err e;
            if (nsbox_read_small(maps[i], &text, &e) != 0)
                _exit(2);
            bases[i] = read_map(text, i, m);
            free(text);
        }
        m->base = bases[0] == bases[1] ? bases[0] : 0;
        _exit(write(p[1], m, sizeof *m) == (ssize_t)sizeof *m ? 0 : 2);
    }
    close(p[1]);
    ssize_t n;
    while ((n = read(p[0], m, sizeof *m)) < 0 && errno == EINTR)
        ;
    close(p[0]);
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return -1;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || n != (ssize_t)sizeof *m)
        return -1;
    m->text[0][sizeof m->text[0] - 1] = m->text[1][sizeof m->text[1] - 1] = '\0';
    return 0;
}

/* A user namespace a container may join: a child of the host's whose maps are written and map
 * no host id 0; as root, the one range of a slot (its root and volumes are idmapped to those
 * ids, and its slot is held: nsbox_state_hold_pod_slot). *base: the host id of its id 0, or 0. */
static int check_userns(int userfd, const char *path, uint32_t *base, struct nsbox_err *e)
{
    *base = 0;
    if (is_host(userfd, "user"))
        return nsbox_err_set(e, NSBOX_E_POLICY, EPERM,
                             "joining the host's user namespace (%s) is not supported: the "
                             "container's root would be the host's; nsbox-oci gives it its "
                             "own, or a pod's",
                             NSBOX_SHOW(path));
    int parent = ioctl(userfd, NS_GET_PARENT);
    bool top = parent >= 0 && is_host(parent, "user");
    if (parent >= 0)
        close(parent);
    struct userns_maps m;
    int got = top ? userns_maps(userfd, &m) : -1;
    if (!top || got < 0 || m.root)
        return nsbox_err_set(e, NSBOX_E_POLICY, EPERM,
                             "the user namespace of %s cannot be joined: %s; nsbox-oci joins "
                             "only a pod's, one an nsbox-oci container made (a child of the "
                             "host's that maps no host id 0)",
                             NSBOX_SHOW(path),
                             !top      ? "it is not a child of the host's user namespace"
                             : got < 0 ? "its id maps cannot be read"
                                       : "it maps the host's root (id 0)");
    if (m.empty[0] || m.empty[1])
        return nsbox_err_set(e, NSBOX_E_POLICY, EPERM,
                             "the user namespace at %s has no %s map yet: its maker has not "
                             "written it, and a process there has no ids; create the container "
                             "once the pod's first container runs",
                             NSBOX_SHOW(path), m.empty[0] ? "uid" : "gid");
    if (geteuid() == 0 && !m.base)
        return nsbox_err_set(e, NSBOX_E_POLICY, EPERM,
                             "the user namespace at %s maps uids '%s' and gids '%s': nsbox-oci "
                             "joins one that maps 65536 ids in one line, the same for both "
                             "('0 BASE 65536', as it makes a pod's), for the container's root "
                             "and volumes are idmapped to those ids; join an nsbox-oci "
                             "container's user namespace",
                             NSBOX_SHOW(path), m.text[0], m.text[1]);
    *base = m.base;
    return 0;
}

/* One joined namespace: opened, of the type named, not the host's. */
static int open_one(const struct nsbox_ocispec_namespace *ns, size_t k, struct nsbox_err *e)
{
    const char *name = nsbox_ocispec_ns_name(ns->type);
    /* Found without being opened, and opened only once it is a namespace's file: a FIFO's
     * open would wait for a writer, a device's would run its driver (a watchdog's starts). */
    cleanup_close int found = open(ns->path, O_PATH | O_CLOEXEC);
    if (found < 0)
        return nsbox_err_sys(e, "linux.namespaces.path %s (%s)", NSBOX_SHOW(ns->path), name);
    struct statfs sf;
    int fd = -1;
    if (fstatfs(found, &sf) == 0 && sf.f_type == NSFS_MAGIC) {
        char via[64];
        snprintf(via, sizeof via, "/proc/self/fd/%d", found);
        fd = open(via, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            return nsbox_err_sys(e, "linux.namespaces.path %s (%s)", NSBOX_SHOW(ns->path), name);
    }
    if (fd < 0 || ioctl(fd, NS_GET_NSTYPE) != kinds[k].nstype) {
        if (fd >= 0)
            close(fd);
        return nsbox_err_invalid(e, "linux.namespaces.path %s is not a %s namespace",
                                 NSBOX_SHOW(ns->path), name);
    }
    if (kinds[k].nstype != CLONE_NEWUSER && is_host(fd, kinds[k].proc)) {
        close(fd);
        return nsbox_err_set(e, NSBOX_E_POLICY, EPERM,
                             "joining the host's %s namespace (linux.namespaces.path %s) is "
                             "not supported: nsbox-oci never shares a host namespace with a "
                             "container; join another container's, or leave the path out to "
                             "give it its own%s",
                             name, NSBOX_SHOW(ns->path),
                             kinds[k].nstype == CLONE_NEWNET
                                 ? " (Docker names the host's so for --network=host: drop it)"
                                 : "");
    }
    return fd;
}

/* The namespaces a config joins, as opened: each one's descriptor, its owner (NS_GET_USERNS,
 * asked once) and whether that owner is the host's user namespace. */
struct joined {
    size_t n;
    int fd[NSBOX_ARRAY_LEN(kinds)], owner[NSBOX_ARRAY_LEN(kinds)];
    bool host_owned[NSBOX_ARRAY_LEN(kinds)];
    size_t kind[NSBOX_ARRAY_LEN(kinds)];
    const struct nsbox_ocispec_namespace *ns[NSBOX_ARRAY_LEN(kinds)];
};

static void joined_close(struct joined *j)
{
    for (size_t i = 0; i < j->n; i++) {
        nsbox_closep(&j->fd[i]);
        nsbox_closep(&j->owner[i]);
    }
}

/* The joined user namespace, or -1 when the container gets its own: the config's user path, or
 * the one owner of the joined namespaces that is not the host's user namespace; *base: the host
 * id of its id 0 (check_userns). */
static int pod_userns(struct joined *j, int *user_fd, uint32_t *base, struct nsbox_err *e)
{
    *user_fd = -1;
    *base = 0;
    const char *from = NULL;
    for (size_t i = 0; i < j->n; i++)
        if (j->ns[i]->type == NSBOX_OCI_NS_USER) {
            *user_fd = nsbox_steal_fd(&j->fd[i]); /* handed over: the caller's copy is gone */
            from = j->ns[i]->path;
        }
    for (size_t i = 0; i < j->n; i++) {
        if (j->ns[i]->type == NSBOX_OCI_NS_USER || j->host_owned[i])
            continue;
        if (*user_fd < 0) {
            *user_fd = nsbox_steal_fd(&j->owner[i]);
            from = j->ns[i]->path;
        } else if (!nsbox_fd_same_file(j->owner[i], *user_fd)) {
            nsbox_closep(user_fd);
            return nsbox_err_set(e, NSBOX_E_POLICY, EPERM,
                                 "the joined namespaces %s and %s belong to different user "
                                 "namespaces: a container joins one pod's",
                                 NSBOX_SHOW(from), NSBOX_SHOW(j->ns[i]->path));
        }
    }
    if (*user_fd >= 0 && check_userns(*user_fd, from, base, e) < 0) {
        nsbox_closep(user_fd);
        return -1;
    }
    return 0;
}

/* Each joined namespace opened and checked, with its owner. */
static int open_all(const struct nsbox_ocispec *c, struct joined *j, struct nsbox_err *e)
{
    j->n = 0;
    for (size_t i = 0; i < c->n_namespaces; i++) {
        size_t k = 0;
        while (k < NSBOX_ARRAY_LEN(kinds) && kinds[k].type != c->namespaces[i].type)
            k++;
        if (!c->namespaces[i].has_path || k == NSBOX_ARRAY_LEN(kinds))
            continue; /* a new one; the floor refused paths of the other kinds */
        if (j->n == NSBOX_ARRAY_LEN(kinds))
            return nsbox_err_invalid(e, "linux.namespaces: a namespace of one type is joined "
                                        "twice");
        size_t n = j->n;
        j->owner[n] = -1;
        j->host_owned[n] = false;
        if ((j->fd[n] = open_one(&c->namespaces[i], k, e)) < 0)
            return -1;
        j->n++;
        j->ns[n] = &c->namespaces[i], j->kind[n] = k;
        if (kinds[k].nstype == CLONE_NEWUSER)
            continue;
        if ((j->owner[n] = ioctl(j->fd[n], NS_GET_USERNS)) < 0)
            return nsbox_err_sys(e, "linux.namespaces.path %s: its user namespace",
                                 NSBOX_SHOW(c->namespaces[i].path));
        j->host_owned[n] = is_host(j->owner[n], "user");
    }
    return 0;
}

int nsbox_ocins_open(const struct nsbox_ocispec *c, struct nsbox_launch *L, bool *host_net,
                     struct nsbox_err *e)
{
    struct joined j;
    int user = -1;
    L->n_joins = 0;
    L->joined_id_base = 0;
    *host_net = false;
    int r = open_all(c, &j, e);
    if (r == 0)
        r = pod_userns(&j, &user, &L->joined_id_base, e);
    /* the host's user namespace's first, then the pod's user namespace, then what it owns */
    for (int pass = 0; pass < 2 && r == 0; pass++) {
        for (size_t i = 0; i < j.n; i++)
            if (kinds[j.kind[i]].nstype != CLONE_NEWUSER && j.host_owned[i] == (pass == 0)) {
                *host_net |= j.host_owned[i] && kinds[j.kind[i]].nstype == CLONE_NEWNET;
                L->joins[L->n_joins++] =
                    (struct nsbox_launch_join){nsbox_steal_fd(&j.fd[i]), kinds[j.kind[i]].nstype};
            }
        if (pass == 0 && user >= 0)
            L->joins[L->n_joins++] =
                (struct nsbox_launch_join){nsbox_steal_fd(&user), CLONE_NEWUSER};
    }
    nsbox_closep(&user);
    joined_close(&j);
    if (r < 0)
        nsbox_ocins_close(L);
    return r;
}

void nsbox_ocins_close(struct nsbox_launch *L)
{
    for (size_t i = 0; i < L->n_joins; i++)
        nsbox_closep(&L->joins[i].fd);
    L->n_joins = 0;
}
