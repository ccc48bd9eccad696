/* Sandbox ids, state directories, uid slots and tombstones (gc.c removes what the dead left). */
#define _GNU_SOURCE
#include "state.h"
#include "cleanup.h"
#include "idmap.h"
#include "paths.h"
#include "util.h"
#include "wsdir.h"

#include <dirent.h>
#include <signal.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

void nsbox_state_init(struct nsbox_state *st)
{
    st->id[0] = st->dir[0] = st->workspace[0] = '\0';
    st->fresh_workspace = false;
    st->ws_idmapped = false;
    st->ws_kind = NSBOX_WS_DIR;
    st->lock_fd = -1;
    st->slot_fd = -1;
    st->pod_slot_fd = -1;
    st->ws_dir_fd = -1;
    st->slot = 0;
    st->privileged = geteuid() == 0;
}

int nsbox_state_new_id(char *out, struct nsbox_err *e)
{
    unsigned char b[NSBOX_ID_LEN / 2];
    if (getrandom(b, sizeof b, 0) != (ssize_t)sizeof b)
        return nsbox_err_sys(e, "getrandom");
    for (size_t i = 0; i < sizeof b; i++)
        sprintf(out + 2 * i, "%02x", b[i]);
    out[NSBOX_ID_LEN] = '\0';
    return 0;
}

bool nsbox_state_valid_id(const char *id)
{
    size_t n = 0;
    for (; id[n]; n++)
        if (!((id[n] >= '0' && id[n] <= '9') || (id[n] >= 'a' && id[n] <= 'f')))
            return false;
    return n == NSBOX_ID_LEN;
}

void nsbox_state_hostname(const char *id, char *out)
{
    snprintf(out, NSBOX_SANDBOX_HOSTNAME_MAX, "nsbox-%s", id);
}

static int path_join(char *out, const char *a, const char *b, struct nsbox_err *e)
{
    if ((size_t)snprintf(out, PATH_MAX, "%s/%s", a, b) >= PATH_MAX)
        return nsbox_err_set(e, NSBOX_E_INVALID, ENAMETOOLONG, "path too long: %s/%s", a, b);
    return 0;
}

/* flock(LOCK_EX) without waiting on fd (an open's result: -1 passes through). Returns fd, or
 * -1 with errno EWOULDBLOCK when someone holds it, the fd then closed. */
static int lock_nb(int fd)
{
    if (fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) < 0) {
        int saved = errno;
        close(fd);
        errno = saved;
        return -1;
    }
    return fd;
}

/* Open and lock a file; returns the fd, -1 with errno EWOULDBLOCK when someone holds it. */
static int lock_file(const char *path, bool create)
{
    return lock_nb(open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW | (create ? O_CREAT : 0), 0600));
}

static int make_workspace(struct nsbox_state *st, const char *workspace_arg,
                          enum nsbox_ws_kind kind, struct nsbox_err *e)
{
    st->ws_kind = kind;
    if (kind == NSBOX_WS_DIR) {
        /* Opened once and checked there (wsdir.h); bound from this descriptor or its inode. */
        st->ws_dir_fd =
            nsbox_wsdir_open(workspace_arg, st->workspace, sizeof st->workspace, &st->ws_sb, e);
        if (st->ws_dir_fd < 0)
            return -1;
        st->fresh_workspace = false;
        return 0;
    }
    if (kind == NSBOX_WS_TMPFS)
        return 0; /* made inside the sandbox's mount namespace: nothing on the host */
    /* EXT4: the backing file, <cache>/<id>.ext4 (mode 0600; workspace.c creates it). Directly
     * in the cache directory: a directory of its own per sandbox was one more inode, directory
     * block and metadata write to the host's disk at every creation, for no protection the
     * file's own mode does not give. */
    char cache_root[PATH_MAX], name[NSBOX_WS_NAME_SIZE];
    if (nsbox_paths_cache_dir(cache_root, sizeof cache_root, e) < 0)
        return -1;
    nsbox_state_ws_name(st->id, name);
    if (path_join(st->workspace, cache_root, name, e) < 0)
        return -1;
    if (mkdir(cache_root, 0700) < 0 && errno != EEXIST &&
        (errno != ENOENT || nsbox_paths_mkdir_p(cache_root, 0700, e) < 0))
        return nsbox_err_sys(e, "cannot create %s", cache_root);
    st->fresh_workspace = true;
    return 0;
}

/* Take the lock of the state directory dir (its own inode: flock on the directory). A state
 * directory made by an older nsbox (one that locked a file) has a "lock" file inside, which is its lock, so
 * that sandboxes still running across an upgrade are not taken for leftovers. Ours has a
 * symlink by that name instead (NSBOX_STATE_LOCK_MARK). Results: state.h. */
