/* nsbox-egress: the egress helper of one sandbox (sandbox/egress.h), a front end of its own
 * beside cli/ and oci/. nsbox starts it (sandbox/egress_spawn.c) with its configuration on
 * descriptor 3; by hand it only says what it is. It links the helper's files of sandbox/ and
 * the C library, and loads libssl only for a sandbox with header bindings (docs/decisions.md,
 * "The egress helper is an executable of its own"). */
#define _GNU_SOURCE
#include "egress.h"

#include <stdio.h>
#include <sys/socket.h>
#include <sys/stat.h>

int main(int argc, char **argv)
{
    (void)argc, (void)argv;
    struct stat st;
    int type = 0;
    socklen_t tl = sizeof type;
    if (fstat(NSBOX_EGRESS_SOCK_FD, &st) < 0 || !S_ISSOCK(st.st_mode) ||
        getsockopt(NSBOX_EGRESS_SOCK_FD, SOL_SOCKET, SO_TYPE, &type, &tl) < 0 ||
        type != SOCK_STREAM) {
        fprintf(stderr, "nsbox-egress: the egress helper of a sandbox that allows hosts by name; "
                        "nsbox starts it, with its configuration on descriptor 3 (a socket)\n");
        return 2;
    }
    return nsbox_egress_main(NSBOX_EGRESS_SOCK_FD);
}
