/* Seccomp profiles compiled to classic BPF with libseccomp (see seccomp_profile.h and
 * docs/seccomp.md): the profile's rules, checked by nsbox_seccomp_profile_check(), become one
 * filter for the native architecture. */
#define _GNU_SOURCE
#include "seccomp_profile.h"
#include "cleanup.h"

#include <seccomp.h>

#include <errno.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static void scmp_releasep(scmp_filter_ctx *ctx)
{
    if (*ctx)
        seccomp_release(*ctx);
}
#define cleanup_scmp __attribute__((cleanup(scmp_releasep)))

static uint32_t scmp_action(enum nsbox_scmp_action a, int err)
{
    switch (a) {
    case NSBOX_SCMP_ALLOW:
        return SCMP_ACT_ALLOW;
    case NSBOX_SCMP_ERRNO:
        return SCMP_ACT_ERRNO((uint32_t)err);
    case NSBOX_SCMP_KILL_PROCESS:
        return SCMP_ACT_KILL_PROCESS;
    case NSBOX_SCMP_KILL_THREAD:
        return SCMP_ACT_KILL_THREAD;
    case NSBOX_SCMP_TRAP:
        return SCMP_ACT_TRAP;
    case NSBOX_SCMP_LOG:
        return SCMP_ACT_LOG;
    }
    return SCMP_ACT_KILL_PROCESS;
}

static enum scmp_compare scmp_op(enum nsbox_scmp_op op)
{
    switch (op) {
    case NSBOX_OP_EQ:
        return SCMP_CMP_EQ;
    case NSBOX_OP_NE:
        return SCMP_CMP_NE;
    case NSBOX_OP_LT:
        return SCMP_CMP_LT;
    case NSBOX_OP_LE:
        return SCMP_CMP_LE;
    case NSBOX_OP_GT:
        return SCMP_CMP_GT;
    case NSBOX_OP_GE:
        return SCMP_CMP_GE;
    case NSBOX_OP_MASKED_EQ:
        return SCMP_CMP_MASKED_EQ;
    }
    return _SCMP_CMP_MIN; /* invalid: libseccomp rejects it */
}

static int export_bpf(scmp_filter_ctx ctx, struct sock_fprog *prog, struct nsbox_err *e)
{
    /* libseccomp 2.5 exports only to a file descriptor (seccomp_export_bpf_mem is 2.6). */
    cleanup_close int fd = memfd_create("nsbox-seccomp-bpf", MFD_CLOEXEC);
    if (fd < 0)
        return nsbox_err_sys(e, "seccomp: memfd_create");
    int rc = seccomp_export_bpf(ctx, fd);
    if (rc < 0) {
        errno = -rc;
        return nsbox_err_sys(e, "seccomp: libseccomp could not export the BPF program");
    }
    struct stat st;
    if (fstat(fd, &st) < 0)
        return nsbox_err_sys(e, "seccomp: fstat on the exported program");
    size_t size = (size_t)st.st_size;
    if (size == 0 || size % sizeof(struct sock_filter) != 0 ||
        size / sizeof(struct sock_filter) > BPF_MAXINSNS)
        return nsbox_err_set(e, NSBOX_E_INVALID, 0,
                             "seccomp: the compiled program has %zu bytes; the kernel takes up "
                             "to %d instructions of %zu bytes",
                             size, BPF_MAXINSNS, sizeof(struct sock_filter));
    cleanup_free struct sock_filter *insns = malloc(size);
    if (!insns)
        return nsbox_err_set(e, NSBOX_E_NOMEM, ENOMEM, "seccomp: out of memory");
    for (size_t off = 0; off < size;) {
        ssize_t n = pread(fd, (char *)insns + off, size - off, (off_t)off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return nsbox_err_sys(e, "seccomp: reading the exported program");
        if (n == 0)
            return nsbox_err_set(e, NSBOX_E_SYS, EIO, "seccomp: exported program truncated");
        off += (size_t)n;
    }
    prog->len = (unsigned short)(size / sizeof(struct sock_filter));
    prog->filter = nsbox_steal_ptr(&insns);
    return 0;
}

int nsbox_seccomp_compile(const struct nsbox_seccomp_profile *p, struct sock_fprog *prog,
                          struct nsbox_err *e)
{
    prog->len = 0;
    prog->filter = NULL;
    if (nsbox_seccomp_profile_check(p, e) < 0)
        return -1;

    /* seccomp_init() sets up the native architecture only. On x86_64 libseccomp then also
     * sends syscall numbers with the x32 bit (0x40000000) to the bad-arch action, and i386
     * (int 0x80) reports AUDIT_ARCH_I386, which fails the architecture check: neither ABI
     * can reach the default action with numbers the rules do not know. */
    cleanup_scmp scmp_filter_ctx ctx =
        seccomp_init(scmp_action(p->default_action, p->default_errno));
    if (!ctx)
        return nsbox_err_set(e, NSBOX_E_SYS, 0, "seccomp: libseccomp could not create a filter");
    int rc;
    if ((rc = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, scmp_action(p->badarch_action, 0))) <
            0 ||
        /* nsbox sets no_new_privs itself, in the containment sequence; we only export. */
        (rc = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 0)) < 0 ||
        /* Real errno values from libseccomp instead of a blanket ECANCELED. */
        (rc = seccomp_attr_set(ctx, SCMP_FLTATR_API_SYSRAWRC, 1)) < 0) {
        errno = -rc;
        return nsbox_err_sys(e, "seccomp: setting filter attributes");
    }
    /* A binary search over syscall numbers instead of a linear chain: every syscall whose path
     * reads arguments (ioctl, socket, clone) runs the program, so its length matters. */
    if ((rc = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2)) < 0) {
        errno = -rc;
        return nsbox_err_sys(e, "seccomp: selecting the binary-tree layout");
    }

    for (size_t i = 0; i < p->n_rules; i++) {
        const struct nsbox_scmp_rule *r = &p->rules[i];
        int nr = nsbox_seccomp_names_resolve(r->name);
        if (nr == __NR_SCMP_ERROR) {
            if (r->optional)
                continue;
            return nsbox_err_set(e, NSBOX_E_INVALID, 0,
                                 "seccomp profile: syscalls[%u]: unknown syscall '%s'",
                                 r->src_index, r->name);
        }
        struct scmp_arg_cmp cmp[NSBOX_SECCOMP_MAX_ARGS];
        for (size_t j = 0; j < r->n_args; j++) {
            cmp[j].arg = r->args[j].index;
            cmp[j].op = scmp_op(r->args[j].op);
            cmp[j].datum_a = r->args[j].value;
            cmp[j].datum_b = r->args[j].value2;
        }
        rc = seccomp_rule_add_array(ctx, scmp_action(r->action, r->errno_ret), nr,
                                    (unsigned)r->n_args, cmp);
        if (rc < 0) {
            errno = -rc;
            return nsbox_err_sys(e,
                                 "seccomp profile: syscalls[%u] ('%s'): libseccomp refused "
                                 "the rule",
                                 r->src_index, r->name);
        }
    }
    return export_bpf(ctx, prog, e);
}

void nsbox_seccomp_compile_free(struct sock_fprog *prog)
{
    if (!prog)
        return;
    free(prog->filter);
    prog->filter = NULL;
    prog->len = 0;
}
