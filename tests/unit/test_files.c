/* File operations under /workspace (service/files*.c), called as the supervisor does: a request
 * parsed by nsbox_proto_parse, nsbox_files_op_ex on a workspace fd, with a fake, unprivileged
 * struct nsbox_state. Each test gets a fresh mkdtemp tree:
 *
 *   <base>/outside/secret  outside/f  outside/outside-only  outside/sub/canary   never reached
 *   <base>/ws/             the workspace
 *     etc/passwd ("ws-passwd")        a/b ("ab")
 *
 * and plants the symlinks, FIFOs and races it is about. No root needed (the privileged
 * ownership test and the mount test skip or use a user namespace without it).
 *
 * Here: paths, read, write, stat and list; remove, mkdir, the escapes, ownership and the race
 * are in test_files_escape.c, the fixture in files_fixture.h. */

#include "files_fixture.h"

static double num(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    assert_true(cJSON_IsNumber(v));
    return v->valuedouble;
}

/* ---- paths --------------------------------------------------------------------------------- */

static void t_path_forms(void **state)
{
    FX;
    struct stat want, got;
    assert_int_equal(fstatat(f->basefd, "ws/a/b", &want, 0), 0);
    const char *same[] = {"a/b", "/workspace/a/b", "//workspace//a/b", "/workspace/./a/b",
                          "a/./b", "a//b", "./a/b"};
    for (size_t i = 0; i < sizeof same / sizeof *same; i++) {
        struct res r;
        assert_int_equal(op_read(f, same[i], &r), 0);
        assert_int_equal(fstat(r.out_fd, &got), 0);
        assert_true(same_inode(&got, &want));
        res_free(&r);
    }
    /* Only a whole "/workspace" component is the prefix; "workspace/x" is relative; any other
     * absolute path is outside, and refused (it was taken inside: "/a/b" was a/b). */
    struct res r;
    const char *outside[] = {"/a/b", "/workspacea/b", "/", "/tmp/out.txt", "/etc/passwd"};
    for (size_t i = 0; i < sizeof outside / sizeof *outside; i++) {
        assert_int_equal(op_read(f, outside[i], &r), -1);
        assert_int_equal(r.e.code, NSBOX_E_INVALID);
        if (!strstr(r.e.msg, "is outside /workspace: file operations reach only the workspace"))
            fail_msg("%s: %s", outside[i], r.e.msg);
        res_free(&r);
    }
    assert_int_equal(op_read(f, "workspace/a/b", &r), -1);
    assert_int_equal(r.e.code, NSBOX_E_NOTFOUND);
    assert_string_equal(r.e.msg, "no such file: /workspace/workspace/a/b");
    res_free(&r);
    check_fds(f);
}

static void t_path_invalid(void **state)
{
    FX;
    struct res r;
    /* NUL: the request parser refuses it, escaped or raw. */
    const char *js = "{\"v\":1,\"op\":\"read\",\"path\":\"a\\u0000/../../outside/secret\"}";
    struct nsbox_request q;
    memset(&q, 0, sizeof q);
    struct nsbox_err e = {0};
    assert_int_equal(nsbox_proto_parse(js, strlen(js), &q, &e), -1);
    assert_int_equal(e.code, NSBOX_E_INVALID);
    nsbox_proto_request_free(&q);
    const char raw[] = "{\"v\":1,\"op\":\"write\",\"path\":\"a\0b\"}";
    assert_int_equal(nsbox_proto_parse(raw, sizeof raw - 1, &q, &e), -1);
    nsbox_proto_request_free(&q);

    /* Longer than PATH_MAX: refused by the parser. */
    char *longp = malloc(PATH_MAX + 2);
    memset(longp, 'a', PATH_MAX + 1);
    for (int i = 100; i < PATH_MAX; i += 100)
        longp[i] = '/';
    longp[PATH_MAX + 1] = '\0';
    assert_int_equal(do_op(f, rq("read", longp), -1, &r), -1);
    assert_int_equal(r.e.code, NSBOX_E_INVALID);
    res_free(&r);
    assert_int_equal(do_op(f, rq("write", longp), -1, &r), -1);
    res_free(&r);

    /* PATH_MAX - 1 bytes passes the parser; a component over NAME_MAX does not pass us. */
    memset(longp, 'b', PATH_MAX - 1);
    longp[PATH_MAX - 1] = '\0';
    assert_int_equal(op_read(f, longp, &r), -1);
    assert_int_equal(r.e.code, NSBOX_E_INVALID);
    assert_int_equal(r.e.sys_errno, ENAMETOOLONG);
    res_free(&r);
    /* Straight to nsbox_files_op, as a request struct that skipped the parser. */
    struct nsbox_request direct;
    memset(&direct, 0, sizeof direct);
    direct.op = NSBOX_OP_STAT;
    memset(direct.path, 'c', sizeof direct.path);
    direct.path[sizeof direct.path - 1] = '\0';
    cJSON *rep = nsbox_proto_reply_ok(NULL);
    int out = -1;
    assert_int_equal(nsbox_files_op(f->wsfd, &f->st, &direct, -1, rep, &out, &e), -1);
    assert_int_equal(e.code, NSBOX_E_INVALID);
    cJSON_Delete(rep);
    free(longp);

    /* Empty. */
    assert_int_equal(op_read(f, "", &r), -1);
    assert_int_equal(r.e.code, NSBOX_E_INVALID);
    res_free(&r);
    /* Control characters are shown as '?' in messages. */
    assert_int_equal(op_read(f, "evil\n\x1b[31mred", &r), -1);
    assert_int_equal(r.e.code, NSBOX_E_NOTFOUND);
    assert_string_equal(r.e.msg, "no such file: /workspace/evil??[31mred");
    res_free(&r);
    check_fds(f);
}

