/* init's stub resolver (dnsstub.h). */
#include "dnsstub.h"

#include <arpa/inet.h>
#include <stdbool.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* packets read per wake-up: the rest wait for the next turn of init's loop, after its other
 * work (a command's end, the supervisor's requests) */
#define BATCH 64
/* packets read before a command's end is reported: more than the socket's receive buffer
 * holds (212992 bytes by default, against which the kernel counts several hundred bytes of
 * buffers even for an empty datagram), so that a query the command sent before it ended is
 * read whatever a flood queued before it */
#define DRAIN 1024

int nsbox_dnsstub_open(void)
{
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(53),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (bind(fd, (struct sockaddr *)&a, sizeof a) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Answer at most max packets; false when the socket was found empty. */
static bool serve_up_to(int fd, struct nsbox_dnsquery_table *t, int max)
{
    /* a longer datagram is cut to its first 512 bytes, which hold any question the stub reads */
    uint8_t pkt[512], out[NSBOX_DNSQUERY_REPLY_MAX];
    for (int i = 0; i < max; i++) {
        struct sockaddr_in from;
        socklen_t fl = sizeof from;
        ssize_t n = recvfrom(fd, pkt, sizeof pkt, MSG_DONTWAIT | MSG_TRUNC,
                             (struct sockaddr *)&from, &fl);
        if (n < 0)
            return false; /* EAGAIN: all read */
        struct nsbox_dnsquery q;
        /* every query answered, even one not read: a resolver waiting for no answer would
         * take its whole timeout to fail */
        if (fl != sizeof from || from.sin_family != AF_INET)
            continue;
        size_t len = (size_t)n < sizeof pkt ? (size_t)n : sizeof pkt;
        size_t rn = nsbox_dnsquery_answer(pkt, len, &q, out);
        if (!rn)
            continue;
        if (t && q.name[0])
            nsbox_dnsquery_table_add(t, q.name);
        /* a full socket buffer of the sender's: its answer is dropped, as a network would */
        (void)sendto(fd, out, rn, MSG_DONTWAIT, (struct sockaddr *)&from, fl);
    }
    return true;
}

void nsbox_dnsstub_serve(int fd, struct nsbox_dnsquery_table *t)
{
    serve_up_to(fd, t, BATCH);
}

void nsbox_dnsstub_drain(int fd, struct nsbox_dnsquery_table *t)
{
    if (fd >= 0)
        serve_up_to(fd, t, DRAIN);
}
