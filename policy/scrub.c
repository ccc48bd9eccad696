/* Secrets out of a byte stream (policy/scrub.h). Pure. */
#define _GNU_SOURCE
#include "scrub.h"

#include <stdbool.h>
#include <string.h>

void nsbox_scrub_init(struct nsbox_scrub *s)
{
    memset(s, 0, offsetof(struct nsbox_scrub, tail));
}

static bool in_secrets(const struct nsbox_scrub *s, uint8_t c)
{
    for (size_t i = 0; i < s->n; i++)
        if (memchr(s->secret[i], c, s->len[i]))
            return true;
    return false;
}

/* '*' unless a secret holds it; then the first visible ASCII byte none holds, else DEL */
static void choose_mask(struct nsbox_scrub *s)
{
    s->mask = '*';
    for (unsigned c = 0x21; in_secrets(s, s->mask) && c <= 0x7f; c++)
        s->mask = (uint8_t)c;
}

static int add_one(struct nsbox_scrub *s, const char *p, size_t n)
{
    if (n < NSBOX_SCRUB_SECRET_MIN)
        return 0;
    if (n > NSBOX_SCRUB_SECRET_MAX || s->n == NSBOX_SCRUB_MAX)
        return -1;
    s->secret[s->n] = p;
    s->len[s->n++] = n;
    if (n > s->longest)
        s->longest = n;
    choose_mask(s);
    return 0;
}

int nsbox_scrub_add(struct nsbox_scrub *s, const char *secret)
{
    size_t n = strlen(secret);
    if (n < NSBOX_SCRUB_SECRET_MIN)
        return -1;
    const char *sp = strrchr(secret, ' ');
    if (add_one(s, secret, n) < 0)
        return -1;
    return sp ? add_one(s, sp + 1, n - (size_t)(sp + 1 - secret)) : 0;
}

static void mask(struct nsbox_scrub *s, uint8_t *p, size_t n)
{
    for (size_t i = 0; i < s->n; i++) {
        uint8_t *at = p, *end = p + n;
        while ((size_t)(end - at) >= s->len[i]) {
            uint8_t *hit = memmem(at, (size_t)(end - at), s->secret[i], s->len[i]);
            if (!hit)
                break;
            memset(hit, s->mask, s->len[i]);
            at = hit + s->len[i];
        }
    }
}

/* The longest tail of p[0..n) that is a proper prefix of a secret. */
static size_t prefix_tail(const struct nsbox_scrub *s, const uint8_t *p, size_t n)
{
    size_t max = s->longest ? s->longest - 1 : 0;
    for (size_t k = max < n ? max : n; k > 0; k--)
        for (size_t i = 0; i < s->n; i++)
            if (k < s->len[i] && !memcmp(p + n - k, s->secret[i], k))
                return k;
    return 0;
}

size_t nsbox_scrub_feed(struct nsbox_scrub *s, const uint8_t *in, size_t n, uint8_t *out)
{
    size_t total = s->held + n;
    memcpy(out, s->tail, s->held);
    memcpy(out + s->held, in, n);
    mask(s, out, total);
    size_t keep = prefix_tail(s, out, total);
    memcpy(s->tail, out + total - keep, keep);
    s->held = keep;
    return total - keep;
}

size_t nsbox_scrub_flush(struct nsbox_scrub *s, uint8_t *out)
{
    size_t n = s->held;
    memcpy(out, s->tail, n);
    s->held = 0;
    return n;
}