int nsbox_state_lock(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ELOOP)
            errno = ENOTDIR;
        return -1;
    }
    int ofd = openat(fd, "lock", O_RDWR | O_NOFOLLOW | O_CLOEXEC);
    if (ofd >= 0) {
        close(fd);
        fd = ofd;
    } else if (errno != ENOENT && errno != ELOOP) { /* ELOOP: our mark */
        int saved = errno == ENOTDIR ? EIO : errno; /* never "not a directory": dir is one */
        close(fd);
        errno = saved;
        return -1;
    }
    return lock_nb(fd);
}

int nsbox_state_dead_lock(const char *rt, const char *id)
{
    char dir[PATH_MAX];
    if ((size_t)snprintf(dir, sizeof dir, "%s/%s", rt, id) >= sizeof dir) {
        errno = ENAMETOOLONG; /* unknown */
        return -1;
    }
    return nsbox_state_lock(dir);
}

/* The tombstone log's directory is there before any deletion needs it: a deletion on a state
 * filesystem that ran out of inodes meanwhile then needs one, for the log, which the control
 * socket's gives back at once (the state directory's comes back only once the kernel has torn
 * the sandbox's mounts down, a moment later). Made with the shared lock mark, once per runtime
 * directory, not at every create (an EEXIST walk of the path each time). */
static void make_tombstone_dir(const char *rt)
{
    char tombs[PATH_MAX];
    struct nsbox_err ignored; /* the log's writer makes it, or says why not */
    if (path_join(tombs, rt, "tombstones", &ignored) == 0)
        (void)mkdir(tombs, 0700);
}

/* <dir>/lock, the mark for an older nsbox (dirfd: <dir>): a hard link to the runtime directory
 * rt's one mark, made there by the first create. A symlink of its own per sandbox was an inode
 * allocated and freed at every create and rm, the costliest step of a create's own on a disk
 * filesystem (docs/decisions.md, "One lock mark for every state directory"); a link is a
 * directory entry. Where a link cannot be made (a filesystem without hard links, a link count
 * at its limit, something else by that name), a symlink of its own as before. */
static int make_lock_mark(const char *rt, int dirfd)
{
    char shared[PATH_MAX];
    struct nsbox_err ignored; /* too long: the fallback below */
    if (path_join(shared, rt, NSBOX_STATE_LOCK_MARK_NAME, &ignored) == 0) {
        int r = linkat(AT_FDCWD, shared, dirfd, "lock", 0);
        if (r < 0 && errno == ENOENT) {
            bool first = symlink(NSBOX_STATE_LOCK_MARK, shared) == 0;
            if (first || errno == EEXIST)
                r = linkat(AT_FDCWD, shared, dirfd, "lock", 0);
            if (first) /* the runtime directory's first sandbox of this nsbox */
                make_tombstone_dir(rt);
        }
        /* only a symlink of our text is a mark: a file put there by hand would become every
         * sandbox's "lock", whose flock an older gc would take for theirs */
        char text[sizeof NSBOX_STATE_LOCK_MARK]; /* readlink fails on anything else */
        size_t n = strlen(NSBOX_STATE_LOCK_MARK);
        if (r == 0 && readlinkat(dirfd, "lock", text, sizeof text) == (ssize_t)n &&
            !memcmp(text, NSBOX_STATE_LOCK_MARK, n))
            return 0;
        if (r == 0)
            unlinkat(dirfd, "lock", 0);
    }
    return symlinkat(NSBOX_STATE_LOCK_MARK, dirfd, "lock");
}

