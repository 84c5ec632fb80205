/* runtime/core/rt_half.c: f32 to 16-bit floats, for weights held 16-bit
 * (--weight-dtype): rounded once at load, widened where read
 * (rt_bf16_f32, rt_f16_f32 in kiln_rt.h); FP8 e4m3 bytes and back, for
 * FP8 checkpoints (docs/fp8.md).
 *
 * Both round to nearest, ties to even, on the bits (the host's rounding
 * mode plays no part):
 * - bf16 is the top half of an f32: add 0x7fff plus the lowest kept bit,
 *   keep the top 16 bits; a carry into the exponent is the right result
 *   (up to inf past the largest bf16). A NaN keeps its sign and top
 *   payload bits and is made quiet, so it cannot round into inf.
 * - IEEE half: |f| >= 65520 (the tie between 65504 and 2^16) gives inf;
 *   below 2^-14 the value is a multiple of 2^-24 (subnormal), rounded
 *   from its 24-bit mantissa shifted right; normals rebias the exponent
 *   (127 to 15) and round the 13 dropped bits.
 * - e4m3 (OCP FP8's E4M3FN: bias 7, no infinities, 0x7f and 0xff NaN,
 *   largest 448): a byte's low 7 bits shifted up by 20 are an f32 whose
 *   exponent field is the byte's (a subnormal f32 when it is 0) and whose
 *   top 3 mantissa bits are the byte's: times 2^120 (exact) it is the
 *   byte's magnitude, subnormals included (m 2^-129 2^120 = m 2^-9). The
 *   way back rounds the 20 dropped bits of a normal (|f| >= 2^-6) and
 *   rebiases (127 to 7); below, the value is a multiple of 2^-9, rounded
 *   from the 24-bit mantissa shifted right. Past 464 it is NaN. The gemm
 *   kernels widen bytes the same way (rt_gemm_f8.c). */
#include "runtime/core/rt_core.h"

#include <math.h>
#include <string.h>

static uint32_t hf_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

uint16_t rt_f32_bf16(float f)
{
    uint32_t u = hf_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u)            /* NaN */
        return (uint16_t)(u >> 16 | 0x40);
    u += 0x7fffu + (u >> 16 & 1);
    return (uint16_t)(u >> 16);
}

/* A magnitude below 2^-14 as a half subnormal: m * 2^(e-150) in units of
 * 2^-24 is m >> (126 - e), rounded to nearest even (a carry into 0x400
 * is the smallest normal, as it should be). */
static uint16_t hf_subnormal(uint32_t a)
{
    int e = (int)(a >> 23), s = 126 - e;
    if (e == 0 || s > 24)                           /* below 2^-25: zero */
        return 0;
    uint32_t m = (a & 0x7fffffu) | 0x800000u;
    uint32_t q = m >> s, rem = m & ((1u << s) - 1), half = 1u << (s - 1);
    if (rem > half || (rem == half && (q & 1)))
        q++;
    return (uint16_t)q;
}

uint16_t rt_f32_f16(float f)
{
    uint32_t u = hf_bits(f), a = u & 0x7fffffffu;
    uint16_t sign = (uint16_t)(u >> 16 & 0x8000);
    if (a > 0x7f800000u)                            /* NaN: quiet */
        return sign | 0x7e00 | (uint16_t)(a >> 13 & 0x3ff);
    if (a >= 0x477ff000u)                           /* >= 65520: inf */
        return sign | 0x7c00;
    if (a < 0x38800000u)                            /* < 2^-14 */
        return sign | hf_subnormal(a);
    a += 0xfffu + (a >> 13 & 1);
    return sign | (uint16_t)((a - 0x38000000u) >> 13);
}

float rt_e4m3_f32(uint8_t b)
{
    if ((b & 0x7f) == 0x7f)
        return (b & 0x80) ? -NAN : NAN;
    uint32_t u = (uint32_t)(b & 0x7f) << 20;
    float f;
    memcpy(&f, &u, sizeof f);
    f *= 0x1p120f;
    return b & 0x80 ? -f : f;
}

uint8_t rt_f32_e4m3(float f)
{
    uint32_t u = hf_bits(f), a = u & 0x7fffffffu;
    uint8_t sign = (uint8_t)(u >> 24 & 0x80);
    if (a > 0x43e80000u)                            /* NaN, or > 464: NaN */
        return sign | 0x7f;
    if (a >= 0x3c800000u) {                         /* >= 2^-6: normal */
        a += 0x7ffffu + (a >> 20 & 1);
        return sign | (uint8_t)((a >> 20) - (120u << 3));
    }
    uint32_t e = a >> 23, man = (a & 0x7fffffu) | 0x800000u, shift = 141 - e;
    if (e == 0 || shift > 25)                       /* below 2^-11: 0 */
        return sign;
    return sign | (uint8_t)((man + (1u << (shift - 1)) - 1 + (man >> shift & 1)) >> shift);
}

void rt_round_half(uint16_t *dst, const float *src, int64_t n, int store)
{
    if (store == RT_BF16)
        for (int64_t i = 0; i < n; i++)
            dst[i] = rt_f32_bf16(src[i]);
    else
        for (int64_t i = 0; i < n; i++)
            dst[i] = rt_f32_f16(src[i]);
}

int rt_store_block(int store)
{
    return store == RT_Q8_0 || store == RT_Q4_0 || store == RT_MXFP4 ? 32
           : store == RT_F8_E4M3                                     ? 128
           : store == RT_Q4_K || store == RT_Q6_K                    ? 256
                                                                     : 0;
}

int64_t rt_store_bytes(int store, int64_t count)
{
    switch (store) {
    case RT_BF16:
    case RT_F16: return count * 2;
    case RT_Q8_0: return count / 32 * 34;
    case RT_Q4_0: return count / 32 * 18;
    case RT_Q4_K: return count / 256 * 144;
    case RT_Q6_K: return count / 256 * 210;
    case RT_F8_E4M3: return count / 128 * 132;
    case RT_MXFP4: return count / 32 * 17;
    default: return count * 4;
    }
}
