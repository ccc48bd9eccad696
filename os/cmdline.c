/* The process's own command line, as ps shows it (see cmdline.h). */
#define _GNU_SOURCE
#include "cmdline.h"

#include <string.h>

static char *cmdline_start, *cmdline_end;

void nsbox_cmdline_region(char *start, char *end)
{
    cmdline_start = start;
    cmdline_end = end;
}

void nsbox_cmdline_set(const char *text)
{
    if (!cmdline_start || cmdline_end <= cmdline_start)
        return;
    size_t n = (size_t)(cmdline_end - cmdline_start);
    memset(cmdline_start, 0, n);
    size_t l = strlen(text);
    memcpy(cmdline_start, text, l < n ? l : n - 1);
}
