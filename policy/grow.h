/* A growing array: room for one more item, the allocation doubling. */
#ifndef NSBOX_GROW_H
#define NSBOX_GROW_H

#include <stddef.h>

/* Make room for item n of the array *items (a pointer to the array's pointer, of any item
 * type; *cap items allocated, each size bytes): nothing when n < *cap, else the allocation
 * doubles, the first one holding `first` items, never past max items (0: no bound besides
 * memory). 0, or -1 with errno ENOMEM when it cannot (no memory, or n already at max), *items
 * and *cap then unchanged. */
int nsbox_grow(void *items, size_t *cap, size_t n, size_t size, size_t first, size_t max);

#endif
