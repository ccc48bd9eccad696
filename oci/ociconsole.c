/* runc's console socket (ocirt.h): how a caller (containerd's shim, conmon) gets the master of
 * the pseudo-terminal that is the container's process's stdio. The path may be longer than
 * sun_path: it is reached through /proc/self/fd/N of its directory. */
#include "ocirt.h"
#include "cleanup.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

int nsbox_ociconsole_send(const char *path, int master, struct nsbox_err *e)
{
    char dir[PATH_MAX], base[PATH_MAX];
    if (strlen(path) >= sizeof dir)
        return nsbox_err_invalid(e, "--console-socket: path too long");
    snprintf(dir, sizeof dir, "%s", path);
    snprintf(base, sizeof base, "%s", path);
    cleanup_close int dfd = open(dirname(dir), O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return nsbox_err_sys(e, "--console-socket %s", NSBOX_SHOW(path));
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if ((size_t)snprintf(sa.sun_path, sizeof sa.sun_path, "/proc/self/fd/%d/%s", dfd,
                         basename(base)) >= sizeof sa.sun_path)
        return nsbox_err_invalid(e, "--console-socket: name too long");
    cleanup_close int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0)
        return nsbox_err_sys(e, "--console-socket %s: cannot connect", NSBOX_SHOW(path));
    /* the payload is the terminal's name, as runc sends it; receivers name the file with it */
    char name[] = "/dev/ptmx";
    struct iovec iov = {name, sizeof name - 1};
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } u;
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
    nsbox_cmsg_put_fds(&msg, u.buf, &master, 1);
    ssize_t n;
    do
        n = sendmsg(fd, &msg, MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    if (n < 0)
        return nsbox_err_sys(e, "--console-socket %s: send", NSBOX_SHOW(path));
    return 0;
}

int nsbox_ociconsole_listen(char *path, size_t n, struct nsbox_err *e)
{
    char dir[] = "/tmp/nsbox-oci-run-XXXXXX"; /* 0700: only we connect */
    if (!mkdtemp(dir))
        return nsbox_err_sys(e, "run: a directory for the terminal's socket");
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s/console.sock", dir);
    snprintf(path, n, "%s", sa.sun_path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(fd, 1) < 0) {
        nsbox_err_sys(e, "run: the terminal's socket %s", sa.sun_path);
        if (fd >= 0)
            close(fd);
        nsbox_ociconsole_remove(path);
        return -1;
    }
    return fd;
}

int nsbox_ociconsole_receive(int lsock, struct nsbox_err *e)
{
    struct pollfd pf = {lsock, POLLIN, 0};
    int r;
    do
        r = poll(&pf, 1, 10000);
    while (r < 0 && errno == EINTR);
    cleanup_close int c = r > 0 ? accept4(lsock, NULL, NULL, SOCK_CLOEXEC) : -1;
    if (c < 0)
        return nsbox_err_set(e, NSBOX_E_SYS, r == 0 ? ETIMEDOUT : errno,
                             "run: the container's terminal did not come: the monitor sent no "
                             "pseudo-terminal to run's console socket%s: run again, or set "
                             "\"terminal\": false in config.json",
                             r == 0 ? " within 10 s" : "");
    char name[64];
    int fds[1], flags;
    size_t got;
    if (nsbox_msg_recv_fds(c, name, sizeof name, NULL, 0, fds, 1, &got, &flags) <= 0 || !got)
        return nsbox_err_set(e, NSBOX_E_SYS, EPROTO,
                             "run: the container's terminal did not come: the monitor's message "
                             "on run's console socket held no pseudo-terminal: run again, or "
                             "set \"terminal\": false in config.json");
    return fds[0];
}

void nsbox_ociconsole_remove(const char *path)
{
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", path);
    unlink(path);
    rmdir(dirname(dir));
}
