/* Small OS helpers shared across modules. */
#ifndef NSBOX_UTIL_H
#define NSBOX_UTIL_H

#include "nsbox.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>

/* Where a layer below cli/ sends a line for the user (a build's progress, `gc -v`'s removals)
 * instead of printing it: cli/ prints (docs/architecture.md, "Who prints"). */
typedef void nsbox_note_fn(void *ctx, const char *line);
/* Where a layer's lines go: the function and context cli/ set (fn NULL: nowhere). */
struct nsbox_note {
    nsbox_note_fn *fn;
    void *ctx;
};
/* A note's line at the most, its NUL included: a debootstrap line whole. */
#define NSBOX_NOTE_MAX 16384
/* A line to n (NULL, or no function set: to nobody), formatted: at most NSBOX_NOTE_MAX bytes of
 * it. */
__attribute__((format(printf, 2, 3))) void nsbox_note_say(const struct nsbox_note *n,
                                                          const char *fmt, ...);
__attribute__((format(printf, 2, 0))) void nsbox_note_vsay(const struct nsbox_note *n,
                                                           const char *fmt, va_list ap);

/* Default disposition for every signal and an empty mask: ignored dispositions and the mask
 * survive exec, and a caller's (nsbox's, init's) must not pass to a sandbox command. */
void nsbox_reset_signals(void);

/* Attach nfds descriptors to msg as SCM_RIGHTS, using buf (CMSG_SPACE(sizeof(int) * nfds) bytes
 * at least, suitably aligned). */
void nsbox_cmsg_put_fds(struct msghdr *msg, void *buf, const int *fds, size_t nfds);
/* The most descriptors one message carries: the kernel's SCM_MAX_FD. */
#define NSBOX_MSG_FDS_MAX 253
/* One message of a header and a payload with up to NSBOX_MSG_FDS_MAX descriptors (SCM_RIGHTS),
 * as one sendmsg (a SOCK_SEQPACKET socket keeps it whole); EINTR is retried. Bytes sent,
 * -1/errno (EINVAL for more descriptors). */
ssize_t nsbox_msg_send(int sock, const void *hdr, size_t hlen, const void *payload, size_t plen,
                       const int *fds, size_t nfds);
/* Its receiving side: fds[0..2] get the descriptors that came (close-on-exec; -1 where none;
 * beyond three they are closed), *flags the message's flags (MSG_TRUNC, MSG_CTRUNC: the
 * caller decides what is whole). Bytes, 0 at EOF, -1/errno. */
ssize_t nsbox_msg_recv(int sock, void *hdr, size_t hlen, void *payload, size_t max, int fds[3],
                       int *flags);
/* The same for up to cap descriptors (at most NSBOX_MSG_FDS_MAX): fds[0..cap-1], -1 where none
 * came; *got says how many came (those beyond cap are closed). */
ssize_t nsbox_msg_recv_fds(int sock, void *hdr, size_t hlen, void *payload, size_t max, int *fds,
                           size_t cap, size_t *got, int *flags);

/* A whole file (dfd-relative path) as a NUL-terminated string of at most limit bytes; NULL with
 * errno (EFBIG when larger). */
char *nsbox_read_text_at(int dfd, const char *path, size_t limit);

/* Read fd to its end, keeping the first n - 1 bytes in buf (NUL-terminated) and dropping the
 * rest, so that a writer never blocks on a full pipe. Returns the bytes kept. */
size_t nsbox_read_bounded(int fd, char *buf, size_t n);
/* One read of nsbox_read_bounded's: into buf at *have (n bytes in all, one kept for the NUL,
 * which the caller writes), or into a sink once buf is full; read()'s result, EINTR retried. */
ssize_t nsbox_read_bounded_once(int fd, char *buf, size_t n, size_t *have);

/* pwrite all of buf at off (-1: write at the current position, as for a pipe or a terminal),
 * through short writes and EINTR. 0, or -1 with errno (EIO for a write that wrote nothing). */
int nsbox_pwrite_all(int fd, const void *buf, size_t len, off_t off);

#define NSBOX_SMALL_FILE_MAX (4u << 20)
/* Reads a whole file of at most NSBOX_SMALL_FILE_MAX bytes; ENOENT is returned as 1 with *out
 * NULL. */
