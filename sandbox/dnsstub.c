/* init's stub resolver (dnsstub.h). */
#include "dnsstub.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* packets read per wake-up: the rest wait for the next turn of init's loop, after its other
 * work (a command's end, the supervisor's requests) */
#define BATCH 64
/* The socket's receive buffer, asked for rather than taken from net.core.rmem_default, which a
 * host may raise: the kernel doubles it (and net.core.rmem_max may lower it), so the socket holds
 * at most RCVBUF_HELD bytes of queued datagrams. 64 KiB still queues over a hundred of the
 * smallest, far more than resolvers send at once. */
#define RCVBUF 65536
#define RCVBUF_HELD (2 * RCVBUF)
/* packets read before a command's end is reported: more than the receive buffer holds, so that
 * a query the command sent before it ended is read whatever a flood queued before it. The kernel
 * counts each queued datagram at its buffer's true size, never less than its struct sk_buff and
 * skb_shared_info (over MIN_TRUESIZE bytes together on a 64-bit kernel; about 830 bytes an empty
 * datagram costs in practice: 157 fit in RCVBUF_HELD), and takes one datagram past the limit. */
#define DRAIN 1024
#define MIN_TRUESIZE 512
_Static_assert(DRAIN > RCVBUF_HELD / MIN_TRUESIZE + 1, "DRAIN must outnumber what fits");

int nsbox_dnsstub_open(void)
{
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(53),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int rcvbuf = RCVBUF;
    if (setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf) < 0 ||
        bind(fd, (struct sockaddr *)&a, sizeof a) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Answer at most max packets. */
static void serve_up_to(int fd, struct nsbox_dnsquery_table *t, int max)
{
    /* a longer datagram is cut to its first 512 bytes, which hold any question the stub reads */
    uint8_t pkt[512], out[NSBOX_DNSQUERY_REPLY_MAX];
    for (int i = 0; i < max; i++) {
        struct sockaddr_in from;
        socklen_t fl = sizeof from;
        ssize_t n = recvfrom(fd, pkt, sizeof pkt, MSG_DONTWAIT | MSG_TRUNC,
                             (struct sockaddr *)&from, &fl);
        if (n < 0)
            return; /* EAGAIN: all read */
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
