/* The v1 freezer's hold: an empty frozen cgroup beside the sandboxes' that keeps the kernel's
 * freezer key on (below). */
#include "cgroup_impl.h"
#include "cgroup_util.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

/* ---- the v1 freezer's hold ------------------------------------------------------------------
 *
 * The v1 freezer turns a kernel-wide static key on while any of its cgroups is frozen, and off
 * when the last one thaws. Flipping it patches kernel text on every CPU: on this project's VM
 * that made each thaw of a sleeping sandbox ~1.4 ms instead of ~0.1 ms, on the path of the
 * request that wakes it. So before a sandbox first sleeps, its supervisor freezes an empty
 * cgroup beside the sandboxes' (NSBOX_CGHOLD_NAME): while it is frozen, the key stays on and a
 * sandbox's freeze and thaw only count. The last sandbox to go removes it, and `nsbox gc`
 * removes one with no sandbox beside it (left by a supervisor that was killed). Its name is
 * NSBOX_CGHOLD_NAME (cgroup_impl.h). v2's freezer has no such key. docs/cgroups.md. */
/* The directory a sandbox's cgroup is in (where the hold goes), into out. */
int nsbox_cghold_parent_of(const char *cg_dir, char *out, size_t n)
{
    const char *slash = strrchr(cg_dir, '/');
    if (!slash || slash == cg_dir)
        return -1;
    int len = snprintf(out, n, "%.*s", (int)(slash - cg_dir), cg_dir);
    return len < 0 || (size_t)len >= n ? -1 : 0;
}

/* Best effort: without the hold, freezing works the same, only slower. */
void nsbox_cghold_take(const char *freezer_dir)
{
    char dir[PATH_MAX], hold[PATH_MAX];
    if (nsbox_cghold_parent_of(freezer_dir, dir, sizeof dir) < 0 ||
        nsbox_cg_join(hold, sizeof hold, dir, NULL, NSBOX_CGHOLD_NAME) < 0)
        return;
    if (nsbox_cgio_sys->mkdir(hold, 0755) < 0 && errno != EEXIST)
        return;
    nsbox_cgio_write_at(-1, hold, "freezer.state", "FROZEN");
}

/* Whether dir has a sandbox's cgroup in it (unknown: yes, so that the hold stays). */
static bool has_sandbox_cgroup(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return true;
    struct dirent *de;
    bool found = false;
    while (!found && (de = readdir(d)))
        found = de->d_type == DT_DIR && nsbox_cg_is_sandbox_name(de->d_name);
    closedir(d);
    return found;
}

/* After a sandbox's freezer cgroup in dir is gone: the hold there goes with the last sandbox
 * beside it. A sandbox made meanwhile makes it again when it first sleeps. One stat when
 * there is no hold (no sandbox here ever slept). */
void nsbox_cghold_release(const char *dir)
{
    char hold[PATH_MAX];
    struct stat st;
    if (nsbox_cg_join(hold, sizeof hold, dir, NULL, NSBOX_CGHOLD_NAME) < 0 || stat(hold, &st) < 0 ||
        has_sandbox_cgroup(dir))
        return;
    nsbox_cgio_sys->rmdir(hold);
}
