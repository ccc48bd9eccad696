/* The egress helper (sandbox/egress.h). One thread per connection (bounded), blocking sockets
 * with poll() for the deadlines, splice(2) through a pipe per direction once the upstream is
 * connected: the helper copies nothing through user space after the ClientHello. A host bound
 * to a header is the exception: its connections are relayed by sandbox/egress_tls.c and
 * egress_relay.c, which write their entries in the network log through note_bound. */
#define _GNU_SOURCE
#include "egress.h"
#include "egress_jail.h"
#include "egress_log.h"
#include "egress_tls.h"
#include "egress_wire.h"
#include "netplan.h"
#include "tlshello.h"
#include "util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <linux/filter.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define MAX_PORTS NSBOX_MAX_HOSTS
#define SPLICE_CHUNK (64 * 1024) /* a pipe's default size */
/* A direction that fills its pipe in one splice moves bulk: its pipe grows to this, which
 * halves the helper's CPU per byte (fewer splices and wake-ups; docs/benchmarks.md). Only so
 * many at once: the pages of a uid's pipes beyond fs.pipe-user-pages-soft (64 MiB) would leave
 * every new pipe of the helper two pages. */
#define SPLICE_BULK (1024 * 1024)
#define SPLICE_BULK_PIPES 16

static struct nsbox_netplan plan; /* the helper's own copy: the parent's lives on */
static struct nsbox_egress_log elog = {.fd = -1, .older_fd = -1};
static struct nsbox_egress_tls *bindings; /* header bindings (NULL: none) */
static atomic_int active;
static atomic_int bulk_pipes; /* pipes grown to SPLICE_BULK */

struct conn {
    int fd, up;
    uint16_t port;
    int64_t t0, t0_wall;           /* accepted: monotonic and wall clock, ms */
    char address[INET_ADDRSTRLEN]; /* the upstream's, once connected */
    char why[160];                 /* refused or failed: the reason */
    uint64_t up_bytes, down_bytes;
    const char *name; /* a bound host's server name, for the entries of its requests */
};

static int64_t clock_ms(clockid_t id)
{
    struct timespec t;
    clock_gettime(id, &t);
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static int64_t now_ms(void)
{
    return clock_ms(CLOCK_MONOTONIC);
}

/* The connection's line in the network log (sandbox/egress_log.h), at its end. */
static void log_conn(const struct conn *c, const char *name, const char *verdict)
{
    struct nsbox_egress_entry en = {.start_ms = c->t0_wall,
                                    .duration_ms = now_ms() - c->t0,
                                    .name = name,
                                    .port = c->port,
                                    .verdict = verdict,
                                    .reason = c->why[0] ? c->why : NULL,
                                    .address = c->address[0] ? c->address : NULL,
                                    .bytes_up = c->up_bytes,
                                    .bytes_down = c->down_bytes};
    nsbox_egress_log_write(&elog, &en);
}

static void set_why(struct conn *c, const char *fmt, const char *a, const char *b)
{
    snprintf(c->why, sizeof c->why, fmt, a, b);
}

static void nodelay(int fd)
{
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

/* Refused connections are reset, not closed: the client sees "connection reset" at once. */
static void reset(int fd)
{
    struct linger l = {.l_onoff = 1, .l_linger = 0};
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
    close(fd);
}

/* Reads until the ClientHello is complete or refused. The bytes read are in buf[0..*len). */
static enum nsbox_tlshello_verdict read_hello(int fd, uint8_t *buf, size_t *len,
                                              struct nsbox_tlshello *h)
{
    int64_t deadline = now_ms() + NSBOX_EGRESS_HELLO_MS;
    *len = 0;
    for (;;) {
        int64_t left = deadline - now_ms();
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (left <= 0 || poll(&p, 1, (int)left) <= 0) {
            h->why = "no ClientHello in time";
            return NSBOX_TLSHELLO_BAD;
        }
        ssize_t n = read(fd, buf + *len, NSBOX_TLSHELLO_INPUT_MAX - *len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            h->why = "closed before a ClientHello";
            return NSBOX_TLSHELLO_BAD;
        }
        *len += (size_t)n;
        enum nsbox_tlshello_verdict v = nsbox_tlshello_parse_more(buf, *len, h);
        if (v != NSBOX_TLSHELLO_MORE)
            return v;
    }
}

/* Is `a` one of the host's own addresses? Binding to it succeeds only then (no IP_FREEBIND). A
 * name allowed by the user may resolve to anything at connect time: the host's own services
 * are as out of reach through the helper as they are for the sandbox's packets. */
static bool host_local(struct in_addr a)
{
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0)
        return true;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr = a};
    bool local = bind(s, (struct sockaddr *)&sa, sizeof sa) == 0 || errno != EADDRNOTAVAIL;
    close(s);
    return local;
}

