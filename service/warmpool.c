/* The warm pool of `nsbox run` (see warmpool.h, docs/pool.md). */
#define _GNU_SOURCE
#include "warmpool.h"
#include "agent.h"
#include "cleanup.h"
#include "dnsnote.h"
#include "config.h"
#include "signals.h"
#include "cleanup_cjson.h"
#include "image.h"
#include "client.h"
#include "connect.h"
#include "paths.h"
#include "pool.h"
#include "sandbox.h"
#include "gc.h"
#include "state.h"
#include "supervisor.h"
#include "util.h"
#include "workspace.h"
#include "grow.h"

#include <dirent.h>
#include <elf.h>
#include <link.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

_Static_assert(NSBOX_POOL_ID_LEN == NSBOX_ID_LEN, "pool entries name sandbox ids");

#define DRAINED ".drained"
#define SEEN NSBOX_POOL_SEEN
#define FAILED NSBOX_POOL_FAILED

struct pool_ctx {
    struct nsbox_pool_config cfg;
    unsigned long config_reads; /* the config file's read it came from (os/config.h) */
    char key[NSBOX_POOL_KEY_LEN + 1];
    char dir[PATH_MAX];
};

/* The nsbox binary's GNU build id, as hex, read from our own program headers (no system call;
 * the linker writes one by default). -1 when there is none. */
static int build_id_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    char *out = arg; /* 96 bytes */
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_NOTE)
            continue;
        const char *p = (const char *)(info->dlpi_addr + ph->p_vaddr), *end = p + ph->p_memsz;
        while (p + sizeof(ElfW(Nhdr)) <= end) {
            const ElfW(Nhdr) *nh = (const void *)p;
            const char *name = p + sizeof *nh;
            const unsigned char *desc = (const unsigned char *)name + ((nh->n_namesz + 3) & ~3u);
            if ((const char *)desc + nh->n_descsz > end)
                break;
            if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 && !memcmp(name, "GNU", 4) &&
                nh->n_descsz > 0 && nh->n_descsz <= 40) {
                for (unsigned k = 0; k < nh->n_descsz; k++)
                    sprintf(out + 2 * k, "%02x", desc[k]);
                return 1;
            }
            p = (const char *)desc + ((nh->n_descsz + 3) & ~3u);
        }
    }
    return 1; /* the first object is the program itself: stop either way */
}

static int own_build_id(char *out, size_t n)
{
    if (n < 96)
        return -1;
    out[0] = '\0';
    dl_iterate_phdr(build_id_cb, out);
    return out[0] ? 0 : -1;
}

static int pool_section(const cJSON *root, void *out, struct nsbox_err *e)
{
    return nsbox_pool_config_from_json(root, out, e);
}

int nsbox_warmpool_config_check(struct nsbox_err *e)
{
    struct nsbox_pool_config cfg;
    nsbox_pool_config_init(&cfg);
    return nsbox_config_section(pool_section, &cfg, NULL, e);
}

/* The pool directory; with s, also the config's pool section and, when the pool is on, the
 * key of s. The key covers the binary (a rebuilt nsbox never takes a sandbox an older one
 * made) and the whole config text (instance types, network and workspace settings shape the
 * sandbox too), and the image as it is (image: its identity, filled in). With the pool off,
 * every run passes here: nothing beyond the config is done. */
