/* nsbox-oci's state: one directory per container under --root, holding state.json (written
 * once by create), what create keeps of the bundle (its config.json, annotations, hooks) and,
 * while the container is created but not started, exec.fifo. */
#include "ocirt.h"
#include "cleanup.h"
#include "cleanup_cjson.h"
#include "jsontext.h"
#include "paths.h"
#include "util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

bool nsbox_ocistate_id_valid(const char *id)
{
    size_t n = strlen(id);
    if (n == 0 || n > NSBOX_OCI_ID_MAX || id[0] == '.' || id[0] == '-' || id[0] == '_')
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = id[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.' || c == '+' || c == '-'))
            return false;
    }
    return true;
}

int nsbox_ocistate_check_root(const struct nsbox_ocirt *g, struct nsbox_err *e)
{
    return nsbox_paths_check_private(
        "--root", g->root,
        "replace a container's state there, whose pids nsbox-oci "
        "signals and whose hooks it runs as root",
        "use a directory only root can write, as the default " NSBOX_OCI_DEFAULT_ROOT, e);
}

int nsbox_ocistate_dir(const struct nsbox_ocirt *g, const char *id, char *out, size_t n,
                       struct nsbox_err *e)
{
    if (!nsbox_ocistate_id_valid(id))
        return nsbox_err_invalid(e, "invalid container id '%s'", NSBOX_SHOW(id));
    if ((size_t)snprintf(out, n, "%s/%s", g->root, id) >= n)
        return nsbox_err_invalid(e, "--root: path too long");
    return 0;
}

int nsbox_ocistate_write(const struct nsbox_ocirt *g, const struct nsbox_ocistate *s,
                         struct nsbox_err *e)
{
    char dir[PATH_MAX], tmp[PATH_MAX + 32], path[PATH_MAX + 16];
    if (nsbox_ocistate_dir(g, s->id, dir, sizeof dir, e) < 0)
        return -1;
    cleanup_cjson cJSON *j = cJSON_CreateObject();
    if (!j || !cJSON_AddStringToObject(j, "id", s->id) ||
        !cJSON_AddStringToObject(j, "bundle", s->bundle) ||
        !cJSON_AddStringToObject(j, "rootfs", s->rootfs) ||
        !cJSON_AddStringToObject(j, "created", s->created) ||
        !cJSON_AddNumberToObject(j, "pid", s->pid) ||
        !cJSON_AddNumberToObject(j, "pid_start", (double)s->pid_start) ||
        !cJSON_AddNumberToObject(j, "monitor_pid", s->monitor) ||
        !cJSON_AddNumberToObject(j, "monitor_start", (double)s->monitor_start) ||
        !cJSON_AddStringToObject(j, "sandbox", s->sandbox))
        return nsbox_err_set(e, NSBOX_E_NOMEM, ENOMEM, "out of memory");
    cleanup_free char *text = cJSON_PrintUnformatted(j);
    if (!text)
        return nsbox_err_set(e, NSBOX_E_NOMEM, ENOMEM, "out of memory");
    snprintf(tmp, sizeof tmp, "%s/.state.json.tmp", dir);
    snprintf(path, sizeof path, "%s/state.json", dir);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return nsbox_err_sys(e, "open %s", tmp);
    int r = nsbox_pwrite_all(fd, text, strlen(text), 0);
    close(fd);
    if (r < 0 || rename(tmp, path) < 0)
        return nsbox_err_sys(e, "write %s", path);
    return 0;
}

static int field_num(const cJSON *j, const char *name, double *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, name);
    if (!cJSON_IsNumber(v))
        return -1;
    *out = v->valuedouble;
    return 0;
}

static int field_str(const cJSON *j, const char *name, char *out, size_t n)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, name);
    if (!cJSON_IsString(v) || strlen(v->valuestring) >= n)
        return -1;
    strcpy(out, v->valuestring);
    return 0;
}

int nsbox_ocistate_read(const struct nsbox_ocirt *g, const char *id, struct nsbox_ocistate *s,
                        struct nsbox_err *e)
{
    char dir[PATH_MAX], path[PATH_MAX + 16];
    if (nsbox_ocistate_dir(g, id, dir, sizeof dir, e) < 0)
        return -1;
    snprintf(path, sizeof path, "%s/state.json", dir);
    cleanup_free char *text = NULL;
    int r = nsbox_read_small(path, &text, e);
    if (r < 0)
        return -1;
    if (r == 1)
        return nsbox_err_set(e, NSBOX_E_NOTFOUND, ENOENT, "container %s does not exist", id);
    cleanup_cjson cJSON *j = cJSON_Parse(text);
    double pid, ps, mp, ms;
    memset(s, 0, sizeof *s);
    if (!j || field_str(j, "id", s->id, sizeof s->id) < 0 ||
        field_str(j, "bundle", s->bundle, sizeof s->bundle) < 0 ||
        field_str(j, "created", s->created, sizeof s->created) < 0 ||
        field_str(j, "sandbox", s->sandbox, sizeof s->sandbox) < 0 ||
        field_num(j, "pid", &pid) < 0 || field_num(j, "pid_start", &ps) < 0)
        return nsbox_err_invalid(e, "%s: damaged", path);
    field_str(j, "rootfs", s->rootfs, sizeof s->rootfs); /* "" from a version without it */
    s->pid = (pid_t)pid, s->pid_start = (uint64_t)ps;
    if (field_num(j, "monitor_pid", &mp) == 0 && field_num(j, "monitor_start", &ms) == 0) {
        s->monitor = (pid_t)mp, s->monitor_start = (uint64_t)ms;
        return 0;
    }
    /* a container created by a version whose pid was the monitor's, init's beside it: still
     * stopped, killed and deleted through init and the monitor (an upgraded node) */
    if (field_num(j, "init_pid", &mp) < 0 || field_num(j, "init_start", &ms) < 0)
        return nsbox_err_invalid(e, "%s: damaged", path);
    s->monitor = s->pid, s->monitor_start = s->pid_start;
    s->pid = (pid_t)mp, s->pid_start = (uint64_t)ms;
    return 0;
}

