/* frontend/import_decoder.c: the decoder graphs every import writes.
 *
 * One call of the graph is T tokens at positions p .. p + T - 1
 * (positions[0] = p): their embeddings go through every layer, each
 * layer's keys and values are written into rows p .. p + T - 1 of its
 * KV cache (state) and attention reads rows 0 .. p + t for token t; the
 * result is the logits of every token. Node names follow
 * examples/llama2-step.json: layers.L.q, layers.L.att, ...; weights keep
 * the checkpoint's names. */
#include "import.h"

#include <string.h>

/* What a layer's builder needs at hand. */
typedef struct {
    Arena *a;
    ImpGraph *g;
    int64_t T;
    int64_t N;                  /* slotted: the caches of N sequences; 0: one */
    int l;                      /* the layer being built */
    const char *wprefix;        /* its weights' prefix: "model.layers.3." */
    const char *positions, *pos;
    const char *slots;          /* the slots input, slotted; else NULL */
} Dec;

/* "layers.L.what", a node of the current layer. */
static const char *nd(Dec *x, const char *what)
{
    return arena_printf(x->a, "layers.%d.%s", x->l, what);
}

/* A weight of the current layer: prefix + stem + suffix. */
static const char *lw(Dec *x, const char *stem, const char *suffix, int rank, const int64_t *dims)
{
    return ig_weight(x->g, arena_printf(x->a, "%s%s%s", x->wprefix, stem, suffix), rank, dims);
}

/* Columns [start, end) of in's last axis. */
static const char *columns(Dec *x, const char *name, const char *in, int64_t start, int64_t end)
{
    const char *at = arena_printf(x->a, "{\"axis\": -1, \"start\": %lld, \"end\": %lld}",
                                  (long long)start, (long long)end);
    return ig_node(x->g, name, "slice", at, 1, in);
}

static const char *reshape(Dec *x, const char *name, const char *in, int rank, const int64_t *dims)
{
    FILE *f = arena_stream(x->a);
    fputs("{\"shape\": [", f);
    for (int i = 0; i < rank; i++)
        fprintf(f, "%s%lld", i ? ", " : "", (long long)dims[i]);
    fputs("]}", f);
    return ig_node(x->g, name, "reshape", arena_stream_text(x->a, f), 1, in);
}

/* tokens i32[T], positions i32[T], and pos, the scalar positions[0] that
 * cache_write and attention take. T appears nowhere else: reshapes write
 * the token axis as -1, so the graph is the same at any T
 * (ir_decoder_tokens re-infers it for a program's shape variants).
 * Slotted (N > 0): slots i32[T] too, and pos is positions itself: row t is
 * a token of the sequence in slot slots[t], at positions[t]. */
static void io(Dec *x)
{
    ig_input(x->g, "tokens", "i32", IG_DIMS(x->T));
    x->positions = ig_input(x->g, "positions", "i32", IG_DIMS(x->T));
    if (x->N) {
        x->slots = ig_input(x->g, "slots", "i32", IG_DIMS(x->T));
        x->pos = x->positions;
        return;
    }
    const char *first = ig_node(x->g, "first_position", "slice",
                                "{\"axis\": 0, \"start\": 0, \"end\": 1}", 1, x->positions);
    x->pos = reshape(x, "pos", first, 0, NULL);
}

/* k or v of the current layer, [T, H, D], written into its cache
 * layers.L.{k,v}_cache [S, H, D] at pos (slotted: [N, S, H, D] at pos and
 * slots); the whole cache after. */
static const char *cache(Dec *x, const char *kv, const char *in, int64_t S, int64_t H, int64_t D)
{
    const char *name = nd(x, arena_printf(x->a, "%s_cache", kv));
    const char *all = nd(x, arena_printf(x->a, "%s_all", kv));
    if (x->N)
        return ig_node(x->g, all, "cache_write", NULL, 4,
                       ig_state(x->g, name, IG_DIMS(x->N, S, H, D)), in, x->pos, x->slots);
    return ig_node(x->g, all, "cache_write", NULL, 3, ig_state(x->g, name, IG_DIMS(S, H, D)), in,
                   x->pos);
}

/* attention(q, k_all, v_all) at pos (and slots), with sinks [Hq] when
 * not NULL. */
static const char *attend(Dec *x, const char *attrs, const char *q, const char *k_all,
                          const char *v_all, const char *sinks)
{
    const char *in[6] = {q, k_all, v_all, x->pos};
    int nin = 4;
    if (x->N)
        in[nin++] = x->slots;
    if (sinks)
        in[nin++] = sinks;
    return ig_nodev(x->g, nd(x, "att"), "attention", attrs, nin, in);
}

