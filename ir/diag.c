/* ir/diag.c: problems in the user's files, collected and printed one line
 * each as "FILE: WHERE: message" (docs/model-format.md, Errors). */
#include "ir.h"

void diag_init(Diags *d, Arena *a, const char *file)
{
    d->a = a;
    d->file = file;
    d->lines = NULL;
    d->n = d->cap = 0;
}

void diag(Diags *d, const char *where, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int len = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *msg = arena_alloc(d->a, (size_t)len + 1);
    va_start(ap, fmt);
    vsnprintf(msg, (size_t)len + 1, fmt, ap);
    va_end(ap);
    char *line = where ? arena_printf(d->a, "%s: %s: %s", d->file, where, msg)
                       : arena_printf(d->a, "%s: %s", d->file, msg);
    ARR_PUSH(d->a, d->lines, d->n, d->cap, line);
}

void diag_print(const Diags *d, FILE *f)
{
    for (int i = 0; i < d->n; i++)
        fprintf(f, "%s\n", d->lines[i]);
}
