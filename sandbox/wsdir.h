/* A host directory given as a sandbox's workspace (--workspace DIR): what may not be one. */
#ifndef NSBOX_WSDIR_H
#define NSBOX_WSDIR_H

/* Why the directory dir may not be a --workspace (the host's root; a kernel file system such as
 * /proc, whose bind would show the sandbox the host), or NULL when it may (or when dir cannot
 * be looked at: the caller says what is wrong with it). */
const char *nsbox_wsdir_forbidden(const char *dir);

#endif
