/* Hosts and CIDRs of the spec's network allow-list and egress (docs/spec.md): parsing and
 * formatting. Pure. */
#include "spec_impl.h"
#include "cleanup.h"
#include "cleanup_cjson.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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
    if (!nsbox_spec_parse_decimal(p, n, &v) || v == 0 || v > 65535)
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

int nsbox_spec_net_parse_host(const char *text, struct nsbox_host *out, struct nsbox_err *e)
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
        /* a space between names: the list was written as a shell's words, not ours */
        if (c == ' ' && i > 0 && i + 1 < len && text[i + 1] != ' ')
            return invalid(e, "host '%s': contains a space; hosts are separated by commas "
                           "(allow=a.example,b.example)",
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

int nsbox_spec_net_host_format(const struct nsbox_host *h, char *buf, size_t n)
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

int nsbox_spec_net_cidr_format(const struct nsbox_cidr *c, char *buf, size_t n)
{
    char a[INET6_ADDRSTRLEN];
    if (!inet_ntop(c->family, c->addr, a, sizeof a))
        return -1;
    int r = snprintf(buf, n, "%s/%u", a, (unsigned)c->prefix);
    return (r < 0 || (size_t)r >= n) ? -1 : r;
}

int nsbox_spec_net_parse_cidr(const char *text, struct nsbox_cidr *out, struct nsbox_err *e)
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
    if (slash && (!nsbox_spec_parse_decimal(slash + 1, strlen(slash + 1), &prefix) || prefix > max))
        return invalid(e, "cidr '%s': prefix length must be a number between 0 and %u",
                       SHOW(text), max);
    c.prefix = (uint8_t)prefix;
    /* Refuse rather than normalise: "10.1.2.3/8" is more likely a typo for /32 than a wish
     * to open all of 10/8, and normalising would widen the policy without a word. */
    struct nsbox_cidr net = c;
    mask_host_bits(net.addr, max / 8, c.prefix);
    if (memcmp(net.addr, c.addr, sizeof c.addr) != 0) {
        char fixed[INET6_ADDRSTRLEN + 8];
        if (nsbox_spec_net_cidr_format(&net, fixed, sizeof fixed) < 0)
            fixed[0] = '\0';
        return invalid(e, "cidr '%s': has host bits set (the network is %s; a single address "
                       "is written without a prefix)", SHOW(text), fixed);
    }
    *out = c;
    return 0;
}
