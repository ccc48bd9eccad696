#define _GNU_SOURCE
#include "util.h"
#include "cleanup.h"

#include <errno.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/syscall.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

void nsbox_note_vsay(const struct nsbox_note *n, const char *fmt, va_list ap)
{
    if (!n || !n->fn)
        return;
    char line[NSBOX_NOTE_MAX];
    vsnprintf(line, sizeof line, fmt, ap);
    n->fn(n->ctx, line);
}

void nsbox_note_say(const struct nsbox_note *n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    nsbox_note_vsay(n, fmt, ap);
    va_end(ap);
}

int64_t nsbox_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int nsbox_parse_seconds(const char *s, uint64_t max_s, uint64_t *ms)
{
    /* decimal digits, and a fraction after a point: no sign, blank, hex or exponent, which
     * strtod took ("0x2", "2e0", " +2"), as --ttl never did */
    uint64_t whole = 0, frac = 0;
    const char *p = s;
    if (*p < '0' || *p > '9')
        return -1;
    for (; *p >= '0' && *p <= '9'; p++) {
        whole = whole * 10 + (uint64_t)(*p - '0');
        if (whole > max_s)
            return -1;
    }
    bool rest = false; /* digits below the millisecond */
    if (*p == '.') {
        p++;
        if (*p < '0' || *p > '9')
            return -1;
        int d = 0;
        for (; *p >= '0' && *p <= '9'; p++, d++) {
            if (d < 3)
                frac = frac * 10 + (uint64_t)(*p - '0');
            else
                rest = rest || *p != '0';
        }
        for (; d < 3; d++)
            frac *= 10; /* "1.5": 500 ms */
    }
    if (*p)
        return -1;
    /* what is below a millisecond rounds up: 0.0001 is a timeout, not none */
    uint64_t v = whole * 1000 + frac + (rest ? 1 : 0);
    if (v > max_s * 1000)
        return -1;
    *ms = v;
    return 0;
}

