/* The set-id seal of an engine's overlay root (ovl_root.h) from its layer directories: each
 * layer and the upper directory walked plainly, as host root, for the paths the merged root's
 * seal must look at (policy/setidcand.h), which the seal then checks in the merged view alone
 * (nsbox_setid_seal_listed, setid.h). A plain directory is walked about three times as fast as
 * the overlay that merges it, whose every lookup and listing goes through each layer.
 *
 * The list holds paths, never a verdict: the merged view says what each path is when the
 * container is made. Anything the list cannot vouch for makes no list (1), and the caller walks
 * the merged root whole, as without it: a redirect or metacopy attribute in a layer (the merged
 * root would show a layer's entry under another path, or another file's data), a layer deeper
 * than the walk goes, more candidates than NSBOX_SETID_LAYERS_MAX, any error. Each layer is walked
 * through a clone of its mount without the mounts below it, as the overlay sees it. */
#ifndef NSBOX_SETID_LAYERS_H
#define NSBOX_SETID_LAYERS_H

#include "nsbox.h"
#include "setid.h"

#include <stddef.h>

#define NSBOX_SETID_LAYERS_MAX 65536

/* The candidates of the layer directories dirs[0..n) (O_PATH or open, any order: the union is
 * what counts; walked from the last, where an overlay's upper directory goes). 0 with *out
 * (nsbox_setid_list_free); 1 with why when there is no list to trust (the caller seals by the
 * merged walk). */
int nsbox_setid_layers_list(const int *dirs, size_t n, struct nsbox_setid_list **out,
                            struct nsbox_err *why);

#endif
