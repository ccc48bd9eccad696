/* A process's own capability sets (caps.h). */
#define _GNU_SOURCE
#include "caps.h"

#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

int nsbox_caps_last(void)
{
    int last = 0;
    while (prctl(PR_CAPBSET_READ, last + 1, 0, 0, 0) >= 0)
        last++;
    return last;
}

uint64_t nsbox_caps_known(int last)
{
    return last >= 63 ? ~UINT64_C(0) : (UINT64_C(1) << (last + 1)) - 1;
}

int nsbox_caps_get(uint64_t *eff, uint64_t *prm, uint64_t *inh)
{
    struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct d[2] = {{0}};
    if (syscall(SYS_capget, &hdr, d) < 0)
        return -1;
    *eff = (uint64_t)d[1].effective << 32 | d[0].effective;
    *prm = (uint64_t)d[1].permitted << 32 | d[0].permitted;
    *inh = (uint64_t)d[1].inheritable << 32 | d[0].inheritable;
    return 0;
}

int nsbox_caps_effective_has(int cap)
{
    uint64_t eff, prm, inh;
    if (nsbox_caps_get(&eff, &prm, &inh) < 0)
        return -1;
    return (eff >> cap & 1) != 0;
}

int nsbox_caps_set(uint64_t eff, uint64_t prm, uint64_t inh)
{
    struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct d[2] = {
        {(uint32_t)eff, (uint32_t)prm, (uint32_t)inh},
        {(uint32_t)(eff >> 32), (uint32_t)(prm >> 32), (uint32_t)(inh >> 32)}};
    return (int)syscall(SYS_capset, &hdr, d);
}
