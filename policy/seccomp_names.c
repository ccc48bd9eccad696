/* Syscall names to numbers for seccomp rules, past what the build's libseccomp knows. */
#include "seccomp_profile.h"

#include <seccomp.h>
#include <string.h>

/* Calls the kernel gained after the libseccomp a distribution ships: Debian 12's 2.5.4 does not
 * know setxattrat, and a rule naming it was skipped as "optional" on a kernel that has the call
 * (an xattr written around a filter that refused setxattr). From 424 on, every architecture
 * nsbox builds for (x86_64, aarch64: the generic table) numbers a new call alike. A number the
 * running kernel does not have matches nothing: the rule costs nothing there. */
static const struct nsbox_seccomp_late_call late_calls[] = {
    {"pidfd_send_signal", 424},
    {"io_uring_setup", 425},
    {"io_uring_enter", 426},
    {"io_uring_register", 427},
    {"open_tree", 428},
    {"move_mount", 429},
    {"fsopen", 430},
    {"fsconfig", 431},
    {"fsmount", 432},
    {"fspick", 433},
    {"pidfd_open", 434},
    {"clone3", 435},
    {"close_range", 436},
    {"openat2", 437},
    {"pidfd_getfd", 438},
    {"faccessat2", 439},
    {"process_madvise", 440},
    {"epoll_pwait2", 441},
    {"mount_setattr", 442},
    {"quotactl_fd", 443},
    {"landlock_create_ruleset", 444},
    {"landlock_add_rule", 445},
    {"landlock_restrict_self", 446},
    {"memfd_secret", 447},
    {"process_mrelease", 448},
    {"futex_waitv", 449},
    {"set_mempolicy_home_node", 450},
    {"cachestat", 451},
    {"fchmodat2", 452},
    {"map_shadow_stack", 453},
    {"futex_wake", 454},
    {"futex_wait", 455},
    {"futex_requeue", 456},
    {"statmount", 457},
    {"listmount", 458},
    {"lsm_get_self_attr", 459},
    {"lsm_set_self_attr", 460},
    {"lsm_list_modules", 461},
    {"mseal", 462},
    {"setxattrat", 463},
    {"getxattrat", 464},
    {"listxattrat", 465},
    {"removexattrat", 466},
    {"open_tree_attr", 467},
    {"file_getattr", 468},
    {"file_setattr", 469},
};

int nsbox_seccomp_names_resolve(const char *name)
{
    int nr = seccomp_syscall_resolve_name(name);
    if (nr != __NR_SCMP_ERROR)
        return nr;
    uint32_t arch = seccomp_arch_native();
    if (arch != SCMP_ARCH_X86_64 && arch != SCMP_ARCH_AARCH64)
        return __NR_SCMP_ERROR;
    for (size_t i = 0; i < sizeof late_calls / sizeof late_calls[0]; i++)
        if (!strcmp(late_calls[i].name, name))
            return late_calls[i].nr;
    return __NR_SCMP_ERROR;
}

const struct nsbox_seccomp_late_call *nsbox_seccomp_names_late(size_t *n)
{
    *n = sizeof late_calls / sizeof late_calls[0];
    return late_calls;
}

uint64_t nsbox_seccomp_names_digest_of(const struct nsbox_seccomp_late_call *t, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) {
        for (const char *c = t[i].name; *c; c++)
            h = (h ^ (unsigned char)*c) * 0x100000001b3ull;
        h = (h ^ (uint64_t)t[i].nr) * 0x100000001b3ull;
    }
    return h;
}

uint64_t nsbox_seccomp_names_digest(void)
{
    return nsbox_seccomp_names_digest_of(late_calls, sizeof late_calls / sizeof late_calls[0]);
}
