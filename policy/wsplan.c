/* Workspace decisions (see wsplan.h). */
#include "wsplan.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

int nsbox_ws_choose(bool dir_given, enum nsbox_ws_fs fs, bool ext4_usable)
{
    if (dir_given)
        return NSBOX_WS_DIR;
    if (fs == NSBOX_WS_FS_TMPFS)
        return NSBOX_WS_TMPFS;
    if (ext4_usable)
        return NSBOX_WS_EXT4;
    return fs == NSBOX_WS_FS_EXT4 ? -1 : NSBOX_WS_TMPFS;
}

const char *nsbox_ws_kind_name(enum nsbox_ws_kind k)
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

uint64_t nsbox_ws_inodes(uint64_t disk_bytes)
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

int nsbox_ws_tmpfs_options(uint64_t disk_bytes, char *out, size_t n, struct nsbox_err *e)
{
    if (disk_bytes == 0)
        return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL, "workspace: a disk limit of 0 bytes");
    return fits(snprintf(out, n, "mode=0755,size=%" PRIu64 ",nr_inodes=%" PRIu64, disk_bytes,
                         nsbox_ws_inodes(disk_bytes)),
                n, e);
}

int nsbox_ws_template_name(uint64_t disk_bytes, char *out, size_t n, struct nsbox_err *e)
{
    return fits(snprintf(out, n, "workspace-v%d-%" PRIu64 ".ext4", NSBOX_WS_TEMPLATE_VERSION,
                         disk_bytes),
                n, e);
}

int nsbox_ws_mkfs_argv(const char *prog, const char *path, uint64_t disk_bytes,
                       struct nsbox_ws_mkfs *m, struct nsbox_err *e)
{
    if (disk_bytes == 0)
        return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL, "workspace: a disk limit of 0 bytes");
    if (fits(snprintf(m->inodes, sizeof m->inodes, "%" PRIu64, nsbox_ws_inodes(disk_bytes)),
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

void nsbox_ws_config_init(struct nsbox_ws_config *c)
{
    c->overcommit = false;
    c->fs = NSBOX_WS_FS_AUTO;
}

int nsbox_ws_config_from_json(const char *text, size_t len, struct nsbox_ws_config *c,
                              struct nsbox_err *e)
{
    cJSON *root = cJSON_ParseWithLength(text, len);
    if (!root || !cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL, "config: not a JSON object");
    }
    struct nsbox_ws_config out = *c;
    int ret = 0;
    const cJSON *ws = cJSON_GetObjectItemCaseSensitive(root, "workspace");
    if (ws && !cJSON_IsObject(ws)) {
        ret = nsbox_err_set(e, NSBOX_E_INVALID, EINVAL,
                            "config: key 'workspace': must be an object");
    } else if (ws) {
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
                else {
                    ret = nsbox_err_set(e, NSBOX_E_INVALID, EINVAL,
                                        "config: key 'workspace.fs': must be \"auto\", \"ext4\" "
                                        "or \"tmpfs\"");
                    break;
                }
            } else if (!strcmp(it->string, "overcommit") && cJSON_IsBool(it)) {
                out.overcommit = cJSON_IsTrue(it);
            } else if (!strcmp(it->string, "overcommit")) {
                ret = nsbox_err_set(e, NSBOX_E_INVALID, EINVAL,
                                    "config: key 'workspace.overcommit': must be true or false");
                break;
            } else {
                ret = nsbox_err_set(e, NSBOX_E_INVALID, EINVAL,
                                    "config: key 'workspace.%.64s': unknown (known: fs, overcommit)",
                                    it->string);
                break;
            }
        }
    }
    cJSON_Delete(root);
    if (ret == 0)
        *c = out;
    return ret;
}
