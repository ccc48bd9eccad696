/* Fuzz the spec reader: any byte string through nsbox_spec_from_json, then validate, render
 * and read the rendering back. Besides crashes and leaks (ASan), it checks two properties that
 * the rest of nsbox relies on: a failed load leaves the spec unchanged, and whatever loads and
 * validates renders to JSON that loads again into an equal spec; a spec with header bindings
 * renders without their values (and so does not load back). */
#include "nsbox.h"
#include "spec.h"

#include <cJSON.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct nsbox_spec s, before, again;
    struct nsbox_err e;

    nsbox_spec_init(&s);
    /* Start from a spec with heap parts so that failed loads have something to leak or keep. */
    if (nsbox_spec_set(&s, "env", "SEED=1", &e) < 0 ||
        nsbox_spec_set(&s, "setup_script", "true", &e) < 0 ||
        nsbox_spec_copy(&before, &s, &e) < 0)
        abort();

    if (nsbox_spec_from_json(&s, (const char *)data, size, &e) < 0) {
        if (!nsbox_spec_equal(&s, &before))
            abort();
        goto out;
    }
    if (nsbox_spec_validate(&s, &e) < 0)
        goto out;

    char *json = nsbox_spec_to_json(&s);
    if (!json)
        goto out; /* ENOMEM only */
    if (s.n_bindings) {
        cJSON *o = cJSON_Parse(json), *b;
        cJSON *a = cJSON_GetObjectItemCaseSensitive(o, "header_bindings");
        if (!o || cJSON_GetArraySize(a) != (int)s.n_bindings)
            abort();
        cJSON_ArrayForEach(b, a) if (cJSON_GetObjectItemCaseSensitive(b, "value")) abort();
        cJSON_Delete(o);
        free(json);
        goto out;
    }
    nsbox_spec_init(&again);
    if (nsbox_spec_from_json(&again, json, strlen(json), &e) < 0 ||
        nsbox_spec_validate(&again, &e) < 0 || !nsbox_spec_equal(&s, &again))
        abort();
    nsbox_spec_free(&again);
    free(json);
out:
    nsbox_spec_free(&before);
    nsbox_spec_free(&s);
    return 0;
}
