/* Host side of a sandbox: prepare once, clone once, id maps, network, cgroup; and removal. */
#define _GNU_SOURCE
#include "sandbox.h"
#include "util.h"
#include "cleanup.h"
#include "idmap.h"
#include "image.h"
#include "oci_store.h"
#include "diagnose.h"
#include "filemax.h"
#include "text.h"
#include "paths.h"
#include "seccomp_prog.h"
#include "setid.h"
#include "userns.h"
#include "workspace.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define SANDBOX_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

void nsbox_sandbox_init(struct nsbox_sandbox *sb)
{
    memset(sb, 0, sizeof *sb);
    nsbox_sandbox_init_zeroed(sb);
}

void nsbox_sandbox_init_zeroed(struct nsbox_sandbox *sb)
{
    nsbox_state_init(&sb->st);
    sb->cg.version = 0;
    sb->cg.dirfd = -1;
    sb->pidfd = -1;
    sb->image_lock_fd = -1;
    sb->L.sync_rd = sb->L.sync_wr = sb->L.report_rd = sb->L.report_wr = -1;
    sb->L.agent_fd = -1;
    sb->L.console_fd = -1;
    sb->L.oom_fd = -1;
    sb->L.dns_fd = -1;
    sb->L.ws_fd = -1;
    sb->L.image_fd = -1;
    sb->L.start_fd = -1;
    sb->L.uid = NSBOX_SANDBOX_UID;
    sb->L.gid = NSBOX_SANDBOX_GID;
    sb->L.umask = -1;
}

/* The environment is built from nothing: the host's variables (tokens, paths, proxies) never
 * reach the sandbox unless given with -e. */
char **nsbox_sandbox_env(const struct nsbox_spec *s, struct nsbox_err *e)
{
    static const char *const base[] = {("PATH=" SANDBOX_PATH), "HOME=/workspace", "USER=appuser",
                                       "LOGNAME=appuser", "SHELL=/bin/sh", "LANG=C.UTF-8"};
    /* an OCI image's Env (PATH included) is the base; -e wins (docker's order) */
    cleanup_free char **img_env = NULL;
    if (nsbox_oci_lookup_env(s->image, &img_env, e) < 0)
        return NULL;
    size_t n_img = 0;
    while (img_env && img_env[n_img])
        n_img++;
    static const char *const bundle_env[] = {
        "SSL_CERT_FILE=" NSBOX_NET_BUNDLE,  "REQUESTS_CA_BUNDLE=" NSBOX_NET_BUNDLE,
        "CURL_CA_BUNDLE=" NSBOX_NET_BUNDLE, "PIP_CERT=" NSBOX_NET_BUNDLE,
        "GIT_SSL_CAINFO=" NSBOX_NET_BUNDLE, "NODE_EXTRA_CA_CERTS=" NSBOX_NET_BUNDLE,
        "AWS_CA_BUNDLE=" NSBOX_NET_BUNDLE,
    };
    /* Debian's Python refuses pip outside a venv (PEP 668), even --user; in a sandbox of the
     * host's or nsbox's debian image its /usr is read-only anyway, so pip installs into the
     * user's site in the workspace, as the hosted sandbox's python image does. An OCI image
     * keeps what its own Python says, as under Docker. */
    bool debian_python = !strcmp(s->image, "host") || !strcmp(s->image, "debian");
    size_t n = NSBOX_ARRAY_LEN(base) + n_img + s->n_env + NSBOX_ARRAY_LEN(bundle_env) + 3;
    /* the image's strings are copied behind the array, so that one free() ends it all */
    size_t img_bytes = 0;
    for (size_t i = 0; i < n_img; i++)
        img_bytes += strlen(img_env[i]) + 1;
    char **env = calloc(1, n * sizeof *env + img_bytes);
    if (!env) {
        nsbox_err_sys(e, "calloc");
        return NULL;
    }
    size_t k = 0;
    const char *term = getenv("TERM");
    static char termbuf[128];
    if (term && strlen(term) < 64 && !strchr(term, '/')) {
        snprintf(termbuf, sizeof termbuf, "TERM=%s", term);
        env[k++] = termbuf;
    }
    for (size_t i = 0; i < NSBOX_ARRAY_LEN(base); i++)
        env[k++] = (char *)base[i];
    if (debian_python)
        env[k++] = (char *)"PIP_BREAK_SYSTEM_PACKAGES=1";
    char *img_copy = (char *)(env + n);
    for (size_t i = 0; i < n_img; i++) {
        char *kv = img_copy;
        img_copy = stpcpy(kv, img_env[i]) + 1;
        k = nsbox_env_put(env, k, kv);
    }
    /* the sandbox's CA is in the system bundle; these make the tools that carry their own
     * bundle (Python's requests and pip: certifi; node) read that one */
    for (size_t i = 0; s->n_bindings && i < NSBOX_ARRAY_LEN(bundle_env); i++)
        k = nsbox_env_put(env, k, (char *)bundle_env[i]);
    for (size_t i = 0; i < s->n_env; i++)
        k = nsbox_env_put(env, k, s->env[i]);
    env[k] = NULL;
    return env;
}

