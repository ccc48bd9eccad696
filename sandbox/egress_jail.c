/* The egress helper's jail (sandbox/egress_jail.h). */
#define _GNU_SOURCE
#include "egress_jail.h"
#include "seccomp_profile.h"
#include "util.h"

#include <errno.h>
#include <linux/capability.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

int nsbox_egress_jail_prepare(struct nsbox_egress_jail *j, bool set_ids, uint32_t uid, uint32_t gid,
                              struct nsbox_err *e)
{
    memset(j, 0, sizeof *j);
    j->set_ids = set_ids;
    j->uid = uid;
    j->gid = gid;
    struct nsbox_seccomp_profile p;
    const char *json = nsbox_seccomp_egress_json();
    if (nsbox_seccomp_profile_parse(json, strlen(json), &p, e) < 0)
        return nsbox_err_wrap(e, "egress helper's seccomp filter");
    int r = nsbox_seccomp_compile(&p, &j->prog, e);
    nsbox_seccomp_profile_free(&p);
    return r < 0 ? nsbox_err_wrap(e, "egress helper's seccomp filter") : 0;
}

void nsbox_egress_jail_free(struct nsbox_egress_jail *j)
{
    nsbox_seccomp_prog_free(&j->prog);
}

/* Every capability set emptied: as root the change of uid already cleared them, as another
 * user (with CAP_NET_ADMIN only) this is what drops them. */
static int drop_caps(void)
{
    struct __user_cap_header_struct hd = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct d[2] = {{0}};
    if (syscall(SYS_capset, &hd, d) < 0) return -1;
    return prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL ? -1 : 0;
}

int nsbox_egress_jail_enter(const struct nsbox_egress_jail *j, pid_t parent)
{
    if (j->set_ids && (syscall(SYS_setgroups, 0, NULL) < 0 || nsbox_set_ids(j->uid, j->gid) < 0))
        return -1;
    if (drop_caps() < 0) return -1;
    /* After the change of ids: the kernel resets both settings when the effective ids change. */
    if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0 || prctl(PR_SET_PDEATHSIG, SIGKILL) < 0) return -1;
    if (getppid() != parent) { /* the parent died before the death signal was armed */
        errno = ESRCH;
        return -1;
    }
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) return -1;
    struct nsbox_err e;
    return nsbox_seccomp_load(&j->prog, &e);
}
