/* libarchive and libcrypto, loaded on first call. Only image imports and pulls use them (the
 * layer tar streams and the blob digests in rootfs/oci_*.c), and libcrypto a sandbox with
 * header bindings (its CA and the helper's TLS, sandbox/egress_ca.c and egress_tls.c; the CA is
 * made in the parent, so the library is loaded before the helper's seccomp filter), but
 * linked, every `nsbox create`, `rm` and `exec` maps them and their dependencies (libxml2,
 * ICU, libstdc++, nettle, the compressors: 17 libraries) and binds their symbols at start-up, a
 * third of a command line process's CPU (docs/benchmarks.md, "Where a create's time goes").
 *
 * This file defines the functions the image code and the egress code call under their own
 * names, so that code stays written against the libraries' documented interfaces; each
 * definition finds the real function with dlsym() once. The definitions are hidden: the
 * executable never offers them to a shared library, so the loaded libraries' own calls between
 * their functions stay theirs.
 * When a library cannot be loaded (a broken install: both are dependencies of the package), a
 * call fails as the library reports failure (NULL, ARCHIVE_FATAL, 0), and archive_error_string()
 * says why; nsbox_imagelibs_load() says so before an import starts. ISA-L (libisal2), a faster
 * inflate for gzip layers, is optional: where it cannot be loaded, or is another release than the
 * build's (policy/isalver.h), libarchive inflates them. */
#define _GNU_SOURCE
/* The C library's headers first, outside the pragma: a hidden reference to snprintf would make
 * the whole link's snprintf hidden, and then libc could not provide it. */
#include <dlfcn.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/types.h>
#include <time.h>

#include <isa-l.h>

#include "imagelibs.h"

#include "dynlib.h"
#include "isalver.h"

#pragma GCC visibility push(hidden)
#include <archive.h>
#include <archive_entry.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#pragma GCC visibility pop

static struct nsbox_dynlib archive_lib =
    NSBOX_DYNLIB_INIT("libarchive.so.13", "libarchive13", RTLD_NOW);
static struct nsbox_dynlib crypto_lib = NSBOX_DYNLIB_INIT("libcrypto.so.3", "libssl3", RTLD_NOW);

static struct nsbox_dynlib isal_lib = NSBOX_DYNLIB_INIT("libisal.so.2", "libisal2", RTLD_NOW);
static struct nsbox_imagelibs_isal isal_fns;
static const struct nsbox_imagelibs_isal *isal_usable;
static char isal_why[PATH_MAX + 160];
static pthread_once_t isal_once = PTHREAD_ONCE_INIT;

/* The loaded file's real name (the soname is a symbolic link to it): ISA-L exports no function
 * that says its release, and its file name does. */
static void imagelibs_isal_check(void)
{
    const struct nsbox_dynlib_sym syms[] = {{(void **)&isal_fns.init, "isal_inflate_init"},
                                            {(void **)&isal_fns.reset, "isal_inflate_reset"},
                                            {(void **)&isal_fns.inflate, "isal_inflate"}};
    if (nsbox_dynlib_load(&isal_lib, syms, sizeof syms / sizeof syms[0], "ISA-L", NULL) < 0) {
        snprintf(isal_why, sizeof isal_why, "apt-get install libisal2 for ISA-L's, twice as fast");
        return;
    }
    struct link_map *map = NULL;
    char real[PATH_MAX];
    if (dlinfo(isal_lib.handle, RTLD_DI_LINKMAP, &map) < 0 || !map || !map->l_name ||
        !realpath(map->l_name, real)) {
        snprintf(isal_why, sizeof isal_why,
                 "ISA-L not used: the file libisal.so.2 was loaded from is not found");
        return;
    }
    if (!nsbox_isalver_matches(real, ISAL_MAJOR_VERSION, ISAL_MINOR_VERSION)) {
        snprintf(isal_why, sizeof isal_why,
                 "ISA-L not used: %.*s is not the release %d.%d nsbox was built with, whose "
                 "inflate state may differ; fix: install libisal2 %d.%d or rebuild nsbox",
                 PATH_MAX, real, ISAL_MAJOR_VERSION, ISAL_MINOR_VERSION, ISAL_MAJOR_VERSION,
                 ISAL_MINOR_VERSION);
        return;
    }
    isal_usable = &isal_fns;
}