/* ---- the llama family ---------------------------------------------------- */

/* Weight names: the whole-model ones, then stems within a layer (".weight"
 * or ".bias" follows). Experts are `expert` (a printf format of the
 * expert's number) then egate, eup, edown, one matrix each; without
 * `expert`, egate, eup and edown are the experts' matrices stacked,
 * [experts, rows, cols], as moe takes them (GGUF's). */
typedef struct {
    const char *embed, *norm, *head, *layer;
    const char *attn_norm, *q, *k, *v, *o, *q_norm, *k_norm, *ffn_norm, *gate, *up, *down;
    const char *router, *expert, *egate, *eup, *edown;
    const char *qkv, *gate_up;  /* fused projections, or NULL */
    const char *post_attn, *post_ffn;   /* norms of attention's and the MLP's
                                   outputs, or NULL */
    const char *sinks;          /* attention's sinks (gpt-oss), or NULL */
} LlamaNames;

static const LlamaNames llama2c_names = {
    "tok_embeddings.weight", "norm.weight", "output.weight", "layers.%d.",
    "attention_norm", "attention.wq", "attention.wk", "attention.wv", "attention.wo",
    NULL, NULL, "ffn_norm", "feed_forward.w1", "feed_forward.w3", "feed_forward.w2",
    NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
};

static const LlamaNames hf_names = {
    "model.embed_tokens.weight", "model.norm.weight", "lm_head.weight", "model.layers.%d.",
    "input_layernorm", "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
    "self_attn.o_proj", "self_attn.q_norm", "self_attn.k_norm", "post_attention_layernorm",
    "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj", "mlp.gate", "mlp.experts.%d.",
    "gate_proj", "up_proj", "down_proj", NULL, NULL, NULL, NULL, NULL,
};

/* Gemma 3's: Gemma 2's with q and k norms. */
static const LlamaNames gemma3_names = {
    "model.embed_tokens.weight", "model.norm.weight", "lm_head.weight", "model.layers.%d.",
    "input_layernorm", "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
    "self_attn.o_proj", "self_attn.q_norm", "self_attn.k_norm", "pre_feedforward_layernorm",
    "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj", NULL, NULL, NULL, NULL, NULL, NULL, NULL,
    "post_attention_layernorm", "post_feedforward_layernorm", NULL,
};

/* Gemma 2's: Hugging Face's, where post_attention_layernorm norms
 * attention's output and pre_feedforward_layernorm the MLP's input. */
static const LlamaNames gemma2_names = {
    "model.embed_tokens.weight", "model.norm.weight", "lm_head.weight", "model.layers.%d.",
    "input_layernorm", "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
    "self_attn.o_proj", NULL, NULL, "pre_feedforward_layernorm",
    "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj", NULL, NULL, NULL, NULL, NULL, NULL, NULL,
    "post_attention_layernorm", "post_feedforward_layernorm", NULL,
};

/* Phi-3's: Hugging Face's, with q, k, v rows in one projection, and
 * gate's and up's in another. */
static const LlamaNames phi3_names = {
    "model.embed_tokens.weight", "model.norm.weight", "lm_head.weight", "model.layers.%d.",
    "input_layernorm", NULL, NULL, NULL, "self_attn.o_proj", NULL, NULL,
    "post_attention_layernorm", NULL, NULL, "mlp.down_proj", NULL, NULL, NULL, NULL, NULL,
    "self_attn.qkv_proj", "mlp.gate_up_proj", NULL, NULL, NULL,
};

/* llama.cpp's (GGUF: llama, qwen2, qwen3, qwen3moe, gemma), its experts
 * stacked. */
static const LlamaNames gguf_names = {
    "token_embd.weight", "output_norm.weight", "output.weight", "blk.%d.",
    "attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "attn_q_norm", "attn_k_norm",
    "ffn_norm", "ffn_gate", "ffn_up", "ffn_down", "ffn_gate_inp", NULL, "ffn_gate_exps",
    "ffn_up_exps", "ffn_down_exps", NULL, NULL, NULL, NULL, NULL,
};

/* llama.cpp's Phi-3: q, k, v rows in attn_qkv; gate's and up's in ffn_up. */
static const LlamaNames gguf_phi3_names = {
    "token_embd.weight", "output_norm.weight", "output.weight", "blk.%d.",
    "attn_norm", NULL, NULL, NULL, "attn_output", NULL, NULL, "ffn_norm", NULL, NULL,
    "ffn_down", NULL, NULL, NULL, NULL, NULL, "attn_qkv", "ffn_up", NULL, NULL, NULL,
};

