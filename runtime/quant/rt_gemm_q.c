/* runtime/quant/rt_gemm_q.c: the gemm kernels over quantized weights
 * (rt_quant.h): C[m][n] += A[m][k] W^T, W(j, kk) element woff + j * ldw +
 * kk of a weight held in GGML's blocks (q8_0, q4_0, q4_k, q6_k, mxfp4).
 *
 * 1. Activations. Each row of A is quantized once a call, per block of
 *    the weight's (32 or 256 values), into a per-thread scratch
 *    (qg_round): amax = the largest |x|, d = amax / 127 and q = rintf(x *
 *    (127 / amax)), f32 operations, rintf rounding to nearest, ties to
 *    even (the default rounding mode); |x * (127 / amax)| < 127.5, so |q|
 *    <= 127. A block whose amax is below 2^-100 is zeros (d = 0: 127 /
 *    amax would overflow near 2^-120); one holding an inf or NaN has d =
 *    NaN and q = 0, so that its sums are NaN. rt_q_act_round gives d * q.
 *    Beside a block's q: d, and the sums of its q that the weight's
 *    offsets and mins multiply (qg_sums).
 * 2. Per element of C and block of k, in k order, an exact int32 dot
 *    product of the weight's integers with the q:
 *      q8_0  i = sum q_w q          q4_0  i = sum (q_w - 8) q
 *      mxfp4 i = sum 2 v_w q, v_w the E2M1 value (2 v_w an integer), dw
 *            = 2^(e - 128): half the block's scale (rt_e8m0_half)
 *      q6_k  i = sum over its 16 sub-blocks of sc_s sum (q_w - 32) q
 *      q4_k  i = sum over its 8 sub-blocks of sc_s sum q_w q, and
 *            i2 = sum of mn_s (the sub-block's sum of q)
 *    (all below 2^29), then, from acc = the element of C:
 *      acc = fmaf((float)i, dw * d, acc)    (dw the block's scale, widened)
 *      acc = fmaf(-(float)i2, dmin * d, acc)     (q4_k)
 *    and C = acc at the end. Every path does these same integer and f32
 *    operations (fused multiply-adds, also in portable C), so the bits of
 *    C depend neither on the path nor on how rows, columns or k (at a
 *    block) are split into calls, nor on threads.
 * 3. Weights. QG_NR rows of W at a time (16 with AVX-512, 8 with AVX2, 1
 *    in C: a group, qg_pass) turn per block into panel rows (qg_pack): per
 *    4 values of k, the NR rows' 4 integers as unsigned bytes, a 32-bit
 *    lane each (one vector); then per lane the block's f32 scales, and
 *    for q4_k and q6_k each sub-block's integer scale and the mins or
 *    offset terms as int16 pairs. The 4 values of a lane are 4 consecutive
 *    bytes of a row once nibbles are split (mxfp4's nibbles then looked
 *    up in a 16-byte table, qgv_lut: 2 v + 12), so the rows come from a
 *    transpose of 16-byte pieces of the NR rows (qg_t4: in each 128-bit
 *    lane the 4 x 4 transpose of 32-bit words), masks and shifts.
 * 4. Dot products (qg_step): per 4 values a panel vector, and per row of
 *    A its 4 q broadcast, u8 x s8 products summed by 4 into the lanes
 *    (vpdpbusd with AVX-512 VNNI; vpmaddubsw + vpmaddwd with AVX2; a loop
 *    in C). The u8 operand is the weight: q4 and q6 integers are unsigned
 *    and their offsets (8, 32; mxfp4's 12) come off as the offset times
 *    sums of q;
 *    q8_0 weights are offset by 128 (their sign bit flipped) and 128 times
 *    the sum of q comes off, but for AVX2, whose 16-bit pair sums could
 *    overflow: there |w| times q with w's sign (vpsignb; |w| <= 128, |q| <=
 *    127: a pair is within 32512). Sub-block scales multiply 32-bit sums;
 *    mins and offsets are 16-bit pair dot products (vpdpwssd).
 * 5. Shapes (qg_group). Up to QG_MF rows of A (decode) take each block as
 *    it is packed, a unit of sub-blocks at a time, while its rows are in
 *    registers (qg_fused), the next group's rows prefetched meanwhile, a
 *    group's rows QG_SPREAD bytes apart (qg_stride: rows closer stream
 *    slower); more rows pack QG_KC values of the group into a panel, which
 *    each QG_MR rows of A then read (qg_tile): a weight vector serves
 *    QG_MR rows, so prefill runs near the int8 peak (8 rows rather than 4:
 *    5-9% faster for q8_0 and q4_0 at m = 64).
 *
 * The path is chosen where this file is compiled (-march): AVX-512 VNNI
 * (with AVX512BW), AVX2 with FMA, else portable C; the Makefile's unit
 * tests build all three. A call of 16 rows or more goes first to AMX tiles
 * (rt_gemm_q_amx.c: q8_0, q4_0, q4_k and q6_k, where the program can use them;
 * not this contract's numbers); fewer rows (decode) never do. */
#include "runtime/quant/rt_qk.h"
#include "runtime/rt_pairs.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#if defined(__AVX512VNNI__) && defined(__AVX512BW__)
#define QG_PATH 2
#elif defined(__AVX2__) && defined(__FMA__)
#define QG_PATH 1
#else
#define QG_PATH 0
#endif
#if QG_PATH
#include <immintrin.h>
#endif

#define QG_I static inline __attribute__((always_inline))
#define QG_KC 1024                  /* values of k a panel holds */
#define QG_MF 4                     /* rows of A decode takes block by block */
#define QG_SPREAD 12288             /* bytes apart, decode's rows of W at least */

/* ---- vectors of 32-bit lanes ------------------------------------------- */
/* Per path: QG_NR lanes (rows of W a group), QG_MR rows of A a tile (as
 * many as the registers hold: 32 with AVX-512, 16 with AVX2), and q8_0's
 * offset (qgv_dot8). qg_v: NR lanes of 32 bits; qg_f: NR floats. Byte b
 * of a lane is its bits 8b..8b+7 (u8/s8: as unsigned, signed), half h
 * bits 16h..16h+15 (s16). */