int nsbox_exit_code(int status)
{
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int nsbox_openat2(int dfd, const char *path, const struct open_how *how)
{
    for (int i = 0; i < NSBOX_OPENAT2_RETRIES; i++) {
        long fd = syscall(SYS_openat2, dfd, path, how, sizeof *how);
        if (fd >= 0 || errno != EAGAIN)
            return (int)fd;
    }
    return -1;
}

int nsbox_open_dir(int dir, const char *path, uint64_t more)
{
    bool links = dir >= 0 && (more & NSBOX_OPEN_DIR_LINKS);
    struct open_how how = {.flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
                           .resolve = (more & ~NSBOX_OPEN_DIR_LINKS) | RESOLVE_NO_MAGICLINKS |
                                      (links ? 0 : RESOLVE_NO_SYMLINKS) |
                                      (dir >= 0 ? RESOLVE_BENEATH : 0)};
    return nsbox_openat2(dir >= 0 ? dir : AT_FDCWD, path, &how);
}

long nsbox_parse_pid(const char *s)
{
    char *end;
    errno = 0;
    long pid = strtol(s, &end, 10);
    return !*s || *end || errno || pid < 2 || pid > (1L << 22) ? -1 : pid;
}

void nsbox_reset_signals(void)
{
    struct sigaction dfl = {.sa_handler = SIG_DFL};
    for (int sig = 1; sig < NSIG; sig++)
        if (sig != SIGKILL && sig != SIGSTOP)
            sigaction(sig, &dfl, NULL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
}

void nsbox_cmsg_put_fds(struct msghdr *msg, void *buf, const int *fds, size_t nfds)
{
    memset(buf, 0, CMSG_SPACE(sizeof(int) * nfds));
    msg->msg_control = buf;
    msg->msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
    struct cmsghdr *c = CMSG_FIRSTHDR(msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
    memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
}

ssize_t nsbox_msg_send(int sock, const void *hdr, size_t hlen, const void *payload, size_t plen,
                       const int *fds, size_t nfds)
{
    struct iovec iov[2] = {{(void *)hdr, hlen}, {(void *)payload, plen}};
    union {
        char buf[CMSG_SPACE(sizeof(int) * NSBOX_MSG_FDS_MAX)];
        struct cmsghdr align;
    } u;
    struct msghdr msg = {.msg_iov = iov, .msg_iovlen = plen ? 2 : 1};
    if (nfds > NSBOX_MSG_FDS_MAX) {
        errno = EINVAL;
        return -1;
    }
    if (nfds)
        nsbox_cmsg_put_fds(&msg, u.buf, fds, nfds);
    ssize_t n;
    do
        n = sendmsg(sock, &msg, MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    return n;
}

ssize_t nsbox_msg_recv(int sock, void *hdr, size_t hlen, void *payload, size_t max, int fds[3],
                       int *flags)
{
    size_t got;
    return nsbox_msg_recv_fds(sock, hdr, hlen, payload, max, fds, 3, &got, flags);
}

ssize_t nsbox_msg_recv_fds(int sock, void *hdr, size_t hlen, void *payload, size_t max, int *fds,
                           size_t cap, size_t *got, int *flags)
{
    struct iovec iov[2] = {{hdr, hlen}, {payload, max}};
    union {
        char buf[CMSG_SPACE(sizeof(int) * NSBOX_MSG_FDS_MAX)];
        struct cmsghdr align;
    } u;
    if (cap > NSBOX_MSG_FDS_MAX)
        cap = NSBOX_MSG_FDS_MAX;
    /* room for as many as were asked for: more come cut (MSG_CTRUNC), closed by the kernel */
    struct msghdr msg = {.msg_iov = iov,
                         .msg_iovlen = 2,
                         .msg_control = u.buf,
                         .msg_controllen = CMSG_SPACE(sizeof(int) * cap)};
    for (size_t i = 0; i < cap; i++)
        fds[i] = -1;
    *got = 0;
    ssize_t n;
    do
        n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
    while (n < 0 && errno == EINTR);
    *flags = msg.msg_flags;
    if (n <= 0)
        return n;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
            continue;
        size_t cnt = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        int *in = (int *)CMSG_DATA(c);
        for (size_t i = 0; i < cnt; i++) {
            if (*got < cap)
                fds[(*got)++] = in[i];
            else
                close(in[i]);
        }
    }
    return n;
}

char *nsbox_read_text_at(int dfd, const char *path, size_t limit)
{
    cleanup_close int fd = openat(dfd, path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    size_t cap = 4096, len = 0;
    cleanup_free char *buf = malloc(cap);
    if (!buf)
        return NULL;
    for (;;) {
        if (len + 1 >= cap) {
            if (cap > limit) {
                errno = EFBIG;
                return NULL;
            }
            char *nb = realloc(buf, cap * 2);
            if (!nb)
                return NULL;
            buf = nb;
            cap *= 2;
        }
        ssize_t r = read(fd, buf + len, cap - len - 1);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return NULL;
        }
        if (r == 0)
            break;
        len += (size_t)r;
    }
    if (len > limit) {
        errno = EFBIG;
        return NULL;
    }
    buf[len] = '\0';
    return nsbox_steal_ptr(&buf);
}

int nsbox_proc_stat(int pid, char *state, int *ppid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    cleanup_close int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof buf - 1);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    /* "pid (comm) state ppid ...": comm may hold spaces and parentheses */
    const char *p = strrchr(buf, ')');
    char st;
    int pp;
    if (!p || sscanf(p + 1, " %c %d", &st, &pp) != 2) {
        errno = EINVAL;
        return -1;
    }
    if (state)
        *state = st;
    if (ppid)
        *ppid = pp;
    return 0;
}

bool nsbox_pid_alive(int pid)
{
    if (pid <= 0 || (kill(pid, 0) < 0 && errno != EPERM))
        return false;
    char st;
    if (nsbox_proc_stat(pid, &st, NULL) < 0)
        return true; /* exists, state unknown: assume alive */
    return st != 'Z' && st != 'X';
}

void nsbox_close_fds_keep(const int *keep, size_t n)
{
    nsbox_close_fds_keep_from(3, keep, n);
}

void nsbox_close_fds_keep_from(int first, const int *keep, size_t n)
{
    int k[8];
    size_t m = 0;
    for (size_t i = 0; i < n && m < NSBOX_ARRAY_LEN(k); i++)
        if (keep[i] >= first)
            k[m++] = keep[i];
    for (size_t i = 1; i < m; i++) /* insertion sort: a handful */
        for (size_t j = i; j > 0 && k[j - 1] > k[j]; j--) {
            int t = k[j];
            k[j] = k[j - 1];
            k[j - 1] = t;
        }
    unsigned from = (unsigned)first;
    bool ok = true;
    for (size_t i = 0; i < m; i++) {
        if ((unsigned)k[i] > from)
            ok = syscall(SYS_close_range, from, (unsigned)k[i] - 1, 0) == 0 && ok;
        from = (unsigned)k[i] + 1;
    }
    if (syscall(SYS_close_range, from, ~0U, 0) == 0 && ok)
        return;
    nsbox_close_fds_slow(first, k, m);
}

static bool fd_kept(int fd, const int *keep, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (keep[i] == fd)
            return true;
    return false;
}

/* The kernel's struct linux_dirent64, which glibc declares only with its own getdents64. */
struct fd_dirent {
    uint64_t ino;
    int64_t off;
    unsigned short reclen;
    unsigned char type;
    char name[];
};

/* Every descriptor from first up, but dirfd and keep[], that /proc/self/fd lists, closed; false
 * when /proc cannot be read or its listing cannot be trusted. The directory lists them by
 * number from its offset on, so one closed on the way does not move the entries still to come.
 * A container's mounts and seccomp filter are its bundle's: a directory bound over /proc, or
 * getdents64 answered with success and no entries, would list nothing and leave everything
 * open; a procfs listing of this process always holds the directory's own descriptor. */
static bool close_listed(int first, const int *keep, size_t n)
{
    int dirfd = open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dirfd < 0)
        return false;
    struct statfs fs = {0}; /* f_type 0 if fstatfs is answered with success but not made */
    if (fstatfs(dirfd, &fs) < 0 || fs.f_type != PROC_SUPER_MAGIC) {
        close(dirfd);
        return false;
    }
    bool saw_dirfd = false;
    char buf[4096] __attribute__((aligned(8)));
    long got;
    while ((got = syscall(SYS_getdents64, dirfd, buf, sizeof buf)) > 0)
        for (long at = 0; at < got;) {
            const struct fd_dirent *d = (const struct fd_dirent *)(void *)(buf + at);
            at += d->reclen;
            int fd = 0;
            const char *c = d->name;
            for (; *c >= '0' && *c <= '9' && fd < 100000000; c++)
                fd = fd * 10 + (*c - '0');
            if (c == d->name || *c)
                continue;
            if (fd == dirfd)
                saw_dirfd = true;
            else if (fd >= first && !fd_kept(fd, keep, n))
                close(fd);
        }
    close(dirfd);
    return got == 0 && saw_dirfd;
}

void nsbox_close_fds_slow(int first, const int *keep, size_t n)
{
    if (close_listed(first, keep, n))
        return;
    /* no /proc, or none to trust: every number a descriptor may have. The supervisor raises its
     * soft limit to the hard one, and a descriptor opened before a limit was lowered stays above
     * it, so the larger of both, at least 65536, at most fs.nr_open's default (the container's
     * /proc/sys, if any, is no more to be trusted than its /proc/self/fd) */
    struct rlimit rl = {0, 0};
    getrlimit(RLIMIT_NOFILE, &rl);
    rlim_t top = rl.rlim_cur > rl.rlim_max ? rl.rlim_cur : rl.rlim_max;
    top = top < 65536 ? 65536 : top > (1 << 20) ? (1 << 20) : top;
    for (int fd = first; fd < (int)top; fd++)
        if (!fd_kept(fd, keep, n))
            close(fd);
}

void nsbox_close_fds_except(int keep)
{
    nsbox_close_fds_keep(&keep, 1);
}

int nsbox_fds_place(const int *fds, size_t n, int first)
{
    int moved[NSBOX_MSG_FDS_MAX];
    if (n > NSBOX_MSG_FDS_MAX) {
        errno = EINVAL;
        return -1;
    }
    /* first above the range, so that no dup2 below closes a source still to be copied */
    for (size_t i = 0; i < n; i++)
        if ((moved[i] = fcntl(fds[i], F_DUPFD, first + (int)n)) < 0)
            return -1;
    for (size_t i = 0; i < n; i++)
        if (dup2(moved[i], first + (int)i) < 0)
            return -1;
    return 0;
}

/* Reads a whole small file; ENOENT is returned as 1 with *out NULL. */
int nsbox_read_small(const char *path, char **out, struct nsbox_err *e)
{
    *out = NULL;
    cleanup_close int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        if (errno == ENOENT)
            return 1;
        return nsbox_err_sys(e, "cannot open %s", path);
    }
    size_t cap = 4096, len = 0;
    cleanup_free char *buf = malloc(cap);
    if (!buf)
        return nsbox_err_sys(e, "malloc");
    for (;;) {
        if (len + 1 >= cap) {
            if (cap >= NSBOX_SMALL_FILE_MAX)
                return nsbox_err_set(e, NSBOX_E_INVALID, EFBIG, "%s: larger than %u bytes", path,
                                     NSBOX_SMALL_FILE_MAX);
            char *nb = realloc(buf, cap * 2);
            if (!nb)
                return nsbox_err_sys(e, "realloc");
            buf = nb;
            cap *= 2;
        }
        ssize_t r = read(fd, buf + len, cap - 1 - len);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return nsbox_err_sys(e, "cannot read %s", path);
        if (r == 0)
            break;
        len += (size_t)r;
    }
    buf[len] = '\0';
    *out = nsbox_steal_ptr(&buf);
    return 0;
}

