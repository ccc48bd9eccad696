/* config.json's "linux" object, the parts about the container's cgroup and devices:
 * linux.resources (memory, cpu and cpuset, pids, the device rules), linux.cgroupsPath and
 * linux.devices (ocispec.h). */
#include "ocispec.h"
#include "ocispec_impl.h"
#include "ocicgroup.h"
#include "sysctl.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#define DEV_KEY "linux.resources.devices"

/* One device rule: type a (every device, the default), b or c; major and minor (absent or
 * null: any); access, a non-empty subset of "rwm" (absent: all three). */
static int parse_devrule(const cJSON *it, struct nsbox_ocispec_devrule *d, struct nsbox_err *e)
{
    if (!cJSON_IsObject(it))
        return nsbox_ocispec_bad(e, DEV_KEY, "each entry must be an object");
    char type[4] = "a", access[8] = "rwm";
    d->major = d->minor = -1;
    if (nsbox_ocispec_get_bool(it, "allow", DEV_KEY ".allow", &d->allow, e) < 0 ||
        nsbox_ocispec_get_str(it, "type", DEV_KEY ".type", type, sizeof type, false, e) < 0 ||
        nsbox_ocispec_get_str(it, "access", DEV_KEY ".access", access, sizeof access, false, e) <
            0 ||
        nsbox_ocispec_get_int(it, "major", DEV_KEY ".major", -1, 4095, &d->major, e) < 0 ||
        nsbox_ocispec_get_int(it, "minor", DEV_KEY ".minor", -1, 1048575, &d->minor, e) < 0)
        return -1;
    if (strlen(type) != 1 || !strchr("abc", type[0]))
        return nsbox_ocispec_bad(e, DEV_KEY ".type", "must be \"a\", \"b\" or \"c\"");
    if (!access[0] || access[strspn(access, "rwm")] || strlen(access) > 3)
        return nsbox_ocispec_bad(e, DEV_KEY ".access", "must be made of r, w and m");
    d->type = type[0];
    snprintf(d->access, sizeof d->access, "%s", access);
    return 0;
}

static int parse_devices(const cJSON *res, struct nsbox_ocispec *c, struct nsbox_err *e)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(res, "devices");
    if (!v || cJSON_IsNull(v))
        return 0;
    if (!cJSON_IsArray(v))
        return nsbox_ocispec_bad(e, DEV_KEY, "must be an array");
    const cJSON *it;
    cJSON_ArrayForEach(it, v)
    {
        if (c->n_devrules == NSBOX_OCISPEC_DEVRULES_MAX)
            return nsbox_ocispec_bad(e, DEV_KEY, "more than 64 entries");
        struct nsbox_ocispec_devrule *d = &c->devrules[c->n_devrules++];
        if (parse_devrule(it, d, e) < 0)
            return -1;
        if (d->allow && d->type == 'a' && d->major < 0)
            c->all_devices = true;
    }
    return 0;
}

/* cpu.cpus, cpu.mems: a cpuset list ("0-3,6"), as the kernel's cpuset files take it. */
static int get_cpuset(const cJSON *cpu, const char *name, const char *key, char *out,
                      struct nsbox_err *e)
{
    if (nsbox_ocispec_get_str(cpu, name, key, out, NSBOX_OCISPEC_CPUSET_MAX, false, e) < 0)
        return -1;
    if (out[strspn(out, "0123456789,-")])
        return nsbox_ocispec_bad(e, key, "must be a list of numbers and ranges (0-3,6)");
    return 0;
}

static int parse_cpu(const cJSON *cpu, struct nsbox_ocispec *c, struct nsbox_err *e)
{
    int64_t period = 0, shares = 0;
    if (nsbox_ocispec_get_int(cpu, "quota", "linux.resources.cpu.quota", -1, 9.0e18, &c->cpu_quota,
                              e) < 0 ||
        nsbox_ocispec_get_int(cpu, "period", "linux.resources.cpu.period", 0, 9.0e18, &period, e) <
            0 ||
        nsbox_ocispec_get_int(cpu, "shares", "linux.resources.cpu.shares", 0, 9.0e18, &shares, e) <
            0 ||
        get_cpuset(cpu, "cpus", "linux.resources.cpu.cpus", c->cpus, e) < 0 ||
        get_cpuset(cpu, "mems", "linux.resources.cpu.mems", c->mems, e) < 0)
        return -1;
    c->cpu_period = (uint64_t)period, c->cpu_shares = (uint64_t)shares;
    return 0;
}

