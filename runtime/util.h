/* Small OS helpers shared across modules. */
#ifndef NSBOX_UTIL_H
#define NSBOX_UTIL_H

#include <stddef.h>
#include <sys/socket.h>

/* Default disposition for every signal and an empty mask: ignored dispositions and the mask
 * survive exec, and a caller's (nsbox's, init's) must not pass to a sandbox command. */
void nsbox_reset_signals(void);

/* Attach nfds descriptors to msg as SCM_RIGHTS, using buf (CMSG_SPACE(sizeof(int) * nfds) bytes
 * at least, suitably aligned). */
void nsbox_cmsg_put_fds(struct msghdr *msg, void *buf, const int *fds, size_t nfds);

/* A whole file (dfd-relative path) as a NUL-terminated string of at most limit bytes; NULL with
 * errno (EFBIG when larger). */
char *nsbox_read_text_at(int dfd, const char *path, size_t limit);

#endif