/* ---- read ---------------------------------------------------------------------------------- */

static void t_read(void **state)
{
    FX;
    struct res r;
    char buf[64];
    assert_int_equal(read_str(f, "/workspace/a/b", buf, sizeof buf, &r), 0);
    assert_string_equal(buf, "ab");
    assert_int_equal((int)num(r.reply, "size"), 2);
    /* Read-only, blocking (O_NONBLOCK was only for the open). */
    assert_int_equal(write(r.out_fd, "x", 1), -1);
    assert_int_equal(errno, EBADF);
    assert_int_equal(fcntl(r.out_fd, F_GETFL) & (O_NONBLOCK | O_ACCMODE), O_RDONLY);
    res_free(&r);

    assert_int_equal(op_read(f, "nope", &r), -1);
    assert_int_equal(r.e.code, NSBOX_E_NOTFOUND);
    assert_int_equal(r.e.sys_errno, ENOENT);
    assert_string_equal(r.e.msg, "no such file: /workspace/nope");
    res_free(&r);

    assert_int_equal(op_read(f, "a", &r), -1);
    assert_int_equal(r.e.code, NSBOX_E_INVALID);
    assert_non_null(strstr(r.e.msg, "not a regular file (it is a directory)"));
    res_free(&r);
    assert_int_equal(op_read(f, "/workspace", &r), -1);
    assert_int_equal(r.e.code, NSBOX_E_INVALID);
    res_free(&r);
    assert_int_equal(op_read(f, "a/b/c", &r), -1);
    assert_int_equal(r.e.sys_errno, ENOTDIR);
    res_free(&r);
    check_fds(f);
}

static void on_alarm(int sig)
{
    (void)sig;
    static const char m[] = "test_files: an operation blocked (alarm)\n";
    ssize_t w = write(2, m, sizeof m - 1);
    (void)w;
    _exit(99);
}

