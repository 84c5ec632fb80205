/* ir/parse.c: placeholder until the .kir parser is written. */
#include "ir.h"

Module *ir_parse(Arena *a, const char *file, const char *text, Diags *d)
{
    (void)a;
    (void)text;
    diag(d, NULL, "%s: the .kir parser is not written yet", file);
    return NULL;
}
