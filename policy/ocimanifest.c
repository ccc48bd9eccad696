/* OCI and Docker image metadata, parsed with cJSON. Pure: see ocimanifest.h. */
#include "ocimanifest.h"
#include "cleanup_cjson.h"
#include "spec.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SHOW(t) NSBOX_SHOW(t)

#define MT_OCI_INDEX "application/vnd.oci.image.index.v1+json"
#define MT_OCI_MANIFEST "application/vnd.oci.image.manifest.v1+json"
#define MT_DOCKER_LIST "application/vnd.docker.distribution.manifest.list.v2+json"
#define MT_DOCKER_MANIFEST "application/vnd.docker.distribution.manifest.v2+json"

static cJSON *parse(const char *text, size_t len, const char *what, struct nsbox_err *e)
{
    if (len > NSBOX_OCI_JSON_MAX) {
        nsbox_err_set(e, NSBOX_E_INVALID, EFBIG, "%s is larger than %u bytes", what,
                      NSBOX_OCI_JSON_MAX);
        return NULL;
    }
    /* before cJSON, which cuts a string at a NUL, raw or escaped, and reads on: a digest, a
     * media type or a config's value acted on would not be the image's */
    struct nsbox_err nul;
    if (nsbox_spec_json_check_nul(text, len, &nul) < 0) {
        nsbox_err_set(e, NSBOX_E_INVALID, EINVAL, "%s: %s", what, nul.msg);
        return NULL;
    }
    cJSON *o = cJSON_ParseWithLength(text, len);
    if (!o) {
        nsbox_err_set(e, NSBOX_E_INVALID, EINVAL, "%s is not valid JSON", what);
        return NULL;
    }
    if (!cJSON_IsObject(o) && !cJSON_IsArray(o)) {
        cJSON_Delete(o);
        nsbox_err_set(e, NSBOX_E_INVALID, EINVAL, "%s is not a JSON object", what);
        return NULL;
    }
    return o;
}

static const char *str(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) && v->valuestring ? v->valuestring : NULL;
}

/* copy a string field; false when present but too long or not a string */
static bool copy_str(const cJSON *o, const char *key, char *out, size_t n)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    out[0] = '\0';
    if (!v || cJSON_IsNull(v))
        return true;
    if (!cJSON_IsString(v) || !v->valuestring || strlen(v->valuestring) >= n)
        return false;
    strcpy(out, v->valuestring);
    return true;
}

static int parse_desc(const cJSON *o, struct nsbox_oci_desc *d, const char *what,
                      struct nsbox_err *e)
{
    memset(d, 0, sizeof *d);
    if (!cJSON_IsObject(o))
        return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL, "%s: a descriptor is not an object",
                             what);
    if (!copy_str(o, "mediaType", d->media_type, sizeof d->media_type) ||
        !copy_str(o, "digest", d->digest, sizeof d->digest) ||
        !nsbox_ociref_digest_valid(d->digest))
        return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL,
                             "%s: a descriptor has no valid sha256 digest (other digest "
                             "algorithms are not supported)",
                             what);
    const cJSON *size = cJSON_GetObjectItemCaseSensitive(o, "size");
    if (!cJSON_IsNumber(size) || size->valuedouble < 0 || size->valuedouble > 1e15 ||
        size->valuedouble != (double)(int64_t)size->valuedouble)
        return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL, "%s: descriptor %s has no valid size",
                             what, d->digest);
    d->size = (int64_t)size->valuedouble;
    const cJSON *plat = cJSON_GetObjectItemCaseSensitive(o, "platform");
    if (plat && (!copy_str(plat, "os", d->os, sizeof d->os) ||
                 !copy_str(plat, "architecture", d->arch, sizeof d->arch) ||
                 !copy_str(plat, "variant", d->variant, sizeof d->variant)))
        return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL, "%s: descriptor %s: invalid platform",
                             what, d->digest);
    const cJSON *ann = cJSON_GetObjectItemCaseSensitive(o, "annotations");
    if (ann && !copy_str(ann, "org.opencontainers.image.ref.name", d->ref_name,
                         sizeof d->ref_name))
        return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL,
                             "%s: descriptor %s: invalid ref.name annotation", what, d->digest);
    return 0;
}

