/* The HTTP/1.1 relay of one bound connection (sandbox/egress_relay.h), with OpenSSL 3. One
 * thread per connection (the helper's), both sockets non-blocking, one poll() loop for both
 * directions: an SSL object is never used by two threads at once. */
#define _GNU_SOURCE
#include "egress_relay.h"
#include "egress_log.h"
#include "httphead.h"
#include "httpresp.h"
#include "scrub.h"
#include "wsframe.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define HANDSHAKE_MS 10000
#define READ_CHUNK 16384
#define IN_MAX (NSBOX_HTTPHEAD_MAX + READ_CHUNK)
#define OUT_MAX (NSBOX_HTTPHEAD_MAX + NSBOX_MAX_BINDINGS * (NSBOX_HTTPHEAD_VALUE_MAX + 80))
#define DOWN_MAX (2 * READ_CHUNK + NSBOX_SCRUB_SECRET_MAX)

static const struct nsbox_ssllib *L; /* the helper's: one for the process */

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* After an SSL call returned r <= 0: waits for what it wants; false when it failed for good or
 * the deadline passed. */
static bool ssl_wait(SSL *ssl, int fd, int r, int64_t deadline)
{
    int err = L->SSL_get_error(ssl, r);
    if (err != SSL_ERROR_WANT_READ && err != SSL_ERROR_WANT_WRITE)
        return false;
    int64_t left = deadline - now_ms();
    struct pollfd p = {.fd = fd, .events = err == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT};
    return left > 0 && poll(&p, 1, (int)left) > 0;
}

static bool ssl_write_all(SSL *ssl, int fd, const void *buf, size_t n)
{
    const uint8_t *p = buf;
    while (n > 0) {
        size_t w = 0;
        int r = L->SSL_write_ex(ssl, p, n, &w);
        if (r > 0) {
            p += w;
            n -= w;
        } else if (!ssl_wait(ssl, fd, r, now_ms() + NSBOX_EGRESS_IDLE_MS)) {
            return false;
        }
    }
    return true;
}

/* Requests sent whose responses have not ended: a client that pipelines more waits (the helper
 * reads no more of what it sends) until some have. */
#define PIPELINE 16

/* A request relayed, for its entry in the network log once its response has ended. */
struct breq {
    char method[24], path[256];
    bool upgrade;  /* a WebSocket handshake: a 101 makes the rest of the connection its own */
    bool answered; /* its response ended while its body was still being sent (an early 401,
                      413...): its entry waits for the body's end */
    int status;    /* 0: no status line (yet) */
    uint64_t up, down;
    int64_t t0, t0_wall;
};

struct nsbox_egress_relay {
    const struct nsbox_egress_bound *h;
    SSL *cl, *up;
    int cfd, ufd;
    nsbox_egress_note_fn note;
    void *ctx;
    enum { IN_HEAD, IN_LENGTH, IN_CHUNKED } state;
    uint64_t left;
    struct nsbox_httpchunk chunk;
    /* the requests whose responses are awaited, oldest first; responses come in that order
     * (RFC 9112 9.3.2), each one's end found by resp */
    struct breq q[PIPELINE];
    size_t q_first, q_n;
    struct nsbox_httpresp resp;
    bool tunnel;             /* its 101 came: both directions are relayed as they are */
    struct nsbox_wsframe ws; /* the frames coming back then */
    int refusal;             /* a request refused behind others: its status, sent after theirs */
    const char *refusal_why; /* and why */
    size_t in_n;
    size_t scanned; /* of the head at in[0]: read already (nsbox_httphead_parse_more) */
    uint8_t in[IN_MAX];
    uint8_t out[OUT_MAX];
    /* what goes to the sandbox from one read of the upstream, written at once: a response of
     * tiny chunks is not as many records and writes */
    uint8_t down[DOWN_MAX];
    size_t down_n;
    size_t open; /* where the data of the chunk being built begins in down; 0: none */
    struct nsbox_scrub scrub;
    /* a head line's first bytes, held until they tell whether it is a Content-Length line */
    enum { HL_START, HL_PASS, HL_DROP } hl;
    uint8_t hold[16];
    size_t hold_n;
    bool cr; /* a trailer's CR, written once the next byte tells what it ends */
    uint8_t rewritten[2 * READ_CHUNK + 64]; /* a head's or a trailer's bytes as they go */
};

