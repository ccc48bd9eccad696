/* The sandbox spec (docs/spec.md): defaults, JSON and CLI input, cross-field validation, the
 * instance type table and JSON rendering. Everything here is pure except
 * nsbox_instance_types_load(), which reads the config file. See docs/spec.md for the rules. */
#include "ociref.h"
#include "spec.h"
#include "cleanup.h"
#include "cleanup_cjson.h"

#include <arpa/inet.h>
#include <cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define GiB (1ull << 30)
#define MiB (1ull << 20)

/* Bounds for the config file's instance types: wide enough for any real machine, narrow enough
 * that a typo ("4" meaning 4 GiB of memory) is caught instead of starting a sandbox that cannot
 * even exec. */
#define CPUS_MAX 1024u
#define PIDS_MAX 4194304u /* the kernel's PID_MAX_LIMIT */
/* The sandbox's init counts in its pids limit: with 1 nothing could start beside it, and every
 * run failed with "fork: Resource temporarily unavailable", the limit unnamed. */
#define PIDS_MIN 2u
#define BYTES_MIN MiB
#define BYTES_MAX (1ull << 50)
#define SETUP_TIMEOUT_MAX 86400u


#define SHOW(t) NSBOX_SHOW(t) /* user text in messages: include/nsbox.h */

/* Bad input: NSBOX_E_INVALID with the message (policy/err.c). */
#define invalid nsbox_err_invalid

/* ---- small syntax checks -------------------------------------------------------------------- */

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}
static bool is_lower_alnum(char c)
{
    return (c >= 'a' && c <= 'z') || is_digit(c);
}
static bool is_alpha(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
static char to_lower(char c)
{
    return (c >= 'A' && c <= 'Z') ? (char)(c - 'A' + 'a') : c;
}

/* [a-z0-9][a-z0-9._-]{0,62}: instance types and stored image names become directory names and
 * cgroup names; the leading alnum rules out "." and "..", and the alphabet rules out "/". */
static bool name_valid(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n >= NSBOX_NAME_MAX || !is_lower_alnum(s[0]))
        return false;
    for (size_t i = 1; i < n; i++)
        if (!is_lower_alnum(s[i]) && s[i] != '.' && s[i] != '_' && s[i] != '-')
            return false;
    return true;
}

static bool region_valid(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n >= NSBOX_NAME_MAX)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!is_lower_alnum(s[i]) && s[i] != '-')
            return false;
    return true;
}

/* Environment names as POSIX shells accept them, so that `env` inside the sandbox and `$K` in
 * a setup script see the same variable. */
static bool env_name_valid(const char *s, size_t n)
{
    if (n == 0 || (!is_alpha(s[0]) && s[0] != '_'))
        return false;
    for (size_t i = 1; i < n; i++)
        if (!is_alpha(s[i]) && !is_digit(s[i]) && s[i] != '_')
            return false;
    return true;
}

/* Decimal digits only: no sign, no spaces, no hex, as strtoull would otherwise accept. */
static bool parse_decimal(const char *s, size_t n, uint64_t *out)
{
    uint64_t v = 0;
    if (n == 0)
        return false;
    for (size_t i = 0; i < n; i++) {
        if (!is_digit(s[i]))
            return false;
        unsigned d = (unsigned)(s[i] - '0');
        if (v > (UINT64_MAX - d) / 10)
            return false;
        v = v * 10 + d;
    }
    *out = v;
    return true;
}

/* ---- hosts ---------------------------------------------------------------------------------- */

/* Longest text that can be a valid host: "[" IPv6 "]" or a 253-byte name, plus ":65535". */
#define HOST_TEXT_MAX (NSBOX_HOSTNAME_MAX + 8)

static int parse_port(const char *p, size_t n, const char *text, uint16_t *out,
                      struct nsbox_err *e)
{
    uint64_t v = 0;
    char port[HOST_TEXT_MAX + 1];
    if (n == 0)
        return invalid(e, "host '%s': empty port after ':'", SHOW(text));
    snprintf(port, sizeof port, "%.*s", (int)n, p);
    for (size_t i = 0; i < n; i++)
        if (!is_digit(p[i]))
            return invalid(e, "host '%s': port '%s' is not a number", SHOW(text), SHOW(port));
    if (!parse_decimal(p, n, &v) || v == 0 || v > 65535)
        return invalid(e, "host '%s': port %s is out of range 1..65535", SHOW(text), SHOW(port));
    *out = (uint16_t)v;
    return 0;
}

/* RFC 1123 names: labels of letters, digits and hyphens, 1..63 bytes, no hyphen at either end,
 * 253 bytes in all. The last label may not be all digits: getaddrinfo() reads "127.1" or
 * "0x7f.1" as the address 127.0.0.1, so such a "name" would be an address in disguise. */
static int check_dns_name(char *name, const char *text, struct nsbox_err *e)
{
    size_t n = strlen(name);
    if (n > 1 && name[n - 1] == '.')
        name[--n] = '\0'; /* the fully qualified form "example.com." names the same host */
    if (n > NSBOX_HOSTNAME_MAX)
        return invalid(e, "host '%s': name is longer than %d characters", SHOW(text),
                       NSBOX_HOSTNAME_MAX);
    size_t start = 0;
    bool last_all_digits = true;
    for (size_t i = 0; i <= n; i++) {
        if (i < n && name[i] != '.') {
            char c = name[i];
            if (!is_alpha(c) && !is_digit(c) && c != '-') {
                if ((unsigned char)c >= 0x80)
                    return invalid(e,
                                   "host '%s': non-ASCII name; use its punycode form "
                                   "(xn--...)",
                                   SHOW(text));
                return invalid(e, "host '%s': invalid character '%c' in name (letters, "
                               "digits, '-' and '.' only)", SHOW(text), c);
            }
            name[i] = to_lower(c);
            continue;
        }
        size_t len = i - start;
        if (len == 0)
            return invalid(e, "host '%s': empty label in name (leading, trailing or double "
                           "'.')", SHOW(text));
        if (len > 63)
            return invalid(e, "host '%s': label longer than 63 characters", SHOW(text));
        if (name[start] == '-' || name[i - 1] == '-')
            return invalid(e, "host '%s': a label starts or ends with '-'", SHOW(text));
        last_all_digits = true;
        for (size_t j = start; j < i; j++)
            if (!is_digit(name[j]))
                last_all_digits = false;
        start = i + 1;
    }
    if (last_all_digits)
        return invalid(e, "host '%s': not a valid IPv4 address or host name", SHOW(text));
    return 0;
}

static int set_host_ip(struct nsbox_host *out, int family, const void *addr)
{
    return inet_ntop(family, addr, out->name, sizeof out->name) ? 0 : -1;
}

/* text[slash] is '/': an address and a prefix length (10.0.0.0/8, fd00::/8)? */
static bool looks_like_range(const char *text, size_t slash)
{
    char a[INET6_ADDRSTRLEN];
    unsigned char addr[16];
    if (slash == 0 || slash >= sizeof a || !text[slash + 1])
        return false;
    for (const char *p = text + slash + 1; *p; p++)
        if (!is_digit(*p))
            return false;
    memcpy(a, text, slash);
    a[slash] = '\0';
    return inet_pton(AF_INET, a, addr) == 1 || inet_pton(AF_INET6, a, addr) == 1;
}