int nsbox_ocimanifest_kind(const char *text, size_t len, enum nsbox_ocimanifest_kind *kind,
                           struct nsbox_err *e)
{
    cleanup_cjson cJSON *o = parse(text, len, "image manifest", e);
    if (!o)
        return -1;
    const char *mt = str(o, "mediaType");
    if (mt && (!strcmp(mt, MT_OCI_INDEX) || !strcmp(mt, MT_DOCKER_LIST))) {
        *kind = NSBOX_OCI_DOC_INDEX;
        return 0;
    }
    if (mt && (!strcmp(mt, MT_OCI_MANIFEST) || !strcmp(mt, MT_DOCKER_MANIFEST))) {
        *kind = NSBOX_OCI_DOC_MANIFEST;
        return 0;
    }
    if (mt)
        return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL,
                             "unsupported manifest type '%s' (docker schema 1 images are not "
                             "supported)",
                             SHOW(mt));
    if (cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(o, "manifests"))) {
        *kind = NSBOX_OCI_DOC_INDEX;
        return 0;
    }
    if (cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(o, "config"))) {
        *kind = NSBOX_OCI_DOC_MANIFEST;
        return 0;
    }
    return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL,
                         "not an image index nor a manifest (no mediaType, manifests or config)");
}

static bool is_index_type(const char *mt)
{
    return !strcmp(mt, MT_OCI_INDEX) || !strcmp(mt, MT_DOCKER_LIST);
}

static bool platform_matches(const struct nsbox_oci_desc *d, const char *os, const char *arch)
{
    return !strcmp(d->os, os) && !strcmp(d->arch, arch);
}

/* Do two references name the same image once normalised? */
static bool same_ref(const char *a, const char *b)
{
    struct nsbox_ociref ra, rb;
    struct nsbox_err ignored; /* a tag that is no reference matches nothing */
    char ca[NSBOX_OCIREF_MAX + 1], cb[NSBOX_OCIREF_MAX + 1];
    return nsbox_ociref_parse(a, &ra, &ignored) == 0 && nsbox_ociref_parse(b, &rb, &ignored) == 0 &&
           nsbox_ociref_format(&ra, ca, sizeof ca) >= 0 &&
           nsbox_ociref_format(&rb, cb, sizeof cb) >= 0 && !strcmp(ca, cb);
}

/* An index entry's ref_name (org.opencontainers.image.ref.name) against --name: the same
 * text or reference, or, for a bare tag (skopeo's oci:DIR:TAG writes one), want's tag. */
static bool ref_name_matches(const char *ref_name, const char *want)
{
    if (!ref_name[0])
        return false;
    if (!strcmp(ref_name, want) || same_ref(ref_name, want))
        return true;
    struct nsbox_ociref r;
    struct nsbox_err ignored; /* a want that is no reference has no tag to match */
    return !strpbrk(ref_name, ":/@") && nsbox_ociref_parse(want, &r, &ignored) == 0 &&
           !strcmp(r.tag, ref_name);
}

