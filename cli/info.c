/* `nsbox info`: what this machine supports, what is missing and how to fix it.
 *
 * Every check is read-only: it reads /proc and /sys, asks the kernel with calls that cannot
 * change anything (prctl with a NULL filter, openat2 on "/"), or makes throwaway namespaces in a
 * forked child that exits at once. Nothing here writes a sysctl, loads a module or touches the
 * host's nftables ruleset. The pure helpers (parsing, rendering) are in info_format.c. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "info.h"
#include "imagelibs.h"
#include "cli.h"
#include "cfgcheck.h"
#include "caps.h"
#include "cgroup.h"
#include "cleanup.h"
#include "config.h"
#include "egress_spawn.h"
#include "filemax.h"
#include "help.h"
#include "paths.h"
#include "say.h"
#include "shown.h"
#include "net.h"
#include "nftlib.h"
#include "spec.h"
#include "text.h"
#include "userns.h"
#include "util.h"
#include "warmpool.h"
#include "workspace.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysinfo.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef SYS_openat2
#define SYS_openat2 437 /* same number on every architecture (unified syscall table) */
#endif

/* ---- small system helpers ------------------------------------------------------------------ */

/* short names for diagnose.h's, as every check uses them */
#define DETAIL NSBOX_CHECK_DETAIL
#define FIX NSBOX_CHECK_FIX

/* ---- checks (the two namespace checks are sandbox/diagnose.c's) ---------------------------- */

static void check_overlayfs(struct nsbox_check *c)
{
    char buf[8192];
    if (nsbox_text_read("/proc/filesystems", buf, sizeof buf) < 0) {
        DETAIL(c, "cannot read /proc/filesystems (%s)", nsbox_text_errname(errno));
        FIX(c, "mount /proc (mount -t proc proc /proc)");
        return;
    }
    if (!nsbox_info_filesystems_has(buf, "overlay")) {
        DETAIL(c, "overlay is not in /proc/filesystems; sandboxes use bind mounts instead");
        FIX(c, "%smodprobe overlay", nsbox_diagnose_sudo());
        return;
    }
    struct utsname u;
    /* Overlay mounts inside a user namespace arrived in Linux 5.11. */
    if (!nsbox_diagnose_is_root() && uname(&u) == 0 &&
        !nsbox_info_kernel_at_least(u.release, 5, 11)) {
        DETAIL(c,
               "overlay is available, but kernel %s cannot mount it inside a user namespace "
               "(5.11+); sandboxes use bind mounts instead",
               u.release);
        FIX(c, "upgrade to Linux 5.11 or later, or run nsbox as root");
        return;
    }
    c->ok = true;
    DETAIL(c, "overlay is in /proc/filesystems");
}

static void check_cgroups(struct nsbox_check *c)
{
    struct nsbox_cgroup_support sup;
    memset(&sup, 0, sizeof sup);
    nsbox_cgroup_detect(&sup);
    c->ok = sup.version > 0 && sup.memory && sup.cpu && sup.pids;
    if (sup.version > 0)
        DETAIL(c, "v%d;", sup.version);
    else
        DETAIL(c, "no usable cgroup hierarchy;");
    bool any = sup.memory || sup.cpu || sup.pids || sup.freezer || sup.swap;
    DETAIL(c, " usable:%s%s%s%s%s%s", any ? "" : " none", sup.memory ? " memory" : "",
           sup.cpu ? " cpu" : "", sup.pids ? " pids" : "", sup.freezer ? " freezer" : "",
           sup.swap ? " swap" : "");
    if (!sup.memory || !sup.cpu || !sup.pids || !sup.freezer)
        DETAIL(c, "; missing:%s%s%s%s", sup.memory ? "" : " memory", sup.cpu ? "" : " cpu",
               sup.pids ? "" : " pids", sup.freezer ? "" : " freezer (idle_timeout)");
    if (sup.parent[0]) DETAIL(c, "; sandboxes go below %s", sup.parent);
    if (!c->ok) {
        DETAIL(c, "; instance type limits cannot be enforced, so sandboxes are refused");
        if (sup.why[0])
            FIX(c, "%s", sup.why);
        else if (nsbox_diagnose_is_root())
            FIX(c, "mount cgroup2 (mount -t cgroup2 none /sys/fs/cgroup) or the v1 memory, cpu "
                   "and pids hierarchies");
        else
            FIX(c, "run as root, or run nsbox in a delegated cgroup v2 subtree: systemd-run "
                   "--user --scope -p Delegate=yes nsbox ...");
    } else if (sup.why[0]) {
        /* Something optional (freezer, swap) is missing; the detector says how to get it. */
        DETAIL(c, "; %s", sup.why);
    }
}

