/* The closest candidate to a mistyped word (see suggest.h). */
#include "suggest.h"

#include <string.h>

/* Longer words than this are never typos of an option or command name: no suggestion. */
#define SUGGEST_MAX 64

/* Optimal string alignment distance: Levenshtein's, with a swap of two neighbours as one edit
 * ("--instnace-type"). */
static size_t suggest_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    unsigned short d[SUGGEST_MAX + 1][SUGGEST_MAX + 1];
    for (size_t i = 0; i <= la; i++)
        d[i][0] = (unsigned short)i;
    for (size_t j = 0; j <= lb; j++)
        d[0][j] = (unsigned short)j;
    for (size_t i = 1; i <= la; i++)
        for (size_t j = 1; j <= lb; j++) {
            size_t best = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            if (d[i - 1][j] + 1u < best)
                best = d[i - 1][j] + 1u;
            if (d[i][j - 1] + 1u < best)
                best = d[i][j - 1] + 1u;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                d[i - 2][j - 2] + 1u < best)
                best = d[i - 2][j - 2] + 1u;
            d[i][j] = (unsigned short)best;
        }
    return d[la][lb];
}

const char *nsbox_suggest(const char *word, const char *const *candidates, size_t n)
{
    size_t len = strlen(word);
    if (len > SUGGEST_MAX)
        return NULL;
    size_t limit = len <= 4 ? 1 : len <= 8 ? 2 : 3;
    const char *best = NULL;
    size_t best_d = limit + 1;
    for (size_t k = 0; k < n; k++) {
        if (!candidates[k] || !strcmp(candidates[k], word) || strlen(candidates[k]) > SUGGEST_MAX)
            continue;
        size_t d = suggest_distance(word, candidates[k]);
        if (d < best_d) {
            best_d = d;
            best = candidates[k];
        }
    }
    return best;
}
