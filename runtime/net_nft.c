/* nf_tables through libnftables (runtime/nftlib.c loads it on first use): one call per batch,
 * each batch one kernel transaction. */
#define _GNU_SOURCE
#include "net_impl.h"
#include "nftlib.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct nsbox_nft {
    const struct nsbox_nftlib *lib;
    struct nft_ctx *ctx;
    void (*set_output_flags)(struct nft_ctx *, unsigned int); /* JSON listings and input */
};

int nsbox_nft_open(struct nsbox_nft **out, struct nsbox_err *e)
{
    *out = NULL;
    const struct nsbox_nftlib *lib = nsbox_nftlib(e);
    if (!lib)
        return -1;
    struct nsbox_nft *n = calloc(1, sizeof *n);
    if (!n)
        return nsbox_err_sys(e, "calloc");
    n->lib = lib;
    n->ctx = lib->ctx_new(NFT_CTX_DEFAULT);
    if (!n->ctx) {
        free(n);
        return nsbox_err_set(e, NSBOX_E_NOMEM, ENOMEM, "nftables: cannot create a context");
    }
    lib->ctx_buffer_output(n->ctx);
    lib->ctx_buffer_error(n->ctx);
    *out = n;
    return 0;
}

void nsbox_nft_close(struct nsbox_nft *n)
{
    if (!n)
        return;
    n->lib->ctx_free(n->ctx);
    free(n);
}

/* libnftables reports kernel errors as text ("Error: Could not process rule: File exists");
 * the errno is recovered from its strerror() words. */
static int errno_of(const char *msg)
{
    static const int known[] = {EEXIST, ENOENT, EPERM, EACCES, EOPNOTSUPP, EPROTONOSUPPORT,
                                EAFNOSUPPORT, EBUSY, ENOMEM, ENOSPC, EINVAL};
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (strstr(msg, strerror(known[i])))
            return known[i];
    return EIO;
}

static int nft_error(struct nsbox_nft *n, struct nsbox_err *e)
{
    const char *buf = n->lib->ctx_get_error_buffer(n->ctx);
    char line[512];
    if (!buf || !*buf)
        buf = "unknown error";
    if (!strncmp(buf, "Error: ", 7))
        buf += 7;
    snprintf(line, sizeof line, "%.*s", (int)strcspn(buf, "\n"), buf);
    int err = errno_of(line);
    int code = err == EPERM || err == EACCES ? NSBOX_E_UNSUPPORTED
               : err == EOPNOTSUPP || err == EPROTONOSUPPORT || err == EAFNOSUPPORT
                   ? NSBOX_E_UNSUPPORTED
                   : NSBOX_E_SYS;
    return nsbox_err_set(e, code, err, "nftables: %s", line);
}

static void set_json(struct nsbox_nft *n, bool on)
{
    if (!n->set_output_flags) {
        /* nftlib.h does not carry this one; the library is loaded already. */
        void *h = dlopen("libnftables.so.1", RTLD_NOW | RTLD_NOLOAD | RTLD_LOCAL);
        if (h)
            n->set_output_flags = (void (*)(struct nft_ctx *, unsigned int))dlsym(
                h, "nft_ctx_output_set_flags");
        if (!n->set_output_flags)
            return;
    }
    n->set_output_flags(n->ctx, on ? NFT_CTX_OUTPUT_JSON : 0);
}

int nsbox_nft_run(struct nsbox_nft *n, const char *cmds, bool json, struct nsbox_err *e)
{
    if (json)
        set_json(n, true); /* JSON output makes libnftables parse JSON input too */
    int r = n->lib->run_cmd_from_buffer(n->ctx, cmds);
    if (json)
        set_json(n, false);
    if (r != 0)
        return nft_error(n, e);
    /* reading the buffers rewinds them: nothing of this batch shows up in the next one */
    n->lib->ctx_get_output_buffer(n->ctx);
    n->lib->ctx_get_error_buffer(n->ctx);
    return 0;
}

int nsbox_nft_list_json(struct nsbox_nft *n, const char *what, char **out, struct nsbox_err *e)
{
    *out = NULL;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "list %s", what);
    set_json(n, true);
    int r = n->lib->run_cmd_from_buffer(n->ctx, cmd);
    set_json(n, false);
    if (r != 0)
        return nft_error(n, e);
    const char *buf = n->lib->ctx_get_output_buffer(n->ctx);
    *out = strdup(buf ? buf : "");
    if (!*out)
        return nsbox_err_sys(e, "strdup");
    return 0;
}
