/* tests/import/ckpt_gguf.c: a checkpoint of ckpt.h as the GGUF file
 * llama.cpp's convert_hf_to_gguf.py makes of its Hugging Face folder
 * (ck_write_gguf), written with gguf_write.h. What the converter does,
 * and so what kiln's GGUF import must undo or read, is done here from
 * the folder's tensors:
 *   - llama, mistral, mixtral (general.architecture llama): q's and k's
 *     rows permuted within each head (LlamaModel.permute: row j hd/2 + i
 *     of the folder's, rotate_half's order, becomes row 2i + j, llama.cpp's
 *     interleaved pairs); Mixtral's experts stacked into ffn_*_exps;
 *     Llama 3.1's rope_scaling turned into rope_freqs.weight, the factor
 *     each frequency is divided by, computed in f32 as the converter's
 *     torch tensors are;
 *   - the gemmas: every norm weight stored as 1 + w (the folder's norms
 *     scale by 1 + w), lm_head dropped (llama.cpp ties them);
 *   - qwen3moe: the experts stacked; phi3: qkv_proj and gate_up_proj as
 *     they are (attn_qkv, ffn_up).
 * Keys are the converter's for each model (LlamaModel, Qwen2Model, ...,
 * Gemma2Model, Phi3MiniModel set_gguf_parameters), with gemma3's
 * attention.sliding_window_pattern (the folder's 2; llama.cpp's
 * default is 6). No tokenizer is written. ck_gguf_rewrite makes bad files
 * of good ones. */
#include "ckpt_model.h"
#include "gguf_write.h"

#include "runtime/rt_gguf.h"
#include "runtime/rt_quant.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const CkModel *m;
    GgufWriter *w;
    int type;                   /* matrices' GW_T_* */
    const char *arch;
    float **bufs;               /* made here, freed at the end */
    int nbufs, cap;
} Gw;

static float *keep(Gw *g, float *p)
{
    if (!p)
        abort();
    if (g->nbufs == g->cap) {
        g->cap = g->cap ? 2 * g->cap : 64;
        g->bufs = realloc(g->bufs, sizeof *g->bufs * (size_t)g->cap);
        if (!g->bufs)
            abort();
    }
    return g->bufs[g->nbufs++] = p;
}

static float *copy(Gw *g, const float *x, int64_t n)
{
    float *p = keep(g, malloc(sizeof *p * (size_t)n));
    memcpy(p, x, sizeof *p * (size_t)n);
    return p;
}

/* ---- tensors --------------------------------------------------------------- */

/* The GGML type a matrix of rows of `row` values is written in: type,
 * or as kiln's --weight-dtype falls back when the row is no multiple of
 * its block. */
static int matrix_type(int type, int64_t row)
{
    if (type == GW_T_Q4_K && row % 256)
        type = GW_T_Q4_0;
    if (type == GW_T_Q6_K && row % 256)
        type = GW_T_Q8_0;
    if ((type == GW_T_Q4_0 || type == GW_T_Q8_0) && row % 32)
        type = GW_T_F16;
    return type;
}

static int store_of(int type)
{
    return type == GW_T_Q8_0 ? RT_Q8_0 : type == GW_T_Q4_0 ? RT_Q4_0
           : type == GW_T_Q4_K ? RT_Q4_K : RT_Q6_K;
}

/* name, of shape dims (outermost first), the floats x, in the matrices'
 * type when rank >= 2, else F32. */