int nsbox_ocimanifest_pick(const char *text, size_t len, const char *want_ref, const char *os,
                           const char *arch, struct nsbox_oci_desc *out, struct nsbox_err *e)
{
    cleanup_cjson cJSON *o = parse(text, len, "image index", e);
    if (!o)
        return -1;
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(o, "manifests");
    if (!cJSON_IsArray(arr))
        return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL, "image index has no manifests array");
    int n = cJSON_GetArraySize(arr);
    if (n == 0)
        return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL, "image index lists no manifest");
    if (n > 4096)
        return nsbox_err_set(e, NSBOX_E_INVALID, E2BIG, "image index lists over 4096 manifests");
    /* one entry: want_ref is only the name it is stored under; several: it chooses by
     * ref_name, and when none has it, the platform does (a multi-arch layout) */
    if (n == 1)
        want_ref = NULL;
    int found = -1, want_pick = -1, platform_pick = -1, no_platform = 0;
    struct nsbox_oci_desc d;
    char seen[512] = "", names[256] = "";
    for (int i = 0; i < n; i++) {
        if (parse_desc(cJSON_GetArrayItem(arr, i), &d, "image index", e) < 0)
            return -1;
        if (want_ref && want_pick < 0 && ref_name_matches(d.ref_name, want_ref))
            want_pick = i;
        if (d.ref_name[0] && strlen(names) + strlen(d.ref_name) + 3 < sizeof names)
            snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s",
                     names[0] ? ", " : "", d.ref_name);
        if (!d.os[0])
            no_platform++;
        /* attestation manifests (buildkit's "unknown/unknown") are never a pick */
        if (d.os[0] && platform_matches(&d, os, arch) && platform_pick < 0)
            platform_pick = i;
        if (d.os[0] && strlen(seen) + strlen(d.os) + strlen(d.arch) + 4 < sizeof seen)
            snprintf(seen + strlen(seen), sizeof seen - strlen(seen), "%s%s/%s",
                     seen[0] ? ", " : "", d.os, d.arch);
    }
    if (want_pick >= 0) {
        found = want_pick;
    } else if (platform_pick >= 0) {
        found = platform_pick;
    } else if (n == 1) {
        found = 0; /* a layout's index.json with one image and no platform */
    } else if (no_platform == n) {
        if (want_ref)
            return nsbox_err_set(e, NSBOX_E_NOTFOUND, ENOENT,
                                 "no image named '%s' among the index's %d (%s)", SHOW(want_ref), n,
                                 names[0] ? names : "none has a ref.name");
        return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL,
                             "the image index holds %d images: choose one with --name REF, "
                             "whose reference or tag is one of their ref names (%s)",
                             n, names[0] ? names : "none has one");
    } else {
        return nsbox_err_set(e, NSBOX_E_NOTFOUND, ENOENT,
                             "no image for this platform (%s/%s) in the index; it has: %s", os,
                             arch, seen[0] ? seen : "none");
    }
    return parse_desc(cJSON_GetArrayItem(arr, found), out, "image index", e);
}

bool nsbox_ocimanifest_layer_type_ok(const char *mt)
{
    static const char *const ok[] = {
        "application/vnd.oci.image.layer.v1.tar",
        "application/vnd.oci.image.layer.v1.tar+gzip",
        "application/vnd.oci.image.layer.v1.tar+zstd",
        "application/vnd.oci.image.layer.nondistributable.v1.tar",
        "application/vnd.oci.image.layer.nondistributable.v1.tar+gzip",
        "application/vnd.oci.image.layer.nondistributable.v1.tar+zstd",
        "application/vnd.docker.image.rootfs.diff.tar.gzip",
        "application/vnd.docker.image.rootfs.diff.tar",
        "application/vnd.docker.image.rootfs.foreign.diff.tar.gzip",
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
        if (!strcmp(mt, ok[i]))
            return true;
    return false;
}

int nsbox_ocimanifest_parse(const char *text, size_t len, struct nsbox_oci_manifest *m,
                            struct nsbox_err *e)
{
    memset(m, 0, sizeof *m);
    cleanup_cjson cJSON *o = parse(text, len, "image manifest", e);
    if (!o)
        return -1;
    const char *mt = str(o, "mediaType");
    if (mt && is_index_type(mt))
        return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL, "expected a manifest, got an index");
    const cJSON *sv = cJSON_GetObjectItemCaseSensitive(o, "schemaVersion");
    if (!cJSON_IsNumber(sv) || sv->valueint != 2)
        return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL,
                             "image manifest: schemaVersion must be 2 (docker schema 1 images "
                             "are not supported)");
    if (parse_desc(cJSON_GetObjectItemCaseSensitive(o, "config"), &m->config,
                   "image manifest (config)", e) < 0)
        return -1;
    const cJSON *layers = cJSON_GetObjectItemCaseSensitive(o, "layers");
    if (!cJSON_IsArray(layers))
        return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL, "image manifest has no layers array");
    int n = cJSON_GetArraySize(layers);
    if (n > NSBOX_OCI_LAYERS_MAX)
        return nsbox_err_set(e, NSBOX_E_INVALID, E2BIG,
                             "image manifest has %d layers (at most %d)", n,
                             NSBOX_OCI_LAYERS_MAX);
    for (int i = 0; i < n; i++) {
        struct nsbox_oci_desc *d = &m->layers[i];
        if (parse_desc(cJSON_GetArrayItem(layers, i), d, "image manifest (layers)", e) < 0)
            return -1;
        if (d->media_type[0] && !nsbox_ocimanifest_layer_type_ok(d->media_type))
            return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL,
                                 "layer %s has media type '%s': only tar, tar+gzip and tar+zstd "
                                 "layers are supported",
                                 d->digest, SHOW(d->media_type));
    }
    m->n_layers = (size_t)n;
    return 0;
}

