/* ir/decoder.c: the decoder contract, and a decoder re-inferred at
 * another number of tokens per call.
 *
 * A module is a decoder (docs/generating.md) when
 *   its inputs are exactly  tokens i32[T], positions i32[T]  (in order;
 *                           slotted, slots i32[T] after them),
 *   its outputs exactly     logits f32[T, V],
 *   and it has state, every one of S rows (its first dim): the KV caches,
 * which is what `kiln import` writes: a call feeds T tokens at positions
 * positions[0] .. positions[0] + T - 1, writes those rows of the caches
 * and gives every token's logits. Generation feeds such a model; the
 * shape variants of one program (prefill, decode) are the same decoder at
 * other T, sharing its weights and state.
 *
 * A slotted decoder (kiln import --slots N) has a third input, slots
 * i32[T], and every state [N, S, ...]: the caches of N sequences; token t
 * belongs to the sequence in slot slots[t] at position positions[t], so
 * one call may advance T sequences a token each (batched decode) or one
 * sequence T tokens (prefill).
 *
 * A prefill chunk needs only its last token's logits: ir_decoder_last_row
 * cuts the graph's tail to that row (logits f32[1, V], IrDecoder.last),
 * so the classifier, the costliest gemm of a small model, runs on one row
 * of T. From the output it walks up through ops that map row t of their
 * one operand that depends on the inputs to row t of their value (unary
 * ops; binary ops, linear, matmul and the norms whose other operands come
 * of weights alone), as long as that operand has no other reader, and
 * slices that operand to its row T - 1; the nodes below it are inferred
 * again. */
#include "ir.h"

#include <string.h>

static int is_vector(const Node *n, const char *name, DType t)
{
    return n->name && !strcmp(n->name, name) && n->dtype == t && n->rank == 1;
}

int ir_decoder(const Module *m, IrDecoder *dec)
{
    if (m->ninputs < 2 || m->ninputs > 3 || m->noutputs != 1 || m->nstates < 1)
        return 0;
    const Node *tok = m->inputs[0], *pos = m->inputs[1], *y = m->outputs[0];
    const Node *sl = m->ninputs == 3 ? m->inputs[2] : NULL;
    if (!is_vector(tok, "tokens", DT_I32) || !is_vector(pos, "positions", DT_I32) ||
        pos->dims[0] != tok->dims[0])
        return 0;
    if (sl && (!is_vector(sl, "slots", DT_I32) || sl->dims[0] != tok->dims[0]))
        return 0;
    if (!y->name || strcmp(y->name, "logits") || y->dtype != DT_F32 || y->rank != 2 ||
        (y->dims[0] != tok->dims[0] && y->dims[0] != 1) || OP_IS_LEAF(y->op))
        return 0;
    int o = sl != NULL;                           /* S's axis */
    const Node *s0 = m->states[0];
    int64_t N = o && s0->rank > 1 ? s0->dims[0] : 0, S = s0->rank > o ? s0->dims[o] : 0;
    for (int i = 0; i < m->nstates; i++)
        if (m->states[i]->rank < 1 + o || m->states[i]->dims[o] != S ||
            (o && m->states[i]->dims[0] != N))
            return 0;
    dec->tokens = tok->dims[0];
    dec->last = y->dims[0] != tok->dims[0];
    dec->vocab = y->dims[1];
    dec->max_seq = S;
    dec->slots = N;
    return 1;
}

/* Every node infers its shape again, in order, from the inputs' new
 * shapes (infer functions read attributes, never write them). */
int ir_decoder_tokens(Module *m, int64_t T, Diags *d)
{
    IrDecoder dec;
    if (!ir_decoder(m, &dec))
        KILN_BUG("ir_decoder_tokens: not a decoder");
    for (int i = 0; i < m->ninputs; i++)
        m->inputs[i]->dims[0] = T;
    InferCx cx = {m, d};
    int bad = 0;
    for (int i = 0; i < m->nnodes && !bad; i++) {
        Node *n = m->nodes[i];
        if (!OP_IS_LEAF(n->op))
            bad = op_table[n->op].infer(&cx, n) != 0 || d->n > 0;
    }
    if (bad)
        return -1;
    if (!ir_decoder(m, &dec) || dec.tokens != T) {
        diag(d, NULL, "at %lld tokens a call, the output is no longer logits [%lld, V]",
             (long long)T, (long long)T);
        return -1;
    }
    return 0;
}

