/* Fuzz the layer stream (rootfs/oci_stream.c) as rootfs/oci_layer.c reads it: any bytes as a
 * layer blob in a memfd, its tar read by libarchive from the stream to its end, then the rest
 * of the stream and of the file.
 *
 * The first byte chooses the path: bit 0 set, gzip is inflated by libarchive even where ISA-L
 * loads (else by ISA-L, as nsbox does); bits 1-3, from 1 to 6, the number of entries after
 * which the reader gives up (the consumer failing first, the thread still running), 7 a file
 * one byte longer than its declared size (else declared exact); bits 4-7, when not 0, the
 * stream's bound (oci_stream.h) as a power of two, its total starting at half of it. The rest
 * is the blob.
 * Checked, besides the sanitizers' memory errors and leaks:
 *   - a failure always says why (a message), and leaves the blob's own digest readable
 *     (but for a file longer than declared, which is not read to its end);
 *   - on success, the blob's digest is the sha256 of the bytes given, its length theirs, and
 *     the decompressed bytes counted within the bound;
 *   - no descriptor is left open and the thread is gone (the stream freed on every path). */
#include "imagelibs.h"
#include "nsbox.h"
#include "oci_stream.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <openssl/evp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c)) abort();                                                                         \
    } while (0)

static int open_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    CHECK(d);
    int n = 0;
    while (readdir(d))
        n++;
    closedir(d);
    return n;
}

static void sha256_hex(const uint8_t *p, size_t n, char out[NSBOX_OCI_DIGEST_LEN + 1])
{
    unsigned char d[32];
    unsigned len = 0;
    CHECK(EVP_Digest(p, n, d, &len, EVP_sha256(), NULL) == 1 && len == 32);
    strcpy(out, "sha256:");
    for (unsigned i = 0; i < 32; i++)
        snprintf(out + 7 + 2 * i, 3, "%02x", d[i]);
}

/* The tar reader's reason. libarchive's tar reader fails a tar cut inside an entry without
 * one, which oci_layer.c words itself; a failure of the stream always has one (checked). */
static const char *why(struct archive *a)
{
    const char *w = archive_error_string(a);
    return w && w[0] ? w : "truncated or malformed tar";
}

/* The blob read as oci_layer.c reads it: 0 read whole, -1 failed (e says why). */
static int read_blob(int fd, const struct nsbox_imagelibs_isal *isal, unsigned give_up,
                     const struct nsbox_oci_stream_bound *bound, const uint8_t *blob, size_t n,
                     struct nsbox_err *e)
{
    struct nsbox_oci_stream *s = NULL;
    struct archive *tar = NULL;
    int rc = -1;
    if (nsbox_oci_stream_open_with(fd, isal, bound, &s, e) < 0)
        goto out;
    CHECK(tar = archive_read_new());
    archive_read_support_format_tar(tar);
    if (archive_read_open(tar, s, NULL, nsbox_oci_stream_read, NULL) != ARCHIVE_OK) {
        nsbox_err_set(e, NSBOX_E_INVALID, EINVAL, "%s", why(tar));
        goto out;
    }
    struct archive_entry *ent;
    unsigned entries = 0;
    int r;
    while ((r = archive_read_next_header(tar, &ent)) == ARCHIVE_OK || r == ARCHIVE_WARN) {
        if (give_up && ++entries == give_up) {
            nsbox_err_set(e, NSBOX_E_INVALID, EPERM, "the reader gave up");
            goto out;
        }
        const void *buf;
        size_t len;
        la_int64_t off;
        while ((r = archive_read_data_block(tar, &buf, &len, &off)) == ARCHIVE_OK)
            ;
        if (r != ARCHIVE_EOF)
            break;
    }
    if (r != ARCHIVE_EOF) {
        nsbox_err_set(e, NSBOX_E_INVALID, EINVAL, "%s", why(tar));
        goto out;
    }
    char got[NSBOX_OCI_DIGEST_LEN + 1], diff[NSBOX_OCI_DIGEST_LEN + 1], want[sizeof got];
    uint64_t bytes = 0;
    if (nsbox_oci_stream_finish(s, got, diff, &bytes, e) < 0)
        goto out;
    sha256_hex(blob, n, want);
    CHECK(!strcmp(got, want) && bytes == n);
    CHECK(!bound->total || *bound->total <= bound->max);
    CHECK(!strncmp(diff, "sha256:", 7) && strlen(diff) == NSBOX_OCI_DIGEST_LEN);
    rc = 0;
out:
    if (rc < 0 && s) {
        /* what a failed layer is told by: the whole file's digest, but for a file longer
         * than said, which is not read to its end */
        char whole[NSBOX_OCI_DIGEST_LEN + 1], want[sizeof whole];
        int r = nsbox_oci_stream_blob_digest(s, whole);
        if (bound->max_file != NSBOX_OCI_STREAM_NO_SIZE && n > bound->max_file) {
            CHECK(r < 0);
        } else {
            CHECK(r == 0);
            sha256_hex(blob, n, want);
            CHECK(!strcmp(whole, want));
        }
    }
    if (tar)
        archive_read_free(tar);
    nsbox_oci_stream_free(s);
    return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const struct nsbox_imagelibs_isal *isal = (data[0] & 1) ? NULL : nsbox_imagelibs_isal();
    unsigned give_up = (data[0] >> 1) & 7;
    bool longer = give_up == 7;
    if (longer)
        give_up = 0;
    _Atomic uint64_t total = 0;
    struct nsbox_oci_stream_bound bound = {NULL, 0, 0};
    if (data[0] >> 4) {
        bound.max = 1ull << (data[0] >> 4);
        bound.total = &total;
        total = bound.max / 2; /* other layers' bytes */
    }
    const uint8_t *blob = data + 1;
    size_t n = size - 1;
    bound.max_file = longer && n > 0 ? n - 1 : n;

    int before = open_fds();
    int fd = memfd_create("fuzz-layer", MFD_CLOEXEC);
    CHECK(fd >= 0);
    CHECK(n == 0 || write(fd, blob, n) == (ssize_t)n);
    CHECK(lseek(fd, 0, SEEK_SET) == 0);
    struct nsbox_err e = {0};
    int r = read_blob(fd, isal, give_up, &bound, blob, n, &e);
    if (r < 0)
        CHECK(e.msg[0] && strcmp(e.msg, "?") != 0);
    CHECK(!(longer && n > 1) || r < 0); /* read whole, it would have been longer than said */
    close(fd);
    CHECK(open_fds() == before);
    return 0;
}
