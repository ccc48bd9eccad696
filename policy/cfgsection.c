#include "cfgsection.h"

#include "spec.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

bool nsbox_cfgsection_known(const char *name)
{
    static const char *const sections[] = {"host", "instance_types", "network", "pool",
                                           "workspace"};
    for (size_t i = 0; i < sizeof sections / sizeof *sections; i++)
        if (name && strcmp(name, sections[i]) == 0)
            return true;
    return false;
}

int nsbox_cfgsection_find(const char *text, size_t len, const char *name, const char *like,
                          cJSON **root, const cJSON **section, struct nsbox_err *e)
{
    *section = NULL;
    *root = NULL;
    if (nsbox_spec_json_parse_object(text, len, NSBOX_SPEC_JSON_MAX, root, e) < 0)
        return nsbox_err_wrap(e, "config");
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(*root, name);
    if (s && !cJSON_IsObject(s))
        return nsbox_err_invalid(e, "config: key '%s': must be an object%s%s", name,
                                 like ? " like " : "", like ? like : "");
    *section = s;
    return 0;
}

int nsbox_cfgsection_bad(struct nsbox_err *e, const char *name, const char *key, const char *fmt,
                         ...)
{
    char what[NSBOX_ERR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return nsbox_err_invalid(e, "config: key '%s.%s': %s", name, key, what);
}

int nsbox_cfgsection_unknown(struct nsbox_err *e, const char *name, const char *key,
                             const char *known)
{
    return nsbox_err_invalid(e, "config: key '%s.%.64s': unknown (known: %s)", name, key, known);
}
