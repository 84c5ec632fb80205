/* runtime/quant/rt_quant_k.c: q4_k's and q6_k's blocks of 256 values
 * (rt_quant.h's layouts): quantized as GGML's reference quantizers make
 * them (ggml-quants.c: quantize_row_q4_K_ref with make_qkx2_quants,
 * quantize_row_q6_K_ref with make_qx_quants), by their f32 operations in
 * their order (rt_quant.c says why no product is fused here); widened;
 * read an element at a time. round(v) is GGML's nearest_int: the low 23
 * bits of v + 1.5 * 2^23, so halves go to even (and |v| > 2^22 gives
 * GGML's garbage, not undefined behaviour).
 *
 * q4_k, each block:
 * 1. Each sub-block s of 32 values x is fitted (qk_fit4) as
 *    x ~ sc_s L - m_s, L in [0, 15], weighting each x by
 *    sqrt(mean x^2) + |x|: from lo = min(0, min x) and iscale =
 *    15 / (max x - lo), L = round(iscale (x - lo)); then for iscale =
 *    (14 + 0.1 i) / (max x - lo), i = 0 .. 20, the L it rounds to and
 *    the weighted least-squares sc and -m of x on it (m >= 0, else sc
 *    alone), kept where their weighted squared error is the lowest yet.
 * 2. d = max sc / 63, dmin = max m / 63 (halves); s's 6-bit scale and
 *    min are round(sc_s 63 / max sc), round(m_s 63 / max m), at most 63.
 * 3. L = round((x + dmin min_s) / (d scale_s)) in [0, 15] with the
 *    halves; a sub-block whose d scale_s is 0 keeps step 1's L.
 * q6_k, each block:
 * 1. Each sub-block of 16 is fitted (qk_fit6) as x ~ s (L - 32), L in
 *    [0, 63], weighting each x by x^2: v the first x of largest |x|, for
 *    iscale = -32 / v, then -(32 + 0.1 i) / v for i = -9 .. 9 but 0,
 *    L = round(iscale x) + 32 clamped and s the least-squares scale on
 *    it, kept where s sum(w x (L - 32)) is the largest yet. A sub-block
 *    whose |x| are all below 1e-15 is s 0, L 0.
 * 2. S the first s of largest |s|: a block of zeros when |S| < 1e-15;
 *    else iscale = -128 / S, d = 1 / iscale (half), scale_s =
 *    min(127, round(iscale s)).
 * 3. L = round(x / (d scale_s)) in [-32, 31], plus 32; a sub-block whose
 *    d scale_s is 0 keeps step 1's L. */
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

static int qk_round(float v)
{
    float t = v + 12582912.0f;
    int32_t i;
    memcpy(&i, &t, sizeof i);
    return (i & 0x7fffff) - 0x400000;
}

static int qk_clamp(int l, int lo, int hi)
{
    return l < lo ? lo : l > hi ? hi : l;
}

/* ---- q4_k: d, dmin, 12 bytes of scales and mins, 128 of nibbles ------------ */
/* Step 1 for one sub-block: L, the scale (returned) and the min (*mn). */
static float qk_fit4(const float *x, const float *w, uint8_t *L, float *mn)
{
    float lo = x[0], hi = x[0], sum_w = w[0], sum_x = sum_w * x[0];
    for (int i = 1; i < 32; i++) {
        if (x[i] < lo)
            lo = x[i];
        if (x[i] > hi)
            hi = x[i];
        sum_w += w[i];
        sum_x += w[i] * x[i];
    }
    if (lo > 0)
        lo = 0;
    if (hi == lo) {
        memset(L, 0, 32);
        *mn = -lo;
        return 0.0f;
    }
    float iscale = 15 / (hi - lo), scale = 1 / iscale, best = 0;
    for (int i = 0; i < 32; i++) {
        L[i] = (uint8_t)qk_clamp(qk_round(iscale * (x[i] - lo)), 0, 15);
        float diff = scale * L[i] + lo - x[i];
        diff = diff * diff;
        best += w[i] * diff;
    }
    for (int is = 0; is <= 20; is++) {
        uint8_t Lt[32];
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        iscale = (-1.0f + 0.1f * is + 15) / (hi - lo);
        for (int i = 0; i < 32; i++) {
            int l = qk_clamp(qk_round(iscale * (x[i] - lo)), 0, 15);
            Lt[i] = (uint8_t)l;
            sum_l += w[i] * l;
            sum_l2 += w[i] * l * l;
            sum_xl += w[i] * l * x[i];
        }
        float D = sum_w * sum_l2 - sum_l * sum_l;
        if (!(D > 0))
            continue;
        float s = (sum_w * sum_xl - sum_x * sum_l) / D;
        float m = (sum_l2 * sum_x - sum_l * sum_xl) / D;
        if (m > 0) {
            m = 0;
            s = sum_xl / sum_l2;
        }
        float err = 0;
        for (int i = 0; i < 32; i++) {
            float diff = s * Lt[i] + m - x[i];
            diff = diff * diff;
            err += w[i] * diff;
        }
        if (err < best) {
            memcpy(L, Lt, 32);
            best = err;
            scale = s;
            lo = m;
        }
    }
    *mn = -lo;
    return scale;
}