int nsbox_parse_host(const char *text, struct nsbox_host *out, struct nsbox_err *e)
{
    struct nsbox_host h = {.port = 443};
    unsigned char addr[16];
    char buf[HOST_TEXT_MAX + 1];

    if (!text || !*text)
        return invalid(e, "host: empty host name");
    size_t len = strnlen(text, HOST_TEXT_MAX + 1);
    if (len > HOST_TEXT_MAX)
        return invalid(e, "host '%s': too long (a name has at most %d characters)", SHOW(text),
                       NSBOX_HOSTNAME_MAX);
    /* The allow list is enforced on addresses and ports, not on URLs: anything URL-shaped
     * would be silently reduced to its host, so it is refused with what to write instead. */
    if (strstr(text, "://"))
        return invalid(e, "host '%s': has a scheme; give only the host name "
                       "(e.g. 'example.com' or 'example.com:8443')", SHOW(text));
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)text[i];
        if (c == '/' && looks_like_range(text, i))
            return invalid(e, "host '%s': an address range; allow lists hosts one by one, "
                           "and ranges go in egress (--egress %s, EgressPolicy)",
                           SHOW(text), SHOW(text));
        if (c == '/' || c == '?' || c == '#')
            return invalid(e, "host '%s': has a path; give only the host name", SHOW(text));
        if (c == '*')
            return invalid(e, "host '%s': wildcards are not supported; list each host",
                           SHOW(text));
        if (c == '@')
            return invalid(e, "host '%s': has user info ('@'); give only the host name",
                           SHOW(text));
        if (c <= 0x20 || c == 0x7f)
            return invalid(e, "host '%s': contains whitespace or control characters",
                           SHOW(text));
    }
    memcpy(buf, text, len + 1);

    if (buf[0] == '[') {
        char *close = strchr(buf, ']');
        if (!close)
            return invalid(e, "host '%s': missing ']'", SHOW(text));
        *close = '\0';
        if (inet_pton(AF_INET6, buf + 1, addr) != 1)
            return invalid(e, "host '%s': brackets must hold an IPv6 address", SHOW(text));
        const char *rest = close + 1;
        if (*rest == ':') {
            if (parse_port(rest + 1, strlen(rest + 1), text, &h.port, e) < 0)
                return -1;
        } else if (*rest) {
            return invalid(e, "host '%s': unexpected text after ']'", SHOW(text));
        }
        if (set_host_ip(&h, AF_INET6, addr) < 0)
            return invalid(e, "host '%s': cannot format address", SHOW(text));
        *out = h;
        return 0;
    }

    char *colon = strchr(buf, ':');
    if (colon && strchr(colon + 1, ':')) {
        /* Two colons or more: only a bare IPv6 address fits, and it cannot carry a port. */
        if (inet_pton(AF_INET6, buf, addr) != 1)
            return invalid(e, "host '%s': not a valid IPv6 address (write [address]:port to "
                           "give a port)", SHOW(text));
        if (set_host_ip(&h, AF_INET6, addr) < 0)
            return invalid(e, "host '%s': cannot format address", SHOW(text));
        *out = h;
        return 0;
    }
    if (colon) {
        if (parse_port(colon + 1, strlen(colon + 1), text, &h.port, e) < 0)
            return -1;
        *colon = '\0';
    }
    if (!buf[0])
        return invalid(e, "host '%s': empty host name", SHOW(text));
    if (inet_pton(AF_INET, buf, addr) == 1) {
        if (set_host_ip(&h, AF_INET, addr) < 0)
            return invalid(e, "host '%s': cannot format address", SHOW(text));
        *out = h;
        return 0;
    }
    if (strspn(buf, "0123456789.") == strlen(buf))
        return invalid(e, "host '%s': not a valid IPv4 address", SHOW(text));
    if (check_dns_name(buf, text, e) < 0)
        return -1;
    memcpy(h.name, buf, strlen(buf) + 1);
    *out = h;
    return 0;
}

int nsbox_host_format(const struct nsbox_host *h, char *buf, size_t n)
{
    int r;
    bool v6 = strchr(h->name, ':') != NULL;
    if (h->port == 443)
        r = snprintf(buf, n, "%s", h->name);
    else
        r = snprintf(buf, n, v6 ? "[%s]:%u" : "%s:%u", h->name, (unsigned)h->port);
    return (r < 0 || (size_t)r >= n) ? -1 : r;
}

/* ---- CIDRs ---------------------------------------------------------------------------------- */

static void mask_host_bits(uint8_t *addr, unsigned bytes, unsigned prefix)
{
    for (unsigned i = 0; i < bytes; i++) {
        unsigned bit = i * 8;
        if (bit >= prefix)
            addr[i] = 0;
        else if (prefix - bit < 8)
            addr[i] &= (uint8_t)(0xff << (8 - (prefix - bit)));
    }
}

int nsbox_cidr_format(const struct nsbox_cidr *c, char *buf, size_t n)
{
    char a[INET6_ADDRSTRLEN];
    if (!inet_ntop(c->family, c->addr, a, sizeof a))
        return -1;
    int r = snprintf(buf, n, "%s/%u", a, (unsigned)c->prefix);
    return (r < 0 || (size_t)r >= n) ? -1 : r;
}

int nsbox_parse_cidr(const char *text, struct nsbox_cidr *out, struct nsbox_err *e)
{
    struct nsbox_cidr c = {0};
    char buf[INET6_ADDRSTRLEN + 8];

    if (!text || !*text)
        return invalid(e, "cidr: empty address");
    size_t len = strnlen(text, sizeof buf);
    if (len >= sizeof buf)
        return invalid(e, "cidr '%s': too long", SHOW(text));
    memcpy(buf, text, len + 1);
    char *slash = strchr(buf, '/');
    if (slash)
        *slash = '\0';
    c.family = strchr(buf, ':') ? AF_INET6 : AF_INET;
    unsigned max = c.family == AF_INET6 ? 128 : 32;
    if (inet_pton(c.family, buf, c.addr) != 1)
        return invalid(e, "cidr '%s': not an IPv4 or IPv6 address (expected e.g. 10.0.0.0/8, "
                       "192.0.2.1 or fd00::/8)", SHOW(text));
    uint64_t prefix = max;
    if (slash && (!parse_decimal(slash + 1, strlen(slash + 1), &prefix) || prefix > max))
        return invalid(e, "cidr '%s': prefix length must be a number between 0 and %u",
                       SHOW(text), max);
    c.prefix = (uint8_t)prefix;
    /* Refuse rather than normalise: "10.1.2.3/8" is more likely a typo for /32 than a wish
     * to open all of 10/8, and normalising would widen the policy without a word. */
    struct nsbox_cidr net = c;
    mask_host_bits(net.addr, max / 8, c.prefix);
    if (memcmp(net.addr, c.addr, sizeof c.addr) != 0) {
        char fixed[INET6_ADDRSTRLEN + 8];
        if (nsbox_cidr_format(&net, fixed, sizeof fixed) < 0)
            fixed[0] = '\0';
        return invalid(e, "cidr '%s': has host bits set (the network is %s; a single address "
                       "is written without a prefix)", SHOW(text), fixed);
    }
    *out = c;
    return 0;
}

/* ---- env ------------------------------------------------------------------------------------ */

int nsbox_parse_env(const char *kv, struct nsbox_err *e)
{
    if (!kv)
        return invalid(e, "env: missing NAME=VALUE");
    const char *eq = strchr(kv, '=');
    if (!eq)
        return invalid(e, "env '%s': expected NAME=VALUE", SHOW(kv));
    if (!env_name_valid(kv, (size_t)(eq - kv)))
        return invalid(e, "env '%s': invalid name (must match [A-Za-z_][A-Za-z0-9_]*)",
                       SHOW(kv));
    if (strnlen(kv, NSBOX_ENV_MAX) >= NSBOX_ENV_MAX)
        return invalid(e, "env '%s': longer than %d bytes", SHOW(kv), NSBOX_ENV_MAX - 1);
    return 0;
}

static ssize_t env_find(const struct nsbox_spec *s, const char *name, size_t n)
{
    for (size_t i = 0; i < s->n_env; i++)
        if (strncmp(s->env[i], name, n) == 0 && s->env[i][n] == '=')
            return (ssize_t)i;
    return -1;
}

