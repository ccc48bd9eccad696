/* Fuzz the network log's reader (sandbox/egress_log.c), which `nsbox logs --network` runs as
 * root on files a helper that may be taken over writes, and its writer's line.
 *
 * Input: the first byte splits the rest into the older file's text and the current one's.
 * Checked, besides the sanitizers' memory errors: every line passed on starts with {"seq":,
 * holds no control byte or newline, and its seq is larger than the one before; a second read
 * passes nothing. The line the writer makes of the input (as name, reason and path) is one
 * line of valid JSON whose path has no query. */
#include "cstring.h"
#include "egress_log.h"

#include <cjson/cJSON.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c))                                                                                  \
            abort();                                                                               \
    } while (0)

static char dir[] = "/tmp/nsbox-fuzz-elog-XXXXXX";

struct last {
    uint64_t seq;
};

static int check_line(void *ctx, const char *text, size_t len)
{
    struct last *l = ctx;
    CHECK(len > 7 && !memcmp(text, "{\"seq\":", 7));
    for (size_t i = 0; i < len; i++)
        CHECK((unsigned char)text[i] >= 0x20 && text[i] != 0x7f);
    uint64_t v = 0;
    for (size_t i = 7; i < len && text[i] >= '0' && text[i] <= '9'; i++)
        v = v * 10 + (uint64_t)(text[i] - '0');
    CHECK(v > l->seq);
    l->seq = v;
    return 0;
}

static void put(const char *name, const uint8_t *p, size_t n)
{
    char path[128];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    CHECK(fd >= 0);
    CHECK(write(fd, p, n) == (ssize_t)n);
    close(fd);
}

static void check_writer(const uint8_t *data, size_t size)
{
    char *s = cstring_dup(data, size);
    struct nsbox_egress_entry en = {.name = s,
                                    .reason = s,
                                    .path = s,
                                    .method = s,
                                    .verdict = "bound",
                                    .port = 443,
                                    .status = 200};
    char *line = nsbox_egress_log_line(&en, 1);
    CHECK(line);
    CHECK(!strchr(line, '\n'));
    cJSON *o = cJSON_Parse(line);
    CHECK(o);
    const char *path = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, "path"));
    CHECK(path && !strchr(path, '?') && !strchr(path, '#'));
    cJSON_Delete(o);
    cJSON_free(line);
    free(s);
}

/* At the fuzzer's exit: nothing of a run is left in /tmp. */
static void remove_dir(void)
{
    char path[128];
    snprintf(path, sizeof path, "%s/%s", dir, NSBOX_EGRESS_LOG_OLDER);
    unlink(path);
    snprintf(path, sizeof path, "%s/%s", dir, NSBOX_EGRESS_LOG_FILE);
    unlink(path);
    rmdir(dir);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static bool made;
    if (!made) {
        CHECK(mkdtemp(dir));
        made = true;
        atexit(remove_dir);
    }
    if (size == 0)
        return 0;
    size_t cut = data[0] * (size - 1) / 255;
    put(NSBOX_EGRESS_LOG_OLDER, data + 1, cut);
    put(NSBOX_EGRESS_LOG_FILE, data + 1 + cut, size - 1 - cut);
    struct nsbox_egress_reader r;
    CHECK(nsbox_egress_reader_open(&r, dir) == 0);
    struct last l = {0};
    CHECK(nsbox_egress_reader_next(&r, check_line, &l) >= 0);
    CHECK(nsbox_egress_reader_next(&r, check_line, &l) == 0);
    nsbox_egress_reader_close(&r);
    check_writer(data + 1, size - 1);
    return 0;
}
