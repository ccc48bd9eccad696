#include "idmap.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

uint32_t nsbox_idmap_slot_base(uint32_t slot)
{
    return NSBOX_UID_BASE + slot * NSBOX_ID_COUNT;
}

uint32_t nsbox_idmap_egress_id(uint32_t slot)
{
    return NSBOX_EGRESS_ID_BASE + slot;
}

uint32_t nsbox_idmap_userns_owner(uint32_t slot)
{
    return nsbox_idmap_slot_base(slot) + NSBOX_ID_COUNT - 1;
}

static void set_lines(struct nsbox_idmap *m, uint32_t app, uint32_t sub)
{
    m[0] = (struct nsbox_idmap){0, sub, NSBOX_SANDBOX_UID};
    m[1] = (struct nsbox_idmap){NSBOX_SANDBOX_UID, app, 1};
    m[2] = (struct nsbox_idmap){NSBOX_SANDBOX_UID + 1, sub + NSBOX_SANDBOX_UID + 1,
                                NSBOX_ID_COUNT - NSBOX_SANDBOX_UID - 1};
}

int nsbox_idmap_compute(bool privileged, uint32_t caller_uid, uint32_t caller_gid, uint32_t slot,
                        const struct nsbox_subids *sub, struct nsbox_idmaps *m, struct nsbox_err *e)
{
    memset(m, 0, sizeof *m);
    if (privileged) {
        if (slot >= NSBOX_UID_SLOTS)
            return nsbox_err_set(e, NSBOX_E_INVALID, ERANGE, "uid slot %u out of range", slot);
        /* one line: sandbox id N is host id base + N, sandbox root included (an ordinary id
         * of the range, never host root) */
        uint32_t base = nsbox_idmap_slot_base(slot);
        m->uid[0] = m->gid[0] = (struct nsbox_idmap){0, base, NSBOX_ID_COUNT};
        m->n = 1;
        m->app_uid = m->app_gid = base + NSBOX_SANDBOX_UID;
        m->range = true;
        return 0;
    }
    /* An unprivileged caller that is somehow uid 0 in its own namespace, or has an unmapped
     * id, would produce a map the kernel rejects; say so instead of EPERM later. */
    if (caller_uid == 0 || caller_uid == (uint32_t)-1 || caller_gid == (uint32_t)-1)
        return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL, "cannot map caller uid %u gid %u",
                             caller_uid, caller_gid);
    m->app_uid = caller_uid;
    m->app_gid = caller_gid;
    if (!sub) {
        m->uid[0] = (struct nsbox_idmap){NSBOX_SANDBOX_UID, caller_uid, 1};
        m->gid[0] = (struct nsbox_idmap){NSBOX_SANDBOX_GID, caller_gid, 1};
        m->n = 1;
        return 0;
    }
    /* appuser stays the caller (its files in the workspace are the caller's); sandbox id N is
     * subordinate id start + N for every other N, so start + 1000 is left unused. */
    if (sub->uid_start == 0 || sub->gid_start == 0 ||
        sub->uid_start > UINT32_MAX - NSBOX_ID_COUNT ||
        sub->gid_start > UINT32_MAX - NSBOX_ID_COUNT)
        return nsbox_err_set(e, NSBOX_E_INVALID, ERANGE, "subordinate ids %u/%u out of range",
                             sub->uid_start, sub->gid_start);
    set_lines(m->uid, caller_uid, sub->uid_start);
    set_lines(m->gid, caller_gid, sub->gid_start);
    m->n = 3;
    m->range = true;
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

uint32_t nsbox_idmap_slot_window(uint32_t files, uint32_t slots)
{
    uint64_t w = 2 * (uint64_t)files + 64;
    return w < slots ? (uint32_t)w : slots;
}

uint32_t nsbox_idmap_slot_probe(uint32_t start, uint32_t i, uint32_t window)
{
    return i < window ? (start + i) % window : i;
}