#if QG_PATH == 2
typedef __m512i qg_v;
typedef __m512 qg_f;
enum { QG_NR = 16, QG_MR = 8, QG_Q8_OFF = 128 };
QG_I qg_v qgv_set(int32_t x) { return _mm512_set1_epi32(x); }
QG_I qg_v qgv_and(qg_v a, qg_v b) { return _mm512_and_si512(a, b); }
QG_I qg_v qgv_or(qg_v a, qg_v b) { return _mm512_or_si512(a, b); }
QG_I qg_v qgv_xor(qg_v a, qg_v b) { return _mm512_xor_si512(a, b); }
QG_I qg_v qgv_add(qg_v a, qg_v b) { return _mm512_add_epi32(a, b); }
QG_I qg_v qgv_mul(qg_v a, qg_v b) { return _mm512_mullo_epi32(a, b); }
QG_I qg_v qgv_shr(qg_v a, int n) { return _mm512_srli_epi32(a, n); }
QG_I qg_v qgv_shl(qg_v a, int n) { return _mm512_slli_epi32(a, n); }
QG_I qg_v qgv_sar(qg_v a, int n) { return _mm512_srai_epi32(a, n); }
QG_I qg_v qgv_shl16(qg_v a, int n) { return _mm512_slli_epi16(a, n); }
QG_I qg_v qgv_sar16(qg_v a, int n) { return _mm512_srai_epi16(a, n); }
/* acc + the sum of u8(u, b) * s8(s, b) over the 4 bytes */
QG_I qg_v qgv_dot(qg_v acc, qg_v u, qg_v s) { return _mm512_dpbusd_epi32(acc, u, s); }
/* acc + the sum of s16(x, h) * s16(y, h) over the 2 halves */
QG_I qg_v qgv_wdot(qg_v acc, qg_v x, qg_v y) { return _mm512_dpwssd_epi32(acc, x, y); }
/* Each byte (0..15) of n replaced by byte n of the 16 at tab */
QG_I qg_v qgv_lut(qg_v n, const uint8_t *tab)
{
    return _mm512_shuffle_epi8(_mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)tab)), n);
}
QG_I qg_f qgf_int(qg_v a) { return _mm512_cvtepi32_ps(a); }
QG_I qg_f qgf_bits(qg_v a) { return _mm512_castsi512_ps(a); }
QG_I qg_f qgf_set(float x) { return _mm512_set1_ps(x); }
QG_I qg_f qgf_mul(qg_f a, qg_f b) { return _mm512_mul_ps(a, b); }
QG_I qg_f qgf_fma(qg_f a, qg_f b, qg_f c) { return _mm512_fmadd_ps(a, b, c); }
QG_I qg_f qgf_fnma(qg_f a, qg_f b, qg_f c) { return _mm512_fnmadd_ps(a, b, c); }
/* lanes lo <= L < hi of p */
QG_I __mmask16 qg_lanes(int lo, int hi) { return (__mmask16)((1u << hi) - (1u << lo)); }
QG_I qg_f qgf_loadn(const float *p, int lo, int hi)
{
    return _mm512_maskz_loadu_ps(qg_lanes(lo, hi), p);
}
QG_I void qgf_storen(float *p, qg_f v, int lo, int hi)
{
    _mm512_mask_storeu_ps(p, qg_lanes(lo, hi), v);
}
/* The NR rows of W a panel takes: lane L's at base + L * rb (rb = 0: one
 * row in every lane); (AVX-512) L * rb, for gathers. */
typedef struct {
    const uint8_t *base;
    size_t rb;
    const uint8_t *p4[4];       /* rows 0..3; rows 4 i + p at p4[p] + i * 4 rb */
    size_t r4, r8, r12;
    __m512i off[2];
} qg_wrows;
QG_I void qg_wrows_set(qg_wrows *w)
{
    for (int p = 0; p < 4; p++)
        w->p4[p] = w->base + (size_t)p * w->rb;
    w->r4 = 4 * w->rb;
    w->r8 = 8 * w->rb;
    w->r12 = 12 * w->rb;
    __m512i rb = _mm512_set1_epi64((int64_t)w->rb);
    w->off[0] = _mm512_mullox_epi64(_mm512_setr_epi64(0, 1, 2, 3, 4, 5, 6, 7), rb);
    w->off[1] = _mm512_mullox_epi64(_mm512_setr_epi64(8, 9, 10, 11, 12, 13, 14, 15), rb);
}
/* Half hi of each lane, widened: as floats' bits. */
QG_I qg_v qgv_halves(qg_v v, int hi)
{
    __m256i h = _mm512_cvtepi32_epi16(_mm512_srli_epi32(v, 16 * hi));
    return _mm512_castps_si512(_mm512_cvtph_ps(h));
}
/* Lane L of *p: the half at row L + off + 2 hi, widened: a 32-bit gather
 * at row L + off, whose bytes must lie in the block. */
QG_I void qg_scale(const qg_wrows *w, size_t off, int hi, qg_v *p)
{
    __m256i lo8 = _mm512_i64gather_epi32(w->off[0], w->base + off, 1);
    __m256i hi8 = _mm512_i64gather_epi32(w->off[1], w->base + off, 1);
    __m512i v = _mm512_inserti64x4(_mm512_castsi256_si512(lo8), hi8, 1);
    *p = qgv_halves(v, hi);
}
QG_I __m128i qg_x16(const uint8_t *p) { return _mm_loadu_si128((const __m128i *)p); }
/* o[t] lane 4 i + p: word t of the 16 bytes at row 4 i + p + off. */
QG_I void qg_t4(const qg_wrows *w, size_t off, qg_v *o)
{
    qg_v v[4];
    for (int p = 0; p < 4; p++) {
        const uint8_t *r = w->p4[p] + off;
        v[p] = _mm512_castsi128_si512(qg_x16(r));
        v[p] = _mm512_mask_broadcast_i32x4(v[p], 0xf0, qg_x16(r + w->r4));
        v[p] = _mm512_mask_broadcast_i32x4(v[p], 0xf00, qg_x16(r + w->r8));
        v[p] = _mm512_mask_broadcast_i32x4(v[p], 0xf000, qg_x16(r + w->r12));
    }
    qg_v lo01 = _mm512_unpacklo_epi32(v[0], v[1]), hi01 = _mm512_unpackhi_epi32(v[0], v[1]);
    qg_v lo23 = _mm512_unpacklo_epi32(v[2], v[3]), hi23 = _mm512_unpackhi_epi32(v[2], v[3]);
    o[0] = _mm512_unpacklo_epi64(lo01, lo23);
    o[1] = _mm512_unpackhi_epi64(lo01, lo23);
    o[2] = _mm512_unpacklo_epi64(hi01, hi23);
    o[3] = _mm512_unpackhi_epi64(hi01, hi23);
}
#elif QG_PATH == 1
typedef __m256i qg_v;
typedef __m256 qg_f;
enum { QG_NR = 8, QG_MR = 4, QG_Q8_OFF = 0 };
QG_I qg_v qgv_set(int32_t x) { return _mm256_set1_epi32(x); }
QG_I qg_v qgv_and(qg_v a, qg_v b) { return _mm256_and_si256(a, b); }
QG_I qg_v qgv_or(qg_v a, qg_v b) { return _mm256_or_si256(a, b); }
QG_I qg_v qgv_xor(qg_v a, qg_v b) { return _mm256_xor_si256(a, b); }
QG_I qg_v qgv_add(qg_v a, qg_v b) { return _mm256_add_epi32(a, b); }
QG_I qg_v qgv_mul(qg_v a, qg_v b) { return _mm256_mullo_epi32(a, b); }
QG_I qg_v qgv_shr(qg_v a, int n) { return _mm256_srli_epi32(a, n); }
QG_I qg_v qgv_shl(qg_v a, int n) { return _mm256_slli_epi32(a, n); }
QG_I qg_v qgv_sar(qg_v a, int n) { return _mm256_srai_epi32(a, n); }
QG_I qg_v qgv_shl16(qg_v a, int n) { return _mm256_slli_epi16(a, n); }
QG_I qg_v qgv_sar16(qg_v a, int n) { return _mm256_srai_epi16(a, n); }
/* vpmaddubsw sums pairs into int16 with saturation: exact while each
 * u8 * s8 pair is within 32767 (here u <= 128, |s| <= 127). */
