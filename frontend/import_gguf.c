/* frontend/import_gguf.c: a GGUF file (llama.cpp's format) to the decoder
 * graph of import_decoder.c, its weights the file's tensors by their own
 * names (blk.L.attn_q.weight, ...), loaded from the file as stored
 * (runtime/core/rt_weights.c).
 *
 * Contract: the model is read from the file's own keys (ARCH.block_count,
 * ARCH.attention.head_count, ..., ARCH the value of general.architecture)
 * and the presence of its tensors (output.weight: untied; a layer's
 * ffn_gate_inp: a mixture of experts; rope_freqs.weight: Llama 3's
 * frequency scaling), with llama.cpp's meaning and defaults
 * (src/llama-model.cpp), so that a file gives what llama.cpp computes:
 *   llama     rope on interleaved pairs (llama.cpp's converter permutes
 *             q's and k's rows for it; llama2.c checkpoints are so
 *             already); experts when expert_count > 0 (Mixtral), top
 *             expert_used_count renormalised;
 *   qwen2     q, k, v biases; rope on halves (as every one below);
 *   qwen3     q and k rmsnorms per head;
 *   qwen3moe  qwen3's attention, experts in the layers that have
 *             ffn_gate_inp, renormalised (expert_weights_norm, when given);
 *   gemma     norms by w (the converter stored 1 + w), embeddings times
 *             sqrt(embedding_length), a gelu (tanh) gate, tied;
 *   gemma2    gemma's with norms after attention and the MLP, soft caps
 *             (attn_logit_softcapping 50, final_logit_softcapping 30), a
 *             window (attention.sliding_window 4096) on all but every
 *             attention.sliding_window_pattern-th (2) layer;
 *   gemma3    gemma2's without caps, with q/k norms, the window's layers
 *             (pattern 6; none without attention.sliding_window) turning
 *             rope at rope.freq_base_swa (10000), tied when output.weight
 *             is not there;
 *             both gemmas scale scores by head_dim^-1/2, but the 27B
 *             shapes (46, 62 layers) by (embedding_length / head_count)^-1/2;
 *   phi3      q, k, v in attn_qkv, gate and up in ffn_up; a window
 *             (attention.sliding_window, 0: none).
 * Anything that would change the arithmetic and that kiln does not do is
 * refused by name ("FILE: key 'K': what", "FILE: tensor 'T': what"): an
 * unknown architecture, a missing key, rope scaling but llama3's (a
 * rope.scaling.type or factor), keys that differ by layer, non-causal
 * attention, Phi-3's long rope factors, a split file. Keys kiln does not
 * read (general.*, tokenizer.*, quantize.*) change nothing. Tensors are
 * checked against the graph by the weights loader (rt_check_weights):
 * every one a weight of the graph, of its shape. */
#include "import.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define GG_MAX_LAYERS 1024      /* as the HF import's limits */
#define GG_MAX_EXPERTS 65536

typedef struct {
    Arena *a;
    Diags *d;
    const rt_gguf *g;
    const char *arch;           /* general.architecture */
} Gg;

static const char *at_key(Gg *c, const char *key) { return arena_printf(c->a, "key '%s'", key); }

static const char *at_tensor(Gg *c, const char *name)
{
    return arena_printf(c->a, "tensor '%s'", name);
}

/* ARCH.suffix */
static const char *akey(Gg *c, const char *suffix)
{
    return arena_printf(c->a, "%s.%s", c->arch, suffix);
}

static const rt_gguf_kv *find(Gg *c, const char *suffix)
{
    return rt_gguf_find_key(c->g, akey(c, suffix));
}

