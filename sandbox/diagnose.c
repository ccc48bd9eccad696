/* Why a sandbox's namespaces cannot be made here (see diagnose.h): a probe in a forked child,
 * and the two checks that read it, shared by a failed clone (sandbox.c) and `nsbox info`.
 *
 * Read-only, as every check of `nsbox info`: the probe makes throwaway namespaces in a child
 * that exits at once, and the checks read sysctls. */
#define _GNU_SOURCE
#include "diagnose.h"
#include "caps.h"
#include "cleanup.h"
#include "text.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* short names for diagnose.h's, as every check uses them */
#define DETAIL NSBOX_CHECK_DETAIL
#define FIX NSBOX_CHECK_FIX

bool nsbox_diagnose_is_root(void)
{
    return geteuid() == 0;
}

const char *nsbox_diagnose_sudo(void)
{
    return nsbox_diagnose_is_root() ? "" : "sudo ";
}

bool nsbox_diagnose_root_without_sys_admin(void)
{
    return nsbox_diagnose_is_root() && nsbox_caps_effective_has(CAP_SYS_ADMIN) == 0;
}

/* Why root's sandboxes need CAP_SYS_ADMIN, and whether it could be had: a capability left out
 * of the bounding set is gone for good (the container was started without it), one only out
 * of the effective set was dropped by whoever ran nsbox. */
static void say_root_caps(char *out, size_t n)
{
    int bounded = prctl(PR_CAPBSET_READ, CAP_SYS_ADMIN, 0, 0, 0);
    snprintf(out, n,
             "root without CAP_SYS_ADMIN (%s) cannot make a sandbox: each sandbox's user "
             "namespace belongs to a uid of its own, and root may write that namespace's id "
             "maps only with CAP_SYS_ADMIN",
             bounded == 0 ? "not even in its bounding set" : "not in its effective set");
}

int nsbox_diagnose_root_caps(struct nsbox_err *e)
{
    if (!nsbox_diagnose_root_without_sys_admin())
        return 0;
    char why[256];
    say_root_caps(why, sizeof why);
    return nsbox_err_set(e, NSBOX_E_UNSUPPORTED, EPERM, "%s; fix: %s", why,
                         NSBOX_DIAGNOSE_ROOT_CAPS_FIX);
}

int nsbox_diagnose_wait(pid_t pid, int *status)
{
    while (waitpid(pid, status, 0) < 0)
        if (errno != EINTR) return -1;
    return 0;
}

/* ---- namespace probe ----------------------------------------------------------------------- */

static const struct {
    int flag;
    const char *name;   /* as /proc/<pid>/ns names it */
    const char *sysctl; /* its per-user limit in /proc/sys/user */
    const char *config; /* kernel option without which unshare says EINVAL */
} ns_kinds[] = {
    {CLONE_NEWNS, "mnt", "max_mnt_namespaces", "CONFIG_NAMESPACES"},
    {CLONE_NEWPID, "pid", "max_pid_namespaces", "CONFIG_PID_NS"},
    {CLONE_NEWUTS, "uts", "max_uts_namespaces", "CONFIG_UTS_NS"},
    {CLONE_NEWIPC, "ipc", "max_ipc_namespaces", "CONFIG_IPC_NS"},
    {CLONE_NEWNET, "net", "max_net_namespaces", "CONFIG_NET_NS"},
    {CLONE_NEWCGROUP, "cgroup", "max_cgroup_namespaces", "CONFIG_CGROUPS"},
};
_Static_assert(NSBOX_ARRAY_LEN(ns_kinds) == NSBOX_NS_KINDS, "one errno per kind");
#define NS_KINDS NSBOX_NS_KINDS

/* In the child: only system calls, then _exit, so it is safe even if the caller has threads. */
static void __attribute__((noreturn)) ns_probe_child(int wfd)
{
    struct nsbox_ns_probe p = {0};
    if (unshare(CLONE_NEWUSER) < 0) {
        p.userns_err = errno;
    } else {
        p.others_probed = true;
        int all = 0;
        for (size_t i = 0; i < NS_KINDS; i++)
            all |= ns_kinds[i].flag;
        /* One call as the launcher's clone makes them; only when it fails, one at a time to
         * name the culprit (each unshare replaces the previous throwaway namespace). */
        if (unshare(all) < 0) {
            int combined = errno;
            bool named = false;
            for (size_t i = 0; i < NS_KINDS; i++) {
                if (unshare(ns_kinds[i].flag) < 0) {
                    p.ns_err[i] = errno;
                    named = true;
                }
            }
            if (!named) p.combined_err = combined;
        }
    }
    ssize_t w;
    do
        w = write(wfd, &p, sizeof p);
    while (w < 0 && errno == EINTR);
    _exit(0);
}

