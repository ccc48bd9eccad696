/* The network log (sandbox/egress_log.h): the helper's writer and the readers' side. */
#define _GNU_SOURCE
#include "egress_log.h"
#include "cleanup.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define COPY_CHUNK (64 * 1024)
#define READ_MAX (4u << 20) /* a current file far past its bound is not read whole */
#define PATH_WITHOUT_QUERY_MAX 2048

static int open_in(const char *dir, const char *name, int flags)
{
    char path[4096];
    if (snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path) {
        errno = ENAMETOOLONG;
        return -1;
    }
    return open(path, flags | O_CLOEXEC | O_NOFOLLOW, 0600);
}

int nsbox_egress_log_open(struct nsbox_egress_log *l, const char *dir)
{
    l->seq = 0;
    pthread_mutex_init(&l->mu, NULL);
    l->fd = open_in(dir, NSBOX_EGRESS_LOG_FILE, O_RDWR | O_CREAT | O_APPEND);
    l->older_fd = l->fd < 0 ? -1 : open_in(dir, NSBOX_EGRESS_LOG_OLDER, O_RDWR | O_CREAT);
    if (l->older_fd < 0) {
        int err = errno;
        nsbox_egress_log_close(l);
        errno = err;
        return -1;
    }
    return 0;
}

void nsbox_egress_log_close(struct nsbox_egress_log *l)
{
    if (l->fd >= 0)
        close(l->fd);
    if (l->older_fd >= 0)
        close(l->older_fd);
    l->fd = l->older_fd = -1;
}

/* The line is written by hand, not with cJSON: the helper is an executable of its own that
 * links libc only (docs/decisions.md, "The egress helper is an executable of its own"). Strings
 * are escaped as cJSON escapes them: quote, backslash and every byte below 0x20. */
struct line {
    char *p;
    size_t n, cap;
    bool oom;
};

static void put(struct line *l, const char *s, size_t n)
{
    if (l->oom)
        return;
    if (l->n + n + 2 > l->cap) {
        size_t cap = (l->cap + n) * 2 + 256;
        char *p = realloc(l->p, cap);
        if (!p) {
            l->oom = true;
            return;
        }
        l->p = p;
        l->cap = cap;
    }
    memcpy(l->p + l->n, s, n);
    l->n += n;
    l->p[l->n] = '\0';
}

static void put_text(struct line *l, const char *s)
{
    put(l, s, strlen(s));
}

static void put_string(struct line *l, const char *s, size_t n)
{
    put(l, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        char esc[8];
        const char *short_form = c == '"'    ? "\\\""
                                 : c == '\\' ? "\\\\"
                                 : c == '\b' ? "\\b"
                                 : c == '\f' ? "\\f"
                                 : c == '\n' ? "\\n"
                                 : c == '\r' ? "\\r"
                                 : c == '\t' ? "\\t"
                                             : NULL;
        if (short_form) {
            put_text(l, short_form);
        } else if (c < 0x20) {
            snprintf(esc, sizeof esc, "\\u%04x", c);
            put_text(l, esc);
        } else {
            put(l, (const char *)&s[i], 1);
        }
    }
    put(l, "\"", 1);
}

static void add_str(struct line *l, const char *key, const char *v)
{
    if (!v)
        return;
    put(l, ",\"", 2);
    put_text(l, key);
    put(l, "\":", 2);
    put_string(l, v, strlen(v));
}

static void add_num(struct line *l, const char *key, long long v)
{
    char num[32];
    snprintf(num, sizeof num, "%s\"%s\":%lld", l->n > 1 ? "," : "", key, v);
    put_text(l, num);
}

static void add_time(struct line *l, int64_t ms)
{
    time_t s = (time_t)(ms / 1000);
    struct tm tm;
    char text[40];
    if (!gmtime_r(&s, &tm))
        return;
    size_t n = strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(text + n, sizeof text - n, ".%03dZ", (int)(ms % 1000));
    add_str(l, "time", text);
}

/* A query string can hold a token: only what comes before '?' (and a fragment's '#'). */
static void add_path(struct line *l, const char *path)
{
    size_t n = strcspn(path, "?#");
    if (n > PATH_WITHOUT_QUERY_MAX - 1)
        n = PATH_WITHOUT_QUERY_MAX - 1;
    put_text(l, ",\"path\":");
    put_string(l, path, n);
}

char *nsbox_egress_log_line(const struct nsbox_egress_entry *en, uint64_t seq)
{
    struct line l = {0};
    put(&l, "{", 1);
    add_num(&l, "seq", (long long)seq); /* first: readers find it at the start */
    add_time(&l, en->start_ms);
    add_str(&l, "name", en->name);
    add_num(&l, "port", en->port);
    add_str(&l, "verdict", en->verdict);
    add_str(&l, "reason", en->reason);
    add_str(&l, "address", en->address);
    add_str(&l, "method", en->method);
    if (en->path)
        add_path(&l, en->path);
    if (en->status)
        add_num(&l, "status", en->status);
    add_num(&l, "bytes_up", (long long)en->bytes_up);
    add_num(&l, "bytes_down", (long long)en->bytes_down);
    add_num(&l, "duration_ms", (long long)en->duration_ms);
    put(&l, "}", 1);
    if (l.oom) {
        free(l.p);
        return NULL;
    }
    return l.p;
}

/* The current file's text over the older one's, then the current one emptied. A reader that
 * was reading the current file finds the same bytes at the same offsets in the older one. */
