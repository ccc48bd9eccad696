/* The seccomp programs a sandbox installs (os/seccomp_prog.c): the default profile's (alone or
 * with a writable root's refusals folded in), and loading one in the child. Profiles themselves
 * are policy/seccomp_profile.h's. */
#ifndef NSBOX_SECCOMP_PROG_H
#define NSBOX_SECCOMP_PROG_H

#include "seccomp_profile.h"

#include <stddef.h>
#include <stdint.h>

/* Default profile, compiled once per process and cached (and on disk when cache_dir != NULL).
 * Each call hands out its own malloc'd copy: free it with nsbox_seccomp_compile_free().
 * Thread-safe; call it before clone()/fork(), not in the child. An unusable cache directory (not
 * ours, or writable by others) is not used; a missing or corrupt cache file is rewritten. */
int nsbox_seccomp_prog_default(const char *cache_dir, struct sock_fprog *prog, struct nsbox_err *e);
/* The same for an nsbox-oci container with a writable root: the default profile with the
 * root's refusals folded in (nsbox_seccomp_fold_root), one filter; its own cache file. */
int nsbox_seccomp_prog_root(const char *cache_dir, struct sock_fprog *prog, struct nsbox_err *e);
/* An OCI bundle's profile p, parsed from text (its canonical form, len bytes), compiled or read
 * from the cache in cache_dir (NULL: none), which keeps it under the text itself: the default
 * profile Docker gives every container is compiled once. prog is malloc'd. */
int nsbox_seccomp_prog_bundle(const char *cache_dir, const char *text, size_t len,
                              const struct nsbox_seccomp_profile *p, struct sock_fprog *prog,
                              struct nsbox_err *e);
/* The cache directory nsbox and nsbox-oci keep compiled programs in (under the data dir). */
int nsbox_seccomp_prog_cache_dir(char *out, size_t n, struct nsbox_err *e);
/* A cache key: what a program compiled from text depends on. kind tells the parsers apart
 * ("nsbox", "oci"); late is the late-call table's digest (nsbox_seccomp_names_digest()), the
 * rest (libseccomp's version, the architecture, the compiler's options) is this build's. */
uint64_t nsbox_seccomp_prog_cache_key(const char *kind, uint64_t late, const char *text,
                                      size_t len);
/* Remove the files of cache_dir that this build would never read again: those under the key of
 * another nsbox, libseccomp or architecture (or of a profile since changed), and writers'
 * temporary files left by a crash an hour ago or more. Only the names this cache gives its
 * files, only regular files of ours, never through a symlink (cache_dir itself included), and
 * only in a directory of ours or root's that nobody else may write. How many went. */
int nsbox_seccomp_prog_prune(const char *cache_dir);
/* Drop the in-process copies so that the next call compiles or reads the disk cache again
 * (tests and benchmarks). */
void nsbox_seccomp_prog_forget(void);

/* Child side: install prog (no_new_privs must already be set). */
int nsbox_seccomp_prog_load(const struct sock_fprog *prog, struct nsbox_err *e);
/* The same with SECCOMP_FILTER_FLAG_* flags (an OCI bundle's: LOG, SPEC_ALLOW). */
int nsbox_seccomp_prog_load_flags(const struct sock_fprog *prog, unsigned flags,
                                  struct nsbox_err *e);

#endif
