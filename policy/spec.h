/* The sandbox spec: the MistralSandbox options (docs/spec.md) as one validated struct.
 * Pure: no system calls, testable without root. CLI flags and JSON fill the same struct. */
#ifndef NSBOX_SPEC_H
#define NSBOX_SPEC_H

#include "nsbox.h"

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>

#define NSBOX_DEFAULT_INSTANCE_TYPE "medium"
#define NSBOX_DEFAULT_REGION "nl-north-1"
#define NSBOX_DEFAULT_TTL 86400u
#define NSBOX_DEFAULT_SETUP_TIMEOUT 600u
#define NSBOX_DEFAULT_IMAGE "host"

#define NSBOX_NAME_MAX 64       /* instance type, region, image names */
#define NSBOX_HOSTNAME_MAX 253  /* DNS name length */
#define NSBOX_MAX_HOSTS 64      /* Network.allow(hosts=...) entries */
#define NSBOX_MAX_CIDRS 64      /* EgressPolicy entries */
#define NSBOX_MAX_ENV 256       /* -e K=V entries */
#define NSBOX_ENV_MAX 32768     /* one K=V string, bytes */
#define NSBOX_SCRIPT_MAX (1u << 20) /* setup_script, bytes */
#define NSBOX_SPEC_JSON_MAX (4u << 20)
#define NSBOX_MAX_BINDINGS 16     /* header_bindings entries */
#define NSBOX_BINDING_VALUE_MIN 8 /* bytes of a bound header's value */
#define NSBOX_TTL_MAX (365u * 86400u)

enum nsbox_net_mode {
    NSBOX_NET_NONE = 0,
    NSBOX_NET_ALL = 1,
    NSBOX_NET_ALLOW = 2,
};

struct nsbox_host {
    char name[NSBOX_HOSTNAME_MAX + 1]; /* DNS name or IP literal (IPv6 without brackets) */
    uint16_t port;                     /* 443 when not given */
};

struct nsbox_cidr {
    int family;        /* AF_INET or AF_INET6 */
    uint8_t addr[16];  /* network byte order; host bits are zero */
    uint8_t prefix;    /* 0..32 or 0..128 */
};

/* A header the egress helper adds to every HTTPS request to host (docs/network.md, "Header
 * bindings"). value is the secret: heap, wiped when freed, never rendered. */
struct nsbox_header_binding {
    struct nsbox_host host; /* a name, not an address */
    char header[65];
    char *value;
};

/* When a sandbox's image reference is pulled. DEFAULT: not said; NSBOX_PULL in the environment
 * decides, else MISSING. */
enum nsbox_pull {
    NSBOX_PULL_DEFAULT = 0,
    NSBOX_PULL_MISSING = 1, /* pull a reference that is not in the store */
    NSBOX_PULL_ALWAYS = 2,  /* pull it again (a moved tag is followed) */
    NSBOX_PULL_NEVER = 3,   /* refuse a reference that is not in the store */
};

struct nsbox_limits {
    uint32_t cpus;
    uint64_t memory_bytes;
    uint64_t pids;
    uint64_t disk_bytes;
};

struct nsbox_instance_type {
    char name[NSBOX_NAME_MAX];
    struct nsbox_limits limits;
};

struct nsbox_spec {
    char instance_type[NSBOX_NAME_MAX];
    struct nsbox_limits limits; /* filled by nsbox_spec_check() from the instance type */
    uint64_t idle_timeout_seconds;
    uint64_t ttl_seconds;
    char region[NSBOX_NAME_MAX];

    enum nsbox_net_mode net;
    size_t n_hosts;
    struct nsbox_host hosts[NSBOX_MAX_HOSTS];
    size_t n_egress;
    struct nsbox_cidr egress[NSBOX_MAX_CIDRS];

    char image[PATH_MAX];     /* "host", "debian", another stored name, or an absolute dir */
    enum nsbox_pull pull;     /* for an image reference */
    char *setup_script;       /* heap, may be NULL */
    uint64_t setup_script_timeout_seconds;
    char workspace[PATH_MAX]; /* "" = a fresh filesystem of limits.disk_bytes (wsplan.h) */
    size_t n_env;
    char *env[NSBOX_MAX_ENV]; /* heap "K=V" strings; a later K replaces an earlier one */
    /* false: the sandbox refuses background processes (exec -d, start_process), as the hosted
     * service does for a custom image that cannot keep them (docs/spec.md) */
    bool supports_background_processes;
    size_t n_bindings;
    struct nsbox_header_binding bindings[NSBOX_MAX_BINDINGS];
};

/* Defaults (docs/spec.md). */
void nsbox_spec_init(struct nsbox_spec *s);
void nsbox_spec_free(struct nsbox_spec *s);

/* Keys (JSON object; every key optional):
 *   instance_type: string; idle_timeout_seconds, ttl_seconds, setup_script_timeout_seconds:
 *   non-negative integers; region, image, setup_script, workspace: strings;
 *   network: "none" | "all" | {"allow": ["host", "host:port", ...]};
 *   egress: ["CIDR", ...]; env: {"K": "V", ...}; pull: "missing" | "always" | "never";
 *   supports_background_processes: true | false.
 * Errors name the key: "spec: key 'ttl_seconds': must be an integer between 1 and 31536000". */
int nsbox_spec_from_json(struct nsbox_spec *s, const char *json, size_t len, struct nsbox_err *e);

/* One option by its name and textual value (the CLI's flags):
 *   instance_type, idle_timeout_seconds, ttl_seconds, region, image, setup_script (the script
 *   text), setup_script_timeout_seconds, workspace, env ("K=V"),
 *   network ("none" | "all" | "allow=H[,H...]"), egress ("CIDR[,CIDR...]", appends), pull,
 *   supports_background_processes ("true" | "false"). */
