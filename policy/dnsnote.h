/* What nsbox says after a command whose names did not resolve because of the sandbox's network
 * (network none, or allow without them): the names, why, and the option that reaches them
 * (docs/network.md, "Names that do not resolve"). Pure: unit tested (tests/unit/test_dnsquery.c). */
#ifndef NSBOX_DNSNOTE_H
#define NSBOX_DNSNOTE_H

#include "dnsquery.h"
#include "spec.h"

#include <stddef.h>

/* The sandboxes whose init answers names (all other modes have a resolver, or say in their
 * resolv.conf that there is none). */
bool nsbox_dnsnote_stub_wanted(const struct nsbox_spec *s);
/* The note (one line, no newline) into buf for the names asked in a sandbox of spec s; 0 when
 * there is nothing to say (no name, or all of them allowed), else its length (cut to size). */
size_t nsbox_dnsnote_format(const struct nsbox_spec *s,
                            const char names[][NSBOX_DNSQUERY_NAME_MAX + 1], size_t n, char *buf,
                            size_t size);

#endif
