/* The supervisor's requests (docs/protocol.md): one handler per op, from a table. */
#define _GNU_SOURCE
#include "supervisor_impl.h"
#include "cleanup.h"
#include "net.h"
#include "oci_lookup.h"
#include "oci_store.h"
#include "util.h"
#include "workspace.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- requests ------------------------------------------------------------------------------- */

static char **merged_env(struct sup *S, const struct nsbox_request *rq)
{
    size_t n = 0;
    while (S->sb.envp[n])
        n++;
    char **env = calloc(n + rq->nenv + 1, sizeof *env);
    if (!env)
        return NULL;
    memcpy(env, S->sb.envp, n * sizeof *env);
    for (size_t i = 0; i < rq->nenv; i++)
        n = nsbox_env_put(env, n, rq->env[i]);
    return env;
}

static void cmdline_of(char *out, size_t n, char **argv)
{
    size_t off = 0;
    out[0] = '\0';
    for (size_t i = 0; argv[i] && off + 1 < n; i++)
        off += (size_t)snprintf(out + off, n - off, "%s%s", i ? " " : "", argv[i]);
}

static void do_spawn(struct sup *S, int ci, const struct nsbox_request *rq, int fds[3],
                     bool background)
{
    struct nsbox_err e = {0};
    int idx;
    struct proc *p = nsbox_sup_new_proc(S, &idx);
    if (!p) {
        nsbox_err_set(&e, NSBOX_E_SYS, EAGAIN,
                      "cannot start: %d processes started by nsbox (exec, exec -d) still run in "
                      "this sandbox, the most it tracks; end some (nsbox ps ID, nsbox kill ID "
                      "PID) and try again",
                      MAX_PROCS);
        nsbox_sup_reply_err(S, ci, rq->tag, &e);
        return;
    }
    p->background = background;
    snprintf(p->tag, sizeof p->tag, "%s", rq->tag);
    cmdline_of(p->cmdline, sizeof p->cmdline, rq->argv);
    int own[3] = {-1, -1, -1};
    int *use = fds;
    if (background) {
        int po[2], pe[2];
        own[0] = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (own[0] < 0 || pipe2(po, O_CLOEXEC) < 0 || pipe2(pe, O_CLOEXEC) < 0) {
            nsbox_err_sys(&e, "pipe");
            nsbox_closep(&own[0]);
            nsbox_sup_free_proc(p);
            nsbox_sup_reply_err(S, ci, rq->tag, &e);
            return;
        }
        p->out_fd = po[0], own[1] = po[1];
        p->err_fd = pe[0], own[2] = pe[1];
        fcntl(p->out_fd, F_SETFL, O_NONBLOCK);
        fcntl(p->err_fd, F_SETFL, O_NONBLOCK);
        use = own;
    } else if (rq->tty) {
        /* init makes the pseudo-terminal; the client gets its master when the command starts */
        for (int i = 0; i < 3; i++)
            nsbox_closep(&fds[i]);
        p->tty = true;
    } else if (fds[0] < 0 || fds[1] < 0 || fds[2] < 0) {
        nsbox_err_set(&e, NSBOX_E_INVALID, EINVAL,
                      "exec needs three descriptors (stdin, stdout, stderr) with the request");
        nsbox_sup_free_proc(p);
        nsbox_sup_reply_err(S, ci, rq->tag, &e);
        return;
    } else if (nsbox_check_stdio(fds, &e) < 0) {
        nsbox_sup_free_proc(p);
        nsbox_sup_reply_err(S, ci, rq->tag, &e);
        return;
    }
    if (!background) {
        /* names asked before this command (by a background process): not its own to be told;
         * dropped before the spawn goes out, so that none of the command's own goes with them */
        char names[NSBOX_DNSQUERY_NAMES][NSBOX_DNSQUERY_NAME_MAX + 1];
        nsbox_net_dns_take(S->sb.net, names);
    }
    cleanup_free char **env = merged_env(S, rq);
    unsigned flags = p->tty ? NSBOX_AGENT_F_TTY : 0;
    int r = env ? nsbox_agent_spawn(S->agent, p->seq, rq->argv, env, rq->cwd, use, NULL, 0, flags,
                                    (rq->rows & 0xffff) << 16 | (rq->cols & 0xffff), NULL, &e)
                : nsbox_err_sys(&e, "calloc");
    for (int i = 0; i < 3; i++)
        nsbox_closep(&own[i]);
    if (r < 0) {
        nsbox_sup_free_proc(p);
        nsbox_sup_reply_err(S, ci, rq->tag, &e);
        return;
    }
    p->client = ci;
    p->running = true;
    p->oom_before = nsbox_sup_oom_kills(S); /* read after the spawn went out, while init forks */
    if (rq->timeout_ms) { /* exec --timeout, and exec -d --timeout (start's timeout_ms) */
        p->deadline = nsbox_now_ms() + (int64_t)rq->timeout_ms;
        p->timeout_ms = rq->timeout_ms;
    }
    S->clients[ci].waiting = idx;
}

