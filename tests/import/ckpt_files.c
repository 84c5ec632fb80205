/* tests/import/ckpt_files.c: the files a checkpoint of ckpt.h is written
 * as, llama2.c's .bin (version 0 or 1) and a Hugging Face folder
 * (config.json as transformers writes it, model.safetensors or shards and
 * their index), from the weights ckpt.c made; FP8 folders' e4m3 bytes
 * from the format's definition (fp8_code), not kiln's runtime. */
#include "ckpt_model.h"

#include "frontend/import.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    int fp8;                    /* CK_FP8_* or 0 */
} List;

/* ---- FP8 e4m3 (OCP FP8's E4M3FN) -------------------------------------------- */

/* The value of byte c: sign, 4 exponent bits biased by 7, 3 mantissa
 * bits; exponent 0 is subnormal (m/8 2^-6); no infinities; 0x7f and 0xff
 * are NaN (not asked for here). */
static double fp8_value(int c)
{
    int e = c >> 3 & 15, m = c & 7;
    double v = e ? ldexp(1 + m / 8.0, e - 7) : ldexp(m / 8.0, -6);
    return c & 0x80 ? -v : v;
}

/* The nearest byte to x (|x| <= 448), ties to the even code (mantissa's
 * last bit 0), by search over the 127 non-negative finite codes. */
static unsigned char fp8_code(double x)
{
    int best = 0;
    double a = fabs(x);
    for (int c = 1; c < 0x7f; c++) {
        double d = fabs(fp8_value(c) - a), db = fabs(fp8_value(best) - a);
        if (d < db || (d == db && !(c & 1)))
            best = c;
    }
    return (unsigned char)(best | (x < 0 ? 0x80 : 0));
}

/* Whether tensor `name` is stored as FP8: a linear layer's weight. */
static int fp8_wanted(const List *l, const char *name, int rank)
{
    size_t n = strlen(name);
    return l->fp8 && rank == 2 && n > 12 && !strcmp(name + n - 12, "_proj.weight");
}

static float fp8_bf16(float s)                   /* s rounded to bf16, to nearest even */
{
    uint32_t u;
    memcpy(&u, &s, 4);
    u = (u + 0x7fff + (u >> 16 & 1)) & 0xffff0000u;
    memcpy(&s, &u, 4);
    return s;
}

/* x [d0, d1] as FP8 bytes b with its scales (see ckpt.h's fp8): a scale s
 * = amax / 448 of its block, row or tensor (1 when amax is 0), the bytes
 * fp8_code(x / s); returns the scales' tensor (count in *ns). */
static float *fp8_quantize(const List *l, const float *x, int64_t d0, int64_t d1,
                           unsigned char *b, int64_t *ns)
{
    int64_t br = l->fp8 == CK_FP8_BLOCK ? 128 : l->fp8 == CK_FP8_CHANNEL ? 1 : d0;
    int64_t bc = l->fp8 == CK_FP8_BLOCK ? 128 : d1;
    int64_t nr = (d0 + br - 1) / br, nc = (d1 + bc - 1) / bc;
    float *s = malloc(sizeof *s * (size_t)(nr * nc));
    *ns = nr * nc;
    for (int64_t i = 0; s && i < nr; i++)
        for (int64_t j = 0; j < nc; j++) {
            double amax = 0;
            for (int64_t r = i * br; r < d0 && r < (i + 1) * br; r++)
                for (int64_t c = j * bc; c < d1 && c < (j + 1) * bc; c++)
                    amax = fmax(amax, fabs(x[r * d1 + c]));
            float sc = amax > 0 ? (float)(amax / 448) : 1.0f;
            if (l->bf16 && l->fp8 != CK_FP8_BLOCK)
                sc = fp8_bf16(sc);
            s[i * nc + j] = sc;
            for (int64_t r = i * br; r < d0 && r < (i + 1) * br; r++)
                for (int64_t c = j * bc; c < d1 && c < (j + 1) * bc; c++) {
                    double q = x[r * d1 + c] / (double)sc;
                    b[r * d1 + c] = fp8_code(q > 448 ? 448 : q < -448 ? -448 : q);
                }
        }
    return s;
}

