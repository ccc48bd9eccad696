/* The commands for persistent sandboxes (see sessions.h): exec, ls, inspect, rm, ps, kill,
 * logs, wait and cp, which talk to a supervisor through service/client.h and print. */
#define _GNU_SOURCE
#include "sessions.h"
#include "client.h"
#include "cleanup.h"
#include "help.h"
#include "paths.h"
#include "relay.h"
#include "gc.h"
#include "state.h"
#include "connect.h"
#include "signals.h"
#include "util.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/sendfile.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#define EXIT_NSBOX 125
#define EXIT_TIMEOUT 124

static int fail(const struct nsbox_err *e)
{
    fprintf(stderr, "nsbox: %s\n", e->msg);
    return EXIT_NSBOX;
}

static int usage(const char *msg)
{
    fprintf(stderr, "nsbox: %s\n", msg);
    nsbox_help_hint(stderr);
    return EXIT_NSBOX;
}

/* ---- exec ------------------------------------------------------------------------------------ */

/* Pass a signal we got on to the command of this connection's exec (no reply comes). */
static void send_signal(int sock, int signo)
{
    struct nsbox_err e;
    cJSON *req = nsbox_client_request("signal");
    cJSON_AddNumberToObject(req, "signal", signo);
    nsbox_proto_send_obj(sock, req, NULL, 0, &e);
    cJSON_Delete(req);
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
    cJSON *req = nsbox_client_request("ping"), *reply = NULL;
    cleanup_close int ping = -1;
    int r = nsbox_client_exchange(id, req, NULL, 0, ALIVE_S, 0, &ping, &reply, NULL, e);
    cJSON_Delete(req);
    cJSON_Delete(reply);
    if (r < 0 && e->code == NSBOX_E_TIMEOUT)
        nsbox_err_wrap(e, "%s, and whether it ended cannot be known", why);
    return r;
}

/* With --timeout S, the supervisor kills the command at S and replies: a reply that has not
 * come GRACE_S later, from a supervisor that does not answer a ping either (stopped, stuck),
 * ends the wait with that said, as ls, ps and rm end theirs. */
#define GRACE_S 10
static int client_wait(const char *id, int sock, uint64_t timeout_ms, cJSON **reply,
                       struct nsbox_err *e)
{
    sigset_t mask, old;
    sigemptyset(&mask);
    for (size_t k = 0; k < 6; k++)
        sigaddset(&mask, nsbox_signals_relayed[k]);
    sigprocmask(SIG_BLOCK, &mask, &old);
    cleanup_close int sfd = signalfd(-1, &mask, SFD_CLOEXEC);
    int stops = 0;
    int64_t check_at = timeout_ms ? nsbox_now_ms() + (int64_t)timeout_ms + GRACE_S * 1000 : -1;
    for (;;) {
        struct pollfd pf[2] = {{sock, POLLIN, 0}, {sfd, POLLIN, 0}};
        int64_t left = check_at < 0 ? -1 : check_at - nsbox_now_ms();
        int n = poll(pf, 2, left < 0 ? (check_at < 0 ? -1 : 0) : left > INT_MAX ? INT_MAX : (int)left);
        if (n < 0 && errno != EINTR)
            break;
        if (n == 0 && check_at >= 0 && nsbox_now_ms() >= check_at) {
            char why[96];
            snprintf(why, sizeof why, "the command's --timeout of %llu.%03llu s passed %d s ago",
                     (unsigned long long)(timeout_ms / 1000),
                     (unsigned long long)(timeout_ms % 1000), GRACE_S);
            if (supervisor_answers(id, sock, why, e) < 0) {
                sigprocmask(SIG_SETMASK, &old, NULL);
                return -1;
            }
            check_at = nsbox_now_ms() + GRACE_S * 1000; /* it answers: its reply comes */
            continue;
        }
        if (pf[1].revents & POLLIN) {
            struct signalfd_siginfo si;
            if (read(sfd, &si, sizeof si) == (ssize_t)sizeof si) {
                int before = stops;
                send_signal(sock, nsbox_signals_relay((int)si.ssi_signo, &stops));
                if (stops > before &&
                    supervisor_answers(id, sock, "the command was signalled", e) < 0) {
                    sigprocmask(SIG_SETMASK, &old, NULL);
                    return -1;
                }
            }
        }
        if (pf[0].revents & (POLLIN | POLLHUP))
            break;
    }
    sigprocmask(SIG_SETMASK, &old, NULL);
    return nsbox_client_recv(sock, reply, NULL, e);
}

/* exec -t: a pseudo-terminal of ours becomes the command's controlling terminal; our own
 * terminal goes raw and we relay bytes both ways (Ctrl-C is a byte the sandbox's line discipline
 * turns into SIGINT for the command's foreground job). */
static struct termios saved_tio;
static bool tio_saved;

static void restore_tty(void)
{
    if (tio_saved)
        tcsetattr(0, TCSADRAIN, &saved_tio);
    tio_saved = false;
}

static void copy_winsize(int from, int to)
{
    struct winsize ws;
    if (ioctl(from, TIOCGWINSZ, &ws) == 0)
        ioctl(to, TIOCSWINSZ, &ws);
}

static bool relay(int from, int to)
{
    char buf[16384];
    ssize_t n = read(from, buf, sizeof buf);
    if (n <= 0)
        return n < 0 && (errno == EAGAIN || errno == EINTR);
    for (ssize_t off = 0; off < n;) {
        ssize_t w = write(to, buf + off, (size_t)(n - off));
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return false;
        off += w;
    }
    return true;
}

/* The final reply of an exec: its exit code (125 when there is none), with the error or the
 * OOM kill said on stderr. Frees reply. */
static int exec_result(cJSON *reply)
{
    struct nsbox_err e = {0};
    const cJSON *code = cJSON_GetObjectItemCaseSensitive(reply, "exit_code");
    int rc = cJSON_IsNumber(code) ? code->valueint : EXIT_NSBOX;
    if (nsbox_client_reply_error(reply, &e) < 0)
        fprintf(stderr, "nsbox: %s\n", e.msg);
    else if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(reply, "oom_killed")))
        fprintf(stderr, "nsbox: the command was killed: out of memory (instance type limit)\n");
    else if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(reply, "timed_out")))
        fprintf(stderr, "nsbox: timed out: the command ran past its --timeout, and its processes "
                        "were killed (exit code 124)\n");
    cJSON_Delete(reply);
    return rc;
}

