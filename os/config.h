/* The config file (os/config.c): $NSBOX_CONFIG or NSBOX_CONFIG_DEFAULT_PATH (policy/spec.h), one
 * JSON object with a section per module (instance_types, network, pool, workspace). */
#ifndef NSBOX_CONFIG_H
#define NSBOX_CONFIG_H

#include "nsbox.h"

#include <stddef.h>

/* The instance types of the config file's section (nsbox_spec_types_parse(), policy/spec.h)
 * over the built-in ones; a missing file means the built-in table.
 * path NULL: $NSBOX_CONFIG if set (must exist), else NSBOX_CONFIG_DEFAULT_PATH (missing = the
 * defaults). An explicit path that does not exist also means the defaults. */
int nsbox_config_load_types(const char *path, struct nsbox_err *e);
/* The config file's text, read with the same rules for every module that has a section in it:
 * path NULL means $NSBOX_CONFIG (must exist) or NSBOX_CONFIG_DEFAULT_PATH; missing (but for
 * $NSBOX_CONFIG) returns 1, *text NULL. used gets the file's name for messages. A regular file
 * of at most NSBOX_SPEC_JSON_MAX bytes, not empty. */
int nsbox_config_text(const char *path, char **text, size_t *len, char *used, size_t usedn,
                      struct nsbox_err *e);
/* One module's section of the config file: its text (nsbox_config_text's rules, path NULL)
 * given to parse, whose errors get the file's name in front. A missing file leaves *out as
 * the caller set it up (its defaults). With text (else NULL), the caller also gets the text
 * itself, to free (NULL without a file). */
int nsbox_config_section(int (*parse)(const char *text, size_t len, void *out, struct nsbox_err *e),
                         void *out, char **text, size_t *len, struct nsbox_err *e);

#endif