int nsbox_spec_set(struct nsbox_spec *s, const char *key, const char *value, struct nsbox_err *e);

/* Cross-field rules, run once before anything is built: resolves instance_type into limits,
 * applies the region rule with its exact message (NSBOX_E_POLICY). */
int nsbox_spec_validate(struct nsbox_spec *s, struct nsbox_err *e);

/* The one JSON object of json (spec_json.c), for the spec, the instance types and every config
 * section alike, so that one mistake reads the same whoever finds it: *out gets the object (the
 * caller deletes it). Returns -1 with "empty input (expected a JSON object)", "larger than MAX
 * bytes", "contains a NUL byte" (or a \u0000 in a string), "invalid JSON near byte N",
 * "unexpected text after the JSON value at byte N" or "must be a JSON object". */
struct cJSON;
int nsbox_spec_json_parse_object(const char *json, size_t len, size_t max, struct cJSON **out,
                                 struct nsbox_err *e);

/* The check of nsbox_spec_json_parse_object for a NUL in json, raw or escaped ("\\u0000", or a
 * \u escape without four hex digits, which cJSON decodes to 0): cJSON would cut the string
 * there and the value acted on would not be the one sent. An escaped backslash before "u0000"
 * is text. For JSON parsed elsewhere (the control protocol). */
int nsbox_spec_json_check_nul(const char *json, size_t len, struct nsbox_err *e);

/* Helpers shared with the Python client's validation and the network module. */
int nsbox_spec_net_parse_host(const char *text, struct nsbox_host *out, struct nsbox_err *e);
int nsbox_spec_net_parse_cidr(const char *text, struct nsbox_cidr *out, struct nsbox_err *e);
int nsbox_spec_parse_env(const char *kv, struct nsbox_err *e); /* "K=V" with a valid K */
/* An environment variable's name as POSIX shells take it (n bytes of s). */
bool nsbox_spec_env_name_valid(const char *s, size_t n);

/* Header bindings (spec_bind.c). add: one binding, checked (a name, a bindable header, a value
 * that cannot end the header line, no duplicate); clear: wipes and frees every value. */
int nsbox_spec_bind_add(struct nsbox_spec *s, const char *host, const char *header,
                        const char *value, struct nsbox_err *e);
void nsbox_spec_bind_clear(struct nsbox_spec *s);
/* Wipes and frees the values, keeps the hosts and headers (what a process that started the
 * sandbox keeps for inspect once the egress helper has the values). */
void nsbox_spec_bind_forget(struct nsbox_spec *s);

/* "missing", "always", "never"; NULL for NSBOX_PULL_DEFAULT (or a value out of range). */
const char *nsbox_spec_pull_name(enum nsbox_pull p);

/* Instance type table (defaults of docs/spec.md, possibly overridden by a config file). */
const struct nsbox_instance_type *nsbox_spec_types_find(const char *name);
const struct nsbox_instance_type *nsbox_spec_types(size_t *n);

/* JSON rendering for `inspect`/`--json` (malloc'd string, NULL on ENOMEM). The output is
 * accepted again by nsbox_spec_from_json(). Includes "limits": the resolved instance type. */
char *nsbox_spec_to_json(const struct nsbox_spec *s);

/* ---- additions (docs/spec.md) ---------------------------------------------------------------- */

#define NSBOX_MAX_INSTANCE_TYPES 32
#define NSBOX_CONFIG_DEFAULT_PATH "/etc/nsbox/config.json"

struct cJSON;

/* The same rendering as a cJSON tree, to embed the spec in a bigger document (inspect, state
 * files). Caller owns it (cJSON_Delete); NULL on ENOMEM. */
struct cJSON *nsbox_spec_to_cjson(const struct nsbox_spec *s);

/* Deep copy into dst (whose previous contents are not freed). */
int nsbox_spec_copy(struct nsbox_spec *dst, const struct nsbox_spec *src, struct nsbox_err *e);
/* Field-by-field equality, env order included. */
bool nsbox_spec_equal(const struct nsbox_spec *a, const struct nsbox_spec *b);
/* Value of NAME in s->env, or NULL. */
const char *nsbox_spec_getenv(const struct nsbox_spec *s, const char *name);

/* "example.com", "example.com:8443", "[::1]:8443"; ":443" is left out. Returns the length, or -1
 * if n is too small. */
int nsbox_spec_net_host_format(const struct nsbox_host *h, char *buf, size_t n);
/* "10.0.0.0/8", "fd00::/8". Returns the length, or -1 if n is too small. */
int nsbox_spec_net_cidr_format(const struct nsbox_cidr *c, char *buf, size_t n);

/* "512MiB", "4GiB", "1G", "1048576": K/M/G/T with or without B/iB, any case, all powers of
 * 1024 (as docker and cgroups read them). Integers only. */
int nsbox_spec_parse_size(const char *s, uint64_t *out, struct nsbox_err *e);

/* Instance type overrides, the config file's (os/config.c) section "instance_types":
 * {"instance_types": {"name": {"cpus": N, "memory": "4GiB" | bytes, "pids": N, "disk": "10GiB" |
 * bytes}}}. Named types are merged over the defaults (a known name may give only some fields; a
 * new name must give all four); the other sections belong to other modules, but a section that
 * none has is an error (cfgsection.h). root is the config file's object (os/config.c parses
 * it). The table is rebuilt from the defaults on every call and replaced only on
 * success. Messages without a prefix: the caller says which config this was. */
int nsbox_spec_types_parse(const struct cJSON *root, struct nsbox_err *e);
/* Back to the built-in table (tests). */
void nsbox_spec_types_reset(void);

#endif
