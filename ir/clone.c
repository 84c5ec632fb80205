/* ir/clone.c: a deep copy of a graph-level module, in memory.
 *
 * Contract: ir_clone(a, m) returns a module in arena a that prints as m
 * prints (ir_module_text) and shares nothing a pass may change with it:
 * every node, its operand list, its INTS attributes, the node arrays
 * (nodes, inputs, weights, states, outputs), the notes and every string
 * are new. Only a weight's init data (INIT_DATA) is shared: nothing
 * writes it once loaded, so the clone must not outlive m's arena when a
 * weight has some. m must be unlowered (no loop IR, no variants): the
 * shape variants of a program are cloned before the pipeline runs.
 *
 * Why: a decoder's variants (cli/program.c) are the same graph at
 * another number of tokens; cloning the graph as loaded makes them
 * without reading (and for a model folder, importing) the model again.
 *
 * Algorithm: node i of m becomes node i of the copy (ids are dense in
 * node order, ir_verify_graph), so an operand or a leaf array entry n
 * maps to copy->nodes[n->id]. */
#include "ir.h"

#include <string.h>

static const char *dup_str(Arena *a, const char *s) { return s ? arena_strdup(a, s) : NULL; }

/* n's copy with operands taken from done[0 .. n->id). */
static Node *clone_node(Arena *a, const Node *n, Node *const *done)
{
    Node *c = arena_dup(a, n, sizeof *n);
    c->in = n->nin ? arena_alloc(a, sizeof *c->in * (size_t)n->nin) : NULL;
    for (int j = 0; j < n->nin; j++) {
        if (n->in[j]->id >= n->id)
            KILN_BUG("ir_clone: %%%d uses %%%d defined after it", n->id, n->in[j]->id);
        c->in[j] = done[n->in[j]->id];
    }
    for (int i = 0; i < KILN_MAX_ATTRS; i++) {
        AttrVal *v = &c->attrs.v[i];
        if (v->ints)
            v->ints = arena_dup(a, v->ints, sizeof *v->ints * (size_t)(v->nints ? v->nints : 1));
    }
    c->name = dup_str(a, n->name);
    c->where = dup_str(a, n->where);
    return c;
}

/* The copies of nodes v[0 .. n) (NULL when m has no such array). */
static Node **map_nodes(Arena *a, Node *const *v, int n, Node *const *done)
{
    if (!v)
        return NULL;
    Node **c = arena_alloc(a, sizeof *c * (size_t)(n ? n : 1));
    for (int i = 0; i < n; i++)
        c[i] = done[v[i]->id];
    return c;
}

static void clone_notes(Arena *a, Notes *to, const Notes *from)
{
    for (int i = 0; i < from->n; i++)
        ARR_PUSH(a, to->v, to->n, to->cap, dup_str(a, from->v[i]));
}

Module *ir_clone(Arena *a, const Module *m)
{
    if (m->prog || m->open || m->nvariants)
        KILN_BUG("ir_clone: %s is lowered; only a graph is cloned", m->name);
    Module *c = ir_module_new(a, dup_str(a, m->file), dup_str(a, m->name));
    c->nodes = arena_alloc(a, sizeof *c->nodes * (size_t)(m->nnodes ? m->nnodes : 1));
    c->capnodes = m->nnodes ? m->nnodes : 1;
    for (int i = 0; i < m->nnodes; i++) {
        const Node *n = m->nodes[i];
        if (n->id != i || n->buf)
            KILN_BUG("ir_clone: node %d has id %d%s", i, n->id, n->buf ? " and a buffer" : "");
        c->nodes[c->nnodes++] = clone_node(a, n, c->nodes);
    }
    c->inputs = map_nodes(a, m->inputs, m->ninputs, c->nodes);
    c->weights = map_nodes(a, m->weights, m->nweights, c->nodes);
    c->states = map_nodes(a, m->states, m->nstates, c->nodes);
    c->outputs = map_nodes(a, m->outputs, m->noutputs, c->nodes);
    c->ninputs = m->ninputs;
    c->nweights = m->nweights;
    c->nstates = m->nstates;
    c->noutputs = m->noutputs;
    clone_notes(a, &c->notes, &m->notes);
    return c;
}