QG_I qg_v qgv_dot(qg_v acc, qg_v u, qg_v s)
{
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s),
                                                   _mm256_set1_epi16(1)));
}
QG_I qg_v qgv_wdot(qg_v acc, qg_v x, qg_v y)
{
    return _mm256_add_epi32(acc, _mm256_madd_epi16(x, y));
}
QG_I qg_v qgv_lut(qg_v n, const uint8_t *tab)
{
    return _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)tab)),
                               n);
}
QG_I qg_f qgf_int(qg_v a) { return _mm256_cvtepi32_ps(a); }
QG_I qg_f qgf_bits(qg_v a) { return _mm256_castsi256_ps(a); }
QG_I qg_f qgf_set(float x) { return _mm256_set1_ps(x); }
QG_I qg_f qgf_mul(qg_f a, qg_f b) { return _mm256_mul_ps(a, b); }
QG_I qg_f qgf_fma(qg_f a, qg_f b, qg_f c) { return _mm256_fmadd_ps(a, b, c); }
QG_I qg_f qgf_fnma(qg_f a, qg_f b, qg_f c) { return _mm256_fnmadd_ps(a, b, c); }
QG_I qg_v qg_lanes(int lo, int hi)
{
    qg_v l = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_and_si256(_mm256_cmpgt_epi32(_mm256_set1_epi32(hi), l),
                            _mm256_cmpgt_epi32(l, _mm256_set1_epi32(lo - 1)));
}
QG_I qg_f qgf_loadn(const float *p, int lo, int hi)
{
    return _mm256_maskload_ps(p, qg_lanes(lo, hi));
}
QG_I void qgf_storen(float *p, qg_f v, int lo, int hi)
{
    _mm256_maskstore_ps(p, qg_lanes(lo, hi), v);
}
#ifdef __F16C__
QG_I float qg_half(const uint8_t *p) { uint16_t h; memcpy(&h, p, 2); return _cvtsh_ss(h); }
#else
QG_I float qg_half(const uint8_t *p) { uint16_t h; memcpy(&h, p, 2); return rt_f16_f32(h); }
#endif
typedef struct {
    const uint8_t *base;
    size_t rb;
} qg_wrows;
QG_I void qg_wrows_set(qg_wrows *w) { (void)w; }
QG_I void qg_t4(const qg_wrows *w, size_t off, qg_v *o)
{
    qg_v v[4];
    for (int p = 0; p < 4; p++) {
        const uint8_t *r = w->base + off + (size_t)p * w->rb;
        v[p] = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)r)),
                                       _mm_loadu_si128((const __m128i *)(r + 4 * w->rb)), 1);
    }
    qg_v lo01 = _mm256_unpacklo_epi32(v[0], v[1]), hi01 = _mm256_unpackhi_epi32(v[0], v[1]);
    qg_v lo23 = _mm256_unpacklo_epi32(v[2], v[3]), hi23 = _mm256_unpackhi_epi32(v[2], v[3]);
    o[0] = _mm256_unpacklo_epi64(lo01, lo23);
    o[1] = _mm256_unpackhi_epi64(lo01, lo23);
    o[2] = _mm256_unpacklo_epi64(hi01, hi23);
    o[3] = _mm256_unpackhi_epi64(hi01, hi23);
}
#else
typedef uint32_t qg_v;
typedef float qg_f;
enum { QG_NR = 1, QG_MR = 4, QG_Q8_OFF = 128 };
QG_I qg_v qgv_set(int32_t x) { return (uint32_t)x; }
QG_I qg_v qgv_and(qg_v a, qg_v b) { return a & b; }
QG_I qg_v qgv_or(qg_v a, qg_v b) { return a | b; }
QG_I qg_v qgv_xor(qg_v a, qg_v b) { return a ^ b; }
QG_I qg_v qgv_add(qg_v a, qg_v b) { return a + b; }
QG_I qg_v qgv_mul(qg_v a, qg_v b) { return a * b; }
QG_I qg_v qgv_shr(qg_v a, int n) { return a >> n; }
QG_I qg_v qgv_shl(qg_v a, int n) { return a << n; }
QG_I qg_v qgv_sar(qg_v a, int n) { return (uint32_t)((int32_t)a >> n); }
QG_I qg_v qgv_shl16(qg_v a, int n)
{
    return (uint32_t)(uint16_t)(a << n) | (uint32_t)(uint16_t)((a >> 16) << n) << 16;
}
QG_I qg_v qgv_sar16(qg_v a, int n)
{
    return (uint32_t)(uint16_t)((int16_t)a >> n) |
           (uint32_t)(uint16_t)((int16_t)(a >> 16) >> n) << 16;
}
QG_I qg_v qgv_dot(qg_v acc, qg_v u, qg_v s)
{
    int32_t r = (int32_t)acc;
    for (int b = 0; b < 32; b += 8)
        r += (int32_t)(u >> b & 0xff) * (int8_t)(s >> b);
    return (uint32_t)r;
}
QG_I qg_v qgv_wdot(qg_v acc, qg_v x, qg_v y)
{
    return (uint32_t)((int32_t)acc + (int16_t)x * (int16_t)y +
                      (int16_t)(x >> 16) * (int16_t)(y >> 16));
}
QG_I qg_v qgv_lut(qg_v n, const uint8_t *tab)
{
    qg_v r = 0;
    for (int b = 0; b < 32; b += 8)
        r |= (uint32_t)tab[n >> b & 15] << b;
    return r;
}
QG_I qg_f qgf_int(qg_v a) { return (float)(int32_t)a; }
QG_I qg_f qgf_bits(qg_v a) { float f; memcpy(&f, &a, 4); return f; }
QG_I qg_f qgf_set(float x) { return x; }
QG_I qg_f qgf_mul(qg_f a, qg_f b) { return a * b; }
QG_I qg_f qgf_fma(qg_f a, qg_f b, qg_f c) { return fmaf(a, b, c); }
QG_I qg_f qgf_fnma(qg_f a, qg_f b, qg_f c) { return fmaf(-a, b, c); }
QG_I qg_f qgf_loadn(const float *p, int lo, int hi) { (void)lo, (void)hi; return *p; }
QG_I void qgf_storen(float *p, qg_f v, int lo, int hi) { (void)lo, (void)hi; *p = v; }
QG_I float qg_half(const uint8_t *p) { uint16_t h; memcpy(&h, p, 2); return rt_f16_f32(h); }
typedef struct {
    const uint8_t *base;
    size_t rb;
} qg_wrows;
QG_I void qg_wrows_set(qg_wrows *w) { (void)w; }
QG_I void qg_t4(const qg_wrows *w, size_t off, qg_v *o)
{
    memcpy(o, w->base + off, 16);        /* little-endian words, as GGML's */
}
#endif

