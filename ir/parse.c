/* ir/parse.c: .kir text back to a module (grammar: KIR.md): the graph
 * section and the entry point. Lines and tokens are parse_lex.c's, the
 * program section parse_prog.c's, its expressions parse_expr.c's.
 *
 * Contract: ir_parse(a, file, text, d) returns a module that prints as
 * the text it read (print(parse(t)) == t for every printed t), or NULL
 * after recording the first problem in d as "FILE: line N: message".
 * No input crashes it or anything after it: what the rest of kiln takes
 * for granted of a module (ir_verify_graph, ir_verify_prog, what the
 * builders, the printers and codegen assume) is checked here and reported.
 * 1. Lines before `graph` that are blank or start with '#' are skipped.
 * 2. The graph: leaves; op nodes with their attributes by the op's schema,
 *    then the op's shape inference, whose type must be the one written;
 *    outputs; notes. Every node's `where` is "line N".
 * 3. The program, when a `prog` line follows (parse_prog.c).
 * 4. Nothing else may follow. */
#include "parse.h"

#include <string.h>

#define MAX_MODEL_NAME 64         /* as the frontend's FE_MAX_MODEL_NAME */

/* ---- the graph section ------------------------------------------------- */

Node *kir_node(Parser *ps)
{
    int id = kir_ref(ps, '%');
    if (id < 0)
        kir_fail(ps, "expected a node (%%N), found %s", kir_found(ps));
    if (id >= ps->m->nnodes)
        kir_fail(ps, "%%%d is not defined above this line", id);
    return ps->m->nodes[id];
}

/* The id of the node this line defines: the next one. */
static void node_id(Parser *ps)
{
    int id = kir_ref(ps, '%');
    if (id < 0)
        kir_fail(ps, "expected a node id %%%d, found %s", ps->m->nnodes, kir_found(ps));
    if (id != ps->m->nnodes)
        kir_fail(ps, "expected %%%d (node ids count up from %%0), found %%%d", ps->m->nnodes,
                 id);
}

/* A node's name: non-empty, at most KILN_MAX_NAME bytes, no control
 * bytes, no other node's. */
static const char *node_name(Parser *ps)
{
    const char *s = kir_string(ps);
    size_t len = strlen(s);
    if (!len || len > KILN_MAX_NAME)
        kir_fail(ps, "a name has 1 to %d bytes, not %zu", KILN_MAX_NAME, len);
    for (const char *q = s; *q; q++)
        if ((unsigned char)*q < 0x20 || *q == 0x7f)
            kir_fail(ps, "a name holds no control characters");
    for (int i = 0; i < ps->m->nnodes; i++)
        if (ps->m->nodes[i]->name && strcmp(ps->m->nodes[i]->name, s) == 0)
            kir_fail(ps, "\"%s\" is already the name of %%%d", s, i);
    return s;
}

static Node *new_node(Parser *ps, OpKind op, Node **in, int nin, const char *name)
{
    Node *n = ir_node_new(ps->m, op, in, nin);
    n->name = name;
    n->where = arena_printf(ps->a, "line %d", ps->lineno);
    return n;
}

/* "random" "(" "seed" "=" INT "," "scale" "=" NUMBER ")" */
static void init_random(Parser *ps, Init *in)
{
    in->kind = INIT_RANDOM;
    kir_expect(ps, "(");
    kir_expect(ps, "seed");
    kir_expect(ps, "=");
    int64_t seed = kir_int(ps, "a seed");
    if (seed < 0)
        kir_fail(ps, "a seed is >= 0");
    in->seed = (uint64_t)seed;
    kir_expect(ps, ",");
    kir_expect(ps, "scale");
    kir_expect(ps, "=");
    in->scale = kir_float(ps, "a number");
    kir_expect(ps, ")");
}

/* "data" "(" NUMBER {"," NUMBER} ")": one number per element of n */
static void init_data(Parser *ps, Node *n)
{
    int64_t want = node_count(n);
    int got = 0, cap = 0;
    n->init.kind = INIT_DATA;
    kir_expect(ps, "(");
    do {
        if (got == want)
            kir_fail(ps, "init data has more than the %lld elements of the weight",
                     (long long)want);
        ARR_PUSH(ps->a, n->init.data, got, cap, (float)kir_float(ps, "a number"));
    } while (kir_accept(ps, ","));
    kir_expect(ps, ")");
    if (got != want)
        kir_fail(ps, "init data has %d elements; the weight has %lld", got, (long long)want);
}

