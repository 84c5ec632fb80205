/* frontend/attrs.c: a node's "attrs" against its op's attribute schema
 * (op_table[op].attrs).
 *
 * Contract: every key of "attrs" must name an attribute of the op that is
 * not internal (internal ones, like topk's result, are kiln's to set); its
 * value must have the attribute's kind; every required attribute must be
 * given. Values land in n->attrs (which the caller set to the defaults)
 * with .given = 1. Range checks (an axis within the rank, k > 0) are the
 * op's infer function's: they need the operands' shapes. */
#include "fe.h"

#include <string.h>

static int boolean(FeCx *cx, const AttrSpec *s, json_t *j, const char *where, AttrVal *v)
{
    if (!json_is_boolean(j))
        return fe_want(cx, where, j, arena_printf(cx->a, "%s must be true or false", s->name));
    v->i = json_is_true(j);
    return 0;
}

static int number(FeCx *cx, const AttrSpec *s, json_t *j, const char *where, AttrVal *v)
{
    if (!json_is_number(j))
        return fe_want(cx, where, j, arena_printf(cx->a, "%s must be a number", s->name));
    v->f = json_number_value(j);
    return 0;
}

/* "half|interleaved" as "half, interleaved" */
static const char *choices(FeCx *cx, const char *list)
{
    char *s = arena_alloc(cx->a, 2 * strlen(list) + 1), *q = s;
    for (const char *p = list; *p; p++)
        q += *p == '|' ? sprintf(q, ", ") : sprintf(q, "%c", *p);
    return s;
}

/* enum := a string among the schema's "|"-separated choices; the value is
 * the choice's index */
static int choice(FeCx *cx, const AttrSpec *s, json_t *j, const char *where, AttrVal *v)
{
    const char *str = json_string_value(j);   /* NULL unless a string */
    const char *p = s->choices;
    for (int k = 0; str; k++) {
        size_t len = strcspn(p, "|");
        if (strlen(str) == len && strncmp(p, str, len) == 0) {
            v->i = k;
            return 0;
        }
        if (!p[len])
            break;
        p += len + 1;
    }
    diag(cx->d, where, "%s must be one of %s; got %s", s->name, choices(cx, s->choices),
         fe_got(cx, j));
    return -1;
}

/* ints := [integer, ...]   in the arena */
static int ints(FeCx *cx, const AttrSpec *s, json_t *j, const char *where, AttrVal *v)
{
    if (!json_is_array(j))
        return fe_want(cx, where, j,
                       arena_printf(cx->a, "%s must be an array of integers", s->name));
    size_t n = json_array_size(j);
    v->ints = arena_alloc(cx->a, sizeof *v->ints * (n ? n : 1));
    v->nints = (int)n;
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_array_get(j, i);
        if (json_is_integer(e))
            v->ints[i] = json_integer_value(e);
        else
            bad = fe_want(cx, fe_at(cx, where, i), e,
                          arena_printf(cx->a, "%s[%zu] must be an integer", s->name, i));
    }
    return bad;
}

static int value(FeCx *cx, const AttrSpec *s, json_t *j, const char *where, AttrVal *v)
{
    switch (s->kind) {
    case AT_INT: return fe_int(cx, j, where, s->name, &v->i);
    case AT_FLOAT: return number(cx, s, j, where, v);
    case AT_BOOL: return boolean(cx, s, j, where, v);
    case AT_ENUM: return choice(cx, s, j, where, v);
    case AT_INTS: return ints(cx, s, j, where, v);
    }
    KILN_BUG("attribute kind %d", (int)s->kind);
}

/* One key of "attrs" (at where) with its value. */
static int attr(FeCx *cx, Node *n, const char *key, json_t *j, const char *where)
{
    int i = attr_index(n->op, key);
    const AttrSpec *s = i >= 0 ? &op_table[n->op].attrs[i] : NULL;
    if (!s || s->internal) {
        diag(cx->d, where, "unknown attribute '%s' for %s", fe_quote(cx, key),
             op_table[n->op].name);
        return -1;
    }
    n->attrs.v[i].given = 1;
    return value(cx, s, j, fe_dot(cx, where, s->name), &n->attrs.v[i]);
}

static int required(FeCx *cx, const Node *n, const char *where)
{
    const AttrSpec *s = op_table[n->op].attrs;
    int bad = 0;
    for (int i = 0; s[i].name; i++)
        if (s[i].required && !s[i].internal && !n->attrs.v[i].given) {
            diag(cx->d, where, "%s needs attribute '%s'", op_table[n->op].name, s[i].name);
            bad = -1;
        }
    return bad;
}

/* attrs := {key: value, ...}   each key in the op's schema, not internal;
 * value by the attribute's kind: INT a JSON integer, FLOAT a JSON number,
 * BOOL true | false, ENUM a string among the choices, INTS [integer, ...] */
int fe_attrs(FeCx *cx, json_t *j, const char *where, Node *n)
{
    const char *aw = fe_dot(cx, where, "attrs");
    if (j && !json_is_object(j))
        return fe_want(cx, aw, j, "attrs must be an object");
    int bad = 0;
    for (void *it = j ? json_object_iter(j) : NULL; it; it = json_object_iter_next(j, it))
        bad |= attr(cx, n, json_object_iter_key(it), json_object_iter_value(it), aw);
    return bad | required(cx, n, aw);
}