/* All lanes: the 4 bytes at p (a little-endian word). */
QG_I qg_v qgv_at(const void *p)
{
    int32_t x;
    memcpy(&x, p, 4);
    return qgv_set(x);
}

/* q8_0 on AVX2: acc + the sum of s8(w, b) * s8(s, b), as |w| * (s with
 * w's sign); elsewhere w is offset by 128 and qgv_dot is unsigned. */
QG_I qg_v qgv_dot8(qg_v acc, qg_v w, qg_v s)
{
#if QG_PATH == 1
    return qgv_dot(acc, _mm256_abs_epi8(w), _mm256_sign_epi8(s, w));
#else
    return qgv_dot(acc, w, s);
#endif
}

/* ---- the types ---------------------------------------------------------- */
/* Values and bytes of a block; scaled sub-blocks (1: the block, unscaled);
 * int32 words of activation sums (qg_sums) and rows of mins or offset
 * terms; f32 scale rows; a panel block's rows (vectors). */
QG_I int qg_block(int t) { return t == RT_Q4_K || t == RT_Q6_K ? 256 : 32; }
QG_I int qg_bytes(int t)
{
    return t == RT_Q8_0 ? 34 : t == RT_Q4_0 ? 18 : t == RT_MXFP4 ? 17 : t == RT_Q4_K ? 144 : 210;
}
QG_I int qg_subs(int t) { return t == RT_Q4_K ? 8 : t == RT_Q6_K ? 16 : 1; }
QG_I int qg_words(int t) { return t == RT_Q4_K ? 4 : t == RT_Q6_K ? 8 : 1; }
QG_I int qg_scales(int t) { return t == RT_Q4_K ? 2 : 1; }
QG_I int qg_rows(int t)
{
    return qg_block(t) / 4 + qg_scales(t) + (qg_subs(t) > 1 ? qg_subs(t) + qg_words(t) : 0);
}
enum { QG_PANEL = QG_KC / 256 * (64 + 1 + 16 + 8) };     /* the most rows: q6_k's */

/* ---- activations -------------------------------------------------------- */

/* The n values at x quantized into q (the file's top comment); returns d. */
static float qg_round(const float *x, int n, int8_t *q)
{
    uint32_t top = 0;                   /* |x|'s bits: monotonic, NaN above inf */
    for (int i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &x[i], 4);
        u &= 0x7fffffffu;
        top = u > top ? u : top;
    }
    float amax;
    memcpy(&amax, &top, 4);
    if (top >= 0x7f800000u || amax < 0x1p-100f) {
        memset(q, 0, (size_t)n);
        return top >= 0x7f800000u ? NAN : 0.0f;
    }
    float id = 127.0f / amax;
    for (int i = 0; i < n; i++)
        q[i] = (int8_t)rintf(x[i] * id);
    return amax / 127.0f;
}

QG_I uint32_t qg_pair(int lo, int hi) { return (uint16_t)lo | (uint32_t)(uint16_t)hi << 16; }

/* A block's words of sums of its q, which the weight's offsets and mins
 * multiply: q8_0, q4_0: -offset * sum; q4_k: the 8 sub-blocks' sums, q6_k:
 * the 16's negated, as int16 pairs (s[4u], s[4u + 2]), (s[4u + 1], s[4u
 * + 3]), the pairing of the scale bytes in qg_pack. */
QG_I void qg_sums(int t, const int8_t *q, int32_t *word)
{
    int nsub = t == RT_Q4_K ? 8 : t == RT_Q6_K ? 16 : 1, len = qg_block(t) / nsub;
    int s[16];
    for (int i = 0; i < nsub; i++) {
        s[i] = 0;
        for (int l = 0; l < len; l++)
            s[i] += q[i * len + l];
        s[i] = t == RT_Q6_K ? -s[i] : s[i];
    }
    if (nsub == 1) {
        word[0] = -(t == RT_Q8_0 ? QG_Q8_OFF : t == RT_MXFP4 ? 12 : 8) * s[0];
        return;
    }
    for (int u = 0; u < nsub / 4; u++) {
        word[2 * u] = (int32_t)qg_pair(s[4 * u], s[4 * u + 2]);
        word[2 * u + 1] = (int32_t)qg_pair(s[4 * u + 1], s[4 * u + 3]);
    }
}

/* A row of the scratch for kv values: the q, then per block d and words. */
QG_I size_t qg_row_bytes(int t, int64_t kv)
{
    int64_t nb = kv / qg_block(t);
    return ((size_t)kv + (size_t)nb * 4 * (size_t)(1 + qg_words(t)) + 63) & ~(size_t)63;
}

static void qg_quant(int t, int64_t rows, int64_t kv, const float *a, int64_t lda,
                     uint8_t *s, size_t row)
{
    int B = qg_block(t), nw = qg_words(t);
    int64_t nb = kv / B;
    for (int64_t r = 0; r < rows; r++) {
        int8_t *q = (int8_t *)(s + (size_t)r * row);
        float *d = (float *)(s + (size_t)r * row + (size_t)kv);
        int32_t *word = (int32_t *)(d + nb);
        for (int64_t b = 0; b < nb; b++) {
            d[b] = qg_round(a + r * lda + b * B, B, q + b * B);
            qg_sums(t, q + b * B, word + b * nw);
        }
    }
}

