/* The source of an OCI import, and what it asks to unpack.
 *
 * A source is an OCI layout directory, or an archive (an OCI archive, a `docker save` of either
 * format) whose members are staged in a directory by their sha256, so that both are read the
 * same way: blobs by digest. The plan is what the source's index.json (or docker's
 * manifest.json) names: the manifest of this host's platform, the config and the layers, every
 * document read whole, bounded and verified against its digest. */
#ifndef NSBOX_OCI_SOURCE_H
#define NSBOX_OCI_SOURCE_H

#include "nsbox.h"
#include "ocimanifest.h"
#include "ociref.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct nsbox_oci_member {
    char *name;
    char digest[NSBOX_OCI_DIGEST_LEN + 1];
};

struct nsbox_oci_source {
    int dir_fd; /* the layout, or the staging directory (members in blobs/sha256/) */
    struct nsbox_oci_member *m;
    size_t n, cap;
    bool archive;
    const char *want; /* --name: which image of a `docker save` of several, or NULL */
};

/* Its members, its descriptor. */
void nsbox_oci_source_free(struct nsbox_oci_source *s);

/* The blob `digest` ("sha256:..."), opened read-only beneath the source; -1 with errno
 * (EINVAL: not a regular file, as a FIFO or a device, which is not opened for reading). */
int nsbox_oci_source_open_blob(const struct nsbox_oci_source *s, const char *digest);

/* Stage the archive read from in_fd into stage_fd (blobs/sha256/<hex>), its members named in
 * *s. A member named blobs/sha256/<hex> must have that digest. */
int nsbox_oci_source_stage(int in_fd, int stage_fd, struct nsbox_oci_source *s,
                           struct nsbox_err *e);

struct nsbox_oci_plan {
    char manifest_digest[NSBOX_OCI_DIGEST_LEN + 1];
    char *manifest_text; /* the manifest (OCI) or NULL (docker save's manifest.json) */
    size_t manifest_len;
    char config_digest[NSBOX_OCI_DIGEST_LEN + 1];
    char *config_text;
    size_t config_len;
    struct nsbox_oci_config cfg;
    size_t n_layers;
    struct {
        char digest[NSBOX_OCI_DIGEST_LEN + 1];
        int64_t size;
    } layers[NSBOX_OCI_LAYERS_MAX];
    char repo_tag[NSBOX_OCIREF_MAX + 1];
};

/* The plan of source s: its manifest (of linux and this host's architecture), config and
 * layers, checked against one another. */
int nsbox_oci_source_plan(const struct nsbox_oci_source *s, struct nsbox_oci_plan *p,
                          struct nsbox_err *e);
void nsbox_oci_source_plan_free(struct nsbox_oci_plan *p);

/* This host's architecture as OCI names it (amd64, arm64, ...). */
const char *nsbox_oci_source_arch(void);

#endif
