/* Header bindings in the egress helper (sandbox/egress_tls.h), with OpenSSL 3: the CA's leaves,
 * the secrets and the TLS context, sent from the parent to the helper; in the helper, the
 * sandbox's TLS ended with its name's leaf, then the request relay (egress_relay.c). */
#define _GNU_SOURCE
#include "egress_tls.h"
#include "egress_ca.h"
#include "egress_castore.h"
#include "egress_relay.h"
#include "egress_ssl.h"
#include "egress_wire.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <unistd.h>

static const struct nsbox_ssllib *L; /* the helper's: set by nsbox_egress_tls_receive */

struct nsbox_egress_tls {
    size_t n_hosts;
    struct nsbox_egress_bound host[NSBOX_MAX_BINDINGS];
    char header[NSBOX_MAX_BINDINGS][65];
    /* one context for both sides: the sandbox's connections take their host's leaf and the
     * key on their SSL object, the upstream's verify against its store; each context costs
     * its own copies of the cipher and group tables */
    SSL_CTX *ctx;
    EVP_PKEY *key;                        /* the leaves' key */
    struct nsbox_egress_castore *castore; /* the upstream CA file's, NULL: the system store */
    BIO_METHOD *prefix;
    struct nsbox_egress_ca ca; /* the parent's */
    int ca_fd; /* the parent's: a memfd with the upstream CA file's text; -1: the system store */
    char ca_path[256]; /* that file's name, for messages */
    char *secrets;     /* mmap'd, MADV_DONTDUMP */
    size_t secrets_len;
};

/* ---- the client's first bytes, then its socket -------------------------------------------- */

/* The ClientHello was read off the socket to find the server name; OpenSSL reads it again from
 * here, then the socket. */
struct prefixed {
    const uint8_t *p;
    size_t n, off;
    int fd;
};

static int prefix_read(BIO *b, char *out, size_t len, size_t *got)
{
    struct prefixed *x = BIO_get_data(b);
    BIO_clear_retry_flags(b);
    if (x->off < x->n) {
        size_t k = x->n - x->off < len ? x->n - x->off : len;
        memcpy(out, x->p + x->off, k);
        x->off += k;
        *got = k;
        return 1;
    }
    ssize_t r = read(x->fd, out, len);
    if (r > 0) {
        *got = (size_t)r;
        return 1;
    }
    if (r < 0 && (errno == EAGAIN || errno == EINTR))
        BIO_set_retry_read(b);
    return 0;
}

static int prefix_write(BIO *b, const char *in, size_t len, size_t *put)
{
    struct prefixed *x = BIO_get_data(b);
    BIO_clear_retry_flags(b);
    ssize_t r = send(x->fd, in, len, MSG_NOSIGNAL);
    if (r > 0) {
        *put = (size_t)r;
        return 1;
    }
    if (r < 0 && (errno == EAGAIN || errno == EINTR))
        BIO_set_retry_write(b);
    return 0;
}

static long prefix_ctrl(BIO *b, int cmd, long num, void *ptr)
{
    (void)b, (void)num, (void)ptr;
    return cmd == BIO_CTRL_FLUSH ? 1 : 0;
}

static int prefix_create(BIO *b)
{
    BIO_set_init(b, 1);
    return 1;
}

/* ---- preparation ---------------------------------------------------------------------------- */

/* HTTP/1.1 only: the helper reads HTTP/1.1 heads; a client that offers h2 as well gets 1.1, one
 * that offers no http/1.1 is refused (and this thread's connection says why in the log). */
static __thread bool alpn_refused;

static int alpn_select(SSL *ssl, const unsigned char **out, unsigned char *outlen,
                       const unsigned char *in, unsigned inlen, void *arg)
{
    (void)ssl, (void)arg;
    for (unsigned i = 0; i < inlen; i += 1u + in[i])
        if (in[i] == 8 && i + 9 <= inlen && !memcmp(in + i + 1, "http/1.1", 8)) {
            *out = in + i + 1;
            *outlen = 8;
            return SSL_TLSEXT_ERR_OK;
        }
    alpn_refused = true;
    return SSL_TLSEXT_ERR_ALERT_FATAL;
}

/* ca_fd: the config's upstream_ca file (named `named` in messages), copied by the parent into a
 * memfd: read now, through /proc/self/fd, as the helper cannot open a file only root may read,
 * and kept as DER, parsed certificate by certificate as chains need them (egress_castore.h);
 * -1: the system store's hashed directory, whose certificates are read one by one when a chain
 * needs them (parsing the whole bundle, ~140 certificates, cost a sandbox's creation 45 ms). */
