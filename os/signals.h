/* The signals nsbox passes on to a sandboxed command: nsbox run (cold or pooled) and exec
 * relay them, and the second interrupt becomes SIGKILL. */
#ifndef NSBOX_SIGNALS_H
#define NSBOX_SIGNALS_H

/* The signals nsbox run passes on to its command, and its init to the command in turn (the
 * first NSBOX_SIGNALS_EXEC: exec's). */
extern const int nsbox_signals_relayed[8];
#define NSBOX_SIGNALS_EXEC 6
/* The signal nsbox run passes on for sig: sig itself, but SIGKILL for the second interrupt
 * (INT, TERM, HUP, QUIT; counted in *stops): a second Ctrl-C means "stop now", even for a
 * command that ignores the first. */
int nsbox_signals_relay(int sig, int *stops);

#endif