const char *nsbox_spec_getenv(const struct nsbox_spec *s, const char *name)
{
    ssize_t i = env_find(s, name, strlen(name));
    return i < 0 ? NULL : strchr(s->env[i], '=') + 1;
}

/* Takes ownership of kv (already checked by nsbox_parse_env). A repeated name replaces the
 * value in place, as a later `-e K=V` or `export` would. */
static int env_put(struct nsbox_spec *s, char *kv, struct nsbox_err *e)
{
    ssize_t i = env_find(s, kv, (size_t)(strchr(kv, '=') - kv));
    if (i >= 0) {
        free(s->env[i]);
        s->env[i] = kv;
        return 0;
    }
    if (s->n_env >= NSBOX_MAX_ENV) {
        free(kv);
        return invalid(e, "env: too many variables (at most %d)", NSBOX_MAX_ENV);
    }
    s->env[s->n_env++] = kv;
    return 0;
}

static void env_clear(struct nsbox_spec *s)
{
    for (size_t i = 0; i < s->n_env; i++) {
        free(s->env[i]);
        s->env[i] = NULL;
    }
    s->n_env = 0;
}

static int env_put_pair(struct nsbox_spec *s, const char *name, const char *value,
                        struct nsbox_err *e)
{
    size_t nl = strlen(name), vl = strlen(value);
    if (nl + vl + 2 > NSBOX_ENV_MAX)
        return invalid(e, "env '%s': longer than %d bytes", SHOW(name), NSBOX_ENV_MAX - 1);
    char *kv = malloc(nl + vl + 2);
    if (!kv)
        return nsbox_err_sys(e, "env");
    memcpy(kv, name, nl);
    kv[nl] = '=';
    memcpy(kv + nl + 1, value, vl + 1);
    if (nsbox_parse_env(kv, e) < 0) {
        free(kv);
        return -1;
    }
    return env_put(s, kv, e);
}

/* ---- instance types ------------------------------------------------------------------------- */

#define DEFAULT_TYPES                                                                              \
    {"small", {1, 1 * GiB, 256, 2 * GiB}}, {"medium", {2, 4 * GiB, 1024, 10 * GiB}},               \
        {"large", {4, 8 * GiB, 4096, 20 * GiB}}

static const struct nsbox_instance_type default_types[] = {DEFAULT_TYPES};
static struct nsbox_instance_type types[NSBOX_MAX_INSTANCE_TYPES] = {DEFAULT_TYPES};
static size_t n_types = NSBOX_ARRAY_LEN(default_types);

const struct nsbox_instance_type *nsbox_instance_type_find(const char *name)
{
    for (size_t i = 0; name && i < n_types; i++)
        if (strcmp(types[i].name, name) == 0)
            return &types[i];
    return NULL;
}

const struct nsbox_instance_type *nsbox_instance_types(size_t *n)
{
    *n = n_types;
    return types;
}

void nsbox_instance_types_reset(void)
{
    memset(types, 0, sizeof types);
    memcpy(types, default_types, sizeof default_types);
    n_types = NSBOX_ARRAY_LEN(default_types);
}

static void type_names(char *buf, size_t n)
{
    size_t o = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < n_types && o < n; i++) {
        int r = snprintf(buf + o, n - o, "%s%s", i ? ", " : "", types[i].name);
        if (r < 0)
            break;
        o += (size_t)r;
    }
}

/* ---- sizes ---------------------------------------------------------------------------------- */

int nsbox_parse_size(const char *s, uint64_t *out, struct nsbox_err *e)
{
    static const struct {
        const char *unit;
        unsigned shift;
    } units[] = {
        {"", 0},    {"b", 0},     {"k", 10},  {"kb", 10}, {"kib", 10}, {"m", 20},
        {"mb", 20}, {"mib", 20},  {"g", 30},  {"gb", 30}, {"gib", 30}, {"t", 40},
        {"tb", 40}, {"tib", 40},
    };
    if (!s)
        return invalid(e, "size: missing");
    size_t nd = strspn(s, "0123456789");
    uint64_t v = 0;
    const char *unit = s + nd;
    if (nd == 0 || !parse_decimal(s, nd, &v) || strlen(unit) > 3)
        return invalid(e, "size '%s': expected a whole number of bytes with an optional unit "
                       "(B, KiB, MiB, GiB, TiB), e.g. 512MiB", SHOW(s));
    char lower[4] = {0};
    for (size_t i = 0; unit[i]; i++)
        lower[i] = to_lower(unit[i]);
    for (size_t i = 0; i < NSBOX_ARRAY_LEN(units); i++) {
        if (strcmp(lower, units[i].unit) != 0)
            continue;
        if (v > (UINT64_MAX >> units[i].shift))
            return invalid(e, "size '%s': too large", SHOW(s));
        *out = v << units[i].shift;
        return 0;
    }
    return invalid(e, "size '%s': unknown unit '%s' (use B, KiB, MiB, GiB or TiB)", SHOW(s),
                   SHOW(unit));
}

/* ---- JSON input helpers --------------------------------------------------------------------- */

static int hex_value(char c)
{
    if (is_digit(c))
        return c - '0';
    c = to_lower(c);
    return (c >= 'a' && c <= 'f') ? c - 'a' + 10 : -1;
}

/* cJSON turns "\u0000" into a NUL inside the decoded string and keeps going, so
 * "/good\u0000/../evil" would silently become "/good"; a \u escape with non-hex digits decodes
 * to 0 as well, and a raw NUL byte cuts the string the same way. JSON text has no reason to
 * carry any of them, so all are refused before parsing. Backslashes are only legal inside
 * strings, so skipping each escaped character is enough to tell "\\u0000" (a backslash, then
 * text) from "\u0000". */
static int check_no_nul(const char *json, size_t len, struct nsbox_err *e)
{
    for (size_t i = 0; i < len; i++) {
        if (json[i] == '\0')
            return invalid(e, "contains a NUL byte");
        if (json[i] != '\\' || i + 1 >= len)
            continue;
        if (json[i + 1] == 'u') {
            unsigned v = 0;
            if (i + 5 >= len)
                return invalid(e, "invalid \\u escape at byte %zu", i);
            for (size_t k = i + 2; k < i + 6; k++) {
                int h = hex_value(json[k]);
                if (h < 0)
                    return invalid(e, "invalid \\u escape at byte %zu", i);
                v = v * 16 + (unsigned)h;
            }
            if (v == 0)
                return invalid(e, "contains a NUL character (\\u0000) in a string");
        }
        i++;
    }
    return 0;
}

static int parse_json_object(const char *json, size_t len, size_t max, cJSON **out,
                             struct nsbox_err *e)
{
    const char *end = NULL;
    if (!json || len == 0)
        return invalid(e, "empty input (expected a JSON object)");
    if (len > max)
        return invalid(e, "larger than %zu bytes", max);
    if (check_no_nul(json, len, e) < 0)
        return -1;
    cJSON *root = cJSON_ParseWithLengthOpts(json, len, &end, 0);
    if (!root) {
        size_t at = (end && end >= json && end <= json + len) ? (size_t)(end - json) : 0;
        return invalid(e, "invalid JSON near byte %zu", at);
    }
    /* cJSON stops after the first value; anything but whitespace after it is a second
     * document or garbage, which a strict reader must not ignore. */
    for (const char *p = end; p && p < json + len; p++)
        if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r') {
            cJSON_Delete(root);
            return invalid(e, "unexpected text after the JSON value at byte %zu",
                           (size_t)(p - json));
        }
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return invalid(e, "must be a JSON object");
    }
    *out = root;
    return 0;
}

/* Integral, in range. cJSON keeps numbers as doubles; every range here is far below 2^53, so
 * the comparison and the cast are exact. 2.0 is accepted as 2, 2.5 is not. */