int nsbox_read_small(const char *path, char **out, struct nsbox_err *e);

/* Close every descriptor from 3 up but those in keep[] (at most 8; nsbox_close_fds_except: one,
 * -1 for none), for real: marking them close-on-exec is not enough, because until exec
 * /proc/self/fd/N would still lead to whatever they point at, outside the root
 * (CVE-2024-21626). */
void nsbox_close_fds_keep(const int *keep, size_t n);
void nsbox_close_fds_except(int keep);
/* The same from first up: 3 to first - 1 stay open (a process's inherited descriptors, passed
 * on at their numbers: nsbox-oci's --preserve-fds). */
void nsbox_close_fds_keep_from(int first, const int *keep, size_t n);
/* Its way where close_range is missing (kernels before 5.9): the descriptors /proc/self/fd
 * lists, or without /proc every number up to the larger RLIMIT_NOFILE limit; system calls only,
 * no allocation (a child between fork and exec calls it). keep[]: any number of them. */
void nsbox_close_fds_slow(int first, const int *keep, size_t n);
/* fds[0..n-1] become descriptors first..first+n-1, in that order, without close-on-exec, however
 * their numbers overlap that range; copies above it are left for the caller to close
 * (nsbox_close_fds_keep_from(first + n, ...)). Makes system calls only (a vfork-like child
 * may call it). 0, or -1 with errno. */
int nsbox_fds_place(const int *fds, size_t n, int first);

/* CLOCK_MONOTONIC in milliseconds. */
int64_t nsbox_now_ms(void);
/* A command line's number of seconds (decimal digits, a fraction after a point), 0 to max_s,
 * as milliseconds; what is below a millisecond rounds up (0.0001: 1 ms, a timeout, not none).
 * -1 for anything else: empty, a sign, a blank, hex, an exponent, trailing text, too large. */
int nsbox_parse_seconds(const char *s, uint64_t max_s, uint64_t *ms);
/* The longest timeout of a command (run and exec --timeout, a request's timeout_ms): a year;
 * and the usage error for a --timeout beyond it or not a number (with the value given). */
#define NSBOX_TIMEOUT_MAX_S (365u * 86400u)
#define NSBOX_TIMEOUT_USAGE                                                                        \
    "--timeout needs a number of seconds from 0 to 31536000 (a year), not '%.40s'"
/* The calling thread's real, effective and saved ids become uid and gid (gid first), through
 * the kernel's calls, not glibc's wrappers: in a multithreaded process those make every thread
 * change its ids (a signal to each, and a wait for each thread to have started). A child cloned
 * from such a process (the sandbox's init: `nsbox run` relays stdio with threads) has only the
 * calling thread, yet glibc still lists the others, and one that had not started when the
 * clone happened is waited for forever. -1 with errno. */
int nsbox_set_ids(uint32_t uid, uint32_t gid);
/* A child as fork(2) makes it (a copy of the address space, flags: new namespaces, SIGCHLD or
 * none, CLONE_PARENT), without the C library's fork: no atfork handlers and no runtime threads
 * started in it (ThreadSanitizer's), so that it is alone, as unshare(CLONE_NEWUSER) and the
 * namespace flags want. The child may make only system calls. 0 in the child, -1 with errno. */
pid_t nsbox_clone_bare(unsigned long flags);
/* fd (whose fstat is st) is an anonymous pipe (pipefs), not a named FIFO. */
bool nsbox_is_anon_pipe(int fd, const struct stat *st);
/* The anonymous pipes among a command's stdin, stdout and stderr (fds[0..2]) made reopenable by
 * others the way the command uses them: stdin readable, stdout and stderr writable. The
 * sandbox's processes run as another uid, and /dev/stdin, /dev/stdout and /dev/stderr reopen a
 * pipe through /proc/self/fd, which checks its mode ("echo x > /dev/stderr": Permission
 * denied). Not the other way: through /proc/self/fd/0 opened for writing, a command wrote
 * into the caller's stdin what the host read after it (`{ nsbox run -- CMD; read x; } < pipe`),
 * and through /proc/self/fd/1 opened for reading it took what others wrote for the caller's
 * reader. Bits are only added (a pipe one nsbox writes to and another reads from gets both),
 * under an flock of the pipe, so that two such nsbox starting at once lose neither's.
 * Only a process that can see the descriptor in /proc/PID/fd (ptrace access to a holder) can
 * reopen a pipe, so this gives nothing to anyone else. A named FIFO's mode is a file's on
 * disk: never changed; nor a file's or a terminal's. */
