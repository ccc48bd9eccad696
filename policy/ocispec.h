/* An OCI runtime bundle's config.json (opencontainers/runtime-spec config.md): the part that
 * nsbox-oci honours or must refuse, read into one bounded struct. Pure: text in, struct out,
 * fuzzed (tests/fuzz/fuzz_ocispec.c). Errors name the key: "config.json: key 'process.args':
 * must be a non-empty array of strings". Keys it does not know are ignored, as runc does. */
#ifndef NSBOX_OCISPEC_H
#define NSBOX_OCISPEC_H

#include "nsbox.h"
#include "idmap.h"
#include "ocicgroup.h"
#include "propagation.h"
#include "seccomp_profile.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NSBOX_OCISPEC_JSON_MAX (4u << 20)
#define NSBOX_OCISPEC_ARGS_MAX 1024
#define NSBOX_OCISPEC_ENV_MAX 256 /* as many as a sandbox spec takes (NSBOX_MAX_ENV) */
#define NSBOX_OCISPEC_STR_MAX 32768
#define NSBOX_OCISPEC_PATH_MAX 1024
#define NSBOX_OCISPEC_MOUNTS_MAX 64
#define NSBOX_OCISPEC_OPTS_MAX 512 /* a mount's options, joined with ',' */
#define NSBOX_OCISPEC_NS_MAX 8
#define NSBOX_OCISPEC_ANNOT_MAX 256            /* annotations: entries */
#define NSBOX_OCISPEC_ANNOT_BYTES (64u << 10)  /* annotations: their JSON text */
#define NSBOX_OCISPEC_GROUPS_MAX 32            /* process.user.additionalGids */
#define NSBOX_OCISPEC_RLIMITS_MAX 16           /* process.rlimits: one per RLIMIT_* */
#define NSBOX_OCISPEC_HOOKS_MAX 32             /* hooks: of all kinds together */
#define NSBOX_OCISPEC_MASKS_MAX 64             /* linux.maskedPaths, linux.readonlyPaths: each */
#define NSBOX_OCISPEC_MASK_PATH_MAX 256        /* one of their paths */
#define NSBOX_OCISPEC_HOOKS_BYTES (256u << 10) /* hooks: their JSON text */
#define NSBOX_OCISPEC_DEVRULES_MAX 64          /* linux.resources.devices */
#define NSBOX_OCISPEC_CPUSET_MAX 128           /* linux.resources.cpu.cpus, .mems */
#define NSBOX_OCISPEC_DEVICES_MAX 32 /* linux.devices */
#define NSBOX_OCISPEC_SYSCTL_MAX 64  /* linux.sysctl: entries */
/* The ids a process may have: those of nsbox's user namespace (policy/idmap.h). */
#define NSBOX_OCISPEC_ID_MAX 65535u

enum nsbox_ocispec_ns {
    NSBOX_OCI_NS_PID,
    NSBOX_OCI_NS_NETWORK,
    NSBOX_OCI_NS_MOUNT,
    NSBOX_OCI_NS_IPC,
    NSBOX_OCI_NS_UTS,
    NSBOX_OCI_NS_USER,
    NSBOX_OCI_NS_CGROUP,
    NSBOX_OCI_NS_TIME,
};

struct nsbox_ocispec_namespace {
    enum nsbox_ocispec_ns type;
    bool has_path; /* join an existing namespace (network, ipc, uts, user; the floor refuses
                    * the others, and create the host's) */
    char path[NSBOX_OCISPEC_PATH_MAX]; /* absolute, on the host */
};

/* The capability sets of process.capabilities. */
enum nsbox_ocispec_capset {
    NSBOX_OCI_CAPS_BOUNDING,
    NSBOX_OCI_CAPS_EFFECTIVE,
    NSBOX_OCI_CAPS_INHERITABLE,
    NSBOX_OCI_CAPS_PERMITTED,
    NSBOX_OCI_CAPS_AMBIENT,
    NSBOX_OCI_CAPSET_KINDS,
};

