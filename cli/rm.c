/* `nsbox rm ID...`: sandboxes deleted, and gone when it returns; an id already gone is not an
 * error. */
#define _GNU_SOURCE
#include "cli.h"
#include "client.h"
#include "paths.h"
#include "say.h"
#include "state.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <unistd.h>

int nsbox_cli_rm(int argc, char **argv)
{
    if (argc < 2)
        return nsbox_say_usage("%s", "rm needs at least one sandbox id");
    int rc = 0;
    for (int i = 1; i < argc; i++) {
        struct nsbox_err e = {0};
        /* Idempotent: removing what is already gone, or going (another rm, its ttl: the
         * supervisor hangs up on requests it has not read when it exits), is not an error. */
        bool gone = false;
        if (nsbox_client_delete(argv[i], true, &e) < 0 &&
            !(gone = e.code == NSBOX_E_DELETED || e.sys_errno == ECONNRESET ||
                     e.sys_errno == EPIPE)) {
            if (e.code == NSBOX_E_NOTFOUND && nsbox_state_valid_id(argv[i])) {
                /* Still not an error, but said: a mistyped id (or one made with sudo) would
                 * otherwise leave the sandbox meant running for its ttl, in silence. */
                nsbox_say_line("note: %s: nothing removed", e.msg);
                continue;
            }
            nsbox_say_fail(&e);
            rc = EXIT_NSBOX;
            continue;
        }
        /* rm returning means the sandbox is gone: nsbox_client_delete waited for its supervisor's
         * exit. Should that have been cut short, or another been deleting it, wait for the
         * state directory too. */
        char rt[PATH_MAX], dir[PATH_MAX];
        struct nsbox_err pe;
        if (nsbox_paths_runtime_dir(rt, sizeof rt, &pe) == 0) {
            snprintf(dir, sizeof dir, "%s/%s", rt, argv[i]);
            for (int k = 0; k < 2000 && access(dir, F_OK) == 0; k++)
                usleep(2000);
            if (gone && access(dir, F_OK) == 0) {
                /* the connection was lost, and the sandbox is still there */
                nsbox_say_line("sandbox %s is not gone: its supervisor hung up (%s), and %s is "
                               "still there; nsbox rm again, or nsbox gc once no process "
                               "'nsbox %s' runs",
                               argv[i], e.msg, dir, argv[i]);
                rc = EXIT_NSBOX;
            }
        }
    }
    return rc;
}
