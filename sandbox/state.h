/* Per-sandbox state on the host: an id, a state directory whose lock (flock on the directory)
 * its owner keeps for the sandbox's whole life, and the uid slot. Crash safety comes
 * from the locks: a sandbox whose owner died (even by SIGKILL) leaves its lock free, which is how
 * `nsbox gc` tells leftovers from live sandboxes without trusting pids. */
#ifndef NSBOX_STATE_H
#define NSBOX_STATE_H

#include "nsbox.h"
#include "wsplan.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#define NSBOX_ID_LEN 12
#define NSBOX_WS_FILE_SUFFIX ".ext4"
#define NSBOX_WS_NAME_SIZE (NSBOX_ID_LEN + sizeof NSBOX_WS_FILE_SUFFIX)
/* The target of <dir>/lock, a symlink that keeps an older nsbox's gc away (state.c). */
#define NSBOX_STATE_LOCK_MARK "the lock is a flock on this directory"
/* <runtime>/NSBOX_STATE_LOCK_MARK_NAME: that symlink, once; each <dir>/lock is a hard link to it
 * (not a valid id: gc and ls pass it by). */
#define NSBOX_STATE_LOCK_MARK_NAME "lock-mark"
/* Root's uid slot registry, shared by every nsbox on the machine (state.c uid_slot_dir). */
#define NSBOX_UID_SLOT_DIR "/run/nsbox/uids"

struct nsbox_state {
    char id[NSBOX_ID_LEN + 1];
    char dir[PATH_MAX];       /* <runtime>/<id>; also where the sandbox's new root is mounted,
                                 in its own mount namespace, before pivot_root */
    enum nsbox_ws_kind ws_kind;
    char workspace[PATH_MAX]; /* DIR: the directory bound at /workspace; EXT4: the backing
                                 file, <cache>/<id>.ext4 (NSBOX_WS_FILE_SUFFIX) */
    bool fresh_workspace;     /* the backing file is nsbox's; removed with the sandbox */
    bool ws_idmapped;         /* DIR as root: bound through an idmapped mount (workspace.h) */
    int ws_dir_fd;            /* DIR: the directory checked (wsdir.h), O_PATH, until bound */
    struct stat ws_sb;        /* DIR: that directory as checked, whose device and inode a bind
                                 by path must find again (mounts.h, src_pin) */
    int lock_fd;              /* flock(LOCK_EX) on <dir> while the sandbox lives */
    bool privileged;
    uint32_t slot;            /* uid slot when privileged */
    int slot_fd;              /* flock on the slot's lock file */
    int pod_slot_fd;          /* nsbox-oci, a container in a pod's user namespace: a read lock
                                 on that pod's slot file (nsbox_state_hold_pod_slot) */
};

void nsbox_state_init(struct nsbox_state *st);
/* A random id of NSBOX_ID_LEN lowercase hex digits. */
int nsbox_state_new_id(char *out, struct nsbox_err *e);
bool nsbox_state_valid_id(const char *id);
/* A sandbox's hostname, "nsbox-<id>" (at most NSBOX_SANDBOX_HOSTNAME_MAX bytes with its NUL). */
#define NSBOX_SANDBOX_HOSTNAME_MAX 32
void nsbox_state_hostname(const char *id, char *out);
/* Create the state dir, locked, and the host side of the workspace of the given kind: DIR
 * checks workspace_arg, EXT4 names the backing file (workspace.c makes it), TMPFS has
 * nothing on the host. */
int nsbox_state_create(struct nsbox_state *st, const char *workspace_arg, enum nsbox_ws_kind kind,
                       struct nsbox_err *e);
/* Take the lock of an existing state directory without waiting (see state.c): its fd when
 * nobody holds it (its owner is dead), else -1 with errno ENOENT (nothing there), ENOTDIR (not
 * a directory: a symlink or a file in its place, never a sandbox's), or anything else: held,
 * or unknown, so maybe alive (nsbox_state_maybe_alive). */
int nsbox_state_lock(const char *dir);
static inline bool nsbox_state_maybe_alive(int lock_errno)
{
    return lock_errno != ENOENT && lock_errno != ENOTDIR;
}
/* The same for sandbox id of the runtime directory rt: its lock's fd when its owner died
 * without its cleanup (SIGKILL), which gc would remove; hold it while taking what it left. */
int nsbox_state_dead_lock(const char *rt, const char *id);
/* Take a free uid slot (privileged only); held until nsbox_state_destroy. */
int nsbox_state_take_slot(struct nsbox_state *st, struct nsbox_err *e);
/* Record in the slot's file which user namespace runs with its ids: the one of process pid,
 * the sandbox's init (privileged, with a slot, in a user namespace of its own). */
int nsbox_state_mark_slot(struct nsbox_state *st, pid_t pid, struct nsbox_err *e);
/* A container that joins the user namespace userns_fd, whose id 0 is host id base, keeps the
 * slot of those ids from being given again until nsbox_state_destroy: a read lock (an OFD
 * lock, beside the owner's flock) on the slot's file, which must still name that namespace
 * (nsbox_state_mark_slot). Ids outside nsbox's hold nothing; a namespace whose slot another
 * sandbox has since taken, or ids that are part of a slot, are refused. */