static int64_t wall_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static struct breq *req_first(struct nsbox_egress_relay *r)
{
    return r->q_n ? &r->q[r->q_first] : NULL;
}

static struct breq *req_last(struct nsbox_egress_relay *r)
{
    return r->q_n ? &r->q[(r->q_first + r->q_n - 1) % PIPELINE] : NULL;
}

static bool is_head(const struct breq *q)
{
    return !strcmp(q->method, "HEAD");
}

/* The oldest request's entry, with verdict and why (NULL: none). */
static void req_end_as(struct nsbox_egress_relay *r, const char *verdict, const char *why)
{
    struct breq *q = req_first(r);
    if (!q)
        return;
    struct nsbox_egress_entry en = {.start_ms = q->t0_wall,
                                    .duration_ms = now_ms() - q->t0,
                                    .verdict = verdict,
                                    .reason = why,
                                    .method = q->method,
                                    .path = q->path,
                                    .status = q->status,
                                    .bytes_up = q->up,
                                    .bytes_down = q->down};
    r->note(r->ctx, &en);
    r->q_first = (r->q_first + 1) % PIPELINE;
    if (--r->q_n)
        nsbox_httpresp_start(&r->resp, is_head(req_first(r)));
}

/* The oldest request's entry: its response is over (or the connection is). */
static void req_end(struct nsbox_egress_relay *r)
{
    req_end_as(r, "bound", NULL);
}

/* A head was relayed: its response comes after those of the requests before it. */
static void req_begin(struct nsbox_egress_relay *r, const struct nsbox_httphead *hd)
{
    struct breq *q = &r->q[(r->q_first + r->q_n) % PIPELINE];
    *q = (struct breq){
        .upgrade = hd->upgrade, .up = hd->head_len, .t0 = now_ms(), .t0_wall = wall_ms()};
    snprintf(q->method, sizeof q->method, "%s", hd->method);
    nsbox_httphead_log_path(r->in, hd, q->path, sizeof q->path);
    if (!r->q_n++)
        nsbox_httpresp_start(&r->resp, is_head(q));
}

/* A WebSocket handshake is awaiting its response: it is the last request (no head is read
 * after it until then), and no 101 has made the connection a tunnel yet. */
static bool upgrading(struct nsbox_egress_relay *r)
{
    return !r->tunnel && r->q_n && req_last(r)->upgrade;
}

/* A refusal: "refused" when the sandbox's request is at fault, "failed" when the upstream is. */
static void note_refusal(struct nsbox_egress_relay *r, const char *verdict, int status,
                         const char *why)
{
    struct nsbox_egress_entry en = {
        .start_ms = wall_ms(), .verdict = verdict, .reason = why, .status = status};
    r->note(r->ctx, &en);
}

/* ---- to the sandbox: built in r->down, written at once ------------------------------------- */

/* The chunk being built gets its size line (moved to sit right before its data); an empty one
 * is dropped, since it would end the body. Its framing counts to the oldest request's bytes. */
#define CHUNK_ROOM 18 /* "%zx\r\n" */
static void chunk_close(struct nsbox_egress_relay *r)
{
    if (!r->open)
        return;
    size_t at = r->open - CHUNK_ROOM, m = r->down_n - r->open;
    r->open = 0;
    if (!m) {
        r->down_n = at;
        return;
    }
    char size[CHUNK_ROOM + 1];
    int sn = snprintf(size, sizeof size, "%zx\r\n", m);
    memcpy(r->down + at, size, (size_t)sn);
    memmove(r->down + at + sn, r->down + at + CHUNK_ROOM, m);
    memcpy(r->down + at + sn + m, "\r\n", 2);
    r->down_n = at + (size_t)sn + m + 2;
    if (r->q_n)
        req_first(r)->down += (size_t)sn + 2;
}

/* What was built goes. false: the end. */
static bool down_write(struct nsbox_egress_relay *r)
{
    chunk_close(r);
    size_t n = r->down_n;
    r->down_n = 0;
    return !n || ssl_write_all(r->cl, r->cfd, r->down, n);
}

/* Room for n more bytes, masked (the held tail with them) and framed. */
#define DOWN_NEED(n) ((n) + NSBOX_SCRUB_SECRET_MAX + CHUNK_ROOM + 8)
_Static_assert(DOWN_NEED(READ_CHUNK) <= DOWN_MAX, "down room");
static bool down_room(struct nsbox_egress_relay *r, size_t n)
{
    return r->down_n + DOWN_NEED(n) <= DOWN_MAX || down_write(r);
}

