/* What the files of setup_floor (setup_floor.c: options, set-up, the loop; setup_floor_sandbox.c:
 * one sandbox's create + rm; setup_floor_child.c: the sandbox's init) share. */
#ifndef SETUP_FLOOR_H
#define SETUP_FLOOR_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/loop.h>
#include <linux/mount.h>
#include <linux/openat2.h>
#include <linux/sched.h>
#include <linux/seccomp.h>
#include <linux/securebits.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef CGROUP_SUPER_MAGIC
#define CGROUP_SUPER_MAGIC 0x27e0eb
#endif


/* nsbox's values: instance type medium, appuser, the uid range of privileged sandboxes */
#define MEM_BYTES (4ull << 30)
#define CPUS 2u
#define CPU_PERIOD_US 100000u
#define PIDS 1024u
#define DISK_BYTES (10ull << 30)
#define BYTES_PER_INODE 16384u
#define SANDBOX_UID 1000u
#define UID_BASE 2000000000u
#define UID_SLOTS 65536u
#define SECCOMP_DENIED 148 /* 2 insns each: with the rest, the size of nsbox's default filter */

enum ws_kind { WS_NONE, WS_TMPFS, WS_EXT4 };

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

struct floor_opt {
    double seconds;
    bool cgroup, rootfs, masks, net, harden, seccomp, verbose, show;
    enum ws_kind ws;
};
extern struct floor_opt opt;

extern char tmpdir[64];      /* mktemp dir: staging roots, hosts files, template, backing files */
extern char image_root[64];
extern char image_etc[256];  /* the image's /etc */
extern const char *image_links[8][2]; /* name, link text: the host image's top-level symlinks */
extern size_t n_image_links;
extern bool image_has_usr;

extern char cg_parent[5][512]; /* the bench's own cgroup, per distinct hierarchy */
extern char cg_ctl[5][64];     /* the controllers in it, comma separated */
extern size_t n_cg;

struct launch {
    int sync_rd, sync_wr, report_rd, report_wr;
    int ws_fd; /* ext4: the detached mount */
    int worker;
    char staging[128], hosts[128];
    char cg[5][600];
};

/* setup_floor.c */
int floor_write_file(const char *path, const char *val);
int floor_write_at(const char *dir, const char *name, const char *val);

/* setup_floor_sandbox.c */
/* One create + rm. 0, or -1 with a message on stderr (everything made is undone). */
int floor_sandbox_one(int worker, long iter, int tpl);
/* A loop device for backing_fd, autoclear: it detaches itself when its last user goes. */
int floor_sandbox_loop_attach(int backing_fd, char *dev, size_t n);
/* A detached mount of the ext4 filesystem on dev (nsbox's options). */
int floor_sandbox_mount_dev(const char *dev);

/* setup_floor_child.c */
__attribute__((noreturn)) void floor_child_main(struct launch *L);

#endif
