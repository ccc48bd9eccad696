/* The upstream CA file, indexed by subject (sandbox/egress_castore.h). */
#define _GNU_SOURCE
#include "egress_castore.h"
#include "egress_ca.h"
#include "grow.h"

#include <errno.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct entry {
    unsigned long hash; /* of the subject name, as the hashed directory's file names have it */
    size_t off, len;    /* its DER in der[] */
    bool added;         /* parsed into the store already */
};

struct nsbox_egress_castore {
    pthread_mutex_t mu; /* connections verify in threads of their own */
    uint8_t *der;
    size_t der_len, der_cap;
    struct entry *e;
    size_t n, cap;
    X509_LOOKUP_METHOD *meth;
};

static unsigned long subject_hash(const X509_NAME *name)
{
    int ok = 0;
    unsigned long h = X509_NAME_hash_ex(name, NULL, NULL, &ok);
    return ok ? h : 0;
}

/* One certificate of the file: its DER appended, its subject's hash noted. */
static bool keep(struct nsbox_egress_castore *c, X509 *x)
{
    int len = i2d_X509_AUX(x, NULL);
    if (len <= 0 || nsbox_grow(&c->e, &c->cap, c->n, sizeof *c->e, 64, 0) < 0)
        return false;
    while (c->der_cap - c->der_len < (size_t)len) {
        size_t cap = c->der_cap ? c->der_cap * 2 : 64 * 1024;
        uint8_t *p = realloc(c->der, cap);
        if (!p)
            return false;
        c->der = p;
        c->der_cap = cap;
    }
    uint8_t *at = c->der + c->der_len;
    if (i2d_X509_AUX(x, &at) != len)
        return false;
    c->e[c->n++] = (struct entry){
        .hash = subject_hash(X509_get_subject_name(x)), .off = c->der_len, .len = (size_t)len};
    c->der_len += (size_t)len;
    return true;
}

/* The store asks for the certificates of a subject it does not hold: those of the file are
 * parsed and added (once each), and ret gets one from the store. From the store, not from what
 * this call parsed: a connection verifying at the same time may have added them first, and
 * its "nothing here" would fail a chain that is fine. */
static int by_subject(X509_LOOKUP *lu, X509_LOOKUP_TYPE type, const X509_NAME *name,
                      X509_OBJECT *ret)
{
    struct nsbox_egress_castore *c = X509_LOOKUP_get_method_data(lu);
    X509_STORE *store = X509_LOOKUP_get_store(lu);
    if (type != X509_LU_X509 || !c || !store)
        return 0;
    unsigned long h = subject_hash(name);
    bool any = false;
    pthread_mutex_lock(&c->mu);
    for (size_t i = 0; i < c->n; i++) {
        if (c->e[i].hash != h)
            continue;
        if (c->e[i].added) {
            any = true;
            continue;
        }
        const unsigned char *p = c->der + c->e[i].off;
        X509 *x = d2i_X509_AUX(NULL, &p, (long)c->e[i].len);
        if (x && X509_NAME_cmp(X509_get_subject_name(x), name) == 0 &&
            X509_STORE_add_cert(store, x))
            any = c->e[i].added = true;
        X509_free(x);
    }
    pthread_mutex_unlock(&c->mu);
    ERR_clear_error();
    int found = 0;
    if (any && X509_STORE_lock(store)) {
        X509_OBJECT *o =
            X509_OBJECT_retrieve_by_subject(X509_STORE_get0_objects(store), X509_LU_X509, name);
        found = o && X509_OBJECT_set1_X509(ret, X509_OBJECT_get0_X509(o));
        X509_STORE_unlock(store);
    }
    return found;
}

int nsbox_egress_castore_attach(X509_STORE *store, const char *path, const char *named,
                                struct nsbox_egress_castore **out, struct nsbox_err *e)
{
    *out = NULL;
    struct nsbox_egress_castore *c = calloc(1, sizeof *c);
    if (!c)
        return nsbox_err_sys(e, "header bindings");
    pthread_mutex_init(&c->mu, NULL);
    BIO *in = BIO_new_file(path, "r");
    X509 *x;
    bool ok = in != NULL;
    /* with the trust settings of "TRUSTED CERTIFICATE" blocks, as loading the file keeps them */
    while (ok && (x = PEM_read_bio_X509_AUX(in, NULL, NULL, NULL))) {
        ok = keep(c, x);
        X509_free(x);
    }
    BIO_free(in);
    uint8_t *fit = ok && c->der_len ? realloc(c->der, c->der_len) : NULL;
    if (fit)
        c->der = fit, c->der_cap = c->der_len;
    /* the end of the file reads as "no start line"; anything else is a malformed certificate */
    unsigned long last = ERR_peek_last_error();
    if (ok && ERR_GET_LIB(last) == ERR_LIB_PEM && ERR_GET_REASON(last) == PEM_R_NO_START_LINE)
        ERR_clear_error();
    else if (ok && last)
        ok = false;
    X509_LOOKUP *lu = NULL;
    /* the lookup added last: the store keeps it, and c, from then on */
    if (!ok || !c->n || !(c->meth = X509_LOOKUP_meth_new("nsbox upstream CA file")) ||
        !X509_LOOKUP_meth_set_get_by_subject(c->meth, by_subject) ||
        !(lu = X509_STORE_add_lookup(store, c->meth))) {
        nsbox_egress_castore_free(c);
        ERR_clear_error();
        return nsbox_err_set(e, NSBOX_E_INVALID, ENOENT,
                             "header bindings: cannot read the CA file %s that upstream "
                             "certificates are checked against (PEM certificates); fix: name "
                             "one with {\"network\": {\"upstream_ca\": PATH}} in the config",
                             named);
    }
    X509_LOOKUP_set_method_data(lu, c); /* it only stores the pointer */
    *out = c;
    return 0;
}

void nsbox_egress_castore_free(struct nsbox_egress_castore *c)
{
    if (!c)
        return;
    if (c->meth)
        X509_LOOKUP_meth_free(c->meth);
    pthread_mutex_destroy(&c->mu);
    free(c->der);
    free(c->e);
    free(c);
}
