/* The fuzz targets' input as a C string: the parsers under test read NUL-terminated text, and
 * libFuzzer's bytes end without one, so each target reads a copy with the NUL added. */
#ifndef NSBOX_FUZZ_CSTRING_H
#define NSBOX_FUZZ_CSTRING_H

#include <stddef.h>
#include <stdint.h>

/* A heap copy of data[0..size) followed by a NUL, for free(); aborts when out of memory (a
 * target cannot go on without its input, and libFuzzer reports the abort). A NUL inside the
 * bytes ends the string there, as it would for the parser's real callers. */
char *cstring_dup(const uint8_t *data, size_t size);

#endif