void nsbox_diagnose_probe(struct nsbox_ns_probe *out)
{
    memset(out, 0, sizeof *out);
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) < 0) {
        out->fork_err = errno;
        return;
    }
    cleanup_close int rfd = fds[0];
    cleanup_close int wfd = fds[1];
    /* not the C library's fork: unshare(CLONE_NEWUSER) refuses a child that is not alone
     * (EINVAL), which would read as a kernel without user namespaces */
    pid_t pid = nsbox_clone_bare(SIGCHLD);
    if (pid < 0) {
        out->fork_err = errno;
        return;
    }
    if (pid == 0) ns_probe_child(wfd);
    close(nsbox_steal_fd(&wfd));
    struct nsbox_ns_probe p;
    size_t got = 0;
    while (got < sizeof p) {
        ssize_t r = read(rfd, (char *)&p + got, sizeof p - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        got += (size_t)r;
    }
    int status = 0;
    if (nsbox_diagnose_wait(pid, &status) < 0) {
        out->fork_err = errno;
        return;
    }
    if (got != sizeof p) {
        /* The child died before reporting: a seccomp filter that kills on unshare does that. */
        out->fork_err = ECHILD;
        out->child_signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
        return;
    }
    *out = p;
}

/* ---- the two checks -------------------------------------------------------------------------------- */

static void fix_for_userns_errno(struct nsbox_check *c, int err)
{
    switch (err) {
    case EPERM:
    case EACCES:
        FIX(c, "this process may not create user namespaces (a container's seccomp profile, a "
               "chroot or a security module blocks it): run nsbox on the host, or start its "
               "container with a seccomp profile that allows unshare/clone with CLONE_NEWUSER");
        break;
    case ENOSPC:
    case EUSERS:
        FIX(c,
            "the user namespace limit is reached (count or nesting depth 32): %ssysctl -w "
            "user.max_user_namespaces=15000, or run nsbox from a less nested namespace",
            nsbox_diagnose_sudo());
        break;
    case EINVAL:
        FIX(c, "use a kernel built with CONFIG_USER_NS=y");
        break;
    case ENOMEM:
        FIX(c, "free memory (the kernel could not allocate the namespace) and retry");
        break;
    default:
        FIX(c, "unshare(CLONE_NEWUSER) failed unexpectedly; see unshare(2) for %s", nsbox_text_errname(err));
        break;
    }
}

void nsbox_diagnose_userns(struct nsbox_check *c, const struct nsbox_ns_probe *p)
{
    bool root = nsbox_diagnose_is_root();
    c->ok = true;
    long v;
    bool sysctl_blocks = false;
    if (nsbox_text_read_long("/proc/sys/user/max_user_namespaces", &v) == 0) {
        DETAIL(c, "max_user_namespaces=%ld", v);
        if (v <= 0) {
            c->ok = false;
            sysctl_blocks = true;
            FIX(c, "%ssysctl -w user.max_user_namespaces=15000 (persist it in /etc/sysctl.d/)",
                nsbox_diagnose_sudo());
        }
    } else {
        DETAIL(c, "/proc/sys/user/max_user_namespaces unreadable (%s)", nsbox_text_errname(errno));
    }
    /* Debian's and Ubuntu's own switch for unprivileged user namespaces; root is not subject. */
    if (nsbox_text_read_long("/proc/sys/kernel/unprivileged_userns_clone", &v) == 0) {
        DETAIL(c, " unprivileged_userns_clone=%ld", v);
        if (!root && v != 1) {
            c->ok = false;
            sysctl_blocks = true;
            FIX(c, "sudo sysctl -w kernel.unprivileged_userns_clone=1");
        }
    }
    /* Ubuntu 23.10+: unshare(CLONE_NEWUSER) still succeeds, but AppArmor moves an unconfined
     * caller into a profile that has no capabilities inside the namespace, so every later step
     * (mounts, pivot_root) fails with EPERM. The probe alone would report it usable. */
    if (nsbox_text_read_long("/proc/sys/kernel/apparmor_restrict_unprivileged_userns", &v) == 0) {
        DETAIL(c, " apparmor_restrict_unprivileged_userns=%ld", v);
        if (!root && v != 0) {
            c->ok = false;
            sysctl_blocks = true;
            FIX(c, "sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0, or load an "
                   "AppArmor profile for nsbox that grants `userns,` (see docs/info.md)");
        }
    }
    if (p->fork_err == ECHILD && p->child_signal) {
        c->ok = false;
        DETAIL(c, "; the probe was killed by signal %d (%s) while unsharing", p->child_signal,
               strsignal(p->child_signal));
        if (!sysctl_blocks) fix_for_userns_errno(c, EPERM);
    } else if (p->fork_err) {
        DETAIL(c, "; probe could not run (%s)", nsbox_text_errname(p->fork_err));
    } else if (p->userns_err) {
        c->ok = false;
        DETAIL(c, "; unshare(CLONE_NEWUSER) failed: %s (%s)", nsbox_text_errname(p->userns_err),
               strerror(p->userns_err));
        if (!sysctl_blocks) fix_for_userns_errno(c, p->userns_err);
    } else {
        DETAIL(c, "; unshare(CLONE_NEWUSER) works");
    }
    if (nsbox_diagnose_root_without_sys_admin()) {
        char why[256];
        say_root_caps(why, sizeof why);
        c->ok = false;
        DETAIL(c, "; but %s", why);
        FIX(c, "%s", NSBOX_DIAGNOSE_ROOT_CAPS_FIX);
    }
}