void nsbox_ocimanifest_config_free(struct nsbox_oci_config *c)
{
    for (size_t i = 0; i < c->n_env; i++)
        free(c->env[i]);
    c->n_env = 0;
}

int nsbox_ocimanifest_config(const char *text, size_t len, struct nsbox_oci_config *c,
                             struct nsbox_err *e)
{
    memset(c, 0, sizeof *c);
    cleanup_cjson cJSON *o = parse(text, len, "image config", e);
    if (!o)
        return -1;
    if (!cJSON_IsObject(o) || !copy_str(o, "os", c->os, sizeof c->os) ||
        !copy_str(o, "architecture", c->arch, sizeof c->arch) ||
        !copy_str(o, "variant", c->variant, sizeof c->variant) ||
        !copy_str(o, "created", c->created, sizeof c->created))
        return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL,
                             "image config: os, architecture, variant or created is invalid");
    const cJSON *cfg = cJSON_GetObjectItemCaseSensitive(o, "config");
    if (cfg && !cJSON_IsNull(cfg)) {
        if (!cJSON_IsObject(cfg) || !copy_str(cfg, "User", c->user, sizeof c->user) ||
            !copy_str(cfg, "WorkingDir", c->workdir, sizeof c->workdir))
            return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL, "image config: invalid config");
        const cJSON *env = cJSON_GetObjectItemCaseSensitive(cfg, "Env");
        if (env && !cJSON_IsNull(env)) {
            if (!cJSON_IsArray(env) || cJSON_GetArraySize(env) > NSBOX_OCI_ENV_MAX)
                return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL,
                                     "image config: Env must be an array of at most %d strings",
                                     NSBOX_OCI_ENV_MAX);
            const cJSON *it;
            cJSON_ArrayForEach(it, env)
            {
                const char *kv = cJSON_IsString(it) ? it->valuestring : NULL;
                const char *eq = kv ? strchr(kv, '=') : NULL;
                if (!kv || !eq || eq == kv || strlen(kv) > 32768) {
                    nsbox_ocimanifest_config_free(c);
                    return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL,
                                         "image config: an Env entry is not KEY=value");
                }
                if (!(c->env[c->n_env] = strdup(kv))) {
                    nsbox_ocimanifest_config_free(c);
                    return nsbox_err_set(e, NSBOX_E_NOMEM, ENOMEM, "out of memory");
                }
                c->n_env++;
            }
        }
    }
    const cJSON *rootfs = cJSON_GetObjectItemCaseSensitive(o, "rootfs");
    const cJSON *ids = cJSON_GetObjectItemCaseSensitive(rootfs, "diff_ids");
    if (!cJSON_IsArray(ids) || cJSON_GetArraySize(ids) > NSBOX_OCI_LAYERS_MAX) {
        nsbox_ocimanifest_config_free(c);
        return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL,
                             "image config: rootfs.diff_ids must be an array of at most %d "
                             "digests",
                             NSBOX_OCI_LAYERS_MAX);
    }
    const cJSON *it;
    cJSON_ArrayForEach(it, ids)
    {
        if (!cJSON_IsString(it) || !nsbox_ociref_digest_valid(it->valuestring)) {
            nsbox_ocimanifest_config_free(c);
            return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL,
                                 "image config: a diff_id is not a sha256 digest");
        }
        strcpy(c->diff_ids[c->n_diff_ids++], it->valuestring);
    }
    return 0;
}

