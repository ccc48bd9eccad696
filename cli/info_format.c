/* The pure half of `nsbox info`: parsing what /proc and /sys say, and rendering the report as
 * text or JSON. No system calls, so that the unit tests can feed it any machine's files. */
#include "info.h"
#include "cleanup.h"
#include "cleanup_cjson.h"
#include "filetable.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Is `line[0..len)` split at whitespace and does its field number `field` equal word? */
static bool field_equals(const char *line, size_t len, unsigned field, const char *word)
{
    size_t i = 0, wl = strlen(word);
    for (unsigned f = 0;; f++) {
        while (i < len && isspace((unsigned char)line[i]))
            i++;
        if (i >= len) return false;
        size_t start = i;
        while (i < len && !isspace((unsigned char)line[i]))
            i++;
        if (f == field) return i - start == wl && memcmp(line + start, word, wl) == 0;
    }
}

/* Call fn on each line of content (without its newline); stop at the first true. */
static bool any_line(const char *content, bool (*fn)(const char *, size_t, const char *),
                     const char *arg)
{
    if (!content || !arg || !*arg) return false;
    const char *p = content;
    while (*p) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        if (fn(p, len, arg)) return true;
        if (!nl) break;
        p = nl + 1;
    }
    return false;
}

/* /proc/filesystems: "nodev\t<fs>" or "\t<fs>": the name is the last field. */
static bool fs_line(const char *line, size_t len, const char *fs)
{
    if (field_equals(line, len, 0, "nodev")) return field_equals(line, len, 1, fs);
    return field_equals(line, len, 0, fs);
}

bool nsbox_info_filesystems_has(const char *content, const char *fs)
{
    return any_line(content, fs_line, fs);
}

static bool word_line(const char *line, size_t len, const char *word)
{
    size_t wl = strlen(word), i = 0;
    while (i < len) {
        while (i < len && isspace((unsigned char)line[i]))
            i++;
        size_t start = i;
        while (i < len && !isspace((unsigned char)line[i]))
            i++;
        if (i > start && i - start == wl && memcmp(line + start, word, wl) == 0) return true;
    }
    return false;
}

bool nsbox_info_words_has(const char *content, const char *word)
{
    return any_line(content, word_line, word);
}

static bool module_line(const char *line, size_t len, const char *module)
{
    return field_equals(line, len, 0, module);
}

bool nsbox_info_modules_has(const char *content, const char *module)
{
    return any_line(content, module_line, module);
}

/* modules.builtin: "kernel/net/netfilter/nf_tables.ko". Module names may use '-' where the
 * file uses '_' and the other way round; the kernel treats them as the same name. */
static bool builtin_line(const char *line, size_t len, const char *module)
{
    while (len > 0 && isspace((unsigned char)line[len - 1]))
        len--;
    if (len < 3 || memcmp(line + len - 3, ".ko", 3) != 0) return false;
    len -= 3;
    size_t start = len;
    while (start > 0 && line[start - 1] != '/')
        start--;
    size_t ml = strlen(module);
    if (len - start != ml) return false;
    for (size_t i = 0; i < ml; i++) {
        char a = line[start + i] == '-' ? '_' : line[start + i];
        char b = module[i] == '-' ? '_' : module[i];
        if (a != b) return false;
    }
    return true;
}

bool nsbox_info_builtin_has(const char *content, const char *module)
{
    return any_line(content, builtin_line, module);
}

bool nsbox_info_kernel_at_least(const char *release, int major, int minor)
{
    if (!release || !isdigit((unsigned char)release[0])) return false;
    char *end;
    long maj = strtol(release, &end, 10);
    long min = 0;
    if (*end == '.' && isdigit((unsigned char)end[1]))
        min = strtol(end + 1, &end, 10);
    else if (*end != '\0' && *end != '-')
        return false;
    return maj > major || (maj == major && min >= minor);
}

bool nsbox_info_uid_map_is_initial(const char *content)
{
    unsigned long inside, outside, count;
    char extra;
    if (!content || sscanf(content, " %lu %lu %lu %c", &inside, &outside, &count, &extra) != 3)
        return false;
    return inside == 0 && outside == 0 && count == 4294967295ul;
}

void nsbox_info_file_table(uint64_t file_max, uint64_t mem_bytes, enum nsbox_info_raiser raiser,
                           struct nsbox_check *c)
{
    if (!nsbox_filetable_fillable(file_max, mem_bytes)) {
        c->ok = true;
        NSBOX_CHECK_DETAIL(c, "fs.file-max %llu: more open files than memory could hold, so "
                              "each sandbox's memory limit bounds its files",
                           (unsigned long long)file_max);
        return;
    }
    NSBOX_CHECK_DETAIL(c, "fs.file-max %llu is fewer files than the memory could hold (%llu): "
                          "sandboxes could fill the host's file table, and every process but "
                          "root's would get ENFILE",
                       (unsigned long long)file_max,
                       (unsigned long long)(mem_bytes / NSBOX_FILETABLE_FILE_BYTES));
    if (raiser == NSBOX_INFO_RAISER_RAISES)
        NSBOX_CHECK_DETAIL(c, "; nsbox raises it when it makes a sandbox (docs/security.md, "
                              "finding 22)");
    else if (raiser == NSBOX_INFO_RAISER_READ_ONLY)
        NSBOX_CHECK_DETAIL(c, "; nsbox cannot raise it here: /proc/sys/fs/file-max is not "
                              "writable (a read-only /proc/sys, as in a container)");
    else if (raiser == NSBOX_INFO_RAISER_KEPT)
        NSBOX_CHECK_DETAIL(c, "; the config file's \"host\": {\"file_max\": \"keep\"} leaves "
                              "it as it is");
    NSBOX_CHECK_FIX(c, "sysctl -w fs.file-max=%ld, and the same in a file of /etc/sysctl.d "
                       "(what systemd sets at boot)",
                    (long)NSBOX_FILETABLE_RAISED);
}

