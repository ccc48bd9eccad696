/* The prober's subcommands that act on files given to it: make many (a disk or inode limit),
 * write extended attributes (what the seccomp filter and the overlay refuse), and write through
 * a shared mapping (what keeps a program's set-id bits); and one that holds as many open files
 * as it can (the host's file table). */
#include "attack.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

/* mkfiles DIR MAX SECONDS: create empty files until an error, MAX, or the time is up. */
int attack_files_mkfiles_main(int argc, char **argv)
{
    if (argc != 5) return 2;
    const char *dir = argv[2];
    long max = atol(argv[3]);
    double secs = atof(argv[4]);
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) {
        printf("{\"created\": 0, \"error\": \"%s\", \"seconds\": 0}\n", ename(errno));
        return 1;
    }
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    long n = 0;
    int err = 0;
    double el = 0;
    for (; n < max; n++) {
        char name[32];
        snprintf(name, sizeof name, "f%ld", n);
        int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (fd < 0) {
            err = errno;
            break;
        }
        close(fd);
        if ((n & 65535) == 65535) {
            /* Progress, in case the OOM killer ends us before the summary. */
            char line[64];
            int l = snprintf(line, sizeof line, "{\"progress\": %ld}\n", n + 1);
            if (write(1, line, (size_t)l) < 0) return 1;
        }
        if ((n & 1023) == 0) {
            clock_gettime(CLOCK_MONOTONIC, &t);
            el = (double)(t.tv_sec - t0.tv_sec) + (double)(t.tv_nsec - t0.tv_nsec) / 1e9;
            if (el > secs) {
                err = ETIME;
                n++;
                break;
            }
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &t);
    el = (double)(t.tv_sec - t0.tv_sec) + (double)(t.tv_nsec - t0.tv_nsec) / 1e9;
    char line[128];
    int l =
        snprintf(line, sizeof line, "{\"created\": %ld, \"error\": \"%s\", \"seconds\": %.2f}\n", n,
                 err ? ename(err) : "", el);
    return write(1, line, (size_t)l) < 0;
}

/* `attack xattr FILE [NAME=VALUE]...`: write a user attribute, a file capability (CAP_NET_RAW,
 * effective) and each NAME (overlayfs's trusted.overlay.redirect, say) on FILE; one line each:
 * the call, the name and "written" or the errno's name. */
int attack_files_xattr_main(int argc, char **argv)
{
    if (argc < 3 || argc > 10) return 2;
    struct {
        uint32_t magic_etc;
        struct {
            uint32_t permitted, inheritable;
        } data[2];
    } cap = {VFS_CAP_REVISION_2 | VFS_CAP_FLAGS_EFFECTIVE, {{1u << CAP_NET_RAW, 0}, {0, 0}}};
    struct {
        const char *name;
        const void *value;
        size_t len;
    } attrs[10] = {{"user.nsbox", "x", 1}, {"security.capability", &cap, sizeof cap}};
    size_t n_attrs = 2;
    for (int a = 3; a < argc; a++) {
        char *eq = strchr(argv[a], '=');
        if (!eq) return 2;
        *eq = '\0';
        attrs[n_attrs].name = argv[a];
        attrs[n_attrs].value = eq + 1;
        attrs[n_attrs++].len = strlen(eq + 1);
    }
    /* every call that writes one: setxattrat (Linux 6.13, 463 on every architecture) is the
     * one a filter built from names an old libseccomp does not know would miss */
    static const char *const calls[] = {"setxattr", "lsetxattr", "fsetxattr", "setxattrat"};
    int fd = open(argv[2], O_RDONLY | O_CLOEXEC);
    for (size_t i = 0; i < n_attrs; i++) {
        struct {
            uint64_t value;
            uint32_t size, flags;
        } args = {(uintptr_t)attrs[i].value, (uint32_t)attrs[i].len, 0};
        for (int c = 0; c < 4; c++) {
            const char *n = attrs[i].name;
            const void *v = attrs[i].value;
            size_t len = attrs[i].len;
            int r = c == 0   ? setxattr(argv[2], n, v, len, 0)
                    : c == 1 ? lsetxattr(argv[2], n, v, len, 0)
                    : c == 2 ? fsetxattr(fd, n, v, len, 0)
                             : (int)syscall(463, AT_FDCWD, argv[2], 0, n, &args, sizeof args);
            printf("%s %s %s\n", calls[c], n, r == 0 ? "written" : ename(errno));
        }
    }
    if (fd >= 0)
        close(fd);
    return 0;
}

/* `attack mmap-write FILE...`: write "nsbox" at the start of each FILE through a shared
 * writable mapping, which the kernel lets keep the file's set-id bits and file capability
 * (write(2) clears them); one line each: the file and "written" or the failing call and errno's
 * name. */
