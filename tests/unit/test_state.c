/* Sandbox ids, state directories and garbage collection (sandbox/state.c).
 *
 * NSBOX_STATE_DIR and NSBOX_CACHE_DIR point into a fresh mkdtemp directory for each test, so
 * nothing outside it is touched; no root needed. A live sandbox is simulated by a forked child
 * holding the flock on <state>/<id>/lock, as the real owner does for the sandbox's lifetime. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "gc.h"
#include "state.h"
#include "idmap.h"
#include "paths.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct fx {
    char base[PATH_MAX];
    char state[PATH_MAX]; /* NSBOX_STATE_DIR (not created: nsbox makes it) */
    char cache[PATH_MAX]; /* NSBOX_CACHE_DIR (not created) */
    char data[PATH_MAX];  /* NSBOX_DATA_DIR (not created): gc sweeps its image store */
    char uids[PATH_MAX];  /* root's uid slot registry (not created) */
    char *old_state, *old_cache, *old_data;
};

static char *dup_env(const char *name)
{
    const char *v = getenv(name);
    return v ? strdup(v) : NULL;
}

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof *f);
    if (!f) return -1;
    snprintf(f->base, sizeof f->base, "/tmp/nsbox-test-state-XXXXXX");
    if (!mkdtemp(f->base)) return -1;
    snprintf(f->state, sizeof f->state, "%s/run/nsbox", f->base);
    snprintf(f->cache, sizeof f->cache, "%s/cache/nsbox", f->base);
    snprintf(f->data, sizeof f->data, "%s/data/nsbox", f->base);
    snprintf(f->uids, sizeof f->uids, "%s/root-uids", f->base);
    f->old_state = dup_env("NSBOX_STATE_DIR");
    f->old_cache = dup_env("NSBOX_CACHE_DIR");
    f->old_data = dup_env("NSBOX_DATA_DIR");
    setenv("NSBOX_STATE_DIR", f->state, 1);
    setenv("NSBOX_CACHE_DIR", f->cache, 1);
    setenv("NSBOX_DATA_DIR", f->data, 1);
    /* gc sweeps root's uid slots, one registry for the machine: another nsbox running beside
     * these tests takes and leaves files there, and a create of its own could hold the very
     * file test_gc expects gone */
    nsbox_state_set_root_uid_slot_dir(f->uids);
    *state = f;
    return 0;
}

static int rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *w)
{
    (void)sb;
    (void)flag;
    (void)w;
    return remove(p);
}

static void restore_env(const char *name, char *old)
{
    if (old)
        setenv(name, old, 1);
    else
        unsetenv(name);
    free(old);
}

static int teardown(void **state)
{
    struct fx *f = *state;
    nftw(f->base, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
    restore_env("NSBOX_STATE_DIR", f->old_state);
    restore_env("NSBOX_CACHE_DIR", f->old_cache);
    restore_env("NSBOX_DATA_DIR", f->old_data);
    nsbox_state_set_root_uid_slot_dir(NULL);
    free(f);
    return 0;
}

/* ---- helpers ------------------------------------------------------------------------------- */

static bool exists(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static bool exists(const char *fmt, ...)
{
    char p[PATH_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p, sizeof p, fmt, ap);
    va_end(ap);
    struct stat st;
    return lstat(p, &st) == 0;
}

static void make_dir(const char *path)
{
    if (mkdir(path, 0700) < 0 && errno != EEXIST) fail_msg("mkdir %s: %s", path, strerror(errno));
}

static void make_file(const char *path, const char *content)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, content, strlen(content)), (ssize_t)strlen(content));
    close(fd);
}

static void set_age(const char *path, time_t seconds)
{
    struct timespec ts[2] = {{time(NULL) - seconds, 0}, {time(NULL) - seconds, 0}};
    assert_int_equal(utimensat(AT_FDCWD, path, ts, AT_SYMLINK_NOFOLLOW), 0);
}

/* Is someone holding an exclusive flock on path? (Own open file description, so a lock held
 * by this very process through another descriptor counts too.) */
static bool lock_held(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    bool held = flock(fd, LOCK_EX | LOCK_NB) < 0 && errno == EWOULDBLOCK;
    close(fd);
    return held;
}

static int count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)))
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
            n++;
    closedir(d);
    return n;
}

static void new_id(char *id)
{
    struct nsbox_err e = {0};
    assert_int_equal(nsbox_state_new_id(id, &e), 0);
    assert_true(nsbox_state_valid_id(id));
}

/* A forked child that holds the lock at path until release_holder(). */
struct holder {
    pid_t pid;
    int go; /* write end: closing it lets the child exit */
};

static struct holder hold_lock(const char *path)
{
    int ready[2], go[2];
    assert_int_equal(pipe2(ready, O_CLOEXEC), 0);
    assert_int_equal(pipe2(go, O_CLOEXEC), 0);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(ready[0]);
        close(go[1]);
        int fd = open(path, O_RDONLY | O_CLOEXEC); /* a directory, or an old-style lock file */
        char c = (fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) == 0) ? 'y' : 'n';
        if (write(ready[1], &c, 1) != 1) _exit(1);
        while (read(go[0], &c, 1) > 0)
            ;
        _exit(0);
    }
    close(ready[1]);
    close(go[0]);
    char c = 0;
    assert_int_equal(read(ready[0], &c, 1), 1);
    close(ready[0]);
    assert_int_equal(c, 'y');
    return (struct holder){pid, go[1]};
}