const struct nsbox_imagelibs_isal *nsbox_imagelibs_isal(void)
{
    pthread_once(&isal_once, imagelibs_isal_check);
    return isal_usable;
}

const char *nsbox_imagelibs_isal_why(void)
{
    pthread_once(&isal_once, imagelibs_isal_check);
    return isal_why;
}

int nsbox_imagelibs_load(struct nsbox_err *e)
{
    if (!nsbox_dynlib_sym(&archive_lib, "archive_read_new"))
        return nsbox_dynlib_fail(&archive_lib, "images cannot be imported", e);
    if (!nsbox_dynlib_sym(&crypto_lib, "EVP_sha256"))
        return nsbox_dynlib_fail(&crypto_lib, "images cannot be imported", e);
    return 0;
}

/* One forwarding definition: the real function's address is looked up at the first call and
 * kept (an atomic pointer: two threads may both look it up, and find the same address). */
#define FWD(ret, name, params, args, fail)                                                         \
    ret name params                                                                                \
    {                                                                                              \
        static ret(*fn) params;                                                                    \
        ret(*f) params = __atomic_load_n(&fn, __ATOMIC_ACQUIRE);                                   \
        if (!f) {                                                                                  \
            f = (ret(*) params)nsbox_dynlib_sym(LIB, #name);                                       \
            if (!f)                                                                                \
                return fail;                                                                       \
            __atomic_store_n(&fn, f, __ATOMIC_RELEASE);                                            \
        }                                                                                          \
        return f args;                                                                             \
    }

#define A struct archive *a
#define E struct archive_entry *en
#define LIB (&archive_lib)
FWD(struct archive *, archive_read_new, (void), (), NULL)
FWD(int, archive_read_free, (A), (a), ARCHIVE_FATAL)
FWD(int, archive_read_support_filter_gzip, (A), (a), ARCHIVE_FATAL)
FWD(int, archive_read_support_filter_zstd, (A), (a), ARCHIVE_FATAL)
FWD(int, archive_read_support_format_raw, (A), (a), ARCHIVE_FATAL)
FWD(int, archive_read_support_format_tar, (A), (a), ARCHIVE_FATAL)
FWD(int, archive_read_open,
    (A, void *data, archive_open_callback *o, archive_read_callback *r, archive_close_callback *c),
    (a, data, o, r, c), ARCHIVE_FATAL)
FWD(int, archive_read_open_fd, (A, int fd, size_t block), (a, fd, block), ARCHIVE_FATAL)
FWD(int, archive_read_next_header, (A, struct archive_entry **out), (a, out), ARCHIVE_FATAL)
FWD(la_ssize_t, archive_read_data, (A, void *buf, size_t n), (a, buf, n), ARCHIVE_FATAL)
FWD(int, archive_read_data_block, (A, const void **buf, size_t *n, la_int64_t *off),
    (a, buf, n, off), ARCHIVE_FATAL)
FWD(int, archive_errno, (A), (a), -1)
FWD(const char *, archive_error_string, (A), (a), nsbox_dynlib_why(LIB))
FWD(__LA_MODE_T, archive_entry_filetype, (E), (en), 0)
FWD(__LA_MODE_T, archive_entry_perm, (E), (en), 0)
FWD(la_int64_t, archive_entry_uid, (E), (en), 0)
FWD(la_int64_t, archive_entry_gid, (E), (en), 0)
FWD(la_int64_t, archive_entry_size, (E), (en), 0)
FWD(time_t, archive_entry_mtime, (E), (en), 0)
FWD(long, archive_entry_mtime_nsec, (E), (en), 0)
FWD(int, archive_entry_mtime_is_set, (E), (en), 0)
FWD(const char *, archive_entry_pathname, (E), (en), NULL)
FWD(const char *, archive_entry_hardlink, (E), (en), NULL)
FWD(const char *, archive_entry_symlink, (E), (en), NULL)

/* Variadic: formatted here, passed on as one string. */
void archive_set_error(struct archive *a, int err, const char *fmt, ...)
{
    static void (*fn)(struct archive *, int, const char *, ...);
    void (*f)(struct archive *, int, const char *, ...) = __atomic_load_n(&fn, __ATOMIC_ACQUIRE);
    if (!f) {
        f = (void (*)(struct archive *, int, const char *, ...))nsbox_dynlib_sym(
            LIB, "archive_set_error");
        if (!f)
            return;
        __atomic_store_n(&fn, f, __ATOMIC_RELEASE);
    }
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    f(a, err, "%s", msg);
}
#undef LIB
#undef A
#undef E

#define LIB (&crypto_lib)
FWD(EVP_MD_CTX *, EVP_MD_CTX_new, (void), (), NULL)
FWD(const EVP_MD *, EVP_sha256, (void), (), NULL)
FWD(int, EVP_DigestInit_ex, (EVP_MD_CTX * c, const EVP_MD *t, ENGINE *i), (c, t, i), 0)
FWD(int, EVP_DigestUpdate, (EVP_MD_CTX * c, const void *d, size_t n), (c, d, n), 0)
FWD(int, EVP_DigestFinal_ex, (EVP_MD_CTX * c, unsigned char *md, unsigned int *s), (c, md, s), 0)
FWD(int, EVP_Digest,
    (const void *d, size_t n, unsigned char *md, unsigned int *s, const EVP_MD *t, ENGINE *i),
    (d, n, md, s, t, i), 0)

void EVP_MD_CTX_free(EVP_MD_CTX *c)
{
    static void (*fn)(EVP_MD_CTX *);
    void (*f)(EVP_MD_CTX *) = __atomic_load_n(&fn, __ATOMIC_ACQUIRE);
    if (!c)
        return;
    if (!f) {
        f = (void (*)(EVP_MD_CTX *))nsbox_dynlib_sym(LIB, "EVP_MD_CTX_free");
        if (!f)
            return;
        __atomic_store_n(&fn, f, __ATOMIC_RELEASE);
    }
    f(c);
}
#undef LIB

/* The egress helper's CA and TLS (sandbox/egress_ca.c, egress_tls.c; libssl itself is
 * sandbox/egress_ssl.c's, and its libcrypto is this one: one soname, one copy in the process). */
#define FWDV(name, params, args)                                                                   \
    void name params                                                                               \
    {                                                                                              \
        static void(*fn) params;                                                                   \
        void(*f) params = __atomic_load_n(&fn, __ATOMIC_ACQUIRE);                                  \
        if (!f) {                                                                                  \
            f = (void(*) params)nsbox_dynlib_sym(LIB, #name);                                      \
            if (!f)                                                                                \
                return;                                                                            \
            __atomic_store_n(&fn, f, __ATOMIC_RELEASE);                                            \
        }                                                                                          \
        f args;                                                                                    \
    }

#define LIB (&crypto_lib)
FWDV(BIO_clear_flags, (BIO * b, int flags), (b, flags))
FWDV(BIO_set_flags, (BIO * b, int flags), (b, flags))
FWDV(BIO_set_data, (BIO * b, void *ptr), (b, ptr))
FWDV(BIO_set_init, (BIO * b, int init), (b, init))
FWDV(BIO_meth_free, (BIO_METHOD * m), (m))
FWDV(BN_free, (BIGNUM * a), (a))
FWDV(ERR_clear_error, (void), ())
FWDV(ERR_error_string_n, (unsigned long e, char *buf, size_t len), (e, buf, len))
FWDV(EVP_PKEY_free, (EVP_PKEY * k), (k))
FWDV(X509_EXTENSION_free, (X509_EXTENSION * x), (x))
FWDV(X509_free, (X509 * x), (x))
FWDV(X509_LOOKUP_meth_free, (X509_LOOKUP_METHOD * m), (m))
FWDV(X509V3_set_ctx,
     (X509V3_CTX * ctx, X509 *issuer, X509 *subject, X509_REQ *req, X509_CRL *crl, int flags),
     (ctx, issuer, subject, req, crl, flags))
FWD(long, BIO_ctrl, (BIO * b, int cmd, long larg, void *parg), (b, cmd, larg, parg), 0)
FWD(int, BIO_free, (BIO * b), (b), 0)
FWD(void *, BIO_get_data, (BIO * b), (b), NULL)
FWD(int, BIO_get_new_index, (void), (), -1)
FWD(BIO_METHOD *, BIO_meth_new, (int type, const char *name), (type, name), NULL)
FWD(int, BIO_meth_set_create, (BIO_METHOD * m, int (*cb)(BIO *)), (m, cb), 0)
FWD(int, BIO_meth_set_ctrl, (BIO_METHOD * m, long (*cb)(BIO *, int, long, void *)), (m, cb), 0)
FWD(int, BIO_meth_set_read_ex, (BIO_METHOD * m, int (*cb)(BIO *, char *, size_t, size_t *)),
    (m, cb), 0)
FWD(int, BIO_meth_set_write_ex, (BIO_METHOD * m, int (*cb)(BIO *, const char *, size_t, size_t *)),
    (m, cb), 0)
FWD(BIO *, BIO_new, (const BIO_METHOD *t), (t), NULL)
FWD(const BIO_METHOD *, BIO_s_mem, (void), (), NULL)
FWD(BIGNUM *, BN_new, (void), (), NULL)
FWD(int, BN_rand, (BIGNUM * r, int bits, int top, int bottom), (r, bits, top, bottom), 0)
FWD(ASN1_INTEGER *, BN_to_ASN1_INTEGER, (const BIGNUM *bn, ASN1_INTEGER *ai), (bn, ai), NULL)
FWD(unsigned long, ERR_get_error, (void), (), 0)
FWD(int, PEM_write_bio_X509, (BIO * b, const X509 *x), (b, x), 0)
FWD(X509_EXTENSION *, X509V3_EXT_conf_nid,
    (LHASH_OF(CONF_VALUE) * conf, X509V3_CTX *ctx, int nid, const char *value),
    (conf, ctx, nid, value), NULL)
FWD(int, X509_NAME_add_entry_by_txt,
    (X509_NAME * n, const char *field, int type, const unsigned char *bytes, int len, int loc,
     int set),
    (n, field, type, bytes, len, loc, set), 0)
FWD(int, X509_add_ext, (X509 * x, X509_EXTENSION *ex, int loc), (x, ex, loc), 0)
FWD(ASN1_INTEGER *, X509_get_serialNumber, (X509 * x), (x), NULL)
FWD(X509_NAME *, X509_get_subject_name, (const X509 *x), (x), NULL)
FWD(ASN1_TIME *, X509_getm_notAfter, (const X509 *x), (x), NULL)
FWD(ASN1_TIME *, X509_getm_notBefore, (const X509 *x), (x), NULL)
FWD(ASN1_TIME *, X509_gmtime_adj, (ASN1_TIME * t, long adj), (t, adj), NULL)
FWD(X509 *, X509_new, (void), (), NULL)
FWD(int, X509_set_issuer_name, (X509 * x, const X509_NAME *n), (x, n), 0)
FWD(int, X509_set_pubkey, (X509 * x, EVP_PKEY *k), (x, k), 0)
FWD(int, X509_set_version, (X509 * x, long v), (x, v), 0)
FWD(int, X509_sign, (X509 * x, EVP_PKEY *k, const EVP_MD *md), (x, k, md), 0)
FWD(const char *, X509_verify_cert_error_string, (long n), (n), nsbox_dynlib_why(LIB))
FWD(X509 *, d2i_X509, (X509 * *a, const unsigned char **in, long len), (a, in, len), NULL)
FWD(X509 *, d2i_X509_AUX, (X509 * *a, const unsigned char **in, long len), (a, in, len), NULL)
FWD(int, i2d_X509_AUX, (const X509 *x, unsigned char **out), (x, out), -1)
FWD(BIO *, BIO_new_file, (const char *path, const char *mode), (path, mode), NULL)
FWD(X509 *, PEM_read_bio_X509_AUX, (BIO * b, X509 **x, pem_password_cb *cb, void *u), (b, x, cb, u),
    NULL)
FWD(unsigned long, ERR_peek_last_error, (void), (), 0)
FWD(unsigned long, X509_NAME_hash_ex,
    (const X509_NAME *n, OSSL_LIB_CTX *ctx, const char *propq, int *ok), (n, ctx, propq, ok), 0)
FWD(int, X509_NAME_cmp, (const X509_NAME *a, const X509_NAME *b), (a, b), -2)
FWD(int, X509_STORE_add_cert, (X509_STORE * s, X509 *x), (s, x), 0)
FWD(X509_LOOKUP *, X509_STORE_add_lookup, (X509_STORE * s, X509_LOOKUP_METHOD *m), (s, m), NULL)
FWD(X509_LOOKUP_METHOD *, X509_LOOKUP_meth_new, (const char *name), (name), NULL)
FWD(int, X509_LOOKUP_meth_set_get_by_subject,
    (X509_LOOKUP_METHOD * m, X509_LOOKUP_get_by_subject_fn cb), (m, cb), 0)
FWD(int, X509_LOOKUP_set_method_data, (X509_LOOKUP * lu, void *data), (lu, data), 0)
FWD(void *, X509_LOOKUP_get_method_data, (const X509_LOOKUP *lu), (lu), NULL)
FWD(X509_STORE *, X509_LOOKUP_get_store, (const X509_LOOKUP *lu), (lu), NULL)
FWD(int, X509_OBJECT_set1_X509, (X509_OBJECT * o, X509 *x), (o, x), 0)
FWD(int, X509_STORE_lock, (X509_STORE * s), (s), 0)
FWD(int, X509_STORE_unlock, (X509_STORE * s), (s), 0)
FWD(STACK_OF(X509_OBJECT) *, X509_STORE_get0_objects, (const X509_STORE *s), (s), NULL)
FWD(X509_OBJECT *, X509_OBJECT_retrieve_by_subject,
    (STACK_OF(X509_OBJECT) * h, X509_LOOKUP_TYPE type, const X509_NAME *name), (h, type, name),
    NULL)
FWD(X509 *, X509_OBJECT_get0_X509, (const X509_OBJECT *o), (o), NULL)
FWD(EVP_PKEY *, d2i_PrivateKey, (int type, EVP_PKEY **a, const unsigned char **in, long len),
    (type, a, in, len), NULL)
FWD(int, i2d_X509, (const X509 *x, unsigned char **out), (x, out), -1)
FWD(int, i2d_PrivateKey, (const EVP_PKEY *k, unsigned char **out), (k, out), -1)

/* Variadic: only EVP_EC_gen's form (one curve name after the type) is called. */
EVP_PKEY *EVP_PKEY_Q_keygen(OSSL_LIB_CTX *ctx, const char *propq, const char *type, ...)
{
    static EVP_PKEY *(*fn)(OSSL_LIB_CTX *, const char *, const char *, ...);
    EVP_PKEY *(*f)(OSSL_LIB_CTX *, const char *, const char *, ...) =
        __atomic_load_n(&fn, __ATOMIC_ACQUIRE);
    if (!f) {
        f = (EVP_PKEY * (*)(OSSL_LIB_CTX *, const char *, const char *, ...))
            nsbox_dynlib_sym(LIB, "EVP_PKEY_Q_keygen");
        if (!f)
            return NULL;
        __atomic_store_n(&fn, f, __ATOMIC_RELEASE);
    }
    va_list ap;
    va_start(ap, type);
    const char *curve = va_arg(ap, const char *);
    va_end(ap);
    return f(ctx, propq, type, curve);
}
#undef LIB
