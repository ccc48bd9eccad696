/* Directory operations of the file protocol: `list` and recursive `remove`.
 *
 * Both read directories the sandbox controls and can fill: every loop is bounded (entries, reply
 * size, depth, descriptors), and nothing found in a directory is followed. The recursive removal
 * walks down with one directory descriptor per level and never up: it never opens "..", so a
 * directory the sandbox moves while we are in it cannot lead the walk above the workspace. */
#define _GNU_SOURCE
#include "cleanup.h"
#include "files_impl.h"
#include "safepath.h"
#include "grow.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- list ---------------------------------------------------------------------------------- */

/* Room kept in the 1 MiB message for the envelope (tag, truncated, ...). */
#define LIST_BUDGET (NSBOX_PROTO_MAX - 16384)
/* Upper bound of one entry's JSON besides its name:
 * {"name":"","type":"symlink","size":N,"mode":N,"mtime":N}, numbers printed by cJSON. */
#define LIST_ENTRY_OVERHEAD 128

struct list_ent {
    char *name;   /* valid UTF-8 */
    char *target; /* a symlink's text, valid UTF-8, or NULL (as stat gives it) */
    struct stat sb;
};

static int ent_cmp(const void *a, const void *b)
{
    return strcmp(((const struct list_ent *)a)->name, ((const struct list_ent *)b)->name);
}

/* Bytes cJSON prints for the string s, quotes excluded. */
static size_t json_escaped_len(const char *s)
{
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        n += (*p == '"' || *p == '\\') ? 2 : *p < 0x20 ? 6 : 1;
    return n;
}

static void free_ents(struct list_ent *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(v[i].name);
        free(v[i].target);
    }
    free(v);
}

/* How many names after its end the first part counts, at most. Every part runs in the
 * supervisor's loop (a part is short: may_take_long leaves `list` there), so a count must be
 * short too: a directory the sandbox can make cheaply (hard links need no inodes) holds
 * millions of names, and counting them all would hold exec, kill and the ttl for seconds.
 * This many names of getdents, no stat, take a fraction of a second. */
#define LIST_COUNT_MAX (4 * NSBOX_FILES_LIST_MAX)

/* After the first part of a directory too big for one reply: the names from the one that did
 * not fit to the directory's end (getdents alone), at most LIST_COUNT_MAX. A directory with
 * more, or one that cannot be read to its end, is taken to hold LIST_COUNT_MAX: the listing
 * stays bounded, and says where that bound cut it ("incomplete"). */
static long long list_count_rest(DIR *d)
{
    long long n = 1; /* the one that did not fit */
    while (n < LIST_COUNT_MAX) {
        errno = 0;
        struct dirent *de = readdir(d);
        if (!de)
            return errno ? LIST_COUNT_MAX : n;
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
            n++;
    }
    return n;
}

/* A number of a cursor: decimal digits only (strtoll alone would take leading spaces, a sign
 * and an overflow clamped to LLONG_MAX), from p up to *end. -1 if there is none. */
static long long list_cursor_num(const char *p, char **end)
{
    if (*p < '0' || *p > '9')
        return -1;
    errno = 0;
    long long v = strtoll(p, end, 10);
    return errno ? -1 : v;
}

/* A cursor is "NEXT:LEFT", as a reply's `next` gives it: the position of the part's first entry
 * and how many names the listing may still hold. Opaque to clients, which pass it back as
 * they got it; anything else is refused rather than guessed at. */
static int list_cursor_parse(const char *s, long long *start, long long *left)
{
    char *end;
    *start = list_cursor_num(s, &end);
    if (*start < 0 || *end != ':')
        return -1;
    *left = list_cursor_num(end + 1, &end);
    return *left < 0 || *end ? -1 : 0;
}

/* A directory too big for one reply is read in several: each reply ends with the position of
 * the first entry it could not hold ("next"), and the next request starts there ("cursor"). A
 * position is the filesystem's own (d_off; ext4: a hash of the name, tmpfs: a stable index, as
 * NFS uses them), so each request reads only its own part: a sorted listing would read the
 * whole directory for every part. Entries made or removed meanwhile may be seen or not, as in
 * any directory read, but a listing holds at most twice as many names as the directory did
 * when it began (as counted, up to LIST_COUNT_MAX after the first part): the first part counts
 * the rest and the cursors carry how many more may come ("NEXT:LEFT"). A directory that the
 * sandbox grows as it is listed would otherwise keep the listing going for as long as it
 * likes, and the client holding every name: past the position the parts reach (ext4 orders by
 * a hash of the name: about as many new names land after it as before), or on a tmpfs, where a
 * position whose entry was removed goes on from a newer one. Twice, not once: entries made
 * meanwhile count too, and with a bound of the count alone they would push out some that were
 * there all along. A reply the bound ends says so ("incomplete"). Each reply is sorted by
 * name; across replies the order is the directory's, and a client that wants them all sorts
 * the whole (the Python client does). */
