/* tests/import/ckpt.c: random checkpoints and the hand-written forward
 * passes that are their reference (ckpt.h); ckpt_files.c writes them in
 * the formats people have.
 *
 * Weights are uniform in [-1/sqrt(fan_in), 1/sqrt(fan_in)) (norms 1 +/-
 * 0.1, biases +/- 0.1), from SplitMix64, so activations stay of order 1
 * through the layers. The forward passes follow their sources line for
 * line, in float with double sums; they are written for clarity. */
#include "ckpt_model.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const ck_type_names[] = {"llama", "qwen2",   "gpt2", "qwen3_moe", "qwen3",
                                          "mistral", "mixtral", "phi3", "gemma", "gemma2",
                                          "gemma3_text", "gpt_oss"};

const CkShape *ck_shape(const CkModel *m) { return &m->s; }

/* ---- random weights ------------------------------------------------------- */

static float uniform(CkModel *m) { return ck_mix(m->rng += CK_GAMMA); }

/* n weights: center + uniform in [-scale, scale). */
static float *weights(CkModel *m, int64_t n, float center, float scale)
{
    float *w = malloc((size_t)n * sizeof *w);
    if (!w)
        return NULL;
    m->owned[m->nowned++] = w;
    for (int64_t i = 0; i < n; i++) {
        w[i] = center + scale * uniform(m);
        if (m->s.bf16)
            w[i] = ck_bf16(w[i]);
    }
    return w;
}

static float *matrix(CkModel *m, int64_t rows, int64_t cols)
{
    return weights(m, rows * cols, 0, 1.0f / sqrtf((float)cols));
}

int ck_is_gemma(const CkModel *m)
{
    return m->s.type == CK_GEMMA || m->s.type == CK_GEMMA2 || m->s.type == CK_GEMMA3;
}

/* A norm's weights: near 1, or near 0 for Gemma's, which scale by 1 + w. */
static float *norm(CkModel *m, int64_t n) { return weights(m, n, ck_is_gemma(m) ? 0 : 1, 0.1f); }
static float *bias(CkModel *m, int64_t n) { return weights(m, n, 0, 0.1f); }

static int is_moe(const CkModel *m, int l)
{
    return (m->s.type == CK_QWEN3_MOE || m->s.type == CK_MIXTRAL || m->s.type == CK_GPTOSS) &&
           m->s.experts &&
           !(m->s.dense_layers >> l & 1);
}

static void llama_layer(CkModel *m, CkLayer *L, int l)
{
    const CkShape *s = &m->s;
    int64_t D = s->dim, H = s->hidden, E = s->experts, I = s->moe_hidden;
    L->attn_norm = norm(m, D);
    L->wq = matrix(m, m->qd, D);
    L->wk = matrix(m, m->kvd, D);
    L->wv = matrix(m, m->kvd, D);
    L->wo = matrix(m, D, m->qd);
    if (s->type == CK_QWEN2 || s->type == CK_GPTOSS) {
        L->bq = bias(m, m->qd);
        L->bk = bias(m, m->kvd);
        L->bv = bias(m, m->kvd);
    }
    if (s->type == CK_QWEN3_MOE || s->type == CK_QWEN3 || s->type == CK_GEMMA3) {
        L->q_norm = norm(m, m->hd);
        L->k_norm = norm(m, m->hd);
    }
    L->ffn_norm = norm(m, D);
    if (s->type == CK_GEMMA2 || s->type == CK_GEMMA3) {
        L->post_attn_norm = norm(m, D);
        L->post_ffn_norm = norm(m, D);
    }
    if (s->type == CK_GPTOSS) {
        L->bo = bias(m, D);
        L->sinks = weights(m, s->heads, 0, 1.0f);
    }
    if (is_moe(m, l) && s->type == CK_GPTOSS) {
        /* gate and up 10x the usual scale, so that the clamps at 7 bite */
        L->router = weights(m, E * D, 0, 1.0f);
        L->rb = weights(m, E, 0, 1.0f);
        L->eg = weights(m, E * I * D, 0, 10.0f / sqrtf((float)D));
        L->eu = weights(m, E * I * D, 0, 10.0f / sqrtf((float)D));
        L->ed = weights(m, E * D * I, 0, 0.25f / sqrtf((float)I));
        L->egb = bias(m, E * I);
        L->eub = bias(m, E * I);
        L->edb = bias(m, E * D);
        unsigned char e, code[32];
        for (int64_t i = 0; s->mxfp4 && i < E * I * D; i += 32) {
            ck_mx_block(L->eg + i, &e, code, 1);
            ck_mx_block(L->eu + i, &e, code, 1);
            ck_mx_block(L->ed + i, &e, code, 1);
        }
    } else if (is_moe(m, l)) {
        L->router = weights(m, E * D, 0, 1.0f);   /* routing far from ties */
        L->eg = matrix(m, E * I, D);
        L->eu = matrix(m, E * I, D);
        /* down 4x the usual scale: the experts move the logits enough that
         * a routing mistake (say, weights not renormalised) shows */
        L->ed = weights(m, E * D * I, 0, 4.0f / sqrtf((float)I));
    } else {
        L->w1 = matrix(m, H, D);
        L->w2 = matrix(m, D, H);
        L->w3 = matrix(m, H, D);
    }
}

