/* Root filesystem assembly (rootfs/mounts.c), without root: part 2 (part 1, the pure plan, is
 * in test_mounts.c; the configurations both build on are in mounts_world.h).
 *
 * Part 2, the executor (nsbox_mounts_prepare / nsbox_mounts_enter) against a fake `struct
 * nsbox_sys` that records every call. The executor's own open()/fchdir()/chdir() are real, on
 * mkdtemp directories standing in for the staging root and the image root; the fake records the
 * working directory at each call, so "targets are relative to the new root" is checked against
 * the directory the process is really in. */

#include "mounts_world.h"

/* ================================ executor ================================================== */

enum ck {
    C_MOUNT,
    C_UMOUNT2,
    C_PIVOT,
    C_OPEN_TREE,
    C_SETATTR_FD,
    C_SETATTR_PATH,
    C_PROPAGATION,
    C_MOVE,
    C_MKDIR,
    C_SYMLINK,
    C_CREATE,
    C_WRITE,
    C_CLOSE,
    C_ANY,
};

struct call {
    enum ck k;
    char path[512]; /* target / path / new_root */
    char src[512];  /* mount source, symlink text, put_old */
    bool src_null;
    char fstype[32];
    bool fstype_null;
    char data[128];
    bool data_null;
    unsigned long flags;
    int fd;  /* open_tree: returned; setattr/move/close: argument */
    int dfd; /* open_tree */
    struct stat dfd_st;
    bool dfd_st_ok;
    int recursive;
    uint64_t set, clr;
    mode_t mode;
    struct stat cwd;
    int ret, err;
};

#define MAX_CALLS 1024
static struct {
    size_t n;
    struct call c[MAX_CALLS];
    int next_fd;
    /* failure injection */
    enum ck fail_kind;
    int fail_nth; /* 1-based among calls of fail_kind (all kinds for C_ANY) */
    int fail_errno;
    int seen;
    const char *fail_prefix; /* fail calls whose path starts with this (and is not equal to it) */
    int prefix_errno;
    bool armed;
} F;

static void fake_reset(void)
{
    F.n = 0;
    F.next_fd = 5000;
    F.fail_kind = C_ANY;
    F.fail_nth = 0;
    F.fail_errno = 0;
    F.seen = 0;
    F.fail_prefix = NULL;
    F.armed = true;
}

/* The nth call of kind k (C_ANY: of any kind) from here on fails with err. */
static void fake_fail(enum ck k, int nth, int err)
{
    F.fail_kind = k;
    F.fail_nth = nth;
    F.fail_errno = err;
}

static struct call *rec(enum ck k, const char *path)
{
    assert_true(F.n < MAX_CALLS);
    struct call *c = &F.c[F.n++];
    memset(c, 0, sizeof *c);
    c->k = k;
    c->fd = -1;
    c->dfd = -1;
    snprintf(c->path, sizeof c->path, "%s", path ? path : "");
    stat(".", &c->cwd);
    return c;
}

/* Decide the outcome of the call just recorded. */
static int outcome(struct call *c, int ok)
{
    if (F.armed && c->k != C_CLOSE) {
        if (F.fail_nth && (F.fail_kind == C_ANY || F.fail_kind == c->k) && ++F.seen == F.fail_nth) {
            c->ret = -1;
            c->err = errno = F.fail_errno;
            return -1;
        }
        if (F.fail_prefix && is_parent(F.fail_prefix, c->path) &&
            (c->k == C_MOUNT || c->k == C_OPEN_TREE)) {
            c->ret = -1;
            c->err = errno = F.prefix_errno;
            return -1;
        }
    }
    c->ret = ok;
    return ok;
}

static void set_str(char *dst, size_t n, bool *isnull, const char *s)
{
    *isnull = s == NULL;
    snprintf(dst, n, "%s", s ? s : "");
}

static int f_mount(const char *src, const char *target, const char *fstype, unsigned long flags,
                   const void *data)
{
    struct call *c = rec(C_MOUNT, target);
    set_str(c->src, sizeof c->src, &c->src_null, src);
    set_str(c->fstype, sizeof c->fstype, &c->fstype_null, fstype);
    set_str(c->data, sizeof c->data, &c->data_null, data);
    c->flags = flags;
    return outcome(c, 0);
}

static int f_umount2(const char *target, int flags)
{
    struct call *c = rec(C_UMOUNT2, target);
    c->flags = (unsigned long)flags;
    return outcome(c, 0);
}

static int f_pivot_root(const char *new_root, const char *put_old)
{
    struct call *c = rec(C_PIVOT, new_root);
    snprintf(c->src, sizeof c->src, "%s", put_old);
    return outcome(c, 0);
}

static int f_open_tree(int dfd, const char *path, unsigned flags)
{
    struct call *c = rec(C_OPEN_TREE, path);
    c->dfd = dfd;
    c->flags = flags;
    if (dfd >= 0)
        c->dfd_st_ok = fstat(dfd, &c->dfd_st) == 0;
    if (outcome(c, 0) < 0)
        return -1;
    c->fd = F.next_fd++;
    c->ret = c->fd;
    return c->fd;
}

