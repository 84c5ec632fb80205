/* frontend/node.c: the nodes section of a model file.
 *
 * Contract: each node is checked in a fixed order: its keys, its name, its
 * op, its outputs (topk only), its inputs (arity, then each operand), its
 * attributes; only when all of that holds and every operand is a usable
 * value is op_table[op].infer called, which reports its own problems. So
 * an infer function only ever sees a node of the right arity, operands
 * that exist and attributes of the right kinds. A result of more than
 * 2^40 elements (a broadcast, a concat, a batched matmul) is refused after
 * inference, as a declaration of that size is.
 *
 * What becomes of a node: one IR node named by "name", where = "nodes[i]".
 * An operand that is a JSON number becomes an OP_CONST node (f32, rank 0,
 * the value rounded to f32, where = the operand's path) just before its
 * user. A topk with "outputs": [values, indices] becomes two IR nodes with
 * the same operand and attributes and the internal attribute result = 0
 * (values) and 1 (indices), named after the outputs; its own "name", when
 * given, is taken but is not a value. A node that fails defines its names
 * as failed, so its users are skipped without more messages. */
#include "fe.h"

/* A node being read. */
typedef struct {
    const char *where;            /* "nodes[3]" */
    int op;                       /* -1: unknown or missing */
    Sym *name;                    /* its "name", when valid */
    Sym **out;                    /* its "outputs", each NULL when invalid */
    int nout;                     /* entries of "outputs"; 0: absent */
    Node **in;                    /* operands, NULL where one failed */
    int nin;
    Node proto;                   /* op and attributes for the IR node(s) */
    int bad;                      /* a problem was reported here */
    int quiet;                    /* an operand's definition failed */
} Nd;

/* op := the name of an op of the model format (op_lookup) */
static void op(FeCx *cx, Nd *nd, json_t *j)
{
    const char *where = fe_dot(cx, nd->where, "op");
    if (j && !json_is_string(j))
        fe_want(cx, where, j, "op must be a string");
    else if (j && (nd->op = op_lookup(json_string_value(j))) < 0)
        diag(cx->d, where, "unknown op '%s'", fe_quote(cx, json_string_value(j)));
    nd->bad |= nd->op < 0;            /* missing: reported by fe_get */
}

/* outputs := [name, name]   the values and the indices of a topk */
static void results(FeCx *cx, Nd *nd, json_t *j)
{
    const char *where = fe_dot(cx, nd->where, "outputs");
    if (!json_is_array(j)) {
        nd->bad = fe_want(cx, where, j, "outputs must be an array of names");
        return;
    }
    nd->nout = (int)json_array_size(j);
    int topk = nd->op == OP_TOPK || nd->op < 0;   /* unknown op: check as topk */
    if (!topk)
        diag(cx->d, where, "only topk takes outputs; %s has one result", op_table[nd->op].name);
    else if (nd->nout != 2)
        diag(cx->d, where, "topk outputs must be 2 names [values, indices], got %d", nd->nout);
    nd->bad |= !topk || nd->nout != 2;
    nd->out = arena_alloc(cx->a, sizeof *nd->out * (size_t)(nd->nout ? nd->nout : 1));
    for (int k = 0; k < nd->nout; k++) {
        const char *w = fe_at(cx, where, (size_t)k);
        if (!(nd->out[k] = fe_name(cx, json_array_get(j, (size_t)k), w, w)))
            nd->bad = 1;
    }
}

static void arity(FeCx *cx, Nd *nd, const char *where)
{
    const OpDesc *o = &op_table[nd->op];
    if (nd->nin >= o->min_in && nd->nin <= o->max_in)
        return;
    nd->bad = 1;
    if (o->min_in == o->max_in)
        diag(cx->d, where, "%s takes %d input%s, got %d", o->name, o->min_in,
             o->min_in == 1 ? "" : "s", nd->nin);
    else
        diag(cx->d, where, "%s takes %d to %d inputs, got %d", o->name, o->min_in,
             o->max_in, nd->nin);
}

static Node *constant(FeCx *cx, Nd *nd, json_t *j, const char *where)
{
    double v;
    if (fe_f32(cx, j, where, "constant", &v)) {
        nd->bad = 1;
        return NULL;
    }
    Node *n = ir_node_new(cx->m, OP_CONST, NULL, 0);
    n->value = (float)v;
    n->dtype = DT_F32;
    n->where = where;
    return n;
}

/* operand := a name defined above this node | a JSON number */
static Node *operand(FeCx *cx, Nd *nd, json_t *j, const char *where)
{
    if (json_is_number(j))
        return constant(cx, nd, j, where);
    if (!json_is_string(j)) {
        nd->bad = fe_want(cx, where, j, "an input must be a name or a number");
        return NULL;
    }
    Node *n;
    int rc = fe_use(cx, json_string_value(j), where, "is not defined above this node", &n);
    nd->bad |= rc < 0;
    nd->quiet |= rc > 0;
    return n;
}

