/* Network policy: only `none` so far (loopback only); `all`, `allow` and egress CIDRs are
 * refused when the sandbox is built rather than silently weakened. */
#define _GNU_SOURCE
#include "net.h"

#include <errno.h>
#include <net/if.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

struct nsbox_net {
    enum nsbox_net_mode mode;
};

int nsbox_net_prepare(const struct nsbox_spec *s, const char *id, const char *state_dir,
                      struct nsbox_net **out, struct nsbox_err *e)
{
    *out = NULL;
    if (s->net != NSBOX_NET_NONE || s->n_egress > 0)
        return nsbox_err_set(e, NSBOX_E_UNSUPPORTED, ENOTSUP,
                             "network policy '%s'%s is not supported by this nsbox build yet; "
                             "use network none",
                             s->net == NSBOX_NET_ALL     ? "all"
                             : s->net == NSBOX_NET_ALLOW ? "allow"
                                                         : "none",
                             s->n_egress ? " with egress CIDRs" : "");
    struct nsbox_net *n = calloc(1, sizeof *n);
    if (!n)
        return nsbox_err_sys(e, "calloc");
    n->mode = s->net;
    *out = n;
    return 0;
}

int nsbox_net_attach(struct nsbox_net *n, pid_t child, struct nsbox_err *e)
{
    return 0;
}

static int loopback_up(struct nsbox_err *e)
{
    int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (s < 0)
        return nsbox_err_sys(e, "socket");
    struct ifreq ifr = {0};
    strcpy(ifr.ifr_name, "lo");
    int r = ioctl(s, SIOCGIFFLAGS, &ifr);
    if (r == 0) {
        ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
        r = ioctl(s, SIOCSIFFLAGS, &ifr);
    }
    if (r < 0)
        nsbox_err_sys(e, "loopback up");
    close(s);
    return r;
}

int nsbox_net_child_setup(const struct nsbox_net *n, struct nsbox_err *e)
{
    return loopback_up(e);
}

const char *nsbox_net_resolv_conf(const struct nsbox_net *n)
{
    return NULL;
}

const char *nsbox_net_hosts(const struct nsbox_net *n)
{
    return NULL;
}

void nsbox_net_teardown(struct nsbox_net *n)
{
    free(n);
}

int nsbox_net_gc(const char *id, struct nsbox_err *e)
{
    return 0;
}
