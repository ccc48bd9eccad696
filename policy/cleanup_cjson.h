/* cleanup_cjson: a cJSON tree deleted when the variable leaves scope (see cleanup.h). */
#ifndef NSBOX_CLEANUP_CJSON_H
#define NSBOX_CLEANUP_CJSON_H

#include <cJSON.h>

static inline void nsbox_cjson_deletep(cJSON **p)
{
    cJSON_Delete(*p); /* NULL is fine */
}
#define cleanup_cjson __attribute__((cleanup(nsbox_cjson_deletep)))

#endif
