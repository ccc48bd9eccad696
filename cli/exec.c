/* `nsbox exec`: a command in a persistent sandbox, run by its supervisor with our stdio (or in
 * the background with -d, or on a terminal with -t); signals we get are passed on to it. */
#define _GNU_SOURCE
#include "cleanup.h"
#include "cleanup_cjson.h"
#include "cli.h"
#include "client.h"
#include "connect.h"
#include "options.h"
#include "relay.h"
#include "say.h"
#include "signals.h"
#include "tty.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <unistd.h>


/* Pass a signal we got on to the command of this connection's exec (no reply comes). */
static void send_signal(int sock, int signo)
{
    struct nsbox_err e; /* no reply comes, and none is waited for: a signal not passed on is
                         * one the command did not get, as when it has just ended */
    struct nsbox_request req;
    nsbox_proto_request_init(&req, NSBOX_OP_SIGNAL);
    req.sig = signo;
    cleanup_cjson cJSON *o = nsbox_proto_encode(&req);
    if (o)
        nsbox_proto_send_obj(sock, o, NULL, 0, &e);
}

/* After an exec request with the command's descriptors: pass signals on to the command until a
 * reply comes, then read it. exec relays SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2
 * (nsbox run, cold or pooled, also SIGWINCH and SIGCONT). As in run, the second of INT, TERM,
 * HUP or QUIT becomes SIGKILL: a command that handles Ctrl-C still stops at the second. */
/* After a relayed TERM, INT, HUP or QUIT: the supervisor that is to pass it on still answers
 * (a ping, within 5 s; a sleeping sandbox's supervisor answers without waking it). A stopped or
 * stuck one would leave us waiting for the command's end for ever, deaf to the signals a CI
 * job's timeout sends. 0, or -1 with e saying so. */
#define ALIVE_S 5
static int supervisor_answers(const char *id, int sock, const char *why, struct nsbox_err *e)
{
    struct pollfd pf = {sock, POLLIN, 0};
    if (poll(&pf, 1, 0) == 1 && pf.revents)
        return 0; /* the reply (or the hang-up) is there already */
    /* any reply says it runs, "busy" (every connection taken) too: sent once, never again */
    struct nsbox_request req;
    nsbox_proto_request_init(&req, NSBOX_OP_PING);
    cJSON *reply = NULL;
    cleanup_close int ping = -1;
    int r = nsbox_client_exchange(id, &req, NULL, 0, ALIVE_S, 0, &ping, &reply, NULL, e);
    cJSON_Delete(reply);
    if (r < 0 && e->code == NSBOX_E_TIMEOUT)
        nsbox_err_wrap(e, "%s, and whether it ended cannot be known", why);
    return r;
}

/* With --timeout S, the supervisor kills the command at S and replies: a reply that has not
 * come GRACE_S later, from a supervisor that does not answer a ping either (stopped, stuck),
 * ends the wait with that said, as ls, ps and rm end theirs. */
#define GRACE_S 10
static int client_wait(const char *id, int sock, int sfd, uint64_t timeout_ms, cJSON **reply,
                       struct nsbox_err *e)
{
    int stops = 0;
    int64_t check_at = timeout_ms ? nsbox_now_ms() + (int64_t)timeout_ms + GRACE_S * 1000 : -1;
    for (;;) {
        struct pollfd pf[2] = {{sock, POLLIN, 0}, {sfd, POLLIN, 0}};
        int64_t left = check_at < 0 ? -1 : check_at - nsbox_now_ms();
        int n = poll(pf, 2,
                     left < 0         ? (check_at < 0 ? -1 : 0)
                     : left > INT_MAX ? INT_MAX
                                      : (int)left);
        if (n < 0 && errno != EINTR)
            break;
        if (n == 0 && check_at >= 0 && nsbox_now_ms() >= check_at) {
            char why[96];
            snprintf(why, sizeof why, "the command's --timeout of %llu.%03llu s passed %d s ago",
                     (unsigned long long)(timeout_ms / 1000),
                     (unsigned long long)(timeout_ms % 1000), GRACE_S);
            if (supervisor_answers(id, sock, why, e) < 0)
                return -1;
            check_at = nsbox_now_ms() + GRACE_S * 1000; /* it answers: its reply comes */
            continue;
        }
        if (pf[1].revents & POLLIN) {
            struct signalfd_siginfo si;
            if (read(sfd, &si, sizeof si) == (ssize_t)sizeof si) {
                int before = stops;
                send_signal(sock, nsbox_signals_relay((int)si.ssi_signo, &stops));
                if (stops > before &&
                    supervisor_answers(id, sock, "the command was signalled", e) < 0)
                    return -1;
            }
        }
        if (pf[0].revents & (POLLIN | POLLHUP))
            break;
    }
    return nsbox_client_recv(sock, reply, NULL, e);
}