static int json_uint(const cJSON *it, uint64_t min, uint64_t max, uint64_t *out,
                     struct nsbox_err *e)
{
    double d = cJSON_IsNumber(it) ? it->valuedouble : -1;
    if (!(d >= (double)min && d <= (double)max) || (double)(uint64_t)d != d)
        return invalid(e, "must be an integer between %" PRIu64 " and %" PRIu64, min, max);
    *out = (uint64_t)d;
    return 0;
}

static int json_pids(const cJSON *it, uint64_t *out, struct nsbox_err *e)
{
    if (json_uint(it, PIDS_MIN, PIDS_MAX, out, e) < 0)
        return invalid(e, "must be an integer between %u and %u (the sandbox's init counts: "
                          "1 would leave no process for a command)",
                       PIDS_MIN, PIDS_MAX);
    return 0;
}

static int text_uint(const char *v, uint64_t min, uint64_t max, uint64_t *out,
                     struct nsbox_err *e)
{
    uint64_t x = 0;
    if (!parse_decimal(v, strlen(v), &x) || x < min || x > max)
        return invalid(e, "must be an integer between %" PRIu64 " and %" PRIu64, min, max);
    *out = x;
    return 0;
}

/* Memory and disk: bytes as a number, or a size string. */
static int json_bytes(const cJSON *it, uint64_t *out, struct nsbox_err *e)
{
    uint64_t v = 0;
    if (cJSON_IsString(it)) {
        if (nsbox_parse_size(it->valuestring, &v, e) < 0)
            return -1;
    } else if (json_uint(it, 0, BYTES_MAX, &v, e) < 0) {
        return invalid(e, "must be a size (\"4GiB\") or a number of bytes");
    }
    if (v < BYTES_MIN || v > BYTES_MAX)
        return invalid(e, "must be between 1MiB and 1PiB");
    *out = v;
    return 0;
}

/* ---- string options (shared by JSON and the CLI) -------------------------------------------- */

/* value NULL is JSON null: back to the default, for the options that are "none" by default. */

static int set_instance_type(struct nsbox_spec *s, const char *v, struct nsbox_err *e)
{
    if (!name_valid(v))
        return invalid(e, "'%s' is not an instance type name (e.g. small, medium, large)",
                       SHOW(v));
    memcpy(s->instance_type, v, strlen(v) + 1);
    /* Stale limits of the previous type must never be enforced: validate() fills them. */
    memset(&s->limits, 0, sizeof s->limits);
    return 0;
}

static int set_region(struct nsbox_spec *s, const char *v, struct nsbox_err *e)
{
    if (!region_valid(v))
        return invalid(e, "'%s' is not a region name (lower-case letters, digits and '-', "
                       "e.g. nl-north-1)", SHOW(v));
    memcpy(s->region, v, strlen(v) + 1);
    return 0;
}

static int set_image(struct nsbox_spec *s, const char *v, struct nsbox_err *e)
{
    size_t n = strnlen(v, PATH_MAX);
    if (v[0] == '/') {
        if (n >= PATH_MAX)
            return invalid(e, "path is longer than %d bytes", PATH_MAX - 1);
    } else if (!name_valid(v) && !nsbox_ociref_is_reference(v)) {
        return invalid(e, "'%s' is neither \"host\", an image reference (python:3.12), an image name ([a-z0-9][a-z0-9._-]*, at "
                       "most %d characters) nor an absolute path", SHOW(v), NSBOX_NAME_MAX - 1);
    }
    memcpy(s->image, v, n + 1);
    return 0;
}

static int set_setup_script(struct nsbox_spec *s, const char *v, struct nsbox_err *e)
{
    char *copy = NULL;
    size_t n = v ? strnlen(v, NSBOX_SCRIPT_MAX + 1) : 0;
    if (n > NSBOX_SCRIPT_MAX)
        return invalid(e, "longer than %u bytes", NSBOX_SCRIPT_MAX);
    /* An empty script does nothing: store it as "no script" so there is one way to say it. */
    if (n > 0 && !(copy = strndup(v, n)))
        return nsbox_err_sys(e, "setup_script");
    free(s->setup_script);
    s->setup_script = copy;
    return 0;
}

static int set_workspace(struct nsbox_spec *s, const char *v, struct nsbox_err *e)
{
    if (!v || !*v) {
        s->workspace[0] = '\0';
        return 0;
    }
    size_t n = strnlen(v, PATH_MAX);
    if (v[0] != '/')
        return invalid(e, "'%s' must be an absolute path (or \"\" for a fresh directory)",
                       SHOW(v));
    if (n >= PATH_MAX)
        return invalid(e, "path is longer than %d bytes", PATH_MAX - 1);
    memcpy(s->workspace, v, n + 1);
    return 0;
}

/* ---- network, egress ------------------------------------------------------------------------ */

static int add_host(struct nsbox_spec *s, const char *text, struct nsbox_err *e)
{
    struct nsbox_host h;
    if (nsbox_parse_host(text, &h, e) < 0)
        return -1;
    for (size_t i = 0; i < s->n_hosts; i++)
        if (s->hosts[i].port == h.port && strcmp(s->hosts[i].name, h.name) == 0)
            return 0;
    if (s->n_hosts >= NSBOX_MAX_HOSTS)
        return invalid(e, "too many hosts (at most %d)", NSBOX_MAX_HOSTS);
    s->hosts[s->n_hosts++] = h;
    return 0;
}

static int add_cidr(struct nsbox_spec *s, const char *text, struct nsbox_err *e)
{
    struct nsbox_cidr c;
    if (nsbox_parse_cidr(text, &c, e) < 0)
        return -1;
    for (size_t i = 0; i < s->n_egress; i++)
        if (memcmp(&s->egress[i], &c, sizeof c) == 0)
            return 0;
    if (s->n_egress >= NSBOX_MAX_CIDRS)
        return invalid(e, "too many entries (at most %d)", NSBOX_MAX_CIDRS);
    s->egress[s->n_egress++] = c;
    return 0;
}

static const char *const network_forms =
    "must be \"none\", \"all\" or {\"allow\": [\"host\", \"host:port\", ...]}";

static int json_network(struct nsbox_spec *s, const cJSON *it, struct nsbox_err *e)
{
    if (cJSON_IsString(it)) {
        if (strcmp(it->valuestring, "none") == 0)
            s->net = NSBOX_NET_NONE;
        else if (strcmp(it->valuestring, "all") == 0)
            s->net = NSBOX_NET_ALL;
        else
            return invalid(e, "%s", network_forms);
        s->n_hosts = 0;
        return 0;
    }
    if (!cJSON_IsObject(it))
        return invalid(e, "%s", network_forms);
    const cJSON *allow = NULL, *c;
    cJSON_ArrayForEach(c, it) {
        if (!c->string || strcmp(c->string, "allow") != 0)
            return invalid(e, "unknown key '%s' (%s)", SHOW(c->string), network_forms);
        allow = c;
    }
    if (!cJSON_IsArray(allow))
        return invalid(e, "'allow' must be an array of host strings");
    s->n_hosts = 0;
    cJSON_ArrayForEach(c, allow) {
        if (!cJSON_IsString(c))
            return invalid(e, "'allow' must be an array of host strings");
        if (add_host(s, c->valuestring, e) < 0)
            return -1;
    }
    if (s->n_hosts == 0)
        return invalid(e, "'allow' needs at least one host (use \"none\" to block everything)");
    s->net = NSBOX_NET_ALLOW;
    return 0;
}

/* Calls fn on each comma-separated item, spaces around items trimmed (shell users write
 * "a, b"). Empty items are errors: "a,,b" is a typo, not a wish. */
