/* Probes of a process's sockets (attack.h): binding a port, and serving a connection on a
 * listening socket handed down by socket activation. */
#include "attack.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* attack bind PORT: binds a TCP socket to PORT on every address; "bound PORT" or the errno's
 * name (an unprivileged port below ip_unprivileged_port_start needs CAP_NET_BIND_SERVICE). */
int attack_sock_bind_main(int argc, char **argv)
{
    if (argc < 3)
        return 2;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[2]))};
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) < 0) {
        printf("bind %s %s\n", argv[2], ename(errno));
        return 1;
    }
    printf("bound %s\n", argv[2]);
    close(fd);
    return 0;
}

/* attack sockact: as sd_listen_fds() does, takes descriptor 3 only when LISTEN_PID is our pid
 * and LISTEN_FDS counts it; accepts one connection on it and writes "accepted by PID" to it. */
int attack_sock_activated_main(void)
{
    const char *pid = getenv("LISTEN_PID"), *fds = getenv("LISTEN_FDS");
    if (!pid || atol(pid) != (long)getpid() || !fds || atoi(fds) < 1) {
        printf("not activated: LISTEN_PID=%s LISTEN_FDS=%s, pid %d\n", pid ? pid : "-",
               fds ? fds : "-", (int)getpid());
        return 1;
    }
    int c = accept(3, NULL, NULL);
    if (c < 0) {
        printf("accept on 3: %s\n", ename(errno));
        return 1;
    }
    char line[64];
    int n = snprintf(line, sizeof line, "accepted by %d of %s\n", (int)getpid(), fds);
    if (write(c, line, (size_t)n) != n)
        return 1;
    close(c);
    printf("served\n");
    return 0;
}