/* Parent side: the child's user namespace gets its maps (policy/idmap.h): as root the slot's
 * range; unprivileged, the caller's subordinate ids through newuidmap/newgidmap where it has
 * them, else appuser alone. */
static int parent_write_id_maps(pid_t pid, const struct nsbox_state *st, bool allow_setgroups,
                                struct nsbox_err *e)
{
    struct nsbox_idmaps m;
    struct nsbox_subids sub;
    char why[256];
    bool helper = !st->privileged && nsbox_userns_subids(&sub, why, sizeof why) == 1;
    bool fell_back;
    if (nsbox_idmap_compute(st->privileged, getuid(), getgid(), st->slot, helper ? &sub : NULL,
                            &m, e) < 0)
        return -1;
    return nsbox_userns_write_maps(pid, &m, helper, allow_setgroups && st->privileged, &fell_back,
                                   e);
}

/* The clone itself. owner (not 0): the host uid that owns a new user namespace
 * (nsbox_idmap_userns_owner), for a root sandbox; *owner_step says when taking its ids failed
 * (then -1, errno set). Runs in the join helper too, a bare clone's child: no message is
 * formatted here, the launcher says what failed. */
static pid_t clone_sandbox(const struct nsbox_cgroup *cg, bool sibling, uint64_t joined,
                           uint32_t owner, bool *cgroup_ns_in_clone, int *pidfd,
                           enum nsbox_userns_owner_step *owner_step)
{
    uint64_t flags =
        ((CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWNET) &
         ~joined) |
        (sibling ? CLONE_PARENT : 0);
    /* a sibling's exit signal is ours, as our parent asked for it: clone3 takes none */
    struct clone_args a = {.flags = flags | CLONE_PIDFD,
                           .pidfd = (uintptr_t)pidfd,
                           .exit_signal = sibling ? 0 : SIGCHLD};
    *cgroup_ns_in_clone = false;
    if (cg->version == 2 && cg->dirfd >= 0) {
        /* Born inside its cgroup: no window in which it runs uncounted, and the cgroup
         * namespace can be made by the clone itself. */
        a.flags |= CLONE_INTO_CGROUP | CLONE_NEWCGROUP;
        a.cgroup = (uint64_t)cg->dirfd;
        *cgroup_ns_in_clone = true;
    }
    struct nsbox_userns_owner o = {0};
    *owner_step = NSBOX_USERNS_OWNER_OK;
    if (owner && (flags & CLONE_NEWUSER) &&
        (*owner_step = nsbox_userns_owner_begin(owner, &o)) != NSBOX_USERNS_OWNER_OK)
        return -1;
    pid_t pid = (pid_t)syscall(SYS_clone3, &a, sizeof a);
    if (pid < 0 && errno == ENOSYS && !*cgroup_ns_in_clone) {
        *pidfd = -1;
        pid = nsbox_clone_bare(flags | SIGCHLD);
    }
    if (pid == 0)
        return 0; /* the child keeps the owner's ids until it becomes its own */
    int err = errno;
    if (nsbox_userns_owner_end(&o) < 0) {
        err = errno;
        if (pid > 0)
            kill(pid, SIGKILL);
        pid = -1;
    }
    errno = err;
    return pid;
}

/* A root sandbox's user namespace belongs to an id of its own slot, not to host root. */
static uint32_t owner_of(const struct nsbox_sandbox *c)
{
    return c->st.privileged ? nsbox_idmap_userns_owner(c->st.slot) : 0;
}

/* The sandbox's own cgroup directories (docs/cgroups.md, "What a sandbox sees"), shown
 * read-only at /sys/fs/cgroup, or nsbox-oci's at its config's cgroup mount: runtimes that size
 * themselves from it (a JVM, Go's GOMAXPROCS, Node's heap) find the sandbox's limits instead of
 * the host's size. Returns how many of views it filled. */
static size_t cgroup_views(const struct nsbox_cgroup *cg, struct nsbox_cgroup_view *views)
{
    _Static_assert(NSBOX_CG_V1_MAX <= NSBOX_MOUNT_SYS_VIEWS_MAX, "each hierarchy has its room");
    size_t n = 0;
    if (cg->version == 2)
        views[n++] = (struct nsbox_cgroup_view){NULL, cg->path};
    for (size_t i = 0; cg->version == 1 && i < cg->n_v1; i++)
        views[n++] = (struct nsbox_cgroup_view){cg->v1[i].controller, cg->v1[i].path};
    return n;
}