/* exec -t: a pseudo-terminal of ours becomes the command's controlling terminal; our own
 * terminal goes raw and we relay bytes both ways (os/tty.h: Ctrl-C is a byte the sandbox's line
 * discipline turns into SIGINT for the command's foreground job). */

static bool reply_busy(const cJSON *reply)
{
    const cJSON *err = cJSON_GetObjectItemCaseSensitive(reply, "error");
    const cJSON *code = cJSON_GetObjectItemCaseSensitive(err, "code");
    return cJSON_IsString(code) && !strcmp(code->valuestring, "busy");
}

/* exec -t's request, with mask blocked: its first reply, with the terminal's master once the
 * command has started (else the final reply). A supervisor with every connection taken is asked
 * again, with old's mask while waiting: nothing has started, and a TERM or HUP then ends us as
 * it would have without a command. 0, or -1 with e filled. */
static int tty_start(const char *id, const struct nsbox_request *req, const sigset_t *mask,
                     const sigset_t *old, int *sock, cJSON **first, int *master,
                     struct nsbox_err *e)
{
    unsigned waited_ms = 0;
    for (;;) {
        if (nsbox_client_exchange(id, req, NULL, 0, 0, 0, sock, first, master, e) < 0)
            return -1;
        if (*master >= 0 || !reply_busy(*first))
            return 0;
        sigprocmask(SIG_SETMASK, old, NULL);
        bool again = nsbox_client_again_if_busy(first, sock, &waited_ms, NSBOX_CLIENT_BUSY_FOREVER);
        sigprocmask(SIG_BLOCK, mask, NULL);
        if (!again)
            return 0;
    }
}

static int exec_with_tty(const char *id, struct nsbox_request *req)
{
    struct nsbox_err e = {0};
    if (!isatty(0))
        return nsbox_say_usage("%s", "exec -t needs a terminal on stdin");
    /* The pseudo-terminal is made inside the sandbox (its own devpts, so that the command's
     * tty exists there); we get its master once the command has started. */
    struct winsize ws;
    if (ioctl(0, TIOCGWINSZ, &ws) == 0 && ws.ws_row && ws.ws_col) {
        req->rows = ws.ws_row;
        req->cols = ws.ws_col;
    }
    /* TERM and HUP are ours to pass on from before the request leaves, as in exec_exchange:
     * the command may start at once, and a TERM (a CI job's timeout) or a HUP (the terminal
     * closed) with its default action would end us, and with us the command. One that comes
     * before the first reply waits in sfd and goes to the command once it has started. */
    sigset_t mask, old;
    sigemptyset(&mask);
    sigaddset(&mask, SIGWINCH);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGHUP);
    sigprocmask(SIG_BLOCK, &mask, &old);
    cleanup_close int sfd = signalfd(-1, &mask, SFD_CLOEXEC);
    cleanup_close int sock = -1;
    cJSON *first = NULL;
    cleanup_close int master = -1;
    if (tty_start(id, req, &mask, &old, &sock, &first, &master, &e) < 0) {
        sigprocmask(SIG_SETMASK, &old, NULL);
        return nsbox_say_fail(&e);
    }
    if (master < 0) { /* it did not start: this is the final reply */
        sigprocmask(SIG_SETMASK, &old, NULL);
        return nsbox_say_exit(first);
    }
    cJSON_Delete(first);
    if (nsbox_tty_raw())
        atexit(nsbox_tty_restore);
    fcntl(master, F_SETFL, O_NONBLOCK);
    bool in_open = true;
    for (;;) {
        struct pollfd pf[4] = {{sock, POLLIN, 0}, {master, POLLIN, 0}, {sfd, POLLIN, 0},
                               {in_open ? 0 : -1, POLLIN, 0}};
        if (poll(pf, 4, -1) < 0 && errno != EINTR)
            break;
        if (pf[1].revents & POLLIN)
            nsbox_tty_copy(master, 1);
        if (pf[3].revents & (POLLIN | POLLHUP))
            in_open = nsbox_tty_copy(0, master);
        if (pf[2].revents & POLLIN) {
            struct signalfd_siginfo si;
            if (read(sfd, &si, sizeof si) == (ssize_t)sizeof si) {
                if (si.ssi_signo == SIGWINCH) {
                    nsbox_tty_resize(master);
                } else {
                    send_signal(sock, (int)si.ssi_signo);
                    if (supervisor_answers(id, sock, "the command was signalled", &e) < 0) {
                        nsbox_tty_restore();
                        sigprocmask(SIG_SETMASK, &old, NULL);
                        return nsbox_say_fail(&e);
                    }
                }
            }
        }
        if (pf[0].revents & (POLLIN | POLLHUP))
            break;
    }
    nsbox_tty_drain(master); /* what the command wrote last */
    nsbox_tty_restore();
    sigprocmask(SIG_SETMASK, &old, NULL);
    cJSON *reply = NULL;
    if (nsbox_client_recv(sock, &reply, NULL, &e) < 0)
        return nsbox_say_fail(&e);
    return nsbox_say_exit(reply);
}


