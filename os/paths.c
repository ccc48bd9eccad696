/* State, data and cache directories; mkdir -p; a careful rm -rf. */
#define _GNU_SOURCE
#include "paths.h"
#include "cleanup.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

/* A user's $HOME; root's home is the user database's, as root's state and data directories
 * ignore the environment too: `sudo -E` keeps the caller's HOME, where a cache of root's would
 * be the caller's to replace by a link (docs/decisions.md). */
static const char *home_dir_from(const char **from)
{
    const char *h = getenv("HOME");
    if (geteuid() != 0 && h && h[0] == '/')
        return *from = "HOME=", h;
    struct passwd *pw = getpwuid(geteuid());
    if (pw && pw->pw_dir && pw->pw_dir[0] == '/')
        return *from = "the user database's home ", pw->pw_dir;
    return *from = "no HOME and no home in the user database: ", "/";
}

static const char *home_dir(void)
{
    const char *from;
    return home_dir_from(&from);
}

/* A user's data directory as HOME or XDG_DATA_HOME places it, which `sudo` without -H, `su`
 * without -l or a container's `--user` leave pointing at a home that is not the user's
 * (/root, /, /nonexistent): it must be usable, it or the deepest part of it that exists
 * (mkdir -p makes the rest), so that the error names the variable and its value, and nsbox
 * info says the same, instead of an image failing to open with a bare "Permission denied" on a
 * path the user never chose. NSBOX_DATA_DIR is taken as given: it names its path itself. */
static int user_data_usable(int r, const char *out, const char *var, const char *from,
                            const char *val, struct nsbox_err *e)
{
    static __thread char passed[PATH_MAX]; /* asked for dozens of times by one run */
    if (r < 0 || !strcmp(passed, out))
        return r;
    char part[PATH_MAX];
    snprintf(part, sizeof part, "%s", out);
    for (;;) {
        if (faccessat(AT_FDCWD, part, W_OK | X_OK, AT_EACCESS) == 0) {
            snprintf(passed, sizeof passed, "%s", out);
            return 0;
        }
        char *cut = strrchr(part, '/');
        if (errno != ENOENT || !cut || !strcmp(part, "/"))
            break;
        cut[cut == part] = '\0'; /* "/x" leaves "/" */
    }
    int err = errno;
    bool home = !strcmp(var, "HOME");
    return nsbox_err_set(e, NSBOX_E_INVALID, err,
                         "nsbox's data directory %s, from %s%s, is not usable by uid %u (%s: %s): "
                         "set %s to a directory of yours%s, or NSBOX_DATA_DIR",
                         out, from, val, (unsigned)geteuid(), part, strerror(err), var,
                         home ? " (`sudo -H`, `su -l` and a login set it to the user's own)" : "");
}

static int fmt_path(char *out, size_t n, struct nsbox_err *e, const char *fmt, const char *a,
                    const char *b)
{
    int r = snprintf(out, n, fmt, a, b);
    if (r < 0 || (size_t)r >= n)
        return nsbox_err_set(e, NSBOX_E_INVALID, ENAMETOOLONG, "path too long: %s", a);
    return 0;
}

/* An override from the environment: 1 and *val when set to an absolute path, 0 when unset or
 * empty, -1 (e says so) when relative. A relative one was ignored, and a CI job that isolated
 * itself with NSBOX_STATE_DIR=./state used the system-wide directories instead; resolving it
 * would make every command depend on its working directory. */
static int env_dir(const char *name, const char **val, struct nsbox_err *e)
{
    const char *o = getenv(name);
    if (!o || !*o)
        return 0;
    if (o[0] != '/')
        return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL,
                             "%s must be an absolute path, not '%s' (e.g. %s=\"$PWD/%s\")", name, o,
                             name, o);
    *val = o;
    return 1;
}

/* One component of a directory's path (path, its prefix up to there): owned by root or us, and
 * writable by no one else; a directory above may be writable by all if it is sticky (/tmp),
 * where no one renames or removes another's entries. 1 when it does not exist. */
