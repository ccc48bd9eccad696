/* The fuzz targets' input as a C string (cstring.h). */
#include "cstring.h"

#include <stdlib.h>
#include <string.h>

char *cstring_dup(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (!s)
        abort();
    if (size)
        memcpy(s, data, size);
    s[size] = '\0';
    return s;
}
