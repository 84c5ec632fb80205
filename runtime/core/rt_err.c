/* runtime/core/rt_err.c: run-time errors as a status plus one line of text.
 *
 * Contract (kiln_rt.h): rt_errf keeps the first error (a later one cannot
 * hide the cause) and always returns the code it was given, so callers
 * write `return rt_errf(e, RT_EIO, ...)`. Control characters in the text
 * (a newline in a file name, say) become '?', so a message is one line.
 * rt_vsay prints such a line for a program's commands; rt_fmt_shape is
 * the one shape notation of every message. */
#include "runtime/core/rt_core.h"

#include <stdarg.h>
#include <stdio.h>

int rt_errf(rt_err *e, int code, const char *fmt, ...)
{
    if (!e || e->code != RT_OK)
        return code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    for (char *p = e->msg; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            *p = '?';
    e->code = code;
    return code;
}

void rt_vsay(const char *prog, const char *cmd, const char *fmt, va_list ap)
{
    char buf[1024];
    rt_err e = {0};
    vsnprintf(buf, sizeof buf, fmt, ap);
    rt_errf(&e, RT_EINTERNAL, "%s", buf);
    fprintf(stderr, "%s: %s%s%s\n", prog, cmd ? cmd : "", cmd ? ": " : "", e.msg);
}

const char *rt_fmt_shape(char *buf, size_t size, int rank, const int64_t *dims)
{
    int k = snprintf(buf, size, "[");
    for (int i = 0; i < rank && k >= 0 && (size_t)k < size; i++)
        k += snprintf(buf + k, size - (size_t)k, i ? ",%lld" : "%lld", (long long)dims[i]);
    if (k >= 0 && (size_t)k < size)
        snprintf(buf + k, size - (size_t)k, "]");
    return buf;
}