void nsbox_info_format_bytes(uint64_t bytes, char *out, size_t n)
{
    const uint64_t gib = 1ull << 30, mib = 1ull << 20;
    if (bytes && bytes % gib == 0)
        snprintf(out, n, "%llu GiB", (unsigned long long)(bytes / gib));
    else if (bytes && bytes % mib == 0)
        snprintf(out, n, "%llu MiB", (unsigned long long)(bytes / mib));
    else
        snprintf(out, n, "%llu bytes", (unsigned long long)bytes);
}

bool nsbox_info_all_required_ok(const struct nsbox_check *checks, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (checks[i].required && !checks[i].ok) return false;
    return true;
}

/* Add one check as an object to arr; false on ENOMEM. */
static bool json_add_check(cJSON *arr, const struct nsbox_check *c)
{
    cJSON *o = cJSON_CreateObject();
    if (!o) return false;
    cJSON_AddItemToArray(arr, o);
    return cJSON_AddStringToObject(o, "name", c->name ? c->name : "") &&
           cJSON_AddBoolToObject(o, "ok", c->ok) &&
           cJSON_AddBoolToObject(o, "required", c->required) &&
           cJSON_AddStringToObject(o, "detail", c->detail) &&
           cJSON_AddStringToObject(o, "fix", c->fix);
}

static bool json_add_type(cJSON *arr, const struct nsbox_instance_type *t)
{
    cJSON *o = cJSON_CreateObject();
    if (!o) return false;
    cJSON_AddItemToArray(arr, o);
    /* Numbers are doubles in cJSON: exact for every size below 2^53 bytes (8 PiB). */
    return cJSON_AddStringToObject(o, "name", t->name) &&
           cJSON_AddNumberToObject(o, "cpus", t->limits.cpus) &&
           cJSON_AddNumberToObject(o, "memory", (double)t->limits.memory_bytes) &&
           cJSON_AddNumberToObject(o, "pids", (double)t->limits.pids) &&
           cJSON_AddNumberToObject(o, "disk", (double)t->limits.disk_bytes);
}

static cJSON *json_report(const struct nsbox_check *checks, size_t n,
                          const struct nsbox_instance_type *types, size_t ntypes,
                          const struct nsbox_info_host *host)
{
    cleanup_cjson cJSON *root = cJSON_CreateObject();
    if (!root || !cJSON_AddBoolToObject(root, "ok", nsbox_info_all_required_ok(checks, n)))
        return NULL;
    cJSON *arr = cJSON_AddArrayToObject(root, "checks");
    if (!arr) return NULL;
    for (size_t i = 0; i < n; i++)
        if (!json_add_check(arr, &checks[i])) return NULL;
    cJSON *tarr = cJSON_AddArrayToObject(root, "instance_types");
    if (!tarr) return NULL;
    for (size_t i = 0; i < ntypes; i++)
        if (!json_add_type(tarr, &types[i])) return NULL;
    cJSON *h = host ? cJSON_AddObjectToObject(root, "host") : NULL;
    if (host && (!h || !cJSON_AddNumberToObject(h, "cpus", host->cpus) ||
                 !cJSON_AddNumberToObject(h, "memory", (double)host->memory_bytes)))
        return NULL;
    return nsbox_steal_ptr(&root);
}

int nsbox_info_render_json(const struct nsbox_check *checks, size_t n,
                           const struct nsbox_instance_type *types, size_t ntypes,
                           const struct nsbox_info_host *host, char *buf, size_t size)
{
    cleanup_cjson cJSON *root = json_report(checks, n, types, ntypes, host);
    cleanup_free char *text = root ? cJSON_PrintUnformatted(root) : NULL;
    if (!text) {
        errno = ENOMEM;
        return -1;
    }
    size_t len = strlen(text);
    /* Room for the text, a newline (one document on one complete line, for jq and line-based
     * tools) and the NUL. */
    if (len + 2 > size) {
        errno = ENOSPC;
        return -1;
    }
    memcpy(buf, text, len);
    buf[len] = '\n';
    buf[len + 1] = '\0';
    return (int)(len + 1);
}

struct textbuf {
    char *buf;
    size_t size, len;
    bool overflow;
};

