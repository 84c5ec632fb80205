/* frontend/decl.c: tensor declarations: the inputs, weights and state
 * sections of a model file.
 *
 * Contract: each valid declaration becomes one leaf node (OP_INPUT,
 * OP_WEIGHT or OP_STATE) named after it, where = "inputs[0]" and so on,
 * appended in file order. Shapes have rank 0 to KILN_MAX_RANK, every
 * dimension at least 1 and at most KILN_MAX_ELEMS elements in all
 * (checked without overflow). Weights and state are f32: weights files
 * (safetensors) hold float tensors and caches are f32. A weight's "init"
 * lands in Node.init, its inline data as f32 in the arena. A declaration
 * with a problem defines its name as failed, so its users stay quiet. */
#include "fe.h"

#include <string.h>

/* dim := a JSON integer >= 1 */
static int dim(FeCx *cx, json_t *j, const char *where, int64_t *d)
{
    if (fe_int(cx, j, where, "dimension", d))
        return -1;
    if (*d >= 1)
        return 0;
    diag(cx->d, where, "dimension must be at least 1, got %lld", (long long)*d);
    return -1;
}

static int count_ok(FeCx *cx, const char *where, const Node *t)
{
    if (shape_fits(t->rank, t->dims))
        return 0;
    diag(cx->d, where, "shape %s has more than 2^40 elements", shape_str(cx->a, t->rank, t->dims));
    return -1;
}

/* shape := [dim, ...]   0 to KILN_MAX_RANK of them; [] is a scalar */
static int shape(FeCx *cx, json_t *j, const char *where, Node *t)
{
    if (!j)
        return -1;                    /* missing: reported by fe_get */
    if (!json_is_array(j))
        return fe_want(cx, where, j, "shape must be an array of dimensions");
    size_t rank = json_array_size(j);
    if (rank > KILN_MAX_RANK) {
        diag(cx->d, where, "shape has rank %zu, more than %d", rank, KILN_MAX_RANK);
        return -1;
    }
    int bad = 0;
    for (size_t i = 0; i < rank; i++)
        bad |= dim(cx, json_array_get(j, i), fe_at(cx, where, i), &t->dims[i]);
    t->rank = (int)rank;
    return bad ? -1 : count_ok(cx, where, t);
}

/* dtype := "f32" | "i32"   (absent: f32; weights and state: f32 only) */
static int dtype(FeCx *cx, json_t *j, const char *where, OpKind op, DType *t)
{
    const char *s = json_string_value(j);   /* NULL unless a string */
    *t = DT_F32;
    if (!j || (s && strcmp(s, "f32") == 0))
        return 0;
    if (!s || strcmp(s, "i32") != 0)
        return fe_want(cx, where, j, "dtype must be \"f32\" or \"i32\"");
    *t = DT_I32;
    if (op == OP_INPUT)
        return 0;
    diag(cx->d, where, "%s must be f32, got \"i32\"",
         op == OP_WEIGHT ? "a weight" : "state");
    return -1;
}

/* seed := a JSON integer in [0, 2^53] (exact in every JSON reader) */
static int seed(FeCx *cx, json_t *j, const char *where, uint64_t *seed)
{
    int64_t s;
    if (fe_int(cx, j, where, "seed", &s))
        return -1;
    if (s < 0 || s > (INT64_C(1) << 53)) {
        diag(cx->d, where, "seed must be in [0, 2^53], got %lld", (long long)s);
        return -1;
    }
    *seed = (uint64_t)s;
    return 0;
}

/* scale := a JSON number >= 0 that fits in f32 */
static int scale(FeCx *cx, json_t *j, const char *where, double *scale)
{
    if (fe_f32(cx, j, where, "scale", scale))
        return -1;
    if (*scale >= 0)
        return 0;
    diag(cx->d, where, "scale must be at least 0, got %s", fe_got(cx, j));
    return -1;
}

/* random := {"seed": seed, "scale": scale}   both required */
static int random_init(FeCx *cx, json_t *j, const char *where, Init *in)
{
    static const char *const keys[] = {"seed", "scale", NULL};
    if (!json_is_object(j))
        return fe_want(cx, where, j, "random must be an object");
    int bad = fe_keys(cx, j, where, keys) ? -1 : 0;
    json_t *js = fe_get(cx, j, where, "seed", 1);
    json_t *jc = fe_get(cx, j, where, "scale", 1);
    if (!js || seed(cx, js, fe_dot(cx, where, "seed"), &in->seed))
        bad = -1;
    if (!jc || scale(cx, jc, fe_dot(cx, where, "scale"), &in->scale))
        bad = -1;
    in->kind = INIT_RANDOM;
    return bad;
}

