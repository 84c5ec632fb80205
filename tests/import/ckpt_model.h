/* tests/import/ckpt_model.h: what ckpt.c (the weights, the forward
 * passes) and ckpt_files.c (the files they are written as) share: a
 * checkpoint's weights, layer by layer. Not for the tests: they use
 * ckpt.h. */
#ifndef KILN_CKPT_MODEL_H
#define KILN_CKPT_MODEL_H

#include "ckpt.h"

#include <string.h>

/* Gemma 2's query_pre_attn_scalar (not head_dim, so that the scale shows)
 * and its caps of the scores and logits, small enough to bite */
#define CK_G2_QPAS 24
#define CK_G2_ATTN_CAP 0.5
#define CK_G2_FINAL_CAP 3.0

/* gpt_oss: rope_theta, YaRN's factor (over max_position_embeddings, the
 * original context), swiglu_limit and the SwiGLU's alpha */
#define CK_OSS_THETA 150000.0
#define CK_OSS_FACTOR 32.0
#define CK_OSS_LIMIT 7.0
#define CK_OSS_ALPHA 1.702

typedef struct {
    float *attn_norm, *ffn_norm;            /* gpt2: ln_1, ln_2 weights */
    float *wq, *wk, *wv, *wo;               /* [out, in]; gpt2: unused */
    float *bq, *bk, *bv;                    /* qwen2 */
    float *q_norm, *k_norm;                 /* qwen3_moe: [head_dim] */
    float *w1, *w2, *w3;                    /* gate [H, D], down [D, H], up [H, D] */
    float *router, *eg, *eu, *ed;           /* qwen3_moe: [E, D], [E][I, D], [E][I, D], [E][D, I] */
    float *post_attn_norm, *post_ffn_norm;  /* gemma2: of attention's and the MLP's outputs */
    /* gpt_oss: o's bias [D], sinks [heads], the router's bias [E], the
     * experts' biases [E][I], [E][I], [E][D] */
    float *bo, *sinks, *rb, *egb, *eub, *edb;
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

/* The weights' random stream, SplitMix64: draw k (from 0) mixes seed +
 * (k + 1) * CK_GAMMA, so any draw is found without those before it
 * (ckpt_stream.c writes tensors from their places in the stream). A draw
 * is uniform in [-1, 1): its top 24 bits k, k * 2^-23 - 1, exact in a
 * float (the same values as the double arithmetic first used, for all
 * 2^24 of them; int32 to float converts faster than uint64 to double). */
#define CK_GAMMA 0x9E3779B97F4A7C15ull

static inline float ck_mix(uint64_t z)
{
    z = (z ^ z >> 30) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ z >> 27) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (float)(int32_t)(z >> 40) * 0x1p-23f - 1.0f;
}

/* f rounded to bfloat16, to nearest even: its bits, or as an f32 (exact). */
static inline uint16_t ck_bf16_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)((u + 0x7FFF + (u >> 16 & 1)) >> 16);
}

static inline float ck_bf16(float f)
{
    uint32_t u = (uint32_t)ck_bf16_bits(f) << 16;
    memcpy(&f, &u, 4);
    return f;
}

/* The model_type of each CkType, and whether it is one of the Gemmas
 * (their norms scale by 1 + w; a gelu gate). */
extern const char *const ck_type_names[];
int ck_is_gemma(const CkModel *m);

/* config.json in dir: the shape's published one, or as transformers
 * writes the shape's, with the members of `extra` (JSON text without
 * braces) replacing or added to its own. 0, or -1 with a reason in why
 * (ckpt_files.c). */
int ck_write_config(const CkModel *m, const char *dir, const char *extra, char *why,
                    size_t whylen);

#endif
