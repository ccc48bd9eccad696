/* The /workspace a sandbox gets and how its disk limit (limits.disk_bytes) is enforced; pure
 * decisions, unit tested without root. The I/O is sandbox/workspace.c; docs/workspace.md has the
 * reasons.
 *
 *   DIR    `--workspace DIR`: the caller's own directory, bound as it is and kept. nsbox cannot
 *          bound what a host directory holds, so no limit applies (inspect says so).
 *   EXT4   as root: a fresh ext4 filesystem of disk_bytes on a loop device, backed by a
 *          sparse file. Writes past the limit fail with ENOSPC inside; the host loses at most
 *          disk_bytes of free space, and gets it back when the sandbox ends.
 *   TMPFS  unprivileged (or where loop devices are unavailable): a fresh tmpfs of disk_bytes.
 *          Also ENOSPC at the limit; what it holds is memory, charged to the sandbox's memory
 *          limit, so the smaller of the two binds.
 *
 * Both fresh kinds hold one inode per NSBOX_WS_BYTES_PER_INODE of the limit, so that a sandbox
 * making empty files runs out of inodes (ENOSPC) on its own filesystem only. */
#ifndef NSBOX_WSPLAN_H
#define NSBOX_WSPLAN_H

#include "nsbox.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum nsbox_ws_kind {
    NSBOX_WS_DIR = 0,
    NSBOX_WS_EXT4 = 1,
    NSBOX_WS_TMPFS = 2,
};

enum nsbox_ws_fs {
    NSBOX_WS_FS_AUTO = 0, /* ext4 where loop devices work, else tmpfs */
    NSBOX_WS_FS_EXT4,     /* ext4 or refuse (with why) */
    NSBOX_WS_FS_TMPFS,    /* always tmpfs: fastest to make, but counted against memory */
};

#define NSBOX_WS_BYTES_PER_INODE 16384u /* ext4's own default ratio */
#define NSBOX_WS_INODES_MIN 64u
/* Bumped when the mkfs options change, so that old templates are not reused. */
#define NSBOX_WS_TEMPLATE_VERSION 2

/* dir_given: --workspace; ext4_usable: the caller may set up loop devices and has mkfs.ext4.
 * With fs NSBOX_WS_FS_EXT4 and ext4 not usable, returns -1: the caller refuses. */
int nsbox_wsplan_choose(bool dir_given, enum nsbox_ws_fs fs, bool ext4_usable);
const char *nsbox_wsplan_kind_name(enum nsbox_ws_kind k);
uint64_t nsbox_wsplan_inodes(uint64_t disk_bytes);
/* Mount options of the TMPFS kind. */
int nsbox_wsplan_tmpfs_options(uint64_t disk_bytes, char *out, size_t n, struct nsbox_err *e);
/* File name (no directory) of the cached empty filesystem for a limit. */
int nsbox_wsplan_template_name(uint64_t disk_bytes, char *out, size_t n, struct nsbox_err *e);

/* The "workspace" section of the nsbox config file:
 *   {"workspace": {"fs": "auto", "reserve": false, "min_free": "1GiB", "min_free_percent": 5}}
 * fs: "auto" | "ext4" | "tmpfs" (enum nsbox_ws_fs).
 * reserve: false (default, thin provisioning): every ext4 workspace keeps its own hard limit
 * (ENOSPC inside) but none is set aside on the host: a creation is refused only when the host's
 * free space on the cache directory's filesystem is below the floor, the larger of min_free
 * (bytes, or a size string) and min_free_percent of that filesystem. More sandboxes fit than
 * the sum of their limits; if together they fill the host's disk, the ones writing then get
 * write errors inside. true: the strict promise: the free space, less what the other live
 * workspaces may still write, must hold the whole limit (sandboxes together never get more
 * disk than the host has; far fewer fit).
 * overcommit: the older name of the same choice, inverted (overcommit true = reserve false);
 * still read, refused when it contradicts reserve. */
struct nsbox_ws_config {
    bool reserve;
    enum nsbox_ws_fs fs;
    uint64_t min_free_bytes;
    unsigned min_free_percent;
};
#define NSBOX_WS_MIN_FREE_DEFAULT (1ull << 30)
#define NSBOX_WS_MIN_FREE_PERCENT_DEFAULT 5u
#define NSBOX_WS_MIN_FREE_PERCENT_MAX 90u
void nsbox_wsplan_config_init(struct nsbox_ws_config *c);
/* The "workspace" section of the config file's object root (os/config.c); only that key is
 * looked at. */
struct cJSON;
int nsbox_wsplan_config_from_json(const struct cJSON *root, struct nsbox_ws_config *c,
                                  struct nsbox_err *e);

/* The free space the host keeps under thin provisioning on a filesystem of fs_bytes: the larger
 * of min_free_bytes and min_free_percent of fs_bytes. */
uint64_t nsbox_wsplan_min_free(const struct nsbox_ws_config *c, uint64_t fs_bytes);

/* The host's side of an ext4 workspace's creation, as measured on the cache directory's
 * filesystem: its size, its free space (for unprivileged users too: f_bavail), and what the
 * other live workspaces may still write (counted only with reserve). */
struct nsbox_ws_space {
    uint64_t fs_bytes, avail, promised;
};
/* Whether a workspace of limit bytes may be created. When not, *missing (if not NULL) gets
 * how much more free space would let it: with reserve, bytes + promised - avail; thin, the
 * floor (nsbox_wsplan_min_free) - avail. */
bool nsbox_wsplan_admit(const struct nsbox_ws_config *c, const struct nsbox_ws_space *s,
                        uint64_t bytes, uint64_t *missing);

#define NSBOX_WS_MKFS_ARGV_MAX 24
struct nsbox_ws_mkfs {
    char *argv[NSBOX_WS_MKFS_ARGV_MAX];
    char inodes[32];
};
/* argv of mkfs.ext4 making the template at path, whose size is already disk_bytes: no journal
 * (the filesystem lives as long as the sandbox), no reserved blocks (all of the limit is the
 * sandbox's), no online-resize reserve and no backup superblocks, group metadata packed
 * together, inode tables left for the kernel to skip (mounted with noinit_itable): a 10 GiB
 * template holds about 120 KiB in 4 extents. */
int nsbox_wsplan_mkfs_argv(const char *prog, const char *path, uint64_t disk_bytes,
                           struct nsbox_ws_mkfs *m, struct nsbox_err *e);

#endif