/* data := [number, ...]   every element, row-major; each fits in f32.
 * Only the first bad element is reported: the rest are usually alike. */
static int data_init(FeCx *cx, json_t *j, const char *where, const Node *t, Init *in)
{
    if (!json_is_array(j))
        return fe_want(cx, where, j, "data must be an array of numbers");
    size_t len = json_array_size(j);
    if (t && len != (size_t)node_count(t)) {
        diag(cx->d, where, "data has %zu elements; shape %s has %lld", len,
             shape_str(cx->a, t->rank, t->dims), (long long)node_count(t));
        return -1;
    }
    in->kind = INIT_DATA;
    in->data = arena_alloc(cx->a, sizeof *in->data * (len ? len : 1));
    for (size_t i = 0; i < len; i++) {
        json_t *e = json_array_get(j, i);
        double v;
        if (!fe_is_f32(e))
            return fe_f32(cx, e, fe_at(cx, where, i), "element", &v);
        in->data[i] = (float)json_number_value(e);
    }
    return 0;
}

/* init := {"fill": number} | {"random": random} | {"data": data}
 * t is the weight's shape, NULL when the shape itself is bad. */
static int init(FeCx *cx, json_t *j, const char *where, const Node *t, Init *in)
{
    static const char *const kinds[] = {"fill", "random", "data", NULL};
    if (!json_is_object(j))
        return fe_want(cx, where, j, "init must be an object");
    int bad = fe_keys(cx, j, where, kinds) ? -1 : 0, given = 0;
    for (int i = 0; kinds[i]; i++)
        given += json_object_get(j, kinds[i]) != NULL;
    if (given != 1) {
        if (given || !bad)            /* not when a misspelt kind said it */
            diag(cx->d, where, "init takes exactly one of fill, random, data; got %d",
                 given);
        return -1;
    }
    json_t *v;
    if ((v = json_object_get(j, "random")))
        return random_init(cx, v, fe_dot(cx, where, "random"), in) | bad;
    if ((v = json_object_get(j, "data")))
        return data_init(cx, v, fe_dot(cx, where, "data"), t, in) | bad;
    in->kind = INIT_FILL;
    bad |= fe_f32(cx, json_object_get(j, "fill"), fe_dot(cx, where, "fill"), "fill",
                  &in->fill);
    in->fill = (float)in->fill;      /* the value the weight will hold */
    return bad;
}

/* Unknown keys, and "init" outside the weights. */
static void decl_keys(FeCx *cx, json_t *j, const char *where, OpKind op)
{
    static const char *const keys[] = {"name", "shape", "dtype", "init", NULL};
    fe_keys(cx, j, where, keys);
    if (op != OP_WEIGHT && json_object_get(j, "init"))
        diag(cx->d, fe_dot(cx, where, "init"), "only weights take an init");
}

static Node *leaf(FeCx *cx, OpKind op, const Node *t, Sym *s, const char *where)
{
    Node *n = ir_node_new(cx->m, op, NULL, 0);
    n->dtype = t->dtype;
    n->rank = t->rank;
    memcpy(n->dims, t->dims, sizeof n->dims);
    n->init = t->init;
    n->name = s->name;
    n->where = where;
    return n;
}

/* decl := {"name": name, "shape": shape, "dtype": dtype, "init": init}
 *         (init for weights only) */
static void decl(FeCx *cx, json_t *j, const char *where, OpKind op)
{
    if (!json_is_object(j)) {
        fe_want(cx, where, j, "a tensor declaration must be an object");
        return;
    }
    decl_keys(cx, j, where, op);
    Sym *s = fe_name(cx, fe_get(cx, j, where, "name", 1), fe_dot(cx, where, "name"), where);
    Node t = {0};
    int sbad = shape(cx, fe_get(cx, j, where, "shape", 1), fe_dot(cx, where, "shape"), &t);
    int bad = sbad | dtype(cx, json_object_get(j, "dtype"), fe_dot(cx, where, "dtype"), op,
                           &t.dtype);
    json_t *jinit = json_object_get(j, "init");
    if (op == OP_WEIGHT && jinit)
        bad |= init(cx, jinit, fe_dot(cx, where, "init"), sbad ? NULL : &t, &t.init);
    fe_define(s, s && !bad ? leaf(cx, op, &t, s, where) : NULL);
}

/* section := [decl, ...]   (absent: empty) */
void fe_decls(FeCx *cx, json_t *j, const char *section, OpKind op)
{
    if (!j)
        return;
    if (!json_is_array(j)) {
        fe_want(cx, section, j, arena_printf(cx->a, "%s must be an array", section));
        cx->broken = 1;
        return;
    }
    for (size_t i = 0; i < json_array_size(j); i++)
        decl(cx, json_array_get(j, i), fe_at(cx, section, i), op);
}
