/* Fuzz the ClientHello parser (policy/tlshello.c) with any bytes, as a sandbox may send them to
 * the egress helper. Besides crashes (ASan, UBSan), it checks what the helper relies on: a name
 * is a valid host name, a verdict on a complete hello does not change with what follows it,
 * "more" is never the answer once the input bound is reached, and the reader of input that
 * grows (nsbox_tlshello_parse_more, fed prefixes as reads would make them) says what the
 * one-shot reader says of each. */
#include "tlshello.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_more(const uint8_t *data, size_t size)
{
    static struct nsbox_tlshello a, b;
    size_t step = size ? 1 + data[size - 1] % 13 : 1;
    memset(&a, 0, sizeof a);
    for (size_t k = step < size ? step : size; k <= size && size <= 8192; k += step) {
        enum nsbox_tlshello_verdict va = nsbox_tlshello_parse_more(data, k, &a);
        enum nsbox_tlshello_verdict vb = nsbox_tlshello_parse(data, k, &b);
        if (va != vb || a.consumed != b.consumed ||
            (va == NSBOX_TLSHELLO_SNI && strcmp(a.name, b.name)) ||
            (va != NSBOX_TLSHELLO_MORE && !a.why != !b.why))
            abort();
        if (va != NSBOX_TLSHELLO_MORE)
            return;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct nsbox_tlshello h, again;
    char check[NSBOX_TLSHELLO_NAME_MAX + 1];
    check_more(data, size);
    enum nsbox_tlshello_verdict v = nsbox_tlshello_parse(data, size, &h);

    if (v == NSBOX_TLSHELLO_MORE && size >= NSBOX_TLSHELLO_INPUT_MAX)
        abort();
    if (v == NSBOX_TLSHELLO_SNI) {
        size_t n = strlen(h.name);
        if (nsbox_tlshello_check_name((const uint8_t *)h.name, n, check) < 0 ||
            strcmp(check, h.name) != 0)
            abort();
    }
    if (v == NSBOX_TLSHELLO_SNI || v == NSBOX_TLSHELLO_NO_SNI) {
        if (h.consumed == 0 || h.consumed > size)
            abort();
        /* the same verdict from the hello alone, and "more" from one byte less */
        if (nsbox_tlshello_parse(data, h.consumed, &again) != v ||
            strcmp(again.name, h.name) != 0)
            abort();
        if (nsbox_tlshello_parse(data, h.consumed - 1, &again) != NSBOX_TLSHELLO_MORE)
            abort();
    }
    if ((v == NSBOX_TLSHELLO_BAD || v == NSBOX_TLSHELLO_NOT_TLS) && !h.why)
        abort();
    return 0;
}
