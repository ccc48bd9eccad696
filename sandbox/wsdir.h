/* A host directory given as a sandbox's workspace (--workspace DIR): opened once, every check
 * made on that descriptor, and what may not be one. */
#ifndef NSBOX_WSDIR_H
#define NSBOX_WSDIR_H

#include "nsbox.h"
#include "util.h"

#include <stddef.h>
#include <sys/stat.h>

/* Open the directory arg names (symlinks followed, /proc's magic links not: such as
 * /proc/PID/root, they may lead into another mount namespace) as O_PATH, and check it there:
 * a directory, not one of those nsbox_wsdir_forbidden refuses. Returns the descriptor, with
 * the kernel's own path of that directory in path (no symlink in it) and its stat in sb; -1
 * with e saying what is wrong. What is bound afterwards must be this directory (the
 * descriptor itself, or a path opened with no symlink and found to be the same inode): a
 * name swapped for a link after this call cannot redirect the bind. */
int nsbox_wsdir_open(const char *arg, char *path, size_t n, struct stat *sb, struct nsbox_err *e);
/* Where nsbox_wsdir_open's note goes: as root, a directory of root's (owner or group 0) that
 * others may not write, which is bound plainly (root is never mapped into a sandbox), is said
 * once with what to do, since the sandbox's first write there would fail. */
void nsbox_wsdir_set_note(nsbox_note_fn *fn, void *ctx);

/* Why the directory open on fd (path: its kernel path) may not be a --workspace (the host's
 * root; a kernel file system such as /proc, whose bind would show the sandbox the host), or
 * NULL when it may. */
const char *nsbox_wsdir_forbidden(int fd, const char *path);

#endif
