/* Secrets out of a response stream (policy/scrub.c): every occurrence masked, whatever the
 * reads' boundaries; only a possible start of a secret held back; the token of "Scheme token"
 * masked alone too. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "scrub.h"

#include <stdlib.h>
#include <string.h>

static struct nsbox_scrub S;
static uint8_t out[1 << 16];

/* The whole text through the scrubber in reads of `step` bytes. */
static char *through(const char *text, size_t step)
{
    size_t n = strlen(text), k = 0;
    char *all = calloc(1, n + 1);
    for (size_t at = 0; at < n; at += step) {
        size_t m = n - at < step ? n - at : step;
        size_t w = nsbox_scrub_feed(&S, (const uint8_t *)text + at, m, out);
        memcpy(all + k, out, w);
        k += w;
    }
    size_t w = nsbox_scrub_flush(&S, out);
    memcpy(all + k, out, w);
    k += w;
    assert_int_equal(k, n); /* as long as the input: Content-Length stays right */
    return all;
}

static int setup(void **state)
{
    (void)state;
    nsbox_scrub_init(&S);
    return 0;
}

static void test_every_boundary(void **state)
{
    (void)state;
    assert_int_equal(nsbox_scrub_add(&S, "Bearer ghp_ABCDEFGH12345"), 0);
    const char *in = "{\"auth\": \"Bearer ghp_ABCDEFGH12345\", \"token\": \"ghp_ABCDEFGH12345\", "
                     "\"near\": \"ghp_ABCDEFGH1234X\"}";
    const char *want = "{\"auth\": \"************************\", \"token\": \"*****************\", "
                       "\"near\": \"ghp_ABCDEFGH1234X\"}";
    for (size_t step = 1; step <= strlen(in); step++) {
        char *got = through(in, step);
        assert_string_equal(got, want);
        free(got);
    }
}

static void test_holds_only_a_possible_start(void **state)
{
    (void)state;
    assert_int_equal(nsbox_scrub_add(&S, "sk-0123456789"), 0);
    /* an event that cannot begin a secret passes at once, whole */
    assert_int_equal(nsbox_scrub_feed(&S, (const uint8_t *)"data: one\n\n", 11, out), 11);
    assert_memory_equal(out, "data: one\n\n", 11);
    /* "sk-01" could be the start: held, then let go when it is not */
    assert_int_equal(nsbox_scrub_feed(&S, (const uint8_t *)"x sk-01", 7, out), 2);
    assert_int_equal(nsbox_scrub_feed(&S, (const uint8_t *)"Z\n", 2, out), 7);
    assert_memory_equal(out, "sk-01Z\n", 7);
    /* and a stream that ends inside a possible start gets it at the end */
    assert_int_equal(nsbox_scrub_feed(&S, (const uint8_t *)"sk-0", 4, out), 0);
    assert_int_equal(nsbox_scrub_flush(&S, out), 4);
}

static void test_limits(void **state)
{
    (void)state;
    assert_int_equal(nsbox_scrub_add(&S, "short"), -1);
    char *big = malloc(NSBOX_SCRUB_SECRET_MAX + 2);
    memset(big, 'a', NSBOX_SCRUB_SECRET_MAX + 1);
    big[NSBOX_SCRUB_SECRET_MAX + 1] = '\0';
    assert_int_equal(nsbox_scrub_add(&S, big), -1);
    free(big);
    for (int i = 0; i < NSBOX_SCRUB_MAX; i++)
        assert_int_equal(nsbox_scrub_add(&S, "0123456789"), 0);
    assert_int_equal(nsbox_scrub_add(&S, "0123456789"), -1);
    /* a scheme whose token is short: the whole value only */
    nsbox_scrub_init(&S);
    assert_int_equal(nsbox_scrub_add(&S, "Token abc123"), 0);
    assert_int_equal(S.n, 1);
    /* a secret with '*' in it: masked with a byte it does not hold, or the masks next to
     * its other bytes would spell it again */
    nsbox_scrub_init(&S);
    assert_int_equal(nsbox_scrub_add(&S, "a*******"), 0);
    char *got = through("xaa*******x", 3);
    assert_null(strstr(got, "a*******"));
    assert_string_equal(got, "xa!!!!!!!!x");
    free(got);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_every_boundary, setup),
        cmocka_unit_test_setup(test_holds_only_a_possible_start, setup),
        cmocka_unit_test_setup(test_limits, setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