static int make_ctx(struct nsbox_egress_tls *t, int ca_fd, const char *named, struct nsbox_err *e)
{
    char ca[64];
    snprintf(ca, sizeof ca, "/proc/self/fd/%d", ca_fd);
    t->ctx = L->SSL_CTX_new(L->TLS_method());
    if (!t->ctx || !L->SSL_CTX_ctrl(t->ctx, SSL_CTRL_SET_MIN_PROTO_VERSION, TLS1_2_VERSION, NULL))
        return nsbox_egress_ca_error(e, "cannot make the TLS context");
    /* the upstream's certificate is checked; the sandbox's side sets SSL_VERIFY_NONE on its
     * own objects (serve), so that no client certificate is asked for */
    L->SSL_CTX_set_verify(t->ctx, SSL_VERIFY_PEER, NULL);
    /* without openssl.cnf, the library's compiled-in level: at least 2 (112-bit keys, no SHA-1
     * signatures) whatever the build, as Debian's is, so that an upstream's weak certificate
     * is refused on every host */
    if (L->SSL_CTX_get_security_level(t->ctx) < 2)
        L->SSL_CTX_set_security_level(t->ctx, 2);
    /* read buffers wiped after use: a response that echoes the bound value would otherwise
     * leave it in freed memory of the helper, outside the pages kept out of dumps */
    L->SSL_CTX_set_options(t->ctx, SSL_OP_CLEANSE_PLAINTEXT);
    L->SSL_CTX_set_alpn_select_cb(t->ctx, alpn_select, NULL); /* the server side's only */
    if (ca_fd >= 0)
        return nsbox_egress_castore_attach(L->SSL_CTX_get_cert_store(t->ctx), ca, named,
                                           &t->castore, e);
    if (L->SSL_CTX_load_verify_locations(t->ctx, NULL, NSBOX_EGRESS_SYSTEM_CA_DIR) != 1) {
        ERR_clear_error();
        return nsbox_err_set(e, NSBOX_E_INVALID, ENOENT,
                             "header bindings: cannot read the CA file %s that upstream "
                             "certificates are checked against; fix: install ca-certificates, "
                             "or name a PEM bundle with {\"network\": {\"upstream_ca\": PATH}} "
                             "in the config",
                             NSBOX_EGRESS_SYSTEM_CA_DIR);
    }
    return 0;
}

/* The values in pages of their own (size: at least their bytes): out of core dumps, wiped when
 * freed, and zeros in every child forked while they are held: a child of the parent (the
 * sandbox's init, the helper before its exec) never has them. */
static int copy_secrets(struct nsbox_egress_tls *t, size_t need, struct nsbox_err *e)
{
    t->secrets_len = (need + 4095) & ~(size_t)4095;
    if (!t->secrets_len)
        t->secrets_len = 4096;
    void *p =
        mmap(NULL, t->secrets_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        t->secrets = NULL;
        return nsbox_err_sys(e, "header bindings: mmap");
    }
    t->secrets = p;
    if (madvise(p, t->secrets_len, MADV_DONTDUMP) < 0 ||
        madvise(p, t->secrets_len, MADV_WIPEONFORK) < 0)
        return nsbox_err_sys(e, "header bindings: madvise");
    return 0;
}

static struct nsbox_egress_bound *host_of(struct nsbox_egress_tls *t, const char *name,
                                          uint16_t port)
{
    for (size_t i = 0; i < t->n_hosts; i++)
        if (!strcmp(t->host[i].name, name) && t->host[i].port == port)
            return &t->host[i];
    struct nsbox_egress_bound *b = &t->host[t->n_hosts++];
    snprintf(b->name, sizeof b->name, "%s", name);
    b->port = port;
    return b;
}

/* Binding k: header and value (len bytes) onto host h; *at: where the next value goes. */
static void add_binding(struct nsbox_egress_tls *t, struct nsbox_egress_bound *h, size_t k,
                        const char *header, const char *value, size_t len, char **at)
{
    snprintf(t->header[k], sizeof t->header[k], "%s", header);
    h->header[h->n] = t->header[k];
    h->value[h->n++] = *at;
    memcpy(*at, value, len);
    (*at)[len] = '\0';
    *at += len + 1;
}