static int exec_with_tty(const char *id, cJSON *req)
{
    struct nsbox_err e = {0};
    if (!isatty(0))
        return usage("exec -t needs a terminal on stdin");
    /* The pseudo-terminal is made inside the sandbox (its own devpts, so that the command's
     * tty exists there); we get its master once the command has started. */
    struct winsize ws;
    if (ioctl(0, TIOCGWINSZ, &ws) == 0 && ws.ws_row && ws.ws_col) {
        cJSON_AddNumberToObject(req, "rows", ws.ws_row);
        cJSON_AddNumberToObject(req, "cols", ws.ws_col);
    }
    cleanup_close int sock = -1;
    cJSON *first = NULL;
    cleanup_close int master = -1;
    if (nsbox_client_exchange(id, req, NULL, 0, 0, NSBOX_CLIENT_BUSY_FOREVER, &sock, &first, &master, &e) < 0)
        return fail(&e);
    if (master < 0) /* it did not start: this is the final reply */
        return exec_result(first);
    cJSON_Delete(first);
    if (tcgetattr(0, &saved_tio) == 0) {
        struct termios raw = saved_tio;
        cfmakeraw(&raw);
        tio_saved = tcsetattr(0, TCSADRAIN, &raw) == 0;
        atexit(restore_tty);
    }
    sigset_t mask, old;
    sigemptyset(&mask);
    sigaddset(&mask, SIGWINCH);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGHUP);
    sigprocmask(SIG_BLOCK, &mask, &old);
    cleanup_close int sfd = signalfd(-1, &mask, SFD_CLOEXEC);
    fcntl(master, F_SETFL, O_NONBLOCK);
    bool in_open = true;
    for (;;) {
        struct pollfd pf[4] = {{sock, POLLIN, 0}, {master, POLLIN, 0}, {sfd, POLLIN, 0},
                               {in_open ? 0 : -1, POLLIN, 0}};
        if (poll(pf, 4, -1) < 0 && errno != EINTR)
            break;
        if (pf[1].revents & POLLIN)
            relay(master, 1);
        if (pf[3].revents & (POLLIN | POLLHUP))
            in_open = relay(0, master);
        if (pf[2].revents & POLLIN) {
            struct signalfd_siginfo si;
            if (read(sfd, &si, sizeof si) == (ssize_t)sizeof si) {
                if (si.ssi_signo == SIGWINCH) {
                    copy_winsize(0, master);
                } else {
                    send_signal(sock, (int)si.ssi_signo);
                    if (supervisor_answers(id, sock, "the command was signalled", &e) < 0) {
                        restore_tty();
                        sigprocmask(SIG_SETMASK, &old, NULL);
                        return fail(&e);
                    }
                }
            }
        }
        if (pf[0].revents & (POLLIN | POLLHUP))
            break;
    }
    /* What the command wrote last, up to the first empty read (master is non-blocking). */
    for (char buf[16384];;) {
        ssize_t n = read(master, buf, sizeof buf);
        if (n <= 0 || write(1, buf, (size_t)n) != n)
            break;
    }
    restore_tty();
    sigprocmask(SIG_SETMASK, &old, NULL);
    cJSON *reply = NULL;
    if (nsbox_client_recv(sock, &reply, NULL, &e) < 0)
        return fail(&e);
    return exec_result(reply);
}

int nsbox_cli_exec(int argc, char **argv)
{
    bool interactive = false, detach = false, tty = false;
    uint64_t timeout_ms = 0;
    const char *cwd = NULL;
    struct nsbox_err e = {0};
    cJSON *env = cJSON_CreateObject();
    int i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--"))
            break;
        if (!strcmp(a, "-i"))
            interactive = true;
        else if (!strcmp(a, "-d"))
            detach = true;
        else if (!strcmp(a, "-t") || !strcmp(a, "-it") || !strcmp(a, "-ti"))
            tty = true, interactive = true;
        else if ((!strcmp(a, "--timeout") || !strcmp(a, "--cwd") || !strcmp(a, "-e")) &&
                   i + 1 < argc) {
            const char *v = argv[++i];
            if (!strcmp(a, "--cwd"))
                cwd = v;
            else if (!strcmp(a, "-e")) {
                const char *eq = strchr(v, '=');
                if (!eq || eq == v) {
                    cJSON_Delete(env);
                    return usage("-e needs K=V");
                }
                char key[256];
                snprintf(key, sizeof key, "%.*s", (int)(eq - v), v);
                cJSON_DeleteItemFromObjectCaseSensitive(env, key);
                cJSON_AddStringToObject(env, key, eq + 1);
            } else {
                if (nsbox_parse_seconds(v, NSBOX_TIMEOUT_MAX_S, &timeout_ms) < 0) {
                    cJSON_Delete(env);
                    char msg[128];
                    snprintf(msg, sizeof msg, NSBOX_TIMEOUT_USAGE, v);
                    return usage(msg);
                }
            }
        } else {
            cJSON_Delete(env);
            return usage("unknown exec option (exec [-i] [-t] [-d] [--timeout S] [--cwd DIR] [-e K=V] "
                         "ID -- CMD [ARG...])");
        }
    }
    if (i < argc && !strcmp(argv[i], "--"))
        i++;
    /* A background process has no stdin (its output goes to the log): refuse -i rather than
     * run the command without what it was given. */
    const char *lost = !detach     ? NULL
                       : tty       ? "exec -t and -d do not go together"
                       : interactive ? "exec -d takes no -i: a background process's stdin is empty "
                                       "(give it a file: nsbox cp, then CMD < FILE)"
                                     : NULL;
    if (lost) {
        cJSON_Delete(env);
        return usage(lost);
    }
    if (i >= argc) {
        cJSON_Delete(env);
        return usage("exec needs a sandbox id");
    }
    const char *id = argv[i++];
    if (i < argc && argv[i][0] == '-' && strcmp(argv[i], "--") != 0) {
        /* "exec ID --timeout 1 -- true": options after the id, with a "--" further on, are
         * a mistake, not a command named "--timeout" */
        for (int j = i + 1; j < argc; j++)
            if (!strcmp(argv[j], "--")) {
                cJSON_Delete(env);
                return usage("options go before the sandbox id: nsbox exec [OPTIONS] ID -- CMD "
                             "[ARG...]");
            }
    }
    if (i < argc && !strcmp(argv[i], "--"))
        i++;
    if (i >= argc) {
        cJSON_Delete(env);
        return usage("exec needs a command: nsbox exec ID -- CMD [ARG...]");
    }
    cJSON *req = nsbox_client_request(detach ? "start" : "exec");
    cJSON *av = cJSON_AddArrayToObject(req, "argv");
    for (; i < argc; i++)
        cJSON_AddItemToArray(av, cJSON_CreateString(argv[i]));
    cJSON_AddItemToObject(req, "env", env);
    if (cwd) {
        /* relative to /workspace, as the Python client's cwd= */
        char abs[4200];
        if (cwd[0] != '/')
            snprintf(abs, sizeof abs, "/workspace/%s", cwd);
        cJSON_AddStringToObject(req, "cwd", cwd[0] == '/' ? cwd : abs);
    }
    if (timeout_ms)
        cJSON_AddNumberToObject(req, "timeout_ms", (double)timeout_ms);
    if (tty) {
        cJSON_AddTrueToObject(req, "tty");
        int rc = exec_with_tty(id, req);
        cJSON_Delete(req);
        return rc;
    }

    cleanup_close int null = interactive ? -1 : open("/dev/null", O_RDONLY | O_CLOEXEC);
    int fds[3] = {interactive ? 0 : null, 1, 2};
    /* Everything but /dev/null goes through a pipe of ours: what the command leaves running
     * outlives the exec, and must not keep anything of the caller's (relay.h). */
    struct nsbox_relay relay;
    if (!detach && nsbox_relay_start(&relay, fds, true) < 0) {
        cJSON_Delete(req);
        nsbox_err_sys(&e, "cannot relay the command's input and output");
        return fail(&e);
    }
    cleanup_close int sock = -1;
    cJSON *reply = NULL;
    unsigned waited_ms = 0;
    int r = -1;
    do { /* nsbox_client_exchange(), but for the wait, which passes signals on to the command */
        sock = nsbox_connect_ctl(id, &e);
        if (sock < 0 || nsbox_client_send(sock, req, fds, detach ? 0 : 3, &e) < 0)
            break;
        /* The command has our descriptors; we wait for its status and pass signals on. */
        r = detach ? nsbox_client_recv(sock, &reply, NULL, &e)
                   : client_wait(id, sock, timeout_ms, &reply, &e);
        if (r < 0)
            nsbox_client_lost(id, &e);
    } while (r == 0 && nsbox_client_again_if_busy(&reply, &sock, &waited_ms, NSBOX_CLIENT_BUSY_FOREVER));
    cJSON_Delete(req);
    /* The command has ended: what it wrote is copied before anything of ours is said. */
    if (!detach)
        nsbox_relay_finish(&relay);
    if (!reply)
        return fail(&e);
    nsbox_closep(&null);
    if (!detach || !cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(reply, "ok")))
        return exec_result(reply);
    const cJSON *pid = cJSON_GetObjectItemCaseSensitive(reply, "pid");
    int p = cJSON_IsNumber(pid) ? pid->valueint : 0;
    bool bounded = cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(reply, "timeout_ms"));
    cJSON_Delete(reply);
    if (timeout_ms && !bounded) {
        /* A supervisor of an older nsbox ignores start's timeout_ms: do not leave a process
         * running without the bound it was asked for. */
        cJSON *kreq = nsbox_client_request("kill");
        cJSON_AddNumberToObject(kreq, "pid", p);
        cJSON_AddNumberToObject(kreq, "signal", SIGKILL);
        if (nsbox_client_simple_call(id, kreq, &reply, &e) == 0)
            cJSON_Delete(reply);
        nsbox_err_set(&e, NSBOX_E_INVALID, EOPNOTSUPP,
                      "this sandbox's supervisor (an older nsbox) cannot bound a background "
                      "process; it was stopped. Make a new sandbox, or bound it inside: "
                      "timeout S CMD");
        return fail(&e);
    }
    printf("%d\n", p);
    return 0;
}

