/* Fuzz the OCI metadata parsers (policy/ocimanifest.c, policy/ociref.c): any byte string as an
 * index, a manifest, a config, a docker save manifest.json, a layer entry name and an image
 * reference. Besides crashes and leaks (ASan), it checks that what parses is within the bounds
 * the unpacker relies on: checked digests, entry names without ".." or a leading '/', no NUL, raw
 * or escaped, at which cJSON would have cut a string. */
#include "cstring.h"
#include "nsbox.h"
#include "ocimanifest.h"
#include "ociref.h"
#include "spec.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct nsbox_oci_manifest m;
    static struct nsbox_oci_config c;
    static struct nsbox_docker_save d;
    struct nsbox_oci_desc desc;
    struct nsbox_err e;
    enum nsbox_ocimanifest_kind kind;
    const char *text = (const char *)data;

    (void)nsbox_ocimanifest_kind(text, size, &kind, &e);
    if (nsbox_ocimanifest_pick(text, size, NULL, "linux", "amd64", &desc, &e) == 0 &&
        !nsbox_ociref_digest_valid(desc.digest))
        abort();
    (void)nsbox_ocimanifest_pick(text, size, "latest", "linux", "amd64", &desc, &e);
    struct nsbox_err nul;
    bool has_nul = nsbox_spec_json_check_nul(text, size, &nul) < 0;
    if (nsbox_ocimanifest_parse(text, size, &m, &e) == 0) {
        if (has_nul || m.n_layers > NSBOX_OCI_LAYERS_MAX || !nsbox_ociref_digest_valid(m.config.digest))
            abort();
        for (size_t i = 0; i < m.n_layers; i++)
            if (!nsbox_ociref_digest_valid(m.layers[i].digest) || m.layers[i].size < 0)
                abort();
    }
    if (nsbox_ocimanifest_config(text, size, &c, &e) == 0) {
        if (has_nul)
            abort();
        nsbox_ocimanifest_config_free(&c);
    }
    (void)nsbox_ocimanifest_docker_save(text, size, NULL, &d, &e);

    char *s = cstring_dup(data, size);
    char out[4096];
    enum nsbox_oci_entry_kind k;
    if (nsbox_ocimanifest_entry_path(s, out, sizeof out, &k) == 0) {
        if (out[0] == '/' || !strcmp(out, "..") || !strncmp(out, "../", 3) ||
            strstr(out, "/../") || (strlen(out) >= 3 && !strcmp(out + strlen(out) - 3, "/..")))
            abort();
    }
    struct nsbox_ociref r;
    char canon[NSBOX_OCIREF_MAX + 1];
    if (nsbox_ociref_parse(s, &r, &e) == 0) {
        if (nsbox_ociref_format(&r, canon, sizeof canon) < 0)
            abort();
        struct nsbox_ociref again; /* the canonical form is a fixed point */
        char canon2[NSBOX_OCIREF_MAX + 1];
        if (nsbox_ociref_parse(canon, &again, &e) < 0 ||
            nsbox_ociref_format(&again, canon2, sizeof canon2) < 0 || strcmp(canon, canon2))
            abort();
    }
    free(s);
    return 0;
}