/* What exec was asked: its options, the sandbox and where the command starts in argv. */
struct exec_args {
    bool interactive, detach, tty;
    uint64_t timeout_ms;
    const char *cwd, *id;
    char **env; /* "K=V", heap, in the order given; a name given again moves to the end */
    size_t nenv;
    int cmd;
};

static void exec_args_free(struct exec_args *x)
{
    for (size_t i = 0; i < x->nenv; i++)
        free(x->env[i]);
    free(x->env);
}

/* -e K=V into x->env (a name longer than 255 bytes is cut there); option: the name the user
 * typed (-e, --env), for the message. 0, or EXIT_USAGE after saying why, or EXIT_NSBOX when
 * out of memory. */
static int exec_env(struct exec_args *x, const char *option, const char *v)
{
    const char *eq = strchr(v, '=');
    if (!eq || eq == v)
        return nsbox_say_env_usage(option, v);
    int klen = eq - v > 255 ? 255 : (int)(eq - v);
    char *kv = NULL;
    char **grown = realloc(x->env, (x->nenv + 1) * sizeof *x->env);
    if (grown)
        x->env = grown;
    if (!grown || asprintf(&kv, "%.*s=%s", klen, v, eq + 1) < 0) {
        struct nsbox_err e = {0};
        nsbox_err_sys(&e, "cannot keep -e %.*s", klen, v);
        return nsbox_say_fail(&e);
    }
    for (size_t i = 0; i < x->nenv; i++)
        if (!strncmp(x->env[i], kv, (size_t)klen + 1)) {
            free(x->env[i]);
            memmove(&x->env[i], &x->env[i + 1], (x->nenv - i - 1) * sizeof *x->env);
            x->nenv--;
            break;
        }
    x->env[x->nenv++] = kv;
    return 0;
}

/* exec's options, as they are written before the id. */
static const char *const exec_flags[] = {"-i", "-t",    "-d",  "--timeout", "--cwd",
                                         "-e", "--env", "-it", "-ti"};

/* The option at argv[*i] (and its value, moving *i on): 0, or EXIT_USAGE after saying why.
 * Options with a value take it as the next word or after '=' (--cwd=/tmp), as run's do, and
 * --env is -e, as exec --help and run say. */
static int exec_option(int argc, char **argv, int *i, struct exec_args *x)
{
    const char *a = argv[*i];
    char name[64];
    const char *v = nsbox_options_split(a, name, sizeof name);
    bool valued = !strcmp(name, "--timeout") || !strcmp(name, "--cwd") || !strcmp(name, "-e") ||
                  !strcmp(name, "--env");
    if (!strcmp(a, "-i")) {
        x->interactive = true;
    } else if (!strcmp(a, "-d")) {
        x->detach = true;
    } else if (!strcmp(a, "-t") || !strcmp(a, "-it") || !strcmp(a, "-ti")) {
        x->tty = true, x->interactive = true;
    } else if (valued && !v && *i + 1 >= argc) {
        return nsbox_say_usage("option %s needs a value", a); /* as run says it */
    } else if (valued) {
        if (!v)
            v = argv[++*i];
        if (!strcmp(name, "--cwd"))
            x->cwd = v;
        else if (strcmp(name, "--timeout") != 0)
            return exec_env(x, name, v);
        else if (nsbox_parse_seconds(v, NSBOX_TIMEOUT_MAX_S, &x->timeout_ms) < 0)
            return nsbox_say_usage(NSBOX_TIMEOUT_USAGE, v);
    } else {
        return nsbox_say_unknown("unknown exec option", NSBOX_SHOW(a), exec_flags,
                                 NSBOX_ARRAY_LEN(exec_flags),
                                 "exec [-i] [-t] [-d] [--timeout S] [--cwd DIR] [-e K=V] ID -- "
                                 "CMD [ARG...]");
    }
    return 0;
}