uint64_t nsbox_ocistate_start_time(pid_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    size_t n = nsbox_read_bounded(fd, buf, sizeof buf - 1);
    close(fd);
    buf[n] = '\0';
    /* after the command name, which may hold spaces and ')': field 3 is the state */
    char *p = strrchr(buf, ')');
    if (!p || p[1] != ' ')
        return 0;
    p += 2;
    if (*p == 'Z' || *p == 'X')
        return 0; /* a zombie has exited: it no longer runs anything */
    for (int field = 3; field < 22; field++) {
        p = strchr(p, ' ');
        if (!p)
            return 0;
        p++;
    }
    return strtoull(p, NULL, 10);
}

bool nsbox_ocistate_alive(pid_t pid, uint64_t start)
{
    return pid > 0 && start && nsbox_ocistate_start_time(pid) == start;
}

enum nsbox_ocistate_status nsbox_ocistate_status(const struct nsbox_ocirt *g,
                                                 const struct nsbox_ocistate *s)
{
    if (!nsbox_ocistate_alive(s->pid, s->pid_start))
        return NSBOX_OCI_STOPPED;
    char dir[PATH_MAX], fifo[PATH_MAX + 16];
    struct nsbox_err e;
    if (nsbox_ocistate_dir(g, s->id, dir, sizeof dir, &e) < 0)
        return NSBOX_OCI_STOPPED;
    snprintf(fifo, sizeof fifo, "%s/exec.fifo", dir);
    if (access(fifo, F_OK) == 0)
        return NSBOX_OCI_CREATED;
    snprintf(fifo, sizeof fifo, "%s/%s", dir, NSBOX_OCI_PAUSED_FILE);
    return access(fifo, F_OK) == 0 ? NSBOX_OCI_PAUSED : NSBOX_OCI_RUNNING;
}

const char *nsbox_ocistate_status_name(enum nsbox_ocistate_status st)
{
    return st == NSBOX_OCI_CREATED   ? "created"
           : st == NSBOX_OCI_RUNNING ? "running"
           : st == NSBOX_OCI_PAUSED  ? "paused"
                                     : "stopped";
}

int nsbox_ocistate_remove(const struct nsbox_ocirt *g, const char *id, struct nsbox_err *e)
{
    char dir[PATH_MAX];
    if (nsbox_ocistate_dir(g, id, dir, sizeof dir, e) < 0)
        return -1;
    DIR *d = opendir(dir);
    if (!d)
        return errno == ENOENT ? 0 : nsbox_err_sys(e, "open %s", dir);
    struct dirent *de;
    while ((de = readdir(d)))
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
            unlinkat(dirfd(d), de->d_name, 0);
    closedir(d);
    if (rmdir(dir) < 0 && errno != ENOENT)
        return nsbox_err_sys(e, "remove %s", dir);
    return 0;
}

int nsbox_ocistate_save(const char *dir, const char *name, const char *text, struct nsbox_err *e)
{
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0)
        return nsbox_err_sys(e, "open %s", path);
    int r = nsbox_pwrite_all(fd, text, strlen(text), 0);
    close(fd);
    return r < 0 ? nsbox_err_sys(e, "write %s", path) : 0;
}

int nsbox_ocistate_read_config(const struct nsbox_ocirt *g, const struct nsbox_ocistate *s,
                               struct nsbox_ocispec *c, struct nsbox_err *e)
{
    char dir[PATH_MAX], path[PATH_MAX + 32];
    cleanup_free char *text = NULL;
    if (nsbox_ocistate_dir(g, s->id, dir, sizeof dir, e) < 0)
        return -1;
    snprintf(path, sizeof path, "%s/%s", dir, NSBOX_OCI_CONFIG_FILE);
    int r = nsbox_read_small(path, &text, e);
    if (r < 0)
        return nsbox_err_wrap(e, "container %s: its config as created", s->id);
    if (r == 1)
        return nsbox_err_set(e, NSBOX_E_NOTFOUND, ENOENT,
                             "container %s: %s is missing: the container was created by a "
                             "nsbox-oci that did not keep its config, which exec checks a "
                             "process against (the bundle's may have changed since): delete "
                             "and create it again",
                             s->id, path);
    if (nsbox_ocispec_parse(text, strlen(text), c, e) < 0)
        return nsbox_err_wrap(e, "container %s: its config as created (%s)", s->id, path);
    return 0;
}

