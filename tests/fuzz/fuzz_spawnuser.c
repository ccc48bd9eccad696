/* Fuzz the user of an agent SPAWN (policy/spawnuser.c), which init parses from a peer of its
 * socket: any bytes, as a string. Besides crashes (ASan), what init relies on when it parses:
 * ids of at most 4294967294 (never (uid_t)-1, "unchanged"), a umask of -1 or 0-0777, at most
 * NSBOX_SPAWNUSER_GROUPS_MAX groups, no_new_privs only from "nnp", capability sets only after
 * "caps"; and formatting what it
 * gave parses to the same user. The same bytes as exec's --additional-gids too. */
#include "cstring.h"
#include "spawnuser.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = cstring_dup(data, size);
    struct nsbox_spawnuser u, back;
    struct nsbox_err e = {0};
    if (nsbox_spawnuser_parse(text, &u, &e) == 0) {
        if (u.uid > 4294967294u || u.gid > 4294967294u || u.umask < -1 || u.umask > 0777 ||
            u.n_groups > NSBOX_SPAWNUSER_GROUPS_MAX || (u.no_new_privs && !strstr(text, "nnp")))
            abort();
        for (size_t i = 0; i < u.n_groups; i++)
            if (u.groups[i] > 4294967294u)
                abort();
        char again[NSBOX_SPAWNUSER_TEXT_MAX];
        if (nsbox_spawnuser_format(&u, again, sizeof again) < 0 ||
            nsbox_spawnuser_parse(again, &back, &e) < 0 || memcmp(&u, &back, sizeof u) != 0)
            abort();
    } else if (!e.msg[0]) {
        abort(); /* a refusal says why */
    }
    /* the same bytes as --additional-gids: within the room given, ids in range */
    uint32_t groups[4];
    size_t n = 0;
    if (nsbox_spawnuser_add_gids(text, groups, &n, 4, &e) == 0) {
        if (n == 0 || n > 4)
            abort();
        for (size_t i = 0; i < n; i++)
            if (groups[i] > 4294967294u)
                abort();
    } else if (n > 4 || !e.msg[0]) {
        abort();
    }
    free(text);
    return 0;
}