int files_list(struct files_ctx *c, const char *cursor, cJSON *reply, struct nsbox_err *e)
{
    long long start = 0, left = -1; /* left: names still to list, -1 not counted yet */
    if (*cursor && list_cursor_parse(cursor, &start, &left) < 0)
        return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL,
                             "request: 'cursor' must be a previous list reply's 'next', "
                             "passed back unchanged");
    struct nsbox_err se = {0};
    /* O_DIRECTORY: the kernel refuses a non-directory before opening it, so a FIFO here cannot
     * block. The path itself may go through symlinks, resolved inside the workspace. */
    int fd = nsbox_sp_open(c->ws, c->rel, O_RDONLY | O_DIRECTORY | O_NONBLOCK, 0, 0, &se);
    if (fd < 0) return files_fail(c, e, se.sys_errno, "cannot list");
    /* the kernel's own positions (d_off), not telldir's, which a C library may map */
    if (start && lseek(fd, (off_t)start, SEEK_SET) < 0) {
        int err = errno;
        close(fd);
        return err == EINVAL ? nsbox_err_set(e, NSBOX_E_INVALID, EINVAL,
                                             "request: 'cursor' is no position in %s", c->disp)
                             : files_fail(c, e, err, "cannot list");
    }
    DIR *d = fdopendir(fd); /* reads on from fd's offset */
    if (!d) {
        int err = errno;
        close(fd);
        return files_fail(c, e, err, "cannot list");
    }
    struct list_ent *v = NULL;
    size_t n = 0, cap = 0, used = 0;
    long long pos = start, next = -1; /* where the entry read now is; the one that did not fit */
    long long seen = 0;                /* names read, counted against left */
    bool cut = false;                  /* names left unread: the bound ended the listing */
    int err = 0;
    for (;;) {
        errno = 0;
        struct dirent *de = readdir(d);
        if (!de) {
            err = errno;
            break;
        }
        long long here = pos;
        pos = (long long)de->d_off; /* where the one after it is */
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
        if (left >= 0 && seen == left) {
            cut = true; /* twice what the directory held when the listing began */
            break;
        }
        seen++;
        struct stat sb;
        if (fstatat(dirfd(d), de->d_name, &sb, AT_SYMLINK_NOFOLLOW) < 0)
            continue; /* removed since readdir saw it */
        char u[3 * (NAME_MAX + 1) + 1], tu[FILES_LINK_TEXT_MAX];
        files_utf8(u, sizeof u, de->d_name, strlen(de->d_name));
        /* a symlink's text, as stat gives it (list gave none) */
        bool link = S_ISLNK(sb.st_mode) && files_link_text(dirfd(d), de->d_name, tu);
        size_t cost = LIST_ENTRY_OVERHEAD + json_escaped_len(u) +
                      (link ? json_escaped_len(tu) + 16 : 0);
        if (n >= NSBOX_FILES_LIST_MAX || used + cost > LIST_BUDGET) {
            next = here;
            seen--; /* the next part's first */
            if (!*cursor) { /* twice what the directory holds: as many again may be made */
                left = seen + 2 * list_count_rest(d);
                seen = 0;
            }
            break;
        }
        if (nsbox_grow(&v, &cap, n, sizeof *v, 64, 0) < 0) {
            err = ENOMEM;
            break;
        }
        v[n].target = NULL;
        if (!(v[n].name = strdup(u)) || (link && !(v[n].target = strdup(tu)))) {
            free(v[n].name);
            err = ENOMEM;
            break;
        }
        v[n++].sb = sb;
        used += cost;
    }
    closedir(d);
    if (err) {
        free_ents(v, n);
        return files_fail(c, e, err, "cannot list");
    }
    if (n) qsort(v, n, sizeof *v, ent_cmp);
    cJSON *arr = cJSON_AddArrayToObject(reply, "entries");
    for (size_t i = 0; arr && i < n; i++) {
        cJSON *o = cJSON_CreateObject();
        if (!o) break;
        cJSON_AddStringToObject(o, "name", v[i].name);
        files_stat_json(o, &v[i].sb, -1, NULL);
        if (v[i].target)
            cJSON_AddStringToObject(o, "target", v[i].target);
        cJSON_AddItemToArray(arr, o);
    }
    free_ents(v, n);
    cJSON_AddBoolToObject(reply, "truncated", next >= 0);
    if (next >= 0) {
        char t[48];
        snprintf(t, sizeof t, "%lld:%lld", next, left - seen);
        cJSON_AddStringToObject(reply, "next", t);
    }
    cJSON_AddBoolToObject(reply, "incomplete", cut);
    if (!arr)
        return nsbox_err_set(e, NSBOX_E_NOMEM, ENOMEM, "cannot list %s: out of memory", c->disp);
    return 0;
}