int nsbox_pwrite_all(int fd, const void *buf, size_t len, off_t off)
{
    const char *p = buf;
    while (len > 0) {
        ssize_t w = off < 0 ? write(fd, p, len) : pwrite(fd, p, len, off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            if (w == 0)
                errno = EIO;
            return -1;
        }
        p += w, len -= (size_t)w, off += off < 0 ? 0 : w;
    }
    return 0;
}

ssize_t nsbox_read_bounded_once(int fd, char *buf, size_t n, size_t *have)
{
    for (;;) {
        char sink[512];
        bool full = *have + 1 >= n;
        ssize_t r = full ? read(fd, sink, sizeof sink) : read(fd, buf + *have, n - 1 - *have);
        if (r < 0 && errno == EINTR)
            continue;
        if (r > 0 && !full)
            *have += (size_t)r;
        return r;
    }
}

size_t nsbox_read_bounded(int fd, char *buf, size_t n)
{
    size_t have = 0;
    while (nsbox_read_bounded_once(fd, buf, n, &have) > 0)
        ;
    if (n)
        buf[have] = '\0';
    return have;
}

bool nsbox_fd_is_at_path(int fd, const char *path)
{
    struct stat a, b;
    return fstat(fd, &a) == 0 && lstat(path, &b) == 0 && nsbox_same_inode(&a, &b);
}

