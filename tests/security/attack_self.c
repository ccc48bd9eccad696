/* The in-sandbox attacker (attack.c): the prober's own powers. No capability, no_new_privs, a
 * seccomp filter, not root; its ids mapped as nsbox maps them; no way to gain others. */
#define _GNU_SOURCE
#include "attack.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/capability.h>
#include <linux/magic.h>
#include <linux/sched.h>
#include <linux/securebits.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

static bool status_field(const char *key, char *out, size_t cap)
{
    char *s = read_file("/proc/self/status", NULL);
    if (!s) return false;
    size_t kl = strlen(key);
    for (char *line = s; line && *line;) {
        char *nl = strchr(line, '\n');
        if (!strncmp(line, key, kl) && line[kl] == ':') {
            char *v = line + kl + 1;
            while (*v == ' ' || *v == '\t')
                v++;
            size_t vl = nl ? (size_t)(nl - v) : strlen(v);
            if (vl >= cap) vl = cap - 1;
            memcpy(out, v, vl);
            out[vl] = '\0';
            return true;
        }
        line = nl ? nl + 1 : NULL;
    }
    return false;
}

void attack_self_identity(void)
{
    static const char *const caps[] = {"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"};
    char v[128], name[64];
    for (size_t i = 0; i < 5; i++) {
        snprintf(name, sizeof name, "caps_%s_zero", caps[i]);
        bool ok = status_field(caps[i], v, sizeof v);
        emit(name, ok && strtoull(v, NULL, 16) == 0, "%s=%s", caps[i], ok ? v : "(missing)");
    }
    bool ok = status_field("NoNewPrivs", v, sizeof v);
    int nnp = prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0);
    emit("no_new_privs", ok && !strcmp(v, "1") && nnp == 1, "status NoNewPrivs=%s prctl=%d",
         ok ? v : "(missing)", nnp);
    /* Locked so that a uid 0 mapped by mistake, or a set-uid-root file, would still gain no
     * capability at exec, and no ambient capability could be raised */
    const int want = SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP_LOCKED |
                     SECBIT_KEEP_CAPS_LOCKED | SECBIT_NO_CAP_AMBIENT_RAISE |
                     SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED;
    int bits = prctl(PR_GET_SECUREBITS, 0, 0, 0, 0);
    emit("securebits_locked", bits >= 0 && (bits & want) == want, "securebits=%#x want=%#x",
         bits, want);
    ok = status_field("Seccomp", v, sizeof v);
    emit("seccomp_filter_mode", ok && !strcmp(v, "2"), "status Seccomp=%s", ok ? v : "(missing)");
    emit("not_root", getuid() != 0 && geteuid() != 0 && getgid() != 0, "uid=%d euid=%d gid=%d",
         (int)getuid(), (int)geteuid(), (int)getgid());
}

static long p_setuid_root(const void *a)
{
    return syscall(SYS_setresuid, 0, 0, 0);
}

static long p_setgid_root(const void *a)
{
    return syscall(SYS_setresgid, 0, 0, 0);
}

static long p_setgroups(const void *a)
{
    gid_t g = 0;
    return syscall(SYS_setgroups, 1, &g);
}

/* Another id of the sandbox's range (nobody), not root: mapped, so only the missing capability
 * stops the change (EPERM); EINVAL would mean the id does not exist in the sandbox at all. */
static long p_setuid_other(const void *a)
{
    return syscall(SYS_setresuid, 65534, 65534, 65534);
}

static long p_setgid_other(const void *a)
{
    return syscall(SYS_setresgid, 65534, 65534, 65534);
}

static long p_chown_other(const void *a)
{
    char path[64];
    snprintf(path, sizeof path, "/tmp/attack-chown-%d", (int)getpid());
    int fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
    if (fd < 0) return -1;
    close(fd);
    long r = syscall(SYS_fchownat, AT_FDCWD, path, 1, 1, 0); /* daemon:daemon */
    int e = errno;
    unlink(path);
    errno = e;
    return r;
}

/* The id maps hold ids 0-65535 inside, each once, and none of them is host root. */
static void probe_id_range(void)
{
    const char *files[] = {"/proc/self/uid_map", "/proc/self/gid_map"};
    bool ok = true;
    char detail[256] = "";
    size_t dl = 0;
    for (int f = 0; f < 2; f++) {
        char *text = read_file(files[f], NULL);
        unsigned long long total = 0, in, out, count;
        bool zero = false, host_root = false;
        for (char *line = text; line && *line;) {
            char *nl = strchr(line, '\n');
            if (sscanf(line, "%llu %llu %llu", &in, &out, &count) == 3) {
                total += count;
                zero |= in == 0;
                host_root |= out == 0;
            }
            line = nl ? nl + 1 : NULL;
        }
        ok = ok && text && total == 65536 && zero && !host_root;
        dl += (size_t)snprintf(detail + dl, sizeof detail - dl, "%s%s: %llu ids%s%s",
                               f ? "; " : "", files[f] + 11, total, zero ? "" : ", 0 unmapped",
                               host_root ? ", HOST ROOT MAPPED" : "");
    }
    emit("ids_range_mapped", ok, "%s", detail);
}

static long p_capset_full(const void *a)
{
    struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct d[2];
    memset(d, 0xff, sizeof d);
    return syscall(SYS_capset, &h, d);
}

/* write(2)'s result for text written to path, with its errno. */
static long write_to(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    long r = write(fd, text, strlen(text));
    int e = errno;
    close(fd);
    errno = e;
    return r;
}

static long p_uid_map(const void *a)
{
    return write_to((const char *)a, "0 0 1\n");
}

static long p_oom_score_adj(const void *a)
{
    return write_to("/proc/self/oom_score_adj", "-1000");
}

void attack_self_privilege_gain(void)
{
    static const int deny[] = {EPERM, EINVAL, EACCES, 0};
    report("setresuid_root", in_child(p_setuid_root, NULL), deny);
    report("setresgid_root", in_child(p_setgid_root, NULL), deny);
    report("setgroups", in_child(p_setgroups, NULL), deny);
    report("capset_raise_all", in_child(p_capset_full, NULL), deny);
    char *sg = read_file("/proc/self/setgroups", NULL);
    emit("setgroups_denied_in_userns", sg && !strncmp(sg, "deny", 4), "/proc/self/setgroups=%s",
         sg ? strtok(sg, "\n") : "(unreadable)");
    static const int deny_w[] = {EPERM, EACCES, EROFS, EINVAL, 0};
    report("rewrite_uid_map", in_child(p_uid_map, "/proc/self/uid_map"), deny_w);
    report("rewrite_gid_map", in_child(p_uid_map, "/proc/self/gid_map"), deny_w);
    report("oom_score_adj_lower", in_child(p_oom_score_adj, NULL), deny_w);
    static const int eperm[] = {EPERM, 0};
    report("setresuid_other_mapped", in_child(p_setuid_other, NULL), eperm);
    report("setresgid_other_mapped", in_child(p_setgid_other, NULL), eperm);
    report("chown_other_mapped", in_child(p_chown_other, NULL), eperm);
    probe_id_range();
}