static void check_seccomp(struct nsbox_check *c)
{
    char buf[512];
    char status[4096];
    if (nsbox_text_read("/proc/sys/kernel/seccomp/actions_avail", buf, sizeof buf) >= 0) {
        /* The file exists only with CONFIG_SECCOMP_FILTER (Linux 4.14+). */
        buf[strcspn(buf, "\n")] = '\0';
        bool kill = nsbox_info_words_has(buf, "kill_process");
        bool err = nsbox_info_words_has(buf, "errno");
        c->ok = kill && err;
        DETAIL(c, "seccomp filters; actions_avail: %s", buf);
        if (!c->ok)
            FIX(c,
                "use a kernel with CONFIG_SECCOMP_FILTER=y that supports the %s%s%s action "
                "(Linux 4.14+)",
                kill ? "" : "kill_process", !kill && !err ? " and " : "", err ? "" : "errno");
    } else {
        int saved = errno;
        if (prctl(PR_GET_SECCOMP, 0, 0, 0, 0) < 0) {
            DETAIL(c, "prctl(PR_GET_SECCOMP) failed: %s", nsbox_text_errname(errno));
            FIX(c, "use a kernel built with CONFIG_SECCOMP=y and CONFIG_SECCOMP_FILTER=y");
            return;
        }
        /* A NULL program makes the kernel fail while copying it in, before it checks
         * privileges or installs anything: EFAULT means filter mode exists, EINVAL that it
         * does not. */
        int r = prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, NULL, 0, 0);
        bool filter = r < 0 && errno == EFAULT;
        c->ok = filter;
        DETAIL(c, "actions_avail unreadable (%s); filter mode %s", nsbox_text_errname(saved),
               filter ? "available" : "unavailable");
        if (!filter) FIX(c, "use a kernel built with CONFIG_SECCOMP_FILTER=y");
    }
    /* Running under a filter already (a container) is fine: filters stack, and ours is
     * stricter; but the outer one may block calls the launcher needs, so say so. */
    if (nsbox_text_read("/proc/self/status", status, sizeof status) >= 0) {
        const char *s = strstr(status, "\nSeccomp:");
        long mode;
        if (s) {
            char line[32] = "";
            sscanf(s + 9, "%31s", line);
            if (nsbox_text_parse_long(line, &mode) == 0 && mode == 2)
                DETAIL(c, "; nsbox itself already runs under a seccomp filter");
        }
    }
}

/* Where the kernel's nf_tables comes from, without loading anything. */
enum nft_kernel { NFT_K_UNKNOWN, NFT_K_LOADED, NFT_K_BUILTIN, NFT_K_NOT_LOADED, NFT_K_NO_MODULES };

static enum nft_kernel nft_kernel_state(const char **how)
{
    struct stat st;
    cleanup_free char *buf = malloc(1u << 20);
    if (!buf) return NFT_K_UNKNOWN;
    bool have_proc_modules = nsbox_text_read("/proc/modules", buf, 1u << 20) >= 0;
    if (have_proc_modules && nsbox_info_modules_has(buf, "nf_tables")) {
        *how = "loaded module (/proc/modules)";
        return NFT_K_LOADED;
    }
    /* Built-in code only has /sys/module/<name> when it has parameters; a module always does. */
    if (stat("/sys/module/nf_tables", &st) == 0) {
        *how = "present (/sys/module/nf_tables)";
        return NFT_K_LOADED;
    }
    struct utsname u;
    if (uname(&u) == 0) {
        char path[PATH_MAX];
        snprintf(path, sizeof path, "/lib/modules/%s/modules.builtin", u.release);
        if (nsbox_text_read(path, buf, 1u << 20) >= 0 && nsbox_info_builtin_has(buf, "nf_tables")) {
            *how = "built into the kernel (modules.builtin)";
            return NFT_K_BUILTIN;
        }
    }
    if (!have_proc_modules) {
        /* CONFIG_MODULES=n: nothing can be loaded, so probing cannot load anything either. */
        *how = "kernel without loadable modules";
        return NFT_K_NO_MODULES;
    }
    *how = "nf_tables module not loaded";
    return NFT_K_NOT_LOADED;
}

