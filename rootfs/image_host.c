/* The `host` image: the host's own /usr (mounted read-only by the launcher) plus an /etc that
 * nsbox generates. Only what programs in /usr need to run is copied from the host's /etc; the
 * users, groups and name service are nsbox's own, and nothing secret is ever copied (no shadow,
 * gshadow, ssh keys, sudoers, ssl/private, machine-id, or any file that is not world-readable).
 */
#include "image.h"
#include "cleanup.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- staleness --------------------------------------------------------------------------- */

static const char *const host_sources[NSBOX_HOST_SRC_COUNT] = {
    [NSBOX_HOST_SRC_LDCACHE] = "/etc/ld.so.cache",
    [NSBOX_HOST_SRC_ALTERNATIVES] = "/etc/alternatives",
    [NSBOX_HOST_SRC_CERTS] = "/etc/ssl/certs",
};

void nsbox_image_host_probe(struct nsbox_host_probe *p)
{
    memset(p, 0, sizeof *p);
    for (int i = 0; i < NSBOX_HOST_SRC_COUNT; i++) {
        struct stat st;
        if (stat(host_sources[i], &st) < 0)
            continue;
        p->src[i].present = true;
        p->src[i].dev = st.st_dev;
        p->src[i].ino = st.st_ino;
        p->src[i].mtime = st.st_mtim;
    }
}

int nsbox_image_host_stamp(const struct nsbox_host_probe *p, char *out, size_t n)
{
    /* Inode and mtime: ldconfig and update-ca-certificates replace files by rename (new inode),
     * and a restore that keeps mtimes (cp -p, rsync -t) still changes the inode. */
    int len = snprintf(out, n, "v%d", NSBOX_IMAGE_BUILDER_VERSION);
    for (int i = 0; i < NSBOX_HOST_SRC_COUNT && len >= 0 && (size_t)len < n; i++) {
        if (p->src[i].present)
            len += snprintf(out + len, n - (size_t)len, ":%llx.%llx.%lld.%09ld",
                            (unsigned long long)p->src[i].dev, (unsigned long long)p->src[i].ino,
                            (long long)p->src[i].mtime.tv_sec, p->src[i].mtime.tv_nsec);
        else
            len += snprintf(out + len, n - (size_t)len, ":-");
    }
    if (len < 0 || (size_t)len >= n)
        return -1;
    return len;
}

bool nsbox_image_host_stale(const char *stored, const struct nsbox_host_probe *now)
{
    char cur[256];
    if (!stored || nsbox_image_host_stamp(now, cur, sizeof cur) < 0)
        return true;
    return strcmp(stored, cur) != 0;
}

/* ---- passwd and group -------------------------------------------------------------------- */

/* Field `idx` (0-based) of a colon-separated line, compared with `want`. */
static bool field_is(const char *line, size_t len, int idx, const char *want)
{
    const char *p = line, *end = line + len;
    for (int i = 0; i < idx; i++) {
        p = memchr(p, ':', (size_t)(end - p));
        if (!p)
            return false;
        p++;
    }
    const char *q = memchr(p, ':', (size_t)(end - p));
    size_t flen = (size_t)((q ? q : end) - p);
    return flen == strlen(want) && !memcmp(p, want, flen);
}

/* Copy `in` without the lines whose name (field 0) is `name` or whose id (field 2) is `id`,
 * then append `entry`. */
static char *replace_entry(const char *in, const char *name, const char *id, const char *entry)
{
    size_t inlen = strlen(in), elen = strlen(entry);
    char *out = malloc(inlen + elen + 2);
    if (!out)
        return NULL;
    size_t o = 0;
    for (const char *p = in; *p;) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        bool drop = field_is(p, len, 0, name) || field_is(p, len, 2, id);
        if (!drop && len > 0) {
            memcpy(out + o, p, len);
            o += len;
            out[o++] = '\n';
        }
        p += len + (nl ? 1 : 0);
    }
    memcpy(out + o, entry, elen);
    out[o + elen] = '\0';
    return out;
}

