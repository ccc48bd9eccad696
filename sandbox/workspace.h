/* The fresh /workspace filesystems of policy/wsplan.h, host side: the ext4 kind (root: a sparse
 * file, a loop device, a detached mount handed to the sandbox) and the checks that choose it. */
#ifndef NSBOX_WORKSPACE_H
#define NSBOX_WORKSPACE_H

#include "nsbox.h"
#include "wsplan.h"

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* In the cache directory, beside the sandboxes' <id> directories: the empty filesystems that
 * workspaces are copied from (one per size) and the lock of the free-space check. */
#define NSBOX_WS_SHARED_DIR ".workspace-templates"

/* Can this process make ext4 workspaces? When not, why (for `nsbox info`). */
bool nsbox_workspace_ext4_usable(char *why, size_t n);

/* Make a fresh ext4 filesystem of disk_bytes backed by the new sparse file image
 * (<cache>/<id>.ext4, created mode 0600) and return a detached mount of
 * it (fsmount: attached nowhere on the host; the sandbox moves it to /workspace). The loop device
 * goes away by itself when the last mount of the filesystem does; tag names it (lo_file_name).
 * Refused when the host's free space is below the config's floor (thin provisioning), or with
 * cfg->reserve when it is, less what other workspaces may still write, below disk_bytes.
 *
 * It runs in a thread, overlapping the rest of the sandbox's preparation (the loop device and
 * the mount take milliseconds). finish joins it and gives the root to uid:gid; it must be
 * called, on error paths too, before the clone: no other thread may run then. */
struct nsbox_ws_job {
    const char *image, *tag;
    uint64_t disk_bytes;
    struct nsbox_ws_config cfg; /* the config's workspace section: reserve, the floor */
    bool evict;      /* waiting pooled sandboxes give way when the disk is short (pool.md) */
    bool started;
    int mount_fd; /* the thread's result; -1 with err on failure */
    struct nsbox_err err;
    pthread_t thread;
    void *stack;
};
/* Ask waiting pooled sandbox id to go (the pool's delete, without waiting for the teardown):
 * 0 when it agreed, -1 when it refused (a run has just claimed it) or cannot be reached. The
 * warm pool sits in a layer above this one (service/warmpool.c), so it hands its eviction down
 * with nsbox_workspace_set_evict (nsbox_warmpool_install); without it, pooled sandboxes never give
 * way. */
typedef int (*nsbox_workspace_evict_fn)(const char *id);
void nsbox_workspace_set_evict(nsbox_workspace_evict_fn fn);

int nsbox_workspace_ext4_start(struct nsbox_ws_job *j, const char *image, uint64_t disk_bytes,
                               const struct nsbox_ws_config *cfg, bool evict, const char *tag,
                               struct nsbox_err *e);
/* chown: whether to give the root to uid:gid (false when only reaping the thread). */
int nsbox_workspace_ext4_finish(struct nsbox_ws_job *j, bool chown, uint32_t uid, uint32_t gid,
                                int *mount_fd, struct nsbox_err *e);

/* The config file's "workspace" section (policy/wsplan.h); defaults when there is none. */
int nsbox_workspace_load_config(struct nsbox_ws_config *cfg, struct nsbox_err *e);

/* --workspace DIR as root: a detached bind of the directory open on dfd (dir: its path, for
 * messages; the descriptor the checks ran on, wsdir.h) whose owner is appuser inside (the sandbox's
 * host ids from base, nsbox_idmap_slot_base), so that the sandbox can work in the caller's
 * directory and what it creates there belongs to the directory's owner on disk; what its other
 * ids create belongs to those ids of its range (nsbox_idmap_mount_lines). 0 with *mount_fd; 1
 * when this filesystem or kernel cannot idmap (the caller binds it plainly); -1 on error. */
int nsbox_workspace_dir_idmapped(int dfd, const char *dir, uint32_t base, int *mount_fd,
                                 struct nsbox_err *e);

/* Usage of a workspace filesystem (fd anywhere on it). */
struct nsbox_workspace_usage {
    uint64_t bytes_total, bytes_used, inodes_total, inodes_used;
};
int nsbox_workspace_usage(int fd, struct nsbox_workspace_usage *u);

/* The host's side of an ext4 workspace whose backing file is image: what the file holds on the
 * host's disk, and the size and free space of the filesystem it is on (for `inspect`: with thin
 * provisioning, a full host disk is what stops a sandbox's writes before its limit). */
struct nsbox_workspace_host_usage {
    uint64_t backing_bytes, fs_bytes, fs_free_bytes;
};
int nsbox_workspace_host_usage(const char *image, struct nsbox_workspace_host_usage *h);

#endif