/* Child exit codes of the nftables probe. */
enum { NFT_PROBE_OK = 0, NFT_PROBE_UNSHARE = 10, NFT_PROBE_CTX = 11, NFT_PROBE_CMD = 12 };

/* Ask libnftables to list tables in a brand-new, empty network namespace: proves both the
 * library and the kernel side work while the host's ruleset is never read or written. */
static int nft_probe(void)
{
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        /* root without CAP_SYS_ADMIN may make a network namespace only inside a user
         * namespace of its own, as a user does */
        bool alone = nsbox_diagnose_is_root() && !nsbox_diagnose_root_without_sys_admin();
        int flags = CLONE_NEWNET | (alone ? 0 : CLONE_NEWUSER);
        if (unshare(flags) < 0) _exit(NFT_PROBE_UNSHARE);
        const struct nsbox_nftlib *nft = nsbox_nftlib(NULL);
        if (!nft) _exit(NFT_PROBE_CTX);
        struct nft_ctx *ctx = nft->ctx_new(NFT_CTX_DEFAULT);
        if (!ctx) _exit(NFT_PROBE_CTX);
        /* Keep libnftables quiet: its output and errors go to buffers we never print. */
        nft->ctx_buffer_output(ctx);
        nft->ctx_buffer_error(ctx);
        int r = nft->run_cmd_from_buffer(ctx, "list tables");
        _exit(r == 0 ? NFT_PROBE_OK : NFT_PROBE_CMD);
    }
    int status;
    if (nsbox_diagnose_wait(pid, &status) < 0) return -1;
    return nsbox_exit_code(status);
}

static void check_nftables(struct nsbox_check *c)
{
    const char *how = "unknown";
    enum nft_kernel k = nft_kernel_state(&how);
    if (k == NFT_K_NOT_LOADED || k == NFT_K_UNKNOWN) {
        /* Not probed: creating a netfilter socket could make the kernel load modules, which
         * would change the host. */
        DETAIL(c, "%s; needed only for network all/allow", how);
        FIX(c, "%smodprobe nf_tables", nsbox_diagnose_sudo());
        return;
    }
    DETAIL(c, "nf_tables: %s", how);
    int r = nft_probe();
    switch (r) {
    case NFT_PROBE_OK:
        c->ok = true;
        DETAIL(c, "; libnftables lists tables in a throwaway network namespace");
        return;
    case NFT_PROBE_UNSHARE:
        /* No namespace to probe in: fall back to what can be checked without one. */
        if (k == NFT_K_NO_MODULES) {
            DETAIL(c, "; could not make a throwaway network namespace to probe it");
            FIX(c, "fix user_namespaces and namespaces first");
            return;
        }
        c->ok = true;
        DETAIL(c, "; libnftables linked (not probed: no throwaway network namespace)");
        return;
    case NFT_PROBE_CTX:
        DETAIL(c, "; libnftables could not create a context");
        FIX(c, "%sapt-get install --reinstall libnftables1", nsbox_diagnose_sudo());
        return;
    case NFT_PROBE_CMD:
        DETAIL(c, "; listing tables in a throwaway network namespace failed (no nf_tables in "
                  "the kernel?)");
        FIX(c,
            "use a kernel with CONFIG_NF_TABLES and CONFIG_NF_TABLES_INET (y or m), then "
            "%smodprobe nf_tables",
            nsbox_diagnose_sudo());
        return;
    default:
        DETAIL(c, "; probe failed (%d)", r);
        FIX(c, "%smodprobe nf_tables", nsbox_diagnose_sudo());
        return;
    }
}

static void check_netadmin(struct nsbox_check *c)
{
    int has = nsbox_caps_effective_has(CAP_NET_ADMIN);
    if (has < 0) {
        DETAIL(c, "cannot read this process's capabilities (%s)", nsbox_text_errname(errno));
    } else if (has) {
        c->ok = true;
        DETAIL(c, "effective CAP_NET_ADMIN; network all/allow can set up veth and nftables");
    } else {
        DETAIL(c, "no effective CAP_NET_ADMIN: network all/allow are refused; network none works");
    }
    if (!c->ok && nsbox_diagnose_root_without_sys_admin())
        FIX(c, "%s (network all/allow need CAP_NET_ADMIN on the host)", NSBOX_DIAGNOSE_ROOT_CAPS_FIX);
    else if (!c->ok)
        FIX(c, "run as root (network all/allow need CAP_NET_ADMIN on the host)");
}

