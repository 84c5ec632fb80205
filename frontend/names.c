/* frontend/names.c: the names of a model file, one table for all of them.
 *
 * Contract (docs/model-format.md): a name is a non-empty string without control
 * characters (bytes below 0x20 and 0x7f), at most KILN_MAX_NAME bytes,
 * unique across the whole file: inputs, weights, state, node names and
 * topk outputs share one namespace. A name is entered when its element
 * starts (SYM_PENDING) and settled when the element ends, so a node that
 * names itself as an operand reads "not defined above this node". An
 * unknown name is reported at its first use only: one missing
 * declaration gives one line, not one per use.
 *
 * The table: open addressing with linear probing, FNV-1a, at most half
 * full, in the arena. */
#include "fe.h"

#include <string.h>

static uint64_t hash(const char *s)
{
    uint64_t h = UINT64_C(14695981039346656037);
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * UINT64_C(1099511628211);
    return h;
}

/* The slot holding name, or the empty slot where it would go. */
static Sym **slot(FeCx *cx, const char *name)
{
    size_t mask = cx->cap - 1, i = (size_t)hash(name) & mask;
    while (cx->tab[i] && strcmp(cx->tab[i]->name, name) != 0)
        i = (i + 1) & mask;
    return &cx->tab[i];
}

Sym *fe_sym(FeCx *cx, const char *name)
{
    return cx->cap ? *slot(cx, name) : NULL;
}

static void grow(FeCx *cx)
{
    Sym **old = cx->tab;
    size_t oldcap = cx->cap;
    cx->cap = oldcap ? 2 * oldcap : 64;
    cx->tab = arena_alloc(cx->a, sizeof *cx->tab * cx->cap);
    for (size_t i = 0; i < oldcap; i++)
        if (old[i])
            *slot(cx, old[i]->name) = old[i];
}

/* Enters name as defined by def, taking over a SYM_UNDEF entry. */
static Sym *enter(FeCx *cx, const char *name, const char *def)
{
    Sym *s = fe_sym(cx, name);
    if (!s) {
        if (2 * (cx->count + 1) > cx->cap)
            grow(cx);
        s = arena_alloc(cx->a, sizeof *s);
        s->name = arena_strdup(cx->a, name);
        *slot(cx, s->name) = s;
        cx->count++;
    }
    s->where = def;
    s->kind = SYM_PENDING;
    return s;
}

static int has_control(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f)
            return 1;
    return 0;
}

/* name := a JSON string: non-empty, no control bytes, at most
 *         KILN_MAX_NAME bytes, not defined anywhere before.
 * A bad name that is new is still entered, as failed, so its uses do not
 * add "not defined" lines. */
Sym *fe_name(FeCx *cx, json_t *j, const char *where, const char *def)
{
    if (!j)
        return NULL;                  /* missing: reported by fe_get */
    if (!json_is_string(j)) {
        fe_want(cx, where, j, "name must be a string");
        return NULL;
    }
    const char *s = json_string_value(j);
    size_t len = strlen(s);
    Sym *old = fe_sym(cx, s);
    int taken = old && old->kind != SYM_UNDEF;
    if (len == 0)
        diag(cx->d, where, "name is empty");
    else if (len > KILN_MAX_NAME)
        diag(cx->d, where, "name '%s' is %zu bytes, more than %d",
             fe_quote(cx, s), len, KILN_MAX_NAME);
    else if (has_control(s))
        diag(cx->d, where, "name '%s' has a control character", fe_quote(cx, s));
    else if (taken)
        diag(cx->d, where, "'%s' is already defined at %s", fe_quote(cx, s), old->where);
    else
        return enter(cx, s, def);
    if (!taken)                       /* a bad name's uses stay quiet */
        enter(cx, s, def)->kind = SYM_FAILED;
    return NULL;
}

void fe_define(Sym *s, Node *n)
{
    if (!s)
        return;
    s->kind = n ? SYM_VALUE : SYM_FAILED;
    s->n = n;
}

int fe_use(FeCx *cx, const char *name, const char *where, const char *undef,
           Node **n)
{
    Sym *s = fe_sym(cx, name);
    *n = NULL;
    if (!s && cx->broken)
        return 1;                     /* its section could not be read */
    if (!s || s->kind == SYM_PENDING) {
        diag(cx->d, where, "'%s' %s", fe_quote(cx, name), undef);
        if (!s)
            enter(cx, name, NULL)->kind = SYM_UNDEF;
        return -1;
    }
    if (s->kind == SYM_MULTI) {
        diag(cx->d, where, "'%s' names a node with several results; use '%s' or '%s'",
             fe_quote(cx, name), fe_quote(cx, s->alt[0]), fe_quote(cx, s->alt[1]));
        return -1;
    }
    *n = s->n;
    return s->kind == SYM_FAILED || s->kind == SYM_UNDEF;
}
