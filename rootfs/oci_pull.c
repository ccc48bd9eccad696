/* Pulling from a registry: skopeo copies the image into an OCI layout in the store's staging
 * area, which is then imported like any other (every blob verified again). skopeo is the
 * transport because it already honours what users configure for registries: REGISTRY_AUTH_FILE,
 * auth.json, ~/.docker/config.json, certs.d, registries.conf (mirrors, insecure registries). */
#include "oci_lookup.h"
#include "oci_store.h"
#include "cleanup.h"
#include "image.h"
#include "proc.h"
#include "shown.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

/* What a failure is about, which decides what the message adds: the credentials skopeo used,
 * or where it looked for the registry's CA. */
enum hint { HINT_NONE, HINT_AUTH, HINT_CA, HINT_PLAIN };

static const struct {
    const char *needle, *meaning;
    enum hint hint;
} skopeo_errors[] = {
    {"unauthorized", "unauthorized: the registry refused the pull", HINT_AUTH},
    {"authentication required", "unauthorized: the registry needs credentials", HINT_AUTH},
    {"denied", "unauthorized: access denied by the registry", HINT_AUTH},
    {"manifest unknown", "unknown tag: the registry has no such tag or digest", HINT_NONE},
    {"name unknown", "unknown repository: the registry has no such image", HINT_NONE},
    {"not found", "unknown tag or repository", HINT_NONE},
    {"no image found in manifest list", "no platform match: the image has no linux variant for "
                                        "this machine's architecture", HINT_NONE},
    {"choosing image instance", "no platform match: the image has no variant for this machine",
     HINT_NONE},
    {"x509", "TLS failure: the registry's certificate is not trusted", HINT_CA},
    {"http response to https client", "TLS failure: the registry speaks plain HTTP", HINT_PLAIN},
    {"tls:", "TLS failure", HINT_CA},
    {"digest", "digest mismatch: the registry sent content that does not match its digest",
     HINT_NONE},
    {"no space left", "out of disk space", HINT_NONE},
    {"connection refused", "cannot reach the registry (connection refused)", HINT_NONE},
    {"no such host", "cannot reach the registry (unknown host)", HINT_NONE},
    {"dial tcp", "cannot reach the registry", HINT_NONE},
};

static bool exists(const char *path)
{
    return access(path, F_OK) == 0;
}

/* The credential files skopeo reads (containers-auth.json(5)): REGISTRY_AUTH_FILE when set,
 * else the first that exists of auth.json in $XDG_RUNTIME_DIR/containers and
 * $XDG_CONFIG_HOME/containers; then docker's config.json. Named so that a refused password
 * points at the file that holds it. */
static void auth_hint(const char *domain, char *out, size_t n)
{
    const char *env = getenv("REGISTRY_AUTH_FILE");
    if (env && *env) {
        snprintf(out, n, "with the credentials of REGISTRY_AUTH_FILE=%s%s", env,
                 exists(env) ? "" : ", which does not exist");
        return;
    }
    char cand[4][PATH_MAX];
    int k = 0;
    const char *home = getenv("HOME"), *run = getenv("XDG_RUNTIME_DIR");
    const char *cfg = getenv("XDG_CONFIG_HOME"), *docker = getenv("DOCKER_CONFIG");
    if (run && *run)
        snprintf(cand[k++], PATH_MAX, "%s/containers/auth.json", run);
    if (cfg && *cfg)
        snprintf(cand[k++], PATH_MAX, "%s/containers/auth.json", cfg);
    else if (home && *home)
        snprintf(cand[k++], PATH_MAX, "%s/.config/containers/auth.json", home);
    if (docker && *docker)
        snprintf(cand[k++], PATH_MAX, "%s/config.json", docker);
    else if (home && *home)
        snprintf(cand[k++], PATH_MAX, "%s/.docker/config.json", home);
    for (int i = 0; i < k; i++)
        if (exists(cand[i])) {
            snprintf(out, n, "with the credentials of %s (REGISTRY_AUTH_FILE is not set)",
                     cand[i]);
            return;
        }
    if (!k) {
        snprintf(out, n, "no credential file: neither REGISTRY_AUTH_FILE nor HOME is set");
        return;
    }
    size_t len = (size_t)snprintf(out, n, "no credential file: REGISTRY_AUTH_FILE is not set "
                                          "and none of");
    for (int i = 0; i < k && len < n; i++)
        len += (size_t)snprintf(out + len, n - len, " %s", cand[i]);
    if (len < n)
        snprintf(out + len, n - len, " exists (`skopeo login %s`)", domain);
}