int nsbox_state_create(struct nsbox_state *st, const char *workspace_arg, enum nsbox_ws_kind kind,
                       struct nsbox_err *e)
{
    char rt[PATH_MAX], tmp[PATH_MAX];
    if (!st->id[0] && nsbox_state_new_id(st->id, e) < 0)
        return -1;
    if (nsbox_paths_runtime_dir(rt, sizeof rt, e) < 0 || path_join(st->dir, rt, st->id, e) < 0)
        return -1;
    /* The directory appears under its id only once its lock is held: it is built as
     * "<id>.new-<pid>", locked (flock on the directory itself, rather than on a file in it:
     * every inode made per sandbox counts on a disk filesystem such as this project's VM's
     * journal-less ext4, whose inode allocation skips every recently freed inode one by one)
     * and renamed. Otherwise a concurrent gc could take the lock of a sandbox being created,
     * find it "dead" and remove it. */
    if ((size_t)snprintf(tmp, sizeof tmp, "%s.new-%d", st->dir, (int)getpid()) >= sizeof tmp)
        return nsbox_err_set(e, NSBOX_E_INVALID, ENAMETOOLONG, "path too long: %s", st->dir);
    if (mkdir(tmp, 0700) < 0) {
        int r = -1;
        if (errno == ENOENT) {
            if (nsbox_paths_mkdir_p(rt, 0711, e) < 0)
                goto not_ours;
            r = mkdir(tmp, 0700);
        }
        if (r < 0) {
            nsbox_err_sys(e, "cannot create state directory %s", tmp);
            goto not_ours; /* an id collision: destroy must never remove it */
        }
    }
    /* The runtime directory checked again now that something of ours is in it: in /tmp (the
     * fallback of an unprivileged user without XDG_RUNTIME_DIR) another user could have made
     * it between the first check and our mkdir. Once it is ours, /tmp's sticky bit keeps it
     * so. */
    if (nsbox_paths_runtime_dir(rt, sizeof rt, e) < 0)
        goto remove_tmp;
    st->lock_fd = lock_nb(open(tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (st->lock_fd < 0) {
        nsbox_err_sys(e, "cannot lock %s", tmp);
        goto remove_tmp;
    }
    /* For an older nsbox (one that locks a "lock" file) on the same runtime directory, such as a pool
     * filler started before an upgrade: its gc takes a directory without a "lock" file for an
     * interrupted removal, and would kill a live sandbox. A symlink by that name it cannot
     * open, and so leaves the sandbox alone. */
    if (make_lock_mark(rt, st->lock_fd) < 0) {
        nsbox_err_sys(e, "cannot create %s/lock", tmp);
        nsbox_closep(&st->lock_fd);
        goto remove_tmp;
    }
    /* Never over an existing directory: rename(2) replaces an empty one (a one-shot run's state
     * directory holds nothing). A filesystem without RENAME_NOREPLACE gets a check first. */
    int r = renameat2(AT_FDCWD, tmp, AT_FDCWD, st->dir, RENAME_NOREPLACE);
    if (r < 0 && errno == EINVAL) {
        struct stat sb;
        r = lstat(st->dir, &sb) == 0 ? (errno = EEXIST, -1) : rename(tmp, st->dir);
    }
    if (r < 0) {
        nsbox_err_sys(e, "cannot create state directory %s", st->dir);
        nsbox_closep(&st->lock_fd);
        goto remove_tmp;
    }
    return make_workspace(st, workspace_arg, kind, e);

remove_tmp: {
    struct nsbox_err ignored; /* e says what failed first */
    nsbox_paths_rm_rf(tmp, &ignored);
}
not_ours:
    st->dir[0] = '\0';
    return -1;
}

/* ---- tombstones (state.h) ------------------------------------------------------------------ */

static int tomb_paths(char *dir, char *recent, char *older, struct nsbox_err *e)
{
    char rt[PATH_MAX];
    if (nsbox_paths_runtime_dir(rt, sizeof rt, e) < 0 || path_join(dir, rt, "tombstones", e) < 0)
        return -1;
    return path_join(recent, dir, "recent", e) < 0 || path_join(older, dir, "older", e) < 0 ? -1
                                                                                          : 0;
}

int nsbox_state_tombstone_write(const char *id, const char *reason)
{
    char dir[PATH_MAX], recent[PATH_MAX], older[PATH_MAX];
    struct nsbox_err e;
    if (!nsbox_state_valid_id(id) || tomb_paths(dir, recent, older, &e) < 0)
        return -1;
    char line[NSBOX_ID_LEN + 1 + NSBOX_TOMB_REASON_MAX + 2];
    snprintf(line, sizeof line - 1, "%s %.*s", id, NSBOX_TOMB_REASON_MAX, reason);
    size_t n = strlen(line);
    for (size_t i = NSBOX_ID_LEN + 1; i < n; i++) /* one line per record, whatever the reason */
        if (line[i] == '\n' || line[i] == '\r')
            line[i] = ' ';
    line[n++] = '\n';
    /* O_NONBLOCK: a FIFO put there must not hang a supervisor's clean-up */
    const int flags = O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC;
    int fd = open(recent, flags, 0600);
    if (fd < 0 && errno == ENOENT && nsbox_paths_mkdir_p(dir, 0700, &e) == 0)
        fd = open(recent, flags, 0600);
    if (fd < 0)
        return -1;
    /* One write with O_APPEND: records of concurrent writers never interleave. */
    ssize_t w = write(fd, line, n);
    struct stat sb;
    /* Full: it becomes "older". Whoever locks it first and still finds it at its path renames
     * it; a writer that opened it before the rename appends to "older", where it is found too. */
    if (w == (ssize_t)n && fstat(fd, &sb) == 0 && sb.st_size > NSBOX_TOMB_ROTATE_BYTES &&
        flock(fd, LOCK_EX) == 0 && nsbox_fd_is_at_path(fd, recent) && rename(recent, older) < 0)
        ftruncate(fd, 0); /* "older" cannot be replaced (a directory there?): bounded anyway */
    close(fd);
    return w == (ssize_t)n ? 0 : -1;
}

/* The newest record of id in the log at path: 1 and its reason, 0 when none. */
static int tomb_find(const char *path, const char *id, char *reason, size_t n)
{
    cleanup_close int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return 0;
    /* Its end, where the newest records are: concurrent appends can take a log a little past
     * the limit before it is renamed, and one that could not be renamed is cut, but a file put
     * there by someone else may be of any size. */
    size_t cap = 2 * NSBOX_TOMB_ROTATE_BYTES, len = 0;
    struct stat sb;
    if (fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode))
        return 0;
    off_t from = sb.st_size > (off_t)cap ? sb.st_size - (off_t)cap : 0;
    char *buf = malloc(cap + 1);
    if (!buf)
        return 0;
    for (ssize_t r; len < cap && (r = pread(fd, buf + len, cap - len, from + (off_t)len)) > 0;)
        len += (size_t)r;
    buf[len] = '\0';
    size_t skip = 0; /* a record cut by where we started is not one */
    if (from > 0) {
        while (skip < len && buf[skip] != '\n')
            skip++;
        skip = skip < len ? skip + 1 : len;
    }
    int found = 0;
    /* from the end: lines "<id> <reason>\n" */
    for (size_t end = len; end > skip && !found;) {
        size_t start = end - 1;
        while (start > skip && buf[start - 1] != '\n')
            start--;
        if (end - start > NSBOX_ID_LEN + 1 && !memcmp(buf + start, id, NSBOX_ID_LEN) &&
            buf[start + NSBOX_ID_LEN] == ' ') {
            size_t k = end - (start + NSBOX_ID_LEN + 1);
            if (buf[end - 1] == '\n')
                k--;
            if (k > n - 1)
                k = n - 1;
            memcpy(reason, buf + start + NSBOX_ID_LEN + 1, k);
            reason[k] = '\0';
            found = 1;
        }
        end = start;
    }
    free(buf);
    return found;
}

int nsbox_state_tombstone_err(const char *id, int err, struct nsbox_err *e)
{
    char reason[NSBOX_TOMB_REASON_MAX + 1];
    if (!nsbox_state_tombstone_read(id, reason, sizeof reason))
        return 0;
    return nsbox_err_set(e, NSBOX_E_DELETED, err, "sandbox %s was %s", id, reason);
}

/* Runtime directories other than ours where a sandbox of that id may be: root's, those of the
 * user sudo was run by, and our own under another environment (XDG_RUNTIME_DIR set in one shell
 * and not in another, NSBOX_STATE_DIR). The rules are nsbox_paths_runtime_dir's. */
static bool find_elsewhere(const char *id, const char *ours, char *dir, size_t n, uid_t *owner)
{
    char uids[2][24] = {"", ""};
    snprintf(uids[0], sizeof uids[0], "%u", (unsigned)getuid());
    const char *sudo = getenv("SUDO_UID");
    if (sudo && strspn(sudo, "0123456789") == strlen(sudo) && strlen(sudo) < sizeof uids[1])
        snprintf(uids[1], sizeof uids[1], "%s", sudo);
    char cand[6][PATH_MAX];
    size_t k = 0;
    snprintf(cand[k++], PATH_MAX, NSBOX_ROOT_RUNTIME_DIR);
    const char *x = getenv("XDG_RUNTIME_DIR");
    if (x && x[0] == '/')
        snprintf(cand[k++], PATH_MAX, "%.4000s" NSBOX_RUNTIME_SUBDIR, x);
    for (int i = 0; i < 2; i++) {
        if (!uids[i][0] || (i == 0 && getuid() == 0))
            continue;
        /* the usual XDG_RUNTIME_DIR of that uid, where its own environment may set it */
        snprintf(cand[k++], PATH_MAX, "/run/user/%s" NSBOX_RUNTIME_SUBDIR, uids[i]);
        snprintf(cand[k++], PATH_MAX, NSBOX_TMP_RUNTIME_FMT, uids[i]);
    }
    for (size_t i = 0; i < k; i++) {
        char path[PATH_MAX + 16];
        struct stat st;
        if (!strcmp(cand[i], ours))
            continue;
        snprintf(path, sizeof path, "%s/%s", cand[i], id);
        if (lstat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
            snprintf(dir, n, "%s", cand[i]);
            *owner = st.st_uid;
            return true;
        }
    }
    return false;
}

int nsbox_state_not_found(const char *id, int err, struct nsbox_err *e)
{
    char rt[PATH_MAX], dir[PATH_MAX];
    uid_t owner;
    struct nsbox_err pe;
    if (nsbox_paths_runtime_dir(rt, sizeof rt, &pe) < 0)
        snprintf(rt, sizeof rt, "this user's runtime directory");
    else if (find_elsewhere(id, rt, dir, sizeof dir, &owner)) {
        if (owner == geteuid())
            return nsbox_err_set(e, NSBOX_E_NOTFOUND, err,
                                 "no sandbox %s in %s, but %s/%s is one: it was made with "
                                 "another runtime directory (XDG_RUNTIME_DIR or NSBOX_STATE_DIR "
                                 "differ); NSBOX_STATE_DIR=%s reaches it",
                                 id, rt, dir, id, dir);
        if (owner == 0)
            return nsbox_err_set(e, NSBOX_E_NOTFOUND, err,
                                 "no sandbox %s in %s, but %s/%s is root's (made with sudo?): "
                                 "sandboxes are per user; run this command as root too",
                                 id, rt, dir, id);
        return nsbox_err_set(e, NSBOX_E_NOTFOUND, err,
                             "no sandbox %s in %s, but %s/%s belongs to uid %u (made without "
                             "sudo?): sandboxes are per user; run this command as that user",
                             id, rt, dir, id, (unsigned)owner);
    }
    return nsbox_err_set(e, NSBOX_E_NOTFOUND, err, "no sandbox %s in %s (it never existed there)",
                         id, rt);
}

int nsbox_state_tombstone_read(const char *id, char *reason, size_t n)
{
    char dir[PATH_MAX], recent[PATH_MAX], older[PATH_MAX], legacy[PATH_MAX];
    struct nsbox_err e;
    if (n == 0 || !nsbox_state_valid_id(id) || tomb_paths(dir, recent, older, &e) < 0)
        return 0;
    if (tomb_find(recent, id, reason, n) || tomb_find(older, id, reason, n))
        return 1;
    /* one file per id: an nsbox before the log */
    if (path_join(legacy, dir, id, &e) < 0)
        return 0;
    cleanup_close int fd = open(legacy, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    struct stat sb;
    if (fd < 0 || fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode))
        return 0;
    ssize_t r = read(fd, reason, n - 1);
    if (r < 0)
        return 0;
    reason[r] = '\0';
    return 1;
}

/* Where the uid slots are locked. The host ids they stand for (a range per slot,
 * nsbox_idmap_slot_base) are the machine's, so root keeps one registry for every nsbox,
 * whatever its $NSBOX_STATE_DIR: two sandboxes of different state directories must never share
 * a host uid (files one leaves where the other can reach them would be the other's). */
static const char *root_uid_slot_dir = NSBOX_UID_SLOT_DIR;

void nsbox_state_set_root_uid_slot_dir(const char *dir)
{
    root_uid_slot_dir = dir ? dir : NSBOX_UID_SLOT_DIR;
}

int nsbox_state_uid_slot_dir(char *out, size_t n, struct nsbox_err *e)
{
    if (geteuid() == 0)
        return (size_t)snprintf(out, n, "%s", root_uid_slot_dir) >= n
                   ? nsbox_err_set(e, NSBOX_E_INVALID, ENAMETOOLONG, "path too long")
                   : 0;
    char rt[PATH_MAX];
    if (nsbox_paths_runtime_dir(rt, sizeof rt, e) < 0)
        return -1;
    return path_join(out, rt, "uids", e);
}

/* <dir>/<slot>: a uid slot's lock file. */
static void slot_path(char *out, size_t n, const char *dir, uint32_t slot)
{
    snprintf(out, n, "%s/%u", dir, slot);
}

/* The slot files the directory dir holds: how many (0 when it cannot be read), and the first
 * SLOT_FILES_TRIED of their slots in found[] (*nfound). Few: a file a live sandbox holds costs
 * a create an open, flock and close, and most of the files may be held. */
#define SLOT_FILES_TRIED 4
static unsigned list_slot_files(const char *dir, uint32_t *found, unsigned *nfound)
{
    *nfound = 0;
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    unsigned n = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        n++;
        char *end;
        unsigned long v = strtoul(de->d_name, &end, 10);
        if (*nfound < SLOT_FILES_TRIED && de->d_name[0] >= '0' && de->d_name[0] <= '9' && !*end &&
            v < NSBOX_UID_SLOTS)
            found[(*nfound)++] = (uint32_t)v;
    }
    closedir(d);
    return n;
}

