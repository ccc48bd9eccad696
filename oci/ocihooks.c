/* The bundle's hooks (runtime-spec config.md, "POSIX-platform Hooks"): programs on the host,
 * each given the container's state on its stdin. create runs prestart and createRuntime once
 * the sandbox is set up and waits at its start barrier (its namespaces exist, nothing of the
 * workload does), start runs poststart, delete runs poststop. */
#include "ocirt.h"
#include "cleanup.h"
#include "ocispec.h"
#include "proc.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

int nsbox_ocihooks_save(const char *dir, const char *json, struct nsbox_err *e)
{
    return nsbox_ocistate_save(dir, NSBOX_OCI_HOOKS_FILE, json, e);
}

static int load(const struct nsbox_ocirt *g, const char *id, struct nsbox_ocispec_hooks *h,
                struct nsbox_err *e)
{
    char dir[PATH_MAX], path[PATH_MAX + 32];
    cleanup_free char *text = NULL;
    memset(h, 0, sizeof *h);
    if (nsbox_ocistate_dir(g, id, dir, sizeof dir, e) < 0)
        return -1;
    snprintf(path, sizeof path, "%s/%s", dir, NSBOX_OCI_HOOKS_FILE);
    int r = nsbox_read_small(path, &text, e);
    if (r != 0)
        return r < 0 ? -1 : 0; /* none kept: no hooks */
    return nsbox_ocispec_hooks_parse(text, h, e);
}

static int run_one(const struct nsbox_ocispec_hook *h, const char *state, struct nsbox_err *e)
{
    const struct nsbox_proc p = {.argv = h->args,
                                 .envp = h->env,
                                 .stdout_fd = NSBOX_PROC_STDOUT_NULL,
                                 .keep_fd = -1,
                                 .stdin_text = state,
                                 .timeout_s = h->timeout,
                                 .path = h->path};
    char err[512];
    int status;
    if (nsbox_proc_run(&p, &status, err, sizeof err, e) < 0)
        return nsbox_err_wrap(e, "%s hook %s", nsbox_ocispec_hook_name(h->kind), h->path);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
        return 0;
    char how[32];
    nsbox_proc_status_text(status, how, sizeof how);
    return nsbox_err_set(e, NSBOX_E_SYS, ECANCELED, "%s hook %s failed (%s)%s%s",
                         nsbox_ocispec_hook_name(h->kind), NSBOX_SHOW(h->path), how,
                         err[0] ? ": " : "", NSBOX_SHOW(err));
}

int nsbox_ocihooks_run(const struct nsbox_ocirt *g, const struct nsbox_ocistate *s, int kind,
                       enum nsbox_ocistate_status st, struct nsbox_err *e)
{
    static struct nsbox_ocispec_hooks h; /* large: the paths */
    if (load(g, s->id, &h, e) < 0)
        return -1;
    cleanup_free char *state = NULL;
    int r = 0;
    for (size_t i = 0; i < h.n && r == 0; i++) {
        if ((int)h.h[i].kind != kind)
            continue;
        if (!state && !(state = nsbox_ocistate_json(g, s, st, false, e))) {
            r = -1;
            break;
        }
        r = run_one(&h.h[i], state, e);
    }
    nsbox_ocispec_hooks_free(&h);
    return r;
}