static void put(Gw *g, const char *name, const float *x, int rank, const int64_t *dims)
{
    int64_t n = 1;
    for (int i = 0; i < rank; i++)
        n *= dims[i];
    int type = rank >= 2 ? matrix_type(g->type, dims[rank - 1]) : GW_T_F32;
    if (type == GW_T_F32) {
        gw_tensor(g->w, name, type, rank, dims, x, (size_t)n * 4);
        return;
    }
    if (type == GW_T_F16 || type == GW_T_BF16) {
        uint16_t *h = malloc(sizeof *h * (size_t)n);
        if (!h)
            abort();
        for (int64_t i = 0; i < n; i++)
            h[i] = type == GW_T_F16 ? rt_f32_f16(x[i]) : rt_f32_bf16(x[i]);
        gw_tensor(g->w, name, type, rank, dims, h, (size_t)n * 2);
        free(h);
        return;
    }
    int st = store_of(type);
    size_t bytes = (size_t)rt_store_bytes(st, n);
    void *q = malloc(bytes);
    if (!q)
        abort();
    rt_quantize(st, x, q, n);
    gw_tensor(g->w, name, type, rank, dims, q, bytes);
    free(q);
}

#define DIMS(...) (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (int64_t[]){__VA_ARGS__}

static void put_layer(Gw *g, int l, const char *stem, const float *x, int rank,
                      const int64_t *dims)
{
    char name[96];
    snprintf(name, sizeof name, "blk.%d.%s.weight", l, stem);
    put(g, name, x, rank, dims);
}

static void put_bias(Gw *g, int l, const char *stem, const float *x, int64_t n)
{
    char name[96];
    snprintf(name, sizeof name, "blk.%d.%s.bias", l, stem);
    put(g, name, x, DIMS(n));
}

/* A norm's weights as the converter stores them: the gemmas' 1 + w. */
static const float *norm(Gw *g, const float *w, int64_t n)
{
    if (!ck_is_gemma(g->m))
        return w;
    float *p = copy(g, w, n);
    for (int64_t i = 0; i < n; i++)
        p[i] += 1.0f;
    return p;
}

/* wq or wk of `heads` heads: the folder's rows (transformers' rotate_half
 * order: the model's own, or permuted from interleaved pairs as
 * ckpt_files.c writes them), then LlamaModel.permute's. */
static const float *llama_permute(Gw *g, const float *w, int heads)
{
    const CkModel *m = g->m;
    int hd = m->hd, D = m->s.dim;
    const float *hf = w;
    if (m->s.interleaved) {             /* the folder's: row 2i + j to j hd/2 + i */
        float *p = keep(g, malloc(sizeof *p * (size_t)heads * hd * D));
        for (int h = 0; h < heads; h++)
            for (int i = 0; i < hd / 2; i++)
                for (int j = 0; j < 2; j++)
                    memcpy(p + ((int64_t)h * hd + j * hd / 2 + i) * D,
                           w + ((int64_t)h * hd + 2 * i + j) * D, sizeof *p * (size_t)D);
        hf = p;
    }
    float *p = keep(g, malloc(sizeof *p * (size_t)heads * hd * D));
    for (int h = 0; h < heads; h++)     /* reshape(heads, 2, hd/2, D).swapaxes(1, 2) */
        for (int j = 0; j < 2; j++)
            for (int i = 0; i < hd / 2; i++)
                memcpy(p + ((int64_t)h * hd + 2 * i + j) * D,
                       hf + ((int64_t)h * hd + j * hd / 2 + i) * D, sizeof *p * (size_t)D);
    return p;
}

/* n matrices of rows[i] x cols, one under another. */
static const float *rows_of(Gw *g, const float *const *x, const int64_t *rows, int n, int64_t cols)
{
    int64_t total = 0;
    for (int i = 0; i < n; i++)
        total += rows[i];
    float *p = keep(g, malloc(sizeof *p * (size_t)(total * cols))), *at = p;
    for (int i = 0; i < n; at += rows[i] * cols, i++)
        memcpy(at, x[i], sizeof *p * (size_t)(rows[i] * cols));
    return p;
}