/* llama.cpp's Gemma 2 and 3: ffn_norm before the MLP, and norms after
 * attention and the MLP. */
static const LlamaNames gguf_gemma2_names = {
    "token_embd.weight", "output_norm.weight", "output.weight", "blk.%d.",
    "attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "attn_q_norm", "attn_k_norm",
    "ffn_norm", "ffn_gate", "ffn_up", "ffn_down", NULL, NULL, NULL, NULL, NULL, NULL, NULL,
    "post_attention_norm", "post_ffw_norm", NULL,
};

/* gpt-oss's: Hugging Face's with biases (".bias"; the experts' "_bias"),
 * sinks, the router mlp.router, and the experts stacked without
 * ".weight": egate is gate_up_proj [E, dim, 2 I] (gate and up
 * interleaved), edown down_proj [E, I, dim]. */
static const LlamaNames gptoss_names = {
    "model.embed_tokens.weight", "model.norm.weight", "lm_head.weight", "model.layers.%d.",
    "input_layernorm", "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
    "self_attn.o_proj", NULL, NULL, "post_attention_layernorm",
    NULL, NULL, NULL, "mlp.router", NULL, "mlp.experts.gate_up_proj", NULL,
    "mlp.experts.down_proj", NULL, NULL, NULL, NULL, "self_attn.sinks",
};

/* Mixtral's: Hugging Face's, but for its experts (w1 gate, w3 up, w2 down). */
static const LlamaNames mixtral_names = {
    "model.embed_tokens.weight", "model.norm.weight", "lm_head.weight", "model.layers.%d.",
    "input_layernorm", "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
    "self_attn.o_proj", NULL, NULL, "post_attention_layernorm",
    NULL, NULL, NULL, "block_sparse_moe.gate", "block_sparse_moe.experts.%d.",
    "w1", "w3", "w2", NULL, NULL, NULL, NULL, NULL,
};

typedef struct {
    Dec x;
    const ImpLlama *c;
    const LlamaNames *n;
} Llama;

/* rmsnorm(in) * w, or * (1 + w) when the norms do (a node of the weight
 * alone: computed once, at open). */
static const char *rmsnorm(Llama *L, const char *name, const char *in, const char *w)
{
    const char *at = arena_printf(L->x.a, "{\"eps\": %s}", ig_num(L->x.g, L->c->eps));
    if (L->c->norm_one)
        w = ig_scalar(L->x.g, arena_printf(L->x.a, "%s_scale", name), "add", w, 1);
    return ig_node(L->x.g, name, "rmsnorm", at, 2, in, w);
}

/* in [T, dim] @ stem.weight [rows, dim]^T (+ stem.bias), then split into
 * heads: [T, heads, head_dim]. */
static const char *project(Llama *L, const char *what, const char *in, const char *stem,
                           int64_t heads, int bias)
{
    Dec *x = &L->x;
    int64_t rows = heads * L->c->head_dim;
    const char *w = lw(x, stem, ".weight", IG_DIMS(rows, L->c->dim));
    const char *y = bias ? ig_node(x->g, nd(x, what), "linear", NULL, 3, in, w,
                                   lw(x, stem, ".bias", IG_DIMS(rows)))
                         : ig_node(x->g, nd(x, what), "linear", NULL, 2, in, w);
    return reshape(x, nd(x, arena_printf(x->a, "%s_heads", what)), y,
                   IG_DIMS(-1, heads, L->c->head_dim));
}

/* q, k and v out of the one projection stem.weight [(Hq + 2 Hkv) hd,
 * dim] (q's rows, k's, then v's), each in heads. */
static void project_fused(Llama *L, const char *in, const char *stem, const char **qkv)
{
    Dec *x = &L->x;
    const ImpLlama *c = L->c;
    static const char *const what[] = {"q", "k", "v"};
    int64_t hd = c->head_dim, heads[3] = {c->heads, c->kv_heads, c->kv_heads}, at = 0;
    int64_t rows = (c->heads + 2 * c->kv_heads) * hd;
    const char *y = ig_node(x->g, nd(x, "qkv"), "linear", NULL, 2, in,
                            lw(x, stem, ".weight", IG_DIMS(rows, c->dim)));
    for (int i = 0; i < 3; i++) {
        const char *part = columns(x, nd(x, what[i]), y, at, at + heads[i] * hd);
        qkv[i] = reshape(x, nd(x, arena_printf(x->a, "%s_heads", what[i])), part,
                         IG_DIMS(-1, heads[i], hd));
        at += heads[i] * hd;
    }
}

