/* The fixture and the request helpers of the file operation tests (test_files.c,
 * test_files_escape.c): the mkdtemp tree each test gets, described in test_files.c. */
#ifndef NSBOX_TESTS_FILES_FIXTURE_H
#define NSBOX_TESTS_FILES_FIXTURE_H
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "files.h"
#include "idmap.h"
#include "proto.h"
#include "safepath.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct fx {
    char base[PATH_MAX];
    char ws[PATH_MAX];
    int basefd, wsfd;
    int fds_before;
    struct nsbox_state st;
    struct nsbox_files_opts opts;
    struct stat out_secret, out_f;
};

struct res {
    int rc;
    cJSON *reply;
    int out_fd;
    struct nsbox_err e;
};

/* ---- fixture ------------------------------------------------------------------------------- */

static void put_file(int dirfd, const char *path, const char *content)
{
    int fd = openat(dirfd, path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, content, strlen(content)), (ssize_t)strlen(content));
    close(fd);
}

static void put_dir(int dirfd, const char *path)
{
    assert_int_equal(mkdirat(dirfd, path, 0755), 0);
}

static void put_link(int dirfd, const char *target, const char *path)
{
    assert_int_equal(symlinkat(target, dirfd, path), 0);
}

static bool same_inode(const struct stat *a, const struct stat *b)
{
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}

static int count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (!d) return -1;
    int n = 0;
    while (readdir(d))
        n++;
    closedir(d);
    return n;
}

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof *f);
    assert_non_null(f);
    const char *tmp = getenv("TMPDIR");
    snprintf(f->base, sizeof f->base, "%s/nsbox-files-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    assert_non_null(mkdtemp(f->base));
    snprintf(f->ws, sizeof f->ws, "%s/ws", f->base);
    f->basefd = open(f->base, O_PATH | O_DIRECTORY | O_CLOEXEC);
    assert_true(f->basefd >= 0);
    int b = f->basefd;
    put_dir(b, "outside");
    put_file(b, "outside/secret", "host-secret\n");
    put_file(b, "outside/f", "SECRET");
    put_file(b, "outside/outside-only", "x");
    put_dir(b, "outside/sub");
    put_file(b, "outside/sub/canary", "canary");
    put_dir(b, "ws");
    put_dir(b, "ws/etc");
    put_file(b, "ws/etc/passwd", "ws-passwd");
    put_dir(b, "ws/a");
    put_file(b, "ws/a/b", "ab");
    assert_int_equal(fstatat(b, "outside/secret", &f->out_secret, 0), 0);
    assert_int_equal(fstatat(b, "outside/f", &f->out_f, 0), 0);
    f->wsfd = openat(b, "ws", O_PATH | O_DIRECTORY | O_CLOEXEC);
    assert_true(f->wsfd >= 0);
    nsbox_state_init(&f->st);
    snprintf(f->st.workspace, sizeof f->st.workspace, "%s", f->ws);
    f->st.privileged = false;
    nsbox_sp_set_backend(NSBOX_SP_BACKEND_AUTO);
    f->fds_before = count_fds(); /* every error path must close what it opened */
    *state = f;
    return 0;
}

static int rm_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void)st;
    (void)ftw;
    if (type == FTW_DNR || type == FTW_D) chmod(path, 0700);
    if ((type == FTW_DP ? rmdir(path) : unlink(path)) != 0)
        fprintf(stderr, "files: cannot remove %s: %s\n", path, strerror(errno));
    return 0;
}

static void make_all_accessible(const char *dir)
{
    /* Tests leave mode-0 directories; nftw cannot descend into them as a non-root user. */
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
        char p[PATH_MAX];
        snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
        struct stat st;
        if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode)) {
            chmod(p, 0700);
            make_all_accessible(p);
        }
    }
    closedir(d);
}

static int teardown(void **state)
{
    struct fx *f = *state;
    close(f->wsfd);
    close(f->basefd);
    make_all_accessible(f->base);
    nftw(f->base, rm_entry, 64, FTW_DEPTH | FTW_PHYS);
    nsbox_sp_set_backend(NSBOX_SP_BACKEND_AUTO);
    umask(022);
    alarm(0);
    free(f);
    return 0;
}

/* ---- calling the operations ---------------------------------------------------------------- */

static cJSON *rq(const char *op, const char *path)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "v", 1);
    cJSON_AddStringToObject(o, "op", op);
    if (path) cJSON_AddStringToObject(o, "path", path);
    return o;
}

