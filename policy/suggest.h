/* The word a user probably meant (suggest.c): "did you mean --instance-type?" for a mistyped
 * option or command, as git and docker say it. */
#ifndef NSBOX_SUGGEST_H
#define NSBOX_SUGGEST_H

#include <stddef.h>

/* The candidate closest to word (edit distance: insertions, deletions, substitutions and a swap
 * of two neighbours, each 1), or NULL when none is close enough to be a typo of it: at most 1
 * for a word of up to 4 characters, 2 up to 8, 3 beyond. A tie goes to the first in the list.
 * Candidates are compared whole (with their dashes); NULL entries are skipped. */
const char *nsbox_suggest(const char *word, const char *const *candidates, size_t n);

#endif
