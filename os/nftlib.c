#define _GNU_SOURCE
#include "nftlib.h"

#include <dlfcn.h>
#include <errno.h>
#include <stddef.h>

static struct nsbox_nftlib lib;
static int loaded; /* 0 not tried, 1 ok, -1 failed */
static char load_error[256];

static int load(void)
{
    void *h = dlopen("libnftables.so.1", RTLD_LAZY | RTLD_LOCAL);
    if (!h) {
        const char *m = dlerror();
        snprintf(load_error, sizeof load_error, "%s", m ? m : "dlopen failed");
        return -1;
    }
    struct {
        void **slot;
        const char *name;
    } syms[] = {
        {(void **)&lib.ctx_new, "nft_ctx_new"},
        {(void **)&lib.ctx_free, "nft_ctx_free"},
        {(void **)&lib.ctx_buffer_output, "nft_ctx_buffer_output"},
        {(void **)&lib.ctx_buffer_error, "nft_ctx_buffer_error"},
        {(void **)&lib.ctx_get_error_buffer, "nft_ctx_get_error_buffer"},
        {(void **)&lib.ctx_get_output_buffer, "nft_ctx_get_output_buffer"},
        {(void **)&lib.run_cmd_from_buffer, "nft_run_cmd_from_buffer"},
    };
    for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
        *syms[i].slot = dlsym(h, syms[i].name);
        if (!*syms[i].slot) {
            snprintf(load_error, sizeof load_error, "libnftables.so.1 lacks %s", syms[i].name);
            return -1;
        }
    }
    return 0;
}

const struct nsbox_nftlib *nsbox_nftlib(struct nsbox_err *e)
{
    if (!loaded)
        loaded = load() == 0 ? 1 : -1;
    if (loaded < 0) {
        nsbox_err_set(e, NSBOX_E_UNSUPPORTED, ENOENT,
                      "libnftables is not available (%s); fix: apt-get install libnftables1",
                      load_error);
        return NULL;
    }
    return &lib;
}