static void layer(Gw *g, int l)
{
    const CkModel *m = g->m;
    const CkShape *s = &m->s;
    const CkLayer *L = &m->L[l];
    int64_t D = s->dim, H = s->hidden, E = s->experts, I = s->moe_hidden;
    int llama = !strcmp(g->arch, "llama"), gemma2 = L->post_attn_norm != NULL;
    put_layer(g, l, "attn_norm", norm(g, L->attn_norm, D), DIMS(D));
    const float *wq = llama ? llama_permute(g, L->wq, s->heads) : L->wq;
    const float *wk = llama ? llama_permute(g, L->wk, s->kv_heads) : L->wk;
    if (s->type == CK_PHI3) {
        const float *qkv[] = {wq, wk, L->wv}, *gu[] = {L->w1, L->w3};
        int64_t qkv_rows[] = {m->qd, m->kvd, m->kvd}, gu_rows[] = {H, H};
        put_layer(g, l, "attn_qkv", rows_of(g, qkv, qkv_rows, 3, D), DIMS(m->qd + 2 * m->kvd, D));
        put_layer(g, l, "ffn_up", rows_of(g, gu, gu_rows, 2, D), DIMS(2 * H, D));
        put_layer(g, l, "ffn_down", L->w2, DIMS(D, H));
    } else {
        put_layer(g, l, "attn_q", wq, DIMS(m->qd, D));
        put_layer(g, l, "attn_k", wk, DIMS(m->kvd, D));
        put_layer(g, l, "attn_v", L->wv, DIMS(m->kvd, D));
    }
    put_layer(g, l, "attn_output", L->wo, DIMS(D, m->qd));
    if (L->bq) {
        put_bias(g, l, "attn_q", L->bq, m->qd);
        put_bias(g, l, "attn_k", L->bk, m->kvd);
        put_bias(g, l, "attn_v", L->bv, m->kvd);
    }
    if (L->q_norm) {
        put_layer(g, l, "attn_q_norm", norm(g, L->q_norm, m->hd), DIMS(m->hd));
        put_layer(g, l, "attn_k_norm", norm(g, L->k_norm, m->hd), DIMS(m->hd));
    }
    if (gemma2) {
        put_layer(g, l, "post_attention_norm", norm(g, L->post_attn_norm, D), DIMS(D));
        put_layer(g, l, "post_ffw_norm", norm(g, L->post_ffn_norm, D), DIMS(D));
    }
    put_layer(g, l, "ffn_norm", norm(g, L->ffn_norm, D), DIMS(D));
    if (L->router) {
        put_layer(g, l, "ffn_gate_inp", L->router, DIMS(E, D));
        put_layer(g, l, "ffn_gate_exps", L->eg, DIMS(E, I, D));
        put_layer(g, l, "ffn_up_exps", L->eu, DIMS(E, I, D));
        put_layer(g, l, "ffn_down_exps", L->ed, DIMS(E, D, I));
    } else if (s->type != CK_PHI3) {
        put_layer(g, l, "ffn_gate", L->w1, DIMS(H, D));
        put_layer(g, l, "ffn_up", L->w3, DIMS(H, D));
        put_layer(g, l, "ffn_down", L->w2, DIMS(D, H));
    }
}

/* Llama 3.1's factors (rope_scaling of ckpt.h: factor 8, low 1, high 4,
 * original context 32), as LlamaModel.generate_extra_tensors computes
 * them: frequencies and wavelengths in f32. */
static void rope_freqs(Gw *g, double theta)
{
    int hd = g->m->hd, n = hd / 2;
    float factor = 8, lo = 1, hi = 4, old = 32, *r = keep(g, malloc(sizeof *r * (size_t)n));
    for (int i = 0; i < n; i++) {
        float freq = 1.0f / powf((float)theta, (float)(2 * i) / (float)hd);
        float wavelen = (float)(2 * M_PI) / freq;
        if (wavelen < old / hi)
            r[i] = 1;
        else if (wavelen > old / lo)
            r[i] = factor;
        else {
            float smooth = (old / wavelen - lo) / (hi - lo);
            r[i] = 1 / ((1 - smooth) / factor + smooth);
        }
    }
    put(g, "rope_freqs.weight", r, DIMS(n));
}

