/* Namespaced sysctls (sysctl.h). */
#include "sysctl.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* The ipc namespace's (ipc/ipc_sysctl.c, ipc/mq_sysctl.c) and the uts namespace's keys. */
static const char *const ipc_uts_keys[] = {
    "kernel.msgmax",   "kernel.msgmnb",     "kernel.msgmni", "kernel.sem",
    "kernel.shmall",   "kernel.shmmax",     "kernel.shmmni", "kernel.shm_rmid_forced",
    "kernel.hostname", "kernel.domainname",
};

/* key with '/' read as '.', into out (the dotted form the lists use). */
static void dotted(const char *key, char *out, size_t n)
{
    snprintf(out, n, "%s", key);
    if (strchr(out, '/'))
        for (char *p = out; *p; p++)
            if (*p == '/')
                *p = '.';
}

static bool well_formed(const char *key)
{
    char sep = strchr(key, '/') ? '/' : '.';
    size_t len = strlen(key);
    if (!len || len >= NSBOX_SYSCTL_KEY_MAX ||
        key[strspn(key, "abcdefghijklmnopqrstuvwxyz"
                        "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
                        "0123456789_.:/@-")])
        return false;
    for (const char *s = key;;) {
        size_t c = strcspn(s, sep == '/' ? "/" : ".");
        if (c == 0 || (c == 1 && s[0] == '.') || (c == 2 && s[0] == '.' && s[1] == '.'))
            return false;
        if (!s[c])
            return true;
        s += c + 1;
    }
}

int nsbox_sysctl_check(const char *key, struct nsbox_err *e)
{
    if (!well_formed(key))
        return nsbox_err_invalid(e,
                                 "config.json: key 'linux.sysctl': '%s' is not a sysctl "
                                 "name (net.ipv4.ip_forward, or net/ipv4/conf/eth0.1/...)",
                                 NSBOX_SHOW(key));
    char d[NSBOX_SYSCTL_KEY_MAX];
    dotted(key, d, sizeof d);
    if (!strncmp(d, "net.", 4) || !strncmp(d, "fs.mqueue.", 10))
        return 0;
    for (size_t i = 0; i < sizeof ipc_uts_keys / sizeof ipc_uts_keys[0]; i++)
        if (!strcmp(d, ipc_uts_keys[i]))
            return 0;
    return nsbox_err_set(e, NSBOX_E_POLICY, EPERM,
                         "linux.sysctl: %s is not in a namespace of the container's own: "
                         "setting it would change the whole host, which nsbox-oci never lets a "
                         "container do; only net.*, kernel.shm*, kernel.msg*, kernel.sem, "
                         "fs.mqueue.*, kernel.hostname and kernel.domainname are applied; set "
                         "host-wide ones on the host (sysctl -w), or drop --sysctl %s",
                         d, d);
}

int nsbox_sysctl_path(const char *key, char *out, size_t n)
{
    int w = snprintf(out, n, "%s", key);
    if (w < 0 || (size_t)w >= n)
        return -1;
    if (!strchr(key, '/'))
        for (char *p = out; *p; p++)
            if (*p == '.')
                *p = '/';
    return 0;
}