static void refuse(struct nsbox_egress_relay *r, int status, const char *why)
{
    char resp[1024];
    size_t n = nsbox_httphead_error(status, why, resp, sizeof resp);
    note_refusal(r, status == 502 ? "failed" : "refused", status, why);
    if (n && down_write(r))
        ssl_write_all(r->cl, r->cfd, resp, n);
}

static void consume(struct nsbox_egress_relay *r, size_t n)
{
    memmove(r->in, r->in + n, r->in_n - n);
    r->in_n -= n;
    r->scanned = 0;
}

/* Reads no more of the sandbox for now: its next head waits for responses (a full pipeline, a
 * handshake's answer, a refusal to send after the answers before it). */
static bool heads_held(struct nsbox_egress_relay *r)
{
    return r->q_n == PIPELINE || upgrading(r) || r->refusal;
}

/* ... nor reads into a full buffer, whose heads are still parsed. */
static bool client_held(struct nsbox_egress_relay *r)
{
    return heads_held(r) || r->in_n == IN_MAX;
}

/* A head in r->in: refused, or rewritten and relayed. false: the end. */
static bool client_head(struct nsbox_egress_relay *r, bool *more)
{
    struct nsbox_httphead hd;
    enum nsbox_httphead_verdict v =
        nsbox_httphead_parse_more(r->in, r->in_n, &r->scanned, r->h->name, r->h->port, &hd);
    *more = v == NSBOX_HTTPHEAD_MORE;
    if (*more)
        return true;
    if (v == NSBOX_HTTPHEAD_OK && nsbox_httphead_hop_names(r->in, &hd, r->h->header, r->h->n)) {
        v = NSBOX_HTTPHEAD_REFUSED;
        hd.status = 400;
        hd.why = "the Connection header names the bound header: an intermediary before the "
                 "origin would drop it";
    }
    if (v == NSBOX_HTTPHEAD_REFUSED) {
        if (!r->q_n) {
            refuse(r, hd.status, hd.why);
            return false;
        }
        r->refusal = hd.status; /* after the responses the sandbox is waiting for */
        r->refusal_why = hd.why;
        return true;
    }
    size_t n = nsbox_httphead_rewrite(r->in, &hd, r->h->header, r->h->value, r->h->n, r->out,
                                      sizeof r->out);
    req_begin(r, &hd);
    if (!n || !ssl_write_all(r->up, r->ufd, r->out, n))
        return false;
    explicit_bzero(r->out, n);
    consume(r, hd.head_len);
    r->state = hd.body == NSBOX_HTTPBODY_LENGTH    ? IN_LENGTH
               : hd.body == NSBOX_HTTPBODY_CHUNKED ? IN_CHUNKED
                                                   : IN_HEAD;
    r->left = hd.content_length;
    memset(&r->chunk, 0, sizeof r->chunk);
    return true;
}

/* What the sandbox sent so far (r->in): heads rewritten, bodies passed on, a tunnel's bytes as
 * they are. false: the end. */
static bool from_client(struct nsbox_egress_relay *r)
{
    if (r->tunnel) {
        bool ok = !r->in_n || ssl_write_all(r->up, r->ufd, r->in, r->in_n);
        req_first(r)->up += r->in_n;
        r->in_n = 0;
        return ok;
    }
    while (r->in_n > 0) {
        if (r->state == IN_HEAD) {
            bool more = false;
            if (heads_held(r))
                return true;
            if (!client_head(r, &more))
                return false;
            if (more)
                return true;
            continue;
        }
        size_t n;
        if (r->state == IN_LENGTH) {
            n = r->in_n < r->left ? r->in_n : (size_t)r->left;
            r->left -= n;
        } else {
            long k = nsbox_httphead_chunk_feed(&r->chunk, r->in, r->in_n);
            if (k < 0) {
                char why[160];
                snprintf(why, sizeof why, "chunked body: %s", r->chunk.why);
                note_refusal(r, "refused", 0, why);
                return false;
            }
            n = (size_t)k;
        }
        if (n && !ssl_write_all(r->up, r->ufd, r->in, n))
            return false;
        struct breq *q = req_last(r);
        q->up += n;
        consume(r, n);
        if ((r->state == IN_LENGTH && !r->left) || (r->state == IN_CHUNKED && r->chunk.done)) {
            r->state = IN_HEAD;
            if (q->answered)
                req_end(r);
        }
    }
    return true;
}