static void add(List *l, const char *name, const float *x, int rank, int64_t d0, int64_t d1,
                int64_t d2, int64_t d3);

/* ---- MXFP4 (OCP MX's E2M1 values under an E8M0 scale) ------------------------ */

static const float mx_e2m1[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};  /* codes 0-7; 8-15: negated */

void ck_mx_block(float *x, unsigned char *e, unsigned char code[32], int round)
{
    double amax = 0;
    for (int k = 0; k < 32; k++)
        amax = fmax(amax, fabs(x[k]));
    int p = amax > 0 ? (int)floor(log2(amax)) - 2 : 0;
    *e = (unsigned char)(p + 127);
    for (int k = 0; k < 32; k++) {
        double a = fabs(x[k]) / ldexp(1, p);
        int best = 0;
        for (int c = 1; c < 8; c++)
            if (fabs(mx_e2m1[c] - a) < fabs(mx_e2m1[best] - a))
                best = c;
        code[k] = (unsigned char)(best | (x[k] < 0 ? 8 : 0));
        if (round)
            x[k] = (float)ldexp(x[k] < 0 ? -mx_e2m1[best] : mx_e2m1[best], p);
    }
}

/* A U8 tensor of the bytes b (copied), of shape dims. */
static void add_u8(List *l, const char *name, const unsigned char *b, int rank,
                   const int64_t *dims)
{
    int64_t n = 1;
    ImpTensor *t = &l->t[l->n++];
    memset(t, 0, sizeof *t);
    t->name = strdup(name);
    t->rank = rank;
    for (int i = 0; i < rank; i++)
        n *= t->dims[i] = dims[i];
    unsigned char *c = malloc((size_t)n);
    if (!c || !t->name)
        abort();
    memcpy(c, b, (size_t)n);
    t->dtype = "U8";
    t->data = c;
    l->bufs[l->nbufs++] = c;
    l->bufs[l->nbufs++] = (void *)t->name;
}

/* Matrix x [E][R][C] (rows the outputs) as the Hub's gpt-oss holds MXFP4
 * experts: NAME_blocks U8 [E, R, C / 32, 16], value 2j of a block the low
 * nibble of its byte j and 2j + 1 the high one, and NAME_scales U8 [E, R,
 * C / 32]. */
static void add_mx(List *l, const char *name, const float *x, int64_t E, int64_t R, int64_t C)
{
    int64_t nb = E * R * C / 32;
    unsigned char *q = malloc((size_t)nb * 16), *sc = malloc((size_t)nb), code[32];
    float v[32];
    char buf[200];
    if (!q || !sc)
        abort();
    for (int64_t b = 0; b < nb; b++) {
        memcpy(v, x + b * 32, sizeof v);
        ck_mx_block(v, &sc[b], code, 0);
        for (int j = 0; j < 16; j++)
            q[b * 16 + j] = (unsigned char)(code[2 * j] | code[2 * j + 1] << 4);
    }
    snprintf(buf, sizeof buf, "%s_blocks", name);
    add_u8(l, buf, q, 4, (int64_t[]){E, R, C / 32, 16});
    snprintf(buf, sizeof buf, "%s_scales", name);
    add_u8(l, buf, sc, 3, (int64_t[]){E, R, C / 32});
    free(q);
    free(sc);
}

/* FP8 weight `name` [d0, d1] of x: its bytes, its scale (NAME_scale_inv,
 * or compressed-tensors' NAME_scale and the input_scale beside it). */
