/* The config file (os/config.c): $NSBOX_CONFIG or NSBOX_CONFIG_DEFAULT_PATH (policy/spec.h), one
 * JSON object with a section per module (instance_types, network, pool, workspace, host), read
 * and parsed once per process and handed to each module's parser (policy/cfgsection.h). */
#ifndef NSBOX_CONFIG_H
#define NSBOX_CONFIG_H

#include "nsbox.h"

#include <cJSON.h>
#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <time.h>

/* What identified the file that was read. Any of it different at the path, and the file there
 * is another one (replaced by a rename, edited in place, removed, created): it is read again. */
struct nsbox_config_id {
    bool present; /* false: no file at the path */
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtim, ctim;
};

/* The config file as this process read and parsed it. */
struct nsbox_config {
    char path[PATH_MAX];
    struct nsbox_config_id id;
    char *text;   /* the file's bytes, NULL without a file (the warm pool's key covers them) */
    size_t len;
    cJSON *root;  /* the parsed object, NULL without a file: every section at its defaults */
    unsigned long reads; /* how many times this process has read the file: a caller that keeps
                          * what it made of it knows when to make it again */
    unsigned long text_since; /* the first of the reads that found the text the file has now:
                               * the same bytes read again (a touch, a chmod, a rewrite that
                               * changed nothing) keep it */
};

/* The process's config file: read and parsed on the first call and again only when the file at
 * the path is another (nsbox_config_id); otherwise one stat() of the path. path NULL means
 * $NSBOX_CONFIG (must exist) or NSBOX_CONFIG_DEFAULT_PATH (missing: no config, *out's root
 * NULL); an explicit path that is missing means no config too. A regular file of at most
 * NSBOX_SPEC_JSON_MAX bytes, not empty, one JSON object. A file that cannot be read or parsed
 * gives its error ("config PATH: ...") at every call until it changes, without being read
 * again. *out stays valid until the next call. Not for threads. */
int nsbox_config_get(const char *path, const struct nsbox_config **out, struct nsbox_err *e);

/* One module's section of the config file: the object of nsbox_config_get (path NULL) given to
 * parse, whose errors get the file's name in front; without a file parse is not called and *out
 * stays as the caller set it up (its defaults). With used (else NULL), the caller also gets
 * the config the section came from (its text, NULL without a file), valid as *out of
 * nsbox_config_get. */
int nsbox_config_section(int (*parse)(const cJSON *root, void *out, struct nsbox_err *e),
                         void *out, const struct nsbox_config **used, struct nsbox_err *e);

/* Whether the config file (nsbox_config_get, path NULL; *out as its *out) held the text of read
 * `since` at every read since: 1 yes, 0 no (another text, or none where there was a file, at
 * one of them), -1 its error. What was made of read `since` still holds when the file was
 * only touched, chmod'ed or rewritten with the same bytes. */
int nsbox_config_same_text_since(unsigned long since, const struct nsbox_config **out,
                                 struct nsbox_err *e);

/* nsbox_config's reads as they are, without a look at the file: a forked child learns which of
 * its parent's reads what it inherited came from (0: none yet). */
unsigned long nsbox_config_reads(void);

/* The instance types of the config file's section (nsbox_spec_types_parse(), policy/spec.h)
 * over the built-in ones; a missing file means the built-in table. path: as
 * nsbox_config_get's. Errors: "config PATH: ...". */
int nsbox_config_load_types(const char *path, struct nsbox_err *e);

/* The read (nsbox_config's reads) the instance types in force came from, the limits of a spec
 * parsed since were taken from; 0: never loaded, the built-in table. */
unsigned long nsbox_config_types_read(void);

#endif