/* init = "init" ("fill" "(" NUMBER ")" | random | data) */
static void init(Parser *ps, Node *n)
{
    if (kir_accept(ps, "random")) {
        init_random(ps, &n->init);
    } else if (kir_accept(ps, "data")) {
        init_data(ps, n);
    } else if (kir_accept(ps, "fill")) {
        n->init.kind = INIT_FILL;
        kir_expect(ps, "(");
        n->init.fill = (float)kir_float(ps, "a number"); /* as the frontend keeps it */
        kir_expect(ps, ")");
    } else {
        kir_fail(ps, "expected fill, random or data, found %s", kir_found(ps));
    }
}

/* "tensors" "=" "[" STRING {"," STRING} "]" ")": a weight's tensor of
 * the weights file on each rank, at least 2. */
static void shard_tensors(Parser *ps, Node *n)
{
    int cap = 0;
    if (n->op != OP_WEIGHT)
        kir_fail(ps, "only a weight reads a tensor per rank");
    kir_expect(ps, "=");
    kir_expect(ps, "[");
    do {
        const char *s = kir_string(ps);
        if (!*s)
            kir_fail(ps, "a tensor's name is not empty");
        ARR_PUSH(ps->a, n->shard.tensors, n->shard.ranks, cap, s);
    } while (kir_accept(ps, ","));
    kir_expect(ps, "]");
    kir_expect(ps, ")");
    if (n->shard.ranks < 2)
        kir_fail(ps, "shard(tensors=...) names a tensor for each of 2 ranks or more");
    n->shard.axis = -1;
}

/* shard = "shard" "(" ("axis" "=" INT "," "of" "=" INT "," "ranks" "=" INT ")"
 * | tensors): axis in range, ranks >= 2, the leaf's dim there of / ranks. */
static void shard(Parser *ps, Node *n)
{
    int64_t v[3];
    static const char *const key[] = {"axis", "of", "ranks"};
    kir_expect(ps, "(");
    if (kir_accept(ps, "tensors")) {
        shard_tensors(ps, n);
        return;
    }
    for (int i = 0; i < 3; i++) {
        if (i)
            kir_expect(ps, ",");
        kir_expect(ps, key[i]);
        kir_expect(ps, "=");
        v[i] = kir_int(ps, "an integer");
    }
    kir_expect(ps, ")");
    if (v[0] < 0 || v[0] >= n->rank || v[2] < 2 || v[2] > 1 << 20 ||
        n->dims[v[0]] * v[2] != v[1])
        kir_fail(ps, "shard(axis=%lld, of=%lld, ranks=%lld) does not fit the %s's shape",
                 (long long)v[0], (long long)v[1], (long long)v[2], op_table[n->op].name);
    n->shard = (Shard){(int)v[2], (int)v[0], v[1], NULL};
}

/* leaf = ("input" | "weight" | "state") %N STRING ":" type [shard] [init] NL */
static void leaf(Parser *ps, OpKind op)
{
    node_id(ps);
    const char *name = node_name(ps);
    kir_expect(ps, ":");
    Node *n = new_node(ps, op, NULL, 0, name);
    kir_type(ps, &n->dtype, &n->rank, n->dims);
    if (op != OP_INPUT && n->dtype != DT_F32)
        kir_fail(ps, "a %s is f32", op_table[op].name);
    if (kir_accept(ps, "shard")) {
        if (op == OP_INPUT)
            kir_fail(ps, "only weights and states take a shard");
        shard(ps, n);
    }
    if (kir_accept(ps, "init")) {
        if (op != OP_WEIGHT)
            kir_fail(ps, "only weights take an init");
        init(ps, n);
    }
    kir_end(ps);
}

/* "true" | "false" */
static int boolean(Parser *ps)
{
    if (kir_accept(ps, "true"))
        return 1;
    if (!kir_accept(ps, "false"))
        kir_fail(ps, "expected true or false, found %s", kir_found(ps));
    return 0;
}

