/* The HTTP/1.1 relay of one sandbox connection to a bound host, once the sandbox's TLS is
 * ended (egress_tls.c): the upstream's TLS opened and verified, each request head read and
 * rewritten with the bound headers, responses framed again and masked (policy/scrub.h),
 * every request logged. Private to the egress helper. */
#ifndef NSBOX_EGRESS_RELAY_H
#define NSBOX_EGRESS_RELAY_H

#include "egress_ssl.h"
#include "nsbox.h"
#include "spec.h"

#include <openssl/ssl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A bound name:port: its leaf for the sandbox, its headers and their values (in the secret
 * pages of egress_tls.c). */
struct nsbox_egress_bound {
    char name[NSBOX_HOSTNAME_MAX + 1];
    uint16_t port;
    X509 *leaf; /* this name's certificate, shown to the sandbox */
    size_t n;
    const char *header[NSBOX_MAX_BINDINGS];
    const char *value[NSBOX_MAX_BINDINGS]; /* in the secret pages */
};

#define NSBOX_EGRESS_IDLE_MS (3600 * 1000) /* a relayed connection with no bytes either way */

struct nsbox_egress_entry;

/* Opens the TCP connection to the name's upstream: a socket, or -1 (the caller keeps why). */
typedef int (*nsbox_egress_connect_fn)(void *ctx, const char *name);
/* Writes one entry of the network log (egress_log.h) for the connection ctx; the caller adds
 * what the connection knows (server name, port, upstream address, why a connect failed). */
typedef void (*nsbox_egress_note_fn)(void *ctx, struct nsbox_egress_entry *en);

struct nsbox_egress_relay;

/* A relay for the sandbox's connection fd to h (made non-blocking), whose entries go to note;
 * NULL without memory. lib: the helper's libssl. */
struct nsbox_egress_relay *nsbox_egress_relay_new(const struct nsbox_ssllib *lib,
                                                  const struct nsbox_egress_bound *h, int fd,
                                                  nsbox_egress_note_fn note, void *ctx);
/* The sandbox's side could not be set up: its one entry, verdict and why. */
void nsbox_egress_relay_refused(struct nsbox_egress_relay *r, const char *verdict, const char *why);
/* A TLS handshake on the non-blocking fd, within the helper's handshake time. */
bool nsbox_egress_relay_handshake(const struct nsbox_ssllib *lib, SSL *ssl, int fd, bool server);
/* With the sandbox's TLS (cl, its handshake done; the relay frees it): the upstream's TLS over
 * connect, made from tls, then both directions until the connection is over; every request
 * gets its entry. */
void nsbox_egress_relay_run(struct nsbox_egress_relay *r, SSL *cl, SSL_CTX *tls,
                            nsbox_egress_connect_fn connect, void *ctx);
/* Closes the upstream, wipes and frees the relay (NULL: nothing). */
void nsbox_egress_relay_free(struct nsbox_egress_relay *r);

#endif