int nsbox_idmap_format_lines(const struct nsbox_idmap *m, unsigned lines, char *buf, size_t n,
                             struct nsbox_err *e)
{
    size_t k = 0;
    if (lines == 0 || n == 0)
        return nsbox_err_set(e, NSBOX_E_INVALID, ENOSPC, "empty id map");
    for (unsigned i = 0; i < lines; i++) {
        int r = nsbox_idmap_format(&m[i], buf + k, n - k, e);
        if (r < 0)
            return -1;
        k += (size_t)r;
    }
    return (int)k;
}

/* A decimal uint32_t filling [s, end); false for anything else. */
static bool parse_u32(const char *s, const char *end, uint32_t *out)
{
    if (s == end || end - s > 10)
        return false;
    uint64_t v = 0;
    for (; s < end; s++) {
        if (*s < '0' || *s > '9')
            return false;
        v = v * 10 + (uint64_t)(*s - '0');
    }
    if (v > UINT32_MAX)
        return false;
    *out = (uint32_t)v;
    return true;
}

/* One line of /etc/subuid or /etc/subgid ("owner:first:count"), *line moved past it: false at
 * the end of the text. e->ok is false for a line not of that form. */
struct subid_line {
    const char *owner;
    size_t owner_len;
    uint32_t first, count;
    bool ok;
};

static bool subid_next(const char **line, struct subid_line *e)
{
    const char *l = *line;
    if (!l || !*l)
        return false;
    const char *nl = strchr(l, '\n');
    const char *end = nl ? nl : l + strlen(l);
    const char *c1 = memchr(l, ':', (size_t)(end - l));
    const char *c2 = c1 ? memchr(c1 + 1, ':', (size_t)(end - c1 - 1)) : NULL;
    *e = (struct subid_line){.owner = l, .owner_len = c1 ? (size_t)(c1 - l) : 0};
    e->ok = c2 && parse_u32(c1 + 1, c2, &e->first) && parse_u32(c2 + 1, end, &e->count);
    *line = nl ? nl + 1 : NULL;
    return true;
}

bool nsbox_idmap_subid_find(const char *text, const char *name, uint32_t id, uint32_t *start)
{
    struct subid_line l;
    for (const char *line = text; subid_next(&line, &l);) {
        uint32_t owner;
        bool mine = l.ok && ((name && *name && strlen(name) == l.owner_len &&
                              !memcmp(l.owner, name, l.owner_len)) ||
                             (parse_u32(l.owner, l.owner + l.owner_len, &owner) && owner == id));
        if (mine && l.count >= NSBOX_ID_COUNT && l.first != 0 &&
            l.first <= UINT32_MAX - NSBOX_ID_COUNT &&
            !(id >= l.first && id - l.first < NSBOX_ID_COUNT)) {
            *start = l.first;
            return true;
        }
    }
    return false;
}

bool nsbox_idmap_subid_overlaps(const char *text, uint32_t first, uint32_t count)
{
    struct subid_line l;
    for (const char *line = text; subid_next(&line, &l);)
        if (l.ok && l.count > 0 && (uint64_t)l.first < (uint64_t)first + count &&
            (uint64_t)first < (uint64_t)l.first + l.count)
            return true;
    return false;
}

unsigned nsbox_idmap_mount_lines(uint32_t owner, uint32_t base, struct nsbox_idmap *out)
{
    out[0] = (struct nsbox_idmap){owner, base + NSBOX_SANDBOX_UID, 1};
    if (owner >= base && owner - base < NSBOX_ID_COUNT)
        return 1;
    out[1] = (struct nsbox_idmap){base, base, NSBOX_SANDBOX_UID};
    out[2] = (struct nsbox_idmap){base + NSBOX_SANDBOX_UID + 1, base + NSBOX_SANDBOX_UID + 1,
                                  NSBOX_ID_COUNT - NSBOX_SANDBOX_UID - 1};
    return 3;
}

uint32_t nsbox_idmap_image_owner(uint64_t id)
{
    return NSBOX_IMAGE_ID_BASE + (uint32_t)(id < NSBOX_ID_COUNT ? id : 65534u);
}

struct nsbox_idmap nsbox_idmap_image_line(uint32_t slot_base)
{
    return (struct nsbox_idmap){NSBOX_IMAGE_ID_BASE, slot_base, NSBOX_ID_COUNT};
}
