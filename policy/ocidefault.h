/* The config.json `nsbox-oci spec` writes: runc's default container (a shell on a terminal, as
 * root of its own user namespace), cut to what nsbox's floor runs as it is (docs/oci.md, "The
 * floor"): the non-privileged capabilities runc gives, every namespace nsbox makes new, no host
 * path bound in. Pure: the caller writes it. */
#ifndef NSBOX_OCIDEFAULT_H
#define NSBOX_OCIDEFAULT_H

#include <cJSON.h>
#include <stdbool.h>

/* The default config as a cJSON tree (the caller deletes it), NULL when out of memory.
 * rootless: runc's --rootless, which adds the user namespace to linux.namespaces (nsbox makes
 * one either way, and takes no uidMappings: its own range, always). */
cJSON *nsbox_ocidefault_config(bool rootless);

#endif
