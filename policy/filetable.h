/* The host's file table (fs.file-max) against what sandboxes can hold: pure decision. */
#ifndef NSBOX_FILETABLE_H
#define NSBOX_FILETABLE_H

#include "nsbox.h"

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The least memory an open file costs the memory cgroup of its holder: a struct file (192
 * bytes of slab on 6.x kernels, 232 measured with its share of the descriptor table; 403 when
 * a mapping holds it). A lower bound on purpose: a table below mem / this can be filled before
 * the memory is. */
#define NSBOX_FILETABLE_FILE_BYTES 128

/* What fs.file-max is raised to: the largest value the kernel takes (its sysctl is a long), as
 * systemd sets it at boot, so that memory, which each sandbox's cgroup bounds, is the only
 * limit. */
#define NSBOX_FILETABLE_RAISED LONG_MAX

/* True when a table of file_max files is smaller than a host of mem_bytes of memory could fill:
 * sandboxes, whose files are charged to their memory limits, could then fill it (every process
 * of the host without CAP_SYS_ADMIN gets ENFILE) long before their memory ran out. */
bool nsbox_filetable_fillable(uint64_t file_max, uint64_t mem_bytes);

/* The config file's "host" section (root: the file's object, os/config.c): "file_max": "raise"
 * (the default: root's nsbox raises a table sandboxes could fill) or "keep" (an
 * administrator's: leave it), in *keep. Absent: *keep unchanged. */
struct cJSON;
int nsbox_filetable_config_from_json(const struct cJSON *root, bool *keep, struct nsbox_err *e);

#endif
