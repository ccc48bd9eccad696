/* Fuzz the stub resolver's reading of a query (policy/dnsquery.c), which init runs on every
 * packet a sandbox process sends to 127.0.0.1:53: any bytes. Besides crashes (ASan), what init
 * relies on: a name that parsed is one the reader's check passes, within its bounds, its answer
 * no longer than the query nor NSBOX_DNSQUERY_REPLY_MAX, and the table it goes into keeps at most
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
    if (nsbox_dnsquery_parse(pkt, size, &q) == 0) {
        uint8_t out[NSBOX_DNSQUERY_REPLY_MAX];
        size_t n = nsbox_dnsquery_refused(pkt, &q, out);
        if (!nsbox_dnsquery_name_valid(q.name) || n > size || n > sizeof out || n < 17 ||
            (out[3] & 0x0f) != 5 || !(out[2] & 0x80))
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
