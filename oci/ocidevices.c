/* linux.devices: each device the floor allows (policy/ocispec.h, nsbox_ocispec_check_devices)
 * is the host's node bound at the config's path, as runc gives devices to a rootless
 * container: nothing can mknod in the container's user namespace, and a bind of the host's node
 * is that node, with its host owner and mode (the config's fileMode, uid and gid are not
 * applied: changing them would change the host's node). */
#include "ocirt.h"
#include "mounts.h"
#include "ocispec.h"

#include <errno.h>
#include <inttypes.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

int nsbox_ocidevices_mounts(const struct nsbox_ocispec *c, struct nsbox_rootfs_mount *out,
                            size_t *n, struct nsbox_err *e)
{
    *n = 0;
    for (size_t i = 0; i < c->n_devices; i++) {
        const struct nsbox_ocispec_device *d = &c->devices[i];
        const char *host = nsbox_ocispec_device_host_path(d->major, d->minor);
        struct stat st;
        if (!host) /* refused at load (nsbox_ocispec_check_devices): not reached */
            return nsbox_err_invalid(e, "linux.devices: %s was not checked", d->path);
        if (stat(host, &st) < 0 || !S_ISCHR(st.st_mode) ||
            st.st_rdev != makedev((unsigned)d->major, (unsigned)d->minor))
            return nsbox_err_set(e, NSBOX_E_UNSUPPORTED, ENODEV,
                                 "linux.devices: %s asks for c %" PRId64 ":%" PRId64
                                 ", which this host has no node for at %s (load its driver, "
                                 "e.g. modprobe fuse or tun, or drop --device)",
                                 d->path, d->major, d->minor, host);
        out[(*n)++] = (struct nsbox_rootfs_mount){
            .destination = d->path,
            .type = "bind",
            .source = host,
            .flags = MS_NOSUID | MS_NOEXEC,
            .source_is_file = true,
            .data = "",
        };
    }
    return 0;
}
