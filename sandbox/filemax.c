#include "filemax.h"
#include "cleanup.h"
#include "config.h"
#include "filetable.h"
#include "paths.h"
#include "text.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/sysinfo.h>
#include <unistd.h>

#define FILE_MAX "/proc/sys/fs/file-max"
/* In the runtime directory, which a boot empties: the failure to raise was said. */
#define FAILURE_SAID "file-max-not-raised"

static struct nsbox_note note;

void nsbox_filemax_set_note(nsbox_note_fn *fn, void *ctx)
{
    note = (struct nsbox_note){fn, ctx};
}

bool nsbox_filemax_writable(void)
{
    return access(FILE_MAX, W_OK) == 0;
}

static int host_section(const cJSON *root, void *keep, struct nsbox_err *e)
{
    return nsbox_filetable_config_from_json(root, keep, e);
}

int nsbox_filemax_config_keep(bool *keep, struct nsbox_err *e)
{
    *keep = false;
    return nsbox_config_section(host_section, keep, NULL, e);
}

/* The mark's path in mark; false where there is no runtime directory. */
static bool mark_path(char *mark, size_t n)
{
    char dir[PATH_MAX];
    struct nsbox_err e;
    if (nsbox_paths_runtime_dir(dir, sizeof dir, &e) < 0)
        return false;
    int len = snprintf(mark, n, "%s/%s", dir, FAILURE_SAID);
    return len > 0 && (size_t)len < n;
}

/* True the first time of a boot (the mark made now), and when no mark can be made: a note
 * said twice is better than one lost. */
static bool first_failure(const char *mark)
{
    if (!mark[0])
        return true;
    int fd = open(mark, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd >= 0)
        close(fd);
    return fd >= 0 || errno != EEXIST;
}

void nsbox_filemax_raise_at(const char *path)
{
    char mark[PATH_MAX + sizeof FAILURE_SAID];
    if (!mark_path(mark, sizeof mark))
        mark[0] = '\0';
    /* A table said to be not raisable stays so for the boot (a read-only /proc/sys): every
     * later sandbox, silent caller or not, skips the read, the config and the failing open.
     * Before the mark, a silent caller does that work each time, as only a caller that can
     * say the note may make it. */
    if (mark[0] && faccessat(AT_FDCWD, mark, F_OK, AT_SYMLINK_NOFOLLOW) == 0)
        return;
    long cur;
    struct sysinfo si;
    struct nsbox_err e;
    bool keep = false;
    if (nsbox_text_read_long(path, &cur) < 0 || sysinfo(&si) < 0)
        return;
    uint64_t mem = (uint64_t)si.totalram * (si.mem_unit ? si.mem_unit : 1);
    if (cur < 0 || !nsbox_filetable_fillable((uint64_t)cur, mem))
        return;
    /* the config file only for a table to raise, the rare case; a broken file was refused
     * before any sandbox is made (cli/main.c), and keep is opt-in */
    if (nsbox_filemax_config_keep(&keep, &e) < 0 || keep)
        return;
    char text[32];
    int n = snprintf(text, sizeof text, "%ld\n", (long)NSBOX_FILETABLE_RAISED);
    cleanup_close int fd = open(path, O_WRONLY | O_CLOEXEC);
    ssize_t w = fd >= 0 ? write(fd, text, (size_t)n) : -1;
    if (w == n) {
        nsbox_note_say(&note,
                       "note: raised fs.file-max from %ld to %ld: sandboxes could have filled "
                       "the host's table of open files (every process but root's would get "
                       "ENFILE); each sandbox's memory limit bounds its files instead, as "
                       "systemd sets it at boot (docs/security.md, finding 22; to leave it: "
                       "\"host\": {\"file_max\": \"keep\"} in the config file)",
                       cur, (long)NSBOX_FILETABLE_RAISED);
        return;
    }
    int err = w < 0 ? errno : EIO; /* a short write sets no errno */
    /* the mark only where the note reaches someone: a silent caller must not use it up */
    if (note.fn && first_failure(mark))
        nsbox_note_say(&note,
                       "note: fs.file-max is %ld, fewer open files than this host's memory "
                       "could hold, and nsbox could not raise it (%s: %s): sandboxes can fill "
                       "the host's table; fix: raise it where it can be written (sysctl -w "
                       "fs.file-max=%ld on the host) (docs/security.md, finding 22; said once "
                       "a boot)",
                       cur, path, strerror(err), (long)NSBOX_FILETABLE_RAISED);
}

void nsbox_filemax_raise(void)
{
    nsbox_filemax_raise_at(FILE_MAX);
}