/* ---- keys ------------------------------------------------------------------ */

static void key_u32(Gw *g, const char *suffix, uint32_t v)
{
    char key[96];
    snprintf(key, sizeof key, "%s.%s", g->arch, suffix);
    gw_u32(g->w, key, v);
}

static void key_f32(Gw *g, const char *suffix, float v)
{
    char key[96];
    snprintf(key, sizeof key, "%s.%s", g->arch, suffix);
    gw_f32(g->w, key, v);
}

static void keys(Gw *g, double theta)
{
    const CkModel *m = g->m;
    const CkShape *s = &m->s;
    int gemma = ck_is_gemma(m), window = s->window ? s->window : s->seq;
    gw_str(g->w, "general.architecture", g->arch);
    gw_str(g->w, "general.name", "kiln test checkpoint");
    key_u32(g, "block_count", (uint32_t)s->layers);
    key_u32(g, "context_length", (uint32_t)s->seq);
    key_u32(g, "embedding_length", (uint32_t)s->dim);
    key_u32(g, "feed_forward_length", (uint32_t)s->hidden);
    key_u32(g, "attention.head_count", (uint32_t)s->heads);
    key_u32(g, "attention.head_count_kv", (uint32_t)s->kv_heads);
    key_f32(g, "attention.layer_norm_rms_epsilon",
            s->type == CK_LLAMA && s->interleaved ? 1e-5f : 1e-6f);
    if (!gemma)
        key_f32(g, "rope.freq_base", (float)theta);
    if (s->head_dim || gemma) {
        key_u32(g, "attention.key_length", (uint32_t)m->hd);
        key_u32(g, "attention.value_length", (uint32_t)m->hd);
    }
    if (!strcmp(g->arch, "llama") || s->type == CK_PHI3)
        key_u32(g, "rope.dimension_count", (uint32_t)m->hd);
    if (s->experts) {
        key_u32(g, "expert_count", (uint32_t)s->experts);
        key_u32(g, "expert_used_count", (uint32_t)s->top_k);
    }
    if (s->type == CK_QWEN3_MOE)
        key_u32(g, "expert_feed_forward_length", (uint32_t)s->moe_hidden);
    if (s->type == CK_GEMMA2) {
        key_f32(g, "attn_logit_softcapping", (float)CK_G2_ATTN_CAP);
        key_f32(g, "final_logit_softcapping", (float)CK_G2_FINAL_CAP);
    }
    if (s->type == CK_GEMMA3) {
        key_f32(g, "rope.freq_base", (float)theta);
        key_u32(g, "attention.sliding_window_pattern", 2);
    }
    if (s->type == CK_GEMMA2 || s->type == CK_GEMMA3 || s->type == CK_PHI3)
        key_u32(g, "attention.sliding_window", (uint32_t)window);
    if (s->type == CK_PHI3)
        key_u32(g, "rope.scaling.original_context_length", (uint32_t)s->seq);
    /* llama_ftype: ALL_F32 0, MOSTLY_F16 1, Q4_0 2, Q8_0 7, Q4_K_M 15,
     * Q6_K 18, BF16 32 (what the file mostly holds; kiln reads none of it) */
    static const struct { int type, ftype; } ftypes[] = {
        {GW_T_F32, 0}, {GW_T_F16, 1}, {GW_T_Q4_0, 2}, {GW_T_Q8_0, 7}, {GW_T_Q4_K, 15},
        {GW_T_Q6_K, 18}, {GW_T_BF16, 32}};
    for (size_t i = 0; i < sizeof ftypes / sizeof ftypes[0]; i++)
        if (ftypes[i].type == g->type)
            gw_u32(g->w, "general.file_type", (uint32_t)ftypes[i].ftype);
}

