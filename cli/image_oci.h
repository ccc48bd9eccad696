/* The OCI commands of `nsbox image` (cli/image_oci.c), called by cli/image_cli.c. */
#ifndef NSBOX_IMAGE_OCI_H
#define NSBOX_IMAGE_OCI_H

#include <stdbool.h>

/* pull, import, tag, prune, inspect: the exit code; -1 when argv[1] is none of them. */
int nsbox_cli_image_oci(int argc, char **argv);
/* Is this `image rm` argument an OCI image (a reference, or an oci-<id>)? */
bool nsbox_cli_image_oci_owns(const char *arg);
int nsbox_cli_image_oci_rm(const char *arg, bool force);
/* The length of the longest stored reference (0 for none): ls's NAME column is that wide. */
int nsbox_cli_image_oci_ref_width(void);
/* One row of image ls's table (its header too), NAME wname wide, shown by the rule of every
 * message (policy/shown.h): a created time is an image's own text, a path the caller's. */
void nsbox_cli_image_oci_print_row(int wname, const char *name, const char *kind,
                                   const char *digest, const char *size, const char *created,
                                   const char *use, const char *path);
/* Print (or add to the cJSON array json_array) the ls rows of stored OCI image `name`. */
void nsbox_cli_image_oci_ls_row(const char *name, const char *created, const char *path,
                                int wname, void *json_array);

#endif