/* The host id of the sandbox's id 0, which its idmapped root and volumes map their owners to:
 * its slot's, or a joined pod's (launch.h), whose user namespace the container runs in. */
static uint32_t ids_base(const struct nsbox_sandbox *c)
{
    if (c->L.joined_id_base && nsbox_launch_joins(&c->L, CLONE_NEWUSER))
        return c->L.joined_id_base;
    return nsbox_idmap_slot_base(c->st.slot);
}

/* A stored OCI image unpacked by root: its root directory belongs to image id 0. */
static bool oci_owned(const struct nsbox_image *img)
{
    struct stat sb;
    return img->kind == NSBOX_IMAGE_DIR && img->lock_fd >= 0 &&
           !strncmp(img->name, NSBOX_OCI_NAME_PREFIX, 4) && stat(img->root, &sb) == 0 &&
           sb.st_uid == NSBOX_IMAGE_ID_BASE && sb.st_gid == NSBOX_IMAGE_ID_BASE;
}

/* The tree the root is made of (c->L.image_fd): a writable root's, the bundle's directory or
 * an engine's overlay through idmapped mounts, where it can be made (else c->root_why says why
 * not, and the root is the image read-only); an owned OCI image's, idmapped; else the plain
 * overlay of an image's layers. */
static int prepare_root(struct nsbox_sandbox *c, const struct nsbox_image *img, struct nsbox_err *e)
{
    if (c->root_writable) {
        int r = 1;
        if (c->st.privileged)
            r = nsbox_userns_root_tree(img->root, ids_base(c), &c->L.image_fd,
                                       &c->seal_list, &c->root_why);
        else
            nsbox_err_set(&c->root_why, NSBOX_E_UNSUPPORTED, EPERM,
                          "an idmapped mount needs root, and nsbox-oci runs as uid %u",
                          (unsigned)getuid());
        if (r < 0) {
            *e = c->root_why;
            return nsbox_err_wrap(e, "root.path");
        }
        c->root_writable = r == 0;
    }
    /* An OCI image whose files keep their owners (NSBOX_IMAGE_ID_BASE + N, made so by a root
     * import) is seen through an idmapped mount: its ids N are this sandbox's ids N. */
    if (c->L.image_fd < 0 && c->st.privileged && oci_owned(img) &&
        nsbox_userns_image_tree(img, ids_base(c), &c->L.image_fd, e) < 0)
        return -1;
    /* an image made of layers without idmapped mounts: their plain overlay (owners as nobody) */
    if (c->L.image_fd < 0 && img->mount_fd >= 0 &&
        (c->L.image_fd = fcntl(img->mount_fd, F_DUPFD_CLOEXEC, 0)) < 0)
        return nsbox_err_sys(e, "image %s", img->name);
    return 0;
}

/* The config's idmapped volumes (nsbox-oci): their detached trees, made here, in the host's
 * namespace, as the root's; the mount plan attaches and seals them. One writable among them
 * folds the writable root's seccomp refusals in: the container's root writes there as the
 * volume's owner, host root for a volume of host root's. An engine's volume that cannot be
 * idmapped (not root, a filesystem without idmapped mounts) stays a plain bind, as it was
 * without --idmap-volumes, c->volumes_why saying why: nothing the config asked for is refused. */
static int prepare_volumes(struct nsbox_sandbox *c, struct nsbox_err *e)
{
    size_t n = 0, asked = 0;
    for (size_t i = 0; c->idmaps && i < c->n_mounts; i++) {
        n += c->idmaps[i].idmap;
        asked += c->idmaps[i].idmap && !c->idmaps[i].engine_volume;
    }
    if (!n)
        return 0;
    if (asked && !c->st.privileged)
        return nsbox_err_set(e, NSBOX_E_UNSUPPORTED, EPERM,
                             "mounts: an idmapped mount (idmap, ridmap, uidMappings) needs root, "
                             "and nsbox-oci runs as uid %u: leave them out",
                             (unsigned)getuid());
    if (!(c->mount_fds = malloc(c->n_mounts * sizeof *c->mount_fds)))
        return nsbox_err_sys(e, "malloc");
    for (size_t i = 0; i < c->n_mounts; i++)
        c->mount_fds[i] = -1;
    for (size_t i = 0; i < c->n_mounts; i++) {
        const struct nsbox_rootfs_mount *m = &c->mounts[i];
        const struct nsbox_rootfs_idmap *im = &c->idmaps[i];
        if (!im->idmap)
            continue;
        struct nsbox_err ve = {0};
        int r = 1; /* not root: only an engine's volume is left here, as a plain bind */
        if (!c->st.privileged)
            nsbox_err_set(&ve, NSBOX_E_UNSUPPORTED, EPERM,
                          "an idmapped mount needs root, and nsbox-oci runs as uid %u",
                          (unsigned)getuid());
        else
            r = nsbox_userns_volume_tree(m, im, ids_base(c), &c->mount_fds[i],
                                         &ve);
        if (r < 0) {
            *e = ve;
            return -1;
        }
        c->volume_writable |= r == 0 && !(m->flags & MS_RDONLY);
        if (r > 0 && !c->volumes_why.code)
            nsbox_err_set(&c->volumes_why, ve.code, ve.sys_errno, "%s: %s", m->destination,
                          ve.msg);
    }
    return 0;
}