/* "a string", "an array of 12 f32", "an f32": what a key holds. */
static const char *holds(Gg *c, const rt_gguf_kv *kv)
{
    static const char *const names[] = {"u8",  "i8",  "u16",  "i16", "u32",    "i32", "f32",
                                        "bool", "string", "array", "u64", "i64", "f64"};
    const char *e = names[kv->etype];
    if (kv->type == RT_GGUF_ARR)
        return arena_printf(c->a, "an array of %llu %s", (unsigned long long)kv->n, e);
    return arena_printf(c->a, "%s %s", strchr("aeiou", e[0]) ? "an" : "a", e);
}

/* An integer in [lo, 2^31) at ARCH.suffix: dflt when absent (dflt < 0:
 * required). A per-layer array (llama.cpp takes either) must hold one
 * value throughout. */
static int64_t get_int(Gg *c, const char *suffix, int64_t dflt, int64_t lo)
{
    const char *key = akey(c, suffix);
    const rt_gguf_kv *kv = rt_gguf_find_key(c->g, key);
    uint64_t v = 0, w;
    if (!kv && dflt < 0)
        diag(c->d, at_key(c, key), "missing");
    if (!kv)
        return dflt < 0 ? (lo > 0 ? lo : 1) : dflt;
    int ok = kv->type == RT_GGUF_ARR ? kv->n > 0 && !rt_gguf_arr_u64(kv, 0, &v)
                                     : !rt_gguf_u64(kv, &v);
    for (uint64_t i = 1; ok && kv->type == RT_GGUF_ARR && i < kv->n; i++)
        if (rt_gguf_arr_u64(kv, i, &w) || w != v) {
            diag(c->d, at_key(c, key), "%llu at layer 0, %llu at layer %llu: values that differ "
                 "by layer are not supported", (unsigned long long)v, (unsigned long long)w,
                 (unsigned long long)i);
            return lo > 0 ? lo : 1;
        }
    if (ok && v >= (uint64_t)lo && v <= INT32_MAX)
        return (int64_t)v;
    diag(c->d, at_key(c, key), "must be an integer in [%lld, 2^31), got %s", (long long)lo,
         ok ? arena_printf(c->a, "%llu", (unsigned long long)v) : holds(c, kv));
    return lo > 0 ? lo : 1;
}

static int64_t need(Gg *c, const char *suffix) { return get_int(c, suffix, -1, 1); }

/* A finite number > 0 at ARCH.suffix (an f32 or f64): dflt when absent
 * (dflt < 0: required). */
static double get_num(Gg *c, const char *suffix, double dflt)
{
    const char *key = akey(c, suffix);
    const rt_gguf_kv *kv = rt_gguf_find_key(c->g, key);
    double v;
    if (!kv && dflt < 0)
        diag(c->d, at_key(c, key), "missing");
    if (!kv)
        return dflt < 0 ? 1 : dflt;
    if (!rt_gguf_f64(kv, &v) && v > 0 && isfinite(v))
        return v;
    if (!rt_gguf_f64(kv, &v))
        diag(c->d, at_key(c, key), "must be a number > 0, got %g", v);
    else
        diag(c->d, at_key(c, key), "must be a number > 0, got %s", holds(c, kv));
    return dflt < 0 ? 1 : dflt;
}

static int get_bool(Gg *c, const char *suffix, int dflt)
{
    const rt_gguf_kv *kv = find(c, suffix);
    int v = dflt;
    if (kv && rt_gguf_bool(kv, &v))
        diag(c->d, at_key(c, akey(c, suffix)), "must be a bool, got %s", holds(c, kv));
    return v;
}

/* ---- what the file must not ask for ----------------------------------------- */

/* Rope scaling: llama.cpp scales the frequencies linearly by a
 * rope.scaling.factor (or rope.scale_linear) other than 0 or 1, and by
 * the method rope.scaling.type names (none, linear, yarn, longrope);
 * kiln does Llama 3's only (rope_freqs.weight). Non-causal attention,
 * shared experts, gating but softmax, and a split file are refused too. */
