/* File operations under /workspace (service/files*.c), as test_files.c (which describes the
 * fixture, files_fixture.h): remove, mkdir, the escapes, ownership and the race. */

#include "files_fixture.h"

/* The outside tree is exactly as the fixture made it. */
static void outside_untouched(struct fx *f)
{
    file_is(f, "outside/secret", "host-secret\n");
    file_is(f, "outside/f", "SECRET");
    file_is(f, "outside/sub/canary", "canary");
    struct stat st;
    assert_int_equal(fstatat(f->basefd, "outside/secret", &st, 0), 0);
    assert_true(same_inode(&st, &f->out_secret));
    assert_true(st.st_mtim.tv_sec == f->out_secret.st_mtim.tv_sec &&
                st.st_mtim.tv_nsec == f->out_secret.st_mtim.tv_nsec);
    assert_int_equal(fstatat(f->basefd, "outside/f", &st, 0), 0);
    assert_true(st.st_mtim.tv_sec == f->out_f.st_mtim.tv_sec &&
                st.st_mtim.tv_nsec == f->out_f.st_mtim.tv_nsec);
    int n = 0;
    DIR *d = opendir(f->base);
    assert_non_null(d);
    closedir(d);
    char p[PATH_MAX + 16];
    snprintf(p, sizeof p, "%s/outside", f->base);
    d = opendir(p);
    assert_non_null(d);
    struct dirent *de;
    while ((de = readdir(d)))
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) n++;
    closedir(d);
    assert_int_equal(n, 4); /* secret f outside-only sub */
    snprintf(p, sizeof p, "%s/outside/sub", f->base);
    d = opendir(p);
    assert_non_null(d);
    n = 0;
    while ((de = readdir(d)))
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) n++;
    closedir(d);
    assert_int_equal(n, 1);
}

/* ---- remove, mkdir ------------------------------------------------------------------------- */

static void t_remove(void **state)
{
    FX;
    struct res r;
    char t[PATH_MAX + 32];
    assert_int_equal(do_op(f, rq("remove", "a/b"), -1, &r), 0);
    res_free(&r);
    assert_false(exists(f, "ws/a/b"));
    assert_int_equal(do_op(f, rq("remove", "a/b"), -1, &r), -1);
    assert_int_equal(r.e.code, NSBOX_E_NOTFOUND);
    res_free(&r);
    /* A symlink goes, its target stays. */
    snprintf(t, sizeof t, "%s/outside/secret", f->base);
    put_link(f->basefd, t, "ws/abs_out");
    put_link(f->basefd, "../outside/secret", "ws/rel_out");
    put_link(f->basefd, "a", "ws/toa");
    assert_int_equal(do_op(f, rq("remove", "abs_out"), -1, &r), 0);
    res_free(&r);
    assert_int_equal(do_op(f, rq("remove", "rel_out"), -1, &r), 0);
    res_free(&r);
    assert_int_equal(do_op(f, rq("remove", "toa"), -1, &r), 0); /* even without recursive */
    res_free(&r);
    assert_true(exists(f, "ws/a"));
    assert_false(exists(f, "ws/toa"));
    /* Directories: only with recursive, even empty ones. */
    assert_int_equal(do_op(f, rq("remove", "a"), -1, &r), -1);
    assert_int_equal(r.e.code, NSBOX_E_INVALID);
    assert_non_null(strstr(r.e.msg, "recursive"));
    res_free(&r);
    assert_true(exists(f, "ws/a"));
    /* A tree with links out, a FIFO, and directories the sandbox locked (mode 0). */
    put_dir(f->basefd, "ws/t");
    put_dir(f->basefd, "ws/t/u");
    put_dir(f->basefd, "ws/t/u/v");
    put_file(f->basefd, "ws/t/u/v/file", "x");
    put_file(f->basefd, "ws/t/u/f", "x");
    snprintf(t, sizeof t, "%s/outside", f->base);
    put_link(f->basefd, t, "ws/t/u/abs_outdir");
    put_link(f->basefd, "../../../outside", "ws/t/rel_outdir");
    put_link(f->basefd, "/", "ws/t/root");
    assert_int_equal(mkfifoat(f->basefd, "ws/t/u/fifo", 0600), 0);
    put_dir(f->basefd, "ws/t/locked");
    put_file(f->basefd, "ws/t/locked/in", "x");
    put_dir(f->basefd, "ws/t/locked/deeper");
    assert_int_equal(fchmodat(f->basefd, "ws/t/locked/deeper", 0, 0), 0);
    assert_int_equal(fchmodat(f->basefd, "ws/t/locked", 0, 0), 0);
    cJSON *q = rq("remove", "/workspace/t");
    cJSON_AddBoolToObject(q, "recursive", true);
    assert_int_equal(do_op(f, q, -1, &r), 0);
    res_free(&r);
    assert_false(exists(f, "ws/t"));
    assert_true(exists(f, "ws/etc/passwd"));
    outside_untouched(f);
    /* Never the workspace itself. */
    const char *roots[] = {"/workspace", "/", ".", "/workspace/.", "a/.."};
    for (size_t i = 0; i < sizeof roots / sizeof *roots; i++) {
        q = rq("remove", roots[i]);
        cJSON_AddBoolToObject(q, "recursive", true);
        assert_int_equal(do_op(f, q, -1, &r), -1);
        assert_int_equal(r.e.code, NSBOX_E_INVALID);
        res_free(&r);
    }
    assert_true(exists(f, "ws/etc/passwd"));
    assert_int_equal(do_op(f, rq("remove", "../outside/secret"), -1, &r), -1);
    assert_int_equal(r.e.code, NSBOX_E_NOTFOUND);
    res_free(&r);
    outside_untouched(f);
    check_fds(f);
}

