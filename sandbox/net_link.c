/* Links, addresses and routes over rtnetlink with libnl-route-3, loaded on first use: linking
 * it would make every `nsbox run` map libnl-3 and libnl-route-3 and run their constructors at
 * start-up (about 0.15 ms here), network none included. */
#define _GNU_SOURCE
#include "net_impl.h"

#include "dynlib.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <linux/if_link.h>
#include <net/if.h>
#include <netlink/netlink.h>
#include <netlink/route/addr.h>
#include <netlink/route/link.h>
#include <netlink/route/link/inet6.h>
#include <netlink/route/link/veth.h>
#include <netlink/route/route.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#define NL_FUNCS(X)                                                                                \
    X(nl_socket_alloc)                                                                             \
    X(nl_socket_free)                                                                              \
    X(nl_connect)                                                                                  \
    X(nl_geterror)                                                                                 \
    X(nl_addr_build)                                                                               \
    X(nl_addr_put)                                                                                 \
    X(nl_addr_set_prefixlen)                                                                       \
    X(rtnl_link_alloc)                                                                             \
    X(rtnl_link_put)                                                                               \
    X(rtnl_link_veth_alloc)                                                                        \
    X(rtnl_link_veth_get_peer)                                                                     \
    X(rtnl_link_set_name)                                                                          \
    X(rtnl_link_set_ns_pid)                                                                        \
    X(rtnl_link_set_flags)                                                                         \
    X(rtnl_link_set_ifindex)                                                                       \
    X(rtnl_link_set_num_tx_queues)                                                                 \
    X(rtnl_link_set_num_rx_queues)                                                                 \
    X(rtnl_link_add)                                                                               \
    X(rtnl_link_change)                                                                            \
    X(rtnl_link_delete)                                                                            \
    X(rtnl_link_inet6_set_addr_gen_mode)                                                           \
    X(rtnl_addr_alloc)                                                                             \
    X(rtnl_addr_put)                                                                               \
    X(rtnl_addr_set_ifindex)                                                                       \
    X(rtnl_addr_set_local)                                                                         \
    X(rtnl_addr_add)                                                                               \
    X(rtnl_route_alloc)                                                                            \
    X(rtnl_route_put)                                                                              \
    X(rtnl_route_set_family)                                                                       \
    X(rtnl_route_set_dst)                                                                          \
    X(rtnl_route_add_nexthop)                                                                      \
    X(rtnl_route_nh_alloc)                                                                         \
    X(rtnl_route_nh_set_gateway)                                                                   \
    X(rtnl_route_nh_set_ifindex)                                                                   \
    X(rtnl_route_nh_free)                                                                          \
    X(rtnl_route_build_add_request)                                                                \
    X(nla_nest_start)                                                                              \
    X(nla_nest_end)                                                                                \
    X(nla_put_string)                                                                              \
    X(nl_send_sync)                                                                                \
    X(nlmsg_free)

static struct {
#define FIELD(name) __typeof__(&name) name;
    NL_FUNCS(FIELD)
#undef FIELD
} nl;

/* libnl-route-3 pulls in libnl-3; dlsym on its handle searches both. */
static struct nsbox_dynlib nl_so =
    NSBOX_DYNLIB_INIT("libnl-route-3.so.200", "libnl-route-3-200", RTLD_LAZY);

int nsbox_netlink_load(struct nsbox_err *e)
{
    static const struct nsbox_dynlib_sym syms[] = {
#define SYM(name) {(void **)&nl.name, #name},
        NL_FUNCS(SYM)
#undef SYM
    };
    return nsbox_dynlib_load(&nl_so, syms, sizeof syms / sizeof syms[0],
                             "libnl-route-3 is not available", e);
}

static int nl_fail(struct nsbox_err *e, int nlerr, const char *fmt, const char *arg)
{
    char head[256];
    snprintf(head, sizeof head, fmt, arg);
    /* libnl's codes are its own; keep its words, and EPERM/EEXIST-like meaning in the text */
    return nsbox_err_set(e, NSBOX_E_SYS, EIO, "%s: %s", head, nl.nl_geterror(nlerr));
}

static struct nl_sock *nl_open(struct nsbox_err *e)
{
    if (nsbox_netlink_load(e) < 0)
        return NULL;
    struct nl_sock *sk = nl.nl_socket_alloc();
    if (!sk) {
        nsbox_err_set(e, NSBOX_E_NOMEM, ENOMEM, "netlink: out of memory");
        return NULL;
    }
    int r = nl.nl_connect(sk, NETLINK_ROUTE);
    if (r < 0) {
        nl_fail(e, r, "netlink: %s", "cannot connect");
        nl.nl_socket_free(sk);
        return NULL;
    }
    return sk;
}