static void __attribute__((format(printf, 2, 3))) tb_printf(struct textbuf *t, const char *fmt, ...)
{
    if (t->overflow) return;
    va_list ap;
    va_start(ap, fmt);
    int r = vsnprintf(t->buf + t->len, t->size - t->len, fmt, ap);
    va_end(ap);
    if (r < 0 || (size_t)r >= t->size - t->len) {
        t->overflow = true;
        t->buf[t->len] = '\0';
        return;
    }
    t->len += (size_t)r;
}

/* Comma-separated names of checks matching (required, !ok). */
static void tb_names(struct textbuf *t, const struct nsbox_check *checks, size_t n, bool required)
{
    bool first = true;
    for (size_t i = 0; i < n; i++) {
        if (checks[i].ok || checks[i].required != required) continue;
        tb_printf(t, "%s%s", first ? "" : ", ", checks[i].name);
        first = false;
    }
}

/* A type that asks more than the machine has is accepted (its limits are ceilings, as
 * Docker's are), but on a small CI runner its numbers mislead: the CPU limit gives no more than
 * the machine's CPUs, and a memory limit above the machine's memory is never reached, so that
 * the machine's OOM killer, not the sandbox's limit, ends what fills it. */
/* The machine's memory, which is no round number: tenths of a GiB, cut rather than rounded
 * up, so that it never reads as much as a type's that is more. */
static void host_bytes(uint64_t b, char *out, size_t n)
{
    const uint64_t gib = 1ull << 30;
    if (b % gib == 0 || b < gib)
        nsbox_info_format_bytes(b - b % (1ull << 20), out, n);
    else
        snprintf(out, n, "%llu.%llu GiB", (unsigned long long)(b / gib),
                 (unsigned long long)(b % gib * 10 / gib));
}

static void tb_type_notes(struct textbuf *t, const struct nsbox_instance_type *types,
                          size_t ntypes, const struct nsbox_info_host *h)
{
    for (size_t i = 0; h && i < ntypes; i++) {
        const struct nsbox_limits *l = &types[i].limits;
        if (h->cpus && l->cpus > h->cpus)
            tb_printf(t, "  note: %s's %u CPUs are more than the %u this machine gives nsbox: a "
                         "sandbox of it gets at most %u\n",
                      types[i].name, l->cpus, h->cpus, h->cpus);
        if (h->memory_bytes && l->memory_bytes > h->memory_bytes) {
            char want[32], have[32];
            nsbox_info_format_bytes(l->memory_bytes, want, sizeof want);
            host_bytes(h->memory_bytes, have, sizeof have);
            tb_printf(t, "  note: %s's %s of memory are more than this machine's %s: its limit "
                         "is never reached, the machine runs out first and its OOM killer "
                         "chooses what to end\n",
                      types[i].name, want, have);
        }
    }
}

int nsbox_info_render_text(const struct nsbox_check *checks, size_t n,
                           const struct nsbox_instance_type *types, size_t ntypes,
                           const struct nsbox_info_host *host, char *buf, size_t size)
{
    if (size == 0) {
        errno = ENOSPC;
        return -1;
    }
    struct textbuf t = {.buf = buf, .size = size};
    buf[0] = '\0';
    size_t missing_req = 0, missing_opt = 0;
    for (size_t i = 0; i < n; i++) {
        const struct nsbox_check *c = &checks[i];
        tb_printf(&t, "%-8s %-17s %s%s\n", c->ok ? "OK" : "MISSING", c->name ? c->name : "",
                  !c->ok && !c->required ? "(optional) " : "", c->detail);
        if (!c->ok) {
            if (c->fix[0]) tb_printf(&t, "%-8s %-17s fix: %s\n", "", "", c->fix);
            if (c->required)
                missing_req++;
            else
                missing_opt++;
        }
    }
    tb_printf(&t, "\ninstance types (--instance-type):\n");
    tb_printf(&t, "  %-12s %5s %10s %8s %10s\n", "NAME", "CPUS", "MEMORY", "PIDS", "DISK");
    for (size_t i = 0; i < ntypes; i++) {
        char mem[32], disk[32];
        nsbox_info_format_bytes(types[i].limits.memory_bytes, mem, sizeof mem);
        nsbox_info_format_bytes(types[i].limits.disk_bytes, disk, sizeof disk);
        tb_printf(&t, "  %-12s %5u %10s %8llu %10s\n", types[i].name, types[i].limits.cpus, mem,
                  (unsigned long long)types[i].limits.pids, disk);
    }
    tb_type_notes(&t, types, ntypes, host);
    tb_printf(&t, "\n");
    if (missing_req) {
        tb_printf(&t, "summary: MISSING %zu required: ", missing_req);
        tb_names(&t, checks, n, true);
        tb_printf(&t, "; nsbox cannot create sandboxes here until fixed");
    } else {
        tb_printf(&t, "summary: OK, every required check passed; nsbox can create sandboxes here");
    }
    if (missing_opt) {
        tb_printf(&t, "; optional features missing: ");
        tb_names(&t, checks, n, false);
    }
    tb_printf(&t, "\n");
    if (t.overflow) {
        errno = ENOSPC;
        return -1;
    }
    return (int)t.len;
}