/* inputs := [operand, ...]   as many as the op takes */
static void operands(FeCx *cx, Nd *nd, json_t *j)
{
    const char *where = fe_dot(cx, nd->where, "inputs");
    if (!j) {
        nd->bad = 1;                  /* missing: reported by fe_get */
        return;
    }
    if (!json_is_array(j)) {
        nd->bad = fe_want(cx, where, j, "inputs must be an array");
        return;
    }
    nd->nin = (int)json_array_size(j);
    if (nd->op >= 0)
        arity(cx, nd, where);
    nd->in = arena_alloc(cx->a, sizeof *nd->in * (size_t)(nd->nin ? nd->nin : 1));
    for (int i = 0; i < nd->nin; i++)
        nd->in[i] = operand(cx, nd, json_array_get(j, (size_t)i), fe_at(cx, where, (size_t)i));
}

/* The IR node for result r (topk: 0 values, 1 indices), shape inferred;
 * NULL when inference failed. */
static Node *make(FeCx *cx, Nd *nd, int r)
{
    Node *n = ir_node_new(cx->m, nd->proto.op, nd->in, nd->nin);
    n->attrs = nd->proto.attrs;
    n->where = nd->where;
    Sym *s = nd->nout ? nd->out[r] : nd->name;
    n->name = s ? s->name : NULL;
    if (n->op == OP_TOPK)
        ((AttrVal *)attr_v(n, "result"))->i = r;   /* internal: kiln's to set */
    InferCx icx = {cx->m, cx->d};
    int before = cx->d->n;
    if (op_table[n->op].infer(&icx, n) != 0 || cx->d->n > before)
        return NULL;
    if (!shape_fits(n->rank, n->dims)) {  /* e.g. [2^40, 1] + [1, 2^40] */
        diag(cx->d, nd->where, "%s: the result %s would have more than 2^40 elements",
             op_table[n->op].name, shape_str(cx->a, n->rank, n->dims));
        return NULL;
    }
    return n;
}

/* Builds and infers the node unless something failed, then settles its
 * names. The indices node is only inferred when the values node was, so a
 * topk's problem is reported once. */
static void finish(FeCx *cx, Nd *nd)
{
    Node *res[2] = {NULL, NULL};
    if (!nd->bad && !nd->quiet) {
        res[0] = make(cx, nd, 0);
        if (res[0] && nd->nout == 2)
            res[1] = make(cx, nd, 1);
    }
    for (int k = 0; k < nd->nout; k++)
        fe_define(nd->out[k], k < 2 ? res[k] : NULL);
    if (!nd->name)
        return;
    if (nd->op == OP_TOPK && nd->nout == 2 && nd->out[0] && nd->out[1]) {
        nd->name->kind = SYM_MULTI;
        nd->name->alt[0] = nd->out[0]->name;
        nd->name->alt[1] = nd->out[1]->name;
    } else {
        fe_define(nd->name, nd->nout ? NULL : res[0]);
    }
}

/* node := {"name": name, "op": op, "inputs": inputs, "attrs": attrs,
 *          "outputs": outputs}   name required unless outputs is given */
static void node(FeCx *cx, json_t *j, const char *where)
{
    static const char *const keys[] = {"name", "op", "inputs", "attrs", "outputs", NULL};
    if (!json_is_object(j)) {
        fe_want(cx, where, j, "a node must be an object");
        return;
    }
    Nd nd = {.where = where, .op = -1};
    fe_keys(cx, j, where, keys);
    json_t *outs = json_object_get(j, "outputs");
    nd.name = fe_name(cx, fe_get(cx, j, where, "name", !outs), fe_dot(cx, where, "name"), where);
    op(cx, &nd, fe_get(cx, j, where, "op", 1));
    if (outs)
        results(cx, &nd, outs);
    operands(cx, &nd, fe_get(cx, j, where, "inputs", 1));
    if (nd.op >= 0) {
        nd.proto.op = (OpKind)nd.op;
        attrs_default(&nd.proto);
        nd.bad |= fe_attrs(cx, json_object_get(j, "attrs"), where, &nd.proto) != 0;
    }
    finish(cx, &nd);
}

/* nodes := [node, ...] */
void fe_nodes(FeCx *cx, json_t *j)
{
    if (!j) {
        cx->broken = 1;               /* missing: reported by fe_get */
        return;
    }
    if (!json_is_array(j)) {
        fe_want(cx, "nodes", j, "nodes must be an array");
        cx->broken = 1;
        return;
    }
    for (size_t i = 0; i < json_array_size(j); i++)
        node(cx, json_array_get(j, i), fe_at(cx, "nodes", i));
}