/* ---- ls / inspect / rm / ps / kill / logs ---------------------------------------------------- */

/* What inspect and ls print of a reply: the sandbox, without the protocol's envelope. */
static cJSON *unwrapped(cJSON *reply)
{
    cJSON_DeleteItemFromObjectCaseSensitive(reply, "ok");
    cJSON_DeleteItemFromObjectCaseSensitive(reply, "v");
    return reply;
}

int nsbox_cli_inspect(int argc, char **argv)
{
    if (argc != 2)
        return usage("inspect needs one sandbox id");
    struct nsbox_err e = {0};
    cJSON *reply;
    if (nsbox_client_simple_call(argv[1], nsbox_client_request("inspect"), &reply, &e) < 0)
        return fail(&e);
    char *s = cJSON_Print(unwrapped(reply));
    printf("%s\n", s ? s : "{}");
    free(s);
    cJSON_Delete(reply);
    return 0;
}

int nsbox_cli_ls(int argc, char **argv)
{
    bool json = argc > 1 && !strcmp(argv[1], "--json");
    if (argc > (json ? 2 : 1)) /* a typo of --json was taken for no option */
        return usage("ls takes no argument but --json (nsbox ls [--json])");
    struct nsbox_err e = {0};
    nsbox_gc(false, &e);
    char rt[PATH_MAX];
    if (nsbox_path_runtime_dir(rt, sizeof rt, &e) < 0)
        return fail(&e);
    cJSON *all = cJSON_CreateArray();
    DIR *d = opendir(rt);
    struct dirent *de;
    while (d && (de = readdir(d))) {
        if (!nsbox_state_valid_id(de->d_name))
            continue;
        char ctl[PATH_MAX];
        struct stat st;
        snprintf(ctl, sizeof ctl, "%s/%s/ctl", rt, de->d_name);
        if (stat(ctl, &st) < 0)
            continue; /* a one-shot sandbox, or one still starting */
        /* One stuck supervisor must not hide the others: after 10 s it is listed as such. */
        cJSON *reply, *req = nsbox_client_request("inspect");
        int r = nsbox_client_call_within(de->d_name, req, 10, &reply, &e);
        cJSON_Delete(req);
        if (r == 0 && nsbox_client_reply_error(reply, &e) == 0) {
            cJSON_AddItemToArray(all, unwrapped(reply));
            continue;
        }
        cJSON_Delete(reply);
        if (e.code != NSBOX_E_TIMEOUT && e.code != NSBOX_E_BUSY)
            continue; /* gone meanwhile */
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "id", de->d_name);
        cJSON_AddStringToObject(o, "state", e.code == NSBOX_E_BUSY ? "busy" : "stuck");
        cJSON_AddStringToObject(o, "error", e.msg);
        cJSON_AddItemToArray(all, o);
    }
    if (d)
        closedir(d);
    if (json) {
        char *s = cJSON_PrintUnformatted(all);
        printf("%s\n", s ? s : "[]");
        free(s);
    } else {
        printf("%-12s  %-8s  %-8s  %-20s  %s\n", "ID", "STATE", "TYPE", "CREATED", "EXPIRES");
        const cJSON *it;
        cJSON_ArrayForEach(it, all)
        {
            const cJSON *spec = cJSON_GetObjectItemCaseSensitive(it, "spec");
            const cJSON *type = cJSON_GetObjectItemCaseSensitive(spec, "instance_type");
            char created[32] = "-", expires[32] = "-";
            const cJSON *cj = cJSON_GetObjectItemCaseSensitive(it, "created");
            const cJSON *xj = cJSON_GetObjectItemCaseSensitive(it, "expires");
            struct tm tm;
            time_t c = cJSON_IsNumber(cj) ? (time_t)cj->valuedouble : 0;
            time_t x = cJSON_IsNumber(xj) ? (time_t)xj->valuedouble : 0;
            if (c)
                strftime(created, sizeof created, "%Y-%m-%d %H:%M:%S", localtime_r(&c, &tm));
            if (x)
                strftime(expires, sizeof expires, "%Y-%m-%d %H:%M:%S", localtime_r(&x, &tm));
            const cJSON *err = cJSON_GetObjectItemCaseSensitive(it, "error");
            if (cJSON_IsString(err))
                fprintf(stderr, "nsbox: %s\n", err->valuestring);
            printf("%-12s  %-8s  %-8s  %-20s  %s\n",
                   cJSON_GetObjectItemCaseSensitive(it, "id")->valuestring,
                   cJSON_GetObjectItemCaseSensitive(it, "state")->valuestring,
                   cJSON_IsString(type) ? type->valuestring : "?", created, expires);
        }
    }
    cJSON_Delete(all);
    return 0;
}

