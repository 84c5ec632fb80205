/* runtime/quant/rt_qk.h: what the quantized part's files share (rt_quant.h
 * has its API; not for generated code): one block of q4_k or q6_k
 * (rt_quant_k.c), which rt_quant.c's entry points run over a weight; and
 * qgemm's AMX path (rt_gemm_q_amx.c), which rt_gemm_q.c's calls try. */
#ifndef KILN_RT_QK_H
#define KILN_RT_QK_H

#include "runtime/rt_quant.h"

/* A block's scale: an IEEE half at p, little-endian (blocks are not
 * aligned), as f32; f rounded to one at p (rt_f32_f16). */
static inline float rt_qk_half(const unsigned char *p)
{
    return rt_f16_f32((uint16_t)(p[0] | p[1] << 8));
}
static inline void rt_qk_put_half(unsigned char *p, float f)
{
    uint16_t h = rt_f32_f16(f);
    p[0] = (unsigned char)h;
    p[1] = (unsigned char)(h >> 8);
}

/* q4_k's sub-block s: its 6-bit scale and min from the block's 12 bytes
 * p: s < 4 in the low 6 bits of p[s] and p[s + 4]; s >= 4 in the nibbles
 * of p[s + 4] (scale low, min high) and the top 2 bits of p[s - 4] and
 * p[s]. */
static inline void rt_qk_scale_min(const unsigned char *p, int s, int *sc, int *mn)
{
    if (s < 4) {
        *sc = p[s] & 63;
        *mn = p[s + 4] & 63;
    } else {
        *sc = (p[s + 4] & 15) | (p[s - 4] >> 6) << 4;
        *mn = (p[s + 4] >> 4) | (p[s] >> 6) << 4;
    }
}

/* 256 finite values x into one block of store (RT_Q4_K, RT_Q6_K) at b, as
 * GGML's reference quantizer makes it. */
RT_API void rt_qk_quantize(int store, const float *x, unsigned char *b);
/* The 256 values of one block of store at b into y. */
RT_API void rt_qk_dequantize(int store, const unsigned char *b, float *y);

/* qgemm's call (rt_quant.h) on AMX tiles, for store RT_Q8_0, RT_Q4_0,
 * RT_Q4_K or RT_Q6_K and m >= 16 rows: C += A W^T with A rounded to bf16 and W's
 * values (rt_dequantize's) rounded to bf16, both to nearest even
 * (subnormals to zero), products added in pairs by tdpbf16ps in f32. 1
 * when done; 0 (C untouched) for another store, fewer rows, or where the
 * tiles cannot be used (rt_amx_begin), and the caller computes the call. */
RT_API int rt_gemm_q_amx(int store, int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
                         const void *w, int64_t woff, int64_t ldw, float *c, int64_t ldc);

#endif
