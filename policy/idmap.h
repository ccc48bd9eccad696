/* User and group id maps of the sandbox's user namespace (pure).
 *
 * A sandbox has the ids an ordinary Linux system has: 0-65535 inside (NSBOX_ID_COUNT), appuser
 * 1000 among them, so that chown to another user or setuid to nobody fails with EPERM (no
 * capability) rather than EINVAL (no such id). None of them is ever host root.
 *
 * As root, each sandbox has a range of its own: sandbox id N is host id
 * NSBOX_UID_BASE + slot * NSBOX_ID_COUNT + N, the slot held by a lock for the sandbox's life
 * (state.c), so that two live sandboxes never share a host id (per-user kernel limits such as
 * RLIMIT_NPROC and inotify instances are counted per host uid, and a file's owner tells whose it
 * is). As an unprivileged user appuser is the caller's own uid; the other ids are the caller's
 * subordinate ids (/etc/subuid, /etc/subgid, set by newuidmap/newgidmap) where it has 65536 of
 * them, else they are not mapped at all (the only map the kernel allows without a setuid
 * helper). docs/decisions.md "Identity" has the choice. */
#ifndef NSBOX_IDMAP_H
#define NSBOX_IDMAP_H

#include "nsbox.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NSBOX_SANDBOX_UID 1000u
#define NSBOX_SANDBOX_GID 1000u
/* Ids 0..NSBOX_ID_COUNT-1 exist inside a sandbox that has a range. */
#define NSBOX_ID_COUNT 65536u
/* Host ids [base, base + slots * NSBOX_ID_COUNT) belong to nsbox: 2000000000 to 2147324927,
 * below 2^31 (tools that keep ids in a signed 32-bit int) and below systemd's foreign range
 * (0x7FFE0000 = 2147352576); above systemd's container ranges (up to 0x6FFFFFFF). 2248 slots:
 * 2248 sandboxes at a time as root. */
#define NSBOX_UID_BASE 2000000000u
#define NSBOX_UID_SLOTS 2248u
/* The egress helper of the sandbox in slot S runs as host uid and gid NSBOX_EGRESS_ID_BASE + S:
 * the ids just past the last slot's range (2147324928 to 2147327175), still below 2^31 and
 * systemd's foreign range, which no sandbox maps, so that a helper shares its uid with no
 * sandbox process and no other sandbox's helper. docs/decisions.md "The egress helper's uid". */
#define NSBOX_EGRESS_ID_BASE (NSBOX_UID_BASE + NSBOX_UID_SLOTS * NSBOX_ID_COUNT)
#define NSBOX_IDMAP_LINES 3 /* lines of one map at most */
/* Owners of the files of OCI images in root's store: image id N is host id
 * NSBOX_IMAGE_ID_BASE + N (an id of 65536 or more becomes 65534, nobody), the range just below
 * the sandboxes', which no process has. A sandbox sees them as its own ids 0-65535 through an
 * idmapped mount (nsbox_idmap_image_line): the image's root is root inside, its other users
 * theirs. docs/decisions.md "OCI image files keep their owners". */
#define NSBOX_IMAGE_ID_BASE (NSBOX_UID_BASE - NSBOX_ID_COUNT)

struct nsbox_idmap {
    uint32_t inside, outside, count;
};

/* Both maps of a sandbox; uid and gid maps have the same shape (n lines each). */
struct nsbox_idmaps {
    struct nsbox_idmap uid[NSBOX_IDMAP_LINES], gid[NSBOX_IDMAP_LINES];
    unsigned n;
    uint32_t app_uid, app_gid; /* appuser's host ids */
    bool range;                /* every id 0..NSBOX_ID_COUNT-1 is mapped */
};

/* An unprivileged caller's subordinate ids: NSBOX_ID_COUNT of each from these. */
struct nsbox_subids {
    uint32_t uid_start, gid_start;
};