/* ---- recursive remove ---------------------------------------------------------------------- */

struct rm_level {
    DIR *d;
    char name[NAME_MAX + 1]; /* its name in the level above */
    size_t wlen;             /* length of `where` before this level's name was appended */
    int passes;
};

struct rm_walk {
    struct files_ctx *c;
    uint64_t ws_mnt;
    struct rm_level *stack;
    int depth;
    char where[PATH_MAX]; /* the current directory, relative to the workspace, for messages */
    size_t wlen;
    char top[PATH_MAX]; /* the directory the request names, spelt as `where` spells it */
};

static void where_push(struct rm_walk *w, const char *name)
{
    size_t nl = strlen(name);
    if (w->wlen + 1 + nl + 1 > sizeof w->where)
        return; /* deeper than PATH_MAX: messages name the deepest directory that fits */
    if (w->wlen) w->where[w->wlen++] = '/';
    memcpy(w->where + w->wlen, name, nl + 1);
    w->wlen += nl;
}

static int rm_fail(struct rm_walk *w, struct nsbox_err *e, int err, const char *name)
{
    char rel[PATH_MAX];
    if (name)
        snprintf(rel, sizeof rel, "%s%s%s", w->where, w->wlen ? "/" : "", name);
    else
        snprintf(rel, sizeof rel, "%s", w->wlen ? w->where : ".");
    /* The request's directory itself is named once, as the request spelt it; a file below it
     * after it, without the verb again. */
    if (!strcmp(rel, w->top))
        return files_fail(w->c, e, err, "cannot remove");
    if (err == ENOENT) {
        files_fail_at(w->c, e, err, "cannot remove", rel);
        return nsbox_err_wrap(e, "cannot remove %s", w->c->disp);
    }
    char verb[sizeof w->c->disp + 16];
    snprintf(verb, sizeof verb, "cannot remove %s:", w->c->disp);
    return files_fail_at(w->c, e, err, verb, rel);
}

/* Open dirfd/name, a directory, for reading, following no symlink and crossing no mount. The
 * sandbox may have left it without permissions (mode 0): as its owner (an unprivileged
 * supervisor) we give ourselves u+rwx back, through the descriptor we already hold. */
