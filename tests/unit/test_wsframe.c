/* WebSocket frame boundaries (policy/wsframe.c): every length form, masked or not, empty
 * frames, and the same ends however the stream is cut. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "wsframe.h"

#include <stdlib.h>
#include <string.h>

/* A frame's header for a payload of n bytes, masked or not: its length. */
static size_t header(uint8_t *h, uint64_t n, bool masked)
{
    size_t k = 2;
    h[0] = 0x82;
    uint8_t bit = masked ? 0x80 : 0;
    if (n < 126) {
        h[1] = bit | (uint8_t)n;
    } else if (n < 65536) {
        h[1] = bit | 126;
        h[2] = (uint8_t)(n >> 8);
        h[3] = (uint8_t)n;
        k = 4;
    } else {
        h[1] = bit | 127;
        for (int i = 0; i < 8; i++)
            h[2 + i] = (uint8_t)(n >> (56 - 8 * i));
        k = 10;
    }
    if (masked) {
        memcpy(h + k, "\x01\x02\x03\x04", 4);
        k += 4;
    }
    return k;
}

static void test_frame_ends_at_every_cut(void **state)
{
    (void)state;
    static const uint64_t sizes[] = {0, 5, 125, 126, 300, 65535, 65536, 70000};
    size_t total = 0, ends[32], n_ends = 0;
    uint8_t *stream = calloc(1, 500000);
    assert_non_null(stream);
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
        for (int masked = 0; masked < 2; masked++) {
            total += header(stream + total, sizes[i], masked) + sizes[i];
            memset(stream + total - sizes[i], 'B', sizes[i]);
            ends[n_ends++] = total;
        }
    static const size_t steps[] = {1, 2, 3, 7, 125, 4096, 500000};
    for (size_t s = 0; s < sizeof steps / sizeof *steps; s++) {
        struct nsbox_wsframe f;
        memset(&f, 0, sizeof f);
        size_t at = 0, seen = 0;
        while (at < total) {
            size_t k = total - at < steps[s] ? total - at : steps[s];
            bool end = false;
            size_t used = nsbox_wsframe_feed(&f, stream + at, k, &end);
            assert_true(used > 0 && used <= k);
            at += used;
            if (end) {
                assert_true(seen < n_ends);
                assert_int_equal(at, ends[seen++]);
            } else {
                assert_int_equal(used, k);
            }
        }
        assert_int_equal(seen, n_ends);
    }
    free(stream);
}

static void test_header_split_keeps_its_state(void **state)
{
    (void)state;
    uint8_t h[14];
    size_t k = header(h, 1u << 20, true);
    struct nsbox_wsframe f;
    memset(&f, 0, sizeof f);
    bool end = true;
    for (size_t i = 0; i < k; i++) {
        assert_int_equal(nsbox_wsframe_feed(&f, h + i, 1, &end), 1);
        assert_false(end);
    }
    assert_true(f.in_payload);
    assert_int_equal(f.left, 1u << 20);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_frame_ends_at_every_cut),
        cmocka_unit_test(test_header_split_keeps_its_state),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
