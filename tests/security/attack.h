/* What the in-sandbox attacker's parts share (attack.c): one JSON line per probe, and how a
 * probe's result is judged. attack_self.c probes the prober's own powers, attack_host.c what
 * beyond the sandbox it could reach, attack_sock.c its sockets, attack_files.c what it does to
 * files it is given. The helpers keep the short names every probe calls them by. */
#ifndef NSBOX_ATTACK_H
#define NSBOX_ATTACK_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define BAD ((long)1) /* an address never mapped: page 0 */

struct outcome {
    long ret;
    int err;
    int sig;      /* killed by this signal (forked probes) */
    bool crashed; /* no result: child vanished without a signal */
};

/* One line per probe, {"name": ..., "blocked": ..., "detail": ...}, in one write(2). */
void emit(const char *name, bool blocked, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* errno's name ("EPERM"), or "errnoN". */
const char *ename(int e);
void describe(const struct outcome *o, char *buf, size_t cap);
/* The outcome of a call made here that returned ret (errno when it failed). */
struct outcome now(long ret);
/* Blocked: failed with one of the errnos given (0-terminated list). */
bool failed_with(const struct outcome *o, const int *errs);
extern const int EPERM_ENOSYS[];
/* A line for the probe: blocked when it failed with one of blocked_errs. */
void report(const char *name, struct outcome o, const int *blocked_errs);
typedef long (*probe_fn)(const void *arg);
/* Runs fn in a forked child (5 seconds at most); its result, or the signal that killed it. */
struct outcome in_child(probe_fn fn, const void *arg);
/* The file's first 64 KiB, NUL-terminated, in a buffer of attack.c's that the next call
 * reuses (its length in *len when len is given), or NULL. */
char *read_file(const char *path, size_t *len);

/* attack_host.c */
void attack_host_sockets(void);
void attack_host_terminals(void);
void attack_host_tiocsti_stdin(void);
void attack_host_fds(void);
void attack_host_cwd(void);
void attack_host_proc_sys(void);
void attack_host_launcher(void);
void attack_host_view(pid_t host_pid);
void attack_host_hidden_path(const char *path);
void attack_host_rootfs(void);
void attack_host_network(int host_port, const char *abstract);

/* attack_cgview.c: /sys and the view of the sandbox's own cgroup there */
void attack_cgview(void);

/* attack_self.c */
void attack_self_identity(void);
void attack_self_privilege_gain(void);

/* attack_sock.c: the subcommands "bind PORT" and "sockact" */
int attack_sock_bind_main(int argc, char **argv);
int attack_sock_activated_main(void);

/* attack_files.c: the subcommands "mkfiles DIR MAX SECONDS", "xattr FILE [NAME=VALUE]..." and
 * "mmap-write FILE..." */
int attack_files_mkfiles_main(int argc, char **argv);
int attack_files_xattr_main(int argc, char **argv);
int attack_files_mmap_write_main(int argc, char **argv);
/* "holdfiles TARGET MAPS": open files held until stdin closes (the host's file table). */
int attack_files_hold_main(int argc, char **argv);

/* attack_spawn.c: the subcommand "catch-spawn" ("catch-spawn hold": keeps the child stopped) */
int attack_spawn_catch_main(bool hold);

#endif
