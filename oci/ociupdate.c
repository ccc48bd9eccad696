/* nsbox-oci update --resources FILE|-: new memory, swap, cpu and pids limits for a running
 * container, written by its monitor (which owns the cgroup) through nsbox's cgroup layer. */
#include "ocirt.h"
#include "cgroup.h"
#include "cleanup.h"
#include "ociproc.h"
#include "util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The whole of stdin, bounded as a file is. */
static char *read_stdin(struct nsbox_err *e)
{
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    ssize_t n;
    while (buf && (n = read(0, buf + len, cap - len - 1)) != 0) {
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 || len + (size_t)n >= NSBOX_SMALL_FILE_MAX) {
            free(buf);
            nsbox_err_set(e, NSBOX_E_INVALID, n < 0 ? errno : EFBIG,
                          "update: cannot read the "
                          "resources from stdin");
            return NULL;
        }
        len += (size_t)n;
        if (len + 1 == cap) {
            char *more = realloc(buf, cap *= 2);
            if (!more)
                free(buf);
            buf = more;
        }
    }
    if (!buf) {
        nsbox_err_sys(e, "malloc");
        return NULL;
    }
    buf[len] = '\0';
    return buf;
}

/* -1 (no limit) for memory or pids gives the floor create gives a config without them, the
 * default instance type's (docs/decisions.md, "With cgroupsPath the limits are the config's;
 * memory and pids keep a floor"): no update makes a container unbounded. */
static int floor_unlimited(struct nsbox_cgroup_update *u, struct nsbox_err *e)
{
    if (!(u->has_memory && !u->memory_bytes) && !(u->has_pids && !u->pids))
        return 0;
    static struct nsbox_spec s;
    nsbox_spec_init(&s);
    if (nsbox_spec_validate(&s, e) < 0) {
        nsbox_spec_free(&s);
        return -1;
    }
    if (u->has_memory && !u->memory_bytes)
        u->memory_bytes = s.limits.memory_bytes;
    if (u->has_pids && !u->pids)
        u->pids = s.limits.pids;
    nsbox_spec_free(&s);
    return 0;
}

int nsbox_ociupdate_update(const struct nsbox_ocirt *g, int argc, char **argv, struct nsbox_err *e)
{
    const char *file = NULL;
    int i = 1;
    for (; i < argc && argv[i][0] == '-' && argv[i][1]; i++) {
        if (!strcmp(argv[i], "--resources") || !strcmp(argv[i], "-r"))
            file = i + 1 < argc ? argv[++i] : NULL;
        else if (!strncmp(argv[i], "--resources=", 12))
            file = argv[i] + 12;
        else
            return nsbox_err_invalid(e,
                                     "update: only --resources FILE|- is supported (%s is "
                                     "not): give the limits as runc's resources JSON",
                                     NSBOX_SHOW(argv[i])),
                   1;
    }
    if (!file || i != argc - 1)
        return nsbox_err_invalid(e, "update: give --resources FILE|- and a container id"), 1;
    struct nsbox_ocistate s;
    if (nsbox_ocistate_read_live(g, argv[i], &s, e) < 0)
        return 1;
    cleanup_free char *text = NULL;
    if (!strcmp(file, "-"))
        text = read_stdin(e);
    else if (nsbox_read_small(file, &text, e) == 1)
        return nsbox_err_set(e, NSBOX_E_NOTFOUND, ENOENT, "--resources %s does not exist", file), 1;
    struct nsbox_ociproc_resources r;
    if (!text || nsbox_ociproc_parse_resources(text, strlen(text), &r, e) < 0)
        return 1;
    if (r.other)
        fprintf(stderr, "nsbox-oci: update: only memory.limit, memory.swap, cpu.quota, "
                        "cpu.period and pids.limit are applied; the other limits given are "
                        "ignored\n");
    struct nsbox_cgroup_update u = {.has_memory = r.has_memory,
                                    .has_swap = r.has_swap,
                                    .swap_bytes = r.swap_bytes,
                                    .has_cpu = r.has_cpu,
                                    .keep_quota = r.has_cpu && !r.has_quota,
                                    .has_pids = r.has_pids,
                                    .memory_bytes = r.memory_bytes,
                                    .cpu_quota_us = r.cpu_quota_us,
                                    .cpu_period_us = r.cpu_period_us,
                                    .pids = r.pids};
    if (floor_unlimited(&u, e) < 0)
        return 1;
    struct nsbox_ocictl_msg m = {.op = "update", .len = sizeof u}, reply;
    char answer[NSBOX_ERR_MSG_MAX];
    if (nsbox_ocictl_ask(g, &s, &m, &u, &reply, answer, sizeof answer, e) < 0) {
        nsbox_err_wrap(e, "update %s", s.id);
        return 1;
    }
    return 0;
}
