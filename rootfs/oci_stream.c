/* A layer blob read as the stream of its tar: see oci_stream.h. */
#include "oci_stream.h"
#include "imagelibs.h"

#include <errno.h>
#include <isa-l/igzip_lib.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum end { END_NONE, END_EOF, END_FAILED };

struct nsbox_oci_stream {
    /* the file, hashed as libarchive reads it, then to its end */
    int fd;
    EVP_MD_CTX *blob_md;
    uint64_t bytes;
    bool blob_done;
    char blob_hex[NSBOX_OCI_DIGEST_LEN + 1];
    unsigned char in[NSBOX_OCI_STREAM_CHUNK];
    /* the decompressed stream, hashed as the thread makes it: a gzip blob's by ISA-L when it
     * is installed (isal, st), else libarchive's (outer) */
    const struct nsbox_imagelibs_isal *isal;
    struct inflate_state *st;
    bool file_eof;
    struct archive *outer;
    EVP_MD_CTX *diff_md;
    char diff_hex[NSBOX_OCI_DIGEST_LEN + 1];
    struct nsbox_oci_stream_bound bound;
    /* the buffers: count filled from head on, the one at head lent to the reader when held */
    pthread_mutex_t mu;
    pthread_cond_t filled, freed;
    unsigned char buf[NSBOX_OCI_STREAM_BUFS][NSBOX_OCI_STREAM_CHUNK];
    size_t len[NSBOX_OCI_STREAM_BUFS];
    size_t head, count;
    bool held, stop, started;
    enum end end;
    int err;
    char why[256];
    pthread_t thread;
};

static void hex_digest(EVP_MD_CTX *md, char out[NSBOX_OCI_DIGEST_LEN + 1])
{
    unsigned char d[EVP_MAX_MD_SIZE];
    unsigned len = 0;
    EVP_DigestFinal_ex(md, d, &len);
    strcpy(out, "sha256:");
    for (unsigned i = 0; i < len && i < 32; i++)
        snprintf(out + 7 + 2 * i, 3, "%02x", d[i]);
}

/* The file's next bytes, at most one past its declared size (bound.max_file): a file longer
 * than it (a sparse one of a terabyte) is told after that byte, not read to its end. */
static ssize_t read_file(struct nsbox_oci_stream *s)
{
    size_t want = sizeof s->in;
    uint64_t max = s->bound.max_file;
    if (max != NSBOX_OCI_STREAM_NO_SIZE && s->bytes > max) {
        errno = EOVERFLOW; /* not EFBIG, the decompression bound's */
        return -1;
    }
    if (max != NSBOX_OCI_STREAM_NO_SIZE && want > max + 1 - s->bytes)
        want = (size_t)(max + 1 - s->bytes);
    ssize_t n;
    do
        n = read(s->fd, s->in, want);
    while (n < 0 && errno == EINTR);
    if (n > 0) {
        EVP_DigestUpdate(s->blob_md, s->in, (size_t)n);
        s->bytes += (uint64_t)n;
    }
    return n;
}

/* Why read_file failed (errno), in why. */
static void read_error(const struct nsbox_oci_stream *s, char *why, size_t why_len)
{
    if (errno == EOVERFLOW && s->bound.max_file != NSBOX_OCI_STREAM_NO_SIZE &&
        s->bytes > s->bound.max_file)
        snprintf(why, why_len, "the blob is longer than the %llu bytes its manifest gives",
                 (unsigned long long)s->bound.max_file);
    else
        snprintf(why, why_len, "read error: %s", strerror(errno));
}

/* libarchive's reader of the file, for the decompressing archive */
static la_ssize_t file_read(struct archive *a, void *ctx, const void **out)
{
    struct nsbox_oci_stream *s = ctx;
    ssize_t n = read_file(s);
    if (n < 0) {
        int err = errno;
        char why[128];
        read_error(s, why, sizeof why);
        archive_set_error(a, err, "%s", why);
        return -1;
    }
    *out = s->in;
    return n;
}

/* What libarchive left of the file (the tar's padding, trailing bytes) into the hash. */
static int file_rest(struct nsbox_oci_stream *s)
{
    ssize_t n;
    while ((n = read_file(s)) > 0)
        ;
    if (n < 0)
        return -1;
    hex_digest(s->blob_md, s->blob_hex);
    s->blob_done = true;
    return 0;
}

/* Up to n bytes of the gzip stream into out with ISA-L: their count, 0 at the stream's end
 * (every member of it; bytes after the last member are only hashed, as libarchive's gzip
 * reader ignores them), -1 with why. Each member's CRC and length are checked by ISA-L. */