static int sliding(const Llama *L);

/* rope at the model's theta, or on a sliding layer at its local one (even
 * where the window spans the whole cache). */
static const char *rope(Llama *L, const char *name, const char *in)
{
    const ImpLlama *c = L->c;
    double theta = c->local_theta && sliding(L) ? c->local_theta : c->theta;
    FILE *f = arena_stream(L->x.a);
    fprintf(f, "{\"theta\": %s, \"style\": \"%s\"", ig_num(L->x.g, theta), c->rope_style);
    if (c->rope_llama3)
        fprintf(f, ", \"scaling\": \"llama3\", \"factor\": %s, \"low_freq_factor\": %s, "
                "\"high_freq_factor\": %s, \"original_max_position_embeddings\": %lld",
                ig_num(L->x.g, c->rope_factor), ig_num(L->x.g, c->rope_low),
                ig_num(L->x.g, c->rope_high), (long long)c->rope_original);
    if (c->rope_yarn)
        fprintf(f, ", \"scaling\": \"yarn\", \"factor\": %s, "
                "\"original_max_position_embeddings\": %lld, \"beta_fast\": %s, "
                "\"beta_slow\": %s, \"truncate\": %s, \"attention_factor\": %s",
                ig_num(L->x.g, c->rope_factor), (long long)c->rope_original,
                ig_num(L->x.g, c->rope_beta_fast), ig_num(L->x.g, c->rope_beta_slow),
                c->rope_truncate ? "true" : "false", ig_num(L->x.g, c->rope_mscale));
    fputc('}', f);
    return ig_node(L->x.g, name, "rope", arena_stream_text(L->x.a, f), 2, in, L->x.positions);
}

/* Whether the current layer is one of the sliding layers (every layer
 * when the model does not say). */
static int sliding(const Llama *L) { return !L->c->windowed || L->c->windowed[L->x.l]; }

/* The attention's attributes that are not its defaults, or NULL: scale,
 * soft cap, and this layer's window. */
static const char *attention_attrs(Llama *L)
{
    const ImpLlama *c = L->c;
    Dec *x = &L->x;
    int64_t window = sliding(L) ? c->window : 0;
    if (!c->attn_scale && !c->softcap && !window)
        return NULL;
    FILE *f = arena_stream(x->a);
    const char *sep = "{";
    if (c->attn_scale)
        fprintf(f, "%s\"scale\": %s", sep, ig_num(x->g, c->attn_scale)), sep = ", ";
    if (c->softcap)
        fprintf(f, "%s\"softcap\": %s", sep, ig_num(x->g, c->softcap)), sep = ", ";
    if (window)
        fprintf(f, "%s\"window\": %lld", sep, (long long)window);
    fputc('}', f);
    return arena_stream_text(x->a, f);
}

/* x + o_proj(attention(rope(q), cache(rope(k)), cache(v))) */
static const char *llama_attention(Llama *L, const char *in)
{
    Dec *x = &L->x;
    const ImpLlama *c = L->c;
    const LlamaNames *n = L->n;
    int64_t D = c->head_dim, S = c->max_seq;
    const char *h = rmsnorm(L, nd(x, "h"), in, lw(x, n->attn_norm, ".weight", IG_DIMS(c->dim)));
    const char *qkv[3];
    if (n->qkv) {
        project_fused(L, h, n->qkv, qkv);
    } else {
        qkv[0] = project(L, "q", h, n->q, c->heads, c->qkv_bias);
        qkv[1] = project(L, "k", h, n->k, c->kv_heads, c->qkv_bias);
        qkv[2] = project(L, "v", h, n->v, c->kv_heads, c->qkv_bias);
    }
    const char *q = qkv[0], *k = qkv[1], *v = qkv[2];
    if (c->qk_norm) {
        q = rmsnorm(L, nd(x, "q_normed"), q, lw(x, n->q_norm, ".weight", IG_DIMS(D)));
        k = rmsnorm(L, nd(x, "k_normed"), k, lw(x, n->k_norm, ".weight", IG_DIMS(D)));
    }
    q = rope(L, nd(x, "q_rot"), q);
    k = rope(L, nd(x, "k_rot"), k);
    const char *k_all = cache(x, "k", k, S, c->kv_heads, D);
    const char *v_all = cache(x, "v", v, S, c->kv_heads, D);
    const char *att = attend(x, attention_attrs(L), q, k_all, v_all,
                             n->sinks ? lw(x, n->sinks, "", IG_DIMS(c->heads)) : NULL);
    att = reshape(x, nd(x, "att_flat"), att, IG_DIMS(-1, c->heads * D));
    const char *wo = lw(x, n->o, ".weight", IG_DIMS(c->dim, c->heads * D));
    const char *o = n->sinks ? ig_node(x->g, nd(x, "att_out"), "linear", NULL, 3, att, wo,
                                       lw(x, n->o, ".bias", IG_DIMS(c->dim)))
                             : ig_node(x->g, nd(x, "att_out"), "linear", NULL, 2, att, wo);
    if (n->post_attn)
        o = rmsnorm(L, nd(x, "att_normed"), o, lw(x, n->post_attn, ".weight", IG_DIMS(c->dim)));
    return ig_node(x->g, nd(x, "x_att"), "add", NULL, 2, in, o);
}

