/* The host's file table made large enough that no sandbox can fill it (docs/decisions.md, "The
 * host's file table is sized by memory, not by a count"). */
#ifndef NSBOX_FILEMAX_H
#define NSBOX_FILEMAX_H

/* As root of the host: raises fs.file-max (policy/filetable.h) when the host's memory could hold
 * more open files than it allows. Leaves it where it cannot (a container whose /proc/sys is
 * read-only, a root of a user namespace): sandboxes there share the table as the host's other
 * processes do (docs/security.md, finding 22). Cheap once done: one read and a sysinfo. 0 when
 * the table is large enough, -1 when it is not. */
int nsbox_filemax_raise(void);

#endif
