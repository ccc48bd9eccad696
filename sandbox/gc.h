/* Garbage collection (`nsbox gc`, and create's implicit one): the leftovers of sandboxes whose
 * owner died without its clean-up (SIGKILL, a crash), told from live ones by their state
 * directory's lock (state.h), never by pids: cgroups, network, workspace files, state
 * directories, uid slot files, pool entries, and the image builds that were killed. */
#ifndef NSBOX_GC_H
#define NSBOX_GC_H

#include "nsbox.h"
#include "util.h"

#include <stdbool.h>

/* Remove leftovers of sandboxes whose owner died. Returns the number removed. verbose: each
 * sandbox removed, and what of one could not be removed, is told to the note set below. */
int nsbox_gc(bool verbose, struct nsbox_err *e);
/* Who is told of a verbose gc's lines ("gc: removed sandbox ID"): cli/ prints them. None set:
 * nobody. */
void nsbox_gc_set_note(nsbox_note_fn *note, void *ctx);
/* The same, unless one began in this runtime directory less than NSBOX_GC_INTERVAL_MS ago
 * (its stamp: <runtime>/NSBOX_GC_STAMP): 0 then. The implicit gc of create. */
#define NSBOX_GC_STAMP "gc.stamp"
#define NSBOX_GC_INTERVAL_MS 1000
int nsbox_gc_implicit(struct nsbox_err *e);
/* The same for one sandbox id only (its lock free: removed, 1; alive or absent: 0). */
int nsbox_gc_id(const char *id, struct nsbox_err *e);

#endif
