/* The network plan of a sandbox: what sandbox/net.c applies for network none/all/allow and
 * egress CIDRs (docs/network.md). Pure: addresses from a slot of the pool, the nftables text for
 * the one persistent `inet nsbox` table (each sandbox's elements in it: nftbatch.h), resolv.conf
 * and hosts contents, the garbage collector's deletions. No system calls; unit tested without
 * root.
 *
 * Every per-sandbox object is a set element keyed by the sandbox's host-side interface name
 * ("nsb" + id) or, for its address slot, commented with its id: adding a sandbox is one
 * transaction of `add element`s, removing it one of `delete element`s, and the table itself is
 * created once per network namespace and never deleted. */
#ifndef NSBOX_NETPLAN_H
#define NSBOX_NETPLAN_H

#include "nsbox.h"
#include "spec.h"

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NSBOX_NET_TABLE "nsbox"       /* table inet nsbox */
#define NSBOX_NET_IFPREFIX "nsb"      /* host end of a sandbox's veth: nsb<id> */
#define NSBOX_NET_SANDBOX_IF "eth0"   /* the sandbox's end */
#define NSBOX_NET_DEFAULT_POOL "10.171.0.0/16"
#define NSBOX_NET_SLOT_PREFIX 30      /* one /30 per sandbox: .1 host end, .2 sandbox */
#define NSBOX_NET_MAX_DNS 3           /* glibc reads at most 3 nameservers (MAXNS) */
#define NSBOX_NET_MAX_ADDRS 16        /* addresses pinned per allowed name */
#define NSBOX_NET_ID_MAX 12           /* "nsb" + id fits IFNAMSIZ - 1 */
#define NSBOX_NET_RESOLV_DEFAULT "/etc/resolv.conf:/run/systemd/resolve/resolv.conf"

/* ---- address pool --------------------------------------------------------------------------- */

struct nsbox_netpool {
    uint32_t base; /* host byte order, host bits zero */
    uint8_t prefix;
};

/* The i-th /30 of the pool. Addresses in network byte order. */
struct nsbox_netslot {
    uint32_t index;
    struct in_addr subnet, host, sandbox;
};

/* An IPv4 CIDR with prefix 8..30, not in 0/8, 127/8, 169.254/16 or 224/3. */
int nsbox_netplan_pool_parse(const char *text, struct nsbox_netpool *p, struct nsbox_err *e);
uint32_t nsbox_netplan_pool_slots(const struct nsbox_netpool *p);
int nsbox_netplan_pool_slot(const struct nsbox_netpool *p, uint32_t index,
                            struct nsbox_netslot *out, struct nsbox_err *e);
bool nsbox_netplan_pool_overlaps(const struct nsbox_netpool *p, const struct nsbox_cidr *c);

/* The end of the refusal of a destination inside the sandbox itself (loopback...): the way to
 * reach a service of the host. */
#define NSBOX_NET_LOCAL_HINT                                                                   \
    "; a service on this host is reached at one of the host's other addresses that it "       \
    "listens on, e.g. allow=192.0.2.10:8080 or egress 192.0.2.10 (docs/network.md, \"A "      \
    "service on the host\")"

/* ---- configuration ("network" in /etc/nsbox/config.json) ------------------------------------ */

struct nsbox_netconfig {
    struct nsbox_netpool pool;
    size_t n_dns; /* > 0: these resolvers instead of the host's resolv.conf */
    struct in_addr dns[NSBOX_NET_MAX_DNS];
    bool allow_by_name; /* "allow_names": "tls" (the default): allowed names go through the
                         * egress helper; "address": resolved at creation, by address */
    char upstream_ca[256]; /* "upstream_ca": the CA file that bound hosts' certificates are
                            * checked against; "": the host's system bundle */
};

void nsbox_netplan_config_init(struct nsbox_netconfig *c);
/* {"network": {"pool": "10.171.0.0/16", "dns": ["192.0.2.53"]}}; other top-level keys belong to
 * other modules. Unknown keys inside "network" are errors. root: the config file's object
 * (os/config.c). */
int nsbox_netplan_config_from_json(struct nsbox_netconfig *c, const struct cJSON *root,
                                   struct nsbox_err *e);

/* ---- resolv.conf ---------------------------------------------------------------------------- */

struct nsbox_resolv {
    size_t n_ns;
    struct in_addr ns[NSBOX_NET_MAX_DNS];
    size_t n_skipped;        /* loopback (a local stub such as 127.0.0.53) or IPv6 resolvers */
    char skipped[64];        /* the first of them, for messages */
    char search[256];        /* "search"/"domain" value, "" if none */
    char options[256];       /* "options" values, space separated */
};

/* Nameservers a sandbox can reach: IPv4 and not loopback (the sandbox's 127.0.0.1 is its own). */
void nsbox_netplan_resolv_parse(const char *text, struct nsbox_resolv *r);

/* ---- the plan ------------------------------------------------------------------------------- */

struct nsbox_netpin {
    char name[NSBOX_HOSTNAME_MAX + 1];
    size_t n;
    struct in_addr addr[NSBOX_NET_MAX_ADDRS];
};

struct nsbox_nettcp {
    struct in_addr addr;
    uint16_t port;
};

struct nsbox_netcidr {
    struct in_addr addr;
    uint8_t prefix;
};