static void refusals(Gg *c)
{
    static const char *const factors[] = {"rope.scaling.factor", "rope.scale_linear"};
    for (int i = 0; i < 2; i++) {
        const rt_gguf_kv *kv = find(c, factors[i]);
        double f = 0;
        if (kv && (rt_gguf_f64(kv, &f) || (f != 0 && f != 1)))
            diag(c->d, at_key(c, akey(c, factors[i])), "rope scaling by %g is not supported "
                 "(kiln scales rope as Llama 3 does only)", f);
    }
    const rt_gguf_kv *kv = find(c, "rope.scaling.type");
    const char *type = kv ? rt_gguf_str(kv, NULL) : "none";
    if (!type || strcmp(type, "none"))
        diag(c->d, at_key(c, akey(c, "rope.scaling.type")), "%s%s%s not supported (kiln: none)",
             type ? "\"" : "", type ? type : holds(c, kv), type ? "\"" : "");
    if (!get_bool(c, "attention.causal", 1))
        diag(c->d, at_key(c, akey(c, "attention.causal")), "false not supported");
    if (get_int(c, "expert_shared_count", 0, 0))
        diag(c->d, at_key(c, akey(c, "expert_shared_count")), "shared experts are not supported");
    if (get_int(c, "expert_gating_func", 1, 0) != 1)
        diag(c->d, at_key(c, akey(c, "expert_gating_func")),
             "gating but softmax (1) is not supported");
    kv = find(c, "expert_weights_scale");
    double ws = 0;
    if (kv && (rt_gguf_f64(kv, &ws) || (ws != 0 && ws != 1)))
        diag(c->d, at_key(c, akey(c, "expert_weights_scale")), "%g not supported (kiln: 1)", ws);
    uint64_t n = 0;
    kv = rt_gguf_find_key(c->g, "split.count");
    if (kv && (rt_gguf_u64(kv, &n) || n > 1))
        diag(c->d, at_key(c, "split.count"), "a model split in %llu files: merge them first "
             "(llama-gguf-split --merge)", (unsigned long long)n);
}

/* ---- Llama 3's rope frequencies ---------------------------------------------- */

/* The factors llama.cpp's converter stores for Llama 3.1's scaling
 * (rope_freqs.weight: pair i's frequency f_i is divided by r_i) as the
 * rope op's llama3 attributes. With F the factor, lo and hi the low and
 * high frequency factors and L the original context, r_i is 1 where the
 * wavelength 2pi / f_i is below L / hi, F above L / lo, and between
 * 1 / ((1 - s) / F + s) with s = (L f_i / 2pi - lo) / (hi - lo): an
 * affine s = a f + b, a = L / (2pi (hi - lo)) > 0, b = -lo / (hi - lo)
 * < 0, whose values past 1 and below 0 are the two ends. So a and b
 * (with F = r of the lowest frequency) give the factors, whatever L: a
 * and b come from the blended pairs' s (the outermost two; one, or none,
 * leave room, taken half way into it), L is the whole number that makes
 * lo nearest 1, and every r_i is checked against what the attributes
 * give, within 1e-5 (the converter rounds through f32). */
typedef struct {
    double f, r, s;
} GgPair;

