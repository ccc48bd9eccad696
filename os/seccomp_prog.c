/* The seccomp programs a sandbox installs: the default profile's (alone, or with a writable
 * root's refusals folded in), each compiled once per process, and an OCI bundle's, all kept in
 * a cache on disk, and loading a program in the child (policy/seccomp.c parses profiles,
 * policy/seccomp_compile.c compiles them, policy/seccomp_fold.c folds one into another). */
#define _GNU_SOURCE
#include "seccomp_prog.h"
#include "cleanup.h"
#include "paths.h"
#include "util.h"

#include <seccomp.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/seccomp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <pthread.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static int prog_copy(const struct sock_fprog *src, struct sock_fprog *dst, struct nsbox_err *e)
{
    dst->filter = malloc(src->len * sizeof *src->filter);
    if (!dst->filter)
        return nsbox_err_set(e, NSBOX_E_NOMEM, ENOMEM, "seccomp: out of memory");
    memcpy(dst->filter, src->filter, src->len * sizeof *src->filter);
    dst->len = src->len;
    return 0;
}

/* ---- on-disk cache of the default program ------------------------------------------------
 * Compiling costs about a millisecond and a half (parse, libseccomp's tree, export); reading
 * the cached program back costs a few microseconds. The program is the sandbox's syscall
 * policy, so the cache is only trusted when nobody else could have written it: the directory
 * and the file must be ours and not writable by group or others, the file a regular file
 * opened without following symlinks, and its header must match this profile text, this
 * libseccomp and this architecture, with a checksum over the instructions. A bundle's profile
 * is outside text, whose author could make its 64-bit key collide with another profile's: its
 * file holds the text itself after the instructions (magic CACHE_MAGIC_TEXT), and is used only
 * for that very text, so that a collision costs a compile, never another profile's program. */

#define CACHE_MAGIC "NSBXBPF1"
#define CACHE_MAGIC_TEXT "NSBXBPFT"
/* Part of the key: bump when policy/seccomp_compile.c's options, or the arguments
 * policy/seccomp_width.c narrows, change the produced program. */
#define CACHE_FORMAT "nsbox-seccomp-cache-v2 optimize=2 narrow=1"

struct cache_header {
    char magic[8];
    uint64_t key;
    uint32_t arch;
    uint32_t n_insns;
    uint64_t checksum;
};

/* Not cryptographic: the hash only has to tell versions apart (anyone able to write the cache
 * directory could write any program); a bundle's text, which is not ours, is compared whole. */
static uint64_t hash_bytes(uint64_t h, const void *data, size_t len)
{
    const unsigned char *s = data;
    for (; len >= 8; s += 8, len -= 8) {
        uint64_t w;
        memcpy(&w, s, sizeof w);
        h = (h ^ w) * 0x9e3779b97f4a7c15ull;
        h ^= h >> 31;
    }
    for (; len; s++, len--) {
        h = (h ^ *s) * 0x100000001b3ull;
        h ^= h >> 31;
    }
    return h;
}

uint64_t nsbox_seccomp_prog_cache_key(const char *kind, uint64_t late, const char *text, size_t len)
{
    const struct scmp_version *v = seccomp_version();
    char tag[160];
    int n = snprintf(tag, sizeof tag,
                     "%s %s libseccomp=%u.%u.%u arch=%#x late=%016" PRIx64 " len=%zu", CACHE_FORMAT,
                     kind, v->major, v->minor, v->micro, seccomp_arch_native(), late, len);
    size_t tn = (size_t)n < sizeof tag ? (size_t)n : sizeof tag - 1;
    uint64_t h = hash_bytes(0xcbf29ce484222325ull, tag, tn);
    return hash_bytes(h, text, len);
}

static uint64_t cache_key(const char *kind, const char *text, size_t len)
{
    return nsbox_seccomp_prog_cache_key(kind, nsbox_seccomp_names_digest(), text, len);
}

static void cache_name(uint64_t key, char *buf, size_t n)
{
    snprintf(buf, n, "seccomp-%016" PRIx64 ".bpf", key);
}

/* fd (the cache directory), or -1 when it is not one we can trust: closed then. */
static int cache_dir_trusted(int fd)
{
    struct stat st;
    if (fd >= 0 && (fstat(fd, &st) < 0 || (st.st_uid != geteuid() && st.st_uid != 0) ||
                    (st.st_mode & (S_IWGRP | S_IWOTH)))) {
        close(fd);
        return -1;
    }
    return fd;
}

/* The cache directory fd, or -1 when there is none we can trust. */
static int cache_dir_open(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT && (mkdir(dir, 0700) == 0 || errno == EEXIST))
        fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    return cache_dir_trusted(fd);
}