/* exec [OPTIONS] ID -- CMD [ARG...] into x: 0, or EXIT_USAGE after saying why. */
static int exec_parse(int argc, char **argv, struct exec_args *x)
{
    int i = 1, rc;
    for (; i < argc && argv[i][0] == '-' && strcmp(argv[i], "--") != 0; i++)
        if ((rc = exec_option(argc, argv, &i, x)) != 0)
            return rc;
    if (i < argc && !strcmp(argv[i], "--"))
        i++;
    /* A background process has no stdin (its output goes to the log): refuse -i rather than
     * run the command without what it was given. */
    const char *lost = !x->detach      ? NULL
                       : x->tty        ? "exec -t and -d do not go together"
                       : x->interactive ? "exec -d takes no -i: a background process's stdin is "
                                          "empty (give it a file: nsbox cp, then CMD < FILE)"
                                        : NULL;
    if (lost)
        return nsbox_say_usage("%s", lost);
    if (i >= argc)
        return nsbox_say_usage("%s", "exec needs a sandbox id");
    x->id = argv[i++];
    if (i < argc && argv[i][0] == '-' && strcmp(argv[i], "--") != 0) {
        /* "exec ID --timeout 1 -- true": options after the id, with a "--" further on, are
         * a mistake, not a command named "--timeout"; so is one of exec's own flags without
         * it ("exec ID -it bash"): no program is named -it */
        bool mistake = false;
        for (size_t k = 0; k < NSBOX_ARRAY_LEN(exec_flags); k++)
            mistake = mistake || !strcmp(argv[i], exec_flags[k]);
        for (int j = i + 1; j < argc; j++)
            mistake = mistake || !strcmp(argv[j], "--");
        if (mistake)
            return nsbox_say_usage("%s", "options go before the sandbox id: nsbox exec "
                                         "[OPTIONS] ID -- CMD [ARG...]");
    }
    if (i < argc && !strcmp(argv[i], "--"))
        i++;
    if (i >= argc)
        return nsbox_say_usage("%s", "exec needs a command: nsbox exec ID -- CMD [ARG...]");
    x->cmd = i;
    return 0;
}

/* The exec (or, with -d, start) request of x, into req: it points into argv and x->env. 0, or
 * -1 with e filled: a cwd too long, refused as the supervisor refuses it. */
static int exec_request(const struct exec_args *x, int argc, char **argv,
                        struct nsbox_request *req, struct nsbox_err *e)
{
    nsbox_proto_request_init(req, x->detach ? NSBOX_OP_START : NSBOX_OP_EXEC);
    req->argv = argv + x->cmd;
    req->argc = (size_t)(argc - x->cmd);
    req->env = x->env;
    req->nenv = x->nenv;
    if (x->cwd) {
        /* relative to /workspace, as the Python client's cwd= */
        char abs[4200];
        if (x->cwd[0] != '/')
            snprintf(abs, sizeof abs, "/workspace/%s", x->cwd);
        if (nsbox_proto_request_set(req->cwd, sizeof req->cwd, "cwd",
                                    x->cwd[0] == '/' ? x->cwd : abs, e) < 0)
            return -1;
    }
    req->timeout_ms = x->timeout_ms;
    req->tty = x->tty;
    return 0;
}

/* nsbox_client_exchange(), but for the wait, which passes signals on to the command: req with
 * fds (none with -d) to the supervisor over *sock (the caller's to close, once it is done), and
 * its final reply (NULL with e filled). */
