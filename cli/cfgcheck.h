/* The config file checked whole (cli/cfgcheck.c), for every command that makes a sandbox
 * (main.c) and for info. */
#ifndef NSBOX_CFGCHECK_H
#define NSBOX_CFGCHECK_H

#include "nsbox.h"

/* Every section of the config file, each as the module that uses it reads it: the instance
 * types (loaded: the table is the file's from here on), the workspace, the pool, the network
 * and the host. The file is read and parsed once (os/config.h). Returns 0, or -1 with the
 * first section's error ("config PATH: ..." or "PATH: config: key 'SECTION.KEY': ..."). */
int nsbox_cfgcheck_all(struct nsbox_err *e);

#endif
