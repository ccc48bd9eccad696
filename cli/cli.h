/* What the command files of cli/ share (a private header: nothing below cli/ sees it).
 *
 * One file per command, `cli/CMD.c`, whose one exported function is its handler
 * `nsbox_cli_CMD(argc, argv)` (argv[0] is the command's name), called from main.c's table; it
 * returns the process's exit code and prints what the user is told. What several commands say
 * (an error, a usage error, a timeout, an OOM kill, a command's exit status) is in say.c; the
 * sandbox OPTIONS of run, create and pool fill are parsed in options.c. */
#ifndef NSBOX_CLI_H
#define NSBOX_CLI_H

/* Exit codes (docs/architecture.md): the command's own, else these. */
#define EXIT_TIMEOUT 124 /* timed out (exec, wait) */
#define EXIT_NSBOX 125   /* nsbox failed */
#define EXIT_USAGE 125   /* a usage error is nsbox failing, as docker run does */

int nsbox_cli_run(int argc, char **argv);     /* run.c */
int nsbox_cli_create(int argc, char **argv);  /* create.c */
int nsbox_cli_pool(int argc, char **argv);    /* pool.c */
int nsbox_cli_gc(int argc, char **argv);      /* gc.c */
int nsbox_cli_exec(int argc, char **argv);    /* exec.c */
int nsbox_cli_cp(int argc, char **argv);      /* cp.c */
int nsbox_cli_inspect(int argc, char **argv); /* inspect.c */
int nsbox_cli_ls(int argc, char **argv);      /* inspect.c: an inspect of every sandbox */
int nsbox_cli_rm(int argc, char **argv);      /* rm.c */
int nsbox_cli_ps(int argc, char **argv);      /* ps.c */
int nsbox_cli_kill(int argc, char **argv);    /* kill.c */
int nsbox_cli_logs(int argc, char **argv);    /* logs.c */
int nsbox_cli_wait(int argc, char **argv);    /* wait.c */
int nsbox_cli_image(int argc, char **argv);   /* image_cli.c: image build|ls|rm */
/* info.c: its exit code is 0 when every required check is OK, 1 otherwise, 2 for a usage
 * error */
int nsbox_cli_info(int argc, char **argv);

#endif
