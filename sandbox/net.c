/* Network policy of a sandbox (sandbox/net.h, docs/network.md): none is loopback only and needs
 * nothing from the host; all, allow and egress CIDRs give the sandbox one end of a veth pair,
 * an address slot of the pool, and elements in the persistent `inet nsbox` table, all computed
 * by policy/netplan and applied here without running `ip` or `nft`. */
#define _GNU_SOURCE
#include "net.h"
#include "dnsnote.h"
#include "dnsstub.h"
#include "caps.h"
#include "egress_spawn.h"
#include "egress_tls.h"
#include "state.h"
#include "cleanup.h"
#include "config.h"
#include "net_impl.h"
#include "netplan.h"
#include "nftbatch.h"
#include "paths.h"
#include "safepath.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <net/if.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MARKER "net" /* in the state directory: this sandbox has network objects on the host */

struct nsbox_net {
    enum nsbox_net_mode mode;
    bool link;
    struct nsbox_netplan plan;
    char resolv[PATH_MAX], hosts[PATH_MAX]; /* hosts: a path, or with hosts_inside the text */
    bool has_resolv, has_hosts, hosts_inside;
    struct nsbox_nft *nft;      /* parent only, from attach to teardown */
    struct nsbox_nftbatch del;  /* the batch that removes the sandbox's elements, once added */
    bool attached;              /* written by the parent, read by the child: see net_alloc */
    pid_t egress;               /* the egress helper (allow by name), parent only */
    int egress_exe;             /* its executable, opened when prepared: the file checked is the
                                   file run (-1: none, or run already) */
    char egress_path[PATH_MAX]; /* that file's name, for messages */
    char egress_log[PATH_MAX];  /* the directory of its network log: the state directory */
    bool has_egress_id;
    uint32_t egress_id;           /* the helper's host uid and gid */
    struct nsbox_egress_tls *tls; /* header bindings, parent only, until the helper has them */
    char bundle[PATH_MAX];        /* the sandbox's trust bundle: the image's and its CA */
    bool has_bundle;
    bool dns_stub;                    /* init answers names (dnsstub.h) */
    struct nsbox_dnsquery_table dns;  /* written by init, read by the launcher */
};

static const char *mode_name(const struct nsbox_spec *s)
{
    return s->net == NSBOX_NET_ALL ? "all" : s->net == NSBOX_NET_ALLOW ? "allow" : "none";
}

/* ---- small helpers --------------------------------------------------------------------------- */

static int write_file(const char *path, const char *text, struct nsbox_err *e)
{
    cleanup_close int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0)
        return nsbox_err_sys(e, "cannot create %s", path);
    size_t len = strlen(text);
    if (write(fd, text, len) != (ssize_t)len)
        return nsbox_err_sys(e, "cannot write %s", path);
    /* the umask may have narrowed the mode; appuser (not the file's owner) must read it */
    if (fchmod(fd, 0644) < 0)
        return nsbox_err_sys(e, "chmod %s", path);
    return 0;
}

/* ---- checks and inputs (before anything is set up) ------------------------------------------- */

static bool have_cap_net_admin(void)
{
    uint64_t eff, prm, inh;
    return nsbox_caps_get(&eff, &prm, &inh) == 0 && (eff & (1ull << CAP_NET_ADMIN));
}

static int check_privileges(const struct nsbox_spec *s, struct nsbox_err *e)
{
    if (have_cap_net_admin())
        return 0;
    char what[64];
    if (s->net == NSBOX_NET_NONE)
        snprintf(what, sizeof what, "egress CIDRs");
    else
        snprintf(what, sizeof what, "network %s", mode_name(s));
    return nsbox_err_set(e, NSBOX_E_UNSUPPORTED, EPERM,
                         "%s needs CAP_NET_ADMIN on the host (a veth pair and nftables rules in "
                         "the host's network namespace); fix: run nsbox as root (e.g. sudo), or "
                         "use network none (user-mode networking such as pasta is not supported)",
                         what);
}