char *nsbox_image_passwd_add_appuser(const char *passwd, const char *shell)
{
    char entry[512], id[16];
    snprintf(id, sizeof id, "%d", NSBOX_APPUSER_UID);
    /* HOME is the workspace: it is the one writable, persistent place in a sandbox, so tools
     * that write dotfiles (pip --user, git config --global, caches) work without setup. */
    snprintf(entry, sizeof entry, "%s:x:%d:%d:nsbox sandbox user:%s:%s\n", NSBOX_APPUSER_NAME,
             NSBOX_APPUSER_UID, NSBOX_APPUSER_GID, NSBOX_APPUSER_HOME, shell);
    return replace_entry(passwd, NSBOX_APPUSER_NAME, id, entry);
}

char *nsbox_image_group_add_appuser(const char *group)
{
    char entry[128], id[16];
    snprintf(id, sizeof id, "%d", NSBOX_APPUSER_GID);
    snprintf(entry, sizeof entry, "%s:x:%d:\n", NSBOX_APPUSER_NAME, NSBOX_APPUSER_GID);
    return replace_entry(group, NSBOX_APPUSER_NAME, id, entry);
}

char *nsbox_image_passwd_generate(const char *shell)
{
    /* The system users of Debian's base-passwd: a sandbox has the ids an ordinary system has
     * (policy/idmap.h), and programs look them up by name (chown daemon, setuid to nobody).
     * nobody is also what unmapped ids (host root's files) show as. */
    char base[1536];
    snprintf(base, sizeof base,
             "root:x:0:0:root:/root:%s\n"
             "daemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n"
             "bin:x:2:2:bin:/bin:/usr/sbin/nologin\n"
             "sys:x:3:3:sys:/dev:/usr/sbin/nologin\n"
             "sync:x:4:65534:sync:/bin:/bin/sync\n"
             "games:x:5:60:games:/usr/games:/usr/sbin/nologin\n"
             "man:x:6:12:man:/var/cache/man:/usr/sbin/nologin\n"
             "lp:x:7:7:lp:/var/spool/lpd:/usr/sbin/nologin\n"
             "mail:x:8:8:mail:/var/mail:/usr/sbin/nologin\n"
             "news:x:9:9:news:/var/spool/news:/usr/sbin/nologin\n"
             "uucp:x:10:10:uucp:/var/spool/uucp:/usr/sbin/nologin\n"
             "proxy:x:13:13:proxy:/bin:/usr/sbin/nologin\n"
             "www-data:x:33:33:www-data:/var/www:/usr/sbin/nologin\n"
             "backup:x:34:34:backup:/var/backups:/usr/sbin/nologin\n"
             "list:x:38:38:Mailing List Manager:/var/list:/usr/sbin/nologin\n"
             "irc:x:39:39:ircd:/run/ircd:/usr/sbin/nologin\n"
             "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
             shell);
    return nsbox_image_passwd_add_appuser(base, shell);
}

char *nsbox_image_group_generate(void)
{
    /* base-passwd's groups; tty: the group of /dev/pts/N; nogroup: also unmapped gids */
    return nsbox_image_group_add_appuser("root:x:0:\n"
                                         "daemon:x:1:\n"
                                         "bin:x:2:\n"
                                         "sys:x:3:\n"
                                         "adm:x:4:\n"
                                         "tty:x:5:\n"
                                         "disk:x:6:\n"
                                         "lp:x:7:\n"
                                         "mail:x:8:\n"
                                         "news:x:9:\n"
                                         "uucp:x:10:\n"
                                         "man:x:12:\n"
                                         "proxy:x:13:\n"
                                         "kmem:x:15:\n"
                                         "dialout:x:20:\n"
                                         "cdrom:x:24:\n"
                                         "floppy:x:25:\n"
                                         "tape:x:26:\n"
                                         "sudo:x:27:\n"
                                         "audio:x:29:\n"
                                         "dip:x:30:\n"
                                         "www-data:x:33:\n"
                                         "backup:x:34:\n"
                                         "operator:x:37:\n"
                                         "list:x:38:\n"
                                         "irc:x:39:\n"
                                         "src:x:40:\n"
                                         "shadow:x:42:\n"
                                         "utmp:x:43:\n"
                                         "video:x:44:\n"
                                         "sasl:x:45:\n"
                                         "plugdev:x:46:\n"
                                         "staff:x:50:\n"
                                         "games:x:60:\n"
                                         "users:x:100:\n"
                                         "nogroup:x:65534:\n");
}