#define MEM "linux.resources.memory."
/* memory: the limit, and what runc writes beside it (ocicgroup.h plans the files). */
static int parse_memory(const cJSON *mem, struct nsbox_ocispec *c, struct nsbox_err *e)
{
    struct nsbox_ocicgroup_memory *m = &c->memory;
    return nsbox_ocispec_get_int(mem, "limit", MEM "limit", -1, 9.0e18, &c->memory_limit, e) < 0 ||
                   nsbox_ocispec_get_int(mem, "reservation", MEM "reservation", -1, 9.0e18,
                                         &m->reservation, e) < 0 ||
                   nsbox_ocispec_get_int(mem, "swap", MEM "swap", -1, 9.0e18, &m->swap, e) < 0 ||
                   nsbox_ocispec_get_int(mem, "kernel", MEM "kernel", -1, 9.0e18, &m->kernel, e) <
                       0 ||
                   nsbox_ocispec_get_int(mem, "kernelTCP", MEM "kernelTCP", -1, 9.0e18,
                                         &m->kernel_tcp, e) < 0 ||
                   nsbox_ocispec_get_int(mem, "swappiness", MEM "swappiness", -1, 100,
                                         &m->swappiness, e) < 0 ||
                   nsbox_ocispec_get_bool(mem, "disableOOMKiller", MEM "disableOOMKiller",
                                          &m->disable_oom_killer, e) < 0
               ? -1
               : 0;
}

static int parse_resources(const cJSON *lx, struct nsbox_ocispec *c, struct nsbox_err *e)
{
    int r;
    const cJSON *res = nsbox_ocispec_get_obj(lx, "resources", "linux.resources", &r, e);
    if (r < 0 || !res)
        return r;
    const cJSON *mem = nsbox_ocispec_get_obj(res, "memory", "linux.resources.memory", &r, e);
    if (r < 0)
        return -1;
    const cJSON *cpu = nsbox_ocispec_get_obj(res, "cpu", "linux.resources.cpu", &r, e);
    if (r < 0)
        return -1;
    const cJSON *pids = nsbox_ocispec_get_obj(res, "pids", "linux.resources.pids", &r, e);
    if (r < 0)
        return -1;
    if ((mem && parse_memory(mem, c, e) < 0) || (cpu && parse_cpu(cpu, c, e) < 0) ||
        (pids && nsbox_ocispec_get_int(pids, "limit", "linux.resources.pids.limit", -1, 9.0e18,
                                       &c->pids_limit, e) < 0))
        return -1;
    if (c->memory_limit == 0)
        c->memory_limit = -1;
    c->memory.limit = c->memory_limit;
    if (c->pids_limit == 0)
        c->pids_limit = -1;
    return parse_devices(res, c, e);
}

/* ---- linux.devices ---- */

/* The character devices a container may be given: harmless to the host, and usable from a user
 * namespace (fuse and tun act within the container's own mount and network namespaces). */
static const struct {
    int64_t major, minor;
    const char *host;
} safe_devices[] = {
    {1, 3, "/dev/null"},   {1, 5, "/dev/zero"},    {1, 7, "/dev/full"},
    {1, 8, "/dev/random"}, {1, 9, "/dev/urandom"}, {5, 0, "/dev/tty"},
    {10, 229, "/dev/fuse"}, {10, 200, "/dev/net/tun"},
};

const char *nsbox_ocispec_device_host_path(int64_t major, int64_t minor)
{
    for (size_t i = 0; i < sizeof safe_devices / sizeof safe_devices[0]; i++)
        if (safe_devices[i].major == major && safe_devices[i].minor == minor)
            return safe_devices[i].host;
    return NULL;
}

static int parse_device(const cJSON *it, struct nsbox_ocispec_device *d, struct nsbox_err *e)
{
    char type[4] = "";
    if (!cJSON_IsObject(it))
        return nsbox_ocispec_bad(e, "linux.devices", "each entry must be an object");
    d->major = d->minor = -1;
    if (nsbox_ocispec_get_str(it, "path", "linux.devices.path", d->path, sizeof d->path, true,
                              e) < 0 ||
        nsbox_ocispec_get_str(it, "type", "linux.devices.type", type, sizeof type, true, e) < 0 ||
        nsbox_ocispec_get_int(it, "major", "linux.devices.major", 0, 4095, &d->major, e) < 0 ||
        nsbox_ocispec_get_int(it, "minor", "linux.devices.minor", 0, 1048575, &d->minor, e) < 0)
        return -1;
    if (strlen(type) != 1 || !strchr("cubp", type[0]))
        return nsbox_ocispec_bad(e, "linux.devices.type", "must be \"c\", \"u\", \"b\" or \"p\"");
    d->type = type[0];
    if (d->type != 'p' && (d->major < 0 || d->minor < 0))
        return nsbox_ocispec_bad(e, "linux.devices", "a device needs its major and minor");
    /* below /dev, one name per level: a device goes on the container's own /dev, never into
     * the image nor through a '..' */
    if (strncmp(d->path, "/dev/", 5) || strstr(d->path, "/../") || strstr(d->path, "/./") ||
        strstr(d->path, "//") || d->path[strlen(d->path) - 1] == '/' ||
        !strcmp(d->path + strlen(d->path) - 3, "/..") ||
        !strcmp(d->path + strlen(d->path) - 2, "/."))
        return nsbox_err_invalid(e, "config.json: key 'linux.devices.path': '%s' is not a path "
                                    "below /dev (absolute, without . or ..)",
                                 NSBOX_SHOW(d->path));
    return 0;
}