static DIR *rm_opendir(struct rm_walk *w, int dirfd, const char *name, int *err)
{
    cleanup_close int pfd = openat(dirfd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (pfd < 0) {
        *err = errno;
        return NULL;
    }
    uint64_t mnt;
    if (files_mnt_id(pfd, &mnt) < 0) {
        *err = errno;
        return NULL;
    }
    if (mnt != w->ws_mnt) {
        /* Something mounted there on the host (the sandbox cannot mount on the host): deleting
         * its contents would delete another file system's files. */
        *err = EXDEV;
        return NULL;
    }
    struct stat sb;
    if (fstat(pfd, &sb) < 0) {
        *err = errno;
        return NULL;
    }
    /* fsuid, not euid: through an idmapped workspace the supervisor acts as the sandbox's user
     * (files.c), and its files are that user's (setfsuid(-1) only reads it) */
    if ((sb.st_mode & 0700) != 0700 && sb.st_uid == (uid_t)setfsuid((uid_t)-1)) {
        char p[64];
        snprintf(p, sizeof p, "/proc/self/fd/%d", pfd);
        /* chmod through the magic link acts on the very inode we hold: no name is looked up
         * again, so nothing can be swapped in between. */
        if (chmod(p, (sb.st_mode & 07777) | 0700) < 0) {
            *err = errno;
            return NULL;
        }
    }
    int fd = openat(pfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        *err = errno;
        return NULL;
    }
    DIR *d = fdopendir(fd);
    if (!d) {
        *err = errno;
        close(fd);
    }
    return d;
}

static int rm_push(struct rm_walk *w, int dirfd, const char *name, struct nsbox_err *e)
{
    if (w->depth >= NSBOX_FILES_RM_MAX_DEPTH) {
        char d[FILES_DISP_MAX + 32];
        files_disp(d, sizeof d, w->where, w->wlen, FILES_DISP_MAX);
        return nsbox_err_set(e, NSBOX_E_INVALID, ELOOP,
                             "cannot remove %s: the tree is deeper than %d directories (at "
                             "/workspace/%s); remove it from inside the sandbox",
                             w->c->disp, NSBOX_FILES_RM_MAX_DEPTH, d);
    }
    int err = 0;
    DIR *d = rm_opendir(w, dirfd, name, &err);
    if (!d) {
        if (err == EXDEV) {
            char rel[PATH_MAX], dd[FILES_DISP_MAX + 8];
            snprintf(rel, sizeof rel, "%s%s%s", w->where, w->wlen ? "/" : "", name);
            files_disp(dd, sizeof dd, rel, strlen(rel), FILES_DISP_MAX);
            return nsbox_err_set(e, NSBOX_E_INVALID, EXDEV,
                                 "cannot remove %s: /workspace/%s is a mount point; nsbox does "
                                 "not remove files of another file system",
                                 w->c->disp, dd);
        }
        return rm_fail(w, e, err, name);
    }
    struct rm_level *L = &w->stack[w->depth++];
    L->d = d;
    snprintf(L->name, sizeof L->name, "%s", name);
    L->wlen = w->wlen;
    L->passes = 0;
    where_push(w, name);
    return 0;
}

static int rm_walk(struct rm_walk *w, int top, const char *name, struct nsbox_err *e)
{
    if (rm_push(w, top, name, e) < 0) return -1;
    while (w->depth > 0) {
        struct rm_level *L = &w->stack[w->depth - 1];
        errno = 0;
        struct dirent *de = readdir(L->d);
        if (!de) {
            if (errno) return rm_fail(w, e, errno, NULL);
            int pfd = w->depth >= 2 ? dirfd(w->stack[w->depth - 2].d) : top;
            if (unlinkat(pfd, L->name, AT_REMOVEDIR) < 0 && errno != ENOENT) {
                /* The sandbox is still adding files: read it again, a few times. */
                if (errno == ENOTEMPTY && ++L->passes < 8) {
                    rewinddir(L->d);
                    continue;
                }
                int err = errno;
                w->wlen = L->wlen;
                w->where[w->wlen] = '\0';
                return rm_fail(w, e, err, L->name);
            }
            closedir(L->d);
            L->d = NULL;
            w->depth--;
            w->wlen = L->wlen;
            w->where[w->wlen] = '\0';
            continue;
        }
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
        struct stat sb;
        if (fstatat(dirfd(L->d), de->d_name, &sb, AT_SYMLINK_NOFOLLOW) < 0) {
            if (errno == ENOENT) continue;
            return rm_fail(w, e, errno, de->d_name);
        }
        if (!S_ISDIR(sb.st_mode)) {
            /* The name itself goes: a symlink is removed, never followed. */
            if (unlinkat(dirfd(L->d), de->d_name, 0) == 0 || errno == ENOENT) continue;
            if (errno != EISDIR) /* else it became a directory meanwhile: descend */
                return rm_fail(w, e, errno, de->d_name);
        }
        char name2[NAME_MAX + 1];
        snprintf(name2, sizeof name2, "%s", de->d_name);
        if (rm_push(w, dirfd(L->d), name2, e) < 0) return -1;
    }
    return 0;
}

int files_remove_tree(struct files_ctx *c, int dirfd, const char *name, struct nsbox_err *e)
{
    struct rm_walk w = {.c = c};
    if (files_mnt_id(c->ws, &w.ws_mnt) < 0) return files_fail(c, e, errno, "cannot remove");
    w.stack = calloc(NSBOX_FILES_RM_MAX_DEPTH, sizeof *w.stack);
    if (!w.stack) return files_fail(c, e, ENOMEM, "cannot remove");
    /* where: the request's parent directory, so that messages name full paths */
    char parent[PATH_MAX];
    snprintf(parent, sizeof parent, "%s", c->rel);
    size_t len = strlen(parent);
    while (len > 0 && parent[len - 1] == '/')
        parent[--len] = '\0';
    while (len > 0 && parent[len - 1] != '/')
        parent[--len] = '\0';
    while (len > 0 && parent[len - 1] == '/')
        parent[--len] = '\0';
    snprintf(w.where, sizeof w.where, "%s", parent);
    w.wlen = strlen(w.where);
    snprintf(w.top, sizeof w.top, "%s%s%s", parent, len ? "/" : "", name);
    int r = rm_walk(&w, dirfd, name, e);
    for (int i = 0; i < w.depth; i++)
        if (w.stack[i].d) closedir(w.stack[i].d);
    free(w.stack);
    return r;
}
