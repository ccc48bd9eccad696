/* nsbox-oci ps: the host pids of a container's processes (its cgroup's, which the monitor
 * reads), as runc prints them: a JSON array with --format json, else ps(1)'s table cut to
 * them; a list cut short (more processes than one answer of the monitor holds) says so. */
#include "ocirt.h"
#include "cleanup.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* The monitor's most (ocimon.c); NSBOX_OCI_PS_MAX asks for fewer. */
#define PS_MAX 16384

int nsbox_ocips_pids(const struct nsbox_ocirt *g, const struct nsbox_ocistate *s, pid_t *pids,
                     size_t max, size_t *total, struct nsbox_err *e)
{
    struct nsbox_ocictl_msg m = {.op = "procs", .status = (int32_t)max}, r;
    size_t size = max * sizeof *pids + NSBOX_ERR_MSG_MAX;
    cleanup_free char *buf = malloc(size);
    if (!buf)
        return nsbox_err_sys(e, "malloc");
    if (nsbox_ocictl_ask(g, s, &m, NULL, &r, buf, size, e) < 0)
        return -1;
    size_t n = r.len / sizeof *pids;
    if (n > max)
        return nsbox_err_invalid(e, "ps: the monitor sent %zu pids, more than the %zu asked", n,
                                 max);
    memcpy(pids, buf, n * sizeof *pids);
    *total = r.status > 0 && (size_t)r.status > n ? (size_t)r.status : n;
    return (int)n;
}

static int pid_cmp(const void *a, const void *b)
{
    pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;
    return (x > y) - (x < y);
}

/* pids sorted (for bsearch): ps's rows are as many as the host's processes. */
static bool listed(const pid_t *sorted, size_t n, long pid)
{
    pid_t p = (pid_t)pid;
    return p == pid && n && bsearch(&p, sorted, n, sizeof p, pid_cmp);
}

/* How many pids ps lists: NSBOX_OCI_PS_MAX, at most PS_MAX (its default). */
static size_t ps_max(struct nsbox_err *e)
{
    const char *v = getenv("NSBOX_OCI_PS_MAX");
    if (!v || !*v)
        return PS_MAX;
    char *end;
    errno = 0;
    unsigned long n = strtoul(v, &end, 10);
    if (errno || *end || n == 0 || n > PS_MAX || v[0] == '-')
        return nsbox_err_invalid(e, "NSBOX_OCI_PS_MAX=%s: give a number from 1 to %d",
                                 NSBOX_SHOW(v), PS_MAX),
               0;
    return n;
}

/* ps(1) with the caller's options (default -ef), its header and the rows of our pids: the
 * column named PID says which. */
static int ps_table(char **opts, int n_opts, pid_t *pids, size_t n, struct nsbox_err *e)
{
    qsort(pids, n, sizeof *pids, pid_cmp);
    char *argv[64] = {"ps"};
    int k = 1;
    if (n_opts == 0)
        argv[k++] = "-ef";
    for (int i = 0; i < n_opts && k < 63; i++)
        argv[k++] = opts[i];
    argv[k] = NULL;
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0)
        return nsbox_err_sys(e, "pipe");
    fflush(NULL);
    pid_t child = fork();
    if (child == 0) {
        dup2(p[1], 1);
        execvp("ps", argv);
        _exit(127);
    }
    close(p[1]);
    FILE *f = child > 0 ? fdopen(p[0], "r") : NULL;
    if (!f) {
        close(p[0]);
        return nsbox_err_sys(e, "ps");
    }
    /* Whole lines, however long: a container writes its command lines, so a row read in
     * pieces would be cut where the container chooses, and a piece taken for a row, or a row
     * merged with the next, could hide a process or list one that is not the container's. */
    cleanup_free char *line = NULL, *copy = NULL;
    size_t cap = 0, copy_cap = 0;
    ssize_t len;
    int col = -1;
    bool oom = false;
    while ((len = getline(&line, &cap, f)) >= 0) {
        char *save = NULL, *tok;
        if ((size_t)len + 1 > copy_cap) {
            char *c = realloc(copy, (size_t)len + 1);
            if (!c) {
                oom = true; /* read on to the end all the same: ps must not block on its pipe */
                continue;
            }
            copy = c;
            copy_cap = (size_t)len + 1;
        }
        memcpy(copy, line, (size_t)len + 1);
        int i = 0;
        if (col < 0) { /* the header */
            for (tok = strtok_r(copy, " \t\n", &save); tok;
                 tok = strtok_r(NULL, " \t\n", &save), i++)
                if (!strcmp(tok, "PID"))
                    col = i;
            fputs(line, stdout);
            continue;
        }
        for (tok = strtok_r(copy, " \t\n", &save); tok && i < col; i++)
            tok = strtok_r(NULL, " \t\n", &save);
        if (tok && listed(pids, n, strtol(tok, NULL, 10)))
            fputs(line, stdout);
    }
    fclose(f);
    int status;
    waitpid(child, &status, 0);
    if (oom)
        return nsbox_err_set(e, NSBOX_E_NOMEM, ENOMEM, "ps: out of memory for its table");
    if (col < 0)
        return nsbox_err_invalid(e, "ps: its output has no PID column (ps options?)");
    return 0;
}

int nsbox_ocips_ps(const struct nsbox_ocirt *g, int argc, char **argv, struct nsbox_err *e)
{
    bool json = false;
    int i = 1;
    for (; i < argc && argv[i][0] == '-' && strcmp(argv[i], "--"); i++) {
        const char *fmt = !strcmp(argv[i], "--format") || !strcmp(argv[i], "-f")
                              ? (i + 1 < argc ? argv[++i] : "")
                          : !strncmp(argv[i], "--format=", 9) ? argv[i] + 9
                                                              : NULL;
        if (!fmt)
            return nsbox_err_invalid(e, "ps: unknown option %s", NSBOX_SHOW(argv[i])), 1;
        if (strcmp(fmt, "json") && strcmp(fmt, "table"))
            return nsbox_err_invalid(e, "ps --format: json or table"), 1;
        json = !strcmp(fmt, "json");
    }
    if (i >= argc)
        return nsbox_err_invalid(e, "ps: give a container id"), 1;
    struct nsbox_ocistate s;
    if (nsbox_ocistate_read_live(g, argv[i], &s, e) < 0)
        return 1;
    size_t max = ps_max(e), total;
    if (!max)
        return 1;
    cleanup_free pid_t *pids = malloc(max * sizeof *pids);
    int n = pids ? nsbox_ocips_pids(g, &s, pids, max, &total, e) : nsbox_err_sys(e, "malloc");
    if (n < 0)
        return 1;
    /* said before the list, on stderr: the list stays what a program reads */
    if (total > (size_t)n)
        nsbox_ocilog_say(NULL, NSBOX_OCILOG_STDERR, "warning",
                         "container %s has %zu processes: only the first %d are listed (at "
                         "most %zu; NSBOX_OCI_PS_MAX, up to %d)",
                         s.id, total, n, max, PS_MAX);
    if (!json) {
        if (i + 1 < argc && !strcmp(argv[i + 1], "--"))
            i++;
        return ps_table(argv + i + 1, argc - i - 1, pids, (size_t)n, e) < 0 ? 1 : 0;
    }
    putchar('[');
    for (int k = 0; k < n; k++)
        printf("%s%d", k ? "," : "", (int)pids[k]);
    printf("]\n");
    return 0;
}
