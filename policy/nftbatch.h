/* One sandbox's set elements as an nf_tables netlink batch (docs/network.md, docs/decisions.md
 * "Network"): the messages sandbox/net_nft.c sends on its own netfilter socket to add or remove
 * a sandbox, and the reading of the kernel's replies. Pure: bytes in, bytes out; unit tested
 * without root.
 *
 * The batch is one kernel transaction (BATCH_BEGIN, one NEWSETELEM or DELSETELEM per set,
 * BATCH_END): all of it is committed or none. It carries the same elements, in the same
 * encoding, as libnftables would send for the text
 *
 *   create element inet nsbox sb_slot { <subnet> comment "<id>" }   (NLM_F_EXCL: EEXIST if taken)
 *   add element inet nsbox sb_src { "<ifname>" . <sandbox address> }
 *   ... (sb_all, sb_dns, sb_cidr, sb_tcp as the plan requires)
 *
 * and `delete element` of the same keys to remove them. The table and its sets are created
 * with libnftables (nsbox_netplan_table_text); only their layouts are needed here:
 * ifname is 16 bytes, zero padded; ipv4_addr 4 bytes and inet_service 2 bytes, both in network
 * order; each field of a concatenation takes a multiple of 4 bytes; sb_cidr (concatenation with
 * flags interval) takes a start key and an end key (the range's last address). */
#ifndef NSBOX_NFTBATCH_H
#define NSBOX_NFTBATCH_H

#include "netplan.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NSBOX_NFTBATCH_MAX_MSGS 6 /* one per set */

struct nsbox_nftbatch {
    unsigned char *buf; /* the messages, ready for one sendmsg */
    size_t len, cap;
    uint32_t seq0;   /* sequence number of BATCH_BEGIN; the set messages follow it */
    uint32_t n_msgs; /* set messages (each asks for an acknowledgement), then BATCH_END */
    const char *set[NSBOX_NFTBATCH_MAX_MSGS]; /* the set of message i, for error messages */
    bool oom;
};

/* Builds the batch that adds (`add`) or removes the sandbox's elements; plan->slot must be set.
 * The messages are numbered from seq0. Returns 0, or -1 on ENOMEM (b is then empty). */
int nsbox_nftbatch_elements(struct nsbox_nftbatch *b, const struct nsbox_netplan *p, bool add,
                            uint32_t seq0);
void nsbox_nftbatch_free(struct nsbox_nftbatch *b);

/* The kernel's verdict, read from its replies (NLMSG_ERROR messages; error 0 acknowledges). */
struct nsbox_nftverdict {
    uint32_t replies;  /* set messages answered so far */
    bool done;         /* every set message answered, or the batch refused as a whole */
    int err;           /* first errno reported (positive), 0 if none */
    const char *set;   /* the set whose message failed; NULL for the batch as a whole */
};

/* Accounts the replies in buf[0..len) (one recv's worth) to v, which starts zeroed. Replies to
 * other sequence numbers are ignored. Returns -1 when buf is not a well-formed list of netlink
 * messages. */
int nsbox_nftbatch_replies(const struct nsbox_nftbatch *b, const void *buf, size_t len,
                           struct nsbox_nftverdict *v);

#endif
