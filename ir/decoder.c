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
 * sequence T tokens (prefill). */
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
        y->dims[0] != tok->dims[0] || OP_IS_LEAF(y->op))
        return 0;
    int o = sl != NULL;                           /* S's axis */
    const Node *s0 = m->states[0];
    int64_t N = o && s0->rank > 1 ? s0->dims[0] : 0, S = s0->rank > o ? s0->dims[o] : 0;
    for (int i = 0; i < m->nstates; i++)
        if (m->states[i]->rank < 1 + o || m->states[i]->dims[o] != S ||
            (o && m->states[i]->dims[0] != N))
            return 0;
    dec->tokens = tok->dims[0];
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
