/* Workspace decisions (see wsplan.h). */
#include "wsplan.h"

#include "spec.h"
#include "cfgsection.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

int nsbox_wsplan_choose(bool dir_given, enum nsbox_ws_fs fs, bool ext4_usable)
{
    if (dir_given)
        return NSBOX_WS_DIR;
    if (fs == NSBOX_WS_FS_TMPFS)
        return NSBOX_WS_TMPFS;
    if (ext4_usable)
        return NSBOX_WS_EXT4;
    return fs == NSBOX_WS_FS_EXT4 ? -1 : NSBOX_WS_TMPFS;
}

const char *nsbox_wsplan_kind_name(enum nsbox_ws_kind k)
{
    switch (k) {
    case NSBOX_WS_DIR:
        return "directory";
    case NSBOX_WS_EXT4:
        return "ext4";
    case NSBOX_WS_TMPFS:
        return "tmpfs";
    }
    return "unknown";
}

uint64_t nsbox_wsplan_inodes(uint64_t disk_bytes)
{
    uint64_t n = disk_bytes / NSBOX_WS_BYTES_PER_INODE;
    if (n < NSBOX_WS_INODES_MIN)
        n = NSBOX_WS_INODES_MIN;
    /* ext4 counts inodes in 32 bits */
    if (n > UINT32_MAX / 2)
        n = UINT32_MAX / 2;
    return n;
}

static int fits(int r, size_t n, struct nsbox_err *e)
{
    if (r < 0 || (size_t)r >= n)
        return nsbox_err_set(e, NSBOX_E_INVALID, ENAMETOOLONG, "workspace: buffer too small");
    return 0;
}

int nsbox_wsplan_tmpfs_options(uint64_t disk_bytes, char *out, size_t n, struct nsbox_err *e)
{
    if (disk_bytes == 0)
        return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL, "workspace: a disk limit of 0 bytes");
    return fits(snprintf(out, n, "mode=0755,size=%" PRIu64 ",nr_inodes=%" PRIu64, disk_bytes,
                         nsbox_wsplan_inodes(disk_bytes)),
                n, e);
}

int nsbox_wsplan_template_name(uint64_t disk_bytes, char *out, size_t n, struct nsbox_err *e)
{
    return fits(snprintf(out, n, "workspace-v%d-%" PRIu64 ".ext4", NSBOX_WS_TEMPLATE_VERSION,
                         disk_bytes),
                n, e);
}

int nsbox_wsplan_mkfs_argv(const char *prog, const char *path, uint64_t disk_bytes,
                           struct nsbox_ws_mkfs *m, struct nsbox_err *e)
{
    if (disk_bytes == 0)
        return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL, "workspace: a disk limit of 0 bytes");
    if (fits(snprintf(m->inodes, sizeof m->inodes, "%" PRIu64, nsbox_wsplan_inodes(disk_bytes)),
             sizeof m->inodes, e) < 0)
        return -1;
    size_t k = 0;
    m->argv[k++] = (char *)prog;
    m->argv[k++] = (char *)"-q";
    m->argv[k++] = (char *)"-F";                  /* the target is a regular file */
    m->argv[k++] = (char *)"-t";
    m->argv[k++] = (char *)"ext4";
    m->argv[k++] = (char *)"-m";
    m->argv[k++] = (char *)"0";
    m->argv[k++] = (char *)"-N";
    m->argv[k++] = m->inodes;
    m->argv[k++] = (char *)"-G"; /* all group metadata together: fewer extents to copy */
    m->argv[k++] = (char *)"1024";
    m->argv[k++] = (char *)"-O";
    m->argv[k++] = (char *)"^has_journal,^resize_inode,sparse_super2";
    m->argv[k++] = (char *)"-E";
    m->argv[k++] = (char *)"lazy_itable_init=1,nodiscard,num_backup_sb=0";
    m->argv[k++] = (char *)"-e";
    m->argv[k++] = (char *)"remount-ro";
    m->argv[k++] = (char *)"-L";
    m->argv[k++] = (char *)"workspace";
    m->argv[k++] = (char *)path;
    m->argv[k] = NULL;
    return 0;
}

void nsbox_wsplan_config_init(struct nsbox_ws_config *c)
{
    c->reserve = false;
    c->fs = NSBOX_WS_FS_AUTO;
    c->min_free_bytes = NSBOX_WS_MIN_FREE_DEFAULT;
    c->min_free_percent = NSBOX_WS_MIN_FREE_PERCENT_DEFAULT;
}