/* Host id of sandbox id 0 for a slot (slot < NSBOX_UID_SLOTS). */
uint32_t nsbox_idmap_slot_base(uint32_t slot);
/* Host uid and gid of the egress helper of the sandbox in slot (< NSBOX_UID_SLOTS). */
uint32_t nsbox_idmap_egress_id(uint32_t slot);
/* Host uid that owns the user namespace of the root sandbox in slot: its last id (sandbox id
 * NSBOX_ID_COUNT - 1), not its root (whose ids the set-up must not hold, or the kernel's setuid
 * fix-up would drop the set-up's capabilities when it becomes appuser). The kernel counts what
 * the sandbox's processes take of the per-user limits (inotify, queued signals, message queues)
 * against the owner too, in the host's namespace: owned by host root, one sandbox took all of
 * root's.
 * docs/decisions.md "A root sandbox's user namespace is owned by its own id". */
uint32_t nsbox_idmap_userns_owner(uint32_t slot);
/* privileged: the caller is root in the initial user namespace (slot must be valid, sub is
 * ignored). Otherwise appuser is the caller's ids, and sub (NULL: none) gives the others. */
int nsbox_idmap_compute(bool privileged, uint32_t caller_uid, uint32_t caller_gid, uint32_t slot,
                        const struct nsbox_subids *sub, struct nsbox_idmaps *m,
                        struct nsbox_err *e);
/* The host owner of an image file owned by `id` in its layer (see NSBOX_IMAGE_ID_BASE). */
uint32_t nsbox_idmap_image_owner(uint64_t id);
/* The idmapped mount's line that shows image owners as the sandbox whose id 0 is host id
 * slot_base sees its own ids: on-disk NSBOX_IMAGE_ID_BASE + N is host slot_base + N. */
struct nsbox_idmap nsbox_idmap_image_line(uint32_t slot_base);
/* The text of one line written to /proc/PID/{uid,gid}_map. */
int nsbox_idmap_format(const struct nsbox_idmap *m, char *buf, size_t n, struct nsbox_err *e);
/* The text of n lines; the kernel takes them in one write. */
int nsbox_idmap_format_lines(const struct nsbox_idmap *m, unsigned lines, char *buf, size_t n,
                             struct nsbox_err *e);
/* The map of an idmapped --workspace DIR mount (as root; base: the slot's, nsbox_idmap_slot_base):
 * inside is the id on disk, outside the sandbox's host id. The directory's owner (owner, a uid or
 * a gid) is appuser; the other ids of the sandbox's range are themselves, so that what another
 * sandbox id creates there is owned on disk by that id of this sandbox's range. An owner inside
 * the range gets its own line only. Returns the number of lines written to out. */
unsigned nsbox_idmap_mount_lines(uint32_t owner, uint32_t base, struct nsbox_idmap *out);
/* In the text of /etc/subuid or /etc/subgid ("owner:start:count" lines, owner a name or a
 * number), the first range of the owner name or id holding NSBOX_ID_COUNT ids that are neither
 * host root nor (uid_t)-1: its start in *start, and true; false when there is none. */
bool nsbox_idmap_subid_find(const char *text, const char *name, uint32_t id, uint32_t *start);

/* Whether a range of the text of /etc/subuid or /etc/subgid (any owner) shares an id with
 * [first, first + count): a user granted such ids can become them in a user namespace of
 * their own, and signal a sandbox's processes that run as them. */
bool nsbox_idmap_subid_overlaps(const char *text, uint32_t first, uint32_t count);

/* Where a new sandbox looks for a free uid slot (state.c): the first 2 * files + 64 slots,
 * files being how many slot lock files exist (one per live sandbox, and some that gc has not
 * removed yet), so that at least half of them are free; at most slots. */
uint32_t nsbox_idmap_slot_window(uint32_t files, uint32_t slots);
/* The i-th slot to try (0 <= i < slots), from start (< window) through the window in turn,
 * then the slots past it in order: every slot exactly once. */
uint32_t nsbox_idmap_slot_probe(uint32_t start, uint32_t i, uint32_t window);

#endif
