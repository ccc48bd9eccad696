/* libssl, loaded on first use (sandbox/egress_ssl.h). */
#define _GNU_SOURCE
#include "egress_ssl.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>

static struct nsbox_ssllib lib;
static int loaded; /* 0 not tried, 1 ok, -1 failed */
static char load_error[256];

static int load(void)
{
    /* the libcrypto it needs is the one nsbox has mapped already: objects pass between them */
    void *h = dlopen("libssl.so.3", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *m = dlerror();
        snprintf(load_error, sizeof load_error, "%s", m ? m : "dlopen failed");
        return -1;
    }
#define NSBOX_SSL_LOAD(f)                                                                          \
    if (!(*(void **)&lib.f = dlsym(h, #f))) {                                                      \
        snprintf(load_error, sizeof load_error, "libssl.so.3 lacks %s", #f);                       \
        return -1;                                                                                 \
    }
    NSBOX_SSL_FUNCS(NSBOX_SSL_LOAD)
#undef NSBOX_SSL_LOAD
    return 0;
}

const struct nsbox_ssllib *nsbox_egress_ssl(struct nsbox_err *e)
{
    if (!loaded)
        loaded = load() == 0 ? 1 : -1;
    if (loaded < 0) {
        nsbox_err_set(e, NSBOX_E_UNSUPPORTED, ENOENT,
                      "header bindings need libssl (%s); fix: apt-get install libssl3", load_error);
        return NULL;
    }
    return &lib;
}