static ssize_t isal_read(struct nsbox_oci_stream *s, unsigned char *out, size_t n, char *why,
                         size_t why_len)
{
    struct inflate_state *st = s->st;
    st->next_out = out;
    st->avail_out = (uint32_t)n;
    while (st->avail_out) {
        if (!st->avail_in && !s->file_eof) {
            ssize_t got = read_file(s);
            if (got < 0) {
                read_error(s, why, why_len);
                return -1;
            }
            s->file_eof = got == 0;
            st->next_in = s->in;
            st->avail_in = (uint32_t)got;
        }
        if (st->block_state == ISAL_BLOCK_FINISH) {
            if (!st->avail_in && !s->file_eof)
                continue;
            if (!st->avail_in || st->next_in[0] != 0x1f)
                break; /* the end, or bytes after the last member */
            uint8_t *next = st->next_in;
            uint32_t avail = st->avail_in;
            s->isal->reset(st); /* a member follows */
            st->next_in = next;
            st->avail_in = avail;
            st->next_out = out + (n - st->avail_out);
            st->crc_flag = ISAL_GZIP;
        }
        uint32_t in = st->avail_in, left = st->avail_out;
        int r = s->isal->inflate(st);
        if (r != ISAL_DECOMP_OK) {
            snprintf(why, why_len, "invalid gzip data (ISA-L error %d)", r);
            return -1;
        }
        /* nothing taken nor given: the input ended inside a member (with input left, a
         * stream ISA-L cannot go on with, which must not loop) */
        if (st->avail_in == in && st->avail_out == left && st->block_state != ISAL_BLOCK_FINISH &&
            (s->file_eof || in)) {
            snprintf(why, why_len, "truncated gzip data");
            return -1;
        }
    }
    return (ssize_t)(n - st->avail_out);
}

/* The stream's thread: decompress into the next free buffer, hand it over, until the end. */
static void *produce(void *arg)
{
    struct nsbox_oci_stream *s = arg;
    for (;;) {
        pthread_mutex_lock(&s->mu);
        while (s->count == NSBOX_OCI_STREAM_BUFS && !s->stop)
            pthread_cond_wait(&s->freed, &s->mu);
        bool stop = s->stop;
        size_t slot = (s->head + s->count) % NSBOX_OCI_STREAM_BUFS;
        pthread_mutex_unlock(&s->mu);
        if (stop)
            return NULL;
        /* the slot is neither filled nor lent: this thread's alone until counted */
        int err = 0;
        char why[sizeof s->why] = "";
        la_ssize_t n = s->st ? isal_read(s, s->buf[slot], NSBOX_OCI_STREAM_CHUNK, why, sizeof why)
                             : archive_read_data(s->outer, s->buf[slot], NSBOX_OCI_STREAM_CHUNK);
        if (n < 0 && s->st) {
            err = EINVAL;
        } else if (n > 0 && s->bound.total &&
                   atomic_fetch_add(s->bound.total, (uint64_t)n) + (uint64_t)n > s->bound.max) {
            /* a bomb: stopped here, neither decompressed nor hashed further */
            err = EFBIG;
            snprintf(why, sizeof why, "decompresses to more than %llu bytes",
                     (unsigned long long)s->bound.max);
            n = -1;
        } else if (n > 0) {
            EVP_DigestUpdate(s->diff_md, s->buf[slot], (size_t)n);
        } else if (n == 0) {
            hex_digest(s->diff_md, s->diff_hex);
            if (file_rest(s) < 0) {
                err = errno;
                read_error(s, why, sizeof why);
            }
        } else {
            err = archive_errno(s->outer) > 0 ? archive_errno(s->outer) : EINVAL;
            const char *msg = archive_error_string(s->outer);
            snprintf(why, sizeof why, "%s", msg && msg[0] ? msg : "decompression failed");
        }
        pthread_mutex_lock(&s->mu);
        if (n > 0) {
            s->len[slot] = (size_t)n;
            s->count++;
        } else {
            /* a failure is told by its errno, so that one without words still fails */
            s->end = err ? END_FAILED : END_EOF;
            s->err = err;
            memcpy(s->why, why, sizeof why);
        }
        pthread_cond_signal(&s->filled);
        pthread_mutex_unlock(&s->mu);
        if (n <= 0)
            return NULL;
    }
}

/* The next block: >0 its length, 0 the end, -1 a failure (s->why). */
static ssize_t next_block(struct nsbox_oci_stream *s, const void **out)
{
    pthread_mutex_lock(&s->mu);
    if (s->held) {
        s->head = (s->head + 1) % NSBOX_OCI_STREAM_BUFS;
        s->count--;
        s->held = false;
        pthread_cond_signal(&s->freed);
    }
    while (s->count == 0 && s->end == END_NONE)
        pthread_cond_wait(&s->filled, &s->mu);
    ssize_t n = 0;
    if (s->count) {
        *out = s->buf[s->head];
        n = (ssize_t)s->len[s->head];
        s->held = true;
    } else if (s->end == END_FAILED) {
        n = -1;
    }
    pthread_mutex_unlock(&s->mu);
    return n;
}

la_ssize_t nsbox_oci_stream_read(struct archive *a, void *ctx, const void **out)
{
    struct nsbox_oci_stream *s = ctx;
    ssize_t n = next_block(s, out);
    if (n < 0)
        archive_set_error(a, s->err, "%s", s->why);
    return n;
}