/* A FIFO or socket the sandbox planted: neither read nor written, and nothing blocks. */
static void t_fifo_and_socket(void **state)
{
    FX;
    signal(SIGALRM, on_alarm);
    alarm(10);
    assert_int_equal(mkfifoat(f->basefd, "ws/fifo", 0666), 0);
    struct res r;
    assert_int_equal(op_read(f, "fifo", &r), -1);
    assert_int_equal(r.e.code, NSBOX_E_INVALID);
    assert_non_null(strstr(r.e.msg, "not a regular file (it is a FIFO)"));
    res_free(&r);
    assert_int_equal(write_str(f, "fifo", "data", false, -1, &r), -1); /* no reader: ENXIO */
    assert_non_null(strstr(r.e.msg, "not a regular file"));
    res_free(&r);
    /* With a reader, the open succeeds: the type check must still refuse it. */
    char p[PATH_MAX + 16];
    snprintf(p, sizeof p, "%s/fifo", f->ws);
    int reader = open(p, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    assert_true(reader >= 0);
    assert_int_equal(write_str(f, "fifo", "data", false, -1, &r), -1);
    assert_non_null(strstr(r.e.msg, "not a regular file (it is a FIFO)"));
    res_free(&r);
    char c;
    assert_int_equal(read(reader, &c, 1), 0); /* nothing was written into it */
    close(reader);
    struct stat st;
    assert_int_equal(fstatat(f->basefd, "ws/fifo", &st, AT_SYMLINK_NOFOLLOW), 0);
    assert_true(S_ISFIFO(st.st_mode));
    /* A FIFO reached through a symlink is still a FIFO. */
    put_link(f->basefd, "/fifo", "ws/tofifo");
    assert_int_equal(op_read(f, "tofifo", &r), -1);
    assert_int_equal(r.e.code, NSBOX_E_INVALID);
    res_free(&r);

    /* A unix socket. */
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(s >= 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    int n = snprintf(sa.sun_path, sizeof sa.sun_path, "%s/sock", f->ws);
    if (n > 0 && (size_t)n < sizeof sa.sun_path) {
        assert_int_equal(bind(s, (struct sockaddr *)&sa, sizeof sa), 0);
        assert_int_equal(op_read(f, "sock", &r), -1);
        assert_non_null(strstr(r.e.msg, "not a regular file"));
        res_free(&r);
        assert_int_equal(write_str(f, "sock", "x", false, -1, &r), -1);
        res_free(&r);
    }
    close(s);
    alarm(0);
    check_fds(f);
}

/* ---- write --------------------------------------------------------------------------------- */

static void t_write(void **state)
{
    FX;
    struct res r;
    umask(077); /* the supervisor's umask must not decide the modes */
    assert_int_equal(write_str(f, "new", "hello", false, -1, &r), 0);
    assert_int_equal((int)num(r.reply, "size"), 5);
    res_free(&r);
    file_is(f, "ws/new", "hello");
    assert_int_equal(mode_of(f, "ws/new"), 0644);

    assert_int_equal(write_str(f, "/workspace/x.sh", "#!/bin/sh\n", false, 0751, &r), 0);
    res_free(&r);
    assert_int_equal(mode_of(f, "ws/x.sh"), 0751);
    /* setuid, setgid, sticky: never given, and a request for them is refused (the protocol's
     * parser says why; here the bits are only dropped, never applied) */
    assert_int_equal(write_str(f, "suid", "x", false, 0755, &r), 0);
    res_free(&r);
    assert_int_equal(mode_of(f, "ws/suid"), 0755);

    /* Overwrite: truncated, keeps its mode. */
    assert_int_equal(fchmodat(f->basefd, "ws/a/b", 0600, 0), 0);
    assert_int_equal(write_str(f, "a/b", "z", false, 0777, &r), 0);
    res_free(&r);
    file_is(f, "ws/a/b", "z");
    assert_int_equal(mode_of(f, "ws/a/b"), 0600);
    /* Empty content. */
    assert_int_equal(write_str(f, "a/b", "", false, -1, &r), 0);
    assert_int_equal((int)num(r.reply, "size"), 0);
    res_free(&r);
    file_is(f, "ws/a/b", "");

    /* Missing directories: only with mkdir. */
    assert_int_equal(write_str(f, "p/q/r/file", "deep", false, -1, &r), -1);
    assert_int_equal(r.e.code, NSBOX_E_NOTFOUND);
    assert_non_null(strstr(r.e.msg, "ask for it"));
    res_free(&r);
    assert_false(exists(f, "ws/p"));
    assert_int_equal(write_str(f, "p/q/r/file", "deep", true, -1, &r), 0);
    res_free(&r);
    file_is(f, "ws/p/q/r/file", "deep");
    assert_int_equal(mode_of(f, "ws/p"), 0755);
    assert_int_equal(mode_of(f, "ws/p/q/r"), 0755);
    /* mkdir through a symlink to a directory inside is refused for the missing part, but an
     * existing directory path through an in-workspace symlink is followed. */
    put_link(f->basefd, "p/q", "ws/toq");
    assert_int_equal(write_str(f, "toq/viaq", "v", false, -1, &r), 0);
    res_free(&r);
    file_is(f, "ws/p/q/viaq", "v");
    assert_int_equal(write_str(f, "toq/new/x", "v", true, -1, &r), -1);
    assert_int_equal(r.e.code, NSBOX_E_INVALID);
    assert_non_null(strstr(r.e.msg, "is a symlink"));
    res_free(&r);

    /* Not a file name, a directory, no descriptor. */
    assert_int_equal(write_str(f, "/workspace", "x", false, -1, &r), -1);
    assert_int_equal(r.e.code, NSBOX_E_INVALID);
    res_free(&r);
    assert_int_equal(write_str(f, "a/..", "x", false, -1, &r), -1);
    assert_int_equal(r.e.code, NSBOX_E_INVALID);
    res_free(&r);
    assert_int_equal(write_str(f, "a", "x", false, -1, &r), -1);
    assert_int_equal(r.e.sys_errno, EISDIR);
    res_free(&r);
    assert_int_equal(do_op(f, rq("write", "nofd"), -1, &r), -1);
    assert_int_equal(r.e.code, NSBOX_E_INVALID);
    res_free(&r);
    assert_false(exists(f, "ws/nofd"));
    /* A write from the middle of the content descriptor takes the rest. */
    int fd = content_fd("0123456789", 10);
    assert_int_equal(lseek(fd, 4, SEEK_SET), 4);
    assert_int_equal(do_op(f, rq("write", "tail"), fd, &r), 0);
    close(fd);
    res_free(&r);
    file_is(f, "ws/tail", "456789");
    umask(022);
    check_fds(f);
}

/* The content descriptor is the destination itself; a lease the sandbox holds: neither empties
 * the file nor blocks. */
static void t_write_same_file_and_lease(void **state)
{
    FX;
    struct res r;
    int fd = openat(f->basefd, "ws/a/b", O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    assert_int_equal(do_op(f, rq("write", "/workspace/a/b"), fd, &r), -1);
    assert_non_null(strstr(r.e.msg, "the source file itself"));
    res_free(&r);
    close(fd);
    file_is(f, "ws/a/b", "ab");

    signal(SIGIO, SIG_IGN); /* the lease break notification */
    signal(SIGALRM, on_alarm);
    alarm(20);
    put_file(f->basefd, "ws/leased", "LEASED");
    int lfd = openat(f->basefd, "ws/leased", O_RDONLY | O_CLOEXEC);
    assert_true(lfd >= 0);
    if (fcntl(lfd, F_SETLEASE, F_WRLCK) != 0) {
        close(lfd);
        signal(SIGIO, SIG_DFL);
        skip();
    }
    assert_int_equal(write_str(f, "leased", "new", false, -1, &r), -1);
    assert_int_equal(r.e.sys_errno, EWOULDBLOCK);
    res_free(&r);
    char buf[16];
    int rc = read_str(f, "leased", buf, sizeof buf, &r);
    res_free(&r);
    (void)rc; /* refused while the lease is broken, or read: either way, no hang */
    assert_int_equal(fcntl(lfd, F_SETLEASE, F_UNLCK), 0);
    close(lfd);
    alarm(0);
    signal(SIGIO, SIG_DFL);
    file_is(f, "ws/leased", "LEASED");
    check_fds(f);
}

struct feeder {
    int fd;
    size_t total;
    int close_after; /* 1: close when done */
};

static unsigned char pattern(size_t i)
{
    return (unsigned char)((i * 2654435761u) >> 13);
}

static void *feed(void *arg)
{
    struct feeder *fd = arg;
    unsigned char buf[65536];
    size_t done = 0;
    while (done < fd->total) {
        size_t n = fd->total - done < sizeof buf ? fd->total - done : sizeof buf;
        for (size_t i = 0; i < n; i++)
            buf[i] = pattern(done + i);
        ssize_t w = write(fd->fd, buf, n);
        if (w <= 0) break;
        done += (size_t)w;
    }
    if (fd->close_after) close(fd->fd);
    return NULL;
}

static void check_pattern(struct fx *f, const char *rel, size_t total)
{
    int fd = openat(f->basefd, rel, O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    struct stat st;
    assert_int_equal(fstat(fd, &st), 0);
    assert_int_equal((size_t)st.st_size, total);
    unsigned char buf[65536];
    size_t off = 0;
    for (;;) {
        ssize_t n = read(fd, buf, sizeof buf);
        assert_true(n >= 0);
        if (n == 0) break;
        for (ssize_t i = 0; i < n; i++)
            if (buf[i] != pattern(off + (size_t)i))
                fail_msg("%s: byte %zu differs", rel, off + (size_t)i);
        off += (size_t)n;
    }
    close(fd);
    assert_int_equal(off, total);
}

/* Pipes are spliced, sockets read through the bounded buffer. */
static void t_write_streams(void **state)
{
    FX;
    const size_t total = 5u << 20;
    int pfd[2];
    assert_int_equal(pipe2(pfd, O_CLOEXEC), 0);
    struct feeder fd = {.fd = pfd[1], .total = total, .close_after = 1};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, feed, &fd), 0);
    struct res r;
    assert_int_equal(do_op(f, rq("write", "from_pipe"), pfd[0], &r), 0);
    pthread_join(th, NULL);
    close(pfd[0]);
    assert_int_equal((size_t)num(r.reply, "size"), total);
    res_free(&r);
    check_pattern(f, "ws/from_pipe", total);

    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    fd = (struct feeder){.fd = sv[1], .total = total, .close_after = 1};
    assert_int_equal(pthread_create(&th, NULL, feed, &fd), 0);
    assert_int_equal(do_op(f, rq("write", "from_socket"), sv[0], &r), 0);
    pthread_join(th, NULL);
    close(sv[0]);
    assert_int_equal((size_t)num(r.reply, "size"), total);
    res_free(&r);
    check_pattern(f, "ws/from_socket", total);
    check_fds(f);
}

/* A sparse source stays sparse, and its data lands at the right offsets. */
static void t_write_sparse(void **state)
{
    FX;
    const off_t size = 256ll << 20;
    int src = openat(f->basefd, "sparse-src", O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    assert_true(src >= 0);
    assert_int_equal(ftruncate(src, size), 0);
    assert_int_equal(pwrite(src, "HEAD", 4, 0), 4);
    assert_int_equal(pwrite(src, "MIDDLE", 6, 100ll << 20), 6);
    assert_int_equal(pwrite(src, "TAIL", 4, size - 4), 4);
    assert_int_equal(lseek(src, 0, SEEK_SET), 0);
    struct res r;
    assert_int_equal(do_op(f, rq("write", "big"), src, &r), 0);
    assert_int_equal((off_t)num(r.reply, "size"), size);
    res_free(&r);
    close(src);
    int fd = openat(f->basefd, "ws/big", O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    struct stat st;
    assert_int_equal(fstat(fd, &st), 0);
    assert_int_equal(st.st_size, size);
    assert_true((off_t)st.st_blocks * 512 < (16ll << 20));
    char b[8] = {0};
    assert_int_equal(pread(fd, b, 4, 0), 4);
    assert_memory_equal(b, "HEAD", 4);
    assert_int_equal(pread(fd, b, 6, 100ll << 20), 6);
    assert_memory_equal(b, "MIDDLE", 6);
    assert_int_equal(pread(fd, b, 4, size - 4), 4);
    assert_memory_equal(b, "TAIL", 4);
    assert_int_equal(pread(fd, b, 4, 50ll << 20), 4);
    assert_memory_equal(b, "\0\0\0\0", 4);
    close(fd);
    check_fds(f);
}

static void t_write_limit(void **state)
{
    FX;
    f->opts.max_write_bytes = 1000;
    put_file(f->basefd, "ws/keep", "ORIGINAL");
    char big[1001];
    memset(big, 'x', sizeof big);
    struct res r;
    int fd = content_fd(big, sizeof big);
    assert_int_equal(do_op(f, rq("write", "keep"), fd, &r), -1);
    close(fd);
    /* the disk's error, as a write that fills it (a client treats both as "no space") */
    assert_int_equal(r.e.code, NSBOX_E_NOSPACE);
    assert_int_equal(r.e.sys_errno, EFBIG);
    assert_non_null(strstr(r.e.msg, "disk limit"));
    res_free(&r);
    file_is(f, "ws/keep", "ORIGINAL"); /* refused before anything was touched */

    fd = content_fd(big, 1000);
    assert_int_equal(do_op(f, rq("write", "exact"), fd, &r), 0);
    close(fd);
    res_free(&r);

    /* A stream has no size up front: it is cut at the limit and the new file removed. */
    int pfd[2];
    assert_int_equal(pipe2(pfd, O_CLOEXEC), 0);
    struct feeder fe = {.fd = pfd[1], .total = 5000, .close_after = 1};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, feed, &fe), 0);
    assert_int_equal(do_op(f, rq("write", "streamed"), pfd[0], &r), -1);
    close(pfd[0]);
    pthread_join(th, NULL);
    assert_int_equal(r.e.code, NSBOX_E_NOSPACE);
    assert_int_equal(r.e.sys_errno, EFBIG);
    assert_non_null(strstr(r.e.msg, "nothing was written"));
    res_free(&r);
    assert_false(exists(f, "ws/streamed"));
    check_fds(f);
}

/* A client that sends part of the content and then nothing cannot hold the supervisor. */
static void t_write_stall(void **state)
{
    FX;
    f->opts.stall_ms = 200;
    int pfd[2];
    assert_int_equal(pipe2(pfd, O_CLOEXEC), 0);
    assert_int_equal(write(pfd[1], "partial", 7), 7);
    put_file(f->basefd, "ws/old", "old content");
    struct res r;
    double t0 = now_s();
    assert_int_equal(do_op(f, rq("write", "stalled"), pfd[0], &r), -1);
    assert_true(now_s() - t0 < 5);
    assert_int_equal(r.e.code, NSBOX_E_TIMEOUT);
    res_free(&r);
    assert_false(exists(f, "ws/stalled"));
    /* An existing file is left as it was: the content went to a file beside it, removed, not
     * into the file itself, which a write cut short would leave truncated and incomplete. */
    assert_int_equal(do_op(f, rq("write", "old"), pfd[0], &r), -1);
    assert_non_null(strstr(r.e.msg, "(the file is unchanged)"));
    res_free(&r);
    file_is(f, "ws/old", "old content");
    /* in place only where a twin cannot be made: a second hard link stays one */
    assert_int_equal(linkat(f->basefd, "ws/old", f->basefd, "ws/old2", 0), 0);
    assert_int_equal(write(pfd[1], "partial", 7), 7);
    assert_int_equal(do_op(f, rq("write", "old"), pfd[0], &r), -1);
    assert_non_null(strstr(r.e.msg, "(the file is incomplete)"));
    res_free(&r);
    close(pfd[0]);
    close(pfd[1]);
    DIR *d = fdopendir(openat(f->basefd, "ws", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    for (struct dirent *de; d && (de = readdir(d));)
        if (!strncmp(de->d_name, ".nsbox-write-", 13)) fail_msg("left %s", de->d_name);
    closedir(d);
    check_fds(f);
}

/* An overwrite is whole or not at all: a content that ends early (a full disk, a stalled
 * client) leaves the old file. What it keeps: its mode, and (as root) its owner. */
static void t_write_replaces_whole(void **state)
{
    FX;
    put_file(f->basefd, "ws/keep.sh", "old");
    assert_int_equal(fchmodat(f->basefd, "ws/keep.sh", 0751, 0), 0);
    if (geteuid() == 0) { /* as the supervisor of an ext4 workspace: root, handing files over */
        f->st.privileged = true;
        f->st.ws_kind = NSBOX_WS_EXT4;
        f->st.slot = 42;
        assert_int_equal(fchownat(f->basefd, "ws/keep.sh", 4242, 4343, 0), 0);
    }
    struct stat before, st;
    assert_int_equal(fstatat(f->basefd, "ws/keep.sh", &before, 0), 0);
    struct res r;
    assert_int_equal(write_str(f, "keep.sh", "new content", false, 0600, &r), 0);
    res_free(&r);
    file_is(f, "ws/keep.sh", "new content");
    assert_int_equal(mode_of(f, "ws/keep.sh"), 0751); /* the request's mode is for new files */
    assert_int_equal(fstatat(f->basefd, "ws/keep.sh", &st, 0), 0);
    /* a twin renamed over it, not the old file truncated: a reader of the old one keeps it */
    assert_true(st.st_ino != before.st_ino);
    if (geteuid() == 0) {
        assert_int_equal(st.st_uid, 4242);
        assert_int_equal(st.st_gid, 4343);
    }
    check_fds(f);
}

/* ---- stat, list ---------------------------------------------------------------------------- */

static void t_stat(void **state)
{
    FX;
    struct res r;
    assert_int_equal(do_op(f, rq("stat", "a/b"), -1, &r), 0);
    assert_string_equal(str(r.reply, "type"), "file");
    assert_int_equal((int)num(r.reply, "size"), 2);
    assert_int_equal((int)num(r.reply, "mode"), 0644);
    assert_true(num(r.reply, "mtime") > 1e9);
    res_free(&r);
    assert_int_equal(do_op(f, rq("stat", "/workspace/a"), -1, &r), 0);
    assert_string_equal(str(r.reply, "type"), "dir");
    res_free(&r);
    const char *roots[] = {"/workspace", "/workspace/", ".", "a/..", "../.."};
    for (size_t i = 0; i < sizeof roots / sizeof *roots; i++) {
        assert_int_equal(do_op(f, rq("stat", roots[i]), -1, &r), 0);
        assert_string_equal(str(r.reply, "type"), "dir");
        res_free(&r);
    }
    /* lstat: a symlink is a symlink, with its text; never followed. */
    put_link(f->basefd, "/etc/passwd", "ws/abs");
    char t[PATH_MAX + 32];
    snprintf(t, sizeof t, "%s/outside/secret", f->base);
    put_link(f->basefd, t, "ws/abs_out");
    assert_int_equal(do_op(f, rq("stat", "abs"), -1, &r), 0);
    assert_string_equal(str(r.reply, "type"), "symlink");
    assert_string_equal(str(r.reply, "target"), "/etc/passwd");
    res_free(&r);
    assert_int_equal(do_op(f, rq("stat", "abs_out"), -1, &r), 0);
    assert_string_equal(str(r.reply, "type"), "symlink");
    assert_int_equal((int)num(r.reply, "size"), (int)strlen(t));
    res_free(&r);
    assert_int_equal(mkfifoat(f->basefd, "ws/fifo", 0600), 0);
    assert_int_equal(do_op(f, rq("stat", "fifo"), -1, &r), 0);
    assert_string_equal(str(r.reply, "type"), "other");
    res_free(&r);
    assert_int_equal(do_op(f, rq("stat", "missing"), -1, &r), -1);
    assert_int_equal(r.e.code, NSBOX_E_NOTFOUND);
    assert_string_equal(r.e.msg, "no such file: /workspace/missing");
    res_free(&r);
    assert_int_equal(do_op(f, rq("stat", "abs_out/x"), -1, &r), -1);
    assert_int_equal(r.e.code, NSBOX_E_NOTFOUND);
    res_free(&r);
    check_fds(f);
}

static void t_list(void **state)
{
    FX;
    put_dir(f->basefd, "ws/d");
    put_file(f->basefd, "ws/d/zeta", "123");
    put_file(f->basefd, "ws/d/alpha", "1");
    put_dir(f->basefd, "ws/d/sub");
    put_link(f->basefd, "/etc/passwd", "ws/d/link");
    assert_int_equal(mkfifoat(f->basefd, "ws/d/fifo", 0600), 0);
    put_link(f->basefd, "d", "ws/tod");
    char t[PATH_MAX + 32];
    snprintf(t, sizeof t, "%s/outside", f->base);
    put_link(f->basefd, t, "ws/abs_outdir");
    put_link(f->basefd, "../outside", "ws/rel_outdir");

    struct res r;
    const char *same[] = {"d", "/workspace/d", "tod", "tod/", "a/../d"};
    for (size_t k = 0; k < sizeof same / sizeof *same; k++) {
        assert_int_equal(do_op(f, rq("list", same[k]), -1, &r), 0);
        const cJSON *arr = cJSON_GetObjectItemCaseSensitive(r.reply, "entries");
        assert_int_equal(cJSON_GetArraySize(arr), 5);
        const char *order[] = {"alpha", "fifo", "link", "sub", "zeta"};
        for (int i = 0; i < 5; i++)
            assert_string_equal(str(cJSON_GetArrayItem(arr, i), "name"), order[i]);
        assert_false(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r.reply, "truncated")));
        const cJSON *z = entry(r.reply, "zeta");
        assert_string_equal(str(z, "type"), "file");
        assert_int_equal((int)num(z, "size"), 3);
        assert_int_equal((int)num(z, "mode"), 0644);
        assert_true(num(z, "mtime") > 1e9);
        assert_string_equal(str(entry(r.reply, "sub"), "type"), "dir");
        assert_string_equal(str(entry(r.reply, "link"), "type"), "symlink");
        assert_string_equal(str(entry(r.reply, "fifo"), "type"), "other");
        res_free(&r);
    }
    /* No path: the workspace itself. */
    assert_int_equal(do_op(f, rq("list", NULL), -1, &r), 0);
    assert_non_null(entry(r.reply, "d"));
    assert_non_null(entry(r.reply, "etc"));
    assert_null(entry(r.reply, "ws"));
    res_free(&r);
    assert_int_equal(do_op(f, rq("list", "../.."), -1, &r), 0);
    assert_non_null(entry(r.reply, "etc"));
    assert_null(entry(r.reply, "outside"));
    res_free(&r);
    /* Links out of the workspace name nothing. */
    assert_int_equal(do_op(f, rq("list", "abs_outdir"), -1, &r), -1);
    assert_int_equal(r.e.code, NSBOX_E_NOTFOUND);
    res_free(&r);
    assert_int_equal(do_op(f, rq("list", "rel_outdir"), -1, &r), -1);
    assert_int_equal(r.e.code, NSBOX_E_NOTFOUND);
    res_free(&r);
    assert_int_equal(do_op(f, rq("list", "a/b"), -1, &r), -1);
    assert_int_equal(r.e.sys_errno, ENOTDIR);
    res_free(&r);
    assert_int_equal(do_op(f, rq("list", "d/fifo"), -1, &r), -1);
    assert_int_equal(r.e.sys_errno, ENOTDIR);
    res_free(&r);
    check_fds(f);
}

/* A directory too big for one message: the reply is cut, says so, and still fits. */
static void t_list_truncated(void **state)
{
    FX;
    put_dir(f->basefd, "ws/many");
    int d = openat(f->basefd, "ws/many", O_PATH | O_DIRECTORY | O_CLOEXEC);
    assert_true(d >= 0);
    char name[NAME_MAX + 1];
    const int n = 6000;
    for (int i = 0; i < n; i++) {
        /* 250 bytes, many of them quotes and control characters that JSON escapes */
        memset(name, '"', 250);
        snprintf(name, 16, "%06d\x01\x02", i);
        name[strlen(name)] = '\x03';
        name[250] = '\0';
        int fd = openat(d, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        assert_true(fd >= 0);
        close(fd);
    }
    close(d);
    struct res r;
    assert_int_equal(do_op(f, rq("list", "many"), -1, &r), 0); /* do_op checks the size */
    assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r.reply, "truncated")));
    int got = cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(r.reply, "entries"));
    assert_true(got > 100 && got < n);
    char *out = cJSON_PrintUnformatted(r.reply);
    assert_true(strlen(out) > NSBOX_PROTO_MAX / 2);
    free(out);
    /* The rest in parts, each from the reply before's "next": every name exactly once, each
     * part sorted by name. */
    static bool seen[6000];
    memset(seen, 0, sizeof seen);
    int total = 0, parts = 0;
    for (;;) {
        cJSON *es = cJSON_GetObjectItemCaseSensitive(r.reply, "entries"), *x;
        const char *prev = "";
        cJSON_ArrayForEach(x, es)
        {
            const char *nm = cJSON_GetObjectItemCaseSensitive(x, "name")->valuestring;
            assert_true(strcmp(prev, nm) < 0);
            prev = nm;
            int i = atoi(nm);
            assert_true(i >= 0 && i < n && !seen[i]);
            seen[i] = true;
            total++;
        }
        parts++;
        const cJSON *next = cJSON_GetObjectItemCaseSensitive(r.reply, "next");
        bool more = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r.reply, "truncated"));
        assert_int_equal(more, cJSON_IsString(next));
        /* a directory left alone is listed whole: no part says the bound cut it */
        assert_true(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(r.reply, "incomplete")));
        if (!more)
            break;
        cJSON *q = rq("list", "many");
        cJSON_AddStringToObject(q, "cursor", next->valuestring);
        res_free(&r);
        assert_int_equal(do_op(f, q, -1, &r), 0);
    }
    res_free(&r);
    assert_int_equal(total, n);
    assert_true(parts >= 2);
    /* A listing that the bound ends (no more names may come, and some are left) says so,
     * rather than looking complete; one that ends where the directory does says nothing. */
    cJSON *q = rq("list", "many");
    cJSON_AddStringToObject(q, "cursor", "0:5");
    assert_int_equal(do_op(f, q, -1, &r), 0);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(r.reply, "entries")), 5);
    assert_true(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(r.reply, "truncated")));
    assert_null(cJSON_GetObjectItemCaseSensitive(r.reply, "next"));
    assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r.reply, "incomplete")));
    res_free(&r);
    assert_int_equal(mkdirat(f->basefd, "ws/five", 0755), 0);
    for (int i = 0; i < 5; i++) {
        char nm[32];
        snprintf(nm, sizeof nm, "ws/five/%d", i);
        put_file(f->basefd, nm, "x");
    }
    q = rq("list", "five");
    cJSON_AddStringToObject(q, "cursor", "0:5");
    assert_int_equal(do_op(f, q, -1, &r), 0);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(r.reply, "entries")), 5);
    assert_true(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(r.reply, "incomplete")));
    res_free(&r);
    /* a cursor that is no reply's: digits only, both numbers (strtoll alone takes a leading
     * space or sign), and no bare position */
    static const char *const bad[] = {
        "x",   "-1",   "12x",    "99999999999999999999", "1:", "1:-2", "1:2:3", ":5", "1:x",
        "1:99999999999999999999", "1", " 1:2", "+1:2", "1:+2", "1: 2", "1:2 ", "1:\t2", "-0:1",
        "0x1:2"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cJSON *q = rq("list", "many");
        cJSON_AddStringToObject(q, "cursor", bad[i]);
        assert_int_equal(do_op(f, q, -1, &r), -1);
        assert_int_equal(r.e.code, NSBOX_E_INVALID);
        res_free(&r);
    }
    check_fds(f);
}

