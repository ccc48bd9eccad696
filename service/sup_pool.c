/* A pooled sandbox (docs/pool.md) as its supervisor sees it: its pool entry, the run socket
 * init listens on, and which requests it takes while it waits for its run. */
#define _GNU_SOURCE
#include "supervisor_impl.h"
#include "cleanup.h"
#include "config.h"
#include "paths.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- the pool (pool.md) --------------------------------------------------------------------- */

static int pool_entry_path(const struct sup *S, char *out, size_t n, struct nsbox_err *e)
{
    char rt[PATH_MAX];
    if (nsbox_paths_runtime_dir(rt, sizeof rt, e) < 0)
        return -1;
    if ((size_t)snprintf(out, n, "%s/pool/%s-%s", rt, S->pool_key, S->sb.st.id) >= n)
        return nsbox_err_set(e, NSBOX_E_INVALID, ENAMETOOLONG, "pool entry path too long");
    return 0;
}

/* Listed last, when the sandbox is ready for its run, and only when the config file still holds
 * the text its filler had read: its key covers that text, and runs with that text take it. One
 * whose workspace, network or host section may be of an edit made since is not pooled; its
 * filler stops (warmpool.c). */
int nsbox_sup_pool_entry_create(struct sup *S, struct nsbox_err *e)
{
    const struct nsbox_config *cfg;
    int same = nsbox_config_same_text_since(S->config_reads, &cfg, e);
    if (same < 0)
        return -1;
    if (!same)
        return nsbox_err_set(e, NSBOX_E_INVALID, ESTALE,
                             "the config file %s changed while a pooled sandbox was made: it "
                             "is not pooled under the key of the file before",
                             cfg->path);
    char path[PATH_MAX];
    if (pool_entry_path(S, path, sizeof path, e) < 0)
        return -1;
    char *slash = strrchr(path, '/');
    *slash = '\0';
    if (mkdir(path, 0700) < 0 && errno != EEXIST)
        return nsbox_err_sys(e, "pool directory %s", path);
    *slash = '/';
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return nsbox_err_sys(e, "pool entry %s", path);
    close(fd);
    return 0;
}

void nsbox_sup_pool_entry_remove(struct sup *S)
{
    char path[PATH_MAX];
    struct nsbox_err e;
    if (S->pool_key[0] && pool_entry_path(S, path, sizeof path, &e) == 0)
        unlink(path);
}

/* The run socket (agent.h): made here, in the sandbox's own 0700 directory, and listened on by
 * init. The OOM counter goes along, so that init can report the run's OOM kills itself. */
int nsbox_sup_pool_listen(struct sup *S, struct nsbox_err *e)
{
    cleanup_close int fd = nsbox_sup_listen_in_dir(S->sb.st.dir, "run", SOCK_SEQPACKET, 16, e);
    if (fd < 0)
        return -1;
    cleanup_close int oom = nsbox_cgroup_oom_fd(&S->sb.cg);
    return nsbox_agent_listen(S->agent, fd, oom, e);
}

/* A run took the sandbox (init said CLAIMED): it is the run's now. No ttl; nobody else finds
 * it; it is deleted when the run ends (or its client goes). */
static void on_claimed(struct sup *S)
{
    char path[PATH_MAX];
    S->claimed = true;
    nsbox_sup_set_timer(S->ttl_fd, 0); /* the run's own timeout bounds it now */
    nsbox_sup_pool_entry_remove(S);
    snprintf(path, sizeof path, "%s/run", S->sb.st.dir);
    unlink(path);
}

void nsbox_sup_pool_on_event(const struct nsbox_agent_event *ev, void *arg)
{
    struct sup *S = arg;
    if (ev->type == NSBOX_AGENT_CLAIMED)
        on_claimed(S);
    else if (ev->seq == NSBOX_AGENT_SEQ_RUN &&
             (ev->type == NSBOX_AGENT_EXITED || ev->type == NSBOX_AGENT_FAILED))
        S->quit = true; /* its run is over: the rest goes, then the replacement is made */
}

/* Before a pooled sandbox is deleted from outside (rm, drain, its ttl): init stops taking a
 * run. 1: it may go. 0: a run took it first; it is that run's and goes when the run ends.
 * -1: init did not answer in time (busy starting a run, say): not now. */
int nsbox_sup_pool_retire(struct sup *S)
{
    if (!S->pool_key[0] || S->claimed)
        return !S->claimed;
    int r = nsbox_agent_retire(S->agent, nsbox_sup_pool_on_event, S);
    if (r == 1 && !S->claimed)
        on_claimed(S);
    return r == 1 ? 0 : r == -2 ? -1 : 1; /* -1 from init: it is gone, and the sandbox with it */
}

/* Which requests a sandbox takes while pooled: looking at it, or deleting it while no run has
 * taken it; nobody else may change what the run will find. */
int nsbox_sup_pool_gate(struct sup *S, const struct nsbox_request *rq, struct nsbox_err *e)
{
    if (!S->pool_key[0])
        return 0;
    switch (rq->op) {
    case NSBOX_OP_PING:
    case NSBOX_OP_INSPECT:
        return 0;
    case NSBOX_OP_DELETE:
        switch (nsbox_sup_pool_retire(S)) {
        case 1:
            return 0;
        case 0:
            return nsbox_err_set(e, NSBOX_E_INVALID, EBUSY,
                                 "sandbox %s is running the command of an nsbox run; it is "
                                 "deleted when that ends", S->sb.st.id);
        default:
            return nsbox_err_set(e, NSBOX_E_SYS, EAGAIN,
                                 "pooled sandbox %s did not answer in time (a run may be "
                                 "taking it); try again", S->sb.st.id);
        }
    default:
        return nsbox_err_set(e, NSBOX_E_INVALID, EPERM,
                             "sandbox %s is kept for nsbox run (the pool) and takes no other "
                             "requests", S->sb.st.id);
    }
}
