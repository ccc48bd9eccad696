/* One section of the config file (os/config.c reads and parses the file once; each module parses
 * its own section of the object): what every section's parser does first, finding its section
 * in the file's object, the shape of its messages, "config: key 'SECTION.KEY': ...", so that
 * they read alike, and the names of the sections. */
#ifndef NSBOX_CFGSECTION_H
#define NSBOX_CFGSECTION_H

#include "nsbox.h"

#include <cJSON.h>
#include <stdbool.h>
#include <stddef.h>

/* Whether name is one of the sections: a misspelled one ("pol") must not silently leave its
 * settings at their defaults, so the file's top-level keys are checked against them all,
 * whoever reads which. */
bool nsbox_cfgsection_known(const char *name);

/* The sections' names for a message, "host, instance_types, network, pool and workspace" (cut
 * to n bytes). */
void nsbox_cfgsection_names(char *buf, size_t n);

/* Every top-level key of root is a section: returns 0, or -1 with "unknown key 'NAME' (the
 * sections are ...)". */
int nsbox_cfgsection_check_keys(const cJSON *root, struct nsbox_err *e);

/* The section name of the file's object root: *section gets it, NULL where the file has none
 * (or root is NULL: no file). like: an example of the section for the message of one that is
 * not an object, or NULL. Returns 0, or -1 with "config: key 'NAME': must be an object"
 * (" like LIKE"). */
int nsbox_cfgsection_find(const cJSON *root, const char *name, const char *like,
                          const cJSON **section, struct nsbox_err *e);

/* "config: key 'NAME.KEY': " and what the key must be; returns -1. */
int nsbox_cfgsection_bad(struct nsbox_err *e, const char *name, const char *key, const char *fmt,
                         ...) __attribute__((format(printf, 4, 5)));

/* "config: key 'NAME.KEY': unknown (known: KNOWN)", the key cut at 64 bytes; returns -1. */
int nsbox_cfgsection_unknown(struct nsbox_err *e, const char *name, const char *key,
                             const char *known);

#endif
