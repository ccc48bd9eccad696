/* Per-sandbox state on the host: an id, a state directory holding a lock that its owner keeps
 * for the sandbox's whole life, the staging mount point, and the uid slot. Crash safety comes
 * from the locks: a sandbox whose owner died (even by SIGKILL) leaves its lock free, which is how
 * `nsbox gc` tells leftovers from live sandboxes without trusting pids. */
#ifndef NSBOX_STATE_H
#define NSBOX_STATE_H

#include "nsbox.h"

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>

#define NSBOX_ID_LEN 12

struct nsbox_state {
    char id[NSBOX_ID_LEN + 1];
    char dir[PATH_MAX];       /* <runtime>/<id> */
    char staging[PATH_MAX];   /* <runtime>/<id>/root: empty mount point for the new root */
    char cache[PATH_MAX];     /* <cache>/<id>: holds the fresh workspace */
    char workspace[PATH_MAX]; /* the directory bound at /workspace */
    bool fresh_workspace;     /* created by nsbox; removed with the sandbox */
    int lock_fd;              /* flock(LOCK_EX) on <dir>/lock while the sandbox lives */
    bool privileged;
    uint32_t slot;            /* uid slot when privileged */
    int slot_fd;              /* flock on the slot's lock file */
};

void nsbox_state_init(struct nsbox_state *st);
/* A random id of NSBOX_ID_LEN lowercase hex digits. */
int nsbox_state_new_id(char *out, struct nsbox_err *e);
bool nsbox_state_valid_id(const char *id);
/* Create dir + lock + staging dir, and the workspace (fresh under the cache dir, chowned to
 * host_uid:host_gid when privileged, or the given existing directory). */
int nsbox_state_create(struct nsbox_state *st, const char *workspace_arg, struct nsbox_err *e);
/* Take a free uid slot (privileged only); held until nsbox_state_destroy. */
int nsbox_state_take_slot(struct nsbox_state *st, struct nsbox_err *e);
int nsbox_state_chown_workspace(struct nsbox_state *st, uint32_t uid, uint32_t gid,
                                struct nsbox_err *e);
/* Remove everything the sandbox left on the host (fresh workspace, state dir), release locks. */
int nsbox_state_destroy(struct nsbox_state *st, struct nsbox_err *e);

/* Remove leftovers of sandboxes whose owner died. Returns the number removed. */
int nsbox_gc(bool verbose, struct nsbox_err *e);

#endif
