/* libssl, loaded on first use (sandbox/egress_ssl.h). */
#define _GNU_SOURCE
#include "egress_ssl.h"

#include "dynlib.h"

#include <dlfcn.h>

/* the libcrypto it needs is the one nsbox has mapped already: objects pass between them */
static struct nsbox_dynlib ssl_so = NSBOX_DYNLIB_INIT("libssl.so.3", "libssl3", RTLD_NOW);
static struct nsbox_ssllib lib;

const struct nsbox_ssllib *nsbox_egress_ssl(struct nsbox_err *e)
{
    static const struct nsbox_dynlib_sym syms[] = {
#define NSBOX_SSL_SYM(f) {(void **)&lib.f, #f},
        NSBOX_SSL_FUNCS(NSBOX_SSL_SYM)
#undef NSBOX_SSL_SYM
    };
    if (nsbox_dynlib_load(&ssl_so, syms, sizeof syms / sizeof syms[0],
                          "header bindings need libssl", e) < 0)
        return NULL;
    return &lib;
}
