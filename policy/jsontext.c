/* Indented JSON with runc's key separator (see jsontext.h). */
#include "jsontext.h"

#include <stddef.h>

char *nsbox_jsontext_print(const cJSON *j)
{
    char *text = cJSON_Print(j);
    if (!text)
        return NULL;
    /* cJSON writes '"key":' then a tab. Strings never hold a raw tab (it is written "\t"), so
     * a tab after ':' is always that separator; the text keeps its length. */
    for (char *p = text; *p; p++)
        if (p[0] == ':' && p[1] == '\t')
            p[1] = ' ';
    return text;
}
