/* Why a sandbox's namespaces cannot be made here, with the fix: after a failed clone (the
 * launcher, sandbox.c) and in `nsbox info` (cli/info.c), which shows the same two checks. */
#ifndef NSBOX_DIAGNOSE_H
#define NSBOX_DIAGNOSE_H

#include "nsbox.h"
#include "text.h"

#include <stdbool.h>
#include <sys/types.h>

/* One finding of `nsbox info` (cli/info.h lists them): what was found and how to fix it. */
struct nsbox_check {
    const char *name; /* short stable key, e.g. "user_namespaces" */
    bool ok;
    bool required;    /* false: optional feature (nftables, debian image, ...) */
    char detail[512]; /* what was found */
    char fix[512];    /* exact fix when !ok, "" otherwise */
};

/* Building a check's text. A check can have several causes; their fixes are joined so that one
 * pass fixes all. */
#define NSBOX_CHECK_DETAIL(c, ...) nsbox_text_appendf((c)->detail, sizeof(c)->detail, __VA_ARGS__)
#define NSBOX_CHECK_FIX(c, ...)                                                                    \
    do {                                                                                           \
        if ((c)->fix[0]) nsbox_text_appendf((c)->fix, sizeof(c)->fix, "; ");                      \
        nsbox_text_appendf((c)->fix, sizeof(c)->fix, __VA_ARGS__);                                 \
    } while (0)
bool nsbox_diagnose_is_root(void);
/* "sudo " for a user who is not root, so that every fix can be pasted as printed. */
const char *nsbox_diagnose_sudo(void);
/* Root whose effective set lacks CAP_SYS_ADMIN: a container's root started without
 * --privileged, or root under a bounding set without it (a systemd unit's
 * CapabilityBoundingSet=). Its sandboxes cannot be made (see nsbox_diagnose_root_caps), and
 * "run as root" is no fix for what root alone may do. */
bool nsbox_diagnose_root_without_sys_admin(void);
/* The fix for such root: where nsbox runs, not nsbox's. */
#define NSBOX_DIAGNOSE_ROOT_CAPS_FIX                                                               \
    "run nsbox on the host with CAP_SYS_ADMIN (from a systemd unit, one whose "                  \
    "CapabilityBoundingSet= keeps it), or in a container started with --privileged "             \
    "--cgroupns=host, not without --privileged"
/* Before anything of a sandbox is made or pulled: -1 with e (NSBOX_E_UNSUPPORTED) for root
 * without CAP_SYS_ADMIN, whose id maps the kernel would refuse later with only "open
 * /proc/N/setgroups: Permission denied"; else 0. */
int nsbox_diagnose_root_caps(struct nsbox_err *e);
/* waitpid(pid) through EINTR: 0, or -1 with errno. */
int nsbox_diagnose_wait(pid_t pid, int *status);

/* The namespaces a sandbox gets besides its user namespace: mnt pid uts ipc net cgroup. */
#define NSBOX_NS_KINDS 6

/* What a forked child found when it made a user namespace, then the others inside it. */
struct nsbox_ns_probe {
    int fork_err;         /* the probe could not run (fork, pipe): errno */
    int userns_err;       /* errno of unshare(CLONE_NEWUSER), 0 when it worked */
    bool others_probed;   /* only after a user namespace was made, as the launcher does */
    int ns_err[NSBOX_NS_KINDS]; /* errno of each unshare inside it */
    int combined_err;     /* all at once failed though each alone worked */
    int child_signal;     /* with fork_err == ECHILD: the signal that killed the probe */
};

/* Run the probe (in a forked child: safe with threads, nothing left behind). */
void nsbox_diagnose_probe(struct nsbox_ns_probe *out);
/* Fill c (zeroed by the caller) from the probe: may this user make a user namespace, and if
 * not, what blocks it (sysctls, AppArmor, a seccomp filter) and the fix. */
void nsbox_diagnose_userns(struct nsbox_check *c, const struct nsbox_ns_probe *p);
/* The same for the six other namespaces, made inside a user namespace as the launcher does. */
void nsbox_diagnose_namespaces(struct nsbox_check *c, const struct nsbox_ns_probe *p);

/* After clone()/unshare() failed with errno err, explain why with the fix, filling e
 * (NSBOX_E_UNSUPPORTED) when a known prerequisite is the cause; otherwise a plain system error.
 * Always returns -1. */
int nsbox_diagnose_namespace_failure(int err, struct nsbox_err *e);

#endif