/* One read of each side that is ready. false: the relay is over. */
static bool pump_client(struct nsbox_egress_relay *r, bool *eof)
{
    size_t got = 0;
    int rc = L->SSL_read_ex(r->cl, r->in + r->in_n, IN_MAX - r->in_n, &got);
    if (rc > 0) {
        r->in_n += got;
        return from_client(r);
    }
    int err = L->SSL_get_error(r->cl, rc);
    if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE)
        return true;
    *eof = true; /* the sandbox is done sending: the upstream may still answer */
    if (r->state != IN_HEAD || r->in_n)
        return false;
    L->SSL_shutdown(r->up);
    shutdown(r->ufd, SHUT_WR);
    return true;
}

/* Bytes as they came, masked. false: the end. */
static bool to_client(struct nsbox_egress_relay *r, const uint8_t *p, size_t n)
{
    if (!down_room(r, n))
        return false;
    chunk_close(r);
    r->down_n += nsbox_scrub_feed(&r->scrub, p, n, r->down + r->down_n);
    return true;
}

/* Bytes the helper rewrote (r->rewritten, n of them), in pieces down's room takes, masked. */
static bool rewritten_to_client(struct nsbox_egress_relay *r, size_t n)
{
    for (size_t i = 0, k; i < n; i += k) {
        k = n - i < READ_CHUNK ? n - i : READ_CHUNK;
        if (!to_client(r, r->rewritten + i, k))
            return false;
    }
    explicit_bzero(r->rewritten, n); /* the response as the host sent it, values included */
    return true;
}

/* Bytes of a head (ended: the final head ends with them): its Content-Length lines are
 * dropped, and one of the helper's own with the length the body is framed by ends the final
 * head, unless chunks frame it. RFC 9112 6.3: chunked overrides a Content-Length, which a
 * message passed on must lose; the client reads the length the helper read, never another.
 * A line's first bytes are held until they tell its name. *sent: the bytes written. */
#define LENGTH_NAME "content-length:"
static bool head_to_client(struct nsbox_egress_relay *r, const uint8_t *p, size_t n, bool ended,
                           size_t *sent)
{
    const size_t name = sizeof LENGTH_NAME - 1;
    uint8_t *o = r->rewritten;
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        uint8_t b = p[i];
        if (r->hl == HL_PASS || r->hl == HL_DROP) {
            if (r->hl == HL_PASS)
                o[m++] = b;
            if (b == '\n')
                r->hl = HL_START;
            continue;
        }
        if (b == '\n') { /* a line shorter than the name: the head's end among them */
            if (ended && i == n - 1 && r->resp.has_length && !r->resp.chunked)
                m += (size_t)snprintf((char *)o + m, 40, "Content-Length: %llu\r\n",
                                      (unsigned long long)r->resp.length);
            memcpy(o + m, r->hold, r->hold_n);
            m += r->hold_n;
            o[m++] = b;
            r->hold_n = 0;
            continue;
        }
        r->hold[r->hold_n++] = b;
        if (r->hold_n < name)
            continue;
        if (!strncasecmp((const char *)r->hold, LENGTH_NAME, name)) {
            r->hl = HL_DROP;
        } else {
            memcpy(o + m, r->hold, r->hold_n);
            m += r->hold_n;
            r->hl = HL_PASS;
        }
        r->hold_n = 0;
    }
    *sent = m;
    return rewritten_to_client(r, m);
}

/* Bytes of a trailer section, each line ended with CRLF whatever the origin's ended with (a CR
 * alone is a space, RFC 9110 5.5): the client reads the helper's framing, never the origin's
 * leniency. *sent: the bytes written. */
static bool trailer_to_client(struct nsbox_egress_relay *r, const uint8_t *p, size_t n,
                              size_t *sent)
{
    uint8_t *o = r->rewritten;
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (r->cr && p[i] != '\n')
            o[m++] = ' ';
        r->cr = p[i] == '\r';
        if (p[i] == '\n') {
            o[m++] = '\r';
            o[m++] = '\n';
        } else if (!r->cr) {
            o[m++] = p[i];
        }
    }
    *sent = m;
    return rewritten_to_client(r, m);
}