/* The whole of the cache file name (its size in *size) when it is a regular file of ours that
 * nobody else may write, of a header's size and at most max bytes; NULL otherwise. */
static char *cache_load(int dirfd, const char *name, size_t max, size_t *size)
{
    /* O_NONBLOCK: opening a FIFO planted under that name must not hang us. */
    cleanup_close int fd =
        openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK);
    if (fd < 0)
        return NULL;
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
        (st.st_mode & (S_IWGRP | S_IWOTH)) || st.st_size < (off_t)sizeof(struct cache_header) ||
        (size_t)st.st_size > max)
        return NULL;
    *size = (size_t)st.st_size;
    char *buf = malloc(*size);
    for (size_t off = 0; buf && off < *size;) {
        ssize_t n = pread(fd, buf + off, *size - off, (off_t)off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            free(buf);
            return NULL;
        }
        off += (size_t)n;
    }
    return buf;
}

/* The cache file of key into out; text (NULL for nsbox's own profiles) must be the one the file
 * holds after its instructions, byte for byte (the checksum covers the instructions). */
static int cache_read(int dirfd, uint64_t key, const char *text, size_t tlen,
                      struct sock_fprog *out)
{
    char name[64];
    cache_name(key, name, sizeof name);
    const size_t max =
        sizeof(struct cache_header) + BPF_MAXINSNS * sizeof(struct sock_filter) + (text ? tlen : 0);
    size_t size;
    cleanup_free char *buf = cache_load(dirfd, name, max, &size);
    if (!buf)
        return -1;
    struct cache_header h;
    memcpy(&h, buf, sizeof h);
    size_t body = size - sizeof h, insns = (size_t)h.n_insns * sizeof(struct sock_filter);
    if (memcmp(h.magic, text ? CACHE_MAGIC_TEXT : CACHE_MAGIC, sizeof h.magic) != 0 ||
        h.key != key || h.arch != seccomp_arch_native() || h.n_insns == 0 ||
        h.n_insns > BPF_MAXINSNS || body != insns + (text ? tlen : 0) ||
        hash_bytes(key, buf + sizeof h, insns) != h.checksum ||
        (text && memcmp(buf + sizeof h + insns, text, tlen) != 0))
        return -1;
    out->filter = malloc(insns);
    if (!out->filter)
        return -1;
    memcpy(out->filter, buf + sizeof h, insns);
    out->len = (unsigned short)h.n_insns;
    return 0;
}

/* Best effort: a failure leaves no file behind and the caller still has its program. The temp
 * file + rename means a reader sees the old file or the complete new one, never half; no fsync,
 * since a file torn by a crash fails the checksum and is simply rewritten. */
static void cache_write(int dirfd, uint64_t key, const char *text, size_t tlen,
                        const struct sock_fprog *prog)
{
    static unsigned counter; /* under default_lock */
    char name[64], tmp[96];
    cache_name(key, name, sizeof name);
    snprintf(tmp, sizeof tmp, ".%s.%ld.%u.tmp", name, (long)getpid(), counter++);

    struct cache_header h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, text ? CACHE_MAGIC_TEXT : CACHE_MAGIC, sizeof h.magic);
    h.key = key;
    h.arch = seccomp_arch_native();
    h.n_insns = prog->len;
    size_t insns = prog->len * sizeof *prog->filter;
    h.checksum = hash_bytes(key, prog->filter, insns);

    int fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0)
        return;
    bool ok = nsbox_pwrite_all(fd, &h, sizeof h, -1) == 0 &&
              nsbox_pwrite_all(fd, prog->filter, insns, -1) == 0 &&
              (!text || nsbox_pwrite_all(fd, text, tlen, -1) == 0) &&
              fchmod(fd, 0644) == 0; /* the umask may have narrowed it; never wider */
    ok = close(fd) == 0 && ok;
    if (!ok || renameat(dirfd, tmp, dirfd, name) < 0)
        unlinkat(dirfd, tmp, 0);
}

static pthread_mutex_t default_lock = PTHREAD_MUTEX_INITIALIZER;
/* filter == NULL until built: [false] the default profile's, [true] with the writable root's
 * refusals folded in */
static struct sock_fprog built[2];

/* Part of the folded program's key: bump when policy/seccomp_fold.c changes what it makes. */
#define FOLD_FORMAT "nsbox-seccomp-fold-v1 root"