static int for_each_item(struct nsbox_spec *s, const char *list,
                         int (*fn)(struct nsbox_spec *, const char *, struct nsbox_err *),
                         struct nsbox_err *e)
{
    cleanup_free char *copy = strdup(list);
    if (!copy)
        return nsbox_err_sys(e, "spec");
    char *p = copy;
    for (;;) {
        char *comma = strchr(p, ',');
        if (comma)
            *comma = '\0';
        while (*p == ' ')
            p++;
        size_t n = strlen(p);
        while (n > 0 && p[n - 1] == ' ')
            p[--n] = '\0';
        if (n == 0)
            return invalid(e, "empty item in list '%s'", SHOW(list));
        if (fn(s, p, e) < 0)
            return -1;
        if (!comma)
            break;
        p = comma + 1;
    }
    return 0;
}

static int text_network(struct nsbox_spec *s, const char *v, struct nsbox_err *e)
{
    if (strcmp(v, "none") == 0 || strcmp(v, "all") == 0) {
        s->net = v[0] == 'n' ? NSBOX_NET_NONE : NSBOX_NET_ALL;
        s->n_hosts = 0;
        return 0;
    }
    if (strncmp(v, "allow=", 6) != 0)
        return invalid(e, "must be none, all or allow=HOST[,HOST...]");
    s->n_hosts = 0;
    if (for_each_item(s, v + 6, add_host, e) < 0)
        return -1;
    s->net = NSBOX_NET_ALLOW;
    return 0;
}

static int json_egress(struct nsbox_spec *s, const cJSON *it, struct nsbox_err *e)
{
    const cJSON *c;
    if (!cJSON_IsNull(it) && !cJSON_IsArray(it))
        return invalid(e, "must be an array of CIDR strings (e.g. [\"10.0.0.0/8\"])");
    s->n_egress = 0;
    cJSON_ArrayForEach(c, it) {
        if (!cJSON_IsString(c))
            return invalid(e, "must be an array of CIDR strings (e.g. [\"10.0.0.0/8\"])");
        if (add_cidr(s, c->valuestring, e) < 0)
            return -1;
    }
    return 0;
}

static int json_env(struct nsbox_spec *s, const cJSON *it, struct nsbox_err *e)
{
    const cJSON *c;
    if (!cJSON_IsObject(it))
        return invalid(e, "must be an object of strings ({\"NAME\": \"value\"})");
    env_clear(s);
    cJSON_ArrayForEach(c, it) {
        if (!c->string || !env_name_valid(c->string, strlen(c->string)))
            return invalid(e, "'%s' is not a valid name (must match [A-Za-z_][A-Za-z0-9_]*)",
                           SHOW(c->string));
        if (!cJSON_IsString(c))
            return invalid(e, "value of '%s' must be a string", c->string);
        if (env_put_pair(s, c->string, c->valuestring, e) < 0)
            return -1;
    }
    return 0;
}

static int text_env(struct nsbox_spec *s, const char *v, struct nsbox_err *e)
{
    if (nsbox_parse_env(v, e) < 0)
        return -1;
    char *kv = strdup(v);
    if (!kv)
        return nsbox_err_sys(e, "env");
    return env_put(s, kv, e);
}

/* "limits" is output-only (the instance type decides it), but inspect output must be usable
 * as a spec again. So it is accepted when it matches what instance_type resolves to, and
 * refused otherwise: ignoring it would let a user believe they had set limits. */
static int json_limits(const cJSON *it, struct nsbox_limits *l, struct nsbox_err *e)
{
    const cJSON *c;
    if (!cJSON_IsObject(it))
        return invalid(e, "must be an object");
    memset(l, 0, sizeof *l);
    cJSON_ArrayForEach(c, it) {
        uint64_t v = 0;
        const char *k = c->string ? c->string : "";
        bool cpus = strcmp(k, "cpus") == 0, pids = strcmp(k, "pids") == 0;
        bool mem = strcmp(k, "memory_bytes") == 0, disk = strcmp(k, "disk_bytes") == 0;
        if (!cpus && !pids && !mem && !disk)
            return invalid(e, "unknown key '%s'", SHOW(k));
        if ((pids ? json_pids(c, &v, e)
                  : json_uint(c, cpus ? 1 : 0, cpus ? CPUS_MAX : BYTES_MAX, &v, e)) < 0)
            return nsbox_err_wrap(e, "'%s'", k);
        if (cpus)
            l->cpus = (uint32_t)v;
        else if (pids)
            l->pids = v;
        else if (mem)
            l->memory_bytes = v;
        else
            l->disk_bytes = v;
    }
    return 0;
}

static int check_limits_match(const struct nsbox_spec *s, const struct nsbox_limits *l,
                              struct nsbox_err *e)
{
    const struct nsbox_instance_type *t = nsbox_instance_type_find(s->instance_type);
    if (!t)
        return invalid(e, "instance_type '%s' is unknown", SHOW(s->instance_type));
    if (memcmp(&t->limits, l, sizeof *l) != 0)
        return invalid(e, "do not match instance_type '%s'; limits are output only (define an "
                       "instance type in the config file to change them)",
                       SHOW(s->instance_type));
    return 0;
}

/* ---- the key table -------------------------------------------------------------------------- */

enum key_kind { KEY_UINT, KEY_STRING, KEY_NETWORK, KEY_EGRESS, KEY_ENV, KEY_LIMITS };

struct spec_key {
    const char *name;
    enum key_kind kind;
    size_t off; /* KEY_UINT: offset of the uint64_t field */
    uint64_t min, max;
    int (*set_string)(struct nsbox_spec *, const char *, struct nsbox_err *);
    bool nullable; /* KEY_STRING: JSON null means the default */
};

static const struct spec_key keys[] = {
    {"instance_type", KEY_STRING, 0, 0, 0, set_instance_type, false},
    {"idle_timeout_seconds", KEY_UINT, offsetof(struct nsbox_spec, idle_timeout_seconds), 0,
     NSBOX_TTL_MAX, NULL, false},
    {"ttl_seconds", KEY_UINT, offsetof(struct nsbox_spec, ttl_seconds), 1, NSBOX_TTL_MAX, NULL,
     false},
    {"region", KEY_STRING, 0, 0, 0, set_region, false},
    {"network", KEY_NETWORK, 0, 0, 0, NULL, false},
    {"egress", KEY_EGRESS, 0, 0, 0, NULL, true},
    {"image", KEY_STRING, 0, 0, 0, set_image, false},
    {"setup_script", KEY_STRING, 0, 0, 0, set_setup_script, true},
    {"setup_script_timeout_seconds", KEY_UINT,
     offsetof(struct nsbox_spec, setup_script_timeout_seconds), 1, SETUP_TIMEOUT_MAX, NULL,
     false},
    {"workspace", KEY_STRING, 0, 0, 0, set_workspace, true},
    {"env", KEY_ENV, 0, 0, 0, NULL, false},
    {"limits", KEY_LIMITS, 0, 0, 0, NULL, false},
};

static const struct spec_key *key_find(const char *name)
{
    for (size_t i = 0; name && i < NSBOX_ARRAY_LEN(keys); i++)
        if (strcmp(keys[i].name, name) == 0)
            return &keys[i];
    return NULL;
}

static uint64_t *uint_field(struct nsbox_spec *s, const struct spec_key *k)
{
    return (uint64_t *)((char *)s + k->off);
}

static int apply_json(struct nsbox_spec *s, const struct spec_key *k, const cJSON *it,
                      struct nsbox_err *e)
{
    switch (k->kind) {
    case KEY_UINT:
        return json_uint(it, k->min, k->max, uint_field(s, k), e);
    case KEY_STRING:
        if (k->nullable && cJSON_IsNull(it))
            return k->set_string(s, NULL, e);
        if (!cJSON_IsString(it))
            return invalid(e, k->nullable ? "must be a string or null" : "must be a string");
        return k->set_string(s, it->valuestring, e);
    case KEY_NETWORK:
        return json_network(s, it, e);
    case KEY_EGRESS:
        return json_egress(s, it, e);
    case KEY_ENV:
        return json_env(s, it, e);
    case KEY_LIMITS:
        break; /* checked after all keys, against the final instance_type */
    }
    return 0;
}

