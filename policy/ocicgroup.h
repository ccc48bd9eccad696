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

/* cpu.shares (v1, 2-262144) as cgroup v2's cpu.weight (1-10000), the conversion runc and crun
 * use, so that one config means the same on both. 0 stays 0 (no value). */
uint64_t nsbox_ocicgroup_shares_to_weight(uint64_t shares);

#endif
