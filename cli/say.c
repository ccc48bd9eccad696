/* What nsbox tells the user in more than one command (see say.h). */
#define _GNU_SOURCE
#include "say.h"
#include "dockeropt.h"
#include "suggest.h"
#include "cli.h"
#include "client.h"
#include "help.h"
#include "shown.h"
#include "spec.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char no_memory[] = "(out of memory for the message)";

/* "nsbox: " and text on f: the last line of defence for what the layers below put in an error
 * or a note unfiltered (a name of a sandbox's or an image's), whose controls and invalid UTF-8
 * are '?'. nsbox's own text stays: UTF-8 (quotes, arrows) and the lines of a message of several
 * (a set-up script's output, indented). A line that does not start with a space or a tab is
 * indented by two: a name holding "\nnsbox: ..." must not print a line that reads as nsbox's. */
static void say_shown(FILE *f, const char *text, size_t len)
{
    char *shown = nsbox_shown_lines(text, len, "  ", false);
    fprintf(f, "nsbox: %s\n", shown ? shown : no_memory);
    free(shown);
}

void nsbox_say_note(void *ctx, const char *line)
{
    say_shown(ctx, line, strlen(line));
}

int nsbox_say_fail(const struct nsbox_err *e)
{
    say_shown(stderr, e->msg, strnlen(e->msg, sizeof e->msg));
    /* The region rule's text is the hosted SDK's, to the letter, and speaks Python. */
    if (strstr(e->msg, "Pass network=Network.all() or a supported region."))
        fprintf(stderr, "(on the command line: --network all, or --region nl-north-1)\n");
    return EXIT_NSBOX;
}

void nsbox_say_line(const char *fmt, ...)
{
    char *text;
    va_list ap;
    va_start(ap, fmt);
    int n = vasprintf(&text, fmt, ap);
    va_end(ap);
    if (n < 0) {
        fprintf(stderr, "nsbox: %s\n", no_memory);
        return;
    }
    say_shown(stderr, text, (size_t)n);
    free(text);
}

int nsbox_say_usage(const char *fmt, const char *arg)
{
    nsbox_say_line(fmt, arg);
    nsbox_help_hint(stderr);
    return EXIT_USAGE;
}

int nsbox_say_unknown(const char *what, const char *word, const char *const *names, size_t n,
                      const char *usage)
{
    /* a Docker habit gets nsbox's way to the same end, not the nearest spelling */
    const char *docker = word[0] == '-' ? nsbox_dockeropt_hint(word) : NULL;
    const char *near = docker ? NULL : nsbox_suggest(word, names, n);
    nsbox_say_line("%s %s%s%s%s%s%s%s%s%s%s%s", what, word, docker ? " (as in " : "",
                   docker ? nsbox_dockeropt_engine(word) : "", docker ? "?): " : "",
                   docker ? docker : "", near ? ": did you mean " : "", near ? near : "",
                   near ? "?" : "", usage ? " (" : "", usage ? usage : "", usage ? ")" : "");
    nsbox_help_hint(stderr);
    return EXIT_USAGE;
}

int nsbox_say_env_usage(const char *option, const char *value)
{
    char msg[600];
    if (nsbox_spec_env_name_valid(value, strlen(value)) && strlen(value) < 64)
        snprintf(msg, sizeof msg,
                 "%s %s: expected NAME=VALUE (docker's -e NAME passes the caller's value; here "
                 "give it: %s %s=\"$%s\")",
                 option, value, option, value, value);
    else
        snprintf(msg, sizeof msg, "%s %s: expected NAME=VALUE", option, NSBOX_SHOW(value));
    return nsbox_say_usage("%s", msg);
}

int nsbox_say_pid_usage(const char *cmd, const char *arg, const char *why)
{
    char msg[400];
    /* kill said "needs a process id" of pid 1, which is one */
    if (!strcmp(arg, "1"))
        snprintf(msg, sizeof msg,
                 "%s: pid 1 is the sandbox's init, %s; give a background process's pid (as "
                 "nsbox exec -d printed it, or nsbox ps shows it)",
                 cmd, why);
    else
        snprintf(msg, sizeof msg,
                 "%s needs a process id (as nsbox exec -d printed it, or nsbox ps shows it)", cmd);
    return nsbox_say_usage("%s", msg);
}

void nsbox_say_seconds(char *buf, size_t size, uint64_t ms)
{
    snprintf(buf, size, "%llu.%03llu", (unsigned long long)(ms / 1000),
             (unsigned long long)(ms % 1000));
}

void nsbox_say_timed_out(const char *bound)
{
    fprintf(stderr,
            "nsbox: timed out: the command ran past %s, and its processes were killed (exit code "
            "124)\n",
            bound);
}

void nsbox_say_oom(const char *type, uint64_t memory_bytes, int kills, bool tmpfs_workspace)
{
    if (!type) {
        fprintf(stderr, "nsbox: the command was killed: out of memory (instance type limit)\n");
        return;
    }
    fprintf(stderr,
            "nsbox: out of memory: the instance type's limit (%s, %llu MiB) killed %d "
            "process%s%s\n",
            type, (unsigned long long)(memory_bytes >> 20), kills, kills == 1 ? "" : "es",
            /* a user's workspace is a tmpfs, whose files are memory (docs/workspace.md) */
            tmpfs_workspace ? " (the workspace's files count toward it: without root it is a "
                              "tmpfs)"
                            : "");
}

bool nsbox_say_printable(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || (unsigned char)*s >= 0x7f)
            return false;
    return true;
}

int nsbox_say_exit(cJSON *reply)
{
    struct nsbox_err e = {0};
    const cJSON *code = cJSON_GetObjectItemCaseSensitive(reply, "exit_code");
    int rc = cJSON_IsNumber(code) ? code->valueint : EXIT_NSBOX;
    if (nsbox_client_reply_error(reply, &e) < 0)
        nsbox_say_fail(&e);
    else if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(reply, "oom_killed")))
        nsbox_say_oom(NULL, 0, 1, false);
    else if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(reply, "timed_out")))
        nsbox_say_timed_out("its --timeout");
    /* the supervisor's note on names that did not resolve: printed as a line of its own, its
     * characters those a name and the note's words may have (no terminal control) */
    const cJSON *dns = cJSON_GetObjectItemCaseSensitive(reply, "dns_note");
    if (cJSON_IsString(dns) && nsbox_say_printable(dns->valuestring))
        fprintf(stderr, "%s\n", dns->valuestring);
    cJSON_Delete(reply);
    return rc;
}
