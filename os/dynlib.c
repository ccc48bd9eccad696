/* Libraries loaded on first use (os/dynlib.h). One lock for all of them: a library is opened and
 * its table resolved once per process, so the lock is taken on a hot path only until then. */
#define _GNU_SOURCE
#include "dynlib.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>

static pthread_mutex_t dynlib_lock = PTHREAD_MUTEX_INITIALIZER;

/* Under the lock. Only the first reason is kept: a later one is most often its consequence. */
static void dynlib_note(struct nsbox_dynlib *l, const char *fmt, const char *a, const char *b)
{
    if (!l->why[0])
        snprintf(l->why, sizeof l->why, fmt, a, b);
}

/* Under the lock. */
static void *dynlib_open(struct nsbox_dynlib *l)
{
    if (!l->handle && !l->open_failed) {
        void *h = dlopen(l->soname, l->mode | RTLD_LOCAL);
        if (!h) {
            const char *m = dlerror();
            dynlib_note(l, "%s%s", m ? m : l->soname, m ? "" : ": dlopen failed");
            l->open_failed = 1;
        }
        l->handle = h;
    }
    return l->handle;
}

/* Under the lock. */
static void *dynlib_resolve(struct nsbox_dynlib *l, const char *name)
{
    void *h = dynlib_open(l);
    if (!h)
        return NULL;
    void *f = dlsym(h, name);
    if (!f)
        dynlib_note(l, "%s lacks %s", l->soname, name);
    return f;
}

void *nsbox_dynlib_sym(struct nsbox_dynlib *l, const char *name)
{
    pthread_mutex_lock(&dynlib_lock);
    void *f = dynlib_resolve(l, name);
    pthread_mutex_unlock(&dynlib_lock);
    return f;
}

int nsbox_dynlib_load(struct nsbox_dynlib *l, const struct nsbox_dynlib_sym *syms, size_t n,
                      const char *what, struct nsbox_err *e)
{
    int table = __atomic_load_n(&l->table, __ATOMIC_ACQUIRE);
    if (table == 0) {
        pthread_mutex_lock(&dynlib_lock);
        table = l->table;
        for (size_t i = 0; table == 0 && i < n; i++)
            if (!(*syms[i].slot = dynlib_resolve(l, syms[i].name)))
                table = -1;
        if (table == 0)
            table = 1;
        __atomic_store_n(&l->table, table, __ATOMIC_RELEASE);
        pthread_mutex_unlock(&dynlib_lock);
    }
    return table > 0 ? 0 : nsbox_dynlib_fail(l, what, e);
}

const char *nsbox_dynlib_why(struct nsbox_dynlib *l)
{
    /* written once, under the lock, by the failed load or lookup its caller has just seen (whose
     * unlock orders the text before this read); a lock taken here would guard only the address */
    return l->why;
}

/* ENOENT: what is not installed is not there (and gc reads a listing's ENOENT as "no nftables
 * table", which a machine without libnftables cannot have). */
int nsbox_dynlib_fail(struct nsbox_dynlib *l, const char *what, struct nsbox_err *e)
{
    return nsbox_err_set(e, NSBOX_E_UNSUPPORTED, ENOENT, "%s (%s); fix: apt-get install %s", what,
                         nsbox_dynlib_why(l), l->package);
}