static int private_owner(const char *label, const char *dir, const char *path, bool last,
                         const char *why, const char *fix, struct nsbox_err *e)
{
    struct stat sb;
    if (lstat(path, &sb) < 0)
        return errno == ENOENT ? 1 : nsbox_err_sys(e, "%s %s: %s", label, dir, path);
    char who[64] = "";
    if (sb.st_uid != 0 && sb.st_uid != geteuid())
        snprintf(who, sizeof who, "belongs to uid %u", (unsigned)sb.st_uid);
    else if (S_ISLNK(sb.st_mode))
        return 0; /* its own mode means nothing; where it leads is checked */
    else if (!last && (sb.st_mode & S_ISVTX))
        return 0;
    else if (sb.st_mode & S_IWOTH)
        snprintf(who, sizeof who, "is writable by every user");
    else if ((sb.st_mode & S_IWGRP) && sb.st_gid != 0)
        snprintf(who, sizeof who, "is writable by group %u", (unsigned)sb.st_gid);
    if (!who[0])
        return 0;
    return nsbox_err_set(e, NSBOX_E_POLICY, EPERM,
                         "%s %s: %s %s (mode %04o): another user could %s; %s", label, dir, path,
                         who, (unsigned)(sb.st_mode & 07777), why, fix);
}

/* Each component of path from / (whole: path is the directory itself, not one above it). */
static int private_path(const char *label, const char *dir, const char *path, bool whole,
                        const char *why, const char *fix, struct nsbox_err *e)
{
    char buf[PATH_MAX];
    if ((size_t)snprintf(buf, sizeof buf, "%s", path) >= sizeof buf)
        return nsbox_err_set(e, NSBOX_E_INVALID, ENAMETOOLONG, "%s: path too long", label);
    for (char *p = buf;; p++) {
        if (*p != '/' && *p != '\0')
            continue;
        char c = *p;
        *p = '\0';
        int r = private_owner(label, dir, p == buf ? "/" : buf, whole && c == '\0', why, fix, e);
        *p = c;
        if (r != 0)
            return r < 0 ? -1 : 0;
        if (c == '\0')
            return 0;
    }
}

/* Where the symlinks of abs (changed) lead: the deepest part that exists, resolved into real,
 * also through a link to a place not made yet (mkdir -p would make it there); *whole stays true
 * while that is the directory itself. 0 when resolved, 1 when no part of it exists, -1 (errno)
 * when it cannot be resolved. */
static int resolve_existing(char *abs, char *real, bool *whole)
{
    char link[PATH_MAX], next[PATH_MAX];
    for (int hops = 0; hops < 40; hops++) {
        if (realpath(abs, real))
            return 0;
        char *cut = strrchr(abs, '/');
        if (errno != ENOENT)
            return -1;
        ssize_t n = readlink(abs, link, sizeof link - 1);
        if (n > 0) { /* a dangling link: on to where it leads */
            link[n] = '\0';
            *cut = '\0';
            if ((size_t)snprintf(next, sizeof next, "%s/%s", link[0] == '/' ? "" : abs, link) >=
                sizeof next)
                return errno = ENAMETOOLONG, -1;
            snprintf(abs, PATH_MAX, "%s", next);
        } else if (!cut || cut == abs) {
            return 1;
        } else {
            *cut = '\0';
            *whole = false;
        }
    }
    return errno = ELOOP, -1;
}

int nsbox_paths_check_private(const char *label, const char *dir, const char *why, const char *fix,
                              struct nsbox_err *e)
{
    char abs[PATH_MAX], real[PATH_MAX];
    if (dir[0] == '/')
        snprintf(abs, sizeof abs, "%s", dir);
    else if (!getcwd(real, sizeof real) ||
             (size_t)snprintf(abs, sizeof abs, "%s/%s", real, dir) >= sizeof abs)
        return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL, "%s %s: cannot make it an absolute path",
                             label, dir);
    if (private_path(label, dir, abs, true, why, fix, e) < 0)
        return -1;
    /* What cannot be resolved is refused: a path that resolves past PATH_MAX fails realpath,
     * and the kernel, which has no such limit, would follow it wherever another user's links
     * lead. */
    char shown[PATH_MAX];
    snprintf(shown, sizeof shown, "%s", abs);
    bool whole = true;
    int r = resolve_existing(abs, real, &whole);
    if (r < 0)
        return nsbox_err_set(e, NSBOX_E_POLICY, errno,
                             "%s %s: %s cannot be resolved (%s), so whether another user could "
                             "write where it leads cannot be checked; %s",
                             label, dir, shown, strerror(errno), fix);
    return r ? 0 : private_path(label, dir, real, whole, why, fix, e);
}