struct nsbox_ocispec_rlimit {
    int resource; /* RLIMIT_* */
    uint64_t soft, hard;
};

/* When a hook runs (runtime-spec config.md, "POSIX-platform Hooks"). */
enum nsbox_ocispec_hook_kind {
    NSBOX_OCI_HOOK_PRESTART,
    NSBOX_OCI_HOOK_CREATE_RUNTIME,
    NSBOX_OCI_HOOK_CREATE_CONTAINER,
    NSBOX_OCI_HOOK_START_CONTAINER,
    NSBOX_OCI_HOOK_POSTSTART,
    NSBOX_OCI_HOOK_POSTSTOP,
    NSBOX_OCI_HOOK_KINDS,
};

struct nsbox_ocispec_hook {
    enum nsbox_ocispec_hook_kind kind;
    char path[NSBOX_OCISPEC_PATH_MAX]; /* absolute, on the host */
    char **args;                       /* NULL-terminated, malloc'd; {path} when absent */
    char **env;                        /* NULL-terminated, malloc'd; empty when absent */
    int timeout;                       /* seconds; 0 none */
};

/* The bundle's hooks, in the order of config.json within each kind. */
struct nsbox_ocispec_hooks {
    size_t n;
    struct nsbox_ocispec_hook h[NSBOX_OCISPEC_HOOKS_MAX];
};

struct nsbox_ocispec_mount {
    char destination[NSBOX_OCISPEC_PATH_MAX];
    char type[32];
    char source[NSBOX_OCISPEC_PATH_MAX];
    char options[NSBOX_OCISPEC_OPTS_MAX];
    /* An idmapped bind (options "idmap", "ridmap", or uidMappings and gidMappings given): the
     * source seen through an idmapped mount, nosuid and nodev, whose on-disk ids (inside) are
     * the container's ids (outside). No mappings: on-disk id N is container id N, as for the
     * writable root. Given ones are resolved through linux.uidMappings to container ids and
     * must stay within 0-65535 on both sides (the floor, policy/ocispec_idmap.c). */
    bool idmap, idmap_recursive;   /* recursive: "ridmap", every submount idmapped too */
    unsigned n_uid_map, n_gid_map; /* 0: the container's own mapping */
    struct nsbox_idmap uid_map[NSBOX_IDMAP_LINES], gid_map[NSBOX_IDMAP_LINES];
};

/* A mount's options, split the way mount(2) takes them. */
struct nsbox_ocispec_mount_opts {
    unsigned long flags;  /* MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_*ATIME, ... */
    bool bind, recursive; /* "bind", "rbind" */
    struct nsbox_propagation propagation; /* "shared", "rslave", ... (propagation.h) */
    char data[NSBOX_OCISPEC_OPTS_MAX]; /* what is left for the filesystem: "mode=755,size=64k" */
};

/* One linux.resources.devices entry (the v1 devices controller's rule). */
struct nsbox_ocispec_devrule {
    bool allow;
    char type;            /* 'a', 'b', 'c' */
    int64_t major, minor; /* -1: any */
    char access[4];       /* a non-empty subset of "rwm" */
};

/* One linux.sysctl entry. */
struct nsbox_ocispec_sysctl {
    char key[128]; /* NSBOX_SYSCTL_KEY_MAX */
    char value[256];
};

/* One linux.devices entry: a node the config asks for in the container. */
struct nsbox_ocispec_device {
    char path[NSBOX_OCISPEC_MASK_PATH_MAX]; /* absolute, below /dev */
    char type;                              /* 'c', 'u', 'b', 'p' */
    int64_t major, minor;
};

