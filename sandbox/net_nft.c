/* nf_tables for the network module. A sandbox's own elements are added and removed with netlink
 * batches built by policy/nftbatch and sent on nsbox's own netfilter socket: each batch is one
 * kernel transaction, and nothing needs loading or fetching first. libnftables
 * (os/nftlib.c) is loaded only for the rest: creating the table (its ruleset is text, one
 * transaction), listing it (a taken slot, gc) and gc's deletions. docs/decisions.md, "Network",
 * says why. */
#define _GNU_SOURCE
#include "net_impl.h"
#include "nftbatch.h"
#include "nftlib.h"
#include "util.h"

#include <sched.h>
#include <signal.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/membarrier.h>
#include <linux/netlink.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct nsbox_nft {
    int fd;       /* our netfilter socket for element batches, -1 until the first one */
    bool written; /* a batch went through it */
    /* libnftables, opened on first need */
    const struct nsbox_nftlib *lib;
    struct nft_ctx *ctx;
    int ctx_fd;       /* the context's netlink socket, when found; see close_in_background */
    bool ctx_written; /* a transaction went through it */
};

static bool is_nft_socket(int fd)
{
    int dom = 0, proto = 0;
    socklen_t l1 = sizeof dom, l2 = sizeof proto;
    return fd >= 0 && getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &dom, &l1) == 0 &&
           getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &proto, &l2) == 0 && dom == AF_NETLINK &&
           proto == NETLINK_NETFILTER;
}

/* The lowest free descriptor: where the context's socket will land (libnftables opens it in
 * nft_ctx_new, after closing the few files it reads). Checked afterwards. */
static int lowest_free_fd(void)
{
    int fd = fcntl(0, F_DUPFD_CLOEXEC, 0);
    if (fd < 0)
        fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (fd >= 0)
        close(fd);
    return fd;
}

int nsbox_nft_open(struct nsbox_nft **out, struct nsbox_err *e)
{
    *out = calloc(1, sizeof **out);
    if (!*out)
        return nsbox_err_sys(e, "calloc");
    (*out)->fd = (*out)->ctx_fd = -1;
    return 0;
}

static int ctx_open(struct nsbox_nft *n, struct nsbox_err *e)
{
    if (n->ctx)
        return 0;
    const struct nsbox_nftlib *lib = nsbox_nftlib(e);
    if (!lib)
        return -1;
    int guess = lowest_free_fd();
    struct nft_ctx *ctx = lib->ctx_new(NFT_CTX_DEFAULT);
    if (!ctx)
        return nsbox_err_set(e, NSBOX_E_NOMEM, ENOMEM, "nftables: cannot create a context");
    n->lib = lib;
    n->ctx = ctx;
    n->ctx_fd = is_nft_socket(guess) ? guess : -1;
    lib->ctx_buffer_output(ctx);
    lib->ctx_buffer_error(ctx);
    return 0;
}

/* Releasing a netfilter netlink socket makes the kernel wait until committed nf_tables
 * transactions have been freed (nf_tables' NETLINK_URELEASE handler flushes its destroy work,
 * which waits for an RCU grace period): 2 to 15 ms here right after a commit, in close() or, if
 * the socket is left open, in exit(). A grandchild that holds the last reference to the socket
 * takes that wait instead; nobody waits for it (it is reparented and reaped by init). */
struct closer {
    int keep[3]; /* the sockets (or -1) and the pipe */
    int pipe_rd;
};

static void sort3(int *v)
{
    for (int i = 0; i < 3; i++)
        for (int j = i + 1; j < 3; j++)
            if (v[j] < v[i]) {
                int t = v[i];
                v[i] = v[j];
                v[j] = t;
            }
}

