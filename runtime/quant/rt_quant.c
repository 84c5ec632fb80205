/* runtime/quant/rt_quant.c: the quantized types' blocks (rt_quant.h):
 * sizes and names, the entry points over a weight of any of them, and
 * q8_0's, q4_0's, f8_e4m3's and mxfp4's blocks (q4_k's and q6_k's are
 * rt_quant_k.c's).
 *
 * Quantizing does the f32 operations of GGML's reference quantizers
 * (ggml-quants.c: quantize_row_q8_0_ref, quantize_row_q4_0_ref) in their
 * order, so that the bytes are llama-quantize's. Per block of 32:
 *   q8_0  amax = max |x|, d = amax / 127, id = 1 / d (0 when d is 0),
 *         q = roundf(x * id) (halves away from zero);
 *   q4_0  m = the first x of largest |x|, d = m / -8, id as above,
 *         q = min(15, x * id + 8.5 truncated), so that m itself is q 0;
 * d is stored as the nearest half (rt_f32_f16). Where d is below 2^-128,
 * 1 / d is inf and x * id inf or NaN, which GGML's cast to int8_t makes 0
 * on x86 (the low byte of cvttss2si's 0x80000000); such a q is 0 here
 * too, so even a block of values below 2^-125 (whose half d is 0) has
 * GGML's bytes. A block holding a NaN or an inf gets that value as its
 * scale (d, and q4_k's dmin) and zeros elsewhere: rt_q_check finds it.
 *
 * GGML's reference build (x86-64, no -march) rounds every product before
 * the sum it feeds. Generated programs build with GNU C's default
 * -ffp-contract=fast and -march=native, which would fuse such pairs into
 * FMAs and change bytes (clang fuses within an expression; unprotected,
 * -O3 -march=native changed 5% of q4_k's and 7% of q6_k's blocks), so
 * this file and rt_quant_k.c turn contraction off for their code and
 * restore it after (clang's -ffp-contract=fast overrides its pragma: not
 * so built).
 *
 * rt_quantize runs its blocks through rt_parallel_for (they are
 * independent, so the bytes are the same for any thread count): k-quants
 * are slow to fit, and a weight is quantized once at load. */
#include "runtime/quant/rt_qk.h"

#include <math.h>
#include <string.h>

#if defined(__clang__)
#pragma float_control(push)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC push_options
#pragma GCC optimize("fp-contract=off")
#endif

int rt_q_block(int store)
{
    return rt_store_block(store);
}

int rt_q_block_bytes(int store)
{
    return rt_q_block(store) ? (int)rt_store_bytes(store, rt_q_block(store)) : 0;
}

const char *rt_q_name(int store)
{
    static const char *const names[] = {"q8_0", "q4_0", "q4_k", "q6_k"};
    return store >= RT_Q8_0 && store <= RT_Q6_K ? names[store - RT_Q8_0]
           : store == RT_F8_E4M3                ? "f8_e4m3"
           : store == RT_MXFP4                  ? "mxfp4"
                                                : NULL;
}

/* GGML's float-to-int8 cast of a rounded or shifted q, on x86: 0 where it
 * is not finite (see the top). */
static int qb_int(float t)
{
    return isfinite(t) ? (int)t : 0;
}

/* ---- q8_0: d, then 32 int8 q ---------------------------------------------- */
static void qb_quantize_q8_0(const float *x, unsigned char *b)
{
    float amax = 0.0f;
    for (int j = 0; j < 32; j++)
        if (fabsf(x[j]) > amax)
            amax = fabsf(x[j]);
    float d = amax / 127, id = d ? 1.0f / d : 0.0f;
    rt_qk_put_half(b, d);
    for (int j = 0; j < 32; j++)
        b[2 + j] = (unsigned char)qb_int(roundf(x[j] * id));
}

static float qb_q8_0(const unsigned char *b, int j)
{
    return (float)(int8_t)b[2 + j] * rt_qk_half(b);
}

/* ---- q4_0: d, then 16 bytes: value j's nibble low in byte j, value
 * j + 16's high ---------------------------------------------------------- */