int attack_files_mmap_write_main(int argc, char **argv)
{
    for (int i = 2; i < argc; i++) {
        int fd = open(argv[i], O_RDWR | O_CLOEXEC);
        char *p = fd < 0 ? MAP_FAILED : mmap(NULL, 5, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (p != MAP_FAILED) {
            memcpy(p, "nsbox", 5);
            msync(p, 5, MS_SYNC);
            munmap(p, 5);
        }
        const char *call = fd < 0 ? "open " : "mmap ";
        if (fd >= 0 && p != MAP_FAILED)
            printf("%s written\n", argv[i]);
        else
            printf("%s %s%s\n", argv[i], call, ename(errno));
        if (fd >= 0)
            close(fd);
    }
    return 0;
}

/* ---- holdfiles: the host's file table ------------------------------------------------------ */

struct held {
    long n;
    int err;
    int kind; /* 0: descriptors, 1: mappings, 2: in flight */
};

static void report_held(int fd, int kind, long n, int err)
{
    struct held h = {n, err, kind};
    if (write(fd, &h, sizeof h) != (ssize_t)sizeof h) _exit(1);
}

/* A child that holds what it took until the parent is gone (its end of hold_rd reads EOF). */
static void hold_until_parent_goes(int hold_rd)
{
    char c;
    while (read(hold_rd, &c, 1) > 0) {}
    _exit(0);
}

/* Descriptors until the process's own limit (EMFILE) or k: eventfds, files like any other,
 * made without a path walk. */
static long open_files(long k, int *err)
{
    long n = 0;
    for (; n < k; n++)
        if (eventfd(0, EFD_CLOEXEC) < 0) {
            *err = errno;
            break;
        }
    return n;
}

/* Files kept by mappings alone: each opened, mapped, and its descriptor closed, so that the
 * descriptor limit never counts it. */
static long map_files(long k, int *err)
{
    long n = 0;
    for (; n < k; n++) {
        int fd = open("/dev/zero", O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
            *err = errno;
            break;
        }
        void *a = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE, fd, 0);
        close(fd);
        if (a == MAP_FAILED) {
            *err = errno;
            break;
        }
    }
    return n;
}

/* Files in flight on a unix socket nobody reads, 253 (SCM_MAX_FD) a message, each closed by
 * the sender once sent: until the kernel refuses (ETOOMANYREFS past RLIMIT_NOFILE per user). */
static long send_files(int *err)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) < 0) {
        *err = errno;
        return 0;
    }
    long n = 0;
    for (int round = 0; round < 1000; round++) {
        int fds[253];
        char cbuf[CMSG_SPACE(sizeof fds)];
        memset(cbuf, 0, sizeof cbuf);
        int k = 0;
        for (; k < 253; k++)
            if ((fds[k] = eventfd(0, EFD_CLOEXEC)) < 0) break;
        char byte = 'x';
        struct iovec iov = {&byte, 1};
        struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
                           .msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)k)};
        struct cmsghdr *c = CMSG_FIRSTHDR(&m);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)k);
        memcpy(CMSG_DATA(c), fds, sizeof(int) * (size_t)k);
        ssize_t r = k ? sendmsg(sv[0], &m, MSG_NOSIGNAL) : -1;
        int e = k ? errno : EMFILE;
        for (int i = 0; i < k; i++)
            close(fds[i]);
        if (r < 0) {
            *err = e;
            break;
        }
        n += k;
    }
    return n;
}

/* holdfiles TARGET MAPS: as many open files as the sandbox can hold, held until stdin closes.
 * Processes open descriptors up to their limit until TARGET in all, or a fork fails (the pids
 * limit); one more keeps MAPS files by mappings alone; one more puts files in flight. One JSON
 * line: each count and the errno that ended it ("none": the count asked for was reached). */
int attack_files_hold_main(int argc, char **argv)
{
    if (argc != 4) return 2;
    long target = atol(argv[2]), maps = atol(argv[3]);
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    int rep[2], hold[2];
    if (pipe2(rep, O_CLOEXEC) < 0 || pipe2(hold, O_CLOEXEC) < 0) return 1;
    long per = (long)rl.rlim_cur - 8, assigned = 0, procs = 0;
    int fork_err = 0;
    for (int kind = 0; kind < 3; kind++) {
        for (;;) {
            long k = kind == 0 ? (target - assigned < per ? target - assigned : per) : maps;
            if (kind == 0 && k <= 0) break;
            pid_t pid = fork();
            if (pid < 0) {
                fork_err = errno;
                break;
            }
            if (pid == 0) {
                prctl(PR_SET_PDEATHSIG, SIGKILL);
                close(hold[1]);
                int err = 0;
                long n = kind == 0 ? open_files(k, &err) : kind == 1 ? map_files(k, &err)
                                                                     : send_files(&err);
                report_held(rep[1], kind, n, err);
                hold_until_parent_goes(hold[0]);
            }
            procs++;
            if (kind != 0) break;
            assigned += k;
        }
        if (fork_err) break;
    }
    close(rep[1]);
    long got[3] = {0, 0, 0};
    int errs[3] = {0, 0, 0};
    struct held h;
    for (long i = 0; i < procs && read(rep[0], &h, sizeof h) == (ssize_t)sizeof h; i++) {
        if (h.kind < 0 || h.kind > 2) return 1;
        got[h.kind] += h.n;
        if (h.err) errs[h.kind] = h.err;
    }
    printf("{\"processes\": %ld, \"fork_errno\": \"%s\", \"opened\": %ld, \"open_errno\": \"%s\", "
           "\"mapped\": %ld, \"map_errno\": \"%s\", \"in_flight\": %ld, "
           "\"in_flight_errno\": \"%s\"}\n",
           procs, fork_err ? ename(fork_err) : "none", got[0], errs[0] ? ename(errs[0]) : "none",
           got[1], errs[1] ? ename(errs[1]) : "none", got[2],
           errs[2] ? ename(errs[2]) : "none");
    fflush(stdout);
    char buf[256];
    while (read(0, buf, sizeof buf) > 0) {}
    return 0;
}
