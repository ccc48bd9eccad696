/* Which sysctls belong to a container's own namespaces (runtime-spec config-linux.md, "Sysctl";
 * the list runc validates against), and where each is under /proc/sys. Pure; tested in
 * tests/unit/test_ocispec_linux.c, fuzzed through config.json (tests/fuzz/fuzz_ocispec.c). */
#ifndef NSBOX_SYSCTL_H
#define NSBOX_SYSCTL_H

#include "nsbox.h"

#include <stddef.h>

#define NSBOX_SYSCTL_KEY_MAX 128

/* key ("net.ipv4.ip_forward", or the path form "net/ipv4/conf/eth0.1/forwarding") is a sysctl
 * of a namespace the container has its own of: net.* (network), kernel.shm*, kernel.msg*,
 * kernel.sem, fs.mqueue.* (ipc), kernel.hostname, kernel.domainname (uts). 0, or -1 with
 * NSBOX_E_POLICY naming the key and why (a host-wide one) or NSBOX_E_INVALID (malformed: an
 * empty, '.' or '..' component, a character outside [A-Za-z0-9_.:/@-]). */
int nsbox_sysctl_check(const char *key, struct nsbox_err *e);
/* Its file below /proc/sys: "net/ipv4/ip_forward" (dots are separators, unless the key has a
 * '/': then it is the path). -1 when it does not fit. */
int nsbox_sysctl_path(const char *key, char *out, size_t n);

#endif