/* The subordinate ids granted to the host's users (/etc/subuid, /etc/subgid): NULL when none. */
struct granted {
    char *uids, *gids;
};

/* Whether a user may become an id of slot's (its range, its egress helper's id) in a user
 * namespace of their own (newuidmap): they could signal the sandbox's processes, which run as
 * those ids on the host. Such a slot is never given. */
static bool slot_granted(const struct granted *g, uint32_t slot)
{
    uint32_t base = nsbox_idmap_slot_base(slot), egress = nsbox_idmap_egress_id(slot);
    for (int i = 0; i < 2; i++) {
        const char *t = i ? g->gids : g->uids;
        if (t && (nsbox_idmap_subid_overlaps(t, base, NSBOX_ID_COUNT) ||
                  nsbox_idmap_subid_overlaps(t, egress, 1)))
            return true;
    }
    return false;
}

/* The slot of an existing file nobody holds, locked (its file left by an ended sandbox, for the
 * next): 0, or -1 when all that were tried are held. */
static int reuse_slot_file(struct nsbox_state *st, const char *dir, const uint32_t *found,
                           unsigned nfound, uint32_t start, const struct granted *g)
{
    char path[PATH_MAX];
    for (unsigned k = 0; k < nfound; k++) {
        uint32_t slot = found[(start + k) % nfound];
        if (slot_granted(g, slot))
            continue;
        slot_path(path, sizeof path, dir, slot);
        int fd = lock_file(path, false);
        if (fd < 0)
            continue;
        /* not unlinked by a gc meanwhile, nor a pod's whose joined container runs */
        if (nsbox_fd_is_at_path(fd, path) && nsbox_state_slot_unjoined(fd)) {
            st->slot = slot;
            st->slot_fd = fd;
            return 0;
        }
        close(fd);
    }
    return -1;
}