/* Whether at's value maps row t of its operand in[k] (rank r >= 2, rows
 * on axis 0) to its own row t, its other operands coming of weights alone
 * (dep: of the inputs or state, by node id). */
static int row_wise(const Node *at, int k, const char *dep)
{
    for (int i = 0; i < at->nin; i++)
        if (i != k && dep[at->in[i]->id])
            return 0;
    const Node *x = at->in[k];
    switch (at->op) {
    case OP_RELU: case OP_SIGMOID: case OP_TANH: case OP_EXP: case OP_LOG: case OP_SQRT:
    case OP_RSQRT: case OP_NEG: case OP_ABS: case OP_SILU: case OP_GELU:
        return 1;
    case OP_ADD: case OP_SUB: case OP_MUL: case OP_DIV: case OP_MAXIMUM: case OP_MINIMUM: {
        const Node *o = at->in[1 - k];           /* broadcast along the rows */
        return o->rank < x->rank || o->dims[0] == 1;
    }
    case OP_LINEAR: case OP_RMSNORM: case OP_LAYERNORM:
        return k == 0;
    case OP_MATMUL:
        return k == 0 && at->in[1]->rank == 2;
    default:
        return 0;
    }
}

int ir_decoder_last_row(Module *m, Diags *d)
{
    IrDecoder dec;
    if (!ir_decoder(m, &dec) || dec.last)
        KILN_BUG("ir_decoder_last_row: not a decoder of every row's logits");
    int64_t T = dec.tokens;
    char *dep = arena_alloc(m->a, (size_t)m->nnodes);
    int *uses = arena_alloc(m->a, sizeof *uses * (size_t)m->nnodes);
    for (int i = 0; i < m->nnodes; i++) {
        Node *n = m->nodes[i];
        dep[i] = n->op == OP_INPUT || n->op == OP_STATE;
        for (int j = 0; j < n->nin; j++) {
            dep[i] |= dep[n->in[j]->id];
            uses[n->in[j]->id]++;
        }
    }
    Node *at = m->outputs[0], *x = at, *user = NULL;    /* slice x, user's operand k */
    int k = -1;
    for (;;) {
        int act = -1;
        for (int j = 0; j < at->nin; j++)
            act = dep[at->in[j]->id] ? (act == -1 ? j : -2) : act;
        if (act < 0 || at->in[act]->rank < 2 || at->in[act]->dims[0] != T ||
            !row_wise(at, act, dep))
            break;
        user = at, k = act, x = at->in[act];
        if (uses[x->id] != 1 || OP_IS_LEAF(x->op))
            break;
        at = x;
    }
    Node *s = ir_node_new(m, OP_SLICE, &x, 1);
    s->where = x->where;
    AttrVal *ax = (AttrVal *)attr_v(s, "axis"), *v = (AttrVal *)attr_v(s, "start"),
            *e = (AttrVal *)attr_v(s, "end");
    ax->i = 0, v->i = T - 1, e->i = T;
    ax->given = v->given = e->given = 1;
    if (!user) {                                 /* the output itself */
        s->name = x->name;
        x->name = NULL;
        m->outputs[0] = s;
    } else {
        user->in[k] = s;
        for (int i = m->nnodes - 1; m->nodes[i - 1] != x; i--) {   /* s right after x */
            m->nodes[i] = m->nodes[i - 1];
            m->nodes[i - 1] = s;
        }
    }
    ir_module_renumber(m);
    InferCx cx = {m, d};
    for (int i = s->id; i < m->nnodes; i++)
        if (!OP_IS_LEAF(m->nodes[i]->op) && (op_table[m->nodes[i]->op].infer(&cx, m->nodes[i]) ||
                                             d->n > 0))
            return -1;
    if (!ir_decoder(m, &dec) || !dec.last)
        KILN_BUG("ir_decoder_last_row: the cut graph is no decoder of the last row");
    return 0;
}