static int net_section(const cJSON *root, void *cfg, struct nsbox_err *e)
{
    return nsbox_netplan_config_from_json(cfg, root, e);
}

static int load_config(struct nsbox_netconfig *cfg, struct nsbox_err *e)
{
    nsbox_netplan_config_init(cfg);
    return nsbox_config_section(net_section, cfg, NULL, e);
}

/* The resolvers of network all: "network.dns" from the config, else the first file of
 * $NSBOX_RESOLV_CONF (default NSBOX_NET_RESOLV_DEFAULT, colon separated) that names one a
 * sandbox can reach. Loopback resolvers are skipped: behind a 127.0.0.53-style stub,
 * systemd-resolved keeps the upstream list in /run/systemd/resolve/resolv.conf. */
int nsbox_net_config_check(struct nsbox_err *e)
{
    struct nsbox_netconfig cfg;
    return load_config(&cfg, e);
}

static int find_resolvers(const struct nsbox_netconfig *cfg, struct nsbox_resolv *dns, char *src,
                          size_t srclen, struct nsbox_err *e)
{
    memset(dns, 0, sizeof *dns);
    if (cfg->n_dns) {
        dns->n_ns = cfg->n_dns;
        memcpy(dns->ns, cfg->dns, sizeof cfg->dns);
        snprintf(src, srclen, "network.dns in the nsbox config");
        return 0;
    }
    const char *env = getenv("NSBOX_RESOLV_CONF");
    char list[PATH_MAX * 2];
    snprintf(list, sizeof list, "%s", env && *env ? env : NSBOX_NET_RESOLV_DEFAULT);
    struct nsbox_resolv first = {0};
    char first_src[PATH_MAX] = "";
    char *save = NULL;
    for (char *path = strtok_r(list, ":", &save); path; path = strtok_r(NULL, ":", &save)) {
        cleanup_free char *text = NULL;
        int r = nsbox_read_small(path, &text, e);
        if (r < 0)
            return -1;
        if (r == 1)
            continue;
        struct nsbox_resolv cur;
        nsbox_netplan_resolv_parse(text, &cur);
        if (cur.n_ns) {
            *dns = cur;
            snprintf(src, srclen, "%s", path);
            return 0;
        }
        if (!first_src[0]) {
            first = cur;
            snprintf(first_src, sizeof first_src, "%s", path);
        }
    }
    *dns = first; /* none usable: the plan explains what was found */
    snprintf(src, srclen, "%s", first_src);
    return 0;
}

static int resolve_host(void *ctx, const char *name, struct in_addr *out, size_t max, size_t *n,
                        struct nsbox_err *e)
{
    (void)ctx;
    *n = 0;
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM};
    struct addrinfo *res = NULL;
    int r = getaddrinfo(name, NULL, &hints, &res);
    if (r == EAI_NONAME || r == EAI_NODATA)
        return nsbox_err_set(e, NSBOX_E_INVALID, ENOENT,
                             "the host cannot resolve it to an IPv4 address (%s)", gai_strerror(r));
    if (r != 0)
        return nsbox_err_set(e, NSBOX_E_SYS, r == EAI_SYSTEM ? errno : EAGAIN,
                             "cannot resolve it: %s", gai_strerror(r));
    for (struct addrinfo *a = res; a && *n < max; a = a->ai_next) {
        struct in_addr v = ((struct sockaddr_in *)a->ai_addr)->sin_addr;
        bool dup = false;
        for (size_t i = 0; i < *n; i++)
            dup |= out[i].s_addr == v.s_addr;
        if (!dup)
            out[(*n)++] = v;
    }
    freeaddrinfo(res);
    return 0;
}

/* The text of the sandbox's /etc/hosts, with its hostname: every network mode (plan NULL for
 * none); NULL with e filled. */
static char *hosts_text(const struct nsbox_netplan *plan, const char *id, struct nsbox_err *e)
{
    char hostname[NSBOX_SANDBOX_HOSTNAME_MAX];
    nsbox_state_hostname(id, hostname);
    bool oom;
    char *hosts = nsbox_netplan_hosts(plan, hostname, &oom);
    if (!hosts)
        nsbox_err_set(e, NSBOX_E_NOMEM, ENOMEM, "out of memory");
    return hosts;
}