/* Where containers-certs.d(5) looks for the CA of registry `domain` (host:port): the user's
 * directory first for others than root, then the system's and docker's. */
static void ca_hint(const char *ref, const char *domain, char *out, size_t n)
{
    const char *home = getenv("HOME");
    size_t len = 0;
    if (geteuid() != 0 && home && *home)
        len = (size_t)snprintf(out, n, "%s/.config/containers/certs.d/%s/, ", home,
                               domain);
    if (len < n)
        snprintf(out + len, n - len,
                 "/etc/containers/certs.d/%s/ and /etc/docker/certs.d/%s/ searched for a CA "
                 "(ca.crt); add the registry's CA there, or pull without checking it: "
                 "`nsbox image pull --tls-verify=false %s`",
                 domain, domain, ref);
}

/* skopeo's own words: the msg="..." of its last line, unquoted, at most its last 240 bytes
 * (the cause is at the end of Go's wrapped errors), control characters replaced. */
static void skopeo_said(const char *last, char *out, size_t n)
{
    const char *m = strstr(last, "msg=\"");
    m = m ? m + 5 : last;
    size_t len = strlen(m);
    if (m != last && len && m[len - 1] == '"')
        len--;
    const char *from = len > 240 ? m + len - 240 : m;
    while (from > m && from < m + len && ((unsigned char)*from & 0xc0) == 0x80)
        from++; /* a cut inside a character would show its rest as '?' */
    char raw[256]; /* the registry's words too: shown by policy/shown.h's rule */
    size_t k = 0;
    for (; from < m + len && k < sizeof raw; from++) {
        if (m != last && from[0] == '\\' && from + 1 < m + len &&
            (from[1] == '"' || from[1] == '\\'))
            from++; /* logfmt's quoting of a quote or backslash inside msg="..." */
        raw[k++] = *from;
    }
    size_t o = 0;
    if (len > 240 && n > 4)
        o = (size_t)snprintf(out, n, "...");
    nsbox_shown_copy(out + o, n - o, raw, k, SIZE_MAX, 0);
}

static void explain(const char *ref, const char *domain, char *out, struct nsbox_err *e)
{
    size_t n = strlen(out);
    while (n && (out[n - 1] == '\n' || out[n - 1] == ' '))
        out[--n] = '\0';
    char *last = strrchr(out, '\n');
    last = last ? last + 1 : out;
    char lower[8192], said[256], hint[PATH_MAX + 256];
    size_t i;
    for (i = 0; out[i] && i + 1 < sizeof lower; i++)
        lower[i] = (out[i] >= 'A' && out[i] <= 'Z') ? (char)(out[i] - 'A' + 'a') : out[i];
    lower[i] = '\0';
    skopeo_said(last[0] ? last : "no message", said, sizeof said);
    for (size_t k = 0; k < sizeof skopeo_errors / sizeof skopeo_errors[0]; k++)
        if (strstr(lower, skopeo_errors[k].needle)) {
            hint[0] = '\0';
            if (skopeo_errors[k].hint == HINT_AUTH)
                auth_hint(domain, hint, sizeof hint);
            else if (skopeo_errors[k].hint == HINT_CA)
                ca_hint(ref, domain, hint, sizeof hint);
            else if (skopeo_errors[k].hint == HINT_PLAIN) /* run and create always verify */
                /* skopeo's entry whole, as one line to paste: the file to write and its
                 * syntax are what a user would otherwise have to look up; the user's own
                 * drop-in directory, which any user (root too) can write and which seldom
                 * exists yet, hence the mkdir */
                snprintf(hint, sizeof hint,
                         "fix: `nsbox image pull --tls-verify=false %s` (then run and create "
                         "use the stored image), or once for every pull from it: `mkdir -p "
                         "~/.config/containers/registries.conf.d && echo "
                         "'registry = [{location = \"%s\", insecure = true}]' > "
                         "~/.config/containers/registries.conf.d/insecure-%s.conf` (for every "
                         "user, as root: /etc/containers/registries.conf.d/)",
                         ref, domain, domain);
            /* paths from the environment, whole (a cut one names no file) but one line */
            for (char *c = hint; *c; c++)
                if ((unsigned char)*c < 0x20 || *c == 0x7f)
                    *c = '?';
            nsbox_err_set(e, NSBOX_E_NOTFOUND, EIO, "cannot pull %s: %s%s%s (skopeo: %s)", ref,
                          skopeo_errors[k].meaning, hint[0] ? "; " : "", hint, said);
            return;
        }
    nsbox_err_set(e, NSBOX_E_SYS, EIO, "cannot pull %s: skopeo failed: %s", ref, said);
}