/* down(silu(gate(h)) * up(h)); gate and up the two halves of one
 * projection's columns when fused (gate's first). */
static const char *swiglu(Llama *L, const char *h)
{
    Dec *x = &L->x;
    const ImpLlama *c = L->c;
    int64_t H = c->hidden;
    const char *gate, *up;
    if (L->n->gate_up) {
        const char *gu = ig_node(x->g, nd(x, "gate_up"), "linear", NULL, 2, h,
                                 lw(x, L->n->gate_up, ".weight", IG_DIMS(2 * H, c->dim)));
        gate = columns(x, nd(x, "gate"), gu, 0, H);
        up = columns(x, nd(x, "up"), gu, H, 2 * H);
    } else {
        gate = ig_node(x->g, nd(x, "gate"), "linear", NULL, 2, h,
                       lw(x, L->n->gate, ".weight", IG_DIMS(H, c->dim)));
        up = ig_node(x->g, nd(x, "up"), "linear", NULL, 2, h,
                     lw(x, L->n->up, ".weight", IG_DIMS(H, c->dim)));
    }
    const char *act =
        c->gelu ? ig_node(x->g, nd(x, "gate_act"), "gelu",
                          arena_printf(x->a, "{\"approximate\": \"%s\"}", c->gelu), 1, gate)
                : ig_node(x->g, nd(x, "gate_act"), "silu", NULL, 1, gate);
    const char *gated = ig_node(x->g, nd(x, "gated"), "mul", NULL, 2, act, up);
    return ig_node(x->g, nd(x, "ffn_out"), "linear", NULL, 2, gated,
                   lw(x, L->n->down, ".weight", IG_DIMS(c->dim, c->hidden)));
}

/* The experts' `proj` weights, [rows, cols] each in the checkpoint,
 * stacked into [experts, rows, cols] as moe takes them: each reshaped to
 * [1, rows, cols], then concatenated, 64 at a time (concat's limit); or
 * the one weight that holds them so. */
static const char *stack(Llama *L, const char *proj, int64_t rows, int64_t cols)
{
    Dec *x = &L->x;
    int64_t E = L->c->experts;
    if (!L->n->expert)
        return lw(x, proj, ".weight", IG_DIMS(E, rows, cols));
    const char **part = arena_alloc(x->a, sizeof *part * (size_t)E);
    for (int64_t e = 0; e < E; e++) {
        const char *expert = arena_printf(x->a, L->n->expert, (int)e);
        const char *w = lw(x, arena_printf(x->a, "%s%s", expert, proj), ".weight",
                           IG_DIMS(rows, cols));
        part[e] = reshape(x, nd(x, arena_printf(x->a, "experts.%d.%s", (int)e, proj)), w,
                          IG_DIMS(1, rows, cols));
    }
    for (int level = 0; E > 1; level++) {
        int64_t groups = (E + 63) / 64;
        for (int64_t g = 0; g < groups; g++) {
            int n = (int)(E - g * 64 < 64 ? E - g * 64 : 64);
            const char *name = arena_printf(x->a, "%s_stack.%d.%d", proj, level, (int)g);
            part[g] = ig_nodev(x->g, nd(x, name), "concat", NULL, n, part + g * 64);
        }
        E = groups;
    }
    return part[0];
}