static void stop_thread(struct nsbox_oci_stream *s)
{
    if (!s->started)
        return;
    pthread_mutex_lock(&s->mu);
    s->stop = true;
    pthread_cond_signal(&s->freed);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->thread, NULL);
    s->started = false;
}

static int start(struct nsbox_oci_stream *s, struct nsbox_err *e)
{
    int r = pthread_create(&s->thread, NULL, produce, s);
    if (r != 0)
        return nsbox_err_set(e, NSBOX_E_SYS, r, "cannot start a thread: %s", strerror(r));
    s->started = true;
    return 0;
}

int nsbox_oci_stream_open(int fd, const struct nsbox_oci_stream_bound *bound,
                          struct nsbox_oci_stream **out, struct nsbox_err *e)
{
    return nsbox_oci_stream_open_with(fd, nsbox_imagelibs_isal(), bound, out, e);
}

int nsbox_oci_stream_open_with(int fd, const struct nsbox_imagelibs_isal *isal,
                               const struct nsbox_oci_stream_bound *bound,
                               struct nsbox_oci_stream **out, struct nsbox_err *e)
{
    struct nsbox_oci_stream *s = calloc(1, sizeof *s);
    *out = s;
    if (!s)
        return nsbox_err_set(e, NSBOX_E_NOMEM, ENOMEM, "out of memory");
    s->fd = fd;
    if (bound)
        s->bound = *bound;
    else
        s->bound.max_file = NSBOX_OCI_STREAM_NO_SIZE;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->filled, NULL);
    pthread_cond_init(&s->freed, NULL);
    s->blob_md = EVP_MD_CTX_new();
    s->diff_md = EVP_MD_CTX_new();
    if (!s->blob_md || !s->diff_md || EVP_DigestInit_ex(s->blob_md, EVP_sha256(), NULL) != 1 ||
        EVP_DigestInit_ex(s->diff_md, EVP_sha256(), NULL) != 1)
        return nsbox_err_set(e, NSBOX_E_NOMEM, ENOMEM, "out of memory");
    unsigned char magic[2];
    off_t at = lseek(fd, 0, SEEK_CUR);
    if (isal && at >= 0 && pread(fd, magic, 2, at) == 2 && magic[0] == 0x1f && magic[1] == 0x8b) {
        s->isal = isal;
        if (!(s->st = malloc(sizeof *s->st)))
            return nsbox_err_set(e, NSBOX_E_NOMEM, ENOMEM, "out of memory");
        s->isal->init(s->st);
        s->st->crc_flag = ISAL_GZIP;
        return start(s, e);
    }
    if (!(s->outer = archive_read_new()))
        return nsbox_err_set(e, NSBOX_E_NOMEM, ENOMEM, "out of memory");
    archive_read_support_filter_gzip(s->outer);
    archive_read_support_filter_zstd(s->outer);
    archive_read_support_format_raw(s->outer);
    struct archive_entry *ent;
    if (archive_read_open(s->outer, s, NULL, file_read, NULL) != ARCHIVE_OK ||
        archive_read_next_header(s->outer, &ent) != ARCHIVE_OK) {
        /* libarchive's gzip reader fails a member cut in its trailer without a word */
        const char *msg = archive_error_string(s->outer);
        return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL, "%s",
                             msg && msg[0] ? msg : "invalid or truncated compressed data");
    }
    return start(s, e);
}

int nsbox_oci_stream_finish(struct nsbox_oci_stream *s, char blob[NSBOX_OCI_DIGEST_LEN + 1],
                            char diff[NSBOX_OCI_DIGEST_LEN + 1], uint64_t *bytes,
                            struct nsbox_err *e)
{
    const void *p;
    ssize_t n;
    while ((n = next_block(s, &p)) > 0)
        ;
    stop_thread(s);
    if (n < 0)
        return nsbox_err_set(e, NSBOX_E_INVALID, s->err, "%s", s->why);
    strcpy(blob, s->blob_hex);
    strcpy(diff, s->diff_hex);
    *bytes = s->bytes;
    return 0;
}

int nsbox_oci_stream_blob_digest(struct nsbox_oci_stream *s, char blob[NSBOX_OCI_DIGEST_LEN + 1])
{
    stop_thread(s);
    if (!s->blob_done && (!s->blob_md || file_rest(s) < 0))
        return -1;
    strcpy(blob, s->blob_hex);
    return 0;
}

void nsbox_oci_stream_free(struct nsbox_oci_stream *s)
{
    if (!s)
        return;
    stop_thread(s);
    if (s->outer)
        archive_read_free(s->outer);
    free(s->st);
    if (s->blob_md)
        EVP_MD_CTX_free(s->blob_md);
    if (s->diff_md)
        EVP_MD_CTX_free(s->diff_md);
    pthread_cond_destroy(&s->freed);
    pthread_cond_destroy(&s->filled);
    pthread_mutex_destroy(&s->mu);
    free(s);
}