/* ...into the state directory, bound from there (rewritten in place by start_egress). */
static int write_hosts(struct nsbox_net *n, const char *hosts, const char *state_dir,
                       struct nsbox_err *e)
{
    if ((size_t)snprintf(n->hosts, sizeof n->hosts, "%s/hosts", state_dir) >= sizeof n->hosts)
        return nsbox_err_set(e, NSBOX_E_INVALID, ENAMETOOLONG, "path too long: %s", state_dir);
    if (write_file(n->hosts, hosts, e) < 0)
        return -1;
    n->has_hosts = true;
    return 0;
}

/* Loopback only: nothing ever rewrites the hosts file (start_egress does, for names), so its
 * text is made inside the sandbox, on its root's tmpfs (rootfs/mounts.h, NSBOX_MOP_BIND_TEXT),
 * not in the state directory: one inode fewer on the host's filesystem at every create. */
static int hosts_inside(struct nsbox_net *n, const char *id, const char *state_dir,
                        struct nsbox_err *e)
{
    cleanup_free char *hosts = hosts_text(NULL, id, e);
    if (!hosts)
        return -1;
    if (strlen(hosts) >= sizeof n->hosts) /* not with one name; the file then, as for the rest */
        return write_hosts(n, hosts, state_dir, e);
    memcpy(n->hosts, hosts, strlen(hosts) + 1);
    n->has_hosts = n->hosts_inside = true;
    return 0;
}

static int write_etc_files(struct nsbox_net *n, const char *id, const char *state_dir,
                           struct nsbox_err *e)
{
    cleanup_free char *resolv = nsbox_netplan_resolv_conf(&n->plan);
    if (!resolv)
        return nsbox_err_set(e, NSBOX_E_NOMEM, ENOMEM, "out of memory");
    snprintf(n->resolv, sizeof n->resolv, "%s/resolv.conf", state_dir);
    if (write_file(n->resolv, resolv, e) < 0)
        return -1;
    n->has_resolv = true;
    cleanup_free char *hosts = hosts_text(&n->plan, id, e);
    return hosts ? write_hosts(n, hosts, state_dir, e) : -1;
}

/* allow by name: the IP literals by address as before, the names through the egress helper. */
static int plan_by_name(struct nsbox_net *n, const struct nsbox_spec *s, const char *id,
                        const struct nsbox_netconfig *cfg, const char *state_dir,
                        struct nsbox_err *e)
{
    struct nsbox_spec *lit = nsbox_netplan_literals_only(s);
    if (!lit)
        return nsbox_err_set(e, NSBOX_E_NOMEM, ENOMEM, "out of memory");
    int r = nsbox_netplan_build(lit, id, &cfg->pool, NULL, NULL, resolve_host, NULL, &n->plan, e);
    free(lit);
    if (r < 0 || nsbox_netplan_add_names(&n->plan, s, e) < 0)
        return -1;
    snprintf(n->egress_log, sizeof n->egress_log, "%s", state_dir);
    return 0;
}

/* Header bindings: with all, the bound hosts go through the helper too; the CA, its leaves and
 * the secrets are made now, for the helper started in nsbox_net_attach. */
static int prepare_bindings(struct nsbox_net *n, const struct nsbox_spec *s, const char *id,
                            const struct nsbox_netconfig *cfg, const char *state_dir,
                            struct nsbox_err *e)
{
    if (s->net == NSBOX_NET_ALL) {
        if (nsbox_netplan_add_bound(&n->plan, s, e) < 0)
            return -1;
        snprintf(n->egress_log, sizeof n->egress_log, "%s", state_dir);
    }
    return nsbox_egress_tls_prepare(s, cfg->upstream_ca[0] ? cfg->upstream_ca : NULL, id, &n->tls,
                                    e);
}

/* The helper listens on the gateway, which exists now; the names in the sandbox's /etc/hosts
 * point there (the file is bound already: rewritten in place, the sandbox sees the new text). */