static void check_idmap(struct nsbox_check *c)
{
    struct utsname u;
    if (uname(&u) < 0) {
        DETAIL(c, "uname failed (%s)", nsbox_text_errname(errno));
        return;
    }
    if (!nsbox_info_kernel_at_least(u.release, 5, 12)) {
        DETAIL(c, "kernel %s < 5.12: no mount_setattr(MOUNT_ATTR_IDMAP)", u.release);
        FIX(c, "upgrade to Linux 5.12 or later (--workspace DIR is needed only with it)");
        return;
    }
    /* The kernel requires CAP_SYS_ADMIN in the user namespace that owns the filesystem, which
     * for host filesystems is the initial one: a user cannot idmap their own home directory. */
    if (!nsbox_diagnose_is_root()) {
        DETAIL(c,
               "kernel %s >= 5.12, but idmapping a host directory needs CAP_SYS_ADMIN on "
               "the host",
               u.release);
        FIX(c, "run as root to hand a --workspace DIR to the sandbox user without chown");
        return;
    }
    if (nsbox_diagnose_root_without_sys_admin()) {
        DETAIL(c, "kernel %s >= 5.12, but idmapping a host directory needs CAP_SYS_ADMIN on "
                  "the host, which this root lacks", u.release);
        FIX(c, "%s", NSBOX_DIAGNOSE_ROOT_CAPS_FIX);
        return;
    }
    c->ok = true;
    DETAIL(c,
           "kernel %s >= 5.12 (mount_setattr with MOUNT_ATTR_IDMAP; the filesystem must "
           "support it too)",
           u.release);
}

static void check_openat2(struct nsbox_check *c)
{
    struct open_how how = {
        .flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
        .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
    };
    long fd = syscall(SYS_openat2, AT_FDCWD, "/", &how, sizeof how);
    if (fd >= 0) {
        close((int)fd);
        c->ok = true;
        DETAIL(c, "openat2(RESOLVE_IN_ROOT) works: file operations stay inside the sandbox root");
        return;
    }
    int err = errno;
    DETAIL(c, "openat2 failed: %s (%s)", nsbox_text_errname(err), strerror(err));
    if (err == ENOSYS)
        FIX(c, "upgrade to Linux 5.6 or later");
    else if (err == EPERM)
        FIX(c, "a seccomp filter (container runtime) blocks openat2: run nsbox on the host or "
               "allow openat2 in the container's seccomp profile");
    else
        FIX(c, "see openat2(2) for %s", nsbox_text_errname(err));
}

static void describe_exe(struct nsbox_check *c, const char *path)
{
    char real[PATH_MAX];
    if (realpath(path, real) && strcmp(real, path) != 0)
        DETAIL(c, " %s -> %s", path, real);
    else
        DETAIL(c, " %s", path);
}

static void check_image_host(struct nsbox_check *c)
{
    /* The host image is the host's own /usr, read-only: what is missing here is missing in
     * every sandbox that uses the default image. */
    bool py = access("/usr/bin/python3", X_OK) == 0;
    bool sh = access("/bin/sh", X_OK) == 0;
    c->ok = py && sh;
    DETAIL(c, "default image (host's /usr):");
    if (py)
        describe_exe(c, "/usr/bin/python3");
    else
        DETAIL(c, " no /usr/bin/python3");
    if (sh)
        describe_exe(c, "/bin/sh");
    else
        DETAIL(c, " no /bin/sh");
    if (!py) FIX(c, "%sapt-get install python3", nsbox_diagnose_sudo());
    if (!sh) FIX(c, "%sapt-get install dash", nsbox_diagnose_sudo());
}

static void check_image_debian(struct nsbox_check *c)
{
    char dir[PATH_MAX], rootfs[PATH_MAX];
    struct nsbox_err e = {0};
    if (nsbox_paths_data_dir(dir, sizeof dir, &e) < 0) {
        DETAIL(c, "no data directory: %s", e.msg);
        FIX(c, "point HOME or NSBOX_DATA_DIR at a directory of yours");
        return;
    }
    int n = snprintf(rootfs, sizeof rootfs, "%s/images/debian/rootfs", dir);
    if (n < 0 || (size_t)n >= sizeof rootfs) {
        DETAIL(c, "data directory path too long: %s", dir);
        FIX(c, "set NSBOX_DATA_DIR to a shorter path");
        return;
    }
    struct stat st;
    int err = stat(rootfs, &st) < 0 ? errno : S_ISDIR(st.st_mode) ? 0 : ENOTDIR;
    if (!err) {
        c->ok = true;
        DETAIL(c, "built: %s", rootfs);
        return;
    }
    DETAIL(c, "not built (%s: %s); --image debian needs it", rootfs, strerror(err));
    FIX(c, "nsbox image build debian");
}

