/* The command line's stdin, stdout and stderr as a sandboxed command gets them (nsbox run,
 * nsbox exec without -t): the caller's own descriptor when sharing it is harmless, a new open
 * of the caller's pipe, else a pipe that a thread of ours copies to or from it.
 *
 * A descriptor passed on shares its open file description with the host: a command given the
 * shell's `>> log` could ftruncate it, clear its O_APPEND, seek and overwrite its start; given a
 * terminal, change its settings (tcsetattr, the window size, flow) for after it has ended;
 * given a socket (of the host's network namespace), accept on it, send to other addresses, read
 * what was sent to the caller, shut it down; given a pipe, make it non-blocking for the caller
 * too; given a named FIFO or a file others may write, reopen it the other way through
 * /proc/self/fd. And what an exec leaves running outlives it, with whatever it was given. */
#ifndef NSBOX_RELAY_H
#define NSBOX_RELAY_H

#include "util.h"

#include <pthread.h>
#include <stdbool.h>

enum nsbox_relay_stdio_way {
    NSBOX_STDIO_AS_IS,  /* the caller's own descriptor */
    NSBOX_STDIO_REOPEN, /* an anonymous pipe: the command gets a new open of it */
    NSBOX_STDIO_RELAY,  /* a pipe of ours, copied by a thread */
};
/* How fd (0: stdin, 1 and 2: an output) reaches a sandboxed command. As it is: /dev/null; for
 * stdin of a run also a regular file opened read-only that others may not write (the command
 * can read it, not change it); and what nsbox_check_stdio refuses (a directory, an O_PATH
 * descriptor) or a closed descriptor, which keep their own handling. Reopened: an anonymous
 * pipe of a run. Relayed: everything else, and for an exec (outlives: what the command leaves
 * running outlives the call) everything but /dev/null. */
enum nsbox_relay_stdio_way nsbox_relay_stdio_way(int fd, int which, bool outlives);

struct nsbox_relay_stream {
    int host;     /* our descriptor (not ours to close, nor to change: the caller's) */
    int pipe_end; /* the thread's end of the pipe, -1 when there is none */
    int given;    /* the command's end (a relay's pipe, or the reopened pipe), until the finish */
    int stop;     /* the relay's eventfd: the command has ended */
    int err;      /* errno of a failed write to host (0: none, or EPIPE: its reader left) */
    bool started;
    pthread_t thread;
};

struct nsbox_relay {
    struct nsbox_relay_stream s[3];
    int stop; /* an eventfd, written once the command has ended; -1 when nothing is relayed */
};

/* fds: the caller's 0, 1, 2 (-1: none given), replaced as nsbox_relay_stdio_way says: a reopened
 * pipe (relayed when it cannot be reopened), or a pipe's end relayed by a thread started here
 * (all signals blocked in it). stdout and stderr that are the same file (`> log 2>&1`, one
 * terminal) share one pipe, copied to stdout, so that their order is the command's. outlives:
 * an exec's (its leftovers outlive it), not a run's. On failure everything is undone, fds are
 * as they were, and -1 with errno. */
int nsbox_relay_start(struct nsbox_relay *r, int fds[3], bool outlives);
/* The command has ended: close our copies of what it was given; copy what it wrote (all of it
 * is in the pipes by now; a background child that still holds them does not keep us: what
 * comes later is not taken), stop reading stdin, wait for the threads. Tells the note set
 * below when an output could not be written (but when its reader left: EPIPE). */
void nsbox_relay_finish(struct nsbox_relay *r);
/* Who is told what nsbox_relay_finish has to say (cli: nsbox_say_note); nobody by default. */
void nsbox_relay_set_note(nsbox_note_fn *note, void *ctx);

#endif
