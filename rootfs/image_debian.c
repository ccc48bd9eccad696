/* The `debian` image: debootstrap (minbase) of the host's own release from the host's own
 * mirror, plus nsbox's user and /workspace. The release and mirror come from the host's
 * os-release and apt sources, never from a list built into nsbox, so the image follows
 * whatever mirror (or local proxy) the machine is configured for. */
#include "image.h"
#include "cleanup.h"
#include "proc.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* The hosted sandbox's default image has Python, git, gh, curl, jq, ripgrep, Node with npm and
 * pre-commit; these are Debian's packages of each. netbase is not in its list but gives
 * /etc/services and /etc/protocols, which socket.getservbyname() and many clients expect.
 * debootstrap's resolver cannot follow a dependency on a virtual package (npm's node-*
 * dependencies): what needs one is installed afterwards by the image's own apt-get. */
static const char *const debian_packages[] = {
    "python3", "git", "curl", "jq", "ripgrep", "ca-certificates", "netbase", "gh", "nodejs",
    "pre-commit", "npm", "python3-pip", "python3-venv", NULL,
};
/* debootstrap installs the first DEBIAN_BY_DEBOOTSTRAP, apt-get the rest */
#define DEBIAN_BY_DEBOOTSTRAP 10

/* ---- apt sources ------------------------------------------------------------------------- */

enum nsbox_image_debian_file_kind nsbox_image_debian_file_kind(const char *filename)
{
    size_t len = strlen(filename);
    if (len == 0 || filename[0] == '.')
        return NSBOX_APT_FILE_IGNORE;
    for (const char *p = filename; *p; p++) {
        unsigned char c = (unsigned char)*p;
        if (!isalnum(c) && c != '_' && c != '-' && c != '.')
            return NSBOX_APT_FILE_IGNORE;
    }
    if (len > 5 && !strcmp(filename + len - 5, ".list"))
        return NSBOX_APT_FILE_LIST;
    if (len > 8 && !strcmp(filename + len - 8, ".sources"))
        return NSBOX_APT_FILE_SOURCES;
    return NSBOX_APT_FILE_IGNORE;
}

static bool uri_usable(const char *uri, size_t len)
{
    /* debootstrap fetches with wget or from a local path; apt-only transports (mirror+,
     * tor+, cdrom:) would make it fail halfway */
    return (len > 7 && !strncmp(uri, "http://", 7)) || (len > 8 && !strncmp(uri, "https://", 8)) ||
           (len > 5 && !strncmp(uri, "file:", 5));
}

static void consider(struct nsbox_mirror_pick *p, const char *uri, size_t len, bool exact)
{
    if (!uri_usable(uri, len) || len >= sizeof p->uri)
        return;
    if (p->uri[0] && (p->exact || !exact))
        return; /* the first one wins, except that an exact suite match beats a fallback */
    memcpy(p->uri, uri, len);
    p->uri[len] = '\0';
    p->exact = exact;
}

/* Next whitespace-separated token of [*s, end); NULL at the end. */
static const char *next_token(const char **s, const char *end, size_t *len)
{
    const char *p = *s;
    while (p < end && isspace((unsigned char)*p))
        p++;
    if (p >= end) {
        *s = p;
        return NULL;
    }
    const char *q = p;
    while (q < end && !isspace((unsigned char)*q))
        q++;
    *len = (size_t)(q - p);
    *s = q;
    return p;
}

static bool token_eq(const char *t, size_t len, const char *want)
{
    return t && len == strlen(want) && !memcmp(t, want, len);
}

