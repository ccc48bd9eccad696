/* Internals of the file operations (service/files*.c), shared between files.c (paths, messages,
 * read/write/stat/mkdir), files_tree.c (list, recursive remove) and files_copy.c (the bounded
 * copy of a write). Not a public interface. */
#ifndef NSBOX_FILES_IMPL_H
#define NSBOX_FILES_IMPL_H

#include "files.h"

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

/* Paths in messages are cut to this many bytes (they come from the sandbox or the client). */
#define FILES_DISP_MAX 200

struct files_ctx {
    int ws; /* the workspace: every lookup starts here */
    const struct nsbox_state *st;
    struct nsbox_files_opts opts;
    bool chown; /* privileged: new files and directories are given to the sandbox's user */
    uid_t uid;
    gid_t gid;
    char rel[PATH_MAX];             /* the request's path, relative to the workspace */
    char disp[FILES_DISP_MAX + 32]; /* "/workspace/<rel>", sanitized, for messages */
};

/* Copy s (len bytes) into out[n] for a message, by policy/shown.h's rule: control characters
 * (C1 too) and invalid UTF-8 become '?', at most max bytes then "...". */
void files_disp(char *out, size_t n, const char *s, size_t len, size_t max);
/* s as valid UTF-8 for a JSON string: invalid bytes become U+FFFD. out needs 3 * len + 1. */
void files_utf8(char *out, size_t n, const char *s, size_t len);

/* Fill e for a failed operation on c->disp, by errno: ENOENT is NSBOX_E_NOTFOUND
 * "no such file: PATH"; path-shaped errors (ELOOP, EXDEV, ENOTDIR, EISDIR, ...) NSBOX_E_INVALID;
 * the rest NSBOX_E_SYS. verb: "cannot read", ... Returns -1. */
int files_fail(const struct files_ctx *c, struct nsbox_err *e, int err, const char *verb);
/* As files_fail, naming another path (relative to the workspace) than the request's. */
int files_fail_at(const struct files_ctx *c, struct nsbox_err *e, int err, const char *verb,
                  const char *rel);

/* Give a directory or file nsbox just created to the sandbox's user (privileged only), mode
 * exactly `mode` (no umask). fd: a descriptor of it that allows fchmod (not O_PATH). */
int files_adopt_fd(const struct files_ctx *c, int fd, mode_t mode);

/* Mount id of fd (statx STATX_MNT_ID; st_dev where missing), to refuse crossing mounts. */
int files_mnt_id(int fd, uint64_t *id);

const char *files_type_name(mode_t m);
/* Add type, size, mode, mtime (and target for a symlink read at dirfd/name) to obj. */
void files_stat_json(cJSON *obj, const struct stat *sb, int dirfd, const char *name);
/* The text of symlink name in dirfd, as valid UTF-8 (not followed): false when it cannot be
 * read. stat's and list's "target". */
#define FILES_LINK_TEXT_MAX (3 * PATH_MAX + 1)
bool files_link_text(int dirfd, const char *name, char out[FILES_LINK_TEXT_MAX]);

/* As many entries as one reply holds, from cursor ("" the start; else a reply's "next"). */
int files_list(struct files_ctx *c, const char *cursor, cJSON *reply, struct nsbox_err *e);
/* Remove dirfd/name, a directory, and everything below it, never following a symlink nor
 * crossing a mount point. */
int files_remove_tree(struct files_ctx *c, int dirfd, const char *name, struct nsbox_err *e);

/* Copy everything from in (the client's descriptor) to out (a new regular file at offset 0),
 * in bounded memory: holes of a sparse regular source stay holes; a pipe is spliced; other
 * streams go through a small buffer with c->opts.stall_ms of patience. Fails when more than
 * c->opts.max_write_bytes arrive. *written: the bytes in the file at the end. */
int files_copy_in(const struct files_ctx *c, int in, int out, uint64_t *written,
                  struct nsbox_err *e);

#endif