static void t_remove_deep(void **state)
{
    FX;
    int d = openat(f->basefd, "ws", O_PATH | O_DIRECTORY | O_CLOEXEC);
    for (int i = 0; i < NSBOX_FILES_RM_MAX_DEPTH + 10; i++) {
        assert_int_equal(mkdirat(d, "n", 0755), 0);
        int nd = openat(d, "n", O_PATH | O_DIRECTORY | O_CLOEXEC);
        assert_true(nd >= 0);
        close(d);
        d = nd;
    }
    close(d);
    cJSON *q = rq("remove", "n");
    cJSON_AddBoolToObject(q, "recursive", true);
    struct res r;
    assert_int_equal(do_op(f, q, -1, &r), -1);
    assert_int_equal(r.e.sys_errno, ELOOP);
    assert_non_null(strstr(r.e.msg, "deeper than"));
    res_free(&r);
    assert_true(exists(f, "ws/n"));
    check_fds(f);
}

/* A mount point inside the workspace (the host's doing): its contents are not removed. Needs a
 * mount namespace: as root, or in a user namespace where the kernel allows one. */
static void t_remove_mount(void **state)
{
    FX;
    put_dir(f->basefd, "ws/m");
    put_dir(f->basefd, "ws/m/mnt");
    put_file(f->basefd, "ws/m/plain", "x");
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        uid_t uid = geteuid();
        gid_t gid = getegid();
        if (uid != 0) {
            if (unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) _exit(3);
            char m[64];
            int fd = open("/proc/self/setgroups", O_WRONLY);
            if (fd >= 0) {
                if (write(fd, "deny", 4) < 0) {
                }
                close(fd);
            }
            snprintf(m, sizeof m, "%u %u 1", uid, uid);
            fd = open("/proc/self/uid_map", O_WRONLY);
            if (fd < 0 || write(fd, m, strlen(m)) < 0) _exit(3);
            close(fd);
            snprintf(m, sizeof m, "%u %u 1", gid, gid);
            fd = open("/proc/self/gid_map", O_WRONLY);
            if (fd < 0 || write(fd, m, strlen(m)) < 0) _exit(3);
            close(fd);
        } else if (unshare(CLONE_NEWNS) != 0) {
            _exit(3);
        }
        if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) _exit(3);
        char p[PATH_MAX + 16];
        snprintf(p, sizeof p, "%s/m/mnt", f->ws);
        if (mount("tmpfs", p, "tmpfs", 0, "size=1m") != 0) _exit(3);
        snprintf(p, sizeof p, "%s/m/mnt/on-tmpfs", f->ws);
        int fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        if (fd < 0) _exit(4);
        close(fd);
        /* The fd from before unshare sees the old namespace's mounts: open the workspace again. */
        int ws = open(f->ws, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (ws < 0) _exit(5);
        struct nsbox_request q;
        memset(&q, 0, sizeof q);
        q.op = NSBOX_OP_REMOVE;
        q.recursive = true;
        snprintf(q.path, sizeof q.path, "m");
        struct nsbox_err e = {0};
        cJSON *rep = nsbox_proto_reply_ok(NULL);
        int out = -1;
        int rc = nsbox_files_op(ws, &f->st, &q, -1, rep, &out, &e);
        cJSON_Delete(rep);
        if (rc == 0 || e.sys_errno != EXDEV || !strstr(e.msg, "mount point")) _exit(6);
        if (access(p, F_OK) != 0) _exit(7);
        umount2(p, MNT_DETACH);
        _exit(0);
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    if (WEXITSTATUS(status) == 3) skip();
    assert_int_equal(WEXITSTATUS(status), 0);
}

