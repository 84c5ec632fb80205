/* passes/lower.c: graph IR to loop IR, one loop nest per op.
 *
 * Contract: m->prog is NULL before and holds the program after; every node
 * that is not a leaf gets its kernels from its op's lower_* (ops.def).
 * 1. Buffers for the leaves in module order: inputs, weights, states;
 *    weights of rank >= 2 stored as --weight-dtype says (cx->weight_store,
 *    or per weight cx->weight_stores; held_store: a quantized type's
 *    fallbacks and q4_k_m's mix, each noted; f8_e4m3's fallback is f32,
 *    which holds an FP8 file's values exactly).
 * 2. An output buffer for each output that a computed node can write
 *    straight into (not a leaf, not a state written in place, listed once).
 * 3. Every op node lowers in node order (kernels run in that order).
 * 4. Outputs that could not be written in place get a copy kernel.
 * 5. Every intermediate gets its own place in the arena, one after the
 *    other (plan-memory shares places later). */
#include "passes.h"

#include <stdio.h>
#include <string.h>

/* llama.cpp's rule for the layers whose tensors Q4_K_M holds in Q6_K. */
static int more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

/* The layer a weight's name gives (model.layers.N. or blk.N.); -1. */
static int layer_of(const char *name)
{
    int i;
    const char *p = strstr(name, "layers.");
    if (p && sscanf(p, "layers.%d.", &i) == 1)
        return i;
    return strncmp(name, "blk.", 4) == 0 && sscanf(name, "blk.%d.", &i) == 1 ? i : -1;
}

/* Names of the weights q4_k_m tells apart, as Hugging Face, GGUF and
 * llama2.c checkpoints give them. */
static const char *const value_proj[] = {"v_proj.", "attn_v.", "attention.wv.", NULL};
static const char *const down_proj[] = {"down_proj.", "ffn_down.", "feed_forward.w2.", NULL};
static const char *const outputs[] = {"lm_head.weight", "output.weight", NULL};
static const char *const embeddings[] = {"model.embed_tokens.weight", "token_embd.weight",
                                         "tok_embeddings.weight", NULL};

static int contains(const char *name, const char *const *any)
{
    for (; *any; any++)
        if (strstr(name, *any))
            return 1;
    return 0;
}

static int is(const char *name, const char *const *any)
{
    for (; *any; any++)
        if (strcmp(name, *any) == 0)
            return 1;
    return 0;
}

/* The classifier's weight: lm_head or output, or without one the token
 * embedding table, which then serves as the classifier. */
static int classifier(const Module *m, const char *name)
{
    int has_output = 0;
    for (int i = 0; i < m->nweights; i++)
        has_output |= is(m->weights[i]->name, outputs);
    return is(name, outputs) || (!has_output && is(name, embeddings));
}

/* q4_k_m's choice for weight w, as llama.cpp's Q4_K_M makes it (without
 * its per-architecture exceptions): q6_k for the classifier, and for the
 * value and down projections of the layers more_bits picks; q4_k else. */
static Storage q4_k_m(const Module *m, const Node *w)
{
    int layers = 0;
    for (int i = 0; i < m->nweights; i++)
        layers = layer_of(m->weights[i]->name) + 1 > layers ? layer_of(m->weights[i]->name) + 1
                                                            : layers;
    int i = layer_of(w->name);
    if (classifier(m, w->name))
        return ST_Q6_K;
    if (i >= 0 && (contains(w->name, value_proj) || contains(w->name, down_proj)) &&
        more_bits(i, layers))
        return ST_Q6_K;
    return ST_Q4_K;
}

Storage lower_weight_store(const Module *m, const Node *w, Storage st, Storage *want)
{
    *want = st == ST_Q4_K_M ? q4_k_m(m, w) : st;
    Storage got = *want;
    int64_t row = w->dims[w->rank - 1];
    if (storage_block(got) && row % storage_block(got))
        got = got == ST_Q4_K ? ST_Q4_0 : got == ST_Q6_K ? ST_Q8_0 : got;
    if (storage_block(got) && row % storage_block(got))
        got = got == ST_F8_E4M3 ? ST_F32 : ST_F16;      /* an FP8 file's values: exact */
    return got;
}

/* lower_weight_store's choice, noted when it falls back. */
static Storage held_store(LowerCx *lc, const Node *w, Storage st)
{
    Storage want, got = lower_weight_store(lc->m, w, st, &want);
    int64_t row = w->dims[w->rank - 1];
    if (got != want)
        ir_note(lc->a, &lc->p->notes, "lower: weight %%%d held as %s, not %s: its rows of %lld "
                "are no multiple of %s's block of %d", w->id, storage_name(got),
                storage_name(want), (long long)row, storage_name(want), storage_block(want));
    return got;
}

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
                b->store = held_store(&lc, m->nodes[i], cx->weight_stores
                                                            ? cx->weight_stores[b->index]
                                                            : cx->weight_store);
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
