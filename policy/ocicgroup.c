/* linux.cgroupsPath, resolved as runc resolves it, and refused when hostile (ocicgroup.h). */
#include "ocicgroup.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#define COMPONENT_MAX 255 /* NAME_MAX: a cgroup is a directory */

static int refuse(struct nsbox_err *e, const char *raw, const char *why)
{
    return nsbox_err_invalid(e, "config.json: key 'linux.cgroupsPath': '%s' %s", NSBOX_SHOW(raw),
                             why);
}

/* Append component comp (len bytes) to out as "/comp", refusing what could leave the
 * hierarchy or confuse the kernel's interface. */
static int add_component(const char *raw, const char *comp, size_t len,
                         struct nsbox_ocicgroup_path *out, size_t *depth, struct nsbox_err *e)
{
    if (len == 0)
        return 0; /* "//" and a trailing '/' */
    if ((len == 1 && comp[0] == '.') || (len == 2 && comp[0] == '.' && comp[1] == '.'))
        return refuse(e, raw,
                      "has a '.' or '..' component: a cgroup path names a cgroup below "
                      "the hierarchy's root, without . or ..; write it whole");
    if (len > COMPONENT_MAX)
        return refuse(e, raw, "has a component longer than 255 bytes");
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)comp[i] < 0x20 || comp[i] == 0x7f)
            return refuse(e, raw, "has a control character");
    if (++*depth > NSBOX_OCICGROUP_DEPTH_MAX)
        return refuse(e, raw, "is deeper than 16 cgroups");
    size_t used = strlen(out->path);
    if (used + 1 + len >= sizeof out->path)
        return refuse(e, raw, "is longer than 511 bytes");
    out->path[used] = '/';
    memcpy(out->path + used + 1, comp, len);
    out->path[used + 1 + len] = '\0';
    return 0;
}

/* Each '/'-separated component of s (len bytes) appended to out. */
static int add_path(const char *raw, const char *s, size_t len, struct nsbox_ocicgroup_path *out,
                    size_t *depth, struct nsbox_err *e)
{
    size_t i = 0;
    while (i < len) {
        size_t j = i;
        while (j < len && s[j] != '/')
            j++;
        if (add_component(raw, s + i, j - i, out, depth, e) < 0)
            return -1;
        i = j + 1;
    }
    return 0;
}

/* systemd's slice name "a-b.slice" as its cgroup path "/a.slice/a-b.slice" ("-.slice": the
 * root, nothing added), each prefix of the dash-separated name a parent slice. */
static int expand_slice(const char *raw, const char *slice, size_t len,
                        struct nsbox_ocicgroup_path *out, size_t *depth, struct nsbox_err *e)
{
    static const char sfx[] = ".slice";
    const size_t sl = sizeof sfx - 1;
    if (len <= sl || memcmp(slice + len - sl, sfx, sl) || memchr(slice, '/', len))
        return refuse(e, raw,
                      "has a slice that is not a systemd slice name (NAME.slice, no "
                      "'/'; e.g. system.slice)");
    size_t name = len - sl;
    if (name == 1 && slice[0] == '-')
        return 0;
    char unit[NSBOX_OCICGROUP_PATH_MAX];
    if (len >= sizeof unit)
        return refuse(e, raw, "is longer than 511 bytes");
    for (size_t i = 0; i <= name; i++) {
        if (i < name && slice[i] != '-')
            continue;
        if (i == 0 || slice[i - 1] == '-')
            return refuse(e, raw,
                          "has a slice with an empty dash-separated part (a--b.slice, "
                          "-a.slice)");
        snprintf(unit, sizeof unit, "%.*s%s", (int)i, slice, sfx);
        if (add_component(raw, unit, strlen(unit), out, depth, e) < 0)
            return -1;
    }
    return 0;
}

/* "slice:prefix:name": the slice's path (system.slice when empty), then the unit: a scope
 * "prefix-name.scope", or name itself when it is a slice. */