static void t_mkdir(void **state)
{
    FX;
    umask(077);
    struct res r;
    assert_int_equal(do_op(f, rq("mkdir", "m"), -1, &r), 0);
    res_free(&r);
    assert_int_equal(mode_of(f, "ws/m"), 0755);
    assert_int_equal(do_op(f, rq("mkdir", "m"), -1, &r), -1);
    assert_int_equal(r.e.sys_errno, EEXIST);
    res_free(&r);
    assert_int_equal(do_op(f, rq("mkdir", "p/q/r"), -1, &r), -1);
    assert_int_equal(r.e.code, NSBOX_E_NOTFOUND);
    res_free(&r);
    cJSON *q = rq("mkdir", "/workspace/p/q/r");
    cJSON_AddBoolToObject(q, "parents", true);
    cJSON_AddNumberToObject(q, "mode", 0700);
    assert_int_equal(do_op(f, q, -1, &r), 0);
    res_free(&r);
    assert_int_equal(mode_of(f, "ws/p/q"), 0755);
    assert_int_equal(mode_of(f, "ws/p/q/r"), 0700);
    q = rq("mkdir", "p/q/r");
    cJSON_AddBoolToObject(q, "parents", true);
    assert_int_equal(do_op(f, q, -1, &r), 0); /* mkdir -p: an existing directory is fine */
    res_free(&r);
    q = rq("mkdir", "a/b/c");
    cJSON_AddBoolToObject(q, "parents", true);
    assert_int_equal(do_op(f, q, -1, &r), -1);
    assert_int_equal(r.e.sys_errno, ENOTDIR);
    assert_non_null(strstr(r.e.msg, "/workspace/a/b exists and is not a directory"));
    res_free(&r);
    /* Through symlinks: never out, and -p creates nothing through any symlink. */
    char t[PATH_MAX + 32];
    snprintf(t, sizeof t, "%s/outside", f->base);
    put_link(f->basefd, t, "ws/abs_outdir");
    put_link(f->basefd, "../outside", "ws/rel_outdir");
    assert_int_equal(do_op(f, rq("mkdir", "abs_outdir/new"), -1, &r), -1);
    assert_int_equal(r.e.code, NSBOX_E_NOTFOUND);
    res_free(&r);
    assert_int_equal(do_op(f, rq("mkdir", "rel_outdir/new"), -1, &r), -1);
    res_free(&r);
    q = rq("mkdir", "abs_outdir/new/deeper");
    cJSON_AddBoolToObject(q, "parents", true);
    assert_int_equal(do_op(f, q, -1, &r), -1);
    assert_int_equal(r.e.sys_errno, ELOOP);
    assert_non_null(strstr(r.e.msg, "is a symlink"));
    res_free(&r);
    q = rq("mkdir", "../../outside/new");
    cJSON_AddBoolToObject(q, "parents", true);
    assert_int_equal(do_op(f, q, -1, &r), 0); /* `..` stops at the workspace */
    res_free(&r);
    assert_true(exists(f, "ws/outside/new"));
    q = rq("mkdir", "/");
    assert_int_equal(do_op(f, q, -1, &r), -1);
    assert_int_equal(r.e.code, NSBOX_E_INVALID);
    res_free(&r);
    outside_untouched(f);
    umask(022);
    check_fds(f);
}

