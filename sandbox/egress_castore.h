/* The config's upstream CA file in the egress helper (docs/network.md, "Header bindings"): its
 * certificates kept as DER, indexed by the hash of their subject name, each parsed into the TLS
 * context's store only when a chain asks for that subject, as OpenSSL's hashed-directory lookup
 * does with /etc/ssl/certs. Loading the file into the store parses every certificate at once:
 * a copy of the system bundle (144 certificates) took 860 KiB of heap in each helper, against
 * about 150 KiB of DER. */
#ifndef NSBOX_EGRESS_CASTORE_H
#define NSBOX_EGRESS_CASTORE_H

#include "nsbox.h"

#include <openssl/x509.h>

struct nsbox_egress_castore;

/* Reads the PEM certificates of the file at path (named `named` in messages) and adds their
 * lookup to store, which must be freed before *out. 0, or -1 with e (no certificate in it, a
 * malformed one, no memory). */
int nsbox_egress_castore_attach(X509_STORE *store, const char *path, const char *named,
                                struct nsbox_egress_castore **out, struct nsbox_err *e);
/* NULL: nothing. */
void nsbox_egress_castore_free(struct nsbox_egress_castore *c);

#endif