static void close_volumes(struct nsbox_sandbox *c)
{
    for (size_t i = 0; c->mount_fds && i < c->n_mounts; i++)
        nsbox_closep(&c->mount_fds[i]);
    free(c->mount_fds);
    c->mount_fds = NULL;
}

/* A --workspace DIR of root's through an idmapped mount, cloned from the descriptor its checks
 * ran on (*premounted: it is, in c->L.ws_fd; not: the child binds it by path, found again by
 * its inode). The descriptor is closed either way. */
static int prepare_ws_dir(struct nsbox_sandbox *c, enum nsbox_ws_kind ws_kind, bool *premounted,
                          struct nsbox_err *e)
{
    int r = 1;
    if (ws_kind == NSBOX_WS_DIR && c->st.privileged) {
        /* The caller's directory through an idmapped mount: its owner is appuser inside. */
        struct nsbox_idmaps m;
        r = nsbox_idmap_compute(true, 0, 0, c->st.slot, NULL, &m, e) < 0
                ? -1
                : nsbox_workspace_dir_idmapped(c->st.ws_dir_fd, c->st.workspace,
                                               nsbox_idmap_slot_base(c->st.slot), &c->L.ws_fd, e);
        *premounted = c->st.ws_idmapped = r == 0;
    }
    nsbox_closep(&c->st.ws_dir_fd);
    return r < 0 ? -1 : 0;
}

/* What an unprivileged caller's user may take of the counts the kernel keeps per user, of
 * which its sandbox gets a share: the rlimits' (policy/rlimits.c) and inotify's, set by the
 * child in its own user namespace (contain.c). What cannot be read is left unshared. */
static void caller_counts(struct nsbox_launch *L, struct nsbox_rlimits_caller *caller)
{
    struct rlimit r;
    if (getrlimit(RLIMIT_SIGPENDING, &r) == 0)
        caller->sigpending = r.rlim_cur;
    if (getrlimit(RLIMIT_MSGQUEUE, &r) == 0)
        caller->msgqueue = r.rlim_cur;
    long v;
    if (nsbox_text_read_long("/proc/sys/user/max_inotify_instances", &v) == 0 && v > 0)
        L->inotify_instances = nsbox_rlimits_user_share((uint64_t)v);
    if (nsbox_text_read_long("/proc/sys/user/max_inotify_watches", &v) == 0 && v > 0)
        L->inotify_watches = nsbox_rlimits_user_share((uint64_t)v);
}

/* The descriptor of the user namespace L joins, or -1. */
static int joined_userns(const struct nsbox_launch *L)
{
    for (size_t i = 0; i < L->n_joins; i++)
        if (L->joins[i].nstype == CLONE_NEWUSER)
            return L->joins[i].fd;
    return -1;
}