/* CHOICE: one of the schema's "|"-separated names; its index */
static int choice(Parser *ps, const AttrSpec *s)
{
    const char *name = kir_name(ps), *p = s->choices;
    for (int k = 0; name; k++) {
        size_t len = strcspn(p, "|");
        if (strlen(name) == len && strncmp(p, name, len) == 0)
            return k;
        if (!p[len])
            break;
        p += len + 1;
    }
    kir_fail(ps, "%s is one of %s, not %s", s->name, s->choices,
             name ? arena_printf(ps->a, "'%s'", name) : kir_found(ps));
}

/* "[" [INT {"," INT}] "]" */
static void int_list(Parser *ps, AttrVal *v)
{
    int cap = 0;
    kir_expect(ps, "[");
    if (kir_accept(ps, "]"))
        return;
    do
        ARR_PUSH(ps->a, v->ints, v->nints, cap, kir_int(ps, "an integer"));
    while (kir_accept(ps, ","));
    kir_expect(ps, "]");
}

/* attr = NAME "=" (INT | NUMBER | "true" | "false" | CHOICE | "[" ints "]") */
static void attr(Parser *ps, Node *n, int *seen)
{
    const char *key = kir_name(ps);
    if (!key)
        kir_fail(ps, "expected an attribute name, found %s", kir_found(ps));
    int i = attr_index(n->op, key);
    if (i < 0)
        kir_fail(ps, "%s has no attribute '%s'", op_table[n->op].name, key);
    if (seen[i]++)
        kir_fail(ps, "attribute '%s' is given twice", key);
    kir_expect(ps, "=");
    const AttrSpec *s = &op_table[n->op].attrs[i];
    AttrVal *v = &n->attrs.v[i];
    switch (s->kind) {
    case AT_INT: v->i = kir_int(ps, "an integer"); break;
    case AT_FLOAT: v->f = kir_float(ps, "a number"); break;
    case AT_BOOL: v->i = boolean(ps); break;
    case AT_ENUM: v->i = choice(ps, s); break;
    case AT_INTS: int_list(ps, v); break;
    }
}

/* Whether an attribute differs from its default: what `given` means for
 * a parsed node (the printer writes every attribute). */
static int differs(const AttrSpec *s, const AttrVal *v)
{
    switch (s->kind) {
    case AT_FLOAT: return v->f != s->f;
    case AT_INTS: return v->nints > 0;
    default: return v->i != s->i;
    }
}

/* attrs = "{" [attr {"," attr}] "}" */
static void attrs(Parser *ps, Node *n)
{
    int seen[KILN_MAX_ATTRS] = {0};
    if (kir_accept(ps, "{") && !kir_accept(ps, "}")) {
        do
            attr(ps, n, seen);
        while (kir_accept(ps, ","));
        kir_expect(ps, "}");
    }
    const AttrSpec *s = op_table[n->op].attrs;
    for (int i = 0; s[i].name; i++) {
        if (s[i].required && !s[i].internal && !seen[i])
            kir_fail(ps, "%s needs attribute '%s'", op_table[n->op].name, s[i].name);
        n->attrs.v[i].given = differs(&s[i], &n->attrs.v[i]);
    }
}

/* OP %N {"," %N} [attrs], within the op's arity */
static Node *op_node(Parser *ps, const char *name)
{
    const char *op_name = kir_name(ps);
    int op = op_name ? op_lookup(op_name) : -1;
    if (op < 0)
        kir_fail(ps, "expected an op, found %s",
                 op_name ? arena_printf(ps->a, "'%s'", op_name) : kir_found(ps));
    Node **in = NULL;
    int nin = 0, cap = 0;
    do
        ARR_PUSH(ps->a, in, nin, cap, kir_node(ps));
    while (kir_accept(ps, ","));
    const OpDesc *d = &op_table[op];
    if (nin < d->min_in || nin > d->max_in)
        kir_fail(ps, "%s takes %s operand%s, not %d", d->name,
                 d->min_in == d->max_in ? arena_printf(ps->a, "%d", d->min_in)
                                        : arena_printf(ps->a, "%d to %d", d->min_in, d->max_in),
                 d->max_in == 1 ? "" : "s", nin);
    Node *n = new_node(ps, (OpKind)op, in, nin, name);
    attrs(ps, n);
    return n;
}

static const char *type_str(Parser *ps, DType t, int rank, const int64_t *dims)
{
    return arena_printf(ps->a, "%s%s", dtype_name(t), shape_str(ps->a, rank, dims));
}