static int connect_timeout(struct in_addr a, uint16_t port)
{
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (s < 0)
        return -1;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr = a, .sin_port = htons(port)};
    if (connect(s, (struct sockaddr *)&sa, sizeof sa) < 0 && errno != EINPROGRESS)
        goto fail;
    struct pollfd p = {.fd = s, .events = POLLOUT};
    int err = 0;
    socklen_t el = sizeof err;
    if (poll(&p, 1, NSBOX_EGRESS_CONNECT_MS) <= 0 ||
        getsockopt(s, SOL_SOCKET, SO_ERROR, &err, &el) < 0 || err)
        goto fail;
    int fl = fcntl(s, F_GETFL);
    if (fl < 0 || fcntl(s, F_SETFL, fl & ~O_NONBLOCK) < 0)
        goto fail;
    nodelay(s);
    return s;
fail:
    close(s);
    return -1;
}

/* The name as the host resolves it now, the first address that is allowed and answers; when
 * none is, c->why says why the last one was not. */
static int connect_upstream(struct conn *c, const char *name)
{
    char port[8];
    snprintf(port, sizeof port, "%u", c->port);
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM};
    struct addrinfo *res = NULL;
    int r = getaddrinfo(name, port, &hints, &res);
    if (r != 0) {
        set_why(c, "cannot resolve: %s%s", gai_strerror(r), "");
        return -1;
    }
    int s = -1;
    for (struct addrinfo *ai = res; ai && s < 0; ai = ai->ai_next) {
        struct in_addr a = ((struct sockaddr_in *)ai->ai_addr)->sin_addr;
        char ip[INET_ADDRSTRLEN];
        inet_ntop(AF_INET, &a, ip, sizeof ip);
        const char *why = nsbox_netplan_upstream_refusal(&plan, a);
        if (!why && host_local(a))
            why = "an address of this host";
        if (why) {
            set_why(c, "resolves to %s, %s", ip, why);
            continue;
        }
        s = connect_timeout(a, c->port);
        if (s < 0)
            set_why(c, "cannot connect to %s%s", ip, "");
        else
            snprintf(c->address, sizeof c->address, "%s", ip);
    }
    if (s >= 0)
        c->why[0] = '\0';
    freeaddrinfo(res);
    return s;
}

static bool write_all(int fd, const uint8_t *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return false;
        p += w;
        n -= (size_t)w;
    }
    return true;
}

struct pump {
    int in, out;
    uint64_t bytes; /* moved in -> out */
};

/* The pipe grown to SPLICE_BULK, if fewer than SPLICE_BULK_PIPES are. */
static bool grow_pipe(int fd)
{
    if (atomic_fetch_add(&bulk_pipes, 1) < SPLICE_BULK_PIPES &&
        fcntl(fd, F_SETPIPE_SZ, SPLICE_BULK) >= SPLICE_BULK)
        return true;
    atomic_fetch_sub(&bulk_pipes, 1);
    return false;
}

/* One direction, in -> out, through a pipe; at in's end, out is shut for writing (half-close
 * passes through). An error shuts both sockets, which ends the other direction too. */