/* The bound names, each once, in the order of the hosts: the CA's leaves are in this order. */
static size_t unique_names(const struct nsbox_egress_tls *t, const char **names)
{
    size_t nn = 0;
    for (size_t i = 0; i < t->n_hosts; i++) {
        bool seen = false;
        for (size_t j = 0; j < nn; j++)
            seen |= !strcmp(names[j], t->host[i].name);
        if (!seen)
            names[nn++] = t->host[i].name;
    }
    return nn;
}

/* The config's upstream CA file, read now (by the parent, which may read what the helper's uid
 * may not) into a memfd for the helper. */
static int copy_ca_file(struct nsbox_egress_tls *t, const char *path, struct nsbox_err *e)
{
    int in = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    struct stat st;
    if (in < 0 || fstat(in, &st) < 0 || !S_ISREG(st.st_mode)) {
        if (in >= 0)
            close(in);
        return nsbox_err_set(e, NSBOX_E_INVALID, ENOENT,
                             "header bindings: cannot read the CA file %s that upstream "
                             "certificates are checked against; fix: name a readable PEM bundle "
                             "with {\"network\": {\"upstream_ca\": PATH}} in the config",
                             path);
    }
    t->ca_fd = memfd_create("nsbox-upstream-ca", MFD_CLOEXEC);
    char buf[65536];
    ssize_t n = 0;
    while (t->ca_fd >= 0 && (n = read(in, buf, sizeof buf)) > 0)
        if (write(t->ca_fd, buf, (size_t)n) != n)
            n = -1;
    close(in);
    if (t->ca_fd < 0 || n < 0)
        return nsbox_err_sys(e, "header bindings: cannot copy the CA file %s", path);
    snprintf(t->ca_path, sizeof t->ca_path, "%s", path);
    return 0;
}

int nsbox_egress_tls_prepare(const struct nsbox_spec *s, const char *upstream_ca, const char *label,
                             struct nsbox_egress_tls **out, struct nsbox_err *e)
{
    *out = NULL;
    struct nsbox_egress_tls *t = calloc(1, sizeof *t);
    if (!t)
        return nsbox_err_sys(e, "header bindings");
    t->ca_fd = -1;
    size_t need = 0;
    for (size_t i = 0; i < s->n_bindings; i++)
        need += strlen(s->bindings[i].value) + 1;
    if (copy_secrets(t, need, e) < 0)
        goto fail;
    char *at = t->secrets;
    for (size_t i = 0; i < s->n_bindings; i++) {
        const struct nsbox_header_binding *b = &s->bindings[i];
        add_binding(t, host_of(t, b->host.name, b->host.port), i, b->header, b->value,
                    strlen(b->value), &at);
    }
    if (upstream_ca && copy_ca_file(t, upstream_ca, e) < 0)
        goto fail;
    const char *names[NSBOX_MAX_BINDINGS];
    size_t nn = unique_names(t, names);
    if (nsbox_egress_ca_make(names, nn, label, s->ttl_seconds + 86400, &t->ca, e) < 0)
        goto fail;
    *out = t;
    return 0;
fail:
    nsbox_egress_tls_free(t);
    return -1;
}

/* DER of x (a certificate) or of the key, straight into the message. */
static bool put_der(struct nsbox_egress_wire *w, X509 *x, EVP_PKEY *key)
{
    int n = x ? i2d_X509(x, NULL) : i2d_PrivateKey(key, NULL);
    uint8_t *p = n > 0 ? nsbox_egress_wire_put_space(w, (size_t)n) : NULL;
    return p && (x ? i2d_X509(x, &p) : i2d_PrivateKey(key, &p)) == n;
}

int nsbox_egress_tls_ca_fd(const struct nsbox_egress_tls *t)
{
    return t ? t->ca_fd : -1;
}

int nsbox_egress_tls_send(const struct nsbox_egress_tls *t, struct nsbox_egress_wire *w,
                          struct nsbox_err *e)
{
    nsbox_egress_wire_put_u32(w, (uint32_t)t->n_hosts);
    for (size_t i = 0; i < t->n_hosts; i++) {
        const struct nsbox_egress_bound *h = &t->host[i];
        nsbox_egress_wire_put_str(w, h->name);
        nsbox_egress_wire_put_u32(w, h->port);
        nsbox_egress_wire_put_u32(w, (uint32_t)h->n);
        for (size_t k = 0; k < h->n; k++) {
            nsbox_egress_wire_put_str(w, h->header[k]);
            nsbox_egress_wire_put_str(w, h->value[k]);
        }
    }
    const char *names[NSBOX_MAX_BINDINGS];
    size_t nn = unique_names(t, names);
    bool ok = put_der(w, NULL, t->ca.key);
    nsbox_egress_wire_put_u32(w, (uint32_t)nn);
    for (size_t i = 0; ok && i < nn; i++) {
        nsbox_egress_wire_put_str(w, names[i]);
        ok = put_der(w, t->ca.leaf[i], NULL);
    }
    nsbox_egress_wire_put_str(w, t->ca_path);
    if (!ok || w->over)
        return nsbox_egress_ca_error(e, "cannot write the leaves for the egress helper");
    return 0;
}

