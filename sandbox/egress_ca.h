/* The per-sandbox certificate authority of header bindings (docs/network.md, "Header
 * bindings"): made when a sandbox with bindings is prepared, name-constrained (critical) to the
 * bound names and to no IP address, it signs one leaf certificate per bound name; its private
 * key is freed (OpenSSL clears EC private keys when they are freed) before this returns, so it
 * never exists anywhere but in this function's memory. Only the CA's certificate leaves the
 * host side: into the sandbox's trust bundle. */
#ifndef NSBOX_EGRESS_CA_H
#define NSBOX_EGRESS_CA_H

#include "nsbox.h"

#include <stddef.h>
#include <stdint.h>

struct x509_st;
struct evp_pkey_st;

struct nsbox_egress_ca {
    char *ca_pem;            /* the CA's certificate, PEM (malloc'd) */
    struct evp_pkey_st *key; /* the leaves' key (one for all of them) */
    size_t n;
    struct x509_st **leaf; /* leaf[i] for names[i] */
};

/* names: the bound host names (lower case); label: into the CA's subject (the sandbox id);
 * valid_seconds: how long the certificates are valid (from an hour ago, for clocks behind). */
int nsbox_egress_ca_make(const char *const *names, size_t n, const char *label,
                         uint64_t valid_seconds, struct nsbox_egress_ca *out, struct nsbox_err *e);
void nsbox_egress_ca_free(struct nsbox_egress_ca *ca);
/* -1 with e: "header bindings: WHAT: OpenSSL's first queued error", the queue then emptied. */
int nsbox_egress_ca_error(struct nsbox_err *e, const char *what);

#endif