/* moe(h; router, experts' gate, up, down) */
static const char *experts(Llama *L, const char *h)
{
    Dec *x = &L->x;
    const ImpLlama *c = L->c;
    const char *router = lw(x, L->n->router, ".weight", IG_DIMS(c->experts, c->dim));
    const char *gate = stack(L, L->n->egate, c->moe_hidden, c->dim);
    const char *up = stack(L, L->n->eup, c->moe_hidden, c->dim);
    const char *down = stack(L, L->n->edown, c->dim, c->moe_hidden);
    const char *at = arena_printf(x->a, "{\"top_k\": %lld, \"norm_topk_prob\": %s}",
                                  (long long)c->top_k, c->norm_topk ? "true" : "false");
    return ig_node(x->g, nd(x, "ffn_out"), "moe", at, 5, h, router, gate, up, down);
}

/* in's last two axes swapped: [E, a, b] to [E, b, a]. */
static const char *swap_last(Dec *x, const char *name, const char *in)
{
    return ig_node(x->g, name, "transpose", "{\"perm\": [0, 2, 1]}", 1, in);
}

/* Entry `which` (0 or 1) of axis 2 of in [E, I, 2, ...], reshaped to
 * dims: gate's (0) or up's (1) share of an interleaved projection. */
static const char *every_other(Dec *x, const char *name, const char *in, int which, int rank,
                               const int64_t *dims)
{
    const char *at = arena_printf(x->a, "{\"axis\": 2, \"start\": %d, \"end\": %d}", which,
                                  which + 1);
    const char *s = ig_node(x->g, arena_printf(x->a, "%s_slice", name), "slice", at, 1, in);
    return reshape(x, name, s, rank, dims);
}

/* gpt-oss's experts (transformers' GptOssMLP): the router with its bias;
 * gate_up_proj [E, dim, 2I] turned to [E, 2I, dim], whose rows alternate
 * gate's and up's (gate = [..., ::2], up = [..., 1::2] of the columns
 * before), split by a reshape to [E, I, 2, dim]; its bias [E, 2I] alike;
 * down_proj [E, I, dim] turned to [E, dim, I]. Nodes of weights alone:
 * computed once, when the program opens. MXFP4 checkpoints hold
 * gate_up_proj as [E, 2I, dim] and down_proj as [E, dim, I] already: no
 * turn, and the reshape and slices are views of the blocks as stored
 * (canonicalize-memrefs), which qgemm reads (every other row). moe with
 * the biases and the clamped SwiGLU at swiglu_limit. */
static const char *experts_gptoss(Llama *L, const char *h)
{
    Dec *x = &L->x;
    const ImpLlama *c = L->c;
    int64_t E = c->experts, I = c->moe_hidden, D = c->dim;
    const char *in[9] = {h, lw(x, L->n->router, ".weight", IG_DIMS(E, D))};
    const char *gu = c->mxfp4 ? lw(x, L->n->egate, "", IG_DIMS(E, 2 * I, D))
                              : swap_last(x, nd(x, "experts.gate_up_t"),
                                          lw(x, L->n->egate, "", IG_DIMS(E, D, 2 * I)));
    const char *rows = reshape(x, nd(x, "experts.gate_up_pairs"), gu, IG_DIMS(E, I, 2, D));
    in[2] = every_other(x, nd(x, "experts.gate"), rows, 0, IG_DIMS(E, I, D));
    in[3] = every_other(x, nd(x, "experts.up"), rows, 1, IG_DIMS(E, I, D));
    in[4] = c->mxfp4 ? lw(x, L->n->edown, "", IG_DIMS(E, D, I))
                     : swap_last(x, nd(x, "experts.down"),
                                 lw(x, L->n->edown, "", IG_DIMS(E, I, D)));
    in[5] = lw(x, L->n->router, ".bias", IG_DIMS(E));
    const char *gub = reshape(x, nd(x, "experts.gate_up_bias_pairs"),
                              lw(x, L->n->egate, "_bias", IG_DIMS(E, 2 * I)), IG_DIMS(E, I, 2));
    in[6] = every_other(x, nd(x, "experts.gate_bias"), gub, 0, IG_DIMS(E, I));
    in[7] = every_other(x, nd(x, "experts.up_bias"), gub, 1, IG_DIMS(E, I));
    in[8] = lw(x, L->n->edown, "_bias", IG_DIMS(E, D));
    const char *at = arena_printf(x->a, "{\"top_k\": %lld, \"norm_topk_prob\": true, "
                                  "\"activation\": \"clamped_swiglu\", \"alpha\": 1.702, "
                                  "\"limit\": %s}", (long long)c->top_k,
                                  ig_num(x->g, c->swiglu_limit));
    return ig_nodev(x->g, nd(x, "ffn_out"), "moe", at, 9, in);
}

