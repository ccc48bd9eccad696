/* Safe path resolution inside a root (docs/architecture.md: a path is resolved
 * inside the root and never followed out of it).
 *
 * Every file operation the host performs on a sandbox's behalf (file transfer, `nsbox cp`, rootfs
 * assembly) names a path that the sandbox, or an image, controls. A plain openat() follows
 * symlinks and `..` wherever they lead, so a hostile sandbox can plant /workspace/x -> /etc/shadow
 * or swap a directory for a symlink between a check and a use (CVE-2021-30465,
 * CVE-2025-31133). The functions here resolve every path as if the root were "/": absolute
 * symlinks restart at the root, `..` stops at the root, magic links (/proc/<pid>/root, fd/N)
 * are refused, and the answer is an fd, so there is no window between resolving and using.
 *
 * Two backends, same semantics: openat2(RESOLVE_IN_ROOT) (Linux 5.6+), and, where openat2 is
 * missing or blocked by a seccomp filter, a component-by-component walker that never lets the
 * kernel resolve a symlink or `..` (see safepath.c).
 *
 * All paths are interpreted relative to rootfd; a leading '/' means the root. */
#ifndef NSBOX_SAFEPATH_H
#define NSBOX_SAFEPATH_H

#include "nsbox.h"

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* `how` bits for nsbox_sp_open() and nsbox_sp_open_parent().
 * NOFOLLOW_ANY: no symlink anywhere in the path (ELOOP); with O_PATH|O_NOFOLLOW a trailing
 *   symlink is returned itself, as open(2) does.
 * NO_XDEV: never cross a mount point (EXDEV).
 * BENEATH: fail with EXDEV, instead of clamping at the root, when the path or a symlink is
 *   absolute or climbs above the root. */
#define NSBOX_SP_NOFOLLOW_ANY 0x1u
#define NSBOX_SP_NO_XDEV 0x2u
#define NSBOX_SP_BENEATH 0x4u

/* Longest symlink chain followed in one resolution, as the kernel's MAXSYMLINKS. */
#define NSBOX_SP_MAX_SYMLINKS 40

/* Pure check of a user-given path of len bytes: not empty, no NUL byte inside len, len <
 * PATH_MAX, every component at most NAME_MAX bytes. `..` is allowed (it can never climb above
 * the root). Fails with NSBOX_E_INVALID (sys_errno EINVAL or ENAMETOOLONG). */
int nsbox_sp_validate(const char *path, size_t len, struct nsbox_err *e);

/* Pure lexical normalization of a C string into a root-relative path in out[n]:
 * "a/./b//c/../d" -> "a/b/d", "/../../x" -> "x", "" or "/" -> ".". The result never starts with
 * '/', has no "." or ".." components, no empty components and no trailing '/'. Use it for display
 * and for paths that contain no symlinks (it does not know about them: "link/.." is the root
 * here but the link's parent directory for the kernel). Returns the length written (without the
 * NUL), or < 0 (invalid path per nsbox_sp_validate, except that "" is accepted; or out too
 * small: ENAMETOOLONG). */
int nsbox_sp_normalize(const char *in, char *out, size_t n, struct nsbox_err *e);

/* Open path inside rootfd, as open(2) with flags and mode would if rootfd were "/". O_CLOEXEC
 * is always added. O_NOFOLLOW applies to the last component only, as in open(2); intermediate
 * symlinks are followed inside the root unless how has NSBOX_SP_NOFOLLOW_ANY. With O_CREAT and
 * no O_EXCL a dangling trailing symlink is followed, and the file created, inside the root.
 * Returns the new fd, or < 0 with sys_errno the errno (ENOENT also sets NSBOX_E_NOTFOUND; ELOOP:
 * a refused symlink or magic link, or a chain over NSBOX_SP_MAX_SYMLINKS; EXDEV: NO_XDEV or
 * BENEATH refused the path; EAGAIN: renames kept racing the lookup).
 * Reading a file the sandbox controls: pass O_NONBLOCK and check fstat() for S_ISREG before
 * reading, as a FIFO planted at the path would otherwise block the open forever. */
int nsbox_sp_open(int rootfd, const char *path, int flags, mode_t mode, unsigned how,
                  struct nsbox_err *e);

/* Create the missing directories of path inside rootfd (created ones get mode, minus umask),
 * like `mkdir -p`, without following any symlink: a symlink or non-directory where a directory
 * is expected fails with ENOTDIR, naming the component. `..` is resolved lexically (safe, as no
 * symlink is allowed) and clamped at the root. If out_fd is not NULL it receives an
 * O_PATH|O_DIRECTORY fd of the final directory (usable as dirfd for *at() calls). */
int nsbox_sp_mkdir_p(int rootfd, const char *path, mode_t mode, int *out_fd, struct nsbox_err *e);

/* Resolve the parent of path inside rootfd (as nsbox_sp_open with how) and copy the final
 * component into leaf[leafn] (NAME_MAX + 1 is always enough). Returns an O_PATH|O_DIRECTORY fd
 * of the parent. Use it with unlinkat/renameat/mkdirat/fstatat(AT_SYMLINK_NOFOLLOW)/
 * openat(O_NOFOLLOW) so that an operation on the leaf acts on the leaf itself and never on
 * whatever a symlink swapped in there points to. A path without a final name ("/", ".", "a/..",
 * "a/.") fails with EINVAL: removing or renaming it would act on a directory the path does not
 * name. */
int nsbox_sp_open_parent(int rootfd, const char *path, unsigned how, char *leaf, size_t leafn,
                         struct nsbox_err *e);

/* Rootfs assembly: create (if missing) and open the mount target path inside rootfd as an
 * O_PATH fd, a directory if dir else a non-directory (an empty regular file when created, mode
 * 0755/0644). No symlink is accepted anywhere in the path, neither as the target nor as a
 * parent, and `..` is refused, so mounting onto /proc/self/fd/<fd> or with move_mount(fd) can
 * only land inside the root. Errors name the offending component, e.g. "/dev is a symlink;
 * refusing to mount over it" (NSBOX_E_INVALID, sys_errno ELOOP); callers add "image: ". The
 * root itself ("/", ".") is not a valid target (EINVAL). */
int nsbox_sp_mount_target(int rootfd, const char *path, bool dir, struct nsbox_err *e);

/* ---- backend selection: for tests and `nsbox info` ----------------------------------------- */
enum nsbox_sp_backend {
    NSBOX_SP_BACKEND_AUTO = 0, /* openat2 when the kernel has it (probed once), else the walker */
    NSBOX_SP_BACKEND_OPENAT2,  /* openat2 only (fails with ENOSYS where missing) */
    NSBOX_SP_BACKEND_WALK,     /* the component-by-component fallback walker */
};

/* Process-wide; returns the previous setting. Tests use it to run the same suite on both
 * backends. Setting AUTO forgets the cached probe, so that a process that installed a seccomp
 * filter since can probe again. */
enum nsbox_sp_backend nsbox_sp_set_backend(enum nsbox_sp_backend b);
/* Whether openat2 works here (not missing, not blocked by seccomp). */
bool nsbox_sp_have_openat2(void);

/* Change the working directory to path resolved inside the process's own root ("/"), with no
 * magic links: a cwd given as /proc/self/fd/N, or a symlink planted to one, cannot put a process
 * in a directory outside its root (CVE-2024-21626). All descriptors to outside directories must
 * be closed before, this checks only the path. */
int nsbox_sp_chdir_in_root(const char *path, struct nsbox_err *e);

#endif
