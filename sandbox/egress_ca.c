/* The per-sandbox CA of header bindings (sandbox/egress_ca.h), with OpenSSL 3. Keys are P-256:
 * quick to make (a sandbox's creation pays for two) and accepted by every TLS client. */
#define _GNU_SOURCE
#include "egress_ca.h"

#include <errno.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int nsbox_egress_ca_error(struct nsbox_err *e, const char *what)
{
    char buf[256] = "";
    unsigned long code = ERR_get_error();
    if (code)
        ERR_error_string_n(code, buf, sizeof buf);
    ERR_clear_error();
    return nsbox_err_set(e, NSBOX_E_SYS, EPROTO, "header bindings: %s%s%s", what,
                         buf[0] ? ": " : "", buf);
}

static bool add_ext(X509 *x, X509V3_CTX *ctx, int nid, const char *value)
{
    X509_EXTENSION *ext = X509V3_EXT_conf_nid(NULL, ctx, nid, value);
    bool ok = ext && X509_add_ext(x, ext, -1);
    X509_EXTENSION_free(ext);
    return ok;
}

/* A certificate with a random 64-bit serial, valid from an hour ago for valid_seconds. */
static X509 *cert_new(const char *cn, EVP_PKEY *pub, uint64_t valid_seconds)
{
    X509 *x = X509_new();
    BIGNUM *bn = BN_new();
    bool ok = x && bn && X509_set_version(x, 2) && BN_rand(bn, 64, BN_RAND_TOP_ANY, 0) &&
              BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x)) &&
              X509_gmtime_adj(X509_getm_notBefore(x), -3600) &&
              X509_gmtime_adj(X509_getm_notAfter(x), (long)valid_seconds) &&
              X509_NAME_add_entry_by_txt(X509_get_subject_name(x), "CN", MBSTRING_ASC,
                                         (const unsigned char *)cn, -1, -1, 0) &&
              X509_set_pubkey(x, pub);
    BN_free(bn);
    if (!ok) {
        X509_free(x);
        return NULL;
    }
    return x;
}

/* "critical,permitted;DNS:a,permitted;DNS:b,excluded;IP:0.0.0.0/0.0.0.0,excluded;IP:::/::" */
static char *constraints(const char *const *names, size_t n)
{
    size_t len = 128;
    for (size_t i = 0; i < n; i++)
        len += strlen(names[i]) + 16;
    char *s = malloc(len), *p = s;
    if (!s)
        return NULL;
    p += sprintf(p, "critical");
    for (size_t i = 0; i < n; i++)
        p += sprintf(p, ",permitted;DNS:%s", names[i]);
    /* no address at all: a leaf for an IP literal is refused by the client */
    strcpy(p, ",excluded;IP:0.0.0.0/0.0.0.0,excluded;IP:::/::");
    return s;
}

static X509 *make_ca(const char *const *names, size_t n, const char *label, EVP_PKEY *key,
                     uint64_t valid_seconds)
{
    char cn[96];
    snprintf(cn, sizeof cn, "nsbox sandbox %s header bindings CA", label);
    X509 *x = cert_new(cn, key, valid_seconds);
    char *nc = constraints(names, n);
    X509V3_CTX ctx;
    bool ok = x && nc && X509_set_issuer_name(x, X509_get_subject_name(x));
    if (ok) {
        X509V3_set_ctx(&ctx, x, x, NULL, NULL, 0);
        ok = add_ext(x, &ctx, NID_basic_constraints, "critical,CA:TRUE,pathlen:0") &&
             add_ext(x, &ctx, NID_key_usage, "critical,keyCertSign,cRLSign") &&
             add_ext(x, &ctx, NID_subject_key_identifier, "hash") &&
             add_ext(x, &ctx, NID_name_constraints, nc) && X509_sign(x, key, EVP_sha256()) > 0;
    }
    free(nc);
    if (!ok) {
        X509_free(x);
        return NULL;
    }
    return x;
}

static X509 *make_leaf(const char *name, X509 *ca, EVP_PKEY *ca_key, EVP_PKEY *key,
                       uint64_t valid_seconds)
{
    X509 *x = cert_new(name, key, valid_seconds);
    char san[300];
    snprintf(san, sizeof san, "DNS:%s", name);
    X509V3_CTX ctx;
    bool ok = x && X509_set_issuer_name(x, X509_get_subject_name(ca));
    if (ok) {
        X509V3_set_ctx(&ctx, ca, x, NULL, NULL, 0);
        ok = add_ext(x, &ctx, NID_basic_constraints, "critical,CA:FALSE") &&
             add_ext(x, &ctx, NID_key_usage, "critical,digitalSignature") &&
             add_ext(x, &ctx, NID_ext_key_usage, "serverAuth") &&
             add_ext(x, &ctx, NID_authority_key_identifier, "keyid:always") &&
             add_ext(x, &ctx, NID_subject_alt_name, san) && X509_sign(x, ca_key, EVP_sha256()) > 0;
    }
    if (!ok) {
        X509_free(x);
        return NULL;
    }
    return x;
}

static char *pem_of(X509 *x)
{
    BIO *b = BIO_new(BIO_s_mem());
    char *data = NULL, *out = NULL;
    if (b && PEM_write_bio_X509(b, x)) {
        long n = BIO_get_mem_data(b, &data);
        if (n > 0 && (out = malloc((size_t)n + 1))) {
            memcpy(out, data, (size_t)n);
            out[n] = '\0';
        }
    }
    BIO_free(b);
    return out;
}

int nsbox_egress_ca_make(const char *const *names, size_t n, const char *label,
                         uint64_t valid_seconds, struct nsbox_egress_ca *out, struct nsbox_err *e)
{
    memset(out, 0, sizeof *out);
    EVP_PKEY *ca_key = EVP_EC_gen("P-256");
    X509 *ca = ca_key ? make_ca(names, n, label, ca_key, valid_seconds) : NULL;
    int r = -1;
    if (!ca) {
        nsbox_egress_ca_error(e, "cannot make the sandbox's CA");
        goto out;
    }
    out->key = EVP_EC_gen("P-256");
    out->leaf = calloc(n, sizeof *out->leaf);
    if (!out->key || !out->leaf) {
        nsbox_egress_ca_error(e, "cannot make the leaf key");
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        if (!(out->leaf[i] = make_leaf(names[i], ca, ca_key, out->key, valid_seconds))) {
            nsbox_egress_ca_error(e, "cannot sign a leaf certificate");
            goto out;
        }
        out->n = i + 1;
    }
    if (!(out->ca_pem = pem_of(ca))) {
        nsbox_egress_ca_error(e, "cannot write the CA's certificate");
        goto out;
    }
    r = 0;
out:
    /* the CA's key goes now: nothing can sign for these names any more */
    EVP_PKEY_free(ca_key);
    X509_free(ca);
    if (r < 0)
        nsbox_egress_ca_free(out);
    return r;
}

void nsbox_egress_ca_free(struct nsbox_egress_ca *ca)
{
    for (size_t i = 0; ca->leaf && i < ca->n; i++)
        X509_free(ca->leaf[i]);
    free(ca->leaf);
    EVP_PKEY_free(ca->key);
    free(ca->ca_pem);
    memset(ca, 0, sizeof *ca);
}
