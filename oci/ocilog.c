/* nsbox-oci's log (--log): a line per message as runc writes them, a JSON line
 * {"level":...,"msg":...,"time":...} (--log-format json) or a text line, appended. */
#include "ocirt.h"
#include "cleanup.h"
#include "shown.h"
#include "util.h"

#include <cJSON.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* msg at level appended to --log, if one was given. */
static void ocilog_append(const struct nsbox_ocirt *g, const char *level, const char *msg)
{
    if (!g->log)
        return;
    FILE *f = fopen(g->log, "ae");
    if (!f)
        return;
    char when[40];
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
    if (g->log_json) {
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "level", level);
        cJSON_AddStringToObject(j, "msg", msg);
        cJSON_AddStringToObject(j, "time", when);
        char *line = cJSON_PrintUnformatted(j);
        if (line)
            fprintf(f, "%s\n", line);
        free(line);
        cJSON_Delete(j);
    } else {
        fprintf(f, "time=\"%s\" level=%s msg=\"", when, level);
        for (const char *p = msg; *p; p++)
            fprintf(f, *p == '"' || *p == '\\' ? "\\%c" : "%c", *p);
        fprintf(f, "\"\n");
    }
    fclose(f);
}

/* msg as one line, shown, in a new string; NULL when out of memory. */
static char *ocilog_shown(const char *msg)
{
    size_t len = strlen(msg);
    char *shown = malloc(len + 1);
    if (shown) /* one line: a newline is '?' too */
        nsbox_shown_copy(shown, len + 1, msg, len, SIZE_MAX, NSBOX_SHOWN_TAB);
    return shown;
}

void nsbox_ocilog_say(const struct nsbox_ocirt *g, enum nsbox_ocilog_to to, const char *level,
                      const char *fmt, ...)
{
    char line[2 * NSBOX_ERR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    cleanup_free char *shown = ocilog_shown(line);
    const char *msg = shown ? shown : "(out of memory for the message)";
    bool logged = to != NSBOX_OCILOG_STDERR && g && g->log;
    if (logged)
        ocilog_append(g, level, msg);
    if (to != NSBOX_OCILOG_LOG_ELSE_STDERR || !logged)
        fprintf(stderr, "nsbox-oci: %s%s\n", strcmp(level, "warning") ? "" : "warning: ", msg);
}
