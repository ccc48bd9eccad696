/* The signals nsbox passes on to a sandboxed command (see signals.h). */
#define _GNU_SOURCE
#include "signals.h"

#include <signal.h>

const int nsbox_signals_relayed[8] = {SIGINT,  SIGTERM, SIGHUP,   SIGQUIT,
                                  SIGUSR1, SIGUSR2, SIGWINCH, SIGCONT};

int nsbox_signals_relay(int sig, int *stops)
{
    if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP || sig == SIGQUIT)
        ++*stops;
    return *stops >= 2 ? SIGKILL : sig;
}
