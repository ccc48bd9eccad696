/* The public spec API of include/nsbox.h: a heap-allocated, opaque nsbox_spec over the internal
 * functions of spec.c. Library users never see the struct layout, so it can grow. */
#include "nsbox.h"
#include "spec.h"

#include <stdlib.h>

static int no_spec(struct nsbox_err *e)
{
    return nsbox_err_set(e, NSBOX_E_INVALID, 0, "spec: NULL spec");
}

struct nsbox_spec *nsbox_spec_new(void)
{
    struct nsbox_spec *s = malloc(sizeof *s);
    if (s)
        nsbox_spec_init(s);
    return s;
}

void nsbox_spec_destroy(struct nsbox_spec *s)
{
    if (!s)
        return;
    nsbox_spec_free(s);
    free(s);
}

int nsbox_spec_load_json(struct nsbox_spec *s, const char *json, size_t len, struct nsbox_err *e)
{
    return s ? nsbox_spec_from_json(s, json, len, e) : no_spec(e);
}

int nsbox_spec_set_option(struct nsbox_spec *s, const char *key, const char *value,
                          struct nsbox_err *e)
{
    return s ? nsbox_spec_set(s, key, value, e) : no_spec(e);
}

int nsbox_spec_check(struct nsbox_spec *s, struct nsbox_err *e)
{
    return s ? nsbox_spec_validate(s, e) : no_spec(e);
}
