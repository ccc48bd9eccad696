/* nf_tables through libnftables (runtime/nftlib.c loads it on first use): one call per batch,
 * each batch one kernel transaction. */
#define _GNU_SOURCE
#include "net_impl.h"
#include "nftlib.h"

#include <dlfcn.h>
#include <sched.h>
#include <signal.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/membarrier.h>
#include <linux/netlink.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct nsbox_nft {
    const struct nsbox_nftlib *lib;
    struct nft_ctx *ctx;
    void (*set_output_flags)(struct nft_ctx *, unsigned int); /* JSON listings and input */
    int fd;       /* the context's netlink socket, when found; see close_in_background */
    bool written; /* a transaction went through it */
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
    *out = NULL;
    const struct nsbox_nftlib *lib = nsbox_nftlib(e);
    if (!lib)
        return -1;
    struct nsbox_nft *n = calloc(1, sizeof *n);
    if (!n)
        return nsbox_err_sys(e, "calloc");
    n->lib = lib;
    int guess = lowest_free_fd();
    n->ctx = lib->ctx_new(NFT_CTX_DEFAULT);
    n->fd = is_nft_socket(guess) ? guess : -1;
    if (!n->ctx) {
        free(n);
        return nsbox_err_set(e, NSBOX_E_NOMEM, ENOMEM, "nftables: cannot create a context");
    }
    lib->ctx_buffer_output(n->ctx);
    lib->ctx_buffer_error(n->ctx);
    *out = n;
    return 0;
}

/* Releasing a netfilter netlink socket makes the kernel wait until committed nf_tables
 * transactions have been freed (nf_tables' NETLINK_URELEASE handler flushes its destroy work,
 * which waits for an RCU grace period): 2 to 15 ms here right after a commit, in close() or, if
 * the socket is left open, in exit(). A grandchild that holds the last reference to the socket
 * takes that wait instead; nobody waits for it (it is reparented and reaped by init). */
struct closer {
    int keep, pipe_rd;
};

static void closer_run(const struct closer *c)
{
    /* Keep only the socket and the pipe: no lock, no stdout that a caller reads to EOF. */
    int lo = c->keep < c->pipe_rd ? c->keep : c->pipe_rd;
    int hi = c->keep < c->pipe_rd ? c->pipe_rd : c->keep;
    for (int fd = 0; fd < lo; fd++)
        close(fd);
    if (hi > lo + 1 && syscall(SYS_close_range, lo + 1, hi - 1, 0) < 0)
        for (int fd = lo + 1; fd < hi; fd++)
            close(fd);
    if (syscall(SYS_close_range, hi + 1, ~0U, 0) < 0)
        for (int fd = hi + 1; fd < 4096; fd++)
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
    syscall(SYS_exit_group, 0); /* the socket's last reference goes here */
}

/* Runs on its own stack in our memory while we are suspended (CLONE_VM | CLONE_VFORK, as
 * posix_spawn does); a plain fork from here makes the grandchild, which only makes system
 * calls. Cheaper than two forks. */
static int closer_middle(void *arg)
{
    if (syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0) == 0)
        closer_run(arg);
    return 0;
}

static bool close_in_background(struct nsbox_nft *n)
{
    int p[2];
    if (n->fd < 0 || !is_nft_socket(n->fd) || pipe2(p, O_CLOEXEC) < 0)
        return false;
    struct closer c = {n->fd, p[0]};
    char stack[16384] __attribute__((aligned(16))); /* ours is suspended meanwhile */
    pid_t mid = clone(closer_middle, stack + sizeof stack, CLONE_VM | CLONE_VFORK | SIGCHLD, &c);
    close(p[0]);
    if (mid < 0) {
        close(p[1]);
        return false;
    }
    waitpid(mid, NULL, 0);    /* the middle child: already gone */
    n->lib->ctx_free(n->ctx); /* not the last reference any more: does not wait */
    close(p[1]);              /* now the grandchild may go */
    return true;
}

void nsbox_nft_close(struct nsbox_nft *n)
{
    if (!n)
        return;
    if (!n->written || !close_in_background(n))
        n->lib->ctx_free(n->ctx);
    free(n);
}

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
    int code = err == EPERM || err == EACCES ? NSBOX_E_UNSUPPORTED
               : err == EOPNOTSUPP || err == EPROTONOSUPPORT || err == EAFNOSUPPORT
                   ? NSBOX_E_UNSUPPORTED
                   : NSBOX_E_SYS;
    return nsbox_err_set(e, code, err, "nftables: %s", line);
}

static void set_json(struct nsbox_nft *n, bool on)
{
    if (!n->set_output_flags) {
        /* nftlib.h does not carry this one; the library is loaded already. */
        void *h = dlopen("libnftables.so.1", RTLD_NOW | RTLD_NOLOAD | RTLD_LOCAL);
        if (h)
            n->set_output_flags = (void (*)(struct nft_ctx *, unsigned int))dlsym(
                h, "nft_ctx_output_set_flags");
        if (!n->set_output_flags)
            return;
    }
    n->set_output_flags(n->ctx, on ? NFT_CTX_OUTPUT_JSON : 0);
}

int nsbox_nft_run(struct nsbox_nft *n, const char *cmds, bool json, struct nsbox_err *e)
{
    if (json)
        set_json(n, true); /* JSON output makes libnftables parse JSON input too */
    int r = n->lib->run_cmd_from_buffer(n->ctx, cmds);
    n->written = true; /* even a failed batch may have committed nothing but reached the kernel */
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