static int parse_systemd(const char *raw, struct nsbox_ocicgroup_path *out, size_t *depth,
                         struct nsbox_err *e)
{
    const char *c1 = strchr(raw, ':');
    const char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
    if (!c2 || strchr(c2 + 1, ':'))
        return refuse(e, raw,
                      "is not of the form slice:prefix:name, which --systemd-cgroup "
                      "asks for (e.g. system.slice:docker:ID); drop --systemd-cgroup "
                      "for a path");
    const char *slice = raw, *prefix = c1 + 1, *name = c2 + 1;
    size_t slen = (size_t)(c1 - raw), plen = (size_t)(c2 - prefix), nlen = strlen(name);
    if (nlen == 0 || strchr(name, '/') || memchr(prefix, '/', plen))
        return refuse(e, raw, "has an empty name, or a '/' in its prefix or name");
    if (slen == 0) {
        slice = "system.slice";
        slen = strlen(slice);
    }
    if (expand_slice(raw, slice, slen, out, depth, e) < 0)
        return -1;
    char unit[NSBOX_OCICGROUP_PATH_MAX];
    static const char sfx[] = ".slice";
    bool is_slice = nlen > sizeof sfx - 1 && !strcmp(name + nlen - (sizeof sfx - 1), sfx);
    int w = is_slice ? snprintf(unit, sizeof unit, "%s", name)
                     : snprintf(unit, sizeof unit, "%.*s-%s.scope", (int)plen, prefix, name);
    if (w < 0 || (size_t)w >= sizeof unit)
        return refuse(e, raw, "is longer than 511 bytes");
    return add_component(raw, unit, (size_t)w, out, depth, e);
}

int nsbox_ocicgroup_parse(const char *raw, bool systemd, struct nsbox_ocicgroup_path *out,
                          struct nsbox_err *e)
{
    out->path[0] = '\0';
    out->relative = false;
    if (!raw || !raw[0])
        return 0;
    size_t len = strnlen(raw, 4 * NSBOX_OCICGROUP_PATH_MAX);
    if (len >= NSBOX_OCICGROUP_PATH_MAX)
        return refuse(e, raw, "is longer than 511 bytes");
    size_t depth = 0;
    if (systemd) {
        if (parse_systemd(raw, out, &depth, e) < 0)
            return -1;
    } else {
        out->relative = raw[0] != '/';
        if (add_path(raw, raw, len, out, &depth, e) < 0)
            return -1;
    }
    if (!out->path[0])
        return refuse(e, raw,
                      "names the hierarchy's root (or the runtime's own cgroup) "
                      "itself: a container needs a cgroup of its own; name one below "
                      "it, e.g. /nsbox/ID");
    return 0;
}

int nsbox_ocicgroup_device_rule(char type, int64_t major, int64_t minor, const char *access,
                                char *out, size_t n)
{
    char ma[24] = "*", mi[24] = "*";
    if (type != 'a' && type != 'b' && type != 'c')
        return -1;
    if (type != 'a' && major >= 0)
        snprintf(ma, sizeof ma, "%" PRId64, major);
    if (type != 'a' && minor >= 0)
        snprintf(mi, sizeof mi, "%" PRId64, minor);
    int w = snprintf(out, n, "%c %s:%s %s", type, ma, mi, access && access[0] ? access : "rwm");
    return w < 0 || (size_t)w >= n ? -1 : 0;
}

uint64_t nsbox_ocicgroup_shares_to_weight(uint64_t shares)
{
    if (shares == 0)
        return 0;
    if (shares < 2)
        shares = 2;
    if (shares > 262144)
        shares = 262144;
    return 1 + ((shares - 2) * 9999) / 262142;
}

/* ---- linux.resources.memory beyond the limit ---- */

void nsbox_ocicgroup_memory_init(struct nsbox_ocicgroup_memory *m)
{
    *m = (struct nsbox_ocicgroup_memory){
        .limit = -1,
        .reservation = NSBOX_OCICGROUP_UNSET,
        .swap = NSBOX_OCICGROUP_UNSET,
        .kernel = NSBOX_OCICGROUP_UNSET,
        .kernel_tcp = NSBOX_OCICGROUP_UNSET,
        .swappiness = -1,
    };
}

#define MEM_KEY "config.json: key 'linux.resources.memory."

