/* A layer blob read as the stream of its tar. A thread of its own reads the blob's file,
 * hashes it (the blob's digest), undoes its compression (gzip by ISA-L where libisal2 loads,
 * else by libarchive, as zstd; or none) and hashes the result (the layer's diff_id), handing
 * the tar's bytes to the reader through a few buffers. Decompression, a core's worth of work
 * for a gzip layer, thus runs beside the reader's creation of the files, which is mostly the
 * kernel's work in the reader's thread. At most NSBOX_OCI_STREAM_BUFS buffers of
 * NSBOX_OCI_STREAM_CHUNK bytes are held: a blob cannot make the stream grow, however it
 * decompresses. */
#ifndef NSBOX_OCI_STREAM_H
#define NSBOX_OCI_STREAM_H

#include "imagelibs.h"
#include "nsbox.h"
#include "ociref.h"

#include <archive.h>
#include <stdatomic.h>
#include <stdint.h>

#define NSBOX_OCI_STREAM_CHUNK (128 * 1024)
#define NSBOX_OCI_STREAM_BUFS 4

struct nsbox_oci_stream;

/* What the decompressed streams of an image may add up to: *total, which each stream adds
 * its bytes to as it makes them (several streams may share it), at most max. A stream that
 * would pass it fails there (errno EFBIG), before it decompresses or hashes more: a small blob
 * cannot make gigabytes of tar headers, padding or bytes after the tar's end that no entry's
 * size accounts for, and keep a core busy for hours. */
struct nsbox_oci_stream_bound {
    _Atomic uint64_t *total;
    uint64_t max;
    /* the blob's size as its manifest gives it, 0 included (NSBOX_OCI_STREAM_NO_SIZE: none, a
     * docker-save archive's): a longer file fails one byte past it, with the reason, rather
     * than being read (and hashed) to its end */
    uint64_t max_file;
};
#define NSBOX_OCI_STREAM_NO_SIZE UINT64_MAX

/* The stream of the blob in fd, from its current offset, started: *out, or -1 with e (out of
 * memory; or the blob cannot be read or its compression is unknown, with the reason). bound
 * may be NULL (none, the file's size included). On failure *out may still be set, for nsbox_oci_stream_free. */
int nsbox_oci_stream_open(int fd, const struct nsbox_oci_stream_bound *bound,
                          struct nsbox_oci_stream **out, struct nsbox_err *e);

/* The same with the gzip inflater given: ISA-L's functions, or NULL for libarchive's (the fuzz
 * target takes both paths on one machine). */
int nsbox_oci_stream_open_with(int fd, const struct nsbox_imagelibs_isal *isal,
                               const struct nsbox_oci_stream_bound *bound,
                               struct nsbox_oci_stream **out, struct nsbox_err *e);

/* libarchive's read callback (archive_read_open with the stream as its data): the next bytes
 * of the tar, 0 at its end, -1 with the archive's error set when the blob could not be read or
 * decompressed. The block returned stays valid until the next call. */
la_ssize_t nsbox_oci_stream_read(struct archive *a, void *ctx, const void **out);

/* After the tar's end: the rest of the stream read (and hashed), then the rest of the file.
 * blob: the file's sha256 as "sha256:<hex>", diff: the decompressed stream's, *bytes: the
 * file's length read. -1 with e->msg the reason when the rest could not be read. */
int nsbox_oci_stream_finish(struct nsbox_oci_stream *s, char blob[NSBOX_OCI_DIGEST_LEN + 1],
                            char diff[NSBOX_OCI_DIGEST_LEN + 1], uint64_t *bytes,
                            struct nsbox_err *e);

/* After a failure: the stream stopped, the whole file's sha256 (what a corrupt blob is told
 * by). -1 when the file cannot be read. */
int nsbox_oci_stream_blob_digest(struct nsbox_oci_stream *s, char blob[NSBOX_OCI_DIGEST_LEN + 1]);

/* Stops the stream's thread (waiting for it) and frees it; NULL is fine. */
void nsbox_oci_stream_free(struct nsbox_oci_stream *s);

#endif