/* The hosts, their headers and values (into the secret pages), from the message. */
static bool receive_hosts(struct nsbox_egress_tls *t, struct nsbox_egress_wire *w)
{
    uint32_t n_hosts, port, n;
    char *at = t->secrets;
    size_t k = 0;
    if (!nsbox_egress_wire_get_u32(w, &n_hosts) || n_hosts > NSBOX_MAX_BINDINGS)
        return false;
    for (uint32_t i = 0; i < n_hosts; i++) {
        char name[NSBOX_HOSTNAME_MAX + 1], header[65];
        if (!nsbox_egress_wire_get_str(w, name, sizeof name) ||
            !nsbox_egress_wire_get_u32(w, &port) || port > 65535 ||
            !nsbox_egress_wire_get_u32(w, &n) || n > NSBOX_MAX_BINDINGS - k)
            return false;
        struct nsbox_egress_bound *h = host_of(t, name, (uint16_t)port);
        for (uint32_t j = 0; j < n; j++, k++) {
            const uint8_t *v;
            size_t len;
            if (!nsbox_egress_wire_get_str(w, header, sizeof header) ||
                !nsbox_egress_wire_get_bytes(w, &v, &len) ||
                len + 1 > t->secrets_len - (size_t)(at - t->secrets) || memchr(v, '\0', len))
                return false;
            add_binding(t, h, k, header, (const char *)v, len, &at);
        }
    }
    return true;
}

/* The leaves' key, and each bound host's leaf (DER, as the parent wrote them). */
static bool receive_leaves(struct nsbox_egress_tls *t, struct nsbox_egress_wire *w)
{
    const uint8_t *key, *leaf;
    size_t key_len, leaf_len;
    uint32_t nn;
    if (!nsbox_egress_wire_get_bytes(w, &key, &key_len) || key_len > LONG_MAX ||
        !(t->key = d2i_PrivateKey(EVP_PKEY_EC, NULL, &key, (long)key_len)) ||
        !nsbox_egress_wire_get_u32(w, &nn) || nn > NSBOX_MAX_BINDINGS)
        return false;
    for (uint32_t i = 0; i < nn; i++) {
        char name[NSBOX_HOSTNAME_MAX + 1];
        if (!nsbox_egress_wire_get_str(w, name, sizeof name) ||
            !nsbox_egress_wire_get_bytes(w, &leaf, &leaf_len) || leaf_len > LONG_MAX)
            return false;
        for (size_t h = 0; h < t->n_hosts; h++) {
            const uint8_t *p = leaf;
            if (!t->host[h].leaf && !strcmp(t->host[h].name, name) &&
                !(t->host[h].leaf = d2i_X509(NULL, &p, (long)leaf_len)))
                return false;
        }
    }
    for (size_t h = 0; h < t->n_hosts; h++)
        if (!t->host[h].leaf)
            return false;
    return true;
}

int nsbox_egress_tls_receive(struct nsbox_egress_wire *w, int ca_fd, struct nsbox_egress_tls **out,
                             struct nsbox_err *e)
{
    *out = NULL;
    if (!(L = nsbox_egress_ssl(e)))
        return -1;
    /* before any other call into OpenSSL: no configuration file (the helper's TLS is set up
     * here, in full, and the host's openssl.cnf would only add its parsed text), and no error
     * string tables (65 KiB of heap; an error reads error:CODE, which `openssl errstr CODE`
     * explains) */
    if (!L->OPENSSL_init_ssl(OPENSSL_INIT_NO_LOAD_CONFIG | OPENSSL_INIT_NO_LOAD_SSL_STRINGS |
                                 OPENSSL_INIT_NO_LOAD_CRYPTO_STRINGS,
                             NULL))
        return nsbox_egress_ca_error(e, "cannot start OpenSSL");
    struct nsbox_egress_tls *t = calloc(1, sizeof *t);
    if (!t)
        return nsbox_err_sys(e, "header bindings");
    t->ca_fd = -1;
    if (copy_secrets(t, w->n - w->at, e) < 0)
        goto fail;
    if (!receive_hosts(t, w) || !receive_leaves(t, w) ||
        !nsbox_egress_wire_get_str(w, t->ca_path, sizeof t->ca_path)) {
        nsbox_egress_ca_error(e, "the bindings the egress helper was given are not whole");
        goto fail;
    }
    if (make_ctx(t, ca_fd, t->ca_path, e) < 0)
        goto fail;
    t->prefix = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "nsbox-prefixed");
    if (!t->prefix || !BIO_meth_set_read_ex(t->prefix, prefix_read) ||
        !BIO_meth_set_write_ex(t->prefix, prefix_write) ||
        !BIO_meth_set_ctrl(t->prefix, prefix_ctrl) ||
        !BIO_meth_set_create(t->prefix, prefix_create)) {
        nsbox_egress_ca_error(e, "cannot make a BIO method");
        goto fail;
    }
    *out = t;
    return 0;