int nsbox_cli_rm(int argc, char **argv)
{
    if (argc < 2)
        return usage("rm needs at least one sandbox id");
    int rc = 0;
    for (int i = 1; i < argc; i++) {
        struct nsbox_err e = {0};
        /* Idempotent: removing what is already gone, or going (another rm, its ttl: the
         * supervisor hangs up on requests it has not read when it exits), is not an error. */
        bool gone = false;
        if (nsbox_client_delete(argv[i], true, &e) < 0 &&
            !(gone = e.code == NSBOX_E_DELETED || e.sys_errno == ECONNRESET ||
                     e.sys_errno == EPIPE)) {
            if (e.code == NSBOX_E_NOTFOUND && nsbox_state_valid_id(argv[i])) {
                /* Still not an error, but said: a mistyped id (or one made with sudo) would
                 * otherwise leave the sandbox meant running for its ttl, in silence. */
                fprintf(stderr, "nsbox: note: %s: nothing removed\n", e.msg);
                continue;
            }
            fail(&e);
            rc = EXIT_NSBOX;
            continue;
        }
        /* rm returning means the sandbox is gone: nsbox_client_delete waited for its supervisor's
         * exit. Should that have been cut short, or another been deleting it, wait for the
         * state directory too. */
        char rt[PATH_MAX], dir[PATH_MAX];
        struct nsbox_err pe;
        if (nsbox_path_runtime_dir(rt, sizeof rt, &pe) == 0) {
            snprintf(dir, sizeof dir, "%s/%s", rt, argv[i]);
            for (int k = 0; k < 2000 && access(dir, F_OK) == 0; k++)
                usleep(2000);
            if (gone && access(dir, F_OK) == 0) {
                /* the connection was lost, and the sandbox is still there */
                fprintf(stderr, "nsbox: sandbox %s is not gone: its supervisor hung up (%s), and "
                                "%s is still there; nsbox rm again, or nsbox gc once no process "
                                "'nsbox %s' runs\n",
                        argv[i], e.msg, dir, argv[i]);
                rc = EXIT_NSBOX;
            }
        }
    }
    return rc;
}

int nsbox_cli_ps(int argc, char **argv)
{
    if (argc != 2)
        return usage("ps needs one sandbox id");
    struct nsbox_err e = {0};
    cJSON *reply;
    if (nsbox_client_simple_call(argv[1], nsbox_client_request("ps"), &reply, &e) < 0)
        return fail(&e);
    printf("%-8s  %-8s  %s\n", "PID", "STATUS", "COMMAND");
    const cJSON *it;
    cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(reply, "processes"))
    {
        char status[32] = "running";
        if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(it, "running")))
            snprintf(status, sizeof status, "exit %d",
                     cJSON_GetObjectItemCaseSensitive(it, "exit_code")->valueint);
        /* one line per process: control characters of the command (a script's newlines) are
         * shown escaped, and a long command is cut */
        const char *cmd = cJSON_GetObjectItemCaseSensitive(it, "cmd")->valuestring;
        char shown[200];
        size_t k = 0;
        const unsigned char *c = (const unsigned char *)cmd;
        for (; *c && k + 5 < sizeof shown; c++) {
            if (*c == '\n')
                shown[k++] = '\\', shown[k++] = 'n';
            else if (*c < 0x20 || *c == 0x7f)
                k += (size_t)snprintf(shown + k, sizeof shown - k, "\\x%02x", *c);
            else
                shown[k++] = (char)*c;
        }
        shown[k] = '\0';
        printf("%-8d  %-8s  %s%s\n", cJSON_GetObjectItemCaseSensitive(it, "pid")->valueint,
               status, shown, *c ? "..." : "");
    }
    cJSON_Delete(reply);
    return 0;
}

/* "9", "KILL", "SIGKILL", "sigkill"; -1 when it is none of these. */
static int parse_signal(const char *s)
{
    char *end;
    long n = strtol(s, &end, 10);
    if (*s && !*end)
        return n >= 1 && n <= 64 ? (int)n : -1;
    if (!strncasecmp(s, "SIG", 3))
        s += 3;
    for (int sig = 1; sig < 32; sig++) {
        const char *name = sigabbrev_np(sig);
        if (name && !strcasecmp(name, s))
            return sig;
    }
    return -1;
}

/* A PID argument that nsbox_parse_pid refused, said for cmd: pid 1 is a process, but the
 * sandbox's init, which why (kill said "needs a process id" of it). */
static int pid_usage(const char *cmd, const char *arg, const char *why)
{
    char msg[400];
    if (!strcmp(arg, "1"))
        snprintf(msg, sizeof msg,
                 "%s: pid 1 is the sandbox's init, %s; give a background process's pid (as "
                 "nsbox exec -d printed it, or nsbox ps shows it)",
                 cmd, why);
    else
        snprintf(msg, sizeof msg,
                 "%s needs a process id (as nsbox exec -d printed it, or nsbox ps shows it)", cmd);
    return usage(msg);
}

int nsbox_cli_kill(int argc, char **argv)
{
    if (argc < 3 || argc > 4)
        return usage("kill needs a sandbox id, a pid and optionally a signal (number or name)");
    long pid = nsbox_parse_pid(argv[2]);
    if (pid < 0)
        return pid_usage("kill", argv[2], "which ends only with the sandbox (nsbox rm ID)");
    int sig = argc == 4 ? parse_signal(argv[3]) : SIGTERM;
    if (sig < 0)
        return usage("kill: not a signal (a number 1-64, or a name: TERM, SIGKILL, ...)");
    struct nsbox_err e = {0};
    cJSON *req = nsbox_client_request("kill"), *reply;
    cJSON_AddNumberToObject(req, "pid", (double)pid);
    cJSON_AddNumberToObject(req, "signal", sig);
    if (nsbox_client_simple_call(argv[1], req, &reply, &e) < 0)
        return fail(&e);
    cJSON_Delete(reply);
    return 0;
}

/* One logs reply: its stdout on ours, its stderr on ours, and a note when output was dropped
 * (following: between two reads). -1 with errno when our output cannot be written (EPIPE: the
 * reader is gone). */