static void check_privileges(struct nsbox_check *c)
{
    char map[256];
    c->ok = true;
    uid_t uid = geteuid();
    if (uid != 0) {
        DETAIL(c,
               "unprivileged (uid %u): sandboxes run in a user namespace; limits need a "
               "delegated cgroup; network all/allow and idmapped workspaces need root",
               (unsigned)uid);
        /* which ids a sandbox has (policy/idmap.h) */
        struct nsbox_subids sub;
        char why[256];
        if (nsbox_userns_subids(&sub, why, sizeof why) == 1)
            DETAIL(c, "; ids 0-%u: appuser (1000) is you, the others your subordinate ids "
                      "from uid %u and gid %u (/etc/subuid, /etc/subgid, through newuidmap)",
                   NSBOX_ID_COUNT - 1, sub.uid_start, sub.gid_start);
        else
            DETAIL(c, "; only appuser (1000) is mapped, to you, since %s: chown to another "
                      "user or setuid to nobody fail with EINVAL (grant 65536 subordinate ids "
                      "with usermod --add-subuids/--add-subgids)", why);
        return;
    }
    bool initial =
        nsbox_text_read("/proc/self/uid_map", map, sizeof map) < 0 || nsbox_info_uid_map_is_initial(map);
    if (initial && nsbox_diagnose_root_without_sys_admin())
        DETAIL(c, "root (uid 0) without CAP_SYS_ADMIN, as in a container started without "
                  "--privileged or a systemd unit whose CapabilityBoundingSet= leaves it out: "
                  "what root's sandboxes have beyond a user's (cgroup limits, network "
                  "all/allow, idmapped workspaces) is as the checks above say; sandboxed "
                  "commands still run as an unprivileged user");
    else if (initial)
        DETAIL(c, "root (uid 0): cgroup limits, network all/allow and idmapped workspaces are "
                  "available; sandboxed commands still run as an unprivileged user; each "
                  "sandbox has ids 0-%u, a range of host ids of its own from %u (%u slots of "
                  "%u)", NSBOX_ID_COUNT - 1, NSBOX_UID_BASE, NSBOX_UID_SLOTS, NSBOX_ID_COUNT);
    else
        DETAIL(c, "root inside a user namespace (uid 0, not the host's root): host-level "
                  "features depend on what the outer container grants");
}

/* The limit is always enforced; what differs is how, and what it costs (docs/workspace.md). */
static void check_workspace_disk(struct nsbox_check *c)
{
    char why[256];
    c->ok = true;
    if (nsbox_workspace_ext4_usable(why, sizeof why)) {
        DETAIL(c, "ext4 on a loop device: a fresh /workspace is a filesystem of the instance "
                  "type's disk size, mounted only inside the sandbox");
        return;
    }
    DETAIL(c, "tmpfs: a fresh /workspace is a tmpfs of the instance type's disk size, and what "
              "it holds counts against the memory limit (ext4 workspaces: %s)",
           why);
}

/* Read-only as every check: root's nsbox raises the table when it makes a sandbox, info only
 * says whether it is large enough. */
static void check_file_table(struct nsbox_check *c)
{
    long file_max;
    struct sysinfo si;
    char map[256];
    if (nsbox_text_read_long("/proc/sys/fs/file-max", &file_max) < 0 || file_max < 0 ||
        sysinfo(&si) < 0) {
        c->ok = true; /* nothing to judge by; a sandbox is not refused for it */
        DETAIL(c, "fs.file-max or the memory size unreadable (%s)", nsbox_text_errname(errno));
        return;
    }
    bool host_root = geteuid() == 0 && (nsbox_text_read("/proc/self/uid_map", map, sizeof map) < 0 ||
                                         nsbox_info_uid_map_is_initial(map));
    struct nsbox_err e;
    bool keep = false;
    enum nsbox_info_raiser raiser = NSBOX_INFO_RAISER_NOT_ROOT;
    if (host_root && nsbox_filemax_config_keep(&keep, &e) == 0 && keep)
        raiser = NSBOX_INFO_RAISER_KEPT;
    else if (host_root)
        raiser = nsbox_filemax_writable() ? NSBOX_INFO_RAISER_RAISES : NSBOX_INFO_RAISER_READ_ONLY;
    nsbox_info_file_table((uint64_t)file_max,
                          (uint64_t)si.totalram * (si.mem_unit ? si.mem_unit : 1), raiser, c);
}