/* A tail held back because it could begin a value is no value when a message ends there (a
 * response, a WebSocket frame, the stream): it goes. */
static bool let_go(struct nsbox_egress_relay *r)
{
    if (!down_room(r, 0))
        return false;
    chunk_close(r);
    r->down_n += nsbox_scrub_flush(&r->scrub, r->down + r->down_n);
    return true;
}

/* Data of a chunked body (flush: the tail held back, at its last chunk or the stream's end),
 * masked as one stream with the data before it and added to a chunk of the helper's own: the
 * origin's chunk boundaries are not passed on, since a value they cut, which the client's
 * decoding joins again, would pass the masking. *sent: the data's bytes (the chunk's framing
 * counts when it is closed). false: the end. */
static bool data_to_client(struct nsbox_egress_relay *r, const uint8_t *p, size_t n, bool flush,
                           size_t *sent)
{
    *sent = 0;
    if (!down_room(r, n))
        return false;
    if (!r->open) {
        r->open = r->down_n + CHUNK_ROOM;
        r->down_n = r->open;
    }
    uint8_t *o = r->down + r->down_n;
    *sent = flush ? nsbox_scrub_flush(&r->scrub, o) : nsbox_scrub_feed(&r->scrub, p, n, o);
    r->down_n += *sent;
    return true;
}

/* Bytes of the current response while its body is chunked (r->resp in CHUNKED): its data goes
 * in chunks of the helper's own, its framing is dropped; at the last chunk the helper writes
 * its own "0\r\n" (the origin's chunk extensions on it are dropped), then the trailer
 * section, masked, its lines ended with CRLF. Returns how many of the n bytes were taken
 * (framing that leaves r->resp LOST is not written); *sent: the bytes written; *ok false: the
 * end. */
static size_t chunked_to_client(struct nsbox_egress_relay *r, const uint8_t *p, size_t n,
                                size_t *sent, bool *ok)
{
    struct nsbox_httpchunk *c = &r->resp.chunk;
    size_t k;
    *sent = 0;
    *ok = true;
    switch (nsbox_httphead_chunk_part(c)) {
    case NSBOX_HTTPCHUNK_DATA:
        k = nsbox_httpresp_feed(&r->resp, p, n < c->left ? n : (size_t)c->left);
        *ok = data_to_client(r, p, k, false, sent);
        return k;
    case NSBOX_HTTPCHUNK_FRAMING:
        k = nsbox_httpresp_feed(&r->resp, p, 1);
        if (r->resp.state == NSBOX_HTTPRESP_CHUNKED &&
            nsbox_httphead_chunk_part(c) == NSBOX_HTTPCHUNK_TRAILER) {
            /* the last chunk's size line: what was held back goes before it */
            *ok = data_to_client(r, NULL, 0, true, sent) && down_room(r, 0);
            if (!*ok)
                return k;
            chunk_close(r);
            memcpy(r->down + r->down_n, "0\r\n", 3);
            r->down_n += 3;
            *sent += 3;
            r->cr = false;
        }
        return k;
    default:
        k = nsbox_httpresp_feed(&r->resp, p, n);
        if (r->resp.state != NSBOX_HTTPRESP_LOST)
            *ok = trailer_to_client(r, p, k, sent);
        return k;
    }
}

/* A response's head, up to its end at most (interim heads and the final one): a chunked body
 * that follows is chunked_to_client's. */
static size_t head_feed(struct nsbox_httpresp *resp, const uint8_t *p, size_t n)
{
    size_t i = 0;
    while (i < n && resp->state == NSBOX_HTTPRESP_HEAD && !resp->done)
        i += nsbox_httpresp_feed(resp, p + i, 1);
    return i;
}

/* The oldest request's response ended: its entry, then what waited for it. false: the end. */
static bool response_ended(struct nsbox_egress_relay *r)
{
    /* written before the requests that waited go upstream, which may block: the client has
     * its answer whatever the upstream reads */
    if (!let_go(r) || !down_write(r))
        return false;
    if (r->resp.state == NSBOX_HTTPRESP_TUNNEL) {
        if (!req_first(r)->upgrade) {
            req_end(r);
            note_refusal(r, "failed", 0, "the bound host switched protocols unasked (101)");
            return false;
        }
        r->tunnel = true; /* the handshake's entry stays open: the session's bytes are its */
        return from_client(r);
    }
    if (r->state != IN_HEAD && r->q_n == 1) {
        req_first(r)->answered = true; /* the body it answered is still coming */
        return true;
    }
    req_end(r); /* a handshake the host answered without a 101 ends here: HTTP goes on */
    if (r->refusal && !r->q_n) {
        refuse(r, r->refusal, r->refusal_why);
        return false;
    }
    return from_client(r);
}

