/* What nsbox tells the user in more than one command, written once (cli/ is the only layer that
 * prints: docs/architecture.md). Each returns the exit code that goes with it, where there is
 * one. */
#ifndef NSBOX_SAY_H
#define NSBOX_SAY_H

#include "nsbox.h"

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A lower layer's line for the user (nsbox_note_fn; ctx: the FILE to print it on): "nsbox:
 * LINE", its controls and invalid UTF-8 as '?' (policy/shown.h; tab and newline kept). */
void nsbox_say_note(void *ctx, const char *line);
/* "nsbox: MESSAGE" for an error, shown as a note is: EXIT_NSBOX. */
int nsbox_say_fail(const struct nsbox_err *e);
/* "nsbox: " and the formatted message on stderr, shown as an error is: for a message that
 * names what came from outside nsbox (a user's argument, a path, an image's words). */
void nsbox_say_line(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* "nsbox: " fmt (with one string argument), shown as an error is, and the hint at the
 * command's help: EXIT_USAGE. */
int nsbox_say_usage(const char *fmt, const char *arg);
/* "nsbox: " what " WORD" for an option or command nsbox does not know, with ", did you mean
 * X?" when one of the n names is close enough to be what was meant, then " (" usage ")" when
 * usage is not NULL, shown as an error is, and the hint at the command's help: EXIT_USAGE. */
int nsbox_say_unknown(const char *what, const char *word, const char *const *names, size_t n,
                      const char *usage);
/* An -e (or --env) value without '=': the form nsbox takes, and, for a bare name, how to pass
 * the caller's value, which docker's -e NAME does. EXIT_USAGE. */
int nsbox_say_env_usage(const char *option, const char *value);
/* A PID argument that nsbox_parse_pid refused, said for cmd (kill, logs, wait): pid 1 is a
 * process, but the sandbox's init, which why. EXIT_USAGE. */
int nsbox_say_pid_usage(const char *cmd, const char *arg, const char *why);
/* That the command was killed at its bound ("--timeout of 2.000 s", "its --timeout"): said, so
 * that it is not taken for a command that exits 124 itself. */
void nsbox_say_timed_out(const char *bound);
/* A timeout given in ms, as the timeout message and exec's wait show it: "2.500". */
void nsbox_say_seconds(char *buf, size_t size, uint64_t ms);
/* That the memory limit killed processes: kills of them, by instance type type of
 * memory_bytes; with type NULL (exec, wait: the supervisor says only that it happened), the
 * short form. tmpfs_workspace: the workspace's files count toward the limit. */
void nsbox_say_oom(const char *type, uint64_t memory_bytes, int kills, bool tmpfs_workspace);
/* Is s one line of printable ASCII (what a supervisor's note may be to reach the terminal)? */
bool nsbox_say_printable(const char *s);
/* The final reply of a command run by a supervisor (exec, wait): its exit code (EXIT_NSBOX when
 * there is none), with its error, its OOM kill or its timeout said. Frees reply. */
int nsbox_say_exit(cJSON *reply);

#endif