/* ---- weights into panels ------------------------------------------------ */

#if QG_PATH < 2
QG_I qg_v qgv_halves(qg_v v, int hi)
{
    uint32_t u[QG_NR];
    memcpy(u, &v, sizeof v);
    for (int l = 0; l < QG_NR; l++) {
        uint8_t h[2] = {(uint8_t)(u[l] >> 16 * hi), (uint8_t)(u[l] >> (16 * hi + 8))};
        float f = qg_half(h);
        memcpy(&u[l], &f, 4);
    }
    memcpy(&v, u, sizeof v);
    return v;
}

/* Lane L of *p: the half at row L + off + 2 hi, widened. */
QG_I void qg_scale(const qg_wrows *w, size_t off, int hi, qg_v *p)
{
    for (int l = 0; l < QG_NR; l++) {
        float f = qg_half(w->base + off + (size_t)l * w->rb + 2 * (size_t)hi);
        memcpy((char *)p + 4 * l, &f, 4);
    }
}
#endif

/* mxfp4's E2M1 nibbles as unsigned bytes: 2 v + 12 (0 .. 24). */
static const uint8_t qg_e2m1[16] = {12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0};

/* A block's integer rows are made (and used, qg_step) in units that
 * hold whole sub-blocks: q8_0 2 of 4 rows (16 bytes each), q4_0 and mxfp4 1 of 8,
 * q4_k 4 of 2 sub-blocks (64 bytes of nibbles), q6_k 4 of 4 sub-blocks
 * (a quarter of ql's and of qh's bytes). */
QG_I int qg_units(int t) { return t == RT_Q8_0 ? 2 : t == RT_Q4_0 || t == RT_MXFP4 ? 1 : 4; }
QG_I int qg_unit_subs(int t) { return t == RT_Q4_K ? 2 : t == RT_Q6_K ? 4 : 1; }
/* Sub-block x of unit u (q4_k, q6_k); for q8_0 and q4_0 its rows. */
QG_I int qg_unit_sub(int t, int u, int x)
{
    return t == RT_Q4_K ? 2 * u + x : 8 * (u / 2) + u % 2 + 2 * x;
}

/* Unit u of the block at byte bo of the rows of w into its panel rows of
 * P (of B / 4, row g holding values 4 g .. 4 g + 3 as u8). */
QG_I void qg_pack_unit(int t, const qg_wrows *w, size_t bo, int u, qg_v *P)
{
    const qg_v lo = qgv_set(0x0f0f0f0f);
    qg_v o[4], x[4], h[4];
    if (t == RT_Q8_0) {
        qg_t4(w, bo + 2 + 16 * (size_t)u, o);
        for (int i = 0; i < 4; i++)
            P[4 * u + i] = qgv_xor(o[i], qgv_set(QG_Q8_OFF ? (int32_t)0x80808080u : 0));
    } else if (t == RT_Q4_0) {
        qg_t4(w, bo + 2, o);
        for (int i = 0; i < 4; i++) {
            P[i] = qgv_and(o[i], lo);                   /* values 4i..4i+3 */
            P[4 + i] = qgv_and(qgv_shr(o[i], 4), lo);    /* 16 + 4i.. */
        }
    } else if (t == RT_MXFP4) {                         /* q4_0's order, looked up */
        qg_t4(w, bo + 1, o);
        for (int i = 0; i < 4; i++) {
            P[i] = qgv_lut(qgv_and(o[i], lo), qg_e2m1);
            P[4 + i] = qgv_lut(qgv_and(qgv_shr(o[i], 4), lo), qg_e2m1);
        }
    } else if (t == RT_Q4_K) {
        /* bytes 32 u + l: low nibbles values 64 u + l, high 64 u + 32 + l */
        for (int c = 0; c < 2; c++) {
            qg_t4(w, bo + 16 + 32 * (size_t)u + 16 * (size_t)c, o);
            for (int i = 0; i < 4; i++) {
                int g = 16 * u + 4 * c + i;
                P[g] = qgv_and(o[i], lo);
                P[g + 8] = qgv_and(qgv_shr(o[i], 4), lo);
            }
        }
    } else {
        /* per 128 values hh: ql bytes 64 hh + l (l < 64), qh bytes 32 hh + l
         * (l < 32); value 128 hh + l (l < 32) is ql[l] low | qh[l] bits 0-1,
         * + 32: ql[l + 32] low | bits 2-3, + 64: ql[l] high | bits 4-5, + 96:
         * ql[l + 32] high | bits 6-7 (as 4 high bits of the 6); unit u takes
         * l in 16 (u % 2) .. + 15 of hh = u / 2 */
        int hh = u / 2, c = u % 2;
        size_t at = bo + 64 * (size_t)hh + 16 * (size_t)c;
        qg_t4(w, at, o);
        qg_t4(w, at + 32, x);
        qg_t4(w, bo + 128 + 32 * (size_t)hh + 16 * (size_t)c, h);
        for (int i = 0; i < 4; i++) {
            int g = 32 * hh + 4 * c + i;
            P[g] = qgv_or(qgv_and(o[i], lo), qgv_shl(qgv_and(h[i], qgv_set(0x03030303)), 4));
            P[g + 8] = qgv_or(qgv_and(x[i], lo), qgv_shl(qgv_and(h[i], qgv_set(0x0c0c0c0c)), 2));
            P[g + 16] = qgv_or(qgv_and(qgv_shr(o[i], 4), lo), qgv_and(h[i], qgv_set(0x30303030)));
            P[g + 24] = qgv_or(qgv_and(qgv_shr(x[i], 4), lo),
                              qgv_and(qgv_shr(h[i], 2), qgv_set(0x30303030)));
        }
    }
}

/* The block's other panel rows, after its B / 4: the f32 scales, then for
 * q4_k and q6_k a row per sub-block of scales (int32) and qg_words(t)
 * rows of int16 pairs that multiply the activation words: q4_k's mins
 * (mn[4v], mn[4v + 2]), (mn[4v + 1], mn[4v + 3]), q6_k's 32 * sc likewise. */
