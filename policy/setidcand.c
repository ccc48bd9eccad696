/* A layer entry's part in the merged root's set-id seal (setidcand.h). */
#include "setidcand.h"
#include "idmap.h"

#include <string.h>
#include <sys/stat.h>

enum nsbox_setidcand nsbox_setidcand_of(mode_t mode, uid_t uid, gid_t gid, bool cap, bool acl)
{
    if (S_ISREG(mode))
        return (mode & S_ISUID) || (mode & (S_ISGID | S_IXGRP)) == (S_ISGID | S_IXGRP) || cap
                   ? NSBOX_SETIDCAND_FILE
                   : NSBOX_SETIDCAND_NONE;
    if (!S_ISDIR(mode))
        return NSBOX_SETIDCAND_NONE;
    bool mapped = uid < NSBOX_ID_COUNT && gid < NSBOX_ID_COUNT;
    bool open_to_all = (mode & 0555) == 0555;
    return mapped && open_to_all && !acl ? NSBOX_SETIDCAND_NONE : NSBOX_SETIDCAND_DIR;
}

int nsbox_setidcand_cmp(const char *a, const char *b)
{
    for (;; a++, b++) {
        unsigned x = (unsigned char)*a, y = (unsigned char)*b;
        if (x != y || !x) {
            /* '/' ranks just above the end of a string, below every other byte */
            x = x == '/' ? 1 : x ? x + 1 : 0;
            y = y == '/' ? 1 : y ? y + 1 : 0;
            return (int)x - (int)y;
        }
    }
}

bool nsbox_setidcand_below(const char *dir, const char *path)
{
    size_t n = strlen(dir);
    return !strncmp(dir, path, n) && (path[n] == 0 || path[n] == '/');
}
