/* Fuzz the pure half of rootfs/safepath.c: nsbox_sp_validate and nsbox_sp_normalize.
 *
 * The input is a path as a sandbox would send it (any bytes, NULs included). Checked, besides
 * the sanitizers' memory errors:
 *   - validate agrees with an independent statement of its rules;
 *   - normalize succeeds exactly on the paths validate accepts (plus ""), and its result has
 *     no "..", ".", empty component, leading or trailing '/', is never longer than the input,
 *     equals what a separately written stack model computes, is a fixed point, does not depend
 *     on a leading '/', and fits a buffer of exactly its size (and not one byte less). */
#include "cstring.h"
#include "safepath.h"

#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c)) abort();                                                                         \
    } while (0)

static bool rules_accept(const uint8_t *p, size_t n)
{
    if (n == 0 || n >= PATH_MAX || memchr(p, 0, n)) return false;
    size_t run = 0;
    for (size_t i = 0; i < n; i++) {
        run = p[i] == '/' ? 0 : run + 1;
        if (run > NAME_MAX) return false;
    }
    return true;
}

/* The model: a stack of (offset, length) components, popped by "..", joined at the end. */
static void model_normalize(const char *in, char *out)
{
    static size_t off[PATH_MAX], len[PATH_MAX];
    size_t depth = 0, i = 0, n = strlen(in);
    while (i < n) {
        size_t s = i;
        while (i < n && in[i] != '/')
            i++;
        size_t l = i - s;
        if (l == 2 && in[s] == '.' && in[s + 1] == '.') {
            if (depth > 0) depth--;
        } else if (l > 0 && !(l == 1 && in[s] == '.')) {
            off[depth] = s;
            len[depth] = l;
            depth++;
        }
        i++;
    }
    size_t o = 0;
    for (size_t d = 0; d < depth; d++) {
        if (d) out[o++] = '/';
        memcpy(out + o, in + off[d], len[d]);
        o += len[d];
    }
    if (o == 0) out[o++] = '.';
    out[o] = '\0';
}

static void check_shape(const char *out)
{
    size_t n = strlen(out);
    CHECK(n > 0);
    if (strcmp(out, ".") == 0) return;
    CHECK(out[0] != '/' && out[n - 1] != '/');
    CHECK(!strstr(out, "//"));
    /* no "." or ".." component anywhere: the result can never climb above the root */
    const char *c = out;
    for (;;) {
        const char *slash = strchr(c, '/');
        size_t l = slash ? (size_t)(slash - c) : strlen(c);
        CHECK(l > 0 && l <= NAME_MAX);
        CHECK(!(l == 1 && c[0] == '.'));
        CHECK(!(l == 2 && c[0] == '.' && c[1] == '.'));
        if (!slash) break;
        c = slash + 1;
    }
}

/* normalize sees a C string: what the bytes are up to the first NUL */
static void check_normalize(const char *in)
{
    struct nsbox_err e;
    static char abs_in[PATH_MAX + 48];
    static char out[PATH_MAX], out2[PATH_MAX], model[PATH_MAX + 32];
    size_t len = strlen(in);

    int r = nsbox_sp_normalize(in, out, sizeof out, &e);
    bool ok = len == 0 || rules_accept((const uint8_t *)in, len);
    CHECK((r >= 0) == ok);
    if (r < 0) return;
    CHECK((size_t)r == strlen(out));
    CHECK((size_t)r <= (len > 0 ? len : 1));
    check_shape(out);

    model_normalize(in, model);
    CHECK(strcmp(out, model) == 0);

    /* a fixed point */
    CHECK(nsbox_sp_normalize(out, out2, sizeof out2, &e) == r);
    CHECK(strcmp(out, out2) == 0);

    /* "/" in front changes nothing: absolute paths are relative to the root */
    if (len + 1 < PATH_MAX) {
        abs_in[0] = '/';
        memcpy(abs_in + 1, in, len + 1);
        CHECK(nsbox_sp_normalize(abs_in, out2, sizeof out2, &e) == r);
        CHECK(strcmp(out, out2) == 0);
    }

    /* the output buffer needs exactly the result and its NUL */
    char *exact = malloc((size_t)r + 1);
    CHECK(exact);
    CHECK(nsbox_sp_normalize(in, exact, (size_t)r + 1, &e) == r);
    CHECK(strcmp(exact, out) == 0);
    CHECK(nsbox_sp_normalize(in, exact, (size_t)r, &e) == -1);
    free(exact);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct nsbox_err e;

    /* validate on the raw bytes, NULs and all */
    int v = nsbox_sp_validate((const char *)data, size, &e);
    CHECK(v == 0 || v == -1);
    CHECK((v == 0) == rules_accept(data, size));
    if (v < 0) CHECK(e.code == NSBOX_E_INVALID && e.msg[0] != '\0');

    if (size > PATH_MAX + 16) return 0;
    char *in = cstring_dup(data, size);
    check_normalize(in);
    free(in);
    return 0;
}
