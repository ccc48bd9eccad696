/* The files nsbox generates in an OCI image's /etc, as for the debian image: appuser (uid and
 * gid 1000, home /workspace) added to the image's passwd and group (replacing an entry named
 * appuser or using id 1000), neutral hosts and resolv.conf. */
#ifndef NSBOX_OCI_ETC_H
#define NSBOX_OCI_ETC_H

#include "nsbox.h"

/* Read the image's passwd, group and shell from view_fd (its root: the merged tree, or the
 * overlay of its layers), write the files into root_fd's etc/ (the same tree, or the image's
 * own top layer). As root, they and root_fd belong to image id 0: that owner on an image's
 * root says that its owners are kept (sandbox/userns.h). */
int nsbox_oci_etc_write(int view_fd, int root_fd, struct nsbox_err *e);

#endif
