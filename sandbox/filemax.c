#include "filemax.h"
#include "cleanup.h"
#include "filetable.h"
#include "text.h"

#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/sysinfo.h>
#include <unistd.h>

#define FILE_MAX "/proc/sys/fs/file-max"

int nsbox_filemax_raise(void)
{
    long cur;
    struct sysinfo si;
    if (nsbox_text_read_long(FILE_MAX, &cur) < 0 || sysinfo(&si) < 0)
        return -1;
    uint64_t mem = (uint64_t)si.totalram * (si.mem_unit ? si.mem_unit : 1);
    if (cur < 0 || !nsbox_filetable_fillable((uint64_t)cur, mem))
        return 0;
    char text[32];
    int n = snprintf(text, sizeof text, "%" PRId64 "\n", (int64_t)NSBOX_FILETABLE_RAISED);
    cleanup_close int fd = open(FILE_MAX, O_WRONLY | O_CLOEXEC);
    if (fd < 0 || write(fd, text, (size_t)n) != n)
        return -1;
    return 0;
}
