/* The egress helper's configuration on its socketpair (docs/network.md, "The egress helper's
 * jail"): the parent (sandbox/egress_spawn.c) writes one message, the helper (nsbox-egress,
 * sandbox/egress.c) reads it before it serves anything, then answers one status. The message
 * holds the header bindings' values and the leaves' key: its buffer lives in pages of its own,
 * left out of core dumps and wiped when freed, on both sides. Descriptors (listening sockets,
 * the network log, the upstream CA) travel with it as SCM_RIGHTS.
 *
 * Framing: a 32-bit length, then the bytes: items of 32-bit numbers and length-prefixed byte
 * strings, in the order the writer put them; the reader checks every length against what is
 * left and stops at the first item that does not fit (over is then set). */
#ifndef NSBOX_EGRESS_WIRE_H
#define NSBOX_EGRESS_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NSBOX_EGRESS_WIRE_MAX (1u << 20) /* far above any configuration nsbox can write */
#define NSBOX_EGRESS_WIRE_FDS 72         /* listeners (one per port), the log's two, the CA */
#define NSBOX_EGRESS_WIRE_MAGIC 0x6e736567u

struct nsbox_egress_wire {
    uint8_t *p; /* NSBOX_EGRESS_WIRE_MAX bytes of mapping, touched as written */
    size_t n;   /* written, or received */
    size_t at;  /* the reader's position */
    bool over;  /* a put that did not fit, or a get past the end */
};

/* 0, or -1 with errno. */
int nsbox_egress_wire_init(struct nsbox_egress_wire *w);
/* Wipes and unmaps (p NULL: nothing). */
void nsbox_egress_wire_free(struct nsbox_egress_wire *w);

void nsbox_egress_wire_put_u32(struct nsbox_egress_wire *w, uint32_t v);
void nsbox_egress_wire_put_bytes(struct nsbox_egress_wire *w, const void *p, size_t n);
void nsbox_egress_wire_put_str(struct nsbox_egress_wire *w, const char *s);
/* Room for n bytes (length-prefixed) that the caller fills; NULL when they do not fit. */
uint8_t *nsbox_egress_wire_put_space(struct nsbox_egress_wire *w, size_t n);

bool nsbox_egress_wire_get_u32(struct nsbox_egress_wire *w, uint32_t *v);
/* *p points into the buffer. */
bool nsbox_egress_wire_get_bytes(struct nsbox_egress_wire *w, const uint8_t **p, size_t *n);
/* A string of at most size - 1 bytes without a NUL, copied NUL-terminated. */
bool nsbox_egress_wire_get_str(struct nsbox_egress_wire *w, char *out, size_t size);

/* The message and its descriptors. 0, or -1 with errno. */
int nsbox_egress_wire_send(int sock, const struct nsbox_egress_wire *w, const int *fds,
                           size_t n_fds);
/* Reads one message into w (initialised), its descriptors into fds (at most max, each
 * close-on-exec; more are closed). 0, or -1 with errno (EPROTO: not one whole message). */
int nsbox_egress_wire_recv(int sock, struct nsbox_egress_wire *w, int *fds, size_t max,
                           size_t *n_fds);

/* The helper's answer: err 0 (serving), or an errno and what failed. */
struct nsbox_egress_status {
    int32_t err;
    char what[256];
};
int nsbox_egress_wire_send_status(int sock, int err, const char *what);
/* 0 with *st, or -1 with errno (the helper ended without a word: EIO). */
int nsbox_egress_wire_recv_status(int sock, struct nsbox_egress_status *st);

#endif
