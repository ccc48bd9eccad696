/* The prober's subcommands that act on files given to it: make many (a disk or inode limit),
 * write extended attributes (what the seccomp filter and the overlay refuse), and write through
 * a shared mapping (what keeps a program's set-id bits). */
#include "attack.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
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