static void *pump(void *arg)
{
    struct pump *d = arg;
    int pp[2] = {-1, -1};
    bool ok = pipe2(pp, O_CLOEXEC) == 0;
    size_t chunk = SPLICE_CHUNK;
    while (ok) {
        ssize_t n = splice(d->in, NULL, pp[1], NULL, chunk, SPLICE_F_MOVE);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            ok = n == 0;
            break;
        }
        if ((size_t)n == SPLICE_CHUNK && chunk == SPLICE_CHUNK && grow_pipe(pp[1]))
            chunk = SPLICE_BULK;
        while (n > 0) {
            /* no SPLICE_F_MORE: on a socket it corks, and a small TLS record (a handshake
             * message, a request) would wait for the 200 ms cork timer */
            ssize_t w = splice(pp[0], NULL, d->out, NULL, (size_t)n, SPLICE_F_MOVE);
            if (w < 0 && errno == EINTR)
                continue;
            if (w <= 0) {
                ok = false;
                break;
            }
            n -= w;
            d->bytes += (uint64_t)w;
        }
    }
    if (ok) {
        shutdown(d->out, SHUT_WR);
    } else {
        shutdown(d->in, SHUT_RDWR);
        shutdown(d->out, SHUT_RDWR);
    }
    if (pp[0] >= 0) {
        close(pp[0]);
        close(pp[1]);
    }
    if (chunk == SPLICE_BULK)
        atomic_fetch_sub(&bulk_pipes, 1);
    return NULL;
}

static void splice_both(struct conn *c)
{
    struct pump down = {.in = c->up, .out = c->fd}, upward = {.in = c->fd, .out = c->up};
    pthread_t t;
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setstacksize(&at, 64 * 1024);
    if (pthread_create(&t, &at, pump, &down) != 0) {
        pthread_attr_destroy(&at);
        return;
    }
    pthread_attr_destroy(&at);
    pump(&upward);
    pthread_join(t, NULL);
    c->up_bytes += upward.bytes;
    c->down_bytes = down.bytes;
}

static int connect_bound(void *ctx, const char *name)
{
    return connect_upstream(ctx, name);
}

/* An entry of the bound path (sandbox/egress_tls.h): the connection's side of it. */
static void note_bound(void *ctx, struct nsbox_egress_entry *en)
{
    struct conn *c = ctx;
    en->name = c->name;
    en->port = c->port;
    en->address = c->address[0] ? c->address : NULL;
    if (!strcmp(en->verdict, "failed") && c->why[0])
        en->reason = c->why; /* why the connect failed says more than "cannot connect" */
    nsbox_egress_log_write(&elog, en);
}

static void *serve(void *arg)
{
    struct conn *c = arg;
    uint8_t *buf = malloc(NSBOX_TLSHELLO_INPUT_MAX);
    struct nsbox_tlshello *h = malloc(sizeof *h);
    if (h)
        h->rec_off = h->have = h->need = 0;
    size_t len = 0;
    const char *verdict = "refused";
    c->up = -1;
    if (!buf || !h) {
        set_why(c, "out of memory%s%s", "", "");
        goto out;
    }
    h->name[0] = '\0';
    nodelay(c->fd);
    enum nsbox_tlshello_verdict v = read_hello(c->fd, buf, &len, h);
    if (v != NSBOX_TLSHELLO_SNI) {
        snprintf(c->why, sizeof c->why, "%s%s%s", nsbox_tlshello_verdict_name(v),
                 h->why ? ": " : "", h->why ? h->why : "");
        h->name[0] = '\0'; /* what the parser left there is not a server name */
        goto out;
    }
    if (!nsbox_netplan_name_allowed(&plan, h->name, c->port)) {
        set_why(c, "not in the allow list%s%s", "", "");
        goto out;
    }
    if (nsbox_egress_tls_bound(bindings, h->name, c->port)) {
        c->name = h->name;
        nsbox_egress_tls_serve(bindings, c->fd, buf, len, h->name, c->port, connect_bound,
                               note_bound, c);
        close(c->fd);
        c->fd = -1;
        verdict = NULL; /* its requests and refusals have their own entries */
        goto out;
    }
    c->up = connect_upstream(c, h->name);
    if (c->up < 0 && !strncmp(c->why, "cannot ", 7))
        verdict = "failed";
    if (c->up < 0)
        goto out;
    verdict = "spliced";
    if (!write_all(c->up, buf, len))
        goto out;
    c->up_bytes = len;
    free(buf);
    buf = NULL;
    splice_both(c);
    close(c->up);
    close(c->fd);
    c->fd = c->up = -1;
out:
    if (c->up >= 0)
        close(c->up);
    if (c->fd >= 0)
        reset(c->fd);
    if (verdict)
        log_conn(c, h && h->name[0] ? h->name : NULL, verdict);
    free(buf);
    free(h);
    free(c);
    /* the last connection ended: what the connections freed (TLS buffers and sessions'
     * leftovers between live blocks) goes back while the helper waits */
    if (atomic_fetch_sub(&active, 1) == 1)
        malloc_trim(0);
    return NULL;
}