/* Every section of the config file, each as the command that uses it reads it (a typo in
 * "workspace" or "pool" stopped every run while info said OK, and one in "network" only
 * showed with --network all), and the directories' environment overrides. Required: a
 * command that makes a sandbox refuses a broken file, so info must not say "OK" and "ok": true
 * for it beside an exit code of 1. */
static void check_config(struct nsbox_check *c)
{
    struct nsbox_err e = {0};
    char dir[PATH_MAX];
    const char *env = getenv("NSBOX_CONFIG");
    const char *path = env && *env ? env : NSBOX_CONFIG_DEFAULT_PATH;
    bool file = nsbox_cfgcheck_all(&e) == 0;
    /* the instance types are of the file as it is (its first check), whatever section failed */
    unsigned long types_read = nsbox_config_types_read();
    bool types = file || (types_read && types_read == nsbox_config_reads());
    if (file && nsbox_paths_runtime_dir(dir, sizeof dir, &e) == 0 &&
        nsbox_paths_data_dir(dir, sizeof dir, &e) == 0 &&
        nsbox_paths_cache_dir(dir, sizeof dir, &e) == 0) {
        const struct nsbox_config *cfg;
        c->ok = true;
        if (nsbox_config_get(NULL, &cfg, &e) == 0 && cfg->root)
            snprintf(c->detail, sizeof c->detail, "%.400s: valid", path);
        else
            snprintf(c->detail, sizeof c->detail, "no %.400s: the defaults", path);
        return;
    }
    snprintf(c->detail, sizeof c->detail, "%.420s%s", e.msg,
             types ? "" : " (the instance types below are the defaults)");
    if (file) /* the message names the variable and what to set it to */
        snprintf(c->fix, sizeof c->fix,
                 "set the directory's variable as said (README.md: where nsbox keeps things)");
    else
        snprintf(c->fix, sizeof c->fix,
                 "correct %.400s (docs/spec.md), or point NSBOX_CONFIG at a valid file", path);
}

/* The egress helper's executable, where nsbox runs it from (sandbox/egress_spawn.h). */
static void check_egress(struct nsbox_check *c)
{
    char path[PATH_MAX];
    struct nsbox_err e = {0};
    int fd = nsbox_egress_spawn_open(path, sizeof path, &e);
    if (fd < 0) {
        if (nsbox_egress_spawn_path(path, sizeof path, &e) < 0)
            DETAIL(c, "%.400s", e.msg);
        else
            DETAIL(c,
                   "cannot run %.400s (%s); needed only for network allow by name and header "
                   "bindings",
                   path, nsbox_text_errname(e.sys_errno));
        FIX(c, "install nsbox-egress beside nsbox (`cmake --install build` installs both)");
        return;
    }
    close(fd);
    c->ok = true;
    DETAIL(c, "%.400s, the egress helper of network allow by name and header bindings", path);
}

/* What OCI images need: libarchive and libcrypto to import (os/imagelibs.h), skopeo to pull
 * (rootfs/oci_pull.c runs $NSBOX_SKOPEO, else skopeo from PATH); and whether ISA-L inflates
 * gzip layers. */
static void check_oci_images(struct nsbox_check *c)
{
    struct nsbox_err e = {0};
    if (nsbox_imagelibs_load(&e) < 0) {
        DETAIL(c, "%.400s; nsbox image import and pull need them", e.msg);
        FIX(c, "%sapt-get install libarchive13 libssl3", nsbox_diagnose_sudo());
        return;
    }
    const char *skopeo = getenv("NSBOX_SKOPEO");
    char found[PATH_MAX] = "";
    if (skopeo && *skopeo) {
        if (access(skopeo, X_OK) == 0)
            snprintf(found, sizeof found, "%s", skopeo);
    } else {
        const char *path = getenv("PATH");
        char buf[4096];
        snprintf(buf, sizeof buf, "%s", path && *path ? path : "/usr/bin:/bin");
        char *save = NULL;
        for (char *d = strtok_r(buf, ":", &save); d && !found[0]; d = strtok_r(NULL, ":", &save))
            if ((size_t)snprintf(found, sizeof found, "%s/skopeo", d) >= sizeof found ||
                access(found, X_OK) < 0)
                found[0] = '\0';
    }
    if (!found[0]) {
        DETAIL(c,
               "import works; pull does not: %s%.300s%s (nsbox image pull, and run or create "
               "with an image reference not in the store, need it)",
               skopeo && *skopeo ? "NSBOX_SKOPEO=" : "skopeo is not on PATH",
               skopeo && *skopeo ? skopeo : "", skopeo && *skopeo ? " is not executable" : "");
        FIX(c, "%sapt-get install skopeo", nsbox_diagnose_sudo());
        return;
    }
    c->ok = true;
    /* optional: without it gzip layers are inflated by zlib, at about half the speed */
    int isal = nsbox_imagelibs_isal() != NULL;
    DETAIL(c, "import (libarchive, gzip by %s%.600s) and pull (%.400s) work",
           isal ? "ISA-L" : "zlib: ", isal ? "" : nsbox_imagelibs_isal_why(), found);
}