int nsbox_state_take_slot(struct nsbox_state *st, struct nsbox_err *e)
{
    char dir[PATH_MAX], path[PATH_MAX];
    if (nsbox_state_uid_slot_dir(dir, sizeof dir, e) < 0)
        return -1;
    /* A free slot among the first 2 * files + 64, from a random place in them, in turn. Each
     * slot's file is there while its sandbox lives, so at least half of those slots are free
     * and the search tries about two; the lowest free slot, found by trying from 0, cost one
     * open, flock and close per live sandbox below it (a create with 300 alive spent about 1
     * ms on it). Past the window, the rest in turn, up to the last slot. A slot's file stays
     * when its sandbox ends, and is taken again first: a file made and removed per sandbox was
     * an inode allocated and freed at every create (docs/decisions.md, "uid slot files are
     * kept for the next sandbox"); gc removes the ones nobody holds, so the files are about as
     * many as the sandboxes that lived at once since the last gc. */
    uint32_t found[SLOT_FILES_TRIED];
    unsigned nfound;
    uint32_t window =
        nsbox_idmap_slot_window(list_slot_files(dir, found, &nfound), NSBOX_UID_SLOTS);
    uint32_t start = 0;
    if (getrandom(&start, sizeof start, GRND_NONBLOCK) != (ssize_t)sizeof start)
        start = (uint32_t)getpid();
    struct nsbox_err ignored; /* unreadable: no user has subordinate ids through it */
    cleanup_free char *uids = NULL, *gids = NULL;
    nsbox_read_small("/etc/subuid", &uids, &ignored);
    nsbox_read_small("/etc/subgid", &gids, &ignored);
    struct granted g = {uids, gids};
    if (reuse_slot_file(st, dir, found, nfound, start, &g) == 0)
        return 0;
    start %= window;
    bool made_dir = false;
    unsigned granted = 0;
    for (uint32_t i = 0; i < NSBOX_UID_SLOTS; i++) {
        uint32_t slot = nsbox_idmap_slot_probe(start, i, window);
        if (slot_granted(&g, slot)) {
            granted++;
            continue;
        }
        slot_path(path, sizeof path, dir, slot);
        int fd = lock_file(path, true);
        if (fd < 0 && errno == ENOENT && !made_dir) {
            if (nsbox_paths_mkdir_p(dir, 0700, e) < 0)
                return -1;
            made_dir = true;
            fd = lock_file(path, true);
        }
        if (fd >= 0) {
            /* gc may have unlinked the file between our open and our lock */
            if (!nsbox_fd_is_at_path(fd, path)) {
                close(fd);
                i--; /* the same slot again */
                continue;
            }
            if (nsbox_state_slot_unjoined(fd)) {
                st->slot = slot;
                st->slot_fd = fd;
                return 0;
            }
            close(fd); /* a pod's, whose joined containers run with its ids */
            continue;
        }
        if (errno != EWOULDBLOCK)
            return nsbox_err_sys(e, "cannot lock uid slot %s", path);
    }
    if (granted)
        return nsbox_err_set(e, NSBOX_E_SYS, EUSERS,
                             "all %u nsbox uid slots are in use or granted to users as "
                             "subordinate ids (%u of them: /etc/subuid, /etc/subgid; host ids "
                             "%u to %u are nsbox's, docs/decisions.md \"Identity\")",
                             NSBOX_UID_SLOTS, granted, NSBOX_UID_BASE,
                             nsbox_idmap_egress_id(NSBOX_UID_SLOTS - 1));
    return nsbox_err_set(e, NSBOX_E_SYS, EUSERS, "all %u nsbox uid slots are in use",
                         NSBOX_UID_SLOTS);
}

