/* tests/import/ckpt.c: random checkpoints in the formats people have, and
 * the hand-written forward passes that are their reference (ckpt.h).
 *
 * Weights are uniform in [-1/sqrt(fan_in), 1/sqrt(fan_in)) (norms 1 +/-
 * 0.1, biases +/- 0.1), from SplitMix64, so activations stay of order 1
 * through the layers. The forward passes follow their sources line for
 * line, in float with double sums; they are written for clarity. */
#include "ckpt.h"

#include "frontend/import.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Gemma 2's query_pre_attn_scalar (not head_dim, so that the scale shows)
 * and its caps of the scores and logits, small enough to bite */
#define CK_G2_QPAS 24
#define CK_G2_ATTN_CAP 0.5
#define CK_G2_FINAL_CAP 3.0

typedef struct {
    float *attn_norm, *ffn_norm;            /* gpt2: ln_1, ln_2 weights */
    float *wq, *wk, *wv, *wo;               /* [out, in]; gpt2: unused */
    float *bq, *bk, *bv;                    /* qwen2 */
    float *q_norm, *k_norm;                 /* qwen3_moe: [head_dim] */
    float *w1, *w2, *w3;                    /* gate [H, D], down [D, H], up [H, D] */
    float *router, *eg, *eu, *ed;           /* qwen3_moe: [E, D], [E][I, D], [E][I, D], [E][D, I] */
    float *post_attn_norm, *post_ffn_norm;  /* gemma2: of attention's and the MLP's outputs */
    /* gpt2 (Conv1D: [in, out]) */
    float *ln1_b, *ln2_b, *c_attn, *c_attn_b, *c_proj, *c_proj_b, *fc, *fc_b, *proj, *proj_b;
} CkLayer;

struct CkModel {
    CkShape s;
    int hd, qd, kvd;            /* head_dim, heads * hd, kv_heads * hd */
    float *embed, *norm, *head; /* head == embed when tied; gpt2: ln_f weight */
    float *wpe, *norm_b;        /* gpt2 */
    CkLayer *L;
    float **owned;              /* every weight buffer, to free */
    int nowned;
    uint64_t rng;
    /* the forward pass */
    float *kc, *vc;             /* [layers][seq][kvd] */
    float *x, *xb, *xb2, *q, *k, *v, *att, *h1, *h2, *h3, *logits;
};

static const char *const type_names[] = {"llama", "qwen2",   "gpt2", "qwen3_moe", "qwen3",
                                          "mistral", "mixtral", "phi3", "gemma", "gemma2",
                                          "gemma3_text"};

const CkShape *ck_shape(const CkModel *m) { return &m->s; }

/* ---- random weights ------------------------------------------------------- */

static float uniform(CkModel *m)
{
    uint64_t z = (m->rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ z >> 30) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ z >> 27) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (float)((double)(z >> 40) * 0x1p-24 * 2.0 - 1.0);
}

/* f rounded to bfloat16, to nearest even (the values stay exact f32). */
static float to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    u = (u + 0x7FFF + (u >> 16 & 1)) & 0xFFFF0000u;
    memcpy(&f, &u, 4);
    return f;
}

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
            w[i] = to_bf16(w[i]);
    }
    return w;
}

static float *matrix(CkModel *m, int64_t rows, int64_t cols)
{
    return weights(m, rows * cols, 0, 1.0f / sqrtf((float)cols));
}

static int is_gemma(const CkModel *m)
{
    return m->s.type == CK_GEMMA || m->s.type == CK_GEMMA2 || m->s.type == CK_GEMMA3;
}

/* A norm's weights: near 1, or near 0 for Gemma's, which scale by 1 + w. */
static float *norm(CkModel *m, int64_t n) { return weights(m, n, is_gemma(m) ? 0 : 1, 0.1f); }
static float *bias(CkModel *m, int64_t n) { return weights(m, n, 0, 0.1f); }