static cJSON *proc_json(const struct proc *p)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "pid", p->pid);
    cJSON_AddStringToObject(o, "cmd", p->cmdline);
    cJSON_AddBoolToObject(o, "running", p->running);
    cJSON_AddBoolToObject(o, "background", p->background);
    if (!p->running)
        cJSON_AddNumberToObject(o, "exit_code", p->exit_code);
    return o;
}

/* How /workspace is bounded, and how full it is. */
static void add_disk(cJSON *r, const struct sup *S)
{
    cJSON *d = cJSON_AddObjectToObject(r, "disk");
    enum nsbox_ws_kind k = S->sb.st.ws_kind;
    cJSON_AddStringToObject(d, "kind", nsbox_wsplan_kind_name(k));
    cJSON_AddBoolToObject(d, "enforced", k != NSBOX_WS_DIR);
    if (k == NSBOX_WS_DIR) {
        cJSON_AddStringToObject(d, "note", "the caller's own directory (--workspace): nsbox "
                                           "puts no limit on it");
        cJSON_AddBoolToObject(d, "idmapped", S->sb.st.ws_idmapped);
        return;
    }
    cJSON_AddNumberToObject(d, "limit_bytes", (double)S->spec->limits.disk_bytes);
    struct nsbox_workspace_usage u;
    if (S->ws_fd >= 0 && nsbox_workspace_usage(S->ws_fd, &u) == 0) {
        /* the filesystem's own figures: mkfs rounds the inode count to whole groups */
        cJSON_AddNumberToObject(d, "inodes_limit", (double)u.inodes_total);
        cJSON_AddNumberToObject(d, "usable_bytes", (double)u.bytes_total);
        cJSON_AddNumberToObject(d, "used_bytes", (double)u.bytes_used);
        cJSON_AddNumberToObject(d, "inodes_used", (double)u.inodes_used);
    } else {
        cJSON_AddNumberToObject(d, "inodes_limit",
                                (double)nsbox_wsplan_inodes(S->spec->limits.disk_bytes));
    }
    /* Thin provisioning (docs/workspace.md): the host's free space, not only the limit, bounds
     * what the sandbox can still write. */
    struct nsbox_workspace_host_usage h;
    if (k == NSBOX_WS_EXT4 && nsbox_workspace_host_usage(S->sb.st.workspace, &h) == 0) {
        cJSON *host = cJSON_AddObjectToObject(d, "host");
        cJSON_AddStringToObject(host, "backing_file", S->sb.st.workspace);
        cJSON_AddNumberToObject(host, "backing_bytes", (double)h.backing_bytes);
        cJSON_AddNumberToObject(host, "fs_bytes", (double)h.fs_bytes);
        cJSON_AddNumberToObject(host, "free_bytes", (double)h.fs_free_bytes);
    }
}