/* The text a slot's file holds while its sandbox's user namespace lives: that namespace's
 * device and inode (nsfs), which no other namespace has while a joiner holds it open. */
static int userns_name(const struct stat *sb, char *out, size_t n)
{
    return snprintf(out, n, "%llu:%llu\n", (unsigned long long)sb->st_dev,
                    (unsigned long long)sb->st_ino);
}

int nsbox_state_mark_slot(struct nsbox_state *st, pid_t pid, struct nsbox_err *e)
{
    char path[64], text[64];
    struct stat sb;
    snprintf(path, sizeof path, "/proc/%d/ns/user", (int)pid);
    if (stat(path, &sb) < 0)
        return nsbox_err_sys(e, "cannot read the user namespace of %s", path);
    int n = userns_name(&sb, text, sizeof text);
    if (st->slot_fd < 0 || pwrite(st->slot_fd, text, (size_t)n, 0) != n)
        return nsbox_err_sys(e, "cannot write the uid slot file of slot %u", st->slot);
    return 0;
}

bool nsbox_state_slot_unjoined(int fd)
{
    /* A joiner's read lock refuses this write lock; held while the name is cleared, so that a
     * joiner that locks after reads the cleared file. */
    struct flock l = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    if (fcntl(fd, F_OFD_SETLK, &l) < 0)
        return false;
    bool cleared = ftruncate(fd, 0) == 0;
    l.l_type = F_UNLCK;
    (void)fcntl(fd, F_OFD_SETLK, &l);
    return cleared;
}