struct nsbox_ocispec {
    char oci_version[32];
    /* process */
    size_t n_args;
    char **args; /* NULL-terminated, malloc'd strings */
    size_t n_env;
    char *env[NSBOX_OCISPEC_ENV_MAX + 1]; /* "K=V", malloc'd; NULL-terminated */
    char cwd[NSBOX_OCISPEC_PATH_MAX];     /* absolute; "/" when absent */
    uint32_t uid, gid;
    size_t n_groups;
    uint32_t groups[NSBOX_OCISPEC_GROUPS_MAX]; /* process.user.additionalGids */
    int umask;                                 /* process.user.umask; -1 absent */
    bool has_oom_score_adj;
    int oom_score_adj; /* process.oomScoreAdj, -1000..1000 */
    size_t n_rlimits;
    struct nsbox_ocispec_rlimit rlimits[NSBOX_OCISPEC_RLIMITS_MAX];
    bool terminal;
    bool no_new_privileges;
    bool cap_sys_admin; /* CAP_SYS_ADMIN or CAP_SYS_MODULE in any capability set */
    /* process.capabilities, as masks of 1 << CAP_*, by set; has_caps: the object is there */
    bool has_caps;
    uint64_t caps[NSBOX_OCI_CAPSET_KINDS];
    /* root */
    char root_path[NSBOX_OCISPEC_PATH_MAX]; /* as written: relative to the bundle, or absolute */
    bool root_readonly;
    char hostname[254];
    /* linux */
    size_t n_namespaces;
    struct nsbox_ocispec_namespace namespaces[NSBOX_OCISPEC_NS_MAX];
    bool has_uid_mappings;
    bool all_devices; /* a linux.resources.devices rule allowing every device (--privileged) */
    int64_t memory_limit; /* bytes; -1 none */
    struct nsbox_ocicgroup_memory memory; /* the rest of linux.resources.memory (and the limit) */
    int64_t cpu_quota;    /* microseconds per period; -1 none */
    uint64_t cpu_period;  /* microseconds; 0 none */
    uint64_t cpu_shares;  /* 0 none */
    char cpus[NSBOX_OCISPEC_CPUSET_MAX], mems[NSBOX_OCISPEC_CPUSET_MAX]; /* cpuset; "" none */
    int64_t pids_limit;   /* -1 none */
    size_t n_devrules;
    struct nsbox_ocispec_devrule devrules[NSBOX_OCISPEC_DEVRULES_MAX];
    char cgroups_path[NSBOX_OCISPEC_PATH_MAX]; /* linux.cgroupsPath as written; "" none (its
                                                * form is checked where --systemd-cgroup is
                                                * known: create, policy/ocicgroup.h) */
    size_t n_devices;
    struct nsbox_ocispec_device devices[NSBOX_OCISPEC_DEVICES_MAX]; /* linux.devices */
    size_t n_sysctl;
    struct nsbox_ocispec_sysctl sysctl[NSBOX_OCISPEC_SYSCTL_MAX]; /* linux.sysctl */
    struct nsbox_propagation root_propagation; /* linux.rootfsPropagation */
    bool has_seccomp;
    struct nsbox_seccomp_profile seccomp; /* linux.seccomp, when has_seccomp (rules: heap) */
    char *seccomp_text; /* linux.seccomp's canonical text, the profile's cache key (heap) */
    size_t n_masked, n_readonly; /* linux.maskedPaths, linux.readonlyPaths: absolute paths */
    char masked[NSBOX_OCISPEC_MASKS_MAX][NSBOX_OCISPEC_MASK_PATH_MAX];
    char readonly[NSBOX_OCISPEC_MASKS_MAX][NSBOX_OCISPEC_MASK_PATH_MAX];
    /* mounts */
    size_t n_mounts;
    struct nsbox_ocispec_mount mounts[NSBOX_OCISPEC_MOUNTS_MAX];
    /* annotations: a string-to-string object, kept as its compact JSON text ("{}" when
     * absent; malloc'd) for the state to report */
    char *annotations;
    /* hooks: the object's compact JSON text ("{}" when absent; malloc'd), which the state
     * directory keeps for start and delete, and what it says (nsbox_ocispec_hooks_parse) */
    char *hooks_json;
    struct nsbox_ocispec_hooks hooks;
};

