/* Fuzz the stub resolver's reading of a query (policy/dnsquery.c), which init runs on every
 * packet a sandbox process sends to 127.0.0.1:53: any bytes. Besides crashes (ASan), what init
 * relies on: every query answered, no longer than itself nor NSBOX_DNSQUERY_REPLY_MAX, a name
 * kept is one the reader's check passes, and the table it goes into keeps at most
 * NSBOX_DNSQUERY_NAMES names that all pass the check. */
#include "dnsquery.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct nsbox_dnsquery_table table;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *pkt = malloc(size ? size : 1); /* exactly size bytes: ASan sees a read past them */
    if (!pkt)
        return 0;
    memcpy(pkt, data, size);
    struct nsbox_dnsquery q;
    uint8_t out[NSBOX_DNSQUERY_REPLY_MAX];
    size_t n = nsbox_dnsquery_answer(pkt, size, &q, out);
    /* every query answered (a header without QR), never longer than it */
    if (n > size || n > sizeof out || (n == 0) != (size < 12 || (pkt[2] & 0x80)) ||
        (n && (!(out[2] & 0x80) || (n > 12) != (q.question_end != 0))))
        abort();
    if (q.name[0]) {
        if (!nsbox_dnsquery_name_valid(q.name) || n < 17 || (out[3] & 0x0f) != 3) /* NXDOMAIN */
            abort();
        nsbox_dnsquery_table_add(&table, q.name);
        if (table.n > NSBOX_DNSQUERY_NAMES)
            abort();
        if (size & 1) {
            char names[NSBOX_DNSQUERY_NAMES][NSBOX_DNSQUERY_NAME_MAX + 1];
            size_t k = nsbox_dnsquery_table_take(&table, names);
            if (k > NSBOX_DNSQUERY_NAMES)
                abort();
            for (size_t i = 0; i < k; i++)
                if (!nsbox_dnsquery_name_valid(names[i]))
                    abort();
        }
    }
    free(pkt);
    return 0;
}