/* Whether host ids [first, first + count) meet nsbox's: the slots' ranges and their egress ids. */
static bool meets_nsbox_ids(uint64_t first, uint64_t count)
{
    uint64_t end = (uint64_t)NSBOX_EGRESS_ID_BASE + NSBOX_UID_SLOTS;
    return first < end && first + count > NSBOX_UID_BASE;
}

int nsbox_state_hold_pod_slot(struct nsbox_state *st, uint32_t base, int userns_fd,
                              struct nsbox_err *e)
{
    if (!meets_nsbox_ids(base, NSBOX_ID_COUNT))
        return 0; /* ids the slots never give */
    uint32_t off = base - NSBOX_UID_BASE, slot = off / NSBOX_ID_COUNT;
    if (base < NSBOX_UID_BASE || off % NSBOX_ID_COUNT || slot >= NSBOX_UID_SLOTS)
        return nsbox_err_set(e, NSBOX_E_POLICY, EPERM,
                             "the joined user namespace maps host ids %u to %u, part of nsbox's "
                             "(%u to %u) but not one sandbox's range: nsbox-oci joins only a "
                             "user namespace it made",
                             base, base + (NSBOX_ID_COUNT - 1), NSBOX_UID_BASE,
                             nsbox_idmap_egress_id(NSBOX_UID_SLOTS - 1));
    char dir[PATH_MAX], path[PATH_MAX], text[64], want[64];
    if (nsbox_state_uid_slot_dir(dir, sizeof dir, e) < 0)
        return -1;
    slot_path(path, sizeof path, dir, slot);
    struct stat sb;
    if (fstat(userns_fd, &sb) < 0)
        return nsbox_err_sys(e, "fstat of the joined user namespace");
    int wn = userns_name(&sb, want, sizeof want);
    cleanup_close int fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
    struct flock l = {.l_type = F_RDLCK, .l_whence = SEEK_SET};
    int r = -1;
    if (fd >= 0) {
        while ((r = fcntl(fd, F_OFD_SETLKW, &l)) < 0 && errno == EINTR)
            ;
    }
    ssize_t n = r == 0 && nsbox_fd_is_at_path(fd, path) ? pread(fd, text, sizeof text, 0) : -1;
    /* An empty file is a slot taken and not marked yet, which may be another sandbox's: it is
     * refused as well, though an older nsbox, which never marked its slots, leaves its first
     * containers' so too. */
    if (n == 0)
        return nsbox_err_set(e, NSBOX_E_POLICY, EPERM,
                             "the joined user namespace (host ids %u to %u) is not recorded in "
                             "its uid slot: its first container is gone and nsbox is giving its "
                             "ids to another sandbox, or that container was created by an nsbox "
                             "older than this one, which did not record it; after an upgrade, "
                             "restart the pod (delete its containers and create them again)",
                             base, base + (NSBOX_ID_COUNT - 1));
    if (n != wn || memcmp(text, want, (size_t)wn))
        return nsbox_err_set(e, NSBOX_E_POLICY, EPERM,
                             "the joined user namespace (host ids %u to %u) is no running "
                             "sandbox's: its first container is gone, and nsbox may give its "
                             "ids to another sandbox; create a pod's containers while the one "
                             "that made its user namespace runs",
                             base, base + (NSBOX_ID_COUNT - 1));
    nsbox_closep(&st->pod_slot_fd);
    st->pod_slot_fd = fd;
    fd = -1;
    return 0;
}

