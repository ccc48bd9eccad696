/* The system calls nsbox's init makes after it has loaded an nsbox-oci bundle's seccomp filter
 * (contain.c, init_harden), and those of the processes it starts up to their exec: the
 * workload and what `nsbox-oci exec` asks for (agent_init.c). A bundle's profile that refused one
 * would leave init failing, or waiting forever for what a refused call was to deliver, so
 * create checks the profile against this list first (launch.h). Engines' profiles (Docker's
 * default, runc's tests) allow them all, as they allow what runc's init calls after its own
 * load. The list is the calls strace showed those paths making, with the arguments a rule
 * may compare (clone's flags, prctl's option, ioctl's request). A call whose refusal only
 * costs a fallback is not on it: close_range (closing what /proc/self/fd lists, or one by one;
 * nsbox_close_fds_slow), openat2 (safe path
 * resolution walks instead, on the bundle's EPERM as on nsbox's ENOSYS), nor those only an
 * exec as another user, with capability sets or no_new_privs of its own makes (setgroups,
 * setresgid, setresuid, capget, prctl's PR_SET_KEEPCAPS: agent_user.c; PR_SET_NO_NEW_PRIVS:
 * agent_exec.c), whose refusal fails that exec with its errno, not init; every exec reads its ids
 * first (listed). */
#define _GNU_SOURCE
#include "launch.h"
#include "cleanup.h"

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>

struct init_call {
    const char *name;
    uint64_t args[NSBOX_SECCOMP_MAX_ARGS];
    const char *why;
};

#define INIT_FORK (CLONE_CHILD_SETTID | CLONE_CHILD_CLEARTID | SIGCHLD) /* glibc's fork() */

static const struct init_call calls[] = {
    /* init_harden: the capabilities it kept to load the filter go */
    {"capset", {0}, "dropping the capabilities it kept to load the filter"},
    {"prctl", {PR_CAPBSET_READ}, "cutting the bounding set"},
    {"prctl", {PR_CAPBSET_DROP}, "cutting the bounding set"},
    {"prctl", {PR_CAP_AMBIENT}, "clearing the ambient set"},
    /* start_barrier: told to start, and a terminal's master sent to the caller */
    {"sendmsg", {0}, "telling the runtime it is ready"},
    {"read", {0}, "waiting for start"},
    {"write", {0}, "telling start that the program runs"},
    {"close", {0}, "closing what the container must not inherit"},
    {"openat", {0}, "opening a terminal or a directory"},
    {"ioctl", {0, TIOCSPTLCK}, "unlocking a terminal"},
    {"ioctl", {0, TIOCGPTPEER}, "opening a terminal's peer"},
    {"ioctl", {0, TIOCSCTTY}, "giving the program its controlling terminal"},
    /* the workload and exec'd processes: forked, reset, exec'd */
    {"pipe2", {0}, "waiting for the program's exec"},
    {"clone", {INIT_FORK}, "starting the program and exec'd processes"},
    {"rt_sigprocmask", {0}, "unblocking signals for the program"},
    {"rt_sigaction", {0}, "resetting signal handlers for the program"},
    {"setsid", {0}, "giving the program its own session"},
    {"dup2", {0}, "giving the program its standard streams"},
    {"fchdir", {0}, "entering the working directory"},
    {"prctl", {PR_SET_CHILD_SUBREAPER, 1}, "keeping an exec'd process's tree together"},
    {"getresuid", {0}, "checking an exec'd process's user"},
    {"getresgid", {0}, "checking an exec'd process's group"},
    {"getgroups", {0}, "checking an exec'd process's groups"},
    {"umask", {0}, "setting an exec'd process's umask"},
    {"execve", {0}, "running the program"},
    {"exit_group", {0}, "reporting a program that could not start"},
    /* serving the container: exec requests, signals, children's ends */
    {"signalfd4", {0}, "taking the signals it relays"},
    {"poll", {0}, "waiting for requests and signals"},
    {"recvmsg", {0}, "taking exec requests"},
    {"kill", {0}, "relaying signals"},
    {"wait4", {0}, "reaping the container's processes"},
    {"pread64", {0}, "reading its OOM score"},
    {"pwrite64", {0}, "raising an exec'd process's OOM score"},
    {"mmap", {0}, "allocating memory"},
    {"munmap", {0}, "freeing memory"},
    {"brk", {0}, "allocating memory"},
};