static void qb_quantize_q4_0(const float *x, unsigned char *b)
{
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < 32; j++)
        if (fabsf(x[j]) > amax) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    float d = max / -8, id = d ? 1.0f / d : 0.0f;
    rt_qk_put_half(b, d);
    for (int j = 0; j < 16; j++) {
        float x0 = x[j] * id, x1 = x[j + 16] * id;
        int q0 = qb_int(x0 + 8.5f), q1 = qb_int(x1 + 8.5f);
        /* GGML keeps min(15, q) in a uint8_t and ors q1 << 4 into q0 */
        q0 = (unsigned char)(q0 < 15 ? q0 : 15);
        q1 = (unsigned char)(q1 < 15 ? q1 : 15);
        b[2 + j] = (unsigned char)(q0 | q1 << 4);
    }
}

static float qb_q4_0(const unsigned char *b, int j)
{
    int q = j < 16 ? b[2 + j] & 15 : b[2 + j - 16] >> 4;
    return (float)(q - 8) * rt_qk_half(b);
}

/* ---- f8_e4m3: an f32 d, then 128 e4m3 bytes -------------------------------- */
static void qb_quantize_f8(const float *x, unsigned char *b)
{
    float amax = 0.0f;
    for (int j = 0; j < 128; j++)
        if (fabsf(x[j]) > amax)
            amax = fabsf(x[j]);
    float d = amax / 448;
    memcpy(b, &d, 4);
    for (int j = 0; j < 128; j++)
        b[4 + j] = d ? rt_f32_e4m3(x[j] / d) : 0;
}

static float qb_f8(const unsigned char *b, int j)
{
    float d;
    memcpy(&d, b, 4);
    return d * rt_e4m3_f32(b[4 + j]);
}

/* ---- mxfp4: e, then 16 bytes of E2M1 nibbles in q4_0's order ------------- */
/* E2M1 nibble n's value times 2 (an integer): sign bit 3, exponent bits
 * 1-2, mantissa bit 0 (exponent 0: subnormal m / 2). */
