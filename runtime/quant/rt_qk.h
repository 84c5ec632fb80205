/* runtime/quant/rt_qk.h: what the quantized part's files share (rt_quant.h
 * has its API; not for generated code): one block of q4_k or q6_k
 * (rt_quant_k.c), which rt_quant.c's entry points run over a weight. */
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

/* 256 finite values x into one block of store (RT_Q4_K, RT_Q6_K) at b, as
 * GGML's reference quantizer makes it. */
RT_API void rt_qk_quantize(int store, const float *x, unsigned char *b);
/* The 256 values of one block of store at b into y. */
RT_API void rt_qk_dequantize(int store, const unsigned char *b, float *y);

#endif
