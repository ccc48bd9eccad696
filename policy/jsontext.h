/* JSON text for people and their scripts (jsontext.c): cJSON's indented form with `"key": value`,
 * as runc (Go's MarshalIndent) writes config.json and state, so that the edits runc's users make
 * with sed (`s/"terminal": true/"terminal": false/`) and grep find what they expect. */
#ifndef NSBOX_JSONTEXT_H
#define NSBOX_JSONTEXT_H

#include <cJSON.h>

/* j indented with tabs, each key followed by ": "; malloc'd (free it), or NULL when out of
 * memory. */
char *nsbox_jsontext_print(const cJSON *j);

#endif
