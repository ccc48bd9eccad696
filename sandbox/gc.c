/* Garbage collection: what sandboxes whose owner died left behind (see gc.h). A sandbox is a
 * leftover when nobody holds its state directory's lock (state.h). */
#define _GNU_SOURCE
#include "gc.h"
#include "cgroup.h"
#include "cleanup.h"
#include "image.h"
#include "net.h"
#include "paths.h"
#include "pool.h"
#include "seccomp_prog.h"
#include "state.h"
#include "util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static int path_join(char *out, const char *a, const char *b, struct nsbox_err *e)
{
    if ((size_t)snprintf(out, PATH_MAX, "%s/%s", a, b) >= PATH_MAX)
        return nsbox_err_set(e, NSBOX_E_INVALID, ENAMETOOLONG, "path too long: %s/%s", a, b);
    return 0;
}

/* Lines for `nsbox gc -v`, to whoever printing them is (cli/gc.c), if anyone. */
static struct nsbox_note note;

void nsbox_gc_set_note(nsbox_note_fn *fn, void *ctx)
{
    note = (struct nsbox_note){fn, ctx};
}

/* A sandbox is a leftover when nobody holds its lock any more. */
static int gc_one(const char *rt, const char *cache_root, const char *id, bool verbose,
                  struct nsbox_err *e)
{
    char dir[PATH_MAX], cache[PATH_MAX], file[PATH_MAX], name[NSBOX_WS_NAME_SIZE];
    nsbox_state_ws_name(id, name);
    if (path_join(dir, rt, id, e) < 0 || path_join(cache, cache_root, id, e) < 0 ||
        path_join(file, cache_root, name, e) < 0)
        return -1;
    cleanup_close int fd = nsbox_state_lock(dir);
    if (fd < 0 && (nsbox_state_maybe_alive(errno) || errno == ENOENT))
        return 0; /* alive or unknown (never removed), or removed meanwhile */
    /* Free: its owner is dead, or it is being removed (a removal holds the lock until the
     * directory is gone). Not a directory (a symlink in its place): only the link goes. */
    /* A control socket: a sandbox someone may ask for by id (not a one-shot run's). */
    char ctl[PATH_MAX];
    bool asked_by_id = path_join(ctl, dir, "ctl", e) == 0 &&
                       faccessat(AT_FDCWD, ctl, F_OK, AT_SYMLINK_NOFOLLOW) == 0;
    struct nsbox_err ce;
    if (nsbox_cgroup_remove_by_id(id, &ce) < 0)
        nsbox_note_say(verbose ? &note : NULL, "gc %s: %s", id, ce.msg);
    if (nsbox_net_gc(id, &ce) < 0)
        nsbox_note_say(verbose ? &note : NULL, "gc %s: %s", id, ce.msg);
    if ((unlink(file) < 0 && errno != ENOENT && nsbox_err_sys(e, "gc: cannot remove %s", file)) ||
        nsbox_paths_rm_rf(cache, e) < 0 || nsbox_paths_rm_rf(dir, e) < 0)
        return -1;
    /* Later requests say what happened, not "never existed"; a removal that had begun (rm, a
     * ttl) has its own reason already, and a one-shot run's sandbox has no one to ask. */
    char reason[8];
    if (asked_by_id && !nsbox_state_tombstone_read(id, reason, sizeof reason))
        nsbox_state_tombstone_write(id, NSBOX_TOMB_SUPERVISOR_GONE);
    nsbox_note_say(verbose ? &note : NULL, "gc: removed sandbox %s", id);
    return 1;
}

int nsbox_gc_id(const char *id, struct nsbox_err *e)
{
    char rt[PATH_MAX], cache_root[PATH_MAX];
    if (!nsbox_state_valid_id(id))
        return 0;
    if (nsbox_paths_runtime_dir(rt, sizeof rt, e) < 0 ||
        nsbox_paths_cache_dir(cache_root, sizeof cache_root, e) < 0)
        return -1;
    return gc_one(rt, cache_root, id, false, e);
}

/* create's gc, at most once per NSBOX_GC_INTERVAL_MS in a state directory: a full one opens
 * and locks every live sandbox's directory and uid slot, which made a create with 300 alive
 * take twice as long as with none. What it removes waits a second at most: nothing depends on
 * it sooner (a dead sandbox holds no lock, no uid slot and no promise of disk space, and the
 * disk check removes what dead sandboxes wrote before it refuses; workspace.c
 * check_free_space), and a network.pool found full takes dead sandboxes' address slots back
 * (net_table.c). The stamp is taken before the gc, so that concurrent creates do not all run
 * one. */