static int ctx_load_uncached(const struct nsbox_spec *s, struct pool_ctx *c,
                             char image[NSBOX_IMAGE_IDENTITY_MAX], struct nsbox_err *e)
{
    memset(c, 0, sizeof *c);
    nsbox_pool_config_init(&c->cfg);
    char rt[PATH_MAX];
    if (nsbox_paths_runtime_dir(rt, sizeof rt, e) < 0)
        return -1;
    if ((size_t)snprintf(c->dir, sizeof c->dir, "%s/pool", rt) >= sizeof c->dir)
        return nsbox_err_set(e, NSBOX_E_INVALID, ENAMETOOLONG, "runtime dir too long");
    if (!s)
        return 0; /* drain and ls need the directory only: a config mistake must not stop them */
    const struct nsbox_config *cfg;
    if (nsbox_config_section(pool_section, &c->cfg, &cfg, e) < 0)
        return -1;
    const char *text = cfg->text;
    size_t len = cfg->len;
    c->config_reads = cfg->reads;
    if (!c->cfg.size)
        return 0;
    char bin[96];
    if (own_build_id(bin, sizeof bin) < 0) {
        struct stat st;
        if (stat("/proc/self/exe", &st) < 0)
            return nsbox_err_sys(e, "/proc/self/exe");
        snprintf(bin, sizeof bin, "%llx:%llx:%lld.%09ld", (unsigned long long)st.st_dev,
                 (unsigned long long)st.st_ino, (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
    }
    /* and the environment variables that shape a sandbox where it is made */
    static const char *const vars[] = {"NSBOX_DATA_DIR", "NSBOX_CACHE_DIR",
                                       "NSBOX_CGROUP_PARENT", "NSBOX_RESOLV_CONF"};
    size_t cap = 160 + 2 * 48 + NSBOX_IMAGE_IDENTITY_MAX + len;
    for (size_t i = 0; i < NSBOX_ARRAY_LEN(vars); i++)
        cap += strlen(vars[i]) + 2 + (getenv(vars[i]) ? strlen(getenv(vars[i])) : 0);
    cleanup_free char *extra = malloc(cap);
    if (!extra)
        return nsbox_err_set(e, NSBOX_E_NOMEM, ENOMEM, "out of memory");
    size_t n = (size_t)snprintf(extra, cap, "%s %s\n", NSBOX_VERSION, bin);
    /* and the image as it is now: a rebuild (or, for "host", a change of the host files its
     * /etc comes from) must not leave runs taking sandboxes made with the image before it */
    nsbox_image_identity(s->image, image, NSBOX_IMAGE_IDENTITY_MAX);
    n += (size_t)snprintf(extra + n, cap - n, "image=%s\n", image);
    /* and the namespaces it is made from: a pooled sandbox's network is built in its filler's
     * network namespace (routes, firewall). A run under `ip netns exec` took one made in
     * another namespace. Not the mount namespace: `ip netns exec` makes a new one for every
     * command (to remount /sys), and that would leave such runs without a pool. */
    static const char *const nss[] = {"net", "user"};
    for (size_t i = 0; i < NSBOX_ARRAY_LEN(nss); i++) {
        char p[32];
        struct stat st = {0};
        snprintf(p, sizeof p, "/proc/self/ns/%s", nss[i]);
        stat(p, &st); /* none: 0:0, the same for every run here */
        n += (size_t)snprintf(extra + n, cap - n, "%s=%llx:%llx\n", nss[i],
                              (unsigned long long)st.st_dev, (unsigned long long)st.st_ino);
    }
    for (size_t i = 0; i < NSBOX_ARRAY_LEN(vars); i++) {
        const char *v = getenv(vars[i]);
        n += (size_t)snprintf(extra + n, cap - n, "%s=%s\n", vars[i], v ? v : "");
    }
    if (text)
        memcpy(extra + n, text, len);
    if (nsbox_pool_key(s, extra, n + (text ? len : 0), c->key) < 0)
        return nsbox_err_set(e, NSBOX_E_NOMEM, ENOMEM, "out of memory");
    return 0;
}

/* ctx_load, once per spec and process: a cold run loads it to look for a pooled sandbox
 * (nsbox_warmpool_run), then again to decide on a filler (nsbox_warmpool_after_cold_run). Only the
 * image and the config file are looked at again: the cold run may have built the image (host,
 * the first time in a data directory), and the filler and later runs take the key with it as
 * it is now; a config file edited meanwhile is another key. */
static int ctx_load(const struct nsbox_spec *s, struct pool_ctx *c, struct nsbox_err *e)
{
    static struct pool_ctx cached;
    static const struct nsbox_spec *cached_for;
    static char cached_image[NSBOX_IMAGE_IDENTITY_MAX];
    const struct nsbox_config *cfg;
    struct nsbox_err ignored;
    if (s && s == cached_for &&
        nsbox_config_same_text_since(cached.config_reads, &cfg, &ignored) == 1) {
        char now[NSBOX_IMAGE_IDENTITY_MAX];
        if (cached.cfg.size)
            nsbox_image_identity(s->image, now, sizeof now);
        if (!cached.cfg.size || !strcmp(now, cached_image)) {
            *c = cached;
            return 0;
        }
    }
    cached_image[0] = '\0';
    if (ctx_load_uncached(s, c, cached_image, e) < 0)
        return -1;
    if (s) {
        cached = *c;
        cached_for = s;
    }
    return 0;
}

/* An event from init on the run socket. A reset is reported once when init closed the
 * connection with something of ours unread (it drains first, but a signal can still cross its
 * last message); what it sent before is still there to read. */
static int recv_event(int sock, struct nsbox_agent_event *ev, struct nsbox_err *e)
{
    int r = nsbox_agent_recv(sock, ev, e);
    if (r < 0 && e->sys_errno == ECONNRESET)
        r = nsbox_agent_recv(sock, ev, e);
    return r;
}

/* A claimed entry let go: back under its name (the sandbox still waits for a run) or, with
 * name NULL, removed (used, or stale). 0: try the next entry. */
static int pool_claim_end(int dfd, const char *claim, const char *name)
{
    if (!name || renameat(dfd, claim, dfd, name) < 0)
        unlinkat(dfd, claim, 0);
    return 0;
}

/* Wait for the status of our command, relaying signals to it (a second interrupt: SIGKILL, as
 * nsbox run does without the pool) and enforcing the run's timeout. */
static int wait_status(int sock, int pid, int sfd, uint64_t timeout_ms, const char *id,
                       int *exit_status, int *oom_kills, bool *timed_out_out,
                       char dns_names[NSBOX_AGENT_MSG_MAX],
                       struct nsbox_err *e)
{
    int64_t deadline = timeout_ms ? nsbox_now_ms() + (int64_t)timeout_ms : 0;
    bool timed_out = false;
    int stops = 0;
    struct nsbox_err ke;
    for (;;) {
        int tmo = -1;
        if (deadline && !timed_out) {
            int64_t left = deadline - nsbox_now_ms();
            tmo = left > 1000000 ? 1000000 : (int)left;
            if (left <= 0) {
                timed_out = true; /* init kills the rest once the command is gone */
                nsbox_agent_kill(sock, pid, SIGKILL, &ke);
                tmo = -1;
            }
        }
        struct pollfd pf[2] = {{sock, POLLIN, 0}, {sfd, POLLIN, 0}};
        if (poll(pf, 2, tmo) < 0 && errno != EINTR)
            return nsbox_err_sys(e, "poll");
        if (pf[1].revents & POLLIN) {
            struct signalfd_siginfo si;
            if (read(sfd, &si, sizeof si) == (ssize_t)sizeof si)
                nsbox_agent_kill(sock, pid, nsbox_signals_relay((int)si.ssi_signo, &stops),
                                 &ke);
        }
        if (!(pf[0].revents & (POLLIN | POLLHUP | POLLERR)))
            continue;
        struct nsbox_agent_event ev;
        int r = recv_event(sock, &ev, &ke);
        if (r > 0 && ev.type == NSBOX_AGENT_EXITED) {
            *exit_status = timed_out ? 124 : ev.status;
            *oom_kills = (int)ev.oom_kills;
            memcpy(dns_names, ev.msg, sizeof ev.msg);
            if (timed_out_out)
                *timed_out_out = timed_out;
            return 1;
        }
        if (r > 0)
            continue;
        /* ours, and gone without a status (killed): the command may have run, so it is not run
         * again elsewhere */
        return nsbox_err_set(e, NSBOX_E_SYS, EPIPE,
                             "pooled sandbox %s ended before its command's status", id);
    }
}

static struct nsbox_note note;

void nsbox_warmpool_set_note(nsbox_note_fn *fn, void *ctx)
{
    note = (struct nsbox_note){fn, ctx};
}

/* One attempt on one pooled sandbox, through its run socket (agent.h): 1 ran (*exit_status,
 * *oom_kills; a command that could not start said so to the note), 0 not taken (refused, or
 * taken by another run or retired just now), -2 unreachable (a stale entry), -1 it was ours
 * and the connection broke before the status. Its entry, name in the pool directory dfd, is
 * removed once it is ours. */
static int try_one(int dfd, const char *name, const char *id, char *const argv[], char *const env[],
                   const char *cwd, const int fds[3], uint64_t timeout_ms, int sfd,
                   int *exit_status, int *oom_kills, bool *timed_out,
                   char dns_names[NSBOX_AGENT_MSG_MAX],
                   struct nsbox_err *e)
{
    /* Out of the pool before the sandbox hears of the command: once the command runs (and
     * says so on the caller's stdout), `pool ls` must not list it, nor another run try it;
     * of two runs after one entry, the rename goes to one (the other: ENOENT, the next). */
    char claim[NAME_MAX + 1];
    snprintf(claim, sizeof claim, "%s%s", NSBOX_POOL_CLAIM, name);
    if (renameat(dfd, name, dfd, claim) < 0)
        return 0;
    struct nsbox_err ce;
    cleanup_close int sock = nsbox_connect_run(id, &ce);
    if (sock < 0) { /* gone, not listening, or not ours: a stale entry; else (EMFILE...) skip */
        bool stale = ce.code == NSBOX_E_POLICY || ce.sys_errno == ENOENT ||
                     ce.sys_errno == ECONNREFUSED || ce.sys_errno == EPROTOTYPE;
        return pool_claim_end(dfd, claim, stale ? NULL : name);
    }
    if (nsbox_agent_spawn(sock, 1, argv, env, cwd, fds, NULL, 0, NSBOX_AGENT_F_LAST, 0, NULL, &ce) < 0)
        return pool_claim_end(dfd, claim, name);
    struct nsbox_agent_event ev;
    if (recv_event(sock, &ev, &ce) <= 0) /* closed without a word: retired or taken meanwhile */
        return pool_claim_end(dfd, claim, name);
    nsbox_closep(&ev.fd);
    if ((ev.type == NSBOX_AGENT_FAILED && ev.status == 0) || /* refused: nothing ran */
        (ev.type != NSBOX_AGENT_FAILED && ev.type != NSBOX_AGENT_SPAWNED))
        return pool_claim_end(dfd, claim, name);
    /* Ours, used up (its supervisor's own removal of the entry, when init tells it of the
     * claim, finds nothing). */
    pool_claim_end(dfd, claim, NULL);
    if (ev.type == NSBOX_AGENT_FAILED) {
        nsbox_note_say(&note, "%s", ev.msg);
        *exit_status = ev.status;
        return 1;
    }
    return wait_status(sock, ev.pid, sfd, timeout_ms, id, exit_status, oom_kills, timed_out,
                       dns_names, e);
}

/* The note on the names a pooled run's sandbox was asked (init's lines, checked one by one). */
static void dns_note(const struct nsbox_spec *s, char *lines, const struct nsbox_run_opts *o)
{
    char names[NSBOX_DNSQUERY_NAMES][NSBOX_DNSQUERY_NAME_MAX + 1];
    size_t k = 0;
    char *save = NULL;
    for (char *l = strtok_r(lines, "\n", &save); l && k < NSBOX_DNSQUERY_NAMES;
         l = strtok_r(NULL, "\n", &save))
        if (nsbox_dnsquery_name_valid(l))
            snprintf(names[k++], sizeof names[0], "%s", l);
    nsbox_dnsnote_format(s, (const char(*)[NSBOX_DNSQUERY_NAME_MAX + 1])names, k, o->dns_note,
                         o->dns_note_size);
}

int nsbox_warmpool_run(const struct nsbox_spec *s, char *const argv[],
                       const struct nsbox_run_opts *o, int *exit_status, int *oom_kills,
                       struct nsbox_err *e)
{
    *oom_kills = 0;
    if (!nsbox_pool_spec_poolable(s))
        return 0;
    const char *cwd = o && o->cwd ? o->cwd : "/workspace";
    if (cwd[0] != '/')
        return 0; /* the cold run says what it makes of that */
    struct pool_ctx c;
    if (ctx_load(s, &c, e) < 0)
        return -1;
    if (!c.cfg.size)
        return 0;
    int fds[3] = {o ? o->stdin_fd : 0, o ? o->stdout_fd : 1, o ? o->stderr_fd : 2};
    /* A closed 0-2 would be taken by the descriptors opened below and passed on as the
     * command's, and init refuses a directory: leave both to the cold run, which says what it
     * makes of them (and the pool is not empty: no filler). */
    struct nsbox_err se;
    for (int i = 0; i < 3; i++)
        if (fcntl(fds[i], F_GETFD) < 0)
            return 0;
    if (nsbox_check_stdio(fds, &se) < 0)
        return 0;
    DIR *d = opendir(c.dir);
    if (!d)
        return NSBOX_POOL_EMPTY;
    /* the environment of a cold run of s: the caller's TERM, the base, then -e */
    cleanup_free char **env = nsbox_sandbox_env(s, e);
    if (!env) {
        closedir(d);
        return -1;
    }
    /* Signals wait in the mask until a sandbox has the command, then go to it. */
    sigset_t mask, old;
    sigemptyset(&mask);
    for (size_t i = 0; i < NSBOX_ARRAY_LEN(nsbox_signals_relayed); i++)
        sigaddset(&mask, nsbox_signals_relayed[i]);
    sigprocmask(SIG_BLOCK, &mask, &old);
    cleanup_close int sfd = signalfd(-1, &mask, SFD_CLOEXEC);
    int ret = sfd < 0 ? nsbox_err_sys(e, "signalfd") : 0;
    struct dirent *de;
    char dns_names[NSBOX_AGENT_MSG_MAX] = "";
    while (ret == 0 && (de = readdir(d))) {
        char key[NSBOX_POOL_KEY_LEN + 1], id[NSBOX_ID_LEN + 1];
        if (!nsbox_pool_entry_parse(de->d_name, key, id) || strcmp(key, c.key) != 0)
            continue;
        ret = try_one(dirfd(d), de->d_name, id, argv, env, cwd, fds, o ? o->timeout_ms : 0, sfd,
                      exit_status, oom_kills, o ? o->timed_out : NULL, dns_names, e);
    }
    closedir(d);
    if (ret == 1 && o && o->dns_note && o->dns_note_size)
        dns_note(s, dns_names, o);
    sigprocmask(SIG_SETMASK, &old, NULL);
    return ret == 0 ? NSBOX_POOL_EMPTY : ret;
}

/* "<dir>/<key><suffix>" */
static int key_file(const struct pool_ctx *c, const char *suffix, char *out, size_t n)
{
    return (size_t)snprintf(out, n, "%s/%s%s", c->dir, c->key, suffix) >= n ? -1 : 0;
}

static int lock_path(const struct pool_ctx *c, char *out, size_t n)
{
    return key_file(c, NSBOX_POOL_LOCK, out, n);
}

/* exec `nsbox pool fill --spec -` with s on stdin (a memfd); refill: a used
 * sandbox's replacement, which `nsbox pool drain` stops (see nsbox_warmpool_fill). */
static void exec_filler(const struct nsbox_spec *s, bool refill, long long since_ns)
{
    cleanup_free char *json = nsbox_spec_to_json(s);
    if (!json)
        return;
    int fd = memfd_create("nsbox-pool-spec", 0);
    size_t len = strlen(json);
    if (fd < 0 || write(fd, json, len) != (ssize_t)len || lseek(fd, 0, SEEK_SET) < 0)
        return;
    int null = open("/dev/null", O_RDWR);
    if (null < 0 || dup2(fd, 0) < 0 || dup2(null, 1) < 0 || dup2(null, 2) < 0)
        return;
    close_range(3, ~0U, 0);
    /* the supervisor's mask and dispositions are not the filler's */
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    for (int sig = 1; sig < NSIG; sig++)
        if (sig != SIGKILL && sig != SIGSTOP)
            signal(sig, SIG_DFL);
    char since[32];
    snprintf(since, sizeof since, "%lld", since_ns);
    char *args[9] = {"nsbox", "pool", "fill", "--spec", "-"};
    size_t n = 5;
    if (since_ns) { /* started by a run */
        args[n++] = "--after-run";
        args[n++] = since;
    }
    if (refill)
        args[n++] = "--refill";
    args[n] = NULL;
    execv("/proc/self/exe", args);
}

void nsbox_warmpool_refill_exec(const struct nsbox_spec *s)
{
    exec_filler(s, true, 0); /* only 0-2 stay open: nothing of the old sandbox reaches the new ones */
}

/* Was path modified within the last `seconds`? */
static bool touched_within(const char *path, uint64_t seconds)
{
    struct stat st;
    struct timespec now;
    if (lstat(path, &st) < 0 || clock_gettime(CLOCK_REALTIME, &now) < 0)
        return false;
    return st.st_mtim.tv_sec <= now.tv_sec && (uint64_t)(now.tv_sec - st.st_mtim.tv_sec) <= seconds;
}

/* The auto mode's rule (pool.h): record this cold run of c's key, and say whether the one
 * before it came within ttl_seconds and no fill of the key failed within that time. A lone
 * run leaves only the record, an empty file. */
static bool repeated(const struct pool_ctx *c)
{
    char seen[PATH_MAX], failed[PATH_MAX];
    if (key_file(c, SEEN, seen, sizeof seen) < 0 || key_file(c, FAILED, failed, sizeof failed) < 0)
        return false;
    bool recent = touched_within(seen, c->cfg.ttl_seconds);
    if (mkdir(c->dir, 0700) < 0 && errno != EEXIST)
        return false;
    int fd = open(seen, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return false;
    futimens(fd, NULL);
    close(fd);
    return recent && !touched_within(failed, c->cfg.ttl_seconds);
}

void nsbox_warmpool_after_cold_run(const struct nsbox_spec *s)
{
    struct nsbox_err e;
    struct pool_ctx c;
    if (ctx_load(s, &c, &e) < 0 || !c.cfg.size)
        return;
    if (c.cfg.on_repeat && !repeated(&c))
        return;
    /* A drain that comes after this point wins over the filler started here (fill_key). The
     * coarse clock, as file times have it: a drain's mark is never dated before this. */
    struct timespec now;
    clock_gettime(CLOCK_REALTIME_COARSE, &now);
    long long since_ns = nsbox_timespec_ns(&now);
    char lock[PATH_MAX];
    if (lock_path(&c, lock, sizeof lock) < 0)
        return;
    int fd = open(lock, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
    if (fd >= 0) {
        /* a filler holds it while it works: it will fill what we took */
        bool busy = flock(fd, LOCK_EX | LOCK_NB) < 0;
        close(fd);
        if (busy)
            return;
    }
    pid_t pid = fork();
    if (pid < 0)
        return;
    if (pid == 0) {
        /* detached like a supervisor: its own session, not our child, no caller's stdio */
        setsid();
        pid_t g = fork();
        if (g != 0)
            _exit(0);
        if (chdir("/") < 0)
            _exit(125);
        exec_filler(s, false, since_ns);
        _exit(125);
    }
    int status;
    waitpid(pid, &status, 0);
}

/* 0 while the config file holds the text of read `start` (os/config.h), the one the members'
 * spec and the key came from; else -1: the file's error, or that its text changed (a file only
 * touched or rewritten with the same bytes is the same config, and the same key). The supervisor
 * of a member forked after an edit would read the workspace, network and host sections of the
 * new file, and its sandbox would wait under the key of the old one, for runs with that file
 * (an edit reverted): the fill stops, and the next run or fill takes the key of the file as
 * it is. */
static int fill_config_same(unsigned long start, unsigned made, struct nsbox_err *e)
{
    const struct nsbox_config *cfg;
    int same = nsbox_config_same_text_since(start, &cfg, e);
    if (same)
        return same > 0 ? 0 : -1;
    return nsbox_err_set(e, NSBOX_E_INVALID, ESTALE,
                         "the config file %s changed during the fill: stopped after %u pooled "
                         "sandbox%s made with the file as it was; runs with the file as it is "
                         "now start a filler of their own (or run `nsbox pool fill` again)",
                         cfg->path, made, made == 1 ? "" : "es");
}

/* nsbox_warmpool_fill once the key is known: make member sandboxes until size wait, while the
 * config file is the one of read start. */
static int fill_key(const struct pool_ctx *c, const struct nsbox_spec *member, unsigned size,
                    bool refill, long long since_ns, unsigned long start, unsigned *ready,
                    struct nsbox_err *e)
{
    if (mkdir(c->dir, 0700) < 0 && errno != EEXIST)
        return nsbox_err_sys(e, "pool directory %s", c->dir);
    char lock[PATH_MAX];
    if (lock_path(c, lock, sizeof lock) < 0)
        return nsbox_err_set(e, NSBOX_E_INVALID, ENAMETOOLONG, "pool lock path too long");
    /* One filler per key at a time; a second waits, then finds the pool full. gc and drain
     * remove lock files nobody holds: a lock taken on a file no longer at the path guards
     * nothing, so take the one that is there. */
    cleanup_close int lfd = -1;
    for (int tries = 0;; tries++) {
        lfd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (lfd < 0 || flock(lfd, LOCK_EX) < 0)
            return nsbox_err_sys(e, "pool lock %s", lock);
        if (nsbox_fd_is_at_path(lfd, lock))
            break;
        if (tries == 100)
            return nsbox_err_set(e, NSBOX_E_SYS, EAGAIN, "pool lock %s: removed each time it "
                                 "was taken", lock);
        close(lfd);
    }
    futimens(lfd, NULL); /* in use: gc removes only locks idle for a day */
    /* After `nsbox pool drain`, replacements are not made; a fill somebody asked for (or a cold
     * run, which shows there is demand) starts the pool again. A run's filler that the drain
     * came after (since_ns: when the run decided to start it) gives way to the drain: it may
     * not have held the lock yet when the drain waited for the fillers. */
    int dfd = open(c->dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        struct stat st;
        bool drained = fstatat(dfd, DRAINED, &st, AT_SYMLINK_NOFOLLOW) == 0;
        bool drained_since = drained && since_ns && nsbox_timespec_ns(&st.st_mtim) >= since_ns;
        if (!refill && !drained_since)
            unlinkat(dfd, DRAINED, 0);
        close(dfd);
        if (drained && (refill || drained_since))
            return 0;
    }
    /* The rest of the machine's leftovers at the pace of create's gc: a full one per fill,
     * which follows every pooled run, visited every sandbox alive. This key's members are
     * looked at here, each: a dead one (killed, or its ttl) is no member. */
    struct nsbox_err ge;
    nsbox_gc_implicit(&ge);
    /* The sandbox gets the TERM of the run that takes it (nsbox_sandbox_env in
     * nsbox_warmpool_run), not the filler's. */
    unsetenv("TERM");
    unsigned have = 0;
    char rt[PATH_MAX];
    if (nsbox_paths_runtime_dir(rt, sizeof rt, &ge) < 0)
        rt[0] = '\0'; /* cannot tell which are gone: all counted, as before */
    DIR *d = opendir(c->dir);
    struct dirent *de;
    while (d && (de = readdir(d))) {
        char key[NSBOX_POOL_KEY_LEN + 1], id[NSBOX_ID_LEN + 1];
        if (!nsbox_pool_entry_parse(de->d_name, key, id) || strcmp(key, c->key))
            continue;
        /* Its state directory exists before the entry and outlives it (docs/pool.md): an
         * entry without one, or whose sandbox gc_id removes now, goes. */
        if (nsbox_gc_id(id, &ge) == 1 || (rt[0] && nsbox_state_dir_gone(rt, id)))
            unlinkat(dirfd(d), de->d_name, 0);
        else
            have++;
    }
    if (d)
        closedir(d);
    unsigned made = 0;
    for (; have < size; have++, made++) {
        char id[NSBOX_ID_LEN + 1];
        if (fill_config_same(start, made, e) < 0) {
            *ready = have;
            return -1;
        }
        if (nsbox_session_create(member, NULL, 0, c->key, id, NULL, e) < 0) {
            /* A member whose supervisor met the edit refuses to wait under this key
             * (sup_pool.c): said as the edit, which is the cause, rather than as that. */
            struct nsbox_err ce;
            if (fill_config_same(start, made, &ce) < 0)
                *e = ce;
            *ready = have;
            return -1;
        }
    }
    *ready = have;
    return 0;
}

int nsbox_warmpool_fill(const struct nsbox_spec *s, unsigned size, bool refill, long long since_ns,
                        unsigned *ready, struct nsbox_err *e)
{
    *ready = 0;
    /* The image before the key, which names the image as it is: "host" is built here when it
     * is missing or stale, as the members' creation would do after the key was taken (and the
     * runs would then never find them). A failure is the members' to report. */
    struct nsbox_image img;
    struct nsbox_err ie;
    if (nsbox_image_resolve(s->image, &img, &ie) == 0)
        nsbox_image_release(&img);
    struct pool_ctx c;
    if (ctx_load(s, &c, e) < 0)
        return -1;
    /* Sandboxes that no run would take (the pool is off) would only wait for their ttl. */
    if (!c.cfg.size)
        return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL,
                             "the pool is off ({\"pool\": {\"size\": 0}} in the nsbox config): "
                             "remove that, or set a size (docs/pool.md)");
    if (!size)
        size = c.cfg.size;
    if (size > NSBOX_POOL_MAX_SIZE)
        return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL, "--size: at most %d",
                             NSBOX_POOL_MAX_SIZE);
    /* The read s's limits came from (its instance type's, loaded by the command before the
     * fill), else the key's: the first look of fill_key stops a fill whose key is of another
     * text than s. Waste avoided, not wrong members: the key hashes s's limits too, and members
     * with those of the text before would only never be taken. */
    unsigned long start = nsbox_config_types_read();
    if (!start)
        start = c.config_reads;
    struct nsbox_spec member;
    if (nsbox_pool_member_spec(s, c.cfg.ttl_seconds, &member, e) < 0)
        return -1;
    int r = fill_key(&c, &member, size, refill, since_ns, start, ready, e);
    nsbox_spec_free(&member);
    /* Fillers started by runs have no terminal: keep why (for `nsbox pool ls`, and so that the
     * auto mode does not try again at every run: repeated()); a fill that worked clears it. */
    char failed[PATH_MAX];
    if (key_file(&c, FAILED, failed, sizeof failed) == 0) {
        if (r == 0) {
            unlink(failed);
        } else {
            nsbox_err_wrap(e, "pool fill");
            /* written aside and renamed in: a `pool ls` that finds the file reads the reason
             * whole, never a file just created and still empty */
            char tmp[PATH_MAX + 32];
            snprintf(tmp, sizeof tmp, "%s.tmp-%d", failed, (int)getpid());
            int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
            if (fd >= 0) {
                dprintf(fd, "%s\n", e->msg);
                close(fd);
                if (rename(tmp, failed) < 0)
                    unlink(tmp);
            }
        }
    }
    return r;
}

/* The pool directory, open; 0 with *d NULL when there is none yet. */
static int open_pool_dir(struct pool_ctx *c, DIR **d, struct nsbox_err *e)
{
    *d = NULL;
    if (ctx_load(NULL, c, e) < 0)
        return -1;
    *d = opendir(c->dir);
    return *d || errno == ENOENT ? 0 : nsbox_err_sys(e, "%s", c->dir);
}

/* Calls fn(dfd, name, id, key, arg) for every entry of the pool directory (dfd, the directory,
 * and name, the entry's, for fn to remove it). */
static int each_entry(void (*fn)(int dfd, const char *name, const char *id, const char *key,
                                 void *arg),
                      void *arg, struct nsbox_err *e)
{
    struct pool_ctx c;
    DIR *d = NULL;
    if (open_pool_dir(&c, &d, e) < 0)
        return -1;
    if (!d)
        return 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        char key[NSBOX_POOL_KEY_LEN + 1], id[NSBOX_ID_LEN + 1];
        if (nsbox_pool_entry_parse(de->d_name, key, id))
            fn(dirfd(d), de->d_name, id, key, arg);
    }
    closedir(d);
    return 0;
}

/* A waiting sandbox gives way to a workspace that is wanted now (sandbox/workspace.c). */
static int evict(const char *id)
{
    struct nsbox_err e;
    return nsbox_client_delete(id, false, &e);
}

void nsbox_warmpool_install(void)
{
    nsbox_workspace_set_evict(evict);
    nsbox_session_set_refill(nsbox_warmpool_refill_exec);
}

static void drain_one(int dfd, const char *name, const char *id, const char *key, void *arg)
{
    (void)key;
    struct nsbox_err e;
    if (nsbox_client_delete(id, false, &e) < 0)
        return;
    /* Its supervisor removes the entry as it tears the sandbox down, in its own time: `pool ls`
     * right after the drain must not list it, nor a fill count it as waiting. */
    unlinkat(dfd, name, 0);
    ++*(int *)arg;
}

int nsbox_warmpool_drain(struct nsbox_err *e)
{
    /* First stop the refills: mark the pool drained, then wait for every filler at work (each
     * holds its key's lock while it makes sandboxes). A filler that takes a lock after that
     * sees the mark and makes nothing; what the earlier ones made is deleted below. */
    struct pool_ctx c;
    DIR *d = NULL;
    if (open_pool_dir(&c, &d, e) < 0)
        return -1;
    if (!d)
        return 0;
    int mfd = openat(dirfd(d), DRAINED, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (mfd < 0) {
        closedir(d);
        return nsbox_err_sys(e, "%s/%s", c.dir, DRAINED);
    }
    futimens(mfd, NULL); /* when: a run's filler started before it gives way (fill_key) */
    close(mfd);
    struct dirent *de;
    while ((de = readdir(d))) {
        char key[NSBOX_POOL_KEY_LEN + 1];
        /* a drained pool starts again only when runs repeat again (or a fill is asked for) */
        if (nsbox_pool_key_file(de->d_name, SEEN, key) ||
            nsbox_pool_key_file(de->d_name, FAILED, key)) {
            unlinkat(dirfd(d), de->d_name, 0);
            continue;
        }
        if (!nsbox_pool_key_file(de->d_name, NSBOX_POOL_LOCK, key))
            continue;
        int lfd = openat(dirfd(d), de->d_name, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
        if (lfd < 0)
            continue;
        /* a filler holds it for as long as it makes its sandboxes: seconds at most */
        for (int tries = 0; flock(lfd, LOCK_EX | LOCK_NB) < 0 && tries < 600; tries++)
            usleep(50000);
        unlinkat(dirfd(d), de->d_name, 0); /* remade by the next fill */
        close(lfd);
    }
    closedir(d);
    int n = 0;
    if (each_entry(drain_one, &n, e) < 0)
        return -1;
    struct nsbox_err ge;
    nsbox_gc(false, &ge);
    return n;
}

struct list_ctx {
    struct nsbox_pool_entry *v;
    size_t n, cap;
    bool nomem;
};

static void list_one(int dfd, const char *name, const char *id, const char *key, void *arg)
{
    (void)dfd, (void)name;
    struct list_ctx *l = arg;
    if (l->nomem)
        return;
    if (nsbox_grow(&l->v, &l->cap, l->n, sizeof *l->v, 16, 0) < 0) {
        l->nomem = true;
        return;
    }
    snprintf(l->v[l->n].id, sizeof l->v[l->n].id, "%s", id);
    snprintf(l->v[l->n].key, sizeof l->v[l->n].key, "%s", key);
    l->n++;
}

void nsbox_warmpool_report_failures(void)
{
    struct pool_ctx c;
    struct nsbox_err e; /* no pool directory to read: no failure to tell of */
    DIR *d = NULL;
    if (open_pool_dir(&c, &d, &e) < 0 || !d)
        return;
    struct dirent *de;
    while ((de = readdir(d))) {
        char key[NSBOX_POOL_KEY_LEN + 1], msg[1024];
        if (!nsbox_pool_key_file(de->d_name, FAILED, key))
            continue;
        int fd = openat(dirfd(d), de->d_name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        struct stat st;
        ssize_t n = fd >= 0 ? read(fd, msg, sizeof msg - 1) : -1;
        bool dated = fd >= 0 && fstat(fd, &st) == 0;
        if (fd >= 0)
            close(fd);
        msg[n > 0 ? n : 0] = '\0';
        msg[strcspn(msg, "\n")] = '\0';
        /* when: an old failure (its cause may be gone) reads differently from one just now */
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        char ago[48] = "";
        if (dated)
            nsbox_pool_format_age(ago, sizeof ago, now.tv_sec - st.st_mtim.tv_sec);
        nsbox_note_say(&note, "the last fill for key %s failed%s%s: %s", key, dated ? " " : "", ago,
                       msg);
    }
    closedir(d);
}

int nsbox_warmpool_list(struct nsbox_pool_entry **v, size_t *n, struct nsbox_err *e)
{
    struct nsbox_err ge; /* what gc could not remove it says with -v only (nsbox gc) */
    nsbox_gc(false, &ge);
    struct list_ctx l = {0};
    *v = NULL, *n = 0;
    if (each_entry(list_one, &l, e) < 0 || l.nomem) {
        free(l.v);
        return l.nomem ? nsbox_err_set(e, NSBOX_E_NOMEM, ENOMEM, "cannot list the pool") : -1;
    }
    *v = l.v, *n = l.n;
    return 0;
}
