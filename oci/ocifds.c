/* --preserve-fds N of create and exec (docs/oci.md): the caller's descriptors 3 to 3+N-1,
 * which the container's process (create) or the exec'd one gets at the same numbers, as runc
 * passes them; and create's socket activation, the LISTEN_FDS descriptors before them. Checked
 * before nsbox-oci opens anything of its own, so that a number the caller left closed is
 * refused, never filled with one of ours. */
#include "ocirt.h"
#include "agent.h"
#include "ociproc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

/* The first of first..end-1 that is not open; 0 when all are. */
static unsigned closed_fd(unsigned first, unsigned end)
{
    for (unsigned fd = first; fd < end; fd++)
        if (fcntl((int)fd, F_GETFD) < 0)
            return fd;
    return 0;
}

int nsbox_ocifds_parse(const char *cmd, const char *arg, unsigned *n, struct nsbox_err *e)
{
    char *end = (char *)arg;
    errno = 0;
    unsigned long v = arg[0] >= '0' && arg[0] <= '9' ? strtoul(arg, &end, 10) : ULONG_MAX;
    if (v == ULONG_MAX || *end || errno || v > NSBOX_AGENT_EXTRA_MAX)
        return nsbox_err_invalid(e,
                                 "%s --preserve-fds '%s': give the number of descriptors from 3 "
                                 "up to pass on, 0 to %u (one message carries at most %u with "
                                 "stdin, stdout and stderr)",
                                 cmd, NSBOX_SHOW(arg), NSBOX_AGENT_EXTRA_MAX,
                                 NSBOX_AGENT_EXTRA_MAX + 3);
    unsigned fd = closed_fd(3, 3 + (unsigned)v);
    if (fd)
        return nsbox_err_set(e, NSBOX_E_INVALID, EBADF,
                             "%s --preserve-fds %lu: descriptor %u is not open (it passes "
                             "descriptors 3 to %lu on, which the caller must have open: "
                             "open them, or give a smaller number)",
                             cmd, v, fd, 2 + v);
    *n = (unsigned)v;
    return 0;
}

int nsbox_ocifds_listen(unsigned preserve, unsigned *listen, struct nsbox_err *e)
{
    const char *fds = getenv("LISTEN_FDS");
    if (nsbox_ociproc_listen_fds(getenv("LISTEN_PID"), fds, (long)getpid(),
                                 NSBOX_AGENT_EXTRA_MAX - preserve, listen, e) < 0)
        return nsbox_err_wrap(e, "create (socket activation, %u passed by --preserve-fds)",
                              preserve);
    unsigned fd = closed_fd(3, 3 + *listen + preserve);
    if (fd && fd < 3 + *listen)
        return nsbox_err_set(e, NSBOX_E_INVALID, EBADF,
                             "create: LISTEN_FDS=%s with LISTEN_PID this process's: descriptor "
                             "%u is not open (socket activation passes descriptors 3 to %u "
                             "on, which the caller must have open: open them, or unset "
                             "LISTEN_FDS)",
                             fds, fd, 2 + *listen);
    if (fd)
        return nsbox_err_set(e, NSBOX_E_INVALID, EBADF,
                             "create --preserve-fds %u: descriptor %u is not open (after the "
                             "%u of socket activation, LISTEN_FDS, it passes descriptors %u "
                             "to %u on, which the caller must have open: open them, or give "
                             "a smaller number)",
                             preserve, fd, *listen, 3 + *listen, 2 + *listen + preserve);
    return 0;
}

void nsbox_ocifds_close(unsigned n)
{
    if (n > 0 && syscall(SYS_close_range, 3u, 2u + n, 0u) < 0)
        for (unsigned fd = 3; fd < 3 + n; fd++)
            close((int)fd);
}