/* ---- escapes ------------------------------------------------------------------------------- */

static void t_escape_dotdot(void **state)
{
    FX;
    struct res r;
    const char *paths[] = {"../outside/secret",
                           "/workspace/../../outside/secret",
                           "/workspace/../outside/secret",
                           "a/../../../outside/secret",
                           "../../../../../../../../outside/secret",
                           "../ws/../outside/f"};
    for (size_t i = 0; i < sizeof paths / sizeof *paths; i++) {
        assert_int_equal(op_read(f, paths[i], &r), -1);
        assert_int_equal(r.e.code, NSBOX_E_NOTFOUND);
        res_free(&r);
        assert_int_equal(do_op(f, rq("stat", paths[i]), -1, &r), -1);
        assert_int_equal(r.e.code, NSBOX_E_NOTFOUND);
        res_free(&r);
        assert_int_equal(write_str(f, paths[i], "pwned", false, -1, &r), -1);
        res_free(&r);
        assert_int_equal(do_op(f, rq("remove", paths[i]), -1, &r), -1);
        res_free(&r);
    }
    /* `..` clamps at the workspace: "../etc/passwd" is the workspace's. */
    char buf[64];
    assert_int_equal(read_str(f, "../../etc/passwd", buf, sizeof buf, &r), 0);
    assert_string_equal(buf, "ws-passwd");
    res_free(&r);
    /* With mkdir, the write lands inside. */
    assert_int_equal(write_str(f, "../outside/secret", "inside", true, -1, &r), 0);
    res_free(&r);
    file_is(f, "ws/outside/secret", "inside");
    outside_untouched(f);
    check_fds(f);
}

