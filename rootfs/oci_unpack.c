/* An OCI image unpacked into the store: see oci_unpack.h. */
#include "oci_unpack.h"
#include "cleanup.h"
#include "idmap.h"
#include "image.h"
#include "oci_etc.h"
#include "oci_layer.h"
#include "oci_layers.h"
#include "oci_overlay.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static int open_layer_blob(const struct nsbox_oci_source *s, const struct nsbox_oci_plan *p,
                           size_t i, struct nsbox_err *e)
{
    int fd = nsbox_oci_source_open_blob(s, p->layers[i].digest);
    if (fd < 0)
        nsbox_err_set(e, NSBOX_E_INVALID, errno, "layer %s is %s the image",
                      p->layers[i].digest,
                      errno == EINVAL ? "not a regular file in" : "missing from");
    return fd;
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* A layer done: its size unpacked, the time and the rate, or that it was stored already. */
static void note_layer(bool progress, const struct nsbox_image_txn *t,
                       const struct nsbox_oci_plan *p, size_t i, uint64_t bytes, uint64_t since,
                       bool stored)
{
    double s = (double)(now_ns() - since) / 1e9, mb = (double)bytes / 1e6;
    if (stored)
        nsbox_image_note(progress, "image %s: layer %zu/%zu %.19s: stored already (%.1f MB)",
                         t->name, i + 1, p->n_layers, p->layers[i].digest, mb);
    else
        nsbox_image_note(progress, "image %s: layer %zu/%zu %.19s: %.1f MB in %.1f s (%.1f MB/s)",
                         t->name, i + 1, p->n_layers, p->layers[i].digest, mb, s,
                         s > 0 ? mb / s : 0.0);
}

/* NSBOX_OCI_LAYOUT=merged, or no overlay for this user: the layers merged into one rootfs/. */
static int unpack_merged(const struct nsbox_oci_source *s, const struct nsbox_oci_plan *p,
                         struct nsbox_image_txn *t, const struct nsbox_oci_limits *lim,
                         struct nsbox_oci_layer_stats *st, bool progress, struct nsbox_err *e)
{
    if (mkdirat(t->tmp_fd, "rootfs", 0755) < 0)
        return nsbox_err_sys(e, "cannot create %s/rootfs", t->tmp);
    cleanup_close int root_fd = openat(t->tmp_fd, "rootfs", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (root_fd < 0)
        return nsbox_err_sys(e, "cannot open %s/rootfs", t->tmp);
    for (size_t i = 0; i < p->n_layers; i++) {
        uint64_t since = now_ns(), before = st->bytes;
        cleanup_close int fd = open_layer_blob(s, p, i, e);
        if (fd < 0 || nsbox_oci_layer_apply(root_fd, fd, p->layers[i].digest, p->cfg.diff_ids[i],
                                            p->layers[i].size, lim, NULL, st, e) < 0)
            return -1;
        note_layer(progress, t, p, i, st->bytes - before, since, false);
    }
    return nsbox_oci_etc_write(root_fd, root_fd, e);
}

/* nsbox's /etc files in the image's own top layer, read from the merge of the layers below
 * (chains: their chain ids, bottom first; diffs: their diff/). */
static int write_top(struct nsbox_image_txn *t, char (*chains)[NSBOX_OCI_CHAIN_HEX + 1],
                     const int *diffs, size_t n, struct nsbox_err *e)
{
    if (mkdirat(t->tmp_fd, "top", 0755) < 0 || mkdirat(t->tmp_fd, "rootfs", 0755) < 0)
        return nsbox_err_sys(e, "cannot create %s/top", t->tmp);
    cleanup_close int top = openat(t->tmp_fd, "top", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (top < 0)
        return nsbox_err_sys(e, "cannot open %s/top", t->tmp);
    /* the mount point of the overlay, which sandbox.c finds owned as an image root is */
    if (geteuid() == 0 && fchownat(t->tmp_fd, "rootfs", nsbox_idmap_image_owner(0),
                                   nsbox_idmap_image_owner(0), AT_SYMLINK_NOFOLLOW) < 0)
        return nsbox_err_sys(e, "cannot chown %s/rootfs", t->tmp);
    cleanup_close int view = -1;
    if (n > 1) { /* an overlay needs two layers at least */
        char(*rel)[NSBOX_OCI_CHAIN_HEX + 16] = malloc(n * sizeof *rel);
        const char **rv = malloc(n * sizeof *rv);
        int r = rel && rv ? 0 : nsbox_err_set(e, NSBOX_E_NOMEM, ENOMEM, "out of memory");
        for (size_t i = 0; r == 0 && i < n; i++) {
            snprintf(rel[i], sizeof rel[i], ".layers/%s/diff", chains[n - 1 - i]);
            rv[i] = rel[i];
        }
        if (r == 0)
            r = nsbox_oci_overlay_lowers(t->images, -1, rv, n, &view, e);
        free(rel);
        free(rv);
        if (r < 0)
            return -1;
    }
    int v = n > 1 ? view : n == 1 ? diffs[0] : top;
    return nsbox_oci_etc_write(v, top, e);
}

/* ---- the layers of an image, side by side ------------------------------------------------- */

/* One layer to get: found in the store, or unpacked by one of the workers. */
struct job {
    struct pool *pool;
    size_t i;
    int blob_fd, diff_fd;
    enum { JOB_WAITING, JOB_RUNNING, JOB_DONE, JOB_FAILED } state;
    bool stored; /* found in the store */
    struct nsbox_oci_layer_stats st;
    struct nsbox_err err;
    int lowers[NSBOX_OCI_LAYERS_MAX]; /* the diff/ of the layers below, top first */
};

struct pool {
    pthread_mutex_t mu;
    pthread_cond_t cv; /* a job is done or failed */
    struct job *jobs;
    size_t n, next; /* jobs are taken bottom first */
    struct nsbox_oci_layers *ls;
    const struct nsbox_oci_plan *p;
    char (*chains)[NSBOX_OCI_CHAIN_HEX + 1];
    const struct nsbox_oci_limits *lim;
    struct nsbox_oci_layer_shared shared;
    const struct nsbox_image_txn *t;
    bool progress;
};

/* A layer's hard link to a file below it needs the layers below whole: wait for them. No
 * deadlock: jobs are taken bottom first, so every layer below one that waits is done or being
 * unpacked by a worker that never waits for a layer above it. */
static int job_lowers(void *ctx, const int **fds, size_t *n, struct nsbox_err *e)
{
    struct job *J = ctx;
    struct pool *P = J->pool;
    bool failed = false;
    pthread_mutex_lock(&P->mu);
    for (size_t j = 0; j < J->i; j++) {
        while (P->jobs[j].state == JOB_WAITING || P->jobs[j].state == JOB_RUNNING)
            pthread_cond_wait(&P->cv, &P->mu);
        failed |= P->jobs[j].state == JOB_FAILED;
    }
    for (size_t k = 0; !failed && k < J->i; k++)
        J->lowers[k] = P->jobs[J->i - 1 - k].diff_fd;
    pthread_mutex_unlock(&P->mu);
    if (failed)
        return nsbox_err_set(e, NSBOX_E_INVALID, ECANCELED, "a layer below it failed");
    *fds = J->lowers;
    *n = J->i;
    return 0;
}

static void *worker(void *arg)
{
    struct pool *P = arg;
    for (;;) {
        pthread_mutex_lock(&P->mu);
        while (P->next < P->n && P->jobs[P->next].state != JOB_WAITING)
            P->next++;
        if (P->next == P->n || atomic_load(&P->shared.cancel)) {
            pthread_mutex_unlock(&P->mu);
            return NULL;
        }
        struct job *J = &P->jobs[P->next++];
        J->state = JOB_RUNNING;
        pthread_mutex_unlock(&P->mu);
        const struct nsbox_oci_plan *p = P->p;
        struct nsbox_oci_layer_form form = {
            .overlay = true, .lowers = job_lowers, .ctx = J, .shared = &P->shared};
        uint64_t since = now_ns();
        int r = nsbox_oci_layers_get(P->ls, P->chains[J->i], J->blob_fd, p->layers[J->i].digest,
                                     p->cfg.diff_ids[J->i], p->layers[J->i].size, P->lim, &form,
                                     &J->st, &J->diff_fd, &J->err);
        pthread_mutex_lock(&P->mu);
        J->state = r < 0 ? JOB_FAILED : JOB_DONE;
        J->stored = r == 1;
        if (r < 0)
            atomic_store(&P->shared.cancel, true);
        else
            note_layer(P->progress, P->t, p, J->i, J->st.bytes, since, J->stored);
        pthread_cond_broadcast(&P->cv);
        pthread_mutex_unlock(&P->mu);
    }
}

/* How many layers are unpacked at once: NSBOX_OCI_JOBS, else one per processor, at most 4
 * (unpacking is mostly the kernel's work of creating files, which more threads only queue
 * for). */
static size_t jobs_wanted(size_t todo)
{
    const char *v = getenv("NSBOX_OCI_JOBS");
    long n = v && *v ? strtol(v, NULL, 10) : sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 1)
        n = 1;
    if (n > 4 && !(v && *v))
        n = 4;
    if (n > 64)
        n = 64;
    return todo < (size_t)n ? (todo ? todo : 1) : (size_t)n;
}

/* The failure to report: the first layer's own, not one stopped because another failed. */
static int pool_error(struct pool *P, struct nsbox_err *e)
{
    struct job *first = NULL;
    for (size_t i = 0; i < P->n; i++) {
        struct job *J = &P->jobs[i];
        if (J->state != JOB_FAILED)
            continue;
        if (!first || (first->err.sys_errno == ECANCELED && J->err.sys_errno != ECANCELED))
            first = J;
    }
    if (!first)
        return 0;
    *e = first->err;
    return -1;
}

/* Run the pool: the workers beside this thread, which works too; then wait for them all. */
static void pool_run(struct pool *P, size_t todo)
{
    size_t want = jobs_wanted(todo);
    pthread_t th[64];
    size_t started = 0;
    for (; started + 1 < want; started++)
        if (pthread_create(&th[started], NULL, worker, P) != 0)
            break; /* fewer workers, the same work */
    worker(P);
    for (size_t i = 0; i < started; i++)
        pthread_join(th[i], NULL);
}

/* Each layer once in the shared store (oci_layers.h), named by the image's `layers`: those
 * stored already are found first (their totals count against the limits), the others unpacked
 * side by side. ls stays open (its lock held) until the image is committed. */
static int unpack_layered(const struct nsbox_oci_source *s, const struct nsbox_oci_plan *p,
                          struct nsbox_image_txn *t, struct nsbox_oci_layers *ls,
                          const struct nsbox_oci_limits *lim, struct nsbox_oci_layer_stats *st,
                          bool progress, struct nsbox_err *e)
{
    if (nsbox_oci_layers_open(ls, e) < 0)
        return -1;
    size_t n = p->n_layers, todo = 0;
    cleanup_free char(*chains)[NSBOX_OCI_CHAIN_HEX + 1] = malloc((n + 1) * sizeof *chains);
    cleanup_free struct job *jobs = calloc(n + 1, sizeof *jobs);
    if (!chains || !jobs)
        return nsbox_err_set(e, NSBOX_E_NOMEM, ENOMEM, "out of memory");
    struct pool P = {.jobs = jobs,
                     .n = n,
                     .ls = ls,
                     .p = p,
                     .chains = chains,
                     .lim = lim,
                     .t = t,
                     .progress = progress};
    int rc = 0;
    for (size_t i = 0; i < n; i++) {
        nsbox_oci_layers_chain(i ? chains[i - 1] : "", p->cfg.diff_ids[i], chains[i]);
        jobs[i] = (struct job){.pool = &P, .i = i, .blob_fd = -1, .diff_fd = -1};
    }
    for (size_t i = 0; rc == 0 && i < n; i++) {
        uint64_t before = st->bytes;
        int r = nsbox_oci_layers_find(ls, chains[i], lim, st, &jobs[i].diff_fd, e);
        if (r < 0) {
            rc = -1;
        } else if (r == 1) {
            jobs[i].state = JOB_DONE;
            jobs[i].stored = true;
            note_layer(progress, t, p, i, st->bytes - before, now_ns(), true);
        } else if ((jobs[i].blob_fd = open_layer_blob(s, p, i, e)) < 0) {
            rc = -1;
        } else {
            todo++;
        }
    }
    if (rc == 0 && todo) {
        atomic_init(&P.shared.bytes, st->bytes);
        atomic_init(&P.shared.entries, st->entries);
        /* the stored layers' tars were bounded when unpacked: their files stand for them */
        atomic_init(&P.shared.inflated, st->bytes);
        atomic_init(&P.shared.cancel, false);
        pthread_mutex_init(&P.mu, NULL);
        pthread_cond_init(&P.cv, NULL);
        pool_run(&P, todo);
        pthread_cond_destroy(&P.cv);
        pthread_mutex_destroy(&P.mu);
        rc = pool_error(&P, e);
        for (size_t i = 0; rc == 0 && i < n; i++)
            if (jobs[i].blob_fd >= 0) { /* got by a worker, not found above */
                st->bytes += jobs[i].st.bytes;
                st->entries += jobs[i].st.entries;
            }
        if (rc == 0 && (st->bytes > lim->max_bytes || st->entries > lim->max_entries))
            rc = nsbox_err_set(e, NSBOX_E_INVALID, EFBIG,
                               "image unpacks to more than %llu bytes or %llu entries "
                               "(NSBOX_OCI_MAX_BYTES, NSBOX_OCI_MAX_ENTRIES)",
                               (unsigned long long)lim->max_bytes,
                               (unsigned long long)lim->max_entries);
    }
    int diffs[NSBOX_OCI_LAYERS_MAX];
    char text[NSBOX_OCI_LAYERS_MAX * (NSBOX_OCI_CHAIN_HEX + 1) + 1];
    size_t len = 0;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        diffs[i] = jobs[i].diff_fd;
        len += (size_t)snprintf(text + len, sizeof text - len, "%s\n", chains[i]);
    }
    if (rc == 0)
        rc = write_top(t, chains, diffs, n, e);
    if (rc == 0)
        rc = nsbox_image_write_at(t->tmp_fd, NSBOX_OCI_LAYERS_FILE, text, len, 0644, e);
    for (size_t i = 0; i < n; i++) {
        nsbox_closep(&jobs[i].diff_fd);
        nsbox_closep(&jobs[i].blob_fd);
    }
    return rc;
}

/* Layers in the shared store, unless NSBOX_OCI_LAYOUT=merged asks for the merged form, or
 * this user cannot mount an overlay (an unprivileged user where the kernel forbids overlays in
 * user namespaces): then merged, as said. Tried on two empty directories of the transaction. */
static bool layered_store(struct nsbox_image_txn *t)
{
    const char *v = getenv("NSBOX_OCI_LAYOUT");
    if (v && !strcmp(v, "merged"))
        return false;
    if (geteuid() == 0)
        return true;
    const char *tmp = strrchr(t->tmp, '/') + 1;
    char a[PATH_MAX], b[PATH_MAX];
    snprintf(a, sizeof a, "%s/probe-a", tmp);
    snprintf(b, sizeof b, "%s/probe-b", tmp);
    const char *rel[] = {a, b};
    struct nsbox_err e = {0};
    cleanup_close int m = -1;
    bool ok = mkdirat(t->tmp_fd, "probe-a", 0755) == 0 &&
              mkdirat(t->tmp_fd, "probe-b", 0755) == 0 &&
              nsbox_oci_overlay_lowers(t->images, -1, rel, 2, &m, &e) == 0;
    unlinkat(t->tmp_fd, "probe-a", AT_REMOVEDIR);
    unlinkat(t->tmp_fd, "probe-b", AT_REMOVEDIR);
    if (!ok)
        nsbox_image_note(true,
                         "note: image %s is stored merged, not as shared layers: this user "
                         "cannot mount an overlay here (%s); its sandboxes work the same, but "
                         "its files are a copy of its own, on disk and in memory",
                         t->name, e.msg[0] ? e.msg : strerror(errno));
    return ok;
}

int nsbox_oci_unpack_image(const struct nsbox_oci_source *s, const struct nsbox_oci_plan *p,
                           const char *name, bool progress, struct nsbox_err *e)
{
    struct nsbox_image_txn t;
    struct nsbox_oci_layers ls = {.dir_fd = -1, .lock_fd = -1};
    int rc = -1;
    if (nsbox_image_txn_begin(&t, name, progress, e) < 0)
        goto out;
    struct nsbox_oci_limits lim;
    nsbox_oci_layer_limits(&lim);
    struct nsbox_oci_layer_stats st = {0};
    if ((layered_store(&t) ? unpack_layered(s, p, &t, &ls, &lim, &st, progress, e)
                           : unpack_merged(s, p, &t, &lim, &st, progress, e)) < 0)
        goto out;
    if ((p->manifest_text && nsbox_image_write_at(t.tmp_fd, "manifest.json", p->manifest_text,
                                                  p->manifest_len, 0644, e) < 0) ||
        nsbox_image_write_at(t.tmp_fd, "config.json", p->config_text, p->config_len, 0644, e) < 0)
        goto out;
    if (syncfs(t.tmp_fd) < 0) {
        nsbox_err_sys(e, "syncfs");
        goto out;
    }
    char size[32];
    snprintf(size, sizeof size, "%llu", (unsigned long long)st.bytes);
    const char *kv[] = {
        "digest",        p->manifest_digest, "config", p->config_digest, "size", size,
        "image_created", p->cfg.created,     NULL};
    rc = nsbox_image_txn_commit(&t, "oci", NULL, kv, e);
out:
    nsbox_image_txn_end(&t);
    bool opened = ls.dir_fd >= 0;
    nsbox_oci_layers_close(&ls); /* after the commit: the image names its layers now */
    if (rc < 0 && opened) {
        /* a failed import keeps nothing: the layers it stored that no image names go */
        struct nsbox_err ignored;
        unsigned n;
        nsbox_oci_layers_gc(&n, &ignored);
    }
    return rc;
}