void nsbox_image_debian_pick_from_list(const char *text, const char *suite,
                                       struct nsbox_mirror_pick *p)
{
    for (const char *line = text; line && *line;) {
        const char *nl = strchr(line, '\n');
        const char *end = nl ? nl : line + strlen(line);
        const char *hash = memchr(line, '#', (size_t)(end - line));
        const char *stop = hash ? hash : end;
        const char *s = line;
        size_t len = 0;
        const char *type = next_token(&s, stop, &len);
        if (token_eq(type, len, "deb")) {
            const char *tok = next_token(&s, stop, &len);
            /* [ options ]: may be one token ("[arch=amd64]") or several ("[ arch=amd64 ]") */
            if (tok && tok[0] == '[') {
                while (tok && !memchr(tok, ']', len))
                    tok = next_token(&s, stop, &len);
                tok = tok ? next_token(&s, stop, &len) : NULL;
            }
            const char *uri = tok;
            size_t urilen = len;
            const char *st = uri ? next_token(&s, stop, &len) : NULL;
            if (uri && st)
                consider(p, uri, urilen, token_eq(st, len, suite));
        }
        line = nl ? nl + 1 : NULL;
    }
}

struct stanza {
    char types[256], uris[2048], suites[512], enabled[16];
    char *cur; /* field that continuation lines extend; NULL for fields we ignore */
    size_t cur_size;
};

static void stanza_pick(const struct stanza *st, const char *suite, struct nsbox_mirror_pick *p)
{
    bool deb = false, exact = false;
    size_t len;
    const char *s, *end, *t;
    if (st->enabled[0] && !strcasecmp(st->enabled, "no"))
        return;
    for (s = st->types, end = s + strlen(s); (t = next_token(&s, end, &len));)
        deb = deb || token_eq(t, len, "deb");
    if (!deb)
        return;
    for (s = st->suites, end = s + strlen(s); (t = next_token(&s, end, &len));)
        exact = exact || token_eq(t, len, suite);
    for (s = st->uris, end = s + strlen(s); (t = next_token(&s, end, &len));)
        consider(p, t, len, exact);
}

static void stanza_finish(struct stanza *st, const char *suite, struct nsbox_mirror_pick *p)
{
    stanza_pick(st, suite, p);
    memset(st, 0, sizeof *st);
}

static void append_value(char *dst, size_t size, const char *v, size_t len)
{
    size_t used = strlen(dst);
    while (len > 0 && isspace((unsigned char)*v))
        v++, len--;
    while (len > 0 && isspace((unsigned char)v[len - 1]))
        len--;
    if (used && used + 1 < size)
        dst[used++] = ' ';
    if (used + len >= size)
        len = size - used - 1; /* a longer field is truncated, never overflowed */
    memcpy(dst + used, v, len);
    dst[used + len] = '\0';
}

void nsbox_image_debian_pick_from_sources(const char *text, const char *suite,
                                          struct nsbox_mirror_pick *p)
{
    struct stanza st;
    memset(&st, 0, sizeof st);
    for (const char *line = text; line && *line;) {
        const char *nl = strchr(line, '\n');
        size_t len = nl ? (size_t)(nl - line) : strlen(line);
        const char *s = line, *end = line + len;
        while (s < end && isspace((unsigned char)*s))
            s++;
        if (s == end) {
            stanza_finish(&st, suite, p); /* a blank line ends a stanza */
        } else if (*s == '#') {
            /* comment lines may sit inside a stanza and do not end it */
        } else if (s != line) {
            if (st.cur) /* continuation of a multi-line field (URIs spread over lines) */
                append_value(st.cur, st.cur_size, s, (size_t)(end - s));
        } else {
            const char *colon = memchr(line, ':', len);
            st.cur = NULL;
            if (colon) {
                size_t klen = (size_t)(colon - line);
                /* field names are case-insensitive in deb822 */
                struct {
                    const char *name;
                    char *dst;
                    size_t size;
                } fields[] = {
                    {"Types", st.types, sizeof st.types},
                    {"URIs", st.uris, sizeof st.uris},
                    {"Suites", st.suites, sizeof st.suites},
                    {"Enabled", st.enabled, sizeof st.enabled},
                };
                for (size_t i = 0; i < NSBOX_ARRAY_LEN(fields); i++) {
                    if (klen == strlen(fields[i].name) &&
                        !strncasecmp(line, fields[i].name, klen)) {
                        st.cur = fields[i].dst;
                        st.cur_size = fields[i].size;
                        append_value(st.cur, st.cur_size, colon + 1, (size_t)(end - colon - 1));
                    }
                }
            }
        }
        line = nl ? nl + 1 : NULL;
    }
    stanza_finish(&st, suite, p);
}