/* The bundle's annotations as create recorded them; {} when there are none. */
static cJSON *read_annotations(const struct nsbox_ocirt *g, const char *id)
{
    char dir[PATH_MAX], path[PATH_MAX + 32];
    cleanup_free char *text = NULL;
    cJSON *ann = NULL;
    struct nsbox_err e;
    if (nsbox_ocistate_dir(g, id, dir, sizeof dir, &e) == 0) {
        snprintf(path, sizeof path, "%s/%s", dir, NSBOX_OCI_ANNOTATIONS_FILE);
        if (nsbox_read_small(path, &text, &e) == 0)
            ann = cJSON_Parse(text);
    }
    if (!cJSON_IsObject(ann)) {
        cJSON_Delete(ann);
        ann = cJSON_CreateObject();
    }
    return ann;
}

void nsbox_ocistate_owner(const struct nsbox_ocirt *g, const char *id, char *out, size_t n)
{
    char dir[PATH_MAX];
    struct stat sb;
    struct nsbox_err e;
    out[0] = '\0';
    if (nsbox_ocistate_dir(g, id, dir, sizeof dir, &e) < 0 || stat(dir, &sb) < 0)
        return;
    struct passwd pw, *found = NULL;
    char buf[1024];
    if (getpwuid_r(sb.st_uid, &pw, buf, sizeof buf, &found) == 0 && found)
        snprintf(out, n, "%s", found->pw_name);
    else
        snprintf(out, n, "#%u", (unsigned)sb.st_uid);
}

char *nsbox_ocistate_json(const struct nsbox_ocirt *g, const struct nsbox_ocistate *s,
                          enum nsbox_ocistate_status st, bool pretty, struct nsbox_err *e)
{
    char owner[64];
    nsbox_ocistate_owner(g, s->id, owner, sizeof owner);
    cleanup_cjson cJSON *j = cJSON_CreateObject();
    cJSON *ann = read_annotations(g, s->id);
    if (!j || !ann || !cJSON_AddStringToObject(j, "ociVersion", "1.0.2") ||
        !cJSON_AddStringToObject(j, "id", s->id) ||
        !cJSON_AddNumberToObject(j, "pid", st == NSBOX_OCI_STOPPED ? 0 : s->pid) ||
        !cJSON_AddStringToObject(j, "status", nsbox_ocistate_status_name(st)) ||
        !cJSON_AddStringToObject(j, "bundle", s->bundle) ||
        !cJSON_AddStringToObject(j, "rootfs", s->rootfs) ||
        !cJSON_AddStringToObject(j, "created", s->created) ||
        !cJSON_AddStringToObject(j, "owner", owner) ||
        !cJSON_AddItemToObject(j, "annotations", ann)) {
        if (!cJSON_GetObjectItemCaseSensitive(j, "annotations"))
            cJSON_Delete(ann);
        nsbox_err_set(e, NSBOX_E_NOMEM, ENOMEM, "out of memory");
        return NULL;
    }
    char *text = pretty ? nsbox_jsontext_print(j) : cJSON_PrintUnformatted(j);
    if (!text)
        nsbox_err_set(e, NSBOX_E_NOMEM, ENOMEM, "out of memory");
    return text;
}

int nsbox_ocistate_write_pid_file(const char *path, pid_t pid, struct nsbox_err *e)
{
    char tmp[PATH_MAX], text[32];
    if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp", path) >= sizeof tmp)
        return nsbox_err_invalid(e, "--pid-file: path too long");
    int n = snprintf(text, sizeof text, "%d", (int)pid); /* no newline: runc's format */
    /* A new file, never one found there: a stale one is removed, and a symlink another user
     * put in its place (the engine's directory may be theirs to write) is neither followed
     * nor, when it reappears, written through (O_EXCL fails instead). */
    if (unlink(tmp) < 0 && errno != ENOENT)
        return nsbox_err_sys(e, "--pid-file %s", tmp);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0)
        return nsbox_err_sys(e, "--pid-file %s", tmp);
    int r = nsbox_pwrite_all(fd, text, (size_t)n, 0);
    close(fd);
    if (r < 0 || rename(tmp, path) < 0)
        return nsbox_err_sys(e, "--pid-file %s", path);
    return 0;
}

int nsbox_ocistate_read_live(const struct nsbox_ocirt *g, const char *id, struct nsbox_ocistate *s,
                             struct nsbox_err *e)
{
    if (nsbox_ocistate_read(g, id, s, e) < 0)
        return -1;
    if (nsbox_ocistate_status(g, s) == NSBOX_OCI_STOPPED)
        return nsbox_err_set(e, NSBOX_E_INVALID, ESRCH, "container %s: container not running",
                             s->id);
    return 0;
}
