/* `nsbox cp [-p] SRC DST`: one file between the host and a sandbox's workspace, replaced
 * whole or not at all on either side (docs/files.md). */
#define _GNU_SOURCE
#include "cleanup.h"
#include "cli.h"
#include "client.h"
#include "paths.h"
#include "say.h"
#include "state.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <unistd.h>

static bool split_remote(const char *arg, char *id, const char **path)
{
    const char *colon = strchr(arg, ':');
    if (!colon || colon - arg != NSBOX_ID_LEN)
        return false;
    memcpy(id, arg, NSBOX_ID_LEN);
    id[NSBOX_ID_LEN] = '\0';
    if (!nsbox_state_valid_id(id))
        return false;
    /* "ID:" alone is the workspace, as "host:" is the home directory to scp (it came out as
     * "/NAME", outside /workspace, for a file copied into it) */
    *path = colon[1] ? colon + 1 : ".";
    return true;
}

/* Bytes [*off, end) of in to out (at out's offset), or fewer when in ends first: *off is
 * where it stopped. */
static int copy_range(int in, int out, off_t *off, off_t end, struct nsbox_err *e)
{
    bool plain = false;
    char buf[65536];
    while (*off < end) {
        size_t want = (size_t)(end - *off) < (1u << 20) ? (size_t)(end - *off) : 1u << 20;
        ssize_t n;
        if (!plain) {
            n = sendfile(out, in, off, want);
            if (n < 0 && (errno == EINVAL || errno == ENOSYS)) {
                plain = true;
                continue;
            }
        } else {
            n = pread(in, buf, want < sizeof buf ? want : sizeof buf, *off);
            for (ssize_t w = 0, k; n > 0 && w < n; w += k)
                if ((k = write(out, buf + w, (size_t)(n - w))) < 0) {
                    if (errno == EINTR) {
                        k = 0;
                        continue;
                    }
                    return nsbox_err_sys(e, "write");
                }
            if (n > 0)
                *off += n;
        }
        if (n == 0)
            return 0; /* the file got shorter meanwhile */
        if (n < 0 && errno != EINTR)
            return nsbox_err_sys(e, "copy");
    }
    return 0;
}

/* A sandbox's file (size bytes when the read was answered) to out. At most size bytes: a file
 * that grows meanwhile is cut there. Into a regular file that cp opened itself (own, empty),
 * holes stay holes, so that a sparse file costs the host's disk what its data costs, not its
 * apparent size (16 TiB in 4 KiB). Anything else, stdout even when the shell made it a file
 * (`>> log`, `{ ...; nsbox cp ID:f -; } > out`), gets every byte at its own offset: a seek
 * and a truncate there cut what was written before. */
static int copy_out(int in, int out, bool own, uint64_t size, struct nsbox_err *e)
{
    struct stat st;
    bool sparse = own && fstat(out, &st) == 0 && S_ISREG(st.st_mode);
    off_t pos = 0, end = size > (uint64_t)INT64_MAX ? INT64_MAX : (off_t)size;
    while (pos < end) {
        off_t data = pos, hole = end;
        if (sparse) {
            data = lseek(in, pos, SEEK_DATA);
            if (data < 0 && errno == ENXIO)
                break; /* a hole up to the end */
            if (data < 0) {
                data = pos; /* no SEEK_DATA here: all of it */
            } else {
                hole = lseek(in, data, SEEK_HOLE);
                if (hole < 0 || hole > end)
                    hole = end;
            }
            if (data >= end)
                break;
            if (lseek(out, data, SEEK_SET) < 0)
                return nsbox_err_sys(e, "seek");
        }
        off_t at = data;
        if (copy_range(in, out, &at, hole, e) < 0)
            return -1;
        if (at < hole) { /* shorter than when the read was answered */
            end = at;
            break;
        }
        pos = hole;
    }
    if (sparse && ftruncate(out, end) < 0)
        return nsbox_err_sys(e, "write");
    return 0;
}