static void t_escape_symlinks(void **state)
{
    FX;
    char t[PATH_MAX + 32];
    put_link(f->basefd, "/etc/passwd", "ws/abs");
    put_link(f->basefd, "../../../../../../etc/passwd", "ws/rel_escape");
    snprintf(t, sizeof t, "%s/outside/secret", f->base);
    put_link(f->basefd, t, "ws/abs_out");
    put_link(f->basefd, "../outside/secret", "ws/esc_out");
    snprintf(t, sizeof t, "%s/outside", f->base);
    put_link(f->basefd, t, "ws/abs_outdir");
    put_link(f->basefd, "loop2", "ws/loop1");
    put_link(f->basefd, "loop1", "ws/loop2");
    put_link(f->basefd, "self", "ws/self");
    put_link(f->basefd, "/proc/self/root/etc/passwd", "ws/proc");
    struct stat want, got;
    assert_int_equal(fstatat(f->basefd, "ws/etc/passwd", &want, 0), 0);
    struct res r;
    /* Absolute and climbing links resolve inside: to the workspace's own etc/passwd. */
    const char *inside[] = {"abs", "rel_escape", "/workspace/abs"};
    for (size_t i = 0; i < sizeof inside / sizeof *inside; i++) {
        assert_int_equal(op_read(f, inside[i], &r), 0);
        assert_int_equal(fstat(r.out_fd, &got), 0);
        assert_true(same_inode(&got, &want));
        res_free(&r);
    }
    /* Links to the host's files name nothing inside. */
    const char *out[] = {"abs_out", "esc_out", "abs_outdir/secret", "abs_outdir/../outside/f",
                         "proc"};
    for (size_t i = 0; i < sizeof out / sizeof *out; i++) {
        assert_int_equal(op_read(f, out[i], &r), -1);
        assert_true(r.e.code == NSBOX_E_NOTFOUND || r.e.sys_errno == ELOOP);
        res_free(&r);
        assert_int_equal(write_str(f, out[i], "pwned", false, -1, &r), -1);
        res_free(&r);
    }
    assert_int_equal(op_read(f, "abs_out", &r), -1);
    assert_non_null(strstr(r.e.msg, "a symlink to"));
    res_free(&r);
    /* Loops. */
    const char *loops[] = {"loop1", "self", "loop2/x"};
    for (size_t i = 0; i < sizeof loops / sizeof *loops; i++) {
        assert_int_equal(op_read(f, loops[i], &r), -1);
        assert_int_equal(r.e.code, NSBOX_E_INVALID);
        assert_int_equal(r.e.sys_errno, ELOOP);
        res_free(&r);
    }
    assert_int_equal(do_op(f, rq("list", "loop1"), -1, &r), -1);
    assert_int_equal(r.e.sys_errno, ELOOP);
    res_free(&r);
    assert_int_equal(write_str(f, "loop1/x", "x", true, -1, &r), -1);
    res_free(&r);
    /* Through a link to an outside directory, with mkdir: refused, nothing created. */
    assert_int_equal(write_str(f, "abs_outdir/new", "pwned", true, -1, &r), -1);
    assert_int_equal(r.e.code, NSBOX_E_INVALID);
    res_free(&r);
    outside_untouched(f);
    check_fds(f);
}

/* A symlink at the leaf of a write is refused, never followed: not even a dangling one. */
static void t_write_leaf_symlink(void **state)
{
    FX;
    char t[PATH_MAX + 32];
    snprintf(t, sizeof t, "%s/outside/secret", f->base);
    put_link(f->basefd, t, "ws/leak");
    put_link(f->basefd, "../outside/secret", "ws/leak_rel");
    snprintf(t, sizeof t, "%s/outside/created", f->base);
    put_link(f->basefd, t, "ws/dangling");
    put_link(f->basefd, "a/b", "ws/inside_link");
    struct res r;
    const char *links[] = {"leak", "leak_rel", "dangling", "/workspace/leak", "inside_link"};
    for (size_t i = 0; i < sizeof links / sizeof *links; i++) {
        for (int mk = 0; mk < 2; mk++) {
            assert_int_equal(write_str(f, links[i], "pwned", mk, -1, &r), -1);
            assert_int_equal(r.e.code, NSBOX_E_INVALID);
            assert_int_equal(r.e.sys_errno, ELOOP);
            assert_non_null(strstr(r.e.msg, "refusing to write through it"));
            res_free(&r);
        }
    }
    file_is(f, "ws/a/b", "ab");
    assert_false(exists(f, "outside/created"));
    assert_false(exists(f, "ws/outside"));
    outside_untouched(f);
    check_fds(f);
}

/* ---- ownership (root only) ----------------------------------------------------------------- */

