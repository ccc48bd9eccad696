#include "cfgsection.h"

#include "cleanup.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* The one list of the sections: the check of the file's keys and its message both read it. */
static const char *const sections[] = {"host", "instance_types", "network", "pool", "workspace"};

bool nsbox_cfgsection_known(const char *name)
{
    for (size_t i = 0; i < NSBOX_ARRAY_LEN(sections); i++)
        if (name && strcmp(name, sections[i]) == 0)
            return true;
    return false;
}

void nsbox_cfgsection_names(char *buf, size_t n)
{
    size_t o = 0, last = NSBOX_ARRAY_LEN(sections) - 1;
    if (!n)
        return;
    buf[0] = '\0';
    for (size_t i = 0; i <= last && o < n; i++) {
        int r = snprintf(buf + o, n - o, "%s%s", i == 0 ? "" : i == last ? " and " : ", ",
                         sections[i]);
        if (r < 0)
            break;
        o += (size_t)r;
    }
}

int nsbox_cfgsection_check_keys(const cJSON *root, struct nsbox_err *e)
{
    const cJSON *it;
    cJSON_ArrayForEach(it, root) {
        if (!nsbox_cfgsection_known(it->string)) {
            char names[128];
            nsbox_cfgsection_names(names, sizeof names);
            return nsbox_err_invalid(e, "unknown key '%s' (the sections are %s)",
                                     NSBOX_SHOW(it->string), names);
        }
    }
    return 0;
}

int nsbox_cfgsection_find(const cJSON *root, const char *name, const char *like,
                          const cJSON **section, struct nsbox_err *e)
{
    *section = NULL;
    const cJSON *s = root ? cJSON_GetObjectItemCaseSensitive(root, name) : NULL;
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