bool nsbox_fd_same_file(int a, int b)
{
    struct stat x, y;
    return a >= 0 && b >= 0 && fstat(a, &x) == 0 && fstat(b, &y) == 0 && nsbox_same_inode(&x, &y);
}

bool nsbox_path_within(const char *path, const char *dir)
{
    size_t n = strlen(dir);
    return !strncmp(path, dir, n) && (path[n] == '/' || !path[n]);
}

bool nsbox_is_host_root(const struct stat *st)
{
    struct stat root;
    return stat("/", &root) == 0 && nsbox_same_inode(st, &root);
}

#ifndef PIPEFS_MAGIC
#define PIPEFS_MAGIC 0x50495045
#endif

int nsbox_set_ids(uint32_t uid, uint32_t gid)
{
    if (syscall(SYS_setresgid, (gid_t)gid, (gid_t)gid, (gid_t)gid) < 0)
        return -1;
    return (int)syscall(SYS_setresuid, (uid_t)uid, (uid_t)uid, (uid_t)uid);
}

bool nsbox_is_anon_pipe(int fd, const struct stat *st)
{
    struct statfs sf;
    return S_ISFIFO(st->st_mode) && fstatfs(fd, &sf) == 0 && sf.f_type == PIPEFS_MAGIC;
}

#define SHARE_LOCK_TRIES 20 /* 1 ms apart: a holder of the pipe's flock does not stop us */

void nsbox_share_pipes(const int fds[3])
{
    for (int i = 0; i < 3; i++) {
        mode_t need = i == 0 ? 0044 : 0022; /* group and others: read stdin, write the others */
        struct stat st;
        if (fds[i] < 0 || fstat(fds[i], &st) < 0 || (st.st_mode & need) == need ||
            !nsbox_is_anon_pipe(fds[i], &st))
            continue;
        /* Another nsbox may add its bits to this pipe now (the other end of `nsbox run | nsbox
         * run`): the read and the change are one step under the lock. A lock held by anyone
         * else (the command, which has the pipe too) only delays us. */
        bool locked = false;
        for (int t = 0; t < SHARE_LOCK_TRIES && !locked; t++) {
            locked = flock(fds[i], LOCK_EX | LOCK_NB) == 0;
            if (!locked && errno != EWOULDBLOCK)
                break; /* no lock to be had: change it all the same */
            if (!locked)
                nanosleep(&(struct timespec){0, 1000000}, NULL);
        }
        if (fstat(fds[i], &st) == 0 && (st.st_mode & need) != need)
            (void)fchmod(fds[i], (st.st_mode & 07777) | need); /* not ours: only add */
        if (locked)
            (void)flock(fds[i], LOCK_UN);
    }
}

size_t nsbox_env_put(char **env, size_t n, char *kv)
{
    size_t klen = strcspn(kv, "=") + 1, j = 0;
    while (j < n && strncmp(env[j], kv, klen) != 0)
        j++;
    env[j] = kv;
    return j == n ? n + 1 : n;
}

int nsbox_check_stdio(const int fds[3], struct nsbox_err *e)
{
    static const char *const names[] = {"stdin", "stdout", "stderr"};
    for (int i = 0; i < 3; i++) {
        struct stat st;
        if (fds[i] < 0 || fstat(fds[i], &st) < 0)
            continue; /* a closed descriptor stays closed */
        int fl = fcntl(fds[i], F_GETFL);
        if (S_ISDIR(st.st_mode) || (fl >= 0 && (fl & O_PATH)))
            return nsbox_err_set(e, NSBOX_E_INVALID, EISDIR,
                                 "%s is a directory or a path descriptor: refusing to hand it to "
                                 "the sandbox (it would lead out of the root)", names[i]);
    }
    return 0;
}

pid_t nsbox_clone_bare(unsigned long flags)
{
    return (pid_t)syscall(SYS_clone, flags, 0, 0, 0, 0);
}