int nsbox_image_debian_codename(const char *text, char *out, size_t n)
{
    static const char key[] = "VERSION_CODENAME=";
    for (const char *line = text; line && *line;) {
        const char *nl = strchr(line, '\n');
        size_t len = nl ? (size_t)(nl - line) : strlen(line);
        if (len > sizeof key - 1 && !strncmp(line, key, sizeof key - 1)) {
            const char *v = line + sizeof key - 1;
            size_t vlen = len - (sizeof key - 1);
            while (vlen > 0 && isspace((unsigned char)v[vlen - 1]))
                vlen--;
            if (vlen >= 2 && (v[0] == '"' || v[0] == '\'') && v[vlen - 1] == v[0]) {
                v++;
                vlen -= 2;
            }
            if (vlen == 0 || vlen >= n)
                return -1;
            memcpy(out, v, vlen);
            out[vlen] = '\0';
            return 0;
        }
        line = nl ? nl + 1 : NULL;
    }
    return -1;
}

/* ---- inputs from the host ---------------------------------------------------------------- */

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void pick_from_file(int dfd, const char *name, enum nsbox_image_debian_file_kind kind,
                           const char *suite, struct nsbox_mirror_pick *p)
{
    cleanup_free char *text = nsbox_image_read_text(dfd, name, 1 << 20);
    if (!text)
        return;
    if (kind == NSBOX_APT_FILE_LIST)
        nsbox_image_debian_pick_from_list(text, suite, p);
    else
        nsbox_image_debian_pick_from_sources(text, suite, p);
}

/* apt's own order: sources.list, then sources.list.d/ sorted by name. */
static int find_mirror(const char *suite, char *out, size_t n, struct nsbox_err *e)
{
    struct nsbox_mirror_pick pick = {.uri = "", .exact = false};
    pick_from_file(AT_FDCWD, "/etc/apt/sources.list", NSBOX_APT_FILE_LIST, suite, &pick);
    DIR *d = opendir("/etc/apt/sources.list.d");
    if (d) {
        char *names[256];
        size_t count = 0;
        struct dirent *de;
        while ((de = readdir(d)) && count < NSBOX_ARRAY_LEN(names))
            if (nsbox_image_debian_file_kind(de->d_name) != NSBOX_APT_FILE_IGNORE &&
                (names[count] = strdup(de->d_name)))
                count++;
        qsort(names, count, sizeof names[0], cmp_str);
        for (size_t i = 0; i < count; i++) {
            pick_from_file(dirfd(d), names[i], nsbox_image_debian_file_kind(names[i]), suite,
                           &pick);
            free(names[i]);
        }
        closedir(d);
    }
    if (!pick.uri[0])
        return nsbox_err_set(e, NSBOX_E_UNSUPPORTED, 0,
                             "no Debian mirror found: no usable `deb` entry in "
                             "/etc/apt/sources.list or /etc/apt/sources.list.d/; set "
                             "NSBOX_DEBIAN_MIRROR=URL (and NSBOX_DEBIAN_SUITE=RELEASE)");
    snprintf(out, n, "%s", pick.uri);
    return 0;
}