static void t_privileged_owner(void **state)
{
    FX;
    if (geteuid() != 0) skip();
    f->st.privileged = true;
    f->st.ws_kind = NSBOX_WS_EXT4; /* nsbox's own: root works there and hands files over */
    f->st.slot = 42;
    const uid_t want = nsbox_idmap_slot_base(42) + NSBOX_SANDBOX_UID;
    struct res r;
    assert_int_equal(write_str(f, "own/sub/x", "x", true, -1, &r), 0);
    res_free(&r);
    cJSON *q = rq("mkdir", "p/q");
    cJSON_AddBoolToObject(q, "parents", true);
    assert_int_equal(do_op(f, q, -1, &r), 0);
    res_free(&r);
    assert_int_equal(do_op(f, rq("mkdir", "single"), -1, &r), 0);
    res_free(&r);
    const char *made[] = {"ws/own", "ws/own/sub", "ws/own/sub/x", "ws/p", "ws/p/q", "ws/single"};
    for (size_t i = 0; i < sizeof made / sizeof *made; i++) {
        struct stat st;
        assert_int_equal(fstatat(f->basefd, made[i], &st, AT_SYMLINK_NOFOLLOW), 0);
        assert_int_equal(st.st_uid, want);
        assert_int_equal(st.st_gid, want);
    }
    /* An existing file keeps its owner. */
    assert_int_equal(write_str(f, "a/b", "new", false, -1, &r), 0);
    res_free(&r);
    struct stat st;
    assert_int_equal(fstatat(f->basefd, "ws/a/b", &st, 0), 0);
    assert_int_equal(st.st_uid, 0);
    check_fds(f);
}

/* A directory bound plainly (root's, not idmapped): the operations have the sandbox's rights,
 * not root's. A symlink the sandbox planted where it may write led root's read to a file the
 * sandbox could not open (found by an attacker's review). */
static void t_privileged_plain_directory(void **state)
{
    FX;
    if (geteuid() != 0) skip();
    f->st.privileged = true;
    f->st.ws_kind = NSBOX_WS_DIR;
    f->st.ws_idmapped = false;
    f->st.slot = 42;
    put_file(f->basefd, "ws/secret", "ROOT");
    assert_int_equal(fchmodat(f->basefd, "ws/secret", 0600, 0), 0);
    put_dir(f->basefd, "ws/out");
    assert_int_equal(fchmodat(f->basefd, "ws/out", 0777, 0), 0);
    assert_int_equal(symlinkat("/secret", f->basefd, "ws/out/result"), 0);
    struct res r;
    for (int i = 0; i < 2; i++) {
        assert_int_equal(do_op(f, rq("read", i ? "out/result" : "secret"), -1, &r), -1);
        assert_int_equal(r.e.sys_errno, EACCES);
        res_free(&r);
    }
    assert_int_equal(write_str(f, "secret", "PWNED", false, -1, &r), -1);
    res_free(&r);
    file_is(f, "ws/secret", "ROOT");
    /* where the sandbox may write, the file is made as the sandbox's user */
    assert_int_equal(write_str(f, "out/mine", "x", false, -1, &r), 0);
    res_free(&r);
    struct stat st;
    assert_int_equal(fstatat(f->basefd, "ws/out/mine", &st, 0), 0);
    assert_int_equal(st.st_uid, nsbox_idmap_slot_base(42) + NSBOX_SANDBOX_UID);
    assert_int_equal(setfsuid((uid_t)-1), 0); /* and the supervisor is root again */
    check_fds(f);
}

/* ---- the race ------------------------------------------------------------------------------ */

struct swapper {
    int dirfd;
    atomic_bool stop;
    atomic_long swaps;
};

static void *swap_loop(void *arg)
{
    struct swapper *s = arg;
    while (!atomic_load(&s->stop)) {
        /* d (a real directory) <-> swap (a link out), then d <-> swap_rel (a relative one) */
        if (renameat2(s->dirfd, "d", s->dirfd, "swap", RENAME_EXCHANGE) == 0)
            atomic_fetch_add(&s->swaps, 1);
        if (renameat2(s->dirfd, "d", s->dirfd, "swap_rel", RENAME_EXCHANGE) == 0)
            atomic_fetch_add(&s->swaps, 1);
    }
    return NULL;
}

/* While a thread keeps swapping a directory with symlinks to outside the workspace, every
 * operation through it either acts inside or fails: the outside canaries are never read,
 * written, listed or removed. */