uint64_t nsbox_wsplan_min_free(const struct nsbox_ws_config *c, uint64_t fs_bytes)
{
    /* no overflow: fs_bytes / 100 * percent <= fs_bytes */
    uint64_t pct = fs_bytes / 100 * c->min_free_percent + fs_bytes % 100 * c->min_free_percent / 100;
    return pct > c->min_free_bytes ? pct : c->min_free_bytes;
}

bool nsbox_wsplan_admit(const struct nsbox_ws_config *c, const struct nsbox_ws_space *s,
                        uint64_t bytes, uint64_t *missing)
{
    uint64_t need;
    if (c->reserve) {
        need = s->promised + bytes;
        if (need < bytes)
            need = UINT64_MAX; /* cannot be had */
    } else {
        need = nsbox_wsplan_min_free(c, s->fs_bytes);
    }
    if (s->avail >= need) {
        if (missing)
            *missing = 0;
        return true;
    }
    if (missing)
        *missing = need - s->avail;
    return false;
}

int nsbox_wsplan_config_from_json(const cJSON *root, struct nsbox_ws_config *c,
                                  struct nsbox_err *e)
{
    const cJSON *ws;
    if (nsbox_cfgsection_find(root, "workspace", NULL, &ws, e) < 0)
        return -1;
    struct nsbox_ws_config out = *c;
    int reserve = -1, overcommit = -1; /* -1: not given */
    const cJSON *it;
    cJSON_ArrayForEach(it, ws)
    {
        if (!strcmp(it->string, "fs")) {
            const char *v = cJSON_IsString(it) ? it->valuestring : "";
            if (!strcmp(v, "auto"))
                out.fs = NSBOX_WS_FS_AUTO;
            else if (!strcmp(v, "ext4"))
                out.fs = NSBOX_WS_FS_EXT4;
            else if (!strcmp(v, "tmpfs"))
                out.fs = NSBOX_WS_FS_TMPFS;
            else
                return nsbox_cfgsection_bad(e, "workspace", "fs",
                                            "must be \"auto\", \"ext4\" or \"tmpfs\"");
        } else if (!strcmp(it->string, "reserve") || !strcmp(it->string, "overcommit")) {
            if (!cJSON_IsBool(it))
                return nsbox_cfgsection_bad(e, "workspace", it->string, "must be true or false");
            int *given = !strcmp(it->string, "reserve") ? &reserve : &overcommit;
            *given = cJSON_IsTrue(it);
        } else if (!strcmp(it->string, "min_free")) {
            uint64_t v = 0;
            struct nsbox_err ignored; /* the message below says what min_free must be */
            bool ok = cJSON_IsString(it) ? nsbox_spec_parse_size(it->valuestring, &v, &ignored) == 0
                                         : cJSON_IsNumber(it) && it->valuedouble >= 0 &&
                                               it->valuedouble < 0x1p63 &&
                                               (double)(uint64_t)it->valuedouble == it->valuedouble;
            if (!ok)
                return nsbox_cfgsection_bad(e, "workspace", "min_free",
                                            "must be a size (\"1GiB\", \"512MiB\") or a number "
                                            "of bytes");
            out.min_free_bytes = cJSON_IsString(it) ? v : (uint64_t)it->valuedouble;
        } else if (!strcmp(it->string, "min_free_percent")) {
            double d = cJSON_IsNumber(it) ? it->valuedouble : -1;
            if (!(d >= 0 && d <= NSBOX_WS_MIN_FREE_PERCENT_MAX) || (double)(unsigned)d != d)
                return nsbox_cfgsection_bad(e, "workspace", "min_free_percent",
                                            "must be an integer from 0 to 90");
            out.min_free_percent = (unsigned)d;
        } else {
            return nsbox_cfgsection_unknown(e, "workspace", it->string,
                                            "fs, reserve, min_free, min_free_percent, "
                                            "overcommit");
        }
    }
    if (reserve >= 0 && overcommit >= 0 && reserve == overcommit)
        return nsbox_cfgsection_bad(e, "workspace", "overcommit",
                                    "contradicts workspace.reserve (overcommit is its older, "
                                    "inverted name: keep reserve only)");
    if (reserve >= 0)
        out.reserve = reserve;
    else if (overcommit >= 0)
        out.reserve = !overcommit;
    *c = out;
    return 0;
}
