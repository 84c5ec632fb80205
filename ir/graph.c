/* ir/graph.c: the graph IR: module, nodes, printing, verification. */
#include "ir.h"

#include <stdlib.h>
#include <string.h>

Module *ir_module_new(Arena *a, const char *file, const char *name)
{
    Module *m = arena_alloc(a, sizeof *m);
    m->a = a;
    m->file = file;
    m->name = name;
    return m;
}

Node *ir_node_new(Module *m, OpKind op, Node **in, int nin)
{
    Node *n = arena_alloc(m->a, sizeof *n);
    n->op = op;
    n->id = m->nnodes;
    n->nin = nin;
    n->in = nin ? arena_dup(m->a, in, sizeof *in * (size_t)nin) : NULL;
    n->index = -1;
    attrs_default(n);
    ARR_PUSH(m->a, m->nodes, m->nnodes, m->capnodes, n);
    return n;
}

static Node **collect(Module *m, OpKind op, int *count)
{
    int c = 0;
    for (int i = 0; i < m->nnodes; i++)
        c += m->nodes[i]->op == op;
    Node **v = arena_alloc(m->a, sizeof *v * (size_t)(c ? c : 1));
    c = 0;
    for (int i = 0; i < m->nnodes; i++)
        if (m->nodes[i]->op == op) {
            m->nodes[i]->index = c;
            v[c++] = m->nodes[i];
        }
    *count = c;
    return v;
}

void ir_module_renumber(Module *m)
{
    for (int i = 0; i < m->nnodes; i++)
        m->nodes[i]->id = i;
    m->inputs = collect(m, OP_INPUT, &m->ninputs);
    m->weights = collect(m, OP_WEIGHT, &m->nweights);
    m->states = collect(m, OP_STATE, &m->nstates);
}

int64_t node_count(const Node *n) { return shape_count(n->rank, n->dims); }

size_t node_bytes(const Node *n) { return (size_t)node_count(n) * 4; }

/* ---- printing (.kir, KIR.md) ---------------------------------------- */

/* A name as a quoted string: " and \ escaped, bytes below 0x20 as \xNN. */
void ir_print_quoted(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p < 0x20 || *p == 0x7f)
            fprintf(f, "\\x%02x", *p);
        else
            fputc(*p, f);
    }
    fputc('"', f);
}

static void print_type(FILE *f, const Node *n)
{
    fprintf(f, "%s[", dtype_name(n->dtype));
    for (int i = 0; i < n->rank; i++)
        fprintf(f, "%s%lld", i ? "," : "", (long long)n->dims[i]);
    fputc(']', f);
}

static void print_choice(FILE *f, const char *choices, int64_t k)
{
    const char *p = choices;
    for (int64_t i = 0; i < k && p; i++) {
        p = strchr(p, '|');
        if (p)
            p++;
    }
    if (!p)
        KILN_BUG("enum choice %lld out of range", (long long)k);
    fprintf(f, "%.*s", (int)strcspn(p, "|"), p);
}

/* A double the model gave (a FLOAT attribute, a random init's scale): %.9g
 * as f32 values print, with more digits only when needed to read back the
 * same double, so that a .kir file compiles to the same C as its model. */
static void print_double(FILE *f, double v)
{
    char buf[32];
    for (int digits = 9; digits <= 17; digits++) {
        snprintf(buf, sizeof buf, "%.*g", digits, v);
        if (strtod(buf, NULL) == v)
            break;
    }
    fputs(buf, f);
}

static void print_attrs(FILE *f, const Node *n)
{
    const AttrSpec *s = op_table[n->op].attrs;
    if (!s[0].name)
        return;
    int quiet = 1, shown = 0;   /* the quiet attributes all hold their defaults */
    for (int i = 0; s[i].name; i++) {
        quiet &= !s[i].quiet || (n->attrs.v[i].i == s[i].i && n->attrs.v[i].f == s[i].f);
        shown += !s[i].quiet;
    }
    if (!shown && quiet)        /* only quiet ones (embedding's ranks), at their defaults */
        return;
    fputs(" {", f);
    for (int i = 0, first = 1; s[i].name; i++) {
        const AttrVal *v = &n->attrs.v[i];
        if (s[i].quiet && quiet)
            continue;
        fprintf(f, "%s%s=", first ? "" : ", ", s[i].name);
        first = 0;
        switch (s[i].kind) {
        case AT_INT: fprintf(f, "%lld", (long long)v->i); break;
        case AT_FLOAT: print_double(f, v->f); break;
        case AT_BOOL: fputs(v->i ? "true" : "false", f); break;
        case AT_ENUM: print_choice(f, s[i].choices, v->i); break;
        case AT_INTS:
            fputc('[', f);
            for (int j = 0; j < v->nints; j++)
                fprintf(f, "%s%lld", j ? "," : "", (long long)v->ints[j]);
            fputc(']', f);
            break;
        }
    }
    fputc('}', f);
}

