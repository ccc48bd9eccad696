/* The config file checked whole: a command that makes a sandbox refuses a file that any module
 * would refuse later (a typo in "network" showed only with --network all, one in "workspace"
 * or "pool" at the run), and info reports the same verdict. */
#include "cfgcheck.h"

#include "config.h"
#include "filemax.h"
#include "net.h"
#include "warmpool.h"
#include "workspace.h"

#include <stdbool.h>

int nsbox_cfgcheck_all(struct nsbox_err *e)
{
    struct nsbox_ws_config ws;
    bool keep;
    if (nsbox_config_load_types(NULL, e) < 0 || nsbox_workspace_load_config(&ws, e) < 0 ||
        nsbox_warmpool_config_check(e) < 0 || nsbox_net_config_check(e) < 0 ||
        nsbox_filemax_config_keep(&keep, e) < 0)
        return -1;
    return 0;
}