static const char *const check_names[NSBOX_CHECK_COUNT] = {
    [NSBOX_CHECK_USERNS] = "user_namespaces",    [NSBOX_CHECK_NAMESPACES] = "namespaces",
    [NSBOX_CHECK_OVERLAYFS] = "overlayfs",       [NSBOX_CHECK_CGROUPS] = "cgroups",
    [NSBOX_CHECK_SECCOMP] = "seccomp",           [NSBOX_CHECK_NFTABLES] = "nftables",
    [NSBOX_CHECK_NETADMIN] = "net_admin",        [NSBOX_CHECK_IDMAP] = "idmapped_mounts",
    [NSBOX_CHECK_OPENAT2] = "openat2",           [NSBOX_CHECK_IMAGE_HOST] = "image_host",
    [NSBOX_CHECK_IMAGE_DEBIAN] = "image_debian", [NSBOX_CHECK_WORKSPACE_DISK] = "workspace_disk",
    [NSBOX_CHECK_PRIVILEGES] = "privileges",     [NSBOX_CHECK_CONFIG] = "config",
    [NSBOX_CHECK_EGRESS] = "egress_helper",    [NSBOX_CHECK_OCI_IMAGES] = "oci_images",
    [NSBOX_CHECK_FILE_TABLE] = "file_table",
};

/* Without these nsbox cannot create a sandbox that keeps its promises; the rest are features
 * that are refused, with this fix, only when a spec asks for them. */
static const bool check_required[NSBOX_CHECK_COUNT] = {
    [NSBOX_CHECK_USERNS] = true,  [NSBOX_CHECK_NAMESPACES] = true, [NSBOX_CHECK_CGROUPS] = true,
    [NSBOX_CHECK_SECCOMP] = true, [NSBOX_CHECK_OPENAT2] = true,    [NSBOX_CHECK_IMAGE_HOST] = true,
    [NSBOX_CHECK_CONFIG] = true,
};

const char *nsbox_info_check_name(enum nsbox_check_id id)
{
    if ((unsigned)id >= NSBOX_CHECK_COUNT) return NULL;
    return check_names[id];
}

static void check_init(enum nsbox_check_id id, struct nsbox_check *out)
{
    memset(out, 0, sizeof *out);
    out->name = check_names[id];
    out->required = check_required[id];
}

static void check_run_probed(enum nsbox_check_id id, struct nsbox_check *out,
                             const struct nsbox_ns_probe *p)
{
    check_init(id, out);
    if (id == NSBOX_CHECK_USERNS)
        nsbox_diagnose_userns(out, p);
    else
        nsbox_diagnose_namespaces(out, p);
}

void nsbox_info_check_run(enum nsbox_check_id id, struct nsbox_check *out)
{
    if ((unsigned)id >= NSBOX_CHECK_COUNT) {
        memset(out, 0, sizeof *out);
        out->name = "unknown";
        snprintf(out->detail, sizeof out->detail, "no such check (%d)", (int)id);
        return;
    }
    struct nsbox_ns_probe p;
    switch (id) {
    case NSBOX_CHECK_USERNS:
    case NSBOX_CHECK_NAMESPACES:
        nsbox_diagnose_probe(&p);
        check_run_probed(id, out, &p);
        return;
    default:
        break;
    }
    check_init(id, out);
    switch (id) {
    case NSBOX_CHECK_OVERLAYFS:
        check_overlayfs(out);
        break;
    case NSBOX_CHECK_CGROUPS:
        check_cgroups(out);
        break;
    case NSBOX_CHECK_SECCOMP:
        check_seccomp(out);
        break;
    case NSBOX_CHECK_NFTABLES:
        check_nftables(out);
        break;
    case NSBOX_CHECK_NETADMIN:
        check_netadmin(out);
        break;
    case NSBOX_CHECK_IDMAP:
        check_idmap(out);
        break;
    case NSBOX_CHECK_OPENAT2:
        check_openat2(out);
        break;
    case NSBOX_CHECK_IMAGE_HOST:
        check_image_host(out);
        break;
    case NSBOX_CHECK_IMAGE_DEBIAN:
        check_image_debian(out);
        break;
    case NSBOX_CHECK_WORKSPACE_DISK:
        check_workspace_disk(out);
        break;
    case NSBOX_CHECK_PRIVILEGES:
        check_privileges(out);
        break;
    case NSBOX_CHECK_CONFIG:
        check_config(out);
        break;
    case NSBOX_CHECK_EGRESS:
        check_egress(out);
        break;
    case NSBOX_CHECK_OCI_IMAGES:
        check_oci_images(out);
        break;
    case NSBOX_CHECK_FILE_TABLE:
        check_file_table(out);
        break;
    default:
        break;
    }
    if (out->ok) out->fix[0] = '\0';
}