void nsbox_diagnose_namespaces(struct nsbox_check *c, const struct nsbox_ns_probe *p)
{
    if (p->fork_err) {
        c->ok = false;
        DETAIL(c, "probe could not run: %s (%s)", nsbox_text_errname(p->fork_err), strerror(p->fork_err));
        FIX(c, "retry; a process that cannot fork cannot start sandboxes either");
        return;
    }
    if (!p->others_probed) {
        c->ok = false;
        DETAIL(c, "not probed: a user namespace could not be created (see user_namespaces)");
        FIX(c, "fix user_namespaces first");
        return;
    }
    c->ok = true;
    bool denied = false;
    for (size_t i = 0; i < NS_KINDS; i++) {
        int err = p->ns_err[i];
        if (!err) continue;
        if (c->ok) DETAIL(c, "inside a user namespace, failed:");
        c->ok = false;
        DETAIL(c, " %s (%s)", ns_kinds[i].name, nsbox_text_errname(err));
        char path[128];
        long v;
        snprintf(path, sizeof path, "/proc/sys/user/%s", ns_kinds[i].sysctl);
        if (err == ENOSPC) {
            if (nsbox_text_read_long(path, &v) == 0) DETAIL(c, " %s=%ld", ns_kinds[i].sysctl, v);
            FIX(c, "%ssysctl -w user.%s=15000", nsbox_diagnose_sudo(), ns_kinds[i].sysctl);
        } else if (err == EINVAL) {
            FIX(c, "use a kernel built with %s=y", ns_kinds[i].config);
        } else if (err == EPERM || err == EACCES) {
            /* One cause (AppArmor, a seccomp profile) usually denies them all: say it once. */
            if (!denied)
                FIX(c, "a security module or seccomp filter denies namespaces inside a user "
                       "namespace: check kernel.apparmor_restrict_unprivileged_userns and the "
                       "container's seccomp profile, or run nsbox on the host");
            denied = true;
        } else {
            FIX(c, "unshare(%s) failed with %s; see unshare(2)", ns_kinds[i].name, nsbox_text_errname(err));
        }
    }
    if (c->ok && p->combined_err) {
        c->ok = false;
        DETAIL(c,
               "inside a user namespace, each namespace alone works but all six at once "
               "fail: %s (%s)",
               nsbox_text_errname(p->combined_err), strerror(p->combined_err));
        FIX(c, "check the per-user namespace limits in /proc/sys/user/ and the security "
               "modules' logs (dmesg) for a denial");
    }
    if (c->ok) DETAIL(c, "mnt pid uts ipc net cgroup: all created inside a user namespace");
}

int nsbox_diagnose_namespace_failure(int err, struct nsbox_err *e)
{
    struct nsbox_ns_probe p;
    struct nsbox_check c;
    nsbox_diagnose_probe(&p);
    memset(&c, 0, sizeof c);
    nsbox_diagnose_userns(&c, &p);
    if (!c.ok)
        return nsbox_err_set(e, NSBOX_E_UNSUPPORTED, err,
                             "user namespaces are not available: %s; fix: %s", c.detail, c.fix);
    memset(&c, 0, sizeof c);
    nsbox_diagnose_namespaces(&c, &p);
    if (!c.ok)
        return nsbox_err_set(e, NSBOX_E_UNSUPPORTED, err,
                             "namespaces are not available: %s; fix: %s", c.detail, c.fix);
    errno = err;
    return nsbox_err_sys(e, "cannot create the sandbox's namespaces");
}
