#include "filetable.h"
#include "cleanup_cjson.h"

#include <errno.h>
#include <string.h>

bool nsbox_filetable_fillable(uint64_t file_max, uint64_t mem_bytes)
{
    return file_max < mem_bytes / NSBOX_FILETABLE_FILE_BYTES;
}

int nsbox_filetable_config_from_json(const char *text, size_t len, bool *keep, struct nsbox_err *e)
{
    cleanup_cjson cJSON *root = cJSON_ParseWithLength(text, len);
    if (!root || !cJSON_IsObject(root))
        return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL, "config: not a JSON object");
    const cJSON *host = cJSON_GetObjectItemCaseSensitive(root, "host");
    if (!host)
        return 0;
    if (!cJSON_IsObject(host))
        return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL,
                             "config: key 'host': must be an object like "
                             "{\"file_max\": \"keep\"}");
    bool out = *keep;
    const cJSON *it;
    cJSON_ArrayForEach(it, host)
    {
        if (strcmp(it->string, "file_max") != 0)
            return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL,
                                 "config: key 'host.%.64s': unknown (known: file_max)", it->string);
        if (cJSON_IsString(it) && !strcmp(it->valuestring, "raise"))
            out = false;
        else if (cJSON_IsString(it) && !strcmp(it->valuestring, "keep"))
            out = true;
        else
            return nsbox_err_set(e, NSBOX_E_INVALID, EINVAL,
                                 "config: key 'host.file_max': must be \"raise\" (root's nsbox "
                                 "raises fs.file-max where sandboxes could fill it, the "
                                 "default) or \"keep\" (leave it as the host has it)");
    }
    *keep = out;
    return 0;
}
