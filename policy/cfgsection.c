#include "cfgsection.h"

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
    const char *end = NULL;
    *section = NULL;
    *root = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    if (!*root || !cJSON_IsObject(*root))
        return nsbox_err_invalid(e, "config: not a JSON object");
    /* cJSON stops after the first value: a second object or garbage after it is a broken
     * file, whose rest would otherwise be ignored without a word */
    for (const char *p = end; p && p < text + len; p++)
        if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r')
            return nsbox_err_invalid(e, "config: unexpected text after the JSON object at byte "
                                        "%zu", (size_t)(p - text));
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
