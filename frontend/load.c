/* frontend/load.c: a model file from disk or memory to a Module: the top
 * level of docs/model-format.md.
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

/* Model names whose C symbols (NAME_model, NAME_open, NAME_status,
 * NAME_error, NAME_run, NAME_reset, NAME_close, NAME_input_names,
 * NAME_output_names) would clash with others in the same program: names
 * with a leading '_' (C11 7.1.3 reserves such identifiers at file scope,
 * and glibc exports __open and _IO_file_open), kiln's own prefixes in
 * generated C (kiln_model, rt_model, rt_st_open), and the C library's
 * functions of that form, which the generated file's headers declare
 * (shm_open, omp_proc_bind_close; signal.h's macro si_status) or glibc,
 * libm and libgomp export: a library named sem would replace sem_open in
 * every program it is linked into. tests/names.sh checks this on the
 * machine at hand. */
static const char *const libc_names[] = {
    "GOMP", "GOMP_PLUGIN", "aio", "argp", "argp_err_exit", "fts", "fts64", "gai",
    "iconv", "mq", "omp_proc_bind", "pidfd", "sem", "shm", "si", "svc", NULL,
};

static int is_reserved(const char *s)
{
    if (s[0] == '_' || !strcmp(s, "kiln") || !strcmp(s, "rt") || !strncmp(s, "kiln_", 5) ||
        !strncmp(s, "rt_", 3))
        return 1;
    for (int i = 0; libc_names[i]; i++)
        if (!strcmp(s, libc_names[i]))
            return 1;
    return 0;
}

/* name := [A-Za-z_][A-Za-z0-9_]*, at most FE_MAX_MODEL_NAME characters,
 * not reserved */
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
    else if (is_reserved(s))
        diag(cx->d, "name", "name \"%s\" is reserved: its C symbols (%s_open, ...) would "
             "clash with kiln's or the C library's", s, s);
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

static void release_json(void *root) { json_decref(root); }

Module *fe_parse(Arena *a, const char *file, const char *text, size_t len, Diags *d)
{
    int before = d->n;
    FeCx cx = {.a = a, .d = d, .m = ir_module_new(a, arena_strdup(a, file), NULL)};
    json_error_t err;
    json_t *root = fe_json_load(a, text, len, &err);
    if (!root && err.line < 0)        /* no position */
        diag(d, NULL, "%s", fe_escape(&cx, err.text));
    else if (!root)
        diag(d, NULL, "line %d, column %d: %s", err.line, err.column, fe_escape(&cx, err.text));
    if (!root)
        return NULL;
    arena_hold(a, root, release_json);  /* model() may run out of memory */
    model(&cx, root);
    arena_release(a, root);
    if (d->n > before)
        return NULL;
    ir_module_renumber(cx.m);
    return cx.m;
}

static const char too_large[] = "file is larger than 256 MiB";
static const char no_memory[] = "out of memory";

/* The whole of f in an ir_malloc'd buffer (*len bytes); NULL with *why
 * set when it cannot be read, is larger than FE_MAX_FILE, or memory ran
 * out (no_memory). */
static char *slurp(FILE *f, size_t *len, const char **why)
{
    size_t n = 0, cap = (size_t)1 << 16;
    char *buf = ir_malloc(cap);
    while (buf) {
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap)
            break;                    /* end of file, or an error */
        if (cap > FE_MAX_FILE) {      /* read one byte past the limit */
            ir_free(buf);
            *why = too_large;
            return NULL;
        }
        cap = 2 * cap > FE_MAX_FILE ? FE_MAX_FILE + 1 : 2 * cap;
        char *nb = ir_realloc(buf, cap);
        if (!nb)
            ir_free(buf);
        buf = nb;
    }
    *why = !buf ? no_memory : ferror(f) ? strerror(errno) : NULL;
    if (*why) {
        ir_free(buf);
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
    if (why == no_memory)
        arena_oom(a);
    if (io)
        *io = !text && why != too_large;  /* too large: the input's fault */
    if (!text) {
        diag(d, NULL, "%s%s", why == too_large ? "" : "cannot read: ", why);
        return NULL;
    }
    arena_hold(a, text, ir_free);
    Module *m = fe_parse(a, path, text, len, d);
    arena_release(a, text);
    return m;
}
