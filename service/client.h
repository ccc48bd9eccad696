/* The CLI side of persistent sandboxes: commands that talk to a supervisor (docs/protocol.md).
 * Each returns the process exit code and prints (these are main-level handlers). */
#ifndef NSBOX_CLIENT_H
#define NSBOX_CLIENT_H

#include "nsbox.h"
#include "proto.h"

#include <cjson/cJSON.h>
#include <stdbool.h>

/* One request/reply round trip on a new connection to sandbox id. fds: sent with the request;
 * *reply: the parsed reply (caller frees); rfd: a descriptor that came with the reply, or -1. */
int nsbox_client_call(const char *id, cJSON *req, const int *fds, size_t nfds, cJSON **reply,
                      int *rfd, struct nsbox_err *e);
/* Ask sandbox id's supervisor to delete it (the "delete" op). 0 once it said yes; with wait,
 * once the sandbox is gone (as rm does). */
int nsbox_client_delete(const char *id, bool wait, struct nsbox_err *e);
/* A reply's error as an nsbox_err; returns -1 when the reply is an error, 0 when ok. */
int nsbox_client_reply_error(const cJSON *reply, struct nsbox_err *e);

/* The signals nsbox run passes on to its command (the first six: exec's). */
extern const int nsbox_run_relayed[8];
/* The signal nsbox run passes on for sig: sig itself, but SIGKILL for the second interrupt
 * (INT, TERM, HUP, QUIT; counted in *stops): a second Ctrl-C means "stop now", even for a
 * command that ignores the first. */
int nsbox_run_relay_signal(int sig, int *stops);

int nsbox_cli_exec(int argc, char **argv);
int nsbox_cli_ls(int argc, char **argv);
int nsbox_cli_inspect(int argc, char **argv);
int nsbox_cli_rm(int argc, char **argv);
int nsbox_cli_ps(int argc, char **argv);
int nsbox_cli_kill(int argc, char **argv);
int nsbox_cli_logs(int argc, char **argv);
int nsbox_cli_wait(int argc, char **argv);
int nsbox_cli_cp(int argc, char **argv);

#endif
