/* A bundle's linux.cgroupsPath, as runc reads it (docs/oci.md, "cgroupsPath"): the path form
 * ("/docker/ID" from the hierarchy's root; "a/b" below the runtime's own cgroup) and, with
 * --systemd-cgroup, the "slice:prefix:name" form, expanded as systemd names the unit's cgroup
 * ("system.slice:docker:ID" -> "/system.slice/docker-ID.scope"). Hostile paths (a "..", a
 * control character, a path at the root itself, too long or too deep) are refused with the
 * reason. Also the few conversions the cgroup writes need (v1 device rules, v2 cpu.weight).
 * Pure: text in, text out; fuzzed (tests/fuzz/fuzz_ocicgroup.c). */
#ifndef NSBOX_OCICGROUP_H
#define NSBOX_OCICGROUP_H

#include "nsbox.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NSBOX_OCICGROUP_PATH_MAX 512 /* the resolved path, '/' included */
#define NSBOX_OCICGROUP_DEPTH_MAX 16 /* its components */

struct nsbox_ocicgroup_path {
    /* Normalized: one '/' before each component, none at the end; "" when the config has no
     * cgroupsPath (nsbox places the cgroup itself). */
    char path[NSBOX_OCICGROUP_PATH_MAX];
    bool relative; /* below the runtime's own cgroup in each hierarchy, else from its root */
};

/* raw: linux.cgroupsPath as written ("" or NULL when absent); systemd: --systemd-cgroup was
 * given; id: the container's (for the message only). NSBOX_E_INVALID naming what is wrong and
 * the fix. */
int nsbox_ocicgroup_parse(const char *raw, bool systemd, struct nsbox_ocicgroup_path *out,
                          struct nsbox_err *e);

/* One linux.resources.devices entry as the v1 devices controller takes it: "c 10:229 rwm",
 * "a *:* rwm" (type 'a', or a missing major/minor, is "*"). major/minor -1: any. 0, or -1 when
 * it does not fit. */
int nsbox_ocicgroup_device_rule(char type, int64_t major, int64_t minor, const char *access,
                                char *out, size_t n);

/* linux.resources.memory beyond the limit, as the config gives it. */
#define NSBOX_OCICGROUP_UNSET INT64_MIN /* a key the config leaves out */
struct nsbox_ocicgroup_memory {
    int64_t limit;       /* memory.limit: bytes, -1 none (the cgroup is made with it) */
    int64_t reservation; /* bytes; -1 none */
    int64_t swap;        /* memory plus swap, bytes; -1 unlimited; 0 none */
    int64_t kernel, kernel_tcp;
    int64_t swappiness; /* 0-100; -1 none */
    bool disable_oom_killer;
};

/* Nothing asked: limit -1, the rest NSBOX_OCICGROUP_UNSET, swappiness -1. */
void nsbox_ocicgroup_memory_init(struct nsbox_ocicgroup_memory *m);

/* One file of the memory controller and what is written to it. */
struct nsbox_ocicgroup_write {
    char file[40];
    char value[24];
};
#define NSBOX_OCICGROUP_MEM_WRITES 5

/* The files m asks for on cgroup `version` (1 or 2), swap: the kernel accounts swap (v1 memsw,
 * v2 memory.swap.max), as runc and crun write them (docs/decisions.md, "linux.resources.memory
 * beyond the limit"): v1 memory.soft_limit_in_bytes, memory.memsw.limit_in_bytes,
 * memory.swappiness, memory.oom_control, memory.kmem.tcp.limit_in_bytes; v2 memory.low and
 * memory.swap.max (swap less the limit). Into w (*n of them, at most
 * NSBOX_OCICGROUP_MEM_WRITES), in the order to write them; into note (NUL-terminated, "" when
 * nothing) the keys left unapplied and why (kernel, always; kernelTCP on v2; swap where the
 * kernel does not account it). -1 with the reason for what is refused: unlimited swap (the
 * floor), swap without memory.limit or below it, and on v2 swappiness and disableOOMKiller,
 * which it does not have. */
int nsbox_ocicgroup_memory_plan(const struct nsbox_ocicgroup_memory *m, int version, bool swap,
                                struct nsbox_ocicgroup_write *w, size_t *n, char *note,
                                size_t note_n, struct nsbox_err *e);

/* cpu.shares (v1, 2-262144) as cgroup v2's cpu.weight (1-10000), the conversion runc and crun
 * use, so that one config means the same on both. 0 stays 0 (no value). */
uint64_t nsbox_ocicgroup_shares_to_weight(uint64_t shares);

#endif
