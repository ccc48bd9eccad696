/* One section of the config file (os/config.c reads the file; each module parses its own
 * section): what every section's parser does first, finding its section in the whole text,
 * and the shape of its messages, "config: key 'SECTION.KEY': ...", so that they read alike. */
#ifndef NSBOX_CFGSECTION_H
#define NSBOX_CFGSECTION_H

#include "nsbox.h"

#include <cJSON.h>
#include <stdbool.h>
#include <stddef.h>

/* The config file's sections, for the message of a top-level key that is none of them. */
#define NSBOX_CFGSECTION_NAMES "host, instance_types, network, pool and workspace"

/* Whether name is one of the sections: a misspelled one ("pol") must not silently leave its
 * settings at their defaults, so the file's top-level keys are checked against them all,
 * whoever reads which. */
bool nsbox_cfgsection_known(const char *name);

/* The section name of the config text: *root gets the parsed text, which the caller deletes
 * (cleanup_cjson) even on an error, and *section the section, NULL where the file has none.
 * like: an example of the section for the message of one that is not an object, or NULL.
 * Returns 0, or -1 with "config: " and nsbox_spec_json_parse_object's message (spec.h; the
 * instance types' reader, which reads the file first, says the same) or "config: key 'NAME':
 * must be an object" (" like LIKE"). */
int nsbox_cfgsection_find(const char *text, size_t len, const char *name, const char *like,
                          cJSON **root, const cJSON **section, struct nsbox_err *e);

/* "config: key 'NAME.KEY': " and what the key must be; returns -1. */
int nsbox_cfgsection_bad(struct nsbox_err *e, const char *name, const char *key, const char *fmt,
                         ...) __attribute__((format(printf, 4, 5)));

/* "config: key 'NAME.KEY': unknown (known: KNOWN)", the key cut at 64 bytes; returns -1. */
int nsbox_cfgsection_unknown(struct nsbox_err *e, const char *name, const char *key,
                             const char *known);

#endif