static void add_write(struct nsbox_ocicgroup_write *w, size_t *n, const char *file, int64_t v)
{
    snprintf(w[*n].file, sizeof w[*n].file, "%s", file);
    snprintf(w[*n].value, sizeof w[*n].value, "%" PRId64, v);
    (*n)++;
}

static void add_note(char *note, size_t note_n, const char *text)
{
    size_t used = strlen(note);
    if (used < note_n)
        snprintf(note + used, note_n - used, "%s%s", used ? "; " : "", text);
}

/* swap: memory plus swap. Bounded, at least the limit, and only with a limit the config sets. */
static int plan_swap(const struct nsbox_ocicgroup_memory *m, int version, bool swap,
                     struct nsbox_ocicgroup_write *w, size_t *n, char *note, size_t note_n,
                     struct nsbox_err *e)
{
    if (m->swap == NSBOX_OCICGROUP_UNSET || m->swap == 0)
        return 0; /* memory+swap stays the limit: no swap */
    if (m->swap < 0)
        return nsbox_err_set(e, NSBOX_E_POLICY, EPERM,
                             MEM_KEY "swap': -1 (unlimited swap) is not given: nsbox-oci bounds "
                                     "a container's memory and swap; give memory plus swap in "
                                     "bytes (--memory-swap N), or leave it out for no swap");
    if (m->limit <= 0)
        return nsbox_err_invalid(e, MEM_KEY "swap': memory plus swap needs memory.limit: set "
                                            "both (--memory and --memory-swap)");
    if (m->swap < m->limit)
        return nsbox_err_invalid(e,
                                 MEM_KEY "swap': %" PRId64 " is below memory.limit %" PRId64
                                         ": swap is memory plus swap, at least the limit",
                                 m->swap, m->limit);
    if (!swap) {
        add_note(note, note_n, "swap: this kernel does not account swap per cgroup");
        return 0;
    }
    if (version == 2)
        add_write(w, n, "memory.swap.max", m->swap - m->limit);
    else
        add_write(w, n, "memory.memsw.limit_in_bytes", m->swap);
    return 0;
}

int nsbox_ocicgroup_memory_plan(const struct nsbox_ocicgroup_memory *m, int version, bool swap,
                                struct nsbox_ocicgroup_write *w, size_t *n, char *note,
                                size_t note_n, struct nsbox_err *e)
{
    *n = 0;
    if (note_n)
        note[0] = '\0';
    bool v2 = version == 2;
    if (v2 && m->swappiness >= 0)
        return nsbox_err_set(e, NSBOX_E_UNSUPPORTED, ENOTSUP,
                             MEM_KEY "swappiness': cgroup v2 has no per-cgroup swappiness; "
                                     "drop it (--memory-swappiness)");
    if (v2 && m->disable_oom_killer)
        return nsbox_err_set(e, NSBOX_E_UNSUPPORTED, ENOTSUP,
                             MEM_KEY "disableOOMKiller': cgroup v2 cannot keep the OOM killer "
                                     "out of a cgroup; drop it (--oom-kill-disable)");
    if (m->reservation != NSBOX_OCICGROUP_UNSET && m->reservation >= 0)
        add_write(w, n, v2 ? "memory.low" : "memory.soft_limit_in_bytes", m->reservation);
    if (plan_swap(m, version, swap, w, n, note, note_n, e) < 0)
        return -1;
    if (m->swappiness >= 0)
        add_write(w, n, "memory.swappiness", m->swappiness);
    if (m->disable_oom_killer)
        add_write(w, n, "memory.oom_control", 1);
    if (m->kernel_tcp != NSBOX_OCICGROUP_UNSET) {
        if (v2)
            add_note(note, note_n, "kernelTCP: cgroup v2 counts TCP buffers in memory.max");
        else
            add_write(w, n, "memory.kmem.tcp.limit_in_bytes", m->kernel_tcp);
    }
    if (m->kernel != NSBOX_OCICGROUP_UNSET)
        add_note(note, note_n,
                 "kernel: kernel memory limits are deprecated, and current kernels ignore them "
                 "(runc does too); their kernel memory counts in memory.limit");
    return 0;
}