static void do_inspect(struct sup *S, int ci, const char *tag)
{
    cJSON *r = nsbox_proto_reply_ok(tag);
    cJSON_AddStringToObject(r, "id", S->sb.st.id);
    cJSON_AddStringToObject(r, "state", S->pool_key[0] && !S->claimed ? "pooled"
                                        : S->sleeping                    ? "sleeping"
                                                                         : "running");
    cJSON_AddNumberToObject(r, "sleeps", S->sleeps);
    if (S->last_wake_us >= 0)
        cJSON_AddNumberToObject(r, "last_wake_us", (double)S->last_wake_us);
    cJSON_AddNumberToObject(r, "created", (double)S->created);
    cJSON_AddNumberToObject(r, "expires", (double)S->expires);
    cJSON_AddNumberToObject(r, "supervisor_pid", getpid());
    if (S->owner_fd >= 0)
        cJSON_AddNumberToObject(r, "owner_pid", S->owner_pid);
    if (S->sb.st.ws_kind == NSBOX_WS_DIR)
        cJSON_AddStringToObject(r, "workspace", S->sb.st.workspace);
    else
        cJSON_AddNullToObject(r, "workspace"); /* exists only inside the sandbox */
    add_disk(r, S);
    cJSON *net = nsbox_net_describe(S->sb.net, S->spec->net);
    if (net)
        cJSON_AddItemToObject(r, "network", net);
    cJSON *spec = nsbox_spec_to_cjson(S->spec);
    if (spec)
        cJSON_AddItemToObject(r, "spec", spec);
    /* which image a reference named when the sandbox was made: the spec keeps the reference,
     * whose tag may have moved since (a CI job records what it ran) */
    char digest[80];
    uint64_t size;
    if (nsbox_oci_lookup_has_prefix(S->sb.image_name) &&
        nsbox_oci_store_meta(S->sb.image_name, digest, sizeof digest, &size, NULL, NULL) == 0) {
        cJSON *img = cJSON_AddObjectToObject(r, "image");
        cJSON_AddStringToObject(img, "id", S->sb.image_name);
        cJSON_AddStringToObject(img, "digest", digest);
    }
    cJSON *lim = cJSON_AddObjectToObject(r, "limits");
    cJSON_AddNumberToObject(lim, "cpus", S->spec->limits.cpus);
    cJSON_AddNumberToObject(lim, "memory_bytes", (double)S->spec->limits.memory_bytes);
    cJSON_AddNumberToObject(lim, "pids", (double)S->spec->limits.pids);
    cJSON_AddNumberToObject(lim, "disk_bytes", (double)S->spec->limits.disk_bytes);
    struct nsbox_cgroup_stats st;
    struct nsbox_err e;
    if (nsbox_cgroup_stats(&S->sb.cg, &st, &e) == 0) {
        cJSON *so = cJSON_AddObjectToObject(r, "stats");
        cJSON_AddNumberToObject(so, "memory_bytes", (double)st.memory_current);
        cJSON_AddNumberToObject(so, "memory_peak_bytes", (double)st.memory_peak);
        cJSON_AddNumberToObject(so, "pids", (double)st.pids_current);
        cJSON_AddNumberToObject(so, "cpu_usage_usec", (double)st.cpu_usage_usec);
        cJSON_AddNumberToObject(so, "oom_kills", (double)st.oom_kills);
    }
    cJSON *ps = cJSON_AddArrayToObject(r, "processes");
    for (int i = 0; i < S->nprocs; i++)
        if (S->procs[i].used && S->procs[i].spawned)
            cJSON_AddItemToArray(ps, proc_json(&S->procs[i]));
    nsbox_sup_reply(S, ci, r, NULL, 0);
}

static void rq_ping(struct sup *S, int ci, const struct nsbox_request *rq, int fds[3])
{
    cJSON *r = nsbox_proto_reply_ok(rq->tag);
    cJSON_AddStringToObject(r, "id", S->sb.st.id);
    nsbox_sup_reply(S, ci, r, NULL, 0);
}

static void rq_inspect(struct sup *S, int ci, const struct nsbox_request *rq, int fds[3])
{
    do_inspect(S, ci, rq->tag);
}

static void rq_spawn(struct sup *S, int ci, const struct nsbox_request *rq, int fds[3])
{
    if (rq->op == NSBOX_OP_START && !S->spec->supports_background_processes) {
        /* the hosted service's option for images that cannot keep a process running between
         * calls; refused here, before anything starts, so every client says the same */
        struct nsbox_err e;
        nsbox_err_set(&e, NSBOX_E_UNSUPPORTED, 0,
                      "this sandbox was created with supports_background_processes=false: it "
                      "runs no background processes (exec -d, start_process); run the command "
                      "in the foreground, or create the sandbox without that option");
        nsbox_sup_reply_err(S, ci, rq->tag, &e);
        return;
    }
    if (!nsbox_sup_refuse_if_waiting(S, ci, rq->tag) &&
        !nsbox_sup_refuse_if_busy(S, ci, rq->tag, false))
        do_spawn(S, ci, rq, fds, rq->op == NSBOX_OP_START);
}

