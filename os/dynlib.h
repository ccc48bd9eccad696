/* A shared library loaded on first use with dlopen: libraries that only some commands need
 * (libnftables, libnl-route, libssl, libarchive, libcrypto) are not linked, so that every other
 * nsbox process neither maps them nor binds their symbols at start-up. One library is one static
 * struct nsbox_dynlib; it is opened once, and the first reason it could not be (no such file, a
 * missing symbol) is kept for the message that says which Debian package to install. Safe to
 * call from several threads. */
#ifndef NSBOX_DYNLIB_H
#define NSBOX_DYNLIB_H

#include "nsbox.h"

#include <stddef.h>

struct nsbox_dynlib {
    const char *soname;  /* "libssl.so.3" */
    const char *package; /* the Debian package that has it: "libssl3" */
    int mode;            /* dlopen's: RTLD_NOW or RTLD_LAZY (RTLD_LOCAL is added) */
    /* the rest is the loader's */
    void *handle;
    int open_failed;
    int table; /* 0 not resolved, 1 resolved, -1 failed */
    char why[256];
};
#define NSBOX_DYNLIB_INIT(so, pkg, how)                                                            \
    {                                                                                              \
        .soname = (so), .package = (pkg), .mode = (how)                                            \
    }

/* One entry of a table of functions: where the address goes and the symbol's name. */
struct nsbox_dynlib_sym {
    void **slot;
    const char *name;
};

/* Opens the library and fills every slot of the table, once (later calls return what the first
 * one found). 0, or -1 with e filled (NSBOX_E_UNSUPPORTED, ENOENT): "WHAT (why); fix: apt-get
 * install PACKAGE". e may be NULL. */
int nsbox_dynlib_load(struct nsbox_dynlib *l, const struct nsbox_dynlib_sym *syms, size_t n,
                      const char *what, struct nsbox_err *e);

/* One function of the library, opening it first; NULL when it cannot be had (the reason kept). */
void *nsbox_dynlib_sym(struct nsbox_dynlib *l, const char *name);

/* The error of a library that could not be had, as nsbox_dynlib_load() words it (-1). */
int nsbox_dynlib_fail(struct nsbox_dynlib *l, const char *what, struct nsbox_err *e);

/* The first reason something of the library could not be had ("" while nothing failed); the
 * text does not change once set. */
const char *nsbox_dynlib_why(struct nsbox_dynlib *l);

#endif
