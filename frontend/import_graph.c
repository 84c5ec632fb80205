/* frontend/import_graph.c: kiln/1 model text, built one declaration or
 * node at a time, laid out as the hand-written examples are: one entry
 * per line, sections in docs/model-format.md's order.
 *
 * Names come from kiln's own patterns and, for weights, from checkpoint
 * files, so every string is escaped as JSON wants; the frontend then
 * checks the text as it checks any model file. */
#include "import.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

enum { SEC_INPUTS, SEC_WEIGHTS, SEC_STATE, SEC_NODES, NSEC };
static const char *const sec_key[NSEC] = {"inputs", "weights", "state", "nodes"};

struct ImpGraph {
    Arena *a;
    const char *name;
    FILE *sec[NSEC];            /* the entries of each section so far */
    int count[NSEC];
};

ImpGraph *ig_new(Arena *a, const char *model_name)
{
    ImpGraph *g = arena_alloc(a, sizeof *g);
    g->a = a;
    g->name = model_name;
    for (int i = 0; i < NSEC; i++)
        g->sec[i] = arena_stream(a);
    return g;
}

void ig_put_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p < 0x20)
            fprintf(f, "\\u%04x", *p);
        else
            fputc(*p, f);
    }
    fputc('"', f);
}

static void put_dims(FILE *f, int rank, const int64_t *dims)
{
    fputc('[', f);
    for (int i = 0; i < rank; i++)
        fprintf(f, "%s%lld", i ? ", " : "", (long long)dims[i]);
    fputc(']', f);
}

/* Starts the next entry of section s: its separator and indentation. */
static FILE *entry(ImpGraph *g, int s)
{
    FILE *f = g->sec[s];
    fputs(g->count[s]++ ? ",\n    " : "    ", f);
    return f;
}

static const char *decl(ImpGraph *g, int s, const char *name, const char *dtype, int rank,
                        const int64_t *dims)
{
    FILE *f = entry(g, s);
    fputs("{\"name\": ", f);
    ig_put_string(f, name);
    fputs(", \"shape\": ", f);
    put_dims(f, rank, dims);
    if (dtype)
        fprintf(f, ", \"dtype\": \"%s\"", dtype);
    fputc('}', f);
    return name;
}

const char *ig_input(ImpGraph *g, const char *name, const char *dtype, int rank,
                     const int64_t *dims)
{
    return decl(g, SEC_INPUTS, name, dtype, rank, dims);
}

const char *ig_weight(ImpGraph *g, const char *name, int rank, const int64_t *dims)
{
    return decl(g, SEC_WEIGHTS, name, NULL, rank, dims);
}

const char *ig_state(ImpGraph *g, const char *name, int rank, const int64_t *dims)
{
    return decl(g, SEC_STATE, name, NULL, rank, dims);
}

/* A node's line up to its inputs' opening bracket. */
static FILE *node_start(ImpGraph *g, const char *name, const char *op)
{
    FILE *f = entry(g, SEC_NODES);
    fputs("{\"name\": ", f);
    ig_put_string(f, name);
    fprintf(f, ", \"op\": \"%s\", \"inputs\": [", op);
    return f;
}

const char *ig_nodev(ImpGraph *g, const char *name, const char *op, const char *attrs, int nin,
                     const char *const *in)
{
    FILE *f = node_start(g, name, op);
    for (int i = 0; i < nin; i++) {
        fputs(i ? ", " : "", f);
        ig_put_string(f, in[i]);
    }
    fputc(']', f);
    if (attrs)
        fprintf(f, ", \"attrs\": %s", attrs);
    fputc('}', f);
    return name;
}

const char *ig_node(ImpGraph *g, const char *name, const char *op, const char *attrs, int nin,
                    ...)
{
    const char *in[8];
    if (nin > 8)
        KILN_BUG("ig_node takes at most 8 operands, got %d", nin);
    va_list ap;
    va_start(ap, nin);
    for (int i = 0; i < nin; i++)
        in[i] = va_arg(ap, const char *);
    va_end(ap);
    return ig_nodev(g, name, op, attrs, nin, in);
}

const char *ig_scalar(ImpGraph *g, const char *name, const char *op, const char *in, double k)
{
    FILE *f = node_start(g, name, op);
    ig_put_string(f, in);
    fprintf(f, ", %s]}", ig_num(g, k));
    return name;
}

const char *ig_num(ImpGraph *g, double v)
{
    char buf[32];
    if (v == floor(v) && fabs(v) < 1e15)          /* 10000, not 1e+04 */
        return arena_printf(g->a, "%.0f", v);
    for (int p = 1; p <= 17; p++) {
        snprintf(buf, sizeof buf, "%.*g", p, v);
        if (strtod(buf, NULL) == v)
            break;
    }
    return arena_strdup(g->a, buf);
}

char *ig_text(ImpGraph *g, const char *output)
{
    FILE *f = arena_stream(g->a);
    fprintf(f, "{\n  \"format\": \"kiln/1\",\n  \"name\": ");
    ig_put_string(f, g->name);
    for (int s = 0; s < NSEC; s++) {
        char *body = arena_stream_text(g->a, g->sec[s]);
        fprintf(f, ",\n  \"%s\": [%s%s%s]", sec_key[s], *body ? "\n" : "", body,
                *body ? "\n  " : "");
    }
    fputs(",\n  \"outputs\": [", f);
    ig_put_string(f, output);
    fputs("]\n}\n", f);
    return arena_stream_text(g->a, f);
}
