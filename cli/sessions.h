/* The command line of persistent sandboxes: the commands that talk to a supervisor
 * (docs/protocol.md). Each returns the process exit code and prints (these are main-level
 * handlers). */
#ifndef NSBOX_SESSIONS_H
#define NSBOX_SESSIONS_H

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