/* Names are bytes; the reply is UTF-8 JSON. */
static void t_list_names(void **state)
{
    FX;
    put_file(f->basefd, "ws/bad\xff\xfe-name", "x");
    put_file(f->basefd, "ws/\xc3\xa9t\xc3\xa9", "x");
    put_file(f->basefd, "ws/ctl\x1b[0m\n", "x");
    struct res r;
    assert_int_equal(do_op(f, rq("list", "/workspace"), -1, &r), 0); /* do_op checks UTF-8 */
    assert_non_null(entry(r.reply, "bad\xef\xbf\xbd\xef\xbf\xbd-name"));
    assert_non_null(entry(r.reply, "\xc3\xa9t\xc3\xa9"));
    assert_non_null(entry(r.reply, "ctl\x1b[0m\n"));
    res_free(&r);
    check_fds(f);
}

int main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(t_path_forms),
        T(t_path_invalid),
        T(t_read),
        T(t_fifo_and_socket),
        T(t_write),
        T(t_write_streams),
        T(t_write_sparse),
        T(t_write_limit),
        T(t_write_replaces_whole),
        T(t_write_stall),
        T(t_write_same_file_and_lease),
        T(t_stat),
        T(t_list),
        T(t_list_truncated),
        T(t_list_names),
    };
    return cmocka_run_group_tests_name("files", tests, NULL, NULL);
}