static int print_logs(const cJSON *reply, long pid, bool following)
{
    const char *out = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(reply, "stdout"));
    const char *err = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(reply, "stderr"));
    /* A log that starts mid-line is not a bug in the program: say that its start was dropped */
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(reply, "truncated"))) {
        fflush(stdout);
        fprintf(stderr,
                following ? "nsbox: note: output of process %ld was dropped here: it wrote more "
                            "than the 64 KiB kept of each stream between two reads\n"
                          : "nsbox: note: earlier output of process %ld was dropped (the last "
                            "64 KiB of each stream are kept)\n",
                pid);
    }
    errno = 0;
    if ((out && *out && fputs(out, stdout) < 0) || fflush(stdout) != 0)
        return -1;
    if (err && *err && (fputs(err, stderr) < 0 || fflush(stderr) != 0))
        return -1;
    return 0;
}

static int output_failed(void)
{
    if (errno == EPIPE)
        return 0; /* the reader had what it wanted (| head, | grep -m1): not an error */
    int err = errno ? errno : EIO;
    fprintf(stderr, "nsbox: cannot write the logs: %s\n", strerror(err));
    return EXIT_NSBOX;
}

static bool reply_number(const cJSON *reply, const char *key, double *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(reply, key);
    if (!cJSON_IsNumber(v) || v->valuedouble < 0)
        return false;
    *out = v->valuedouble;
    return true;
}

/* Sleep ms, or less when our stdout's reader goes away (a pipe whose reader closed reports
 * POLLERR; a terminal that hung up, POLLHUP): then true. A process that writes only to
 * stderr would otherwise keep a `logs -f | grep -m1 ready` waiting for ever. */
static bool reader_gone_within(int ms)
{
    struct pollfd p = {STDOUT_FILENO, 0, 0};
    int64_t end = nsbox_now_ms() + ms;
    for (;;) {
        int left = (int)(end - nsbox_now_ms());
        if (left < 0)
            left = 0;
        int r = poll(&p, 1, left);
        if (r > 0 && (p.revents & POLLNVAL)) {
            errno = EBADF; /* no stdout at all: an error, not a reader that left */
            return true;
        }
        if (r > 0) {
            errno = 0;
            return (p.revents & (POLLERR | POLLHUP)) != 0;
        }
        if (r == 0 || errno != EINTR)
            return false;
    }
}

/* logs -f: what the process writes, as it writes it, until it has ended and its output is all
 * read (its pipes closed, or nothing more for FOLLOW_QUIET_MS after its end: a child it left
 * may hold them), or until our own reader is gone. Polls: every FOLLOW_MIN_MS while output
 * comes (at once after a reply that brought more than half of what is kept), backing off to
 * FOLLOW_MAX_MS; the polls do not count as activity, so a followed sandbox still goes to sleep
 * when idle, which is said once per sleep. */
#define FOLLOW_MIN_MS 20
#define FOLLOW_MAX_MS 250
#define FOLLOW_QUIET_MS 1000
static int follow_logs(const char *id, long pid)
{
    double out_end = -1, err_end = -1;
    int delay = FOLLOW_MIN_MS;
    int64_t ended_at = -1;
    bool asleep = false;
    for (;;) {
        struct nsbox_err e = {0};
        cJSON *req = nsbox_client_request("logs"), *reply;
        cJSON_AddNumberToObject(req, "pid", (double)pid);
        if (out_end >= 0) {
            cJSON_AddNumberToObject(req, "stdout_from", out_end);
            cJSON_AddNumberToObject(req, "stderr_from", err_end);
        }
        if (nsbox_client_simple_call(id, req, &reply, &e) < 0)
            return fail(&e);
        double o0 = out_end, e0 = err_end;
        if (!reply_number(reply, "stdout_end", &out_end) ||
            !reply_number(reply, "stderr_end", &err_end)) {
            cJSON_Delete(reply);
            nsbox_err_set(&e, NSBOX_E_UNSUPPORTED, ENOTSUP,
                          "sandbox %s was made by an older nsbox, whose supervisor cannot follow "
                          "logs; run nsbox logs without -f",
                          id);
            return fail(&e);
        }
        if (print_logs(reply, pid, o0 >= 0) < 0) {
            cJSON_Delete(reply);
            return output_failed();
        }
        double got = (out_end - (o0 < 0 ? out_end : o0)) + (err_end - (e0 < 0 ? err_end : e0));
        bool news = out_end != o0 || err_end != e0;
        bool running = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(reply, "running"));
        bool eof = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(reply, "eof"));
        bool lost = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(reply, "truncated"));
        bool sleeping = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(reply, "sleeping"));
        cJSON_Delete(reply);
        if (sleeping && !asleep && running)
            fprintf(stderr, "nsbox: note: sandbox %s is asleep (idle_timeout_seconds): process "
                            "%ld is frozen until a request wakes the sandbox; following on\n",
                    id, pid);
        asleep = sleeping;
        if (!running) {
            int64_t now = nsbox_now_ms();
            if (ended_at < 0 || news)
                ended_at = now;
            if (eof || now - ended_at >= FOLLOW_QUIET_MS)
                return 0;
        }
        delay = lost || got >= 32768 ? 0
                : news               ? FOLLOW_MIN_MS
                : delay * 2 > FOLLOW_MAX_MS ? FOLLOW_MAX_MS
                                            : delay * 2;
        if (reader_gone_within(delay))
            return errno == EBADF ? output_failed() : 0;
    }
}

int nsbox_cli_logs(int argc, char **argv)
{
    bool follow = false;
    char *args[2];
    int n = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-f") || !strcmp(argv[i], "--follow"))
            follow = true;
        else if (n < 2)
            args[n++] = argv[i];
        else
            n = 3;
    }
    if (n != 2)
        return usage("logs needs a sandbox id and a pid: nsbox logs [-f] ID PID");
    long pid = nsbox_parse_pid(args[1]);
    if (pid < 0)
        return pid_usage("logs", args[1], "which has no logs");
    if (follow)
        return follow_logs(args[0], pid);
    struct nsbox_err e = {0};
    cJSON *req = nsbox_client_request("logs"), *reply;
    cJSON_AddNumberToObject(req, "pid", (double)pid);
    if (nsbox_client_simple_call(args[0], req, &reply, &e) < 0)
        return fail(&e);
    int r = print_logs(reply, pid, false);
    cJSON_Delete(reply);
    return r < 0 ? output_failed() : 0;
}

static int still_running(long pid, const char *seconds)
{
    fprintf(stderr, "nsbox: process %ld is still running after %s s (it runs on)\n", pid,
            seconds);
    return EXIT_TIMEOUT;
}

/* wait against the supervisor of an older nsbox, which has no wait op (a sandbox outlives an
 * upgrade): ask ps every 50 ms, as the Python client does. */
