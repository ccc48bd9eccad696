/* Seccomp profiles: JSON profile -> libseccomp filter -> classic BPF program.
 * Parsing (seccomp.c) and compiling (seccomp_compile.c) are pure (unit tested, fuzzed); the
 * default program's cache on disk and loading a program into the kernel, in the child as the
 * last step before exec, are os/seccomp_prog.c's.
 * The profile format and the default profile's choices are documented in docs/seccomp.md. */
#ifndef NSBOX_SECCOMP_H
#define NSBOX_SECCOMP_H

#include "nsbox.h"

#include <linux/filter.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Total rules after expanding every "names" list (one rule per syscall name). */
#define NSBOX_SECCOMP_MAX_RULES 1024
#define NSBOX_SECCOMP_MAX_ARGS 6
#define NSBOX_SECCOMP_JSON_MAX (1u << 20)
#define NSBOX_SECCOMP_NAME_MAX 64

enum nsbox_scmp_action {
    NSBOX_SCMP_ALLOW,
    NSBOX_SCMP_ERRNO, /* with errno */
    NSBOX_SCMP_KILL_PROCESS,
    NSBOX_SCMP_TRAP,
    NSBOX_SCMP_LOG,
    NSBOX_SCMP_KILL_THREAD, /* "SCMP_ACT_KILL" / "SCMP_ACT_KILL_THREAD", for Docker profiles */
};

enum nsbox_scmp_op {
    NSBOX_OP_EQ,
    NSBOX_OP_NE,
    NSBOX_OP_LT,
    NSBOX_OP_LE,
    NSBOX_OP_GT,
    NSBOX_OP_GE,
    NSBOX_OP_MASKED_EQ
};

struct nsbox_scmp_arg {
    unsigned index; /* 0..5 */
    enum nsbox_scmp_op op;
    uint64_t value, value2; /* MASKED_EQ: value is the mask, value2 the bits expected under it */
};

struct nsbox_scmp_rule {
    char name[NSBOX_SECCOMP_NAME_MAX]; /* syscall name as libseccomp knows it */
    enum nsbox_scmp_action action;
    int errno_ret;
    bool optional;      /* name unknown to libseccomp here: skip the rule instead of failing */
    unsigned src_index; /* position in the JSON "syscalls" array, for error messages */
    size_t n_args;      /* comparisons are ANDed; at most one per argument index */
    struct nsbox_scmp_arg args[NSBOX_SECCOMP_MAX_ARGS];
};

struct nsbox_seccomp_profile {
    enum nsbox_scmp_action default_action;
    int default_errno;
    enum nsbox_scmp_action badarch_action; /* for i386/x32 and any foreign ABI */
    size_t n_rules;
    struct nsbox_scmp_rule *rules; /* heap */
    size_t n_skipped; /* "optional" names this libseccomp does not know (dropped by the parser) */
    /* An OCI bundle's profile (nsbox_seccomp_profile_parse_oci) only: its "flags", as the
     * SECCOMP_FILTER_FLAG_* bits the filter is loaded with (LOG, SPEC_ALLOW; TSYNC is
     * accepted and dropped: the loader has one thread). 0 for nsbox's own profiles. */
    unsigned load_flags;
};

/* The built-in default profile, as JSON text (policy/seccomp-default.json, embedded). */
const char *nsbox_seccomp_default_json(void);
/* The egress helper's own filter, an allow-list (policy/seccomp-egress.json, embedded): the one
 * place that says which system calls the helper makes, TLS for bound hosts included. */
const char *nsbox_seccomp_egress_json(void);
/* What an nsbox-oci container with a writable root (the bundle's, idmapped) refuses besides:
 * extended attribute writes (policy/seccomp-root.json, embedded), folded into its profile with
 * nsbox_seccomp_fold_root(). */
const char *nsbox_seccomp_root_json(void);

/* Parse and validate a profile. On error *p is left empty (nothing to free) and e->msg names the
 * offending field, e.g. "syscalls[3].args[0].op: unknown operator 'SCMP_CMP_FOO'". */
int nsbox_seccomp_profile_parse(const char *json, size_t len, struct nsbox_seccomp_profile *p,
                                struct nsbox_err *e);
/* The same for an OCI bundle's linux.seccomp (runtime-spec config-linux.md), which engines
 * write for other runtimes: "architectures" is accepted (nsbox's own filter, loaded first,
 * kills every foreign ABI), the known "flags" too; a "listenerPath" is refused (no seccomp
 * agent), as SCMP_ACT_NOTIFY and SCMP_ACT_TRACE are. As runc does, names neither libseccomp
 * nor nsbox's table of late calls knows are skipped (counted in n_skipped), and a rule whose
 * action is the default's is dropped: neither changes what the filter answers. Messages name
 * the key without a prefix (the caller adds where the profile was). */
int nsbox_seccomp_profile_parse_oci(const char *json, size_t len, struct nsbox_seccomp_profile *p,
                                    struct nsbox_err *e);
