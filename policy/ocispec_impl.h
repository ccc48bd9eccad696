/* Internals of config.json's parser (policy/ocispec.c, policy/ocispec_linux.c), which nothing
 * else includes: the typed getters whose errors name the key, and the "linux" object's parts
 * that ocispec_linux.c reads. */
#ifndef NSBOX_OCISPEC_IMPL_H
#define NSBOX_OCISPEC_IMPL_H

#include "ocispec.h"

#include <cJSON.h>

/* "config.json: key 'KEY': WHAT" (NSBOX_E_INVALID); -1. */
int nsbox_ocispec_bad(struct nsbox_err *e, const char *key, const char *what);
/* A string member of obj into out (n bytes); absent is fine unless required. */
int nsbox_ocispec_get_str(const cJSON *obj, const char *name, const char *key, char *out, size_t n,
                          bool required, struct nsbox_err *e);
int nsbox_ocispec_get_bool(const cJSON *obj, const char *name, const char *key, bool *out,
                           struct nsbox_err *e);
/* An integer member in [lo, hi]; absent (or null) leaves *out. */
int nsbox_ocispec_get_int(const cJSON *obj, const char *name, const char *key, double lo, double hi,
                          int64_t *out, struct nsbox_err *e);
/* An unsigned 64-bit member (RLIM_INFINITY included); absent (or null) leaves *out. */
int nsbox_ocispec_get_u64(const cJSON *obj, const char *name, const char *key, uint64_t *out,
                          struct nsbox_err *e);
/* An object member (NULL when absent; *r -1 when it is not an object). */
const cJSON *nsbox_ocispec_get_obj(const cJSON *obj, const char *name, const char *key, int *r,
                                   struct nsbox_err *e);
/* An array of at most max strings, each shorter than NSBOX_OCISPEC_STR_MAX. */
int nsbox_ocispec_check_str_array(const cJSON *v, const char *key, size_t max, struct nsbox_err *e);

/* ---- ocispec_linux.c: linux.resources, linux.cgroupsPath ---- */
int nsbox_ocispec_parse_linux(const cJSON *lx, struct nsbox_ocispec *c, struct nsbox_err *e);

/* ---- ocispec_idmap.c: a mount's idmap options and uidMappings, gidMappings ---- */
/* Of mount m (its options already in out): out->idmap and the mappings as written. */
int nsbox_ocispec_parse_mount_idmap(const cJSON *m, struct nsbox_ocispec_mount *out,
                                    struct nsbox_err *e);
/* Every mount's mappings, their hostIDs resolved to the container's ids through root's
 * linux.uidMappings and gidMappings; a mapping outside the container's ids is refused
 * (NSBOX_E_POLICY), naming the key and why. */
int nsbox_ocispec_resolve_mount_idmaps(const cJSON *root, struct nsbox_ocispec *c,
                                       struct nsbox_err *e);

#endif
