/* Pure helpers for cgroup.c: parsing what the kernel prints and formatting what it expects.
 * No system calls here (minijail's split), so every rule is unit tested without root. */
#ifndef NSBOX_CGROUP_UTIL_H
#define NSBOX_CGROUP_UTIL_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* The CFS period nsbox uses in both versions: 100 ms is the kernel default, so a quota of
 * cpus * period lets the sandbox use `cpus` CPUs' worth of time in every period. */
#define NSBOX_CG_CPU_PERIOD_US 100000u

/* ---- /proc/self/cgroup ----------------------------------------------------------------------
 * One line per hierarchy: "hierarchy-id:controller-list:path". v2 is the line "0::/path"; v1
 * lines carry a comma separated list ("4:memory:/x", "3:cpu,cpuacct:/", "1:name=systemd:/"). */
#define NSBOX_CG_SELF_MAX 16

struct nsbox_cg_self_entry {
    unsigned hier;         /* hierarchy id (first field); unique per v1 mount */
    char controllers[64];  /* "memory", "cpu,cpuacct", "name=systemd" */
    char path[PATH_MAX];   /* the process's cgroup in that hierarchy, "/" at the root */
};

struct nsbox_cg_self {
    bool has_v2;
    char v2_path[PATH_MAX];
    size_t n;
    struct nsbox_cg_self_entry v1[NSBOX_CG_SELF_MAX];
};

/* 0, or -1 with errno EINVAL (malformed line, relative path) or ENAMETOOLONG / E2BIG (too many
 * hierarchies). A "(deleted)" suffix is kept as part of the path: the caller's stat fails. */
int nsbox_cg_parse_self(const char *text, struct nsbox_cg_self *out);
/* The v1 entry whose controller list contains controller ("cpu" finds "cpu,cpuacct"). */
const struct nsbox_cg_self_entry *nsbox_cg_self_find(const struct nsbox_cg_self *s,
                                                     const char *controller);

/* ---- lists and keyed files ----------------------------------------------------------------- */

/* word is a whole token of list (tokens split on spaces, tabs, newlines and commas), as in
 * cgroup.controllers ("cpu io memory pids") and v1 controller lists ("cpu,cpuacct"). */
bool nsbox_cg_list_has(const char *list, const char *word);
/* Which of need[0..n) list lacks, comma separated into out ("memory,pids"); returns how many. */
size_t nsbox_cg_missing(const char *list, const char *const *need, size_t n, char *out,
                        size_t outn);
/* Flat keyed file ("key value" lines: memory.events, memory.oom_control, cpu.stat,
 * cgroup.events): 0 and *out when key is a whole first field, -1 when absent or unparsable. */
int nsbox_cg_parse_keyed(const char *text, const char *key, uint64_t *out);
/* One unsigned decimal, surrounding whitespace allowed. 0 or -1. */
int nsbox_cg_parse_u64(const char *text, uint64_t *out);
/* A limit file (memory.max, pids.max, memory.limit_in_bytes): "max" and v1's "unlimited"
 * (LONG_MAX rounded down to a page, or -1) become UINT64_MAX. 0 or -1. */
int nsbox_cg_parse_limit(const char *text, uint64_t *out);
/* Iterate the pids of a cgroup.procs text: true and *pid for each, false at the end. Garbage
 * is skipped rather than trusted: a pid <= 1 is never returned (kill(-1)/kill(0)/init). */
bool nsbox_cg_next_pid(const char **cursor, pid_t *pid);

/* ---- formatting ---------------------------------------------------------------------------- */

/* v2 cpu.max: "<cpus*period> <period>", "max <period>" for cpus 0 (no limit). -1/ENOSPC. */
int nsbox_cg_fmt_cpu_max(uint32_t cpus, char *out, size_t n);
/* v1 cpu.cfs_quota_us: "<cpus*period>", "-1" for cpus 0. */
int nsbox_cg_fmt_cfs_quota(uint32_t cpus, char *out, size_t n);
/* A byte or count limit: the number, or for 0 (no limit) "max" (v2) / "-1" (v1). */
int nsbox_cg_fmt_limit(uint64_t v, int version, char *out, size_t n);

/* ---- paths --------------------------------------------------------------------------------- */

/* A safe name (policy/safename.h) of 64 bytes at most: ids become the directory name
 * "nsbox-<id>", so "/", ".." and control characters must never get through. */
bool nsbox_cg_valid_id(const char *id);
/* Whether a cgroup directory name is a sandbox's: "nsbox-" and a valid id. */
bool nsbox_cg_is_sandbox_name(const char *name);
/* a + rel + "/" + leaf (leaf may be NULL), with rel's leading "/" and a "/" rel collapsed so
 * that ("/sys/fs/cgroup", "/", "x") is "/sys/fs/cgroup/x". -1/ENAMETOOLONG. */
int nsbox_cg_join(char *out, size_t n, const char *a, const char *rel, const char *leaf);
/* A configured parent (NSBOX_CGROUP_PARENT) in canonical form: absolute, no "." or ".."
 * components, no empty components, no trailing "/" (except "/" itself). A value that starts
 * with strip_prefix + "/" (the v2 mount point, for users who paste a full path) loses it.
 * -1/EINVAL when unusable. */
int nsbox_cg_normalize_parent(const char *in, const char *strip_prefix, char *out, size_t n);
/* /proc/self/mountinfo: the root field (4th, octal escapes undone) of the last mount whose
 * mount point (5th) is mountpoint. Needed when a container bind-mounts its own cgroup at
 * /sys/fs/cgroup without a cgroup namespace: /proc/self/cgroup then names a path that the
 * mount shows as "/". 0, or -1/ENOENT. */
int nsbox_cg_mountinfo_root(const char *text, const char *mountpoint, char *root, size_t n);
/* path relative to a mount whose root is mount_root: "/docker/x/y" under root "/docker/x" is
 * "/y"; a path outside the root is -1/ENOENT. */
int nsbox_cg_strip_root(const char *path, const char *mount_root, char *out, size_t n);

#endif
