/* The command line's stdin, stdout and stderr as a sandboxed command gets them (nsbox run,
 * nsbox exec without -t): the caller's own descriptor when sharing it is harmless, else a pipe
 * that a thread of ours copies to or from it.
 *
 * A descriptor passed on shares its open file description with the host: a command given the
 * shell's `>> log` could ftruncate it, clear its O_APPEND, seek and overwrite its start; given a
 * terminal, change its settings (tcsetattr, the window size, flow) for after it has ended;
 * given a socket (of the host's network namespace), accept on it, send to other addresses, read
 * what was sent to the caller, shut it down. A pipe, a FIFO or /dev/null give nothing of that,
 * and keep the fast path. */
#ifndef NSBOX_RELAY_H
#define NSBOX_RELAY_H

#include <pthread.h>
#include <stdbool.h>

/* Whether fd (0: stdin, 1 and 2: an output) may be handed to a sandboxed command as it is: a
 * pipe or FIFO, /dev/null; for stdin also a regular file opened read-only (the
 * command can read it, not change it). Also true for what nsbox_check_stdio refuses (a
 * directory, an O_PATH descriptor) and for a closed descriptor: they keep their own handling. */
bool nsbox_stdio_shareable(int fd, int which);

struct nsbox_relay_stream {
    int host;     /* our descriptor (not ours to close, nor to change: the caller's) */
    int pipe_end; /* the thread's end of the pipe, -1 when there is none */
    int given;    /* the command's end, until nsbox_relay_given_close */
    int stop;     /* the relay's eventfd: the command has ended */
    int err;      /* errno of a failed write to host (0: none, or EPIPE: its reader left) */
    bool started;
    pthread_t thread;
};

struct nsbox_relay {
    struct nsbox_relay_stream s[3];
    int stop; /* an eventfd, written once the command has ended; -1 when nothing is relayed */
};

/* fds: the caller's 0, 1, 2 (-1: none given); each that nsbox_stdio_shareable refuses is
 * replaced with a pipe's end, relayed by a thread started here (all signals blocked in it).
 * stdout and stderr that are the same file (`> log 2>&1`, one terminal) share one pipe, copied
 * to stdout, so that their order is the command's. On failure everything is undone, fds are as
 * they were, and -1 with errno. */
int nsbox_relay_start(struct nsbox_relay *r, int fds[3]);
/* The command has ended: copy what it wrote (all of it is in the pipes by now; a background
 * child that still holds them does not keep us: what comes later is not taken), stop reading
 * stdin, wait for the threads. Says on stderr when an output could not be written (but when its
 * reader left: EPIPE). */
void nsbox_relay_finish(struct nsbox_relay *r);

#endif
