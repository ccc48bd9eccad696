#define _GNU_SOURCE
#include "nftlib.h"

#include "dynlib.h"

#include <dlfcn.h>

static struct nsbox_dynlib nftlib_so =
    NSBOX_DYNLIB_INIT("libnftables.so.1", "libnftables1", RTLD_LAZY);
static struct nsbox_nftlib lib;

const struct nsbox_nftlib *nsbox_nftlib(struct nsbox_err *e)
{
    static const struct nsbox_dynlib_sym syms[] = {
        {(void **)&lib.ctx_new, "nft_ctx_new"},
        {(void **)&lib.ctx_free, "nft_ctx_free"},
        {(void **)&lib.ctx_buffer_output, "nft_ctx_buffer_output"},
        {(void **)&lib.ctx_buffer_error, "nft_ctx_buffer_error"},
        {(void **)&lib.ctx_get_error_buffer, "nft_ctx_get_error_buffer"},
        {(void **)&lib.ctx_get_output_buffer, "nft_ctx_get_output_buffer"},
        {(void **)&lib.run_cmd_from_buffer, "nft_run_cmd_from_buffer"},
        {(void **)&lib.output_set_flags, "nft_ctx_output_set_flags"},
    };
    if (nsbox_dynlib_load(&nftlib_so, syms, sizeof syms / sizeof syms[0],
                          "libnftables is not available", e) < 0)
        return NULL;
    return &lib;
}