/* As root, a directory of nsbox's that another user could write would let them plant what
 * root then trusts: a state directory (locks, sockets, the pool, tombstones), an image, a
 * workspace's backing file or template, or a link where root creates and removes files. */
enum private_kind { PRIVATE_STATE, PRIVATE_DATA, PRIVATE_CACHE, PRIVATE_KINDS };

/* Each kind's name in messages, and the variable that sets it. */
static const struct {
    const char *label, *var;
} private_dirs[PRIVATE_KINDS] = {
    [PRIVATE_STATE] = {"state directory", "NSBOX_STATE_DIR"},
    [PRIVATE_DATA] = {"data directory", "NSBOX_DATA_DIR"},
    [PRIVATE_CACHE] = {"cache directory", "NSBOX_CACHE_DIR"},
};

static int root_private(int r, enum private_kind kind, const char *out, struct nsbox_err *e)
{
    /* the last directory found private, per kind, once it exists: only root could make it
     * otherwise, and a run asks for its directories dozens of times */
    static __thread char passed[PRIVATE_KINDS][PATH_MAX];
    char *last = passed[kind];
    if (r < 0 || geteuid() != 0 || !strcmp(last, out))
        return r;
    char fix[128];
    snprintf(fix, sizeof fix, "set %s to a directory only root can write", private_dirs[kind].var);
    if (nsbox_paths_check_private(private_dirs[kind].label, out,
                                  "plant files, links or sockets there that nsbox, run as root, "
                                  "would trust or write through",
                                  fix, e) < 0)
        return -1;
    struct stat sb; /* all of it checked: none of it can be made by another user later */
    if (lstat(out, &sb) == 0)
        snprintf(last, PATH_MAX, "%s", out);
    return r;
}

static int runtime_dir(char *out, size_t n, struct nsbox_err *e)
{
    const char *o = NULL;
    int r = env_dir(private_dirs[PRIVATE_STATE].var, &o, e);
    if (r < 0)
        return -1;
    if (r)
        return fmt_path(out, n, e, "%s%s", o, "");
    if (geteuid() == 0)
        return fmt_path(out, n, e, "%s%s", NSBOX_ROOT_RUNTIME_DIR, "");
    const char *x = getenv("XDG_RUNTIME_DIR");
    if (x && x[0] == '/' && access(x, W_OK) == 0)
        return fmt_path(out, n, e, "%s%s", x, NSBOX_RUNTIME_SUBDIR);
    char uid[32];
    snprintf(uid, sizeof uid, "%u", (unsigned)getuid());
    if (fmt_path(out, n, e, NSBOX_TMP_RUNTIME_FMT "%s", uid, "") < 0)
        return -1;
    /* /tmp is everyone's: a directory of that name made by another user would hold our
     * sockets and state. It must be ours and closed to others (nsbox makes it 0711). */
    struct stat st;
    if (lstat(out, &st) == 0 &&
        (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 022)))
        return nsbox_err_set(e, NSBOX_E_POLICY, EPERM,
                             "%s is not a directory of yours closed to others (owner uid %u, mode "
                             "%o): remove it, or set XDG_RUNTIME_DIR or NSBOX_STATE_DIR",
                             out, (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777));
    return 0;
}

static int data_dir(char *out, size_t n, struct nsbox_err *e)
{
    const char *o = NULL;
    int r = env_dir(private_dirs[PRIVATE_DATA].var, &o, e);
    if (r < 0)
        return -1;
    if (r)
        return fmt_path(out, n, e, "%s%s", o, "");
    if (geteuid() == 0)
        return fmt_path(out, n, e, "%s%s", "/var/lib/nsbox", "");
    const char *x = getenv("XDG_DATA_HOME");
    if (x && x[0] == '/')
        return user_data_usable(fmt_path(out, n, e, "%s%s", x, "/nsbox"), out, "XDG_DATA_HOME",
                                "XDG_DATA_HOME=", x, e);
    const char *from, *h = home_dir_from(&from);
    r = fmt_path(out, n, e, "%s%s", h[1] ? h : "", "/.local/share/nsbox"); /* not "//" */
    return user_data_usable(r, out, "HOME", from, h, e);
}