static int fit_llama3(const GgPair *p, int n, ImpLlama *L)
{
    double F = p[n - 1].r, a, b;
    int first = -1, last = -1, high = -1, low = -1;     /* blended; last r 1; first r F */
    for (int i = 0; i < n; i++)
        if (p[i].r == 1)
            high = i;
        else if (fabs(p[i].r - F) <= 1e-6 * F)
            low = low < 0 ? i : low;
        else
            last = i, first = first < 0 ? i : first;
    if (first >= 0 && last > first) {
        a = (p[first].s - p[last].s) / (p[first].f - p[last].f);
        b = p[first].s - a * p[first].f;
    } else if (first >= 0) {                /* a steep enough line through it */
        double lo = high >= 0 ? (1 - p[first].s) / (p[high].f - p[first].f) : 0;
        double hi = low >= 0 ? p[first].s / (p[first].f - p[low].f) : 0;
        a = 2 * (lo > hi ? lo : hi);
        a = a > 0 ? a : 1 / p[first].f;
        b = p[first].s - a * p[first].f;
    } else if (high >= 0) {                 /* s 1.5 at the last high, -0.5 at the first low */
        a = 2 / (p[high].f - p[low].f);
        b = -0.5 - a * p[low].f;
    } else {
        a = 1 / p[0].f;
        b = -1.5;
    }
    if (!(a > 0) || !(b < 0))
        return -1;
    double orig = nearbyint(2 * M_PI * a / -b), span = (orig < 1 ? 1 : orig) / (2 * M_PI * a);
    L->rope_llama3 = 1;
    L->rope_factor = F;
    L->rope_original = orig < 1 ? 1 : (int64_t)orig;
    L->rope_low = -b * span;
    L->rope_high = L->rope_low + span;
    for (int i = 0; i < n; i++) {           /* as ir/op_transformer.c's rope_freq */
        double w = 2 * M_PI / p[i].f, Lc = (double)L->rope_original, g;
        if (w < Lc / L->rope_high)
            g = p[i].f;
        else if (w > Lc / L->rope_low)
            g = p[i].f / F;
        else {
            double sm = (Lc / w - L->rope_low) / (L->rope_high - L->rope_low);
            g = (1 - sm) * p[i].f / F + sm * p[i].f;
        }
        if (fabs(g - p[i].f / p[i].r) > 1e-5 * g)
            return -1;
    }
    return 0;
}