/* SCMP_ACT_ERRNO with errno 0 answers a call with success without making it. For a call of
 * init's above, or one by which its children give up privilege and descriptors (an exec'd
 * process's ids, close_range, whose failure would send them to close what getdents64 lists in
 * /proc/self/fd, or one by one: an empty listing is not trusted, still refused) or resolve
 * paths (openat2, whose "descriptor" 0 would be taken for the directory), a rule of
 * that answer, whatever its arguments (prctl(PR_CAPBSET_DROP, CAP_SYS_ADMIN) alone, say),
 * would leave the container what init and its children drop or close (init's CAP_SYS_ADMIN
 * for loading the filter, what it keeps for exec's children: launch.h, cap_keep; what
 * nsbox-oci's caller left open), or have them read ids that were never written; so would such
 * a default for arguments no rule allows. */
static const char *const unlisted_calls[] = {"setresuid",   "setresgid",  "setgroups",
                                             "close_range", "getdents64", "openat2"};

static bool fakes_success(enum nsbox_scmp_action a, int err)
{
    return a == NSBOX_SCMP_ERRNO && err == 0;
}

static int fake_check(const struct nsbox_seccomp_profile *p, const char *name, struct nsbox_err *e)
{
    bool allowed = false, faked = false;
    for (size_t k = 0; k < p->n_rules; k++) {
        const struct nsbox_scmp_rule *r = &p->rules[k];
        if (strcmp(r->name, name) != 0)
            continue;
        faked = faked || fakes_success(r->action, r->errno_ret);
        allowed = allowed || (r->n_args == 0 &&
                              (r->action == NSBOX_SCMP_ALLOW || r->action == NSBOX_SCMP_LOG));
    }
    if (faked || (!allowed && fakes_success(p->default_action, p->default_errno)))
        return nsbox_err_set(e, NSBOX_E_INVALID, 0,
                             "the profile answers %s with SCMP_ACT_ERRNO and errno 0%s, success "
                             "without the call, and the container's init and the processes it "
                             "starts drop capabilities, change ids or close descriptors with "
                             "the calls they make: give %s another errnoRet, or allow it",
                             name, faked ? "" : " (its default action)", name);
    return 0;
}

int nsbox_contain_calls_check(const struct nsbox_seccomp_profile *p, struct nsbox_err *e)
{
    for (size_t i = 0; i < NSBOX_ARRAY_LEN(calls); i++)
        if (fake_check(p, calls[i].name, e) < 0)
            return -1;
    for (size_t i = 0; i < NSBOX_ARRAY_LEN(unlisted_calls); i++)
        if (fake_check(p, unlisted_calls[i], e) < 0)
            return -1;
    for (size_t i = 0; i < NSBOX_ARRAY_LEN(calls); i++) {
        int err = 0;
        enum nsbox_scmp_action a =
            nsbox_seccomp_profile_answer(p, calls[i].name, calls[i].args, &err);
        if (a == NSBOX_SCMP_ALLOW || a == NSBOX_SCMP_LOG)
            continue;
        char what[48];
        if (a == NSBOX_SCMP_ERRNO)
            snprintf(what, sizeof what, "SCMP_ACT_ERRNO (%s)",
                     strerrorname_np(err) ? strerrorname_np(err) : "?");
        else
            snprintf(what, sizeof what, "%s", nsbox_seccomp_action_name(a));
        return nsbox_err_set(e, NSBOX_E_INVALID, 0,
                             "the profile answers %s with %s, and the container's init needs "
                             "it after loading the filter (%s): nsbox-oci loads the bundle's "
                             "filter in init, as runc loads it in its own; allow %s",
                             calls[i].name, what, calls[i].why, calls[i].name);
    }
    return 0;
}