static int cache_dir(char *out, size_t n, struct nsbox_err *e)
{
    const char *o = NULL;
    int r = env_dir(private_dirs[PRIVATE_CACHE].var, &o, e);
    if (r < 0)
        return -1;
    if (r)
        return fmt_path(out, n, e, "%s%s", o, "");
    const char *x = getenv("XDG_CACHE_HOME");
    if (x && x[0] == '/' && geteuid() != 0)
        return fmt_path(out, n, e, "%s%s", x, "/nsbox");
    return fmt_path(out, n, e, "%s%s", home_dir(), "/.cache/nsbox");
}

int nsbox_paths_runtime_dir(char *out, size_t n, struct nsbox_err *e)
{
    return root_private(runtime_dir(out, n, e), PRIVATE_STATE, out, e);
}

int nsbox_paths_data_dir(char *out, size_t n, struct nsbox_err *e)
{
    return root_private(data_dir(out, n, e), PRIVATE_DATA, out, e);
}

int nsbox_paths_cache_dir(char *out, size_t n, struct nsbox_err *e)
{
    return root_private(cache_dir(out, n, e), PRIVATE_CACHE, out, e);
}

int nsbox_paths_mkdir_p(const char *path, unsigned mode, struct nsbox_err *e)
{
    char buf[PATH_MAX];
    size_t len = strlen(path);
    if (len == 0 || len >= sizeof buf)
        return nsbox_err_set(e, NSBOX_E_INVALID, ENAMETOOLONG, "bad directory path '%s'", path);
    memcpy(buf, path, len + 1);
    for (char *p = buf + 1;; p++) {
        if (*p == '/' || *p == '\0') {
            char c = *p;
            *p = '\0';
            /* Directories on the way may at least be passed (mode | 0711): made 0700 by the
             * first nsbox_paths_mkdir_p("/run/nsbox/uids"), root's runtime directory kept other
             * users from telling that a sandbox id there is root's (docs/protocol.md). */
            if (mkdir(buf, c == '\0' ? mode : mode | 0711) < 0 && errno != EEXIST)
                return nsbox_err_sys(e, "cannot create directory %s", buf);
            *p = c;
            if (c == '\0')
                break;
        }
    }
    return 0;
}

/* Depth-first removal relative to directory fds: a symlink is unlinked, never followed, and a
 * directory on another device (a mount point) is left alone, so a tree that the sandbox could
 * write into cannot make us delete anything outside it. */
static int rm_rf_at(int dfd, const char *name, dev_t dev, int depth)
{
    struct stat st;
    if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return errno == ENOENT ? 0 : -1;
    if (!S_ISDIR(st.st_mode))
        return unlinkat(dfd, name, 0) < 0 && errno != ENOENT ? -1 : 0;
    if (st.st_dev != dev || depth > 4096) {
        errno = EXDEV;
        return -1;
    }
    /* The sandbox may leave directories it made unreadable or unwritable (mode 0); as their
     * owner we may give ourselves access back before descending. */
    if ((st.st_mode & 0700) != 0700 && st.st_uid == geteuid())
        fchmodat(dfd, name, (st.st_mode & 07777) | 0700, 0);
    int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? 0 : -1; /* another remover got there first */
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        return -1;
    }
    int ret = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        if (rm_rf_at(dirfd(d), de->d_name, dev, depth + 1) < 0)
            ret = -1;
    }
    closedir(d);
    if (ret == 0 && unlinkat(dfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
        ret = -1;
    return ret;
}

int nsbox_paths_rm_rf(const char *path, struct nsbox_err *e)
{
    struct stat st;
    if (lstat(path, &st) < 0)
        return errno == ENOENT ? 0 : nsbox_err_sys(e, "cannot remove %s", path);
    if (rm_rf_at(AT_FDCWD, path, st.st_dev, 0) < 0)
        return nsbox_err_sys(e, "cannot remove %s", path);
    return 0;
}

int nsbox_paths_images(char *out, size_t n, struct nsbox_err *e, const char *fmt, ...)
{
    char data[PATH_MAX], rest[PATH_MAX];
    if (nsbox_paths_data_dir(data, sizeof data, e) < 0)
        return -1;
    va_list ap;
    va_start(ap, fmt);
    int r = vsnprintf(rest, sizeof rest, fmt, ap);
    va_end(ap);
    r = r >= 0 && (size_t)r < sizeof rest ? snprintf(out, n, "%s/images%s", data, rest) : -1;
    if (r < 0 || (size_t)r >= n)
        return nsbox_err_set(e, NSBOX_E_INVALID, ENAMETOOLONG, "data directory path too long");
    return 0;
}
