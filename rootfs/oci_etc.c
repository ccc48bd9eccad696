/* The /etc nsbox writes into an OCI image: see oci_etc.h. */
#include "oci_etc.h"
#include "cleanup.h"
#include "idmap.h"
#include "image.h"
#include "oci_layer.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Read a regular file inside the root (symlinks resolved inside it), at most 1 MiB. */
static char *read_text_in_root(int root_fd, const char *path)
{
    struct open_how how = {.flags = O_RDONLY | O_CLOEXEC,
                           .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS};
    cleanup_close int fd = nsbox_openat2(root_fd, path, &how);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > (1 << 20))
        return NULL;
    char *buf = malloc((size_t)st.st_size + 2);
    if (!buf)
        return NULL;
    size_t n = nsbox_read_bounded(fd, buf, (size_t)st.st_size + 2);
    buf[n] = '\0';
    return buf;
}

int nsbox_oci_etc_write(int view_fd, int root_fd, struct nsbox_err *e)
{
    cleanup_close int etc = nsbox_oci_layer_open_dir(root_fd, "etc", true);
    if (etc < 0)
        return nsbox_err_sys(e, "cannot create the image's /etc");
    const char *shell =
        nsbox_image_check_exec_in_root(view_fd, "bin/bash") == 0 ? "/bin/bash" : "/bin/sh";
    cleanup_free char *passwd = read_text_in_root(view_fd, "etc/passwd");
    cleanup_free char *group = read_text_in_root(view_fd, "etc/group");
    cleanup_free char *np =
        passwd ? nsbox_image_passwd_add_appuser(passwd, shell) : nsbox_image_passwd_generate(shell);
    cleanup_free char *ng =
        group ? nsbox_image_group_add_appuser(group) : nsbox_image_group_generate();
    if (!np || !ng)
        return nsbox_err_set(e, NSBOX_E_NOMEM, ENOMEM, "out of memory");
    if (nsbox_image_write_at(etc, "passwd", np, strlen(np), 0644, e) < 0 ||
        nsbox_image_write_at(etc, "group", ng, strlen(ng), 0644, e) < 0 ||
        nsbox_image_write_at(etc, "hosts", nsbox_image_hosts_text, strlen(nsbox_image_hosts_text),
                             0644, e) < 0 ||
        nsbox_image_write_at(etc, "resolv.conf", nsbox_image_resolv_text,
                             strlen(nsbox_image_resolv_text), 0644, e) < 0)
        return nsbox_err_wrap(e, "the image's /etc");
    /* files of the image's root, as the layers' are (NSBOX_IMAGE_ID_BASE) */
    static const char *const written[] = {"passwd", "group", "hosts", "resolv.conf"};
    for (size_t i = 0; geteuid() == 0 && i < sizeof written / sizeof written[0]; i++)
        if (fchownat(etc, written[i], nsbox_idmap_image_owner(0), nsbox_idmap_image_owner(0),
                     AT_SYMLINK_NOFOLLOW) < 0)
            return nsbox_err_sys(e, "the image's /etc/%s: chown", written[i]);
    /* the root directory last: its owner, image root, says that the owners are kept (a
     * sandbox then sees them through an idmapped mount) */
    if (geteuid() == 0 && fchownat(root_fd, "", nsbox_idmap_image_owner(0),
                                   nsbox_idmap_image_owner(0), AT_EMPTY_PATH) < 0)
        return nsbox_err_sys(e, "the image's root: chown");
    return 0;
}