QG_I void qg_pack_scales(int t, const qg_wrows *w, size_t bo, qg_v *P)
{
    const qg_v lo = qgv_set(0x0f0f0f0f);
    qg_v o[4];
    if (t == RT_Q8_0 || t == RT_Q4_0) {
        qg_scale(w, bo, 0, P + 8);
    } else if (t == RT_MXFP4) {                         /* lane L: 2^(e - 128) of its row */
        float f[QG_NR];
        for (int l = 0; l < QG_NR; l++)
            f[l] = rt_e8m0_half(w->base[bo + (size_t)l * w->rb]);
        memcpy(P + 8, f, sizeof f);
    } else if (t == RT_Q4_K) {
        /* d and dmin, then 12 bytes q: sc[j] = q[j] & 63, mn[j] = q[j + 4] &
         * 63 (j < 4); sc[j] = q[j + 4] & 15 | (q[j - 4] >> 6) << 4, mn[j] =
         * q[j + 4] >> 4 | (q[j] >> 6) << 4 (j >= 4): a byte a value, 4 a word */
        qg_t4(w, bo, o);
        P[64] = qgv_halves(o[0], 0);
        P[65] = qgv_halves(o[0], 1);
        qg_v six = qgv_set(0x3f3f3f3f), top = qgv_set(0x30303030);
        qg_v sc[2] = {qgv_and(o[1], six),
                      qgv_or(qgv_and(o[3], lo), qgv_and(qgv_shr(o[1], 2), top))};
        qg_v mn[2] = {qgv_and(o[2], six),
                    qgv_or(qgv_and(qgv_shr(o[3], 4), lo), qgv_and(qgv_shr(o[2], 2), top))};
        for (int s = 0; s < 8; s++)
            P[66 + s] = qgv_and(qgv_shr(sc[s / 4], 8 * (s % 4)), qgv_set(0xff));
        for (int v = 0; v < 2; v++) {
            P[74 + 2 * v] = qgv_and(mn[v], qgv_set(0x00ff00ff));
            P[75 + 2 * v] = qgv_and(qgv_shr(mn[v], 8), qgv_set(0x00ff00ff));
        }
    } else {
        qg_scale(w, bo + 206, 1, P + 64);
        /* 16 int8 scales, 4 a word: sign-extended, and 32 * them as int16
         * pairs of bytes 0, 2 and 1, 3 */
        qg_t4(w, bo + 192, o);
        for (int s = 0; s < 16; s++)
            P[65 + s] = qgv_sar(qgv_shl(o[s / 4], 24 - 8 * (s % 4)), 24);
        for (int v = 0; v < 4; v++) {
            P[81 + 2 * v] = qgv_sar16(qgv_shl16(o[v], 8), 3);
            P[82 + 2 * v] = qgv_sar16(qgv_and(o[v], qgv_set((int32_t)0xff00ff00u)), 3);
        }
    }
}

/* The whole block as its qg_rows(t) panel rows. */
QG_I void qg_pack(int t, const qg_wrows *w, size_t bo, qg_v *P)
{
    qg_pack_scales(t, w, bo, P);
    for (int u = 0; u < qg_units(t); u++)
        qg_pack_unit(t, w, bo, u, P);
}

/* ---- the tile ----------------------------------------------------------- */

/* The activations of R rows of A in the scratch, from a block on: q, d
 * and words. */
typedef struct {
    const int8_t *q[QG_MR];
    const float *d[QG_MR];
    const int32_t *word[QG_MR];
} qg_arows;

QG_I void qg_arows_at(int t, int R, const uint8_t *s, size_t row, int64_t kv, int64_t b0,
                      qg_arows *A)
{
    int B = qg_block(t);
    for (int r = 0; r < R; r++) {
        const uint8_t *sr = s + (size_t)r * row;
        A->q[r] = (const int8_t *)sr + b0 * B;
        A->d[r] = (const float *)(sr + kv) + b0;
        A->word[r] = (const int32_t *)(sr + kv + 4 * (size_t)(kv / B)) + b0 * qg_words(t);
    }
}

/* Block b of A's R rows against the panel block P, into acc; with w, the
 * block at byte bo of its rows is packed into P unit by unit as it goes
 * (decode: each unit's rows are used while in registers, its loops
 * unrolled: q6_k's decode 21 -> 23 GB/s from L2). */
QG_I void qg_step(int t, int R, qg_v *P, const qg_arows *A, int64_t b, qg_f *acc,
                  const qg_wrows *w, size_t bo)
{
    const int B = qg_block(t), G = B / 4, S = qg_subs(t), SG = G / S, NW = qg_words(t);
    const int F = G + qg_scales(t), NU = qg_units(t);
    qg_v i1[QG_MR], i2[QG_MR];
    if (w)
        qg_pack_scales(t, w, bo, P);
    for (int r = 0; r < R; r++) {
        i1[r] = qgv_set(S == 1 ? A->word[r][b] : 0);
        i2[r] = qgv_set(0);
    }
#pragma GCC unroll 4
    for (int u = 0; u < NU; u++) {
        if (w)
            qg_pack_unit(t, w, bo, u, P);
#pragma GCC unroll 4
        for (int x = 0; x < qg_unit_subs(t); x++) {
            int sub = S == 1 ? 0 : qg_unit_sub(t, u, x);
            int g0 = S == 1 ? G / NU * u : sub * SG, ng = S == 1 ? G / NU : SG;
            qg_v dot[QG_MR];
            for (int r = 0; r < R; r++)
                dot[r] = S == 1 ? i1[r] : qgv_set(0);
#pragma GCC unroll 8
            for (int g = g0; g < g0 + ng; g++)
                for (int r = 0; r < R; r++) {
                    qg_v a = qgv_at(A->q[r] + b * B + 4 * g);
                    dot[r] = t == RT_Q8_0 ? qgv_dot8(dot[r], P[g], a) : qgv_dot(dot[r], P[g], a);
                }
            for (int r = 0; r < R; r++)
                i1[r] = S == 1 ? dot[r] : qgv_add(i1[r], qgv_mul(dot[r], P[F + sub]));
        }
    }
    for (int v = 0; S > 1 && v < NW; v++)
        for (int r = 0; r < R; r++)
            i2[r] = qgv_wdot(i2[r], P[F + S + v], qgv_set(A->word[r][b * NW + v]));
    for (int r = 0; t == RT_Q6_K && r < R; r++)
        i1[r] = qgv_add(i1[r], i2[r]);              /* the offsets' sum: negated */
    for (int r = 0; r < R; r++) {
        qg_f da = qgf_set(A->d[r][b]);
        acc[r] = qgf_fma(qgf_int(i1[r]), qgf_mul(qgf_bits(P[G]), da), acc[r]);
        if (t == RT_Q4_K)
            acc[r] = qgf_fnma(qgf_int(i2[r]), qgf_mul(qgf_bits(P[G + 1]), da), acc[r]);
    }
}

