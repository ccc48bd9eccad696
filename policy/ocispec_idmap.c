/* config.json's idmapped mounts (runtime-spec 1.1): a bind's options "idmap" and "ridmap" and
 * its uidMappings and gidMappings, read and held to the floor (ocispec.h,
 * nsbox_ocispec_mount). */
#include "ocispec.h"
#include "ocispec_impl.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* Whether the comma-joined options hold the option one. */
static bool has_option(const char *options, const char *one)
{
    size_t n = strlen(one);
    for (const char *p = options; *p;) {
        size_t len = strcspn(p, ",");
        if (len == n && !strncmp(p, one, n))
            return true;
        p += len + (p[len] == ',');
    }
    return false;
}

/* One LinuxIDMapping array (key: "mounts.uidMappings") as written: inside is its containerID
 * (the id on disk, for a mount), outside its hostID. */
static int parse_lines(const cJSON *v, const char *key, struct nsbox_idmap *out, unsigned *n,
                       struct nsbox_err *e)
{
    *n = 0;
    if (!v || cJSON_IsNull(v))
        return 0;
    if (!cJSON_IsArray(v))
        return nsbox_ocispec_bad(e, key, "must be an array of {containerID, hostID, size}");
    const cJSON *it;
    cJSON_ArrayForEach(it, v) {
        if (*n == NSBOX_IDMAP_LINES)
            return nsbox_err_invalid(e, "config.json: key '%s': more than %d entries", key,
                                     NSBOX_IDMAP_LINES);
        if (!cJSON_IsObject(it))
            return nsbox_ocispec_bad(e, key, "each entry must be an object");
        int64_t c = -1, h = -1, s = -1;
        if (nsbox_ocispec_get_int(it, "containerID", key, 0, UINT32_MAX, &c, e) < 0 ||
            nsbox_ocispec_get_int(it, "hostID", key, 0, UINT32_MAX, &h, e) < 0 ||
            nsbox_ocispec_get_int(it, "size", key, 1, UINT32_MAX, &s, e) < 0)
            return -1;
        if (c < 0 || h < 0 || s < 0)
            return nsbox_ocispec_bad(e, key, "each entry needs containerID, hostID and size");
        out[(*n)++] = (struct nsbox_idmap){(uint32_t)c, (uint32_t)h, (uint32_t)s};
    }
    return 0;
}

int nsbox_ocispec_parse_mount_idmap(const cJSON *m, struct nsbox_ocispec_mount *out,
                                    struct nsbox_err *e)
{
    bool plain = has_option(out->options, "idmap"), rec = has_option(out->options, "ridmap");
    if (parse_lines(cJSON_GetObjectItemCaseSensitive(m, "uidMappings"), "mounts.uidMappings",
                    out->uid_map, &out->n_uid_map, e) < 0 ||
        parse_lines(cJSON_GetObjectItemCaseSensitive(m, "gidMappings"), "mounts.gidMappings",
                    out->gid_map, &out->n_gid_map, e) < 0)
        return -1;
    if (!plain && !rec && !out->n_uid_map && !out->n_gid_map)
        return 0;
    out->idmap = true;
    out->idmap_recursive = rec;
    if (strcmp(out->type, "bind") && !has_option(out->options, "bind") &&
        !has_option(out->options, "rbind"))
        return nsbox_err_invalid(e,
                                 "config.json: key 'mounts.options': the mount at %s asks for an "
                                 "idmapped mount, which nsbox-oci makes of a bind only; make it "
                                 "a bind (\"rbind\") or leave idmap out",
                                 out->destination);
    if (!out->n_uid_map != !out->n_gid_map)
        return nsbox_err_invalid(e,
                                 "config.json: key 'mounts.%s': the mount at %s has uidMappings "
                                 "or gidMappings but not both: give both, or neither (the "
                                 "container's own mapping)",
                                 out->n_uid_map ? "gidMappings" : "uidMappings", out->destination);
    return 0;
}