static int f_setattr_fd(int fd, int recursive, uint64_t set, uint64_t clr)
{
    struct call *c = rec(C_SETATTR_FD, "");
    c->fd = fd;
    c->recursive = recursive;
    c->set = set;
    c->clr = clr;
    return outcome(c, 0);
}

static int f_propagation(int fd, int recursive, uint64_t propagation)
{
    struct call *c = rec(C_PROPAGATION, "");
    c->fd = fd;
    c->recursive = recursive;
    c->set = propagation;
    return outcome(c, 0);
}

static int f_setattr_path(const char *path, int recursive, uint64_t set, uint64_t clr)
{
    struct call *c = rec(C_SETATTR_PATH, path);
    c->recursive = recursive;
    c->set = set;
    c->clr = clr;
    return outcome(c, 0);
}

static int f_move(int fd, const char *target)
{
    struct call *c = rec(C_MOVE, target);
    c->fd = fd;
    return outcome(c, 0);
}

static int f_mkdir(const char *path, mode_t mode)
{
    struct call *c = rec(C_MKDIR, path);
    c->mode = mode;
    return outcome(c, 0);
}

static int f_symlink(const char *linktext, const char *path)
{
    struct call *c = rec(C_SYMLINK, path);
    snprintf(c->src, sizeof c->src, "%s", linktext);
    return outcome(c, 0);
}

static int f_create(const char *path, mode_t mode)
{
    struct call *c = rec(C_CREATE, path);
    c->mode = mode;
    return outcome(c, 0);
}

static int f_write(const char *path, const char *data, size_t len, mode_t mode)
{
    struct call *c = rec(C_WRITE, path);
    snprintf(c->data, sizeof c->data, "%.*s", (int)len, data);
    c->mode = mode;
    return outcome(c, 0);
}

static int f_close(int fd)
{
    struct call *c = rec(C_CLOSE, "");
    c->fd = fd;
    return outcome(c, 0);
}

static const struct nsbox_sys fake = {
    .mount = f_mount,
    .umount2 = f_umount2,
    .pivot_root = f_pivot_root,
    .open_tree = f_open_tree,
    .mount_setattr_fd = f_setattr_fd,
    .mount_propagation_fd = f_propagation,
    .mount_setattr_path = f_setattr_path,
    .move_mount_to = f_move,
    .mkdir = f_mkdir,
    .symlink = f_symlink,
    .create_file = f_create,
    .write_file = f_write,
    .close = f_close,
};

/* ---- executor fixture ---------------------------------------------------------------------- */

struct ex {
    char base[PATH_MAX], staging[PATH_MAX], image[PATH_MAX], ws[PATH_MAX];
    struct stat staging_st, image_st, root_st, ws_st;
    struct world *w;
    int fds[NSBOX_MOUNT_OPS_MAX];
    int fds_after_prepare[NSBOX_MOUNT_OPS_MAX];
    int rootfd;
    int ws_fd;            /* EXT4 workspace mount given to prepare; -1 */
    size_t prepare_calls; /* F.n after prepare */
};

static int rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *f)
{
    (void)sb;
    (void)flag;
    (void)f;
    return remove(p);
}

static int ex_setup(void **state)
{
    struct ex *x = calloc(1, sizeof *x);
    if (!x)
        return -1;
    snprintf(x->base, sizeof x->base, "/tmp/nsbox-test-mounts-XXXXXX");
    if (!mkdtemp(x->base))
        return -1;
    snprintf(x->staging, sizeof x->staging, "%s/staging", x->base);
    snprintf(x->image, sizeof x->image, "%s/image", x->base);
    if (mkdir(x->staging, 0700) < 0 || mkdir(x->image, 0700) < 0 ||
        stat(x->staging, &x->staging_st) < 0 || stat(x->image, &x->image_st) < 0 ||
        stat("/", &x->root_st) < 0)
        return -1;
    /* the --workspace DIR the launcher checked: found again by its inode (src_pin) */
    snprintf(x->ws, sizeof x->ws, "%s/project", x->base);
    if (mkdir(x->ws, 0700) < 0 || stat(x->ws, &x->ws_st) < 0)
        return -1;
    x->w = dir_world();
    snprintf(x->w->img.root, sizeof x->w->img.root, "%s", x->image);
    x->w->cfg.workspace = x->ws;
    x->w->cfg.ws_sb = &x->ws_st;
    struct nsbox_err e = {0};
    if (nsbox_mount_plan_build(&x->w->cfg, &x->w->plan, &e) < 0)
        return -1;
    x->rootfd = -1;
    x->ws_fd = -1;
    *state = x;
    return 0;
}