static int parse_devices_list(const cJSON *lx, struct nsbox_ocispec *c, struct nsbox_err *e)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(lx, "devices");
    if (!v || cJSON_IsNull(v))
        return 0;
    if (!cJSON_IsArray(v))
        return nsbox_ocispec_bad(e, "linux.devices", "must be an array");
    const cJSON *it;
    cJSON_ArrayForEach(it, v) {
        /* engines list every host device for --privileged: say that, not only the count */
        if (c->n_devices == NSBOX_OCISPEC_DEVICES_MAX)
            return nsbox_err_set(e, NSBOX_E_POLICY, EPERM,
                                 "privileged containers are not supported: config.json's "
                                 "'linux.devices' has more than 32 entries, as a privileged "
                                 "container's every host device (--privileged), and nsbox-oci "
                                 "gives a container only null, zero, full, random, urandom, "
                                 "tty, fuse and net/tun; drop --privileged, and --device for "
                                 "others");
        if (parse_device(it, &c->devices[c->n_devices++], e) < 0)
            return -1;
    }
    return 0;
}

int nsbox_ocispec_check_devices(const struct nsbox_ocispec *c, struct nsbox_err *e)
{
    for (size_t i = 0; i < c->n_devices; i++) {
        const struct nsbox_ocispec_device *d = &c->devices[i];
        if (d->type == 'b')
            return nsbox_err_set(e, NSBOX_E_POLICY, EPERM,
                                 "linux.devices: %s is a block device (%" PRId64 ":%" PRId64
                                 "): nsbox-oci gives a container no block device, since raw "
                                 "access to a disk passes every file permission on it; mount "
                                 "its filesystem on the host and bind the directory (mounts, "
                                 "docker -v) instead of --device",
                                 d->path, d->major, d->minor);
        if (d->type == 'p')
            return nsbox_err_set(e, NSBOX_E_UNSUPPORTED, ENOTSUP,
                                 "linux.devices: %s is a fifo, which nsbox-oci does not make; "
                                 "make it from the container's process (mkfifo)",
                                 d->path);
        if (!nsbox_ocispec_device_host_path(d->major, d->minor))
            return nsbox_err_set(e, NSBOX_E_POLICY, EPERM,
                                 "linux.devices: %s (c %" PRId64 ":%" PRId64 ") is not a "
                                 "device nsbox-oci gives containers: only null, zero, full, "
                                 "random, urandom, tty, fuse and net/tun are (the host's node "
                                 "bound in; mknod is impossible in the container's user "
                                 "namespace); drop --device for it",
                                 d->path, d->major, d->minor);
    }
    return 0;
}

/* ---- linux.sysctl ---- */

/* An object of strings; each key well formed (its namespace is checked at create). */
static int parse_sysctl(const cJSON *lx, struct nsbox_ocispec *c, struct nsbox_err *e)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(lx, "sysctl");
    if (!v || cJSON_IsNull(v))
        return 0;
    if (!cJSON_IsObject(v))
        return nsbox_ocispec_bad(e, "linux.sysctl", "must be an object of strings");
    const cJSON *it;
    cJSON_ArrayForEach(it, v)
    {
        if (!cJSON_IsString(it) || !it->valuestring)
            return nsbox_ocispec_bad(e, "linux.sysctl", "must be an object of strings");
        if (c->n_sysctl == NSBOX_OCISPEC_SYSCTL_MAX)
            return nsbox_ocispec_bad(e, "linux.sysctl", "more than 64 entries");
        struct nsbox_ocispec_sysctl *s = &c->sysctl[c->n_sysctl];
        struct nsbox_err ignored;
        if (nsbox_sysctl_check(it->string, &ignored) < 0 && ignored.code == NSBOX_E_INVALID) {
            *e = ignored;
            return -1;
        }
        if (strlen(it->valuestring) >= sizeof s->value || strchr(it->valuestring, '\n'))
            return nsbox_err_invalid(e,
                                     "config.json: key 'linux.sysctl': the value of %s is "
                                     "longer than 255 bytes or has a newline",
                                     it->string);
        snprintf(s->key, sizeof s->key, "%s", it->string);
        snprintf(s->value, sizeof s->value, "%s", it->valuestring);
        c->n_sysctl++;
    }
    return 0;
}

int nsbox_ocispec_check_sysctl(const struct nsbox_ocispec *c, struct nsbox_err *e)
{
    for (size_t i = 0; i < c->n_sysctl; i++)
        if (nsbox_sysctl_check(c->sysctl[i].key, e) < 0)
            return -1;
    return 0;
}

int nsbox_ocispec_parse_linux(const cJSON *lx, struct nsbox_ocispec *c, struct nsbox_err *e)
{
    if (nsbox_ocispec_get_str(lx, "cgroupsPath", "linux.cgroupsPath", c->cgroups_path,
                              sizeof c->cgroups_path, false, e) < 0)
        return -1;
    char prop[16] = "";
    if (nsbox_ocispec_get_str(lx, "rootfsPropagation", "linux.rootfsPropagation", prop,
                              sizeof prop, false, e) < 0 ||
        nsbox_propagation_parse_root(prop, &c->root_propagation, e) < 0)
        return -1;
    if (parse_resources(lx, c, e) < 0 || parse_devices_list(lx, c, e) < 0)
        return -1;
    return parse_sysctl(lx, c, e);
}