void nsbox_seccomp_profile_free(struct nsbox_seccomp_profile *p);
/* A bundle's rule r for a call p already has rules of another action for (policy/seccomp_oci.c):
 * engines' profiles have them (Podman's allows setns in its list and refuses it in another
 * rule). As libseccomp takes them where that is defined (an unconditional rule decides the
 * call, conditional rules of several actions are its tree's), but of two unconditional ones the
 * stricter, not the first: p is changed in place and *append says whether r is still to be
 * added. A conditional rule stricter than an unconditional one of its call cannot be given by
 * one filter: refused (path names r). */
int nsbox_seccomp_oci_merge(struct nsbox_seccomp_profile *p, const struct nsbox_scmp_rule *r,
                            const char *path, bool *append, struct nsbox_err *e);
/* What p answers a call of that name with these arguments: the action of its rules if one of
 * them matches (of a bundle's conditional rules of several actions, the strictest that
 * matches: what create checks may only err towards refusing), else the default; *err the
 * errno of an SCMP_ACT_ERRNO. As the compiled filter answers for the native architecture. */
enum nsbox_scmp_action nsbox_seccomp_profile_answer(const struct nsbox_seccomp_profile *p,
                                                    const char *name,
                                                    const uint64_t args[NSBOX_SECCOMP_MAX_ARGS],
                                                    int *err);
/* The action's name as profiles write it ("SCMP_ACT_ERRNO"). */
const char *nsbox_seccomp_action_name(enum nsbox_scmp_action a);
/* What a bundle's profile may name, by index, NULL past the last (nsbox-oci features): its
 * actions (aliases too), operators and flags; and the one architecture filters are built
 * for ("SCMP_ARCH_X86_64"). */
const char *nsbox_seccomp_oci_action(size_t i);
const char *nsbox_seccomp_oci_op(size_t i);
const char *nsbox_seccomp_oci_flag(size_t i);
const char *nsbox_seccomp_arch_name(void);
/* What libseccomp would misread in a profile (one may be built by hand, not parsed): an invalid
 * action, a syscall name without its NUL, an argument index out of range. */
int nsbox_seccomp_profile_check(const struct nsbox_seccomp_profile *p, struct nsbox_err *e);

/* Fold extra into base (policy/seccomp_fold.c): base becomes the one profile whose filter gives
 * every call the answer of the two filters stacked, extra loaded last. For each call the
 * stricter action wins, in the kernel's order (kill process, kill thread, trap, errno, log,
 * allow); of two equal ones extra's, so its errno. Defaults and badArchAction combine alike.
 * extra's rules must be unconditional; a call base decides by its arguments and extra also
 * names folds only when the two outcomes agree, else it is refused, naming base's rule. On
 * error base is unchanged. */
int nsbox_seccomp_fold(struct nsbox_seccomp_profile *base,
                       const struct nsbox_seccomp_profile *extra, struct nsbox_err *e);
/* Where a in the kernel's order of stacked filters' answers: kill process 0, kill thread,
 * trap, errno, log, allow 5; smaller is stricter. */
int nsbox_seccomp_fold_rank(enum nsbox_scmp_action a);
/* p with a writable root's refusals (nsbox_seccomp_root_json()) folded in. */
int nsbox_seccomp_fold_root(struct nsbox_seccomp_profile *p, struct nsbox_err *e);

/* Build the BPF program for the native architecture. prog->filter is malloc'd. */
int nsbox_seccomp_compile(const struct nsbox_seccomp_profile *p, struct sock_fprog *prog,
                          struct nsbox_err *e);
void nsbox_seccomp_compile_free(struct sock_fprog *prog);

/* Whether the kernel reads argument index of the call name as 32 bits (an int or unsigned int),
 * of the calls policy/seccomp_width.c knows. */
bool nsbox_seccomp_width_is_32(const char *name, unsigned index);
/* r refusing (any action but allow and log): its equalities on such arguments compare the low
 * 32 bits only (masked with 0xffffffff), as the kernel reads them, so that a value with the
 * upper bits set cannot pass. nsbox's own profiles are parsed so; a bundle's are as runc reads
 * them. */
void nsbox_seccomp_width_narrow(struct nsbox_scmp_rule *r);

/* A syscall's number on this architecture: libseccomp's, else nsbox's table of the calls
 * numbered alike on every architecture since Linux 5.1 (424 on), which an older libseccomp
 * does not know; __NR_SCMP_ERROR when neither knows the name. */
int nsbox_seccomp_names_resolve(const char *name);
/* One entry of that table. */
struct nsbox_seccomp_late_call {
    const char *name;
    int nr;
};
/* The table itself, *n entries. */
const struct nsbox_seccomp_late_call *nsbox_seccomp_names_late(size_t *n);
/* A digest of a table of late calls, for the keys of compiled programs
 * (nsbox_seccomp_prog_cache_key): the same profile text and libseccomp compile to another program
 * once the table gains a call. */
uint64_t nsbox_seccomp_names_digest_of(const struct nsbox_seccomp_late_call *t, size_t n);
/* nsbox_seccomp_names_digest_of the table of this build. */
uint64_t nsbox_seccomp_names_digest(void);

#endif