static int find_suite(char *out, size_t n, struct nsbox_err *e)
{
    const char *env = getenv("NSBOX_DEBIAN_SUITE");
    if (env && env[0]) {
        snprintf(out, n, "%s", env);
    } else {
        cleanup_free char *text = nsbox_image_read_text(AT_FDCWD, "/etc/os-release", 65536);
        if (!text)
            text = nsbox_image_read_text(AT_FDCWD, "/usr/lib/os-release", 65536);
        if (!text || nsbox_image_debian_codename(text, out, n) < 0)
            return nsbox_err_set(e, NSBOX_E_UNSUPPORTED, 0,
                                 "cannot tell which Debian release to install: /etc/os-release "
                                 "has no VERSION_CODENAME; set NSBOX_DEBIAN_SUITE (for example "
                                 "NSBOX_DEBIAN_SUITE=bookworm)");
    }
    /* it becomes a debootstrap argument and a path component of the mirror: keep it plain */
    for (const char *p = out; *p; p++)
        if (!islower((unsigned char)*p) && !isdigit((unsigned char)*p) && *p != '-')
            return nsbox_err_set(e, NSBOX_E_INVALID, 0, "invalid Debian release name '%s'", out);
    return 0;
}

static int find_program(const char *prog, char *out, size_t n)
{
    /* root's PATH from sudo or cron may lack the sbin directories debootstrap lives in */
    const char *path = getenv("PATH");
    char dirs[4096];
    snprintf(dirs, sizeof dirs, "%s:/usr/sbin:/usr/bin:/sbin:/bin", path ? path : "");
    char *save = NULL;
    for (char *dir = strtok_r(dirs, ":", &save); dir; dir = strtok_r(NULL, ":", &save)) {
        if (dir[0] != '/')
            continue; /* relative PATH entries would depend on our cwd */
        int r = snprintf(out, n, "%s/%s", dir, prog);
        if (r > 0 && (size_t)r < n && access(out, X_OK) == 0)
            return 0;
    }
    return -1;
}

/* ---- running debootstrap ----------------------------------------------------------------- */

struct output_sink {
    bool progress;
    int log_fd;
    char last[512]; /* last "E: " line, else the last line: the error message's reason */
    bool last_is_error;
};

static void sink_line(struct output_sink *o, const char *line, size_t len)
{
    while (len > 0 && isspace((unsigned char)line[len - 1]))
        len--;
    if (len == 0)
        return;
    if (o->log_fd >= 0) {
        (void)!write(o->log_fd, line, len);
        (void)!write(o->log_fd, "\n", 1);
    }
    nsbox_image_note(o->progress, "image debian: %.*s", (int)len, line);
    bool err = len > 3 && !strncmp(line, "E: ", 3);
    if (err || !o->last_is_error) {
        snprintf(o->last, sizeof o->last, "%.*s", (int)len, line);
        o->last_is_error = err;
    }
}

static void pump_output(int fd, struct output_sink *o)
{
    char buf[8192];
    size_t have = 0;
    for (;;) {
        ssize_t r = read(fd, buf + have, sizeof buf - have);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        have += (size_t)r;
        size_t start = 0;
        for (size_t i = 0; i < have; i++) {
            if (buf[i] == '\n' || buf[i] == '\r') {
                sink_line(o, buf + start, i - start);
                start = i + 1;
            }
        }
        if (start == 0 && have == sizeof buf) { /* a line longer than the buffer */
            sink_line(o, buf, have);
            start = have;
        }
        memmove(buf, buf + start, have - start);
        have -= start;
    }
    if (have)
        sink_line(o, buf, have);
}

/* One program of the build: debootstrap on the host, then apt-get inside the new tree. */
struct build_step {
    const char *name;   /* in messages */
    const char *prog;   /* absolute path; inside `chroot` when that is set */
    char *const *argv;
    const char *chroot; /* the new rootfs, for apt-get */
};

