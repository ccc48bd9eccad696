/* OCI image references, normalised as docker does: `python:3.12` is
 * docker.io/library/python:3.12, `team/py` is docker.io/team/py:latest, `127.0.0.1:5000/x:1`
 * names its registry. Pure (no I/O): the spec checks an `image` with it, the store names refs
 * by its canonical form. */
#ifndef NSBOX_OCIREF_H
#define NSBOX_OCIREF_H

#include "nsbox.h"

#include <stdbool.h>
#include <stddef.h>

#define NSBOX_OCIREF_MAX 255 /* a canonical reference, so that it fits one file name */
#define NSBOX_OCI_DIGEST_LEN 71 /* "sha256:" + 64 lower-case hex digits */

struct nsbox_ociref {
    char domain[NSBOX_OCIREF_MAX + 1]; /* "docker.io", "127.0.0.1:5000", "ghcr.io" */
    char path[NSBOX_OCIREF_MAX + 1];   /* "library/python" */
    char tag[129];                     /* "3.12"; "latest" when neither tag nor digest given */
    char digest[NSBOX_OCI_DIGEST_LEN + 1]; /* "sha256:...", or "" */
};

/* Parse and normalise. Only sha256 digests are accepted. -1 with a message saying what is
 * wrong. */
int nsbox_ociref_parse(const char *text, struct nsbox_ociref *r, struct nsbox_err *e);
/* The canonical text: domain/path:tag, domain/path@digest or domain/path:tag@digest. -1 when
 * longer than NSBOX_OCIREF_MAX or n. */
int nsbox_ociref_format(const struct nsbox_ociref *r, char *out, size_t n);
/* "sha256:" followed by 64 lower-case hex digits. */
bool nsbox_ociref_digest_valid(const char *d);
/* On a command line, is an --image value a reference rather than a directory? A directory is
 * written as a path: absolute, starting with "./" or "../", or ending in "/"; a bare word
 * (no ':', '/' or '@') is a stored image's name; anything else that parses is a reference. */
bool nsbox_ociref_is_reference(const char *text);

#endif