static int apply_text(struct nsbox_spec *s, const struct spec_key *k, const char *v,
                      struct nsbox_err *e)
{
    switch (k->kind) {
    case KEY_UINT:
        return text_uint(v, k->min, k->max, uint_field(s, k), e);
    case KEY_STRING:
        return k->set_string(s, v, e);
    case KEY_NETWORK:
        return text_network(s, v, e);
    case KEY_EGRESS:
        return for_each_item(s, v, add_cidr, e);
    case KEY_ENV:
        return text_env(s, v, e);
    case KEY_LIMITS:
        return invalid(e, "is output only; choose an instance_type");
    }
    return 0;
}

/* ---- spec lifecycle ------------------------------------------------------------------------- */

void nsbox_spec_init(struct nsbox_spec *s)
{
    memset(s, 0, sizeof *s);
    strcpy(s->instance_type, NSBOX_DEFAULT_INSTANCE_TYPE);
    s->idle_timeout_seconds = 0;
    s->ttl_seconds = NSBOX_DEFAULT_TTL;
    strcpy(s->region, NSBOX_DEFAULT_REGION);
    s->net = NSBOX_NET_NONE;
    strcpy(s->image, NSBOX_DEFAULT_IMAGE);
    s->setup_script = NULL;
    s->setup_script_timeout_seconds = NSBOX_DEFAULT_SETUP_TIMEOUT;
    s->workspace[0] = '\0';
}

void nsbox_spec_free(struct nsbox_spec *s)
{
    if (!s)
        return;
    free(s->setup_script);
    s->setup_script = NULL;
    env_clear(s);
}

int nsbox_spec_copy(struct nsbox_spec *dst, const struct nsbox_spec *src, struct nsbox_err *e)
{
    if (src->n_env > NSBOX_MAX_ENV || src->n_hosts > NSBOX_MAX_HOSTS ||
        src->n_egress > NSBOX_MAX_CIDRS)
        return invalid(e, "spec: too many hosts, egress entries or env variables");
    memcpy(dst, src, sizeof *dst);
    dst->setup_script = NULL;
    dst->n_env = 0;
    memset(dst->env, 0, sizeof dst->env);
    if (src->setup_script && !(dst->setup_script = strdup(src->setup_script)))
        goto nomem;
    for (size_t i = 0; i < src->n_env; i++) {
        if (!(dst->env[i] = strdup(src->env[i])))
            goto nomem;
        dst->n_env = i + 1;
    }
    return 0;
nomem:
    nsbox_spec_free(dst);
    errno = ENOMEM;
    return nsbox_err_sys(e, "spec: copy");
}

static void spec_discard(struct nsbox_spec **p)
{
    if (*p) {
        nsbox_spec_free(*p);
        free(*p);
    }
}
#define cleanup_spec __attribute__((cleanup(spec_discard)))

/* Every change is made on a copy and committed whole, so a failed load or set leaves the
 * caller's spec exactly as it was (a CLI that reports the error and goes on, a supervisor
 * that refuses one request, must not run with half a spec). */
static struct nsbox_spec *spec_clone(const struct nsbox_spec *src, struct nsbox_err *e)
{
    struct nsbox_spec *t = malloc(sizeof *t);
    if (!t) {
        nsbox_err_sys(e, "spec");
        return NULL;
    }
    if (nsbox_spec_copy(t, src, e) < 0) {
        free(t);
        return NULL;
    }
    return t;
}

static void spec_commit(struct nsbox_spec *dst, struct nsbox_spec **tmp)
{
    nsbox_spec_free(dst);
    memcpy(dst, *tmp, sizeof *dst);
    free(*tmp);
    *tmp = NULL;
}

int nsbox_spec_from_json(struct nsbox_spec *s, const char *json, size_t len, struct nsbox_err *e)
{
    cleanup_cjson cJSON *root = NULL;
    if (parse_json_object(json, len, NSBOX_SPEC_JSON_MAX, &root, e) < 0)
        return nsbox_err_wrap(e, "spec");
    cleanup_spec struct nsbox_spec *t = spec_clone(s, e);
    if (!t)
        return -1;
    const cJSON *it, *limits = NULL;
    /* Keys are applied in document order, so a repeated key behaves as "the last one wins". */
    cJSON_ArrayForEach(it, root) {
        const struct spec_key *k = key_find(it->string);
        if (!k)
            return invalid(e, "spec: unknown key '%s'", SHOW(it->string));
        if (k->kind == KEY_LIMITS)
            limits = it;
        else if (apply_json(t, k, it, e) < 0)
            return nsbox_err_wrap(e, "spec: key '%s'", k->name);
    }
    if (limits) {
        struct nsbox_limits l;
        if (json_limits(limits, &l, e) < 0 || check_limits_match(t, &l, e) < 0)
            return nsbox_err_wrap(e, "spec: key 'limits'");
        t->limits = l;
    }
    spec_commit(s, &t);
    return 0;
}

int nsbox_spec_set(struct nsbox_spec *s, const char *key, const char *value, struct nsbox_err *e)
{
    const struct spec_key *k = key_find(key);
    if (!k)
        return invalid(e, "spec: unknown option '%s'", SHOW(key));
    if (!value)
        return invalid(e, "spec: option '%s': missing value", k->name);
    cleanup_spec struct nsbox_spec *t = spec_clone(s, e);
    if (!t)
        return -1;
    if (apply_text(t, k, value, e) < 0)
        return nsbox_err_wrap(e, "spec: option '%s'", k->name);
    spec_commit(s, &t);
    return 0;
}

/* ---- validation ----------------------------------------------------------------------------- */

static bool terminated(const char *buf, size_t n)
{
    return memchr(buf, '\0', n) != NULL;
}

/* The structure is public to the library: re-check what the setters guarantee, so that a
 * spec filled by hand cannot carry an out-of-range value or an unterminated string past here. */
static int check_fields(const struct nsbox_spec *s, struct nsbox_err *e)
{
    if (!terminated(s->instance_type, sizeof s->instance_type) ||
        !terminated(s->region, sizeof s->region) || !terminated(s->image, sizeof s->image) ||
        !terminated(s->workspace, sizeof s->workspace))
        return invalid(e, "spec: unterminated string field");
    for (size_t i = 0; i < NSBOX_ARRAY_LEN(keys); i++) {
        if (keys[i].kind != KEY_UINT)
            continue;
        uint64_t v = *uint_field((struct nsbox_spec *)s, &keys[i]);
        if (v < keys[i].min || v > keys[i].max)
            return invalid(e, "spec: key '%s': must be an integer between %" PRIu64
                           " and %" PRIu64, keys[i].name, keys[i].min, keys[i].max);
    }
    if (s->n_hosts > NSBOX_MAX_HOSTS || s->n_egress > NSBOX_MAX_CIDRS ||
        s->n_env > NSBOX_MAX_ENV)
        return invalid(e, "spec: too many hosts, egress entries or env variables");
    if (s->net != NSBOX_NET_NONE && s->net != NSBOX_NET_ALL && s->net != NSBOX_NET_ALLOW)
        return invalid(e, "spec: key 'network': unknown mode %d", (int)s->net);
    if (s->net == NSBOX_NET_ALLOW && s->n_hosts == 0)
        return invalid(e, "spec: key 'network': allow needs at least one host (use \"none\" to "
                       "block everything)");
    if (!region_valid(s->region))
        return invalid(e, "spec: key 'region': '%s' is not a region name", SHOW(s->region));
    return 0;
}