/* Everything after the state directory; the ext4 workspace is being made meanwhile. */
static int prepare_rest(struct nsbox_sandbox *c, const struct nsbox_spec *s, char *const argv[],
                        const char *cwd, const struct nsbox_image *img,
                        enum nsbox_ws_kind ws_kind, struct nsbox_err *e)
{
    if (nsbox_net_prepare(s, c->st.id, c->st.dir, &c->net, e) < 0)
        return -1;
    /* the egress helper's state has its own copy, in pages left out of dumps (sandbox.h) */
    nsbox_spec_bind_forget((struct nsbox_spec *)s);
    c->L.net = c->net;
    if (c->st.privileged && nsbox_state_take_slot(&c->st, e) < 0)
        return -1;
    if (c->st.privileged)
        nsbox_net_set_egress_id(c->net, nsbox_idmap_egress_id(c->st.slot));
    /* a pod's ids are held as long as this container runs with them, not its first's life */
    int pod_userns = joined_userns(&c->L);
    if (c->st.privileged && pod_userns >= 0 &&
        nsbox_state_hold_pod_slot(&c->st, c->L.joined_id_base, pod_userns, e) < 0)
        return -1;
    bool premounted = false;
    if (prepare_ws_dir(c, ws_kind, &premounted, e) < 0 || prepare_root(c, img, e) < 0 ||
        prepare_volumes(c, e) < 0)
        return -1;
    /* the cgroup before the plan: nsbox-oci's config mounts show it in their order */
    if (c->cg_place) {
        if (nsbox_cgroup_create_at(c->cg_place, &c->cg, e) < 0)
            return nsbox_err_wrap(e, "linux.cgroupsPath %s", c->cg_place->path);
    } else if (nsbox_cgroup_create(c->st.id, &s->limits, &c->cg, e) < 0)
        return nsbox_err_wrap(e, "instance type '%s' limits", s->instance_type);
    struct nsbox_cgroup_view views[NSBOX_CG_V1_MAX];
    size_t n_views = cgroup_views(&c->cg, views);
    /* On the heap: it is large (48 entries with their link texts), and stack pages a process
     * has touched stay with it, which a persistent sandbox's supervisor pays for all its life. */
    cleanup_free struct nsbox_rootfs_cfg *cfg = malloc(sizeof *cfg);
    /* The plan is mapped and unmapped, not malloc'd: at ~120 KiB it would come from the heap,
     * whose pages stay with a persistent sandbox's supervisor after the free. */
    void *plan = mmap(NULL, sizeof *c->plan, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                      -1, 0);
    c->plan = plan == MAP_FAILED ? NULL : plan;
    if (!cfg || !c->plan)
        return nsbox_err_sys(e, "malloc");
    cfg->img = img;
    cfg->ws_kind = ws_kind;
    cfg->workspace = c->st.workspace;
    cfg->ws_premounted = premounted;
    cfg->ws_sb = &c->st.ws_sb;
    cfg->ws_bytes = s->limits.disk_bytes;
    cfg->tmp_bytes = s->limits.memory_bytes / 2;
    cfg->n_entries = 0;
    if (nsbox_net_write_bundle(c->net, img->mount_fd, img->root, c->st.dir, e) < 0)
        return -1;
    cfg->resolv_conf = nsbox_net_resolv_conf(c->net);
    cfg->hosts = nsbox_net_hosts(c->net);
    cfg->hosts_text = nsbox_net_hosts_text(c->net);
    cfg->ca_bundle = nsbox_net_bundle(c->net);
    /* Unless names are pinned (allow, or bound hosts), the hosts file only adds the sandbox's
     * own name: an image whose /etc/hosts cannot be mounted over safely (a symlink, missing)
     * keeps its own. */
    cfg->hosts_optional = s->net != NSBOX_NET_ALLOW && !s->n_bindings;
    cfg->mounts = c->mounts;
    cfg->n_mounts = c->n_mounts;
    cfg->mount_fds = c->mount_fds;
    cfg->masked = c->masked;
    cfg->n_masked = c->n_masked;
    cfg->readonly = c->readonly;
    cfg->n_readonly = c->n_readonly;
    cfg->root_in_place = c->root_writable;
    cfg->cgroup_views = views;
    cfg->n_cgroup_views = n_views;
    if ((!cfg->root_in_place && nsbox_mounts_scan_image(cfg, e) < 0) ||
        nsbox_mount_plan_build(cfg, c->plan, e) < 0 ||
        (!c->mounts && nsbox_mount_plan_add_sys(c->plan, views, n_views, e) < 0))
        return -1;
    c->plan->seal_list = c->seal_list;
    snprintf(c->L.image_root, sizeof c->L.image_root, "%s", img->root);

    char cache[PATH_MAX];
    if (nsbox_seccomp_prog_cache_dir(cache, sizeof cache, e) < 0)
        return -1;
    /* A writable root's refusals are folded into the one filter, not stacked: every system
     * call of the container then runs one program. A writable idmapped volume needs them as
     * much (prepare_volumes). */
    if ((c->root_writable || c->volume_writable
             ? nsbox_seccomp_prog_root(cache, &c->L.seccomp, e)
             : nsbox_seccomp_prog_default(cache, &c->L.seccomp, e)) < 0)
        return nsbox_err_wrap(e, "seccomp");

    c->envp = nsbox_sandbox_env(s, e);
    if (!c->envp)
        return -1;
    c->L.spec = s;
    c->L.st = &c->st;
    c->L.cg = &c->cg;
    c->L.plan = c->plan;
    c->L.argv = argv;
    c->L.envp = c->envp;
    c->L.cwd = cwd ? cwd : "/workspace";
    struct nsbox_rlimits_caller caller = {0, 0};
    if (!c->st.privileged)
        caller_counts(&c->L, &caller);
    c->L.n_rlimits = nsbox_rlimits_for(s, c->st.privileged, &caller, c->L.rlimits);
    /* No rlimit bounds the files a sandbox holds (a mapping keeps its file past
     * RLIMIT_NOFILE): its memory limit does, where the host's table is not the smaller bound.
     * Not a failure when it cannot be raised (said in a note): the sandbox then shares the
     * table as the host's other processes do. */
    if (c->st.privileged)
        nsbox_filemax_raise();
    nsbox_state_hostname(c->st.id, c->L.hostname);
    return 0;
}