/* "config.json: key 'KEY': the mount at DEST maps WHAT LO-HI, WHY" (NSBOX_E_POLICY); -1. */
static int outside(struct nsbox_err *e, const char *key, const char *dest, const char *what,
                   uint64_t lo, uint64_t size, const char *why)
{
    return nsbox_err_set(e, NSBOX_E_POLICY, EPERM,
                         "config.json: key '%s': the mount at %s maps %s %llu-%llu, %s", key, dest,
                         what, (unsigned long long)lo, (unsigned long long)(lo + size - 1), why);
}

/* The config's picture of the container's ids (linux.uidMappings, or none: container ids are
 * the config's host ids) into mount's lines: each hostID becomes the container id it is. */
static int resolve_lines(struct nsbox_idmap *l, unsigned n, const struct nsbox_idmap *own,
                         unsigned n_own, const char *key, const char *dest, struct nsbox_err *e)
{
    const uint64_t ids = NSBOX_OCISPEC_ID_MAX + 1ull;
    for (unsigned i = 0; i < n; i++) {
        uint64_t disk = l[i].inside, host = l[i].outside, size = l[i].count;
        int64_t id = n_own ? -1 : (int64_t)host;
        for (unsigned k = 0; k < n_own && id < 0; k++)
            if (host >= own[k].outside && host + size <= (uint64_t)own[k].outside + own[k].count)
                id = (int64_t)(own[k].inside + (host - own[k].outside));
        if (id < 0 || (uint64_t)id + size > ids)
            return outside(e, key, dest, "onto host ids", host, size,
                           n_own ? "which are not the container's own (those linux.uidMappings "
                                   "or gidMappings gives it, ids 0-65535): an idmapped mount "
                                   "never lets the container act as a host id outside its "
                                   "range; map onto them, or leave the mappings out (its own "
                                   "mapping)"
                                 : "which are not the container's own (ids 0-65535): an "
                                   "idmapped mount never lets the container act as a host id "
                                   "outside its range; map onto them, or leave the mappings out "
                                   "(its own mapping)");
        if (disk + size > ids)
            return outside(e, key, dest, "on-disk ids", disk, size,
                           "past 65535: the container would write files as host ids outside "
                           "the 0-65535 its writable root's idmap gives it (those of other "
                           "containers); map on-disk ids (containerID) 0-65535 only");
        l[i].outside = (uint32_t)id;
    }
    return 0;
}

int nsbox_ocispec_resolve_mount_idmaps(const cJSON *root, struct nsbox_ocispec *c,
                                       struct nsbox_err *e)
{
    const cJSON *lx = cJSON_GetObjectItemCaseSensitive(root, "linux");
    const cJSON *lu =
        cJSON_IsObject(lx) ? cJSON_GetObjectItemCaseSensitive(lx, "uidMappings") : NULL;
    const cJSON *lg =
        cJSON_IsObject(lx) ? cJSON_GetObjectItemCaseSensitive(lx, "gidMappings") : NULL;
    struct nsbox_idmap ou[NSBOX_IDMAP_LINES], og[NSBOX_IDMAP_LINES];
    unsigned nu = 0, ng = 0;
    for (size_t i = 0; i < c->n_mounts; i++) {
        struct nsbox_ocispec_mount *m = &c->mounts[i];
        if (!m->n_uid_map)
            continue;
        /* read only when a mount needs them: linux.uidMappings are otherwise not honoured */
        if ((!nu && parse_lines(lu, "linux.uidMappings", ou, &nu, e) < 0) ||
            (!ng && parse_lines(lg, "linux.gidMappings", og, &ng, e) < 0))
            return -1;
        if (resolve_lines(m->uid_map, m->n_uid_map, ou, nu, "mounts.uidMappings", m->destination,
                          e) < 0 ||
            resolve_lines(m->gid_map, m->n_gid_map, og, ng, "mounts.gidMappings", m->destination,
                          e) < 0)
            return -1;
    }
    return 0;
}