int nsbox_spec_validate(struct nsbox_spec *s, struct nsbox_err *e)
{
    if (check_fields(s, e) < 0)
        return -1;
    const struct nsbox_instance_type *t = nsbox_instance_type_find(s->instance_type);
    if (!t) {
        char names[512];
        type_names(names, sizeof names);
        return invalid(e, "spec: key 'instance_type': unknown type '%s' (valid: %s)",
                       SHOW(s->instance_type), names);
    }
    /* Only nl-north-1 can block traffic (docs/spec.md); elsewhere anything but all() would be
     * a policy the sandbox claims and does not enforce. The message is the hosted service's,
     * word for word, so that code handling it there handles it here. Egress entries are extra
     * addresses on top of network, so with all() they add nothing and are harmless. */
    if (strcmp(s->region, NSBOX_DEFAULT_REGION) != 0 && s->net != NSBOX_NET_ALL)
        return nsbox_err_set(e, NSBOX_E_POLICY, 0,
                             "This network policy is not supported in region '%s'; it is "
                             "supported only in nl-north-1. Pass network=Network.all() or a "
                             "supported region.",
                             s->region);
    s->limits = t->limits;
    return 0;
}

bool nsbox_spec_equal(const struct nsbox_spec *a, const struct nsbox_spec *b)
{
    if (strcmp(a->instance_type, b->instance_type) || strcmp(a->region, b->region) ||
        strcmp(a->image, b->image) || strcmp(a->workspace, b->workspace) ||
        memcmp(&a->limits, &b->limits, sizeof a->limits) ||
        a->idle_timeout_seconds != b->idle_timeout_seconds ||
        a->ttl_seconds != b->ttl_seconds ||
        a->setup_script_timeout_seconds != b->setup_script_timeout_seconds || a->net != b->net ||
        a->n_hosts != b->n_hosts || a->n_egress != b->n_egress || a->n_env != b->n_env ||
        a->n_hosts > NSBOX_MAX_HOSTS || a->n_egress > NSBOX_MAX_CIDRS || a->n_env > NSBOX_MAX_ENV)
        return false;
    if (!a->setup_script != !b->setup_script ||
        (a->setup_script && strcmp(a->setup_script, b->setup_script)))
        return false;
    for (size_t i = 0; i < a->n_hosts; i++)
        if (a->hosts[i].port != b->hosts[i].port || strcmp(a->hosts[i].name, b->hosts[i].name))
            return false;
    for (size_t i = 0; i < a->n_egress; i++)
        if (a->egress[i].family != b->egress[i].family ||
            a->egress[i].prefix != b->egress[i].prefix ||
            memcmp(a->egress[i].addr, b->egress[i].addr, sizeof a->egress[i].addr))
            return false;
    for (size_t i = 0; i < a->n_env; i++)
        if (strcmp(a->env[i], b->env[i]))
            return false;
    return true;
}

/* ---- rendering ------------------------------------------------------------------------------ */

static bool add_limits(cJSON *o, const struct nsbox_limits *l)
{
    cJSON *lim = cJSON_AddObjectToObject(o, "limits");
    return lim && cJSON_AddNumberToObject(lim, "cpus", l->cpus) &&
           cJSON_AddNumberToObject(lim, "memory_bytes", (double)l->memory_bytes) &&
           cJSON_AddNumberToObject(lim, "pids", (double)l->pids) &&
           cJSON_AddNumberToObject(lim, "disk_bytes", (double)l->disk_bytes);
}

static bool add_network(cJSON *o, const struct nsbox_spec *s)
{
    if (s->net != NSBOX_NET_ALLOW)
        return cJSON_AddStringToObject(o, "network", s->net == NSBOX_NET_ALL ? "all" : "none");
    cJSON *net = cJSON_AddObjectToObject(o, "network");
    cJSON *allow = cJSON_AddArrayToObject(net, "allow");
    if (!allow)
        return false;
    for (size_t i = 0; i < s->n_hosts && i < NSBOX_MAX_HOSTS; i++) {
        char buf[NSBOX_HOSTNAME_MAX + 16];
        cJSON *str;
        if (nsbox_host_format(&s->hosts[i], buf, sizeof buf) < 0 ||
            !(str = cJSON_CreateString(buf)))
            return false;
        cJSON_AddItemToArray(allow, str);
    }
    return true;
}

static bool add_egress(cJSON *o, const struct nsbox_spec *s)
{
    cJSON *arr = cJSON_AddArrayToObject(o, "egress");
    if (!arr)
        return false;
    for (size_t i = 0; i < s->n_egress && i < NSBOX_MAX_CIDRS; i++) {
        char buf[INET6_ADDRSTRLEN + 8];
        cJSON *str;
        if (nsbox_cidr_format(&s->egress[i], buf, sizeof buf) < 0 ||
            !(str = cJSON_CreateString(buf)))
            return false;
        cJSON_AddItemToArray(arr, str);
    }
    return true;
}

static bool add_env(cJSON *o, const struct nsbox_spec *s)
{
    cJSON *env = cJSON_AddObjectToObject(o, "env");
    if (!env)
        return false;
    for (size_t i = 0; i < s->n_env && i < NSBOX_MAX_ENV; i++) {
        const char *eq = strchr(s->env[i], '=');
        if (!eq)
            continue;
        cleanup_free char *name = strndup(s->env[i], (size_t)(eq - s->env[i]));
        if (!name || !cJSON_AddStringToObject(env, name, eq + 1))
            return false;
    }
    return true;
}

struct cJSON *nsbox_spec_to_cjson(const struct nsbox_spec *s)
{
    cleanup_cjson cJSON *o = cJSON_CreateObject();
    if (!o || !cJSON_AddStringToObject(o, "instance_type", s->instance_type))
        return NULL;
    /* Resolved limits when validate() ran, else what the table says now; an unknown type has
     * none, and then the key is left out rather than invented. */
    const struct nsbox_instance_type *t = nsbox_instance_type_find(s->instance_type);
    const struct nsbox_limits *l = s->limits.cpus ? &s->limits : t ? &t->limits : NULL;
    if (l && !add_limits(o, l))
        return NULL;
    if (!cJSON_AddNumberToObject(o, "idle_timeout_seconds", (double)s->idle_timeout_seconds) ||
        !cJSON_AddNumberToObject(o, "ttl_seconds", (double)s->ttl_seconds) ||
        !cJSON_AddStringToObject(o, "region", s->region) || !add_network(o, s) ||
        !add_egress(o, s) || !cJSON_AddStringToObject(o, "image", s->image))
        return NULL;
    if (!(s->setup_script ? cJSON_AddStringToObject(o, "setup_script", s->setup_script)
                          : cJSON_AddNullToObject(o, "setup_script")))
        return NULL;
    if (!cJSON_AddNumberToObject(o, "setup_script_timeout_seconds",
                                 (double)s->setup_script_timeout_seconds) ||
        !cJSON_AddStringToObject(o, "workspace", s->workspace) || !add_env(o, s))
        return NULL;
    return nsbox_steal_ptr(&o);
}

char *nsbox_spec_to_json(const struct nsbox_spec *s)
{
    cleanup_cjson cJSON *o = nsbox_spec_to_cjson(s);
    return o ? cJSON_Print(o) : NULL;
}

/* ---- instance type config ------------------------------------------------------------------- */