static void print_init(FILE *f, const Node *n)
{
    switch (n->init.kind) {
    case INIT_NONE: break;
    case INIT_FILL: fprintf(f, " init fill(%.9g)", n->init.fill); break;
    case INIT_RANDOM:
        fprintf(f, " init random(seed=%llu, scale=", (unsigned long long)n->init.seed);
        print_double(f, n->init.scale);
        fputc(')', f);
        break;
    case INIT_DATA:
        fputs(" init data(", f);
        for (int64_t i = 0; i < node_count(n); i++)
            fprintf(f, "%s%.9g", i ? ", " : "", (double)n->init.data[i]);
        fputc(')', f);
        break;
    }
}

static void print_node(FILE *f, const Node *n)
{
    static const char *leaf_kw[] = {[OP_INPUT] = "input ", [OP_WEIGHT] = "weight",
                                    [OP_STATE] = "state "};
    fputs("  ", f);
    if (n->op == OP_INPUT || n->op == OP_WEIGHT || n->op == OP_STATE) {
        fprintf(f, "%s %%%d ", leaf_kw[n->op], n->id);
        ir_print_quoted(f, n->name);
        fputs(" : ", f);
        print_type(f, n);
        if (n->shard.tensors) {
            fputs(" shard(tensors=[", f);
            for (int r = 0; r < n->shard.ranks; r++) {
                fputs(r ? ", " : "", f);
                ir_print_quoted(f, n->shard.tensors[r]);
            }
            fputs("])", f);
        } else if (n->shard.ranks) {
            fprintf(f, " shard(axis=%d, of=%lld, ranks=%d)", n->shard.axis,
                    (long long)n->shard.of, n->shard.ranks);
        }
        print_init(f, n);
        fputc('\n', f);
        return;
    }
    fprintf(f, "%%%d ", n->id);
    if (n->name) {
        ir_print_quoted(f, n->name);
        fputc(' ', f);
    }
    fprintf(f, "= %s", op_table[n->op].name);
    if (n->op == OP_CONST)
        fprintf(f, " %.9g", n->value);
    for (int i = 0; i < n->nin; i++)
        fprintf(f, "%s %%%d", i ? "," : "", n->in[i]->id);
    print_attrs(f, n);
    fputs(" : ", f);
    print_type(f, n);
    fputc('\n', f);
}

void ir_print_graph(FILE *f, const Module *m)
{
    fprintf(f, "graph %s\n", m->name);
    ir_print_notes(f, &m->notes, 2);
    for (int i = 0; i < m->nnodes; i++)
        print_node(f, m->nodes[i]);
    for (int i = 0; i < m->noutputs; i++)
        fprintf(f, "  output %%%d\n", m->outputs[i]->id);
}

/* ---- verification ---------------------------------------------------- */

void ir_verify_graph(Module *m)
{
    Diags d;
    diag_init(&d, m->a, m->file);
    InferCx cx = {m, &d};
    for (int i = 0; i < m->nnodes; i++) {
        Node *n = m->nodes[i];
        if (n->id != i)
            KILN_BUG("node %d has id %d", i, n->id);
        for (int j = 0; j < n->nin; j++)
            if (n->in[j]->id >= i)
                KILN_BUG("%%%d uses %%%d defined after it", i, n->in[j]->id);
        if (OP_IS_LEAF(n->op))
            continue;
        Node copy = *n;
        if (op_table[n->op].infer(&cx, &copy) != 0 || d.n)
            KILN_BUG("%%%d (%s) no longer infers", i, op_table[n->op].name);
        if (copy.dtype != n->dtype || copy.rank != n->rank ||
            memcmp(copy.dims, n->dims, sizeof n->dims[0] * (size_t)n->rank))
            KILN_BUG("%%%d (%s) has a stale shape", i, op_table[n->op].name);
    }
    for (int i = 0; i < m->noutputs; i++)
        if (m->outputs[i]->id >= m->nnodes || m->nodes[m->outputs[i]->id] != m->outputs[i])
            KILN_BUG("output %d is not a node of the module", i);
}
