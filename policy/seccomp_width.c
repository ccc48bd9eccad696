/* The arguments the kernel reads as 32 bits (an int or unsigned int in the call's definition),
 * and a refusing rule's comparisons of them made to look at those 32 bits only. */
#include "seccomp_profile.h"

#include <string.h>

/* A call's argument that the kernel truncates to 32 bits: a filter sees the whole 64-bit
 * register, so an equality on it misses the same value with any of the upper bits set. */
static const struct {
    const char *name;
    unsigned index;
} narrow_args[] = {
    {"setrlimit", 0},   {"getrlimit", 0},  {"prlimit64", 1},  {"prctl", 0},      {"socket", 0},
    {"socket", 1},      {"socket", 2},     {"socketpair", 0}, {"socketpair", 1}, {"socketpair", 2},
    {"personality", 0}, {"ioctl", 1},      {"fcntl", 1},      {"flock", 1},      {"setsockopt", 1},
    {"setsockopt", 2},  {"getsockopt", 1}, {"getsockopt", 2}, {"setns", 1},      {"kill", 1},
    {"tkill", 1},       {"tgkill", 2},     {"open", 1},       {"openat", 2},     {"keyctl", 0},
    {"bpf", 0},         {"madvise", 2},
};

bool nsbox_seccomp_width_is_32(const char *name, unsigned index)
{
    for (size_t i = 0; i < sizeof narrow_args / sizeof narrow_args[0]; i++)
        if (narrow_args[i].index == index && strcmp(narrow_args[i].name, name) == 0)
            return true;
    return false;
}

/* A value the 32 bits can hold: below 2^32, or an int's negative value sign-extended (-1 as
 * 0xffffffffffffffff). An equality with any other value never matches what the kernel reads. */
static bool fits_32(uint64_t v)
{
    return v <= UINT32_MAX || v >= 0xffffffff80000000ull;
}

void nsbox_seccomp_width_narrow(struct nsbox_scmp_rule *r)
{
    /* An allowing rule may stay wide: a value with the upper bits set falls to the stricter
     * default or rule, never the other way. */
    if (r->action == NSBOX_SCMP_ALLOW || r->action == NSBOX_SCMP_LOG)
        return;
    for (size_t j = 0; j < r->n_args; j++) {
        struct nsbox_scmp_arg *a = &r->args[j];
        if (a->op != NSBOX_OP_EQ || !fits_32(a->value) ||
            !nsbox_seccomp_width_is_32(r->name, a->index))
            continue;
        a->op = NSBOX_OP_MASKED_EQ;
        a->value2 = a->value & UINT32_MAX;
        a->value = UINT32_MAX;
    }
}