/* ---- copying from the host's /etc -------------------------------------------------------- */

/* Copied when present. Each is either plain configuration of programs in /usr (ld.so, python,
 * perl, java, fontconfig, libmagic) or public data (CA certificates, services, timezone). */
static const char *const copy_names[] = {
    "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives", "ca-certificates.conf",
    "localtime", "timezone", "protocols", "services", "networks", "rpc", "ethertypes",
    "mime.types", "profile", "bash.bashrc", "inputrc", "gai.conf", "host.conf",
    "debian_version", "shells", "magic", "magic.mime", "locale.alias", "perl", "fonts",
};
/* Directories copied by name prefix: python3, python3.11, java-17-openjdk, ... */
static const char *const copy_prefixes[] = {"python3", "java-"};

static int copy_file(int sfd, int dfd, const char *name, struct nsbox_err *e)
{
    cleanup_close int in = openat(sfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (in < 0)
        return errno == EACCES || errno == ENOENT ? 0 : nsbox_err_sys(e, "cannot read %s", name);
    cleanup_close int out =
        openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (out < 0)
        return nsbox_err_sys(e, "cannot create %s", name);
    char buf[65536];
    for (;;) {
        ssize_t r = read(in, buf, sizeof buf);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return nsbox_err_sys(e, "cannot read %s", name);
        if (r == 0)
            break;
        for (ssize_t off = 0; off < r;) {
            ssize_t w = write(out, buf + off, (size_t)(r - off));
            if (w < 0 && errno == EINTR)
                continue;
            if (w < 0)
                return nsbox_err_sys(e, "cannot write %s", name);
            off += w;
        }
    }
    if (fchmod(out, 0644) < 0)
        return nsbox_err_sys(e, "cannot chmod %s", name);
    if (close(nsbox_steal_fd(&out)) < 0)
        return nsbox_err_sys(e, "cannot write %s", name);
    return 0;
}

/* Copy sfd/name to dfd/name: symlinks as they are (Debian's alternatives and certificate links
 * must keep pointing into /usr, which the sandbox sees), world-readable files as 0644,
 * directories as 0755. Everything else is skipped: devices, sockets, and any file the host
 * keeps from other users, which is the rule that keeps secrets out even in directories we copy
 * whole. */
static int copy_entry(int sfd, int dfd, const char *name, int depth, struct nsbox_err *e)
{
    struct stat st;
    if (fstatat(sfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return errno == ENOENT || errno == EACCES ? 0 : nsbox_err_sys(e, "cannot stat %s", name);
    if (S_ISLNK(st.st_mode)) {
        char target[PATH_MAX];
        ssize_t n = readlinkat(sfd, name, target, sizeof target - 1);
        if (n < 0)
            return nsbox_err_sys(e, "cannot read link %s", name);
        target[n] = '\0';
        if (symlinkat(target, dfd, name) < 0)
            return nsbox_err_sys(e, "cannot create link %s", name);
        return 0;
    }
    if (S_ISREG(st.st_mode))
        return (st.st_mode & S_IROTH) ? copy_file(sfd, dfd, name, e) : 0;
    if (!S_ISDIR(st.st_mode) || (st.st_mode & (S_IROTH | S_IXOTH)) != (S_IROTH | S_IXOTH) ||
        depth > 8)
        return 0;
    if (mkdirat(dfd, name, 0755) < 0)
        return nsbox_err_sys(e, "cannot create %s", name);
    if (fchmodat(dfd, name, 0755, 0) < 0)
        return nsbox_err_sys(e, "cannot chmod %s", name);
    cleanup_close int sub = openat(sfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (sub < 0)
        return errno == EACCES ? 0 : nsbox_err_sys(e, "cannot open %s", name);
    cleanup_close int dsub = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dsub < 0)
        return nsbox_err_sys(e, "cannot open %s", name);
    DIR *d = fdopendir(sub);
    if (!d)
        return nsbox_err_sys(e, "cannot read %s", name);
    sub = -1; /* owned by d now */
    int ret = 0;
    struct dirent *de;
    while (ret == 0 && (de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        if (copy_entry(dirfd(d), dsub, de->d_name, depth + 1, e) < 0)
            ret = nsbox_err_wrap(e, "%s", name);
    }
    closedir(d);
    return ret;
}

static int copy_host_etc(int hostetc, int etc, struct nsbox_err *e)
{
    for (size_t i = 0; i < NSBOX_ARRAY_LEN(copy_names); i++)
        if (copy_entry(hostetc, etc, copy_names[i], 0, e) < 0)
            return -1;

    cleanup_close int dup_fd = dup(hostetc);
    DIR *d = dup_fd >= 0 ? fdopendir(dup_fd) : NULL;
    if (!d)
        return nsbox_err_sys(e, "cannot read /etc");
    dup_fd = -1;
    int ret = 0;
    struct dirent *de;
    while (ret == 0 && (de = readdir(d))) {
        for (size_t i = 0; i < NSBOX_ARRAY_LEN(copy_prefixes); i++) {
            struct stat st;
            if (strncmp(de->d_name, copy_prefixes[i], strlen(copy_prefixes[i])) != 0 ||
                fstatat(hostetc, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
                !S_ISDIR(st.st_mode))
                continue;
            ret = copy_entry(hostetc, etc, de->d_name, 0, e);
            break;
        }
    }
    closedir(d);
    if (ret < 0)
        return -1;

    /* ssl: the certificates and openssl.cnf, never ssl/private */
    if (mkdirat(etc, "ssl", 0755) < 0 || fchmodat(etc, "ssl", 0755, 0) < 0)
        return nsbox_err_sys(e, "cannot create ssl");
    cleanup_close int hssl = openat(hostetc, "ssl", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    cleanup_close int dssl = openat(etc, "ssl", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dssl < 0)
        return nsbox_err_sys(e, "cannot open ssl");
    if (hssl >= 0 && (copy_entry(hssl, dssl, "certs", 0, e) < 0 ||
                      copy_entry(hssl, dssl, "openssl.cnf", 0, e) < 0))
        return nsbox_err_wrap(e, "ssl");
    return 0;
}

/* ---- generated files --------------------------------------------------------------------- */

const char nsbox_image_hosts_text[] = "127.0.0.1\tlocalhost\n"
                                     "::1\tlocalhost ip6-localhost ip6-loopback\n"
                                     "ff02::1\tip6-allnodes\n"
                                     "ff02::2\tip6-allrouters\n";

const char nsbox_image_resolv_text[] =
    "# nsbox: this sandbox has no network by default. Network modes that allow traffic\n"
    "# mount their own resolv.conf over this file.\n";

/* Files only: no sss, ldap, systemd or mdns modules, whose daemons are not in the sandbox.
 * hosts keeps dns so that sandboxes with network access can resolve names. */
static const char nsswitch_text[] = "passwd:         files\n"
                                    "group:          files\n"
                                    "shadow:         files\n"
                                    "gshadow:        files\n"
                                    "hosts:          files dns\n"
                                    "networks:       files\n"
                                    "protocols:      files\n"
                                    "services:       files\n"
                                    "ethers:         files\n"
                                    "rpc:            files\n"
                                    "netgroup:       files\n";

static int write_generated(int etc, const char *shell, struct nsbox_err *e)
{
    cleanup_free char *passwd = nsbox_image_passwd_generate(shell);
    cleanup_free char *group = nsbox_image_group_generate();
    if (!passwd || !group)
        return nsbox_err_set(e, NSBOX_E_NOMEM, ENOMEM, "out of memory");
    if (nsbox_image_write_at(etc, "passwd", passwd, strlen(passwd), 0644, e) < 0 ||
        nsbox_image_write_at(etc, "group", group, strlen(group), 0644, e) < 0 ||
        nsbox_image_write_at(etc, "hosts", nsbox_image_hosts_text, strlen(nsbox_image_hosts_text), 0644, e) < 0 ||
        nsbox_image_write_at(etc, "resolv.conf", nsbox_image_resolv_text, strlen(nsbox_image_resolv_text), 0644, e) <
            0 ||
        nsbox_image_write_at(etc, "nsswitch.conf", nsswitch_text, sizeof nsswitch_text - 1, 0644,
                             e) < 0)
        return -1;
    /* df and mount read /etc/mtab; the sandbox's own mounts are the honest answer */
    if (symlinkat("../proc/self/mounts", etc, "mtab") < 0)
        return nsbox_err_sys(e, "cannot create mtab");
    struct stat st;
    if (stat("/usr/lib/os-release", &st) == 0) {
        if (symlinkat("../usr/lib/os-release", etc, "os-release") < 0)
            return nsbox_err_sys(e, "cannot create os-release");
    } else {
        cleanup_close int hostetc = open("/etc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (hostetc >= 0 && copy_entry(hostetc, etc, "os-release", 0, e) < 0)
            return -1;
    }
    return 0;
}

static bool host_fresh(const char *images)
{
    char path[PATH_MAX], stamp[256];
    if (snprintf(path, sizeof path, "%s/host/stamp", images) >= (int)sizeof path)
        return false;
    ssize_t n = readlink(path, stamp, sizeof stamp - 1);
    if (n <= 0)
        return false;
    stamp[n] = '\0';
    struct nsbox_host_probe probe;
    nsbox_image_host_probe(&probe);
    return !nsbox_image_host_stale(stamp, &probe);
}

static double ms_since(const struct timespec *t0)
{
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (double)(t1.tv_sec - t0->tv_sec) * 1e3 + (double)(t1.tv_nsec - t0->tv_nsec) / 1e6;
}

static void txn_endp(struct nsbox_image_txn *t)
{
    nsbox_image_txn_end(t);
}

int nsbox_image_build_host(bool force, bool progress, struct nsbox_err *e)
{
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    __attribute__((cleanup(txn_endp))) struct nsbox_image_txn t = {.tmp_fd = -1,
                                                                  .build_lock_fd = -1};
    if (nsbox_image_txn_begin(&t, "host", progress, e) < 0)
        return -1;
    /* Several `nsbox run` may find the image stale at once; the first builds, the others
     * waited on the build lock and find it fresh here. */
    if (!force && host_fresh(t.images))
        return 0;

    /* Probe before copying: if the host changes while we copy, the stamp is already old and
     * the next resolve rebuilds. */
    struct nsbox_host_probe probe;
    nsbox_image_host_probe(&probe);
    char stamp[256];
    if (nsbox_image_host_stamp(&probe, stamp, sizeof stamp) < 0)
        return nsbox_err_set(e, NSBOX_E_INVALID, 0, "host image stamp too long");

    if (mkdirat(t.tmp_fd, "etc", 0755) < 0 || fchmodat(t.tmp_fd, "etc", 0755, 0) < 0)
        return nsbox_err_sys(e, "cannot create %s/etc", t.tmp);
    cleanup_close int etc = openat(t.tmp_fd, "etc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    cleanup_close int hostetc = open("/etc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (etc < 0 || hostetc < 0)
        return nsbox_err_sys(e, "cannot open /etc");
    const char *shell = access("/bin/bash", X_OK) == 0 ? "/bin/bash" : "/bin/sh";
    if (copy_host_etc(hostetc, etc, e) < 0 || write_generated(etc, shell, e) < 0)
        return nsbox_err_wrap(e, "building the host image's /etc");
    /* the stamp is a symlink so that the check on every `nsbox run` is one readlink: no open,
     * read and close of a file */
    if (symlinkat(stamp, t.tmp_fd, "stamp") < 0)
        return nsbox_err_sys(e, "cannot write the host image stamp");

    const char *extra[] = {"stamp", stamp, NULL};
    if (nsbox_image_txn_commit(&t, "host", NULL, extra, e) < 0)
        return -1;
    nsbox_image_note(progress, "image host: built %s/host/etc in %.1f ms", t.images,
                     ms_since(&t0));
    return 0;
}