/* The cache key of the default program, or of the one with the root's refusals folded in. */
static uint64_t builtin_key(bool root)
{
    const char *text = nsbox_seccomp_default_json();
    uint64_t key = cache_key("nsbox", text, strlen(text));
    if (root) {
        const char *rt = nsbox_seccomp_root_json();
        key = hash_bytes(hash_bytes(key, FOLD_FORMAT, sizeof FOLD_FORMAT), rt, strlen(rt));
    }
    return key;
}

static int build_default(const char *cache_dir, bool root, struct sock_fprog *out,
                         struct nsbox_err *e)
{
    const char *text = nsbox_seccomp_default_json();
    size_t len = strlen(text);
    uint64_t key = 0;
    cleanup_close int dirfd = -1;

    if (cache_dir) {
        key = builtin_key(root);
        dirfd = cache_dir_open(cache_dir);
        if (dirfd >= 0 && cache_read(dirfd, key, NULL, 0, out) == 0)
            return 0;
    }
    struct nsbox_seccomp_profile p;
    if (nsbox_seccomp_profile_parse(text, len, &p, e) < 0)
        return nsbox_err_wrap(e, "built-in default profile");
    int rc = root ? nsbox_seccomp_fold_root(&p, e) : 0;
    if (rc == 0)
        rc = nsbox_seccomp_compile(&p, out, e);
    nsbox_seccomp_profile_free(&p);
    if (rc < 0)
        return nsbox_err_wrap(e, "built-in default profile");
    if (dirfd >= 0)
        cache_write(dirfd, key, NULL, 0, out);
    return 0;
}

static int builtin_prog(const char *cache_dir, bool root, struct sock_fprog *prog,
                        struct nsbox_err *e)
{
    prog->len = 0;
    prog->filter = NULL;
    pthread_mutex_lock(&default_lock);
    int rc = 0;
    if (!built[root].filter)
        rc = build_default(cache_dir, root, &built[root], e);
    if (rc == 0)
        rc = prog_copy(&built[root], prog, e);
    pthread_mutex_unlock(&default_lock);
    return rc;
}

int nsbox_seccomp_prog_default(const char *cache_dir, struct sock_fprog *prog, struct nsbox_err *e)
{
    return builtin_prog(cache_dir, false, prog, e);
}

int nsbox_seccomp_prog_root(const char *cache_dir, struct sock_fprog *prog, struct nsbox_err *e)
{
    return builtin_prog(cache_dir, true, prog, e);
}

int nsbox_seccomp_prog_bundle(const char *cache_dir, const char *text, size_t len,
                              const struct nsbox_seccomp_profile *p, struct sock_fprog *prog,
                              struct nsbox_err *e)
{
    prog->len = 0;
    prog->filter = NULL;
    uint64_t key = cache_key("oci", text, len);
    int rc = 0;
    pthread_mutex_lock(&default_lock);
    cleanup_close int dirfd = cache_dir ? cache_dir_open(cache_dir) : -1;
    if (dirfd < 0 || cache_read(dirfd, key, text, len, prog) < 0) {
        rc = nsbox_seccomp_compile(p, prog, e);
        if (rc == 0 && dirfd >= 0)
            cache_write(dirfd, key, text, len, prog);
    }
    pthread_mutex_unlock(&default_lock);
    return rc;
}

int nsbox_seccomp_prog_cache_dir(char *out, size_t n, struct nsbox_err *e)
{
    char data[PATH_MAX];
    if (nsbox_paths_data_dir(data, sizeof data, e) < 0)
        return -1;
    if ((size_t)snprintf(out, n, "%s/cache", data) >= n)
        return nsbox_err_set(e, NSBOX_E_INVALID, ENAMETOOLONG,
                             "seccomp cache: %s/cache is longer than a path may be: set "
                             "NSBOX_DATA_DIR to a shorter directory",
                             data);
    return 0;
}

void nsbox_seccomp_prog_forget(void)
{
    pthread_mutex_lock(&default_lock);
    nsbox_seccomp_compile_free(&built[false]);
    nsbox_seccomp_compile_free(&built[true]);
    pthread_mutex_unlock(&default_lock);
}

/* ---- pruning ------------------------------------------------------------------------------
 * A key changes with nsbox (the profile, the late-call table, the format), libseccomp and the
 * architecture, and a file is read only under its key: a file under any other is never read
 * again. Only names this file makes are looked at, in a directory trusted as for reading, and
 * only regular files of ours, never through a link; what cannot be shown current goes. A
 * program that is in use has nothing to lose: a file removed under a writer's rename costs a
 * compile. */

/* A writer's temporary file lives for a few microseconds: one this old was left by a crash. */
#define CACHE_TMP_MAX_AGE (60 * 60)
/* Far above any bundle's profile text (its config.json has at most 4 MiB): a larger file is
 * none of ours. */
