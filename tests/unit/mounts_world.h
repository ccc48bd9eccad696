/* The configurations ("worlds") both halves of the rootfs assembly tests build on:
 * test_mounts.c (the pure plan) and test_mounts_exec.c (the executor). */
#ifndef NSBOX_TESTS_MOUNTS_WORLD_H
#define NSBOX_TESTS_MOUNTS_WORLD_H
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "mounts.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <linux/mount.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#define HOST_ETC "/var/lib/nsbox/images/host/etc"
#define WORKSPACE "/home/u/project"

/* ---- fixtures: configurations -------------------------------------------------------------- */

static void add_dir(struct nsbox_rootfs_cfg *cfg, const char *name)
{
    assert_true(cfg->n_entries < NSBOX_ROOT_ENTRIES_MAX);
    struct nsbox_root_entry *en = &cfg->entries[cfg->n_entries++];
    snprintf(en->name, sizeof en->name, "%s", name);
    en->is_symlink = false;
    en->link[0] = '\0';
}

static void add_link(struct nsbox_rootfs_cfg *cfg, const char *name, const char *link)
{
    assert_true(cfg->n_entries < NSBOX_ROOT_ENTRIES_MAX);
    struct nsbox_root_entry *en = &cfg->entries[cfg->n_entries++];
    snprintf(en->name, sizeof en->name, "%s", name);
    en->is_symlink = true;
    snprintf(en->link, sizeof en->link, "%s", link);
}

struct world {
    struct nsbox_image img;
    struct nsbox_rootfs_cfg cfg;
    struct nsbox_mount_plan plan;
};

static struct world *new_world(enum nsbox_image_kind kind)
{
    struct world *w = calloc(1, sizeof *w);
    assert_non_null(w);
    w->img.kind = kind;
    w->img.lock_fd = -1;
    w->img.mount_fd = -1;
    if (kind == NSBOX_IMAGE_HOST) {
        snprintf(w->img.name, sizeof w->img.name, "host");
        snprintf(w->img.root, sizeof w->img.root, "/");
        snprintf(w->img.etc, sizeof w->img.etc, HOST_ETC);
    } else {
        snprintf(w->img.name, sizeof w->img.name, "debian");
        snprintf(w->img.root, sizeof w->img.root, "/var/lib/nsbox/images/debian/rootfs");
    }
    w->cfg.img = &w->img;
    w->cfg.workspace = WORKSPACE;
    return w;
}

/* A whole root filesystem, including entries nsbox must replace with its own. */
static struct world *dir_world(void)
{
    struct world *w = new_world(NSBOX_IMAGE_DIR);
    add_link(&w->cfg, "bin", "usr/bin");
    add_dir(&w->cfg, "etc");
    add_dir(&w->cfg, "home");
    add_link(&w->cfg, "lib", "/usr/lib"); /* absolute: resolved inside the root later */
    add_dir(&w->cfg, "proc");
    add_dir(&w->cfg, "dev");
    add_link(&w->cfg, "sys", "/proc/sys"); /* a provided name as a symlink: still not exposed */
    add_dir(&w->cfg, "tmp");
    add_dir(&w->cfg, "workspace");
    add_link(&w->cfg, "run", "/var/run");
    add_dir(&w->cfg, "lost+found");
    add_dir(&w->cfg, "usr");
    add_dir(&w->cfg, "var");
    add_link(&w->cfg, "sbin", "usr/sbin");
    return w;
}

/* ---- plan queries -------------------------------------------------------------------------- */

static int idx(const struct nsbox_mount_plan *p, enum nsbox_mop op, const char *target)
{
    for (size_t i = 0; i < p->n; i++)
        if (p->ops[i].op == op && !strcmp(p->ops[i].target, target)) return (int)i;
    return -1;
}

/* Ops of kind op (at target, or anywhere with NULL). */
__attribute__((unused)) static int count(const struct nsbox_mount_plan *p, enum nsbox_mop op,
                                         const char *target)
{
    int n = 0;
    for (size_t i = 0; i < p->n; i++)
        if (p->ops[i].op == op && (!target || !strcmp(p->ops[i].target, target)))
            n++;
    return n;
}

/* Entries of a NULL-terminated list. */
__attribute__((unused)) static size_t list_len(const char *const *l)
{
    size_t n = 0;
    while (l[n])
        n++;
    return n;
}

/* Is a a proper path prefix of b ("dev" of "dev/pts", not "de" or "dev")? */
__attribute__((unused)) static bool is_parent(const char *a, const char *b)
{
    size_t n = strlen(a);
    return strncmp(a, b, n) == 0 && b[n] == '/';
}

#endif