int nsbox_sandbox_prepare(struct nsbox_sandbox *c, const struct nsbox_spec *s, char *const argv[],
                          const char *cwd, struct nsbox_err *e)
{
    struct nsbox_image img;
    char oci_name[64];
    /* said before anything is pulled or made, rather than as the id map's refusal */
    if (nsbox_diagnose_root_caps(e) < 0)
        return -1;
    /* a reference not in the store is pulled first (s->pull, else NSBOX_PULL), unless the
     * caller has (c->image_resolved) */
    if (!c->image_resolved[0] && nsbox_oci_lookup_is_ref(s->image) &&
        nsbox_oci_store_resolve(s->image, s->pull, oci_name, sizeof oci_name, e) < 0)
        return -1;
    if (nsbox_image_resolve(c->image_resolved[0] ? c->image_resolved : s->image, &img, e) < 0)
        return -1;
    c->image_lock_fd = img.lock_fd;
    snprintf(c->image_name, sizeof c->image_name, "%s", img.name);
    /* The workspace: the caller's directory, or a fresh filesystem of limits.disk_bytes
     * (policy/wsplan.h). The ext4 kind is made in a thread while the rest is prepared. */
    bool dir_given = s->workspace[0] != '\0';
    struct nsbox_ws_config wcfg;
    nsbox_wsplan_config_init(&wcfg);
    if (!dir_given && nsbox_workspace_load_config(&wcfg, e) < 0)
        return -1;
    char why[256] = "";
    /* a writable root has no /workspace (mounts.h, root_in_place): none is made for it */
    enum nsbox_ws_fs fs = c->root_writable ? NSBOX_WS_FS_TMPFS : wcfg.fs;
    bool ext4 =
        !dir_given && fs != NSBOX_WS_FS_TMPFS && nsbox_workspace_ext4_usable(why, sizeof why);
    int kind = nsbox_wsplan_choose(dir_given, fs, ext4);
    if (kind < 0)
        return nsbox_err_set(e, NSBOX_E_UNSUPPORTED, ENODEV,
                             "workspace: the config asks for ext4 workspaces (workspace.fs), but "
                             "%s",
                             why);
    enum nsbox_ws_kind ws_kind = (enum nsbox_ws_kind)kind;
    if (nsbox_state_create(&c->st, s->workspace, ws_kind, e) < 0)
        return -1;
    struct nsbox_ws_job job = {.started = false};
    char tag[32];
    snprintf(tag, sizeof tag, "nsbox-%s", c->st.id);
    if (ws_kind == NSBOX_WS_EXT4 &&
        nsbox_workspace_ext4_start(&job, c->st.workspace, s->limits.disk_bytes, &wcfg, !c->pooled,
                                   tag, e) < 0)
        return -1;
    int r = prepare_rest(c, s, argv, cwd, &img, ws_kind, e);
    nsbox_closep(&img.mount_fd); /* the sandbox's own copy is in c->L.image_fd */
    /* Joined on every path before the clone: a thread at work there (this one may take locks
     * of glibc's) would leave them taken in the clone. The relay threads of `nsbox run` may be
     * alive; they take none, and the clone waits on no other thread (nsbox_set_ids). */
    struct nsbox_idmaps m = {.app_uid = 0};
    struct nsbox_err we;
    bool chown = false;
    if (r == 0 && job.started) {
        /* the root must belong to appuser's host uid, or appuser could not write it */
        if (nsbox_idmap_compute(true, 0, 0, c->st.slot, NULL, &m, e) < 0)
            r = -1;
        else
            chown = true;
    }
    if (nsbox_workspace_ext4_finish(&job, chown, m.app_uid, m.app_gid, &c->L.ws_fd, &we) < 0 &&
        r == 0) {
        *e = we;
        r = -1;
    }
    return r;
}

static int redirect_stdio(const int stdio[3])
{
    if (!stdio)
        return 0;
    for (int i = 0; i < 3; i++)
        if (stdio[i] >= 0 && stdio[i] != i && dup2(stdio[i], i) < 0)
            return -1;
    return 0;
}

/* What the join helper tells the launcher: init's pid, or why there is none. */
struct join_reply {
    pid_t pid;
    int err;    /* errno */
    int nstype; /* the namespace it could not enter, or 0 */
    enum nsbox_userns_owner_step owner_step; /* or taking the owner's ids failed */
};

/* The helper (launch.h): cloned as our sibling, it enters the joined namespaces, clones init
 * as its own sibling (our parent's child, as without joins) with the other namespaces new, and
 * sends us init's pid and pidfd. Returns init's pid, 0 in init, -1 (errno set, *failed_ns
 * the namespace that could not be entered, or *owner_step the owner's ids not taken). The
 * helper is our parent's to reap (c->helper). */
