/* libnftables, loaded on first use. Only network policies `all` and `allow` (and `nsbox info`)
 * need it; linking it would make every `nsbox run` map it and its five dependencies at start-up,
 * about a millisecond on these machines. */
#ifndef NSBOX_NFTLIB_H
#define NSBOX_NFTLIB_H

#include "nsbox.h"

#include <nftables/libnftables.h>

struct nsbox_nftlib {
    struct nft_ctx *(*ctx_new)(uint32_t flags);
    void (*ctx_free)(struct nft_ctx *ctx);
    int (*ctx_buffer_output)(struct nft_ctx *ctx);
    int (*ctx_buffer_error)(struct nft_ctx *ctx);
    const char *(*ctx_get_error_buffer)(struct nft_ctx *ctx);
    const char *(*ctx_get_output_buffer)(struct nft_ctx *ctx);
    int (*run_cmd_from_buffer)(struct nft_ctx *ctx, const char *buf);
    void (*output_set_flags)(struct nft_ctx *ctx, unsigned int flags); /* JSON in and out */
};

/* The loaded library, or NULL with e filled (NSBOX_E_UNSUPPORTED and the package to install). */
const struct nsbox_nftlib *nsbox_nftlib(struct nsbox_err *e);

#endif