static const char *llama_layer(Llama *L, const char *in)
{
    Dec *x = &L->x;
    const char *x_att = llama_attention(L, in);
    const char *h2 = rmsnorm(L, nd(x, "h2"), x_att,
                             lw(x, L->n->ffn_norm, ".weight", IG_DIMS(L->c->dim)));
    const char *y = L->n->sinks                     ? experts_gptoss(L, h2)
                    : L->c->moe && L->c->moe[x->l] ? experts(L, h2)
                                                   : swiglu(L, h2);
    if (L->n->post_ffn)
        y = rmsnorm(L, nd(x, "ffn_normed"), y,
                    lw(x, L->n->post_ffn, ".weight", IG_DIMS(L->c->dim)));
    return ig_node(x->g, nd(x, "x_out"), "add", NULL, 2, x_att, y);
}

char *imp_llama_graph(Arena *a, const ImpLlama *c)
{
    Llama L = {.x = {.a = a, .g = ig_new(a, c->model_name), .T = c->tokens,
                       .N = c->slots}, .c = c,
               .n = c->hf_names == IMP_HF_GPTOSS    ? &gptoss_names
                    : c->hf_names == IMP_GGUF_GEMMA2 ? &gguf_gemma2_names
                    : c->hf_names == IMP_GGUF_PHI3 ? &gguf_phi3_names
                    : c->hf_names == IMP_GGUF      ? &gguf_names
                    : c->hf_names == 5             ? &gemma3_names
                    : c->hf_names == 4 ? &gemma2_names
                    : c->hf_names == 3 ? &phi3_names
                    : c->hf_names == 2 ? &mixtral_names
                    : c->hf_names      ? &hf_names
                                       : &llama2c_names};
    Dec *x = &L.x;
    io(x);
    const char *embed = ig_weight(x->g, L.n->embed, IG_DIMS(c->vocab, c->dim));
    if (c->rope_freqs)          /* the file's; its factors are rope's attributes */
        ig_weight(x->g, "rope_freqs.weight", IG_DIMS(c->rope_freqs));
    const char *h = ig_node(x->g, "x0", "embedding", NULL, 2, embed, "tokens");
    if (c->embed_scale)
        h = ig_scalar(x->g, "x0_scaled", "mul", h, c->embed_scale);
    for (x->l = 0; x->l < c->layers; x->l++) {
        x->wprefix = arena_printf(a, L.n->layer, x->l);
        h = llama_layer(&L, h);
    }
    h = rmsnorm(&L, "x_final", h, ig_weight(x->g, L.n->norm, IG_DIMS(c->dim)));
    const char *head = c->tied ? embed : ig_weight(x->g, L.n->head, IG_DIMS(c->vocab, c->dim));
    if (c->final_softcap) {         /* cap tanh(logits / cap) */
        h = ig_node(x->g, "logits_raw", "linear", NULL, 2, h, head);
        h = ig_scalar(x->g, "logits_scaled", "div", h, c->final_softcap);
        h = ig_node(x->g, "logits_tanh", "tanh", NULL, 1, h);
        ig_scalar(x->g, "logits", "mul", h, c->final_softcap);
    } else {
        ig_node(x->g, "logits", "linear", NULL, 2, h, head);
    }
    return ig_text(x->g, "logits");
}

/* ---- GPT-2 ------------------------------------------------------------------- */

typedef struct {
    Dec x;
    const ImpGpt2 *c;
} Gpt2;

static const char *layernorm(Gpt2 *G, const char *name, const char *in, const char *stem)
{
    Dec *x = &G->x;
    int64_t D = G->c->dim;
    const char *at = arena_printf(x->a, "{\"eps\": %s}", ig_num(x->g, G->c->eps));
    return ig_node(x->g, name, "layernorm", at, 3, in, lw(x, stem, ".weight", IG_DIMS(D)),
                   lw(x, stem, ".bias", IG_DIMS(D)));
}

/* A Conv1D: in [T, rows] @ stem.weight [rows, cols] + stem.bias [cols]. */
static const char *conv1d(Gpt2 *G, const char *what, const char *in, const char *stem,
                          int64_t rows, int64_t cols)
{
    Dec *x = &G->x;
    const char *mm = ig_node(x->g, nd(x, arena_printf(x->a, "%s_mm", what)), "matmul", NULL, 2, in,
                             lw(x, stem, ".weight", IG_DIMS(rows, cols)));
    return ig_node(x->g, nd(x, what), "add", NULL, 2, mm, lw(x, stem, ".bias", IG_DIMS(cols)));
}

