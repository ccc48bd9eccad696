/* The sandbox's part of the persistent `inet nsbox` table (netplan.h has the layout), and the
 * ip_forward switch it depends on. Used by net.c for each sandbox and by gc. */
#define _GNU_SOURCE
#include "cleanup.h"
#include "net_impl.h"
#include "netplan.h"
#include "nftbatch.h"
#include "paths.h"
#include "state.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#define IP_FORWARD "/proc/sys/net/ipv4/ip_forward"

static uint32_t random32(void)
{
    uint32_t r;
    if (getrandom(&r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r)
        r = (uint32_t)getpid() * 2654435761u;
    return r;
}

/* ---- forwarding ------------------------------------------------------------------------------ */

/* ip_forward is per network namespace; it must be 1 for sandbox traffic to be routed. */
int nsbox_net_forwarding(bool *on, struct nsbox_err *e)
{
    cleanup_close int fd = open(IP_FORWARD, O_RDONLY | O_CLOEXEC);
    char c = 0;
    if (fd < 0 || read(fd, &c, 1) != 1)
        return nsbox_err_sys(e, "cannot read %s", IP_FORWARD);
    *on = c != '0';
    return 0;
}

int nsbox_net_forwarding_enable(struct nsbox_err *e)
{
    cleanup_close int fd = open(IP_FORWARD, O_WRONLY | O_CLOEXEC);
    if (fd < 0 || write(fd, "1", 1) != 1)
        return nsbox_err_sys(e, "cannot turn on %s", IP_FORWARD);
    return 0;
}

/* ---- the table ------------------------------------------------------------------------------- */

static int nft_hint(struct nsbox_err *e)
{
    if (e->sys_errno == EOPNOTSUPP || e->sys_errno == EPROTONOSUPPORT ||
        e->sys_errno == EAFNOSUPPORT)
        return nsbox_err_wrap(e, "the kernel lacks nf_tables support (fix: a kernel with "
                                 "CONFIG_NF_TABLES, nft_ct, nft_masq, nft_reject_inet)");
    return -1;
}

/* Deletes every element of sandbox `id` found in the table (gc, and teardown's fallback). */
int nsbox_net_table_remove(struct nsbox_nft *nft, const char *id, struct nsbox_err *e)
{
    cleanup_free char *listing = NULL;
    if (nsbox_nft_list_json(nft, "table inet " NSBOX_NET_TABLE, &listing, e) < 0)
        return e->sys_errno == ENOENT ? 0 : -1; /* no table: nothing of ours */
    bool oom;
    cleanup_free char *del = nsbox_netplan_gc_json(listing, id, &oom);
    if (oom)
        return nsbox_err_set(e, NSBOX_E_NOMEM, ENOMEM, "out of memory");
    if (!del)
        return 0;
    return nsbox_nft_run(nft, del, true, e);
}

/* A full pool: the slots of sandboxes killed with their supervisor (their state directory is
 * in this runtime directory and nobody holds its lock) are taken back before the pool is
 * called full. gc would free them, but create's runs at most once a second and a one-shot
 * run's never. Only their elements go, under their lock; gc removes the rest. Up to 8, so
 * that a pool of thousands of dead ones costs a create no more than a few listings. */
#define RECLAIM_MAX 8

struct reclaim {
    char rt[PATH_MAX];
    char ids[RECLAIM_MAX][NSBOX_ID_LEN + 1];
    int locks[RECLAIM_MAX];
    unsigned n;
};

static bool note_dead_owner(const char *id, void *ctx)
{
    struct reclaim *r = ctx;
    if (!nsbox_state_valid_id(id))
        return true;
    int lk = nsbox_state_dead_lock(r->rt, id);
    if (lk < 0)
        return true; /* alive, unknown, or another runtime directory's */
    memcpy(r->ids[r->n], id, NSBOX_ID_LEN + 1);
    r->locks[r->n++] = lk;
    return r->n < RECLAIM_MAX;
}

static unsigned reclaim_dead_slots(struct nsbox_nft *nft, const char *listing,
                                   const struct nsbox_netpool *pool)
{
    struct reclaim r = {.n = 0};
    struct nsbox_err e;
    if (nsbox_paths_runtime_dir(r.rt, sizeof r.rt, &e) < 0)
        return 0;
    nsbox_netplan_slot_owners(listing, pool, note_dead_owner, &r);
    unsigned freed = 0;
    for (unsigned i = 0; i < r.n; i++) {
        if (nsbox_net_table_remove(nft, r.ids[i], &e) == 0)
            freed++;
        close(r.locks[i]);
    }
    return freed;
}

/* Sequence numbers of the element batches: each attempt of the add, then the removal. */
#define SEQ_ADD(attempt) (1u + 16u * (uint32_t)(attempt))
#define SEQ_DEL 4096u

/* One transaction claims an address slot and adds the sandbox's elements. The slot is claimed
 * with `create element`, which the kernel refuses when it exists: concurrent creates (any
 * nsbox, any state directory) cannot share a slot, and a crashed nsbox's slot stays taken until
 * gc, or until a create finds the pool full (reclaim_dead_slots). The table is created the
 * first time only (a failed batch costs the kernel an RCU grace period, several ms, so the
 * common path must not fail). The elements go as a netlink batch
 * built by policy/nftbatch; libnftables is loaded only to create the table or to list the
 * taken slots. */
int nsbox_net_table_add(struct nsbox_nft *nft, struct nsbox_netplan *plan, bool forward_guard,
                        struct nsbox_nftbatch *del, struct nsbox_err *e)
{
    memset(del, 0, sizeof *del);
    uint32_t idx = random32() % nsbox_netplan_pool_slots(&plan->pool);
    bool made_table = false;
    for (int attempt = 0; attempt < 16; attempt++) {
        if (nsbox_netplan_set_slot(plan, idx, e) < 0)
            return -1;
        struct nsbox_nftbatch add;
        if (nsbox_nftbatch_elements(&add, plan, true, SEQ_ADD(attempt)) < 0)
            return nsbox_err_set(e, NSBOX_E_NOMEM, ENOMEM, "out of memory");
        struct nsbox_err e2 = {0};
        int r = nsbox_nft_batch(nft, &add, &e2);
        nsbox_nftbatch_free(&add);
        if (r == 0) {
            if (nsbox_nftbatch_elements(del, plan, false, SEQ_DEL) < 0)
                return nsbox_err_set(e, NSBOX_E_NOMEM, ENOMEM, "out of memory");
            return 0;
        }
        if (e2.sys_errno == EEXIST) { /* the slot is taken: pick a free one */
            int64_t f = -1;
            for (int look = 0; look < 2 && f < 0; look++) {
                cleanup_free char *listing = NULL;
                if (nsbox_nft_list_json(nft, "set inet " NSBOX_NET_TABLE " sb_slot", &listing,
                                        e) < 0)
                    return nsbox_err_wrap(e, "network");
                f = nsbox_netplan_free_slot(listing, &plan->pool, random32());
                if (f < 0 && (look > 0 || !reclaim_dead_slots(nft, listing, &plan->pool)))
                    break; /* full, and nothing to take back */
            }
            if (f < 0)
                return nsbox_err_set(e, NSBOX_E_SYS, EADDRNOTAVAIL,
                                     "network: all %u address slots of the sandbox pool are in "
                                     "use; fix: nsbox gc, or a larger network.pool in the config",
                                     nsbox_netplan_pool_slots(&plan->pool));
            idx = (uint32_t)f;
            continue;
        }
        if (e2.sys_errno == ENOENT && !made_table) { /* first use in this network namespace */
            made_table = true;
            cleanup_free char *table = nsbox_netplan_table_text(forward_guard);
            if (!table)
                return nsbox_err_set(e, NSBOX_E_NOMEM, ENOMEM, "out of memory");
            struct nsbox_err e3 = {0};
            if (nsbox_nft_run(nft, table, false, &e3) < 0 && e3.sys_errno != EEXIST) {
                *e = e3;
                nsbox_err_wrap(e, "network: cannot create the nftables table inet %s",
                               NSBOX_NET_TABLE);
                return nft_hint(e);
            }
            continue;
        }
        *e = e2;
        if (made_table && e2.sys_errno == ENOENT)
            nsbox_err_wrap(e, "the table inet %s exists but lacks nsbox's sets (made by another "
                              "nsbox version?); fix: stop all sandboxes, then nft delete table "
                              "inet %s", NSBOX_NET_TABLE, NSBOX_NET_TABLE);
        nsbox_err_wrap(e, "network: cannot add the sandbox's rules");
        return nft_hint(e);
    }
    return nsbox_err_set(e, NSBOX_E_SYS, EADDRNOTAVAIL,
                         "network: could not claim an address slot (many concurrent creates?)");
}