static pid_t clone_joined(struct nsbox_sandbox *c, int *failed_ns,
                          enum nsbox_userns_owner_step *owner_step)
{
    uint64_t joined = 0;
    for (size_t i = 0; i < c->L.n_joins; i++)
        joined |= (uint64_t)c->L.joins[i].nstype;
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
        return -1;
    pid_t h = nsbox_clone_bare(CLONE_PARENT);
    if (h == 0) {
        close(sv[0]);
        struct join_reply r = {0};
        int pidfd = -1;
        for (size_t i = 0; i < c->L.n_joins && !r.err; i++)
            if (setns(c->L.joins[i].fd, c->L.joins[i].nstype) < 0)
                r.err = errno, r.nstype = c->L.joins[i].nstype;
        if (!r.err) {
            r.pid = clone_sandbox(&c->cg, true, joined, owner_of(c), &c->L.cgroup_ns_in_clone,
                                  &pidfd, &r.owner_step);
            if (r.pid == 0) {
                close(sv[1]);
                return 0;
            }
            if (r.pid < 0)
                r.err = errno;
        }
        nsbox_msg_send(sv[1], &r, sizeof r, NULL, 0, &pidfd, pidfd >= 0 ? 1 : 0);
        _exit(0);
    }
    int saved = errno;
    close(sv[1]);
    if (h < 0) {
        close(sv[0]);
        errno = saved;
        return -1;
    }
    c->helper = h;
    struct join_reply r = {0};
    int fds[3] = {-1, -1, -1}, flags;
    ssize_t n = nsbox_msg_recv(sv[0], &r, sizeof r, NULL, 0, fds, &flags);
    close(sv[0]);
    nsbox_closep(&fds[1]);
    nsbox_closep(&fds[2]);
    if (n != (ssize_t)sizeof r || r.err || r.pid <= 0) {
        nsbox_closep(&fds[0]);
        *failed_ns = r.nstype;
        *owner_step = r.owner_step;
        errno = n != (ssize_t)sizeof r ? EPIPE : r.err ? r.err : ECHILD;
        return -1;
    }
    c->pidfd = fds[0];
    return r.pid;
}

static int join_failure(int nstype, int err, struct nsbox_err *e)
{
    const char *name = nstype == CLONE_NEWUSER  ? "user"
                       : nstype == CLONE_NEWNET ? "network"
                       : nstype == CLONE_NEWIPC ? "ipc"
                       : nstype == CLONE_NEWUTS ? "uts"
                                                : NULL;
    if (!name)
        return nsbox_diagnose_namespace_failure(err, e);
    return nsbox_err_set(e, NSBOX_E_SYS, err,
                         "cannot join the %s namespace (linux.namespaces.path): %s", name,
                         strerror(err));
}

/* The go-ahead could not be written to the child: it has ended (EPIPE), and when it ended of a
 * failure of its set-up, its report, written before it exited, says which (a workspace changed
 * meanwhile, say), where "Broken pipe" would not. */
static int start_failure(struct nsbox_sandbox *c, struct nsbox_err *e)
{
    int err = errno;
    struct nsbox_child_report rep;
    int fl = err == EPIPE ? fcntl(c->L.report_rd, F_GETFL) : -1;
    if (fl >= 0 && fcntl(c->L.report_rd, F_SETFL, fl | O_NONBLOCK) == 0 &&
        read(c->L.report_rd, &rep, sizeof rep) == (ssize_t)sizeof rep) {
        *e = rep.err;
        return -1;
    }
    errno = err;
    return nsbox_err_sys(e, "cannot start the sandbox");
}

