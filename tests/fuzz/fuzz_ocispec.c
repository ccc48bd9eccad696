/* Fuzz the OCI bundle's config.json reader (policy/ocispec.c): any byte string. Besides crashes
 * and leaks (ASan), it checks what nsbox-oci relies on when a config parses: a NULL-terminated,
 * non-empty argv, env entries with a '=', absolute cwd and mount destinations, counts in bounds,
 * idmapped mounts' lines within the container's ids, hooks with an absolute path and an argv,
 * whose kept text reads back to the same hooks; no accepted text holds a NUL, raw or escaped,
 * at which cJSON would have cut a string. */
#include "nsbox.h"
#include "ocispec.h"
#include "spec.h"

#include <stdint.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct nsbox_ocispec c;
    struct nsbox_err e;
    if (nsbox_ocispec_parse((const char *)data, size, &c, &e) < 0) {
        if (c.args || c.n_env)
            abort(); /* a failure frees what it had */
        return 0;
    }
    if (nsbox_spec_json_check_nul((const char *)data, size, &e) < 0)
        abort();
    if (c.n_args == 0 || c.n_args > NSBOX_OCISPEC_ARGS_MAX || !c.args[0] || !c.args[0][0] ||
        c.args[c.n_args] || c.n_env > NSBOX_OCISPEC_ENV_MAX ||
        c.n_mounts > NSBOX_OCISPEC_MOUNTS_MAX || c.n_namespaces > NSBOX_OCISPEC_NS_MAX ||
        c.cwd[0] != '/' || !c.root_path[0])
        abort();
    for (size_t i = 0; i < c.n_env; i++)
        if (!strchr(c.env[i], '=') || c.env[i][0] == '=')
            abort();
    for (size_t i = 0; i < c.n_mounts; i++) {
        const struct nsbox_ocispec_mount *m = &c.mounts[i];
        if (m->destination[0] != '/' || m->n_uid_map > NSBOX_IDMAP_LINES ||
            m->n_gid_map > NSBOX_IDMAP_LINES || !m->n_uid_map != !m->n_gid_map ||
            (m->n_uid_map && !m->idmap))
            abort();
        /* the floor: an idmapped mount's lines stay within the container's ids on both sides */
        for (unsigned k = 0; k < m->n_uid_map + m->n_gid_map; k++) {
            const struct nsbox_idmap *l =
                k < m->n_uid_map ? &m->uid_map[k] : &m->gid_map[k - m->n_uid_map];
            if (!l->count || (uint64_t)l->inside + l->count > NSBOX_OCISPEC_ID_MAX + 1ull ||
                (uint64_t)l->outside + l->count > NSBOX_OCISPEC_ID_MAX + 1ull)
                abort();
        }
    }
    if (c.n_groups > NSBOX_OCISPEC_GROUPS_MAX || c.n_rlimits > NSBOX_OCISPEC_RLIMITS_MAX ||
        c.umask > 0777 || c.hooks.n > NSBOX_OCISPEC_HOOKS_MAX || c.env[c.n_env] || !c.hooks_json)
        abort();
    for (size_t i = 0; i < c.n_rlimits; i++)
        if (c.rlimits[i].soft > c.rlimits[i].hard)
            abort();
    for (size_t i = 0; i < c.hooks.n; i++)
        if (c.hooks.h[i].path[0] != '/' || !c.hooks.h[i].args || !c.hooks.h[i].args[0] ||
            !c.hooks.h[i].env || c.hooks.h[i].timeout < 0)
            abort();
    /* what create keeps for start and delete reads back to the same hooks */
    static struct nsbox_ocispec_hooks h;
    if (nsbox_ocispec_hooks_parse(c.hooks_json, &h, &e) < 0 || h.n != c.hooks.n)
        abort();
    nsbox_ocispec_hooks_free(&h);
    (void)nsbox_ocispec_check_floor(&c, &e);
    (void)nsbox_ocispec_check_namespaces(&c, &e);
    /* what create derives from an accepted config: the memory files (bounded, on both
     * versions) and each mount's propagation steps (at most two; never shared first) */
    for (int v = 1; v <= 2; v++) {
        struct nsbox_ocicgroup_write w[NSBOX_OCICGROUP_MEM_WRITES];
        char note[512];
        size_t n = 0;
        if (nsbox_ocicgroup_memory_plan(&c.memory, v, true, w, &n, note, sizeof note, &e) == 0 &&
            n > NSBOX_OCICGROUP_MEM_WRITES)
            abort();
    }
    for (size_t i = 0; i < c.n_mounts; i++) {
        struct nsbox_ocispec_mount_opts o;
        unsigned long steps[2];
        nsbox_ocispec_mount_opts(&c.mounts[i], &o);
        size_t n = nsbox_propagation_steps(&o.propagation, o.bind, o.recursive, steps);
        if (n > 2 || (n && (steps[0] & MS_SHARED)))
            abort();
    }
    nsbox_ocispec_free(&c);
    return 0;
}
