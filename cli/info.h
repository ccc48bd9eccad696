/* What this machine supports, what is missing and how to fix it (`nsbox info`), and the same
 * diagnoses for `nsbox run` when a prerequisite fails, so users see one named cause and fix. */
#ifndef NSBOX_INFO_H
#define NSBOX_INFO_H

#include "nsbox.h"
#include "diagnose.h"
#include "spec.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum nsbox_check_id {
    NSBOX_CHECK_USERNS,     /* user namespaces usable by this user (sysctls, AppArmor) */
    NSBOX_CHECK_NAMESPACES, /* pid, mount, uts, ipc, net, cgroup namespaces */
    NSBOX_CHECK_OVERLAYFS,
    NSBOX_CHECK_CGROUPS, /* version, controllers, delegation */
    NSBOX_CHECK_SECCOMP,
    NSBOX_CHECK_NFTABLES, /* nf_tables usable (for network all/allow) */
    NSBOX_CHECK_NETADMIN, /* CAP_NET_ADMIN on the host (network all/allow) */
    NSBOX_CHECK_IDMAP,    /* idmapped mounts (--workspace DIR without chown) */
    NSBOX_CHECK_OPENAT2,
    NSBOX_CHECK_IMAGE_HOST,
    NSBOX_CHECK_IMAGE_DEBIAN,
    NSBOX_CHECK_WORKSPACE_DISK, /* how the /workspace disk limit is enforced here */
    NSBOX_CHECK_PRIVILEGES,     /* root or unprivileged, and what that implies */
    NSBOX_CHECK_CONFIG,         /* the config file and the directories' environment overrides */
    NSBOX_CHECK_EGRESS,         /* nsbox-egress beside nsbox (allow by name, header bindings) */
    NSBOX_CHECK_OCI_IMAGES,     /* libarchive (image import) and skopeo (image pull) */
    NSBOX_CHECK_FILE_TABLE,     /* fs.file-max larger than sandboxes' memory could fill */
    NSBOX_CHECK_COUNT
};

/* The stable key of a check ("user_namespaces", ...); NULL for an out-of-range id. */
const char *nsbox_info_check_name(enum nsbox_check_id id);

/* Run one check (cheap; no side effects on the host: probes run in a forked child that makes
 * throwaway namespaces and exits). */
void nsbox_info_check_run(enum nsbox_check_id id, struct nsbox_check *out);
/* Run every check, in enum order. */
void nsbox_info_check_run_all(struct nsbox_check out[NSBOX_CHECK_COUNT]);

/* ---- pure helpers (no system calls; unit tested) ------------------------------------------ */

/* /proc/filesystems text lists fs ("nodev\toverlay" lines). */
bool nsbox_info_filesystems_has(const char *content, const char *fs);
/* /proc/sys/kernel/seccomp/actions_avail text (space separated words) contains action. */
bool nsbox_info_words_has(const char *content, const char *word);
/* /proc/modules text has a line whose first field is module. */
bool nsbox_info_modules_has(const char *content, const char *module);
/* modules.builtin text has a line "<dir>/<module>.ko". */
bool nsbox_info_builtin_has(const char *content, const char *module);
/* uname release "6.18.44-foo" >= major.minor; false when unparsable. */
bool nsbox_info_kernel_at_least(const char *release, int major, int minor);
/* /proc/self/uid_map text maps the whole id space 1:1, i.e. we are in the initial user
 * namespace (so uid 0 is the host's root, not a container's). */
bool nsbox_info_uid_map_is_initial(const char *content);
/* Whether nsbox raises fs.file-max when it makes a sandbox (sandbox/filemax.h): only as the
 * host's root, where the file can be written and the config file does not say "keep". */
enum nsbox_info_raiser {
    NSBOX_INFO_RAISER_NOT_ROOT,  /* not the host's root: it never tries */
    NSBOX_INFO_RAISER_RAISES,    /* root, the file writable */
    NSBOX_INFO_RAISER_READ_ONLY, /* root, but the file is not writable (a read-only /proc/sys) */
    NSBOX_INFO_RAISER_KEPT,      /* the config file's "host": {"file_max": "keep"} */
};
/* The file_table check from the host's fs.file-max, its memory and who could raise it. */
void nsbox_info_file_table(uint64_t file_max, uint64_t mem_bytes, enum nsbox_info_raiser raiser,
                           struct nsbox_check *c);
/* "4 GiB", "512 MiB", "1234 bytes". */
void nsbox_info_format_bytes(uint64_t bytes, char *out, size_t n);
/* true when every required check is ok. */
bool nsbox_info_all_required_ok(const struct nsbox_check *checks, size_t n);

/* What this machine has for a sandbox: the CPUs nsbox may run on, its memory in bytes (0:
 * unknown). */
struct nsbox_info_host {
    unsigned cpus;
    uint64_t memory_bytes;
};

/* Render the report into buf (NUL-terminated). JSON: {"ok", "checks": [{"name", "ok",
 * "required", "detail", "fix"}], "instance_types": [{"name", "cpus", "memory", "pids",
 * "disk"}], "host": {"cpus", "memory"}} with memory and disk in bytes ("host" only when host is
 * given). Text: one line per check, an indented "fix:" line under each one that is missing,
 * the instance type table with a note under it for each type that asks more CPUs or memory
 * than host has, then one summary line.
 * Return the length written, or -1 with errno ENOSPC (buf too small) or ENOMEM. */
int nsbox_info_render_json(const struct nsbox_check *checks, size_t n,
                           const struct nsbox_instance_type *types, size_t ntypes,
                           const struct nsbox_info_host *host, char *buf, size_t size);
int nsbox_info_render_text(const struct nsbox_check *checks, size_t n,
                           const struct nsbox_instance_type *types, size_t ntypes,
                           const struct nsbox_info_host *host, char *buf, size_t size);

#endif