fail:
    nsbox_egress_tls_free(t);
    return -1;
}

const char *nsbox_egress_tls_ca_pem(const struct nsbox_egress_tls *t)
{
    return t->ca.ca_pem;
}

void nsbox_egress_tls_free(struct nsbox_egress_tls *t)
{
    if (!t)
        return;
    /* the helper's: the parent's side has neither (and may not have loaded libcrypto) */
    for (size_t i = 0; i < t->n_hosts; i++)
        if (t->host[i].leaf)
            X509_free(t->host[i].leaf);
    if (t->key)
        EVP_PKEY_free(t->key);
    if (L)
        L->SSL_CTX_free(t->ctx);
    nsbox_egress_castore_free(t->castore); /* after the store that looks into it */
    BIO_meth_free(t->prefix);
    nsbox_egress_ca_free(&t->ca);
    if (t->ca_fd >= 0)
        close(t->ca_fd);
    if (t->secrets) {
        explicit_bzero(t->secrets, t->secrets_len);
        munmap(t->secrets, t->secrets_len);
    }
    explicit_bzero(t, sizeof *t);
    free(t);
}

static const struct nsbox_egress_bound *find(const struct nsbox_egress_tls *t, const char *name,
                                             uint16_t port)
{
    for (size_t i = 0; t && i < t->n_hosts; i++)
        if (t->host[i].port == port && !strcmp(t->host[i].name, name))
            return &t->host[i];
    return NULL;
}

bool nsbox_egress_tls_bound(const struct nsbox_egress_tls *t, const char *name, uint16_t port)
{
    return find(t, name, port) != NULL;
}

void nsbox_egress_tls_serve(const struct nsbox_egress_tls *t, int fd, const uint8_t *hello,
                            size_t n, const char *name, uint16_t port,
                            nsbox_egress_connect_fn connect, nsbox_egress_note_fn note, void *ctx)
{
    const struct nsbox_egress_bound *h = find(t, name, port);
    struct nsbox_egress_relay *r = h ? nsbox_egress_relay_new(L, h, fd, note, ctx) : NULL;
    if (!r)
        return;
    struct prefixed pre = {.p = hello, .n = n, .fd = fd};
    BIO *bio = BIO_new(t->prefix);
    SSL *cl = L->SSL_new(t->ctx);
    if (!bio || !cl || L->SSL_use_certificate(cl, h->leaf) != 1 ||
        L->SSL_use_PrivateKey(cl, t->key) != 1) {
        BIO_free(bio);
        L->SSL_free(cl);
        nsbox_egress_relay_refused(r, "failed", "cannot set up TLS for the sandbox");
        nsbox_egress_relay_free(r);
        return;
    }
    L->SSL_set_verify(cl, SSL_VERIFY_NONE, NULL);
    BIO_set_data(bio, &pre);
    L->SSL_set_bio(cl, bio, bio);
    alpn_refused = false;
    if (!nsbox_egress_relay_handshake(L, cl, fd, true)) {
        L->SSL_free(cl);
        nsbox_egress_relay_refused(
            r, "refused",
            alpn_refused ? "the sandbox's client offers no http/1.1 in ALPN (an HTTP/2-only "
                           "client): a bound host is relayed over HTTP/1.1 only; let the client "
                           "fall back (curl --http1.1)"
                         : "the sandbox's TLS handshake failed (it must trust the sandbox's CA "
                           "and speak HTTP/1.1)");
        nsbox_egress_relay_free(r);
        return;
    }
    nsbox_egress_relay_run(r, cl, t->ctx, connect, ctx);
    nsbox_egress_relay_free(r);
}
