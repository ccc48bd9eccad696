/* A config text given to a section's parser as os/config.c gives it the file: parsed once into
 * its object. For the unit tests of the sections' parsers (policy/). */
#ifndef NSBOX_TEST_CFGTEXT_H
#define NSBOX_TEST_CFGTEXT_H

#include "cleanup_cjson.h"
#include "spec.h"

#include <string.h>

/* text's object, to delete (cleanup_cjson); the test fails where text is none. */
static inline cJSON *cfgtext(const char *text)
{
    cJSON *root = NULL;
    struct nsbox_err e = {0};
    if (nsbox_spec_json_parse_object(text, strlen(text), NSBOX_SPEC_JSON_MAX, &root, &e) < 0)
        fail_msg("%s: %s", text, e.msg);
    return root;
}

#endif