static void gpt2_layer(CkModel *m, CkLayer *L)
{
    int64_t D = m->s.dim, H = m->s.hidden;
    L->attn_norm = norm(m, D);
    L->ln1_b = bias(m, D);
    L->c_attn = weights(m, D * 3 * D, 0, 1.0f / sqrtf((float)D));   /* [in, out] */
    L->c_attn_b = bias(m, 3 * D);
    L->c_proj = weights(m, D * D, 0, 1.0f / sqrtf((float)D));
    L->c_proj_b = bias(m, D);
    L->ffn_norm = norm(m, D);
    L->ln2_b = bias(m, D);
    L->fc = weights(m, D * H, 0, 1.0f / sqrtf((float)D));
    L->fc_b = bias(m, H);
    L->proj = weights(m, H * D, 0, 1.0f / sqrtf((float)H));
    L->proj_b = bias(m, D);
}

static float *scratch(int64_t n) { return calloc((size_t)n, sizeof(float)); }

CkModel *ck_new(const CkShape *s, uint64_t seed)
{
    CkModel *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    m->s = *s;
    if (s->type == CK_GPT2)
        m->s.kv_heads = s->heads;
    m->rng = seed;
    m->hd = s->head_dim ? s->head_dim : s->dim / s->heads;
    m->qd = s->heads * m->hd;
    m->kvd = s->kv_heads * m->hd;
    m->owned = calloc((size_t)(64 * s->layers + 16), sizeof *m->owned);
    m->L = calloc((size_t)s->layers, sizeof *m->L);
    if (!m->owned || !m->L) {
        ck_free(m);
        return NULL;
    }
    int64_t V = s->vocab, D = s->dim;
    m->embed = weights(m, V * D, 0, s->type == CK_GPT2 ? 0.1f : 1.0f);
    if (s->type == CK_GPT2)
        m->wpe = weights(m, (int64_t)s->seq * D, 0, 0.1f);
    for (int l = 0; l < s->layers; l++)
        if (s->type == CK_GPT2)
            gpt2_layer(m, &m->L[l]);
        else
            llama_layer(m, &m->L[l], l);
    m->norm = norm(m, D);
    if (s->type == CK_GPT2)
        m->norm_b = bias(m, D);
    m->head = s->tied ? m->embed : matrix(m, V, D);
    int64_t kv = (int64_t)s->layers * s->seq * m->kvd, wide = s->hidden > m->qd ? s->hidden : m->qd;
    m->kc = scratch(kv);
    m->vc = scratch(kv);
    m->x = scratch(D);
    m->xb = scratch(wide > D ? wide : D);
    m->xb2 = scratch(D);
    m->q = scratch(3 * (m->qd > D ? m->qd : D));
    m->k = scratch(m->kvd);
    m->v = scratch(m->kvd);
    m->att = scratch(s->seq);
    m->h1 = scratch(s->hidden + s->moe_hidden + s->experts + 1);
    m->h2 = scratch(s->hidden + s->moe_hidden + 1);
    m->h3 = scratch(D);
    m->logits = scratch(V);
    for (int i = 0; i < m->nowned; i++)
        if (!m->owned[i]) {
            ck_free(m);
            return NULL;
        }
    if (!m->kc || !m->vc || !m->x || !m->xb || !m->xb2 || !m->q || !m->k || !m->v || !m->att ||
        !m->h1 || !m->h2 || !m->h3 || !m->logits) {
        ck_free(m);
        return NULL;
    }
    return m;
}

void ck_free(CkModel *m)
{
    if (!m)
        return;
    for (int i = 0; i < m->nowned; i++)
        free(m->owned[i]);
    float *bufs[] = {m->kc, m->vc, m->x, m->xb, m->xb2, m->q, m->k, m->v, m->att,
                     m->h1, m->h2, m->h3, m->logits};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        free(bufs[i]);
    free(m->owned);
    free(m->L);
    free(m);
}

