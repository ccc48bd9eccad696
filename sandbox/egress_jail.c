/* The egress helper's jail (sandbox/egress_jail.h): the helper's side. No libseccomp here: the
 * parent compiled the filter; loading it is one system call. */
#define _GNU_SOURCE
#include "egress_jail.h"

#include <errno.h>
#include <linux/capability.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

int nsbox_egress_jail_seal(void)
{
    /* no core dump, no ptrace or /proc/PID/{mem,environ} by the same uid: it holds secrets */
    return prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
}

/* Every capability set emptied: an exec as a user other than root keeps the ambient set. */
static int drop_caps(void)
{
    struct __user_cap_header_struct hd = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct d[2] = {{0}};
    if (syscall(SYS_capset, &hd, d) < 0)
        return -1;
    return prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL ? -1 : 0;
}

int nsbox_egress_jail_enter(const struct sock_fprog *prog, pid_t parent)
{
    if (drop_caps() < 0)
        return -1;
    /* armed before the exec already (an exec keeps it unless the file is set-id or has
     * capabilities); again, so that the helper does not depend on how it was installed */
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
        return -1;
    if (getppid() != parent) { /* the parent died before the death signal was armed */
        errno = ESRCH;
        return -1;
    }
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
        return -1;
    if (!prog || !prog->filter || !prog->len) {
        errno = EINVAL;
        return -1;
    }
    /* no SECCOMP_FILTER_FLAG_TSYNC: single-threaded */
    return (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, prog);
}
