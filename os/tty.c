/* Our terminal lent to a pseudo-terminal (tty.h). */
#define _GNU_SOURCE
#include "tty.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

/* One terminal per process, stdin's: what it was before nsbox_tty_raw. */
static struct termios saved_tio;
static bool tio_saved;

void nsbox_tty_resize(int master)
{
    struct winsize ws;
    if (master >= 0 && ioctl(0, TIOCGWINSZ, &ws) == 0)
        ioctl(master, TIOCSWINSZ, &ws);
}

bool nsbox_tty_raw(void)
{
    if (tcgetattr(0, &saved_tio) == 0) {
        struct termios raw = saved_tio;
        cfmakeraw(&raw);
        tio_saved = tcsetattr(0, TCSADRAIN, &raw) == 0;
    }
    return tio_saved;
}

void nsbox_tty_restore(void)
{
    if (tio_saved)
        tcsetattr(0, TCSADRAIN, &saved_tio);
    tio_saved = false;
}

bool nsbox_tty_copy(int from, int to)
{
    char buf[16384];
    ssize_t n = read(from, buf, sizeof buf);
    if (n <= 0)
        return n < 0 && (errno == EAGAIN || errno == EINTR);
    return nsbox_pwrite_all(to, buf, (size_t)n, -1) == 0;
}

void nsbox_tty_drain(int master)
{
    if (master >= 0 && fcntl(master, F_SETFL, O_NONBLOCK) == 0)
        for (;;) {
            errno = 0;
            if (!nsbox_tty_copy(master, 1) || errno == EAGAIN)
                break;
        }
}