static const int8_t qb_e2m1x2[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

float rt_e8m0_half(int e)
{
    uint32_t bits = e == 255 ? 0x7fc00000u                  /* NaN */
                    : e < 2  ? 0x00200000u << e               /* 2^-128, 2^-127: subnormal */
                             : (uint32_t)(e - 1) << 23;       /* 2^(e - 128) */
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* x / 2^(e - 127)'s nearest E2M1 nibble: the first of 0, 0.5, 1, 1.5, 2,
 * 3, 4, 6 at the least distance (a tie to the smaller), the sign's bit. */
static int qb_e2m1(float x, float scale)
{
    static const float mag[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
    float a = fabsf(x) / scale;
    int best = 0;
    for (int i = 1; i < 8; i++)
        if (fabsf(a - mag[i]) < fabsf(a - mag[best]))
            best = i;
    return best | (x < 0 && best ? 8 : 0);
}

static void qb_quantize_mxfp4(const float *x, unsigned char *b)
{
    float amax = 0.0f;
    for (int j = 0; j < 32; j++)
        amax = fabsf(x[j]) > amax ? fabsf(x[j]) : amax;
    int e = amax > 0 ? (int)floorf(log2f(amax)) - 2 + 127 : 0;
    e = e < 0 ? 0 : e > 254 ? 254 : e;
    float scale = 2 * rt_e8m0_half(e);
    b[0] = (unsigned char)e;
    for (int j = 0; j < 16; j++)
        b[1 + j] = (unsigned char)(qb_e2m1(x[j], scale) | qb_e2m1(x[j + 16], scale) << 4);
}

static float qb_mxfp4(const unsigned char *b, int j)
{
    int q = j < 16 ? b[1 + j] & 15 : b[1 + j - 16] >> 4;
    return (float)qb_e2m1x2[q] * rt_e8m0_half(b[0]);
}

/* ---- over a weight -------------------------------------------------------- */
/* One block of store at b from x: a NaN or inf (the first) made the
 * scale, else the type's quantizer. */
static void qb_quantize(int store, const float *x, unsigned char *b)
{
    int n = rt_q_block(store);
    for (int j = 0; j < n; j++)
        if (!isfinite(x[j])) {
            memset(b, 0, (size_t)rt_q_block_bytes(store));
            if (store == RT_MXFP4) {            /* no value but NaN: e = 255 */
                b[0] = 255;
                return;
            }
            if (store == RT_F8_E4M3)
                memcpy(b, &x[j], 4);
            else
                rt_qk_put_half(b + (store == RT_Q6_K ? 208 : 0), x[j]);
            if (store == RT_Q4_K)
                rt_qk_put_half(b + 2, x[j]);
            return;
        }
    if (store == RT_Q8_0)
        qb_quantize_q8_0(x, b);
    else if (store == RT_Q4_0)
        qb_quantize_q4_0(x, b);
    else if (store == RT_F8_E4M3)
        qb_quantize_f8(x, b);
    else if (store == RT_MXFP4)
        qb_quantize_mxfp4(x, b);
    else
        rt_qk_quantize(store, x, b);
}

typedef struct {
    int store;
    const float *src;
    unsigned char *dst;
} qb_job;

static void qb_quantize_blocks(void *ctx, int64_t lo, int64_t hi)
{
    const qb_job *j = ctx;
    int n = rt_q_block(j->store), bytes = rt_q_block_bytes(j->store);
    for (int64_t i = lo; i < hi; i++)
        qb_quantize(j->store, j->src + i * n, j->dst + i * bytes);
}

void rt_quantize(int store, const float *src, void *dst, int64_t n)
{
    qb_job j = {store, src, dst};
    if (rt_q_block(store))
        rt_parallel_for(qb_quantize_blocks, &j, n / rt_q_block(store));
}

void rt_dequantize(int store, const void *src, float *dst, int64_t n)
{
    const unsigned char *b = src;
    int bn = rt_q_block(store), bytes = rt_q_block_bytes(store);
    for (int64_t i = 0; bn && i < n / bn; i++, b += bytes, dst += bn) {
        if (store == RT_Q8_0)
            for (int j = 0; j < 32; j++)
                dst[j] = qb_q8_0(b, j);
        else if (store == RT_Q4_0)
            for (int j = 0; j < 32; j++)
                dst[j] = qb_q4_0(b, j);
        else if (store == RT_F8_E4M3)
            for (int j = 0; j < 128; j++)
                dst[j] = qb_f8(b, j);
        else if (store == RT_MXFP4)
            for (int j = 0; j < 32; j++)
                dst[j] = qb_mxfp4(b, j);
        else
            rt_qk_dequantize(store, b, dst);
    }
}

/* Whether the half at p is finite: its exponent is not all ones. */
static int qb_finite(const unsigned char *p)
{
    return (p[1] & 0x7c) != 0x7c;
}

int64_t rt_q_check(int store, const void *src, int64_t n)
{
    const unsigned char *b = src;
    int bn = rt_q_block(store), bytes = rt_q_block_bytes(store);
    for (int64_t i = 0; bn && i < n / bn; i++, b += bytes) {
        float d;
        memcpy(&d, b, 4);
        int ok = store == RT_F8_E4M3 ? isfinite(d)
                 : store == RT_Q6_K  ? qb_finite(b + 208)
                 : store == RT_Q4_K  ? qb_finite(b) && qb_finite(b + 2)
                 : store == RT_MXFP4 ? b[0] != 255
                                     : qb_finite(b);
        if (!ok)
            return i + 1;
    }
    return 0;
}

float rt_q8_0_at(const void *w, int64_t i)
{
    return qb_q8_0((const unsigned char *)w + i / 32 * 34, (int)(i % 32));
}

float rt_q4_0_at(const void *w, int64_t i)
{
    return qb_q4_0((const unsigned char *)w + i / 32 * 18, (int)(i % 32));
}

float rt_f8_e4m3_at(const void *w, int64_t i)
{
    return qb_f8((const unsigned char *)w + i / 128 * 132, (int)(i % 128));
}

float rt_mxfp4_at(const void *w, int64_t i)
{
    return qb_mxfp4((const unsigned char *)w + i / 32 * 17, (int)(i % 32));
}

#if defined(__clang__)
#pragma float_control(pop)
#elif defined(__GNUC__)
#pragma GCC pop_options
#endif