static int wait_by_polling(const char *id, long pid, int64_t deadline, const char *seconds)
{
    for (;;) {
        struct nsbox_err e = {0};
        cJSON *reply;
        if (nsbox_client_simple_call(id, nsbox_client_request("ps"), &reply, &e) < 0)
            return fail(&e);
        const cJSON *it, *found = NULL;
        cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(reply, "processes"))
        {
            const cJSON *p = cJSON_GetObjectItemCaseSensitive(it, "pid");
            if (cJSON_IsNumber(p) && p->valuedouble == (double)pid)
                found = it; /* after pid reuse, ps cannot tell which is ours (no order) */
        }
        int rc = -1;
        if (!found) {
            nsbox_err_set(&e, NSBOX_E_NOTFOUND, ESRCH, "no background process %ld", pid);
            rc = fail(&e);
        } else if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(found, "running"))) {
            const cJSON *code = cJSON_GetObjectItemCaseSensitive(found, "exit_code");
            rc = cJSON_IsNumber(code) ? code->valueint : EXIT_NSBOX;
        }
        cJSON_Delete(reply);
        if (rc >= 0)
            return rc;
        if (deadline >= 0 && nsbox_now_ms() >= deadline)
            return still_running(pid, seconds);
        usleep(50 * 1000);
    }
}

/* nsbox wait [--timeout S] ID PID: until a background process (exec -d) ends; its exit code
 * is ours. After S seconds without its end: 124, and the process runs on. */
int nsbox_cli_wait(int argc, char **argv)
{
    int i = 1, timeout_ms = -1;
    if (i + 1 < argc && !strcmp(argv[i], "--timeout")) {
        uint64_t ms;
        if (nsbox_parse_seconds(argv[i + 1], 24 * 86400, &ms) < 0) /* poll's int: < 24.8 days */
            return usage("wait: --timeout needs a number of seconds (at most 24 days)");
        /* at least 50 ms: time for the answer about a process that has already ended */
        timeout_ms = ms < 50 ? 50 : (int)ms;
        i += 2;
    }
    if (argc - i != 2)
        return usage("wait needs a sandbox id and a pid: nsbox wait [--timeout S] ID PID");
    const char *id = argv[i];
    long pid = nsbox_parse_pid(argv[i + 1]);
    if (pid < 0)
        return pid_usage("wait", argv[i + 1], "which ends only with the sandbox");
    struct nsbox_err e = {0};
    cleanup_close int sock = nsbox_connect_ctl(id, &e);
    if (sock < 0)
        return fail(&e);
    cJSON *req = nsbox_client_request("wait"), *reply = NULL;
    cJSON_AddNumberToObject(req, "pid", (double)pid);
    int r = nsbox_client_send(sock, req, NULL, 0, &e);
    cJSON_Delete(req);
    if (r < 0)
        return fail(&e);
    struct pollfd pf = {sock, POLLIN, 0};
    int64_t deadline = timeout_ms < 0 ? -1 : nsbox_now_ms() + timeout_ms;
    for (;;) {
        int left = deadline < 0 ? -1 : (int)(deadline - nsbox_now_ms());
        if (deadline >= 0 && left < 0)
            left = 0;
        int n = poll(&pf, 1, left);
        if (n > 0)
            break;
        if (n == 0)
            return still_running(pid, argv[2]);
        if (errno != EINTR) {
            nsbox_err_sys(&e, "wait: poll");
            return fail(&e);
        }
    }
    if (nsbox_client_recv(sock, &reply, NULL, &e) < 0 || nsbox_client_reply_error(reply, &e) < 0) {
        cJSON_Delete(reply);
        /* an older supervisor, or one with as many waits as it takes: ps, which it answers */
        if ((e.code == NSBOX_E_INVALID && strstr(e.msg, "unknown op")) || e.code == NSBOX_E_BUSY)
            return wait_by_polling(id, pid, deadline, timeout_ms < 0 ? NULL : argv[2]);
        /* the sandbox deleted during the wait (its ttl, an rm) says why, as exec does */
        return fail(nsbox_client_lost(id, &e));
    }
    /* its exit code, and why when nsbox ended it (its --timeout, the OOM killer), as exec
     * says: a 124 or 137 of the process's own has no such line */
    return exec_result(reply);
}

/* ---- cp -------------------------------------------------------------------------------------- */

static bool split_remote(const char *arg, char *id, const char **path)
{
    const char *colon = strchr(arg, ':');
    if (!colon || colon - arg != NSBOX_ID_LEN)
        return false;
    memcpy(id, arg, NSBOX_ID_LEN);
    id[NSBOX_ID_LEN] = '\0';
    if (!nsbox_state_valid_id(id))
        return false;
    /* "ID:" alone is the workspace, as "host:" is the home directory to scp (it came out as
     * "/NAME", outside /workspace, for a file copied into it) */
    *path = colon[1] ? colon + 1 : ".";
    return true;
}

/* Bytes [*off, end) of in to out (at out's offset), or fewer when in ends first: *off is
 * where it stopped. */
static int copy_range(int in, int out, off_t *off, off_t end, struct nsbox_err *e)
{
    bool plain = false;
    char buf[65536];
    while (*off < end) {
        size_t want = (size_t)(end - *off) < (1u << 20) ? (size_t)(end - *off) : 1u << 20;
        ssize_t n;
        if (!plain) {
            n = sendfile(out, in, off, want);
            if (n < 0 && (errno == EINVAL || errno == ENOSYS)) {
                plain = true;
                continue;
            }
        } else {
            n = pread(in, buf, want < sizeof buf ? want : sizeof buf, *off);
            for (ssize_t w = 0, k; n > 0 && w < n; w += k)
                if ((k = write(out, buf + w, (size_t)(n - w))) < 0) {
                    if (errno == EINTR) {
                        k = 0;
                        continue;
                    }
                    return nsbox_err_sys(e, "write");
                }
            if (n > 0)
                *off += n;
        }
        if (n == 0)
            return 0; /* the file got shorter meanwhile */
        if (n < 0 && errno != EINTR)
            return nsbox_err_sys(e, "copy");
    }
    return 0;
}

/* A sandbox's file (size bytes when the read was answered) to out. At most size bytes: a file
 * that grows meanwhile is cut there. Into a regular file that cp opened itself (own, empty),
 * holes stay holes, so that a sparse file costs the host's disk what its data costs, not its
 * apparent size (16 TiB in 4 KiB). Anything else, stdout even when the shell made it a file
 * (`>> log`, `{ ...; nsbox cp ID:f -; } > out`), gets every byte at its own offset: a seek
 * and a truncate there cut what was written before. */
static int copy_out(int in, int out, bool own, uint64_t size, struct nsbox_err *e)
{
    struct stat st;
    bool sparse = own && fstat(out, &st) == 0 && S_ISREG(st.st_mode);
    off_t pos = 0, end = size > (uint64_t)INT64_MAX ? INT64_MAX : (off_t)size;
    while (pos < end) {
        off_t data = pos, hole = end;
        if (sparse) {
            data = lseek(in, pos, SEEK_DATA);
            if (data < 0 && errno == ENXIO)
                break; /* a hole up to the end */
            if (data < 0) {
                data = pos; /* no SEEK_DATA here: all of it */
            } else {
                hole = lseek(in, data, SEEK_HOLE);
                if (hole < 0 || hole > end)
                    hole = end;
            }
            if (data >= end)
                break;
            if (lseek(out, data, SEEK_SET) < 0)
                return nsbox_err_sys(e, "seek");
        }
        off_t at = data;
        if (copy_range(in, out, &at, hole, e) < 0)
            return -1;
        if (at < hole) { /* shorter than when the read was answered */
            end = at;
            break;
        }
        pos = hole;
    }
    if (sparse && ftruncate(out, end) < 0)
        return nsbox_err_sys(e, "write");
    return 0;
}