/* The current response's framing is lost: relaying the rest as it came would leave the client
 * a corrupt stream, or one it frames otherwise than the masking did (a value cut by the
 * origin's chunks, joined again by the client's decoding). The connection ends instead. */
static bool lost(struct nsbox_egress_relay *r)
{
    char why[200];
    snprintf(why, sizeof why,
             "the bound host's response has %s: the connection to the sandbox is ended rather "
             "than relayed unframed",
             r->resp.why ? r->resp.why : "framing that cannot be read");
    req_end_as(r, "failed", why); /* the request's one entry */
    return false;
}

/* What the upstream sent: to the sandbox, masked, each byte counted to its request. */
static bool from_upstream(struct nsbox_egress_relay *r, const uint8_t *buf, size_t got)
{
    for (size_t off = 0, k; off < got; off += k) {
        struct breq *q = req_first(r);
        if (q && q->answered)
            q = NULL; /* bytes no request asked for (yet) */
        k = got - off;
        bool frame_end = false, ok = true, http = q && !r->tunnel;
        size_t sent = 0;
        if (http && r->resp.state == NSBOX_HTTPRESP_CHUNKED) {
            k = chunked_to_client(r, buf + off, k, &sent, &ok);
        } else {
            bool head = http && r->resp.state == NSBOX_HTTPRESP_HEAD;
            if (http)
                k = head ? head_feed(&r->resp, buf + off, k)
                         : nsbox_httpresp_feed(&r->resp, buf + off, k);
            if (q && r->tunnel)
                k = nsbox_wsframe_feed(&r->ws, buf + off, k, &frame_end);
            if (head && r->resp.state != NSBOX_HTTPRESP_LOST) {
                bool ended = r->resp.state != NSBOX_HTTPRESP_HEAD || r->resp.done;
                ok = head_to_client(r, buf + off, k, ended, &sent);
            } else if (!http || r->resp.state != NSBOX_HTTPRESP_LOST) {
                sent = k;
                ok = to_client(r, buf + off, k) && (!frame_end || let_go(r));
            }
        }
        if (http)
            q->status = r->resp.status ? r->resp.status : q->status;
        if (q)
            q->down += sent;
        if (!ok)
            return false;
        if (http && r->resp.state == NSBOX_HTTPRESP_LOST)
            return lost(r);
        if (http && r->resp.done && !response_ended(r))
            return false;
    }
    return true;
}

/* The upstream ended: a chunked body cut there keeps the helper's framing (the client sees it
 * short), anything else gets its held tail as it is. clean: with the upstream's close_notify;
 * otherwise (a reset, a truncation) the sandbox gets none either, so that a body that ends
 * with the connection is not taken for complete. */
static void upstream_ended(struct nsbox_egress_relay *r, bool clean)
{
    size_t sent = 0;
    struct breq *q = req_first(r);
    if (q && !q->answered && !r->tunnel && r->resp.state == NSBOX_HTTPRESP_CHUNKED &&
        nsbox_httphead_chunk_part(&r->resp.chunk) != NSBOX_HTTPCHUNK_TRAILER)
        data_to_client(r, NULL, 0, true, &sent);
    else
        let_go(r);
    if (q)
        q->down += sent;
    down_write(r);
    if (clean)
        L->SSL_shutdown(r->cl);
}

static bool pump_upstream(struct nsbox_egress_relay *r)
{
    uint8_t buf[READ_CHUNK];
    size_t got = 0;
    int rc = L->SSL_read_ex(r->up, buf, sizeof buf, &got);
    if (rc > 0) {
        bool ok = from_upstream(r, buf, got);
        explicit_bzero(buf, got); /* the response as the host sent it, values included */
        return down_write(r) && ok;
    }
    int err = L->SSL_get_error(r->up, rc);
    if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE)
        return true;
    upstream_ended(r, err == SSL_ERROR_ZERO_RETURN);
    return false;
}