static int is_moe(const CkModel *m, int l)
{
    return (m->s.type == CK_QWEN3_MOE || m->s.type == CK_MIXTRAL) && m->s.experts &&
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
    if (s->type == CK_QWEN2) {
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
    if (is_moe(m, l)) {
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
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        if (!strcmp(type, type_names[shapes[i].type])) {
            *s = shapes[i];
            return 0;
        }
    return -1;
}

int ck_hf_shape_named(const char *type, const char *name, CkShape *s)
{
    if (!strcmp(name, "tiny"))
        return ck_hf_shape(type, s);
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

static void rope(float *x, int n, int hd, int pos, double theta, int interleaved, int llama3)
{
    for (int h = 0; h < n; h++)
        for (int i = 0; i < hd / 2; i++) {
            double f = pow(theta, -2.0 * i / hd);
            double a = pos * (llama3 ? llama3_freq(f) : f);
            float c = (float)cos(a), s = (float)sin(a);
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
    return t == CK_GEMMA2 || t == CK_GEMMA3                      ? l % 2 == 0
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
    double scale = 1 / sqrt(g2 || m->s.type == CK_GEMMA3 ? CK_G2_QPAS : (double)hd);
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
        m->h1[i] = (is_gemma(m) ? gelu_tanh(m->h1[i]) : silu(m->h1[i])) * m->h2[i];
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

static void llama_step(CkModel *m, int token, int pos)
{
    const CkShape *s = &m->s;
    int D = s->dim, hd = m->hd;
    double eps = s->type == CK_LLAMA && s->interleaved ? 1e-5 : 1e-6;
    double theta = s->type == CK_QWEN3_MOE || s->type == CK_QWEN3 || s->type == CK_GEMMA3 ? 1e6
                                                                                          : 1e4;
    int gemma = is_gemma(m);
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
        rope(m->q, s->heads, hd, pos, th, s->interleaved, s->llama3_rope);
        rope(m->k, s->kv_heads, hd, pos, th, s->interleaved, s->llama3_rope);
        int64_t row = ((int64_t)l * s->seq + pos) * m->kvd;
        memcpy(m->kc + row, m->k, sizeof(float) * (size_t)m->kvd);
        memcpy(m->vc + row, m->v, sizeof(float) * (size_t)m->kvd);
        attend(m, l, pos, m->xb);
        matvec(m->xb2, L->wo, m->xb, NULL, D, m->qd);
        if (L->post_attn_norm)
            rmsnorm(m->xb2, m->xb2, L->post_attn_norm, D, eps, 1);
        for (int i = 0; i < D; i++)
            m->x[i] += m->xb2[i];
        rmsnorm(m->xb, m->x, L->ffn_norm, D, eps, gemma);
        if (L->router)
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

/* ---- llama2.c files ---------------------------------------------------------- */

static int put(FILE *f, const void *p, size_t bytes) { return fwrite(p, 1, bytes, f) == bytes ? 0 : -1; }

static int put_i32(FILE *f, int32_t v)
{
    unsigned char b[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16),
                          (unsigned char)(v >> 24)};
    return put(f, b, 4);
}

/* Floats as little-endian bytes (this host's order is checked once). */
static int put_f32(FILE *f, const float *x, int64_t n)
{
    const uint32_t one = 1;
    if (*(const unsigned char *)&one != 1)
        return errno = ENOTSUP, -1;
    return put(f, x, (size_t)n * sizeof *x);
}

/* Member `field` of every layer, [n] floats each, in layer order. */
static int put_layers(FILE *f, const CkModel *m, size_t field, int64_t n)
{
    for (int l = 0; l < m->s.layers; l++)
        if (put_f32(f, *(float **)((char *)&m->L[l] + field), n))
            return -1;
    return 0;
}

#define LAYERS(f, m, member, n) put_layers(f, m, offsetof(CkLayer, member), n)

int ck_write_llama2c(const CkModel *m, const char *path, int version)
{
    const CkShape *s = &m->s;
    int64_t D = s->dim, H = s->hidden, V = s->vocab, kvd = m->kvd;
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    int rc = 0;
    if (version == 1) {
        rc |= put_i32(f, 0x616b3432) | put_i32(f, 1);
    }
    int32_t hdr[7] = {s->dim, s->hidden, s->layers, s->heads, s->kv_heads,
                      version == 0 && !s->tied ? -s->vocab : s->vocab, s->seq};
    for (int i = 0; i < 7; i++)
        rc |= put_i32(f, hdr[i]);
    if (version == 1) {
        unsigned char pad[256] = {0};
        pad[0] = (unsigned char)s->tied;
        rc |= put(f, pad, 256 - 36);
        rc |= LAYERS(f, m, attn_norm, D) | LAYERS(f, m, ffn_norm, D) | put_f32(f, m->norm, D);
        rc |= put_f32(f, m->embed, V * D);
    } else {
        rc |= put_f32(f, m->embed, V * D) | LAYERS(f, m, attn_norm, D);
    }
    rc |= LAYERS(f, m, wq, D * D) | LAYERS(f, m, wk, kvd * D) | LAYERS(f, m, wv, kvd * D) |
          LAYERS(f, m, wo, D * D);
    if (version == 0)
        rc |= LAYERS(f, m, ffn_norm, D);
    rc |= LAYERS(f, m, w1, H * D) | LAYERS(f, m, w2, D * H) | LAYERS(f, m, w3, H * D);
    if (version == 0) {
        rc |= put_f32(f, m->norm, D);
        for (int64_t i = 0; i < (int64_t)s->seq * m->hd; i++) {   /* freq_cis: unused */
            float z = 0;
            rc |= put_f32(f, &z, 1);
        }
    }
    if (!s->tied)
        rc |= put_f32(f, m->head, V * D);
    int e = errno;
    if (fclose(f) != 0 && !rc)
        rc = -1, e = errno;
    errno = e;
    return rc ? -1 : 0;
}

/* ---- Hugging Face folders ------------------------------------------------------ */

typedef struct {
    ImpTensor *t;
    int n, cap;
    void **bufs;                /* converted data, freed with the list */
    int nbufs;
    int bf16;
} List;

/* A tensor of the list; its data is converted to bytes now (BF16: the
 * upper halves, exact since the weights were rounded). */
static void add(List *l, const char *name, const float *x, int rank, int64_t d0, int64_t d1,
                int64_t d2, int64_t d3)
{
    ImpTensor *t = &l->t[l->n++];
    int64_t dims[4] = {d0, d1, d2, d3}, n = 1;
    memset(t, 0, sizeof *t);
    t->name = strdup(name);
    t->rank = rank;
    for (int i = 0; i < rank; i++)
        n *= t->dims[i] = dims[i];
    t->dtype = l->bf16 ? "BF16" : "F32";
    unsigned char *b = malloc((size_t)n * 4);
    for (int64_t i = 0; b && i < n; i++) {
        uint32_t u;
        memcpy(&u, &x[i], 4);
        for (int k = 0; k < (l->bf16 ? 2 : 4); k++)
            b[i * (l->bf16 ? 2 : 4) + k] = (unsigned char)(u >> (8 * (k + (l->bf16 ? 2 : 0))));
    }
    l->bufs[l->nbufs++] = b;
    l->bufs[l->nbufs++] = (void *)t->name;
    t->data = b;
}

#define NAME(...) (snprintf(name, sizeof name, __VA_ARGS__), name)

/* wq or wk as transformers' convert_llama_weights_to_hf.py stores them:
 * within each head, row 2i + j moves to j * hd/2 + i, which turns the
 * interleaved pairs into rotate_half's. */
static float *permuted(const CkModel *m, const float *w, int heads)
{
    int hd = m->hd, D = m->s.dim;
    float *p = malloc(sizeof *p * (size_t)heads * hd * D);
    for (int h = 0; p && h < heads; h++)
        for (int i = 0; i < hd / 2; i++)
            for (int j = 0; j < 2; j++)
                memcpy(p + ((int64_t)h * hd + j * hd / 2 + i) * D,
                       w + ((int64_t)h * hd + 2 * i + j) * D, sizeof *p * (size_t)D);
    return p;
}

/* The n matrices m[i] of rows[i] x cols one under another, in a buffer
 * ls frees (out of memory: the test tools stop). */
static float *rows_of(List *ls, const float *const *m, const int64_t *rows, int n, int64_t cols)
{
    int64_t total = 0;
    for (int i = 0; i < n; i++)
        total += rows[i];
    float *p = malloc(sizeof *p * (size_t)(total * cols)), *at = p;
    if (!p)
        abort();
    for (int i = 0; i < n; at += rows[i] * cols, i++)
        memcpy(at, m[i], sizeof *p * (size_t)(rows[i] * cols));
    ls->bufs[ls->nbufs++] = p;
    return p;
}

static void hf_llama(const CkModel *m, List *ls)
{
    const CkShape *s = &m->s;
    int64_t D = s->dim, H = s->hidden, V = s->vocab, E = s->experts, I = s->moe_hidden;
    char name[160];
    add(ls, "model.embed_tokens.weight", m->embed, 2, V, D, 0, 0);
    for (int l = 0; l < s->layers; l++) {
        const CkLayer *L = &m->L[l];
        char pre[64];
        snprintf(pre, sizeof pre, "model.layers.%d.", l);
        float *wq = L->wq, *wk = L->wk;
        if (s->interleaved) {
            ls->bufs[ls->nbufs++] = wq = permuted(m, L->wq, s->heads);
            ls->bufs[ls->nbufs++] = wk = permuted(m, L->wk, s->kv_heads);
        }
        add(ls, NAME("%sinput_layernorm.weight", pre), L->attn_norm, 1, D, 0, 0, 0);
        if (s->type == CK_PHI3) {       /* q's rows, k's, v's; gate's, up's */
            const float *qkv[] = {wq, wk, L->wv}, *gu[] = {L->w1, L->w3};
            int64_t qkv_rows[] = {m->qd, m->kvd, m->kvd}, gu_rows[] = {H, H};
            add(ls, NAME("%sself_attn.qkv_proj.weight", pre), rows_of(ls, qkv, qkv_rows, 3, D),
                2, m->qd + 2 * m->kvd, D, 0, 0);
            add(ls, NAME("%smlp.gate_up_proj.weight", pre), rows_of(ls, gu, gu_rows, 2, D), 2,
                2 * H, D, 0, 0);
        } else {
            add(ls, NAME("%sself_attn.q_proj.weight", pre), wq, 2, m->qd, D, 0, 0);
            add(ls, NAME("%sself_attn.k_proj.weight", pre), wk, 2, m->kvd, D, 0, 0);
            add(ls, NAME("%sself_attn.v_proj.weight", pre), L->wv, 2, m->kvd, D, 0, 0);
        }
        add(ls, NAME("%sself_attn.o_proj.weight", pre), L->wo, 2, D, m->qd, 0, 0);
        if (s->type == CK_PHI3)
            add(ls, NAME("%smlp.down_proj.weight", pre), L->w2, 2, D, H, 0, 0);
        if (L->bq) {
            add(ls, NAME("%sself_attn.q_proj.bias", pre), L->bq, 1, m->qd, 0, 0, 0);
            add(ls, NAME("%sself_attn.k_proj.bias", pre), L->bk, 1, m->kvd, 0, 0, 0);
            add(ls, NAME("%sself_attn.v_proj.bias", pre), L->bv, 1, m->kvd, 0, 0, 0);
        }
        if (L->q_norm) {
            add(ls, NAME("%sself_attn.q_norm.weight", pre), L->q_norm, 1, m->hd, 0, 0, 0);
            add(ls, NAME("%sself_attn.k_norm.weight", pre), L->k_norm, 1, m->hd, 0, 0, 0);
        }
        if (L->post_attn_norm) {         /* gemma2: norms around the MLP too */
            add(ls, NAME("%spost_attention_layernorm.weight", pre), L->post_attn_norm, 1, D, 0, 0, 0);
            add(ls, NAME("%spre_feedforward_layernorm.weight", pre), L->ffn_norm, 1, D, 0, 0, 0);
            add(ls, NAME("%spost_feedforward_layernorm.weight", pre), L->post_ffn_norm, 1, D, 0, 0, 0);
        } else {
            add(ls, NAME("%spost_attention_layernorm.weight", pre), L->ffn_norm, 1, D, 0, 0, 0);
        }
        if (L->router && s->type == CK_MIXTRAL) {
            add(ls, NAME("%sblock_sparse_moe.gate.weight", pre), L->router, 2, E, D, 0, 0);
            for (int64_t e = 0; e < E; e++) {
                add(ls, NAME("%sblock_sparse_moe.experts.%d.w1.weight", pre, (int)e), L->eg + e * I * D, 2, I, D, 0, 0);
                add(ls, NAME("%sblock_sparse_moe.experts.%d.w3.weight", pre, (int)e), L->eu + e * I * D, 2, I, D, 0, 0);
                add(ls, NAME("%sblock_sparse_moe.experts.%d.w2.weight", pre, (int)e), L->ed + e * D * I, 2, D, I, 0, 0);
            }
        } else if (L->router) {
            add(ls, NAME("%smlp.gate.weight", pre), L->router, 2, E, D, 0, 0);
            for (int64_t e = 0; e < E; e++) {
                add(ls, NAME("%smlp.experts.%d.gate_proj.weight", pre, (int)e), L->eg + e * I * D, 2, I, D, 0, 0);
                add(ls, NAME("%smlp.experts.%d.up_proj.weight", pre, (int)e), L->eu + e * I * D, 2, I, D, 0, 0);
                add(ls, NAME("%smlp.experts.%d.down_proj.weight", pre, (int)e), L->ed + e * D * I, 2, D, I, 0, 0);
            }
        } else if (s->type != CK_PHI3) {
            add(ls, NAME("%smlp.gate_proj.weight", pre), L->w1, 2, H, D, 0, 0);
            add(ls, NAME("%smlp.up_proj.weight", pre), L->w3, 2, H, D, 0, 0);
            add(ls, NAME("%smlp.down_proj.weight", pre), L->w2, 2, D, H, 0, 0);
        }
    }
    add(ls, "model.norm.weight", m->norm, 1, D, 0, 0, 0);
    if (!s->tied)
        add(ls, "lm_head.weight", m->head, 2, V, D, 0, 0);
}

static void hf_gpt2(const CkModel *m, List *ls)
{
    const CkShape *s = &m->s;
    int64_t D = s->dim, H = s->hidden, V = s->vocab, P = s->seq;
    const char *pre = s->gpt2_hub ? "" : "transformer.";
    char name[160];
    add(ls, NAME("%swte.weight", pre), m->embed, 2, V, D, 0, 0);
    add(ls, NAME("%swpe.weight", pre), m->wpe, 2, P, D, 0, 0);
    for (int l = 0; l < s->layers; l++) {
        const CkLayer *L = &m->L[l];
        add(ls, NAME("%sh.%d.ln_1.weight", pre, l), L->attn_norm, 1, D, 0, 0, 0);
        add(ls, NAME("%sh.%d.ln_1.bias", pre, l), L->ln1_b, 1, D, 0, 0, 0);
        add(ls, NAME("%sh.%d.attn.c_attn.weight", pre, l), L->c_attn, 2, D, 3 * D, 0, 0);
        add(ls, NAME("%sh.%d.attn.c_attn.bias", pre, l), L->c_attn_b, 1, 3 * D, 0, 0, 0);
        add(ls, NAME("%sh.%d.attn.c_proj.weight", pre, l), L->c_proj, 2, D, D, 0, 0);
        add(ls, NAME("%sh.%d.attn.c_proj.bias", pre, l), L->c_proj_b, 1, D, 0, 0, 0);
        add(ls, NAME("%sh.%d.ln_2.weight", pre, l), L->ffn_norm, 1, D, 0, 0, 0);
        add(ls, NAME("%sh.%d.ln_2.bias", pre, l), L->ln2_b, 1, D, 0, 0, 0);
        add(ls, NAME("%sh.%d.mlp.c_fc.weight", pre, l), L->fc, 2, D, H, 0, 0);
        add(ls, NAME("%sh.%d.mlp.c_fc.bias", pre, l), L->fc_b, 1, H, 0, 0, 0);
        add(ls, NAME("%sh.%d.mlp.c_proj.weight", pre, l), L->proj, 2, H, D, 0, 0);
        add(ls, NAME("%sh.%d.mlp.c_proj.bias", pre, l), L->proj_b, 1, D, 0, 0, 0);
        if (s->gpt2_hub) {                /* the causal mask buffer of old checkpoints */
            float *mask = malloc(sizeof *mask * (size_t)(P * P));
            for (int64_t i = 0; mask && i < P * P; i++)
                mask[i] = i % P <= i / P;
            ls->bufs[ls->nbufs++] = mask;
            add(ls, NAME("h.%d.attn.bias", l), mask, 4, 1, 1, P, P);
        }
    }
    add(ls, NAME("%sln_f.weight", pre), m->norm, 1, D, 0, 0, 0);
    add(ls, NAME("%sln_f.bias", pre), m->norm_b, 1, D, 0, 0, 0);
    if (!s->tied)
        add(ls, "lm_head.weight", m->head, 2, V, D, 0, 0);
}

static void config_llama(FILE *f, const CkModel *m)
{
    const CkShape *s = &m->s;
    static const char *const arch[] = {"LlamaForCausalLM",    "Qwen2ForCausalLM",
                                       "",                    "Qwen3MoeForCausalLM",
                                       "Qwen3ForCausalLM",    "MistralForCausalLM",
                                       "MixtralForCausalLM",  "Phi3ForCausalLM",
                                       "GemmaForCausalLM",    "Gemma2ForCausalLM",
                                       "Gemma3ForCausalLM"};
    fprintf(f, "  \"architectures\": [\"%s\"],\n  \"attention_dropout\": 0.0,\n"
            "  \"bos_token_id\": 1,\n  \"eos_token_id\": 2,\n  \"hidden_act\": \"%s\",\n"
            "  \"hidden_size\": %d,\n  \"initializer_range\": 0.02,\n"
            "  \"intermediate_size\": %d,\n  \"max_position_embeddings\": %d,\n"
            "  \"num_attention_heads\": %d,\n  \"num_hidden_layers\": %d,\n"
            "  \"num_key_value_heads\": %d,\n  \"rms_norm_eps\": %g,\n  \"rope_scaling\": %s,\n"
            "  \"rope_theta\": %s,\n  \"tie_word_embeddings\": %s,\n  \"vocab_size\": %d,\n",
            arch[s->type], s->type == CK_GEMMA ? "gelu" : is_gemma(m) ? "gelu_pytorch_tanh" : "silu",
            s->dim, s->hidden, s->seq,
            s->heads, s->layers, s->kv_heads,
            s->type == CK_LLAMA && s->interleaved ? 1e-5 : 1e-6,
            s->llama3_rope ? "{\"factor\": 8.0, \"low_freq_factor\": 1.0, \"high_freq_factor\": 4.0,"
                             " \"original_max_position_embeddings\": 32, \"rope_type\": \"llama3\"}"
                           : "null",
            s->type == CK_QWEN3_MOE || s->type == CK_QWEN3 || s->type == CK_GEMMA3 ? "1000000.0"
                                                                                 : "10000.0",
            s->tied ? "true" : "false",
            s->vocab);
    if (s->type == CK_LLAMA)
        fprintf(f, "  \"attention_bias\": false,\n  \"mlp_bias\": false,\n  \"pretraining_tp\": 1,\n");
    /* without a window of its own, one no less than the cache: none at work */
    int window = s->window ? s->window : s->type == CK_MISTRAL ? 4096 : s->seq;
    if (s->type == CK_MISTRAL)
        fprintf(f, "  \"sliding_window\": %d,\n", window);
    else if (s->type == CK_PHI3)
        fprintf(f, "  \"sliding_window\": %d,\n  \"embd_pdrop\": 0.0,\n  \"resid_pdrop\": 0.0,\n"
                "  \"original_max_position_embeddings\": %d,\n  \"attention_bias\": false,\n"
                "  \"pad_token_id\": 0,\n", window, s->seq);
    else if (s->type == CK_MIXTRAL && s->window)
        fprintf(f, "  \"sliding_window\": %d,\n", window);
    if (s->type == CK_MIXTRAL)
        fprintf(f, "%s  \"num_local_experts\": %d,\n"
                "  \"num_experts_per_tok\": %d,\n  \"output_router_logits\": false,\n"
                "  \"router_aux_loss_coef\": 0.02,\n  \"router_jitter_noise\": 0.0,\n",
                s->window ? "" : "  \"sliding_window\": null,\n", s->experts, s->top_k);
    else if (s->type != CK_LLAMA && s->type != CK_PHI3 && s->type != CK_GEMMA &&
             s->type != CK_GEMMA2 && s->type != CK_MISTRAL && s->type != CK_GEMMA3)
        fprintf(f, "  \"sliding_window\": %d,\n  \"max_window_layers\": %d,\n"
                "  \"use_sliding_window\": %s,\n", s->window ? s->window : 4096,
                s->window ? 1 : 21, s->window ? "true" : "false");
    if (s->type == CK_QWEN2)
        fprintf(f, "  \"use_mrope\": false,\n");
    if (s->type == CK_QWEN3)
        fprintf(f, "  \"head_dim\": %d,\n  \"attention_bias\": false,\n", m->hd);
    if (is_gemma(m))           /* hidden_activation rules */
        fprintf(f, "  \"head_dim\": %d,\n  \"attention_bias\": false,\n"
                "  \"hidden_activation\": \"gelu_pytorch_tanh\",\n  \"pad_token_id\": 0,\n", m->hd);
    if (s->type == CK_GEMMA2)
        fprintf(f, "  \"attn_logit_softcapping\": %g,\n  \"final_logit_softcapping\": %g,\n"
                "  \"query_pre_attn_scalar\": %d,\n  \"sliding_window\": %d,\n"
                "  \"cache_implementation\": \"hybrid\",\n", CK_G2_ATTN_CAP, CK_G2_FINAL_CAP,
                CK_G2_QPAS, window);
    if (s->type == CK_GEMMA3)  /* sliding layers 0, 2, ...; no caps */
        fprintf(f, "  \"attn_logit_softcapping\": null,\n  \"final_logit_softcapping\": null,\n"
                "  \"query_pre_attn_scalar\": %d,\n  \"sliding_window\": %d,\n"
                "  \"sliding_window_pattern\": 2,\n  \"rope_local_base_freq\": 10000,\n"
                "  \"cache_implementation\": \"hybrid\",\n", CK_G2_QPAS, window);
    if (s->type == CK_QWEN3_MOE) {
        fprintf(f, "  \"head_dim\": %d,\n  \"attention_bias\": false,\n  \"decoder_sparse_step\": 1,\n"
                "  \"num_experts\": %d,\n  \"num_experts_per_tok\": %d,\n"
                "  \"moe_intermediate_size\": %d,\n  \"norm_topk_prob\": %s,\n"
                "  \"output_router_logits\": false,\n  \"router_aux_loss_coef\": 0.001,\n"
                "  \"mlp_only_layers\": [", m->hd, s->experts, s->top_k, s->moe_hidden,
                s->norm_topk ? "true" : "false");
        for (int l = 0, first = 1; l < s->layers; l++)
            if (s->dense_layers >> l & 1)
                fprintf(f, "%s%d", first ? "" : ", ", l), first = 0;
        fprintf(f, "],\n");
    }
}

static void config_gpt2(FILE *f, const CkModel *m)
{
    const CkShape *s = &m->s;
    fprintf(f, "  \"activation_function\": \"gelu_new\",\n  \"architectures\": [\"GPT2LMHeadModel\"],\n"
            "  \"attn_pdrop\": 0.1,\n  \"bos_token_id\": 0,\n  \"embd_pdrop\": 0.1,\n"
            "  \"eos_token_id\": 0,\n  \"initializer_range\": 0.02,\n"
            "  \"layer_norm_epsilon\": 1e-05,\n  \"n_ctx\": %d,\n  \"n_embd\": %d,\n"
            "  \"n_head\": %d,\n  \"n_layer\": %d,\n  \"n_positions\": %d,\n  \"n_inner\": %d,\n"
            "  \"resid_pdrop\": 0.1,\n  \"summary_activation\": null,\n"
            "  \"summary_first_dropout\": 0.1,\n  \"summary_proj_to_labels\": true,\n"
            "  \"summary_type\": \"cls_index\",\n  \"summary_use_proj\": true,\n"
            "  \"task_specific_params\": {\"text-generation\": {\"do_sample\": true, \"max_length\": 50}},\n"
            "  \"vocab_size\": %d,\n", s->seq, s->dim, s->heads, s->layers, s->seq, s->hidden,
            s->vocab);
    if (!s->tied)
        fprintf(f, "  \"tie_word_embeddings\": false,\n");
}

/* config.json as transformers writes it, with the members of `extra`
 * (JSON text without braces) replacing or added to its own. */
static int write_config(const CkModel *m, const char *dir, const char *extra, char *why,
                        size_t whylen)
{
    char *text = NULL, path[4096];
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        return snprintf(why, whylen, "out of memory"), -1;
    fprintf(f, "{\n");
    if (m->s.type == CK_GPT2)
        config_gpt2(f, m);
    else
        config_llama(f, m);
    fprintf(f, "  \"torch_dtype\": \"%s\",\n  \"transformers_version\": \"4.51.0\",\n"
            "  \"use_cache\": true,\n  \"model_type\": \"%s\"\n}\n",
            m->s.bf16 ? "bfloat16" : "float32", type_names[m->s.type]);
    fclose(f);
    json_t *root = json_loads(text, 0, NULL), *more = NULL;
    free(text);
    if (extra) {
        text = malloc(strlen(extra) + 3);
        if (text)
            sprintf(text, "{%s}", extra);
        more = text ? json_loads(text, 0, NULL) : NULL;
        free(text);
    }
    snprintf(path, sizeof path, "%s/config.json", dir);
    int rc = !root || (extra && !more) ? -1 : more ? json_object_update(root, more) : 0;
    if (rc)
        snprintf(why, whylen, "config.json: cannot add %s", extra ? extra : "nothing");
    else if ((rc = json_dump_file(root, path, JSON_INDENT(2))))
        snprintf(why, whylen, "%s: cannot write", path);
    json_decref(root);
    json_decref(more);
    return rc;
}

static int write_index(const List *ls, const char *dir, int shards, char *why, size_t whylen)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    FILE *f = fopen(path, "w");
    if (!f)
        return snprintf(why, whylen, "%s: %s", path, strerror(errno)), -1;
    fprintf(f, "{\n  \"metadata\": {\"total_size\": 0, \"format\": \"pt\"},\n  \"weight_map\": {\n");
    for (int i = 0; i < ls->n; i++)
        fprintf(f, "    \"%s\": \"model-%05d-of-%05d.safetensors\"%s\n", ls->t[i].name,
                i * shards / ls->n + 1, shards, i + 1 < ls->n ? "," : "");
    fprintf(f, "  }\n}\n");
    return fclose(f);
}

int ck_write_hf(const CkModel *m, const char *dir, int shards, const char *extra, char *why,
                size_t whylen)
{
    int64_t most = 16 + (int64_t)m->s.layers * (20 + 3 * (int64_t)m->s.experts);
    List ls = {calloc((size_t)most, sizeof(ImpTensor)), 0, 0,
               calloc((size_t)(3 * most), sizeof(void *)), 0, m->s.bf16};
    int rc = -1;
    if (!ls.t || !ls.bufs)
        snprintf(why, whylen, "out of memory");
    else if (!write_config(m, dir, extra, why, whylen)) {
        (m->s.type == CK_GPT2 ? hf_gpt2 : hf_llama)(m, &ls);
        char path[4096];
        rc = 0;
        for (int s = 0; !rc && s < shards; s++) {
            if (shards == 1)
                snprintf(path, sizeof path, "%s/model.safetensors", dir);
            else
                snprintf(path, sizeof path, "%s/model-%05d-of-%05d.safetensors", dir, s + 1, shards);
            /* tensor i goes to shard i * shards / n, as write_index says */
            int lo = (ls.n * s + shards - 1) / shards, hi = (ls.n * (s + 1) + shards - 1) / shards;
            rc = imp_st_write(path, ls.t + lo, hi - lo, why, whylen);
        }
        if (!rc && shards > 1)
            rc = write_index(&ls, dir, shards, why, whylen);
    }
    for (int i = 0; i < ls.nbufs; i++)
        free(ls.bufs[i]);
    free(ls.bufs);
    free(ls.t);
    return rc;
}
