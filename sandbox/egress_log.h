/* The network log of a sandbox whose allow list names hosts (docs/network.md, "The network
 * log"): one JSON object per line, per connection the egress helper decided on, written by the
 * helper into the sandbox's state directory and read by `nsbox logs --network`, `nsbox run
 * --network-log FILE` and the Python client (python/nsbox/session.py network_log).
 *
 * Bounded: when network.log passes NSBOX_EGRESS_LOG_ROTATE_BYTES, its text is copied over
 * network.log.1 and it is emptied, so the two take at most about twice that. The helper cannot
 * rename (it runs under its own uid, with a seccomp allow-list, and holds only the two open
 * files), hence the copy. Every entry has "seq", from 1 up, so that a reader that read the
 * current file while it was copied drops what it saw twice. */
#ifndef NSBOX_EGRESS_LOG_H
#define NSBOX_EGRESS_LOG_H

#include "nsbox.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#define NSBOX_EGRESS_LOG_FILE "network.log"
#define NSBOX_EGRESS_LOG_OLDER "network.log.1"
#define NSBOX_EGRESS_LOG_ROTATE_BYTES (512 * 1024)

/* One connection. Strings may be NULL (left out). verdict: "spliced" (passed through, TLS end
 * to end), "refused" (the policy said no: reason says why), "failed" (allowed, but the upstream
 * could not be reached: reason), or "bound" for a request on a bound host, with method, path and
 * status. */
struct nsbox_egress_entry {
    int64_t start_ms;    /* wall clock, ms since the epoch */
    int64_t duration_ms; /* from accept to close */
    const char *name;    /* the ClientHello's server name */
    uint16_t port;
    const char *verdict, *reason;
    const char *address;           /* the upstream address connected to */
    uint64_t bytes_up, bytes_down; /* sandbox -> upstream, upstream -> sandbox */
    const char *method, *path;     /* bound hosts: path is logged without its query */
    int status;                    /* bound hosts: the response's status; 0: none */
};

/* The writer's side, in the helper: both files opened by the parent before the helper drops
 * its uid. */
struct nsbox_egress_log {
    int fd, older_fd; /* -1: no log */
    uint64_t seq;
    pthread_mutex_t mu;
};

/* Opens (creates, 0600, O_NOFOLLOW) both files in dir; l->fd -1 when that fails (the helper
 * then runs without a log; errno is set). */
int nsbox_egress_log_open(struct nsbox_egress_log *l, const char *dir);
void nsbox_egress_log_close(struct nsbox_egress_log *l);
/* Appends one line (thread-safe), rotating first when the file is over the bound. */
void nsbox_egress_log_write(struct nsbox_egress_log *l, const struct nsbox_egress_entry *en);
/* The JSON line of en with its seq, NUL-terminated, without the newline; malloc'd, NULL on
 * ENOMEM. */
char *nsbox_egress_log_line(const struct nsbox_egress_entry *en, uint64_t seq);

/* The reader's side: both files open, what was passed on so far. */
struct nsbox_egress_reader {
    int fd, older_fd;
    uint64_t pos; /* in the current file */
    uint64_t seq; /* the last entry passed on */
    bool dropped; /* entries were lost between two reads (more than a rotation) */
};

/* Opens the log of the state directory dir: 0, or -1 with errno (ENOENT: no log there). */
int nsbox_egress_reader_open(struct nsbox_egress_reader *r, const char *dir);
void nsbox_egress_reader_close(struct nsbox_egress_reader *r);
/* Calls line(ctx, text, len) for each whole entry not passed on yet, oldest first (text
 * without its newline). Returns the number passed on, or -1 with errno. */
int nsbox_egress_reader_next(struct nsbox_egress_reader *r,
                             int (*line)(void *ctx, const char *text, size_t len), void *ctx);

#endif
