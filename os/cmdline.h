/* The process's own command line, as ps and /proc/PID/cmdline show it: nsbox's init wipes
 * nsbox's host command line, and a supervisor names itself "nsbox ID". */
#ifndef NSBOX_CMDLINE_H
#define NSBOX_CMDLINE_H

/* The memory holding nsbox's own command line (main's argv): the sandbox's init wipes it, since
 * /proc/1/cmdline is readable inside the sandbox and would show the host's paths and options. */
void nsbox_cmdline_region(char *start, char *end);
/* Replace the process's command line (what ps shows) with text, cut to the space there is. */
void nsbox_cmdline_set(const char *text);

#endif
