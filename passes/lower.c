/* passes/lower.c: graph IR to loop IR, one loop nest per op.
 *
 * Contract: m->prog is NULL before and holds the program after; every node
 * that is not a leaf gets its kernels from its op's lower_* (ops.def).
 * 1. Buffers for the leaves in module order: inputs, weights, states;
 *    weights of rank >= 2 stored as --weight-dtype says (cx->weight_store,
 *    or per weight cx->weight_stores).
 * 2. An output buffer for each output that a computed node can write
 *    straight into (not a leaf, not a state written in place, listed once).
 * 3. Every op node lowers in node order (kernels run in that order).
 * 4. Outputs that could not be written in place get a copy kernel.
 * 5. Every intermediate gets its own place in the arena, one after the
 *    other (plan-memory shares places later). */
#include "passes.h"

static int direct_output(Module *m, int i)
{
    Node *n = m->outputs[i];
    if (OP_IS_LEAF(n->op) || n->op == OP_CACHE_WRITE)
        return 0;
    for (int j = 0; j < i; j++)
        if (m->outputs[j] == n)
            return 0;
    return 1;
}

static Buf *output_buf(LowerCx *cx, Node *n, int i)
{
    Buf *b = ir_buf_new(cx->a, cx->p, BK_OUTPUT, n->dtype, n->rank, n->dims);
    b->node = n;
    b->index = i;
    return b;
}

static void copy_out(LowerCx *cx, Node *n, int i)
{
    Buf *dst = output_buf(cx, n, i);
    Kernel *k = ir_kernel_new(cx->a, cx->p,
                              arena_printf(cx->a, "copy_out_n%lld", (long long)node_count(n)));
    ARR_PUSH(cx->a, k->nodes, k->nnodes, k->capnodes, n);
    Var *v[KILN_MAX_RANK];
    Block *body = lw_nest(cx, k, &k->body, n->rank, n->dims, v);
    s_store(cx->a, body, dst, lw_vars(cx, n->rank, v), A_SET,
            lw_load(cx, n, lw_vars(cx, n->rank, v)));
}

int pass_lower(Module *m, PassCtx *cx)
{
    LowerCx lc = {m, m->a, ir_prog_new(m->a)};
    m->prog = lc.p;
    for (int i = 0; i < m->nnodes; i++)
        m->nodes[i]->buf = NULL;
    for (int i = 0; i < m->nnodes; i++)
        if (OP_IS_LEAF(m->nodes[i]->op) && m->nodes[i]->op != OP_CONST) {
            Buf *b = lw_buf(&lc, m->nodes[i]);
            if (b->kind == BK_WEIGHT && b->rank >= 2)
                b->store = cx->weight_stores ? cx->weight_stores[b->index] : cx->weight_store;
        }
    for (int i = 0; i < m->noutputs; i++)
        if (direct_output(m, i))
            m->outputs[i]->buf = output_buf(&lc, m->outputs[i], i);
    for (int i = 0; i < m->nnodes; i++)
        if (!OP_IS_LEAF(m->nodes[i]->op))
            op_table[m->nodes[i]->op].lower(&lc, m->nodes[i]);
    for (int i = 0; i < m->noutputs; i++)
        if (!direct_output(m, i))
            copy_out(&lc, m->outputs[i], i);
    ir_prog_layout(lc.p);
    return 1;
}