/* The op's shape inference must accept n and give the type written. */
static void infer(Parser *ps, Node *n, DType t, int rank, const int64_t *dims)
{
    InferCx cx = {ps->m, ps->d};
    int before = ps->d->n;
    if (op_table[n->op].infer(&cx, n) != 0 || ps->d->n > before) {
        if (ps->d->n == before)
            kir_fail(ps, "%s refuses its operands", op_table[n->op].name);
        ps->d->n = before + 1;        /* the first problem, as ir_parse promises */
        longjmp(ps->fail, 1);
    }
    if (n->dtype != t || n->rank != rank ||
        memcmp(n->dims, dims, sizeof *dims * (size_t)rank) != 0)
        kir_fail(ps, "type %s does not match %s inferred from the operands",
                 type_str(ps, t, rank, dims), type_str(ps, n->dtype, n->rank, n->dims));
}

/* node = %N [STRING] "=" ("const" NUMBER | OP %N {"," %N} [attrs]) ":" type NL */
static void node(Parser *ps)
{
    node_id(ps);
    const char *name = kir_peek(ps, '"') ? node_name(ps) : NULL;
    kir_expect(ps, "=");
    Node *n;
    if (kir_accept(ps, "const")) {
        n = new_node(ps, OP_CONST, NULL, 0, name);
        n->value = kir_float(ps, "a number");
    } else {
        n = op_node(ps, name);
    }
    DType t;
    int rank;
    int64_t dims[KILN_MAX_RANK];
    kir_expect(ps, ":");
    kir_type(ps, &t, &rank, dims);
    kir_end(ps);
    if (n->op != OP_CONST)
        infer(ps, n, t, rank, dims);
    else if (t != DT_F32)
        kir_fail(ps, "a const is f32");
    n->dtype = t;
    n->rank = rank;
    memcpy(n->dims, dims, sizeof *dims * (size_t)rank);
}

/* output = "output" %N NL */
static void output(Parser *ps)
{
    Node *n = kir_node(ps);
    if (!n->name)
        kir_fail(ps, "output %%%d has no name", n->id);
    kir_end(ps);
    ARR_PUSH(ps->a, ps->m->outputs, ps->m->noutputs, ps->noutputs_cap, n);
}

/* leaf | node | output, after the indentation */
static void graph_item(Parser *ps)
{
    static const OpKind leaves[] = {OP_INPUT, OP_WEIGHT, OP_STATE};
    for (int i = 0; i < 3; i++)
        if (kir_accept(ps, op_table[leaves[i]].name)) {
            leaf(ps, leaves[i]);
            return;
        }
    if (kir_accept(ps, "output"))
        output(ps);
    else
        node(ps);
}

/* graph = "graph" NAME NL {note | leaf | node | output} */
static void graph(Parser *ps, const char *file)
{
    kir_indent(ps, 0);
    if (!kir_accept(ps, "graph"))
        kir_fail(ps, "expected 'graph', found %s", kir_found(ps));
    const char *name = kir_name(ps);
    if (!name)
        kir_fail(ps, "expected the model's name (a C identifier), found %s", kir_found(ps));
    if (strlen(name) > MAX_MODEL_NAME)
        kir_fail(ps, "the model's name has more than %d characters", MAX_MODEL_NAME);
    kir_end(ps);
    ps->m = ir_module_new(ps->a, file, name);
    for (kir_next_line(ps); !ps->eof; kir_next_line(ps)) {
        if (kir_is_note(ps)) {
            ir_note(ps->a, &ps->m->notes, "%s", kir_note_text(ps));
            continue;
        }
        if (ps->indent == 0)
            break;
        kir_indent(ps, 2);
        graph_item(ps);
    }
    ir_module_renumber(ps->m);
}

Module *ir_parse(Arena *a, const char *file, const char *text, Diags *d)
{
    Parser ps = {.a = a, .d = d, .next = text};
    if (setjmp(ps.fail))
        return NULL;
    kir_next_line(&ps);
    while (kir_is_note(&ps))
        kir_next_line(&ps);
    graph(&ps, file);
    if (!ps.eof)
        kir_prog(&ps);
    if (!ps.eof)
        kir_fail(&ps, "expected the end of the file, found %s", kir_found(&ps));
    return ps.m;
}