static cJSON *exec_exchange(const struct exec_args *x, const struct nsbox_request *req,
                            int fds[3], int *sock,
                            struct nsbox_err *e)
{
    cJSON *reply = NULL;
    unsigned waited_ms = 0;
    int r = -1;
    sigset_t mask, old;
    sigemptyset(&mask);
    for (size_t k = 0; k < NSBOX_SIGNALS_EXEC; k++)
        sigaddset(&mask, nsbox_signals_relayed[k]);
    do {
        *sock = nsbox_connect_ctl(x->id, e);
        if (*sock < 0)
            break;
        if (x->detach) {
            if (nsbox_client_send(*sock, req, NULL, 0, e) < 0)
                break;
            r = nsbox_client_recv(*sock, &reply, NULL, e);
        } else {
            /* The signals are ours to pass on from before the request leaves: once it has,
             * the command may start, print, and be signalled by whoever reads that, while
             * ours would still be the default (INT, TERM: our death, and so the command's).
             * One that comes before the command has started is kept for it by the
             * supervisor. */
            sigprocmask(SIG_BLOCK, &mask, &old);
            cleanup_close int sfd = signalfd(-1, &mask, SFD_CLOEXEC);
            bool sent = nsbox_client_send(*sock, req, fds, 3, e) == 0;
            /* The command has our descriptors; we wait for its status and pass signals on. */
            if (sent)
                r = client_wait(x->id, *sock, sfd, x->timeout_ms, &reply, e);
            sigprocmask(SIG_SETMASK, &old, NULL);
            if (!sent)
                break;
        }
        if (r < 0)
            nsbox_client_lost(x->id, e);
    } while (r == 0 &&
             nsbox_client_again_if_busy(&reply, sock, &waited_ms, NSBOX_CLIENT_BUSY_FOREVER));
    return reply;
}

/* exec -d's reply (ok): the background process's pid, printed. Frees reply. */
static int exec_started(const struct exec_args *x, cJSON *reply)
{
    struct nsbox_err e = {0};
    const cJSON *pid = cJSON_GetObjectItemCaseSensitive(reply, "pid");
    int p = cJSON_IsNumber(pid) ? pid->valueint : 0;
    bool bounded = cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(reply, "timeout_ms"));
    cJSON_Delete(reply);
    if (x->timeout_ms && !bounded) {
        /* A supervisor of an older nsbox ignores start's timeout_ms: do not leave a process
         * running without the bound it was asked for. */
        struct nsbox_request kreq;
        nsbox_proto_request_init(&kreq, NSBOX_OP_KILL);
        kreq.pid = p;
        kreq.sig = SIGKILL;
        if (nsbox_client_simple_call(x->id, &kreq, &reply, &e) == 0)
            cJSON_Delete(reply);
        nsbox_err_set(&e, NSBOX_E_INVALID, EOPNOTSUPP,
                      "this sandbox's supervisor (an older nsbox) cannot bound a background "
                      "process; it was stopped. Make a new sandbox, or bound it inside: "
                      "timeout S CMD");
        return nsbox_say_fail(&e);
    }
    printf("%d\n", p);
    return 0;
}

/* exec as x says. */
static int exec_run(const struct exec_args *x, int argc, char **argv)
{
    struct nsbox_err e = {0};
    struct nsbox_request req;
    if (exec_request(x, argc, argv, &req, &e) < 0)
        return nsbox_say_fail(&e);
    if (x->tty)
        return exec_with_tty(x->id, &req);
    cleanup_close int null = x->interactive ? -1 : open("/dev/null", O_RDONLY | O_CLOEXEC);
    int fds[3] = {x->interactive ? 0 : null, 1, 2};
    /* Everything but /dev/null goes through a pipe of ours: what the command leaves running
     * outlives the exec, and must not keep anything of the caller's (relay.h). */
    struct nsbox_relay relay;
    nsbox_relay_set_note(nsbox_say_note, stderr);
    if (!x->detach && nsbox_relay_start(&relay, fds, true) < 0) {
        nsbox_err_sys(&e, "cannot relay the command's input and output");
        return nsbox_say_fail(&e);
    }
    cleanup_close int sock = -1;
    cJSON *reply = exec_exchange(x, &req, fds, &sock, &e);
    /* The command has ended: what it wrote is copied before anything of ours is said. */
    if (!x->detach)
        nsbox_relay_finish(&relay);
    if (!reply)
        return nsbox_say_fail(&e);
    nsbox_closep(&null);
    if (!x->detach || !cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(reply, "ok")))
        return nsbox_say_exit(reply);
    return exec_started(x, reply);
}

int nsbox_cli_exec(int argc, char **argv)
{
    struct exec_args x = {0};
    int rc = exec_parse(argc, argv, &x);
    if (rc == 0)
        rc = exec_run(&x, argc, argv);
    exec_args_free(&x);
    return rc;
}