void nsbox_ocispec_init(struct nsbox_ocispec *c);
void nsbox_ocispec_free(struct nsbox_ocispec *c);
/* Parse config.json. On failure *c is freed (nsbox_ocispec_free) and e names the key. */
int nsbox_ocispec_parse(const char *text, size_t len, struct nsbox_ocispec *c, struct nsbox_err *e);
/* The "hooks" object's text (config.json's, or as create kept it) into h; "{}" or "null" give
 * none. On failure h is freed and e names the key. */
int nsbox_ocispec_hooks_parse(const char *text, struct nsbox_ocispec_hooks *h, struct nsbox_err *e);
void nsbox_ocispec_hooks_free(struct nsbox_ocispec_hooks *h);
const char *nsbox_ocispec_hook_name(enum nsbox_ocispec_hook_kind k);
/* nsbox's floor (docs/oci.md): a config nsbox-oci will not run, with the reason
 * (NSBOX_E_POLICY): a privileged container (CAP_SYS_ADMIN, every device), joining an existing
 * namespace; and what it cannot give (NSBOX_E_UNSUPPORTED): ids outside its user namespace's
 * 0-65535, hooks that run inside the container (createContainer, startContainer). 0 when it may
 * run. */
int nsbox_ocispec_check_floor(const struct nsbox_ocispec *c, struct nsbox_err *e);
/* The rest of the floor, for a container's config (create; exec's process has no namespaces):
 * a pid, ipc, uts, network or mount namespace left out of linux.namespaces, which asks for
 * the host's, is refused (NSBOX_E_POLICY) naming it and the option that asked. A missing user
 * or cgroup namespace is allowed: nsbox makes its own. 0 when it may run. */
int nsbox_ocispec_check_namespaces(const struct nsbox_ocispec *c, struct nsbox_err *e);
/* linux.devices: a container gets the host's node, bound in (mknod is impossible in its user
 * namespace), for a character device of a short list of harmless ones (null, zero, full,
 * random, urandom, tty, fuse, net/tun); a block device, a fifo, or any other device is refused
 * (NSBOX_E_POLICY) naming it, why and the way out. 0 when every entry may be given. */
int nsbox_ocispec_check_devices(const struct nsbox_ocispec *c, struct nsbox_err *e);
/* linux.sysctl: only keys of the container's own namespaces (policy/sysctl.h); a host-wide one
 * (kernel.*, vm.*, ...) is refused (NSBOX_E_POLICY) naming it. 0 when all may be applied. */
int nsbox_ocispec_check_sysctl(const struct nsbox_ocispec *c, struct nsbox_err *e);
/* The host node nsbox-oci binds for a character device major:minor of that list; NULL when
 * it is not on it. */
const char *nsbox_ocispec_device_host_path(int64_t major, int64_t minor);
/* Split m's options into mount flags, its propagation ("private", "rshared", ...: one, which
 * parsing checked) and the filesystem's data. */
void nsbox_ocispec_mount_opts(const struct nsbox_ocispec_mount *m,
                              struct nsbox_ocispec_mount_opts *o);
/* The mount options it knows, by index; NULL past the last (for `features`). */
const char *nsbox_ocispec_mount_option(size_t i);
/* The name of capability n; NULL for a number runtime-spec does not name. */
const char *nsbox_ocispec_cap_name(int n);
/* CAP_* name to its number; -1 for a name runtime-spec does not know. */
int nsbox_ocispec_cap_number(const char *name);
/* The namespace's name in config.json ("pid", "network", ...). */
const char *nsbox_ocispec_ns_name(enum nsbox_ocispec_ns t);

#endif