static int start_egress(struct nsbox_net *n, struct nsbox_err *e)
{
    cleanup_free char *hosts = hosts_text(&n->plan, n->plan.id, e);
    if (!hosts || write_file(n->hosts, hosts, e) < 0)
        return -1;
    int r = nsbox_egress_spawn(n->egress_exe, n->egress_path, &n->plan, n->tls, n->egress_log,
                               n->has_egress_id ? &n->egress_id : NULL, &n->egress, e);
    close(n->egress_exe);
    n->egress_exe = -1;
    /* the helper has its own copy of the secrets now; this process needs them no more */
    nsbox_egress_tls_free(n->tls);
    n->tls = NULL;
    return r;
}

int nsbox_net_write_bundle(struct nsbox_net *n, int image_fd, const char *image_root,
                           const char *state_dir, struct nsbox_err *e)
{
    if (!n || !n->tls)
        return 0;
    cleanup_close int root = image_fd >= 0 ? fcntl(image_fd, F_DUPFD_CLOEXEC, 0)
                                           : open(image_root, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (root < 0)
        return nsbox_err_sys(e, "header bindings: cannot open the image root %s", image_root);
    /* The walker: an openat2 probe made here would be inherited by the sandbox's child, where
     * seccomp refuses openat2 and the probe's answer would be wrong. */
    enum nsbox_sp_backend was = nsbox_sp_set_backend(NSBOX_SP_BACKEND_WALK);
    cleanup_close int in = nsbox_sp_open(root, &NSBOX_NET_BUNDLE[1], O_RDONLY | O_NONBLOCK, 0,
                                         NSBOX_SP_NOFOLLOW_ANY, e);
    nsbox_sp_set_backend(was);
    struct stat st;
    if (in < 0 || fstat(in, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > (16 << 20))
        return nsbox_err_set(e, NSBOX_E_UNSUPPORTED, ENOENT,
                             "header bindings: the image has no trust bundle at " NSBOX_NET_BUNDLE
                             " (a regular file of at most 16 MiB) for nsbox to add the sandbox's "
                             "CA to; fix: install ca-certificates in the image");
    snprintf(n->bundle, sizeof n->bundle, "%s/ca-bundle.crt", state_dir);
    cleanup_close int out =
        open(n->bundle, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (out < 0)
        return nsbox_err_sys(e, "cannot create %s", n->bundle);
    char buf[65536];
    ssize_t r;
    off_t off = 0;
    while ((r = read(in, buf, sizeof buf)) > 0) {
        if (nsbox_pwrite_all(out, buf, (size_t)r, off) < 0)
            return nsbox_err_sys(e, "cannot write %s", n->bundle);
        off += r;
    }
    const char *pem = nsbox_egress_tls_ca_pem(n->tls);
    if (r < 0 || nsbox_pwrite_all(out, "\n", 1, off) < 0 ||
        nsbox_pwrite_all(out, pem, strlen(pem), off + 1) < 0 || fchmod(out, 0644) < 0)
        return nsbox_err_sys(e, "cannot write %s", n->bundle);
    n->has_bundle = true;
    return 0;
}

const char *nsbox_net_bundle(const struct nsbox_net *n)
{
    return n && n->has_bundle ? n->bundle : NULL;
}

/* ---- the module's interface ------------------------------------------------------------------ */

/* The struct lives in a shared mapping: the parent claims the address slot in nsbox_net_attach,
 * after the clone, and the child reads it in nsbox_net_child_setup once the parent has let it
 * go on (the sync pipe orders the two). So the parent's part may run while the child builds its
 * root, if the launcher lets the child wait for it just before its network step. */
static struct nsbox_net *net_alloc(void)
{
    void *p = mmap(NULL, sizeof(struct nsbox_net), PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    ((struct nsbox_net *)p)->egress_exe = -1;
    return p;
}

int nsbox_net_prepare(const struct nsbox_spec *s, const char *id, const char *state_dir,
                      struct nsbox_net **out, struct nsbox_err *e)
{
    *out = NULL;
    struct nsbox_net *n = net_alloc();
    if (!n)
        return nsbox_err_sys(e, "mmap");
    n->mode = s->net;
    n->link = s->net != NSBOX_NET_NONE || s->n_egress > 0;
    n->dns_stub = nsbox_dnsnote_stub_wanted(s);
    if (!n->link) { /* loopback only: no privilege needed, nothing on the host */
        if (hosts_inside(n, id, state_dir, e) < 0) {
            nsbox_net_teardown(n);
            return -1;
        }
        *out = n;
        return 0;
    }
    struct nsbox_netconfig cfg;
    struct nsbox_resolv dns = {0};
    char dns_src[PATH_MAX] = "";
    char marker[PATH_MAX];
    if (check_privileges(s, e) < 0 || load_config(&cfg, e) < 0)
        goto fail;
    if (s->net == NSBOX_NET_ALL && find_resolvers(&cfg, &dns, dns_src, sizeof dns_src, e) < 0)
        goto fail;
    if (s->n_bindings && s->net == NSBOX_NET_ALLOW && !cfg.allow_by_name) {
        nsbox_err_set(e, NSBOX_E_UNSUPPORTED, EINVAL,
                      "header bindings need the egress helper, which the config turns off "
                      "(\"allow_names\": \"address\"); fix: remove that key, or use network "
                      "all");
        goto fail;
    }
    if (cfg.allow_by_name && nsbox_netplan_has_names(s)) {
        if (plan_by_name(n, s, id, &cfg, state_dir, e) < 0)
            goto fail;
    } else if (nsbox_netplan_build(s, id, &cfg.pool, &dns, dns_src, resolve_host, NULL, &n->plan,
                                   e) < 0) {
        goto fail;
    }
    if (s->n_bindings && prepare_bindings(n, s, id, &cfg, state_dir, e) < 0)
        goto fail;
    /* the helper's executable is there: said before anything of the sandbox exists */
    if (n->plan.by_name &&
        (n->egress_exe = nsbox_egress_spawn_open(n->egress_path, sizeof n->egress_path, e)) < 0)
        goto fail;
    /* The marker first: from here on, gc knows to look for this sandbox's objects. */
    snprintf(marker, sizeof marker, "%s/" MARKER, state_dir);
    if (write_file(marker, n->plan.ifname, e) < 0 || write_etc_files(n, id, state_dir, e) < 0)
        goto fail;
    /* The child configures its end with libnl after the clone, when it can no longer load
     * libraries from the host (its root is the image). */
    if (nsbox_netlink_load(e) < 0)
        goto fail;
    *out = n;
    return 0;
fail:
    nsbox_net_teardown(n);
    return -1;
}

void nsbox_net_set_egress_id(struct nsbox_net *n, uint32_t id)
{
    if (!n)
        return;
    n->has_egress_id = true;
    n->egress_id = id;
}

int nsbox_net_attach(struct nsbox_net *n, pid_t child, struct nsbox_err *e)
{
    if (!n || !n->link)
        return 0;
    bool forwarding = true;
    if (nsbox_net_forwarding(&forwarding, e) < 0 || nsbox_nft_open(&n->nft, e) < 0)
        return nsbox_err_wrap(e, "network");
    /* The rules are in place before forwarding is turned on and before the veth exists. */
    if (nsbox_net_table_add(n->nft, &n->plan, !forwarding, &n->del, e) < 0)
        return -1;
    if (!forwarding && nsbox_net_forwarding_enable(e) < 0)
        return nsbox_err_wrap(e, "network");
    if (nsbox_netlink_veth(n->plan.ifname, NSBOX_NET_SANDBOX_IF, child, n->plan.slot.host,
                           NSBOX_NET_SLOT_PREFIX, e) < 0)
        return nsbox_err_wrap(e, "network");
    if (n->plan.by_name && start_egress(n, e) < 0)
        return nsbox_err_wrap(e, "network");
    n->attached = true;
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
    if (loopback_up(e) < 0)
        return -1;
    if (!n || !n->link)
        return 0;
    if (!n->attached)
        return nsbox_err_set(e, NSBOX_E_SYS, EINVAL,
                             "network: the sandbox's interface is not there yet (the parent must "
                             "run nsbox_net_attach before the child's network step)");
    if (nsbox_netlink_sandbox(NSBOX_NET_SANDBOX_IF, n->plan.slot.sandbox, NSBOX_NET_SLOT_PREFIX,
                              n->plan.slot.host, n->plan.by_name, e) < 0)
        return nsbox_err_wrap(e, "network");
    return 0;
}

int nsbox_net_dns_open(const struct nsbox_net *n)
{
    return n && n->dns_stub ? nsbox_dnsstub_open() : -1;
}

struct nsbox_dnsquery_table *nsbox_net_dns_table(const struct nsbox_net *n)
{
    /* the child's view of the struct is const (the parent's to fill), but for this table */
    return n && n->dns_stub ? (struct nsbox_dnsquery_table *)&n->dns : NULL;
}

size_t nsbox_net_dns_take(struct nsbox_net *n,
                          char names[NSBOX_DNSQUERY_NAMES][NSBOX_DNSQUERY_NAME_MAX + 1])
{
    return n && n->dns_stub ? nsbox_dnsquery_table_take(&n->dns, names) : 0;
}

const char *nsbox_net_resolv_conf(const struct nsbox_net *n)
{
    return n && n->has_resolv ? n->resolv : NULL;
}

const char *nsbox_net_hosts(const struct nsbox_net *n)
{
    return n && n->has_hosts && !n->hosts_inside ? n->hosts : NULL;
}

const char *nsbox_net_hosts_text(const struct nsbox_net *n)
{
    return n && n->has_hosts && n->hosts_inside ? n->hosts : NULL;
}

struct cJSON *nsbox_net_describe(const struct nsbox_net *n, enum nsbox_net_mode mode)
{
    if (n && n->link)
        return nsbox_netplan_describe(&n->plan);
    struct nsbox_netplan none = {.mode = mode}; /* loopback only */
    return nsbox_netplan_describe(&none);
}

/* The veth is not deleted: it goes away with the sandbox's network namespace, for free, where
 * deleting it costs tens of milliseconds. Links, addresses and routes all hang off it. */
void nsbox_net_teardown(struct nsbox_net *n)
{
    if (!n)
        return;
    nsbox_egress_spawn_stop(n->egress);
    if (n->egress_exe >= 0)
        close(n->egress_exe);
    n->egress_exe = -1;
    nsbox_egress_tls_free(n->tls);
    n->tls = NULL;
    if (n->nft && n->del.len) {
        struct nsbox_err e;
        if (nsbox_nft_batch(n->nft, &n->del, &e) < 0) /* changed behind our back */
            nsbox_net_table_remove(n->nft, n->plan.id, &e);
    }
    nsbox_nft_close(n->nft);
    nsbox_nftbatch_free(&n->del);
    nsbox_netplan_free(&n->plan);
    munmap(n, sizeof *n);
}

int nsbox_net_gc(const char *id, struct nsbox_err *e)
{
    char rt[PATH_MAX], marker[PATH_MAX + 32], ifname[16];
    if (nsbox_paths_runtime_dir(rt, sizeof rt, e) < 0)
        return -1;
    snprintf(marker, sizeof marker, "%s/%s/" MARKER, rt, id);
    if (access(marker, F_OK) < 0)
        return 0; /* network none: nothing was made on the host */
    snprintf(ifname, sizeof ifname, NSBOX_NET_IFPREFIX "%.12s", id);
    struct nsbox_nft *nft;
    if (nsbox_nft_open(&nft, e) < 0)
        return nsbox_err_wrap(e, "network gc");
    int r = nsbox_net_table_remove(nft, id, e);
    nsbox_nft_close(nft);
    if (r < 0)
        return nsbox_err_wrap(e, "network gc");
    /* Normally gone with the sandbox's namespace; still here if something pins that. */
    if (nsbox_netlink_delete(ifname, e) < 0)
        return nsbox_err_wrap(e, "network gc");
    return 0;
}