int nsbox_state_hold_pod_slot(struct nsbox_state *st, uint32_t base, int userns_fd,
                              struct nsbox_err *e);
/* On a slot file whose flock the caller holds: whether no container of the namespace it names
 * holds it too (nsbox_state_hold_pod_slot). When none does, the name is cleared: a slot taken
 * or removed so is nobody's, and a late joiner of the namespace is refused. */
bool nsbox_state_slot_unjoined(int fd);
/* Remove everything the sandbox left on the host (fresh workspace, state dir), release locks. */
int nsbox_state_destroy(struct nsbox_state *st, struct nsbox_err *e);

/* Tombstones: why a sandbox that existed is gone ("deleted by rm", "deleted because
 * ttl_seconds=N expired"), so that a later request can say so instead of "never existed".
 * Lines "<id> <reason>" appended to <runtime>/tombstones/recent; when it passes
 * NSBOX_TOMB_ROTATE_BYTES it becomes tombstones/older (the one before is dropped). So they take
 * at most about twice that, and the last ~10,000 deletions or more are remembered (a reason is
 * at most NSBOX_TOMB_REASON_MAX bytes; most are under 50). python/nsbox/_transport.py reads
 * them too. */
#define NSBOX_TOMB_ROTATE_BYTES (512 * 1024)
#define NSBOX_TOMB_REASON_MAX 200
int nsbox_state_tombstone_write(const char *id, const char *reason);
/* A delete with "by": "session" (python/nsbox/session.py: delete(), the end of open() and
 * session()); the Python client reads this text too (_transport.py SESSION_END). */
#define NSBOX_TOMB_SESSION_END                                                                     \
    "deleted when the session that held it ended (its client's delete(), or the end of open() " \
    "or session())"
/* The reason gc records for a sandbox whose supervisor died without removing it (SIGKILL, a
 * crash); the clients say the same when its socket has no listener left. */
#define NSBOX_TOMB_SUPERVISOR_GONE                                                                 \
    "deleted because its supervisor ended without removing it (killed or crashed)"
/* 1 and the reason (the newest, if the id appears more than once) when there is one, 0 when
 * none. */
int nsbox_state_tombstone_read(const char *id, char *reason, size_t n);
/* When sandbox id has a tombstone: e is "sandbox ID was REASON" (NSBOX_E_DELETED, sys_errno err)
 * and -1. 0 (e untouched) when it has none. */
int nsbox_state_tombstone_err(const char *id, int err, struct nsbox_err *e);
/* e: "no sandbox ID in RUNTIME_DIR (it never existed there)" (NSBOX_E_NOTFOUND, sys_errno
 * err), or, when a sandbox of that id is in another user's or environment's runtime directory,
 * whose it is and how to reach it. Returns -1. */
int nsbox_state_not_found(const char *id, int err, struct nsbox_err *e);

/* The id of a sandbox's entry in the cache directory: "<id>.ext4", or "<id>", the directory
 * holding workspace.ext4 of an nsbox before the flat layout. rel (NAME_MAX + 32 bytes) gets the
 * backing file's path relative to the cache directory. False for anything else. */
bool nsbox_state_cache_entry(const char *name, char *id, char *rel);
/* The name of a sandbox's backing file in the cache directory: "<id>.ext4". */
void nsbox_state_ws_name(const char *id, char out[NSBOX_WS_NAME_SIZE]);
/* A backing file is in use while a shared flock on it is held. Its creator takes one on the
 * descriptor the loop device is then attached with, so the lock lasts exactly as long as the
 * workspace (the device keeps that open file until it is detached), whichever runtime
 * directory the sandbox is in. 0, or -1 with errno ESTALE when the file was removed before the
 * lock was taken (make it again), or flock's errno. */
int nsbox_state_ws_file_hold(int fd);
/* Whether the backing file rel (below dirfd) is in use (its lock is held). */
bool nsbox_state_ws_file_in_use(int dirfd, const char *rel);
/* Remove the backing file rel (below dirfd) unless it is in use. 1 removed, 0 in use, -1 error
 * (errno). */
int nsbox_state_ws_file_remove_unused(int dirfd, const char *rel);

/* Whether sandbox id has no state directory in the runtime directory rt (ENOENT; anything
 * else, such as a refused look, is not "gone"). */
bool nsbox_state_dir_gone(const char *rt, const char *id);
/* The directory of the uid slots' lock files (<runtime>/uids, or one for all of root's). */
int nsbox_state_uid_slot_dir(char *out, size_t n, struct nsbox_err *e);
/* Root's registry somewhere else than NSBOX_UID_SLOT_DIR (NULL: back to it), for a test that
 * must neither see nor disturb the slots of the machine's other nsbox processes. A call, not an
 * environment variable: a registry that a variable could split would let two sandboxes share
 * host uids. */
void nsbox_state_set_root_uid_slot_dir(const char *dir);

#endif