static void add_fp8(List *l, const char *name, const float *x, int64_t d0, int64_t d1)
{
    unsigned char *b = malloc((size_t)(d0 * d1));
    int64_t ns;
    float *s = b ? fp8_quantize(l, x, d0, d1, b, &ns) : NULL;
    if (!s) {
        free(b);
        return;
    }
    ImpTensor *t = &l->t[l->n++];
    memset(t, 0, sizeof *t);
    t->name = strdup(name);
    t->rank = 2;
    t->dims[0] = d0, t->dims[1] = d1;
    t->dtype = "F8_E4M3";
    t->data = b;
    l->bufs[l->nbufs++] = b;
    l->bufs[l->nbufs++] = (void *)t->name;
    l->bufs[l->nbufs++] = s;
    char sname[200];
    int fp = l->fp8, bf = l->bf16;
    l->fp8 = 0, l->bf16 = bf && fp != CK_FP8_BLOCK;       /* the scale as it is */
    snprintf(sname, sizeof sname, "%s_scale%s", name, fp == CK_FP8_BLOCK ? "_inv" : "");
    if (fp == CK_FP8_BLOCK)
        add(l, sname, s, 2, (d0 + 127) / 128, (d1 + 127) / 128, 0, 0);
    else if (fp == CK_FP8_CHANNEL)
        add(l, sname, s, 2, d0, 1, 0, 0);
    else
        add(l, sname, s, 1, 1, 0, 0, 0);
    if (fp != CK_FP8_BLOCK) {            /* a static activation scale, which kiln ignores */
        static const float in_scale = 0.0125f;
        snprintf(sname, sizeof sname, "%.*sinput_scale", (int)(strlen(name) - 6), name);
        l->bf16 = 0;
        add(l, sname, &in_scale, 1, 1, 0, 0, 0);
    }
    l->fp8 = fp, l->bf16 = bf;
}

/* A tensor of the list; its data is converted to bytes now (BF16: the
 * upper halves, exact since the weights were rounded). */