/* The rows of the next group, prefetched a group ahead of their use
 * (into L2): each line of the rows' bytes once, as block b at byte bo
 * passes it. A group's rows are short streams (a row of 4096 q4_0 values
 * is 36 lines), too short for the hardware prefetcher to run ahead of. */
QG_I void qg_prefetch(int t, const qg_wrows *next, int64_t b, size_t bo)
{
    int step = 64 / qg_bytes(t) > 1 ? 64 / qg_bytes(t) : 1;   /* blocks a line */
    if (!next || b % step)
        return;
    const uint8_t *p = next->base + bo;
    for (int l = 0; l < QG_NR; l++, p += next->rb)
        for (int o = 0; o < qg_bytes(t); o += 64)
            __builtin_prefetch(p + o, 0, 2);
}

/* Lanes lo..hi-1 of C's columns c[0], c[cs], c[2 cs], .. */
QG_I qg_f qg_cload(const float *c, int64_t cs, int lo, int hi)
{
    float f[QG_NR] = {0};         /* lanes past [lo, hi): gcc -O1 cannot tell they go unread */
    if (cs == 1)
        return qgf_loadn(c, lo, hi);
    for (int l = lo; l < hi; l++)
        f[l] = c[l * cs];
    return qgf_loadn(f, lo, hi);
}

QG_I void qg_cstore(float *c, int64_t cs, qg_f v, int lo, int hi)
{
    float f[QG_NR];
    if (cs == 1) {
        qgf_storen(c, v, lo, hi);
        return;
    }
    qgf_storen(f, v, lo, hi);
    for (int l = lo; l < hi; l++)
        c[l * cs] = f[l];
}

/* R <= QG_MF rows of A against the group's rows, each block packed and
 * used at once: decode. Lane L is C's column L * cs. */
QG_I void qg_fused(int t, int R, int64_t nb, const qg_arows *A, const qg_wrows *w,
                   const qg_wrows *next, float *c, int64_t ldc, int64_t cs, int lo, int hi)
{
    const size_t bytes = (size_t)qg_bytes(t);
    qg_v P[64 + 1 + 16 + 8];
    qg_f acc[QG_MR];
    for (int r = 0; r < R; r++)
        acc[r] = qg_cload(c + r * ldc, cs, lo, hi);
    for (int64_t b = 0; b < nb; b++) {
        qg_prefetch(t, next, b, (size_t)b * bytes);
        qg_step(t, R, P, A, b, acc, w, (size_t)b * bytes);
    }
    for (int r = 0; r < R; r++)
        qg_cstore(c + r * ldc, cs, acc[r], lo, hi);
}

/* R rows of A against kb blocks of a panel. */
QG_I void qg_tile(int t, int R, qg_v *P, int kb, const qg_arows *A, float *c, int64_t ldc,
                  int lo, int hi)
{
    qg_f acc[QG_MR];
    for (int r = 0; r < R; r++)
        acc[r] = qgf_loadn(c + r * ldc, lo, hi);
    for (int b = 0; b < kb; b++)
        qg_step(t, R, P + b * qg_rows(t), A, b, acc, NULL, 0);
    for (int r = 0; r < R; r++)
        qgf_storen(c + r * ldc, acc[r], lo, hi);
}

/* Rows of A (kv values each, quantized into s) against the rows of W in
 * w (kv values from byte 0), into C's lanes lo..hi-1: up to QG_MF rows
 * fused, more by panels of QG_KC values that serve QG_MR rows at a time
 * (a switch for each R a constant, so that the tiles live in registers). */
#define QG_TILE(R)                                                           \
    case R:                                                                  \
        qg_tile(t, R < QG_MR ? R : QG_MR, panel, kb, &A, cr, ldc, lo, hi);   \
        break;

QG_I void qg_group(int t, int64_t rows, int64_t kv, const uint8_t *s, size_t row,
                   const qg_wrows *w, const qg_wrows *next, float *c, int64_t ldc, int64_t cs,
                   int lo, int hi)
{
    const int B = qg_block(t);
    const size_t bytes = (size_t)qg_bytes(t);
    qg_arows A;
    if (rows <= QG_MF) {
        qg_arows_at(t, (int)rows, s, row, kv, 0, &A);
        switch (rows) {
        case 1: qg_fused(t, 1, kv / B, &A, w, next, c, ldc, cs, lo, hi); break;
        case 2: qg_fused(t, 2, kv / B, &A, w, next, c, ldc, cs, lo, hi); break;
        case 3: qg_fused(t, 3, kv / B, &A, w, next, c, ldc, cs, lo, hi); break;
        default: qg_fused(t, 4, kv / B, &A, w, next, c, ldc, cs, lo, hi); break;
        }
        return;
    }
    qg_v panel[QG_PANEL];
    for (int64_t k0 = 0; k0 < kv; k0 += QG_KC) {
        int kb = (int)((kv - k0 < QG_KC ? kv - k0 : QG_KC) / B);
        for (int b = 0; b < kb; b++) {
            size_t bo = (size_t)(k0 / B + b) * bytes;
            qg_prefetch(t, next, k0 / B + b, bo);
            qg_pack(t, w, bo, panel + b * qg_rows(t));
        }
        for (int64_t r = 0; r < rows; r += QG_MR) {
            int R = rows - r < QG_MR ? (int)(rows - r) : QG_MR;
            float *cr = c + r * ldc;
            qg_arows_at(t, R, s + (size_t)r * row, row, kv, k0 / B, &A);
            switch (R) {
                QG_TILE(1) QG_TILE(2) QG_TILE(3) QG_TILE(4) QG_TILE(5) QG_TILE(6) QG_TILE(7)
            default: qg_tile(t, QG_MR, panel, kb, &A, cr, ldc, lo, hi); break;
            }
        }
    }
}

/* ---- the driver --------------------------------------------------------- */

#undef QG_TILE

/* Decode streams a group's rows of W side by side: rows closer than
 * QG_SPREAD bytes, two or more in a 4 KB page, stream slower (16 q4_0
 * rows of 4096 values, 2304 bytes each, read at 10.1 GB/s with rows 1
 * apart, 12.7 2 apart, 13.8 3, 14.6 4 and 15.3 6 apart, where a plain
 * read ran 13.9). So from row `at` of n on, a run of QG_NR * s rows is s
 * groups of rows s apart (s <= S, the stride that makes QG_SPREAD), as
 * long as two groups' rows are left; else groups of consecutive rows. */
QG_I int64_t qg_stride(int64_t S, int64_t at, int64_t n)
{
    int64_t left = n - at;
    return left < 2 * QG_NR ? 1 : S < left / QG_NR ? S : left / QG_NR;
}