static float f32_at(const unsigned char *p)
{
    uint32_t u = p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static void rope_freqs(Gg *c, ImpLlama *L)
{
    const rt_gguf_tensor *t = rt_gguf_find_tensor(c->g, "rope_freqs.weight");
    int64_t n = L->head_dim / 2;
    if (!t)
        return;
    if (t->store != RT_F32 || t->rank != 1 || t->dims[0] != n) {
        diag(c->d, at_tensor(c, t->name), "must be f32[%lld], the factors of head_dim %lld's "
             "frequencies", (long long)n, (long long)L->head_dim);
        return;
    }
    GgPair *p = arena_alloc(c->a, sizeof *p * (size_t)n);
    int ones = 1;
    for (int64_t i = 0; i < n; i++) {
        p[i].f = pow(L->theta, -2.0 * (double)i / (double)L->head_dim);
        p[i].r = f32_at(t->data + 4 * i);
        ones &= p[i].r == 1;
        if (!(p[i].r >= 1) || !isfinite(p[i].r) || (i && p[i].r < p[i - 1].r)) {
            diag(c->d, at_tensor(c, t->name), "factor %lld is %g: Llama 3's factors rise "
                 "from 1", (long long)i, p[i].r);
            return;
        }
    }
    L->rope_freqs = n;
    double F = p[n - 1].r;
    for (int64_t i = 0; i < n; i++)
        p[i].s = (1 / p[i].r - 1 / F) / (1 - 1 / F);
    if (!ones && fit_llama3(p, (int)n, L))
        diag(c->d, at_tensor(c, t->name), "factors that are not Llama 3's frequency scaling "
             "(kiln scales rope so only)");
}

/* ---- the architectures -------------------------------------------------------- */

/* vocab from token_embd.weight [vocab, embedding_length] (and the
 * tokenizer's token list, when there, of as many). */
static void vocab(Gg *c, ImpLlama *L)
{
    const rt_gguf_tensor *t = rt_gguf_find_tensor(c->g, "token_embd.weight");
    const rt_gguf_kv *toks = rt_gguf_find_key(c->g, "tokenizer.ggml.tokens");
    char s[160];
    if (!t) {
        diag(c->d, at_tensor(c, "token_embd.weight"), "missing");
        return;
    }
    if (t->rank != 2 || t->dims[1] != L->dim || t->dims[0] > INT32_MAX) {
        diag(c->d, at_tensor(c, t->name), "shape %s, not [vocab, %lld] (%s)",
             rt_fmt_shape(s, sizeof s, t->rank, t->dims), (long long)L->dim,
             akey(c, "embedding_length"));
        return;
    }
    L->vocab = t->dims[0];
    if (toks && toks->type == RT_GGUF_ARR && toks->n != (uint64_t)L->vocab)
        diag(c->d, at_key(c, toks->key), "%llu tokens, but token_embd.weight has %lld rows",
             (unsigned long long)toks->n, (long long)L->vocab);
}

/* The keys every architecture has. */
static void common(Gg *c, ImpLlama *L)
{
    L->dim = need(c, "embedding_length");
    L->layers = need(c, "block_count");
    if (L->layers > GG_MAX_LAYERS) {
        diag(c->d, at_key(c, akey(c, "block_count")), "%lld is more than kiln's %d layers",
             (long long)L->layers, GG_MAX_LAYERS);
        L->layers = 1;
    }
    L->heads = need(c, "attention.head_count");
    L->kv_heads = get_int(c, "attention.head_count_kv", L->heads, 1);
    L->head_dim = get_int(c, "attention.key_length", L->dim / L->heads ? L->dim / L->heads : 1, 1);
    int64_t v = get_int(c, "attention.value_length", L->head_dim, 1);
    if (v != L->head_dim)
        diag(c->d, at_key(c, akey(c, "attention.value_length")), "%lld is not key_length %lld "
             "(kiln's attention takes values of the keys' size)", (long long)v,
             (long long)L->head_dim);
    int64_t rot = get_int(c, "rope.dimension_count", L->head_dim, 1);
    if (rot != L->head_dim)
        diag(c->d, at_key(c, akey(c, "rope.dimension_count")), "%lld of head_dim %lld: a "
             "partial rotary embedding is not supported", (long long)rot, (long long)L->head_dim);
    L->max_seq = need(c, "context_length");
    L->eps = get_num(c, "attention.layer_norm_rms_epsilon", -1);
    L->theta = get_num(c, "rope.freq_base", 10000.0);
    L->tied = !rt_gguf_find_tensor(c->g, "output.weight");
    L->rope_style = "half";
    L->hf_names = IMP_GGUF;
    vocab(c, L);
    refusals(c);
}

/* expert_count experts (at least lo) of which expert_used_count are used. */
static void experts(Gg *c, ImpLlama *L, int64_t lo)
{
    L->experts = get_int(c, "expert_count", lo ? -1 : 0, lo);
    if (!L->experts)
        return;
    if (L->experts * L->layers > GG_MAX_EXPERTS) {
        diag(c->d, at_key(c, akey(c, "expert_count")), "%lld experts in each of %lld layers: "
             "more than kiln's %d expert matrices", (long long)L->experts, (long long)L->layers,
             GG_MAX_EXPERTS);
        L->experts = 1;
    }
    L->top_k = need(c, "expert_used_count");
    if (L->top_k > L->experts)
        diag(c->d, at_key(c, akey(c, "expert_used_count")), "%lld is more than expert_count %lld",
             (long long)L->top_k, (long long)L->experts);
    L->norm_topk = get_bool(c, "expert_weights_norm", 1);
}

/* Layer l is sparse when its router, blk.l.ffn_gate_inp.weight, is there
 * (llama: every layer, when there are experts). */
static void moe_layers(Gg *c, ImpLlama *L)
{
    unsigned char *moe = arena_alloc(c->a, (size_t)L->layers + 1);
    for (int64_t l = 0; l < L->layers; l++)
        moe[l] = L->experts &&
                 rt_gguf_find_tensor(c->g, arena_printf(c->a, "blk.%lld.ffn_gate_inp.weight",
                                                        (long long)l));
    L->moe = moe;
}

/* The dense layers' feed_forward_length (none needed when every layer is
 * sparse). */
static void hidden(Gg *c, ImpLlama *L)
{
    int dense = 0;
    for (int64_t l = 0; l < L->layers; l++)
        dense |= !L->moe || !L->moe[l];
    L->hidden = get_int(c, "feed_forward_length", dense ? -1 : 0, dense);
}

static void read_llama(Gg *c, ImpLlama *L)
{
    common(c, L);
    L->rope_style = "interleaved";
    experts(c, L, 0);
    moe_layers(c, L);
    L->hidden = L->moe_hidden = need(c, "feed_forward_length");
    rope_freqs(c, L);
}

static void read_qwen2(Gg *c, ImpLlama *L)
{
    common(c, L);
    L->hidden = need(c, "feed_forward_length");
    L->qkv_bias = 1;
}

static void read_qwen3(Gg *c, ImpLlama *L)
{
    common(c, L);
    L->hidden = need(c, "feed_forward_length");
    L->qk_norm = 1;
}

static void read_qwen3moe(Gg *c, ImpLlama *L)
{
    common(c, L);
    L->qk_norm = 1;
    experts(c, L, 1);
    moe_layers(c, L);
    hidden(c, L);
    L->moe_hidden = get_int(c, "expert_feed_forward_length",
                            L->hidden / L->top_k ? L->hidden / L->top_k : -1, 1);
}

/* Gemma 3 ties the classifier when output.weight is not there; Gemma and
 * Gemma 2 always do. */
static void gemmas(Gg *c, ImpLlama *L)
{
    common(c, L);
    L->hidden = need(c, "feed_forward_length");
    L->gelu = "tanh";
    L->embed_scale = (float)sqrt((double)L->dim);
}

static void read_gemma(Gg *c, ImpLlama *L)
{
    gemmas(c, L);
    L->tied = 1;
}

/* The 27B shapes' scale (llama.cpp picks it by layer count). */
static void gemma_scale(ImpLlama *L, int64_t layers_27b)
{
    if (L->layers == layers_27b)
        L->attn_scale = 1 / sqrt((double)(L->dim / L->heads));
}

/* Every layer l with l % pattern < pattern - 1 in the window. */
static void gemma_window(Gg *c, ImpLlama *L, int64_t window, int64_t pattern)
{
    int64_t p = get_int(c, "attention.sliding_window_pattern", pattern, 1);
    unsigned char *on = arena_alloc(c->a, (size_t)L->layers + 1);
    for (int64_t l = 0; l < L->layers; l++)
        on[l] = l % p < p - 1;
    L->windowed = on;
    L->window = get_int(c, "attention.sliding_window", window, 0);
}

static void read_gemma2(Gg *c, ImpLlama *L)
{
    read_gemma(c, L);
    L->hf_names = IMP_GGUF_GEMMA2;
    L->softcap = get_num(c, "attn_logit_softcapping", 50);
    L->final_softcap = get_num(c, "final_logit_softcapping", 30);
    gemma_window(c, L, 4096, 2);
    if (find(c, "rope.freq_base_swa"))
        L->local_theta = get_num(c, "rope.freq_base_swa", L->theta);
    gemma_scale(L, 46);
}

static void read_gemma3(Gg *c, ImpLlama *L)
{
    gemmas(c, L);
    L->hf_names = IMP_GGUF_GEMMA2;
    L->qk_norm = 1;
    gemma_window(c, L, 0, 6);
    L->local_theta = get_num(c, "rope.freq_base_swa", 10000.0);
    if (!L->window)                 /* no sliding layers: one rope throughout */
        L->windowed = NULL, L->local_theta = 0;
    gemma_scale(L, 62);
}

static void read_phi3(Gg *c, ImpLlama *L)
{
    static const char *const longrope[] = {"rope_factors_long.weight",
                                           "rope_factors_short.weight"};
    common(c, L);
    L->hf_names = IMP_GGUF_PHI3;
    L->hidden = need(c, "feed_forward_length");
    L->window = get_int(c, "attention.sliding_window", 0, 0);
    for (int i = 0; i < 2; i++)
        if (rt_gguf_find_tensor(c->g, longrope[i]))
            diag(c->d, at_tensor(c, longrope[i]), "Phi-3's long rope is not supported");
}

/* Shapes that must fit together. */
static void shapes(Gg *c, ImpLlama *L)
{
    if (L->head_dim % 2)
        diag(c->d, at_key(c, akey(c, "attention.key_length")),
             "%lld is odd; rotary embeddings rotate pairs", (long long)L->head_dim);
    if (L->heads % L->kv_heads)
        diag(c->d, at_key(c, akey(c, "attention.head_count_kv")),
             "%lld does not divide attention.head_count %lld", (long long)L->kv_heads,
             (long long)L->heads);
}

static const struct {
    const char *name;
    void (*read)(Gg *, ImpLlama *);
} archs[] = {
    {"llama", read_llama},   {"qwen2", read_qwen2},   {"qwen3", read_qwen3},
    {"qwen3moe", read_qwen3moe}, {"gemma", read_gemma}, {"gemma2", read_gemma2},
    {"gemma3", read_gemma3}, {"phi3", read_phi3},
};
#define NARCHS (int)(sizeof archs / sizeof archs[0])

static void release_gguf(void *g)
{
    rt_gguf_close(g);
    free(g);
}

/* The file, opened and held by the arena; NULL after its one line. */
static rt_gguf *open_file(Arena *a, const char *path, Diags *d, int *io)
{
    rt_gguf *g = malloc(sizeof *g);
    rt_err e = {0, ""};
    if (!g)
        arena_oom(a);
    if (rt_gguf_open(g, path, &e)) {
        free(g);
        ARR_PUSH(d->a, d->lines, d->n, d->cap, arena_strdup(d->a, e.msg));  /* names the file */
        *io = e.code == RT_EIO;
        return NULL;
    }
    arena_hold(a, g, release_gguf);
    return g;
}

char *imp_gguf(Arena *a, const char *path, const ImportOpts *o, Diags *d, int *io)
{
    int before = d->n;
    *io = 0;
    rt_gguf *g = open_file(a, path, d, io);
    if (!g)
        return NULL;
    Gg c = {a, d, g, NULL};
    const rt_gguf_kv *kv = rt_gguf_find_key(g, "general.architecture");
    c.arch = kv ? rt_gguf_str(kv, NULL) : NULL;
    int t = -1;
    for (int i = 0; c.arch && i < NARCHS; i++)
        t = strcmp(c.arch, archs[i].name) ? t : i;
    if (t < 0) {
        FILE *f = arena_stream(a);
        for (int i = 0; i < NARCHS; i++)
            fprintf(f, "%s%s", i ? ", " : "", archs[i].name);
        const char *list = arena_stream_text(a, f);
        if (!kv)
            diag(d, at_key(&c, "general.architecture"), "missing (kiln imports %s)", list);
        else if (!c.arch)
            diag(d, at_key(&c, "general.architecture"), "must be a string, got %s",
                 holds(&c, kv));
        else
            diag(d, at_key(&c, "general.architecture"), "\"%.60s\" not supported (kiln: %s)",
                 c.arch, list);
        arena_release(a, g);
        return NULL;
    }
    ImpLlama L = {.model_name = archs[t].name};
    archs[t].read(&c, &L);
    if (d->n == before)
        shapes(&c, &L);
    if (d->n == before)
        imp_seq_opts(d, o, L.max_seq, 0, &L.tokens, &L.max_seq);
    L.slots = o->slots;
    if (L.window >= L.max_seq)      /* a window over the whole cache: none */
        L.window = 0;
    char *text = d->n > before ? NULL : imp_llama_graph(a, &L);
    arena_release(a, g);
    return text;
}