static bool valid_utf8(const unsigned char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        size_t k = c < 0x80             ? 1
                   : (c & 0xe0) == 0xc0 ? 2
                   : (c & 0xf0) == 0xe0 ? 3
                   : (c & 0xf8) == 0xf0 ? 4
                                        : 0;
        if (!k || i + k > n) return false;
        for (size_t j = 1; j < k; j++)
            if ((s[i + j] & 0xc0) != 0x80) return false;
        i += k;
    }
    return true;
}

/* Run the request (consumed) as the supervisor would. The reply, success or not, must be
 * printable JSON in valid UTF-8 under the message limit, and messages free of control bytes. */
static int do_op(struct fx *f, cJSON *req, int in_fd, struct res *r)
{
    char *js = cJSON_PrintUnformatted(req);
    cJSON_Delete(req);
    assert_non_null(js);
    struct nsbox_request q;
    memset(&q, 0, sizeof q);
    memset(r, 0, sizeof *r);
    r->out_fd = -1;
    int p = nsbox_proto_parse(js, strlen(js), &q, &r->e);
    free(js);
    if (p < 0) {
        nsbox_proto_request_free(&q);
        return r->rc = -1;
    }
    r->reply = nsbox_proto_reply_ok(q.tag);
    r->rc = nsbox_files_op_ex(f->wsfd, &f->st, &f->opts, &q, in_fd, r->reply, &r->out_fd, &r->e);
    nsbox_proto_request_free(&q);
    if (r->rc == 0) {
        char *out = cJSON_PrintUnformatted(r->reply);
        assert_non_null(out);
        size_t n = strlen(out);
        assert_true(n < NSBOX_PROTO_MAX);
        assert_true(valid_utf8((const unsigned char *)out, n));
        free(out);
    } else {
        assert_true(r->e.msg[0] != '\0');
        for (const unsigned char *m = (const unsigned char *)r->e.msg; *m; m++)
            assert_true(*m >= 0x20 && *m != 0x7f);
        assert_int_equal(r->out_fd, -1);
    }
    return r->rc;
}

static void res_free(struct res *r)
{
    if (r->out_fd >= 0) close(r->out_fd);
    r->out_fd = -1;
    cJSON_Delete(r->reply);
    r->reply = NULL;
}

static const char *str(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    assert_true(cJSON_IsString(v));
    return v->valuestring;
}

/* A memfd (a regular file) holding n bytes of content. */
static int content_fd(const void *data, size_t n)
{
    int fd = memfd_create("content", MFD_CLOEXEC);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, data, n), (ssize_t)n);
    assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
    return fd;
}

static int op_read(struct fx *f, const char *path, struct res *r)
{
    return do_op(f, rq("read", path), -1, r);
}

/* Read path; on success its whole content into buf (NUL-terminated). */
static int read_str(struct fx *f, const char *path, char *buf, size_t n, struct res *r)
{
    if (op_read(f, path, r) < 0) return -1;
    ssize_t got = read(r->out_fd, buf, n - 1);
    assert_true(got >= 0);
    buf[got] = '\0';
    return 0;
}

static int write_str(struct fx *f, const char *path, const char *content, bool mkdir, int mode,
                     struct res *r)
{
    cJSON *q = rq("write", path);
    if (mkdir) cJSON_AddBoolToObject(q, "mkdir", true);
    if (mode >= 0) cJSON_AddNumberToObject(q, "mode", mode);
    int fd = content_fd(content, strlen(content));
    int rc = do_op(f, q, fd, r);
    close(fd);
    return rc;
}

static void file_is(struct fx *f, const char *rel, const char *want)
{
    char buf[256];
    int fd = openat(f->basefd, rel, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    assert_true(fd >= 0);
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    assert_true(n >= 0);
    buf[n] = '\0';
    assert_string_equal(buf, want);
}

static bool exists(struct fx *f, const char *rel)
{
    struct stat st;
    return fstatat(f->basefd, rel, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

static void check_fds(struct fx *f)
{
    assert_int_equal(count_fds(), f->fds_before);
}

static mode_t mode_of(struct fx *f, const char *rel)
{
    struct stat st;
    assert_int_equal(fstatat(f->basefd, rel, &st, AT_SYMLINK_NOFOLLOW), 0);
    return st.st_mode & 07777;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static const cJSON *entry(const cJSON *reply, const char *name)
{
    const cJSON *it;
    cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(reply, "entries"))
    {
        if (!strcmp(str(it, "name"), name)) return it;
    }
    return NULL;
}

#define FX struct fx *f = *state

#endif