static int add_address(struct nl_sock *sk, int ifindex, struct in_addr a, unsigned prefix,
                       const char *ifname, struct nsbox_err *e)
{
    struct rtnl_addr *ad = nl.rtnl_addr_alloc();
    struct nl_addr *local = nl.nl_addr_build(AF_INET, &a, sizeof a);
    int r = -NLE_NOMEM;
    if (ad && local) {
        nl.nl_addr_set_prefixlen(local, (int)prefix);
        nl.rtnl_addr_set_ifindex(ad, ifindex);
        r = nl.rtnl_addr_set_local(ad, local);
        if (r == 0)
            r = nl.rtnl_addr_add(sk, ad, 0);
    }
    if (local)
        nl.nl_addr_put(local);
    if (ad)
        nl.rtnl_addr_put(ad);
    if (r < 0) {
        char buf[INET_ADDRSTRLEN + 32];
        snprintf(buf, sizeof buf, "%s/%u on %s", inet_ntop(AF_INET, &a, buf + 32, INET_ADDRSTRLEN),
                 prefix, ifname);
        return nl_fail(e, r, "cannot add address %s", buf);
    }
    return 0;
}

int nsbox_netlink_veth(const char *host_if, const char *peer_if, pid_t pid, struct in_addr host,
                       unsigned prefix, struct nsbox_err *e)
{
    struct nl_sock *sk = nl_open(e);
    if (!sk)
        return -1;
    int ret = -1;
    struct rtnl_link *link = nl.rtnl_link_veth_alloc();
    struct rtnl_link *peer = link ? nl.rtnl_link_veth_get_peer(link) : NULL;
    if (!peer) {
        nsbox_err_set(e, NSBOX_E_NOMEM, ENOMEM, "netlink: out of memory");
        goto out;
    }
    nl.rtnl_link_set_name(link, host_if);
    nl.rtnl_link_set_flags(link, IFF_UP);
    nl.rtnl_link_set_name(peer, peer_if);
    /* One queue each way: by default a veth gets one per possible CPU, and every queue is a
     * kobject to create (and destroy) in each namespace: milliseconds on a large host. */
    for (struct rtnl_link *l = link; l; l = l == link ? peer : NULL) {
        nl.rtnl_link_set_num_tx_queues(l, 1);
        nl.rtnl_link_set_num_rx_queues(l, 1);
    }
    /* Born in the sandbox's namespace: it never exists in ours under a name to clash with. */
    nl.rtnl_link_set_ns_pid(peer, pid);
    int r = nl.rtnl_link_add(sk, link, NLM_F_CREATE | NLM_F_EXCL);
    if (r < 0) {
        nl_fail(e, r, "cannot create veth %s", host_if);
        goto out;
    }
    unsigned idx = if_nametoindex(host_if);
    if (!idx) {
        nsbox_err_sys(e, "veth %s", host_if);
        goto out;
    }
    ret = add_address(sk, (int)idx, host, prefix, host_if, e);
out:
    if (peer)
        nl.rtnl_link_put(peer);
    if (link)
        nl.rtnl_link_put(link);
    nl.nl_socket_free(sk);
    return ret;
}

static int link_up(struct nl_sock *sk, int idx, const char *ifname, struct nsbox_err *e)
{
    struct rtnl_link *orig = nl.rtnl_link_alloc(), *chg = nl.rtnl_link_alloc();
    int r = -NLE_NOMEM;
    if (orig && chg) {
        nl.rtnl_link_set_ifindex(orig, idx);
        /* No link-local address: the sandbox has IPv4 only, and no DAD or router solicitation
         * traffic starts. Set before the link goes up, in a change of its own: in the same
         * change the kernel brings the link up first, and when its peer is already up (a
         * pooled sandbox's) the carrier is there at once and the address made before the mode
         * applies. A kernel without IPv6 refuses the attribute: then up alone. */
        if (nl.rtnl_link_inet6_set_addr_gen_mode(chg, IN6_ADDR_GEN_MODE_NONE) == 0)
            nl.rtnl_link_change(sk, orig, chg, 0);
        nl.rtnl_link_put(chg);
        chg = nl.rtnl_link_alloc();
        if (chg) {
            nl.rtnl_link_set_flags(chg, IFF_UP);
            r = nl.rtnl_link_change(sk, orig, chg, 0);
        }
    }
    if (orig)
        nl.rtnl_link_put(orig);
    if (chg)
        nl.rtnl_link_put(chg);
    return r < 0 ? nl_fail(e, r, "cannot bring %s up", ifname) : 0;
}

/* The request for rt, with the congestion control `cc` as its metric when not NULL: libnl's
 * metrics are numbers only, the kernel's RTAX_CC_ALGO a name, so it is nested in the message
 * libnl built. */
static int route_send(struct nl_sock *sk, struct rtnl_route *rt, const char *cc)
{
    struct nl_msg *msg = NULL;
    int r = nl.rtnl_route_build_add_request(rt, NLM_F_EXCL, &msg);
    if (r < 0)
        return r;
    if (cc) {
        struct nlattr *m = nl.nla_nest_start(msg, RTA_METRICS);
        if (!m || nl.nla_put_string(msg, RTAX_CC_ALGO, cc) < 0) {
            nl.nlmsg_free(msg);
            return -NLE_NOMEM;
        }
        nl.nla_nest_end(msg, m);
    }
    return nl.nl_send_sync(sk, msg); /* frees msg */
}

