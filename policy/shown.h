/* Text that a sandbox or an image controls (file and symlink names, layer entries, archive
 * members, mountinfo, what a container or a set-up script wrote) as nsbox shows it on the host,
 * in its messages and logs: one rule for all of them, so that such text cannot drive the
 * terminal that reads them. Printable UTF-8 is kept whole; each byte of an invalid UTF-8
 * sequence (overlong forms, surrogates, beyond U+10FFFF, a sequence cut short, a lone
 * continuation byte such as 0x9b, CSI of 8-bit terminals), each C0 control, DEL and each C1
 * control as UTF-8 encodes it (U+0080-U+009F, CSI and OSC among them) is shown as '?'. Pure:
 * unit tested (tests/unit/test_shown.c). */
#ifndef NSBOX_SHOWN_H
#define NSBOX_SHOWN_H

#include <stdbool.h>
#include <stddef.h>

/* C0 controls that a caller keeps: text of several lines (a script's output, nsbox's own
 * messages of several lines) keeps its newlines, tabs lay out columns; neither drives a
 * terminal. */
#define NSBOX_SHOWN_TAB 1u
#define NSBOX_SHOWN_NEWLINE 2u

/* The length of the valid UTF-8 sequence at s (at most len bytes, len > 0), or 0 when it is
 * none. */
size_t nsbox_shown_utf8(const char *s, size_t len);

/* The character at s (at most len bytes, len > 0): its length in bytes (1 for a byte that is
 * not valid UTF-8), and in *as_is whether it is shown as it is (false: shown as one '?'). keep:
 * NSBOX_SHOWN_* flags. */
size_t nsbox_shown_char(const char *s, size_t len, unsigned keep, bool *as_is);

/* s (len bytes) as shown, into out (n bytes, NUL-terminated when n > 0): at most max bytes of s
 * (SIZE_MAX: all), a character never cut, then "..." when some of s was left out (for max or
 * for the room in out). The bytes written, without the NUL. */
size_t nsbox_shown_copy(char *out, size_t n, const char *s, size_t len, size_t max, unsigned keep);

/* Text of several lines as nsbox prints it, in a new string: s (len bytes) shown by the rule
 * above, its tabs and newlines kept, and indent after each newline, so that no line of it can
 * pass for one of nsbox's own ("nsbox: ..."). every_line: before every line (a sandbox's text,
 * such as a set-up script's output, set under nsbox's words, its own indentation kept below
 * them); otherwise only before a line that does not start with a space or a tab (a message
 * whose lines nsbox laid out itself keeps its layout). NULL when out of memory. */
char *nsbox_shown_lines(const char *s, size_t len, const char *indent, bool every_line);

#endif