static void relay_loop(struct nsbox_egress_relay *r)
{
    bool cl_eof = false;
    for (;;) {
        bool cl = !cl_eof && !client_held(r);
        struct pollfd p[2] = {{.fd = cl ? r->cfd : -1, .events = POLLIN},
                              {.fd = r->ufd, .events = POLLIN}};
        bool pending = (cl && L->SSL_pending(r->cl)) || L->SSL_pending(r->up);
        int n = poll(p, 2, pending ? 0 : NSBOX_EGRESS_IDLE_MS);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 || (n == 0 && !pending))
            return;
        if (cl && (p[0].revents || L->SSL_pending(r->cl)) && !pump_client(r, &cl_eof))
            return;
        if ((p[1].revents || L->SSL_pending(r->up)) && !pump_upstream(r))
            return;
    }
}

bool nsbox_egress_relay_handshake(const struct nsbox_ssllib *lib, SSL *ssl, int fd, bool server)
{
    L = lib;
    int64_t deadline = now_ms() + HANDSHAKE_MS;
    for (;;) {
        int r = server ? L->SSL_accept(ssl) : L->SSL_connect(ssl);
        if (r == 1)
            return true;
        if (!ssl_wait(ssl, fd, r, deadline))
            return false;
    }
}

static void nonblocking(int fd)
{
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0)
        fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

/* The upstream's TLS, verified; NULL after telling the sandbox why not (502). */
static SSL *open_upstream(SSL_CTX *tls, struct nsbox_egress_relay *r,
                          nsbox_egress_connect_fn connect, void *ctx)
{
    r->ufd = connect(ctx, r->h->name);
    if (r->ufd < 0) {
        /* why (the host's resolution, the address refused) is the log's, not the sandbox's */
        refuse(r, 502,
               "cannot connect to the bound host; why is in the sandbox's network log (on the "
               "host: nsbox logs --network ID)");
        return NULL;
    }
    nonblocking(r->ufd);
    SSL *up = L->SSL_new(tls);
    if (!up || !L->SSL_set_fd(up, r->ufd) ||
        !L->SSL_ctrl(up, SSL_CTRL_SET_TLSEXT_HOSTNAME, TLSEXT_NAMETYPE_host_name,
                     (void *)r->h->name) ||
        !L->SSL_set1_host(up, r->h->name) ||
        L->SSL_set_alpn_protos(up, (const unsigned char *)"\x08http/1.1", 9) != 0) {
        L->SSL_free(up);
        refuse(r, 502, "cannot set up TLS to the bound host");
        return NULL;
    }
    if (!nsbox_egress_relay_handshake(L, up, r->ufd, false)) {
        long v = L->SSL_get_verify_result(up);
        char why[300];
        snprintf(why, sizeof why, "TLS to the bound host failed%s%s", v != X509_V_OK ? ": " : "",
                 v != X509_V_OK ? X509_verify_cert_error_string(v) : "");
        refuse(r, 502, why);
        L->SSL_free(up);
        return NULL;
    }
    return up;
}

struct nsbox_egress_relay *nsbox_egress_relay_new(const struct nsbox_ssllib *lib,
                                                  const struct nsbox_egress_bound *h, int fd,
                                                  nsbox_egress_note_fn note, void *ctx)
{
    struct nsbox_egress_relay *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    L = lib;
    *r = (struct nsbox_egress_relay){.h = h, .cfd = fd, .ufd = -1, .note = note, .ctx = ctx};
    nsbox_scrub_init(&r->scrub);
    for (size_t i = 0; i < h->n; i++)
        nsbox_scrub_add(&r->scrub, h->value[i]);
    nonblocking(fd);
    return r;
}

void nsbox_egress_relay_refused(struct nsbox_egress_relay *r, const char *verdict, const char *why)
{
    note_refusal(r, verdict, 0, why);
}

void nsbox_egress_relay_run(struct nsbox_egress_relay *r, SSL *cl, SSL_CTX *tls,
                            nsbox_egress_connect_fn connect, void *ctx)
{
    r->cl = cl;
    r->up = open_upstream(tls, r, connect, ctx);
    if (r->up)
        relay_loop(r);
    while (r->q_n)
        req_end(r);
}

void nsbox_egress_relay_free(struct nsbox_egress_relay *r)
{
    if (!r)
        return;
    L->SSL_free(r->cl);
    L->SSL_free(r->up);
    if (r->ufd >= 0)
        close(r->ufd);
    ERR_clear_error();
    explicit_bzero(r, sizeof *r);
    free(r);
}