/* Child side: never returns. */
static void exec_step(const struct build_step *s, int out_fd, int keep_fd)
{
    /* Die with nsbox: a build nobody waits for must not keep writing into a tree that the next
     * build will sweep. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (null < 0 || dup2(null, 0) < 0 || dup2(out_fd, 1) < 0 || dup2(out_fd, 2) < 0)
        _exit(126);
    /* debootstrap mounts /proc and /sys inside the target, and apt-get's maintainer scripts
     * want /proc. In a mount namespace of its own those mounts vanish with it, even if it is
     * killed, instead of pinning the build directory (our rm -rf refuses to cross mount
     * points). */
    if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) {
        dprintf(2, "E: cannot create a mount namespace for %s: %s\n", s->name, strerror(errno));
        _exit(126);
    }
    if (s->chroot) {
        char proc[PATH_MAX];
        snprintf(proc, sizeof proc, "%s/proc", s->chroot);
        if (mount("proc", proc, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0 ||
            chroot(s->chroot) < 0 || chdir("/") < 0) {
            dprintf(2, "E: cannot enter the new tree %s: %s\n", s->chroot, strerror(errno));
            _exit(126);
        }
    }
    /* the build directory's lock: held by every process of the build, so the build counts as
     * alive until the last of them exits */
    fcntl(keep_fd, F_SETFD, 0);
    setenv("DEBIAN_FRONTEND", "noninteractive", 1);
    const char *path = getenv("PATH");
    char newpath[4096];
    snprintf(newpath, sizeof newpath, "/usr/sbin:/usr/bin:/sbin:/bin%s%s",
             path && !s->chroot ? ":" : "", path && !s->chroot ? path : "");
    setenv("PATH", newpath, 1);
    execv(s->prog, s->argv);
    dprintf(2, "E: cannot execute %s: %s\n", s->prog, strerror(errno));
    _exit(127);
}

/* Runs one step, its output to the build log (appended after the first step) and, as
 * progress, to the terminal. */
static int run_step(const struct build_step *s, const struct nsbox_image_txn *t, bool first,
                    const char *mirror, bool progress, struct nsbox_err *e)
{
    char log_path[PATH_MAX];
    if (snprintf(log_path, sizeof log_path, "%s/.build-%s.log", t->images, t->name) >=
        (int)sizeof log_path)
        return nsbox_err_set(e, NSBOX_E_INVALID, ENAMETOOLONG, "path too long: %s", t->images);
    struct output_sink sink = {.progress = progress, .log_fd = -1};
    sink.log_fd = open(log_path,
                       O_WRONLY | O_CREAT | (first ? O_TRUNC : O_APPEND) | O_NOFOLLOW | O_CLOEXEC,
                       0644);

    int pipefd[2];
    if (pipe2(pipefd, O_CLOEXEC) < 0) {
        nsbox_closep(&sink.log_fd);
        return nsbox_err_sys(e, "cannot create a pipe");
    }
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        close(pipefd[0]);
        close(pipefd[1]);
        nsbox_closep(&sink.log_fd);
        return nsbox_err_sys(e, "cannot fork");
    }
    if (pid == 0)
        exec_step(s, pipefd[1], t->tmp_fd);
    close(pipefd[1]);
    pump_output(pipefd[0], &sink);
    close(pipefd[0]);
    nsbox_closep(&sink.log_fd);

    int status;
    pid_t r;
    do
        r = waitpid(pid, &status, 0);
    while (r < 0 && errno == EINTR);
    if (r < 0)
        return nsbox_err_sys(e, "cannot wait for %s", s->name);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
        return 0;
    char how[64];
    nsbox_proc_status_text(status, how, sizeof how);
    /* The usual cause, offline or behind a proxy: the mirror cannot be reached. */
    return nsbox_err_set(e, NSBOX_E_SYS, 0,
                         "%s failed (%s): %s (full output: %s). The image's packages "
                         "are downloaded once, from %s: this host must reach that mirror, or "
                         "NSBOX_DEBIAN_MIRROR can name one it does reach (http://, or file:/ "
                         "for a local copy). The host image (the default) needs no download",
                         s->name, how, sink.last[0] ? sink.last : "no output", log_path, mirror);
}

static int run_debootstrap(const char *prog, const char *suite, const char *target,
                           const char *mirror, const struct nsbox_image_txn *t, bool progress,
                           struct nsbox_err *e)
{
    char include[512] = "--include=";
    for (size_t i = 0; i < DEBIAN_BY_DEBOOTSTRAP; i++) {
        if (i)
            strcat(include, ",");
        strcat(include, debian_packages[i]);
    }
    char *const argv[] = {
        (char *)"debootstrap", (char *)"--variant=minbase", include, (char *)suite,
        (char *)target,        (char *)mirror,              NULL,
    };
    const struct build_step s = {"debootstrap", prog, argv, NULL};
    return run_step(&s, t, true, mirror, progress, e);
}

