/* The warm pool of `nsbox run` (docs/pool.md): pure decisions, unit tested without root.
 *
 * With {"pool": {"size": N}} in the nsbox config, `nsbox run` takes a sandbox that was made
 * ahead of time for the same settings, runs its one command there, and deletes it; a
 * replacement is made in the background. Which settings must match is the pool key: everything
 * that shapes the sandbox (image, instance type and limits, network, region, the config file,
 * the nsbox binary), nothing that only concerns the one command (argv, env, cwd, timeout). */
#ifndef NSBOX_POOL_H
#define NSBOX_POOL_H

#include "nsbox.h"
#include "spec.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NSBOX_POOL_MAX_SIZE 16
#define NSBOX_POOL_DEFAULT_TTL 300 /* seconds a pooled sandbox waits unused, with a set size */
#define NSBOX_POOL_AUTO_SIZE 2     /* sandboxes per set of settings in the "auto" mode */
#define NSBOX_POOL_AUTO_TTL 60     /* and how long they wait unused there */
#define NSBOX_POOL_KEY_LEN 16      /* hex digits */
#define NSBOX_POOL_ID_LEN 12       /* a sandbox id (sandbox/state.h NSBOX_ID_LEN) */

/* The "pool" section of the config file: {"pool": {"size": "auto", "ttl_seconds": 60}}.
 * size: "auto" (the default): NSBOX_POOL_AUTO_SIZE sandboxes, made only once runs of the same
 * settings repeat (a second run within ttl_seconds of the one before; see on_repeat); 0 turns
 * the pool off; 1..NSBOX_POOL_MAX_SIZE: that many, from the first cold run on.
 * ttl_seconds (1..86400): how long an unused pooled sandbox lives; NSBOX_POOL_AUTO_TTL in the
 * auto mode, NSBOX_POOL_DEFAULT_TTL with a size, unless given. */
struct nsbox_pool_config {
    unsigned size;
    bool on_repeat; /* "auto": a cold run starts the pool only when it is not the first run of
                       its settings within ttl_seconds */
    uint64_t ttl_seconds;
};

void nsbox_pool_config_init(struct nsbox_pool_config *c);
/* The "pool" section of the config file's object root (os/config.c); a missing section keeps
 * the defaults. Errors name the key. */
int nsbox_pool_config_from_json(const struct cJSON *root, struct nsbox_pool_config *c,
                                struct nsbox_err *e);

/* Can a run with this spec use the pool? Not with the caller's own --workspace directory (it
 * must be mounted for that run) or a setup script (run refuses those anyway). */
bool nsbox_pool_spec_poolable(const struct nsbox_spec *s);

/* The key of a spec: a hash of its JSON rendering without the per-command fields (env,
 * ttl_seconds, idle_timeout_seconds), plus `extra` (the binary's identity and the config text),
 * as NSBOX_POOL_KEY_LEN hex digits. -1 on ENOMEM. */
int nsbox_pool_key(const struct nsbox_spec *s, const char *extra, size_t extra_len,
                   char out[NSBOX_POOL_KEY_LEN + 1]);

/* The spec a pooled sandbox is made with: s without the per-command fields, living ttl_seconds
 * from the pool config and never put to sleep. dst must be nsbox_spec_free()d. */
int nsbox_pool_member_spec(const struct nsbox_spec *s, uint64_t ttl_seconds,
                           struct nsbox_spec *dst, struct nsbox_err *e);

/* Pool entry file names: "<key>-<id>". Returns false for anything else. */
bool nsbox_pool_entry_parse(const char *name, char key[NSBOX_POOL_KEY_LEN + 1],
                            char id[NSBOX_POOL_ID_LEN + 1]);

/* ".claim-<key>-<id>": an entry a run has taken out of the pool by renaming it, before it asks
 * the sandbox for its command (no listing, no other run sees it any more); the run removes it
 * once the sandbox has the command, or puts it back under its name when it was refused. */
#define NSBOX_POOL_CLAIM ".claim-"
/* A claimed entry's name parsed as nsbox_pool_entry_parse does the entry's. */
bool nsbox_pool_claim_parse(const char *name, char key[NSBOX_POOL_KEY_LEN + 1],
                            char id[NSBOX_POOL_ID_LEN + 1]);

#define NSBOX_POOL_SEEN ".seen"     /* <key>.seen: the last cold run of the key (auto mode) */
#define NSBOX_POOL_FAILED ".failed" /* <key>.failed: the last fill of the key failed, and why */
#define NSBOX_POOL_LOCK ".lock"     /* <key>.lock: held by the key's filler while it works */
#define NSBOX_POOL_MARK_MAX_AGE 86400 /* seconds after which gc removes those three (a lock
                                         only when nobody holds it) */

/* A key's own file in the pool directory: "<key><suffix>" (".lock", ".seen", ".failed").
 * Returns false for anything else. */
bool nsbox_pool_key_file(const char *name, const char *suffix, char key[NSBOX_POOL_KEY_LEN + 1]);

/* How long ago, for `pool ls`: "just now", "42 s ago", "5 min ago", "3 h ago", "2 days ago"
 * (a clock set back gives "just now"). */
void nsbox_pool_format_age(char *out, size_t n, int64_t seconds);

#endif