static void rq_ps(struct sup *S, int ci, const struct nsbox_request *rq, int fds[3])
{
    cJSON *r = nsbox_proto_reply_ok(rq->tag);
    cJSON *ps = cJSON_AddArrayToObject(r, "processes");
    for (int i = 0; i < S->nprocs; i++)
        if (S->procs[i].used && S->procs[i].spawned && S->procs[i].background)
            cJSON_AddItemToArray(ps, proc_json(&S->procs[i]));
    nsbox_sup_reply(S, ci, r, NULL, 0);
}

static void rq_kill(struct sup *S, int ci, const struct nsbox_request *rq, int fds[3])
{
    struct nsbox_err e = {0};
    struct proc *p = nsbox_sup_proc_by_pid(S, rq->pid);
    if (!p || !p->running) {
        nsbox_err_set(&e, NSBOX_E_NOTFOUND, ESRCH, "no running process %d started by nsbox",
                      rq->pid);
        nsbox_sup_reply_err(S, ci, rq->tag, &e);
    } else if (nsbox_agent_kill(S->agent, p->pid, rq->sig, &e) < 0) {
        nsbox_sup_reply_err(S, ci, rq->tag, &e);
    } else {
        nsbox_sup_reply(S, ci, nsbox_proto_reply_ok(rq->tag), NULL, 0);
    }
}

/* The background process that logs and wait name, or NULL after replying that there is none. */
static struct proc *background_proc(struct sup *S, int ci, const struct nsbox_request *rq)
{
    struct proc *p = nsbox_sup_proc_by_pid(S, rq->pid);
    if (p && p->background)
        return p;
    struct nsbox_err e = {0};
    nsbox_err_set(&e, NSBOX_E_NOTFOUND, ESRCH, "no background process %d", rq->pid);
    nsbox_sup_reply_err(S, ci, rq->tag, &e);
    return NULL;
}

static void rq_logs(struct sup *S, int ci, const struct nsbox_request *rq, int fds[3])
{
    struct proc *p = background_proc(S, ci, rq);
    if (!p)
        return;
    /* Open pipes: more may come, even after the process ended (what it left in them,
     * or a child of it that still writes) */
    bool more_out = p->out_fd >= 0, more_err = p->err_fd >= 0, lost_out, lost_err;
    uint64_t end_out, end_err;
    cleanup_free char *o =
        nsbox_sup_ring_text(&p->out, rq->stdout_from, more_out, &end_out, &lost_out);
    cleanup_free char *er =
        nsbox_sup_ring_text(&p->err, rq->stderr_from, more_err, &end_err, &lost_err);
    if (!o || !er) {
        struct nsbox_err e = {0};
        nsbox_err_set(&e, NSBOX_E_NOMEM, ENOMEM, "out of memory");
        nsbox_sup_reply_err(S, ci, rq->tag, &e);
        return;
    }
    cJSON *r = nsbox_proto_reply_ok(rq->tag);
    cJSON_AddStringToObject(r, "stdout", o);
    cJSON_AddStringToObject(r, "stderr", er);
    cJSON_AddBoolToObject(r, "truncated", lost_out || lost_err);
    cJSON_AddNumberToObject(r, "stdout_end", (double)end_out);
    cJSON_AddNumberToObject(r, "stderr_end", (double)end_err);
    cJSON_AddBoolToObject(r, "eof", !more_out && !more_err);
    cJSON_AddBoolToObject(r, "sleeping", S->sleeping); /* its processes are frozen */
    cJSON_AddBoolToObject(r, "running", p->running);
    nsbox_sup_reply(S, ci, r, NULL, 0);
}

static void rq_signal(struct sup *S, int ci, const struct nsbox_request *rq, int fds[3])
{
    /* No reply: the connection's one reply belongs to its exec. A signal that arrives
     * before init reported the command's pid is delivered when it does. */
    struct nsbox_err e = {0};
    int w = S->clients[ci].waiting;
    if (w >= 0 && S->procs[w].spawned)
        nsbox_agent_kill(S->agent, S->procs[w].pid, rq->sig, &e);
    else if (w >= 0)
        S->procs[w].pending_sig = rq->sig;
}