/* "ID:path" that is not a sandbox's: a typo in the id deserves its own message. */
static bool looks_like_remote(const char *arg)
{
    const char *colon = strchr(arg, ':');
    const char *slash = strchr(arg, '/');
    return colon && colon != arg && (!slash || colon < slash);
}

static const char *base_name(const char *p)
{
    size_t n = strlen(p);
    while (n > 1 && p[n - 1] == '/')
        n--;
    const char *b = p + n;
    while (b > p && b[-1] != '/')
        b--;
    return b;
}

/* Where `nsbox cp ID:SRC DST` writes on the host: DST, or DST/<SRC's name> when DST is a
 * directory, as cp does. With -p, DST's missing directories are made first (the caller's
 * umask): "DIR/" is one to make and write into, else DST's parent. */
static int host_target(const char *dst, const char *spath, bool parents, char target[PATH_MAX],
                       struct nsbox_err *e)
{
    size_t dl = strlen(dst);
    if (dl >= PATH_MAX)
        goto too_long;
    memcpy(target, dst, dl + 1);
    char *cut = dl && target[dl - 1] == '/' ? target + dl - 1 : strrchr(target, '/');
    if (parents && cut && cut != target) {
        *cut = '\0';
        if (nsbox_mkdir_p(target, 0777, e) < 0)
            return -1;
        *cut = '/';
    }
    struct stat ds;
    if (stat(dst, &ds) < 0 || !S_ISDIR(ds.st_mode))
        return 0;
    while (dl > 1 && dst[dl - 1] == '/')
        dl--;
    if ((size_t)snprintf(target, PATH_MAX, "%.*s/%s", (int)dl, dst, base_name(spath)) < PATH_MAX)
        return 0;
too_long:
    return nsbox_err_set(e, NSBOX_E_INVALID, ENAMETOOLONG, "%.64s...: a path longer than %d",
                         dst, PATH_MAX - 1);
}

/* Is the sandbox's path a directory (then a host file goes into it, as cp does)? */
static bool remote_is_dir(const char *id, const char *path)
{
    size_t n = strlen(path);
    if (n == 0 || path[n - 1] == '/' || !strcmp(path, ".") || !strcmp(path, "/workspace"))
        return true;
    struct nsbox_err e = {0};
    cJSON *req = nsbox_client_request("stat"), *reply = NULL;
    cJSON_AddStringToObject(req, "path", path);
    int r = nsbox_client_call(id, req, NULL, 0, &reply, NULL, &e);
    cJSON_Delete(req);
    const cJSON *t = reply ? cJSON_GetObjectItemCaseSensitive(reply, "type") : NULL;
    bool dir = r == 0 && cJSON_IsString(t) && !strcmp(t->valuestring, "dir");
    cJSON_Delete(reply);
    return dir;
}

/* target's directory into dir ("." for a name alone); its last name is returned ("" for
 * "DIR/"). */
static const char *dir_of(const char *target, char dir[PATH_MAX])
{
    const char *slash = strrchr(target, '/');
    snprintf(dir, PATH_MAX, "%.*s", slash ? (int)(slash == target ? 1 : slash - target) : 1,
             slash ? target : ".");
    return slash ? slash + 1 : target;
}

/* Where `cp ID:SRC DST` copies to: DST is replaced whole or not at all, as a write into a
 * sandbox is (docs/files.md). The copy goes into an unnamed file (O_TMPFILE) in DST's directory
 * and takes DST's name only once it is complete, so that a full disk or a Ctrl-C leaves DST as
 * it was and nothing beside it. An existing DST's permissions (not set-id bits: the content is
 * the sandbox's) and group are kept, and its owner when we are root. Written in place, as cp
 * does, where a new file would not be the same one: DST is not a regular file (a FIFO, a
 * device), is a symlink (followed), has other hard links, is someone else's, or may not be
 * written by us (0444: then the open fails, as cp's would); and where its directory takes no
 * file from us (DST itself may be writable) or its filesystem has no O_TMPFILE.
 * *staged: the copy is to be put in place by host_out_commit; *made: in place, DST was made
 * here (removed again when the copy fails); *existed: DST was there before. */
