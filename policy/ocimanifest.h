/* OCI and Docker image metadata: image indexes (and docker manifest lists), manifests, image
 * configs, the manifest.json of a `docker save` archive, and the names of layer tar entries.
 * Pure: text in, structures out, no I/O, so that hostile input is fuzzed here
 * (tests/fuzz/fuzz_ocimanifest.c). Every size and count is bounded. */
#ifndef NSBOX_OCIMANIFEST_H
#define NSBOX_OCIMANIFEST_H

#include "nsbox.h"
#include "ociref.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NSBOX_OCI_JSON_MAX (4u << 20) /* an index, manifest or config: at most 4 MiB */
#define NSBOX_OCI_LAYERS_MAX 128
#define NSBOX_OCI_ENV_MAX 1024
#define NSBOX_OCI_DEPTH_MAX 256 /* components of a layer entry's path */

struct nsbox_oci_desc {
    char media_type[128];
    char digest[NSBOX_OCI_DIGEST_LEN + 1];
    int64_t size;
    char os[32], arch[32], variant[32]; /* platform, in an index */
    char ref_name[NSBOX_OCIREF_MAX + 1]; /* org.opencontainers.image.ref.name, in an index */
};

enum nsbox_ocimanifest_kind {
    NSBOX_OCI_DOC_INDEX,    /* OCI image index or docker manifest list */
    NSBOX_OCI_DOC_MANIFEST, /* OCI image manifest or docker schema 2 manifest */
};

struct nsbox_oci_manifest {
    struct nsbox_oci_desc config;
    size_t n_layers;
    struct nsbox_oci_desc layers[NSBOX_OCI_LAYERS_MAX];
};

struct nsbox_oci_config {
    char os[32], arch[32], variant[32];
    char created[40];
    char user[64];
    char workdir[256];
    size_t n_env;
    char *env[NSBOX_OCI_ENV_MAX]; /* "KEY=value", each malloc'd: nsbox_ocimanifest_config_free */
    size_t n_diff_ids;
    char diff_ids[NSBOX_OCI_LAYERS_MAX][NSBOX_OCI_DIGEST_LEN + 1];
};

/* manifest.json of `docker save`: the first image, or the one tagged `want_tag` when given. */
struct nsbox_docker_save {
    char config[256];  /* member name of the config, e.g. "<hex>.json" or "blobs/sha256/<hex>" */
    size_t n_layers;
    char layers[NSBOX_OCI_LAYERS_MAX][256];
    char repo_tag[NSBOX_OCIREF_MAX + 1]; /* its first RepoTag, or "" */
};

/* Which document is it (by mediaType, or by its fields when mediaType is absent)? */
int nsbox_ocimanifest_kind(const char *text, size_t len, enum nsbox_ocimanifest_kind *kind,
                           struct nsbox_err *e);

/* From an index: the manifest for os/arch (the host's), or, in an OCI layout's index.json of
 * several, the one whose ref_name is `want_ref` (the same reference, or its tag); NULL, or no
 * such entry: the only one, or the platform's.
 * *nested is set when the pick is itself an index (a layout's entry pointing at a list). */
int nsbox_ocimanifest_pick(const char *text, size_t len, const char *want_ref, const char *os,
                           const char *arch, struct nsbox_oci_desc *out, struct nsbox_err *e);

int nsbox_ocimanifest_parse(const char *text, size_t len, struct nsbox_oci_manifest *m,
                            struct nsbox_err *e);
int nsbox_ocimanifest_config(const char *text, size_t len, struct nsbox_oci_config *c,
                             struct nsbox_err *e);
void nsbox_ocimanifest_config_free(struct nsbox_oci_config *c);
int nsbox_ocimanifest_docker_save(const char *text, size_t len, const char *want_tag,
                                  struct nsbox_docker_save *d, struct nsbox_err *e);

/* Is this a layer media type nsbox unpacks (tar, tar+gzip, tar+zstd; OCI or docker)? */
bool nsbox_ocimanifest_layer_type_ok(const char *media_type);

/* The name of a layer's tar entry, made relative and checked: leading "./" and a trailing "/"
 * are dropped, "//" and "/./" collapsed; an absolute name, any ".." component or a name longer
 * than n or deeper than NSBOX_OCI_DEPTH_MAX is refused (-1). The layer's root itself ("." or "./") returns 1 (skip it).
 * Whiteouts: ".wh..wh..opq" sets *opaque (out: its directory), ".wh.NAME" sets *whiteout
 * (out: the path of NAME). Returns 0 for an entry to apply. */
enum nsbox_oci_entry_kind { NSBOX_OCI_ENTRY_PLAIN, NSBOX_OCI_ENTRY_WHITEOUT,
                            NSBOX_OCI_ENTRY_OPAQUE };
int nsbox_ocimanifest_entry_path(const char *name, char *out, size_t n,
                                 enum nsbox_oci_entry_kind *kind);

#endif
