#include "filetable.h"
#include "cfgsection.h"

#include <string.h>

bool nsbox_filetable_fillable(uint64_t file_max, uint64_t mem_bytes)
{
    return file_max < mem_bytes / NSBOX_FILETABLE_FILE_BYTES;
}

int nsbox_filetable_config_from_json(const cJSON *root, bool *keep, struct nsbox_err *e)
{
    const cJSON *host;
    if (nsbox_cfgsection_find(root, "host", "{\"file_max\": \"keep\"}", &host, e) < 0)
        return -1;
    bool out = *keep;
    const cJSON *it;
    cJSON_ArrayForEach(it, host)
    {
        if (strcmp(it->string, "file_max") != 0)
            return nsbox_cfgsection_unknown(e, "host", it->string, "file_max");
        if (cJSON_IsString(it) && !strcmp(it->valuestring, "raise"))
            out = false;
        else if (cJSON_IsString(it) && !strcmp(it->valuestring, "keep"))
            out = true;
        else
            return nsbox_cfgsection_bad(e, "host", "file_max",
                                        "must be \"raise\" (root's nsbox raises fs.file-max "
                                        "where sandboxes could fill it, the default) or \"keep\" "
                                        "(leave it as the host has it)");
    }
    *keep = out;
    return 0;
}