void nsbox_share_pipes(const int fds[3]);
/* A command line's process id (of a sandbox's process): 2 to 2^22, else -1. */
long nsbox_parse_pid(const char *s);
/* The exit code that stands for a wait status, as a shell gives it: the process's own, or
 * 128+N when signal N ended it. */
int nsbox_exit_code(int status);

/* openat2(2), retried while it fails with EAGAIN: with RESOLVE_IN_ROOT or RESOLVE_BENEATH a
 * walk through `..` fails so whenever any rename or mount happened anywhere on the system
 * meanwhile (the kernel's rename and mount locks are global), which a busy host does all the
 * time. Bounded: a process renaming in a tight loop can at worst fail its own lookups.
 * Returns the descriptor, or -1 with errno. */
struct open_how;
/* How often a walk through ".." is tried again when something on the machine renamed or
 * mounted meanwhile (EAGAIN): nsbox_openat2 and safepath's own walks. */
#define NSBOX_OPENAT2_RETRIES 256
int nsbox_openat2(int dfd, const char *path, const struct open_how *how);
/* A directory (O_PATH, close-on-exec) of the host's that nsbox trusts by its path: path below
 * dir (RESOLVE_BENEATH), or, with dir < 0, from the working directory; no symlink and no magic
 * link on the way (ELOOP), with RESOLVE_ flags in more besides (RESOLVE_NO_XDEV: no mount
 * crossed, EXDEV). NSBOX_OPEN_DIR_LINKS in more, with dir >= 0: symlinks followed, never out of
 * dir (EXDEV), as an engine's relative layer links are. The descriptor, or -1 with errno. */
#define NSBOX_OPEN_DIR_LINKS (1ULL << 63)
int nsbox_open_dir(int dir, const char *path, uint64_t more);
/* path is dir or below it, by its text ("/proc/1" is in "/proc", "/procx" is not). */
bool nsbox_path_within(const char *path, const char *dir);
/* st is the host's root directory ("/" of this mount namespace), whatever path reached it. */
bool nsbox_is_host_root(const struct stat *st);
/* a and b are the same file: device and inode (a namespace's too: nsfs gives each its own). */
static inline bool nsbox_same_inode(const struct stat *a, const struct stat *b)
{
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}
/* Descriptors a and b are open on the same file (false when either cannot be stat'ed). */
bool nsbox_fd_same_file(int a, int b);
/* A time (a clock's reading, a file's st_mtim) in nanoseconds. */
static inline int64_t nsbox_timespec_ns(const struct timespec *t)
{
    return (int64_t)t->tv_sec * 1000000000 + t->tv_nsec;
}

/* State letter and parent pid from /proc/PID/stat (of our pid namespace). 0 or -1 (errno). */
int nsbox_proc_stat(int pid, char *state, int *ppid);
/* Alive and not a zombie: kill(pid, 0) succeeds on a zombie until its parent reaps it, and a
 * zombie holds no lock and will never take one. */
bool nsbox_pid_alive(int pid);
/* Is fd (a lock file it holds) still the file at path? gc removes lock files nobody holds,
 * and a lock taken on a file unlinked between open and flock guards nothing. */
bool nsbox_fd_is_at_path(int fd, const char *path);

/* Descriptors given to a sandbox command as 0, 1, 2 must not be directories or O_PATH
 * descriptors: /proc/self/fd/N would lead through them out of the root. */
int nsbox_check_stdio(const int fds[3], struct nsbox_err *e);

/* Set "K=V" in env[0..n) (replacing K's entry, or appended: env needs room for one more);
 * returns the new count. */
size_t nsbox_env_put(char **env, size_t n, char *kv);

#endif
