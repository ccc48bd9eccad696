/* Pulling from a registry: skopeo copies the image into an OCI layout in the store's staging
 * area, which is then imported like any other (every blob verified again). skopeo is the
 * transport because it already honours what users configure for registries: REGISTRY_AUTH_FILE,
 * auth.json, ~/.docker/config.json, certs.d, registries.conf (mirrors, insecure registries). */
#include "oci_store.h"
#include "cleanup.h"
#include "image.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

static const struct {
    const char *needle, *meaning;
} skopeo_errors[] = {
    {"unauthorized", "unauthorized: the registry refused the credentials (log in with `skopeo "
                     "login`, or set REGISTRY_AUTH_FILE)"},
    {"authentication required", "unauthorized: the registry needs credentials (`skopeo login`)"},
    {"denied", "unauthorized: access denied by the registry"},
    {"manifest unknown", "unknown tag: the registry has no such tag or digest"},
    {"name unknown", "unknown repository: the registry has no such image"},
    {"not found", "unknown tag or repository"},
    {"no image found in manifest list", "no platform match: the image has no linux variant for "
                                        "this machine's architecture"},
    {"choosing image instance", "no platform match: the image has no variant for this machine"},
    {"x509", "TLS failure: the registry's certificate is not trusted (add its CA under "
             "/etc/containers/certs.d/HOST/)"},
    {"http response to https client", "TLS failure: the registry speaks plain HTTP (mark it "
                                      "insecure in registries.conf)"},
    {"tls:", "TLS failure"},
    {"digest", "digest mismatch: the registry sent content that does not match its digest"},
    {"no space left", "out of disk space"},
    {"connection refused", "cannot reach the registry (connection refused)"},
    {"no such host", "cannot reach the registry (unknown host)"},
    {"dial tcp", "cannot reach the registry"},
};

static void explain(const char *ref, char *out, struct nsbox_err *e)
{
    size_t n = strlen(out);
    while (n && (out[n - 1] == '\n' || out[n - 1] == ' '))
        out[--n] = '\0';
    char *last = strrchr(out, '\n');
    last = last ? last + 1 : out;
    char lower[8192];
    size_t i;
    for (i = 0; out[i] && i + 1 < sizeof lower; i++)
        lower[i] = (out[i] >= 'A' && out[i] <= 'Z') ? (char)(out[i] - 'A' + 'a') : out[i];
    lower[i] = '\0';
    for (size_t k = 0; k < sizeof skopeo_errors / sizeof skopeo_errors[0]; k++)
        if (strstr(lower, skopeo_errors[k].needle)) {
            nsbox_err_set(e, NSBOX_E_NOTFOUND, EIO, "cannot pull %s: %s (skopeo: %s)", ref,
                          skopeo_errors[k].meaning, NSBOX_SHOW(last));
            return;
        }
    nsbox_err_set(e, NSBOX_E_SYS, EIO, "cannot pull %s: skopeo failed: %s", ref,
                  NSBOX_SHOW(last[0] ? last : "no message"));
}

static int run_skopeo(const char *ref, const char *layout, bool progress, bool tls_verify,
                      struct nsbox_err *e)
{
    char src[NSBOX_OCIREF_MAX + 16], dst[PATH_MAX + 16];
    snprintf(src, sizeof src, "docker://%s", ref);
    snprintf(dst, sizeof dst, "oci:%s:nsbox", layout);
    const char *skopeo = getenv("NSBOX_SKOPEO");
    if (!skopeo || !*skopeo)
        skopeo = "skopeo";
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0)
        return nsbox_err_sys(e, "pipe");
    pid_t pid = fork();
    if (pid < 0) {
        close(p[0]);
        close(p[1]);
        return nsbox_err_sys(e, "fork");
    }
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        int devnull = open("/dev/null", O_RDWR);
        dup2(devnull, 0);
        dup2(progress ? 2 : devnull, 1);
        dup2(p[1], 2);
        char *argv[] = {(char *)skopeo, "copy", "--quiet", src, dst, NULL, NULL};
        if (progress)
            argv[2] = "--retry-times=2";
        if (!tls_verify) {
            argv[3] = "--src-tls-verify=false";
            argv[4] = src;
            argv[5] = dst;
        }
        execvp(skopeo, argv);
        dprintf(2, "exec %s: %s\n", skopeo, strerror(errno));
        _exit(127);
    }
    close(p[1]);
    char out[8192];
    nsbox_read_bounded(p[0], out, sizeof out);
    close(p[0]);
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
        return 0;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 127 && strstr(out, "exec "))
        return nsbox_err_set(e, NSBOX_E_UNSUPPORTED, ENOENT,
                             "cannot pull %s: skopeo is not installed (apt-get install skopeo)",
                             ref);
    explain(ref, out, e);
    return -1;
}

int nsbox_oci_pull(const char *ref, bool progress, bool tls_verify,
                   struct nsbox_oci_imported *out, struct nsbox_err *e)
{
    struct nsbox_ociref r;
    char canon[NSBOX_OCIREF_MAX + 1], layout[PATH_MAX + 16];
    if (nsbox_ociref_parse(ref, &r, e) < 0)
        return -1;
    nsbox_ociref_format(&r, canon, sizeof canon);
    struct nsbox_image_txn t;
    int rc = -1;
    if (nsbox_image_txn_begin(&t, "oci-pull", progress, e) < 0)
        goto out;
    snprintf(layout, sizeof layout, "%s/layout", t.tmp);
    if (progress)
        fprintf(stderr, "nsbox: pulling %s\n", canon);
    if (run_skopeo(canon, layout, progress, tls_verify, e) < 0)
        goto out;
    rc = nsbox_oci_store_import(layout, canon, progress, out, e);
out:
    nsbox_image_txn_end(&t);
    return rc;
}
