/* A DNS query as the sandbox's own stub resolver reads it (network none and allow: nothing
 * answers names there, and init answers every query at once (NXDOMAIN), keeping the first few
 * names asked so that nsbox can say why they did not resolve; docs/network.md). Every packet is
 * a sandbox process's, so hostile: only the header and the question's name are read, strictly
 * (one question, a standard query, no compression pointer, every length within the packet; a
 * name kept only when its labels are letters, digits, '-' and '_'). The table of names is a fixed one, shared between
 * init (the writer) and the process that reports (the reader, which checks what it reads). Pure:
 * unit tested (tests/unit/test_dnsquery.c) and fuzzed (tests/fuzz/fuzz_dnsquery.c). */
#ifndef NSBOX_DNSQUERY_H
#define NSBOX_DNSQUERY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NSBOX_DNSQUERY_NAME_MAX 253 /* a name's text, without the root's final dot */
#define NSBOX_DNSQUERY_HDR 12
#define NSBOX_DNSQUERY_NAMES 4      /* the names kept between two reports */
/* The longest reply: the header and a question (a name's wire form is at most 255 bytes). */
#define NSBOX_DNSQUERY_REPLY_MAX (NSBOX_DNSQUERY_HDR + 255 + 4)

struct nsbox_dnsquery {
    size_t question_end;                   /* offset just past QTYPE and QCLASS, or 0 */
    char name[NSBOX_DNSQUERY_NAME_MAX + 1]; /* lower case, without the final dot */
};

/* The answer to any packet sent to the stub, into out (at least NSBOX_DNSQUERY_REPLY_MAX bytes):
 * its length, never more than len, 0 for a packet not to answer (shorter than a header, or
 * itself an answer). NXDOMAIN with the question echoed when it was read; the header alone when
 * not: FORMERR for a question that does not parse, REFUSED for another opcode or record counts.
 * q->name: the name to keep, or "" (a question not read, the root, a character no host name
 * has). */
size_t nsbox_dnsquery_answer(const uint8_t *pkt, size_t len, struct nsbox_dnsquery *q,
                             uint8_t *out);
/* Is s a name the parser could have given (what a reader checks of the shared table)? */
bool nsbox_dnsquery_name_valid(const char *s);

/* The names asked since the reader last took them. The writer (init) alone writes n and name[];
 * the reader asks for a fresh start by raising `take`, which the writer acts on at its next
 * name (so one name asked between the read and that start may be said twice or not at all: a
 * note, not an account). Lives in memory both processes map. */
struct nsbox_dnsquery_table {
    uint32_t n;      /* names published (written after the name, with release order) */
    uint32_t take;   /* raised by the reader */
    uint32_t taken;  /* the writer's copy of take it has acted on */
    uint32_t pad;
    char name[NSBOX_DNSQUERY_NAMES][NSBOX_DNSQUERY_NAME_MAX + 1];
};

/* Writer: keep name when it is new, has more than one label, is no reverse lookup's
 * (.in-addr.arpa, .ip6.arpa), and there is room; an SRV name's host without its
 * _service._proto. */
void nsbox_dnsquery_table_add(struct nsbox_dnsquery_table *t, const char *name);
/* Reader: copy the names published (each checked: one that fails is left out) into out, their
 * count returned, and ask the writer to start over. */
size_t nsbox_dnsquery_table_take(struct nsbox_dnsquery_table *t,
                                 char out[NSBOX_DNSQUERY_NAMES][NSBOX_DNSQUERY_NAME_MAX + 1]);

#endif
