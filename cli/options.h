/* The sandbox OPTIONS of run, create and pool fill (one table, so that the three describe a
 * sandbox alike; help.c has their help), and the flags of a command's own taken out before. */
#ifndef NSBOX_OPTIONS_H
#define NSBOX_OPTIONS_H

#include "nsbox.h"
#include "spec.h"

#include <stdbool.h>
#include <stddef.h>

/* The option a as its name (into name, n bytes) and its value: "--flag=value" split at the
 * '=' (returns "value"), anything else whole (returns NULL: the value, if any, is the next
 * word). */
const char *nsbox_options_split(const char *a, char *name, size_t n);
/* Parse sandbox OPTIONS into spec. Returns 0 with *next at the first non-option (after a "--"),
 * 1 when help was printed, -1 with e filled, -2 after a usage error was printed. run_opts: NULL
 * where --timeout/--cwd are not accepted. */
int nsbox_options_parse(int argc, char **argv, struct nsbox_spec *spec,
                        struct nsbox_run_opts *run_opts, int *next, struct nsbox_err *e);

/* The options of a command that runs no command after them (create, pool fill), parsed into
 * spec, which is freed on any failure: -1 when the command goes on, else its exit code (0
 * after help, EXIT_USAGE, or an error's, said). A command given after them is a usage error:
 * "<cmd> takes no command (unexpected '...')<hint>". */
int nsbox_options_parse_no_command(int argc, char **argv, struct nsbox_spec *spec, const char *cmd,
                                   const char *hint);

/* A command's own flags, taken out of argv before the shared option parser sees the rest: one
 * without a value sets *set; one with a number takes the next argument, from min to max. */
struct nsbox_own_flag {
    const char *name;
    bool *set;
    long *value, min, max;
    const char *what; /* "--name needs <what>, not '...'" */
};

/* Returns 0, or EXIT_USAGE after saying why. */
int nsbox_options_strip_own(int *argc, char **argv, const struct nsbox_own_flag *f, size_t n);

#endif