static void qk_quantize_q4_k(const float *x, unsigned char *b)
{
    uint8_t L[256], ls[8], lm[8];
    float scales[8], mins[8], w[32], max_scale = 0, max_min = 0;
    for (int s = 0; s < 8; s++) {
        const float *xs = x + 32 * s;
        float sum_x2 = 0;
        for (int l = 0; l < 32; l++)
            sum_x2 += xs[l] * xs[l];
        float av_x = sqrtf(sum_x2 / 32);
        for (int l = 0; l < 32; l++)
            w[l] = av_x + fabsf(xs[l]);
        scales[s] = qk_fit4(xs, w, L + 32 * s, &mins[s]);
        if (scales[s] > max_scale)
            max_scale = scales[s];
        if (mins[s] > max_min)
            max_min = mins[s];
    }
    float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
    float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
    unsigned char *p = b + 4;
    for (int s = 0; s < 8; s++) {
        /* GGML keeps round() in a uint8_t, then takes min(63, .) */
        ls[s] = (uint8_t)qk_round(inv_scale * scales[s]);
        lm[s] = (uint8_t)qk_round(inv_min * mins[s]);
        ls[s] = ls[s] < 63 ? ls[s] : 63;
        lm[s] = lm[s] < 63 ? lm[s] : 63;
    }
    for (int s = 0; s < 4; s++) {
        p[s] = (unsigned char)(ls[s] | (ls[s + 4] >> 4) << 6);
        p[s + 4] = (unsigned char)(lm[s] | (lm[s + 4] >> 4) << 6);
        p[s + 8] = (unsigned char)((ls[s + 4] & 15) | (lm[s + 4] & 15) << 4);
    }
    rt_qk_put_half(b, max_scale / 63.f);
    rt_qk_put_half(b + 2, max_min / 63.f);
    float d = rt_qk_half(b), dmin = rt_qk_half(b + 2);
    for (int s = 0; s < 8; s++) {
        float ds = d * ls[s];
        if (!ds)
            continue;
        float dm = dmin * lm[s];
        for (int l = 0; l < 32; l++)
            L[32 * s + l] = (uint8_t)qk_clamp(qk_round((x[32 * s + l] + dm) / ds), 0, 15);
    }
    for (int i = 0; i < 4; i++)
        for (int l = 0; l < 32; l++)
            b[16 + 32 * i + l] = (unsigned char)(L[64 * i + l] | L[64 * i + 32 + l] << 4);
}

/* Value j of a q4_k block: sub-block j / 32; its nibble is in byte
 * 32 (j / 64) + j % 32 of the 128, high for the odd sub-blocks. */
static float qk_q4_k(const unsigned char *b, int j)
{
    int sc, mn;
    rt_qk_scale_min(b + 4, j / 32, &sc, &mn);
    int byte = b[16 + 32 * (j / 64) + j % 32];
    int q = j / 32 % 2 ? byte >> 4 : byte & 15;
    return rt_qk_half(b) * sc * q - rt_qk_half(b + 2) * mn;
}

float rt_q4_k_at(const void *w, int64_t i)
{
    return qk_q4_k((const unsigned char *)w + i / 256 * 144, (int)(i % 256));
}

/* ---- q6_k: 128 bytes ql, 64 qh, 16 int8 scales, d -------------------------- */
/* One try of step 1: L = round(x * iscale) + 32 into Lt; the sums of
 * w x l and w l^2 (w = x^2) into *sumlx, *suml2. */
static void qk_try6(const float *x, float iscale, int8_t *Lt, float *sumlx, float *suml2)
{
    float slx = 0, sl2 = 0;
    for (int i = 0; i < 16; i++) {
        int l = qk_clamp(qk_round(iscale * x[i]), -32, 31);
        float w = x[i] * x[i];
        Lt[i] = (int8_t)(l + 32);
        slx += w * x[i] * l;
        sl2 += w * l * l;
    }
    *sumlx = slx;
    *suml2 = sl2;
}

