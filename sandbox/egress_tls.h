/* Header bindings in the egress helper (docs/network.md, "Header bindings"): for a bound host,
 * the helper ends the sandbox's TLS with a leaf of the sandbox's own CA (egress_ca.h), opens
 * its own TLS connection upstream, verified against the host's trust store or the config's
 * "network.upstream_ca", and relays HTTP/1.1: each request head read strictly and rewritten
 * (policy/httphead.h: every copy of the bound headers the sandbox sent removed, the bound ones
 * added), bodies and responses streamed, keep-alive kept, the secrets' bytes masked in
 * responses (policy/scrub.h). Refusals are HTTP error responses that say why.
 *
 * The secrets live in pages of their own, excluded from core dumps (MADV_DONTDUMP) and wiped
 * when freed; the parent sends them to the helper on its socketpair (egress_wire.h), never
 * through argv, the environment or a file. The parent makes the CA and its leaves and never
 * loads libssl; the helper makes its TLS context from what it is sent. */
#ifndef NSBOX_EGRESS_TLS_H
#define NSBOX_EGRESS_TLS_H

#include "egress_relay.h"
#include "nsbox.h"
#include "spec.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The host's trust store: the hashed directory of the certificates of
 * /etc/ssl/certs/ca-certificates.crt (update-ca-certificates makes both). */
#define NSBOX_EGRESS_SYSTEM_CA_DIR "/etc/ssl/certs"

struct nsbox_egress_tls;

struct nsbox_egress_wire;

/* Parent side, before the sandbox's root is built: the CA and its leaves for the spec's bound
 * hosts, the secrets in their own pages (zeros in every child the parent forks or clones: the
 * sandbox's init never has them), and a copy of upstream_ca (the CA file upstream certificates
 * are checked against, read now; NULL: NSBOX_EGRESS_SYSTEM_CA_DIR). label: the sandbox id. */
int nsbox_egress_tls_prepare(const struct nsbox_spec *s, const char *upstream_ca, const char *label,
                             struct nsbox_egress_tls **out, struct nsbox_err *e);
/* Parent side: the hosts, the values, the leaves and their key into the helper's message. */
int nsbox_egress_tls_send(const struct nsbox_egress_tls *t, struct nsbox_egress_wire *w,
                          struct nsbox_err *e);
/* Parent side: the descriptor to send with that message, the upstream CA file's copy (-1: none,
 * the system store; t NULL: no bindings). */
int nsbox_egress_tls_ca_fd(const struct nsbox_egress_tls *t);
/* Helper side, before its jail: libssl loaded, the values copied into the helper's own secret
 * pages, the TLS context made (ca_fd: the descriptor that came with the message, or -1). */
int nsbox_egress_tls_receive(struct nsbox_egress_wire *w, int ca_fd, struct nsbox_egress_tls **out,
                             struct nsbox_err *e);
/* The CA's certificate (PEM), for the sandbox's trust bundle. */
const char *nsbox_egress_tls_ca_pem(const struct nsbox_egress_tls *t);
/* Wipes the secrets and frees everything (NULL: nothing). */
void nsbox_egress_tls_free(struct nsbox_egress_tls *t);

/* Is name:port bound? */
bool nsbox_egress_tls_bound(const struct nsbox_egress_tls *t, const char *name, uint16_t port);

/* One connection of the sandbox to a bound name:port, whose ClientHello (hello, n bytes) was
 * read already. Each request gets an entry, verdict "bound" with method, path (no query),
 * status and bytes, once its response is over (the next request, or the connection's end); a
 * refusal gets one, "refused" (the sandbox's doing) or "failed" (the upstream's), with the
 * reason. Returns when the connection is over; closes nothing of the caller's. */
void nsbox_egress_tls_serve(const struct nsbox_egress_tls *t, int fd, const uint8_t *hello,
                            size_t n, const char *name, uint16_t port,
                            nsbox_egress_connect_fn connect, nsbox_egress_note_fn note, void *ctx);

#endif
