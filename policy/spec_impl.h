/* Internals of the sandbox spec (policy/spec*.c), shared between its files: spec.c (defaults,
 * options, validation), spec_net.c (hosts and CIDRs), spec_json.c (JSON values in, the spec as
 * JSON out) and spec_types.c (the instance types and the config file). Not a public interface. */
#ifndef NSBOX_SPEC_IMPL_H
#define NSBOX_SPEC_IMPL_H

#include "spec.h"

#include <cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GiB (1ull << 30)
#define MiB (1ull << 20)

/* Bounds for the config file's instance types: wide enough for any real machine, narrow enough
 * that a typo ("4" meaning 4 GiB of memory) is caught instead of starting a sandbox that cannot
 * even exec. */
#define CPUS_MAX 1024u
#define PIDS_MAX 4194304u /* the kernel's PID_MAX_LIMIT */
/* The sandbox's init counts in its pids limit: with 1 nothing could start beside it, and every
 * run failed with "fork: Resource temporarily unavailable", the limit unnamed. */
#define PIDS_MIN 2u
#define BYTES_MIN MiB
#define BYTES_MAX (1ull << 50)
#define SETUP_TIMEOUT_MAX 86400u


#define SHOW(t) NSBOX_SHOW(t) /* user text in messages: include/nsbox.h */

/* Bad input: NSBOX_E_INVALID with the message (policy/err.c). */
#define invalid nsbox_err_invalid


static inline bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static inline bool is_alpha(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static inline char to_lower(char c)
{
    return (c >= 'A' && c <= 'Z') ? (char)(c - 'A' + 'a') : c;
}

/* [a-z0-9][a-z0-9._-]{0,62} (spec.c). */
bool nsbox_spec_name_valid(const char *s);
/* n decimal digits, no overflow (spec.c). */
bool nsbox_spec_parse_decimal(const char *s, size_t n, uint64_t *out);

/* ---- spec_json.c: JSON values in ------------------------------------------------------------ */

int nsbox_spec_json_uint(const cJSON *it, uint64_t min, uint64_t max, uint64_t *out,
                         struct nsbox_err *e);
int nsbox_spec_json_pids(const cJSON *it, uint64_t *out, struct nsbox_err *e);
int nsbox_spec_json_text_uint(const char *v, uint64_t min, uint64_t max, uint64_t *out,
                              struct nsbox_err *e);
int nsbox_spec_json_bytes(const cJSON *it, uint64_t *out, struct nsbox_err *e);

/* ---- spec_bind.c: header bindings ---------------------------------------------------------- */

int nsbox_spec_bind_json(struct nsbox_spec *s, const cJSON *it, struct nsbox_err *e);
/* HOST[:PORT]:HEADER=VALUE (appends) */
int nsbox_spec_bind_text(struct nsbox_spec *s, const char *v, struct nsbox_err *e);
/* dst's bindings are src's (memcpy'd); gives dst its own copies of the values. -1 on ENOMEM. */
int nsbox_spec_bind_copy(struct nsbox_spec *dst, const struct nsbox_spec *src);
bool nsbox_spec_bind_equal(const struct nsbox_spec *a, const struct nsbox_spec *b);
/* "header_bindings": [{"host", "header"}], no value; nothing without bindings. */
bool nsbox_spec_bind_render(cJSON *o, const struct nsbox_spec *s);
/* Validation: every binding sound, the network not none, with allow each bound host allowed. */
int nsbox_spec_bind_check(const struct nsbox_spec *s, struct nsbox_err *e);

/* ---- spec_types.c --------------------------------------------------------------------------- */

/* The instance types' names, ", "-separated, for messages. */
void nsbox_spec_types_names(char *buf, size_t n);

#endif