/* A route to dst/prefix out of link idx, through gw when gw is not NULL (else on the link). */
static int add_route(struct nl_sock *sk, int idx, struct in_addr dst_a, int prefix,
                     const struct in_addr *gw, const char *cc)
{
    struct rtnl_route *rt = nl.rtnl_route_alloc();
    struct rtnl_nexthop *nh = nl.rtnl_route_nh_alloc();
    struct nl_addr *dst = nl.nl_addr_build(AF_INET, &dst_a, sizeof dst_a);
    struct nl_addr *via = gw ? nl.nl_addr_build(AF_INET, gw, sizeof *gw) : NULL;
    int r = -NLE_NOMEM;
    if (rt && nh && dst && (via || !gw)) {
        nl.nl_addr_set_prefixlen(dst, prefix);
        nl.rtnl_route_set_family(rt, AF_INET);
        r = nl.rtnl_route_set_dst(rt, dst);
        nl.rtnl_route_nh_set_ifindex(nh, idx);
        if (via)
            nl.rtnl_route_nh_set_gateway(nh, via);
        nl.rtnl_route_add_nexthop(rt, nh); /* the route owns nh from here */
        nh = NULL;
        if (r == 0)
            r = route_send(sk, rt, cc);
    }
    if (nh)
        nl.rtnl_route_nh_free(nh);
    if (via)
        nl.nl_addr_put(via);
    if (dst)
        nl.nl_addr_put(dst);
    if (rt)
        nl.rtnl_route_put(rt);
    return r;
}

static int default_route(struct nl_sock *sk, int idx, struct in_addr gw, struct nsbox_err *e)
{
    static const struct in_addr any = {0};
    int r = add_route(sk, idx, any, 0, &gw, NULL);
    return r < 0 ? nl_fail(e, r, "cannot add the default route%s", "") : 0;
}

/* The sandbox's connections to the egress helper on the gateway cross one veth: no loss, an
 * RTT of microseconds. A pacing control that the namespace inherits from the host (bbr) spaces
 * the sandbox's sends out there, an upload's; reno never paces. A route's control is the
 * socket's from its connect, before the control starts (set later, bbr's pacing would stay
 * on), and only for this address: the default route's connections keep the host's choice.
 * The connect replaces any control the socket had (tcp_connect_init): a program's own choice
 * for a connection to the helper is kept only if set after its connect. */
static int helper_route(struct nl_sock *sk, int idx, struct in_addr gw, struct nsbox_err *e)
{
    int r = add_route(sk, idx, gw, 32, NULL, "reno");
    return r < 0 ? nl_fail(e, r, "cannot add the route to the egress helper%s", "") : 0;
}

/* Until the kernel's link watcher has seen the carrier, the ends of the pair keep a qdisc that
 * drops everything: a first SYN would be lost and retried a second later. It acts at once for a
 * veth (an "urgent" event), unless both ends happen to have the same ifindex in their own
 * namespaces (a fresh host namespace whose first link is ours: 2 and 2), when it waits up to a
 * second. Normally this loop does not sleep at all. */
static void wait_running(const char *ifname)
{
    int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (s < 0)
        return;
    struct ifreq ifr = {0};
    snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "%s", ifname);
    for (int i = 0; i < 30000; i++) { /* at most ~3 s */
        if (ioctl(s, SIOCGIFFLAGS, &ifr) < 0 || (ifr.ifr_flags & IFF_RUNNING))
            break;
        usleep(100);
    }
    close(s);
}

int nsbox_netlink_sandbox(const char *ifname, struct in_addr addr, unsigned prefix,
                          struct in_addr gw, bool helper, struct nsbox_err *e)
{
    unsigned idx = if_nametoindex(ifname);
    if (!idx)
        return nsbox_err_sys(e, "sandbox interface %s", ifname);
    struct nl_sock *sk = nl_open(e);
    if (!sk)
        return -1;
    /* Order matters: the gateway must be on a connected route, which needs the link up and
     * the address in place. */
    int r = link_up(sk, (int)idx, ifname, e) < 0 ||
                    add_address(sk, (int)idx, addr, prefix, ifname, e) < 0 ||
                    default_route(sk, (int)idx, gw, e) < 0 ||
                    (helper && helper_route(sk, (int)idx, gw, e) < 0)
                ? -1
                : 0;
    nl.nl_socket_free(sk);
    if (r == 0)
        wait_running(ifname);
    return r;
}

int nsbox_netlink_delete(const char *ifname, struct nsbox_err *e)
{
    if (!if_nametoindex(ifname))
        return 0;
    struct nl_sock *sk = nl_open(e);
    if (!sk)
        return -1;
    struct rtnl_link *l = nl.rtnl_link_alloc();
    int r = -NLE_NOMEM;
    if (l) {
        nl.rtnl_link_set_name(l, ifname);
        r = nl.rtnl_link_delete(sk, l);
        nl.rtnl_link_put(l);
    }
    nl.nl_socket_free(sk);
    if (r == -NLE_NODEV || r == -NLE_OBJ_NOTFOUND)
        return 0;
    return r < 0 ? nl_fail(e, r, "cannot delete link %s", ifname) : 1;
}
