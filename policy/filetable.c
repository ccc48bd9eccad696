#include "filetable.h"

bool nsbox_filetable_fillable(uint64_t file_max, uint64_t mem_bytes)
{
    return file_max < mem_bytes / NSBOX_FILETABLE_FILE_BYTES;
}
