/* The command line's help texts (cli/help.c). */
#ifndef NSBOX_HELP_H
#define NSBOX_HELP_H

#include <stdio.h>

/* The command being run ("exec", "cp", ...), set by main: usage errors point at its help. */
extern const char *nsbox_help_cmd;

/* Print the help of cmd (NULL: the overview of every command) to f; with f NULL, only say
 * whether there is one. 0, or -1 for a command without help (an unknown one). */
int nsbox_help_print(const char *cmd, FILE *f);

/* "(see nsbox CMD --help)" for the command being run, else "(see nsbox --help)", and a newline. */
void nsbox_help_hint(FILE *f);

#endif
