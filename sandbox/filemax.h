/* The host's file table made large enough that no sandbox can fill it (docs/decisions.md, "The
 * host's file table is sized by memory, not by a count"). */
#ifndef NSBOX_FILEMAX_H
#define NSBOX_FILEMAX_H

#include "nsbox.h"
#include "util.h"

#include <stdbool.h>

/* Where nsbox_filemax_raise's lines go: the raise itself, or that it could not be done. */
void nsbox_filemax_set_note(nsbox_note_fn *fn, void *ctx);
/* As root of the host: raises fs.file-max (policy/filetable.h) when the host's memory could hold
 * more open files than it allows, unless the config file's "host": {"file_max": "keep"} says
 * to leave it; says so once (the table is then large). Where it cannot (a container whose
 * /proc/sys is read-only, a root of a user namespace) sandboxes share the table as the host's
 * other processes do (docs/security.md, finding 22): said once a boot (a mark in the runtime
 * directory), not for every sandbox. Cheap once done: once raised, a look for the mark, one
 * read and a sysinfo; once said, the look for the mark alone. */
void nsbox_filemax_raise(void);
/* The same with the sysctl's file at path (a test's file of its own). */
void nsbox_filemax_raise_at(const char *path);
/* Whether this process may write fs.file-max (a read-only /proc/sys says no even to root). */
bool nsbox_filemax_writable(void);
/* The config file's "host.file_max": *keep true for "keep". */
int nsbox_filemax_config_keep(bool *keep, struct nsbox_err *e);

#endif
