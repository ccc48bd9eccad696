/* User and group id maps of the sandbox's user namespace (pure).
 *
 * Only one id is mapped: appuser (1000) inside. As root, it maps to a host uid taken from a
 * range reserved for nsbox, one per sandbox, never to host root and never shared between two
 * live sandboxes (per-user kernel limits such as RLIMIT_NPROC and inotify instances are counted
 * per host uid, so sharing one would let one sandbox starve another). As an unprivileged user it
 * maps to the caller's own uid, the only mapping the kernel allows without a setuid helper.
 * Inside uid 0 is not mapped at all: there is no root in the sandbox to become. */
#ifndef NSBOX_IDMAP_H
#define NSBOX_IDMAP_H

#include "nsbox.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NSBOX_SANDBOX_UID 1000u
#define NSBOX_SANDBOX_GID 1000u
#define NSBOX_UID_BASE 2000000000u /* host uids [base, base + slots) belong to nsbox */
#define NSBOX_UID_SLOTS 65536u

struct nsbox_idmap {
    uint32_t inside, outside, count;
};

/* privileged: the caller is root in the initial user namespace. */
int nsbox_idmap_compute(bool privileged, uint32_t caller_uid, uint32_t caller_gid, uint32_t slot,
                        struct nsbox_idmap *uidmap, struct nsbox_idmap *gidmap,
                        struct nsbox_err *e);
/* The text written to /proc/PID/{uid,gid}_map. */
int nsbox_idmap_format(const struct nsbox_idmap *m, char *buf, size_t n, struct nsbox_err *e);

/* Where a new sandbox looks for a free uid slot (state.c): the first 2 * files + 64 slots,
 * files being how many slot lock files exist (one per live sandbox, and some that gc has not
 * removed yet), so that at least half of them are free; at most slots. */
uint32_t nsbox_slot_window(uint32_t files, uint32_t slots);
/* The i-th slot to try (0 <= i < slots), from start (< window) through the window in turn,
 * then the slots past it in order: every slot exactly once. */
uint32_t nsbox_slot_probe(uint32_t start, uint32_t i, uint32_t window);

#endif
