/* The caller's terminal lent to a container's pseudo-terminal (exec -t, run of a config with a
 * terminal, both without a console socket): ours goes raw while bytes are copied both ways (a
 * ^C is a byte that the container's line discipline turns into SIGINT), and is given back as
 * it was. */
#include "ocirt.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdbool.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

static struct termios saved_tio;
static bool tio_saved;

void nsbox_ocitty_resize(int master)
{
    struct winsize ws;
    if (master >= 0 && ioctl(0, TIOCGWINSZ, &ws) == 0)
        ioctl(master, TIOCSWINSZ, &ws);
}

static void tty_raw(int master)
{
    nsbox_ocitty_resize(master);
    if (tcgetattr(0, &saved_tio) == 0) {
        struct termios raw = saved_tio;
        cfmakeraw(&raw);
        tio_saved = tcsetattr(0, TCSADRAIN, &raw) == 0;
    }
}

bool nsbox_ocitty_copy(int from, int to)
{
    char buf[16384];
    ssize_t n = read(from, buf, sizeof buf);
    if (n <= 0)
        return n < 0 && (errno == EAGAIN || errno == EINTR);
    return nsbox_pwrite_all(to, buf, (size_t)n, -1) == 0;
}

void nsbox_ocitty_restore(int master)
{
    /* what it wrote last, up to the first empty read */
    if (master >= 0 && fcntl(master, F_SETFL, O_NONBLOCK) == 0)
        for (;;) {
            errno = 0;
            if (!nsbox_ocitty_copy(master, 1) || errno == EAGAIN)
                break;
        }
    if (tio_saved)
        tcsetattr(0, TCSADRAIN, &saved_tio);
    tio_saved = false;
}

void nsbox_ocitty_begin(struct nsbox_ocitty *t, int master)
{
    t->master = master;
    t->in_open = t->out_open = master >= 0;
    if (master >= 0)
        tty_raw(master);
}

void nsbox_ocitty_pollfds(const struct nsbox_ocitty *t, struct pollfd pf[2])
{
    pf[0] = (struct pollfd){t->out_open ? t->master : -1, POLLIN, 0};
    pf[1] = (struct pollfd){t->in_open ? 0 : -1, POLLIN, 0};
}

void nsbox_ocitty_events(struct nsbox_ocitty *t, const struct pollfd pf[2])
{
    if (pf[0].revents & (POLLIN | POLLHUP | POLLERR))
        t->out_open = nsbox_ocitty_copy(t->master, 1); /* EIO: the container's side is closed */
    if (pf[1].revents & (POLLIN | POLLHUP))
        t->in_open = nsbox_ocitty_copy(0, t->master);
}