static void accept_one(int lfd, uint16_t port)
{
    struct sockaddr_in sa;
    socklen_t sl = sizeof sa;
    int fd = accept4(lfd, (struct sockaddr *)&sa, &sl, SOCK_CLOEXEC);
    if (fd < 0)
        return;
    if (atomic_fetch_add(&active, 1) >= NSBOX_EGRESS_MAX_CONNS) {
        atomic_fetch_sub(&active, 1);
        struct conn full = {.port = port, .t0 = now_ms(), .t0_wall = clock_ms(CLOCK_REALTIME)};
        snprintf(full.why, sizeof full.why, "%d connections open", NSBOX_EGRESS_MAX_CONNS);
        reset(fd);
        log_conn(&full, NULL, "refused");
        return;
    }
    struct conn *c = calloc(1, sizeof *c);
    pthread_t t;
    pthread_attr_t at;
    if (!c) {
        reset(fd);
        atomic_fetch_sub(&active, 1);
        return;
    }
    c->fd = fd;
    c->port = port;
    c->t0 = now_ms();
    c->t0_wall = clock_ms(CLOCK_REALTIME);
    pthread_attr_init(&at);
    /* OpenSSL's handshakes on bound hosts need more than splicing does; untouched pages of a
     * thread's stack cost nothing */
    pthread_attr_setstacksize(&at, 512 * 1024);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&t, &at, serve, c) != 0) {
        reset(fd);
        free(c);
        atomic_fetch_sub(&active, 1);
    }
    pthread_attr_destroy(&at);
}

/* The message's fixed part (egress_spawn.c writes it in this order); fds: the descriptors in
 * the order the parent sent them: the listeners, the log's two, the upstream CA. */
struct setup {
    pid_t parent;
    size_t n;
    int fds[MAX_PORTS];
    uint16_t ports[MAX_PORTS];
    int ca_fd;
    struct sock_fprog prog;
};

static bool receive_head(struct nsbox_egress_wire *w, const int *fds, size_t n_fds,
                         struct setup *st)
{
    uint32_t magic, parent, n, port, has_log, has_ca;
    if (!nsbox_egress_wire_get_u32(w, &magic) || magic != NSBOX_EGRESS_WIRE_MAGIC ||
        !nsbox_egress_wire_get_u32(w, &parent) || !nsbox_egress_wire_get_u32(w, &n) ||
        n > MAX_PORTS)
        return false;
    st->parent = (pid_t)parent;
    for (st->n = 0; st->n < n; st->n++) {
        if (!nsbox_egress_wire_get_u32(w, &port) || port > 65535)
            return false;
        st->ports[st->n] = (uint16_t)port;
    }
    if (!nsbox_egress_wire_get_u32(w, &has_log) || !nsbox_egress_wire_get_u32(w, &has_ca) ||
        n + (has_log ? 2 : 0) + (has_ca ? 1 : 0) != n_fds)
        return false;
    memcpy(st->fds, fds, n * sizeof *fds);
    if (has_log) {
        elog.fd = fds[n];
        elog.older_fd = fds[n + 1];
        pthread_mutex_init(&elog.mu, NULL);
    }
    st->ca_fd = has_ca ? fds[n_fds - 1] : -1;
    const uint8_t *bpf;
    size_t len;
    if (!nsbox_egress_wire_get_bytes(w, &bpf, &len) || !len || len % sizeof(struct sock_filter) ||
        len / sizeof(struct sock_filter) > BPF_MAXINSNS || !(st->prog.filter = malloc(len)))
        return false;
    memcpy(st->prog.filter, bpf, len);
    st->prog.len = (unsigned short)(len / sizeof(struct sock_filter));
    return true;
}