/* One of q, k, v (i = 0, 1, 2) out of the fused projection, in heads. */
static const char *qkv_part(Gpt2 *G, const char *what, const char *qkv, int i)
{
    Dec *x = &G->x;
    int64_t D = G->c->dim;
    const char *s = columns(x, nd(x, what), qkv, i * D, (i + 1) * D);
    return reshape(x, nd(x, arena_printf(x->a, "%s_heads", what)), s,
                   IG_DIMS(-1, G->c->heads, D / G->c->heads));
}

static const char *gpt2_layer(Gpt2 *G, const char *in)
{
    Dec *x = &G->x;
    const ImpGpt2 *c = G->c;
    int64_t D = c->dim, H = c->heads, S = c->max_seq;
    const char *ln1 = layernorm(G, nd(x, "ln1"), in, "ln_1");
    const char *qkv = conv1d(G, "qkv", ln1, "attn.c_attn", D, 3 * D);
    const char *q = qkv_part(G, "q", qkv, 0);
    const char *k_all = cache(x, "k", qkv_part(G, "k", qkv, 1), S, H, D / H);
    const char *v_all = cache(x, "v", qkv_part(G, "v", qkv, 2), S, H, D / H);
    const char *att = attend(x, NULL, q, k_all, v_all, NULL);
    att = reshape(x, nd(x, "att_flat"), att, IG_DIMS(-1, D));
    const char *proj = conv1d(G, "proj", att, "attn.c_proj", D, D);
    const char *x_att = ig_node(x->g, nd(x, "x_att"), "add", NULL, 2, in, proj);
    const char *ln2 = layernorm(G, nd(x, "ln2"), x_att, "ln_2");
    const char *fc = conv1d(G, "fc", ln2, "mlp.c_fc", D, c->hidden);
    const char *act = ig_node(x->g, nd(x, "fc_act"), "gelu",
                              arena_printf(x->a, "{\"approximate\": \"%s\"}", c->gelu), 1, fc);
    const char *mlp = conv1d(G, "mlp_out", act, "mlp.c_proj", c->hidden, D);
    return ig_node(x->g, nd(x, "x_out"), "add", NULL, 2, x_att, mlp);
}

/* Old checkpoints keep each layer's causal mask (attn.bias) and masking
 * value (attn.masked_bias), buffers GPT-2 does not need: declared with the
 * file's shape, used by nothing, so that the file loads as it is. */
static void gpt2_buffers(Gpt2 *G)
{
    Dec *x = &G->x;
    static const char *const stems[] = {"attn.bias", "attn.masked_bias"};
    for (int i = 0; G->c->weights && i < 2; i++) {
        const rt_st_tensor *t =
            rt_st_find(G->c->weights, arena_printf(x->a, "%s%s", x->wprefix, stems[i]));
        if (t)
            ig_weight(x->g, t->name, t->rank, t->dims);
    }
}

char *imp_gpt2_graph(Arena *a, const ImpGpt2 *c)
{
    Gpt2 G = {.x = {.a = a, .g = ig_new(a, "gpt2"), .T = c->tokens, .N = c->slots}, .c = c};
    Dec *x = &G.x;
    io(x);
    const char *wte = ig_weight(x->g, arena_printf(a, "%swte.weight", c->prefix),
                                IG_DIMS(c->vocab, c->dim));
    const char *wpe = ig_weight(x->g, arena_printf(a, "%swpe.weight", c->prefix),
                                IG_DIMS(c->n_positions, c->dim));
    const char *tok = ig_node(x->g, "tok_emb", "embedding", NULL, 2, wte, "tokens");
    const char *posemb = ig_node(x->g, "pos_emb", "embedding", NULL, 2, wpe, x->positions);
    const char *h = ig_node(x->g, "x0", "add", NULL, 2, tok, posemb);
    for (x->l = 0; x->l < c->layers; x->l++) {
        x->wprefix = arena_printf(a, "%sh.%d.", c->prefix, x->l);
        h = gpt2_layer(&G, h);
        gpt2_buffers(&G);
    }
    x->wprefix = c->prefix;
    h = layernorm(&G, "x_final", h, "ln_f");
    const char *head = c->tied ? wte : ig_weight(x->g, "lm_head.weight", IG_DIMS(c->vocab, c->dim));
    ig_node(x->g, "logits", "linear", NULL, 2, h, head);
    return ig_text(x->g, "logits");
}
