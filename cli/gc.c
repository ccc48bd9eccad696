/* `nsbox gc [-v]`: what sandboxes whose owner died left behind (sandbox/gc.c). */
#include "cgroup.h"
#include "cli.h"
#include "gc.h"
#include "say.h"
#include "util.h"

#include <stdio.h>
#include <string.h>

int nsbox_cli_gc(int argc, char **argv)
{
    bool verbose = argc > 1 && !strcmp(argv[1], "-v");
    if (argc > (verbose ? 2 : 1)) /* a typo of -v was taken for no option */
        return nsbox_say_usage("gc: unexpected argument '%s' (nsbox gc [-v])",
                               NSBOX_SHOW(argv[verbose ? 2 : 1]));
    struct nsbox_err e = {0};
    nsbox_gc_set_note(nsbox_say_note, stderr);
    int n = nsbox_gc(verbose, &e);
    if (n < 0)
        return nsbox_say_fail(&e);
    /* Only here, not in the implicit gc of other commands: it walks every hierarchy. */
    unsigned orphans = nsbox_cgroup_sweep_orphans(NSBOX_GC_ORPHAN_AGE);
    if (verbose) {
        printf("removed %d leftover sandbox%s\n", n, n == 1 ? "" : "es");
        printf("removed %u empty sandbox cgroup%s older than %d minutes\n", orphans,
               orphans == 1 ? "" : "s", NSBOX_GC_ORPHAN_AGE / 60);
    }
    return 0;
}