int nsbox_gc_implicit(struct nsbox_err *e)
{
    char rt[PATH_MAX], stamp[PATH_MAX];
    if (nsbox_paths_runtime_dir(rt, sizeof rt, e) < 0 ||
        path_join(stamp, rt, NSBOX_GC_STAMP, e) < 0)
        return -1;
    struct stat st;
    struct timespec now;
    /* The clock after the stamp: another create's stamp in between must not look like one
     * from the future (a clock set back, for which the gc runs). In floating point: a stamp
     * with any time at all cannot overflow it. */
    if (lstat(stamp, &st) == 0 && clock_gettime(CLOCK_REALTIME, &now) == 0) {
        double age_ms = difftime(now.tv_sec, st.st_mtim.tv_sec) * 1e3 +
                        (double)(now.tv_nsec - st.st_mtim.tv_nsec) / 1e6;
        if (age_ms >= 0 && age_ms < NSBOX_GC_INTERVAL_MS)
            return 0;
    }
    int fd = open(stamp, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0600);
    if (fd >= 0) {
        futimens(fd, NULL);
        close(fd);
    }
    return nsbox_gc(false, e);
}

/* The state directories of sandboxes whose owner died, and creates interrupted before their
 * rename: how many were removed, or -1 with e filled (after trying every one). */
static int gc_state_dirs(const char *rt, const char *cache_root, bool verbose, struct nsbox_err *e)
{
    int removed = 0, ret = 0;
    DIR *d = opendir(rt);
    if (!d)
        return 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (!strncmp(de->d_name + strnlen(de->d_name, NSBOX_ID_LEN), ".new-", 5)) {
            /* a create interrupted before its rename: its creator's pid is in the name */
            int pid = atoi(de->d_name + NSBOX_ID_LEN + 5);
            char p[PATH_MAX];
            if (!nsbox_pid_alive(pid) && path_join(p, rt, de->d_name, e) == 0)
                nsbox_paths_rm_rf(p, e);
            continue;
        }
        if (!nsbox_state_valid_id(de->d_name))
            continue;
        int r = gc_one(rt, cache_root, de->d_name, verbose, e);
        if (r < 0)
            ret = -1;
        else
            removed += r;
    }
    closedir(d);
    return ret < 0 ? -1 : removed;
}

/* uid slot lock files nobody holds: remove them (take the lock first; a creator that opened the
 * file before the unlink notices, see nsbox_state_take_slot). */
static void gc_uid_slots(struct nsbox_err *e)
{
    char uids[PATH_MAX];
    DIR *d;
    if (nsbox_state_uid_slot_dir(uids, sizeof uids, e) < 0 || !(d = opendir(uids)))
        return;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        int fd = openat(dirfd(d), de->d_name, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
            continue;
        /* nor a pod's whose joined containers run: a new file of the same slot would be free */
        if (flock(fd, LOCK_EX | LOCK_NB) == 0 && nsbox_state_slot_unjoined(fd))
            unlinkat(dirfd(d), de->d_name, 0);
        close(fd);
    }
    closedir(d);
}

/* Workspaces whose state directory is gone (a reboot cleared the runtime dir). A live sandbox
 * always creates its state directory, locked, before its workspace. But a cache directory may be
 * shared by runtime directories (NSBOX_STATE_DIR set for one CI job and not its cache,
 * XDG_RUNTIME_DIR set in one shell and not another): a file whose state directory is elsewhere
 * is left while its workspace is in use (its flock). How many were removed, or -1. */
static int gc_cache(const char *rt, const char *cache_root, struct nsbox_err *e)
{
    int removed = 0, ret = 0;
    DIR *d = opendir(cache_root);
    if (!d)
        return 0;
    struct dirent *de;
    char sdir[PATH_MAX], cdir[PATH_MAX], id[NSBOX_ID_LEN + 1], rel[NAME_MAX + 32];
    while ((de = readdir(d))) {
        if (!nsbox_state_cache_entry(de->d_name, id, rel))
            continue;
        if (path_join(sdir, rt, id, e) < 0 || path_join(cdir, cache_root, de->d_name, e) < 0)
            continue;
        if (access(sdir, F_OK) == 0)
            continue;
        int r = nsbox_state_ws_file_remove_unused(dirfd(d), rel);
        if (r == 0)
            continue;
        /* the rest of an entry of the older layout (a directory), or what is not a backing
         * file that can be locked */
        if ((r < 0 || strchr(rel, '/')) && nsbox_paths_rm_rf(cdir, e) < 0)
            ret = -1;
        else
            removed++;
    }
    closedir(d);
    return ret < 0 ? -1 : removed;
}