/* apt-get of the image itself, from the mirror debootstrap wrote into its sources.list */
static int run_apt_install(const char *target, const char *mirror,
                           const struct nsbox_image_txn *t, bool progress, struct nsbox_err *e)
{
    char cmd[512] = "apt-get update && apt-get install -y --no-install-recommends";
    for (size_t i = DEBIAN_BY_DEBOOTSTRAP; debian_packages[i]; i++) {
        strcat(cmd, " ");
        strcat(cmd, debian_packages[i]);
    }
    char *const argv[] = {(char *)"sh", (char *)"-c", cmd, NULL};
    const struct build_step s = {"apt-get in the image", "/bin/sh", argv, target};
    return run_step(&s, t, false, mirror, progress, e);
}

/* ---- post-processing --------------------------------------------------------------------- */


/* Delete the regular files directly in dir (not subdirectories): apt's downloaded .debs and
 * package lists, which a sandbox user (never root) cannot use and which double the size. */
static void empty_dir_files(int rfd, const char *dir, const char *suffix)
{
    cleanup_close int fd = openat(rfd, dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return;
    DIR *d = fdopendir(fd);
    if (!d)
        return;
    fd = -1;
    struct dirent *de;
    size_t slen = suffix ? strlen(suffix) : 0;
    while ((de = readdir(d))) {
        size_t len = strlen(de->d_name);
        if (de->d_type != DT_REG || (suffix && (len < slen ||
                                                strcmp(de->d_name + len - slen, suffix) != 0)))
            continue;
        if (!strcmp(de->d_name, "lock"))
            continue;
        unlinkat(dirfd(d), de->d_name, 0);
    }
    closedir(d);
}

static int rewrite_user_db(int rfd, const char *path, bool passwd, const char *shell,
                           struct nsbox_err *e)
{
    cleanup_free char *in = nsbox_image_read_text(rfd, path, 1 << 20);
    if (!in)
        return nsbox_err_sys(e, "cannot read %s in the image", path);
    cleanup_free char *out =
        passwd ? nsbox_image_passwd_add_appuser(in, shell) : nsbox_image_group_add_appuser(in);
    if (!out)
        return nsbox_err_set(e, NSBOX_E_NOMEM, ENOMEM, "out of memory");
    return nsbox_image_write_at(rfd, path, out, strlen(out), 0644, e);
}

static int postprocess(int tmp_fd, struct nsbox_err *e)
{
    cleanup_close int rfd = openat(tmp_fd, "rootfs", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (rfd < 0)
        return nsbox_err_sys(e, "cannot open the new rootfs");
    const char *shell = nsbox_image_check_exec_in_root(rfd, "bin/bash") == 0 ? "/bin/bash"
                                                                             : "/bin/sh";
    if (rewrite_user_db(rfd, "etc/passwd", true, shell, e) < 0 ||
        rewrite_user_db(rfd, "etc/group", false, shell, e) < 0)
        return -1;
    if (mkdirat(rfd, "workspace", 0755) < 0 && errno != EEXIST)
        return nsbox_err_sys(e, "cannot create /workspace in the image");
    if (fchmodat(rfd, "workspace", 0755, 0) < 0)
        return nsbox_err_sys(e, "cannot chmod /workspace in the image");
    /* debootstrap copied the host's resolv.conf and hostname in: host details that have no
     * business in an image */
    if (nsbox_image_write_at(rfd, "etc/resolv.conf", nsbox_image_resolv_text, strlen(nsbox_image_resolv_text), 0644,
                             e) < 0 ||
        nsbox_image_write_at(rfd, "etc/hostname", "sandbox\n", 8, 0644, e) < 0 ||
        nsbox_image_write_at(rfd, "etc/hosts", nsbox_image_hosts_text, strlen(nsbox_image_hosts_text), 0644, e) < 0)
        return -1;
    empty_dir_files(rfd, "var/cache/apt/archives", ".deb");
    empty_dir_files(rfd, "var/cache/apt", ".bin");
    empty_dir_files(rfd, "var/lib/apt/lists", NULL);
    if (fchmodat(tmp_fd, "rootfs", 0755, 0) < 0)
        return nsbox_err_sys(e, "cannot chmod the new rootfs");
    static const char *const must_have[] = {"bin/sh", "usr/bin/python3"};
    for (size_t i = 0; i < NSBOX_ARRAY_LEN(must_have); i++)
        if (nsbox_image_check_exec_in_root(rfd, must_have[i]) < 0)
            return nsbox_err_set(e, NSBOX_E_SYS, errno,
                                 "debootstrap finished but the image has no executable /%s",
                                 must_have[i]);
    return 0;
}

static void txn_endp(struct nsbox_image_txn *t)
{
    nsbox_image_txn_end(t);
}

int nsbox_image_build_debian(bool progress, struct nsbox_err *e)
{
    if (geteuid() != 0)
        return nsbox_err_set(e, NSBOX_E_UNSUPPORTED, EPERM,
                             "building the debian image needs root (debootstrap creates device "
                             "nodes and runs dpkg in a chroot): run `sudo nsbox image build "
                             "debian`; the image is then stored in /var/lib/nsbox/images/debian "
                             "and other users can pass its rootfs directory as --image");
    char prog[PATH_MAX];
    if (find_program("debootstrap", prog, sizeof prog) < 0)
        return nsbox_err_set(e, NSBOX_E_UNSUPPORTED, ENOENT,
                             "debootstrap is not installed: run `apt-get install debootstrap`");
    char suite[64], mirror[512];
    if (find_suite(suite, sizeof suite, e) < 0)
        return -1;
    const char *env_mirror = getenv("NSBOX_DEBIAN_MIRROR");
    if (env_mirror && env_mirror[0])
        snprintf(mirror, sizeof mirror, "%s", env_mirror);
    else if (find_mirror(suite, mirror, sizeof mirror, e) < 0)
        return -1;

    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    __attribute__((cleanup(txn_endp))) struct nsbox_image_txn t = {.tmp_fd = -1,
                                                                  .build_lock_fd = -1};
    if (nsbox_image_txn_begin(&t, "debian", progress, e) < 0)
        return -1;
    nsbox_image_note(progress, "image debian: running debootstrap (this takes a few minutes)...");
    nsbox_image_note(progress, "image debian: release %s from %s", suite, mirror);
    if (mkdirat(t.tmp_fd, "rootfs", 0755) < 0)
        return nsbox_err_sys(e, "cannot create %s/rootfs", t.tmp);
    char target[PATH_MAX];
    if (snprintf(target, sizeof target, "%s/rootfs", t.tmp) >= (int)sizeof target)
        return nsbox_err_set(e, NSBOX_E_INVALID, ENAMETOOLONG, "path too long: %s", t.tmp);
    if (run_debootstrap(prog, suite, target, mirror, &t, progress, e) < 0 ||
        run_apt_install(target, mirror, &t, progress, e) < 0 || postprocess(t.tmp_fd, e) < 0)
        return nsbox_err_wrap(e, "building the debian image");
    /* A power cut after the rename must not leave a half-written tree under the real name. */
    if (syncfs(t.tmp_fd) < 0)
        return nsbox_err_sys(e, "cannot sync %s", t.tmp);
    const char *extra[] = {"suite", suite, "mirror", mirror, NULL};
    if (nsbox_image_txn_commit(&t, "debian", debian_packages, extra, e) < 0)
        return -1;
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    nsbox_image_note(progress, "image debian: done: %s/debian/rootfs (%ld s)", t.images,
                     (long)(t1.tv_sec - t0.tv_sec));
    return 0;
}
