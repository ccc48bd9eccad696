/* The one error type (see include/nsbox.h). */
#include "nsbox.h"
#include "shown.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static void vformat(char *dst, size_t n, const char *fmt, va_list ap)
{
    int r = vsnprintf(dst, n, fmt, ap);
    if (r < 0)
        snprintf(dst, n, "(unformattable error message)");
}

static int vset(struct nsbox_err *e, int code, int sys_errno, const char *fmt, va_list ap)
{
    if (!e)
        return -1;
    vformat(e->msg, sizeof e->msg, fmt, ap);
    e->code = code;
    e->sys_errno = sys_errno;
    return -1;
}

int nsbox_err_set(struct nsbox_err *e, int code, int sys_errno, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vset(e, code, sys_errno, fmt, ap);
    va_end(ap);
    return -1;
}

int nsbox_err_invalid(struct nsbox_err *e, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vset(e, NSBOX_E_INVALID, EINVAL, fmt, ap);
    va_end(ap);
    return -1;
}

int nsbox_err_sys(struct nsbox_err *e, const char *fmt, ...)
{
    int saved = errno;
    if (!e)
        return -1;
    char head[NSBOX_ERR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vformat(head, sizeof head, fmt, ap);
    va_end(ap);
    snprintf(e->msg, sizeof e->msg, "%s: %s", head, strerror(saved));
    e->code = saved == ENOMEM ? NSBOX_E_NOMEM : NSBOX_E_SYS;
    e->sys_errno = saved;
    errno = saved;
    return -1;
}

int nsbox_err_wrap(struct nsbox_err *e, const char *fmt, ...)
{
    if (!e)
        return -1;
    char head[NSBOX_ERR_MSG_MAX], old[NSBOX_ERR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vformat(head, sizeof head, fmt, ap);
    va_end(ap);
    memcpy(old, e->msg, sizeof old);
    old[sizeof old - 1] = '\0';
    snprintf(e->msg, sizeof e->msg, "%s: %s", head, old);
    return -1;
}

void nsbox_err_clear(struct nsbox_err *e)
{
    if (!e)
        return;
    e->code = NSBOX_OK;
    e->sys_errno = 0;
    e->msg[0] = '\0';
}

const char *nsbox_errcode_name(int code)
{
    switch (code) {
    case NSBOX_OK: return "ok";
    case NSBOX_E_INVALID: return "invalid";
    case NSBOX_E_SYS: return "system";
    case NSBOX_E_UNSUPPORTED: return "unsupported";
    case NSBOX_E_POLICY: return "policy";
    case NSBOX_E_NOTFOUND: return "not_found";
    case NSBOX_E_NOMEM: return "no_memory";
    case NSBOX_E_TIMEOUT: return "timeout";
    case NSBOX_E_DELETED: return "deleted";
    case NSBOX_E_EXEC: return "exec";
    case NSBOX_E_NOSPACE: return "no_space";
    case NSBOX_E_BUSY: return "busy";
    }
    return "unknown";
}

struct nsbox_shown nsbox_show(const char *text)
{
    struct nsbox_shown r;
    if (!text)
        text = "(null)";
    /* a character that starts within the 64 bytes is seen whole; what follows is never read */
    nsbox_shown_copy(r.s, sizeof r.s, text, strnlen(text, 68), 64, 0);
    return r;
}
