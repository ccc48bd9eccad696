/* libssl for header bindings (egress_tls.c, egress_relay.c), loaded with dlopen when a sandbox
 * has bindings: every other nsbox process maps no libssl (libcrypto is loaded on first call
 * too, by os/imagelibs.c). The functions they call, as pointers of their declared types;
 * OpenSSL's macros that stand for SSL_ctrl / SSL_CTX_ctrl are called through those two. */
#ifndef NSBOX_EGRESS_SSL_H
#define NSBOX_EGRESS_SSL_H

#include "nsbox.h"

#include <openssl/ssl.h>

#define NSBOX_SSL_FUNCS(X)                                                                         \
    X(OPENSSL_init_ssl)                                                                            \
    X(TLS_method)                                                                                  \
    X(SSL_CTX_new)                                                                                 \
    X(SSL_CTX_free)                                                                                \
    X(SSL_CTX_ctrl)                                                                                \
    X(SSL_CTX_set_options)                                                                         \
    X(SSL_CTX_get_security_level)                                                                  \
    X(SSL_CTX_set_security_level)                                                                  \
    X(SSL_CTX_set_alpn_select_cb)                                                                  \
    X(SSL_CTX_set_verify)                                                                          \
    X(SSL_CTX_load_verify_locations)                                                               \
    X(SSL_CTX_get_cert_store)                                                                      \
    X(SSL_new)                                                                                     \
    X(SSL_free)                                                                                    \
    X(SSL_set_bio)                                                                                 \
    X(SSL_set_fd)                                                                                  \
    X(SSL_set_verify)                                                                              \
    X(SSL_use_certificate)                                                                         \
    X(SSL_use_PrivateKey)                                                                          \
    X(SSL_ctrl)                                                                                    \
    X(SSL_set1_host)                                                                               \
    X(SSL_set_alpn_protos)                                                                         \
    X(SSL_accept)                                                                                  \
    X(SSL_connect)                                                                                 \
    X(SSL_get_error)                                                                               \
    X(SSL_write_ex)                                                                                \
    X(SSL_read_ex)                                                                                 \
    X(SSL_pending)                                                                                 \
    X(SSL_shutdown)                                                                                \
    X(SSL_get_verify_result)

struct nsbox_ssllib {
#define NSBOX_SSL_FIELD(f) __typeof__(&f) f;
    NSBOX_SSL_FUNCS(NSBOX_SSL_FIELD)
#undef NSBOX_SSL_FIELD
};

/* Loads libssl.so.3 on first use; NULL with e filled (the package to install) when it cannot. */
const struct nsbox_ssllib *nsbox_egress_ssl(struct nsbox_err *e);

#endif
