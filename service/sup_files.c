/* The supervisor's file operations (service/files*.c does them): at once, or, when one may
 * take long, in a job, a child of the supervisor that replies to its client itself. */
#define _GNU_SOURCE
#include "supervisor_impl.h"
#include "cleanup.h"
#include "files.h"
#include "util.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- file operations ------------------------------------------------------------------------ */

struct confirm_ctx {
    int fd;
    const char *tag;
};

/* A write with confirm reached its stream's end: tell the client how much came
 * (end_of_content) and keep it only if the client answers commit within CLIENT_FRAME_MS. A
 * client killed with its producer (Ctrl-C) never runs the code that would answer. */
static int confirm_end(void *arg, uint64_t bytes)
{
    const struct confirm_ctx *c = arg;
    struct nsbox_err e;
    cJSON *m = nsbox_proto_reply_ok(c->tag);
    if (!m)
        return -1;
    cJSON_AddNumberToObject(m, "end_of_content", (double)bytes);
    int r = nsbox_proto_send_obj(c->fd, m, NULL, 0, &e);
    cJSON_Delete(m);
    struct pollfd p = {c->fd, POLLIN, 0};
    if (r < 0 || poll(&p, 1, CLIENT_FRAME_MS) <= 0)
        return -1;
    cleanup_free char *buf = NULL;
    int fds[NSBOX_PROTO_MAX_FDS];
    ssize_t n = nsbox_proto_recv(c->fd, &buf, fds, &e);
    for (int i = 0; n >= 0 && i < NSBOX_PROTO_MAX_FDS; i++)
        nsbox_closep(&fds[i]);
    if (n <= 0)
        return -1;
    cJSON *o = cJSON_ParseWithLength(buf, (size_t)n);
    const char *op = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, "op"));
    r = op && !strcmp(op, "commit") ? 0 : -1;
    cJSON_Delete(o);
    return r;
}

static void file_op(struct sup *S, int ci, const struct nsbox_request *rq, int in_fd)
{
    struct nsbox_err e = {0};
    cJSON *r = nsbox_proto_reply_ok(rq->tag);
    int out_fd = -1;
    struct confirm_ctx cc = {S->clients[ci].fd, rq->tag};
    struct nsbox_files_opts fo = {.max_write_bytes = S->spec->limits.disk_bytes,
                                  .client_fd = S->clients[ci].fd,
                                  .confirm_end = rq->confirm ? confirm_end : NULL,
                                  .confirm_arg = &cc};
    if (nsbox_files_op_ex(S->ws_fd, &S->sb.st, &fo, rq, in_fd, r, &out_fd, &e) < 0) {
        cJSON_Delete(r);
        nsbox_sup_reply_err(S, ci, rq->tag, &e);
    } else {
        nsbox_sup_reply(S, ci, r, out_fd >= 0 ? &out_fd : NULL, out_fd >= 0 ? 1 : 0);
    }
    nsbox_closep(&out_fd);
}

/* A recursive remove (a tree of any size, made by the sandbox), a write from a pipe or socket
 * (as slow as its writer) or of a big file: each can take seconds or minutes. */
static bool may_take_long(const struct nsbox_request *rq, int in_fd)
{
    if (rq->op == NSBOX_OP_REMOVE)
        return rq->recursive;
    if (rq->op != NSBOX_OP_WRITE || in_fd < 0)
        return false;
    struct stat st;
    return fstat(in_fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size >= FILE_JOB_MIN_BYTES;
}

/* Run the operation in a child that replies to the client itself and exits: 0 when its reply
 * went out. The client is not read from until then (its next request waits for this reply
 * anyway). Never in the loop: one such operation there would hold everything, the ttl too. */
static void start_file_job(struct sup *S, int ci, const struct nsbox_request *rq, int in_fd)
{
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        struct nsbox_err e;
        nsbox_err_sys(&e, "cannot start the %s of %s: fork", nsbox_proto_op_name(rq->op), rq->path);
        nsbox_sup_reply_err(S, ci, rq->tag, &e);
        return;
    }
    if (pid == 0) {
        /* The job dies with the supervisor: a SIGKILLed supervisor's sandbox is gc'd, and
         * nothing of it may go on writing into the workspace. It holds nothing of the
         * supervisor's but its client, the workspace and the source: a connection or a log
         * pipe that the supervisor closes meanwhile is closed. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(1);
        int keep[] = {S->clients[ci].fd, S->ws_fd, in_fd};
        nsbox_close_fds_keep(keep, NSBOX_ARRAY_LEN(keep));
        file_op(S, ci, rq, in_fd);
        _exit(S->clients[ci].broken ? 1 : 0);
    }
    S->clients[ci].job = pid;
    /* -1 (no descriptor left, Linux < 5.3): reaped on SIGCHLD instead (reap_file_jobs) */
    S->clients[ci].job_pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
}

/* The job of client ci was reaped: the client is read from again, or closed if its reply did
 * not go out whole. A client closed meanwhile kept its slot for this (close_client). */
static void job_done(struct sup *S, int ci, int status)
{
    struct client *c = &S->clients[ci];
    if (c->fd >= 0 && (!WIFEXITED(status) || WEXITSTATUS(status) != 0))
        c->broken = true;
    nsbox_closep(&c->job_pidfd);
    c->job = 0;
    nsbox_sup_touch(S); /* the end of a long operation is activity, as its start was */
}

/* A file operation of client ci: refused while the connection waits for something else; one
 * that may take long runs in a job (when the sandbox has room for more work), the rest at once. */
void nsbox_sup_files_handle(struct sup *S, int ci, const struct nsbox_request *rq, int in_fd)
{
    if (nsbox_sup_refuse_if_waiting(S, ci, rq->tag))
        return;
    if (may_take_long(rq, in_fd)) {
        if (!nsbox_sup_refuse_if_busy(S, ci, rq->tag, false))
            start_file_job(S, ci, rq, in_fd);
    } else {
        file_op(S, ci, rq, in_fd);
    }
}

/* The job of client ci has ended (its pidfd said so) or was killed: reap it. */
void nsbox_sup_files_end_job(struct sup *S, int ci)
{
    int status = 0;
    while (waitpid(S->clients[ci].job, &status, 0) < 0 && errno == EINTR) {
    }
    job_done(S, ci, status);
}

/* On SIGCHLD: the jobs that have no pidfd (pidfd_open failed: no descriptor left, or a kernel
 * before 5.3) are reaped here, never waited for in the loop. */
void nsbox_sup_files_reap_jobs(struct sup *S)
{
    for (int i = 0; i < MAX_CLIENTS; i++) {
        int status;
        if (S->clients[i].job > 0 && S->clients[i].job_pidfd < 0 &&
            waitpid(S->clients[i].job, &status, WNOHANG) == S->clients[i].job)
            job_done(S, i, status);
    }
}

/* At the end: a job still running is killed (its client sees the sandbox go) before the
 * workspace is unmounted. */
void nsbox_sup_files_kill_jobs(struct sup *S)
{
    for (int i = 0; i < MAX_CLIENTS; i++)
        if (S->clients[i].job > 0) {
            kill(S->clients[i].job, SIGKILL);
            nsbox_sup_files_end_job(S, i);
        }
}