int ck_hf_shape(const char *type, CkShape *s)
{
    static const CkShape shapes[] = {
        {.type = CK_LLAMA, .vocab = 320, .dim = 64, .hidden = 96, .layers = 2, .heads = 4,
         .kv_heads = 2, .seq = 64, .interleaved = 1},
        {.type = CK_QWEN2, .vocab = 340, .dim = 64, .hidden = 128, .layers = 2, .heads = 4,
         .kv_heads = 2, .seq = 128, .tied = 1},
        {.type = CK_GPT2, .vocab = 310, .dim = 64, .hidden = 256, .layers = 2, .heads = 4,
         .kv_heads = 4, .seq = 64, .tied = 1, .gpt2_hub = 1},
        {.type = CK_QWEN3_MOE, .vocab = 330, .dim = 64, .hidden = 96, .layers = 3, .heads = 4,
         .kv_heads = 2, .head_dim = 32, .seq = 64, .experts = 4, .top_k = 2, .moe_hidden = 32,
         .norm_topk = 1, .dense_layers = 1u << 1},
        {.type = CK_QWEN3, .vocab = 350, .dim = 64, .hidden = 96, .layers = 2, .heads = 4,
         .kv_heads = 2, .head_dim = 32, .seq = 64, .tied = 1},
        {.type = CK_MISTRAL, .vocab = 320, .dim = 64, .hidden = 128, .layers = 2, .heads = 4,
         .kv_heads = 1, .seq = 64},
        {.type = CK_PHI3, .vocab = 320, .dim = 64, .hidden = 96, .layers = 2, .heads = 4,
         .kv_heads = 2, .seq = 64},
        {.type = CK_GEMMA, .vocab = 330, .dim = 64, .hidden = 96, .layers = 2, .heads = 4,
         .kv_heads = 1, .head_dim = 32, .seq = 64, .tied = 1},
        {.type = CK_GEMMA3, .vocab = 350, .dim = 64, .hidden = 96, .layers = 3, .heads = 4,
         .kv_heads = 2, .head_dim = 32, .seq = 64, .tied = 1},
        {.type = CK_GEMMA2, .vocab = 340, .dim = 64, .hidden = 96, .layers = 2, .heads = 4,
         .kv_heads = 2, .head_dim = 32, .seq = 64, .tied = 1},
        {.type = CK_MIXTRAL, .vocab = 330, .dim = 64, .hidden = 48, .layers = 2, .heads = 4,
         .kv_heads = 2, .seq = 64, .experts = 4, .top_k = 2, .moe_hidden = 48, .norm_topk = 1},
        {.type = CK_GPTOSS, .vocab = 340, .dim = 64, .hidden = 32, .layers = 2, .heads = 4,
         .kv_heads = 2, .head_dim = 16, .seq = 64, .experts = 4, .top_k = 2, .moe_hidden = 32,
         .norm_topk = 1, .window = 4},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        if (!strcmp(type, ck_type_names[shapes[i].type])) {
            *s = shapes[i];
            return 0;
        }
    return -1;
}

/* The config.json files of TinyLlama/TinyLlama-1.1B-Chat-v1.0 and
 * meta-llama/Llama-3.1-8B on the Hub, member for member (torch_dtype
 * says how the weights are stored). */
static const char tinyllama_config[] =
    "{\n  \"architectures\": [\n    \"LlamaForCausalLM\"\n  ],\n  \"attention_bias\": false,\n"
    "  \"bos_token_id\": 1,\n  \"eos_token_id\": 2,\n  \"hidden_act\": \"silu\",\n"
    "  \"hidden_size\": 2048,\n  \"initializer_range\": 0.02,\n  \"intermediate_size\": 5632,\n"
    "  \"max_position_embeddings\": 2048,\n  \"model_type\": \"llama\",\n"
    "  \"num_attention_heads\": 32,\n  \"num_hidden_layers\": 22,\n  \"num_key_value_heads\": 4,\n"
    "  \"pretraining_tp\": 1,\n  \"rms_norm_eps\": 1e-05,\n  \"rope_scaling\": null,\n"
    "  \"rope_theta\": 10000.0,\n  \"tie_word_embeddings\": false,\n  \"torch_dtype\": \"%s\",\n"
    "  \"transformers_version\": \"4.35.0\",\n  \"use_cache\": true,\n  \"vocab_size\": 32000\n}\n";
static const char llama3_8b_config[] =
    "{\n  \"architectures\": [\n    \"LlamaForCausalLM\"\n  ],\n  \"attention_bias\": false,\n"
    "  \"attention_dropout\": 0.0,\n  \"bos_token_id\": 128000,\n  \"eos_token_id\": 128001,\n"
    "  \"hidden_act\": \"silu\",\n  \"hidden_size\": 4096,\n  \"initializer_range\": 0.02,\n"
    "  \"intermediate_size\": 14336,\n  \"max_position_embeddings\": 131072,\n"
    "  \"mlp_bias\": false,\n  \"model_type\": \"llama\",\n  \"num_attention_heads\": 32,\n"
    "  \"num_hidden_layers\": 32,\n  \"num_key_value_heads\": 8,\n  \"pretraining_tp\": 1,\n"
    "  \"rms_norm_eps\": 1e-05,\n  \"rope_scaling\": {\n    \"factor\": 8.0,\n"
    "    \"low_freq_factor\": 1.0,\n    \"high_freq_factor\": 4.0,\n"
    "    \"original_max_position_embeddings\": 8192,\n    \"rope_type\": \"llama3\"\n  },\n"
    "  \"rope_theta\": 500000.0,\n  \"tie_word_embeddings\": false,\n  \"torch_dtype\": \"%s\",\n"
    "  \"transformers_version\": \"4.43.0.dev0\",\n  \"use_cache\": true,\n"
    "  \"vocab_size\": 128256\n}\n";

int ck_hf_shape_named(const char *type, const char *name, CkShape *s)
{
    if (!strcmp(name, "tiny"))
        return ck_hf_shape(type, s);
    if (!strcmp(name, "tinyllama") && !strcmp(type, "llama")) {
        *s = (CkShape){.type = CK_LLAMA, .vocab = 32000, .dim = 2048, .hidden = 5632,
                       .layers = 22, .heads = 32, .kv_heads = 4, .seq = 2048,
                       .published = tinyllama_config};
        return 0;
    }
    if (!strcmp(name, "llama3-8b") && !strcmp(type, "llama")) {
        *s = (CkShape){.type = CK_LLAMA, .vocab = 128256, .dim = 4096, .hidden = 14336,
                       .layers = 32, .heads = 32, .kv_heads = 8, .seq = 131072,
                       .published = llama3_8b_config, .llama3_tok = 1};
        return 0;
    }
    if (!strcmp(name, "qwen2-0.5b") && !strcmp(type, "qwen2")) {
        /* Qwen2-0.5B's dimensions (q, k, v biases and tied embeddings, as
         * every qwen2 of the tools), a cache of 4096 rows: for make bench */
        *s = (CkShape){.type = CK_QWEN2, .vocab = 151936, .dim = 896, .hidden = 4864,
                       .layers = 24, .heads = 14, .kv_heads = 2, .seq = 4096, .tied = 1};
        return 0;
    }
    if (!strcmp(name, "blocks") && !strcmp(type, "llama")) {
        /* rows of 256 and 512, which every quantized type's block divides;
         * 8 layers, for q4_k_m's mix (tests/quant.sh) */
        *s = (CkShape){.type = CK_LLAMA, .vocab = 320, .dim = 256, .hidden = 512, .layers = 8,
                       .heads = 4, .kv_heads = 2, .seq = 64, .interleaved = 1};
        return 0;
    }
    if (!strcmp(name, "blocks") && !strcmp(type, "qwen3")) {
        /* rows of 256 and 512, so FP8's blocks of 128 (tests/fp8.sh) */
        *s = (CkShape){.type = CK_QWEN3, .vocab = 350, .dim = 256, .hidden = 512, .layers = 2,
                       .heads = 4, .kv_heads = 2, .head_dim = 64, .seq = 64, .tied = 1};
        return 0;
    }
    if (!strcmp(name, "blocks384") && !strcmp(type, "llama")) {
        /* down_proj's rows of 384, 3 blocks of 128, which 2 ranks do not
         * split by columns held f8_e4m3 (tests/mpi.sh) */
        *s = (CkShape){.type = CK_LLAMA, .vocab = 320, .dim = 256, .hidden = 384, .layers = 2,
                       .heads = 4, .kv_heads = 2, .seq = 64, .interleaved = 1};
        return 0;
    }
    if (!strcmp(name, "small") && !strcmp(type, "gpt_oss")) {
        /* stories110M's width, 32 experts of 768 (680 MB of them in
         * bf16, 180 MB in MXFP4): to time experts that stream from memory */
        *s = (CkShape){.type = CK_GPTOSS, .vocab = 1024, .dim = 768, .hidden = 768, .layers = 6,
                       .heads = 12, .kv_heads = 4, .head_dim = 64, .seq = 256, .experts = 32,
                       .top_k = 4, .moe_hidden = 768, .norm_topk = 1, .window = 128};
        return 0;
    }
    if (strcmp(name, "small") || strcmp(type, "qwen3_moe"))
        return -1;
    *s = (CkShape){.type = CK_QWEN3_MOE, .vocab = 1024, .dim = 512, .hidden = 1024, .layers = 4,
                   .heads = 8, .kv_heads = 4, .head_dim = 64, .seq = 256, .experts = 32,
                   .top_k = 4, .moe_hidden = 256, .norm_topk = 1};
    return 0;
}

int ck_llama2c_shape(const char *name, CkShape *s)
{
    static const struct {
        const char *name;
        int vocab, dim, hidden, layers, heads, kv_heads, seq;
    } shapes[] = {
        {"tiny", 320, 64, 96, 2, 4, 2, 32},
        {"stories15M", 32000, 288, 768, 6, 6, 6, 256},
        {"stories110M", 32000, 768, 2048, 12, 12, 12, 1024},
        {"tinyllama", 32000, 2048, 5632, 22, 32, 4, 2048},    /* 4.4 GB, to set beside llama.cpp */
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        if (!strcmp(name, shapes[i].name)) {
            *s = (CkShape){.type = CK_LLAMA, .vocab = shapes[i].vocab, .dim = shapes[i].dim,
                           .hidden = shapes[i].hidden, .layers = shapes[i].layers,
                           .heads = shapes[i].heads, .kv_heads = shapes[i].kv_heads,
                           .seq = shapes[i].seq, .tied = 1, .interleaved = 1};
            return 0;
        }
    return -1;
}

/* ---- the forward passes ----------------------------------------------------- */

/* out[n] = w[n, k] x[k] (+ b) */
static void matvec(float *out, const float *w, const float *x, const float *b, int n, int k)
{
    for (int i = 0; i < n; i++) {
        double sum = b ? b[i] : 0;
        for (int j = 0; j < k; j++)
            sum += (double)w[(int64_t)i * k + j] * x[j];
        out[i] = (float)sum;
    }
}

/* out[n] = x[k] w[k, n] + b: a Conv1D */
static void conv1d(float *out, const float *x, const float *w, const float *b, int k, int n)
{
    for (int i = 0; i < n; i++) {
        double sum = b[i];
        for (int j = 0; j < k; j++)
            sum += (double)x[j] * w[(int64_t)j * n + i];
        out[i] = (float)sum;
    }
}

/* x / rms(x) * w, or * (1 + w) when one (GemmaRMSNorm) */
static void rmsnorm(float *out, const float *x, const float *w, int n, double eps, int one)
{
    double ss = 0;
    for (int i = 0; i < n; i++)
        ss += (double)x[i] * x[i];
    double r = 1.0 / sqrt(ss / n + eps);
    for (int i = 0; i < n; i++)
        out[i] = (float)(x[i] * r * (one + (double)w[i]));
}

static void layernorm(float *out, const float *x, const float *w, const float *b, int n)
{
    double mean = 0, var = 0;
    for (int i = 0; i < n; i++)
        mean += x[i];
    mean /= n;
    for (int i = 0; i < n; i++)
        var += (x[i] - mean) * (x[i] - mean);
    double r = 1.0 / sqrt(var / n + 1e-5);
    for (int i = 0; i < n; i++)
        out[i] = (float)((x[i] - mean) * r * w[i] + b[i]);
}

static void softmax(float *x, int n)
{
    float mx = x[0];
    for (int i = 1; i < n; i++)
        mx = x[i] > mx ? x[i] : mx;
    double sum = 0;
    for (int i = 0; i < n; i++)
        sum += (x[i] = expf(x[i] - mx));
    for (int i = 0; i < n; i++)
        x[i] = (float)(x[i] / sum);
}

static float silu(float x) { return x / (1.0f + expf(-x)); }

/* GptOssAttention's eager softmax: the sink's logit concatenated to the
 * scores, the max subtracted, softmaxed, the sink's column dropped. */
static void softmax_sink(float *x, int n, float sink)
{
    float mx = sink;
    for (int i = 0; i < n; i++)
        mx = x[i] > mx ? x[i] : mx;
    double sum = expf(sink - mx);
    for (int i = 0; i < n; i++)
        sum += (x[i] = expf(x[i] - mx));
    for (int i = 0; i < n; i++)
        x[i] = (float)(x[i] / sum);
}

static const float *L_sinks(const CkModel *m, int l) { return m->L[l].sinks; }

/* Rotary embedding of n heads of hd at pos: pairs (2i, 2i+1) (llama2.c
 * run.c) or (i, i + hd/2) (transformers' rotate_half), frequency
 * theta^(-2i/hd). */
/* transformers' _compute_llama3_parameters, as torch.where writes it:
 * low frequencies divided by the factor, high ones kept, the band
 * between blended by the context's length over the wavelength. */
static double llama3_freq(double inv_freq)
{
    const double factor = 8, low = 1, high = 4, old = 32;
    double wavelen = 2 * M_PI / inv_freq;
    double scaled = wavelen > old / low ? inv_freq / factor : inv_freq;
    double smooth = (old / wavelen - low) / (high - low);
    double smoothed = (1 - smooth) * scaled / factor + smooth * scaled;
    int medium = !(wavelen < old / high) && !(wavelen > old / low);
    return medium ? smoothed : scaled;
}

/* transformers' _compute_yarn_parameters for gpt_oss (truncate false):
 * the dimensions where a pair turns beta_fast (32) and beta_slow (1)
 * times over the original context bound a linear ramp from the plain
 * frequency to it over the factor. */
static double yarn_dim(double turns, int dim, double base, double orig)
{
    return dim * log(orig / (turns * 2 * M_PI)) / (2 * log(base));
}

static double yarn_freq(int i, int dim, double base, double orig)
{
    double low = fmax(yarn_dim(32, dim, base, orig), 0);
    double high = fmin(yarn_dim(1, dim, base, orig), dim - 1);
    if (low == high)
        high += 0.001;
    double ramp = fmin(fmax((i - low) / (high - low), 0), 1), extrapolation = 1 - ramp;
    double pos_freq = pow(base, 2.0 * i / dim);
    return 1 / (CK_OSS_FACTOR * pos_freq) * (1 - extrapolation) + 1 / pos_freq * extrapolation;
}

/* rope; yarn_orig > 0: YaRN's frequencies and cos, sin times its
 * attention factor 0.1 ln(factor) + 1 */
static void rope(float *x, int n, int hd, int pos, double theta, int interleaved, int llama3,
                 int yarn_orig)
{
    double mscale = yarn_orig ? 0.1 * log(CK_OSS_FACTOR) + 1 : 1;
    for (int h = 0; h < n; h++)
        for (int i = 0; i < hd / 2; i++) {
            double f = yarn_orig ? yarn_freq(i, hd, theta, yarn_orig) : pow(theta, -2.0 * i / hd);
            double a = pos * (llama3 ? llama3_freq(f) : f);
            float c = (float)(mscale * cos(a)), s = (float)(mscale * sin(a));
            float *p = x + h * hd + (interleaved ? 2 * i : i);
            float *q = interleaved ? p + 1 : p + hd / 2;
            float x0 = *p, x1 = *q;
            *p = x0 * c - x1 * s;
            *q = x0 * s + x1 * c;
        }
}

/* Gemma 2's and 3's sliding layers: 0, 2, 4, ... (Gemma 3's pattern is
 * 2 here); the Qwens' from max_window_layers, 1 here; every layer of the
 * others. */
static int ck_sliding(const CkModel *m, int l)
{
    CkType t = m->s.type;
    return t == CK_GEMMA2 || t == CK_GEMMA3 || t == CK_GPTOSS    ? l % 2 == 0
           : t == CK_QWEN2 || t == CK_QWEN3 || t == CK_QWEN3_MOE ? l >= 1
                                                                 : 1;
}

/* Attention of the heads of m->q at pos over the layer's cache rows
 * 0..pos (in a sliding window, the last `window` of them), into out
 * [heads * hd]: the softmax of scale q . k (Gemma 2's and 3's scale,
 * Gemma 2's cap); query head h reads kv head h / (heads / kv_heads). */
static void attend(CkModel *m, int l, int pos, float *out)
{
    int hd = m->hd, group = m->s.heads / m->s.kv_heads, g2 = m->s.type == CK_GEMMA2;
    double qpas = m->s.qpas ? m->s.qpas : CK_G2_QPAS;
    double scale = 1 / sqrt(g2 || m->s.type == CK_GEMMA3 ? qpas : (double)hd);
    int w = m->s.window && ck_sliding(m, l) ? m->s.window : 0;
    int lo = w && pos - w + 1 > 0 ? pos - w + 1 : 0;
    const float *kc = m->kc + (int64_t)l * m->s.seq * m->kvd, *vc = m->vc + (int64_t)l * m->s.seq * m->kvd;
    for (int h = 0; h < m->s.heads; h++) {
        const float *q = m->q + h * hd;
        int kvh = h / group;
        for (int t = lo; t <= pos; t++) {
            double dot = 0;
            for (int i = 0; i < hd; i++)
                dot += (double)q[i] * kc[(int64_t)t * m->kvd + kvh * hd + i];
            double sc = dot * scale;
            m->att[t] = (float)(g2 ? CK_G2_ATTN_CAP * tanh(sc / CK_G2_ATTN_CAP) : sc);
        }
        if (L_sinks(m, l))
            softmax_sink(m->att + lo, pos + 1 - lo, L_sinks(m, l)[h]);
        else
            softmax(m->att + lo, pos + 1 - lo);
        for (int i = 0; i < hd; i++) {
            double sum = 0;
            for (int t = lo; t <= pos; t++)
                sum += (double)m->att[t] * vc[(int64_t)t * m->kvd + kvh * hd + i];
            out[h * hd + i] = (float)sum;
        }
    }
}

static float gelu_tanh(float x);

/* y = down(act(gate x) * up x), gate and up [n, D], down [D, n]: act
 * silu, or GemmaMLP's gelu_pytorch_tanh */
static void swiglu(CkModel *m, float *y, const float *x, const float *gate, const float *up,
                   const float *down, int n)
{
    int D = m->s.dim;
    matvec(m->h1, gate, x, NULL, n, D);
    matvec(m->h2, up, x, NULL, n, D);
    for (int i = 0; i < n; i++)
        m->h1[i] = (ck_is_gemma(m) ? gelu_tanh(m->h1[i]) : silu(m->h1[i])) * m->h2[i];
    matvec(y, down, m->h1, NULL, D, n);
}

/* Qwen3MoeSparseMoeBlock: softmax over the router's logits, the top_k
 * (ties to the lower index), renormalised when norm_topk_prob. */
static void moe(CkModel *m, const CkLayer *L, float *y, const float *x)
{
    int D = m->s.dim, E = m->s.experts, I = m->s.moe_hidden;
    float p[256], out[1024];
    int used[256] = {0};
    matvec(p, L->router, x, NULL, E, D);
    softmax(p, E);
    int pick[64];
    double total = 0;
    for (int k = 0; k < m->s.top_k; k++) {
        int best = -1;
        for (int e = 0; e < E; e++)
            if (!used[e] && (best < 0 || p[e] > p[best]))
                best = e;
        used[best] = 1;
        pick[k] = best;
        total += p[best];
    }
    memset(y, 0, sizeof *y * (size_t)D);
    for (int k = 0; k < m->s.top_k; k++) {
        int64_t e = pick[k];
        double w = m->s.norm_topk ? p[e] / total : p[e];
        swiglu(m, out, x, L->eg + e * I * D, L->eu + e * I * D, L->ed + e * D * I, I);
        for (int i = 0; i < D; i++)
            y[i] += (float)(w * out[i]);
    }
}

/* GptOssMLP: GptOssTopKRouter (logits with the bias, their top_k, ties to
 * the lower index, softmaxed among themselves), then GptOssExperts:
 * gate and up with their biases, gate clamped at the limit from above,
 * up on both sides, (up + 1) * gate * sigmoid(alpha gate), down with its
 * bias, weighted by the router's score. */
static void moe_oss(CkModel *m, const CkLayer *L, float *y, const float *x)
{
    int D = m->s.dim, E = m->s.experts, I = m->s.moe_hidden, K = m->s.top_k;
    float logit[256], g[1024], u[1024], out[1024];
    int used[256] = {0}, pick[64];
    matvec(logit, L->router, x, L->rb, E, D);
    float w[64];
    for (int k = 0; k < K; k++) {
        int best = -1;
        for (int e = 0; e < E; e++)
            if (!used[e] && (best < 0 || logit[e] > logit[best]))
                best = e;
        used[best] = 1;
        pick[k] = best;
        w[k] = logit[best];
    }
    softmax(w, K);
    memset(y, 0, sizeof *y * (size_t)D);
    for (int k = 0; k < K; k++) {
        int64_t e = pick[k];
        matvec(g, L->eg + e * I * D, x, L->egb + e * I, I, D);
        matvec(u, L->eu + e * I * D, x, L->eub + e * I, I, D);
        for (int i = 0; i < I; i++) {
            float gc = fminf(g[i], (float)CK_OSS_LIMIT);
            float uc = fminf(fmaxf(u[i], -(float)CK_OSS_LIMIT), (float)CK_OSS_LIMIT);
            float glu = gc / (1.0f + expf(-(float)CK_OSS_ALPHA * gc));
            g[i] = (uc + 1) * glu;
        }
        matvec(out, L->ed + e * D * I, g, L->edb + e * D, D, I);
        for (int i = 0; i < D; i++)
            y[i] += w[k] * out[i];
    }
}

static void llama_step(CkModel *m, int token, int pos)
{
    const CkShape *s = &m->s;
    int D = s->dim, hd = m->hd;
    int oss = s->type == CK_GPTOSS;
    double eps = (s->type == CK_LLAMA && s->interleaved) || oss ? 1e-5 : 1e-6;
    double theta = s->type == CK_QWEN3_MOE || s->type == CK_QWEN3 || s->type == CK_GEMMA3 ? 1e6
                   : oss ? CK_OSS_THETA
                         : 1e4;
    int gemma = ck_is_gemma(m);
    /* GemmaModel: the embeddings times sqrt(hidden_size) as a float32 */
    float scale = gemma ? (float)sqrt((double)D) : 1.0f;
    for (int i = 0; i < D; i++)
        m->x[i] = m->embed[(int64_t)token * D + i] * scale;
    for (int l = 0; l < s->layers; l++) {
        const CkLayer *L = &m->L[l];
        rmsnorm(m->xb, m->x, L->attn_norm, D, eps, gemma);
        matvec(m->q, L->wq, m->xb, L->bq, m->qd, D);
        matvec(m->k, L->wk, m->xb, L->bk, m->kvd, D);
        matvec(m->v, L->wv, m->xb, L->bv, m->kvd, D);
        for (int h = 0; L->q_norm && h < s->heads; h++)
            rmsnorm(m->q + h * hd, m->q + h * hd, L->q_norm, hd, eps, gemma);
        for (int h = 0; L->k_norm && h < s->kv_heads; h++)
            rmsnorm(m->k + h * hd, m->k + h * hd, L->k_norm, hd, eps, gemma);
        /* Gemma 3's sliding layers turn at rope_local_base_freq */
        double th = s->type == CK_GEMMA3 && ck_sliding(m, l) ? 1e4 : theta;
        rope(m->q, s->heads, hd, pos, th, s->interleaved, s->llama3_rope, oss ? s->seq : 0);
        rope(m->k, s->kv_heads, hd, pos, th, s->interleaved, s->llama3_rope, oss ? s->seq : 0);
        int64_t row = ((int64_t)l * s->seq + pos) * m->kvd;
        memcpy(m->kc + row, m->k, sizeof(float) * (size_t)m->kvd);
        memcpy(m->vc + row, m->v, sizeof(float) * (size_t)m->kvd);
        attend(m, l, pos, m->xb);
        matvec(m->xb2, L->wo, m->xb, L->bo, D, m->qd);
        if (L->post_attn_norm)
            rmsnorm(m->xb2, m->xb2, L->post_attn_norm, D, eps, 1);
        for (int i = 0; i < D; i++)
            m->x[i] += m->xb2[i];
        rmsnorm(m->xb, m->x, L->ffn_norm, D, eps, gemma);
        if (L->router && oss)
            moe_oss(m, L, m->xb2, m->xb);
        else if (L->router)
            moe(m, L, m->xb2, m->xb);
        else
            swiglu(m, m->xb2, m->xb, L->w1, L->w3, L->w2, s->hidden);
        if (L->post_ffn_norm)
            rmsnorm(m->xb2, m->xb2, L->post_ffn_norm, D, eps, 1);
        for (int i = 0; i < D; i++)
            m->x[i] += m->xb2[i];
    }
    rmsnorm(m->x, m->x, m->norm, D, eps, gemma);
    matvec(m->logits, m->head, m->x, NULL, s->vocab, D);
    for (int i = 0; s->type == CK_GEMMA2 && i < s->vocab; i++)
        m->logits[i] = (float)(CK_G2_FINAL_CAP * tanh(m->logits[i] / CK_G2_FINAL_CAP));
}

static float gelu_tanh(float x)
{
    return 0.5f * x * (1.0f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
}

static void gpt2_step(CkModel *m, int token, int pos)
{
    const CkShape *s = &m->s;
    int D = s->dim;
    for (int i = 0; i < D; i++)
        m->x[i] = m->embed[(int64_t)token * D + i] + m->wpe[(int64_t)pos * D + i];
    for (int l = 0; l < s->layers; l++) {
        const CkLayer *L = &m->L[l];
        layernorm(m->xb, m->x, L->attn_norm, L->ln1_b, D);
        conv1d(m->q, m->xb, L->c_attn, L->c_attn_b, D, 3 * D);   /* q | k | v */
        int64_t row = ((int64_t)l * s->seq + pos) * m->kvd;
        memcpy(m->kc + row, m->q + D, sizeof(float) * (size_t)D);
        memcpy(m->vc + row, m->q + 2 * D, sizeof(float) * (size_t)D);
        attend(m, l, pos, m->xb);
        conv1d(m->xb2, m->xb, L->c_proj, L->c_proj_b, D, D);
        for (int i = 0; i < D; i++)
            m->x[i] += m->xb2[i];
        layernorm(m->xb, m->x, L->ffn_norm, L->ln2_b, D);
        conv1d(m->h1, m->xb, L->fc, L->fc_b, D, s->hidden);
        for (int i = 0; i < s->hidden; i++)
            m->h1[i] = gelu_tanh(m->h1[i]);
        conv1d(m->xb2, m->h1, L->proj, L->proj_b, s->hidden, D);
        for (int i = 0; i < D; i++)
            m->x[i] += m->xb2[i];
    }
    layernorm(m->x, m->x, m->norm, m->norm_b, D);
    matvec(m->logits, m->head, m->x, NULL, s->vocab, D);
}

const float *ck_step(CkModel *m, int token, int pos)
{
    if (m->s.type == CK_GPT2)
        gpt2_step(m, token, pos);
    else
        llama_step(m, token, pos);
    return m->logits;
}

void ck_reset(CkModel *m)
{
    int64_t kv = (int64_t)m->s.layers * m->s.seq * m->kvd;
    memset(m->kc, 0, sizeof(float) * (size_t)kv);
    memset(m->vc, 0, sizeof(float) * (size_t)kv);
}
