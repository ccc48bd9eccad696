/* Our terminal (stdin) lent to a pseudo-terminal whose master we hold: ours goes raw while
 * bytes are copied both ways (a ^C is a byte that the other side's line discipline turns into
 * SIGINT), follows our window's size, and is given back as it was. For the front ends that
 * relay a terminal: nsbox exec -t (cli/exec.c) and nsbox-oci's exec -t and run (oci/ocitty.c). */
#ifndef NSBOX_TTY_H
#define NSBOX_TTY_H

#include <stdbool.h>

/* Ours (stdin)'s window size given to master (nothing when master < 0). */
void nsbox_tty_resize(int master);

/* Ours made raw, as it was kept for nsbox_tty_restore: whether it was (stdin not a terminal,
 * or one that refused, is left as it is). */
bool nsbox_tty_raw(void);

/* Ours as it was before nsbox_tty_raw, if it was made raw; again is harmless (an atexit
 * handler as well as the end of a relay). */
void nsbox_tty_restore(void);

/* Copy what is there (one read) from one to the other: false when from is done (its end, or
 * an error but EAGAIN and EINTR) or to refuses it. */
bool nsbox_tty_copy(int from, int to);

/* What master still has, up to the first empty read, copied to stdout: the last the other
 * side wrote before it ended. master is made non-blocking. */
void nsbox_tty_drain(int master);

#endif