static int run_skopeo(const char *ref, const char *domain, const char *layout, bool progress,
                      bool tls_verify, struct nsbox_err *e)
{
    char src[NSBOX_OCIREF_MAX + 16], dst[PATH_MAX + 16];
    snprintf(src, sizeof src, "docker://%s", ref);
    snprintf(dst, sizeof dst, "oci:%s:nsbox", layout);
    const char *skopeo = getenv("NSBOX_SKOPEO");
    if (!skopeo || !*skopeo)
        skopeo = "skopeo";
    char *argv[] = {(char *)skopeo, "copy", "--quiet", src, dst, NULL, NULL};
    if (progress)
        argv[2] = "--retry-times=2";
    if (!tls_verify) {
        argv[3] = "--src-tls-verify=false";
        argv[4] = src;
        argv[5] = dst;
    }
    /* its progress, on a terminal, to our stderr; its errors kept to be explained */
    const struct nsbox_proc p = {.argv = argv,
                                 .path_lookup = true,
                                 .stdout_fd = progress ? 2 : NSBOX_PROC_STDOUT_NULL,
                                 .keep_fd = -1};
    char out[8192];
    int status;
    if (nsbox_proc_run(&p, &status, out, sizeof out, e) < 0)
        return nsbox_err_wrap(e, "cannot pull %s", ref);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
        return 0;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 127 && strstr(out, "cannot execute "))
        return nsbox_err_set(e, NSBOX_E_UNSUPPORTED, ENOENT,
                             "cannot pull %s: skopeo is not installed (apt-get install skopeo)",
                             ref);
    explain(ref, domain, out, e);
    return -1;
}

int nsbox_oci_pull(const char *ref, bool progress, bool tls_verify,
                   struct nsbox_oci_imported *out, struct nsbox_err *e)
{
    struct nsbox_ociref r;
    char canon[NSBOX_OCIREF_MAX + 1], file[NSBOX_OCIREF_MAX + 1], layout[PATH_MAX + 16];
    /* refused as a bare word as tag and import refuse one: `--image python` would never find
     * the docker.io/library/python:latest it would store */
    if (nsbox_oci_lookup_ref_file(ref, canon, file, e) < 0 || nsbox_ociref_parse(ref, &r, e) < 0)
        return -1;
    struct nsbox_image_txn t;
    int rc = -1;
    if (nsbox_image_txn_begin(&t, "oci-pull", progress, e) < 0)
        goto out;
    snprintf(layout, sizeof layout, "%s/layout", t.tmp);
    nsbox_image_note(progress, "pulling %s", canon);
    if (run_skopeo(canon, r.domain, layout, progress, tls_verify, e) < 0)
        goto out;
    rc = nsbox_oci_store_import(layout, canon, progress, out, e);
out:
    nsbox_image_txn_end(&t);
    return rc;
}