struct nsbox_netplan {
    enum nsbox_net_mode mode;
    bool link; /* a veth: all, allow, or none with egress CIDRs */
    char id[NSBOX_NET_ID_MAX + 1];
    char ifname[16];
    struct nsbox_netpool pool;
    struct nsbox_netslot slot; /* set with nsbox_netplan_set_slot */
    size_t n_pins;             /* allow: names resolved at creation, pinned in /etc/hosts */
    struct nsbox_netpin *pins;
    size_t n_tcp; /* allow: address . port pairs the sandbox may open */
    struct nsbox_nettcp *tcp;
    size_t n_cidr; /* egress, minimal (no range inside another) */
    struct nsbox_netcidr cidr[NSBOX_MAX_CIDRS];
    struct nsbox_resolv dns; /* all: the resolvers written in the sandbox's resolv.conf */
    char dns_source[256];    /* where they came from, for the file's comment */
    /* allow by name (nsbox_netplan_add_names): the names and ports the egress helper on the
     * gateway lets through; their pins and sb_tcp entries are the gateway's address. */
    bool by_name;
    size_t n_names;
    struct nsbox_host *names;
};

/* Resolves a name to IPv4 addresses (the host's resolver at creation; a table in tests). */
typedef int (*nsbox_netplan_resolve_fn)(void *ctx, const char *name, struct in_addr *out,
                                        size_t max, size_t *n, struct nsbox_err *e);

/* dns: the resolvers for network all (ignored otherwise). Fails (NSBOX_E_UNSUPPORTED) for what
 * nsbox cannot enforce (IPv6 destinations, no reachable resolver for all) and (NSBOX_E_INVALID)
 * for egress ranges inside the sandbox pool. */
int nsbox_netplan_build(const struct nsbox_spec *s, const char *id,
                        const struct nsbox_netpool *pool, const struct nsbox_resolv *dns,
                        const char *dns_source, nsbox_netplan_resolve_fn resolve, void *rctx,
                        struct nsbox_netplan *p, struct nsbox_err *e);
void nsbox_netplan_free(struct nsbox_netplan *p);
int nsbox_netplan_set_slot(struct nsbox_netplan *p, uint32_t index, struct nsbox_err *e);

/* ---- allow by name, through the egress helper (netplan_names.c) ----------------------------- */

/* Splits the allow list: *literals gets a copy of s with only its IP literals (built into the
 * plan by address, as before), and nsbox_netplan_add_names adds the names of s afterwards:
 * each pinned to the gateway, its port open on the gateway only. NULL on ENOMEM. */
struct nsbox_spec *nsbox_netplan_literals_only(const struct nsbox_spec *s);
bool nsbox_netplan_has_names(const struct nsbox_spec *s);
int nsbox_netplan_add_names(struct nsbox_netplan *p, const struct nsbox_spec *s,
                            struct nsbox_err *e);
/* Network all with header bindings: the bound hosts go through the egress helper (pinned to the
 * gateway, their ports open there), everything else as with all. */
int nsbox_netplan_add_bound(struct nsbox_netplan *p, const struct nsbox_spec *s,
                            struct nsbox_err *e);
/* The gateway's address into the names' pins and entries (nsbox_netplan_set_slot calls it). */
void nsbox_netplan_names_gateway(struct nsbox_netplan *p);
/* The helper's decisions: may a connection to gateway:port name `name` (SNI, lower case)? */
bool nsbox_netplan_name_allowed(const struct nsbox_netplan *p, const char *name, uint16_t port);
/* May the helper connect to `a`, an address an allowed name resolves to now? NULL if so, else
 * why not: addresses that are the host itself or never leave it (loopback, 0/8, multicast,
 * broadcast), link-local and metadata (169.254/16), the sandbox pool. The host's own other
 * addresses are the caller's check (it needs the kernel). */
const char *nsbox_netplan_upstream_refusal(const struct nsbox_netplan *p, struct in_addr a);

/* What `nsbox inspect` shows under "network" (docs/protocol.md): mode; the sandbox's address,
 * gateway and host-side interface (null address: loopback only); the resolvers (all); what is
 * open, address:port, and the names pinned (allow); by name, "names": name:port as the egress
 * helper lets them through; egress ranges. NULL on ENOMEM. */
struct cJSON;
struct cJSON *nsbox_netplan_describe(const struct nsbox_netplan *p);

/* ---- nftables text (malloc'd, NULL on ENOMEM) ------------------------------------------------ */

/* The persistent table, created when missing. forward_guard: the host did not forward before
 * nsbox turned ip_forward on; keep it from forwarding anything but sandbox traffic. */
char *nsbox_netplan_table_text(bool forward_guard);
/* A sandbox's own elements are added and removed as netlink batches: policy/nftbatch.h. */

/* From the JSON listing of the table (`nft -j list table inet nsbox`): a JSON transaction that
 * deletes every element of sandbox `id`, or NULL when there is none (or on ENOMEM: *oom). */
char *nsbox_netplan_gc_json(const char *listing, const char *id, bool *oom);
/* From the same listing: a free slot of the pool, chosen from `rnd`; -1 when all are taken. */
int64_t nsbox_netplan_free_slot(const char *listing, const struct nsbox_netpool *pool,
                                uint32_t rnd);
/* From the same listing: calls fn with the id of each taken slot of the pool (its comment, when
 * that is a valid sandbox id) until fn returns false. */
void nsbox_netplan_slot_owners(const char *listing, const struct nsbox_netpool *pool,
                               bool (*fn)(const char *id, void *ctx), void *ctx);

/* ---- files bound over the sandbox's /etc ----------------------------------------------------- */

/* all: the resolvers; allow and none+egress: a file that explains why there is no DNS. */
char *nsbox_netplan_resolv_conf(const struct nsbox_netplan *p);
/* The sandbox's /etc/hosts: localhost lines, its own hostname (127.0.1.1, as Debian does, so
 * that `getent hosts $(hostname)` and the like work without DNS), and with allow the pinned
 * names. p is NULL for network none (no plan). NULL with *oom set on ENOMEM. */
char *nsbox_netplan_hosts(const struct nsbox_netplan *p, const char *hostname, bool *oom);

#endif