/* Step 1 for one sub-block of 16: L (0 .. 63), the scale returned. */
static float qk_fit6(const float *x, int8_t *L)
{
    float amax = 0, max = 0, sumlx, suml2;
    for (int i = 0; i < 16; i++)
        if (fabsf(x[i]) > amax) {
            amax = fabsf(x[i]);
            max = x[i];
        }
    if (amax < 1e-15f) {
        memset(L, 0, 16);
        return 0.f;
    }
    qk_try6(x, -32 / max, L, &sumlx, &suml2);
    float scale = suml2 ? sumlx / suml2 : 0.0f, best = scale * sumlx;
    for (int is = -9; is <= 9; is++) {
        int8_t Lt[16];
        if (is == 0)
            continue;
        qk_try6(x, -(32 + 0.1f * is) / max, Lt, &sumlx, &suml2);
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            memcpy(L, Lt, 16);
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

static void qk_quantize_q6_k(const float *x, unsigned char *b)
{
    int8_t L[256];
    float scales[16], max_scale = 0, max_abs = 0;
    for (int s = 0; s < 16; s++) {
        scales[s] = qk_fit6(x + 16 * s, L + 16 * s);
        if (fabsf(scales[s]) > max_abs) {
            max_abs = fabsf(scales[s]);
            max_scale = scales[s];
        }
    }
    memset(b, 0, 210);
    if (max_abs < 1e-15f)
        return;
    float iscale = -128.f / max_scale;
    rt_qk_put_half(b + 208, 1 / iscale);
    float d = rt_qk_half(b + 208);
    for (int s = 0; s < 16; s++) {
        int sc = qk_round(iscale * scales[s]);
        b[192 + s] = (unsigned char)(sc < 127 ? sc : 127);
        float ds = d * (int8_t)b[192 + s];
        if (!ds)
            continue;
        for (int l = 0; l < 16; l++)
            L[16 * s + l] = (int8_t)(qk_clamp(qk_round(x[16 * s + l] / ds), -32, 31) + 32);
    }
    /* per half h of 128 values, per l < 32: value 128 h + 32 g + l has its
     * low 4 bits in ql[64 h + 32 (g % 2) + l] (g >= 2: high nibble), its
     * top 2 in bits 2g, 2g + 1 of qh[32 h + l] */
    for (int h = 0; h < 2; h++)
        for (int l = 0; l < 32; l++) {
            const int8_t *q = L + 128 * h + l;
            b[64 * h + l] = (unsigned char)((q[0] & 15) | (q[64] & 15) << 4);
            b[64 * h + 32 + l] = (unsigned char)((q[32] & 15) | (q[96] & 15) << 4);
            b[128 + 32 * h + l] =
                (unsigned char)(q[0] >> 4 | (q[32] >> 4) << 2 | (q[64] >> 4) << 4 | (q[96] >> 4) << 6);
        }
}

/* Value j of a q6_k block, j = 128 h + 32 g + l (see above); sub-block
 * j / 16's scale. */
static float qk_q6_k(const unsigned char *b, int j)
{
    int h = j / 128, g = j / 32 % 4, l = j % 32;
    int lo = b[64 * h + 32 * (g % 2) + l], hi = b[128 + 32 * h + l] >> 2 * g & 3;
    int q = (g < 2 ? lo & 15 : lo >> 4) | hi << 4;
    return rt_qk_half(b + 208) * (int8_t)b[192 + j / 16] * (q - 32);
}

float rt_q6_k_at(const void *w, int64_t i)
{
    return qk_q6_k((const unsigned char *)w + i / 256 * 210, (int)(i % 256));
}

/* ---- rt_quant.c's entry points, a block at a time -------------------------- */
void rt_qk_quantize(int store, const float *x, unsigned char *b)
{
    if (store == RT_Q4_K)
        qk_quantize_q4_k(x, b);
    else
        qk_quantize_q6_k(x, b);
}

void rt_qk_dequantize(int store, const unsigned char *b, float *y)
{
    if (store == RT_Q4_K)
        for (int j = 0; j < 256; j++)
            y[j] = qk_q4_k(b, j);
    else
        for (int j = 0; j < 256; j++)
            y[j] = qk_q6_k(b, j);
}

#if defined(__clang__)
#pragma float_control(pop)
#elif defined(__GNUC__)
#pragma GCC pop_options
#endif
