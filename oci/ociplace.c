/* The container's cgroup as the bundle says: linux.cgroupsPath (policy/ocicgroup.h) and
 * linux.resources exactly as written (docs/oci.md, "cgroupsPath"). The floor stays: memory and
 * pids keep the limits of nsbox's default instance type when the config sets none (a
 * container never gets the host's whole memory or an unbounded fork), and on v1 the device
 * nodes nsbox puts in every container stay usable after the config's device rules. The state
 * directory keeps the cgroup's directories, so that delete removes them when the monitor could
 * not (it was killed). The memory controller's files beyond the limit are written for either
 * cgroup, once it is made (docs/decisions.md, "linux.resources.memory beyond the limit"). */
#include "ocirt.h"
#include "cgroup.h"
#include "ocicgroup.h"
#include "ocispec.h"
#include "spec.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The nodes of nsbox's /dev (rootfs/mounts.c binds them) and the terminal's: null, zero, full,
 * random, urandom, tty, console, ptmx, the pts. */
static const char *const floor_rules[] = {
    "c 1:3 rwm", "c 1:5 rwm", "c 1:7 rwm", "c 1:8 rwm",   "c 1:9 rwm",
    "c 5:0 rwm", "c 5:1 rwm", "c 5:2 rwm", "c 136:* rwm",
};

static int device_rules(const struct nsbox_ocispec *c, struct nsbox_ociplace *p,
                        struct nsbox_err *e)
{
    size_t n = 0;
    for (size_t i = 0; i < c->n_devrules; i++, n++) {
        const struct nsbox_ocispec_devrule *d = &c->devrules[i];
        p->rules[n].allow = d->allow;
        if (nsbox_ocicgroup_device_rule(d->type, d->major, d->minor, d->access, p->rules[n].rule,
                                        sizeof p->rules[n].rule) < 0)
            return nsbox_err_invalid(e,
                                     "config.json: key 'linux.resources.devices': entry %zu "
                                     "cannot be written as a device rule",
                                     i);
    }
    for (size_t i = 0; c->n_devrules && i < sizeof floor_rules / sizeof floor_rules[0]; i++, n++) {
        p->rules[n].allow = true;
        snprintf(p->rules[n].rule, sizeof p->rules[n].rule, "%s", floor_rules[i]);
    }
    p->place.dev = p->rules;
    p->place.n_dev = n;
    return 0;
}

/* The memory files beyond the limit, for the cgroup version this machine gives. */
static int memory_files(const struct nsbox_ocispec *c, struct nsbox_ociplace *p,
                        struct nsbox_err *e)
{
    const struct nsbox_ocicgroup_memory *m = &c->memory;
    if (m->reservation == NSBOX_OCICGROUP_UNSET && m->swap == NSBOX_OCICGROUP_UNSET &&
        m->kernel == NSBOX_OCICGROUP_UNSET && m->kernel_tcp == NSBOX_OCICGROUP_UNSET &&
        m->swappiness < 0 && !m->disable_oom_killer)
        return 0; /* nothing beyond the limit: no need to look at the machine's cgroups */
    struct nsbox_cgroup_support sup;
    nsbox_cgroup_detect(&sup);
    return nsbox_ocicgroup_memory_plan(&c->memory, sup.version, sup.swap, p->memory, &p->n_memory,
                                       p->ignored, sizeof p->ignored, e);
}

int nsbox_ociplace_build(const struct nsbox_ocirt *g, const struct nsbox_ocispec *c,
                         const struct nsbox_spec *s, struct nsbox_ociplace *out,
                         struct nsbox_err *e)
{
    memset(out, 0, sizeof *out);
    if (nsbox_ocicgroup_parse(c->cgroups_path, g->systemd_cgroup, &out->path, e) < 0 ||
        memory_files(c, out, e) < 0)
        return -1;
    if (!out->path.path[0])
        return 0;
    struct nsbox_cgroup_place *pl = &out->place;
    pl->path = out->path.path;
    pl->relative = out->path.relative;
    pl->memory_bytes = c->memory_limit > 0 ? (uint64_t)c->memory_limit : s->limits.memory_bytes;
    pl->pids = c->pids_limit > 0 ? (uint64_t)c->pids_limit : s->limits.pids;
    pl->cpu_quota_us = c->cpu_quota;
    pl->cpu_period_us = c->cpu_period;
    pl->cpu_shares = c->cpu_shares;
    pl->cpu_weight = nsbox_ocicgroup_shares_to_weight(c->cpu_shares);
    pl->cpus = c->cpus;
    pl->mems = c->mems;
    if (device_rules(c, out, e) < 0)
        return -1;
    out->placed = true;
    return 0;
}

int nsbox_ociplace_apply_memory(const struct nsbox_ociplace *p, const struct nsbox_cgroup *cg,
                                struct nsbox_err *e)
{
    struct nsbox_cgroup_file files[NSBOX_OCICGROUP_MEM_WRITES];
    for (size_t i = 0; i < p->n_memory; i++)
        files[i] = (struct nsbox_cgroup_file){p->memory[i].file, p->memory[i].value};
    if (p->n_memory && nsbox_cgroup_write_memory(cg, files, p->n_memory, e) < 0)
        return nsbox_err_wrap(e, "linux.resources.memory");
    return 0;
}

int nsbox_ociplace_save(const char *dir, const struct nsbox_cgroup *cg, struct nsbox_err *e)
{
    static char text[(NSBOX_CG_V1_MAX + 1) * (PATH_MAX + 1)];
    char path[PATH_MAX + 16];
    size_t used = 0;
    if (cg->version == 2)
        used = (size_t)snprintf(text, sizeof text, "%s\n", cg->path);
    for (size_t i = 0; cg->version == 1 && i < cg->n_v1; i++)
        used += (size_t)snprintf(text + used, sizeof text - used, "%s\n", cg->v1[i].path);
    snprintf(path, sizeof path, "%s/%s", dir, NSBOX_OCI_CGROUPS_FILE);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return nsbox_err_sys(e, "%s", path);
    int r = nsbox_pwrite_all(fd, text, used, 0);
    close(fd);
    return r < 0 ? nsbox_err_sys(e, "write %s", path) : 0;
}

int nsbox_ociplace_remove(const char *dir, struct nsbox_err *e)
{
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/%s", dir, NSBOX_OCI_CGROUPS_FILE);
    FILE *f = fopen(path, "re");
    if (!f)
        return errno == ENOENT ? 0 : nsbox_err_sys(e, "%s", path);
    char line[PATH_MAX + 2];
    int r = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        /* only what create wrote: a cgroup below the hierarchies, never a '..' */
        if (strncmp(line, "/sys/fs/cgroup/", 15) || strstr(line, "/..") || strstr(line, "/./"))
            continue;
        if (rmdir(line) < 0 && errno != ENOENT && r == 0)
            r = nsbox_err_sys(e, "cgroup %s was left in place", line);
    }
    fclose(f);
    return r;
}