static void race(struct fx *f, enum nsbox_sp_backend backend)
{
    if (backend == NSBOX_SP_BACKEND_OPENAT2 && !nsbox_sp_have_openat2()) return;
    nsbox_sp_set_backend(backend);
    put_dir(f->basefd, "ws/d");
    put_file(f->basefd, "ws/d/f", "INSIDE");
    put_dir(f->basefd, "ws/d/sub");
    char t[PATH_MAX + 32];
    snprintf(t, sizeof t, "%s/outside", f->base);
    put_link(f->basefd, t, "ws/swap");
    put_link(f->basefd, "../outside", "ws/swap_rel");
    struct swapper s = {.dirfd = openat(f->basefd, "ws", O_PATH | O_DIRECTORY | O_CLOEXEC)};
    assert_true(s.dirfd >= 0);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, swap_loop, &s), 0);
    long ok = 0, failed = 0;
    double t0 = now_s();
    for (long i = 0;; i++) {
        double el = now_s() - t0;
        if (i >= 3000 && (el > 1.5 || (ok > 200 && el > 0.5))) break;
        if (el > 8) break;
        struct res r;
        char buf[64];
        int rc;
        switch (i % 7) {
        case 0:
            rc = write_str(f, "d/f", "INSIDE", false, -1, &r);
            break;
        case 1:
            rc = read_str(f, "d/f", buf, sizeof buf, &r);
            if (rc == 0) {
                struct stat st;
                assert_int_equal(fstat(r.out_fd, &st), 0);
                if (same_inode(&st, &f->out_f) || strstr(buf, "SECRET"))
                    fail_msg("read d/f returned the outside file (iteration %ld)", i);
            }
            break;
        case 2:
            rc = write_str(f, "d/new/x", "INSIDE", true, -1, &r);
            break;
        case 3:
            rc = do_op(f, rq("list", "d"), -1, &r);
            if (rc == 0 && (entry(r.reply, "outside-only") || entry(r.reply, "secret")))
                fail_msg("list d listed the outside directory (iteration %ld)", i);
            break;
        case 4:
            rc = do_op(f, rq("stat", "d/outside-only"), -1, &r);
            if (rc == 0) fail_msg("stat reached the outside directory (iteration %ld)", i);
            break;
        case 5: {
            cJSON *q = rq("remove", "d/sub");
            cJSON_AddBoolToObject(q, "recursive", true);
            rc = do_op(f, q, -1, &r);
            break;
        }
        default: {
            cJSON *q = rq("mkdir", "d/sub/deeper");
            cJSON_AddBoolToObject(q, "parents", true);
            rc = do_op(f, q, -1, &r);
            break;
        }
        }
        if (rc == 0)
            ok++;
        else
            failed++;
        res_free(&r);
    }
    atomic_store(&s.stop, true);
    pthread_join(th, NULL);
    close(s.dirfd);
    print_message("      race (%s): %ld swaps; %ld operations succeeded inside, %ld failed "
                  "cleanly\n",
                  backend == NSBOX_SP_BACKEND_WALK ? "walker" : "openat2", atomic_load(&s.swaps),
                  ok, failed);
    assert_true(atomic_load(&s.swaps) > 0);
    assert_true(ok > 0);
    outside_untouched(f);
    assert_false(exists(f, "outside/new"));
    assert_false(exists(f, "outside/sub/deeper"));
}

static void t_race_openat2(void **state)
{
    FX;
    race(f, NSBOX_SP_BACKEND_OPENAT2);
    check_fds(f);
}

static void t_race_walker(void **state)
{
    FX;
    race(f, NSBOX_SP_BACKEND_WALK);
    check_fds(f);
}

int main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(t_remove),
        T(t_remove_deep),
        T(t_remove_mount),
        T(t_mkdir),
        T(t_escape_dotdot),
        T(t_escape_symlinks),
        T(t_write_leaf_symlink),
        T(t_privileged_owner),
        T(t_privileged_plain_directory),
        T(t_race_openat2),
        T(t_race_walker),
    };
    return cmocka_run_group_tests_name("files", tests, NULL, NULL);
}
