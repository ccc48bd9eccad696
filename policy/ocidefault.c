/* `nsbox-oci spec`'s default config.json (ocidefault.h). The names come from config.json's own
 * parser (ocispec.c), so what is written is what the parser reads back. */
#include "ocidefault.h"
#include "ocispec.h"
#include "cleanup.h"

#include <linux/capability.h>
#include <stddef.h>

/* runc's default capabilities: none of them privileged (docs/oci.md, the floor). */
static const int default_caps[] = {CAP_AUDIT_WRITE, CAP_KILL, CAP_NET_BIND_SERVICE};

/* runc's default masks and read-only paths: what of /proc and /sys tells of the host or
 * changes it. */
static const char *const masked[] = {
    "/proc/acpi",          "/proc/asound",     "/proc/kcore",       "/proc/keys",
    "/proc/latency_stats", "/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug",
    "/sys/firmware",       "/proc/scsi",
};
static const char *const read_only[] = {"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys",
                                        "/proc/sysrq-trigger"};

/* The mounts every container needs; no bind of a host path (the default shares nothing). */
static const struct {
    const char *dest, *type, *source, *opts[6];
} mounts[] = {
    {"/proc", "proc", "proc", {NULL}},
    {"/dev", "tmpfs", "tmpfs", {"nosuid", "strictatime", "mode=755", "size=65536k", NULL}},
    {"/dev/pts",
     "devpts",
     "devpts",
     {"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", NULL}},
    {"/dev/shm", "tmpfs", "shm", {"nosuid", "noexec", "nodev", "mode=1777", "size=65536k", NULL}},
    {"/dev/mqueue", "mqueue", "mqueue", {"nosuid", "noexec", "nodev", NULL}},
    {"/sys", "sysfs", "sysfs", {"nosuid", "noexec", "nodev", "ro", NULL}},
};

static cJSON *strings(const char *const *v, size_t n)
{
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; a && i < n && v[i]; i++)
        if (!cJSON_AddItemToArray(a, cJSON_CreateString(v[i]))) {
            cJSON_Delete(a);
            return NULL;
        }
    return a;
}

static bool add_process(cJSON *j)
{
    static const char *const args[] = {"sh"};
    static const char *const env[] = {
        "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "TERM=xterm"};
    static const char *const sets[] = {"bounding", "effective", "permitted"};
    const char *caps[NSBOX_ARRAY_LEN(default_caps)];
    for (size_t i = 0; i < NSBOX_ARRAY_LEN(default_caps); i++)
        caps[i] = nsbox_ocispec_cap_name(default_caps[i]);
    cJSON *p = cJSON_AddObjectToObject(j, "process"), *user, *capj, *rl, *nofile;
    if (!p || !cJSON_AddBoolToObject(p, "terminal", true) ||
        !(user = cJSON_AddObjectToObject(p, "user")) || !cJSON_AddNumberToObject(user, "uid", 0) ||
        !cJSON_AddNumberToObject(user, "gid", 0) ||
        !cJSON_AddItemToObject(p, "args", strings(args, NSBOX_ARRAY_LEN(args))) ||
        !cJSON_AddItemToObject(p, "env", strings(env, NSBOX_ARRAY_LEN(env))) ||
        !cJSON_AddStringToObject(p, "cwd", "/") ||
        !(capj = cJSON_AddObjectToObject(p, "capabilities")))
        return false;
    for (size_t i = 0; i < NSBOX_ARRAY_LEN(sets); i++)
        if (!cJSON_AddItemToObject(capj, sets[i], strings(caps, NSBOX_ARRAY_LEN(caps))))
            return false;
    return (rl = cJSON_AddArrayToObject(p, "rlimits")) && (nofile = cJSON_CreateObject()) &&
           cJSON_AddItemToArray(rl, nofile) &&
           cJSON_AddStringToObject(nofile, "type", "RLIMIT_NOFILE") &&
           cJSON_AddNumberToObject(nofile, "hard", 1024) &&
           cJSON_AddNumberToObject(nofile, "soft", 1024) &&
           cJSON_AddBoolToObject(p, "noNewPrivileges", true);
}

static bool add_mounts(cJSON *j)
{
    cJSON *a = cJSON_AddArrayToObject(j, "mounts");
    for (size_t i = 0; a && i < NSBOX_ARRAY_LEN(mounts); i++) {
        cJSON *m = cJSON_CreateObject();
        if (!m || !cJSON_AddItemToArray(a, m) ||
            !cJSON_AddStringToObject(m, "destination", mounts[i].dest) ||
            !cJSON_AddStringToObject(m, "type", mounts[i].type) ||
            !cJSON_AddStringToObject(m, "source", mounts[i].source))
            return false;
        if (mounts[i].opts[0] &&
            !cJSON_AddItemToObject(m, "options",
                                   strings(mounts[i].opts, NSBOX_ARRAY_LEN(mounts[i].opts))))
            return false;
    }
    return a != NULL;
}

/* Every namespace nsbox makes new but time (runc's default leaves it out too); the user
 * namespace only with --rootless, as runc writes it. */
static bool add_linux(cJSON *j, bool rootless)
{
    static const enum nsbox_ocispec_ns ns[] = {
        NSBOX_OCI_NS_PID,   NSBOX_OCI_NS_NETWORK, NSBOX_OCI_NS_IPC, NSBOX_OCI_NS_UTS,
        NSBOX_OCI_NS_MOUNT, NSBOX_OCI_NS_CGROUP,  NSBOX_OCI_NS_USER};
    cJSON *l = cJSON_AddObjectToObject(j, "linux"), *a;
    if (!l || !(a = cJSON_AddArrayToObject(l, "namespaces")))
        return false;
    for (size_t i = 0; i < NSBOX_ARRAY_LEN(ns); i++) {
        if (ns[i] == NSBOX_OCI_NS_USER && !rootless)
            continue;
        cJSON *o = cJSON_CreateObject();
        if (!o || !cJSON_AddItemToArray(a, o) ||
            !cJSON_AddStringToObject(o, "type", nsbox_ocispec_ns_name(ns[i])))
            return false;
    }
    return cJSON_AddItemToObject(l, "maskedPaths", strings(masked, NSBOX_ARRAY_LEN(masked))) &&
           cJSON_AddItemToObject(l, "readonlyPaths",
                                 strings(read_only, NSBOX_ARRAY_LEN(read_only)));
}

cJSON *nsbox_ocidefault_config(bool rootless)
{
    cJSON *j = cJSON_CreateObject(), *root;
    if (!j || !cJSON_AddStringToObject(j, "ociVersion", "1.0.2") || !add_process(j) ||
        !(root = cJSON_AddObjectToObject(j, "root")) ||
        !cJSON_AddStringToObject(root, "path", "rootfs") ||
        !cJSON_AddBoolToObject(root, "readonly", true) ||
        !cJSON_AddStringToObject(j, "hostname", "nsbox") || !add_mounts(j) ||
        !add_linux(j, rootless)) {
        cJSON_Delete(j);
        return NULL;
    }
    return j;
}
