/* Cleanup attributes, as in crun and bubblewrap: resources are released when the variable
 * leaves scope, so error paths cannot leak them. */
#ifndef NSBOX_CLEANUP_H
#define NSBOX_CLEANUP_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static inline void nsbox_freep(void *p)
{
    free(*(void **)p);
}
/* Closes and forgets: *fd becomes -1, so closing twice is harmless. */
static inline void nsbox_closep(int *fd)
{
    if (*fd >= 0) {
        int saved = errno;
        close(*fd);
        errno = saved;
        *fd = -1;
    }
}
static inline void nsbox_fclosep(FILE **f)
{
    if (*f)
        fclose(*f);
}

#define cleanup_free __attribute__((cleanup(nsbox_freep)))
#define cleanup_close __attribute__((cleanup(nsbox_closep)))
#define cleanup_fclose __attribute__((cleanup(nsbox_fclosep)))

/* Hand a resource out of a cleanup-scoped variable. */
static inline int nsbox_steal_fd(int *fd)
{
    int r = *fd;
    *fd = -1;
    return r;
}
static inline void *nsbox_steal_ptr(void *pp)
{
    void **p = pp;
    void *r = *p;
    *p = NULL;
    return r;
}

#define NSBOX_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

#endif
