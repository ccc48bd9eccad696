/* The caller's terminal lent to a container's pseudo-terminal (exec -t, run of a config with a
 * terminal, both without a console socket): os/tty.c's raw mode, copying and window size, in
 * the relays' poll loops, and given back as it was. */
#include "ocirt.h"
#include "tty.h"

#include <poll.h>
#include <stdbool.h>

void nsbox_ocitty_restore(int master)
{
    nsbox_tty_drain(master);
    nsbox_tty_restore();
}

void nsbox_ocitty_begin(struct nsbox_ocitty *t, int master)
{
    t->master = master;
    t->in_open = t->out_open = master >= 0;
    if (master >= 0) {
        nsbox_tty_resize(master);
        nsbox_tty_raw();
    }
}

void nsbox_ocitty_pollfds(const struct nsbox_ocitty *t, struct pollfd pf[2])
{
    pf[0] = (struct pollfd){t->out_open ? t->master : -1, POLLIN, 0};
    pf[1] = (struct pollfd){t->in_open ? 0 : -1, POLLIN, 0};
}

void nsbox_ocitty_events(struct nsbox_ocitty *t, const struct pollfd pf[2])
{
    if (pf[0].revents & (POLLIN | POLLHUP | POLLERR))
        t->out_open = nsbox_tty_copy(t->master, 1); /* EIO: the container's side is closed */
    if (pf[1].revents & (POLLIN | POLLHUP))
        t->in_open = nsbox_tty_copy(0, t->master);
}
