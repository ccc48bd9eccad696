/* Launching a sandbox: the parent-side steps (clone, id maps, cgroup, wait) and the child-side
 * containment sequence. Both sides share this description, prepared by the parent before the
 * clone so that the child does no work that could have been done once. */
#ifndef NSBOX_LAUNCH_H
#define NSBOX_LAUNCH_H

#include "cgroup.h"
#include "mounts.h"
#include "net.h"
#include "nsbox.h"
#include "rlimits.h"
#include "seccomp_profile.h"
#include "spec.h"
#include "state.h"

#include <linux/filter.h>
#include <signal.h>
#include <stdbool.h>

/* What the child tells the parent when it cannot go on (written once, atomically: < PIPE_BUF). */
struct nsbox_child_report {
    int exit_code; /* 125 setup failed, 126 not executable, 127 not found */
    struct nsbox_err err;
};

struct nsbox_launch {
    const struct nsbox_spec *spec;
    struct nsbox_state *st;
    const struct nsbox_mount_plan *plan;
    const struct nsbox_net *net;
    const struct nsbox_cgroup *cg;
    char image_root[PATH_MAX];
    struct sock_fprog seccomp; /* with an in-place root, its refusals folded in */
    /* nsbox-oci: the bundle's linux.seccomp, loaded by init right after nsbox's (whose floor it
     * cannot loosen: the kernel gives the stricter answer of the two), with these
     * SECCOMP_FILTER_FLAG_* flags; the front end's (filter NULL: none) */
    struct sock_fprog seccomp_bundle;
    unsigned seccomp_bundle_flags;
    struct nsbox_rlimit rlimits[NSBOX_RLIMITS_MAX];
    size_t n_rlimits;
    /* An unprivileged caller's sandbox: the inotify instances and watches its user namespace
     * allows (/proc/sys/user, written by the child), a share of the caller's; 0: left as the
     * kernel made them. */
    uint64_t inotify_instances, inotify_watches;
    char hostname[64];
    char *const *argv;
    char **envp;
    const char *cwd;          /* inside the sandbox; "/workspace" */
    bool cgroup_ns_in_clone;  /* v2: the child starts in its cgroup, so CLONE_NEWCGROUP works */
    bool console;             /* nsbox-oci: the workload's stdio is a pty of the sandbox's devpts,
                               * whose master goes to the parent with 'r' (SCM_RIGHTS) */
    int console_fd;           /* the child's: that pty's slave, until the workload takes it */
    sigset_t blocked;         /* signals the parent handles; the workload gets them unblocked */
    int sync_rd, sync_wr;     /* parent -> child: "maps written, cgroup joined, go" */
    int report_rd, report_wr; /* child -> parent: struct nsbox_child_report, or EOF at exec */
    int agent_fd;             /* persistent sandbox: init's end of the supervisor socket; else -1 */
    int oom_fd;               /* the child's (init's) own oom_score_adj, opened by it; or -1 */
    int dns_fd;               /* init's stub resolver (dnsstub.h), opened by it; or -1 */
    int ws_fd;                /* EXT4 workspace: its detached mount (the child takes its copy) */
    int image_fd;             /* an OCI image's idmapped copy (userns.h), or -1: likewise */
    int start_fd;             /* nsbox-oci: init writes 'r' when set up, runs the workload on 's' */
    /* nsbox-oci's --preserve-fds: the launcher's descriptors 3 to 3+N-1, which init inherits
     * at the clone, keeps through the containment sequence and the workload gets at the same
     * numbers; every other descriptor is still closed. */
    unsigned preserve_fds;
    /* nsbox-oci: LISTEN_PID=1 in the environment (Podman's, for socket activation) names the
     * container's process, pid 1 under runc; here that process is init's child, so it gets
     * its own pid there instead, which sd_listen_fds() compares with getpid(). */
    bool listen_pid_self;
    /* The workload's ids inside the sandbox: appuser's unless nsbox-oci's config names others
     * (within the user namespace's range; never host root). */
    uint32_t uid, gid;
    /* nsbox-oci: init sets these supplementary groups (none: an empty list), so the id maps
     * leave setgroups allowed; it has dropped CAP_SETGID before the workload exists. */
    bool set_groups;
    size_t n_groups;
    uint32_t groups[32];
    int umask; /* the workload's umask; -1 inherited */
    /* nsbox-oci: the config's capability sets (masks of 1 << CAP_*) instead of none, inside
     * the user namespace; no_new_privs only when the config asks for it */
    bool config_caps;
    uint64_t cap_bounding, cap_effective, cap_permitted, cap_inheritable, cap_ambient;
    /* nsbox-oci: what init keeps in its bounding and permitted sets besides the config's (not
     * effective): CAP_SETUID, CAP_SETGID, CAP_SETPCAP, so that the processes it forks can be
     * any of the container's users with any of its sets (exec as another user, as runc's exec
     * from outside can). Each child gives them up before it execs: the workload here, exec'd
     * processes in the agent (agent_user.h). Init is not dumpable and its memory belongs to
     * the host's user namespace, so nothing in the container can trace it or reach its
     * descriptors. */
    uint64_t cap_keep;
    bool no_new_privs;
    /* nsbox-oci: linux.rootfsPropagation, set on the root once it is pivoted to (the kernel
     * refuses to pivot into a shared one); shared is a group of the container's own */
    struct nsbox_propagation root_propagation;
    /* nsbox-oci: init is cloned as the launcher's sibling (CLONE_PARENT), the child of the
     * runtime's caller, which waits for it as for runc's init; it outlives the launcher's
     * parent, so it has no parent-death signal (the launcher's death shows as EOF on the sync
     * pipe, the start barrier and the agent socket instead). */
    bool sibling;
    /* nsbox-oci: existing namespaces the sandbox joins (linux.namespaces[].path), opened by
     * the front end, in the order they are entered: those of the host's user namespace first
     * (entered with the host's privileges), then a user namespace (no new one: its id maps are
     * its own), then those it owns. Each joined type is left out of the clone; a joined
     * network namespace is left as it is (no loopback set-up), a joined uts namespace keeps
     * its hostname. Needs sibling: a helper cloned as the launcher's sibling enters them and
     * clones init, so that init is still the launcher's parent's child. */
    struct nsbox_launch_join {
        int fd;
        int nstype; /* CLONE_NEWNET, CLONE_NEWIPC, CLONE_NEWUTS, CLONE_NEWUSER */
    } joins[4];
    size_t n_joins;
    /* nsbox-oci: the host id of id 0 of the joined user namespace when it maps its 65,536 ids
     * in one line as a slot's range is (a pod's, made by nsbox-oci; as root, create refuses any
     * other map); 0 otherwise. The root and volumes are idmapped to it instead of the
     * sandbox's own slot, whose ids the pod's user namespace does not map: the container's
     * writes to them would fail (EOVERFLOW). */
    uint32_t joined_id_base;
};

/* Whether L joins a namespace of type nstype (CLONE_NEW*). */
static inline bool nsbox_launch_joins(const struct nsbox_launch *L, int nstype)
{
    for (size_t i = 0; i < L->n_joins; i++)
        if (L->joins[i].nstype == nstype)
            return true;
    return false;
}

/* nsbox-oci (contain_calls.c): whether init and the processes it starts before their exec may
 * run under the bundle's profile p, loaded in init after nsbox's (init_harden): every call
 * they make from there on must be allowed by it, or init would fail or wait forever. 0 when p
 * allows them all; else NSBOX_E_INVALID naming the first call refused, its action, and the
 * fix. */
int nsbox_contain_calls_check(const struct nsbox_seccomp_profile *p, struct nsbox_err *e);

/* Child side (contain.c): never returns. */
__attribute__((noreturn)) void nsbox_contain_child_main(struct nsbox_launch *L);

#endif