static int host_out_open(const char *target, mode_t mode, bool *staged, bool *made,
                         bool *existed)
{
    struct stat st;
    bool exists = *existed = lstat(target, &st) == 0;
    *staged = *made = false;
    /* a file we may not write (0444, someone else's) fails as cp's would, not replaced */
    bool in_place = exists && (!S_ISREG(st.st_mode) || st.st_nlink > 1 ||
                               (geteuid() != 0 && st.st_uid != geteuid()) ||
                               access(target, W_OK) < 0);
    char dir[PATH_MAX];
    int fd = in_place || !*dir_of(target, dir) /* "DIR/" */
                 ? -1
                 : open(dir, O_TMPFILE | O_WRONLY | O_CLOEXEC, exists ? st.st_mode & 0777 : mode);
    /* its owner as root; its group (one of ours) as anyone: else in place */
    if (fd >= 0 && exists &&
        (fchmod(fd, st.st_mode & 0777) < 0 ||
         (geteuid() == 0 && (st.st_uid != 0 || st.st_gid != 0) &&
          fchown(fd, st.st_uid, st.st_gid) < 0) ||
         (geteuid() != 0 && st.st_gid != getegid() && fchown(fd, (uid_t)-1, st.st_gid) < 0))) {
        close(fd);
        fd = -1;
    }
    if (fd >= 0) {
        *staged = true;
        return fd;
    }
    fd = open(target, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
    *made = fd >= 0 && !exists;
    return fd;
}

/* The complete copy in fd takes target's name: linked beside it under a name of its own, then
 * renamed over it (names relative to the directory: a path near PATH_MAX still fits). */
static int host_out_commit(int fd, const char *target, struct nsbox_err *e)
{
    char dir[PATH_MAX], tmp[64], proc[40];
    const char *name = dir_of(target, dir);
    cleanup_close int dfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return nsbox_err_sys(e, "cannot put the copy in place");
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
    for (int i = 0; i < 100; i++) {
        snprintf(tmp, sizeof tmp, ".nsbox-cp-%d-%d", (int)getpid(), i);
        /* AT_EMPTY_PATH needs CAP_DAC_READ_SEARCH; the /proc link does not */
        int r = linkat(fd, "", dfd, tmp, AT_EMPTY_PATH);
        if (r < 0 && errno != EEXIST)
            r = linkat(AT_FDCWD, proc, dfd, tmp, AT_SYMLINK_FOLLOW);
        if (r < 0 && errno == EEXIST)
            continue;
        if (r < 0)
            return nsbox_err_sys(e, "cannot put the copy in place");
        if (renameat(dfd, tmp, dfd, name) < 0) {
            int err = errno;
            unlinkat(dfd, tmp, 0);
            errno = err;
            return nsbox_err_sys(e, "cannot put the copy in place");
        }
        return 0;
    }
    return nsbox_err_set(e, NSBOX_E_SYS, EEXIST, "cannot put the copy in place: no free name");
}

int nsbox_cli_cp(int argc, char **argv)
{
    bool parents = false;
    if (argc > 1 && !strcmp(argv[1], "-p")) {
        parents = true;
        argc--, argv++;
    }
    if (argc != 3)
        return usage("cp needs SRC and DST, one of them ID:/path (cp [-p] SRC DST)");
    char sid[NSBOX_ID_LEN + 1], did[NSBOX_ID_LEN + 1];
    const char *spath = NULL, *dpath = NULL;
    bool sr = split_remote(argv[1], sid, &spath), dr = split_remote(argv[2], did, &dpath);
    struct nsbox_err e = {0};
    if (sr == dr) {
        for (int i = 1; i <= 2; i++)
            if (!sr && looks_like_remote(argv[i]) && access(argv[i], F_OK) != 0) {
                fprintf(stderr, "nsbox: %s: '%.*s' is not a sandbox id (12 hex digits; see nsbox "
                                "ls)\n",
                        argv[i], (int)(strchr(argv[i], ':') - argv[i]), argv[i]);
                return EXIT_NSBOX;
            }
        return usage("cp copies between the host and a sandbox: exactly one side is ID:/path");
    }
    if (sr) {
        cJSON *req = nsbox_client_request("read"), *reply = NULL;
        cJSON_AddStringToObject(req, "path", spath);
        int rfd = -1;
        int r = nsbox_client_call(sid, req, NULL, 0, &reply, &rfd, &e);
        cJSON_Delete(req);
        if (r < 0 || nsbox_client_reply_error(reply, &e) < 0 || rfd < 0) {
            if (!e.msg[0])
                nsbox_err_set(&e, NSBOX_E_SYS, EPROTO, "no file descriptor in the reply");
            cJSON_Delete(reply);
            nsbox_closep(&rfd);
            if (strstr(e.msg, "(it is a directory)")) { /* as the other direction says */
                size_t n = strlen(e.msg);
                snprintf(e.msg + n, sizeof e.msg - n,
                         "; cp copies one file: for a tree, use tar: nsbox exec %s -- tar -C %s "
                         "-cf - . | tar -xf -", sid, spath);
            }
            return fail(&e);
        }
        const cJSON *sz = cJSON_GetObjectItemCaseSensitive(reply, "size");
        double size = cJSON_IsNumber(sz) && sz->valuedouble >= 0 ? sz->valuedouble : -1;
        /* a new file gets the sandbox file's permissions, less the umask, as cp gives them
         * (an executable stays one); an existing file keeps its own */
        const cJSON *md = cJSON_GetObjectItemCaseSensitive(reply, "mode");
        mode_t mode = cJSON_IsNumber(md) ? (mode_t)md->valueint & 0777 : 0644;
        cJSON_Delete(reply);
        if (size < 0) {
            close(rfd);
            nsbox_err_set(&e, NSBOX_E_INVALID, EPROTO, "the read reply has no size");
            return fail(&e);
        }
        char target[PATH_MAX];
        bool to_stdout = !strcmp(argv[2], "-");
        if (!to_stdout && host_target(argv[2], spath, parents, target, &e) < 0) {
            close(rfd);
            return fail(&e);
        }
        bool staged = false, made = false, existed = false;
        int out = to_stdout ? 1 : host_out_open(target, mode, &staged, &made, &existed);
        if (out < 0) {
            size_t tl = strlen(target);
            if (errno == EISDIR && tl && target[tl - 1] == '/') /* "DIR/" that does not exist */
                nsbox_err_set(&e, NSBOX_E_SYS, ENOENT,
                              "cannot write %s: no such directory (cp -p makes it)", target);
            else if (errno == ENOENT && !parents)
                nsbox_err_sys(&e, "cannot write %s (cp -p makes missing directories)", target);
            else
                nsbox_err_sys(&e, "cannot write %s", target);
            close(rfd);
            return fail(&e);
        }
        r = copy_out(rfd, out, out != 1, (uint64_t)size, &e);
        close(rfd);
        if (r == 0 && staged)
            r = host_out_commit(out, target, &e);
        if (out != 1 && close(out) < 0 && r == 0)
            r = nsbox_err_sys(&e, "write");
        if (r == 0)
            return 0;
        if (out != 1) { /* which file, and what became of it */
            if (made)
                unlink(target);
            char msg[sizeof e.msg];
            snprintf(msg, sizeof msg, "%s", e.msg);
            snprintf(e.msg, sizeof e.msg, "cannot write %s: %s (%s)", target, msg,
                     !(staged || made) ? "it is incomplete"
                     : existed         ? "it was left as it was"
                                       : "no file was made");
        }
        return fail(&e);
    }
    cleanup_close int in = !strcmp(argv[1], "-") ? dup(0) : open(argv[1], O_RDONLY | O_CLOEXEC);
    if (in < 0) {
        nsbox_err_sys(&e, "cannot read %s", argv[1]);
        return fail(&e);
    }
    struct stat st;
    if (fstat(in, &st) == 0 && S_ISDIR(st.st_mode)) {
        fprintf(stderr, "nsbox: %s is a directory: cp copies one file; for a tree, use tar: tar -C "
                        "%s -cf - . | nsbox exec -i %s -- tar -xf -\n",
                argv[1], argv[1], did);
        return EXIT_NSBOX;
    }
    /* into a directory of the sandbox: under the file's own name */
    char dest[PATH_MAX];
    snprintf(dest, sizeof dest, "%s", dpath);
    if (strcmp(argv[1], "-") != 0 && remote_is_dir(did, dpath)) {
        size_t n = strlen(dest);
        snprintf(dest + n, sizeof dest - n, "%s%s", n && dest[n - 1] == '/' ? "" : "/",
                 base_name(argv[1]));
    }
    cJSON *req = nsbox_client_request("write"), *reply = NULL;
    cJSON_AddStringToObject(req, "path", dest);
    if (parents)
        cJSON_AddTrueToObject(req, "mkdir"); /* -p: the missing directories too, as mkdir -p */
    if (fstat(in, &st) == 0 && S_ISREG(st.st_mode))
        cJSON_AddNumberToObject(req, "mode", st.st_mode & 0777);
    else /* a stream: its end is the content's end only if we are still here to say so */
        cJSON_AddTrueToObject(req, "confirm");
    int r = nsbox_client_call(did, req, &in, 1, &reply, NULL, &e);
    cJSON_Delete(req);
    if (r < 0 || nsbox_client_reply_error(reply, &e) < 0) {
        cJSON_Delete(reply);
        return fail(&e);
    }
    cJSON_Delete(reply);
    return 0;
}