static void release_holder(struct holder *h)
{
    close(h->go);
    int status;
    assert_int_equal(waitpid(h->pid, &status, 0), h->pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* ---- ids ----------------------------------------------------------------------------------- */

static void test_new_id(void **state)
{
    (void)state;
    enum { N = 256 };
    static char ids[N][NSBOX_ID_LEN + 1];
    bool seen[16] = {false};
    for (int i = 0; i < N; i++) {
        char buf[NSBOX_ID_LEN + 8];
        memset(buf, 'Z', sizeof buf);
        struct nsbox_err e = {0};
        assert_int_equal(nsbox_state_new_id(buf, &e), 0);
        assert_int_equal(strlen(buf), NSBOX_ID_LEN);
        for (size_t k = NSBOX_ID_LEN + 1; k < sizeof buf; k++)
            assert_int_equal(buf[k], 'Z'); /* nothing past the NUL */
        for (int k = 0; k < NSBOX_ID_LEN; k++) {
            char c = buf[k];
            assert_true((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'));
            seen[c <= '9' ? c - '0' : c - 'a' + 10] = true;
        }
        assert_true(nsbox_state_valid_id(buf));
        memcpy(ids[i], buf, sizeof ids[i]);
        for (int j = 0; j < i; j++)
            assert_string_not_equal(ids[i], ids[j]);
    }
    /* random over the whole hex alphabet (3072 digits: missing one is ~1e-84) */
    for (int d = 0; d < 16; d++)
        assert_true(seen[d]);
}

static void test_valid_id(void **state)
{
    (void)state;
    assert_true(nsbox_state_valid_id("0123456789ab"));
    assert_true(nsbox_state_valid_id("cdefcdefcdef"));
    const char *bad[] = {"",
                         "0123456789a",   /* 11 */
                         "0123456789abc", /* 13 */
                         "0123456789AB",  /* uppercase */
                         "0123456789ag",
                         "..",
                         "../456789abcd",
                         "0123456789a/",
                         "0123456789a ",
                         "uids",
                         "lock"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (nsbox_state_valid_id(bad[i])) fail_msg("'%s' accepted as an id", bad[i]);
}

/* ---- create / destroy ---------------------------------------------------------------------- */

/* path is a symlink to NSBOX_STATE_LOCK_MARK: the "lock" mark an older nsbox's gc cannot open. */
static void assert_lock_mark(const char *path)
{
    struct stat sb;
    char text[128];
    assert_int_equal(lstat(path, &sb), 0);
    assert_true(S_ISLNK(sb.st_mode));
    ssize_t tl = readlink(path, text, sizeof text - 1);
    assert_true(tl > 0);
    text[tl] = '\0';
    assert_string_equal(text, NSBOX_STATE_LOCK_MARK);
}

/* Twice: first with neither base directory present (made on demand), then with both there. */
static void create_fresh_once(struct fx *f)
{
    struct nsbox_state st;
    nsbox_state_init(&st);
    struct nsbox_err e = {0};
    if (nsbox_state_create(&st, NULL, NSBOX_WS_EXT4, &e) != 0) fail_msg("create: %s", e.msg);
    assert_true(nsbox_state_valid_id(st.id));

    char want[PATH_MAX];
    snprintf(want, sizeof want, "%s/%s", f->state, st.id);
    assert_string_equal(st.dir, want);
    snprintf(want, sizeof want, "%s/%s.ext4", f->cache, st.id);
    assert_string_equal(st.workspace, want);
    assert_true(st.fresh_workspace);
    assert_int_equal(st.ws_kind, NSBOX_WS_EXT4);

    struct stat sb;
    assert_int_equal(lstat(st.dir, &sb), 0);
    assert_true(S_ISDIR(sb.st_mode));
    assert_int_equal(sb.st_mode & 0777, 0700);
    /* nothing else in it (the lock is the directory's own, the new root is mounted on it) but
     * a "lock" symlink for older nsbox binaries: their gc opens <dir>/lock (O_RDWR, O_NOFOLLOW,
     * no O_CREAT) and takes ENOENT for a dead sandbox, any other error for a live one */
    assert_int_equal(count_entries(st.dir), 1);
    char mark[PATH_MAX];
    snprintf(mark, sizeof mark, "%s/lock", st.dir);
    assert_lock_mark(mark);
    assert_int_equal(open(mark, O_RDWR | O_NOFOLLOW | O_CLOEXEC), -1);
    assert_int_not_equal(errno, ENOENT);
    /* the cache directory exists (made if it was not there); nothing of the sandbox in it: the
     * backing file is made later (workspace.c), and goes with the sandbox */
    assert_int_equal(lstat(f->cache, &sb), 0);
    assert_true(S_ISDIR(sb.st_mode));
    assert_int_equal(count_entries(f->cache), 0);
    assert_int_equal(lstat(st.workspace, &sb), -1);
    int bf = open(st.workspace, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    assert_true(bf >= 0);
    close(bf);

    /* the lock (the directory's) is held for the sandbox's lifetime */
    assert_true(st.lock_fd >= 0);
    assert_true(lock_held(st.dir));

    /* keep a descriptor of the directory to see its lock released by destroy */
    int probe = open(st.dir, O_RDONLY | O_CLOEXEC);
    assert_true(probe >= 0);
    assert_int_equal(nsbox_state_destroy(&st, &e), 0);
    assert_false(exists("%s", want));
    assert_int_equal(count_entries(f->cache), 0);
    assert_false(exists("%s/%s", f->state, st.id));
    assert_int_equal(st.lock_fd, -1);
    assert_int_equal(flock(probe, LOCK_EX | LOCK_NB), 0);
    close(probe);
    /* twice is harmless */
    assert_int_equal(nsbox_state_destroy(&st, &e), 0);
}

static void test_create_fresh_workspace(void **state)
{
    struct fx *f = *state;
    create_fresh_once(f);
    assert_true(exists("%s", f->state));
    assert_true(exists("%s", f->cache));
    /* made by the first create: a deletion needs no inode of its own for it */
    assert_true(exists("%s/tombstones", f->state));
    create_fresh_once(f);
}

/* Every state directory's "lock" mark is one inode, the runtime directory's lock-mark: a mark of
 * its own per sandbox was an inode allocated and freed at every create and rm. */
static void test_lock_marks_share_one_inode(void **state)
{
    struct fx *f = *state;
    struct nsbox_state a, b;
    nsbox_state_init(&a);
    nsbox_state_init(&b);
    struct nsbox_err e = {0};
    if (nsbox_state_create(&a, NULL, NSBOX_WS_TMPFS, &e) != 0)
        fail_msg("create: %s", e.msg);
    if (nsbox_state_create(&b, NULL, NSBOX_WS_TMPFS, &e) != 0)
        fail_msg("create: %s", e.msg);
    char pa[PATH_MAX], pb[PATH_MAX], shared[PATH_MAX];
    snprintf(pa, sizeof pa, "%s/lock", a.dir);
    snprintf(pb, sizeof pb, "%s/lock", b.dir);
    snprintf(shared, sizeof shared, "%s/" NSBOX_STATE_LOCK_MARK_NAME, f->state);
    struct stat sa, sb, ss;
    assert_int_equal(lstat(pa, &sa), 0);
    assert_int_equal(lstat(pb, &sb), 0);
    assert_int_equal(lstat(shared, &ss), 0);
    assert_true(S_ISLNK(ss.st_mode));
    assert_true(sa.st_ino == ss.st_ino && sb.st_ino == ss.st_ino);
    assert_int_equal(ss.st_nlink, 3);
    /* not taken for a sandbox by gc */
    assert_false(nsbox_state_valid_id(NSBOX_STATE_LOCK_MARK_NAME));
    assert_int_equal(nsbox_state_destroy(&a, &e), 0);
    assert_int_equal(nsbox_state_destroy(&b, &e), 0);
    assert_int_equal(lstat(shared, &ss), 0);
    assert_int_equal(ss.st_nlink, 1);
}

/* Something else by the shared mark's name (a file put there by hand) never becomes a sandbox's
 * "lock": an older gc would lock that one file for every sandbox. The sandbox gets a mark of its
 * own, and the file is left as it was. */
static void test_lock_mark_not_ours_is_not_linked(void **state)
{
    struct fx *f = *state;
    struct nsbox_err e = {0};
    if (nsbox_paths_mkdir_p(f->state, 0700, &e) < 0)
        fail_msg("mkdir: %s", e.msg);
    char shared[PATH_MAX];
    snprintf(shared, sizeof shared, "%s/" NSBOX_STATE_LOCK_MARK_NAME, f->state);
    int fd = open(shared, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    assert_true(fd >= 0);
    close(fd);
    struct nsbox_state st;
    nsbox_state_init(&st);
    if (nsbox_state_create(&st, NULL, NSBOX_WS_TMPFS, &e) != 0)
        fail_msg("create: %s", e.msg);
    char mark[PATH_MAX];
    snprintf(mark, sizeof mark, "%s/lock", st.dir);
    assert_lock_mark(mark);
    struct stat ss;
    assert_int_equal(lstat(shared, &ss), 0);
    assert_true(S_ISREG(ss.st_mode));
    assert_int_equal(ss.st_nlink, 1);
    assert_int_equal(nsbox_state_destroy(&st, &e), 0);
}

/* TMPFS: the workspace exists only inside the sandbox; nothing is made on the host for it. */
static void test_create_tmpfs_workspace_leaves_no_host_trace(void **state)
{
    struct fx *f = *state;
    struct nsbox_state st;
    nsbox_state_init(&st);
    struct nsbox_err e = {0};
    if (nsbox_state_create(&st, NULL, NSBOX_WS_TMPFS, &e) != 0) fail_msg("create: %s", e.msg);
    assert_int_equal(st.ws_kind, NSBOX_WS_TMPFS);
    assert_false(st.fresh_workspace);
    assert_string_equal(st.workspace, "");
    assert_false(exists("%s/%s", f->cache, st.id));
    assert_int_equal(nsbox_state_destroy(&st, &e), 0);
    assert_false(exists("%s/%s", f->state, st.id));
    /* DIR without a directory is a caller's bug, refused */
    nsbox_state_init(&st);
    assert_int_equal(nsbox_state_create(&st, "", NSBOX_WS_DIR, &e), -1);
    nsbox_state_destroy(&st, &e);
}

/* A given workspace is the user's: resolved to its real path, never removed. */
static void test_create_existing_workspace(void **state)
{
    struct fx *f = *state;
    char ws[PATH_MAX], link[PATH_MAX], keep[PATH_MAX];
    snprintf(ws, sizeof ws, "%s/project", f->base);
    snprintf(link, sizeof link, "%s/project-link", f->base);
    snprintf(keep, sizeof keep, "%s/project/precious.txt", f->base);
    make_dir(ws);
    make_file(keep, "user data");
    assert_int_equal(symlink(ws, link), 0);

    struct nsbox_state st;
    nsbox_state_init(&st);
    struct nsbox_err e = {0};
    if (nsbox_state_create(&st, link, NSBOX_WS_DIR, &e) != 0) fail_msg("create: %s", e.msg);
    char real[PATH_MAX];
    assert_non_null(realpath(ws, real));
    assert_string_equal(st.workspace, real);
    assert_false(st.fresh_workspace);
    /* nothing made under the cache dir for a given workspace */
    assert_false(exists("%s/%s", f->cache, st.id));
    assert_int_equal(nsbox_state_destroy(&st, &e), 0);
    assert_true(exists("%s", keep));
    assert_true(exists("%s", ws));
    assert_false(exists("%s/%s", f->state, st.id));
}

static void test_create_bad_workspace(void **state)
{
    struct fx *f = *state;
    char file[PATH_MAX], missing[PATH_MAX];
    snprintf(file, sizeof file, "%s/a-file", f->base);
    snprintf(missing, sizeof missing, "%s/missing", f->base);
    make_file(file, "x");

    struct nsbox_state st;
    nsbox_state_init(&st);
    struct nsbox_err e = {0};
    assert_int_equal(nsbox_state_create(&st, file, NSBOX_WS_DIR, &e), -1);
    assert_int_equal(e.code, NSBOX_E_INVALID);
    assert_int_equal(e.sys_errno, ENOTDIR);
    assert_non_null(strstr(e.msg, file));
    assert_false(st.fresh_workspace);
    char id[NSBOX_ID_LEN + 1];
    memcpy(id, st.id, sizeof id);
    /* the caller cleans up after a failed create: nothing is left */
    assert_int_equal(nsbox_state_destroy(&st, &e), 0);
    assert_false(exists("%s/%s", f->state, id));
    assert_true(exists("%s", file));

    nsbox_state_init(&st);
    assert_int_equal(nsbox_state_create(&st, missing, NSBOX_WS_DIR, &e), -1);
    assert_int_equal(e.sys_errno, ENOENT);
    assert_int_equal(nsbox_state_destroy(&st, &e), 0);
}

static void test_create_given_id_and_collision(void **state)
{
    struct fx *f = *state;
    struct nsbox_state a, b;
    nsbox_state_init(&a);
    nsbox_state_init(&b);
    snprintf(a.id, sizeof a.id, "00112233aabb");
    struct nsbox_err e = {0};
    assert_int_equal(nsbox_state_create(&a, NULL, NSBOX_WS_EXT4, &e), 0);
    struct stat before, after;
    assert_int_equal(stat(a.dir, &before), 0);
    /* a second sandbox with the same id must not take over the first one's directory, empty
     * as it is (rename(2) would replace an empty directory) */
    snprintf(b.id, sizeof b.id, "00112233aabb");
    assert_int_equal(nsbox_state_create(&b, NULL, NSBOX_WS_EXT4, &e), -1);
    assert_int_equal(stat(a.dir, &after), 0);
    assert_int_equal(before.st_ino, after.st_ino);
    assert_true(a.lock_fd >= 0);
    assert_true(lock_held(a.dir)); /* still a's: an empty directory is not replaced either */
    /* a's directory, the shared lock mark, the tombstone log's directory */
    assert_int_equal(count_entries(f->state), 3);
    assert_int_equal(nsbox_state_destroy(&a, &e), 0);
}

/* ---- tombstones ---------------------------------------------------------------------------- */

static off_t file_size(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 ? sb.st_size : -1;
}

static void test_tombstones(void **state)
{
    struct fx *f = *state;
    char a[NSBOX_ID_LEN + 1], b[NSBOX_ID_LEN + 1], r[256], p[PATH_MAX];
    new_id(a);
    new_id(b);
    assert_int_equal(nsbox_state_tombstone_read(a, r, sizeof r), 0); /* nothing yet, no directory */
    assert_int_equal(nsbox_state_tombstone_write(a, "deleted because ttl_seconds=5 expired"), 0);
    assert_int_equal(nsbox_state_tombstone_write(b, "deleted by rm"), 0);
    assert_int_equal(nsbox_state_tombstone_read(a, r, sizeof r), 1);
    assert_string_equal(r, "deleted because ttl_seconds=5 expired");
    assert_int_equal(nsbox_state_tombstone_read(b, r, sizeof r), 1);
    assert_string_equal(r, "deleted by rm");
    /* the newest record of an id wins */
    assert_int_equal(nsbox_state_tombstone_write(a, "deleted by rm"), 0);
    assert_int_equal(nsbox_state_tombstone_read(a, r, sizeof r), 1);
    assert_string_equal(r, "deleted by rm");
    /* a reason cannot make a second record (a newline), and is bounded */
    char c[NSBOX_ID_LEN + 1], forged[64], big[4 * NSBOX_TOMB_REASON_MAX];
    new_id(c);
    snprintf(forged, sizeof forged, "x\n%s forged", b);
    assert_int_equal(nsbox_state_tombstone_write(c, forged), 0);
    assert_int_equal(nsbox_state_tombstone_read(b, r, sizeof r), 1);
    assert_string_equal(r, "deleted by rm");
    assert_int_equal(nsbox_state_tombstone_read(c, r, sizeof r), 1);
    assert_non_null(strstr(r, " forged"));
    memset(big, 'y', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    assert_int_equal(nsbox_state_tombstone_write(c, big), 0);
    char rbig[sizeof big];
    assert_int_equal(nsbox_state_tombstone_read(c, rbig, sizeof rbig), 1);
    assert_int_equal(strlen(rbig), NSBOX_TOMB_REASON_MAX);
    /* a small buffer gets the start of the reason */
    char small[6];
    assert_int_equal(nsbox_state_tombstone_read(b, small, sizeof small), 1);
    assert_string_equal(small, "delet");
    /* not an id: never looked up, never written */
    assert_int_equal(nsbox_state_tombstone_write("../../etc/x", "deleted by rm"), -1);
    assert_int_equal(nsbox_state_tombstone_read("0123456789a", r, sizeof r), 0);
    /* the one file per id of an nsbox before the log */
    char old[NSBOX_ID_LEN + 1];
    new_id(old);
    snprintf(p, sizeof p, "%s/tombstones/%s", f->state, old);
    make_file(p, "deleted because its init process ended");
    assert_int_equal(nsbox_state_tombstone_read(old, r, sizeof r), 1);
    assert_string_equal(r, "deleted because its init process ended");
    /* FIFOs in place of the logs and of an old file: nothing hangs, nothing is found */
    char recent[PATH_MAX], older[PATH_MAX], fifo_id[NSBOX_ID_LEN + 1];
    snprintf(recent, sizeof recent, "%s/tombstones/recent", f->state);
    snprintf(older, sizeof older, "%s/tombstones/older", f->state);
    new_id(fifo_id);
    snprintf(p, sizeof p, "%s/tombstones/%s", f->state, fifo_id);
    assert_int_equal(unlink(recent), 0);
    assert_int_equal(mkfifo(recent, 0600), 0);
    assert_int_equal(mkfifo(older, 0600), 0);
    assert_int_equal(mkfifo(p, 0600), 0);
    assert_int_equal(nsbox_state_tombstone_read(fifo_id, r, sizeof r), 0);
    assert_int_equal(nsbox_state_tombstone_write(fifo_id, "deleted by rm"),
                     -1); /* no reader: ENXIO */
}

/* Bounded: "recent" becomes "older" past the limit, and the one before goes; what is in either
 * is found. */
static void test_tombstones_rotate(void **state)
{
    struct fx *f = *state;
    char first[NSBOX_ID_LEN + 1], id[NSBOX_ID_LEN + 1], r[256], recent[PATH_MAX],
        older[PATH_MAX];
    snprintf(recent, sizeof recent, "%s/tombstones/recent", f->state);
    snprintf(older, sizeof older, "%s/tombstones/older", f->state);
    new_id(first);
    assert_int_equal(nsbox_state_tombstone_write(first, "deleted by rm"), 0);
    const char *reason = "deleted because the client holding it went away"; /* 61 bytes a line */
    int written = 1;
    while (file_size(older) < 0) {
        new_id(id);
        assert_int_equal(nsbox_state_tombstone_write(id, reason), 0);
        written++;
        assert_true(written < 2 * NSBOX_TOMB_ROTATE_BYTES / 61); /* it does rotate */
    }
    assert_true(file_size(older) > NSBOX_TOMB_ROTATE_BYTES);
    assert_true(file_size(recent) < 0 || file_size(recent) < 100);
    assert_int_equal(nsbox_state_tombstone_read(first, r, sizeof r), 1); /* in older */
    assert_string_equal(r, "deleted by rm");
    assert_int_equal(nsbox_state_tombstone_read(id, r, sizeof r), 1);
    assert_string_equal(r, reason);
    /* a second rotation drops the first file, and with it the first record */
    while (file_size(recent) <= NSBOX_TOMB_ROTATE_BYTES - 61) {
        new_id(id);
        assert_int_equal(nsbox_state_tombstone_write(id, reason), 0);
    }
    new_id(id);
    assert_int_equal(nsbox_state_tombstone_write(id, reason), 0);
    assert_int_equal(nsbox_state_tombstone_read(first, r, sizeof r), 0);
    assert_int_equal(nsbox_state_tombstone_read(id, r, sizeof r), 1);
    assert_true(file_size(recent) < 100);
    assert_true(file_size(older) <= NSBOX_TOMB_ROTATE_BYTES + 61);
}

/* A log that grew past what a reader takes in (put there by someone else, or one that could
 * not be renamed): the newest records, at its end, are still found; one that cannot become
 * "older" is cut instead of growing for ever. */
static void test_tombstones_oversized_log(void **state)
{
    struct fx *f = *state;
    char recent[PATH_MAX], older[PATH_MAX], id[NSBOX_ID_LEN + 1], r[128];
    snprintf(recent, sizeof recent, "%s/tombstones/recent", f->state);
    snprintf(older, sizeof older, "%s/tombstones/older", f->state);
    new_id(id);
    assert_int_equal(nsbox_state_tombstone_write(id, "deleted by rm"), 0); /* makes the directory */
    FILE *fp = fopen(recent, "w");
    assert_non_null(fp);
    for (int i = 0; i < 3 * NSBOX_TOMB_ROTATE_BYTES / 40; i++)
        fprintf(fp, "%012x deleted because it was filler\n", i);
    fclose(fp);
    assert_true(file_size(recent) > 2 * NSBOX_TOMB_ROTATE_BYTES);
    /* "older" cannot be replaced: a directory with something in it */
    char in[PATH_MAX + 8];
    make_dir(older);
    snprintf(in, sizeof in, "%s/x", older);
    make_file(in, "");
    new_id(id);
    assert_int_equal(nsbox_state_tombstone_write(id, "deleted because ttl_seconds=7 expired"), 0);
    assert_true(file_size(recent) < 100); /* cut, since it could not be renamed */
    assert_int_equal(nsbox_state_tombstone_read(id, r, sizeof r), 0); /* gone with it */
    /* an oversized log again, this time read: its last record is found */
    fp = fopen(recent, "w");
    assert_non_null(fp);
    for (int i = 0; i < 3 * NSBOX_TOMB_ROTATE_BYTES / 40; i++)
        fprintf(fp, "%012x deleted because it was filler\n", i);
    fprintf(fp, "%s deleted because its init process ended\n", id);
    fclose(fp);
    assert_int_equal(nsbox_state_tombstone_read(id, r, sizeof r), 1);
    assert_string_equal(r, "deleted because its init process ended");
}

/* Writers in parallel, across a rotation: every record whole, none lost. */
static void test_tombstones_concurrent(void **state)
{
    struct fx *f = *state;
    enum { WRITERS = 4, EACH = 3000 };
    const char *reason = "deleted because ttl_seconds=86400 expired"; /* 55 bytes a line */
    fflush(NULL);
    pid_t pids[WRITERS];
    for (int w = 0; w < WRITERS; w++) {
        pids[w] = fork();
        assert_true(pids[w] >= 0);
        if (pids[w] == 0) {
            char id[NSBOX_ID_LEN + 1];
            for (int i = 0; i < EACH; i++) {
                snprintf(id, sizeof id, "%02x%010x", w, i);
                if (nsbox_state_tombstone_write(id, reason) < 0)
                    _exit(1);
            }
            _exit(0);
        }
    }
    for (int w = 0; w < WRITERS; w++) {
        int status;
        assert_int_equal(waitpid(pids[w], &status, 0), pids[w]);
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    /* 4 x 3000 x 55 bytes = 660,000: one rotation exactly */
    int lines = 0;
    const char *names[] = {"recent", "older"};
    for (int k = 0; k < 2; k++) {
        char path[PATH_MAX], line[256];
        snprintf(path, sizeof path, "%s/tombstones/%s", f->state, names[k]);
        FILE *fp = fopen(path, "r");
        assert_non_null(fp);
        while (fgets(line, sizeof line, fp)) {
            char id[NSBOX_ID_LEN + 1];
            snprintf(id, sizeof id, "%.*s", NSBOX_ID_LEN, line);
            if (!nsbox_state_valid_id(id) || strcmp(line + NSBOX_ID_LEN + 1, "deleted because "
                                                    "ttl_seconds=86400 expired\n"))
                fail_msg("a torn record in %s: '%s'", names[k], line);
            lines++;
        }
        fclose(fp);
    }
    assert_int_equal(lines, WRITERS * EACH);
    char r[128];
    assert_int_equal(nsbox_state_tombstone_read("000000000000", r, sizeof r), 1);
    assert_int_equal(nsbox_state_tombstone_read("030000000bb7", r, sizeof r), 1); /* the last */
}

/* ---- gc ------------------------------------------------------------------------------------ */

/* test_gc's scene: what it makes before gc runs, and the names it checks afterwards. */
struct gc_scene {
    struct nsbox_state dead, live;
    struct holder h, hl;
    char legacy[NSBOX_ID_LEN + 1], legacy_dead[NSBOX_ID_LEN + 1], odd[NSBOX_ID_LEN + 1];
    char young[NSBOX_ID_LEN + 1], young50[NSBOX_ID_LEN + 1], old[NSBOX_ID_LEN + 1],
        orphan[NSBOX_ID_LEN + 1];
    char newlive[NSBOX_ID_LEN + 1], newdead[NSBOX_ID_LEN + 1], orphan2[NSBOX_ID_LEN + 1];
    char gone_id[NSBOX_ID_LEN + 1];
    char slotdir[PATH_MAX], slot[PATH_MAX + 16];
};

/* Sandboxes with a lock to look at: dead, live, an older nsbox's (locked inside), odd. */
static void gc_scene_locked(struct fx *f, struct gc_scene *sc)
{
    struct nsbox_err e = {0};
    char p[PATH_MAX];

    /* dead: created, then its owner vanished without destroy (lock released by the kernel) */
    nsbox_state_init(&sc->dead);
    assert_int_equal(nsbox_state_create(&sc->dead, NULL, NSBOX_WS_EXT4, &e), 0);
    make_file(sc->dead.workspace, "a backing file left behind");
    close(sc->dead.lock_fd);
    sc->dead.lock_fd = -1;

    /* live: lock held by another process; old, to show it is the lock that counts */
    nsbox_state_init(&sc->live);
    assert_int_equal(nsbox_state_create(&sc->live, NULL, NSBOX_WS_EXT4, &e), 0);
    make_file(sc->live.workspace, "a live sandbox's backing file");
    close(sc->live.lock_fd);
    sc->live.lock_fd = -1;
    sc->h = hold_lock(sc->live.dir);
    set_age(sc->live.dir, 3600);

    /* made by an older nsbox, which locked a "lock" file inside instead of the directory: its
     * lock is that file's, held (a sandbox still running across an upgrade) or free (dead) */
    new_id(sc->legacy);
    new_id(sc->legacy_dead);
    snprintf(p, sizeof p, "%s/%s", f->state, sc->legacy);
    make_dir(p);
    snprintf(p, sizeof p, "%s/%s/lock", f->state, sc->legacy);
    make_file(p, "");
    sc->hl = hold_lock(p);
    snprintf(p, sizeof p, "%s/%s", f->state, sc->legacy_dead);
    make_dir(p);
    snprintf(p, sizeof p, "%s/%s/lock", f->state, sc->legacy_dead);
    make_file(p, "");

    /* a "lock" that cannot be opened for another reason than ENOENT or our mark (here a
     * directory: EISDIR): unknown, so never taken for dead */
    new_id(sc->odd);
    snprintf(p, sizeof p, "%s/%s", f->state, sc->odd);
    make_dir(p);
    snprintf(p, sizeof p, "%s/%s/lock", f->state, sc->odd);
    make_dir(p);
}

/* Leftovers without a lock: interrupted removals and creates, orphaned workspaces. */
static void gc_scene_unlocked(struct fx *f, struct gc_scene *sc)
{
    char p[PATH_MAX];
    /* unlocked, whatever its age: a removal that was interrupted (a directory under its id is
     * renamed into place with its lock held, so it never exists unlocked while alive) */
    new_id(sc->young);
    new_id(sc->young50);
    new_id(sc->old);
    new_id(sc->orphan);
    snprintf(p, sizeof p, "%s/%s", f->state, sc->young);
    make_dir(p);
    snprintf(p, sizeof p, "%s/%s", f->state, sc->young50);
    make_dir(p);
    set_age(p, 50);
    /* lockless and old */
    snprintf(p, sizeof p, "%s/%s", f->state, sc->old);
    make_dir(p);
    snprintf(p, sizeof p, "%s/%s/root", f->state, sc->old);
    make_dir(p);
    snprintf(p, sizeof p, "%s/%s", f->state, sc->old);
    set_age(p, 120);
    new_id(sc->newlive);
    new_id(sc->newdead);
    snprintf(p, sizeof p, "%s/%s.new-%d", f->state, sc->newlive, (int)getpid());
    make_dir(p);
    snprintf(p, sizeof p, "%s/%s.new-%d", f->state, sc->newdead, 999999999);
    make_dir(p);
    /* workspaces whose state directory is gone (reboot cleared the runtime dir): a backing
     * file, and an older nsbox's directory holding one */
    new_id(sc->orphan2);
    snprintf(p, sizeof p, "%s/%s.ext4", f->cache, sc->orphan2);
    make_file(p, "");
    snprintf(p, sizeof p, "%s/%s", f->cache, sc->orphan);
    make_dir(p);
    snprintf(p, sizeof p, "%s/%s/workspace.ext4", f->cache, sc->orphan);
    make_file(p, "");
    /* an older nsbox's dead sandbox: its workspace directory goes with it */
    snprintf(p, sizeof p, "%s/%s", f->cache, sc->legacy_dead);
    make_dir(p);
}

/* What is not a sandbox (never touched), uid slots, and tombstones. */
static void gc_scene_others(struct fx *f, struct gc_scene *sc)
{
    char p[PATH_MAX];
    /* not sandboxes: never touched */
    snprintf(p, sizeof p, "%s/uids", f->state);
    make_dir(p);
    snprintf(p, sizeof p, "%s/uids/7", f->state);
    make_file(p, "");
    /* root's uid slots are one registry, whatever the state directory (here the fixture's, not
     * the machine's): a slot file there that nobody holds goes too */
    snprintf(sc->slotdir, sizeof sc->slotdir, "%s", geteuid() == 0 ? f->uids : "");
    if (sc->slotdir[0]) {
        struct nsbox_err me;
        char got[PATH_MAX];
        assert_int_equal(nsbox_state_uid_slot_dir(got, sizeof got, &me), 0);
        assert_string_equal(got, sc->slotdir);
        assert_int_equal(nsbox_paths_mkdir_p(sc->slotdir, 0700, &me), 0);
        snprintf(sc->slot, sizeof sc->slot, "%s/%u", sc->slotdir, NSBOX_UID_SLOTS - 1);
        make_file(sc->slot, "");
    }
    snprintf(p, sizeof p, "%s/ABCDEF012345", f->state);
    make_dir(p);
    set_age(p, 3600);
    snprintf(p, sizeof p, "%s/keep-me", f->cache);
    make_dir(p);
    snprintf(p, sizeof p, "%s/0123456789abc", f->cache); /* 13 digits */
    make_dir(p);
    snprintf(p, sizeof p, "%s/0123456789ab.ext4.bak", f->cache);
    make_file(p, "");
    snprintf(p, sizeof p, "%s/0123456789aB.ext4", f->cache);
    make_file(p, "");

    /* tombstones: the log stays; an older nsbox's one file per id goes */
    new_id(sc->gone_id);
    assert_int_equal(nsbox_state_tombstone_write(sc->gone_id, "deleted by rm"), 0);
    snprintf(p, sizeof p, "%s/tombstones/%s", f->state, sc->orphan);
    make_file(p, "deleted by rm");
}

/* After the first gc: what it removed and what it kept. */
static void gc_scene_check(struct fx *f, struct gc_scene *sc, int removed)
{
    assert_false(exists("%s", sc->dead.dir));
    assert_false(exists("%s", sc->dead.workspace));

    assert_true(exists("%s", sc->live.dir));
    assert_true(exists("%s", sc->live.workspace));
    assert_true(exists("%s/%s/lock", f->state, sc->legacy));
    assert_true(exists("%s/%s/lock", f->state, sc->odd));
    assert_false(exists("%s/%s", f->state, sc->legacy_dead));

    assert_false(exists("%s/%s", f->state, sc->young));
    assert_false(exists("%s/%s", f->state, sc->young50));
    assert_false(exists("%s/%s", f->state, sc->old));
    /* a create in progress (its creator, this process, is alive) is kept; a dead creator's is
     * removed */
    assert_true(exists("%s/%s.new-%d", f->state, sc->newlive, (int)getpid()));
    assert_false(exists("%s/%s.new-%d", f->state, sc->newdead, 999999999));
    assert_false(exists("%s/%s", f->cache, sc->orphan));
    assert_false(exists("%s/%s.ext4", f->cache, sc->orphan2));
    assert_false(exists("%s/%s", f->cache, sc->legacy_dead));

    /* a uid slot file nobody holds is removed (slots are taken lowest first, see take_slot);
     * root's are not in the state directory at all */
    if (sc->slotdir[0]) {
        assert_false(exists("%s", sc->slot));
        assert_true(exists("%s/uids/7", f->state));
    } else {
        assert_false(exists("%s/uids/7", f->state));
    }
    assert_false(exists("%s/tombstones/%s", f->state, sc->orphan));
    assert_true(exists("%s/tombstones/recent", f->state));
    char why[64];
    assert_int_equal(nsbox_state_tombstone_read(sc->gone_id, why, sizeof why), 1);
    assert_true(exists("%s/ABCDEF012345", f->state));
    assert_true(exists("%s/keep-me", f->cache));
    assert_true(exists("%s/0123456789abc", f->cache));
    assert_true(exists("%s/0123456789ab.ext4.bak", f->cache));
    assert_true(exists("%s/0123456789aB.ext4", f->cache));

    assert_int_equal(removed, 7); /* dead, legacy_dead, young, young50, old, orphan, orphan2 */
}

static void test_gc(void **state)
{
    struct fx *f = *state;
    struct nsbox_err e = {0};
    static struct gc_scene scene;
    struct gc_scene *sc = &scene;
    memset(sc, 0, sizeof *sc);
    gc_scene_locked(f, sc);
    gc_scene_unlocked(f, sc);
    gc_scene_others(f, sc);

    int removed = nsbox_gc(false, &e);
    if (removed < 0) fail_msg("gc: %s", e.msg);
    gc_scene_check(f, sc, removed);

    /* the owners die: now they are leftovers */
    release_holder(&sc->hl); /* first: its child holds a copy of h's pipe */
    release_holder(&sc->h);
    removed = nsbox_gc(false, &e);
    assert_int_equal(removed, 2);
    assert_false(exists("%s", sc->live.dir));
    assert_false(exists("%s/%s", f->state, sc->legacy));
    assert_false(exists("%s", sc->live.workspace));
    assert_true(exists("%s/%s.new-%d", f->state, sc->newlive, (int)getpid()));

    /* nothing left to do */
    assert_int_equal(nsbox_gc(false, &e), 0);
    sc->dead.dir[0] = sc->live.dir[0] = '\0';
    sc->dead.fresh_workspace = sc->live.fresh_workspace = false;
}

/* A container that joined a pod's user namespace runs with the pod's ids after the pod's first
 * container (the slot's owner) is gone: the slot is given to no new sandbox, nor removed by
 * gc, until the joiner ends too. */
static void test_slot_held_by_pod_joiner(void **state)
{
    (void)state;
    struct nsbox_err e = {0};
    struct nsbox_state a, b, c[8];
    nsbox_state_init(&a);
    nsbox_state_init(&b);
    if (nsbox_state_take_slot(&a, &e) < 0) fail_msg("take: %s", e.msg);
    if (nsbox_state_mark_slot(&a, getpid(), &e) < 0) fail_msg("mark: %s", e.msg);
    int userns = open("/proc/self/ns/user", O_RDONLY | O_CLOEXEC);
    assert_true(userns >= 0);
    if (nsbox_state_hold_pod_slot(&b, nsbox_idmap_slot_base(a.slot), userns, &e) < 0)
        fail_msg("hold: %s", e.msg);
    uint32_t pod = a.slot;
    char dir[PATH_MAX];
    assert_int_equal(nsbox_state_uid_slot_dir(dir, sizeof dir, &e), 0);
    assert_int_equal(nsbox_state_destroy(&a, &e), 0);
    /* the attack: the next sandboxes would take the freed slot first (its file is there) */
    for (size_t i = 0; i < 8; i++) {
        nsbox_state_init(&c[i]);
        if (nsbox_state_take_slot(&c[i], &e) < 0) fail_msg("take: %s", e.msg);
        assert_int_not_equal(c[i].slot, pod);
    }
    assert_true(nsbox_gc(false, &e) >= 0);
    assert_true(exists("%s/%u", dir, pod));
    /* the joiner ends: the slot is nobody's, gc removes its file */
    assert_int_equal(nsbox_state_destroy(&b, &e), 0);
    assert_true(nsbox_gc(false, &e) >= 0);
    assert_false(exists("%s/%u", dir, pod));
    for (size_t i = 0; i < 8; i++)
        assert_int_equal(nsbox_state_destroy(&c[i], &e), 0);
    close(userns);
}

/* A pod's user namespace kept open past its first container's end, whose slot another sandbox
 * took since, is no longer that slot's: joining it is refused; so are ids that are part of
 * nsbox's without being a slot's range, and a namespace the slot's file does not name. */
static void test_pod_slot_refused(void **state)
{
    (void)state;
    struct nsbox_err e = {0};
    struct nsbox_state a, b, c;
    nsbox_state_init(&a);
    nsbox_state_init(&b);
    nsbox_state_init(&c);
    int userns = open("/proc/self/ns/user", O_RDONLY | O_CLOEXEC);
    int other = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
    assert_true(userns >= 0 && other >= 0);
    if (nsbox_state_take_slot(&a, &e) < 0) fail_msg("take: %s", e.msg);
    if (nsbox_state_mark_slot(&a, getpid(), &e) < 0) fail_msg("mark: %s", e.msg);
    uint32_t base = nsbox_idmap_slot_base(a.slot);
    assert_int_equal(nsbox_state_hold_pod_slot(&b, base, other, &e), -1);
    assert_non_null(strstr(e.msg, "its first container is gone"));
    assert_int_equal(nsbox_state_destroy(&a, &e), 0);
    if (nsbox_state_take_slot(&c, &e) < 0) fail_msg("take: %s", e.msg);
    assert_int_equal(c.slot, a.slot); /* the one free file, taken again */
    assert_int_equal(nsbox_state_hold_pod_slot(&b, base, userns, &e), -1);
    assert_non_null(strstr(e.msg, "its first container is gone"));
    assert_int_equal(b.pod_slot_fd, -1);
    /* taken, not marked yet: as c's, as the slot of a first container an older nsbox created
     * (it never marked one), which an upgrade meets: said, with the fix */
    char want[512];
    snprintf(want, sizeof want,
             "the joined user namespace (host ids %u to %u) is not recorded in its uid slot: its "
             "first container is gone and nsbox is giving its ids to another sandbox, or that "
             "container was created by an nsbox older than this one, which did not record it; "
             "after an upgrade, restart the pod (delete its containers and create them again)",
             base, base + 65535);
    assert_string_equal(e.msg, want);
    assert_int_equal(e.code, NSBOX_E_POLICY);
    /* marked with another namespace's name: no upgrade explains that */
    if (nsbox_state_mark_slot(&c, getpid(), &e) < 0) fail_msg("mark: %s", e.msg);
    assert_int_equal(nsbox_state_hold_pod_slot(&b, base, other, &e), -1);
    assert_non_null(strstr(e.msg, "is no running sandbox's: its first container is gone"));
    assert_null(strstr(e.msg, "upgrade"));
    assert_int_equal(nsbox_state_hold_pod_slot(&b, NSBOX_UID_BASE + 5, userns, &e), -1);
    assert_non_null(strstr(e.msg, "not one sandbox's range"));
    assert_int_equal(nsbox_state_hold_pod_slot(&b, NSBOX_UID_BASE - 100, userns, &e), -1);
    /* ids no slot gives: nothing to hold */
    assert_int_equal(nsbox_state_hold_pod_slot(&b, 100000, userns, &e), 0);
    assert_int_equal(b.pod_slot_fd, -1);
    assert_int_equal(nsbox_state_destroy(&c, &e), 0);
    assert_int_equal(nsbox_state_destroy(&b, &e), 0);
    close(userns);
    close(other);
}

/* gc removes links, never what they point at. */
static void test_gc_does_not_follow_symlinks(void **state)
{
    struct fx *f = *state;
    struct nsbox_err e = {0};
    char outside[PATH_MAX], p[PATH_MAX], t[PATH_MAX];
    snprintf(outside, sizeof outside, "%s/outside", f->base);
    make_dir(outside);
    snprintf(p, sizeof p, "%s/precious", outside);
    make_file(p, "do not delete");
    snprintf(p, sizeof p, "%s/lock", outside); /* a free "lock" to make it look dead */
    make_file(p, "");
    snprintf(p, sizeof p, "%s/workspace", outside);
    make_dir(p);

    snprintf(t, sizeof t, "%s/run", f->base);
    make_dir(t);
    make_dir(f->state);
    snprintf(t, sizeof t, "%s/cache", f->base);
    make_dir(t);
    make_dir(f->cache);

    char a[NSBOX_ID_LEN + 1], b[NSBOX_ID_LEN + 1];
    new_id(a);
    new_id(b);
    snprintf(p, sizeof p, "%s/%s", f->state, a); /* state dir that is a symlink */
    assert_int_equal(symlink(outside, p), 0);
    snprintf(p, sizeof p, "%s/%s", f->cache, a);
    assert_int_equal(symlink(outside, p), 0);
    snprintf(p, sizeof p, "%s/%s", f->cache, b); /* orphan workspace that is a symlink */
    assert_int_equal(symlink(outside, p), 0);

    assert_true(nsbox_gc(false, &e) >= 0);
    assert_true(exists("%s/precious", outside));
    assert_true(exists("%s/lock", outside));
    assert_true(exists("%s/workspace", outside));
}

static void test_gc_nothing_there(void **state)
{
    (void)state;
    struct nsbox_err e = {0};
    /* neither directory exists yet */
    assert_int_equal(nsbox_gc(false, &e), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_new_id),
        cmocka_unit_test(test_valid_id),
        cmocka_unit_test_setup_teardown(test_create_fresh_workspace, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lock_marks_share_one_inode, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lock_mark_not_ours_is_not_linked, setup, teardown),
        cmocka_unit_test_setup_teardown(test_create_tmpfs_workspace_leaves_no_host_trace, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_create_existing_workspace, setup, teardown),
        cmocka_unit_test_setup_teardown(test_create_bad_workspace, setup, teardown),
        cmocka_unit_test_setup_teardown(test_create_given_id_and_collision, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tombstones, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tombstones_rotate, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tombstones_oversized_log, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tombstones_concurrent, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gc, setup, teardown),
        cmocka_unit_test_setup_teardown(test_slot_held_by_pod_joiner, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pod_slot_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gc_does_not_follow_symlinks, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gc_nothing_there, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