static int ex_teardown(void **state)
{
    struct ex *x = *state;
    if (chdir("/") < 0)
        return -1;
    if (x->rootfd >= 0)
        close(x->rootfd);
    nftw(x->base, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
    free(x->w);
    free(x);
    return 0;
}

static bool same_file(const struct stat *a, const struct stat *b)
{
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}

static int do_prepare(struct ex *x, struct nsbox_err *e)
{
    if (x->rootfd >= 0)
        close(x->rootfd);
    x->rootfd = -1;
    memset(x->fds, 0x55, sizeof x->fds);
    int r = nsbox_mounts_prepare(&fake, &x->w->plan, x->staging, x->image, -1, x->ws_fd, x->fds,
                                 &x->rootfd, e);
    memcpy(x->fds_after_prepare, x->fds, sizeof x->fds);
    x->prepare_calls = F.n;
    return r;
}

static void prepare_ok(struct ex *x)
{
    struct nsbox_err e = {0};
    F.armed = false;
    if (do_prepare(x, &e) != 0)
        fail_msg("prepare: %s", e.msg);
    F.armed = true;
}

static int count_open_fds(void)
{
    int n = 0;
    for (int fd = 0; fd < 1024; fd++)
        if (fcntl(fd, F_GETFD) >= 0)
            n++;
    return n;
}

/* ---- phase 1 ------------------------------------------------------------------------------- */

static void test_prepare_sequence(void **state)
{
    struct ex *x = *state;
    const struct nsbox_mount_plan *p = &x->w->plan;
    fake_reset();
    int fds_before = count_open_fds();
    struct nsbox_err e = {0};
    assert_int_equal(do_prepare(x, &e), 0);

    /* 1. every mount a slave (it can receive, never send), before anything is mounted */
    assert_true(F.n >= 2);
    struct call *c = &F.c[0];
    assert_int_equal(c->k, C_MOUNT);
    assert_string_equal(c->path, "/");
    assert_true(c->fstype_null);
    assert_int_equal(c->flags, MS_REC | MS_SLAVE);
    /* 2. one detached clone per bind, in plan order, attributes set on the clone */
    size_t k = 1;
    int binds = 0;
    for (size_t i = 0; i < p->n; i++) {
        const struct nsbox_mount_op *o = &p->ops[i];
        if (o->op != NSBOX_MOP_BIND && o->op != NSBOX_MOP_BIND_DEV) {
            assert_int_equal(x->fds[i], -1);
            continue;
        }
        binds++;
        assert_true(k < F.n);
        c = &F.c[k++];
        assert_int_equal(c->k, C_OPEN_TREE);
        assert_int_equal(!!(c->flags & AT_RECURSIVE), !!o->recursive);
        if (o->src_pin) {
            /* the workspace: cloned from the directory found again, the one checked */
            assert_string_equal(c->path, "");
            assert_true(c->flags & AT_EMPTY_PATH);
            assert_true(c->dfd_st_ok);
            assert_true(same_file(&c->dfd_st, &x->ws_st));
        } else if (o->src_in_image) {
            /* looked up under the image root, never following a symlink out of it */
            assert_string_equal(c->path, o->src);
            assert_true(c->dfd_st_ok);
            assert_true(same_file(&c->dfd_st, &x->image_st));
            assert_true(c->flags & AT_SYMLINK_NOFOLLOW);
            assert_null(strchr(c->path, '/'));
        } else {
            assert_string_equal(c->path, o->src);
            assert_int_equal(c->dfd, AT_FDCWD);
            assert_true(c->path[0] == '/');
        }
        assert_int_equal(x->fds[i], c->fd);
        int fd = c->fd;
        if (o->attr) {
            assert_true(k < F.n);
            c = &F.c[k++];
            assert_int_equal(c->k, C_SETATTR_FD);
            assert_int_equal(c->fd, fd);
            assert_int_equal(c->set, o->attr);
            assert_int_equal(c->clr, 0);
            assert_int_equal(!!c->recursive, !!o->recursive);
        }
        /* nsbox's own binds receive nothing from the host: private, every mount of them */
        assert_true(k < F.n);
        c = &F.c[k++];
        assert_int_equal(c->k, C_PROPAGATION);
        assert_int_equal(c->fd, fd);
        assert_int_equal(c->set, MS_PRIVATE);
        assert_int_equal(!!c->recursive, !!o->recursive);
    }
    /* 3. then the root tmpfs on staging (which may hold sources: the state directory) */
    assert_true(k < F.n);
    c = &F.c[k++];
    assert_int_equal(c->k, C_MOUNT);
    assert_string_equal(c->path, x->staging);
    assert_string_equal(c->fstype, "tmpfs");
    assert_true(c->flags & MS_NOSUID);
    assert_true(c->flags & MS_NODEV);
    /* *rootfd is the staging directory */
    assert_true(x->rootfd >= 0);
    struct stat st;
    assert_int_equal(fstat(x->rootfd, &st), 0);
    assert_true(same_file(&st, &x->staging_st));
    /* only rootfd stays open: the image root's fd is closed again */
    assert_int_equal(count_open_fds(), fds_before + 1);
    assert_true(binds > 0);
    /* nothing else: in particular nothing attached, nothing created, no pivot in phase 1 */
    assert_int_equal(F.n, k);
}

/* EXT4: the launcher's mount fd goes to the workspace op as it is: no open_tree, no second
 * copy; without it, phase 1 fails instead of leaving /workspace unmounted. */
static void test_prepare_takes_workspace_mount_fd(void **state)
{
    struct ex *x = *state;
    x->w->cfg.ws_kind = NSBOX_WS_EXT4;
    struct nsbox_err e = {0};
    if (nsbox_mount_plan_build(&x->w->cfg, &x->w->plan, &e) < 0)
        fail_msg("plan: %s", e.msg);
    int b = idx(&x->w->plan, NSBOX_MOP_BIND, "workspace");
    assert_true(b >= 0);
    int fd = open("/", O_PATH | O_CLOEXEC);
    assert_true(fd >= 0);
    x->ws_fd = fd;
    fake_reset();
    assert_int_equal(do_prepare(x, &e), 0);
    assert_int_equal(x->fds[b], fd);
    for (size_t i = 0; i < F.n; i++)
        if (F.c[i].k == C_OPEN_TREE)
            assert_string_not_equal(F.c[i].path, x->w->plan.ops[b].src);
    close(fd);
    x->fds[b] = -1;
    x->ws_fd = -1;
    fake_reset();
    assert_int_equal(do_prepare(x, &e), -1);
    assert_non_null(strstr(e.msg, "workspace filesystem"));
}

/* --workspace DIR bound by path: its name swapped after the launcher's check, for another
 * directory or for a symlink (to the very directory checked, too: the path must hold none), is
 * refused before anything of it is cloned, with what changed. */
static void test_prepare_refuses_a_swapped_workspace(void **state)
{
    struct ex *x = *state;
    char moved[PATH_MAX + 8];
    snprintf(moved, sizeof moved, "%s.old", x->ws);
    static const struct {
        bool link;
        const char *why;
    } cases[] = {{false, "it is another directory now"},
                 {true, "a symbolic link is on its path now"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        assert_int_equal(rename(x->ws, moved), 0);
        assert_int_equal(cases[i].link ? symlink(moved, x->ws) : mkdir(x->ws, 0700), 0);
        fake_reset();
        struct nsbox_err e = {0};
        assert_int_equal(do_prepare(x, &e), -1);
        assert_int_equal(e.code, NSBOX_E_INVALID);
        assert_non_null(strstr(e.msg, x->ws));
        assert_non_null(strstr(e.msg, cases[i].why));
        assert_non_null(strstr(e.msg, "changed while the sandbox was made"));
        for (size_t k = 0; k < F.n; k++)
            assert_false(F.c[k].k == C_OPEN_TREE && F.c[k].path[0] == '\0');
        assert_int_equal(cases[i].link ? unlink(x->ws) : rmdir(x->ws), 0);
        assert_int_equal(rename(moved, x->ws), 0);
    }
    /* put back, the directory checked binds again */
    fake_reset();
    struct nsbox_err e = {0};
    assert_int_equal(do_prepare(x, &e), 0);
}

/* The plan keeps the checked directory's identity itself: what the launcher's stat becomes
 * after the plan is built (reused, freed) does not change which directory is bound. */
static void test_prepare_pin_needs_nothing_of_the_launcher(void **state)
{
    struct ex *x = *state;
    struct stat kept = x->ws_st;
    assert_int_equal(stat("/", &x->ws_st), 0); /* the launcher's memory, now another's */
    fake_reset();
    struct nsbox_err e = {0};
    int r = do_prepare(x, &e);
    x->ws_st = kept;
    if (r < 0)
        fail_msg("the workspace was not bound: %s", e.msg);
}

static void test_prepare_private_failure_stops(void **state)
{
    struct ex *x = *state;
    fake_reset();
    fake_fail(C_MOUNT, 1, EPERM);
    struct nsbox_err e = {0};
    assert_int_equal(do_prepare(x, &e), -1);
    /* never mount on the staging directory while still sharing mounts with the host */
    assert_int_equal(F.n, 1);
    assert_int_equal(e.sys_errno, EPERM);
    assert_non_null(strstr(e.msg, "a slave"));
}

static void test_prepare_tmpfs_failure(void **state)
{
    struct ex *x = *state;
    fake_reset();
    fake_fail(C_MOUNT, 2, ENOSPC);
    struct nsbox_err e = {0};
    assert_int_equal(do_prepare(x, &e), -1);
    /* the failing tmpfs mount is the last call: nothing after it */
    assert_true(F.n > 2);
    assert_int_equal(F.c[F.n - 1].k, C_MOUNT);
    assert_string_equal(F.c[F.n - 1].path, x->staging);
    assert_int_equal(e.sys_errno, ENOSPC);
    assert_non_null(strstr(e.msg, x->staging));
}

static void test_prepare_clone_failure(void **state)
{
    struct ex *x = *state;
    const struct nsbox_mount_plan *p = &x->w->plan;
    /* the 3rd bind source cannot be cloned */
    int third = -1, seen = 0;
    for (size_t i = 0; i < p->n && third < 0; i++)
        if ((p->ops[i].op == NSBOX_MOP_BIND || p->ops[i].op == NSBOX_MOP_BIND_DEV) && ++seen == 3)
            third = (int)i;
    assert_true(third >= 0);
    fake_reset();
    fake_fail(C_OPEN_TREE, 3, ENOENT);
    struct nsbox_err e = {0};
    assert_int_equal(do_prepare(x, &e), -1);
    assert_int_equal(e.sys_errno, ENOENT);
    assert_non_null(strstr(e.msg, p->ops[third].src));
    /* stops at the failure */
    assert_int_equal(F.c[F.n - 1].k, C_OPEN_TREE);
    assert_int_equal(F.c[F.n - 1].ret, -1);
}

static void test_prepare_setattr_failure_closes_clone(void **state)
{
    struct ex *x = *state;
    fake_reset();
    fake_fail(C_SETATTR_FD, 2, EPERM);
    struct nsbox_err e = {0};
    assert_int_equal(do_prepare(x, &e), -1);
    assert_int_equal(e.sys_errno, EPERM);
    /* find the failed setattr and the clone it was for */
    size_t f = 0;
    while (f < F.n && !(F.c[f].k == C_SETATTR_FD && F.c[f].ret < 0))
        f++;
    assert_true(f < F.n && f > 0);
    int fd = F.c[f].fd;
    assert_int_equal(F.c[f - 1].k, C_OPEN_TREE);
    assert_int_equal(F.c[f - 1].fd, fd);
    assert_non_null(strstr(e.msg, F.c[f - 1].path));
    /* a clone without its read-only/nosuid attributes is closed, never handed out */
    assert_int_equal(F.n, f + 2);
    assert_int_equal(F.c[f + 1].k, C_CLOSE);
    assert_int_equal(F.c[f + 1].fd, fd);
    for (size_t i = 0; i < x->w->plan.n; i++)
        assert_int_not_equal(x->fds[i], fd);
}

/* ---- phase 2 ------------------------------------------------------------------------------- */

static bool fstype_word(const char *s)
{
    return !strcmp(s, "tmpfs") || !strcmp(s, "proc") || !strcmp(s, "devpts");
}

/* Before the pivot: in the new root, every path relative to it, no host path looked up. */
static void enter_check_before_pivot(const struct ex *x, size_t start, size_t pivot)
{
    for (size_t i = start; i < pivot; i++) {
        const struct call *c = &F.c[i];
        assert_true(same_file(&c->cwd, &x->staging_st));
        assert_true(c->path[0] != '/');
        assert_int_not_equal(c->k, C_UMOUNT2);
        if (c->k == C_MOUNT && !c->src_null && !fstype_word(c->src))
            assert_true(c->src[0] != '/');
        if (c->k == C_OPEN_TREE)
            assert_int_equal(c->dfd, AT_FDCWD);
    }
}

/* Op i of the plan maps to exactly these calls, from F.c[*k] on (before pivot). */
static void enter_check_op(const struct ex *x, size_t i, size_t *kp, size_t pivot)
{
    const struct nsbox_mount_op *o = &x->w->plan.ops[i];
    const struct call *c;
    size_t k = *kp;
#define NEXT(kind)                                                                                 \
    ({                                                                                             \
        assert_true(k < pivot);                                                                    \
        const struct call *_c = &F.c[k++];                                                         \
        if (_c->k != (kind))                                                                       \
            fail_msg("op %zu (%s): call %zu is kind %d, expected %d", i, o->target, k - 1,         \
                     (int)_c->k, (int)(kind));                                                     \
        _c;                                                                                        \
    })
    switch (o->op) {
    case NSBOX_MOP_MKDIR:
        c = NEXT(C_MKDIR);
        assert_string_equal(c->path, o->target);
        assert_int_equal(c->mode, o->mode);
        break;
    case NSBOX_MOP_SYMLINK:
        c = NEXT(C_SYMLINK);
        assert_string_equal(c->path, o->target);
        assert_string_equal(c->src, o->src);
        break;
    case NSBOX_MOP_FILE:
        c = NEXT(C_CREATE);
        assert_string_equal(c->path, o->target);
        break;
    case NSBOX_MOP_WRITE:
        c = NEXT(C_WRITE);
        assert_string_equal(c->path, o->target);
        break;
    case NSBOX_MOP_MASK:
        fail_msg("op %zu: a config's mask, which these worlds do not have", i);
        break;
    case NSBOX_MOP_BIND_TEXT: /* target_in_image: resolved for real (e2e.test_run) */
        fail_msg("op %zu: a text bound in the image, which these worlds do not have", i);
        break;
    case NSBOX_MOP_TMPFS:
    case NSBOX_MOP_PROC:
    case NSBOX_MOP_DEVPTS:
    case NSBOX_MOP_FS: {
        const char *fs = o->op == NSBOX_MOP_TMPFS    ? "tmpfs"
                         : o->op == NSBOX_MOP_PROC   ? "proc"
                         : o->op == NSBOX_MOP_DEVPTS ? "devpts"
                                                     : o->fstype;
        c = NEXT(C_MOUNT);
        assert_string_equal(c->path, o->target);
        assert_string_equal(c->fstype, fs);
        assert_int_equal(c->flags, o->flags);
        if (o->data[0])
            assert_string_equal(c->data, o->data);
        break;
    }
    case NSBOX_MOP_BIND:
    case NSBOX_MOP_BIND_DEV:
        /* the clone made (and restricted) in phase 1, attached on its target */
        c = NEXT(C_MOVE);
        assert_string_equal(c->path, o->target);
        assert_int_equal(c->fd, x->fds_after_prepare[i]);
        c = NEXT(C_CLOSE);
        assert_int_equal(c->fd, x->fds_after_prepare[i]);
        assert_int_equal(x->fds[i], -1);
        break;
    case NSBOX_MOP_MASK_FILE:
        c = NEXT(C_MOUNT);
        assert_string_equal(c->path, o->target);
        assert_string_equal(c->src, "dev/null");
        assert_true(c->flags & MS_BIND);
        break;
    case NSBOX_MOP_MASK_DIR:
        c = NEXT(C_MOUNT);
        assert_string_equal(c->path, o->target);
        assert_string_equal(c->fstype, "tmpfs");
        assert_true(c->flags & MS_RDONLY);
        break;
    case NSBOX_MOP_READONLY: {
        c = NEXT(C_OPEN_TREE);
        assert_string_equal(c->path, o->target);
        int fd = c->fd;
        c = NEXT(C_SETATTR_FD);
        assert_int_equal(c->fd, fd);
        assert_true(c->set & MOUNT_ATTR_RDONLY);
        c = NEXT(C_MOVE);
        assert_int_equal(c->fd, fd);
        assert_string_equal(c->path, o->target);
        c = NEXT(C_CLOSE);
        assert_int_equal(c->fd, fd);
        break;
    }
    case NSBOX_MOP_SETATTR:
        c = NEXT(C_SETATTR_PATH);
        assert_string_equal(c->path, o->target);
        assert_int_equal(c->set, o->attr);
        assert_int_equal(!!c->recursive, !!o->recursive);
        break;
    }
#undef NEXT
    *kp = k;
}

/* Then: pivot_root(".", "."), detach the old root, make "/" read-only, nothing else. */
static void enter_check_after_pivot(const struct ex *x, size_t pivot)
{
    assert_int_equal(F.n, pivot + 3);
    const struct call *c = &F.c[pivot];
    assert_string_equal(c->path, ".");
    assert_string_equal(c->src, ".");
    c = &F.c[pivot + 1];
    assert_int_equal(c->k, C_UMOUNT2);
    assert_string_equal(c->path, ".");
    assert_int_equal(c->flags, MNT_DETACH);
    c = &F.c[pivot + 2];
    assert_int_equal(c->k, C_MOUNT);
    assert_string_equal(c->path, "/");
    assert_true(c->src_null);
    assert_int_equal(c->flags & (MS_REMOUNT | MS_BIND | MS_RDONLY),
                     MS_REMOUNT | MS_BIND | MS_RDONLY);
    assert_true(c->flags & MS_NOSUID);
    assert_true(c->flags & MS_NODEV);
    /* by then the process has left the old working directory for the (new) root */
    assert_true(same_file(&c->cwd, &x->root_st));
}

/* Across both phases: every attached clone came from open_tree and got its attributes before it
 * was attached, and every clone is closed exactly once. */
static void enter_check_clones(const struct ex *x)
{
    const struct nsbox_mount_plan *p = &x->w->plan;
    for (size_t i = 0; i < F.n; i++) {
        if (F.c[i].k != C_MOVE)
            continue;
        int fd = F.c[i].fd, opened = -1, attrs = -1;
        for (size_t j = 0; j < i; j++) {
            if (F.c[j].k == C_OPEN_TREE && F.c[j].fd == fd)
                opened = (int)j;
            if (F.c[j].k == C_SETATTR_FD && F.c[j].fd == fd)
                attrs = (int)j;
        }
        assert_true(opened >= 0);
        for (size_t j = 0; j < p->n; j++)
            if (p->ops[j].attr && x->fds_after_prepare[j] == fd)
                assert_true(attrs > opened && attrs < (int)i);
    }
    /* every clone is closed exactly once */
    for (size_t i = 0; i < F.n; i++) {
        if (F.c[i].k != C_OPEN_TREE)
            continue;
        int closes = 0;
        for (size_t j = 0; j < F.n; j++)
            if (F.c[j].k == C_CLOSE && F.c[j].fd == F.c[i].fd)
                closes++;
        assert_int_equal(closes, 1);
    }
}

static void test_enter_sequence(void **state)
{
    struct ex *x = *state;
    const struct nsbox_mount_plan *p = &x->w->plan;
    fake_reset();
    prepare_ok(x);
    size_t start = F.n;
    struct nsbox_err e = {0};
    int r = nsbox_mounts_enter(&fake, p, x->rootfd, x->fds, &e);
    if (r != 0)
        fail_msg("enter: %s", e.msg);

    size_t pivot = start;
    while (pivot < F.n && F.c[pivot].k != C_PIVOT)
        pivot++;
    assert_true(pivot < F.n);

    enter_check_before_pivot(x, start, pivot);
    /* Each op of the plan, in plan order, maps to exactly these calls. */
    size_t k = start;
    for (size_t i = 0; i < p->n; i++)
        enter_check_op(x, i, &k, pivot);
    assert_int_equal(k, pivot);
    enter_check_after_pivot(x, pivot);
    enter_check_clones(x);
}

/* The substring the error message must carry for a failure of call c. */
static void expect_names_failure(const struct call *c, const char *msg)
{
    char want[600];
    if (c->k == C_PIVOT)
        snprintf(want, sizeof want, "pivot_root");
    else if (c->k == C_UMOUNT2)
        snprintf(want, sizeof want, "old root");
    else if (c->k == C_MOUNT && !strcmp(c->path, "/"))
        snprintf(want, sizeof want, "read-only");
    else if (c->k == C_MOUNT && !strcmp(c->fstype, "proc") && strcmp(c->src, "dev/null"))
        snprintf(want, sizeof want, "proc");
    else if (c->k == C_MOUNT && !strcmp(c->fstype, "devpts"))
        snprintf(want, sizeof want, "devpts");
    else if (c->k == C_SETATTR_FD) /* READONLY: named by the open_tree just before */
        snprintf(want, sizeof want, "/%s", (c - 1)->path);
    else
        snprintf(want, sizeof want, "/%s", c->path);
    if (!strstr(msg, want))
        fail_msg("failure of call kind %d on '%s': message '%s' does not name '%s'", (int)c->k,
                 c->path, msg, want);
}

/* Fail each phase-2 call in turn: enter returns -1 with that errno and a message naming the
 * target, stops there (only the close of the fd in hand may follow) and never pivots into a
 * half-built root. */
static void test_enter_each_failure(void **state)
{
    struct ex *x = *state;
    const struct nsbox_mount_plan *p = &x->w->plan;
    fake_reset();
    prepare_ok(x);
    size_t start = F.n;
    struct nsbox_err e = {0};
    assert_int_equal(nsbox_mounts_enter(&fake, p, x->rootfd, x->fds, &e), 0);
    int fallible = 0;
    for (size_t i = start; i < F.n; i++)
        if (F.c[i].k != C_CLOSE)
            fallible++;
    assert_true(fallible > 30);

    for (int nth = 1; nth <= fallible; nth++) {
        fake_reset();
        prepare_ok(x);
        start = F.n;
        fake_fail(C_ANY, nth, EPERM);
        struct nsbox_err e2 = {0};
        if (chdir("/") < 0)
            fail();
        assert_int_equal(nsbox_mounts_enter(&fake, p, x->rootfd, x->fds, &e2), -1);
        assert_int_equal(e2.code, NSBOX_E_SYS);
        assert_int_equal(e2.sys_errno, EPERM);
        size_t f = start;
        while (f < F.n && F.c[f].ret >= 0)
            f++;
        assert_true(f < F.n);
        expect_names_failure(&F.c[f], e2.msg);
        assert_true(F.n - f <= 2);
        if (F.n - f == 2)
            assert_int_equal(F.c[f + 1].k, C_CLOSE);
        bool pivoted = false;
        for (size_t i = start; i < f; i++)
            pivoted |= F.c[i].k == C_PIVOT;
        if (F.c[f].k != C_PIVOT && F.c[f].k != C_UMOUNT2 && strcmp(F.c[f].path, "/"))
            assert_false(pivoted);
    }
}

/* The brief's case spelled out: the 5th mount(2) of phase 2 fails. */
static void test_enter_fifth_mount_fails(void **state)
{
    struct ex *x = *state;
    const struct nsbox_mount_plan *p = &x->w->plan;
    fake_reset();
    prepare_ok(x);
    size_t start = F.n;
    fake_fail(C_MOUNT, 5, EACCES);
    struct nsbox_err e = {0};
    assert_int_equal(nsbox_mounts_enter(&fake, p, x->rootfd, x->fds, &e), -1);
    const struct call *last = &F.c[F.n - 1];
    assert_int_equal(last->k, C_MOUNT);
    assert_int_equal(last->ret, -1);
    int mounts = 0;
    for (size_t i = start; i < F.n; i++)
        mounts += F.c[i].k == C_MOUNT;
    assert_int_equal(mounts, 5);
    char want[600];
    snprintf(want, sizeof want, "/%s", last->path);
    if (!strstr(e.msg, want))
        fail_msg("'%s' does not name %s", e.msg, want);
    assert_int_equal(e.sys_errno, EACCES);
    assert_non_null(strstr(e.msg, strerror(EACCES)));
}

/* Masks and read-only binds inside /proc are optional (ENOENT: the kernel has no such file);
 * other errors there, and ENOENT anywhere else, are fatal. */
static void test_enter_optional_proc_entries(void **state)
{
    struct ex *x = *state;
    const struct nsbox_mount_plan *p = &x->w->plan;
    fake_reset();
    prepare_ok(x);
    F.fail_prefix = "proc";
    F.prefix_errno = ENOENT;
    struct nsbox_err e = {0};
    int r = nsbox_mounts_enter(&fake, p, x->rootfd, x->fds, &e);
    if (r != 0)
        fail_msg("ENOENT under /proc should be tolerated: %s", e.msg);
    assert_int_equal(F.c[F.n - 3].k, C_PIVOT);

    fake_reset();
    prepare_ok(x);
    F.fail_prefix = "proc";
    F.prefix_errno = EPERM;
    assert_int_equal(nsbox_mounts_enter(&fake, p, x->rootfd, x->fds, &e), -1);
    assert_int_equal(e.sys_errno, EPERM);
    assert_non_null(strstr(e.msg, "/proc/"));

    /* ENOENT on a required mount (the first mount of phase 2) is not swallowed */
    fake_reset();
    prepare_ok(x);
    fake_fail(C_MOUNT, 1, ENOENT);
    assert_int_equal(nsbox_mounts_enter(&fake, p, x->rootfd, x->fds, &e), -1);
    assert_int_equal(e.sys_errno, ENOENT);
    for (size_t i = 0; i < F.n; i++)
        assert_int_not_equal(F.c[i].k, C_PIVOT);
}

/* An op the executor does not know is an error, not silently skipped. */
static void test_enter_unknown_op(void **state)
{
    struct ex *x = *state;
    struct nsbox_mount_plan *p = calloc(1, sizeof *p);
    assert_non_null(p);
    p->n = 1;
    memset(&p->ops[0], 0, sizeof p->ops[0]);
    p->ops[0].op = (enum nsbox_mop)99;
    snprintf(p->ops[0].target, sizeof p->ops[0].target, "x");
    int fds[1] = {-1};
    fake_reset();
    int rootfd = open(x->staging, O_PATH | O_DIRECTORY | O_CLOEXEC);
    assert_true(rootfd >= 0);
    struct nsbox_err e = {0};
    assert_int_equal(nsbox_mounts_enter(&fake, p, rootfd, fds, &e), -1);
    assert_int_equal(e.code, NSBOX_E_INVALID);
    for (size_t i = 0; i < F.n; i++)
        assert_int_not_equal(F.c[i].k, C_PIVOT);
    close(rootfd);
    free(p);
}

int main(void)
{
    const struct CMUnitTest exec_tests[] = {
        cmocka_unit_test_setup_teardown(test_prepare_sequence, ex_setup, ex_teardown),
        cmocka_unit_test_setup_teardown(test_prepare_takes_workspace_mount_fd, ex_setup,
                                        ex_teardown),
        cmocka_unit_test_setup_teardown(test_prepare_refuses_a_swapped_workspace, ex_setup,
                                        ex_teardown),
        cmocka_unit_test_setup_teardown(test_prepare_pin_needs_nothing_of_the_launcher, ex_setup,
                                        ex_teardown),
        cmocka_unit_test_setup_teardown(test_prepare_private_failure_stops, ex_setup, ex_teardown),
        cmocka_unit_test_setup_teardown(test_prepare_tmpfs_failure, ex_setup, ex_teardown),
        cmocka_unit_test_setup_teardown(test_prepare_clone_failure, ex_setup, ex_teardown),
        cmocka_unit_test_setup_teardown(test_prepare_setattr_failure_closes_clone, ex_setup,
                                        ex_teardown),
        cmocka_unit_test_setup_teardown(test_enter_sequence, ex_setup, ex_teardown),
        cmocka_unit_test_setup_teardown(test_enter_each_failure, ex_setup, ex_teardown),
        cmocka_unit_test_setup_teardown(test_enter_fifth_mount_fails, ex_setup, ex_teardown),
        cmocka_unit_test_setup_teardown(test_enter_optional_proc_entries, ex_setup, ex_teardown),
        cmocka_unit_test_setup_teardown(test_enter_unknown_op, ex_setup, ex_teardown),
    };
    return cmocka_run_group_tests_name("executor", exec_tests, NULL, NULL);
}