static int type_field(struct nsbox_instance_type *t, const cJSON *c, unsigned *seen,
                      struct nsbox_err *e)
{
    uint64_t v = 0;
    const char *k = c->string ? c->string : "";
    if (strcmp(k, "cpus") == 0) {
        if (json_uint(c, 1, CPUS_MAX, &v, e) < 0)
            return -1;
        t->limits.cpus = (uint32_t)v;
        *seen |= 1;
    } else if (strcmp(k, "memory") == 0) {
        if (json_bytes(c, &t->limits.memory_bytes, e) < 0)
            return -1;
        *seen |= 2;
    } else if (strcmp(k, "pids") == 0) {
        if (json_pids(c, &v, e) < 0)
            return -1;
        t->limits.pids = v;
        *seen |= 4;
    } else if (strcmp(k, "disk") == 0) {
        if (json_bytes(c, &t->limits.disk_bytes, e) < 0)
            return -1;
        *seen |= 8;
    } else {
        return invalid(e, "unknown key (expected cpus, memory, pids, disk)");
    }
    return 0;
}

static int load_type(struct nsbox_instance_type *tbl, size_t *n, const cJSON *entry,
                     struct nsbox_err *e)
{
    const char *name = entry->string ? entry->string : "";
    if (!name_valid(name))
        return invalid(e, "instance_types: '%s' is not a valid name ([a-z0-9][a-z0-9._-]*"
                       ", at most %d characters)", SHOW(name), NSBOX_NAME_MAX - 1);
    if (!cJSON_IsObject(entry))
        return invalid(e, "instance_types.%s: must be an object", name);
    struct nsbox_instance_type *t = NULL;
    for (size_t i = 0; i < *n; i++)
        if (strcmp(tbl[i].name, name) == 0)
            t = &tbl[i];
    bool is_new = !t;
    if (is_new) {
        if (*n >= NSBOX_MAX_INSTANCE_TYPES)
            return invalid(e, "instance_types: more than %d types",
                           NSBOX_MAX_INSTANCE_TYPES);
        t = &tbl[(*n)++];
        memset(t, 0, sizeof *t);
        memcpy(t->name, name, strlen(name) + 1);
    }
    unsigned seen = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, entry) {
        if (type_field(t, c, &seen, e) < 0)
            return nsbox_err_wrap(e, "instance_types.%s.%s", name, SHOW(c->string));
    }
    if (is_new && seen != 15)
        return invalid(e, "instance_types.%s: a new type needs cpus, memory, pids and "
                       "disk", name);
    return 0;
}

/* Messages without a prefix: the callers say which config this was. */
static int load_types_json(const char *json, size_t len, struct nsbox_err *e)
{
    cleanup_cjson cJSON *root = NULL;
    struct nsbox_instance_type tbl[NSBOX_MAX_INSTANCE_TYPES];
    size_t n = NSBOX_ARRAY_LEN(default_types);
    const cJSON *it, *section = NULL;

    if (parse_json_object(json, len, NSBOX_SPEC_JSON_MAX, &root, e) < 0)
        return -1;
    memset(tbl, 0, sizeof tbl);
    memcpy(tbl, default_types, sizeof default_types);
    /* Every section of the file, whoever reads it: a misspelled one ("pol") must not silently
     * leave its settings at their defaults. */
    static const char *const sections[] = {"instance_types", "network", "pool", "workspace"};
    cJSON_ArrayForEach(it, root) {
        bool known = false;
        for (size_t i = 0; i < NSBOX_ARRAY_LEN(sections); i++)
            known = known || (it->string && strcmp(it->string, sections[i]) == 0);
        if (!known)
            return invalid(e, "unknown key '%s' (the sections are instance_types, network, pool "
                              "and workspace)",
                           SHOW(it->string));
        if (strcmp(it->string, "instance_types") == 0)
            section = it;
    }
    if (section && !cJSON_IsObject(section))
        return invalid(e, "instance_types: must be an object of {name: {cpus, memory, "
                       "pids, disk}}");
    cJSON_ArrayForEach(it, section) {
        if (load_type(tbl, &n, it, e) < 0)
            return -1;
    }
    memcpy(types, tbl, sizeof types);
    n_types = n;
    return 0;
}

int nsbox_instance_types_load_json(const char *json, size_t len, struct nsbox_err *e)
{
    return load_types_json(json, len, e) < 0 ? nsbox_err_wrap(e, "config") : 0;
}

static int read_small_file(int fd, const char *path, char **out, size_t *len,
                           struct nsbox_err *e)
{
    struct stat st;
    if (fstat(fd, &st) < 0)
        return nsbox_err_sys(e, "config %s", path);
    if (!S_ISREG(st.st_mode))
        return invalid(e, "config %s: not a regular file", path);
    if ((uint64_t)st.st_size > NSBOX_SPEC_JSON_MAX)
        return invalid(e, "config %s: larger than %u bytes", path, NSBOX_SPEC_JSON_MAX);
    if (st.st_size == 0)
        return invalid(e, "config %s: empty file (write {} for the defaults)", path);
    cleanup_free char *buf = malloc((size_t)st.st_size + 1);
    size_t n = 0;
    if (!buf)
        return nsbox_err_sys(e, "config %s", path);
    /* Read at most the size fstat() reported, plus one byte to notice a file that grew. */
    while (n <= (size_t)st.st_size) {
        ssize_t r = read(fd, buf + n, (size_t)st.st_size + 1 - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return nsbox_err_sys(e, "config %s: read", path);
        if (r == 0)
            break;
        n += (size_t)r;
    }
    if (n > (size_t)st.st_size)
        return invalid(e, "config %s: changed while being read", path);
    *out = nsbox_steal_ptr(&buf);
    *len = n;
    return 0;
}

int nsbox_config_text(const char *path, char **text, size_t *len, char *used, size_t usedn,
                      struct nsbox_err *e)
{
    *text = NULL;
    *len = 0;
    bool must_exist = false;
    if (!path) {
        const char *env = getenv("NSBOX_CONFIG");
        /* An explicit $NSBOX_CONFIG that is missing is a typo to report, not a default. */
        must_exist = env && *env;
        path = must_exist ? env : NSBOX_CONFIG_DEFAULT_PATH;
    }
    if (used)
        snprintf(used, usedn, "%s", path);
    cleanup_close int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        if (errno == ENOENT && !must_exist)
            return 1;
        int code = errno == ENOENT ? NSBOX_E_NOTFOUND : NSBOX_E_SYS;
        nsbox_err_sys(e, "config %s", path);
        if (e)
            e->code = code;
        return -1;
    }
    return read_small_file(fd, path, text, len, e);
}

/* The config text (nsbox_config_text's rules) given to parse, whose errors get the file's name
 * in front (after prefix). With text, the caller keeps the text (NULL without a file). Returns
 * 0, 1 when there is no config file (parse not called), -1. */
static int config_parse(const char *path, const char *prefix,
                        int (*parse)(const char *text, size_t len, void *out, struct nsbox_err *e),
                        void *out, char **text, size_t *len, struct nsbox_err *e)
{
    cleanup_free char *buf = NULL;
    size_t n = 0;
    char used[PATH_MAX];
    int r = nsbox_config_text(path, &buf, &n, used, sizeof used, e);
    if (r < 0)
        return -1;
    if (r == 0 && parse(buf, n, out, e) < 0)
        return nsbox_err_wrap(e, "%s%s", prefix, used);
    if (text) {
        *text = nsbox_steal_ptr(&buf);
        *len = n;
    }
    return r;
}

int nsbox_config_section(int (*parse)(const char *text, size_t len, void *out,
                                       struct nsbox_err *e),
                         void *out, char **text, size_t *len, struct nsbox_err *e)
{
    return config_parse(NULL, "", parse, out, text, len, e) < 0 ? -1 : 0;
}

static int types_section(const char *text, size_t len, void *out, struct nsbox_err *e)
{
    (void)out;
    return load_types_json(text, len, e);
}

int nsbox_instance_types_load(const char *path, struct nsbox_err *e)
{
    int r = config_parse(path, "config ", types_section, NULL, NULL, NULL, e);
    if (r == 1)
        nsbox_instance_types_reset();
    return r < 0 ? -1 : 0;
}