/* Tombstones of an nsbox before the log (one file per id, never removed then): gone, so that
 * they take no more room than the log's bound. Their reasons are lost. */
static void gc_old_tombstones(const char *rt, struct nsbox_err *e)
{
    char tomb[PATH_MAX];
    DIR *d;
    if (path_join(tomb, rt, "tombstones", e) < 0 || !(d = opendir(tomb)))
        return;
    struct dirent *de;
    while ((de = readdir(d)))
        if (nsbox_state_valid_id(de->d_name))
            unlinkat(dirfd(d), de->d_name, 0);
    closedir(d);
}

/* Pool entries (docs/pool.md) of sandboxes that are gone. A pooled sandbox's state directory
 * exists before its entry and outlives it, so this never hides a live one. */
static void gc_pool(const char *rt, struct nsbox_err *e)
{
    char pool[PATH_MAX];
    DIR *d;
    if (path_join(pool, rt, "pool", e) < 0 || !(d = opendir(pool)))
        return;
    struct dirent *de;
    char key[NSBOX_POOL_KEY_LEN + 1], id[NSBOX_ID_LEN + 1];
    struct stat st;
    while ((de = readdir(d))) {
        if ((nsbox_pool_entry_parse(de->d_name, key, id) ||
             nsbox_pool_claim_parse(de->d_name, key, id)) &&
            nsbox_state_dir_gone(rt, id))
            unlinkat(dirfd(d), de->d_name, 0);
        /* the auto mode's marks, and fillers' locks, of settings nobody has run for a
         * day (a lock only when nobody holds it: fill_key takes the file at the path) */
        else if ((nsbox_pool_key_file(de->d_name, NSBOX_POOL_SEEN, key) ||
                  nsbox_pool_key_file(de->d_name, NSBOX_POOL_FAILED, key) ||
                  nsbox_pool_key_file(de->d_name, NSBOX_POOL_LOCK, key)) &&
                 fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
                 time(NULL) - st.st_mtime > NSBOX_POOL_MARK_MAX_AGE) {
            int lfd = openat(dirfd(d), de->d_name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
            if (lfd >= 0 && flock(lfd, LOCK_EX | LOCK_NB) == 0)
                unlinkat(dirfd(d), de->d_name, 0);
            if (lfd >= 0)
                close(lfd);
        }
    }
    closedir(d);
}

/* Compiled seccomp programs that no create of this build reads again (another nsbox's, another
 * libseccomp's): a few kilobytes each, one set a version, never replaced. */
static void gc_seccomp_cache(bool verbose)
{
    char dir[PATH_MAX];
    struct nsbox_err ignored; /* no data directory: no cache either */
    if (nsbox_seccomp_prog_cache_dir(dir, sizeof dir, &ignored) < 0)
        return;
    int n = nsbox_seccomp_prog_prune(dir);
    if (n > 0)
        nsbox_note_say(verbose ? &note : NULL,
                       "gc: removed %d seccomp program%s of another build from %s", n,
                       n == 1 ? "" : "s", dir);
}

int nsbox_gc(bool verbose, struct nsbox_err *e)
{
    char rt[PATH_MAX], cache_root[PATH_MAX];
    if (nsbox_paths_runtime_dir(rt, sizeof rt, e) < 0 ||
        nsbox_paths_cache_dir(cache_root, sizeof cache_root, e) < 0)
        return -1;
    int dirs = gc_state_dirs(rt, cache_root, verbose, e);
    gc_uid_slots(e);
    int cache = gc_cache(rt, cache_root, e);
    gc_old_tombstones(rt, e);
    gc_pool(rt, e);
    nsbox_image_sweep_store(); /* builds that were killed half-way */
    gc_seccomp_cache(verbose);
    return dirs < 0 || cache < 0 ? -1 : dirs + cache;
}
