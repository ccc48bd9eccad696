/* The two other documents of runc's command line that nsbox-oci reads: exec's process.json (a
 * config.json "process" object) and update's resources (a "linux.resources" object). Both are
 * read by config.json's own parser (ocispec.h), so that a key means and is bounded the same in
 * all three; errors name the document and the key. And the socket activation environment
 * nsbox-oci is started with (LISTEN_FDS, LISTEN_PID). Pure, fuzzed
 * (tests/fuzz/fuzz_ociproc.c). */
#ifndef NSBOX_OCIPROC_H
#define NSBOX_OCIPROC_H

#include "nsbox.h"
#include "ocispec.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* process.json into c's process fields (args, env, cwd, user, terminal, capabilities); the
 * rest of c is as nsbox_ocispec_init leaves it. On failure c is freed and e names the key:
 * "process.json: key 'args': ...". The caller frees c with nsbox_ocispec_free. */
int nsbox_ociproc_parse_process(const char *text, size_t len, struct nsbox_ocispec *c,
                                struct nsbox_err *e);

/* What an update asks for: a has_ flag for each limit the document names, as runc reads it: a
 * limit of 0 (or null) is not named and stays; -1 removes it, which the value 0 means here. */
struct nsbox_ociproc_resources {
    bool has_memory, has_swap, has_cpu, has_pids;
    bool has_quota; /* with has_cpu: without it the period alone changes, the quota stays */
    uint64_t memory_bytes;
    uint64_t swap_bytes; /* memory plus swap; 0 or absent leaves it (as runc), -1 is refused */
    uint64_t cpu_quota_us, cpu_period_us; /* period 0: the current one */
    uint64_t pids;
    bool other; /* keys nsbox cannot change (blockIO, hugepageLimits, cpus, mems, ...) */
};

int nsbox_ociproc_parse_resources(const char *text, size_t len, struct nsbox_ociproc_resources *r,
                                  struct nsbox_err *e);

/* An exec'd process's own capability sets (want, by enum nsbox_ocispec_capset) against the
 * container's (have, its config's, which its init holds): init forks the process, so it gets
 * none above them. Bounding within the container's bounding set; permitted, effective and
 * ambient within its permitted set; effective within the process's permitted set;
 * inheritable within the container's inheritable set, or its permitted set where the process's
 * bounding set has it (the kernel's rules without CAP_SETPCAP). 0, or -1 with e naming the
 * set, the capability and the fix. Ambient capabilities
 * that are not also permitted and inheritable are left out when the process starts, as for the
 * container's process. */
int nsbox_ociproc_check_caps(const uint64_t *want, const uint64_t *have, struct nsbox_err *e);

/* runc's own socket activation: how many descriptors from 3 up nsbox-oci was given by the
 * caller's LISTEN_FDS and LISTEN_PID (getenv's values, NULL when unset). A LISTEN_PID that is
 * not self, or none, means they were meant for another process: 0 (systemd's rule). A
 * LISTEN_FDS that is not a number from 0 to max fails, saying so. */
int nsbox_ociproc_listen_fds(const char *listen_pid, const char *listen_fds, long self,
                             unsigned max, unsigned *n, struct nsbox_err *e);

/* c's process environment with LISTEN_FDS=n and LISTEN_PID=1 (in place of those it had), as
 * runc gives the process the descriptors of its socket activation; LISTEN_PID=1 becomes the
 * process's own pid when it runs (sandbox/launch.h, listen_pid_self). */
int nsbox_ociproc_listen_env(struct nsbox_ocispec *c, unsigned n, struct nsbox_err *e);

#endif