int nsbox_state_destroy(struct nsbox_state *st, struct nsbox_err *e)
{
    int ret = 0;
    if (st->fresh_workspace && st->workspace[0]) {
        if (unlink(st->workspace) < 0 && errno != ENOENT)
            ret = nsbox_err_sys(e, "cannot remove %s", st->workspace);
        st->fresh_workspace = false;
    }
    if (st->dir[0]) {
        struct nsbox_err e2;
        /* What a persistent sandbox leaves there, its lock mark and control socket, by name
         * through the locked directory's descriptor; a walk of it only when something else is
         * left (a network's files, an older nsbox's). */
        if (st->lock_fd >= 0) {
            (void)unlinkat(st->lock_fd, "lock", 0);
            (void)unlinkat(st->lock_fd, "ctl", 0);
        }
        if ((st->lock_fd < 0 || rmdir(st->dir) < 0) &&
            nsbox_paths_rm_rf(st->dir, ret < 0 ? &e2 : e) < 0)
            ret = -1;
        st->dir[0] = '\0';
    }
    nsbox_closep(&st->lock_fd);
    nsbox_closep(&st->ws_dir_fd);
    /* The slot's file stays, free once its lock goes with this descriptor: the next create
     * takes it first (nsbox_state_take_slot), gc removes it if none does. */
    nsbox_closep(&st->slot_fd);
    nsbox_closep(&st->pod_slot_fd);
    return ret;
}

void nsbox_state_ws_name(const char *id, char out[NSBOX_WS_NAME_SIZE])
{
    snprintf(out, NSBOX_WS_NAME_SIZE, "%s" NSBOX_WS_FILE_SUFFIX, id);
}

bool nsbox_state_cache_entry(const char *name, char *id, char *rel)
{
    size_t n = strnlen(name, NAME_MAX + 1);
    if (n == NSBOX_ID_LEN + strlen(NSBOX_WS_FILE_SUFFIX) &&
        !strcmp(name + NSBOX_ID_LEN, NSBOX_WS_FILE_SUFFIX)) {
        memcpy(id, name, NSBOX_ID_LEN);
        id[NSBOX_ID_LEN] = '\0';
        if (!nsbox_state_valid_id(id))
            return false;
        snprintf(rel, NAME_MAX + 32, "%s", name);
        return true;
    }
    if (!nsbox_state_valid_id(name))
        return false;
    memcpy(id, name, NSBOX_ID_LEN + 1);
    snprintf(rel, NAME_MAX + 32, "%s/workspace.ext4", name);
    return true;
}

int nsbox_state_ws_file_hold(int fd)
{
    struct stat sb;
    if (flock(fd, LOCK_SH) < 0 || fstat(fd, &sb) < 0)
        return -1;
    if (sb.st_nlink == 0) { /* a gc took it between its creation and this lock */
        errno = ESTALE;
        return -1;
    }
    return 0;
}

/* The backing file rel (below dirfd), open and locked exclusively: nobody uses it. -1 with
 * errno EWOULDBLOCK when it is in use, or open's. */
static int lock_unused(int dirfd, const char *rel)
{
    return lock_nb(openat(dirfd, rel, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
}

bool nsbox_state_ws_file_in_use(int dirfd, const char *rel)
{
    cleanup_close int fd = lock_unused(dirfd, rel);
    return fd < 0 && errno == EWOULDBLOCK;
}

int nsbox_state_ws_file_remove_unused(int dirfd, const char *rel)
{
    cleanup_close int fd = lock_unused(dirfd, rel);
    if (fd < 0)
        return errno == ENOENT ? 1 : errno == EWOULDBLOCK ? 0 : -1;
    /* held while it goes: a creator that opened it meanwhile finds it unlinked when it gets
     * its lock (nsbox_state_ws_file_hold) */
    return unlinkat(dirfd, rel, 0) == 0 || errno == ENOENT ? 1 : -1;
}

bool nsbox_state_dir_gone(const char *rt, const char *id)
{
    char dir[PATH_MAX];
    struct nsbox_err ignored; /* a path too long is no sandbox's: not said gone */
    return path_join(dir, rt, id, &ignored) == 0 && access(dir, F_OK) < 0 && errno == ENOENT;
}