/* "ID:path" that is not a sandbox's: a typo in the id deserves its own message. */
static bool looks_like_remote(const char *arg)
{
    const char *colon = strchr(arg, ':');
    const char *slash = strchr(arg, '/');
    return colon && colon != arg && (!slash || colon < slash);
}

static const char *base_name(const char *p)
{
    size_t n = strlen(p);
    while (n > 1 && p[n - 1] == '/')
        n--;
    const char *b = p + n;
    while (b > p && b[-1] != '/')
        b--;
    return b;
}

/* The first len bytes of s as one word of a POSIX shell: as they are when no byte would mean
 * something to the shell, else in single quotes (each ' written '\''), so that a path with a
 * space or a quote in it ("My Project") is one argument of the pipeline typed as said. */
static void shell_word(char *out, size_t n, const char *s, int len)
{
    static const char plain[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                                "_./:@%+,-";
    bool quote = len == 0;
    for (int i = 0; i < len && !quote; i++)
        quote = !strchr(plain, s[i]) || !s[i];
    if (!quote) {
        snprintf(out, n, "%.*s", len, s);
        return;
    }
    size_t k = 0;
    out[k++] = '\'';
    for (int i = 0; i < len && k + 5 < n; i++) {
        if (s[i] == '\'') {
            memcpy(out + k, "'\\''", 4);
            k += 4;
        } else {
            out[k++] = s[i];
        }
    }
    out[k++] = '\'';
    out[k] = '\0';
}

/* The tar pipeline that copies the tree src to dst (the other side of the sandbox id) as cp -r
 * and docker cp do: into an existing directory dst under its own name, else as dst itself, made
 * first (tar -C needs an existing directory). Each path is one shell word (shell_word). */
static void tar_hint(char *buf, size_t n, bool into_sandbox, const char *id, const char *src,
                     const char *dst, bool dst_exists)
{
    char to[2 * PATH_MAX], from[2 * PATH_MAX];
    const char *d = dst[0] ? dst : "/workspace";
    shell_word(to, sizeof to, d, (int)strlen(d));
    if (!dst_exists) {
        shell_word(from, sizeof from, src, (int)strlen(src));
        if (into_sandbox)
            snprintf(buf, n,
                     "nsbox exec %s -- mkdir -p %s && tar -C %s -cf - . | nsbox exec -i %s -- "
                     "tar -C %s -xf -",
                     id, to, from, id, to);
        else
            snprintf(buf, n, "mkdir -p %s && nsbox exec %s -- tar -C %s -cf - . | tar -C %s -xf -",
                     to, id, from, to);
        return;
    }
    const char *name = base_name(src);
    int name_len = (int)strlen(name);
    while (name_len > 1 && name[name_len - 1] == '/')
        name_len--;
    int parent_len = (int)(name - src);
    while (parent_len > 1 && src[parent_len - 1] == '/')
        parent_len--;
    const char *parent = parent_len ? src : ".";
    if (!parent_len)
        parent_len = 1;
    char base[2 * NAME_MAX + 8];
    shell_word(from, sizeof from, parent, parent_len);
    shell_word(base, sizeof base, name, name_len);
    if (into_sandbox)
        snprintf(buf, n, "tar -C %s -cf - %s | nsbox exec -i %s -- tar -C %s -xf -", from, base, id,
                 to);
    else
        snprintf(buf, n, "nsbox exec %s -- tar -C %s -cf - %s | tar -C %s -xf -", id, from, base,
                 to);
}

/* Where `nsbox cp ID:SRC DST` writes on the host: DST, or DST/<SRC's name> when DST is a
 * directory, as cp does. With -p, DST's missing directories are made first (the caller's
 * umask): "DIR/" is one to make and write into, else DST's parent. */
static int host_target(const char *dst, const char *spath, bool parents, char target[PATH_MAX],
                       struct nsbox_err *e)
{
    size_t dl = strlen(dst);
    if (dl >= PATH_MAX)
        goto too_long;
    memcpy(target, dst, dl + 1);
    char *cut = dl && target[dl - 1] == '/' ? target + dl - 1 : strrchr(target, '/');
    if (parents && cut && cut != target) {
        *cut = '\0';
        if (nsbox_paths_mkdir_p(target, 0777, e) < 0)
            return -1;
        *cut = '/';
    }
    struct stat ds;
    if (stat(dst, &ds) < 0 || !S_ISDIR(ds.st_mode))
        return 0;
    while (dl > 1 && dst[dl - 1] == '/')
        dl--;
    if ((size_t)snprintf(target, PATH_MAX, "%.*s/%s", (int)dl, dst, base_name(spath)) < PATH_MAX)
        return 0;
too_long:
    return nsbox_err_set(e, NSBOX_E_INVALID, ENAMETOOLONG, "%.64s...: a path longer than %d",
                         dst, PATH_MAX - 1);
}

/* Is the sandbox's path a directory (then a host file goes into it, as cp does)? */
static bool remote_is_dir(const char *id, const char *path)
{
    size_t n = strlen(path);
    if (n == 0 || path[n - 1] == '/' || !strcmp(path, ".") || !strcmp(path, "/workspace"))
        return true;
    struct nsbox_err e = {0};
    struct nsbox_request req;
    nsbox_proto_request_init(&req, NSBOX_OP_STAT);
    cJSON *reply = NULL;
    int r = nsbox_proto_request_set(req.path, sizeof req.path, "path", path, &e);
    if (r == 0) /* a path too long is not one, as the supervisor would say */
        r = nsbox_client_call(id, &req, NULL, 0, &reply, NULL, &e);
    const cJSON *t = reply ? cJSON_GetObjectItemCaseSensitive(reply, "type") : NULL;
    bool dir = r == 0 && cJSON_IsString(t) && !strcmp(t->valuestring, "dir");
    cJSON_Delete(reply);
    return dir;
}

/* Writes into buf the tar pipeline (tar_hint's) that copies the tree src to dst, where dst is
 * in the sandbox id when into_sandbox and on the host otherwise. The pipeline depends on
 * whether dst is already a directory, which is asked of the side dst is on. */
static void tree_hint(char *buf, size_t n, bool into_sandbox, const char *id, const char *src,
                      const char *dst)
{
    struct stat st;
    bool exists =
        into_sandbox ? remote_is_dir(id, dst) : stat(dst, &st) == 0 && S_ISDIR(st.st_mode);
    tar_hint(buf, n, into_sandbox, id, src, dst, exists);
}

/* target's directory into dir ("." for a name alone); its last name is returned ("" for
 * "DIR/"). */
static const char *dir_of(const char *target, char dir[PATH_MAX])
{
    const char *slash = strrchr(target, '/');
    snprintf(dir, PATH_MAX, "%.*s", slash ? (int)(slash == target ? 1 : slash - target) : 1,
             slash ? target : ".");
    return slash ? slash + 1 : target;
}

/* Where `cp ID:SRC DST` copies to: DST is replaced whole or not at all, as a write into a
 * sandbox is (docs/files.md). The copy goes into an unnamed file (O_TMPFILE) in DST's directory
 * and takes DST's name only once it is complete, so that a full disk or a Ctrl-C leaves DST as
 * it was and nothing beside it. An existing DST's permissions (not set-id bits: the content is
 * the sandbox's) and group are kept, and its owner when we are root. Written in place, as cp
 * does, where a new file would not be the same one: DST is not a regular file (a FIFO, a
 * device), is a symlink (followed), has other hard links, is someone else's, or may not be
 * written by us (0444: then the open fails, as cp's would); and where its directory takes no
 * file from us (DST itself may be writable) or its filesystem has no O_TMPFILE.
 * *staged: the copy is to be put in place by host_out_commit; *made: in place, DST was made
 * here (removed again when the copy fails); *existed: DST was there before. */
static int host_out_open(const char *target, mode_t mode, bool *staged, bool *made,
                         bool *existed)
{
    struct stat st;
    bool exists = *existed = lstat(target, &st) == 0;
    *staged = *made = false;
    /* a file we may not write (0444, someone else's) fails as cp's would, not replaced */
    bool in_place = exists && (!S_ISREG(st.st_mode) || st.st_nlink > 1 ||
                               (geteuid() != 0 && st.st_uid != geteuid()) ||
                               access(target, W_OK) < 0);
    char dir[PATH_MAX];
    int fd = in_place || !*dir_of(target, dir) /* "DIR/" */
                 ? -1
                 : open(dir, O_TMPFILE | O_WRONLY | O_CLOEXEC, exists ? st.st_mode & 0777 : mode);
    /* its owner as root; its group (one of ours) as anyone: else in place */
    if (fd >= 0 && exists &&
        (fchmod(fd, st.st_mode & 0777) < 0 ||
         (geteuid() == 0 && (st.st_uid != 0 || st.st_gid != 0) &&
          fchown(fd, st.st_uid, st.st_gid) < 0) ||
         (geteuid() != 0 && st.st_gid != getegid() && fchown(fd, (uid_t)-1, st.st_gid) < 0))) {
        close(fd);
        fd = -1;
    }
    if (fd >= 0) {
        *staged = true;
        return fd;
    }
    fd = open(target, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
    *made = fd >= 0 && !exists;
    return fd;
}

/* The complete copy in fd takes target's name: linked beside it under a name of its own, then
 * renamed over it (names relative to the directory: a path near PATH_MAX still fits). */
static int host_out_commit(int fd, const char *target, struct nsbox_err *e)
{
    char dir[PATH_MAX], tmp[64], proc[40];
    const char *name = dir_of(target, dir);
    cleanup_close int dfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return nsbox_err_sys(e, "cannot put the copy in place");
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
    for (int i = 0; i < 100; i++) {
        snprintf(tmp, sizeof tmp, ".nsbox-cp-%d-%d", (int)getpid(), i);
        /* AT_EMPTY_PATH needs CAP_DAC_READ_SEARCH; the /proc link does not */
        int r = linkat(fd, "", dfd, tmp, AT_EMPTY_PATH);
        if (r < 0 && errno != EEXIST)
            r = linkat(AT_FDCWD, proc, dfd, tmp, AT_SYMLINK_FOLLOW);
        if (r < 0 && errno == EEXIST)
            continue;
        if (r < 0)
            return nsbox_err_sys(e, "cannot put the copy in place");
        if (renameat(dfd, tmp, dfd, name) < 0) {
            int err = errno;
            unlinkat(dfd, tmp, 0);
            errno = err;
            return nsbox_err_sys(e, "cannot put the copy in place");
        }
        return 0;
    }
    return nsbox_err_set(e, NSBOX_E_SYS, EEXIST, "cannot put the copy in place: no free name");
}

/* The read request for the sandbox's file spath: its descriptor, its size and the mode a new
 * copy gets (the sandbox file's permissions, less the umask, as cp gives them: an executable
 * stays one). -1 with e filled. */
static int read_remote(const char *sid, const char *spath, const char *dst, double *size,
                       mode_t *mode, struct nsbox_err *e)
{
    struct nsbox_request req;
    nsbox_proto_request_init(&req, NSBOX_OP_READ);
    cJSON *reply = NULL;
    int rfd = -1;
    int r = nsbox_proto_request_set(req.path, sizeof req.path, "path", spath, e);
    if (r == 0)
        r = nsbox_client_call(sid, &req, NULL, 0, &reply, &rfd, e);
    if (r < 0 || nsbox_client_reply_error(reply, e) < 0 || rfd < 0) {
        if (!e->msg[0])
            nsbox_err_set(e, NSBOX_E_SYS, EPROTO, "no file descriptor in the reply");
        cJSON_Delete(reply);
        nsbox_closep(&rfd);
        if (strstr(e->msg, "(it is a directory)")) { /* as the other direction says */
            char hint[3 * PATH_MAX];
            tree_hint(hint, sizeof hint, false, sid, spath, dst);
            size_t n = strlen(e->msg);
            snprintf(e->msg + n, sizeof e->msg - n, "; cp copies one file: for a tree, use tar: %s",
                     hint);
        }
        return -1;
    }
    const cJSON *sz = cJSON_GetObjectItemCaseSensitive(reply, "size");
    *size = cJSON_IsNumber(sz) && sz->valuedouble >= 0 ? sz->valuedouble : -1;
    /* an existing file keeps its own */
    const cJSON *md = cJSON_GetObjectItemCaseSensitive(reply, "mode");
    *mode = cJSON_IsNumber(md) ? (mode_t)md->valueint & 0777 : 0644;
    cJSON_Delete(reply);
    if (*size < 0) {
        close(rfd);
        return nsbox_err_set(e, NSBOX_E_INVALID, EPROTO, "the read reply has no size");
    }
    return rfd;
}

/* Why target could not be opened for writing, into e (errno is open's). */
static void open_failed(const char *target, bool parents, struct nsbox_err *e)
{
    size_t tl = strlen(target);
    if (errno == EISDIR && tl && target[tl - 1] == '/') /* "DIR/" that does not exist */
        nsbox_err_set(e, NSBOX_E_SYS, ENOENT,
                      "cannot write %s: no such directory (cp -p makes it)", target);
    else if (errno == ENOENT && !parents)
        nsbox_err_sys(e, "cannot write %s (cp -p makes missing directories)", target);
    else
        nsbox_err_sys(e, "cannot write %s", target);
}

/* cp ID:SRC DST (DST "-": our stdout). */
static int cp_from_sandbox(const char *sid, const char *spath, const char *dst, bool parents)
{
    struct nsbox_err e = {0};
    double size;
    mode_t mode;
    int rfd = read_remote(sid, spath, dst, &size, &mode, &e);
    if (rfd < 0)
        return nsbox_say_fail(&e);
    char target[PATH_MAX];
    bool to_stdout = !strcmp(dst, "-");
    if (!to_stdout && host_target(dst, spath, parents, target, &e) < 0) {
        close(rfd);
        return nsbox_say_fail(&e);
    }
    bool staged = false, made = false, existed = false;
    int out = to_stdout ? 1 : host_out_open(target, mode, &staged, &made, &existed);
    if (out < 0) {
        open_failed(target, parents, &e);
        close(rfd);
        return nsbox_say_fail(&e);
    }
    int r = copy_out(rfd, out, out != 1, (uint64_t)size, &e);
    close(rfd);
    if (r == 0 && staged)
        r = host_out_commit(out, target, &e);
    if (out != 1 && close(out) < 0 && r == 0)
        r = nsbox_err_sys(&e, "write");
    if (r == 0)
        return 0;
    if (out != 1) { /* which file, and what became of it */
        if (made)
            unlink(target);
        char msg[sizeof e.msg];
        snprintf(msg, sizeof msg, "%s", e.msg);
        snprintf(e.msg, sizeof e.msg, "cannot write %s: %s (%s)", target, msg,
                 !(staged || made) ? "it is incomplete"
                 : existed         ? "it was left as it was"
                                   : "no file was made");
    }
    return nsbox_say_fail(&e);
}

/* cp SRC ID:DST (SRC "-": our stdin). */
static int cp_to_sandbox(const char *src, const char *did, const char *dpath, bool parents)
{
    struct nsbox_err e = {0};
    cleanup_close int in = !strcmp(src, "-") ? dup(0) : open(src, O_RDONLY | O_CLOEXEC);
    if (in < 0) {
        nsbox_err_sys(&e, "cannot read %s", src);
        return nsbox_say_fail(&e);
    }
    struct stat st;
    if (fstat(in, &st) == 0 && S_ISDIR(st.st_mode)) {
        char hint[3 * PATH_MAX];
        tree_hint(hint, sizeof hint, true, did, src, dpath);
        nsbox_say_line("%s is a directory: cp copies one file; for a tree, use tar: %s", src, hint);
        return EXIT_NSBOX;
    }
    /* into a directory of the sandbox: under the file's own name */
    char dest[PATH_MAX];
    snprintf(dest, sizeof dest, "%s", dpath);
    if (strcmp(src, "-") != 0 && remote_is_dir(did, dpath)) {
        size_t n = strlen(dest);
        snprintf(dest + n, sizeof dest - n, "%s%s", n && dest[n - 1] == '/' ? "" : "/",
                 base_name(src));
    }
    struct nsbox_request req;
    nsbox_proto_request_init(&req, NSBOX_OP_WRITE);
    snprintf(req.path, sizeof req.path, "%s", dest); /* both PATH_MAX: never cut */
    req.mkdir = parents; /* -p: the missing directories too, as mkdir -p */
    if (fstat(in, &st) == 0 && S_ISREG(st.st_mode))
        req.mode = st.st_mode & 0777;
    else /* a stream: its end is the content's end only if we are still here to say so */
        req.confirm = true;
    cJSON *reply = NULL;
    int r = nsbox_client_call(did, &req, &in, 1, &reply, NULL, &e);
    if (r < 0 || nsbox_client_reply_error(reply, &e) < 0) {
        cJSON_Delete(reply);
        return nsbox_say_fail(&e);
    }
    cJSON_Delete(reply);
    return 0;
}

/* An option cp does not take, at argv[1]. cp -r (-R, -a) of a tree: the tar pipeline that copies
 * it, as a directory given without it gets; else the usage. EXIT_USAGE or EXIT_NSBOX. */
static int cp_option(int argc, char **argv)
{
    static const char *const tree[] = {"-r", "-R", "-a", "-rf", "-Rf", "--recursive", "--archive"};
    bool recursive = false;
    for (size_t k = 0; k < NSBOX_ARRAY_LEN(tree); k++)
        recursive = recursive || !strcmp(argv[1], tree[k]);
    if (!recursive || argc != 4)
        return nsbox_say_usage("unknown cp option %s (cp [-p] SRC DST: one file)",
                               NSBOX_SHOW(argv[1]));
    char sid[NSBOX_ID_LEN + 1], did[NSBOX_ID_LEN + 1], hint[3 * PATH_MAX];
    const char *spath = NULL, *dpath = NULL;
    bool sr = split_remote(argv[2], sid, &spath), dr = split_remote(argv[3], did, &dpath);
    if (sr == dr)
        return nsbox_say_usage("%s", "cp copies between the host and a sandbox: exactly one side "
                                     "is ID:/path");
    tree_hint(hint, sizeof hint, dr, dr ? did : sid, dr ? argv[2] : spath, dr ? dpath : argv[3]);
    nsbox_say_line("cp copies one file and has no %s; for a tree, use tar: %s", argv[1], hint);
    return EXIT_USAGE;
}

int nsbox_cli_cp(int argc, char **argv)
{
    bool parents = false;
    if (argc > 1 && !strcmp(argv[1], "-p")) {
        parents = true;
        argc--, argv++;
    }
    if (argc > 1 && argv[1][0] == '-' && argv[1][1]) /* "-" alone is stdin or stdout */
        return cp_option(argc, argv);
    if (argc != 3)
        return nsbox_say_usage("%s", "cp needs SRC and DST, one of them ID:/path (cp [-p] SRC "
                                     "DST)");
    char sid[NSBOX_ID_LEN + 1], did[NSBOX_ID_LEN + 1];
    const char *spath = NULL, *dpath = NULL;
    bool sr = split_remote(argv[1], sid, &spath), dr = split_remote(argv[2], did, &dpath);
    if (sr == dr) {
        for (int i = 1; i <= 2; i++)
            if (!sr && looks_like_remote(argv[i]) && access(argv[i], F_OK) != 0) {
                nsbox_say_line("%s: '%.*s' is not a sandbox id (12 hex digits; see nsbox ls)",
                               argv[i], (int)(strchr(argv[i], ':') - argv[i]), argv[i]);
                return EXIT_NSBOX;
            }
        return nsbox_say_usage("%s", "cp copies between the host and a sandbox: exactly one side "
                                     "is ID:/path");
    }
    return sr ? cp_from_sandbox(sid, spath, argv[2], parents)
              : cp_to_sandbox(argv[1], did, dpath, parents);
}