static void closer_run(const struct closer *c)
{
    /* Keep only the sockets and the pipe: no lock, no stdout that a caller reads to EOF. */
    int keep[3] = {c->keep[0], c->keep[1], c->keep[2]};
    sort3(keep);
    int next = 0; /* the lowest descriptor not dealt with yet */
    for (int i = 0; i < 3; i++) {
        if (keep[i] < next)
            continue; /* -1: no such socket */
        if (keep[i] > next && syscall(SYS_close_range, next, keep[i] - 1, 0) < 0)
            for (int fd = next; fd < keep[i]; fd++)
                close(fd);
        next = keep[i] + 1;
    }
    if (syscall(SYS_close_range, next, ~0U, 0) < 0)
        for (int fd = next; fd < 4096; fd++)
            close(fd);
    if (chdir("/") != 0) /* pin no directory of the caller's while we linger */
        syscall(SYS_exit_group, 0);
    char b;
    while (read(c->pipe_rd, &b, 1) < 0 && errno == EINTR)
        ;
    /* Releasing the socket flushes the namespace's pending nf_tables work while holding its
     * commit mutex, which would stall the next sandbox's transaction by a grace period: let
     * that work finish first. It starts with a grace period; membarrier waits for two, holding
     * nothing. */
    for (int i = 0; i < 2; i++)
        if (syscall(SYS_membarrier, MEMBARRIER_CMD_GLOBAL, 0, 0) < 0) {
            struct timespec ts = {0, 20 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
    syscall(SYS_exit_group, 0); /* the sockets' last references go here */
}

/* Runs on its own stack in our memory while we are suspended (CLONE_VM | CLONE_VFORK, as
 * posix_spawn does); a plain fork from here makes the grandchild, which only makes system
 * calls. Cheaper than two forks. */
static int closer_middle(void *arg)
{
    if (nsbox_clone_bare(SIGCHLD) == 0)
        closer_run(arg);
    return 0;
}

/* Hands the sockets that committed transactions to the closer, then lets go of them here. */
static bool close_in_background(struct nsbox_nft *n)
{
    int a = n->written && is_nft_socket(n->fd) ? n->fd : -1;
    int b = n->ctx && n->ctx_written && is_nft_socket(n->ctx_fd) ? n->ctx_fd : -1;
    int p[2];
    if ((a < 0 && b < 0) || pipe2(p, O_CLOEXEC) < 0)
        return false;
    struct closer c = {{a, b, p[0]}, p[0]};
    char stack[16384] __attribute__((aligned(16))); /* ours is suspended meanwhile */
    pid_t mid = clone(closer_middle, stack + sizeof stack, CLONE_VM | CLONE_VFORK | SIGCHLD, &c);
    close(p[0]);
    if (mid < 0) {
        close(p[1]);
        return false;
    }
    waitpid(mid, NULL, 0); /* the middle child: already gone */
    /* not the last references any more: none of these waits */
    if (n->ctx)
        n->lib->ctx_free(n->ctx);
    n->ctx = NULL;
    if (n->fd >= 0)
        close(n->fd);
    n->fd = -1;
    close(p[1]); /* now the grandchild may go */
    return true;
}

void nsbox_nft_close(struct nsbox_nft *n)
{
    if (!n)
        return;
    if (!close_in_background(n)) {
        if (n->ctx)
            n->lib->ctx_free(n->ctx);
        if (n->fd >= 0)
            close(n->fd);
    }
    free(n);
}

/* ---- element batches on our own socket --------------------------------------------------------- */

static int code_of(int err)
{
    return err == EPERM || err == EACCES || err == EOPNOTSUPP || err == EPROTONOSUPPORT ||
                   err == EAFNOSUPPORT
               ? NSBOX_E_UNSUPPORTED
               : NSBOX_E_SYS;
}

int nsbox_nft_batch(struct nsbox_nft *n, const struct nsbox_nftbatch *b, struct nsbox_err *e)
{
    if (n->fd < 0) {
        n->fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_NETFILTER);
        if (n->fd < 0)
            return nsbox_err_set(e, code_of(errno), errno, "nftables: netlink socket: %s",
                                 strerror(errno));
        int one = 1; /* errors without a copy of our message */
        (void)setsockopt(n->fd, SOL_NETLINK, NETLINK_CAP_ACK, &one, sizeof one);
    }
    struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
    ssize_t r;
    do
        r = sendto(n->fd, b->buf, b->len, 0, (struct sockaddr *)&kernel, sizeof kernel);
    while (r < 0 && errno == EINTR);
    if (r < 0)
        return nsbox_err_set(e, code_of(errno), errno, "nftables: send: %s", strerror(errno));
    n->written = true;
    /* The kernel handles the batch within sendto: its replies are queued by now. The wait is
     * only a guard against a kernel that would not answer. */
    struct nsbox_nftverdict v = {0};
    while (!v.done) {
        long buf[8192 / sizeof(long)];
        r = recv(n->fd, buf, sizeof buf, MSG_DONTWAIT);
        if (r < 0 && errno == EAGAIN) {
            struct pollfd pfd = {n->fd, POLLIN, 0};
            int pr = poll(&pfd, 1, 5000);
            if (pr == 0)
                return nsbox_err_set(e, NSBOX_E_SYS, ETIMEDOUT,
                                     "nftables: no answer from the kernel");
            continue;
        }
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return nsbox_err_set(e, code_of(errno), errno, "nftables: receive: %s",
                                 strerror(errno));
        if (nsbox_nftbatch_replies(b, buf, (size_t)r, &v) < 0)
            return nsbox_err_set(e, NSBOX_E_SYS, EPROTO, "nftables: malformed answer");
    }
    if (v.err) {
        if (v.set)
            return nsbox_err_set(e, code_of(v.err), v.err, "nftables: %s (set inet %s %s)",
                                 strerror(v.err), NSBOX_NET_TABLE, v.set);
        return nsbox_err_set(e, code_of(v.err), v.err, "nftables: %s", strerror(v.err));
    }
    return 0;
}

/* ---- libnftables ------------------------------------------------------------------------------- */

/* libnftables reports kernel errors as text ("Error: Could not process rule: File exists");
 * the errno is recovered from its strerror() words. */
static int errno_of(const char *msg)
{
    static const int known[] = {EEXIST, ENOENT, EPERM, EACCES, EOPNOTSUPP, EPROTONOSUPPORT,
                                EAFNOSUPPORT, EBUSY, ENOMEM, ENOSPC, EINVAL};
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (strstr(msg, strerror(known[i])))
            return known[i];
    return EIO;
}

static int nft_error(struct nsbox_nft *n, struct nsbox_err *e)
{
    const char *buf = n->lib->ctx_get_error_buffer(n->ctx);
    char line[512];
    if (!buf || !*buf)
        buf = "unknown error";
    if (!strncmp(buf, "Error: ", 7))
        buf += 7;
    snprintf(line, sizeof line, "%.*s", (int)strcspn(buf, "\n"), buf);
    int err = errno_of(line);
    return nsbox_err_set(e, code_of(err), err, "nftables: %s", line);
}

static void set_json(struct nsbox_nft *n, bool on)
{
    n->lib->output_set_flags(n->ctx, on ? NFT_CTX_OUTPUT_JSON : 0);
}

int nsbox_nft_run(struct nsbox_nft *n, const char *cmds, bool json, struct nsbox_err *e)
{
    if (ctx_open(n, e) < 0)
        return -1;
    if (json)
        set_json(n, true); /* JSON output makes libnftables parse JSON input too */
    int r = n->lib->run_cmd_from_buffer(n->ctx, cmds);
    n->ctx_written = true; /* even a failed batch may have committed nothing but reached the kernel */
    if (json)
        set_json(n, false);
    if (r != 0)
        return nft_error(n, e);
    /* reading the buffers rewinds them: nothing of this batch shows up in the next one */
    n->lib->ctx_get_output_buffer(n->ctx);
    n->lib->ctx_get_error_buffer(n->ctx);
    return 0;
}

int nsbox_nft_list_json(struct nsbox_nft *n, const char *what, char **out, struct nsbox_err *e)
{
    *out = NULL;
    if (ctx_open(n, e) < 0)
        return -1;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "list %s", what);
    set_json(n, true);
    int r = n->lib->run_cmd_from_buffer(n->ctx, cmd);
    set_json(n, false);
    if (r != 0)
        return nft_error(n, e);
    const char *buf = n->lib->ctx_get_output_buffer(n->ctx);
    *out = strdup(buf ? buf : "");
    if (!*out)
        return nsbox_err_sys(e, "strdup");
    return 0;
}
