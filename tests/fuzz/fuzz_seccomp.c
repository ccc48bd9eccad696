/* libFuzzer target: seccomp profile JSON -> parse -> (compile) -> fold -> (compile) -> free, and
 * the same text as an OCI bundle's linux.seccomp -> parse_oci -> (compile, answer) -> free.
 * The parser is the part that reads text nsbox did not write (a user's --seccomp profile), so
 * it must fail cleanly on anything: no crash, no leak, no unbounded work. Compiling what parses
 * also exercises libseccomp with every combination of rules the parser lets through, which
 * would catch a validated profile that libseccomp still rejects or mis-handles. Folding a
 * writable root's refusals into what parses either succeeds or names why, leaving the profile
 * as it was. */
#include "seccomp_profile.h"

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* A bundle's profile (nsbox-oci): parsed by the OCI form, compiled, and asked what it answers
 * a few calls with arguments taken from the input, as create asks it for init's calls. */
static void fuzz_oci(const uint8_t *data, size_t size)
{
    struct nsbox_seccomp_profile p;
    struct nsbox_err e;
    if (nsbox_seccomp_profile_parse_oci((const char *)data, size, &p, &e) < 0) {
        if (e.msg[0] == '\0' || p.rules != NULL || p.n_rules != 0)
            abort();
        return;
    }
    if (p.n_rules > NSBOX_SECCOMP_MAX_RULES || (p.load_flags & ~6u) != 0)
        abort();
    struct sock_fprog prog;
    if (nsbox_seccomp_compile(&p, &prog, &e) == 0)
        nsbox_seccomp_compile_free(&prog);
    else if (prog.filter != NULL || e.msg[0] == '\0')
        abort();
    uint64_t args[NSBOX_SECCOMP_MAX_ARGS] = {0};
    memcpy(args, data, size < sizeof args ? size : sizeof args);
    static const char *const names[] = {"wait4", "clone", "prctl", "ioctl", "mkdir"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        int err = -1;
        enum nsbox_scmp_action a = nsbox_seccomp_profile_answer(&p, names[i], args, &err);
        if (err < 0 || err > 4095 || (a != NSBOX_SCMP_ERRNO && err != 0))
            abort();
    }
    nsbox_seccomp_profile_free(&p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_oci(data, size);
    struct nsbox_seccomp_profile p;
    struct nsbox_err e;
    if (nsbox_seccomp_profile_parse((const char *)data, size, &p, &e) < 0) {
        /* A failure names something and leaves nothing allocated. */
        if (e.msg[0] == '\0' || p.rules != NULL || p.n_rules != 0) abort();
        return 0;
    }
    if (p.n_rules > NSBOX_SECCOMP_MAX_RULES) abort();
    struct sock_fprog prog;
    if (nsbox_seccomp_compile(&p, &prog, &e) == 0) {
        if (prog.len == 0 || prog.filter == NULL) abort();
        nsbox_seccomp_compile_free(&prog);
    } else if (prog.filter != NULL) {
        abort();
    }
    size_t n = p.n_rules;
    if (nsbox_seccomp_fold_root(&p, &e) == 0) {
        if (nsbox_seccomp_compile(&p, &prog, &e) == 0)
            nsbox_seccomp_compile_free(&prog);
        else if (e.msg[0] == '\0')
            abort();
    } else if (e.msg[0] == '\0' || p.n_rules != n) {
        abort();
    }
    nsbox_seccomp_profile_free(&p);
    return 0;
}