void nsbox_info_check_run_all(struct nsbox_check out[NSBOX_CHECK_COUNT])
{
    /* One probe serves both namespace checks. */
    struct nsbox_ns_probe p;
    nsbox_diagnose_probe(&p);
    for (int id = 0; id < NSBOX_CHECK_COUNT; id++) {
        if (id == NSBOX_CHECK_USERNS || id == NSBOX_CHECK_NAMESPACES)
            check_run_probed((enum nsbox_check_id)id, &out[id], &p);
        else
            nsbox_info_check_run((enum nsbox_check_id)id, &out[id]);
    }
}

/* ---- CLI ----------------------------------------------------------------------------------- */

/* The CPUs this process may run on (what nproc says, and a sandbox's most) and the memory. */
static void host_capacity(struct nsbox_info_host *h)
{
    cpu_set_t set;
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    h->cpus = sched_getaffinity(0, sizeof set, &set) == 0 ? (unsigned)CPU_COUNT(&set)
                                                          : online > 0 ? (unsigned)online : 0;
    struct sysinfo si;
    h->memory_bytes = sysinfo(&si) == 0 ? (uint64_t)si.totalram * si.mem_unit : 0;
}

int nsbox_cli_info(int argc, char **argv)
{
    bool json = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0) {
            json = true;
        } else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            nsbox_help_print("info", stdout);
            return 0;
        } else {
            fprintf(stderr, "nsbox info: unknown argument '%s'\n", NSBOX_SHOW(argv[i]));
            nsbox_help_print("info", stderr);
            return 2;
        }
    }
    struct nsbox_check checks[NSBOX_CHECK_COUNT];
    nsbox_info_check_run_all(checks);
    if (!checks[NSBOX_CHECK_CONFIG].ok) /* said on stderr too, as every command says it */
        nsbox_say_line("%s", checks[NSBOX_CHECK_CONFIG].detail);
    size_t ntypes = 0;
    const struct nsbox_instance_type *types = nsbox_spec_types(&ntypes);
    if (!types) ntypes = 0;
    const size_t size = 256u << 10; /* twelve checks of ~1 KiB each and a short table */
    cleanup_free char *buf = malloc(size);
    if (!buf) {
        fprintf(stderr, "nsbox info: out of memory\n");
        return 1;
    }
    struct nsbox_info_host host;
    host_capacity(&host);
    int r = json ? nsbox_info_render_json(checks, NSBOX_CHECK_COUNT, types, ntypes, &host, buf,
                                          size)
                 : nsbox_info_render_text(checks, NSBOX_CHECK_COUNT, types, ntypes, &host, buf,
                                          size);
    if (r < 0) {
        fprintf(stderr, "nsbox info: cannot render the report: %s\n", strerror(errno));
        return 1;
    }
    /* the text for a terminal, by the rule of every message: a check's detail may quote a path
     * or a config's words (JSON escapes its controls itself) */
    cleanup_free char *shown = json ? NULL : nsbox_shown_lines(buf, strlen(buf), "", true);
    if (!json && !shown) {
        fprintf(stderr, "nsbox info: out of memory\n");
        return 1;
    }
    if (fputs(json ? buf : shown, stdout) == EOF || fflush(stdout) == EOF) {
        fprintf(stderr, "nsbox info: cannot write the report: %s\n", strerror(errno));
        return 1;
    }
    return nsbox_info_all_required_ok(checks, NSBOX_CHECK_COUNT) ? 0 : 1;
}
