/* The TLS ClientHello's server name (SNI), read from the first bytes a client sends: what the
 * egress helper (sandbox/egress.c, docs/network.md "allow(hosts)") decides on before it opens
 * anything upstream. Pure: bytes in, a verdict out; no I/O, no allocation.
 *
 * The input is everything received so far on the connection; the parser is stateless and is
 * called again with the longer buffer after each read. It reassembles a ClientHello split over
 * several TLS records (RFC 8446 5.1: handshake messages may span records, records may hold any
 * part of one) and over reads, up to NSBOX_TLSHELLO_MAX bytes of message. */
#ifndef NSBOX_TLSHELLO_H
#define NSBOX_TLSHELLO_H

#include <stddef.h>
#include <stdint.h>

#define NSBOX_TLSHELLO_MAX 16384 /* ClientHello message, header included */
/* Raw bytes read at most before a verdict: the message plus the headers of the records that
 * carry it, for clients that split it (a post-quantum key share makes it ~1.8 KB, still one
 * record in practice). Input beyond this without a complete ClientHello is refused. */
#define NSBOX_TLSHELLO_INPUT_MAX (NSBOX_TLSHELLO_MAX + 4096)
#define NSBOX_TLSHELLO_NAME_MAX 253

enum nsbox_tlshello_verdict {
    NSBOX_TLSHELLO_MORE = 0, /* a prefix of a ClientHello: read more */
    NSBOX_TLSHELLO_NOT_TLS,  /* the first bytes are no TLS handshake record (plain HTTP, SSH) */
    NSBOX_TLSHELLO_BAD,      /* TLS, but a malformed, oversized or non-ClientHello start */
    NSBOX_TLSHELLO_NO_SNI,   /* a complete ClientHello without a host_name */
    NSBOX_TLSHELLO_SNI,      /* a complete ClientHello naming a valid host: name */
};

struct nsbox_tlshello {
    char name[NSBOX_TLSHELLO_NAME_MAX + 1]; /* SNI: lower case, no trailing dot */
    size_t consumed;                        /* bytes of input up to the ClientHello's end */
    const char *why;                        /* BAD, NOT_TLS: what was wrong, for a log line */
    /* nsbox_tlshello_parse_more's: the input's whole records already reassembled into msg,
     * the message's bytes there and its full size once known */
    size_t rec_off, have, need;
    uint8_t msg[NSBOX_TLSHELLO_MAX]; /* scratch: the reassembled handshake message */
};

/* A host name as a ClientHello may carry it (RFC 6066 3: a DNS host name, no IP literal, no
 * trailing dot): RFC 1123 labels of letters, digits and '-', 1..63 bytes, 253 in all, the last
 * label not all digits. Lower-cased into out (n + 1 bytes). Returns 0 or -1. */
int nsbox_tlshello_check_name(const uint8_t *name, size_t n, char *out);

enum nsbox_tlshello_verdict nsbox_tlshello_parse(const uint8_t *in, size_t len,
                                                 struct nsbox_tlshello *h);
/* nsbox_tlshello_parse for input that grows between calls (the reader's buffer, each read
 * appended): each call goes on from the records the one before reassembled, so that a hello
 * sent in one-byte records, a read each, costs its length, not its square. Start with h
 * zeroed (or after nsbox_tlshello_parse of the same growing input: state from another input
 * is reset only when its rec_off is past len); the verdict is nsbox_tlshello_parse's for the
 * same bytes. */
enum nsbox_tlshello_verdict nsbox_tlshello_parse_more(const uint8_t *in, size_t len,
                                                      struct nsbox_tlshello *h);

const char *nsbox_tlshello_verdict_name(enum nsbox_tlshello_verdict v);

#endif