static void rq_wait(struct sup *S, int ci, const struct nsbox_request *rq, int fds[3])
{
    struct proc *p = background_proc(S, ci, rq);
    if (!p || nsbox_sup_refuse_if_waiting(S, ci, rq->tag))
        return;
    if (!p->running) {
        nsbox_sup_reply_wait(S, ci, rq->tag, p);
        return;
    }
    if (nsbox_sup_refuse_if_busy(S, ci, rq->tag, true)) /* each wait holds a connection */
        return;
    /* The reply comes when it ends (on_agent's EXITED); the request's tag with it. A
     * waiting client is a client at work: the sandbox wakes, and stays awake. */
    nsbox_sup_touch(S);
    S->clients[ci].waits = (int)(p - S->procs);
    snprintf(S->clients[ci].wait_tag, sizeof S->clients[ci].wait_tag, "%s", rq->tag);
}

static void rq_hold(struct sup *S, int ci, const struct nsbox_request *rq, int fds[3])
{
    S->clients[ci].holder = true;
    nsbox_sup_reply(S, ci, nsbox_proto_reply_ok(rq->tag), NULL, 0);
}

static void rq_delete(struct sup *S, int ci, const struct nsbox_request *rq, int fds[3])
{
    if (!S->pool_key[0]) /* nobody knows a pooled sandbox's id: no tombstone to keep */
        nsbox_sup_tomb(S, rq->by_session ? NSBOX_TOMB_SESSION_END : "deleted by rm");
    S->quit = true;
    nsbox_sup_reply(S, ci, nsbox_proto_reply_ok(rq->tag), NULL, 0);
}

static void rq_file(struct sup *S, int ci, const struct nsbox_request *rq, int fds[3])
{
    nsbox_sup_files_handle(S, ci, rq, fds[0]);
}

/* Each op's handler, and whether it wakes the sandbox (and resets the idle timer): only
 * requests that need it to run do; looking at it (ping, inspect, ps, logs) does not, and a wait
 * wakes it only to wait for a running process (rq_wait). */
static const struct {
    void (*fn)(struct sup *S, int ci, const struct nsbox_request *rq, int fds[3]);
    bool wakes;
} handlers[] = {
    [NSBOX_OP_PING] = {rq_ping, false},     [NSBOX_OP_INSPECT] = {rq_inspect, false},
    [NSBOX_OP_EXEC] = {rq_spawn, true},     [NSBOX_OP_START] = {rq_spawn, true},
    [NSBOX_OP_PS] = {rq_ps, false},         [NSBOX_OP_KILL] = {rq_kill, true},
    [NSBOX_OP_LOGS] = {rq_logs, false},     [NSBOX_OP_SIGNAL] = {rq_signal, true},
    [NSBOX_OP_DELETE] = {rq_delete, true},  [NSBOX_OP_READ] = {rq_file, true},
    [NSBOX_OP_WRITE] = {rq_file, true},     [NSBOX_OP_LIST] = {rq_file, true},
    [NSBOX_OP_STAT] = {rq_file, true},      [NSBOX_OP_REMOVE] = {rq_file, true},
    [NSBOX_OP_MKDIR] = {rq_file, true},     [NSBOX_OP_HOLD] = {rq_hold, false},
    [NSBOX_OP_WAIT] = {rq_wait, false},
};

void nsbox_sup_requests_handle(struct sup *S, int ci, const char *buf, size_t len, int fds[3])
{
    struct nsbox_request rq;
    struct nsbox_err e = {0};
    if (nsbox_proto_parse(buf, len, &rq, &e) < 0) {
        nsbox_sup_reply_err(S, ci, rq.tag, &e);
        nsbox_proto_request_free(&rq);
        return;
    }
    if (nsbox_sup_pool_gate(S, &rq, &e) < 0) {
        nsbox_sup_reply_err(S, ci, rq.tag, &e);
    } else if ((unsigned)rq.op < NSBOX_ARRAY_LEN(handlers) && handlers[rq.op].fn) {
        if (handlers[rq.op].wakes)
            nsbox_sup_touch(S);
        handlers[rq.op].fn(S, ci, &rq, fds);
    }
    for (int i = 0; i < 3; i++)
        nsbox_closep(&fds[i]);
    nsbox_proto_request_free(&rq);
}
