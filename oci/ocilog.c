/* nsbox-oci's log (--log): a line per message as runc writes them, a JSON line
 * {"level":...,"msg":...,"time":...} (--log-format json) or a text line, appended. */
#include "ocirt.h"
#include "text.h"
#include "util.h"

#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

void nsbox_ocilog_append(const struct nsbox_ocirt *g, const char *level, const char *msg)
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

char *nsbox_ocilog_shown(const char *msg)
{
    char *shown = nsbox_text_shown(msg, "");
    if (shown)
        for (char *c = shown; *c; c++)
            if (*c == '\n')
                *c = '?';
    return shown;
}