int nsbox_ocimanifest_docker_save(const char *text, size_t len, const char *want_tag,
                                  struct nsbox_docker_save *d, struct nsbox_err *e)
{
    memset(d, 0, sizeof *d);
    cleanup_cjson cJSON *o = parse(text, len, "manifest.json", e);
    if (!o)
        return -1;
    if (!cJSON_IsArray(o) || cJSON_GetArraySize(o) == 0)
        return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL,
                             "manifest.json is not a non-empty array of images");
    /* one image: want_tag is only the name it is stored under; several (`docker save a b`):
     * it chooses among their RepoTags, compared as references (busybox is
     * docker.io/library/busybox:latest) */
    int count = cJSON_GetArraySize(o);
    if (count == 1)
        want_tag = NULL;
    const cJSON *pick = NULL, *img;
    char tags_seen[256] = "";
    cJSON_ArrayForEach(img, o)
    {
        const cJSON *tags = cJSON_GetObjectItemCaseSensitive(img, "RepoTags"), *t;
        if (!want_tag) {
            pick = img;
            break;
        }
        cJSON_ArrayForEach(t, tags)
        {
            if (!cJSON_IsString(t))
                continue;
            if (same_ref(t->valuestring, want_tag))
                pick = img;
            size_t used = strlen(tags_seen);
            if (used + strlen(t->valuestring) + 3 < sizeof tags_seen)
                snprintf(tags_seen + used, sizeof tags_seen - used, "%s%s", used ? ", " : "",
                         t->valuestring);
        }
        if (pick)
            break;
    }
    if (!pick)
        return nsbox_err_set(e, NSBOX_E_NOTFOUND, ENOENT,
                             "no image tagged '%s' among the archive's %d (%s)", SHOW(want_tag),
                             count, tags_seen[0] ? tags_seen : "none has a tag");
    if (count > 1 && !want_tag)
        return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL,
                             "the archive holds %d images: choose one with --name, one of their "
                             "RepoTags (manifest.json)",
                             count);
    if (!cJSON_IsObject(pick) || !copy_str(pick, "Config", d->config, sizeof d->config) ||
        !d->config[0])
        return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL, "manifest.json: no valid Config");
    const cJSON *tags = cJSON_GetObjectItemCaseSensitive(pick, "RepoTags");
    const cJSON *t0 = cJSON_IsArray(tags) ? cJSON_GetArrayItem(tags, 0) : NULL;
    if (cJSON_IsString(t0) && strlen(t0->valuestring) < sizeof d->repo_tag)
        strcpy(d->repo_tag, t0->valuestring);
    const cJSON *layers = cJSON_GetObjectItemCaseSensitive(pick, "Layers"), *l;
    if (!cJSON_IsArray(layers) || cJSON_GetArraySize(layers) > NSBOX_OCI_LAYERS_MAX)
        return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL,
                             "manifest.json: Layers must be an array of at most %d names",
                             NSBOX_OCI_LAYERS_MAX);
    cJSON_ArrayForEach(l, layers)
    {
        if (!cJSON_IsString(l) || !l->valuestring[0] ||
            strlen(l->valuestring) >= sizeof d->layers[0])
            return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL, "manifest.json: invalid layer name");
        strcpy(d->layers[d->n_layers++], l->valuestring);
    }
    return 0;
}

int nsbox_ocimanifest_entry_path(const char *name, char *out, size_t n,
                                 enum nsbox_oci_entry_kind *kind)
{
    *kind = NSBOX_OCI_ENTRY_PLAIN;
    if (!name || name[0] == '/' || n == 0)
        return -1;
    size_t o = 0;
    const char *p = name;
    size_t last_at = 0;
    int depth = 0;
    while (*p) {
        while (*p == '/')
            p++;
        if (!*p)
            break;
        const char *end = strchr(p, '/');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == 1 && p[0] == '.') {
            p += len;
            continue;
        }
        if ((len == 2 && p[0] == '.' && p[1] == '.') || ++depth > NSBOX_OCI_DEPTH_MAX)
            return -1;
        if (o + (o ? 1 : 0) + len + 1 > n)
            return -1;
        if (o)
            out[o++] = '/';
        last_at = o;
        memcpy(out + o, p, len);
        o += len;
        p += len;
    }
    out[o] = '\0';
    if (o == 0)
        return 1;
    const char *base = out + last_at;
    if (!strncmp(base, ".wh.", 4)) {
        if (!strcmp(base, ".wh..wh..opq")) {
            *kind = NSBOX_OCI_ENTRY_OPAQUE;
            out[last_at ? last_at - 1 : 0] = '\0';
            return 0;
        }
        if (!strncmp(base, ".wh..wh.", 8))
            return 1; /* other aufs metadata (.wh..wh.plnk, ...): not part of the tree */
        if (base[4] == '\0')
            return -1;
        const char *target = base + 4;
        if (!strcmp(target, ".") || !strcmp(target, ".."))
            return -1;
        *kind = NSBOX_OCI_ENTRY_WHITEOUT;
        memmove(out + last_at, target, strlen(target) + 1);
    }
    return 0;
}
