/* A sandbox on the host side: everything prepared once before the clone, the clone itself, the
 * id maps and cgroup, and the removal of everything at the end. Used by the one-shot `nsbox run`
 * (cli/run.c) and by the supervisor of persistent sandboxes. */
#ifndef NSBOX_SANDBOX_H
#define NSBOX_SANDBOX_H

#include "cgroup.h"
#include "launch.h"
#include "net.h"
#include "nsbox.h"
#include "spec.h"
#include "state.h"

#include <sys/types.h>

struct nsbox_sandbox {
    struct nsbox_state st;
    struct nsbox_cgroup cg;
    struct nsbox_launch L;
    struct nsbox_mount_plan *plan;
    struct nsbox_net *net;
    char **envp;
    int image_lock_fd; /* shared lock on the stored image while the sandbox lives */
    char image_name[64]; /* the stored image it was made from ("oci-<id>" for a reference) */
    pid_t pid;   /* init (pid 1 inside), in our pid namespace; 0 before the clone */
    int pidfd;
    pid_t helper; /* the helper that entered joined namespaces (launch.h): our parent's to reap */
    bool pooled; /* made for the pool (docs/pool.md): never makes other pooled ones give way */
    /* The stored image ("oci-<id>") the spec's image reference was resolved to, and pulled as
     * its pull says, before nsbox_sandbox_prepare (create does it in its own process, where a
     * pull's progress reaches its terminal); taken as it is, not pulled again. "": prepare
     * resolves the reference, pulling it. */
    char image_resolved[64];
    /* nsbox-oci: a bundle's mounts (rootfs/mounts.h), set before nsbox_sandbox_prepare */
    const struct nsbox_rootfs_mount *mounts;
    size_t n_mounts;
    const struct nsbox_rootfs_idmap *idmaps; /* their idmaps, by index (NULL: none) */
    int *mount_fds; /* the idmapped ones' detached trees, by index of mounts (-1 the others) */
    bool volume_writable; /* one of them is writable: its seccomp fold is in force */
    /* an engine's volume left a plain bind (code 0: none was): why, for the first */
    struct nsbox_err volumes_why;
    const char *const *masked, *const *readonly; /* its maskedPaths, readonlyPaths */
    size_t n_masked, n_readonly;
    /* nsbox-oci: the bundle's cgroupsPath and limits (nsbox_cgroup_create_at); NULL: nsbox
     * places the cgroup and applies the spec's limits */
    const struct nsbox_cgroup_place *cg_place;
    /* nsbox-oci: the bundle's root itself as the root, writable (root.readonly false; the
     * mount plan's root_in_place), through an idmapped bind. nsbox_sandbox_prepare clears it
     * where the kernel refuses that bind, and root_why says why: the root is then the image
     * seen read-only, as for root.readonly true. */
    bool root_writable;
    struct nsbox_err root_why;
    /* with root_writable on an engine's overlay: its layers' set-id candidates, for the mount
     * plan's seal (rootfs/setid_layers.h); NULL: the seal walks the root */
    struct nsbox_setid_list *seal_list;
};

void nsbox_sandbox_init(struct nsbox_sandbox *sb);
/* The same for storage known to be all zero (a static never used before): sets only the
 * fields whose default is not zero, so that the struct's untouched pages (most of its 50 KiB
 * are path buffers) are never faulted in. */
void nsbox_sandbox_init_zeroed(struct nsbox_sandbox *sb);
/* argv: the one-shot command; NULL for a persistent sandbox whose init serves requests over
 * agent_fd (see sandbox/agent.h). cwd: inside the sandbox, NULL for /workspace.
 * The values of s's header bindings are wiped (nsbox_spec_bind_forget) once the egress
 * helper's state holds them: no process forked after that, the helper included, inherits
 * them; s keeps their hosts and headers. */
int nsbox_sandbox_prepare(struct nsbox_sandbox *sb, const struct nsbox_spec *s, char *const argv[],
                          const char *cwd, struct nsbox_err *e);
/* Clone, write the id maps, attach network and cgroups, let the child go. stdio: fds given to
 * the child as 0,1,2 (NULL: inherit). The caller blocks the signals it wants to handle before
 * (the child inherits the mask; init relays them). */
int nsbox_sandbox_start(struct nsbox_sandbox *sb, const int stdio[3], struct nsbox_err *e);
/* Kill init (by its pidfd when there is one) and wait until it has ended: reaped when it is
 * our child, exited when it is a sibling (launch.h). Nothing when it is known gone (pid 0). */
void nsbox_sandbox_kill_init(struct nsbox_sandbox *sb);
/* Kill init if it still runs (the namespace goes with it), remove cgroup, network, state.
 * Idempotent. */
int nsbox_sandbox_destroy(struct nsbox_sandbox *sb, struct nsbox_err *e);
/* Give the mount plan's memory back (the child has its own copy once started). */
void nsbox_sandbox_free_plan(struct nsbox_sandbox *sb);

/* The environment every sandbox command starts from, plus spec env (malloc'd array). */
char **nsbox_sandbox_env(const struct nsbox_spec *s, struct nsbox_err *e);

#endif