static void add(List *l, const char *name, const float *x, int rank, int64_t d0, int64_t d1,
                int64_t d2, int64_t d3)
{
    if (fp8_wanted(l, name, rank)) {
        add_fp8(l, name, x, d0, d1);
        return;
    }
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

/* gpt_oss's experts as transformers' GptOssExperts holds them:
 * gate_up_proj [E, D, 2I] with gate's column i at 2i and up's at 2i + 1,
 * its bias [E, 2I] alike, down_proj [E, I, D] (eg, eu [E][I][D] and ed
 * [E][D][I] transposed). */
static void hf_oss_experts(const CkModel *m, const CkLayer *L, List *ls, const char *pre)
{
    int64_t D = m->s.dim, E = m->s.experts, I = m->s.moe_hidden;
    char name[160];
    float *gu = malloc(sizeof *gu * (size_t)(E * D * 2 * I)), *gub = malloc(sizeof *gub * (size_t)(E * 2 * I));
    float *dn = malloc(sizeof *dn * (size_t)(E * I * D));
    if (!gu || !gub || !dn)
        abort();
    for (int64_t e = 0; e < E; e++)
        for (int64_t i = 0; i < I; i++) {
            for (int64_t d = 0; d < D; d++) {
                gu[(e * D + d) * 2 * I + 2 * i] = L->eg[(e * I + i) * D + d];
                gu[(e * D + d) * 2 * I + 2 * i + 1] = L->eu[(e * I + i) * D + d];
                dn[(e * I + i) * D + d] = L->ed[(e * D + d) * I + i];
            }
            gub[e * 2 * I + 2 * i] = L->egb[e * I + i];
            gub[e * 2 * I + 2 * i + 1] = L->eub[e * I + i];
        }
    ls->bufs[ls->nbufs++] = gu;
    ls->bufs[ls->nbufs++] = gub;
    ls->bufs[ls->nbufs++] = dn;
    add(ls, NAME("%smlp.router.weight", pre), L->router, 2, E, D, 0, 0);
    add(ls, NAME("%smlp.router.bias", pre), L->rb, 1, E, 0, 0, 0);
    if (m->s.mxfp4 == CK_MX_BLOCKS) {   /* [E, 2I, D], gate's row i at 2i; [E, D, I] */
        float *rows = malloc(sizeof *rows * (size_t)(E * 2 * I * D));
        if (!rows)
            abort();
        for (int64_t e = 0; e < E; e++)
            for (int64_t i = 0; i < I; i++) {
                size_t n = sizeof *rows * (size_t)D;
                memcpy(rows + (e * 2 * I + 2 * i) * D, L->eg + (e * I + i) * D, n);
                memcpy(rows + (e * 2 * I + 2 * i + 1) * D, L->eu + (e * I + i) * D, n);
            }
        add_mx(ls, NAME("%smlp.experts.gate_up_proj", pre), rows, E, 2 * I, D);
        add_mx(ls, NAME("%smlp.experts.down_proj", pre), L->ed, E, D, I);
        free(rows);
    } else {
        add(ls, NAME("%smlp.experts.gate_up_proj", pre), gu, 3, E, D, 2 * I, 0);
        add(ls, NAME("%smlp.experts.down_proj", pre), dn, 3, E, I, D, 0);
    }
    add(ls, NAME("%smlp.experts.gate_up_proj_bias", pre), gub, 2, E, 2 * I, 0, 0);
    add(ls, NAME("%smlp.experts.down_proj_bias", pre), L->edb, 2, E, D, 0, 0);
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
        if (L->bo) {
            add(ls, NAME("%sself_attn.o_proj.bias", pre), L->bo, 1, D, 0, 0, 0);
            add(ls, NAME("%sself_attn.sinks", pre), L->sinks, 1, s->heads, 0, 0, 0);
        }
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
        if (L->router && s->type == CK_GPTOSS) {
            hf_oss_experts(m, L, ls, pre);
        } else if (L->router && s->type == CK_MIXTRAL) {
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
                                       "Gemma3ForCausalLM",   "GptOssForCausalLM"};
    fprintf(f, "  \"architectures\": [\"%s\"],\n  \"attention_dropout\": 0.0,\n"
            "  \"bos_token_id\": 1,\n  \"eos_token_id\": 2,\n  \"hidden_act\": \"%s\",\n"
            "  \"hidden_size\": %d,\n  \"initializer_range\": 0.02,\n"
            "  \"intermediate_size\": %d,\n  \"max_position_embeddings\": %d,\n"
            "  \"num_attention_heads\": %d,\n  \"num_hidden_layers\": %d,\n"
            "  \"num_key_value_heads\": %d,\n  \"rms_norm_eps\": %g,\n  \"rope_scaling\": %s,\n"
            "  \"rope_theta\": %s,\n  \"tie_word_embeddings\": %s,\n  \"vocab_size\": %d,\n",
            arch[s->type], s->type == CK_GEMMA ? "gelu" : ck_is_gemma(m) ? "gelu_pytorch_tanh" : "silu",
            s->dim, s->hidden, s->seq,
            s->heads, s->layers, s->kv_heads,
            (s->type == CK_LLAMA && s->interleaved) || s->type == CK_GPTOSS ? 1e-5 : 1e-6,
            s->llama3_rope ? "{\"factor\": 8.0, \"low_freq_factor\": 1.0, \"high_freq_factor\": 4.0,"
                             " \"original_max_position_embeddings\": 32, \"rope_type\": \"llama3\"}"
            : s->type == CK_GPTOSS ? "{\"beta_fast\": 32.0, \"beta_slow\": 1.0, \"factor\": 32.0, "
                                     "\"rope_type\": \"yarn\", \"truncate\": false}"
                                   : "null",
            s->type == CK_QWEN3_MOE || s->type == CK_QWEN3 || s->type == CK_GEMMA3 ? "1000000.0"
            : s->type == CK_GPTOSS                                                ? "150000"
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
    else if (s->type == CK_GPTOSS) {    /* layers 0, 2, ... sliding */
        fprintf(f, "  \"attention_bias\": true,\n  \"head_dim\": %d,\n  \"num_local_experts\": %d,\n"
                "  \"num_experts_per_tok\": %d,\n  \"experts_per_token\": %d,\n"
                "  \"output_router_logits\": false,\n  \"router_aux_loss_coef\": 0.9,\n"
                "  \"initial_context_length\": 4096,\n  \"swiglu_limit\": %g,\n"
                "  \"pad_token_id\": 0,\n  \"sliding_window\": %d,\n  \"layer_types\": [",
                m->hd, s->experts, s->top_k, s->top_k, CK_OSS_LIMIT, window);
        for (int l = 0; l < s->layers; l++)
            fprintf(f, "%s\"%s_attention\"", l ? ", " : "", l % 2 ? "full" : "sliding");
        fprintf(f, "],\n");
    } else if (s->type != CK_LLAMA && s->type != CK_PHI3 && s->type != CK_GEMMA &&
             s->type != CK_GEMMA2 && s->type != CK_MISTRAL && s->type != CK_GEMMA3)
        fprintf(f, "  \"sliding_window\": %d,\n  \"max_window_layers\": %d,\n"
                "  \"use_sliding_window\": %s,\n", s->window ? s->window : 4096,
                s->window ? 1 : 21, s->window ? "true" : "false");
    if (s->type == CK_QWEN2)
        fprintf(f, "  \"use_mrope\": false,\n");
    if (s->type == CK_QWEN3)
        fprintf(f, "  \"head_dim\": %d,\n  \"attention_bias\": false,\n", m->hd);
    if (ck_is_gemma(m))           /* hidden_activation rules */
        fprintf(f, "  \"head_dim\": %d,\n  \"attention_bias\": false,\n"
                "  \"hidden_activation\": \"gelu_pytorch_tanh\",\n  \"pad_token_id\": 0,\n", m->hd);
    if (s->type == CK_GEMMA2)
        fprintf(f, "  \"attn_logit_softcapping\": %g,\n  \"final_logit_softcapping\": %g,\n"
                "  \"query_pre_attn_scalar\": %d,\n  \"sliding_window\": %d,\n"
                "  \"cache_implementation\": \"hybrid\",\n", CK_G2_ATTN_CAP, CK_G2_FINAL_CAP,
                s->qpas ? s->qpas : CK_G2_QPAS, window);
    if (s->type == CK_GEMMA3)  /* sliding layers 0, 2, ...; no caps */
        fprintf(f, "  \"attn_logit_softcapping\": null,\n  \"final_logit_softcapping\": null,\n"
                "  \"query_pre_attn_scalar\": %d,\n  \"sliding_window\": %d,\n"
                "  \"sliding_window_pattern\": 2,\n  \"rope_local_base_freq\": 10000,\n"
                "  \"cache_implementation\": \"hybrid\",\n", s->qpas ? s->qpas : CK_G2_QPAS, window);
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

/* text, len bytes, as the file path. */
static int put_file(const char *path, const char *text, size_t len, char *why, size_t whylen)
{
    FILE *f = fopen(path, "w");
    int rc = f && fwrite(text, 1, len, f) == len ? 0 : -1;
    if (f && fclose(f) != 0)
        rc = -1;
    if (rc)
        snprintf(why, whylen, "%s: cannot write", path);
    return rc;
}

int ck_write_config(const CkModel *m, const char *dir, const char *extra, char *why,
                    size_t whylen)
{
    char *text = NULL, path[4096];
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        return snprintf(why, whylen, "out of memory"), -1;
    const char *dtype = m->s.bf16 ? "bfloat16" : "float32";
    if (m->s.published) {
        fprintf(f, m->s.published, dtype);
    } else {
        fprintf(f, "{\n");
        if (m->s.type == CK_GPT2)
            config_gpt2(f, m);
        else
            config_llama(f, m);
        fprintf(f, "  \"torch_dtype\": \"%s\",\n  \"transformers_version\": \"4.51.0\",\n"
                "  \"use_cache\": true,\n  \"model_type\": \"%s\"\n}\n",
                dtype, ck_type_names[m->s.type]);
    }
    fclose(f);
    snprintf(path, sizeof path, "%s/config.json", dir);
    if (m->s.published && !extra) {           /* as the Hub has it, byte for byte */
        int rc = text ? put_file(path, text, len, why, whylen) : -1;
        free(text);
        return rc;
    }
    json_t *root = json_loads(text, 0, NULL), *more = NULL;
    free(text);
    if (extra) {
        text = malloc(strlen(extra) + 3);
        if (text)
            sprintf(text, "{%s}", extra);
        more = text ? json_loads(text, 0, NULL) : NULL;
        free(text);
    }
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
    int64_t most = 3 * (16 + (int64_t)m->s.layers * (20 + 3 * (int64_t)m->s.experts));
    List ls = {calloc((size_t)most, sizeof(ImpTensor)), 0, 0,
               calloc((size_t)(3 * most), sizeof(void *)), 0, m->s.bf16, m->s.fp8};
    int rc = -1;
    if (!ls.t || !ls.bufs)
        snprintf(why, whylen, "out of memory");
    else if (!ck_write_config(m, dir, extra, why, whylen)) {
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
