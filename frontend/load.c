/* frontend/load.c: a model file from disk or memory to a Module: the top
 * level of MODEL-FORMAT.md.
 *
 * Contract: see frontend.h. The file is at most FE_MAX_FILE bytes, parsed
 * by jansson with duplicate keys refused; a syntax error is the one line
 * "FILE: line L, column C: jansson's message". The top level is an object
 * with the keys format, name, inputs, weights, state, nodes, outputs and
 * no others. A format other than "kiln/1" stops the check at once (the
 * rest is in a language this kiln does not read); every other problem is
 * reported and the check goes on. Sections are read in the order above,
 * whatever their order in the file. */
#include "fe.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* format := "kiln/1". Returns -1 when the check must stop. */
static int format(FeCx *cx, json_t *j)
{
    if (!j) {
        diag(cx->d, "format", "missing; this kiln reads \"%s\"", FE_FORMAT);
        return 0;
    }
    if (json_is_string(j) && strcmp(json_string_value(j), FE_FORMAT) == 0)
        return 0;
    diag(cx->d, "format", "unsupported format %s; this kiln reads \"%s\"", fe_got(cx, j),
         FE_FORMAT);
    return -1;
}

#define ALPHA "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_"

static int is_ident(const char *s)
{
    return *s && strchr(ALPHA, *s) && s[strspn(s, ALPHA "0123456789")] == 0;
}

/* name := [A-Za-z_][A-Za-z0-9_]*, at most FE_MAX_MODEL_NAME characters */
static void model_name(FeCx *cx, json_t *j)
{
    const char *s = json_string_value(j);   /* NULL unless a string */
    if (!j)
        return;                       /* missing: reported by fe_get */
    if (!s)
        fe_want(cx, "name", j, "name must be a string");
    else if (!is_ident(s))
        diag(cx->d, "name", "name must be a C identifier ([A-Za-z_][A-Za-z0-9_]*), got \"%s\"",
             fe_quote(cx, s));
    else if (strlen(s) > FE_MAX_MODEL_NAME)
        diag(cx->d, "name", "name has %zu characters, more than %d", strlen(s),
             FE_MAX_MODEL_NAME);
    else
        cx->m->name = arena_strdup(cx->a, s);
}

/* output := a name defined anywhere in the file, not listed before */
static Node *output(FeCx *cx, json_t *j, const char *where)
{
    if (!json_is_string(j)) {
        fe_want(cx, where, j, "an output must be a name");
        return NULL;
    }
    const char *name = json_string_value(j);
    Sym *s = fe_sym(cx, name);
    if (s && s->listed) {
        diag(cx->d, where, "'%s' is already listed at %s", fe_quote(cx, name), s->listed);
        return NULL;
    }
    if (s)
        s->listed = where;
    Node *n;
    return fe_use(cx, name, where, "is not defined", &n) == 0 ? n : NULL;
}

/* outputs := [output, ...]   at least one */
static void outputs(FeCx *cx, json_t *j)
{
    Module *m = cx->m;
    if (!j)
        return;                       /* missing: reported by fe_get */
    if (!json_is_array(j)) {
        fe_want(cx, "outputs", j, "outputs must be an array of names");
        return;
    }
    if (json_array_size(j) == 0)
        diag(cx->d, "outputs", "outputs must name at least one value");
    m->outputs = arena_alloc(cx->a, sizeof *m->outputs * (json_array_size(j) + 1));
    for (size_t i = 0; i < json_array_size(j); i++) {
        Node *n = output(cx, json_array_get(j, i), fe_at(cx, "outputs", i));
        if (n)
            m->outputs[m->noutputs++] = n;
    }
}

/* model := {"format": format, "name": name, "inputs": section,
 *           "weights": section, "state": section, "nodes": nodes,
 *           "outputs": outputs}   inputs, weights, state optional */
static void model(FeCx *cx, json_t *j)
{
    static const char *const keys[] = {"format", "name", "inputs", "weights", "state",
                                       "nodes", "outputs", NULL};
    if (!json_is_object(j)) {
        fe_want(cx, NULL, j, "the top level must be an object");
        return;
    }
    if (format(cx, json_object_get(j, "format")) != 0)
        return;
    fe_keys(cx, j, NULL, keys);
    model_name(cx, fe_get(cx, j, NULL, "name", 1));
    fe_decls(cx, json_object_get(j, "inputs"), "inputs", OP_INPUT);
    fe_decls(cx, json_object_get(j, "weights"), "weights", OP_WEIGHT);
    fe_decls(cx, json_object_get(j, "state"), "state", OP_STATE);
    fe_nodes(cx, fe_get(cx, j, NULL, "nodes", 1));
    outputs(cx, fe_get(cx, j, NULL, "outputs", 1));
}

Module *fe_parse(Arena *a, const char *file, const char *text, size_t len, Diags *d)
{
    int before = d->n;
    FeCx cx = {.a = a, .d = d, .m = ir_module_new(a, arena_strdup(a, file), NULL)};
    json_error_t err;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &err);
    if (!root && err.line < 0)        /* no position: out of memory */
        diag(d, NULL, "%s", fe_escape(&cx, err.text));
    else if (!root)
        diag(d, NULL, "line %d, column %d: %s", err.line, err.column, fe_escape(&cx, err.text));
    if (!root)
        return NULL;
    model(&cx, root);
    json_decref(root);
    if (d->n > before)
        return NULL;
    ir_module_renumber(cx.m);
    return cx.m;
}

static const char too_large[] = "file is larger than 256 MiB";

/* The whole of f in a malloc'd buffer (*len bytes); NULL with *why set
 * when it cannot be read or is larger than FE_MAX_FILE. */
static char *slurp(FILE *f, size_t *len, const char **why)
{
    size_t n = 0, cap = (size_t)1 << 16;
    char *buf = malloc(cap);
    while (buf) {
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap)
            break;                    /* end of file, or an error */
        if (cap > FE_MAX_FILE) {      /* read one byte past the limit */
            free(buf);
            *why = too_large;
            return NULL;
        }
        cap = 2 * cap > FE_MAX_FILE ? FE_MAX_FILE + 1 : 2 * cap;
        char *nb = realloc(buf, cap);
        if (!nb)
            free(buf);
        buf = nb;
    }
    *why = !buf ? "out of memory" : ferror(f) ? strerror(errno) : NULL;
    if (*why) {
        free(buf);
        return NULL;
    }
    *len = n;
    return buf;
}

Module *fe_load(Arena *a, const char *path, Diags *d, int *io)
{
    FILE *f = fopen(path, "rb");
    const char *why = f ? NULL : strerror(errno);
    size_t len = 0;
    char *text = f ? slurp(f, &len, &why) : NULL;
    if (f)
        fclose(f);
    if (io)
        *io = !text && why != too_large;  /* too large: the input's fault */
    if (!text) {
        diag(d, NULL, "%s%s", why == too_large ? "" : "cannot read: ", why);
        return NULL;
    }
    Module *m = fe_parse(a, path, text, len, d);
    free(text);
    return m;
}