int nsbox_sandbox_start(struct nsbox_sandbox *c, const int stdio[3], struct nsbox_err *e)
{
    if (c->L.n_joins && !c->L.sibling)
        return nsbox_err_invalid(e, "joined namespaces need a sibling init (launch.h)");
    int sp[2], rp[2];
    if (pipe2(sp, O_CLOEXEC) < 0)
        return nsbox_err_sys(e, "pipe");
    c->L.sync_rd = sp[0], c->L.sync_wr = sp[1];
    if (pipe2(rp, O_CLOEXEC) < 0)
        return nsbox_err_sys(e, "pipe");
    c->L.report_rd = rp[0], c->L.report_wr = rp[1];

    if (stdio)
        nsbox_share_pipes(stdio);
    int failed_ns = 0;
    enum nsbox_userns_owner_step owner_step = NSBOX_USERNS_OWNER_OK;
    pid_t pid = c->L.n_joins ? clone_joined(c, &failed_ns, &owner_step)
                             : clone_sandbox(&c->cg, c->L.sibling, 0, owner_of(c),
                                             &c->L.cgroup_ns_in_clone, &c->pidfd, &owner_step);
    if (pid < 0 && owner_step != NSBOX_USERNS_OWNER_OK)
        return nsbox_userns_owner_fail(owner_of(c), owner_step, errno, e);
    if (pid < 0)
        return join_failure(failed_ns, errno, e);
    if (pid == 0) {
        if (redirect_stdio(stdio) < 0)
            _exit(125);
        nsbox_contain_child_main(&c->L);
    }
    c->pid = pid;
    /* the child has its copy: up to NSBOX_SETID_LAYERS_MAX paths, not kept for the sandbox's life */
    nsbox_setid_list_free(c->seal_list);
    c->seal_list = NULL;
    if (c->plan)
        c->plan->seal_list = NULL;
    nsbox_closep(&c->L.ws_fd); /* the child has its copy; the namespace holds the mount */
    nsbox_closep(&c->L.image_fd);
    close_volumes(c);
    nsbox_closep(&c->L.sync_rd);
    nsbox_closep(&c->L.report_wr);
    nsbox_closep(&c->L.agent_fd); /* the child's end, when there is one */
    int ret = 0;
    /* cgroup: v2 placed the child with the clone; on v1 it moves itself (child_join_cgroup). */
    /* 'g' as soon as the id maps exist: the child builds its root while we attach the
     * network (veth, nftables), then 'n'. */
    /* a joined user namespace has its maps (its owner wrote them) */
    if (!nsbox_launch_joins(&c->L, CLONE_NEWUSER) &&
        parent_write_id_maps(pid, &c->st, c->L.set_groups, e) < 0)
        ret = -1;
    /* which namespace has the slot's ids, for a container that joins it (state.h) */
    else if (c->st.privileged && !nsbox_launch_joins(&c->L, CLONE_NEWUSER) &&
             nsbox_state_mark_slot(&c->st, pid, e) < 0)
        ret = -1;
    else if (write(c->L.sync_wr, "g", 1) != 1)
        ret = start_failure(c, e);
    else if (nsbox_net_attach(c->net, pid, e) < 0)
        ret = -1;
    else if (write(c->L.sync_wr, "n", 1) != 1)
        ret = start_failure(c, e);
    /* sync_wr stays open while we live: the child checks it for a hang-up (our death). */
    if (ret < 0) {
        nsbox_sandbox_kill_init(c);
        return -1;
    }
    return 0;
}

void nsbox_sandbox_kill_init(struct nsbox_sandbox *c)
{
    if (c->pid <= 0)
        return;
    /* by its pidfd where there is one: a sibling's pid is not ours to reap, and could be
     * another process's once its parent has */
    if (c->pidfd < 0 || syscall(SYS_pidfd_send_signal, c->pidfd, SIGKILL, NULL, 0) < 0)
        kill(c->pid, SIGKILL);
    if (waitpid(c->pid, NULL, 0) < 0 && errno == ECHILD && c->pidfd >= 0) {
        /* a sibling (launch.h): its parent reaps it; it is gone when its pidfd is readable,
         * and with it, pid 1, every process of its namespace */
        struct pollfd pf = {c->pidfd, POLLIN, 0};
        while (poll(&pf, 1, -1) < 0 && errno == EINTR)
            ;
    }
    c->pid = 0;
}

void nsbox_sandbox_free_plan(struct nsbox_sandbox *c)
{
    if (c->plan)
        munmap(c->plan, sizeof *c->plan);
    c->plan = NULL;
    nsbox_setid_list_free(c->seal_list); /* the plan's, which the child has its copy of */
    c->seal_list = NULL;
}

int nsbox_sandbox_destroy(struct nsbox_sandbox *c, struct nsbox_err *e)
{
    int ret = 0;
    struct nsbox_err e2;
    struct nsbox_err *ce = e;
    /* pid 1's death takes every process of the namespace with it. */
    nsbox_sandbox_kill_init(c);
    if (c->cg.version && nsbox_cgroup_destroy(&c->cg, ce) < 0)
        ret = -1, ce = &e2;
    if (c->net) {
        nsbox_net_teardown(c->net);
        c->net = NULL;
    }
    if (nsbox_state_destroy(&c->st, ce) < 0)
        ret = -1;
    nsbox_closep(&c->L.ws_fd);
    nsbox_closep(&c->L.image_fd);
    close_volumes(c);
    nsbox_seccomp_compile_free(&c->L.seccomp);
    nsbox_sandbox_free_plan(c);
    free(c->envp);
    c->envp = NULL;
    nsbox_closep(&c->pidfd);
    nsbox_closep(&c->image_lock_fd);
    nsbox_closep(&c->L.sync_rd);
    nsbox_closep(&c->L.sync_wr);
    nsbox_closep(&c->L.report_rd);
    nsbox_closep(&c->L.report_wr);
    nsbox_closep(&c->L.agent_fd);
    return ret;
}