static void rotate(struct nsbox_egress_log *l, off_t size)
{
    char *buf = malloc(COPY_CHUNK);
    if (buf && ftruncate(l->older_fd, 0) == 0) {
        for (off_t off = 0; off < size;) {
            ssize_t n = pread(l->fd, buf, COPY_CHUNK, off);
            if (n <= 0 || pwrite(l->older_fd, buf, (size_t)n, off) != n)
                break;
            off += n;
        }
    }
    if (ftruncate(l->fd, 0) < 0) { /* the bound holds even when the copy failed */
    }
    free(buf);
}

void nsbox_egress_log_write(struct nsbox_egress_log *l, const struct nsbox_egress_entry *en)
{
    if (l->fd < 0)
        return;
    pthread_mutex_lock(&l->mu);
    char *line = nsbox_egress_log_line(en, l->seq + 1);
    if (line) {
        l->seq++;
        size_t n = strlen(line);
        line[n] = '\n'; /* over the NUL: the buffer has room for it */
        struct stat st;
        if (fstat(l->fd, &st) == 0 && st.st_size > 0 &&
            (uint64_t)st.st_size + n + 1 > NSBOX_EGRESS_LOG_ROTATE_BYTES)
            rotate(l, st.st_size);
        ssize_t w = write(l->fd, line, n + 1); /* one write: O_APPEND keeps lines whole */
        (void)w;
        free(line);
    }
    pthread_mutex_unlock(&l->mu);
}

/* ---- readers ------------------------------------------------------------------------------ */

int nsbox_egress_reader_open(struct nsbox_egress_reader *r, const char *dir)
{
    memset(r, 0, sizeof *r);
    r->fd = open_in(dir, NSBOX_EGRESS_LOG_FILE, O_RDONLY);
    if (r->fd < 0)
        return r->older_fd = -1;
    r->older_fd = open_in(dir, NSBOX_EGRESS_LOG_OLDER, O_RDONLY);
    if (r->older_fd < 0 && errno != ENOENT) {
        int err = errno;
        close(r->fd);
        errno = err;
        return -1;
    }
    r->pos = UINT64_MAX; /* nothing read yet: the older file comes first */
    return 0;
}

void nsbox_egress_reader_close(struct nsbox_egress_reader *r)
{
    if (r->fd >= 0)
        close(r->fd);
    if (r->older_fd >= 0)
        close(r->older_fd);
    r->fd = r->older_fd = -1;
}

/* Lines the writer made are JSON with every control byte escaped, of ASCII alone (names,
 * addresses, methods and paths are checked as ASCII before they are logged): a line with a
 * control byte or any other (a helper taken over writing terminal escapes for `nsbox logs` to
 * print, C1's among them: 0x9b is CSI raw, and as UTF-8 too) is not passed on. */
static bool printable(const char *text, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)text[i] < 0x20 || (unsigned char)text[i] >= 0x7f)
            return false;
    return true;
}

static uint64_t seq_of(const char *text, size_t len)
{
    static const char key[] = "{\"seq\":";
    if (len <= sizeof key - 1 || memcmp(text, key, sizeof key - 1) != 0)
        return 0;
    uint64_t v = 0;
    for (size_t i = sizeof key - 1; i < len && text[i] >= '0' && text[i] <= '9'; i++)
        v = v * 10 + (uint64_t)(text[i] - '0');
    return v;
}

/* Whole lines of fd from `from` on: passed on when newer than the last; *used: the bytes of
 * whole lines. */
static int pass_range(struct nsbox_egress_reader *r, int fd, uint64_t from, uint64_t *used,
                      int (*line)(void *, const char *, size_t), void *ctx)
{
    struct stat st;
    *used = 0;
    if (fd < 0 || fstat(fd, &st) < 0 || (uint64_t)st.st_size <= from)
        return 0;
    uint64_t want = (uint64_t)st.st_size - from;
    if (want > READ_MAX)
        want = READ_MAX;
    cleanup_free char *buf = malloc(want);
    if (!buf)
        return -1;
    ssize_t got = pread(fd, buf, want, (off_t)from);
    if (got < 0)
        return -1;
    int n = 0;
    for (size_t at = 0; at < (size_t)got;) {
        char *nl = memchr(buf + at, '\n', (size_t)got - at);
        if (!nl)
            break;
        size_t len = (size_t)(nl - (buf + at));
        uint64_t seq = seq_of(buf + at, len);
        if (seq > r->seq && printable(buf + at, len)) {
            if (r->seq && seq > r->seq + 1)
                r->dropped = true;
            r->seq = seq;
            if (line(ctx, buf + at, len) < 0)
                return -1;
            n++;
        }
        at += len + 1;
        *used = at;
    }
    return n;
}

int nsbox_egress_reader_next(struct nsbox_egress_reader *r,
                             int (*line)(void *ctx, const char *text, size_t len), void *ctx)
{
    struct stat st;
    uint64_t used;
    int n = 0, k;
    if (fstat(r->fd, &st) < 0)
        return -1;
    if (r->pos == UINT64_MAX || (uint64_t)st.st_size < r->pos) {
        /* the start, or rotated since: the older file has what the current one had */
        k = pass_range(r, r->older_fd, r->pos == UINT64_MAX ? 0 : r->pos, &used, line, ctx);
        if (k < 0)
            return -1;
        n += k;
        r->pos = 0;
    }
    k = pass_range(r, r->fd, r->pos, &used, line, ctx);
    if (k < 0)
        return -1;
    r->pos += used;
    return n + k;
}
