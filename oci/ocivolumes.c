/* nsbox-oci --idmap-volumes=engine: the binds of the engine's named volumes idmapped as a bind
 * that asks for it is (docs/oci.md, "Idmapped volumes"; docs/decisions.md, "An engine's named
 * volumes idmapped on the administrator's word"). The paths say which binds those are
 * (policy/enginevol.h); here they are opened below the engine's data root with no symlink on
 * the way, and each checked to be the very directory the config names: the root, that the data
 * root is the one this container's root is in; a volume, that its path leads there and nowhere
 * else, and that it is no mount point. What fails any of it is left as it was, a plain bind:
 * nothing is refused. */
#include "ocirt.h"
#include "enginevol.h"
#include "mounts.h"
#include "util.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The volume's directory, rel ("volumes/<name>/_data") below the data root, on the mount of
 * volumes/<name>: a local volume made with mount options (a bind of any host directory, NFS)
 * has a mount on _data, which may be anything of the host's, not a directory the engine made. */
static int open_volume(int data_root, char *rel)
{
    char *slash = strrchr(rel, '/');
    *slash = '\0';
    int parent = nsbox_open_dir(data_root, rel, 0);
    *slash = '/';
    if (parent < 0)
        return -1;
    int fd = nsbox_open_dir(parent, slash + 1, RESOLVE_NO_XDEV);
    close(parent);
    return fd;
}

/* Is fd the directory path leads to (symlinks followed, as a plain bind of it would)? */
static bool same_dir(int fd, const char *path)
{
    struct stat want, got;
    return stat(path, &want) == 0 && fstat(fd, &got) == 0 && S_ISDIR(got.st_mode) &&
           nsbox_same_inode(&want, &got);
}

size_t nsbox_ocivolumes_mark(const char *root, const struct nsbox_rootfs_mount *mounts, size_t n,
                             struct nsbox_rootfs_idmap *idmaps)
{
    struct nsbox_enginevol_root *r = malloc(sizeof *r);
    size_t marked = 0;
    int data_root = -1, own = -1;
    if (r && nsbox_enginevol_root(root, r) &&
        (data_root = nsbox_open_dir(-1, r->data_root, 0)) >= 0 &&
        (own = nsbox_open_dir(data_root, r->root_rel, 0)) >= 0 && same_dir(own, root)) {
        for (size_t i = 0; i < n; i++) {
            char rel[PATH_MAX];
            if (strcmp(mounts[i].type, "bind") || mounts[i].source_is_file || idmaps[i].idmap ||
                !nsbox_enginevol_volume(r, mounts[i].source, rel, sizeof rel))
                continue;
            int fd = open_volume(data_root, rel);
            if (fd >= 0 && !same_dir(fd, mounts[i].source)) {
                close(fd);
                fd = -1;
            }
            if (fd < 0)
                continue;
            idmaps[i] =
                (struct nsbox_rootfs_idmap){.idmap = true, .engine_volume = true, .source_fd = fd};
            marked++;
        }
    }
    if (own >= 0)
        close(own);
    if (data_root >= 0)
        close(data_root);
    free(r);
    return marked;
}

void nsbox_ocivolumes_close(struct nsbox_rootfs_idmap *idmaps, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (idmaps[i].engine_volume && idmaps[i].source_fd >= 0) {
            close(idmaps[i].source_fd);
            idmaps[i].source_fd = -1;
        }
}