/* Rows of A (kv values each, quantized into s) against the n rows of W
 * from wb (rowbytes apart; kv values each), into C, a group of QG_NR
 * rows of W at a time (qg_stride); lane L of a group of rows s apart is
 * C's column L * s. Fewer than QG_NR rows left end in a group of the
 * last QG_NR rows, whose lanes already done are left alone; with fewer
 * than QG_NR rows in all, each row is a group of its own in every lane
 * (rb = 0). */
QG_I void qg_pass(int t, int64_t rows, int64_t n, int64_t kv, const uint8_t *s, size_t row,
                  const uint8_t *wb, size_t rowbytes, float *c, int64_t ldc)
{
    int64_t S = (QG_SPREAD + (int64_t)rowbytes - 1) / (int64_t)rowbytes;
    S = rows <= QG_MF ? S : 1;
    qg_wrows w, next;
    for (int64_t at = 0; at < n;) {
        int64_t st = qg_stride(S, at, n), first = at, nat = at + QG_NR * st;
        int lo = 0, hi = QG_NR;
        if (n < QG_NR) {
            st = 0;                                 /* one row in every lane */
            hi = 1;
            nat = at + 1;
        } else if (n - at < QG_NR) {
            first = n - QG_NR;
            lo = (int)(at - first);
            nat = n;
        }
        for (int64_t g = 0; g < (st > 1 ? st : 1); g++) {
            int64_t after = g + 1 < st ? first + g + 1 : nat;
            w.base = wb + (size_t)(first + g) * rowbytes;
            w.rb = (size_t)st * rowbytes;
            next.base = wb + (size_t)after * rowbytes;
            next.rb = (size_t)(g + 1 < st ? st : qg_stride(S, nat, n)) * rowbytes;
            qg_wrows_set(&w);
            qg_group(t, rows, kv, s, row, &w, after + QG_NR <= n && n >= QG_NR ? &next : NULL,
                     c + first + g, ldc, st > 1 ? st : 1, lo, hi);
        }
        at = nat;
    }
}

/* All of A at once: kept for the scope (rt_gemm_q_kept; quantized by the
 * scope's first call with this A), else quantized into the thread's
 * scratch; without either, a row and QG_KC values at a time on the stack
 * (the same sums, in the same order). */
QG_I void qg_gemm(uint64_t scope, int t, int64_t m, int64_t n, int64_t k, const float *a,
                  int64_t lda, const void *w, int64_t woff, int64_t ldw, float *c, int64_t ldc)
{
    if (m <= 0 || n <= 0 || k <= 0 || (m >= 16 && rt_gemm_q_amx(t, m, n, k, a, lda, w, woff, ldw,
                                                                 c, ldc)))
        return;
    const int B = qg_block(t);
    const size_t bytes = (size_t)qg_bytes(t), rowbytes = (size_t)(ldw / B) * bytes;
    const uint8_t *wb = (const uint8_t *)w + (size_t)(woff / B) * bytes;
    _Alignas(64) uint8_t small[QG_KC + QG_KC / 32 * 4 * 2 + 64];
    int64_t rows = m, kv = k;
    size_t row = qg_row_bytes(t, k);
    int fill = 1;
    uint8_t *s = NULL;
    if ((size_t)m <= SIZE_MAX / row) {
        rt_kept_key key = {scope, a, lda, m, k, t};
        if (!(s = rt_kept(&key, (size_t)m * row, &fill)))
            s = rt_scratch((size_t)m * row);
    }
    if (!s) {
        rows = 1;
        kv = k < QG_KC ? k : QG_KC;
        row = qg_row_bytes(t, kv);
        s = small;                /* fill is 1: only a kept buffer clears it */
    }
    for (int64_t r0 = 0; r0 < m; r0 += rows)
        for (int64_t k0 = 0; k0 < k; k0 += kv) {
            int64_t rn = m - r0 < rows ? m - r0 : rows, kn = k - k0 < kv ? k - k0 : kv;
            if (fill)
                qg_quant(t, rn, kn, a + r0 * lda + k0, lda, s, row);
            qg_pass(t, rn, n, kn, s, row, wb + (size_t)(k0 / B) * bytes, rowbytes,
                    c + r0 * ldc, ldc);
        }
}

/* Each type's gemm once, its t a constant (qg_gemm specialised); not
 * inlined into its entry points, which would hold a second copy. */
#define QG_TYPE(name, t)                                                        \
    static __attribute__((noinline)) void qg_##name(                            \
        uint64_t scope, int64_t m, int64_t n, int64_t k, const float *a, int64_t lda, \
        const void *w, int64_t woff, int64_t ldw, float *c, int64_t ldc)        \
    {                                                                           \
        qg_gemm(scope, t, m, n, k, a, lda, w, woff, ldw, c, ldc);               \
    }                                                                           \
    void rt_gemm_##name(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda, \
                        const void *w, int64_t woff, int64_t ldw, float *c, int64_t ldc) \
    {                                                                           \
        qg_##name(0, m, n, k, a, lda, w, woff, ldw, c, ldc);                    \
    }
QG_TYPE(q8_0, RT_Q8_0)
QG_TYPE(q4_0, RT_Q4_0)
QG_TYPE(q4_k, RT_Q4_K)
QG_TYPE(q6_k, RT_Q6_K)
QG_TYPE(mxfp4, RT_MXFP4)
#undef QG_TYPE

void rt_gemm_q_kept(uint64_t scope, int type, int64_t m, int64_t n, int64_t k, const float *a,
                    int64_t lda, const void *w, int64_t woff, int64_t ldw, float *c, int64_t ldc)
{
    void (*f)(uint64_t, int64_t, int64_t, int64_t, const float *, int64_t, const void *,
              int64_t, int64_t, float *, int64_t) = type == RT_Q8_0  ? qg_q8_0
                                                    : type == RT_Q4_0  ? qg_q4_0
                                                    : type == RT_Q4_K  ? qg_q4_k
                                                    : type == RT_Q6_K  ? qg_q6_k
                                                    : type == RT_MXFP4 ? qg_mxfp4
                                                                       : NULL;
    if (f)
        f(scope, m, n, k, a, lda, w, woff, ldw, c, ldc);
}

void rt_q_act_round(int block, const float *x, float *y, int64_t n)
{
    int8_t q[256];
    if (block != 32 && block != 256)
        return;
    for (int64_t i = 0; i < n; i += block) {
        float d = qg_round(x + i, block, q);
        for (int l = 0; l < block; l++)
            y[i + l] = d * q[l];
    }
}