int ck_write_gguf(const CkModel *m, const char *path, int type, char *why, size_t whylen)
{
    static const char *const archs[] = {
        [CK_LLAMA] = "llama",   [CK_QWEN2] = "qwen2", [CK_QWEN3_MOE] = "qwen3moe",
        [CK_QWEN3] = "qwen3",   [CK_MISTRAL] = "llama", [CK_MIXTRAL] = "llama",
        [CK_PHI3] = "phi3",     [CK_GEMMA] = "gemma", [CK_GEMMA2] = "gemma2",
        [CK_GEMMA3] = "gemma3"};
    const CkShape *s = &m->s;
    if (s->type == CK_GPT2 || s->type == CK_GPTOSS)
        return snprintf(why, whylen, "%s has no GGUF writer here", ck_type_names[s->type]), -1;
    Gw g = {m, gw_new(3), type, archs[s->type], NULL, 0, 0};
    double theta = s->type == CK_QWEN3_MOE || s->type == CK_QWEN3 || s->type == CK_GEMMA3 ? 1e6
                                                                                          : 1e4;
    keys(&g, theta);
    int64_t V = s->vocab, D = s->dim;
    put(&g, "token_embd.weight", m->embed, DIMS(V, D));
    if (s->llama3_rope)
        rope_freqs(&g, theta);
    for (int l = 0; l < s->layers; l++)
        layer(&g, l);
    put(&g, "output_norm.weight", norm(&g, m->norm, D), DIMS(D));
    if (!s->tied && !ck_is_gemma(m))
        put(&g, "output.weight", m->head, DIMS(V, D));
    int rc = gw_write(g.w, path);
    if (rc)
        snprintf(why, whylen, "%s: %s", path, strerror(errno));
    gw_free(g.w);
    for (int i = 0; i < g.nbufs; i++)
        free(g.bufs[i]);
    free(g.bufs);
    return rc;
}

/* ---- bad files from good ones ------------------------------------------------ */

int ck_gguf_rewrite(const char *src, const char *dst, const CkGgufEdit *e, char *why,
                    size_t whylen)
{
    static const int size[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};  /* by RT_GGUF_* */
    rt_gguf g;
    rt_err err = {0, ""};
    if (rt_gguf_open(&g, src, &err))
        return snprintf(why, whylen, "%s", err.msg), -1;
    GgufWriter *w = gw_new(g.version);
    int rc = 0;
    for (int i = 0; i < g.nkv && !rc; i++) {
        const rt_gguf_kv *kv = &g.kv[i];
        int arch = e->arch && !strcmp(kv->key, "general.architecture");
        if (kv->type == RT_GGUF_ARR) {
            snprintf(why, whylen, "%s: key '%s' is an array", src, kv->key);
            rc = -1;
        } else if (arch)
            gw_str(w, kv->key, e->arch);
        else if (e->drop && !strcmp(kv->key, e->drop))
            continue;
        else if (kv->type == RT_GGUF_STR)
            gw_strn(w, kv->key, kv->str[0], (size_t)(kv->str[1] - kv->str[0] - 1));
        else
            gw_kv_raw(w, kv->key, (uint32_t)kv->type, kv->raw, (size_t)size[kv->type]);
    }
    if (e->add)
        e->add(w);
    for (int i = 0; i < g.nt && !rc; i++) {
        const rt_gguf_tensor *t = &g.t[i];
        if (e->tensor && !strcmp(t->name, e->tensor)) {
            int64_t n = 1;
            for (int k = 0; k < e->rank; k++)
                n *= e->dims[k];
            gw_tensor(w, t->name, GW_T_F32, e->rank, e->dims, NULL, (size_t)n * 4);
        } else {
            gw_tensor(w, t->name, t->type, t->rank, t->dims, t->data, t->nbytes);
        }
    }
    if (!rc && gw_write(w, dst))
        rc = -1, snprintf(why, whylen, "%s: %s", dst, strerror(errno));
    gw_free(w);
    rt_gguf_close(&g);
    return rc;
}