/* The plan's part the helper reads: the pool (refused upstream) and the allowed names. */
static bool receive_plan(struct nsbox_egress_wire *w)
{
    uint32_t base, prefix, n, port;
    if (!nsbox_egress_wire_get_u32(w, &base) || !nsbox_egress_wire_get_u32(w, &prefix) ||
        prefix > 32 || !nsbox_egress_wire_get_u32(w, &n) || n > NSBOX_MAX_HOSTS)
        return false;
    plan.pool.base = base;
    plan.pool.prefix = (uint8_t)prefix;
    plan.by_name = true;
    if (n && !(plan.names = calloc(n, sizeof *plan.names)))
        return false;
    for (plan.n_names = 0; plan.n_names < n; plan.n_names++) {
        struct nsbox_host *h = &plan.names[plan.n_names];
        if (!nsbox_egress_wire_get_str(w, h->name, sizeof h->name) ||
            !nsbox_egress_wire_get_u32(w, &port) || port > 65535)
            return false;
        h->port = (uint16_t)port;
    }
    return true;
}

/* Everything the helper is given, read before anything of the sandbox's. 0, or -1 with *err
 * and what failed in e. */
static int receive(int sock, struct setup *st, struct nsbox_egress_tls **tls, struct nsbox_err *e)
{
    struct nsbox_egress_wire w;
    int fds[NSBOX_EGRESS_WIRE_FDS];
    size_t n_fds = 0;
    uint32_t has_bindings = 0;
    int r = -1;
    if (nsbox_egress_wire_init(&w) < 0)
        return nsbox_err_sys(e, "no memory for its configuration");
    if (nsbox_egress_wire_recv(sock, &w, fds, NSBOX_EGRESS_WIRE_FDS, &n_fds) < 0) {
        nsbox_err_sys(e, "cannot read its configuration");
        goto out;
    }
    if (!receive_head(&w, fds, n_fds, st) || !receive_plan(&w) ||
        !nsbox_egress_wire_get_u32(&w, &has_bindings)) {
        nsbox_err_set(e, NSBOX_E_SYS, EPROTO, "its configuration is not whole");
        goto out;
    }
    r = has_bindings ? nsbox_egress_tls_receive(&w, st->ca_fd, tls, e) : 0;
    if (r == 0 && w.at != w.n)
        r = nsbox_err_set(e, NSBOX_E_SYS, EPROTO, "its configuration has more than it reads");
out:
    nsbox_egress_wire_free(&w);
    if (st->ca_fd >= 0)
        close(st->ca_fd); /* the CA is read (or failed): no use under the jail */
    st->ca_fd = -1;
    return r;
}

static void serve_forever(const struct setup *st)
{
    struct pollfd pf[MAX_PORTS];
    for (size_t i = 0; i < st->n; i++)
        pf[i] = (struct pollfd){.fd = st->fds[i], .events = POLLIN};
    for (;;) {
        if (poll(pf, st->n, -1) < 0) {
            if (errno == EINTR)
                continue;
            _exit(1);
        }
        for (size_t i = 0; i < st->n; i++)
            if (pf[i].revents & POLLIN)
                accept_one(st->fds[i], st->ports[i]);
    }
}

int nsbox_egress_main(int sock)
{
    struct nsbox_err e = {0};
    struct setup st = {.ca_fd = -1};
    int err = 0;
    if (nsbox_egress_jail_seal() < 0) {
        nsbox_egress_wire_send_status(sock, errno, "cannot make itself not dumpable");
        return 1;
    }
    prctl(PR_SET_NAME, "nsbox-egress"); /* an exec from a descriptor names it after the fd */
    /* one malloc arena: each connection thread's would otherwise stay */
    mallopt(M_ARENA_MAX, 1);
    nsbox_reset_signals(); /* what the parent ignored or blocked, an exec keeps so */
    signal(SIGPIPE, SIG_IGN);
    if (receive(sock, &st, &bindings, &e) < 0) {
        nsbox_egress_wire_send_status(sock, e.sys_errno ? e.sys_errno : EPROTO, e.msg);
        return 1;
    }
    if (nsbox_egress_jail_enter(&st.prog, st.parent) < 0) {
        err = errno ? errno : EPERM;
        nsbox_egress_wire_send_status(sock, err,
                                      "cannot give up its privileges (no "
                                      "capability, no_new_privs, seccomp)");
        return 1;
    }
    free(st.prog.filter);
    if (nsbox_egress_wire_send_status(sock, 0, NULL) < 0)
        return 1;
    close(sock);
    malloc_trim(0); /* the configuration's buffers, OpenSSL's set-up: freed pages go back */
    serve_forever(&st);
    return 0;
}
