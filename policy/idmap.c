#include "idmap.h"

#include <errno.h>
#include <stdio.h>

int nsbox_idmap_compute(bool privileged, uint32_t caller_uid, uint32_t caller_gid, uint32_t slot,
                        struct nsbox_idmap *uidmap, struct nsbox_idmap *gidmap,
                        struct nsbox_err *e)
{
    if (privileged) {
        if (slot >= NSBOX_UID_SLOTS)
            return nsbox_err_set(e, NSBOX_E_INVALID, ERANGE, "uid slot %u out of range", slot);
        *uidmap = (struct nsbox_idmap){NSBOX_SANDBOX_UID, NSBOX_UID_BASE + slot, 1};
        *gidmap = (struct nsbox_idmap){NSBOX_SANDBOX_GID, NSBOX_UID_BASE + slot, 1};
        return 0;
    }
    /* An unprivileged caller that is somehow uid 0 in its own namespace, or has an unmapped
     * id, would produce a map the kernel rejects; say so instead of EPERM later. */
    if (caller_uid == 0 || caller_uid == (uint32_t)-1 || caller_gid == (uint32_t)-1)
        return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL, "cannot map caller uid %u gid %u",
                             caller_uid, caller_gid);
    *uidmap = (struct nsbox_idmap){NSBOX_SANDBOX_UID, caller_uid, 1};
    *gidmap = (struct nsbox_idmap){NSBOX_SANDBOX_GID, caller_gid, 1};
    return 0;
}

int nsbox_idmap_format(const struct nsbox_idmap *m, char *buf, size_t n, struct nsbox_err *e)
{
    if (m->count == 0 || m->outside + (uint64_t)m->count - 1 >= UINT32_MAX ||
        m->inside + (uint64_t)m->count - 1 >= UINT32_MAX)
        return nsbox_err_set(e, NSBOX_E_INVALID, ERANGE, "id map out of range");
    int r = snprintf(buf, n, "%u %u %u\n", m->inside, m->outside, m->count);
    if (r < 0 || (size_t)r >= n)
        return nsbox_err_set(e, NSBOX_E_INVALID, ENOSPC, "id map buffer too small");
    return r;
}

uint32_t nsbox_slot_window(uint32_t files, uint32_t slots)
{
    uint64_t w = 2 * (uint64_t)files + 64;
    return w < slots ? (uint32_t)w : slots;
}

uint32_t nsbox_slot_probe(uint32_t start, uint32_t i, uint32_t window)
{
    return i < window ? (start + i) % window : i;
}
