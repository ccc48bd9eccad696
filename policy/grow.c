#include "grow.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int nsbox_grow(void *items, size_t *cap, size_t n, size_t size, size_t first, size_t max)
{
    if (n < *cap)
        return 0;
    size_t want = *cap ? *cap * 2 : first;
    if (max && want > max)
        want = max;
    if (want <= n || size == 0 || want > SIZE_MAX / size) {
        errno = ENOMEM;
        return -1;
    }
    /* the caller's pointer is read and written as bytes: its item type is not known here */
    void *old;
    memcpy(&old, items, sizeof old);
    void *p = realloc(old, want * size);
    if (!p) {
        errno = ENOMEM;
        return -1;
    }
    memcpy(items, &p, sizeof p);
    *cap = want;
    return 0;
}