#define CACHE_TEXT_MAX (16u << 20)
/* cache_name's length: a key is 16 hexadecimal digits */
#define CACHE_NAME_LEN (sizeof "seccomp-0123456789abcdef.bpf" - 1)

/* Is name a cache file's name, "seccomp-<key>.bpf" as cache_name makes it? Its key in *key. */
static bool cache_name_parse(const char *name, uint64_t *key)
{
    char again[64];
    if (strncmp(name, "seccomp-", 8) != 0 || strlen(name) != CACHE_NAME_LEN)
        return false;
    *key = strtoull(name + 8, NULL, 16);
    cache_name(*key, again, sizeof again);
    return strcmp(again, name) == 0; /* no sign, space or capital that strtoull took */
}

/* Is name a writer's temporary file, ".<cache name>.<pid>.<n>.tmp" as cache_write makes it? */
static bool cache_tmp_name(const char *name)
{
    char file[64];
    uint64_t key;
    if (name[0] != '.' || strlen(name) <= CACHE_NAME_LEN + 1)
        return false;
    snprintf(file, sizeof file, "%.*s", (int)CACHE_NAME_LEN, name + 1);
    const char *p = name + 1 + CACHE_NAME_LEN;
    if (!cache_name_parse(file, &key))
        return false;
    for (int part = 0; part < 2; part++) {
        if (*p++ != '.' || *p < '0' || *p > '9')
            return false;
        while (*p >= '0' && *p <= '9')
            p++;
    }
    return strcmp(p, ".tmp") == 0;
}

/* Would this build read the cache file name (key in its name) again? The default programs'
 * keys are builtin's; a bundle's file holds its text, whose key this build computes. */
static bool cache_current(int dirfd, const char *name, uint64_t key, const uint64_t builtin[2])
{
    if (key == builtin[0] || key == builtin[1])
        return true;
    const size_t max =
        sizeof(struct cache_header) + BPF_MAXINSNS * sizeof(struct sock_filter) + CACHE_TEXT_MAX;
    size_t size;
    cleanup_free char *buf = cache_load(dirfd, name, max, &size);
    if (!buf)
        return false;
    struct cache_header h;
    memcpy(&h, buf, sizeof h);
    size_t insns = (size_t)h.n_insns * sizeof(struct sock_filter), at = sizeof h + insns;
    return memcmp(h.magic, CACHE_MAGIC_TEXT, sizeof h.magic) == 0 && h.key == key &&
           h.n_insns <= BPF_MAXINSNS && at <= size && cache_key("oci", buf + at, size - at) == key;
}

int nsbox_seccomp_prog_prune(const char *cache_dir)
{
    int fd = cache_dir_trusted(open(cache_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0)
            close(fd);
        return 0;
    }
    int removed = 0;
    const uint64_t builtin[2] = {builtin_key(false), builtin_key(true)};
    struct dirent *de;
    struct stat st;
    uint64_t key;
    while ((de = readdir(d))) {
        bool file = cache_name_parse(de->d_name, &key), tmp = !file && cache_tmp_name(de->d_name);
        if ((!file && !tmp) || fstatat(fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
            !S_ISREG(st.st_mode) || st.st_uid != geteuid())
            continue;
        if (file ? !cache_current(fd, de->d_name, key, builtin)
                 : time(NULL) - st.st_mtime > CACHE_TMP_MAX_AGE)
            removed += unlinkat(fd, de->d_name, 0) == 0;
    }
    closedir(d);
    return removed;
}

/* ---- loading (child side) ---------------------------------------------------------------- */

int nsbox_seccomp_prog_load(const struct sock_fprog *prog, struct nsbox_err *e)
{
    return nsbox_seccomp_prog_load_flags(prog, 0, e);
}

int nsbox_seccomp_prog_load_flags(const struct sock_fprog *prog, unsigned flags,
                                  struct nsbox_err *e)
{
    if (!prog || !prog->filter || prog->len == 0)
        return nsbox_err_set(e, NSBOX_E_INVALID, 0, "seccomp: empty program");
    /* No SECCOMP_FILTER_FLAG_TSYNC: the child is single-threaded at this point. */
    if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, flags, prog) == 0)
        return 0;
    if (errno == ENOSYS && flags == 0 &&
        prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, (unsigned long)prog, 0, 0) == 0)
        return 0;
    if (errno == EACCES)
        return nsbox_err_sys(e, "seccomp: loading the filter needs no_new_privs set first");
    return nsbox_err_sys(e, "seccomp: loading the filter");
}
